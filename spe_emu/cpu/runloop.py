"""The run loops and the stops they plan (docs/model.md "Run loops"): "fast", where the
native block hook counts instructions and stops in front of the block that holds the next
stop point (a sample the hook cannot capture, a clock event, the budget, a masked-interrupt
poll, a debugger's stop), "raw" (no SPE model: the same loop with the budget, clock events
and interrupts only) and "reference", a Python hook on every instruction (the oracle the
fast loop is checked against); starting Unicorn and taking what stopped it (an access to no
memory, a watchpoint hit, an exception raised in a hook), WFI waits on virtual time, and the
run's result.

:class:`RunLoops` is a part of :class:`spe_emu.cpu.machine.Machine` (its attributes are the
machine's)."""

from __future__ import annotations

import ctypes
import threading
import weakref
from dataclasses import asdict
from typing import Callable

from unicorn import UC_ERR_FETCH_UNMAPPED, UC_ERR_READ_UNMAPPED, UC_ERR_WRITE_UNMAPPED, Uc, UcError
from unicorn import arm64_const as A
from unicorn.unicorn_const import UC_CTL_IO_READ, UC_CTL_IO_WRITE, UC_CTL_TB_FLUSH

from ..arch import INSN_BYTES
from ..arch.faults import TranslationFault
from ..errors import GuestError, GuestRunaway, RunInterrupted
from ..native import UC_CTL_EXIT_ON_YIELD
from .config import NEVER, RunResult
from .exceptions import PSTATE
from .prediction import PREDICT_END, PREDICT_NEXT_PC
from .sync_checks import ERET_WORD, PSTATE_EL
from .traps import WFI_WORD

PSTATE_IL = PSTATE.field("IL")
SUMMED = ("instructions", "population", "samples", "records_written", "bytes_written",
          "filtered_out", "management_events", "irqs_taken", "exceptions_taken")
"""The counts of a several-PE machine's result that are sums over its PEs."""
MASKED_IRQ_POLL = 4096   # instructions between checks while an interrupt is asserted but masked
UNMAPPED_ERRORS = {UC_ERR_READ_UNMAPPED, UC_ERR_WRITE_UNMAPPED, UC_ERR_FETCH_UNMAPPED}


_RUNNING: "weakref.WeakSet[RunLoops]" = weakref.WeakSet()
"""The machines whose :meth:`RunLoops.run` is in progress (:func:`interrupt_running`), changed
and read under :data:`_RUNNING_LOCK` (the reader is another thread)."""
_RUNNING_LOCK = threading.Lock()


