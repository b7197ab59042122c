"""End to end: every guest under the firmware with SPE on, checked from the outside.

Each run's console, trace file and RunResult are cross-checked against each other, against the
guests' expected checksums and against the ELF images (docs/design.md, docs/model.md). Runs
are shared between tests through module-scoped fixtures; the one reference-mode run (the
per-instruction oracle, tens of seconds) is the slowest part of the file.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import pytest

from spe_emu.platform.loader import PF_X, load_elf
from spe_emu.devices.semihosting import Semihosting
from spe_emu.session import RunOptions, default_firmware, run_image
from spe_emu.spe import packets as P
from spe_emu.spe.packets import iter_records
from spe_emu.tools.decode import summarize

ROOT = Path(__file__).resolve().parents[1]
GUESTS_DIR = ROOT / "guests"
GUESTS = sorted(p.stem for p in GUESTS_DIR.glob("*.elf"))
EXPECTED = json.loads((GUESTS_DIR / "expected.json").read_text())
GUEST_REGION = (0x4800_0000, 0x5000_0000)
DEFAULT_INTERVAL = RunOptions().interval
MAX_RECORD = 64  # PMSIDR_EL1.MaxSize = 0b0110 (docs/model.md)

CHECKSUM_RE = re.compile(r"^checksum: 0x[0-9a-f]{16}$")
EXIT_RE = re.compile(r"^spe_fw: exit status=(\d+) pmbirq=(\d+) bytes=(\d+)$")


# ---------------------------------------------------------------------------- helpers -----

class Run:
    """One finished run plus everything derived from it that the tests look at."""

    def __init__(self, session, chunks=None):
        self.session = session
        self.result = session.result
        self.trace = session.trace_path.read_bytes()
        self.records = list(iter_records(self.trace))
        self.summary = summarize(self.trace)
        self.console = self.result.console.decode("utf-8", errors="replace")
        self.lines = self.console.splitlines()
        self.firmware_lines = self.result.firmware_console.decode().splitlines()
        self.chunks = chunks  # sizes of the firmware's SYS_WRITEs to spe.trace, if spied


def _run(tmp_path_factory, guest: str, spy_chunks: bool = False, **kw) -> Run:
    out = tmp_path_factory.mktemp(f"{guest}-run")
    opts = RunOptions(outdir=out, **kw)
    image = GUESTS_DIR / f"{guest}.elf"
    if not spy_chunks:
        return Run(run_image(image, opts))
    chunks: list[int] = []
    original = Semihosting._sys_write

    def spy(self, param):
        before = self.files_written.get("spe.trace", 0)
        ret = original(self, param)
        after = self.files_written.get("spe.trace", 0)
        if after != before:
            chunks.append(after - before)
        return ret

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Semihosting, "_sys_write", spy)
        session = run_image(image, opts)
    return Run(session, chunks)


def _exit_line(run: Run) -> tuple[int, int, int]:
    """(status, pmbirq, bytes) of the firmware's final line, which must be the last line."""
    exits = [line for line in run.firmware_lines if line.startswith("spe_fw: exit")]
    assert len(exits) == 1, run.firmware_lines
    assert run.firmware_lines[-1] == exits[0], "the firmware's exit line is not its last"
    assert not any("spe_fw" in line for line in run.lines)   # (its own console)
    m = EXIT_RE.match(exits[0])
    assert m, exits[0]
    return int(m[1]), int(m[2]), int(m[3])


def _exec_segments(image):
    return [s for s in image.segments if s.flags & PF_X]


def _in_exec(image, addr: int) -> bool:
    return any(s.contains(addr) for s in _exec_segments(image))


def _is_atomic(sub: int) -> bool:
    return P.ldst_is_extended(sub) and bool(sub & P.LDST_AT)


def _is_store(sub: int) -> bool:
    return bool(sub & P.LDST_ST)


