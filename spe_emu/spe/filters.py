"""Sample record filtering: ``CollectRecord()`` (SPE supplement §3.2.2, §3.2.3 pseudocode)."""

from __future__ import annotations

import enum

from .config import SpeConfig
from .registers import PMSEVFR_FILTERABLE


class OpType(enum.Enum):
    """``OpType`` of the pseudocode: the operation type the FT filter sees."""

    OTHER = 0
    LOAD = 1
    STORE = 2
    BRANCH = 3


def collect_record(events: int, total_latency: int, optypes: frozenset[OpType] | set[OpType],
                   pmsfcr: dict[str, int], pmsevfr: int, minlat: int, config: SpeConfig,
                   pmsnevfr: int = 0, data_source: int | None = None,
                   pmsdsfr: int = 0) -> bool:
    """``CollectRecord(events, total_latency, optype)`` (§3.2.3), with the inverted event
    filter of FEAT_SPEv1p2 (Arm ARM PMSNEVFR_EL1: a record with any event PMSNEVFR_EL1
    selects set to 1 is not recorded, while PMSFCR_EL1.FnE == 1) and the data source filter of
    FEAT_SPE_FDS (Arm ARM PMSDSFR_EL1: while PMSFCR_EL1.FDS == 1, a record with a Data Source
    packet of value n is recorded only if PMSDSFR_EL1.S[n] == 1; records without one are not
    affected).

    Args:
        events: the record's Events packet bits (E[n] at bit n).
        total_latency: total latency in cycles.
        optypes: the types the operation counts as; an atomic counts as STORE and, when it
            returns a value, also as LOAD (§3.2.2: ST includes all atomics, LD includes atomics
            that return a value), so the FT filter admits it if any of its types is selected.
        pmsfcr: PMSFCR_EL1 fields {"FE", "FT", "FL", "B", "LD", "ST"}, and "FnE", "FDS"
            where implemented.
        pmsevfr: PMSEVFR_EL1 value.
        minlat: PMSLATFR_EL1.MINLAT.
        config: the CONSTRAINED UNPREDICTABLE choices.
        pmsnevfr: PMSNEVFR_EL1 value (0 where not implemented).
        data_source: the record's Data Source value (None: no Data Source packet).
        pmsdsfr: PMSDSFR_EL1 value (0 where not implemented).
    Returns:
        True if the record is written to the Profiling Buffer.
    """
    if pmsfcr["FE"]:
        if pmsevfr == 0 and config.fe_zero_discards:
            return False
        mask = pmsevfr & PMSEVFR_FILTERABLE
        if ~events & mask:
            return False
    if pmsfcr.get("FnE") and events & pmsnevfr & PMSEVFR_FILTERABLE:
        return False
    if pmsfcr.get("FDS") and data_source is not None and not pmsdsfr >> data_source & 1:
        return False
    if pmsfcr["FT"]:
        selected = set()
        if pmsfcr["B"]:
            selected.add(OpType.BRANCH)
        if pmsfcr["LD"]:
            selected.add(OpType.LOAD)
        if pmsfcr["ST"]:
            selected.add(OpType.STORE)
        if selected:
            if not selected & set(optypes):
                return False
        elif config.ft_all_zero_discards:
            return False
    if pmsfcr["FL"]:
        if minlat == 0 and config.fl_zero_discards:
            return False
        if total_latency < minlat:
            return False
    return True
