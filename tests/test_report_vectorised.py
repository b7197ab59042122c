"""The vectorised report (native decoder rows grouped with numpy) against the reference
(packets.iter_records, one Python step per record): the same Report, field for field, on
real traces of every guest with and without an image and ground truth, on fuzzed and mutated
traces, and the same refusal of a wrong image."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import numpy as np
import pytest

from spe_emu.errors import ConfigError, ImageError
from spe_emu.session import RunOptions, run_image
from spe_emu.spe.packets import BadPacket, PacketIncomplete, iter_packets, iter_records
from spe_emu.tools import bulkdecode as ND
from spe_emu.tools.report import build_report, load_ground_truth

from spe_fuzz import fuzz_inputs, rows_as_records, sort_trace

ROOT = Path(__file__).resolve().parent.parent
GUESTS = ROOT / "guests"


def _both(trace: bytes, image, **kw):
    fast = build_report(trace, image, engine="vectorised", **kw)
    ref = build_report(trace, image, engine="reference", **kw)
    return fast, ref


def _assert_same(fast, ref, what=""):
    for f in dataclasses.fields(ref):
        assert getattr(fast, f.name) == getattr(ref, f.name), f"{what}: field {f.name}"
    _assert_plain(dataclasses.asdict(fast))
    json.dumps(fast.to_json())


def _assert_plain(value) -> None:
    """No numpy scalar or array anywhere (the report is plain Python data)."""
    assert not isinstance(value, (np.generic, np.ndarray)), type(value)
    if isinstance(value, dict):
        for k, v in value.items():
            _assert_plain(k)
            _assert_plain(v)
    elif isinstance(value, (list, tuple, set)):
        for v in value:
            _assert_plain(v)


RUNS = [  # (guest, RunOptions keywords)
    ("sort", dict(interval=256)),
    ("matmul", dict(interval=1024, physical=True, context=True)),
    ("pointer_chase", dict(interval=512, random=True, seed=4, physical=True)),
    ("interp", dict(interval=1024, filters=("load", "store"))),
    ("asm_loop", dict(interval=256, timestamps=False)),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for guest, kw in RUNS:
        d = tmp_path_factory.mktemp(guest)
        run_image(GUESTS / f"{guest}.elf", RunOptions(outdir=d, ground_truth=True, **kw))
        out[guest] = d
    return out


@pytest.mark.parametrize("guest", [g for g, _ in RUNS])
def test_guest_traces(runs, guest):
    d = runs[guest]
    trace = (d / "spe.trace").read_bytes()
    exact = load_ground_truth(d / "ground_truth.json")
    fast, ref = _both(trace, GUESTS / f"{guest}.elf", ground_truth=exact, check_image=True)
    assert ref.total_records > 100 and ref.ground_truth["samples"] > 0
    _assert_same(fast, ref, guest)
    fast, ref = _both(trace, None, ground_truth=exact)
    _assert_same(fast, ref, f"{guest} without image")


def test_physical_pages_and_contexts_are_exercised(runs):
    fast = build_report((runs["matmul"] / "spe.trace").read_bytes(), GUESTS / "matmul.elf",
                        engine="vectorised")
    assert fast.pages and fast.cache_lines and fast.data_addresses and fast.timeline


def test_wrong_image_is_refused_alike(runs):
    trace = (runs["sort"] / "spe.trace").read_bytes()
    messages = []
    for engine in ("vectorised", "reference"):
        with pytest.raises(ImageError) as err:
            build_report(trace, GUESTS / "matmul.elf", check_image=True, engine=engine)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "not the image of this trace" in messages[0]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    """The decoder fuzz inputs, joined into traces of 150 inputs each."""
    cases = fuzz_inputs(sort_trace(tmp_path_factory))
    rng = random.Random(3)
    rng.shuffle(cases)
    return [b"".join(cases[i:i + 150]) for i in range(0, len(cases), 150)]


def test_fuzzed_traces(fuzzed):
    assert len(fuzzed) > 30
    for i, trace in enumerate(fuzzed):
        fast, ref = _both(trace, None)
        _assert_same(fast, ref, f"fuzzed trace {i}: {trace.hex()}")
    assert sum(build_report(t, None).bad_packets for t in fuzzed) > 0


def test_empty_and_tiny_traces():
    for trace in (b"", b"\x00", b"\x01", b"\x00" * 10, b"\xb0\x00\x00\x00\x48\x00\x00\x00\x00\x01"):
        fast, ref = _both(trace, None)
        _assert_same(fast, ref, trace.hex())


def test_scan_array_matches_the_reference_records(fuzzed):
    trace = b"".join(fuzzed[:5])
    ref = [dataclasses.replace(r, packets=[]) for r in iter_records(trace)]
    ref_bad = sum(1 for _, item in iter_packets(trace)
                  if isinstance(item, (BadPacket, PacketIncomplete)))
    for rows_per_call in (1, 7, 1 << 16):
        rows, bad = ND.scan_array(trace, rows_per_call)
        assert bad == ref_bad
        assert rows_as_records(rows) == ref


def test_unknown_engine():
    with pytest.raises(ConfigError, match="engine"):
        build_report(b"", None, engine="fast")


def test_annotate_counts_agree_with_the_reference(runs, monkeypatch):
    from collections import Counter

    from spe_emu.native import NativeBuildError
    from spe_emu.tools import report as TR
    trace = (runs["sort"] / "spe.trace").read_bytes()
    lo, hi = TR._Image(GUESTS / "sort.elf").function_range("quick_sort.constprop.0")
    fast = TR._pcs_in(trace, lo, hi)
    ref = Counter(r.pc for r in iter_records(trace) if r.pc is not None and lo <= r.pc < hi)
    assert fast == ref and sum(ref.values()) > 100

    def broken(*_a, **_k):
        raise NativeBuildError("no compiler")
    monkeypatch.setattr(ND, "scan_array", broken)
    assert TR._pcs_in(trace, lo, hi) == ref