def _timestamp_diffs(run: Run) -> list[int]:
    ts = [r.timestamp for r in run.records]
    return [b - a for a, b in zip(ts, ts[1:])]


# ---------------------------------------------------------------------------- fixtures ----

@pytest.fixture(scope="module")
def default_runs(tmp_path_factory) -> dict[str, Run]:
    """Every guest with default options (interval 4096, 64 KiB buffer, EL0+EL1, TS on)."""
    return {g: _run(tmp_path_factory, g) for g in GUESTS}


@pytest.fixture(scope="module")
def sort_irq(tmp_path_factory) -> Run:
    """sort with a 4 KiB buffer and interval 1024: several buffer-full events."""
    return _run(tmp_path_factory, "sort", buffer_size=4096, interval=1024)


@pytest.fixture(scope="module")
def sort_full(tmp_path_factory) -> Run:
    """sort with a 4 KiB buffer and the minimum interval; hand-over chunks recorded."""
    return _run(tmp_path_factory, "sort", spy_chunks=True, buffer_size=4096, interval=256)


@pytest.fixture(scope="module")
def sort_el0_only(tmp_path_factory) -> Run:
    """As sort_full, with PMSCR_EL1.E1SPE = 0 (exclude kernel)."""
    return _run(tmp_path_factory, "sort", buffer_size=4096, interval=256, el1=False)


@pytest.fixture(scope="module")
def all_runs(default_runs, sort_irq, sort_full) -> dict[str, Run]:
    runs = {f"{g}-default": r for g, r in default_runs.items()}
    runs["sort-irq"] = sort_irq
    runs["sort-full"] = sort_full
    return runs


@pytest.fixture(scope="module")
def firmware_image():
    return load_elf(default_firmware())


@pytest.fixture(scope="module")
def guest_images():
    return {g: load_elf(GUESTS_DIR / f"{g}.elf") for g in GUESTS}


# ---------------------------------------------------------------------------- 1. runs -----

def test_guest_set_matches_expected_json():
    assert GUESTS, "no guests/*.elf"
    assert set(GUESTS) == set(EXPECTED)


@pytest.mark.parametrize("guest", GUESTS)
def test_guest_exits_zero_with_expected_checksum(default_runs, guest):
    run = default_runs[guest]
    r = run.result
    assert r.exit_status == 0, run.console
    assert r.exit_reason == 0x20026  # ADP_Stopped_ApplicationExit
    assert r.guest_errors == []
    checksums = [line for line in run.lines if line.startswith("checksum:")]
    assert len(checksums) == 1, run.console
    assert CHECKSUM_RE.match(checksums[0]), checksums[0]
    assert checksums[0] == f"checksum: {EXPECTED[guest]}"


@pytest.mark.parametrize("guest", GUESTS)
def test_firmware_exit_line_matches_result(default_runs, guest):
    run = default_runs[guest]
    r = run.result
    status, pmbirq, nbytes = _exit_line(run)
    assert status == 0
    assert nbytes == len(run.trace) == r.bytes_written > 0
    assert pmbirq == r.irqs_taken == r.management_events
    assert run.session.summary["trace_bytes"] == len(run.trace)
    # PMBSR_EL1.S is clear after the final drain
    assert r.pmbsr & (1 << 17) == 0


def test_firmware_exit_line_with_buffer_events(sort_irq):
    r = sort_irq.result
    status, pmbirq, nbytes = _exit_line(sort_irq)
    assert status == 0 and r.exit_status == 0
    assert any(line == f"checksum: {EXPECTED['sort']}" for line in sort_irq.lines)
    assert r.management_events >= 2
    assert pmbirq == r.irqs_taken == r.management_events
    assert nbytes == len(sort_irq.trace) == r.bytes_written


# ---------------------------------------------------------------------------- 2. decode ---

