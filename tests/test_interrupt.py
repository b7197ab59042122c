"""A run stopped from outside (SIGINT, SIGTERM; spe_emu.cpu.runloop.interrupt_running) stops at
a block boundary with what it collected written: summary.json's exit_reason "interrupted",
``spe-emu run``'s status 128 + the signal, and no staging directory left behind."""

from __future__ import annotations

import json
import os
import signal
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
    (out).mkdir()
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


def test_a_second_signal_ends_at_once_and_handlers_are_restored():
    before = {s: signal.getsignal(s) for s in cli.INTERRUPT_SIGNALS}
    with pytest.raises(KeyboardInterrupt):
        with cli._interruptible():
            os.kill(os.getpid(), signal.SIGTERM)   # (the first: asks the runs to stop)
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGTERM)   # (the second: at once)
            time.sleep(5)
            pytest.fail("the second signal did not interrupt")
    assert {s: signal.getsignal(s) for s in cli.INTERRUPT_SIGNALS} == before
    assert signal.set_wakeup_fd(-1) == -1
