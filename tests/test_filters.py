"""CollectRecord() (SPE §3.2.2 Table 4, §3.2.3): each filter admits and rejects the right
operations; CONSTRAINED UNPREDICTABLE cases follow the configuration."""

import pytest

from spe_emu.spe.config import SpeConfig
from spe_emu.spe.filters import OpType, collect_record

CFG = SpeConfig()
NONE = dict(FE=0, FT=0, FL=0, B=0, LD=0, ST=0)
LOAD, STORE, BRANCH, OTHER = ({OpType.LOAD}, {OpType.STORE}, {OpType.BRANCH}, {OpType.OTHER})
ATOMIC_RET = {OpType.LOAD, OpType.STORE}


def fcr(**kw):
    return {**NONE, **kw}


@pytest.mark.parametrize("b, ld, st, admitted", [
    # Table 4 rows (FT == 1): which of load, store, branch, other are collected.
    (0, 0, 1, {"store"}), (1, 0, 0, {"branch"}), (0, 1, 0, {"load"}),
    (1, 1, 0, {"load", "branch"}), (0, 1, 1, {"load", "store"}),
    (1, 0, 1, {"store", "branch"}), (1, 1, 1, {"load", "store", "branch"})])
def test_type_filter_table4(b, ld, st, admitted):
    kinds = {"load": LOAD, "store": STORE, "branch": BRANCH, "other": OTHER}
    for name, types in kinds.items():
        got = collect_record(0b10, 1, types, fcr(FT=1, B=b, LD=ld, ST=st), 0, 0, CFG)
        assert got == (name in admitted), name


def test_no_filter_collects_everything():
    for types in (LOAD, STORE, BRANCH, OTHER):
        assert collect_record(0, 1, types, fcr(), 0, 0, CFG)


def test_atomic_counts_as_load_and_store():
    assert collect_record(0, 1, ATOMIC_RET, fcr(FT=1, LD=1), 0, 0, CFG)
    assert collect_record(0, 1, ATOMIC_RET, fcr(FT=1, ST=1), 0, 0, CFG)
    assert not collect_record(0, 1, ATOMIC_RET, fcr(FT=1, B=1), 0, 0, CFG)


def test_event_filter_needs_all_selected_events():
    retired, refill, walk = 1 << 1, 1 << 3, 1 << 5
    assert collect_record(retired | refill, 1, LOAD, fcr(FE=1), refill, 0, CFG)
    assert not collect_record(retired, 1, LOAD, fcr(FE=1), refill, 0, CFG)
    assert not collect_record(retired | refill, 1, LOAD, fcr(FE=1), refill | walk, 0, CFG)
    # Only the filterable bits <63:48,31:24,15:12,7,5,3,1> are compared: E[2] is ignored.
    assert collect_record(retired, 1, LOAD, fcr(FE=1), retired | 1 << 2, 0, CFG)


def test_latency_filter():
    assert collect_record(0, 20, LOAD, fcr(FL=1), 0, 20, CFG)
    assert not collect_record(0, 19, LOAD, fcr(FL=1), 0, 20, CFG)


def test_filters_combine_with_and():
    f = fcr(FT=1, LD=1, FL=1)
    assert collect_record(0, 30, LOAD, f, 0, 20, CFG)
    assert not collect_record(0, 10, LOAD, f, 0, 20, CFG)
    assert not collect_record(0, 30, STORE, f, 0, 20, CFG)


def test_constrained_unpredictable_choices():
    discard = CFG.with_(ft_all_zero_discards=True, fe_zero_discards=True, fl_zero_discards=True)
    assert collect_record(0, 1, LOAD, fcr(FT=1), 0, 0, CFG)
    assert not collect_record(0, 1, LOAD, fcr(FT=1), 0, 0, discard)
    assert collect_record(0, 1, LOAD, fcr(FE=1), 0, 0, CFG)
    assert not collect_record(0, 1, LOAD, fcr(FE=1), 0, 0, discard)
    assert collect_record(0, 1, LOAD, fcr(FL=1), 0, 0, CFG)
    assert not collect_record(0, 1, LOAD, fcr(FL=1), 0, 0, discard)


def test_not_taken_is_a_filter_event_from_spev1p2():
    """PMSEVFR_EL1.E[6] and PMSNEVFR_EL1.E[6] (Not taken) are writable with FEAT_SPEv1p2
    (PMSVer 3; Linux's PMSEVFR_EL1_RES0_V1P2), RES0 before; with PMSFCR_EL1.FnE a record
    with E[6] set is then not collected (Arm ARM PMSNEVFR_EL1)."""
    from spe_emu.spe.registers import spe_registers
    not_taken, retired = 1 << 6, 1 << 1
    v1p2 = spe_registers(SpeConfig(pmsver=3, fne=1))
    assert v1p2["PMSNEVFR_EL1"].write_mask & not_taken
    assert v1p2["PMSEVFR_EL1"].write_mask & not_taken
    assert not spe_registers(SpeConfig())["PMSEVFR_EL1"].write_mask & not_taken
    cfg = SpeConfig(pmsver=3, fne=1)
    assert not collect_record(retired | not_taken, 1, BRANCH, fcr(FnE=1), 0, 0, cfg,
                              pmsnevfr=not_taken)
    assert collect_record(retired, 1, BRANCH, fcr(FnE=1), 0, 0, cfg, pmsnevfr=not_taken)
    assert collect_record(retired | not_taken, 1, BRANCH, fcr(FE=1), not_taken, 0, cfg)
