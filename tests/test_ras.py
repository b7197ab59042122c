"""FEAT_RAS without error records (spe_emu.cpu.ras): the RAS registers' declarations, access
checks and DISR_EL1 redirection against the Arm ARM (D19.2 DISR_EL1, VDISR_EL2, VSESR_EL2;
ERRIDR_EL1), and the virtual SError's syndrome from VSESR_EL2
(``AArch64.TakeVirtualSErrorException()``), on spe_emu alone. The same syndromes on QEMU 7.2:
tests/baremetal/exc_virq.S cases 0x120b-0x1211 (tests/test_exception_routing.py)."""

from __future__ import annotations

import pytest
from asmrun import EXIT, mov64, run_asm, xregs

from spe_emu.arch.context import HCR_EL2, SCR_EL3, AccessContext
from spe_emu.arch.id_regs import ID_AA64PFR0_EL1
from spe_emu.cpu.exceptions import ESR, PSTATE
from spe_emu.cpu.ras import RAS_REGISTERS, RasRegisters, redirect
from spe_emu.sysreg import Access

MODES = ("fast", "reference")


def ctx(el: int, *, amo: int = 0, tge: int = 0, e2h: int = 0, ea: int = 0, ns: int = 1,
        have_el2: bool = True) -> AccessContext:
    return AccessContext(el, have_el2=have_el2,
                         scr_el3=SCR_EL3.make(NS=ns, RW=1, EA=ea),
                         hcr_el2=HCR_EL2.make(RW=1, AMO=amo, TGE=tge, E2H=e2h))


def test_declarations_are_the_architectures():
    # (op0, op1, CRn, CRm, op2) and fields, Arm ARM D19.2
    want = {"ERRIDR_EL1": ((3, 0, 5, 3, 0), 0xFFFF),
            "VSESR_EL2": ((3, 4, 5, 2, 3), 0x1FF_FFFF),             # IDS [24], ISS [23:0]
            "DISR_EL1": ((3, 0, 12, 1, 1), 0x8000_0000 | 0x1FF_FFFF),  # A [31], IDS, ISS
            "VDISR_EL2": ((3, 4, 12, 1, 1), 0x8000_0000 | 0x1FF_FFFF)}
    assert {s.name: (s.encoding.tuple, s.field_mask) for s in RAS_REGISTERS} == want
    assert RAS_REGISTERS["ERRIDR_EL1"].read_only and RAS_REGISTERS["ERRIDR_EL1"].reset == 0


@pytest.mark.parametrize("el", range(4))
def test_access_checks(el):
    for name in ("VSESR_EL2", "VDISR_EL2"):           # EL2 and EL3 only (no FEAT_NV)
        for is_read in (True, False):
            assert RAS_REGISTERS[name].check(ctx(el), is_read) is (
                Access.OK if el >= 2 else Access.UNDEFINED)
    for name in ("DISR_EL1", "ERRIDR_EL1"):           # EL1 and up
        assert RAS_REGISTERS[name].check(ctx(el), True) is (
            Access.OK if el >= 1 else Access.UNDEFINED)


@pytest.mark.parametrize("context, want", [
    (ctx(1), "DISR_EL1"),
    (ctx(1, amo=1), "VDISR_EL2"),                     # EL1 with HCR_EL2.AMO: VDISR_EL2
    (ctx(1, tge=1), "VDISR_EL2"),                     # TGE = 1, E2H = 0: AMO behaves as 1
    (ctx(1, amo=1, tge=1, e2h=1), "DISR_EL1"),        # TGE = E2H = 1: AMO behaves as 0
    (ctx(1, amo=1, ns=0), "DISR_EL1"),                # Secure: EL2 not enabled
    (ctx(2, amo=1), "DISR_EL1"),                      # AMO redirects EL1 accesses only
    (ctx(1, ea=1), None), (ctx(2, ea=1), None),       # SCR_EL3.EA: RAZ/WI below EL3
    (ctx(3, ea=1), "DISR_EL1"),
    (ctx(1, amo=1, ea=1), "VDISR_EL2"),
])
def test_disr_el1_redirection(context, want):
    assert redirect("DISR_EL1", context) == want


