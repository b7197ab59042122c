"""The native bulk decoder (spe_emu/native/decode.c) against the Python reference decoder.

Same fuzz inputs as tests/test_decode_perf.py (every header, subclasses, events, random
bytes, mutations of a real trace), here without perf: the dump text must be the reference's
line for line, and the records the reference's field for field.
"""

import dataclasses
import random

import pytest
from click.testing import CliRunner

from spe_emu.native import NativeBuildError
from spe_emu.tools import bulkdecode as ND
from spe_emu.spe import packets as P
from spe_emu.spe.packets import iter_records
from spe_emu.tools import report as TR
from spe_emu.tools.cli import main
from spe_emu.tools.decode import dump_lines, dump_text

from spe_fuzz import fuzz_inputs, rows_as_records, sort_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return sort_trace(tmp_path_factory)


@pytest.fixture(scope="module")
def cases(trace):
    rng = random.Random(5)
    extra = [bytes([0x20 | (s & 0xF), 0x00]) + bytes(rng.randrange(256) for _ in range(40))
             for s in range(16)]                                     # Alignment commands
    extra += [bytes(rng.randrange(3) for _ in range(60)) for _ in range(50)]   # PAD/END runs
    return fuzz_inputs(trace) + extra + [trace]


def _reference_rows(data: bytes) -> list[P.Record]:
    return [dataclasses.replace(r, packets=[]) for r in iter_records(data)]


def test_dump_text_equals_reference(cases):
    for data in cases:
        assert "".join(ND.dump_chunks(data)).splitlines() == list(dump_lines(data))[1:], \
            data.hex()


def test_records_equal_reference(cases):
    for data in cases:
        rows, bad_packets = ND.scan_array(data)
        ref = _reference_rows(data)
        assert rows_as_records(rows) == ref, data.hex()
        bad = sum(1 for _, item in P.iter_packets(data)
                  if isinstance(item, (P.BadPacket, P.PacketIncomplete)))
        assert bad_packets == bad


def test_chunk_boundaries(trace):
    big = trace * 4 + b"\x20\x0f" + bytes(70_000) + trace      # a 64 KiB Alignment inside
    text = "".join(ND.dump_chunks(big, chunk=1))                   # calls of the least room
    assert text.splitlines() == list(dump_lines(big))[1:]
    rows, _ = ND.scan_array(trace * 3, rows_per_call=7)            # a table of 7 rows
    assert rows_as_records(rows) == _reference_rows(trace * 3)


def test_cli_decode_and_report_use_it_and_fall_back(trace, tmp_path, monkeypatch):
    path = tmp_path / "t.trace"
    path.write_bytes(trace)
    res = CliRunner().invoke(main, ["decode", str(path)])
    assert res.exit_code == 0
    assert res.output.splitlines() == list(dump_lines(trace))
    fast = TR.build_report(trace, None)

    def broken(*_a, **_k):
        raise NativeBuildError("no compiler")
    monkeypatch.setattr(ND, "dump_chunks", broken)
    monkeypatch.setattr(ND, "scan_array", broken)
    assert "".join(dump_text(trace)).splitlines() == list(dump_lines(trace))
    assert TR.build_report(trace, None) == fast
    assert fast.total_records == len(list(iter_records(trace))) > 200