def test_every_trace_decodes_completely(all_runs):
    for name, run in all_runs.items():
        s = run.summary
        r = run.result
        assert s["bytes"] == len(run.trace), name
        assert s["bad_packets"] == 0, name
        assert s["unknown_packets"] == 0, name
        assert s["truncated_bytes"] == 0, name
        assert s["records"] == len(run.records) == r.records_written > 0, name
        # records are contiguous: every byte belongs to a record (or padding)
        assert sum(rec.length for rec in run.records) + s["padding_bytes"] == len(run.trace), name
        assert r.records_written + r.filtered_out == r.samples, name


def test_every_record_is_well_formed(all_runs):
    for name, run in all_runs.items():
        expected_offset = 0
        for rec in run.records:
            where = f"{name} record at {rec.offset:#x}"
            assert rec.offset == expected_offset, where
            expected_offset = rec.offset + rec.length
            assert rec.pc is not None, where
            assert rec.pc % 4 == 0, where
            assert rec.events >> P.EV_RETIRED & 1, where
            assert rec.op_class in (P.OP_CLASS_OTHER, P.OP_CLASS_LDST, P.OP_CLASS_BRANCH), where
            assert rec.latency_total is not None and rec.latency_issue == 1, where
            assert rec.latency_total >= rec.latency_issue, where
            assert rec.packets[-1].type is P.PacketType.TIMESTAMP, where
            assert rec.timestamp is not None, where
            assert rec.length <= MAX_RECORD, where


# ---------------------------------------------------------------------------- 3. PCs -------

def test_sampled_pcs_are_in_executable_segments(all_runs, guest_images, firmware_image):
    el_counts = Counter()
    for name, run in all_runs.items():
        guest = guest_images[name.split("-")[0]]
        for rec in run.records:
            el_counts[rec.el] += 1
            assert rec.ns == 1, f"{name}: Non-secure sample expected at {rec.pc:#x}"
            if rec.el == 0:
                assert _in_exec(guest, rec.pc), f"{name}: EL0 PC {rec.pc:#x} not in guest text"
                assert not _in_exec(firmware_image, rec.pc), name
            elif rec.el == 1:
                assert _in_exec(firmware_image, rec.pc), \
                    f"{name}: EL1 PC {rec.pc:#x} not in firmware text"
            else:
                pytest.fail(f"{name}: sample at EL{rec.el} (PC {rec.pc:#x})")
    assert el_counts[0] > 0
    assert el_counts[1] > 0, "no EL1 samples at all: the EL1 check above tested nothing"


def test_el0_data_addresses_and_branch_targets_in_guest(all_runs, guest_images):
    for name, run in all_runs.items():
        guest = guest_images[name.split("-")[0]]
        loads_stores = branches = 0
        for rec in run.records:
            if rec.el != 0:
                continue
            if rec.op_class == P.OP_CLASS_LDST and not rec.events & 1:
                loads_stores += 1
                assert rec.data_va is not None, f"{name} {rec.pc:#x}"
                assert GUEST_REGION[0] <= rec.data_va < GUEST_REGION[1], \
                    f"{name}: EL0 access at {rec.pc:#x} to {rec.data_va:#x}"
            if rec.op_class == P.OP_CLASS_BRANCH and rec.branch_target is not None:
                branches += 1
                assert rec.target_el == 0, name
                assert _in_exec(guest, rec.branch_target), \
                    f"{name}: branch at {rec.pc:#x} to {rec.branch_target:#x}"
        assert loads_stores > 0 and branches > 0, name


def test_exclude_kernel_samples_only_el0(sort_el0_only, sort_full, guest_images):
    run = sort_el0_only
    assert run.result.exit_status == 0
    assert run.summary["bad_packets"] == 0
    assert run.records and len(run.records) == run.result.records_written
    assert {rec.el for rec in run.records} == {0}
    assert all(_in_exec(guest_images["sort"], rec.pc) for rec in run.records)
    # the same configuration with EL1 profiling does sample the firmware
    assert any(rec.el == 1 for rec in sort_full.records)
    # and EL1 instructions are not population members without E1SPE
    assert run.result.population < sort_full.result.population


