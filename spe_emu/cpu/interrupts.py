"""Asynchronous exceptions and the SPE exceptions of the PE: whether the GIC asserts IRQ or
FIQ or an SError (physical, or virtual by HCR_EL2.VSE) is pending, taking a deliverable one
at a stop (Arm ARM D1.3), PMBIRQ from the Profiling Buffer, and FEAT_SPE_EXC: PSTATE.PM on
exception entry and return and the SPE Profiling exception (Arm ARM D1.4, D17.8).

:class:`Interrupts` is a part of :class:`spe_emu.cpu.machine.Machine` (its attributes are the
machine's)."""

from __future__ import annotations

from unicorn import arm64_const as A

from ..spe import exc as spe_exc
from .exceptions import SPSR_ENC, VectorKind, esr
from .sync_checks import PSTATE_EL, SPSR


class Interrupts:
    """The machine's interrupt and SPE exception delivery (see the module's docstring)."""

    def _spu_serror(self) -> None:
        """An External abort on a Profiling Buffer write is a physical SError exception
        (``SpeConfig.external_abort == "serror"``, Arm ARM D17.8.4.2): pending from now on,
        taken at the next stop where PSTATE.A and the routing allow it."""
        self.exc.serror_pending = True
        self._device_changed()

    def _pmbirq(self, level: bool) -> None:
        self._pmbirq_input(level)
        self._irq_line_value = None
        self._python_controls()
        if self.spu.exception_may_be_pending():   # (FEAT_SPE_EXC: _take_spe_exception)
            self.replan = True
            self._stop_at_block_boundary()

    def _pm_on_entry(self, target: int) -> None:
        """FEAT_SPE_EXC, after every exception entry (ProcessingElement.on_entry): PSTATE.PM
        := 1, its old value in SPSR_ELx.PM (Arm ARM D1.4), which QEMU does not know; restored
        by the exception return (:meth:`_restore_pm`). Every entry goes through Python while
        the feature is configured (the native INTR and GIC paths are off). A handler written
        at run time (its vector table not in a loaded image) has its ERETs hooked from here,
        as an SPE register access does for a driver (:meth:`_follow_runtime_code`): the
        pages around the vector entered."""
        enc = SPSR_ENC[target]
        self.fast.set_cpr(enc, SPSR.set(self.fast.cpr(enc), "PM", self.spu.pstate_pm))
        self.spu.pstate_pm = 1
        self._python_controls()
        if self.cfg.mode == "fast" and self._hooks_installed:
            self._follow_runtime_code(self.pc)

    def _restore_pm(self) -> None:
        """Before an ERET while PSTATE.PM is 1 (FEAT_SPE_EXC): PSTATE.PM := SPSR_ELx.PM of
        the current EL (Arm ARM D1.4), which QEMU's exception return does not restore."""
        el = PSTATE_EL.get(self.fast.reg(A.UC_ARM64_REG_PSTATE))
        if el:
            self.spu.pstate_pm = SPSR.get(self.fast.cpr(SPSR_ENC[el]), "PM")

    def _take_spe_exception(self) -> bool:
        """FEAT_SPE_EXC: take the SPE Profiling exception when one is pending and unmasked
        (``CheckForSPEException()``, Arm ARM D17.8): ESR_ELx.EC 0b111101, ISS.FSC 0b00001
        (Profiling Buffer management event), SYNC 0, IL 1; the synchronous vector (offset
        0x0) of the target's table; ELR_ELx = the next instruction not executed. Checked at
        the run loops' stops: one follows each PMBSR_ELx.S change (:meth:`_pmbirq`), each
        write of a control it depends on, and each exception return while a PMBSR_ELx.S is 1
        (:meth:`_replan_owed`). True if it was taken."""
        if not self.spu.exception_may_be_pending():
            return False
        ctx = self.context()
        target = self.spu.exception_target(ctx)
        if target is None:
            return False
        syndrome = esr(spe_exc.ESR_EC_PROFILING, spe_exc.ISS_SPE_EXCEPTION)
        self.exc.take(target, VectorKind.SYNC, self.pc, syndrome)   # (PSTATE.PM: _pm_on_entry)
        self.pe.forget_context()
        self.pe.py_exceptions_taken += 1
        self.counter.pmu_exceptions += 1   # (EXC_TAKEN: the PMU)
        if self.exception_observer is not None:
            self.exception_observer(VectorKind.SYNC, target, syndrome)
        return True

    def _irq_line(self) -> bool:
        """Whether the GIC asserts IRQ or FIQ to the PE or a physical or virtual SError
        (HCR_EL2.VSE) is pending, recomputed only after GIC state or HCR_EL2/SCR_EL3 may have
        changed (the native CPU-interface path marks the GIC's state dirty)."""
        if self._irq_line_value is None or self._gic_state.dirty:
            self._gic_state.dirty = 0
            self._irq_line_value = (self.gic_cpu.irq_line() or self.gic_cpu.fiq_line()
                                    or self._serror_line())
        return self._irq_line_value

    def _serror_line(self) -> bool:
        """Whether a physical or virtual SError (HCR_EL2.VSE) is pending (part of
        :meth:`_irq_line` that the GIC does not drive)."""
        return self.exc.serror_pending or self.exc.virtual_serror_pending(self.context())

    def _deliverable_interrupt(self) -> tuple[VectorKind, int] | None:
        """(IRQ or FIQ, target EL) of the interrupt the PE would take now, or None."""
        if not self._irq_line():
            return None
        return self.exc.deliverable_interrupt(self.context())

    def _deliverable_irq_target(self) -> int | None:
        """The EL a pending interrupt would be taken to now, or None."""
        found = self._deliverable_interrupt()
        return None if found is None else found[1]

    def _deliver_irq(self) -> bool:
        """Take a pending, deliverable IRQ or FIQ; True if one was taken."""
        found = self._deliverable_interrupt()
        if found is None:
            return False
        kind, target = found
        if kind is VectorKind.SERROR:
            self.exc.take_serror(self.context(), self.pc)
            self._irq_line_value = None  # (HCR_EL2.VSE or the physical SError cleared)
            self.pe.forget_context()
        else:
            # (an IRQ or FIQ entry changes only PSTATE, whose EL context() reads live)
            self.exc.take(target, kind, self.pc)
        self.pe.py_irqs_taken += 1
        self.counter.pmu_exceptions += 1   # (EXC_TAKEN: the PMU)
        if self.exception_observer is not None:
            self.exception_observer(kind, target, None)
        return True
