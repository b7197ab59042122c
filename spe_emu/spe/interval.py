"""The sample interval counter, PMSICR_EL1 (SPE supplement §3.1, §4.3.10).

The counter is driven one *population member* at a time by the reference mode and many members
at a time by the fast run loop; both go through the same three operations, so they agree by
construction:

* :meth:`IntervalCounter.members_to_next_event` -- k >= 1: the k-th next member is the next one
  whose step does more than decrement (a selection, or a reload of the primary counter);
* :meth:`IntervalCounter.advance` -- apply n < k plain decrements;
* :meth:`IntervalCounter.fire` -- apply the k-th member's step; returns True if that member is
  selected for sampling.

Counting convention (§3.1.2 note "the interval between operations being selected for sampling
is INTERVAL x 256 + 1"; §2.2 step 3: the operation selected "might be the operation for which
the sample interval counter reached 0, or the next operation", consistently): a member that
finds COUNT == 0 is selected and reloads the counter; otherwise it decrements COUNT.

A COUNT that *reached* zero by counting therefore holds the selection of the next member. That
selection survives profiling being disabled in between (an exception to an Exception level
where profiling is disabled and the return from it, §3.1.3: the counters "retain their values"):
only a PMSICR_EL1 of zero that software wrote (or the reset value) is an uninitialised counter
that §3.1.1 reloads when profiling becomes enabled. Reloading a counted zero there would skip
the selection -- a bias against the operations that follow such exceptions. With PMSIDR_EL1.ERnd == 1 and PMSIRR_EL1.RND == 1 the reload also
sets the secondary counter ECOUNT to a random value; a member that decrements ECOUNT to zero is
selected, and a random value of zero selects the reloading member itself.
"""

from __future__ import annotations

from ..sysreg import Field, RegisterSpec

MASK64 = (1 << 64) - 1
# The two parts of PMSICR_EL1.COUNT that §3.1 reloads separately (within the 32-bit COUNT).
COUNT_INTERVAL = Field("COUNT[31:8]", 31, 8)   # loaded from PMSIRR_EL1.INTERVAL
COUNT_LOW = Field("COUNT[7:0]", 7, 0)          # 0, or a random byte when PMSIRR_EL1.RND


class Xorshift64:
    """The IMPLEMENTATION DEFINED random number generator (§2.2.2): xorshift64* seeded from
    the run's seed. Deterministic: the same seed gives the same sequence on every host."""

    def __init__(self, seed: int):
        self.state = (seed * 0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D) & MASK64 or 1

    def next64(self) -> int:
        x = self.state
        x ^= (x >> 12)
        x ^= (x << 25) & MASK64
        x ^= (x >> 27)
        self.state = x
        return (x * 0x2545F4914F6CDD1D) & MASK64

    def byte(self) -> int:
        """A value in 0x00..0xFF."""
        return self.next64() >> 56