# ---------------------------------------------------------------------------- 4. time ------

def test_timestamps_strictly_increase_and_are_instruction_counts(all_runs):
    for name, run in all_runs.items():
        ts = [rec.timestamp for rec in run.records]
        assert all(b > a for a, b in zip(ts, ts[1:])), name
        assert 0 < ts[0] and ts[-1] < run.result.instructions, name


@pytest.mark.parametrize("which,interval", [("default", DEFAULT_INTERVAL), ("sort-irq", 1024),
                                            ("sort-full", 256)])
def test_timestamp_distance_is_interval_plus_one(all_runs, default_runs, which, interval):
    runs = list(default_runs.values()) if which == "default" else [all_runs[which]]
    for run in runs:
        diffs = _timestamp_diffs(run)
        assert len(diffs) >= 100
        common, count = Counter(diffs).most_common(1)[0]
        assert common == interval + 1
        assert min(diffs) == interval + 1
        # profiling is disabled only while a buffer-full event is pending
        assert count >= 0.9 * len(diffs)
        if run.result.management_events == 0:
            assert count == len(diffs)


def test_without_timestamps_records_end_with_end(tmp_path_factory):
    run = _run(tmp_path_factory, "sort", timestamps=False)
    assert run.result.exit_status == 0
    assert run.summary["bad_packets"] == 0 and run.summary["truncated_bytes"] == 0
    assert len(run.records) == run.result.records_written > 0
    for rec in run.records:
        assert rec.timestamp is None
        assert rec.packets[-1].type is P.PacketType.END
        assert not any(p.type is P.PacketType.TIMESTAMP for p in rec.packets)


# ---------------------------------------------------------------------------- 5. buffer ----

def test_buffer_full_hand_over(sort_full):
    r = sort_full.result
    chunks = sort_full.chunks
    status, pmbirq, nbytes = _exit_line(sort_full)
    assert status == 0
    assert r.irqs_taken >= 2
    assert pmbirq == r.irqs_taken == r.management_events
    assert sum(chunks) == len(sort_full.trace) == r.bytes_written == nbytes
    # one chunk per PMBIRQ, plus the final drain
    assert len(chunks) == r.irqs_taken + 1
    for size in chunks[:-1]:
        # buffer full: fewer than 2^MaxSize bytes were left below the limit
        assert 4096 - MAX_RECORD < size <= 4096
    assert 0 < chunks[-1] <= 4096


def test_buffer_chunks_decode_on_their_own(sort_full):
    offset = 0
    total_records = 0
    for size in sort_full.chunks:
        chunk = sort_full.trace[offset:offset + size]
        s = summarize(chunk)
        assert s["bad_packets"] == 0 and s["truncated_bytes"] == 0 and s["unknown_packets"] == 0
        records = list(iter_records(chunk))
        # a chunk ends exactly at the end of its last record
        assert records and records[-1].offset + records[-1].length == size
        total_records += len(records)
        offset += size
    assert total_records == sort_full.result.records_written


# ---------------------------------------------------------------------------- 6. filters ---

# pointer_chase's chain fits the LLC: its loads that miss the L1D and walk the TLB take
# 1 + 20 + 29 = 50 cycles (docs/model.md), every other operation less
LATENCY_FLOOR = 40


@pytest.fixture(scope="module")
def filtered(tmp_path_factory) -> dict[str, Run]:
    return {
        "load": _run(tmp_path_factory, "asm_loop", interval=1024, filters=("load",)),
        "store": _run(tmp_path_factory, "asm_loop", interval=1024, filters=("store",)),
        "branch": _run(tmp_path_factory, "asm_loop", interval=1024, filters=("branch",)),
        "latency": _run(tmp_path_factory, "pointer_chase", interval=1024,
                        min_latency=LATENCY_FLOOR),
    }


