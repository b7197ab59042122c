"""A run stopped from outside (SIGINT, SIGTERM; spe_emu.cpu.runloop.interrupt_running) stops at
a block boundary with what it collected written: summary.json's exit_reason "interrupted",
``spe-emu run``'s status 128 + the signal, and no staging directory left behind."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from asmrun import asm_machine, xregs

import child
from linux_progs import build_static
from spe_emu.cpu.runloop import interrupt_running
from spe_emu.errors import RunInterrupted
from spe_emu.session import RunOptions, run_recorded, write_summary, result_summary
from spe_emu.tools import cli

SPIN_C = "int main(void) { volatile unsigned long i = 0; for (;;) i++; }\n"
"""A Linux program that never exits and makes no system call: the run stays in Unicorn,
with no Python hook, for as long as it is left."""

LOOP_ASM = "spin:\n add x0, x0, #1\n b spin\n"
"""The same on the bare machine."""


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_interrupt_running_stops_a_run_at_a_block_boundary(tmp_path, mode):
    m = asm_machine(LOOP_ASM, tmp_path, mode=mode, max_insns=10**12)
    timer = threading.Timer(0.5, interrupt_running, (signal.SIGTERM,))
    timer.start()
    collected = []
    try:
        with pytest.raises(RunInterrupted) as info:
            run_recorded(m, RunOptions(), tmp_path,
                         on_error=lambda result, exc: collected.append((result, exc)))
    finally:
        timer.cancel()
    exc = info.value
    assert exc.signum == signal.SIGTERM and exc.machine is m
    assert str(exc).startswith("interrupted by SIGTERM at PC ")
    (result, err), = collected
    assert err is exc and result.instructions == m.insns() > 0
    # (the state is the stop's, at a block boundary: after asm_machine's two-instruction
    # prologue, X0 counts the loop's adds, one per two instructions)
    assert xregs(m, 0) == [(result.instructions - 1) // 2]
    summary = result_summary(result, exc)
    assert summary["exit_reason"] == "interrupted" and summary["error"] == str(exc)
    write_summary(tmp_path, summary)   # (what the CLI's summary writer does with it)


def test_interrupt_running_without_a_run_does_nothing():
    interrupt_running(signal.SIGINT)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_run_keeps_what_an_interrupted_run_collected(tmp_path, sig):
    program = build_static(SPIN_C, tmp_path / "spin")
    if program is None:
        pytest.skip("no aarch64-linux-gnu-gcc")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("an input file of the guest")
    proc = subprocess.Popen(["python", "-m", "spe_emu.tools.cli", "run", "--clear-env",
                             "-o", str(out), str(program)], cwd=tmp_path, env=child.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        # (running once the staging directory exists and the guest has had a moment)
        while not list(tmp_path.glob(".out.*.run")) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig
    line = stderr.decode()
    assert line.startswith(f"spe-emu: error: interrupted by {signal.Signals(sig).name} at PC ")
    assert line.count("\n") == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_reason"] == "interrupted" and summary["instructions"] > 1_000_000
    assert (out / "keep.txt").read_text() == "an input file of the guest"
    assert not list(tmp_path.glob(".out.*"))


READ_C = "#include <unistd.h>\nint main(void) { char b[16]; return (int)read(0, b, 16); }\n"
"""A Linux program that waits for its stdin (an open pipe that never delivers)."""


def _start(program: Path, out: Path, cwd: Path, *options: str) -> subprocess.Popen:
    """``spe-emu run [OPTIONS] PROGRAM -o OUT`` with its stdin an open pipe, in a session of
    its own."""
    return subprocess.Popen(["python", "-m", "spe_emu.tools.cli", "run", "--clear-env",
                             "-o", str(out), *options, str(program)], cwd=cwd,
                            env=child.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def _signalled(proc: subprocess.Popen, *gaps: float) -> tuple[str, float]:
    """Send SIGTERM once per entry of ``gaps``, that many seconds after the one before (the
    first after ``gaps[0]``); (stderr, seconds from the first signal to the exit)."""
    try:
        sent = None
        for gap in gaps:
            time.sleep(gap)
            proc.send_signal(signal.SIGTERM)
            sent = sent or time.monotonic()
        _, stderr = proc.communicate(timeout=60)
        return stderr.decode(), time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_program_waiting_for_stdin_stops_at_once(tmp_path):
    program = build_static(READ_C, tmp_path / "read")
    if program is None:
        pytest.skip("no aarch64-linux-gnu-gcc")
    out = tmp_path / "out"
    stderr, waited = _signalled(_start(program, out, tmp_path), 3.0)
    assert waited < cli.INTERRUPT_GRACE_S   # (the wait is on virtual time: the loop checks)
    assert stderr.startswith("spe-emu: error: interrupted by SIGTERM at PC ")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_reason"] == "interrupted" and summary["instructions"] > 0
    assert not list(tmp_path.glob(".out.*"))


def test_a_signal_ends_a_wait_for_the_host(tmp_path):
    """spe-emu waits for GDB's connection (no debugger comes): no engine runs, so the
    watcher interrupts the main thread after INTERRUPT_GRACE_S and the wait fails with
    RunInterrupted; the run never started, so -o gets nothing and no staging is left."""
    program = build_static(SPIN_C, tmp_path / "spin")
    if program is None:
        pytest.skip("no aarch64-linux-gnu-gcc")
    out = tmp_path / "out"
    proc = _start(program, out, tmp_path, "--gdb", str(_free_port()))
    stderr, waited = _signalled(proc, 3.0)
    assert proc.returncode == 128 + signal.SIGTERM
    assert cli.INTERRUPT_GRACE_S <= waited < cli.INTERRUPT_GRACE_S + 10
    assert stderr.splitlines()[-1] == ("spe-emu: error: interrupted by SIGTERM while "
                                       "waiting for the host")
    assert not out.exists() and not list(tmp_path.glob(".out.*"))


def test_a_second_signal_ends_spe_emu_at_once(tmp_path):
    program = build_static(SPIN_C, tmp_path / "spin")
    if program is None:
        pytest.skip("no aarch64-linux-gnu-gcc")
    out = tmp_path / "out"
    proc = _start(program, out, tmp_path, "--gdb", str(_free_port()))
    # (the second while the first still waits for its grace to end)
    stderr, waited = _signalled(proc, 3.0, cli.INTERRUPT_GRACE_S / 4)
    assert proc.returncode == -signal.SIGTERM   # (it died of the signal)
    assert waited < cli.INTERRUPT_GRACE_S
    assert stderr.splitlines()[-1] == ("spe-emu: error: interrupted by SIGTERM again: "
                                       "ended at once")


def test_the_handlers_and_the_wakeup_fd_are_restored():
    before = {s: signal.getsignal(s) for s in cli.INTERRUPT_SIGNALS}
    with cli._interruptible():
        assert all(signal.getsignal(s) is not before[s] for s in cli.INTERRUPT_SIGNALS)
    assert {s: signal.getsignal(s) for s in cli.INTERRUPT_SIGNALS} == before
    assert signal.set_wakeup_fd(-1) == -1


def test_leaving_the_watch_does_not_wait_for_the_watchers_poll(monkeypatch):
    """The watcher is woken when the block ends (a byte through its pipe that names no
    signal): leaving does not wait for its poll's timeout, which every spe-emu run paid."""
    monkeypatch.setattr(cli, "INTERRUPT_REPEAT_S", 10.0)
    with cli._interruptible():
        time.sleep(0.05)   # (the watcher is in its select)
        started = time.monotonic()
    assert time.monotonic() - started < 5.0
