"""What one PE's PMU counts from (:class:`spe_emu.devices.pmu.PmuSources`): the native
counter's per-Exception-level event sources (spe_native.h ``SPE_PMU_*``: the block hook
settles them at each change of PSTATE.EL while a counter counts) and the SPE events the
machine accrues (:class:`spe_emu.spe.pmu_events.SpePmuEvents`).

The reference loop, which counts no blocks natively, keeps the same per-EL counts from its
per-instruction hook (:meth:`PmuFeed.reference_step`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import native
from ..arch.context import AccessContext

if TYPE_CHECKING:
    from .machine import Machine


class PmuFeed:
    """The PMU's sources on ``machine`` (one PE)."""

    def __init__(self, machine: "Machine"):
        self.m = machine
        self.model_on = False

    def totals(self) -> list[list[int]]:
        """``[el][source]`` (:data:`spe_emu.devices.pmu.SOURCES`) now: exact at an access in
        the middle of a block (the machine's retired count for its clock)."""
        m = self.m
        c = m.counter
        retired = m._clock_retired()
        if m.cfg.mode == "reference":
            c.insns = retired
        if not c.pmu_on:
            # (nothing counts: the EL of what follows is the current one)
            native.pmu_settle(c)
            c.pmu_el = m.pe.live_context().el
        totals = native.pmu_totals(c, retired)
        if m._retired_now is None:   # (at a stop; an access hook has caught them up)
            m.pmu_events.accrue(m.pe.pmu_bucket)
        spe = [[0] * 4 for _ in range(4)]
        for (el, _secure), counts in m.pmu_events.totals.items():
            for i, v in enumerate(counts):
                spe[el][i] += v
        return [totals[el] + spe[el] for el in range(4)]

    def context(self) -> AccessContext:
        return self.m.context()

    def counting(self, on: bool, model: bool) -> None:
        """Per-EL tracking while ``on``; the model fed every access and branch while
        ``model`` (with SPE's own demand: Machine._follow_feed)."""
        m = self.m
        c = m.counter
        if on and not c.pmu_on:
            native.pmu_settle(c)
            c.pmu_el = m.pe.live_context().el
            c.pmu_on = 1
            c.stop_at = c.stop_at   # (fast_limit 0: the next block takes the slow path)
        elif not on and c.pmu_on:
            native.pmu_settle(c)
            c.pmu_on = 0
        if model != self.model_on:
            self.model_on = model
            m._pmu_wants_feed(model)

    def model_events(self) -> bool:
        return self.m.cfg.spe.model_feed == "every" and self.m.cfg.mode != "raw"

    def spe_events(self) -> bool:
        return self.m.cfg.spe.pmsver != 0

    def reference_step(self, el: int, index: int) -> None:
        """Reference loop, before instruction number ``index`` runs at ``el``: a change of EL
        settles the one left."""
        c = self.m.counter
        if c.pmu_on and el != c.pmu_el:
            c.insns = index
            native.pmu_settle(c)
            c.pmu_el = el
