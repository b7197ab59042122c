"""Synchronous exceptions Unicorn's QEMU 5.0 never raises, raised by spe_emu (issue 13).

Each check costs nothing while its control is off: it is made on a path that is already slow
(a fault QEMU took, an access to no memory), or at a point spe_emu already sees (the ERET
control hook, the run loop's stops, the native block hook's one compare), or by a hook
installed only while the control is on (docs/model.md "Exceptions"):

- Address size faults and synchronous External aborts on a translation table walk: QEMU's
  walker reads zeros from no memory and checks no output address against TCR_ELx.{IPS, PS};
  a translation fault it takes, or an access of a translated address that reaches no memory,
  is walked again by :func:`spe_emu.arch.mmu.walk_fault`, whose verdict replaces QEMU's
  (:meth:`SyncChecks.refine_abort`).
- Illegal Execution state (EC 0x0E): QEMU 5 sets PSTATE.IL on an illegal exception return
  (and on a return with SPSR_ELx.IL == 1) but never raises the exception. The fast loop's
  ERET control hook asks :meth:`SyncChecks.eret_may_set_il` (the ``IllegalExceptionReturn()``
  conditions on SPSR_ELx); when it may, the run stops right after the ERET and
  :meth:`SyncChecks.take_illegal_state` takes the exception if PSTATE.IL is set. The
  reference loop, which sees PSTATE at every instruction, stops at an instruction with
  PSTATE.IL set.
- PC alignment fault (EC 0x22): QEMU 5 fetches at any PC. The fast loop's native block hook
  (counter.c) stops in front of a block at a misaligned address (one more test on its common
  path); the reference loop stops at such an instruction; :meth:`SyncChecks.after_stop`
  takes the fault.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING

from unicorn import UcError

from unicorn import arm64_const as A

from ..arch import mmu
from ..arch.context import HCR_EL2, SCR_EL3, SPSR_ENC, AccessContext
from ..arch.faults import ExternalAbort
from ..sysreg import reg
from .exceptions import ABORT_ISS, EC, ESR, PSTATE, esr

if TYPE_CHECKING:
    from .machine import Machine

# ESR_ELx.EC of the aborts a walk can cause: Instruction / Data Abort, lower / same EL.
ABORT_ECS = {EC.IABORT_LOWER, EC.IABORT_SAME, EC.DABORT_LOWER, EC.DABORT_SAME}
FETCH_ECS = {EC.IABORT_LOWER, EC.IABORT_SAME}
FSC_LEVEL_MASK = 0b11   # the level in a long-descriptor FSC (EncodeLDFSC())
SPSR = reg("SPSR_ELx", SPSR_ENC[1], "IL 20", "M 4:0",
           doc="Arm ARM C5.2.18 SPSR_EL1 (exceptions taken from AArch64): IL, M[4:0]")
# SPSR_ELx.M values of the AArch64 modes -> their Exception level (EL0t, EL1t, EL1h, EL2t,
# EL2h, EL3t, EL3h; ``ELFromSPSR()``): any other value with M[4] == 0 is not a valid mode.
AARCH64_MODES = {0b00000: 0, 0b00100: 1, 0b00101: 1, 0b01000: 2, 0b01001: 2, 0b01100: 3,
                 0b01101: 3}
M_AARCH32 = 0b10000     # SPSR_ELx.M[4] set: a return to AArch32 (decided by QEMU)
ERET_WORD = 0xD69F03E0
INSN_BYTES = 4          # A64 instructions: a PC with bits[1:0] != 0 is misaligned


def eret_sets_il(spsr: int, ctx: AccessContext) -> bool:
    """Whether an ERET at ``ctx.el`` with SPSR_ELx = ``spsr`` leaves PSTATE.IL set, for a
    return to AArch64: SPSR_ELx.IL is set, or ``IllegalExceptionReturn()`` holds (Arm ARM
    ``AArch64.ExceptionReturn()``): M is not a valid AArch64
    mode, the target EL is higher than the current one, EL2 is not enabled (Secure, no
    FEAT_SEL2) for a return to EL2, the target EL (or EL1 for a return to EL0) uses AArch32
    by SCR_EL3.RW / HCR_EL2.RW, or a return to EL1 with EL2 enabled and HCR_EL2.TGE == 1.
    A return to AArch32 (M[4] == 1) counts as may-set: QEMU decides, the caller checks
    PSTATE.IL after the ERET."""
    if SPSR.get(spsr, "IL"):
        return True
    mode = SPSR.get(spsr, "M")
    if mode & M_AARCH32 or mode not in AARCH64_MODES:
        return True
    target = AARCH64_MODES[mode]
    if target > ctx.el or (target == 2 and not ctx.el2_enabled):
        return True
    el1_aarch32 = ((ctx.have_el3 and not SCR_EL3.get(ctx.scr_el3, "RW"))
                   or (ctx.el2_enabled and not HCR_EL2.get(ctx.hcr_el2, "RW")))
    if target == 2 and ctx.have_el3 and not SCR_EL3.get(ctx.scr_el3, "RW"):
        return True
    if target in (0, 1) and el1_aarch32:
        return True
    return target == 1 and ctx.el2_enabled and bool(ctx.tge)


@lru_cache(maxsize=64)
def eret_il_table(ctx: AccessContext) -> tuple[int, int, int, int]:
    """:func:`eret_sets_il` as a table for the native ERET hook (exception.c
    ``spe_eret_hook``): per Exception level of the ERET (index 0-3), a 64-bit mask with bit
    ``SPSR_ELx.IL << 5 | SPSR_ELx.M`` set when such an ERET may leave PSTATE.IL set in
    context ``ctx`` (its ``el`` is ignored). EL0: 0 (ERET is UNDEFINED there)."""
    out = [0]
    for el in (1, 2, 3):
        here = replace(ctx, el=el)
        out.append(sum(1 << (il << 5 | m) for il in (0, 1) for m in range(32)
                       if eret_sets_il(SPSR.make(IL=il, M=m), here)))
    return tuple(out)


class SyncChecks:
    """The machine's checks for the synchronous exceptions listed in the module docstring."""

    def __init__(self, machine: Machine):
        self.m = machine
        # An ERET that may have set PSTATE.IL ran (fast loop), or the reference loop stopped
        # at an instruction with PSTATE.IL set: look at the next stop.
        self.il_pending = False

    # -- Illegal Execution state ----------------------------------------------------------
    def eret_may_set_il(self, address: int) -> bool:
        """From the fast loop's control hook, before the ERET or MSR DAIFSet/DAIFClr at
        ``address`` executes: True (and the check owed at the next stop) when it is an ERET
        that may leave PSTATE.IL set (:func:`eret_sets_il`)."""
        m = self.m
        ctx = m.context()
        if ctx.el == 0 or m._fetch(address, ctx.el) != ERET_WORD:
            return False
        if not eret_sets_il(m.fast.cpr(SPSR_ENC[ctx.el]), ctx):
            return False
        self.il_pending = True
        return True

    def after_stop(self) -> bool:
        """At a run-loop stop, before the instruction at the PC executes: take the exception
        it takes for the state the run left, and say whether one was taken (the loop then
        plans again). In priority order (Arm ARM D1.3.5 "Synchronous exception
        prioritization"):

        - a PC alignment fault when PC[1:0] != 0 (``AArch64.CheckPCAlignment()``,
          ``AArch64.PCAlignmentFault()``): EC 0x22, ISS 0, FAR_ELx = ELR_ELx = the PC. The
          fast loop's native block hook stops in front of a block at a misaligned PC; the
          reference loop stops at the instruction.
        - owed by :attr:`il_pending`, with PSTATE.IL set: the Illegal Execution state
          exception (Arm ARM D1.4.5, ``CheckIllegalState()``): EC 0x0E, ISS 0, ELR = the
          instruction, SPSR_ELx.IL = 1.

        Both are taken to the EL an UNDEFINED instruction would be (EL1 from EL0, EL2 with
        HCR_EL2.TGE); the instruction does not execute (nor count)."""
        m = self.m
        pc = m.pc
        if pc % INSN_BYTES:
            syndrome, far = esr(EC.PC_ALIGN), pc
        elif self.il_pending and PSTATE.get(m.fast.reg(A.UC_ARM64_REG_PSTATE), "IL"):
            syndrome, far = esr(EC.ILLEGAL_STATE), None
        else:
            self.il_pending = False
            return False
        self.il_pending = False
        ctx = m.context()
        if m.cfg.mode != "reference":
            # (the stop is at a block boundary: the instruction at the PC is in no block the
            # native hook counted)
            m.counter.block_insns = 0
        m._take_sync(ctx, m.pe.sync_target(ctx), syndrome, pc, far=far)
        return True

    # -- Address size faults, External aborts on a walk ---------------------------------
    def _descriptor(self, pa: int) -> int:
        """One translation table descriptor at ``pa`` (a walk's read).

        Raises:
            ExternalAbort: no RAM or device at ``pa``.
        """
        try:
            return int.from_bytes(self.m.fast.read(pa, 8), "little")
        except UcError:
            raise ExternalAbort(pa) from None

    def refine_abort(self, ctx, target: int, syndrome: int, va: int | None,
                     *, translated: bool = False) -> tuple[int, int]:
        """(target EL, ESR value) of the abort QEMU took (a translation fault: FSC 0b0001LL)
        or spe_emu took for an access to no memory (``translated``: the access's address came
        out of a stage 1 walk), at ``va``: the Address size fault or External abort on the
        walk that the walk really ends with (``AArch64.S1Walk()``), else unchanged."""
        ec = ESR.get(syndrome, "EC")
        if va is None or ec not in ABORT_ECS:
            return target, syndrome
        fsc = ABORT_ISS.get(syndrome, "FSC")
        if not (translated or fsc & ~FSC_LEVEL_MASK == mmu.FSC_TRANSLATION):
            return target, syndrome
        found = mmu.walk_fault(self.m.fast, va, max(ctx.el, 1), self._descriptor)
        if found is None:
            return target, syndrome
        return self.m.pe.abort(ctx, fetch=ec in FETCH_ECS,
                               write=bool(ABORT_ISS.get(syndrome, "WnR")), fsc=found,
                               external=found & ~FSC_LEVEL_MASK == mmu.FSC_WALK_EXTERNAL)
