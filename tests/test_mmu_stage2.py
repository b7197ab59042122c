"""spe_emu's stage 2 walker (spe_emu.arch.mmu.stage2 through mmu.translate) for the 4 KiB, 16 KiB
and 64 KiB granules, every valid VTCR_EL2.SL0 start level including concatenated initial
tables, against Unicorn's own two-stage walker (``uc_vmem_translate`` at EL1 with
HCR_EL2.VM = 1 and the EL1 stage 1 off, so the VA is the IPA).

Descriptors are literal stage 2 encodings (Arm ARM D8.3: S2AP[7:6], AF[10], MemAttr[5:2]).
Unicorn reports no fault status: FSCs are checked against the model; a fault is checked to be a
fault for Unicorn too.
"""

from __future__ import annotations

import pytest
from test_mmu_granules import (AF, FSC_PERMISSION, FSC_TRANSLATION, PAGE_SHIFT, RAM, SCTLR,
                               Rig, Tables)

from spe_emu.arch import mmu
from spe_emu.arch.context import HCR_EL2
from spe_emu.arch.faults import TranslationFault
from spe_emu.cpu.exceptions import PSTATE, set_pstate

FSC_ACCESS_FLAG = 0b001000
S2_NORMAL = 0b1111 << 2
S2AP_RW, S2AP_RO = 0b11, 0b01
TG0 = {"4K": 0b00, "64K": 0b01, "16K": 0b10}
VTCR_EL2, VTTBR_EL2 = (3, 4, 2, 1, 2), (3, 4, 2, 1, 0)
PS_48 = 0b101
# (granule, IPA bits, SL0) -> the start level the Arm ARM gives (D19.2 VTCR_EL2.SL0) and the
# number of concatenated tables at it.
SETUPS = {("4K", 30, 0): (2, 1), ("4K", 32, 1): (1, 1), ("4K", 34, 0): (2, 16),
          ("4K", 40, 1): (1, 2), ("4K", 44, 2): (0, 1),
          ("16K", 36, 1): (2, 1), ("16K", 40, 1): (2, 16), ("16K", 44, 2): (1, 1),
          ("64K", 32, 0): (3, 8), ("64K", 42, 1): (2, 1), ("64K", 44, 2): (1, 1)}
PA_MAX = 44     # Unicorn 2.1.4's "max" CPU: ID_AA64MMFR0_EL1.PARange = 0b0100


class S2Tables(Tables):
    """:class:`Tables` with the stage 2 start level and leaves: ``slots`` values
    ("leaf", (pa, s2ap, af))."""

    def __init__(self, r: Rig, granule: str, ia_bits: int, start: int):
        super().__init__(r, granule, ia_bits)
        self.start = start
        self.addr = {(start, 0): self.root}
        root_bytes = max(8 << (ia_bits - self.shift(start)), 1 << self.g)
        self.next_table = RAM + root_bytes
        r.mem.write(RAM, bytes(root_bytes))

    def map_s2(self, level: int, ia: int, pa: int, *, s2ap: int = S2AP_RW,
               af: bool = True) -> None:
        assert self.path(level, ia)
        key = (level, ia >> self.shift(level))
        self.write_desc(level, ia, pa | s2ap << 6 | (AF if af else 0) | S2_NORMAL
                        | (0b11 if level == 3 else 0b01))
        self.slots[key] = ("leaf", (pa, s2ap, af))

    def expect_s2(self, ia: int, write: bool) -> tuple[str, int]:
        for level in range(self.start, 4):
            kind = self.slots.get((level, ia >> self.shift(level)))
            if kind is None:
                return "fsc", FSC_TRANSLATION | level
            if kind[0] == "leaf":
                pa, s2ap, af = kind[1]
                if not af:
                    return "fsc", FSC_ACCESS_FLAG | level
                if not s2ap & (0b10 if write else 0b01):
                    return "fsc", FSC_PERMISSION | level
                return "pa", pa | (ia & ((1 << self.shift(level)) - 1))
        raise AssertionError("a table at level 3")


def configure(r: Rig, granule: str, ia_bits: int, sl0: int) -> None:
    set_pstate(r.mem, PSTATE.make(EL=1, SP=1, D=1, A=1, I=1, F=1))
    r.mem.set_cpr(SCTLR[1], r.mem.cpr(SCTLR[1]) & ~1)               # EL1 stage 1 off
    r.mem.set_cpr(VTCR_EL2, (64 - ia_bits) | sl0 << 6 | TG0[granule] << 14 | PS_48 << 16)
    r.mem.set_cpr(VTTBR_EL2, RAM)
    r.mem.set_cpr(HCR_EL2.encoding.tuple, HCR_EL2.make(RW=1, VM=1))


