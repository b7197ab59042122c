"""The processing element's exception and interrupt model: where each exception is routed,
when an interrupt is taken, and the architectural entry itself (Arm ARM D1.3 "Exceptions",
pseudocode ``AArch64.TakeException()``). The run loops (:mod:`spe_emu.cpu.machine`) decide
*when* they look (at their stop points) and account retired instructions; what is taken, to
which Exception level and with which syndrome is decided here.

The PE's interrupt inputs are the interrupt controller's IRQ and FIQ outputs (level
functions); its state is reached through :class:`~spe_emu.cpu.fastuc.FastAccess`.
"""

from __future__ import annotations

from typing import Callable

from .. import native
from ..arch.context import HCR_EL2, SCR_EL3, AccessContext
from ..arch.faults import FSC_SYNC_EXTERNAL_ABORT
from ..sysreg import reg
from .exceptions import (ABORT_ISS, EC, PSTATE, ExceptionEntry,
                         VectorKind, current_pstate, esr, take_exception)
from .fastuc import FastAccess
from .ras import RasRegisters

ISR_EL1 = reg("ISR_EL1", (3, 0, 12, 1, 0), "A 8", "I 7", "F 6", read_only=True,
              doc="Arm ARM D19.2 ISR_EL1")


class ProcessingElement:
    """One PE's exception routing and entry.

    Args:
        mem: the engine's registers (and memory).
        irq, fiq: the interrupt controller's IRQ and FIQ outputs to this PE (levels).
    """

    def __init__(self, mem: FastAccess, irq: Callable[[], bool], fiq: Callable[[], bool]):
        self.mem = mem
        self.irq = irq
        self.fiq = fiq
        self.ras = RasRegisters()
        """The RAS registers (FEAT_RAS: :mod:`spe_emu.cpu.ras`); VSESR_EL2 gives a virtual
        SError its syndrome."""
        self.serror_pending = False
        """A physical SError interrupt is pending (its only source: an External abort on a
        Profiling Buffer write with ``SpeConfig.external_abort == "serror"``, Arm ARM
        D17.8.4.2); cleared when it is taken."""
        self.on_entry: Callable[[int], None] | None = None
        """Called with the target EL after every exception entry this object makes (the
        machine's PSTATE.PM with FEAT_SPE_EXC: Machine._pm_on_entry)."""

    # -- routing ------------------------------------------------------------------------
    @staticmethod
    def sync_target(ctx: AccessContext) -> int:
        """The EL a synchronous exception generated at ``ctx.el`` that no control routes
        elsewhere is taken to (UNDEFINED, aborts): EL1 from EL0 (EL2 with HCR_EL2.TGE),
        else the current EL (Arm ARM D1.3.3)."""
        if ctx.el == 0:
            return 2 if ctx.el2_enabled and ctx.tge else 1
        return ctx.el

    @staticmethod
    def _async_target(ctx: AccessContext, scr_bit: str, hcr_bit: str) -> int:
        """The EL an asynchronous exception is routed to (Arm ARM D1.3.5): EL3 with
        SCR_EL3.<scr_bit>, else EL2 with HCR_EL2.<hcr_bit> or TGE when EL2 is enabled, else
        EL1."""
        if SCR_EL3.get(ctx.scr_el3, scr_bit):
            return 3
        if ctx.el2_enabled and (HCR_EL2.get(ctx.hcr_el2, hcr_bit) or ctx.tge):
            return 2
        return 1

    @classmethod
    def interrupt_target(cls, ctx: AccessContext, kind: VectorKind) -> int:
        """The EL a physical IRQ or FIQ is routed to (SCR_EL3.IRQ/FIQ, HCR_EL2.IMO/FMO)."""
        if kind is VectorKind.IRQ:
            return cls._async_target(ctx, "IRQ", "IMO")
        return cls._async_target(ctx, "FIQ", "FMO")

    @classmethod
    def serror_target(cls, ctx: AccessContext) -> int:
        """The EL a physical SError is routed to (SCR_EL3.EA, HCR_EL2.AMO)."""
        return cls._async_target(ctx, "EA", "AMO")

    def _taken_at(self, target: int, ctx: AccessContext, mask: str) -> bool:
        """Whether an asynchronous exception routed to ``target`` is taken now, PSTATE.<mask>
        masking it as Arm ARM D1.3.6 says (``spe_unmasked()``, the native path's rule)."""
        return native.unmasked(target, ctx.el, current_pstate(self.mem),
                               PSTATE.field(mask).lsb)

    def _physical_serror(self, ctx: AccessContext) -> int | None:
        """The EL the pending physical SError is taken to now (:meth:`_taken_at` with
        PSTATE.A), or None."""
        if not self.serror_pending:
            return None
        target = self.serror_target(ctx)
        return target if self._taken_at(target, ctx, "A") else None

    @staticmethod
    def virtual_serror_pending(ctx: AccessContext) -> bool:
        """A virtual SError is pending for EL1 and EL0: HCR_EL2.VSE with EL2 enabled,
        HCR_EL2.AMO = 1 and TGE = 0 (Arm ARM D1.3.5 "Virtual interrupts"; no other virtual
        SError source exists: the GIC's virtual CPU interface is not modelled)."""
        hcr = ctx.hcr_el2
        return bool(ctx.el2_enabled and HCR_EL2.get(hcr, "VSE") and HCR_EL2.get(hcr, "AMO")
                    and not ctx.tge)

    @staticmethod
    def virtual_interrupt_pending(ctx: AccessContext) -> bool:
        """A virtual IRQ or FIQ is pending for EL1 and EL0: HCR_EL2.VI with IMO, or VF with
        FMO, EL2 enabled and TGE = 0, at EL1 or EL0 (Arm ARM D1.3.5 "Virtual interrupts").
        A wake-up event for WFI even while PSTATE masks it (D1.6.2); Unicorn's QEMU takes
        the interrupt itself."""
        hcr = ctx.hcr_el2
        return bool(ctx.el < 2 and ctx.el2_enabled and not ctx.tge
                    and ((HCR_EL2.get(hcr, "VI") and HCR_EL2.get(hcr, "IMO"))
                         or (HCR_EL2.get(hcr, "VF") and HCR_EL2.get(hcr, "FMO"))))

    def deliverable_interrupt(self, ctx: AccessContext) -> tuple[VectorKind, int] | None:
        """The interrupt that would be taken now, as (IRQ, FIQ or SError, target EL), or None:
        the controller asserts it, it is not routed below the current EL, and PSTATE.I/F masks
        it only when it is taken to the current EL (Arm ARM D1.3.6). FIQ first when both are;
        then a pending virtual SError (:meth:`virtual_serror_pending`), taken to EL1 from EL1
        or EL0 unless PSTATE.A masks it (QEMU 7.2 likewise takes the virtual one last; virtual
        IRQs and FIQs are taken by Unicorn's QEMU itself). A pending physical SError
        (:attr:`serror_pending`) comes before all of them (the order among asynchronous
        exceptions is not architected)."""
        serror = self._physical_serror(ctx)
        if serror is not None:
            return VectorKind.SERROR, serror
        found = self._physical_interrupt(ctx)
        if (found is None and self.virtual_serror_pending(ctx)
                and self._taken_at(1, ctx, "A")):
            return VectorKind.SERROR, 1
        return found

    def _physical_interrupt(self, ctx: AccessContext) -> tuple[VectorKind, int] | None:
        """The physical IRQ or FIQ taken now: asserted, not routed below the current EL, and
        masked by PSTATE.I/F only when taken to the current EL (Arm ARM D1.3.6;
        ``spe_deliverable()``, which the native CPU-interface path uses too). FIQ first."""
        lines = int(self.irq()) | int(self.fiq()) << 1
        if not lines:
            return None
        found = native.deliverable(lines, self.interrupt_target(ctx, VectorKind.IRQ),
                                   self.interrupt_target(ctx, VectorKind.FIQ), ctx.el,
                                   current_pstate(self.mem), PSTATE.field("I").lsb,
                                   PSTATE.field("F").lsb)
        return None if found is None else (VectorKind(found[0]), found[1])

    def isr_el1(self, ctx: AccessContext) -> int:
        """ISR_EL1 (Arm ARM D19.2): I and F show the physical IRQ/FIQ asserted, or, at EL1
        with EL2 enabled and HCR_EL2.IMO/FMO set, the virtual ones HCR_EL2.VI/VF request; A
        shows a pending virtual SError (HCR_EL2.{AMO, VSE}) at EL1 with HCR_EL2.AMO = 1, else
        a pending physical SError (:attr:`serror_pending`)."""
        virtual = ctx.el == 1 and ctx.el2_enabled
        i = (HCR_EL2.get(ctx.hcr_el2, "VI") if virtual and HCR_EL2.get(ctx.hcr_el2, "IMO")
             else self.irq())
        f = (HCR_EL2.get(ctx.hcr_el2, "VF") if virtual and HCR_EL2.get(ctx.hcr_el2, "FMO")
             else self.fiq())
        a = (HCR_EL2.get(ctx.hcr_el2, "VSE") if virtual and HCR_EL2.get(ctx.hcr_el2, "AMO")
             else self.serror_pending)
        return ISR_EL1.make(I=int(i), F=int(f), A=int(a))

    def take_virtual_serror(self, preferred_return: int) -> ExceptionEntry:
        """``AArch64.TakeVirtualSErrorException()``: to EL1, vector +0x180, ESR_EL1 EC 0x2F
        with IL = 1 and IDS, ISS from VSESR_EL2 (FEAT_RAS: Arm ARM D19.2 VSESR_EL2,
        :meth:`RasRegisters.virtual_serror_syndrome`), ELR_EL1 = the instruction not executed;
        HCR_EL2.VSE is cleared (``ClearPendingVirtualSError()``)."""
        hcr = self.mem.cpr(HCR_EL2.encoding.tuple)
        self.mem.set_cpr(HCR_EL2.encoding.tuple, HCR_EL2.set(hcr, "VSE", 0))
        return self._enter(1, VectorKind.SERROR, preferred_return,
                           esr(EC.SERROR, self.ras.virtual_serror_syndrome()))

    def take_serror(self, ctx: AccessContext, preferred_return: int) -> ExceptionEntry:
        """Take the SError :meth:`deliverable_interrupt` found: the pending physical one
        (``AArch64.TakePhysicalSErrorException()``: to :meth:`serror_target`, vector +0x180,
        ESR_ELx EC 0x2F with IL = 1 and ISS 0 -- IDS = 0 and DFSC 0b000000, "Uncategorized
        error" with FEAT_RAS (Arm ARM D19.2 ISS encoding for an SError interrupt), so AET and
        EA are RES0 --, ELR_ELx = the instruction not executed; the pending state is cleared),
        else the virtual one (:meth:`take_virtual_serror`)."""
        target = self._physical_serror(ctx)
        if target is None:
            return self.take_virtual_serror(preferred_return)
        self.serror_pending = False
        return self._enter(target, VectorKind.SERROR, preferred_return, esr(EC.SERROR))

    def external_abort(self, ctx: AccessContext, *, fetch: bool, write: bool
                       ) -> tuple[int, int]:
        """(target EL, ESR value) of the synchronous External abort of an access that reached
        no memory or device (Arm ARM D1.3.4): an Instruction Abort for a fetch (EC 0x20 from a
        lower EL, 0x21 without a change of EL), a Data Abort otherwise (EC 0x24/0x25, WnR for
        a store); FSC 0b010000, ISV = 0. Routed to EL3 when SCR_EL3.EA is set, else as
        :meth:`sync_target` (D19.2 ISS encoding for an exception from an abort)."""
        return self.abort(ctx, fetch=fetch, write=write, fsc=FSC_SYNC_EXTERNAL_ABORT,
                          external=True)

    def abort(self, ctx: AccessContext, *, fetch: bool, write: bool, fsc: int,
              external: bool) -> tuple[int, int]:
        """(target EL, ESR value) of a stage 1 Instruction Abort (``fetch``) or Data Abort with
        status ``fsc`` (Arm ARM D19.2 ISS encoding for an exception from an abort; ISV = 0,
        WnR for a write): to EL3 when it is an External abort (``external``, including one on
        a translation table walk) and SCR_EL3.EA is set, else as :meth:`sync_target`; EC 0x20
        / 0x24 from a lower EL, 0x21 / 0x25 without a change of EL (``AArch64.Abort()``)."""
        target = (3 if external and SCR_EL3.get(ctx.scr_el3, "EA")
                  else self.sync_target(ctx))
        lower = target > ctx.el
        if fetch:
            ec = EC.IABORT_LOWER if lower else EC.IABORT_SAME
            iss = ABORT_ISS.make(FSC=fsc)
        else:
            ec = EC.DABORT_LOWER if lower else EC.DABORT_SAME
            iss = ABORT_ISS.make(FSC=fsc, WnR=int(write))
        return target, esr(ec, iss)

    # -- entry --------------------------------------------------------------------------
    def take(self, target: int, kind: VectorKind, preferred_return: int,
             syndrome: int | None = None, far: int | None = None) -> ExceptionEntry:
        """Enter the exception (``AArch64.TakeException()``; FAR_ELx = ``far`` when given)."""
        return self._enter(target, kind, preferred_return, syndrome, far)

    def _enter(self, target: int, kind: VectorKind, preferred_return: int,
               syndrome: int | None = None, far: int | None = None) -> ExceptionEntry:
        entry = take_exception(self.mem, target, kind, preferred_return=preferred_return,
                               syndrome=syndrome, far=far)
        if self.on_entry is not None:
            self.on_entry(target)
        return entry
