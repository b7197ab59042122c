"""The Python API (spe_emu.run, spe_emu.Result) and the README's example of it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import spe_emu
from spe_emu.asm import assemble
from spe_emu.errors import ConfigError, GuestRunaway, ImageError
from spe_emu.spe.packets import iter_records

from asmrun import EXIT
from linux_progs import build_static
from test_loader import PT_LOAD, elf64

REPO = Path(__file__).resolve().parent.parent
SORT = REPO / "guests" / "sort.elf"
BASE = 0x4000_0000          # where a bare-metal image is linked (the board's RAM)
PF_RWX = 7


@pytest.fixture(scope="module")
def sort_run():
    return spe_emu.run(SORT, interval=1024, seed=3)


def test_counts_trace_and_records_agree(sort_run):
    r = sort_run
    assert (r.status, r.exit_reason, r.error) == (0, "exit", None)
    assert r.counts["records_written"] == len(r.records) > 0
    assert r.counts["bytes_written"] == len(r.trace) == r.summary["trace_bytes"]
    assert r.samples == r.counts["samples"] >= r.counts["records_written"]
    assert r.counts["instructions"] == r.summary["instructions"]
    # the records are the reference decoder's, with their packets
    assert [x.offset for x in r.records] == [x.offset for x in iter_records(r.trace)]
    assert all(x.packets for x in r.records)
    # the firmware's own lines are its console, never the guest's (issue 29 item 6)
    assert r.firmware_console.startswith(b"spe_fw: guest_entry=0x48000000 spe=on")
    assert b"spe_fw: exit status=0" in r.firmware_console
    assert b"spe_fw" not in r.console and r.console.startswith(b"sort: 8192 values")
    assert r.outdir is None                 # a temporary directory, removed


def test_registers_at_exit_under_the_firmware(sort_run):
    regs = sort_run.registers
    assert set(regs) >= {f"X{i}" for i in range(31)} | {"SP", "PC", "PSTATE", "EL",
                                                         "PMBSR_EL1", "PMBPTR_EL1"}
    assert regs["EL"] == 1                  # the firmware's exit path (EL1h)
    assert regs["PMBSR_EL1"] == sort_run.summary["pmbsr"]


def test_report_names_the_programs_functions(sort_run):
    rep = sort_run.report()
    assert rep.total_records == len(sort_run.records)
    assert rep.hot_functions[0][0] == "quick_sort.constprop.0"


def test_same_inputs_same_trace(sort_run):
    again = spe_emu.run(SORT, interval=1024, seed=3)
    assert again.trace == sort_run.trace and again.counts == sort_run.counts


def test_outdir_is_kept_when_given(tmp_path):
    r = spe_emu.run(SORT, interval=4096, outdir=tmp_path / "out", ground_truth=True)
    assert r.outdir == tmp_path / "out"
    assert (tmp_path / "out" / "spe.trace").read_bytes() == r.trace
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["samples"] == r.samples
    assert sum(r.ground_truth.values()) == r.counts["instructions"]


def _bare_metal(tmp_path: Path, body: str) -> Path:
    # (reset leaves SP 0: EXIT builds its parameter block on a stack)
    code = assemble("movz x9, #0x4100, lsl #16\n mov sp, x9\n" + body + EXIT, BASE)
    path = tmp_path / "bare.elf"
    path.write_bytes(elf64(entry=BASE, segments=[(PT_LOAD, PF_RWX, BASE, code, len(code))]))
    return path


@pytest.mark.parametrize("el", [1, 2, 3])
def test_bare_metal_registers_and_status(tmp_path, el):
    image = _bare_metal(tmp_path, "movz x5, #0x1234\n movk x5, #0xabcd, lsl #32\n mov x0, #7\n")
    r = spe_emu.run(image, firmware=False, boot_el=el)
    assert (r.status, r.exit_reason) == (7, "exit")
    assert r.registers["X5"] == 0xABCD_0000_1234
    assert r.registers["EL"] == el
    assert r.trace == b"" and r.records == []
    assert r.read_memory(BASE + 8, 4) == assemble("movz x5, #0x1234", BASE + 8)


def test_budget_is_an_exit_reason_not_an_exception(tmp_path):
    image = _bare_metal(tmp_path, "loop: b loop\n")
    r = spe_emu.run(image, firmware=False, max_insns=5000)
    assert (r.status, r.exit_reason) == (None, "max-insns")
    assert isinstance(r.error, GuestRunaway)
    assert r.counts["instructions"] == 5000
    assert r.registers["PC"] == BASE + 8
    with pytest.raises(GuestRunaway):
        r.check()


def test_a_stopped_run_still_writes_its_summary(tmp_path):
    image = _bare_metal(tmp_path, "loop: b loop\n")
    r = spe_emu.run(image, firmware=False, max_insns=5000, outdir=tmp_path / "out")
    on_disk = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert on_disk == r.summary
    assert on_disk["exit_reason"] == "max-insns" and on_disk["instructions"] == 5000
    assert on_disk["exit_status"] is None and "5000 instructions" in on_disk["error"]


def test_summary_names_the_exit_reason(sort_run):
    assert sort_run.summary["exit_reason"] == "exit"
    assert sort_run.summary["semihosting_exit_reason"] == 0x20026  # ADP_Stopped_ApplicationExit
    assert "error" not in sort_run.summary


def test_board_run_ends_with_psci_system_off(tmp_path):
    kernel = tmp_path / "off.bin"       # PSCI SYSTEM_OFF (0x84000008) by HVC from EL1
    kernel.write_bytes(assemble("movz x9, #0x55\n movz w0, #0x8\n movk w0, #0x8400, lsl #16\n"
                                "hvc #0\n"))
    r = spe_emu.run(machine="virt", kernel=kernel, ground_truth=True)
    assert (r.status, r.exit_reason) == (0, "psci-system-off")
    assert r.registers["X9"] == 0x55
    assert r.ground_truth == {0x4008_0000 + 4 * i: 1 for i in range(4)}
    assert r.summary["exit_reason"] == "psci-system-off"


@pytest.mark.parametrize("kwargs, error, fragment", [
    (dict(interval=1000), ConfigError, "--interval 1000"),
    (dict(filters=("loads",)), ConfigError, "--filter"),
    (dict(spe_features={"nosuch": 1}), ConfigError, "nosuch"),
    (dict(args=("x",)), ConfigError, "apply to Linux programs"),
])
def test_bad_options_raise_config_error(kwargs, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        spe_emu.run(SORT, **kwargs)


@pytest.mark.parametrize("kwargs", [dict(interval=1024), dict(filters=("load",)),
                                    dict(physical=True), dict(args=("x",)), dict(stdin=b"x")])
def test_driver_options_are_refused_with_a_board(tmp_path, kwargs):
    kernel = tmp_path / "k.bin"
    kernel.write_bytes(assemble("hvc #0\n"))
    with pytest.raises(ConfigError, match=f"{next(iter(kwargs))}: with machine="):
        spe_emu.run(machine="virt", kernel=kernel, **kwargs)


def test_cli_no_firmware_boots_a_bare_metal_image_outside_the_guest_region(tmp_path):
    # (its entry, 0x4000_0000, is outside the firmware's guest region, as a Linux program's
    # is: --no-firmware says which it is)
    from click.testing import CliRunner
    from spe_emu.tools.cli import main
    image = _bare_metal(tmp_path, "mov x0, #7\n")
    res = CliRunner().invoke(main, ["run", "--no-firmware", str(image), "-o",
                                    str(tmp_path / "out")])
    assert res.exit_code == 7, res.output
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["exit_status"] == 7
    # (issue 29: the image wrote no trace, and the command names none)
    assert not (tmp_path / "out" / "spe.trace").exists()
    assert "trace: none written  summary: " in res.output, res.output


def test_missing_program_raises_image_error(tmp_path):
    with pytest.raises(ImageError):
        spe_emu.run(tmp_path / "nope.elf")
    with pytest.raises(ConfigError):
        spe_emu.run()


ECHO = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    char line[64];
    for (int i = 1; i < argc; i++) printf("%s\n", argv[i]);
    if (fgets(line, sizeof line, stdin)) printf("in:%s", line);
    fprintf(stderr, "env=%s\n", getenv("GREETING") ? getenv("GREETING") : "-");
    return argc;
}
"""


