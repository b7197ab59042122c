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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from unicorn import UcError

from ..arch import mmu
from ..arch.faults import ExternalAbort
from .exceptions import ABORT_ISS, EC, ESR

if TYPE_CHECKING:
    from .machine import Machine

# ESR_ELx.EC of the aborts a walk can cause: Instruction / Data Abort, lower / same EL.
ABORT_ECS = {EC.IABORT_LOWER, EC.IABORT_SAME, EC.DABORT_LOWER, EC.DABORT_SAME}
FETCH_ECS = {EC.IABORT_LOWER, EC.IABORT_SAME}
FSC_LEVEL_MASK = 0b11   # the level in a long-descriptor FSC (EncodeLDFSC())


class SyncChecks:
    """The machine's checks for the synchronous exceptions listed in the module docstring."""

    def __init__(self, machine: Machine):
        self.m = machine

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