def ours(r: Rig, ipa: int, write: bool) -> tuple[str, int]:
    try:
        return "pa", mmu.translate(r.mem, ipa, 1, write=write)
    except TranslationFault as fault:
        assert fault.stage == 2 and fault.ipa == ipa and fault.va == ipa
        return "fsc", fault.fsc


@pytest.fixture(scope="module")
def rig2() -> Rig:
    return Rig()


@pytest.mark.parametrize("setup", sorted(SETUPS), ids=lambda s: f"{s[0]}-ia{s[1]}-sl0{s[2]}")
def test_stage2_walk_against_unicorn(rig2, setup):
    granule, ia_bits, sl0 = setup
    start, concatenated = SETUPS[setup]
    r = rig2
    configure(r, granule, ia_bits, sl0)
    t = S2Tables(r, granule, ia_bits, start)
    assert mmu.S2_START_LEVEL[mmu.TG0_GRANULE[TG0[granule]]][sl0] == start
    g = PAGE_SHIFT[granule]
    assert max(1, (1 << (ia_bits - t.shift(start))) >> (g - 3)) == concatenated
    top = (1 << ia_bits) - (1 << g)                  # the last page: the last root table
    pages = [0x1000_0000 & ((1 << ia_bits) - 1), top, top - (5 << g)]
    pa = 0x8000_0000
    for i, ia in enumerate(pages):
        t.map_s2(3, ia, pa + (i << g), s2ap=(S2AP_RW, S2AP_RO, S2AP_RW)[i], af=i != 2)
    if start <= 2 and ia_bits > t.shift(2) + 1:      # a level 2 block in the top half
        block_ia = 1 << (ia_bits - 1)
        t.map_s2(2, block_ia, 1 << 40)
        pages.append(block_ia + 0x1234 * 8)
    pages.append((0x1000_0000 & ((1 << ia_bits) - 1)) ^ (1 << (ia_bits - 2)))  # unmapped
    for ia in pages:
        for write in (False, True):
            want = t.expect_s2(ia, write)
            assert ours(r, ia, write) == want, (hex(ia), write)
            oracle = r.oracle(ia, write)
            if want[0] == "pa":
                assert oracle == want[1], (hex(ia), write)
            else:
                assert oracle is None, (hex(ia), write, oracle)


@pytest.mark.parametrize("granule, ia_bits, sl0", [("4K", 32, 2), ("4K", 44, 0),
                                                   ("64K", 36, 0), ("16K", 44, 3),
                                                   ("4K", 40, 3), ("4K", 48, 2)])
def test_inconsistent_or_reserved_sl0_is_a_level0_translation_fault(rig2, granule, ia_bits,
                                                                   sl0):
    # AArch64.S2InconsistentSL() (the start level resolves no IPA bit, or needs more than 16
    # concatenated tables), reserved SL0 values, an IPA size above PAMax (the IMPLEMENTATION
    # DEFINED fault): a stage 2 level 0 Translation fault; Unicorn faults too.
    configure(rig2, granule, ia_bits, sl0)
    assert rig2.mem.cpr((3, 0, 0, 7, 0)) & 0xF == 0b0100 and PA_MAX == 44
    S2Tables(rig2, granule, min(ia_bits, 40), 2).map_s2(3, 0x10000, 0x8000_0000)
    assert ours(rig2, 0x10000, False) == ("fsc", FSC_TRANSLATION)
    assert rig2.oracle(0x10000) is None


def test_ipa_beyond_t0sz_is_a_level0_translation_fault(rig2):
    configure(rig2, "4K", 32, 1)
    S2Tables(rig2, "4K", 32, 1).map_s2(3, 0x1000, 0x8000_0000)
    assert ours(rig2, 0x1000, False) == ("pa", 0x8000_0000)
    assert ours(rig2, (1 << 32) | 0x1000, False) == ("fsc", FSC_TRANSLATION)
    assert rig2.oracle((1 << 32) | 0x1000) is None


def test_stage2_off_with_e2h_and_tge(rig2):
    # HCR_EL2.{E2H, TGE} = {1, 1}: HCR_EL2.VM behaves as 0 (Arm ARM D19.2 HCR_EL2.TGE).
    configure(rig2, "4K", 32, 1)
    S2Tables(rig2, "4K", 32, 1)
    assert ours(rig2, 0x5000, False) == ("fsc", FSC_TRANSLATION | 1)
    rig2.mem.set_cpr(HCR_EL2.encoding.tuple, HCR_EL2.make(RW=1, VM=1, E2H=1, TGE=1))
    try:
        assert ours(rig2, 0x5000, False) == ("pa", 0x5000)
    finally:
        rig2.mem.set_cpr(HCR_EL2.encoding.tuple, HCR_EL2.make(RW=1))