def test_linux_program_stdio_and_status(tmp_path):
    prog = build_static(ECHO, tmp_path / "echo")
    if prog is None:
        pytest.skip("aarch64-linux-gnu-gcc -static not available")
    r = spe_emu.run(prog, ["a", "bc"], stdin=b"hello\n", env={"GREETING": "hi"},
                    interval=1024)
    assert (r.status, r.exit_reason) == (3, "exit")
    assert r.console == b"a\nbc\nin:hello\n"
    assert r.stderr == b"env=hi\n"
    assert r.samples > 0 and len(r.records) == r.counts["records_written"]
    assert r.summary["linux"]["exit_status"] == 3


def _readme_example() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(REPO / "guests", tmp_path / "guests")
    exec(compile(_readme_example(), "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "quick_sort" in out and "exit 0" in out


def test_cli_runaway_keeps_its_summary(tmp_path):
    from click.testing import CliRunner
    from spe_emu.tools.cli import main
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["run", str(SORT), "--max-insns", "20000", "-o", str(out)])
    assert res.exit_code == 124
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["exit_reason"], summary["instructions"]) == ("max-insns", 20000)
    trace = out / "spe.trace"
    assert summary["trace_bytes"] == (trace.stat().st_size if trace.exists() else 0)


def test_record_operation_class_is_named(sort_run):
    """Record.op_class is an OpClass (§5.3.8 CLASS: OTHER, LOAD_STORE, BRANCH) that still
    compares as its value; Record.operation is the Operation Type packet in words (issue 29
    item 6)."""
    from spe_emu.spe.packets import OpClass
    r = sort_run
    classes = {rec.op_class for rec in r.records}
    assert classes <= set(OpClass) and OpClass.LOAD_STORE in classes
    load = next(rec for rec in r.records if rec.op_class is OpClass.LOAD_STORE)
    assert load.op_class == 1 and load.op_class.name == "LOAD_STORE"
    assert load.operation.split()[0] in ("LD", "ST")
    branch = next(rec for rec in r.records if rec.op_class is OpClass.BRANCH)
    assert branch.operation.startswith("B")
