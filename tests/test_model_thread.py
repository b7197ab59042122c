"""The model's thread (model.c, docs/model.md "The model's thread"): with it, the plain
accesses of the batched memory trace are recorded by a worker thread while the PE runs on.
Every record, count and sample must be the ones the model gives without it, byte for byte:
the same run with the thread and without leaves the same trace and the same model counts,
and the thread did take the accesses (else these tests would compare a run with itself)."""

import ctypes
from pathlib import Path

import pytest

from spe_emu import native
from spe_emu.session import RunOptions, prepare_machine

GUESTS = Path(__file__).resolve().parents[1] / "guests"


def run(tmp_path: Path, guest: str, threads: bool, **opts) -> tuple[bytes, dict, tuple]:
    old = native.use_model_threads(threads)
    try:
        options = RunOptions(outdir=tmp_path / f"{guest}-{threads}", **opts)
        m = prepare_machine(GUESTS / f"{guest}.elf", options)
        m.run()
        model = m.spu.builder.model
        worker = model.worker_stats()
        counts = model.stats()
        m.semihost.close_all()
    finally:
        native.use_model_threads(old)
    return (options.outdir / "spe.trace").read_bytes(), counts, worker


@pytest.mark.parametrize("guest,opts", [
    ("sort", dict(interval=1024)),
    # a pointer chase over more than the LLC: most lines go to the worker, not "again"
    ("pointer_chase", dict(interval=512, physical=True, context=True)),
])
def test_the_thread_changes_no_record_and_no_count(tmp_path, guest, opts):
    trace, counts, worker = run(tmp_path, guest, True, **opts)
    alone, alone_counts, no_worker = run(tmp_path, guest, False, **opts)
    assert no_worker == (0, 0)
    assert worker[0] > 100_000 and worker[1] >= 1
    assert len(trace) > 10_000
    assert trace == alone
    assert counts == alone_counts


def test_a_thread_that_ended_idle_starts_again(tmp_path):
    # With no time asleep allowed, the worker's thread ends whenever it runs out of work and
    # starts again with the next entries: many times in a run, with the same results.
    idle = ctypes.c_long.in_dll(native.library(), "spe_model_worker_idle_ns")
    old, idle.value = idle.value, 0
    try:
        trace, counts, worker = run(tmp_path, "sort", True, interval=1024)
    finally:
        idle.value = old
    alone, alone_counts, _ = run(tmp_path / "alone", "sort", False, interval=1024)
    assert worker[1] > 3
    assert trace == alone and counts == alone_counts


def test_the_setting_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPE_EMU_MODEL_THREAD", "0")
    assert native.model_threads() is False
    monkeypatch.setenv("SPE_EMU_MODEL_THREAD", "1")
    assert native.model_threads() is True
    monkeypatch.setenv("SPE_EMU_MODEL_THREAD", "yes")
    with pytest.raises(ValueError, match="SPE_EMU_MODEL_THREAD='yes': expected 0 or 1"):
        native.model_threads()
