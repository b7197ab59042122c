"""Machine-level behaviour: ID registers, SPE absent, deterministic virtual time, the keystone
helper, PA and Context packets."""

import struct

import pytest

from asmrun import EXIT, SPE_DRAIN, run_asm, xregs

from spe_emu.asm import assemble, translate
from spe_emu.platform.board import VIRT
from spe_emu.spe.config import SpeConfig
from spe_emu.spe.packets import iter_records

BUF = 0x4200_0000


def test_asm_helper_knows_spe_names():
    assert translate("psb csync") == "hint #17"
    assert translate("msr PMSCR_EL1, x0") == "msr s3_0_c9_c9_0, x0"
    # Encodings from the notes: psb csync = 0xD503223F, msr pmscr_el1, x0 = 0xD5189900.
    assert assemble("psb csync\nmsr pmscr_el1, x0") == struct.pack("<II", 0xD503223F,
                                                                    0xD5189900)


@pytest.mark.parametrize("failures,ok", [(1, True), (2, True), (3, False)])
def test_asm_helper_retries_keystone_unknown_errors(monkeypatch, failures, ok):
    """keystone's intermittent "Unknown error" (an error number it has no message for) is
    tried again with a new engine, up to UNKNOWN_ERROR_ATTEMPTS in all; any other error is
    reported at once."""
    import keystone

    from spe_emu import asm

    real, calls = asm.Ks, []

    class Flaky(real):
        def asm(self, *args, **kwargs):
            calls.append(1)
            if len(calls) <= failures:
                raise keystone.KsError(999)
            return super().asm(*args, **kwargs)

    monkeypatch.setattr(asm, "Ks", Flaky)
    if ok:
        assert assemble("nop") == struct.pack("<I", 0xD503201F)
    else:
        with pytest.raises(asm.AssemblyError, match="Unknown error"):
            assemble("nop")
    assert len(calls) == min(failures + 1, asm.UNKNOWN_ERROR_ATTEMPTS)
    calls.clear()
    monkeypatch.setattr(asm, "Ks", real)
    with pytest.raises(asm.AssemblyError, match="SYMBOL_MISSING"):
        assemble("b nowhere")


def test_pmsver_and_gic_id_fields(tmp_path):
    m = run_asm("mrs x20, id_aa64dfr0_el1\nmrs x21, id_aa64pfr0_el1\nmov x0, #0\n" + EXIT,
                tmp_path)
    assert (xregs(m, 20)[0] >> 32) & 0xF == 1           # PMSVer = 1 (FEAT_SPE)
    assert (xregs(m, 21)[0] >> 24) & 0xF == 1           # GIC = 1 (system register interface)


def test_without_spe_registers_undef_and_pmsver_reads_zero(tmp_path):
    text = """
    adr x0, vectors
    msr vbar_el1, x0
    mrs x20, id_aa64dfr0_el1
    mrs x21, pmsidr_el1
    mov x0, #0
""" + EXIT + """
    .balign 2048
vectors:
    .skip 0x200
    mrs x22, esr_el1
    mrs x23, elr_el1
    add x23, x23, #4
    msr elr_el1, x23
    eret
"""
    m = run_asm(text, tmp_path, spe=SpeConfig(pmsver=0))
    assert (xregs(m, 20)[0] >> 32) & 0xF == 0
    assert xregs(m, 22)[0] == 0x2000000                 # EC 0x00, IL 1: UNDEFINED at EL1
    assert m.result.exit_status == 0


def test_virtual_counter_counts_retired_instructions(tmp_path):
    text = """
    mrs x20, cntvct_el0
    nop
    nop
    nop
    mrs x21, cntpct_el0
    mrs x22, cntfrq_el0
    mov x0, #0
""" + EXIT
    m = run_asm(text, tmp_path)
    assert xregs(m, 21)[0] - xregs(m, 20)[0] == 4       # three NOPs and the first MRS
    assert xregs(m, 20)[0] == 2                         # after the two prologue instructions
    assert xregs(m, 22)[0] == VIRT.counter_hz == 1_000_000_000   # (Armv8.6's fixed rate)


def spe_program(pmscr):
    return f"""
    movz x0, #{BUF >> 16:#x}, lsl #16
    msr pmbptr_el1, x0
    movz x1, #{(BUF + 0x10000) >> 16:#x}, lsl #16
    orr x1, x1, #1
    msr pmblimitr_el1, x1
    mov x2, #0x100
    msr pmsirr_el1, x2
    msr pmsicr_el1, xzr
    movz x7, #0x1234
    msr contextidr_el1, x7
    mov x3, #{pmscr:#x}
    msr pmscr_el1, x3
    movz x4, #3000
    movz x8, #0x4300, lsl #16
loop:
    ldr x5, [x8, x4, lsl #3]
    subs x4, x4, #1
    b.ne loop
""" + SPE_DRAIN


def test_physical_address_and_context_packets(tmp_path):
    # PMSCR_EL1: PA (4), CX (3), E1SPE (1), TS (5).
    m = run_asm(spe_program(0b111010), tmp_path)
    data = bytes(m.uc.mem_read(BUF, xregs(m, 21)[0] - BUF))
    recs = list(iter_records(data))
    loads = [r for r in recs if r.data_va is not None]
    assert loads and all(r.data_pa == r.data_va for r in loads)   # MMU off: PA == VA
    assert all(r.context == 0x1234 for r in recs)
    # Without PA and CX: neither packet.
    m = run_asm(spe_program(0b100010), tmp_path / "2")
    recs = list(iter_records(bytes(m.uc.mem_read(BUF, xregs(m, 21)[0] - BUF))))
    assert recs and all(r.data_pa is None and r.context is None for r in recs)


def test_error_in_a_control_instruction_hook_ends_the_run(tmp_path, monkeypatch):
    # The ERET hooks and the block hook's unmasking watch (after the MSR DAIFClr) call Python
    # natively (not through the binding's hook_add): an exception in one must still end the
    # run with that exception, not be printed and lost.
    from spe_emu.cpu.machine import Machine

    def broken(self, address, cleared):
        raise RuntimeError(f"hook at {address:#x}")

    monkeypatch.setattr(Machine, "_on_unmask", broken)
    with pytest.raises(RuntimeError, match="hook at 0x4"):
        run_asm("msr daifclr, #2\nmov x0, #0\n" + EXIT, tmp_path)
