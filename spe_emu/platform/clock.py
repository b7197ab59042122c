"""Virtual time: the one place where instructions become counter ticks, and the event queue
devices schedule deadlines on.

Model (docs/model.md, "Virtual time"): the system counter advances one tick per retired
instruction, and by the ticks a PE spends waiting (WFI/WFE with an event scheduled: the wait
ends at the next deadline, so a waiting PE advances time without retiring instructions).
``CNTFRQ_EL0`` reads the board's counter frequency (:attr:`VirtualClock.hz`; the ``virt``
board's 1 GHz: one tick, and one instruction, is 1 ns). No host time reaches the guest.

Devices (generic timer compare values, the instruction budget, ...) schedule
:class:`Event` s at a tick and cancel them; the run loop asks for the next deadline as an
instruction count (:meth:`VirtualClock.next_deadline_insns`), stops there and calls
:meth:`VirtualClock.run_due`. QEMU's ``QEMUTimer`` on ``QEMU_CLOCK_VIRTUAL`` and Renode's
``LimitTimer`` are the pattern.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Callable

NEVER = (1 << 64) - 1
CNTFRQ_HZ = 100_000_000
"""The default system counter frequency (Hz) of a clock made without one: one tick per
instruction is a 100 MIPS PE (boards set their own: ``BoardSpec.counter_hz``)."""


@dataclass(order=True)
class Event:
    """A deadline on the virtual clock. ``when`` is in ticks; ``callback(now_ticks)`` runs at
    the first run-loop stop at or after it (the loop stops exactly there)."""

    when: int
    seq: int
    name: str = field(compare=False)
    callback: Callable[[int], None] = field(compare=False, repr=False)
    cancelled: bool = field(default=False, compare=False)


class TimeFrame:
    """Time as one frame reads it (``_retired``: instructions retired; ``idle_ticks``: the
    ticks spent not running; ``hz``), and the waits on its next event (``next_deadline``):
    shared by the board's :class:`VirtualClock` and a PE's :class:`PeClock`."""

    _retired: Callable[[], int]
    idle_ticks: int
    hz: int

    def next_deadline(self) -> int:
        raise NotImplementedError

    def ticks(self, retired: int | None = None) -> int:
        """The system counter value (ticks) now, or after ``retired`` instructions."""
        return (self._retired() if retired is None else retired) + self.idle_ticks

    def insns_at(self, ticks: int) -> int:
        """The instruction count at which the counter reaches ``ticks`` (never below 0)."""
        return NEVER if ticks >= NEVER else max(0, ticks - self.idle_ticks)

    def centiseconds(self) -> int:
        """Elapsed virtual time in units of 10 ms (semihosting SYS_CLOCK)."""
        return self.ticks() * 100 // self.hz

    def next_deadline_insns(self) -> int:
        """The instruction count at which the earliest pending event is due, or NEVER."""
        return self.insns_at(self.next_deadline())

    def wait_for_event(self) -> bool:
        """A PE waits (WFI) with nothing else to run: advance time to the next deadline.
        Returns False when no event is scheduled (nothing can ever wake it by time)."""
        when = self.next_deadline()
        if when == NEVER:
            return False
        now = self.ticks()
        if when > now:
            self.idle_ticks += when - now
        return True


class VirtualClock(TimeFrame):
    """The system counter (ticks) of one board, derived from the instructions retired.

    Args:
        retired: returns the instructions retired so far (the run loop's count).
        hz: the counter frequency (Hz) that ``CNTFRQ_EL0`` reports and virtual time is
            measured by (one tick per instruction: a PE of ``hz`` instructions per second).
    """

    def __init__(self, retired: Callable[[], int], hz: int = CNTFRQ_HZ):
        self._retired = retired
        self.hz = hz
        self.idle_ticks = 0
        """Ticks the PE spent waiting in WFI/WFE (no instructions retired meanwhile)."""
        self._queues: dict[int | None, list[Event]] = {None: []}
        """Pending events by owner: None the board's, n PE n's (:class:`PeClock`)."""
        self._seq = itertools.count()

    def use(self, retired: Callable[[], int], idle_ticks: int) -> None:
        """Read time as another PE sees it from now on: ``retired`` its instructions retired,
        ``idle_ticks`` the ticks it spent not running (a several-PE machine's scheduler,
        :mod:`spe_emu.cpu.smp`, when it switches PEs)."""
        self._retired = retired
        self.idle_ticks = idle_ticks

    def use_pe(self, pe: "PeClock") -> None:
        """Read time as PE clock ``pe`` does from now on (the PE that runs)."""
        self._retired = pe.ticks
        self.idle_ticks = 0

    # -- events ---------------------------------------------------------------------------
    def schedule(self, when: int, name: str, callback: Callable[[int], None],
                 owner: int | None = None) -> Event:
        """Call ``callback(now)`` when the counter reaches ``when`` (ticks); returns the event
        (pass it to :meth:`cancel`). A deadline already passed fires at the next stop.
        ``owner``: the PE whose time the deadline is in (:class:`PeClock`; None: the
        board's, whichever PE runs)."""
        ev = Event(min(when, NEVER), next(self._seq), name, callback)
        heapq.heappush(self._queues.setdefault(owner, []), ev)
        return ev

    def cancel(self, event: Event | None) -> None:
        """Forget ``event`` (None and already-fired events are fine)."""
        if event is not None:
            event.cancelled = True

    def _head(self, owner: int | None = None) -> Event | None:
        """The earliest pending event of the board's and ``owner``'s."""
        best = None
        for key in (None, owner) if owner is not None else (None,):
            q = self._queues.get(key)
            while q and q[0].cancelled:
                heapq.heappop(q)
            if q and (best is None or q[0] < best):
                best = q[0]
        return best

    def next_deadline(self, owner: int | None = None) -> int:
        """Ticks of the earliest pending event (the board's and ``owner``'s), or
        :data:`NEVER`."""
        head = self._head(owner)
        return NEVER if head is None else head.when

    def owner_deadline(self, owner: int | None) -> int:
        """Ticks of the earliest pending event of ``owner`` alone (None: the board's), or
        NEVER."""
        q = self._queues.get(owner)
        while q and q[0].cancelled:
            heapq.heappop(q)
        return q[0].when if q else NEVER

    def run_due(self, retired: int | None = None, owner: int | None = None) -> int:
        """Fire every event due at the current time (the board's and ``owner``'s, in
        deadline order; a callback may schedule more); returns how many fired."""
        now = self.ticks(retired)
        fired = 0
        while True:
            head = self._head(owner)
            if head is None or head.when > now:
                return fired
            for key in (None, owner):
                q = self._queues.get(key)
                if q and q[0] is head:
                    heapq.heappop(q)
                    break
            head.cancelled = True
            head.callback(now)
            fired += 1


class PeClock(TimeFrame):
    """One PE's view of a board's clock on a several-PE machine (:mod:`spe_emu.cpu.smp`): time
    is that PE's own (its instructions retired plus the ticks it did not run), whether it runs
    or not, and the events it schedules (its generic timer's, its model feed's) are due in
    its time and fire only while it runs (the board's events fire whichever PE runs). Offers
    what a PE and its private devices use of :class:`VirtualClock`.

    Args:
        clock: the board's clock (its event queues).
        owner: the PE's number.
        retired: the PE's instructions retired.
    """

    def __init__(self, clock: VirtualClock, owner: int, retired: Callable[[], int]):
        self.board = clock
        self.owner = owner
        self._retired = retired
        self.hz = clock.hz
        self.idle_ticks = 0
        """Ticks the PE did not run (waiting in WFI, OFF)."""

    def schedule(self, when: int, name: str, callback: Callable[[int], None]) -> Event:
        return self.board.schedule(when, name, callback, self.owner)

    def cancel(self, event: Event | None) -> None:
        self.board.cancel(event)

    def next_deadline(self) -> int:
        return self.board.next_deadline(self.owner)

    def run_due(self, retired: int | None = None) -> int:
        """(The board's clock reads this PE's time while it runs: :meth:`VirtualClock.use_pe`.)"""
        return self.board.run_due(self.ticks(retired) - self.board.idle_ticks, self.owner)
