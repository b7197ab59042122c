"""Unicorn's emu_start exit at EL0 (Machine._unicorn_exit).

Unicorn 2 stops a run at its ``until`` address by translating a WFI there; at EL0 with
SCTLR_EL1.nTWI == 0 (Linux's setting) QEMU raises that WFI as a
trapped WFI (ESR_ELx.EC 0x01) of the instruction before the exit. The fast run loop uses such
exits to run exactly to a planned instruction (samples, clock deadlines); the guest must see
neither an exception nor a skipped instruction, only the run stopping at the exit. A real WFI
at EL0 still traps to EL1 with EC 0x01.
"""

from __future__ import annotations

from unicorn import arm64_const as A

from asmrun import BASE, EXIT, asm_machine
from spe_emu.cpu.exceptions import EC, ESR, PSTATE
from spe_emu.cpu.machine import NEVER

PROGRAM = """
    mrs x0, sctlr_el1
    bic x0, x0, #0x10000        // SCTLR_EL1.nTWI = 0: WFI at EL0 traps to EL1
    msr sctlr_el1, x0
    adr x0, vectors
    msr vbar_el1, x0
    adr x1, el0
    msr elr_el1, x1
    msr spsr_el1, xzr           // EL0t, DAIF clear
    mov x3, #0
    eret
el0:
    add x3, x3, #1
    add x3, x3, #1
    add x3, x3, #1
    wfi
    add x3, x3, #1
    svc #0
    .balign 2048
vectors:
    .skip 0x400                 // synchronous, lower EL: exit with ESR_EL1.EC
    mrs x0, esr_el1
    lsr x0, x0, #26
""" + EXIT


def _run_to(m, until):
    """emu_start towards ``until`` again after each stop a hook asks for (an MSR SCTLR_EL1
    stops the run at its block's end), at most a few times."""
    for _ in range(8):
        m.checks.after_stop()
        m.counter.stop_at = NEVER
        m._start(m.pc, until)
        if m.pc == until or m.exit is not None:
            return


def _labels(m):
    # el0 is the 11th instruction after asm_machine's two-instruction prologue
    return BASE + 4 * (2 + 10)


def test_exit_at_el0_is_not_a_trapped_wfi(tmp_path):
    m = asm_machine(PROGRAM, tmp_path)
    el0 = _labels(m)
    _run_to(m, el0 + 8)           # ERET at EL1, then two instructions at EL0
    pstate = m.uc.reg_read(A.UC_ARM64_REG_PSTATE)
    assert (m.pc, PSTATE.get(pstate, "EL")) == (el0 + 8, 0)
    assert m.uc.reg_read(A.UC_ARM64_REG_X3) == 2
    assert m.uc.reg_read(A.UC_ARM64_REG_ESR_EL1) == 0   # no exception was taken
    _run_to(m, el0 + 12)           # one more: the exit right before the guest's WFI
    assert (m.pc, m.uc.reg_read(A.UC_ARM64_REG_X3)) == (el0 + 12, 3)
    m.run()                            # the guest's own WFI at EL0 traps (EC 0x01)
    assert m.exit.status == EC.WFX
    assert ESR.get(m.uc.reg_read(A.UC_ARM64_REG_ESR_EL1), "EC") == EC.WFX
    assert m.uc.reg_read(A.UC_ARM64_REG_ELR_EL1) == el0 + 12
