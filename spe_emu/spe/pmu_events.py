"""The PMU events of the Statistical Profiling Extension (SPE supplement §2.6 Table 1),
counted exactly per context for the PE's PMUv3 (spe_emu.devices.pmu, events 0x4000..0x4003).

The events (:data:`SPE_EVENTS`), as :class:`spe_emu.spe.spu.SpuStats` counts them:
SAMPLE_POP = population members; SAMPLE_FEED = operations selected for sampling that did not
collide (§2.2.4); SAMPLE_FILTRATE = of those, the ones ``CollectRecord()`` kept (records
discarded afterwards by a management event included); SAMPLE_COLLISION = selected operations
that collided. They occur only where profiling is enabled (never at EL3).

Exactness: the machine attributes the counts accrued since its last call to the context
(Exception level, Security state) that was current (:meth:`SpePmuEvents.accrue`); it calls it
whenever profiling may change Exception level or enable state, and before every PMU register
access (Machine._pmu_catch_up, with :attr:`SpePmuEvents.adjust` for the samples of the
accessing instruction's block not yet settled).
"""

from __future__ import annotations

SAMPLE_POP, SAMPLE_FEED, SAMPLE_FILTRATE, SAMPLE_COLLISION = 0x4000, 0x4001, 0x4002, 0x4003
SPE_EVENTS = {SAMPLE_POP: "SAMPLE_POP", SAMPLE_FEED: "SAMPLE_FEED",
              SAMPLE_FILTRATE: "SAMPLE_FILTRATE", SAMPLE_COLLISION: "SAMPLE_COLLISION"}
"""SPE supplement §2.6 Table 1: event number -> mnemonic."""
PMUVER_V3P1 = 0b0100
"""ID_AA64DFR0_EL1.PMUVer presented with SPE: FEAT_PMUv3p1, which widens evtCount to 16 bits
(event numbers 0x4000.. are not encodable in PMUv3's 10-bit field) and defines PMCEID0_EL0
[63:32] for events 0x4000..0x401F (Arm ARM D19 ID_AA64DFR0_EL1, PMCEID0_EL0): the least a
PE with SPE presents (the PMU, spe_emu.devices.pmu, is FEAT_PMUv3p5)."""


class SpePmuEvents:
    """The SPE events counted per context.

    Args:
        stats: the SPU's statistics (population, samples, filtered_out, collisions).

    Attributes:
        totals: ``{(el, secure): [SAMPLE_POP, SAMPLE_FEED, SAMPLE_FILTRATE,
            SAMPLE_COLLISION]}`` counted so far in each context.
    """

    def __init__(self, stats):
        self.stats = stats
        self.totals: dict[tuple[int, bool], list[int]] = {}
        self.adjust = (0, 0, 0, 0)
        """What the machine's counts lack (positive) or hold beyond (negative) the
        instruction a hook runs for, per event (SAMPLE_POP, SAMPLE_FEED, SAMPLE_FILTRATE,
        SAMPLE_COLLISION): members not yet accounted or accounted early, samples not yet
        settled."""
        self._last = self._now()

    # -- accrual --------------------------------------------------------------------------
    def _now(self) -> tuple[int, int, int, int]:
        st = self.stats
        feed = st.samples - st.collisions
        pop, fed, kept, coll = self.adjust
        return (st.population + pop, feed + fed, feed - st.filtered_out + kept,
                st.collisions + coll)

    def accrue(self, bucket: tuple[int, bool] | None) -> None:
        """Attribute the events counted since the last call to ``bucket`` ((Exception level,
        Secure) of the period; None: profiling was disabled, nothing can have been counted)."""
        now = self._now()
        if now == self._last:
            return
        if bucket is not None:
            total = self.totals.setdefault(bucket, [0, 0, 0, 0])
            for i, (a, b) in enumerate(zip(now, self._last)):
                total[i] += a - b
        self._last = now

    def event_totals(self) -> dict[str, int]:
        """``{mnemonic: count}`` over every context (the run summary's ``pmu_events``)."""
        sums = [sum(t[i] for t in self.totals.values()) for i in range(4)]
        return {name: sums[i] for i, name in enumerate(SPE_EVENTS.values())}
