"""The driver-bug reporter (spe.driver_rules, issue 15): a guest that breaks a software rule of
SPE supplement §3.4.1 / §3.6 gets one guest_error line per rule naming the rule and its
section, with the PC and the register values, in both run loops; a driver that keeps the rules
(asmrun.SPE_DRAIN, the firmware) gets none."""

import pytest
from asmrun import EXIT, SPE_DRAIN, run_asm, spe_prologue, xregs

import child

from spe_emu.asm import assemble
from spe_emu.spe.config import SpeConfig

BUF = 0x4200_0000
MODES = ("fast", "reference")
LOOP = """
    movz x4, #400
loop:
    ldr x5, [sp]
    subs x4, x4, #1
    b.ne loop
"""
VECTORS = "\n    .balign 2048\nvectors:\n    b vectors\n"
MSR_PMSCR_X3 = int.from_bytes(assemble("msr pmscr_el1, x3", 0), "little")


def run(text: str, tmp_path, mode: str, spe: SpeConfig | None = None):
    m = run_asm(text, tmp_path / mode, mode=mode, spe=spe)
    assert m.result.exit_status == 0
    return m


def enabled_at(m, pc: int) -> bool:
    """Whether ``pc`` follows the MSR PMSCR_EL1 of spe_prologue (profiling became enabled)."""
    return int.from_bytes(m.uc.mem_read(pc - 4, 4), "little") == MSR_PMSCR_X3


@pytest.mark.parametrize("mode", MODES)
def test_keeping_the_rules_reports_nothing(tmp_path, mode):
    m = run(spe_prologue(0b11, BUF) + LOOP + SPE_DRAIN + VECTORS, tmp_path, mode)
    assert m.result.samples > 0
    assert m.result.driver_rules == [] and m.result.guest_errors == []


@pytest.mark.parametrize("mode", MODES)
def test_misaligned_pointer(tmp_path, mode):
    # PMBIDR_EL1.Align = 6 (64 bytes), PMBPTR_EL1 = BUF + 8
    m = run(spe_prologue(0b11, BUF, ptr=BUF + 8) + LOOP + SPE_DRAIN + VECTORS, tmp_path, mode,
            SpeConfig(align_code=6))
    (b,) = m.result.driver_rules
    assert b["rule"] == "ptr-align" and b["section"] == "§3.4.1"
    assert b["registers"] == {"PMBPTR_EL1": BUF + 8, "PMBIDR_EL1": 6}
    assert enabled_at(m, b["pc"])
    assert m.result.guest_errors == [
        f"spe: driver rule broken at PC {b['pc']:#x}: §3.4.1: PMBPTR_EL1 not aligned to "
        f"2^PMBIDR_EL1.Align when the Profiling Buffer is configured "
        f"(PMBPTR_EL1={BUF + 8:#x}, PMBIDR_EL1=0x6)"]


@pytest.mark.parametrize("mode", MODES)
def test_pointer_too_close_to_the_limit(tmp_path, mode):
    # limit BUF + 0x10000, pointer 32 bytes below it (MaxSize 64 bytes)
    m = run(spe_prologue(0b11, BUF, limit=0x10000, ptr=BUF + 0x10000 - 32) + LOOP + SPE_DRAIN
            + VECTORS, tmp_path, mode)
    rules = [b["rule"] for b in m.result.driver_rules]
    assert rules[0] == "ptr-room"
    b = m.result.driver_rules[0]
    assert b["registers"]["PMBPTR_EL1"] == BUF + 0x10000 - 32
    assert b["registers"]["PMBLIMITR_EL1"] == BUF + 0x10000 + 1
    assert b["registers"]["PMSIDR_EL1"] >> 12 & 0xF == 6 and enabled_at(m, b["pc"])
    assert "fewer than 2^PMSIDR_EL1.MaxSize bytes" in m.result.guest_errors[0]


@pytest.mark.parametrize("mode", MODES)
def test_pointer_top_byte_differs(tmp_path, mode):
    # PMBPTR_EL1 with top byte 0x01 (a tag), PMBLIMITR_EL1 without; profiling is then enabled
    text = spe_prologue(0b11, BUF) + """
    msr pmscr_el1, xzr
    isb
    psb csync
    mov x1, #1
    lsl x1, x1, #56
    mrs x2, pmbptr_el1
    orr x2, x2, x1
    msr pmbptr_el1, x2
    mov x3, #3
    msr pmscr_el1, x3
    isb
""" + SPE_DRAIN + VECTORS
    m = run(text, tmp_path, mode)
    b = next(b for b in m.result.driver_rules if b["rule"] == "top-byte")
    assert b["registers"]["PMBPTR_EL1"] >> 56 == 1 and b["registers"]["PMBLIMITR_EL1"] >> 56 == 0
    assert enabled_at(m, b["pc"])


