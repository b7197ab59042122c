"""SPE register table: encodings, reset values, RES0 masks, access checks (SPE §3.2.3, §3.4.6,
§4.1 Table 7, §4.3)."""

import pytest

from spe_emu.arch.context import AccessContext
from spe_emu.spe.config import SpeConfig
from spe_emu.spe.registers import spe_registers
from spe_emu.sysreg import Access

T = spe_registers(SpeConfig())
M64 = (1 << 64) - 1

# Table 7 encodings, written out from the spec.
ENCODINGS = {
    "PMSCR_EL1": (3, 0, 9, 9, 0), "PMSICR_EL1": (3, 0, 9, 9, 2), "PMSIRR_EL1": (3, 0, 9, 9, 3),
    "PMSFCR_EL1": (3, 0, 9, 9, 4), "PMSEVFR_EL1": (3, 0, 9, 9, 5),
    "PMSLATFR_EL1": (3, 0, 9, 9, 6), "PMSIDR_EL1": (3, 0, 9, 9, 7),
    "PMBLIMITR_EL1": (3, 0, 9, 10, 0), "PMBPTR_EL1": (3, 0, 9, 10, 1),
    "PMBSR_EL1": (3, 0, 9, 10, 3), "PMBIDR_EL1": (3, 0, 9, 10, 7), "PMSCR_EL2": (3, 4, 9, 9, 0),
}


@pytest.mark.parametrize("name, enc", sorted(ENCODINGS.items()))
def test_encodings(name, enc):
    assert T[name].encoding.tuple == enc
    assert T.by_encoding(enc) is T[name]


def test_reset_values():
    # PMBLIMITR_EL1.E resets to 0 (Table 8); the model resets the rest to 0 too.
    for name in ("PMSCR_EL1", "PMSICR_EL1", "PMSIRR_EL1", "PMSFCR_EL1",
                 "PMSLATFR_EL1", "PMBLIMITR_EL1", "PMBPTR_EL1", "PMBSR_EL1"):
        assert T[name].reset == 0, name
    # PMSEVFR_EL1.E[1] is RES1 when speculative operations are never sampled (§4.3.8).
    assert T["PMSEVFR_EL1"].reset == 0b10
    assert T["PMSEVFR_EL1"].apply_write(0b10, 0) == 0b10
    # PMSIDR_EL1: CountSize=0b0010 [19:16], MaxSize=6 [15:12], Interval=0 [11:8],
    # ArchInst [3], FL [2], FT [1], FE [0].
    assert T["PMSIDR_EL1"].reset == (0b0010 << 16) | (6 << 12) | 0b1111
    assert T["PMBIDR_EL1"].reset == 0


@pytest.mark.parametrize("name, res0", [
    ("PMSCR_EL1", M64 & ~0b1111011),                       # bits [63:7,2]
    ("PMSIRR_EL1", M64 & ~(0xFFFFFF << 8 | 1)),            # bits [63:32,7:1]
    ("PMSFCR_EL1", M64 & ~(0b111 << 16 | 0b111)),          # bits [63:19,15:3]
    ("PMSLATFR_EL1", M64 & ~0xFFF),                        # bits [63:12]
    ("PMBLIMITR_EL1", 0xFF8),                              # bits [11:3]
    ("PMBSR_EL1", M64 & ~0xFFFFFFFF | 0b111111 << 20),     # bits [63:32,25:20]
    ("PMSICR_EL1", M64 & ~0xFFFFFFFF),                     # ERnd == 0: bits [63:32]
    ("PMSEVFR_EL1", M64 & ~(1 << 7 | 1 << 5 | 1 << 3 | 1 << 1)),  # model events; E[1] RES1
])
def test_res0_masks(name, res0):
    assert T[name].res0 == res0
    assert T[name].apply_write(0, M64) == M64 & ~res0


def test_pmsicr_ecount_exists_only_with_ernd():
    t1 = spe_registers(SpeConfig(ernd=1))
    assert t1["PMSICR_EL1"].res0 == M64 & ~(0xFF << 56 | 0xFFFFFFFF)


def test_read_only_registers():
    assert T["PMSIDR_EL1"].read_only and T["PMBIDR_EL1"].read_only
    assert T["PMSIDR_EL1"].apply_write(T["PMSIDR_EL1"].reset, 0) == T["PMSIDR_EL1"].reset


NS_EL1_OWNER = dict(scr_el3=1, mdcr_el3=0b11 << 12, mdcr_el2=0b11 << 12)


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_el0_access_is_undefined(name):
    ctx = AccessContext(el=0, **NS_EL1_OWNER)
    assert T[name].check(ctx, True) is Access.UNDEFINED


def test_sampling_registers_trap_to_el2_on_tpms():
    ctx = AccessContext(el=1, scr_el3=1, mdcr_el3=0b11 << 12, mdcr_el2=(0b11 << 12) | (1 << 14))
    for name in ("PMSCR_EL1", "PMSICR_EL1", "PMSIRR_EL1", "PMSFCR_EL1", "PMSEVFR_EL1",
                 "PMSLATFR_EL1", "PMSIDR_EL1"):
        assert T[name].check(ctx, False) is Access.TRAP_EL2
    # Buffer registers follow MDCR_EL2.E2PB, not TPMS.
    assert T["PMBPTR_EL1"].check(ctx, True) is Access.OK


@pytest.mark.parametrize("e2pb, verdict", [(0b00, Access.TRAP_EL2), (0b10, Access.TRAP_EL2),
                                           (0b01, Access.OK), (0b11, Access.OK)])
def test_buffer_registers_follow_e2pb(e2pb, verdict):
    ctx = AccessContext(el=1, scr_el3=1, mdcr_el3=0b11 << 12, mdcr_el2=e2pb << 12)
    for name in ("PMBLIMITR_EL1", "PMBPTR_EL1", "PMBSR_EL1"):
        assert T[name].check(ctx, True) is verdict
    assert T["PMBIDR_EL1"].check(ctx, True) is Access.OK  # never trapped


@pytest.mark.parametrize("nspb, el, verdict", [
    (0b11, 1, Access.OK), (0b10, 1, Access.TRAP_EL3), (0b01, 1, Access.TRAP_EL3),
    (0b00, 2, Access.TRAP_EL3), (0b11, 2, Access.OK), (0b00, 3, Access.OK)])
def test_nspb_traps_to_el3(nspb, el, verdict):
    ctx = AccessContext(el=el, scr_el3=1, mdcr_el3=nspb << 12, mdcr_el2=0b11 << 12)
    assert T["PMSCR_EL1"].check(ctx, True) is verdict
    assert T["PMBSR_EL1"].check(ctx, True) is verdict


def test_pmscr_el2_undefined_below_el2():
    assert T["PMSCR_EL2"].check(AccessContext(el=1, **NS_EL1_OWNER), True) is Access.UNDEFINED
    assert T["PMSCR_EL2"].check(AccessContext(el=2, **NS_EL1_OWNER), True) is Access.OK