class IntervalCounter:
    """PMSICR_EL1.{COUNT, ECOUNT} and the reload rules of §3.1.1/§3.1.2.

    Args:
        pmsicr: the PMSICR_EL1 register spec (its fields depend on ERnd).
        pmsirr: the PMSIRR_EL1 register spec.
        ernd: PMSIDR_EL1.ERnd.
        rng: random generator for RND.
        zero_interval: INTERVAL value used when software programs INTERVAL == 0.
    """

    def __init__(self, pmsicr: RegisterSpec, pmsirr: RegisterSpec, ernd: int, rng: Xorshift64,
                 zero_interval: int):
        self.pmsicr = pmsicr
        self.pmsirr = pmsirr
        self.ernd = ernd
        self.rng = rng
        self.zero_interval = zero_interval
        # The counters are kept as plain integers (the hot path steps them); the register
        # value is composed/decomposed through the PMSICR_EL1 fields at the register boundary.
        self.count = 0   # PMSICR_EL1.COUNT
        self.ecount = 0  # PMSICR_EL1.ECOUNT (ERnd == 1 only)
        # True while PMSICR_EL1 holds what software wrote (or its reset value), False once a
        # population member has counted: §3.1.1 reloads only a written zero (module doc).
        self.written = True
        # PMSIRR_EL1 value -> (reload value with COUNT[7:0] = 0, RND): memoised field reads.
        self._pmsirr_of: dict[int, tuple[int, bool]] = {}

    # -- the register -----------------------------------------------------------------------
    @property
    def value(self) -> int:
        """PMSICR_EL1 as software reads it."""
        value = self.pmsicr.set(0, "COUNT", self.count)
        if self.ernd:
            value = self.pmsicr.set(value, "ECOUNT", self.ecount)
        return value

    @value.setter
    def value(self, value: int) -> None:
        self.count = self.pmsicr.get(value, "COUNT")
        self.ecount = self.pmsicr.get(value, "ECOUNT") if self.ernd else 0
        self.written = True

    @property
    def state(self) -> tuple[int, int, int, bool]:
        """Everything the counter steps (COUNT, ECOUNT, the random generator, whether the
        value is software's): what a speculative step saves and restores."""
        return self.count, self.ecount, self.rng.state, self.written

    @state.setter
    def state(self, state: tuple[int, int, int, bool]) -> None:
        self.count, self.ecount, self.rng.state, self.written = state

    def _set(self, count: int, ecount: int) -> None:
        self.count = count
        self.ecount = ecount if self.ernd else 0

    def _interval(self, pmsirr: int) -> int:
        return self.pmsirr.get(pmsirr, "INTERVAL") or self.zero_interval

    def _fields(self, pmsirr: int) -> tuple[int, bool]:
        fields = self._pmsirr_of.get(pmsirr)
        if fields is None:
            if len(self._pmsirr_of) > 64:  # (one entry per PMSIRR_EL1 value in use)
                self._pmsirr_of.clear()
            fields = self._pmsirr_of[pmsirr] = (
                COUNT_INTERVAL.set(0, self._interval(pmsirr)),
                bool(self.pmsirr.get(pmsirr, "RND")))
        return fields

    def _reload(self, pmsirr: int, low: int) -> int:
        """COUNT[31:8] = PMSIRR_EL1.INTERVAL, COUNT[7:0] = ``low`` (§3.1.1, §3.1.2)."""
        return COUNT_LOW.set(self._fields(pmsirr)[0], low)

    def _rnd(self, pmsirr: int) -> bool:
        return self._fields(pmsirr)[1]

    # -- §3.1.1 -----------------------------------------------------------------------------
    def initialize(self, pmsirr: int) -> None:
        """Profiling goes from disabled to enabled: reload if PMSICR_EL1 is zero (§3.1.1) as
        software wrote it; a zero the counting reached keeps the next member's selection
        (module doc, §3.1.3)."""
        if self.count or self.ecount or not self.written:
            return
        low = self.rng.byte() if self._rnd(pmsirr) and not self.ernd else 0
        self._set(self._reload(pmsirr, low), 0)

    # -- §3.1.2 -----------------------------------------------------------------------------
    def members_to_next_event(self) -> int:
        """k >= 1 such that the k-th next member is the next non-trivial step."""
        c, a = self.count, self.ecount
        if a and a <= c + 1:
            return a
        return c + 1

    def advance(self, n: int) -> None:
        """Apply ``n`` plain decrements (n must be < members_to_next_event())."""
        if n > 0:
            self.count -= n
            self.written = False
            if self.ecount:
                self.ecount -= n

    def fire(self, pmsirr: int) -> bool:
        """Apply the step of the member at :meth:`members_to_next_event`; True if selected."""
        k = self.members_to_next_event()
        self.advance(k - 1)
        c, a = self.count, self.ecount
        selected = False
        if a:
            a -= 1
            selected = a == 0
        if c == 0:
            rnd = self._rnd(pmsirr)
            if self.ernd and rnd:
                c = self._reload(pmsirr, 0)
                a = self.rng.byte()
                if a == 0:
                    selected = True
            else:
                c = self._reload(pmsirr, self.rng.byte() if rnd else 0)
                selected = True
        else:
            c -= 1
        self._set(c, a)
        self.written = False
        return selected

    def fixed_gap(self, pmsirr: int) -> int | None:
        """Members from one event to the next when that is the same for every event from now
        on (ECOUNT inactive and PMSIRR_EL1.RND == 0: COUNT reaches zero at each event and
        reloads to INTERVAL:Zeros(8), §3.1.2), else None."""
        if self.ecount or self._rnd(pmsirr):
            return None
        return self._reload(pmsirr, 0) + 1

    def members_between_events(self, pmsirr: int) -> int:
        """Members from the next event to the one after it, as :meth:`fire` would leave the
        counter; the state (counters and random generator) is unchanged."""
        gap = self.fixed_gap(pmsirr)
        if gap is not None:
            return gap
        saved = self.state
        try:
            self.fire(pmsirr)
            return self.members_to_next_event()
        finally:
            self.state = saved

    def step(self, pmsirr: int) -> bool:
        """One population member (reference mode): True if it is selected."""
        if self.members_to_next_event() == 1:
            return self.fire(pmsirr)
        self.advance(1)
        return False