@pytest.mark.parametrize("mode", MODES)
def test_pointer_written_while_profiling(tmp_path, mode):
    text = spe_prologue(0b11, BUF) + f"""
    movz x9, #{(BUF + 0x800) >> 16:#x}, lsl #16
    movk x9, #{(BUF + 0x800) & 0xFFFF:#x}
    msr pmbptr_el1, x9
""" + LOOP + SPE_DRAIN + VECTORS
    m = run(text, tmp_path, mode)
    (b,) = m.result.driver_rules
    assert b["rule"] == "ptr-write-enabled" and b["section"] == "§3.4.1, §3.6"
    assert b["registers"]["written"] == BUF + 0x800 and b["registers"]["PMSCR_EL1"] == 0b11
    word = int.from_bytes(m.uc.mem_read(b["pc"], 4), "little")
    assert word == int.from_bytes(assemble("msr pmbptr_el1, x9", 0), "little")


@pytest.mark.parametrize("mode", MODES)
def test_pointer_read_without_psb_csync(tmp_path, mode):
    # profiling disabled and context-synchronized, but no PSB CSYNC before the read; reported
    # once, though read twice
    text = spe_prologue(0b11, BUF) + LOOP + """
    msr pmscr_el1, xzr
    isb
    mrs x21, pmbptr_el1
    mrs x21, pmbptr_el1
    mov x0, #0
""" + EXIT + VECTORS
    m = run(text, tmp_path, mode)
    (b,) = m.result.driver_rules
    assert b["rule"] == "ptr-read-unsynced"
    assert b["registers"]["PMBPTR_EL1"] == xregs(m, 21)[0]
    assert len(m.result.guest_errors) == 1 and "without a PSB CSYNC" in m.result.guest_errors[0]


def test_unscanned_code_is_not_judged(tmp_path):
    # A read from code outside the loaded images (e.g. a kernel running at another address
    # than it was loaded at) cannot have its PSB CSYNCs seen: not reported.
    m = run(spe_prologue(0b11, BUF) + LOOP + """
    msr pmscr_el1, xzr
    isb
    mov x0, #0
""" + EXIT + VECTORS, tmp_path, "fast")
    rules = m.spu.rules
    rules.synced = False
    rules.psb_visible = lambda pc: False
    rules.pmbptr_read(False)
    assert rules.breaks == []
    rules.psb_visible = m._in_scanned_code
    rules.pc = lambda: 0x4000_0000
    rules.pmbptr_read(False)
    assert [b.rule for b in rules.breaks] == ["ptr-read-unsynced"]


@pytest.mark.parametrize("mode", MODES)
def test_strict_stops_the_run(tmp_path, mode):
    """SpeConfig.strict (``spe-emu run --strict``): the first break stops the run with
    DriverRuleBroken, whose message is the rule's guest_error line; the CLI exits with 123."""
    from spe_emu.errors import DriverRuleBroken
    with pytest.raises(DriverRuleBroken) as info:
        run_asm(spe_prologue(0b11, BUF, ptr=BUF + 8) + LOOP + SPE_DRAIN + VECTORS,
                tmp_path / mode, mode=mode, spe=SpeConfig(align_code=6, strict=True))
    assert str(info.value).startswith("spe: driver rule broken at PC ")
    assert "§3.4.1: PMBPTR_EL1 not aligned to 2^PMBIDR_EL1.Align" in str(info.value)


def test_strict_exit_status(capsys):
    from spe_emu.errors import DriverRuleBroken
    from spe_emu.tools.cli import EXIT_STRICT, _fail_with
    with pytest.raises(SystemExit) as info:
        _fail_with(DriverRuleBroken("spe: driver rule broken at PC 0x40000010: §3.4.1: x"))
    assert info.value.code == EXIT_STRICT == 123
    assert capsys.readouterr().err == ("spe-emu: error: spe: driver rule broken at PC "
                                       "0x40000010: §3.4.1: x\n")


def test_strict_from_the_command_line(tmp_path):
    """``spe-emu run --machine virt --kernel RAW --strict``: the run stops at the broken rule
    with one error line and status 123; without --strict the guest's own status (0)."""
    import subprocess
    import sys
    text = ("movz x9, #0x4100, lsl #16\nmov sp, x9\n" + spe_prologue(0b11, BUF, ptr=BUF + 8)
            + LOOP + SPE_DRAIN + VECTORS)
    kernel = tmp_path / "rule.bin"
    kernel.write_bytes(assemble(text, 0x4008_0000))   # raw binaries run at RAM + 0x8_0000
    cmd = [sys.executable, "-c", "import sys; from spe_emu.tools.cli import main; "
           "sys.argv[0] = 'spe-emu'; main()", "run", "--machine", "virt", "--kernel",
           str(kernel), "--spe-feature", "Align=6", "-o", str(tmp_path / "out")]
    env = child.env({"PATH": "/usr/bin:/bin"})
    ok = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr
    strict = subprocess.run(cmd + ["--strict"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert strict.returncode == 123
    assert strict.stderr.startswith("spe-emu: error: spe: driver rule broken at PC 0x")
    assert "§3.4.1: PMBPTR_EL1 not aligned to 2^PMBIDR_EL1.Align" in strict.stderr
    assert strict.stderr.count("\n") == 1
