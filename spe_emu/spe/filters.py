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
    SIMD = 4   # FEAT_SPE_EFT: Advanced SIMD operation
    FP = 5     # FEAT_SPE_EFT: floating-point operation


TYPE_FILTERS = ((OpType.BRANCH, "B", "Bm"), (OpType.LOAD, "LD", "LDm"),
                (OpType.STORE, "ST", "STm"), (OpType.FP, "FP", "FPm"),
                (OpType.SIMD, "SIMD", "SIMDm"))
"""(type, PMSFCR_EL1 filter field, its mask field): the operation-type filters; FP, SIMD and the
mask fields exist with FEAT_SPE_EFT only (absent fields read 0)."""


FILTER_ENABLES = ("FE", "FT", "FL", "FnE", "FDS")
"""PMSFCR_EL1's filter enables: event, type, latency, inverted event (FEAT_SPEv1p2), data
source (FEAT_SPE_FDS); ``CollectRecord()`` keeps every record while all are 0."""


def or_types(pmsfcr: dict[str, int]) -> set[OpType]:
    """The types PMSFCR_EL1.FT's OR filter selects: those whose bit is 1 and whose
    FEAT_SPE_EFT mask bit is 0 (absent fields read 0)."""
    return {t for t, bit, mask in TYPE_FILTERS if pmsfcr.get(bit) and not pmsfcr.get(mask)}


def type_mask(pmsfcr: dict[str, int]) -> int | None:
    """``CollectRecord()`` as a mask of ``1 << OpType.value`` bits, where it is no more than
    that (the native recorder applies it, record.c): 0 when no filter is enabled; the types
    FT's OR filter selects (:func:`or_types`) when FT is the only filter enabled, selects a
    type and no mask bit is set; else None (:func:`collect_record` decides)."""
    if not any(pmsfcr.get(name) for name in FILTER_ENABLES):
        return 0
    if any(pmsfcr.get(name) for name in FILTER_ENABLES if name != "FT") or any(
            pmsfcr.get(mask) for _, _, mask in TYPE_FILTERS):
        return None
    return sum(1 << t.value for t in or_types(pmsfcr)) or None


def collect_record(events: int, total_latency: int, optypes: frozenset[OpType] | set[OpType],
                   pmsfcr: dict[str, int], pmsevfr: int, minlat: int, config: SpeConfig,
                   pmsnevfr: int = 0, data_source: int | None = None,
                   pmsdsfr: int = 0) -> bool:
    """``CollectRecord(events, total_latency, optype)`` (§3.2.3), with the extended type
    filters of FEAT_SPE_EFT (Arm ARM PMSFCR_EL1.{B, LD, ST, FP, SIMD} and their masks Bm, LDm,
    STm, FPm, SIMDm: a type whose mask bit is 0 is an OR filter as B/LD/ST are without
    FEAT_SPE_EFT; one whose mask bit is 1 keeps only operations of the type when its bit is 1
    and only operations not of it when 0 -- our reading of the field descriptions), the
    inverted event
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
        # OR filters: the types selected without their mask bit; AND filters: the types whose
        # mask bit (FEAT_SPE_EFT) is 1 -- the operation must be of the type if its bit is 1,
        # must not be if it is 0.
        selected = or_types(pmsfcr)
        required = {t: bool(pmsfcr.get(bit)) for t, bit, mask in TYPE_FILTERS
                    if pmsfcr.get(mask)}
        if selected:
            if not selected & set(optypes):
                return False
        elif not required and config.ft_all_zero_discards:
            return False
        for t, wanted in required.items():
            if (t in optypes) != wanted:
                return False
    if pmsfcr["FL"]:
        if minlat == 0 and config.fl_zero_discards:
            return False
        if total_latency < minlat:
            return False
    return True
