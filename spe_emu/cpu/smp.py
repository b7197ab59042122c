"""Several PEs on one board (``--smp N``): the scheduler that runs them in turn, their power
states as PSCI sees them, and the broadcast of TLB and instruction-cache maintenance.

Model (docs/model.md "Several PEs"), learnt from QEMU's single-threaded round-robin TCG:

* Each PE is a :class:`~spe_emu.cpu.machine.Machine` with its own Unicorn engine, native
  structs, SPU, exception model, generic timer and GIC CPU interface, over the one board
  (RAM shared byte for byte, the devices, the GIC distributor, the clock). PE 0 builds the
  board and the others (:class:`Smp`); PE 0 starts at reset, the others are OFF until PSCI
  CPU_ON starts one (at the entry point, the context id in X0, the boot Exception level,
  MMU off).
* **Time.** Each PE has its own instruction count; its virtual time is that count plus the
  ticks it did not run for (waiting in WFI, OFF): its :class:`~spe_emu.platform.clock.PeClock`,
  which its generic timer and its own events use (they are due in its time and fire while it
  runs). The board's clock reads the time of the PE that runs. The scheduler works in rounds: each round's end is the
  earliest time among the runnable PEs plus the quantum (``MachineConfig.smp_quantum``,
  instructions); every runnable PE, in PE order, runs until its time reaches the round's end
  (exactly while its profiling is enabled; else at the block boundary in front of it), it
  waits in WFI, or the guest exits. So no PE's time is more than a quantum ahead of
  another's, and the same program, options and seed give the same interleaving, traces and
  console, byte for byte (nothing but instruction counts decides). A round with one runnable
  PE is SOLO_SLICE long (nothing to interleave), ending early when another PE gets work.
  Where other PEs can run, a PE's WFE or YIELD ends its slice (QEMU's EXCP_YIELD, at which
  its round-robin loop runs the next vCPU) and its time moves up to the round's end; after
  a round in which every PE that ran yielded, the next runs its slices through.
* **Idle PEs cost nothing.** A PE that executes WFI with no interrupt pending parks; it runs
  again, its time moved up to the round's start, once its GIC CPU interface asserts an
  interrupt (an SGI, its timer's PPI, an SPI routed to it) or a virtual interrupt is pending.
  When every ON PE is parked, time jumps to the next event on the clock; with no event, the
  run ends with a guest error, as one PE's WFI does.
* **Broadcast maintenance.** Each engine has its own TLB and translated-code cache. The
  native SYS hook counts the TLBI and IC instructions a PE executes (``tlbi_seen``,
  ``ic_seen``); before another PE runs again, it drops its whole TLB after any TLBI of
  another PE (the architecture broadcasts the Inner Shareable forms; treating every form so
  is a superset). An IC IVAU's line is logged by physical address, as the PE that executed
  it translated it, and the others drop the code of that line only; IC IALLUIS (or IC
  IALLU under HCR_EL2.FB) drops all their code; IC IALLU is the PE's own (:meth:`_broadcast`).
  The executing PE's own engine, which saw none of the others' stores, drops the code an
  IC names too (the native SYS hook: spe_native.h ``spe_sysreg_filter.smp``).
  Code written by one PE and executed by another is therefore seen only after the IC the
  architecture requires (Arm ARM B2.4.4 "Concurrent modification and execution of
  instructions").
* **Coherent caches.** The PEs' models (model.c) share PE 0's LLC and keep their L1D and L2
  coherent by invalidation: a store invalidates the line in every other PE's L1D and L2, and
  an access that misses its own L1D and L2 while another PE's holds the line modified is
  served by that peer (``native.LEVEL_PEER``: Data Source "peer core", ``peer_latency``).
  After a round with such sharing the quantum is SHARING_QUANTUM instructions, so PEs that
  fight over a line interleave finely (:meth:`Smp._adapt_quantum`).
* **Exclusives and atomics.** Only one PE runs at a time and the quantum ends only between
  instructions, so an LSE atomic is atomic across PEs; a store-exclusive compares the
  memory with the value its load-exclusive read (QEMU's cmpxchg implementation), so another
  PE's store to the location in between fails it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from unicorn.unicorn_const import UC_CTL_IO_WRITE, UC_CTL_TB_FLUSH, UC_CTL_TLB_FLUSH

from .. import native
from ..arch.smccc import mpidr_affinity
from ..devices.psci import AffinityState, PowerDomains, Psci, PsciReturn
from ..errors import GuestError
from .config import NEVER

SHARING_QUANTUM = 256
"""The quantum (instructions) of rounds that follow one with sharing (:meth:`Smp._adapt_quantum`)."""
SHARING_HITS = 2
"""A round shares when its loads found lines another PE held modified this many times."""
SOLO_SLICE = 10_000_000
"""The slice (instructions) of a round with one runnable PE: the others are parked or off, so
there is nothing to interleave with; it ends early at another PE's own event, or when an
interrupt or CPU_ON gives another PE something to do (:meth:`Smp._end_slice`)."""

if TYPE_CHECKING:
    from .machine import Machine


class Smp(PowerDomains):
    """The PEs of a several-PE machine and their scheduler (see the module's docstring).

    Args:
        primary: PE 0, which built the board; the others are built here over its board.
    """

    def __init__(self, primary: "Machine"):
        from .machine import Machine
        cfg = primary.cfg
        self.quantum = self.cfg_quantum = cfg.smp_quantum
        self._peer_hits = 0   # (the models' peer hits when the last round ended)
        self.machines: list[Machine] = [primary]
        for index in range(1, cfg.smp):
            self.machines.append(Machine(cfg, board=primary.board, index=index))
        # (one coherent memory system: shared LLC, invalidation between the PEs' L1D and L2)
        native.join_models([m.spu.builder.model for m in self.machines])
        self.clock = primary.board.clock   # (the board's: it reads the running PE's time)
        self.board = primary.board
        self.board.on_change = self._device_changed
        # The PE running now (its time is the clock's), and each PE's TLBI/IC counts when it
        # last caught up with the others' (:meth:`_broadcast`).
        self.running: Machine = primary
        self._seen = [(0, 0)] * cfg.smp
        # (and each PE's view of every PE's IC log: (ic_all, ic_logged) when it last caught up)
        self._ic_logged = [[(0, 0)] * cfg.smp for _ in range(cfg.smp)]
        self._starting: set[int] = set()   # PEs whose CPU_ON is pending (none: immediate)
        for m in self.machines:
            m.smp = self
            m.sysreg_filter.smp = 1   # (IC logged, and reaching its own engine: spe_native.h)
            if m.psci is not None:
                m.psci = Psci(self)
        # (the run's progress callback is the primary's: every PE's instructions count)
        self._progress: Callable[[int], None] | None = None

    # -- PSCI power domains ----------------------------------------------------------------
    def _by_affinity(self, target: int) -> "Machine | None":
        for m in self.machines:
            if mpidr_affinity(m.mpidr) == target:
                return m
        return None

    def affinity_state(self, target: int) -> AffinityState | None:
        m = self._by_affinity(target)
        if m is None:
            return None
        return AffinityState.ON if m.pe.powered else AffinityState.OFF

    def others_on(self, caller: int) -> bool:
        return any(m.pe.powered for m in self.machines if mpidr_affinity(m.mpidr) != caller)

    def cpu_on(self, target: int, entry: int, context: int) -> PsciReturn:
        """Start PE ``target`` (OFF) at ``entry`` with X0 = ``context``: the reset state at
        the boot Exception level (Machine.reset), its time that of the caller (the PE
        running now)."""
        m = self._by_affinity(target)
        primary = self.machines[0]
        m.images = primary.images
        m.scan_sp_writers = primary.scan_sp_writers
        m.firmware_span = primary.firmware_span
        feeding = self._feeding()
        # (an engine that ran before CPU_OFF holds code and translations the others' IC
        # and TLBI while it was off did not reach: it starts from none)
        m.uc.ctl(UC_CTL_TB_FLUSH, UC_CTL_IO_WRITE)
        m.uc.ctl(UC_CTL_TLB_FLUSH, UC_CTL_IO_WRITE)
        m.reset(entry)
        m._flush_translations()   # (and what Python and the native hooks know of code)
        m.fast.set_reg(_X0, context)
        if feeding and m._model_every and not m._feeding:   # (the others' feed: its too)
            m._start_model_feed()
        pe = m.pe
        pe.powered, pe.parked = True, False
        m.clock.idle_ticks = max(0, self.clock.ticks() - m.insns())
        tlbi, ic = self._counts()
        self._seen[m.index] = (tlbi - m.sysreg_filter.tlbi_seen, ic - m.sysreg_filter.ic_seen)
        self._ic_logged[m.index] = [(s.sysreg_filter.ic_all, s.sysreg_filter.ic_logged)
                                    for s in self.machines]
        m.replan = True
        self._end_slice()
        return PsciReturn.SUCCESS

    # -- the model's feed ------------------------------------------------------------------
    def buffer_written(self, enabled: bool) -> None:
        """A PE wrote PMBLIMITR_EL1 (model_feed "every"): the caches are one coherent system,
        so every ON PE's accesses feed it while any PE's Profiling Buffer is enabled
        (:meth:`UnicornHooks._follow_buffer` of each, with E of any PE)."""
        enabled = enabled or any(
            m.spu.regs["PMBLIMITR_EL1"] & 1 for m in self.machines if m.pe.powered)
        for m in self.machines:
            if m.pe.powered:
                m._follow_buffer(enabled)

    def _feeding(self) -> bool:
        return any(m._feeding and not m._feed_paused for m in self.machines)

    # -- the board's devices ---------------------------------------------------------------
    def _device_changed(self) -> None:
        """A device changed state: every ON PE re-plans (its interrupt lines may have
        changed); the running one as one PE does (:meth:`RunLoops._device_changed`). When a
        parked PE now has a reason to wake (an SGI, an SPI routed to it), the running PE's
        slice ends at its next block boundary, so the woken PE runs next (an interrupt
        between PEs waits for no quantum)."""
        running = self.running
        wake = False
        for m in self.machines:
            if m.pe.powered:
                if m is running:
                    m._device_changed()
                else:
                    m.replan = True
                    m._irq_line_value = None
                    wake = wake or (m.pe.parked and self._wakes(m))
        if wake:
            self._end_slice()

    def _end_slice(self) -> None:
        """Another PE has something to do now (woken, started): the running PE's slice ends
        at its next block boundary, so that PE runs next."""
        running = self.running
        if running.yield_at != NEVER:
            running.yield_at = min(running.yield_at, running.insns())
            running._stop_at_block_boundary()
            running._ref_deadline = 0   # (the reference loop: stop at the next instruction)

    # -- scheduling ------------------------------------------------------------------------
    def _local_time(self, m: "Machine") -> int:
        return m.clock.ticks()

    def _wakes(self, m: "Machine") -> bool:
        """A parked PE has a reason to leave WFI (Arm ARM D1.6.2): an interrupt its CPU
        interface asserts (masked or not) or a pending virtual interrupt."""
        return m._irq_line() or m.exc.virtual_interrupt_pending(m.context())

    def _enter(self, m: "Machine") -> None:
        """Make ``m`` the running PE: the clock reads its time; the TLB and code maintenance
        other PEs did since it last ran reach its engine."""
        self.running = m
        self.clock.use_pe(m.clock)
        self._broadcast(m)

    def _move_up(self, m: "Machine", when: int) -> None:
        """PE ``m`` (parked or OFF) did not run until ``when`` (ticks): its time moves up."""
        local = self._local_time(m)
        if local < when:
            m.clock.idle_ticks += when - local
            m._counter_reads_changed()

    def _counts(self) -> tuple[int, int]:
        """The TLBI and IC instructions every PE has executed so far."""
        tlbi = ic = 0
        for m in self.machines:
            tlbi += m.sysreg_filter.tlbi_seen
            ic += m.sysreg_filter.ic_seen
        return tlbi, ic

    def _broadcast(self, m: "Machine") -> None:
        """The TLBI and IC the other PEs executed since ``m`` last ran reach its engine (its
        own acted on it already): after any TLBI its TLB is dropped; after IC IVAU the
        translated code of the lines they named (by physical address, as the PE that
        executed each translated it then: native.ic_replay), after any other IC (or more
        IC IVAU than a PE's log holds) all its translated code."""
        tlbi, ic = self._counts()
        own = m.sysreg_filter
        others = (tlbi - own.tlbi_seen, ic - own.ic_seen)
        seen = self._seen[m.index]
        if others[0] != seen[0]:
            m.uc.ctl(UC_CTL_TLB_FLUSH, UC_CTL_IO_WRITE)
            m._flush_translations()
        if others[1] != seen[1]:
            logged = self._ic_logged[m.index]
            if not self._replay(m, logged):
                m.uc.ctl(UC_CTL_TB_FLUSH, UC_CTL_IO_WRITE)
            for s in self.machines:
                logged[s.index] = (s.sysreg_filter.ic_all, s.sysreg_filter.ic_logged)
            m._forget_code()
        self._seen[m.index] = others

    def _replay(self, m: "Machine", logged: list) -> bool:
        """Drop from ``m``'s engine the code of the lines the other PEs' IC IVAU named since
        ``logged`` (per PE: its (ic_all, ic_logged) when ``m`` last caught up); False when
        it must drop all its code instead (another IC, a log that overflowed)."""
        for s in self.machines:
            if s is not m and s.sysreg_filter.ic_all != logged[s.index][0]:
                return False
        return all(s is m or native.ic_replay(m.fast.uch, s.sysreg_filter,
                                              logged[s.index][1]) >= 0
                   for s in self.machines)

    def run(self, progress: Callable[[int], None] | None = None) -> None:
        """Run the PEs in turn until the guest exits (see the module's docstring).

        Raises:
            GuestError: every ON PE waits in WFI and nothing is scheduled that could wake one;
                what a PE's run raises.
        """
        machines = self.machines
        primary = machines[0]
        last_progress = 0
        all_yielded = False
        while True:
            primary._check_interrupted()   # (every PE parked: _all_wait may wait forever)
            ran = yielded = 0
            runnable, timed = [], []
            for m in machines:
                pe = m.pe
                if not pe.powered:
                    continue
                if pe.parked:
                    if self._wakes(m):
                        runnable.append((m, None))
                    else:   # (an event of its own -- its timer's -- wakes it in time)
                        when = self.clock.owner_deadline(m.index)
                        if when != NEVER:
                            timed.append((m, when))
                    continue
                runnable.append((m, None))
            if not runnable:
                self._all_wait(timed)
                continue
            # (the round starts at the earliest time of the PEs that ran on; with only woken
            # ones, at the latest time any ON PE reached)
            running = [self._local_time(m) for m, _ in runnable if not m.pe.parked]
            start = (min(running) if running else
                     max(self._local_time(m) for m in machines if m.pe.powered))
            end = start + self.quantum
            runnable += [(m, when) for m, when in timed if when < end]
            if len(runnable) == 1:   # (alone: no other PE to interleave with)
                end = min([start + SOLO_SLICE] + [when for _, when in timed])
            runnable.sort(key=lambda item: item[0].index)
            for m, when in runnable:
                pe = m.pe
                if not pe.powered:   # (turned off in this round)
                    continue
                if pe.parked:   # (woken: by an interrupt at the round's start, or its event)
                    if when is None and not self._wakes(m):
                        continue
                    pe.parked = False
                    m.replan = True
                    self._move_up(m, start if when is None else when)
                if self._local_time(m) >= end:
                    continue
                self._enter(m)
                m.yield_at = end - m.clock.idle_ticks
                m.exit_on_yield(len(runnable) > 1 and not all_yielded)
                m.run_slice()
                if m.exit is not None:
                    primary.exit = m.exit
                    return
                ran += 1
                if m.yielded:   # (it waits for an event in WFE: until the round's end)
                    yielded += 1
                    self._move_up(m, min(end, self.clock.owner_deadline(m.index)))
            # (every PE that ran waited in WFE: none sends the others an event, so the next
            # round's PEs run their slices through, spending the instruction budget as one
            # PE does, until a timer or device event changes something)
            all_yielded = ran > 0 and yielded == ran
            self._adapt_quantum()
            if progress is not None:
                total = sum(m.insns() for m in machines)
                if total - last_progress > 5_000_000:
                    last_progress = total
                    progress(total)

    def _adapt_quantum(self) -> None:
        """Sharing makes slices short: when the last round's loads found lines another PE
        held modified (the models' peer hits) SHARING_HITS times or more, the next round's
        quantum is SHARING_QUANTUM, so PEs that fight over lines interleave finely, as PEs
        running at once do, and their loads show it (with long slices a line changes hands
        once a slice, however hard the PEs fight over it); otherwise it doubles back up to
        ``smp_quantum``. Deterministic: nothing but the model's counts decides."""
        hits = sum(m.spu.builder.model.stats()["peer_hits"] for m in self.machines)
        new, self._peer_hits = hits - self._peer_hits, hits
        if new >= SHARING_HITS:
            self.quantum = min(self.cfg_quantum, SHARING_QUANTUM)
        else:
            self.quantum = min(self.cfg_quantum, 2 * self.quantum)

    def _all_wait(self, timed: list) -> None:
        """Every ON PE waits in WFI: time moves to the next event -- the board's, which runs
        now, or a PE's own (``timed``: (machine, ticks)), whose PE then runs from it.

        Raises:
            GuestError: no event is scheduled (nothing can ever wake a PE).
        """
        on = [m for m in self.machines if m.pe.powered]
        if not on:
            raise GuestError("every PE is off")
        board = self.clock.owner_deadline(None)
        when = min([board] + [w for _, w in timed])
        if when == NEVER:
            pcs = ", ".join(f"PE {m.index} at {m.pc - 4:#x}" for m in on)
            raise GuestError(f"every PE waits in WFI ({pcs}) with no interrupt that can wake "
                             f"one and no event scheduled")
        now = max(when, min(self._local_time(m) for m in on))
        for m, w in timed:
            if w == when:   # (its own event: it runs from then)
                m.pe.parked = False
                m.replan = True
                self._move_up(m, now)
        if board == when:
            self.clock.use(lambda: 0, now)   # (the clock reads the event's time)
            self.clock.run_due()
            for m in on:   # (their time moves up to the event's)
                self._move_up(m, now)


from . import a64  # noqa: E402  (X0's register id)

_X0 = a64.X_REGS[0]
