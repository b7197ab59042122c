"""The model's thread (model.c, docs/model.md "The model's thread"): with it, the plain
accesses of the batched memory trace are recorded by a worker thread while the PE runs on.
Every record, count and sample must be the ones the model gives without it, byte for byte:
the same run with the thread and without leaves the same trace and the same model counts,
and the thread did take the accesses (else these tests would compare a run with itself)."""

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spe_emu import native
from spe_emu.errors import ConfigError
from spe_emu.session import RunOptions, prepare_machine

HERE = Path(__file__).resolve().parent
GUESTS = HERE.parent / "guests"


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
    assert no_worker == (0, 0, 0)
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
    with pytest.raises(ConfigError, match="SPE_EMU_MODEL_THREAD='yes': expected 0 or 1"):
        native.model_threads()


def test_the_cli_refuses_a_bad_setting_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spe_emu.tools.cli", "run",
                           str(GUESTS / "asm_loop.elf"), "-o", str(tmp_path)],
                          env={**os.environ, "SPE_EMU_MODEL_THREAD": "yes"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 125
    assert proc.stderr == "spe-emu: error: SPE_EMU_MODEL_THREAD='yes': expected 0 or 1\n"


class Entry(ctypes.Structure):
    """uc_mem_trace_entry (patches/unicorn/0011): the physical address, and the PC, log2 of
    the size and the direction in info."""
    _fields_ = [("addr", ctypes.c_uint64), ("info", ctypes.c_uint64)]


def model_fed(entries, threads: bool):
    """A model and the counter that feeds it, ``entries`` handed to
    spe_model_trace_batch as Unicorn's drain would (with its thread: not waited for)."""
    old = native.use_model_threads(threads)
    try:
        # (fully associative levels, kept as lists: about 50 ns an access, so that a fork
        # finds the worker part-way through)
        model = native.Model((4096, 0, 512, 0, 0, 0, 65536, 0))
        counter = native.SpeCounter()
        counter.feed, counter.feed_until = model.ptr, (1 << 64) - 1
        batch = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)(
            native.model_trace_batch_address())
        batch(ctypes.addressof(counter), ctypes.addressof(entries), len(entries))
    finally:
        native.use_model_threads(old)
    return model, counter


def in_child(answer) -> str:
    """``answer()`` (a str) as a forked child of this process gives it (its exception's repr
    if it raises)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # (the child: its answer through the pipe, whatever happens)
        try:
            try:
                said = answer()
            except BaseException as exc:
                said = repr(exc)
            os.write(write, said.encode())
        finally:
            os._exit(0)
    os.close(write)
    said = b""
    while chunk := os.read(read, 65536):
        said += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return said.decode()


def fork_mid_batch(trials: int) -> tuple[int, int]:
    """``trials`` times: 60,000 accesses handed to a model's worker, then a fork as soon as
    the worker has begun; (trials where the child's or the parent's model counts differ from
    the model's without a thread, trials where the worker had not finished at the fork)."""
    entries = (Entry * 60_000)()
    for i, e in enumerate(entries):   # (each a line of a new page: each misses everything)
        e.addr, e.info = 0x4000_0000 + i * 4096 + (i % 64) * 64, 0x1000 | 3 << 56
    alone = repr(model_fed(entries, False)[0].stats())
    bad = midway = 0
    for _ in range(trials):
        model, counter = model_fed(entries, True)
        while model.worker_stats()[2] == 0:   # (until its thread has begun)
            pass
        handed, _, recorded = model.worker_stats()
        midway += recorded < handed
        child = in_child(lambda: repr(model.stats()))
        bad += child != alone or repr(model.stats()) != alone
    return bad, midway


def test_a_child_forked_mid_batch_has_the_model_of_every_access_once():
    # Forked while the worker is part-way through, the child (which has no worker thread)
    # must find each access recorded once: the fork waits for the worker to catch up, and the
    # child records only what was never handed over. (In a small process of its own: a fork
    # of the test process takes longer than the worker's work.)
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "import test_model_thread as t; print(*t.fork_mid_batch(12))", str(HERE)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    bad, midway = map(int, proc.stdout.split())
    assert midway >= 3   # (else the forks did not come part-way through)
    assert bad == 0


def test_a_forked_child_feeds_its_model_past_the_rings_size():
    # In a child (no worker thread) the feeding thread records the ring itself whenever it
    # is full: 300,000 accesses in batches of 1,000, many times the ring's 65,536 entries,
    # before anything waits -- the counts of the model without a thread, no entry
    # overwritten before it was recorded.
    n, size = 300_000, 1_000
    entries = (Entry * n)()
    for i, e in enumerate(entries):   # (half within three lines, half each a new page)
        e.addr = 0x100 + (i % 3) * 64 if i < n // 2 else 0x4000_0000 + i * 4096
        e.info = 0x1000 | 3 << 56
    batches = [ctypes.addressof(entries) + i * ctypes.sizeof(Entry) for i in range(0, n, size)]
    first = (Entry * 1)()
    first[0].addr, first[0].info = 0x10000, 0x1000 | 3 << 56

    def fed(threads: bool, fork: bool) -> str:
        model, counter = model_fed(first, threads)
        model.sync()
        batch = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)(
            native.model_trace_batch_address())

        def feed() -> str:
            for address in batches:
                batch(ctypes.addressof(counter), address, size)
            return repr(model.stats())
        return in_child(feed) if fork else feed()

    alone = fed(False, False)
    assert "'accesses': 300001" in alone
    assert fed(True, True) == alone


def test_a_forked_child_frees_a_model_whose_worker_sleeps(tmp_path):
    # the parent's worker waits on its condition variable when the process forks; the child
    # freeing the model must not wait for that thread, which it does not have
    old = native.use_model_threads(True)
    try:
        m = prepare_machine(GUESTS / "sort.elf", RunOptions(outdir=tmp_path, interval=1024))
        m.run()
        m.semihost.close_all()
    finally:
        native.use_model_threads(old)
    model = m.spu.builder.model
    assert model.worker_stats()[1] >= 1
    model.sync()
    time.sleep(0.05)   # (past the worker's polling: asleep, for 0.5 s)
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)   # (a hang ends the child with SIGALRM)
        model._free()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