@pytest.mark.parametrize("kind", ["load", "store", "branch", "latency"])
def test_filtered_run_accounts_every_sample(filtered, kind):
    run = filtered[kind]
    r = run.result
    assert r.exit_status == 0
    assert r.records_written > 0 and r.filtered_out > 0
    assert r.records_written + r.filtered_out == r.samples
    assert run.summary["bad_packets"] == 0 and run.summary["truncated_bytes"] == 0
    assert len(run.records) == r.records_written


def test_load_filter(filtered):
    records = filtered["load"].records
    for rec in records:
        assert rec.op_class == P.OP_CLASS_LDST, hex(rec.pc)
        assert not _is_store(rec.op_subclass) or _is_atomic(rec.op_subclass), hex(rec.pc)
        assert rec.data_va is not None
    assert any(not _is_store(rec.op_subclass) for rec in records)


def test_store_filter(filtered):
    records = filtered["store"].records
    for rec in records:
        assert rec.op_class == P.OP_CLASS_LDST, hex(rec.pc)
        assert _is_store(rec.op_subclass) or _is_atomic(rec.op_subclass), hex(rec.pc)
        assert rec.data_va is not None
    assert any(_is_store(rec.op_subclass) for rec in records)


def test_branch_filter(filtered):
    records = filtered["branch"].records
    for rec in records:
        assert rec.op_class == P.OP_CLASS_BRANCH, hex(rec.pc)
    assert any(rec.branch_target is not None for rec in records)


def test_min_latency_filter(filtered):
    records = filtered["latency"].records
    assert all(rec.latency_total >= LATENCY_FLOOR for rec in records)
    # pointer_chase's dependent loads that miss the L1D: those are what is left
    assert all(rec.op_class == P.OP_CLASS_LDST for rec in records)


# ---------------------------------------------------------------------------- 7. seeds -----

@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> dict[str, Run]:
    return {
        "a": _run(tmp_path_factory, "matmul", random=True, seed=1234),
        "b": _run(tmp_path_factory, "matmul", random=True, seed=1234),
        "c": _run(tmp_path_factory, "matmul", random=True, seed=99),
    }


def _summary_without_paths(run: Run) -> dict:
    return {k: v for k, v in run.session.summary.items() if k != "image"}


def test_same_seed_same_trace(seeded):
    a, b = seeded["a"], seeded["b"]
    assert a.session.outdir != b.session.outdir
    assert a.result.exit_status == 0
    assert a.trace and a.trace == b.trace
    assert _summary_without_paths(a) == _summary_without_paths(b)
    assert asdict(a.result) == asdict(b.result)


def test_different_seed_different_trace(seeded):
    a, c = seeded["a"], seeded["c"]
    assert c.result.exit_status == 0
    assert a.trace != c.trace
    assert _summary_without_paths(a) != _summary_without_paths(c)


def test_random_interval_varies_the_distance(seeded):
    diffs = _timestamp_diffs(seeded["a"])
    assert len(set(diffs)) > 10
    assert min(diffs) > 0


# ---------------------------------------------------------------------------- 8. oracle ----

@pytest.fixture(scope="module")
def sort_irq_reference(tmp_path_factory) -> Run:
    return _run(tmp_path_factory, "sort", buffer_size=4096, interval=1024, mode="reference")


def test_reference_mode_agrees_with_fast_mode(sort_irq, sort_irq_reference):
    fast, ref = sort_irq.result, sort_irq_reference.result
    assert fast.irqs_taken >= 2
    assert sort_irq_reference.trace == sort_irq.trace
    assert ref.pmbsr == fast.pmbsr
    assert ref.pmbptr == fast.pmbptr
    assert ref.pmsicr == fast.pmsicr
    assert ref.console == fast.console
    assert ref.population == fast.population
    assert ref.instructions == fast.instructions
    assert asdict(ref) == asdict(fast)