def test_el2_registers_are_res0_at_el3_without_el2():
    ras = RasRegisters()
    ras.sysreg_write("VSESR_EL2", 0x11, ctx(3, have_el2=False))
    assert ras.sysreg_read("VSESR_EL2", ctx(3, have_el2=False)) == 0
    assert ras.sysreg_read("VSESR_EL2", ctx(3)) == 0


def test_vsesr_el2_holds_ids_and_iss_and_gives_the_syndrome():
    ras = RasRegisters()
    ras.sysreg_write("VSESR_EL2", (1 << 63) | 0x11, ctx(2))
    assert ras.sysreg_read("VSESR_EL2", ctx(3)) == 0x11                    # RES0 bits dropped
    assert ESR.make(EC=0x2F, IL=1, ISS=ras.virtual_serror_syndrome()) == 0xBE00_0011
    ras.sysreg_write("VSESR_EL2", ~0, ctx(2))
    assert ras.virtual_serror_syndrome() == (1 << 24) | 0xFF_FFFF           # IDS, ISS


def serror_program(vsesr: int) -> str:
    """Boot at EL2: VSESR_EL2 = ``vsesr`` (read back into x23), HCR_EL2.{RW, AMO, VSE} = 1,
    ERET to EL1h with PSTATE.A = 0: the virtual SError is taken at once; the EL1 handler at
    +0x380 reads ESR_EL1 into x21 and ID_AA64PFR0_EL1 into x22 (exit 0); no SError: exit 1."""
    spsr = PSTATE.make(EL=1, SP=1, D=1, A=0, I=1, F=1)
    return (mov64("x1", vsesr) + "    msr s3_4_c5_c2_3, x1\n    mrs x23, s3_4_c5_c2_3\n"
            "    adr x0, vectors\n    msr vbar_el1, x0\n"
            + mov64("x0", HCR_EL2.make(RW=1, AMO=1, VSE=1)) + """    msr hcr_el2, x0
    movz x7, #0x4100, lsl #16
    msr sp_el1, x7
    adr x5, el1
    msr elr_el2, x5
""" + mov64("x6", spsr) + """    msr spsr_el2, x6
    eret
el1:
    nop
    mov x0, #1
""" + EXIT + """
    .balign 2048
vectors:
    .skip 0x380
    mrs x21, esr_el1
    mrs x22, id_aa64pfr0_el1
    mov x0, #0
""" + EXIT)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vsesr, want", [(0x11, 0xBE00_0011), (0, 0xBE00_0000),
                                         ((1 << 24) | 0xABCDEF, 0xBFAB_CDEF)])
def test_virtual_serror_takes_its_syndrome_from_vsesr_el2(tmp_path, mode, vsesr, want):
    # Arm ARM AArch64.TakeVirtualSErrorException() with FEAT_RAS: ESR_EL1 = EC 0x2F, IL 1,
    # IDS and ISS from VSESR_EL2 (0xbe000011 for VSESR_EL2 = 0x11, as QEMU 7.2 gives)
    m = run_asm(serror_program(vsesr), tmp_path, boot_el=2, mode=mode)
    assert m.result.exit_status == 0, "virtual SError not taken"
    vsesr_read, esr, pfr0 = xregs(m, 23, 21, 22)
    assert (vsesr_read, esr) == (vsesr, want)
    assert ID_AA64PFR0_EL1.get(pfr0, "RAS") == 0b0001      # FEAT_RAS presented
    assert m.exc.ras.values["VSESR_EL2"] == vsesr


def test_vsesr_el2_undefined_at_el1(tmp_path):
    # UNDEFINED below EL2: ESR_EL1 EC 0x00
    text = """
    adr x0, vectors
    msr vbar_el1, x0
    mrs x20, s3_4_c5_c2_3
    mov x0, #1
""" + EXIT + """
    .balign 2048
vectors:
    .skip 0x200
    mrs x21, esr_el1
    mov x0, #0
""" + EXIT
    m = run_asm(text, tmp_path, boot_el=1)
    assert m.result.exit_status == 0
    assert xregs(m, 21) == [ESR.make(EC=0, IL=1)]