def interrupt_running(signum: int) -> None:
    """Ask every run in progress to stop (:meth:`RunLoops.interrupt`): each raises
    :class:`~spe_emu.errors.RunInterrupted` from its ``run`` at its next block boundary.
    Callable from any thread (``spe-emu run``'s signal watcher calls it for SIGINT and
    SIGTERM, again until the run has stopped: the run loop may overwrite the stop point as it
    plans its own)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for m in running:
        m.interrupt(signum)


class RunLoops:
    """The machine's run loops (see the module's docstring)."""

    def interrupt(self, signum: int) -> None:
        """Stop the run from outside (a signal, another thread): every PE stops in front of
        its next block (the fast and raw loops: the native block hook at ``stop_at``) or
        instruction (the reference loop: its instruction hook at ``_ref_deadline``), which is
        not counted, and :meth:`run` raises RunInterrupted naming ``signum`` there, after what
        the stop hands over (device output) is taken, so that what the run collected can be
        written. The run loop may overwrite the stop point as it plans its own: the caller
        asks again until the run has stopped (:func:`interrupt_running`)."""
        for m in (self.smp.machines if self.smp is not None else (self,)):
            m._interrupted = signum
            if m.cfg.mode == "reference":
                m._ref_deadline = 0   # (its stop_requested waits for a deliverable interrupt)
            else:
                m._stop_at_block_boundary()

    def _check_interrupted(self) -> None:
        """Raise RunInterrupted if :meth:`interrupt` asked the run to stop (at the next run
        of the engine, and in the waits on virtual time, which may never end by themselves)."""
        if self._interrupted:
            count = (f"of PE {self.index}, after {self.insns()} of its instructions"
                     if self.smp is not None or self.index else
                     f"after {self.insns()} instructions")
            raise RunInterrupted(self._interrupted, f"at PC {self.pc:#x} {count}")

    def _device_changed(self) -> None:
        """A device changed state the run loop acts on (an interrupt level, an event on the
        clock): re-plan, and stop at the next block boundary when an interrupt is now
        asserted or an event is due before the planned stop (devices are accessed from
        inside a run, through MMIO or system registers, or at a stop, from a clock event)."""
        self.replan = True
        self._irq_line_value = None
        if self._irq_line():
            # (an interrupt asserted now may be let in by the next DAIF write or ERET; with
            # every line low, those find nothing more to do than before the change)
            self._python_controls()
        if not self._hooks_installed or self.cfg.mode == "raw":
            # (raw: no instruction count to stop by; uc_emu_stop from an MMIO callback would
            # restart the access. The change is seen at the next stop.)
            return
        fast = self.cfg.mode == "fast"
        planned = max(self.insns(), self.counter.stop_at) if fast else self._ref_deadline
        deadline = self.clock.next_deadline_insns()
        if fast and self.counter.poll_at != NEVER and deadline < self.counter.unpolled_at:
            # (the native hook may find the planned poll moot and run on to unpolled_at,
            # which must not pass the new event)
            self.counter.unpolled_at = max(deadline, self.counter.insns)
        if not (self._irq_line() or (deadline != NEVER and deadline < planned)):
            return
        self._stop_at_block_boundary()
        if not fast:
            self._ref_deadline = 0  # stop at the next instruction: the clock may have news

    def _stop_at_block_boundary(self) -> None:
        """Stop the run at the next block boundary: the fast and raw loops' native block hook
        stops once the instruction count reaches ``counter.stop_at``; the reference loop
        (:meth:`_on_every_insn`) stops at its next instruction if an interrupt is then
        deliverable (it re-derives everything else at every instruction)."""
        if self.cfg.mode == "reference":
            self.pe.stop_requested = True
        else:
            self.counter.stop_at = min(self.counter.stop_at, self.counter.insns)
            self.counter.poll_at = NEVER   # (a stop asked for is never a moot poll)

    def debug_break_before(self, addr: int) -> int:
        """A debugger's breakpoint or watchpoint at the instruction at ``addr``, which has
        not executed (called from a code hook at ``addr``, or at the stop after a watchpoint
        hit undid it): the block the native hook counted ends before it, a pending or captured
        sample at or after it is dropped (planned again: it is taken when the instruction
        runs), the population is accounted up to it, and the run stops there for
        :attr:`debug_hook`. Fast and raw loops only. Returns the instructions retired before
        ``addr`` (the count the guest's counters see at the stop)."""
        c = self.counter
        index = self._insn_index(addr)
        if index:
            self._catch_up(index - 1, addr)
        dropped = c.insns - index
        if dropped:
            c.block_insns -= dropped
            c.insns = index
        if c.block_insns == 0:
            c.block_start = NEVER   # (no instruction of that block ran: no WFI before the PC)
        self._account(index)
        self.debug_stop_at = min(self.debug_stop_at, index)
        self._request_stop()
        return index

    def _feed_branch(self, last: int, address: int) -> None:
        """Reference loop, model_feed "every": the instruction run last, at ``last``, was
        followed by the one at ``address``; a branch trains the predictor with that outcome,
        as the block hook's ``feed_branch`` (counter.c) does with the branch that ends a
        block, and classified by the same encodings (``Model.classify``)."""
        kind = self._ref_sites.get(last)
        model = self.spu.builder.model
        if kind is None:
            try:
                kind = model.classify(self._fetch(last, self.pe.live_context().el))
            except TranslationFault:
                return
            self._ref_sites[last] = kind
        if kind:
            mispredicted = model.branch(kind, last, address, address != last + INSN_BYTES)
            c = self.counter   # (the PMU's sources, as feed_branch counts them)
            c.pmu_branches += 1
            c.pmu_mispredicts += mispredicted

    def _on_every_insn(self, uc: Uc, address: int, size: int, _data) -> None:
        """Reference mode: one population step per instruction, in Python. The Exception level
        is read from PSTATE at every instruction; whether profiling is enabled at each EL is
        re-derived whenever a hook reported a change of control state."""
        pe = self.pe
        if self.watchpoints.dirty:  # (installed again before this instruction: _start)
            uc.emu_stop()
            return
        if pe.stop_requested or self._irq_line():
            # (every instruction while an interrupt is asserted: the unmasking MSR DAIFClr or
            # ERET may be in code no control hook covers)
            pe.stop_requested = False
            if self._deliverable_irq_target() is not None:
                uc.emu_stop()
                return
        if (self._spe_exc_on and self.spu.exception_may_be_pending()
                and self.spu.exception_target(self.context()) is not None):
            uc.emu_stop()   # (every instruction while one is pending: _take_spe_exception)
            return
        if pe.ref_insns >= self.budget:
            self._budget_spent = True
            uc.emu_stop()
            return
        if pe.ref_insns >= self._ref_deadline:  # an event on the clock is due
            self._ref_deadline = NEVER
            uc.emu_stop()
            return
        pstate = uc.reg_read(A.UC_ARM64_REG_PSTATE)
        if (self._spe_exc_on and self.spu.pstate_pm
                and self._fetch(address, PSTATE_EL.get(pstate)) == ERET_WORD):
            self._restore_pm()
        if PSTATE_IL.get(pstate) or address % INSN_BYTES:
            # Illegal Execution state or a misaligned PC: taken at the stop (SyncChecks)
            self.checks.il_pending = True
            uc.emu_stop()
            return
        if self._pbt_on and address != self._last_insn + 4:   # (a taken branch)
            self._ref_pbt = (address, pe.ref_insns + 1)
        if self._feeding and not self._feed_paused and self._last_insn >= 0:
            self._feed_branch(self._last_insn, address)
        pe.ref_insns += 1
        self._last_insn = address
        index = pe.ref_insns - 1
        table = self._ref_enabled
        if table is None:
            ctx = pe.live_context()
            table = self._ref_enabled = {
                el: self.spu.profiling_enabled(ctx.at_el(el)) for el in range(4)}
        el = PSTATE_EL.get(pstate)
        if self.counter.pmu_on:
            self.pmu_feed.reference_step(el, index)
        now = table[el]
        if (pe.pmu_bucket[0] if pe.pmu_bucket else None) != (el if now else None):
            pe.pmu_events.accrue(pe.pmu_bucket)
            pe.pmu_bucket = (el, pe.live_context().at_el(el).is_secure) if now else None
        if now and not self.enabled:
            self.spu.interval.initialize(self.spu.regs["PMSIRR_EL1"])
            self.spu.rules.profiling_started()
            self._pbt_since = index
        self.enabled = now
        self.acct = index
        if now and self.spu.interval.members_to_next_event() == 1:
            self._member_selected(index)
        else:
            self._account(index + 1)
        if address in self._psb_addresses:
            self.spu.rules.psb_csync(now)
            if self.sync_observer is not None and now:
                # (records are written at once here; observed after the PSB CSYNC's own
                # sample, as the fast hook, which runs after a capture at its own instruction)
                self.sync_observer("psb", index)

    def run(self, progress: Callable[[int], None] | None = None) -> RunResult:
        """Run until the guest exits through semihosting.

        Raises:
            GuestRunaway: more than ``max_insns`` instructions.
            GuestError: an unhandled Unicorn error (unmapped fetch, ...), or the PE waits for
                an interrupt that can never come.
            RunInterrupted: :meth:`interrupt` (a signal) stopped it.
        """
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        try:
            if self.smp is not None:
                self.smp.run(progress)
            else:
                self.run_slice(progress)
            return self._result()
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(self)
            # (also when the run ends with an error: what the guest wrote is kept)
            self.close()

    def run_slice(self, progress: Callable[[int], None] | None = None) -> None:
        """Run this PE until the guest exits, its instruction count reaches
        :attr:`yield_at` (its time slice on a several-PE machine: :mod:`.smp`), or, on such a
        machine, it waits in WFI (:attr:`PeCore.parked`); raises as :meth:`run` does."""
        self._slice_start = self.insns()
        self.yielded = False
        if self.cfg.mode == "reference":
            self._run_reference(progress)
        elif self.cfg.mode == "raw":
            self._run_raw()
        else:
            self._run_fast(progress)

    def exit_on_yield(self, on: bool) -> None:
        """Several PEs: whether the PE's slice ends when it yields (a WFE or YIELD hint,
        which QEMU raises as EXCP_YIELD; patches/unicorn/0013 UC_CTL_EXIT_ON_YIELD), as QEMU's
        round-robin loop then runs the next vCPU: a PE that waits for an event in WFE lets
        the PEs that will send it run instead of spinning for the rest of its slice. The
        slice ends at the hint (:attr:`yielded`). Nothing with Unicorn's own library, where
        the hint only returns to QEMU's loop."""
        if on != self._exit_on_yield:
            try:
                self.uc.ctl(UC_CTL_EXIT_ON_YIELD, UC_CTL_IO_WRITE, ctypes.c_int(int(on)))
            except UcError:   # (a library without the control)
                return
            self._exit_on_yield = on
            self._read_yields()

    def _read_yields(self) -> int:
        """The yields (EXCP_YIELD) the engine has counted so far."""
        self.uc.ctl(UC_CTL_EXIT_ON_YIELD, UC_CTL_IO_READ, ctypes.byref(self._yields))
        return self._yields.value

    def _slice_over(self) -> bool:
        """The run loop returns to its caller: the guest exited, the PE waits in WFI or is
        off (PSCI CPU_OFF) on a several-PE machine, or its time slice is over."""
        pe = self.pe
        return (self.exit is not None or pe.parked or not pe.powered
                or self.insns() >= self.yield_at)

    def close(self) -> None:
        """Close the host files of the run (semihosting handles, device output such as
        console.log); idempotent."""
        self.semihost.close_all()
        self.board.close()

    def _start(self, pc: int, until: int = 0, count: int = 0) -> None:
        """Run the PE (:attr:`pe`) from ``pc`` (to ``until``; ``count`` instructions at most,
        0: no limit) until a hook stops it, then take what stopped it."""
        pe = self.pe
        pe.unmapped = None
        # (an interruption is taken here, before the next run: the stop it asked for has been
        # accounted as any other, the samples captured in the run before it included)
        self._check_interrupted()
        if self._feed_flush:   # (_start_model_feed)
            self._feed_flush = False
            pe.uc.ctl(UC_CTL_TB_FLUSH, UC_CTL_IO_WRITE)
        watchpoints = pe.watchpoints
        if watchpoints.dirty or watchpoints.unresolved:
            watchpoints.refresh()
        try:
            pe.uc.emu_start(pc, until, 0, count)
        except UcError as exc:
            if exc.errno in UNMAPPED_ERRORS and pe.unmapped is not None:
                self._external_abort(*pe.unmapped)
            else:
                raise GuestError(f"emulation stopped at PC {self.pc:#x} after {self.insns()} "
                                 f"instructions: {exc}") from None
        flt = self.sysreg_filter
        if flt.ic_flush_own:   # (an IC IALLU/IALLUIS of this PE, several PEs: spe_native.h)
            flt.ic_flush_own = 0
            pe.uc.ctl(UC_CTL_TB_FLUSH, UC_CTL_IO_WRITE)
            self._forget_code()
        if self._exit_on_yield:
            before = self._yields.value
            if self._read_yields() != before:   # (it returned at a WFE or YIELD)
                self.yielded = True
                self.yield_at = min(self.yield_at, self.insns())
        self.board.flush()   # (what the devices' native paths hold shows at every stop)
        if watchpoints.hit is not None:
            watchpoints.take_hit()
        if pe.hook_error is not None:
            exc, pe.hook_error = pe.hook_error, None
            raise exc

    def _run_fast(self, progress) -> RunResult:
        pe = self.pe
        c, checks = pe.counter, pe.checks
        budget = self.budget
        last_progress = 0
        irq_check = True  # the IRQ line or its masking may have changed since the last check
        while not self._slice_over():
            if checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            if c.insns >= self.debug_stop_at:
                self.debug_hook()
                irq_check = True
                continue
            self.clock.run_due(c.insns)
            if self.replan or self._irq_line():
                # (also at a masked-interrupt poll stop: the mask may have been lifted)
                irq_check = True
            if self.replan:
                pe.forget_context()
                self._refresh_enabled()
                if self._take_spe_exception():
                    self._refresh_enabled()
                    irq_check = True
            hold = pe.hold_irq_until > c.insns
            if irq_check and not hold:
                irq_check = False
                if self._deliver_irq():
                    self._refresh_enabled()
                elif self._irq_line():
                    self._follow_code_mapping()
            self.replan = False
            event = NEVER
            if self.enabled:
                event = self.acct + self.spu.interval.members_to_next_event() - 1
            # (an event on the clock is due at or after the instruction count it converts to)
            unpolled = min(budget, self.yield_at, pe.hold_irq_until if hold else NEVER,
                           max(self.clock.next_deadline_insns(), c.insns),
                           max(self.debug_stop_at, c.insns))
            poll = self._poll_at(c.insns)
            limit = min(unpolled, poll)
            target = min(event, limit)
            if target < c.insns:  # (never: every stop point is planned ahead of the run)
                raise AssertionError(f"run loop passed its stop point {target} ({c.insns})")
            c.stop_at = target
            c.gap = 0
            if event != NEVER and target == event:
                # Let the native hook capture the samples it can (counter.c).
                # (not with FEAT_SPE_PBT: a sample needs the taken branch before it,
                # _prev_branch, which the native capture does not take)
                gap = (None if self.cfg.spe.pbt
                       else self.spu.interval.fixed_gap(self.spu.regs["PMSIRR_EL1"]))
                if gap is not None:
                    c.event_at, c.limit = event, limit
                    # (a pending predicted sample's record is written first, at _settle)
                    c.cap_budget = max(0, self._record_room(self.context())
                                       - (self._pending is not None))
                    c.gap = gap
            # A poll for an interrupt the GIC asserts is moot once the native CPU-interface
            # path has lowered every GIC output (an IAR read acknowledged it): the native hook
            # then runs on to the stop point without it (counter.c, poll_at).
            polled = (not c.gap and target == poll < min(event, unpolled)
                      and not self._serror_line())
            c.poll_at, c.unpolled_at = (poll, min(event, unpolled)) if polled else (NEVER, NEVER)
            if polled:
                pe.control.irq = 1   # (the native GIC path clears it as it lowers them)
            stops = c.stops
            capturing = c.gap
            pc = self.pc
            self._start(pc)
            if polled and c.poll_at == NEVER:
                # (the poll was moot, or a stop was asked for: planned without it)
                limit = min(unpolled, c.unpolled_at)
                target = min(event, limit)
            c.poll_at = NEVER
            self._catch_up(c.insns)
            if checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            if c.gap and c.event_at != event:  # samples were captured: plan from what is left
                c.gap = 0
                event = NEVER
                if self.enabled:
                    event = self.acct + self.spu.interval.members_to_next_event() - 1
                target = min(event, limit)
            if self.exit is not None:
                break
            # Stopped by the hook in front of the block that holds instruction #target (and
            # that block ends before the budget or hold point), for the planned sample?
            in_front = c.stops != stops and c.insns < target and c.stop_at == target
            at_sample = (in_front and target == event and not self.replan
                         and c.insns + c.stop_block_insns <= limit)
            if (at_sample and capturing and c.cap_budget
                    and target + capturing >= c.insns + c.stop_block_insns
                    and self._relearnt_at != (self.pc, c.insns)
                    and self._learn_stop_block(self.pc, c.stop_block_insns, target - c.insns)):
                # Stopped in front of the block that holds the sample because the hook had no
                # verdict for it; now it has one: run again from here, the hook captures it
                # (once: if it stops here again, it is predicted or split below).
                self._relearnt_at = (self.pc, c.insns)
                continue
            if at_sample and self._predict(self.pc, target - c.insns, c.stop_block_insns,
                                           target):
                # Stopped in front of the block that holds the sampled instruction, which is
                # predicted. From the block's start: the member has fired, the record is
                # written after the next run (or by a hook on the way). From the block's end
                # or its next PC: the block runs now and stops in front of the next one.
                if self._pending is not None and self._pending[2] in (PREDICT_END,
                                                                      PREDICT_NEXT_PC):
                    c.gap = 0
                    c.stop_at = c.insns + c.stop_block_insns
                    self._start(self.pc)
                    if self._pending is not None:
                        self._settle(c.insns, self.pc)
                    c.stop_at = target
                    if self.exit is not None:
                        break
            elif (in_front and not self.enabled and c.insns > self._slice_start
                  and target == self.yield_at < min(
                    event, budget, pe.hold_irq_until if hold else NEVER,
                    max(self.clock.next_deadline_insns(), c.insns),
                    max(self.debug_stop_at, c.insns))):
                # Stopped in front of the block that holds the end of the PE's time slice
                # (several PEs, nothing else due there): the slice ends here, at a block
                # boundary (no block is split for it; as deterministic), once it has run
                # something (a slice shorter than the block is split: it makes progress),
                # while profiling is disabled (samples keep the exact stops they plan).
                self.yield_at = c.insns
            elif in_front:
                # Stopped in front of the block that holds instruction #target: run exactly
                # up to it.
                self.sample_paths["split"] += 1
                # (the split block ends just before instruction #target; should the flow
                # leave it -- an exception inside -- the hook stops in front of the first
                # block that would pass the target, with no capture)
                c.gap = 0
                end = self._run_exactly_to(target)
                c.stop_at = target
                if self.exit is not None:
                    break
                if c.insns != target or self.pc != end:
                    # An exception or a hook changed the flow inside the block: re-plan.
                    self._account(min(c.insns, target))
                    continue
            executed_to = c.insns
            if executed_to >= budget:
                self._account(budget)  # members before the budget; the next one never runs
                raise GuestRunaway(f"guest did not exit within {budget} instructions "
                                   f"(PC {self.pc:#x})")
            if (event != NEVER and executed_to == event and c.stop_at == target
                    and not self.replan):
                # (A hook that changed state stopped the run here: re-plan first, the event
                # is recomputed with the new enable state.)
                self._member_selected(event)
            else:
                self._account(executed_to)
            if progress and executed_to - last_progress > 5_000_000:
                last_progress = executed_to
                progress(executed_to)
            if self.exit is None and c.block_start + 4 * c.block_insns == self.pc:
                # The last block run ended where the PC is: if it ended with a WFI, that WFI
                # executed in this run (Unicorn returns after it, or a planned stop fell
                # right after it).
                self._wait_if_wfi()

    def _run_exactly_to(self, target: int) -> int:
        """Stopped in front of the block that holds instruction #``target`` (a count of
        instructions): run from the PC up to that instruction, and return the address it
        stops at. The cached block starting at the PC runs past the target, so it is
        invalidated ([pc, end) overlaps it; a cached block starting at the target itself
        survives) and retranslated with the exit baked in."""
        pe = self.pe
        pc = pe.pc
        end = pc + INSN_BYTES * (target - pe.counter.insns)
        pe.uc.ctl_remove_cache(pc, end)
        self._start(pc, end)
        if pe.pc == end:
            # (the block just translated ends with Unicorn's exit: _unicorn_exit; dropped so
            # that later runs through it do not stop there)
            pe.uc.ctl_remove_cache(pc, end)
        return end

    def _poll_at(self, insns: int) -> int:
        """While the GIC asserts an interrupt that PSTATE masks, the instruction count at which
        to look again (a safety net: the block hook's unmasking watch sees the unmasking
        itself, docs/model.md "Interrupts"); else NEVER."""
        return insns + MASKED_IRQ_POLL if self._irq_line() else NEVER

    def _wait_if_wfi(self) -> None:
        """If the instruction before the PC, just executed, is a WFI (Unicorn returns from
        emu_start after it: QEMU halts the PE), the PE waits for a wake-up event (Arm ARM
        D1.6.2 "Wait For Interrupt"): an interrupt the GIC asserts, or a pending virtual IRQ
        or FIQ, wakes it even when PSTATE masks it; otherwise virtual time advances to the
        next event on the clock.

        Raises:
            GuestError: nothing is scheduled that could ever wake the PE.
        """
        pc = self.pc
        try:
            word = self._fetch(pc - 4, self.context().el)
        except (TranslationFault, UcError):
            return
        if (word != WFI_WORD or self._irq_line()
                or self.exc.virtual_interrupt_pending(self.context())):
            return
        self._counter_reads_changed()
        pe = self.pe
        if self.smp is not None:
            # (several PEs: this one parks, the others run; the scheduler wakes it, :mod:`.smp`)
            pe.parked = True
            return
        # Events that assert no interrupt (a console poll that found no input) do not end
        # the wait: the result is the same whether input is attached or not.
        pe.waiting = True
        try:
            while not self._irq_line():
                self._check_interrupted()   # (events such as a console poll recur forever)
                if not self.clock.wait_for_event():
                    raise GuestError(f"WFI at PC {pc - 4:#x} with no interrupt that can wake "
                                     f"the PE and no event scheduled")
                self.clock.run_due()
        finally:
            pe.waiting = False

    def _run_raw(self) -> RunResult:
        """No SPE model: the native block hook counts instructions and stops in front of the
        block that holds the next stop point (the budget, the next clock event, a
        masked-interrupt poll); that block is then run exactly up to it, as in the fast
        loop, so ``max_insns`` holds exactly on every path."""
        pe = self.pe
        c, checks = pe.counter, pe.checks
        budget = self.budget
        while not self._slice_over():
            if c.insns >= self.debug_stop_at:
                self.debug_hook()
                continue
            self.clock.run_due(c.insns)
            self._deliver_irq()
            self.replan = False
            if c.insns >= budget:
                raise GuestRunaway(f"guest did not exit within {budget} instructions "
                                   f"(PC {self.pc:#x})")
            target = c.stop_at = min(budget, self.yield_at,
                                     max(self.clock.next_deadline_insns(), c.insns),
                                     self._poll_at(c.insns), max(self.debug_stop_at, c.insns))
            stops = c.stops
            self._start(pe.pc)
            if checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            if self.exit is None and c.stops != stops and c.insns < target == c.stop_at:
                # In front of the block holding instruction #target: run exactly up to it.
                self._run_exactly_to(target)
            if (self.exit is None and not self.replan and c.insns < budget
                    and c.block_start + 4 * c.block_insns == self.pc):
                self._wait_if_wfi()

    def _run_reference(self, progress) -> RunResult:
        pe = self.pe
        checks = pe.checks
        while not self._slice_over():
            if checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            self.clock.run_due()
            self._ref_enabled = None
            self._take_spe_exception()
            self._deliver_irq()
            self.replan = False
            self._ref_deadline = min(self.clock.next_deadline_insns(), self.yield_at,
                                     self._poll_at(pe.ref_insns))
            self._start(pe.pc)
            if checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            if self._budget_spent:
                raise GuestRunaway(f"guest did not exit within {self.cfg.max_insns} "
                                   f"instructions (PC {self.pc:#x})")
            if self.exit is None and self._last_insn + 4 == self.pc:
                self._wait_if_wfi()  # (the last instruction run is the one before the PC)

    def result(self) -> RunResult:
        """What the run has produced so far: the counts of a run that stopped on an error
        too (:class:`RunResult`)."""
        return self._result()

    def _result(self) -> RunResult:
        """(:meth:`run` closes the run's files on every way out.) With several PEs, the
        counts are the sums over every PE, each PE's own in ``per_pe``; the SPU registers
        are PE 0's."""
        result = self._pe_result()
        if self.smp is None:
            return result
        parts = [result] + [m._pe_result() for m in self.smp.machines[1:]]
        per_pe = [{"pe": m.index, "mpidr": f"{m.mpidr:#x}",
                   **{name: getattr(r, name) for name in SUMMED}}
                  for m, r in zip(self.smp.machines, parts)]
        for name in SUMMED:
            setattr(result, name, sum(p[name] for p in per_pe))
        for m in self.smp.machines[1:]:
            result.guest_errors += m.guest_errors
        result.per_pe = per_pe
        return result

    def _pe_result(self) -> RunResult:
        st = self.spu.stats
        self.pmu_events.accrue(self.pe.pmu_bucket)
        return RunResult(
            exit_status=self.exit.status if self.exit else None,
            exit_reason=self.exit.reason if self.exit else None,
            exit_via=self.exit.via if self.exit else None,
            instructions=self.insns(), population=st.population, samples=st.samples,
            records_written=st.records_written, bytes_written=st.bytes_written,
            filtered_out=st.filtered_out, management_events=len(st.management_events),
            irqs_taken=self.irqs_taken, exceptions_taken=self.exceptions_taken,
            console=self.semihost.console_output, guest_errors=list(self.guest_errors),
            firmware_console=self.semihost.firmware_output,
            driver_rules=[asdict(b) for b in self.spu.rules.breaks],
            pmu_events=self.pmu_events.event_totals(),
            pmu=self.pmu.counts() if self.pmu is not None else {},
            model={"feed": self.cfg.spe.model_feed, **self.spu.builder.model.stats()},
            model_config={**self.cfg.spe.model_config(),
                          "midr": self.cfg.cpu.describe()["midr"]},
            pmbsr=self.spu.regs["PMBSR_EL1"], pmbptr=self.spu.regs["PMBPTR_EL1"],
            pmsicr=self.spu.interval.value)
