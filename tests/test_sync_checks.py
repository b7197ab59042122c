"""The pure rules of spe_emu/cpu/sync_checks.py against the Arm ARM pseudocode they implement
(the programs of tests/test_exception_routing.py check them end to end against QEMU)."""

from __future__ import annotations

import pytest

from spe_emu.arch.context import CPACR_EL1, HCR_EL2, SCR_EL3, AccessContext
from spe_emu.arch.firmware_regs import CPTR_EL2, CPTR_EL3
from spe_emu.cpu.exceptions import EC, esr
from spe_emu.cpu.sync_checks import (FP_TRAP_SYNDROME, fp_trap_routes, may_misalign_sp,
                                     sp_writer_offsets)

# A64 words (aarch64-linux-gnu-as / keystone), and whether each may leave SP misaligned
SP_WRITERS = {
    0xD10043FF: False,   # sub sp, sp, #16
    0xD10023FF: True,    # sub sp, sp, #8
    0xD14007FF: False,   # sub sp, sp, #1, lsl #12
    0x9100013F: True,    # mov sp, x9 (add sp, x9, #0)
    0xA9BF7BFD: False,   # stp x29, x30, [sp, #-16]!
    0xA8C17BFD: False,   # ldp x29, x30, [sp], #16
    0xF81F8FE0: True,    # str x0, [sp, #-8]!
    0x927CEC1F: True,    # and sp, x0, #0xfffffffffffffff0
    0x8B21601F: True,    # add sp, x0, x1, uxtx
}
NOT_SP_WRITERS = (0x910023E0,   # add x0, sp, #8
                  0xF94007E0)   # ldr x0, [sp, #8]


def test_sp_writer_scan():
    """The scan finds every instruction that writes SP with a value that may not be 16-byte
    aligned, and only those (CheckSPAlignment() needs SP misaligned to fault)."""
    words = list(SP_WRITERS) + list(NOT_SP_WRITERS)
    code = b"".join(w.to_bytes(4, "little") for w in words)
    found = {words[off // 4] for off in sp_writer_offsets(code)}
    assert found == {w for w, may in SP_WRITERS.items() if may}
    assert all(may_misalign_sp(w) == may for w, may in SP_WRITERS.items())
    # (not at an unaligned offset: a 2-byte shift finds nothing)
    assert sp_writer_offsets(b"\0\0" + code[:-2]) == ()


NS_EL2 = dict(scr_el3=SCR_EL3.make(NS=1, RW=1), hcr_el2=HCR_EL2.make(RW=1))
OPEN = (CPACR_EL1.make(FPEN=0b11), CPTR_EL2.make(), CPTR_EL3.make())


@pytest.mark.parametrize("cpacr, cptr2, cptr3, hcr, want", [
    # CPACR_EL1.FPEN 0b00: EL0 and EL1 to EL1
    (CPACR_EL1.make(FPEN=0b00), OPEN[1], OPEN[2], None, (1, 1, None, None)),
    # 0b01: EL0 only
    (CPACR_EL1.make(FPEN=0b01), OPEN[1], OPEN[2], None, (1, None, None, None)),
    # CPTR_EL2.TFP: EL0-EL2 to EL2; CPACR first at EL0/EL1
    (OPEN[0], CPTR_EL2.make(TFP=1), OPEN[2], None, (2, 2, 2, None)),
    (CPACR_EL1.make(FPEN=0b00), CPTR_EL2.make(TFP=1), OPEN[2], None, (1, 1, 2, None)),
    # CPTR_EL3.TFP: every EL to EL3
    (OPEN[0], OPEN[1], CPTR_EL3.make(TFP=1), None, (3, 3, 3, 3)),
    # E2H = 1: CPTR_EL2 has CPACR_EL1's layout, FPEN 0b00 traps EL0-EL2
    (OPEN[0], CPACR_EL1.make(FPEN=0b00), OPEN[2], HCR_EL2.make(RW=1, E2H=1), (2, 2, 2, None)),
])
def test_fp_trap_routes(cpacr, cptr2, cptr3, hcr, want):
    """AArch64.CheckFPEnabled(): the EL a SIMD&FP instruction at EL0-EL3 is trapped to."""
    regs = dict(NS_EL2, **({"hcr_el2": hcr} if hcr is not None else {}))
    routes = fp_trap_routes(AccessContext(el=1, **regs), cpacr, cptr2, cptr3)
    assert tuple(r and r[0] for r in routes) == want
    assert {r[1] for r in routes if r} <= {FP_TRAP_SYNDROME}


def test_fp_trap_to_el1_with_tge_is_uncategorized_at_el2():
    """AArch64.AdvSIMDFPAccessTrap(): a trap to EL1 with EL2 enabled and HCR_EL2.TGE == 1
    is taken to EL2 with EC 0x00 (Exception_Uncategorized)."""
    ctx = AccessContext(el=0, scr_el3=NS_EL2["scr_el3"], hcr_el2=HCR_EL2.make(RW=1, TGE=1))
    routes = fp_trap_routes(ctx, CPACR_EL1.make(FPEN=0b00), *OPEN[1:])
    assert routes[0] == (2, esr(EC.UNKNOWN))
    assert FP_TRAP_SYNDROME == esr(EC.FP_ACCESS, 1 << 24 | 0b1110 << 20)
