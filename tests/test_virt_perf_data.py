"""``spe-emu run --machine virt --perf-data``: the records the SPU writes into the guest's own
Profiling Buffer, copied on the host into spe.trace and perf.data; the firmware's SPE driver
options are refused with --machine rather than ignored."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from click.testing import CliRunner

import spe_emu
from spe_emu.asm import assemble
from spe_emu.spe.config import SpeConfig
from spe_emu.spe.packets import iter_records
from spe_emu.spe.registers import spe_registers
from spe_emu.tools.cli import main

from asmrun import spe_prologue

LOAD = 0x4008_0000      # a raw binary's place on virt (RAM + 0x8_0000, as QEMU)
BUF = 0x4200_0000       # the Profiling Buffer (MMU off: physical = virtual)
ITERATIONS = 3000       # of a 4-instruction loop: 12,000 instructions at EL1


def _program() -> bytes:
    """At EL1 (MMU off): SPE on (EL1, timestamps, interval 256), a loop, PSB CSYNC and
    DSB, PMBPTR_EL1 into x21, then PSCI SYSTEM_OFF by HVC."""
    pmscr = spe_registers(SpeConfig())["PMSCR_EL1"].make(E1SPE=1, TS=1)
    text = spe_prologue(pmscr, BUF) + f"""
    movz x9, #{BUF >> 16:#x}, lsl #16
    add x9, x9, #0x200000
    mov x10, #{ITERATIONS}
loop:
    ldr x11, [x9]
    add x11, x11, #1
    subs x10, x10, #1
    b.ne loop
    msr pmscr_el1, xzr
    isb
    psb csync
    dsb nsh
    mrs x21, pmbptr_el1
    movz w0, #0x8
    movk w0, #0x8400, lsl #16
    hvc #0
    .balign 2048
vectors:
    b vectors
"""
    return assemble(text, LOAD)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    path = tmp_path_factory.mktemp("virt") / "spe.bin"
    path.write_bytes(_program())
    return path


def test_api_trace_is_what_the_guest_buffer_holds(kernel):
    r = spe_emu.run(machine="virt", kernel=kernel)
    assert (r.status, r.exit_reason) == (0, "psci-system-off")
    ptr = r.registers["X21"]
    assert ptr > BUF
    assert r.trace == r.read_memory(BUF, ptr - BUF)
    recs = list(iter_records(r.trace))
    assert len(recs) == r.counts["records_written"] > 12_000 // 256 - 2
    assert all(rec.el == 1 and rec.timestamp is not None for rec in recs)


def test_cli_perf_data_on_virt(kernel, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["run", "--machine", "virt", "--kernel", str(kernel),
                                    "--perf-data", "-o", str(out)])
    assert res.exit_code == 0, res.output
    trace = (out / "spe.trace").read_bytes()
    assert trace == spe_emu.run(machine="virt", kernel=kernel).trace
    data = (out / "perf.data").read_bytes()
    assert data[:8] == b"PERFILE2" and trace[:64] in data
    import json
    assert json.loads((out / "summary.json").read_text())["trace_bytes"] == len(trace)


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf (Debian linux-perf) not installed")
def test_perf_reads_it(kernel, tmp_path):
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["run", "--machine", "virt", "--kernel", str(kernel),
                                    "--perf-data", "-o", str(out)])
    assert res.exit_code == 0, res.output
    proc = subprocess.run(["perf", "report", "-D", "-i", str(out / "perf.data")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    n = len(list(iter_records((out / "spe.trace").read_bytes())))
    assert proc.stdout.count("ARM SPE") >= 1
    # every record's PC packet is dumped (perf -D: "PC 0x... el1 ns=1")
    assert proc.stdout.count(" el1 ns=") >= n


@pytest.mark.parametrize("option, shown", [
    (["--interval", "1024"], "--interval"), (["--filter", "load"], "--filter"),
    (["--no-timestamps"], "--timestamps/--no-timestamps"), (["--pa"], "--pa/--no-pa"),
    (["--buffer-size", "8192"], "--buffer-size"), (["--no-firmware"], "--no-firmware"),
    (["-E", "A=B"], "--env"), (["--random", "--interval", "512"], "--interval, --random/")])
def test_driver_options_are_refused_with_machine(kernel, tmp_path, option, shown):
    res = CliRunner().invoke(main, ["run", "--machine", "virt", "--kernel", str(kernel),
                                    "-o", str(tmp_path), *option])
    assert res.exit_code == 125
    line = res.output.splitlines()[-1]
    assert line.startswith(f"spe-emu: error: {shown}")
    assert "with --machine the guest's own driver programs SPE" in line
