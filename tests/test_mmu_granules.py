"""spe_emu's stage 1 walker (spe_emu.arch.mmu) for the 4 KiB, 16 KiB and 64 KiB granules, in the
EL1&0 (TTBR0 and TTBR1), EL2, EL2&0 (HCR_EL2.E2H = 1: TTBR0_EL2 and TTBR1_EL2) and EL3
regimes, against Unicorn's own walker.

Translation tables are built in Unicorn RAM by :class:`Tables`, which also keeps a Python model of
what it mapped (the expected PA, or the level at which the walk must fault). The oracle is
libunicorn's ``uc_vmem_translate`` (QEMU 5.0's get_phys_addr_lpae() under Unicorn 2.1.4), which
translates in the *current* Exception level's regime, so each check first switches PSTATE.EL to the
regime's EL (spe_emu.cpu.exceptions.set_pstate, which also rebuilds QEMU's hflags) and flushes
QEMU's TLB. It reports no fault status, so FSCs are checked against the model.

Where Unicorn departs from the architecture (block descriptors at levels that allow none; RES0
output-address bits of a block descriptor) the tests check spe_emu against the Arm ARM and record
Unicorn's behaviour separately.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unicorn import UC_ARCH_ARM64, UC_MODE_ARM, UC_PROT_ALL, UC_PROT_READ, UC_PROT_WRITE, Uc
from unicorn import arm64_const as A
from unicorn import unicorn_const as U
from unicorn.unicorn_py3.unicorn import uclib

from spe_emu.arch import mmu
from spe_emu.arch.context import HCR_EL2, SCR_EL3
from spe_emu.cpu.exceptions import PSTATE, set_pstate
from spe_emu.cpu.fastuc import FastAccess
from spe_emu.arch.faults import TranslationFault

# uc_err uc_vmem_translate(uc_engine *uc, uint64_t address, uc_prot prot, uint64_t *paddress)
# (include/unicorn/unicorn.h, Unicorn 2.1.4); a prototype of our own, leaving the binding's alone.
VMEM_TRANSLATE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_uint64))(("uc_vmem_translate", uclib))

RAM, RAM_SIZE = 0x4000_0000, 0x100_0000   # the translation tables live here
AF = 1 << 10
AP2 = 1 << 7
AP1 = 1 << 6
MASK64 = (1 << 64) - 1
FSC_TRANSLATION, FSC_PERMISSION = 0b000100, 0b001100

# Literal encodings (Arm ARM D19.2), independent of the walker's tables.
PAGE_SHIFT = {"4K": 12, "16K": 14, "64K": 16}
TG0 = {"4K": 0b00, "64K": 0b01, "16K": 0b10}
TG1 = {"16K": 0b01, "4K": 0b10, "64K": 0b11}
BLOCK_LEVELS = {"4K": (1, 2), "16K": (2,), "64K": (2,)}          # 48-bit OA
FORBIDDEN_BLOCKS = {"4K": (0,), "16K": (0, 1), "64K": (1,)}      # levels a walk can reach
SCTLR = {1: (3, 0, 1, 0, 0), 2: (3, 4, 1, 0, 0), 3: (3, 6, 1, 0, 0)}
TCR = {1: (3, 0, 2, 0, 2), 2: (3, 4, 2, 0, 2), 3: (3, 6, 2, 0, 2)}


@dataclass(frozen=True)
class Regime:
    name: str
    el: int
    upper: bool                 # TTBR1_ELx (VA[55] == 1, top bits all ones)
    ttbr: tuple[int, int, int, int, int]
    vhe: bool = False           # the EL2&0 regime: HCR_EL2.E2H = 1, TCR_EL2 in TCR_EL1 layout

    def __str__(self) -> str:
        return self.name


REGIMES = (Regime("EL1-TTBR0", 1, False, (3, 0, 2, 0, 0)),
           Regime("EL1-TTBR1", 1, True, (3, 0, 2, 0, 1)),
           Regime("EL2", 2, False, (3, 4, 2, 0, 0)),
           Regime("EL3", 3, False, (3, 6, 2, 0, 0)),
           Regime("EL2&0-TTBR0", 2, False, (3, 4, 2, 0, 0), vhe=True),
           Regime("EL2&0-TTBR1", 2, True, (3, 4, 2, 0, 1), vhe=True))
EL1_LOWER, EL1_UPPER, EL2, EL3, EL20_LOWER, EL20_UPPER = REGIMES


def start_level(page_shift: int, ia_bits: int) -> int:
    """The deepest level whose table resolves all ``ia_bits`` (by counting, not by formula)."""
    level = 3
    while page_shift + (page_shift - 3) * (4 - level) < ia_bits:
        level -= 1
    return level


class Rig:
    """One Unicorn engine: Non-secure EL1 and EL2 in AArch64 (SCR_EL3.{NS, RW},
    HCR_EL2.RW), so QEMU walks VMSAv8-64 tables for every regime."""

    def __init__(self) -> None:
        self.uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
        self.uc.ctl_set_cpu_model(A.UC_CPU_ARM64_MAX)
        self.uc.mem_map(RAM, RAM_SIZE, UC_PROT_ALL)
        self.mem = FastAccess(self.uc)
        self.mem.set_cpr(SCR_EL3.encoding.tuple, SCR_EL3.make(RW=1, NS=1))
        self.mem.set_cpr(HCR_EL2.encoding.tuple, HCR_EL2.make(RW=1))
        self.regime = EL1_LOWER

    def configure(self, regime: Regime, granule: str, tsz: int, ttbr: int, *, tbi: int = 0,
                  epd: int = 0, tg: int | None = None) -> None:
        """Switch to the regime's EL (PAN = 0) and program SCTLR.M, TCR and the TTBR (EL1: both
        halves alike, so either range can be probed)."""
        self.regime = regime
        el = regime.el
        self.mem.set_cpr(HCR_EL2.encoding.tuple, HCR_EL2.make(RW=1, E2H=int(regime.vhe)))
        set_pstate(self.mem, PSTATE.make(EL=el, SP=1, D=1, A=1, I=1, F=1))
        if el == 1 or regime.vhe:
            tcr = mmu.TCR_EL1.make(T0SZ=tsz, T1SZ=tsz, TBI0=tbi, TBI1=tbi, EPD0=epd, EPD1=epd,
                                   TG0=TG0[granule] if tg is None or regime.upper else tg,
                                   TG1=TG1[granule] if tg is None or not regime.upper else tg)
        else:
            tcr = mmu.TCR_EL23.make(T0SZ=tsz, TBI=tbi, TG0=TG0[granule] if tg is None else tg)
        self.mem.set_cpr(TCR[el], tcr)
        self.mem.set_cpr(regime.ttbr, ttbr)
        self.mem.set_cpr(SCTLR[el], self.mem.cpr(SCTLR[el]) | 1)

    def ours(self, va: int, write: bool = False) -> int | TranslationFault:
        try:
            return mmu.translate(self.mem, va, self.regime.el, write=write)
        except TranslationFault as fault:
            assert fault.va == va
            return fault

    def oracle(self, va: int, write: bool = False) -> int | None:
        """Unicorn's translation at the current EL, or None when it faults."""
        self.uc.ctl(U.UC_CTL_TLB_FLUSH, U.UC_CTL_IO_WRITE)
        pa = ctypes.c_uint64()
        err = VMEM_TRANSLATE(self.uc._uch, va, UC_PROT_WRITE if write else UC_PROT_READ,
                             ctypes.byref(pa))
        return None if err else pa.value


@lru_cache(maxsize=1)
def rig() -> Rig:
    return Rig()


class Tables:
    """Translation tables for one granule and input address size, written into the rig's RAM
    from ``RAM``, with a model of what they map: ``slots[(level, ia >> level_shift)]`` is
    ("table", None) or ("leaf", (pa, ap2)); anything else faults at that level."""

    def __init__(self, r: Rig, granule: str, ia_bits: int, *, root_offset: int = 0):
        self.r, self.granule, self.ia_bits = r, granule, ia_bits
        self.g = PAGE_SHIFT[granule]
        self.bits = self.g - 3
        self.start = start_level(self.g, ia_bits)
        self.root = RAM + root_offset
        self.next_table = RAM + (1 << self.g)  # the root table's granule holds nothing else
        self.slots: dict[tuple[int, int], tuple[str, object]] = {}
        self.addr: dict[tuple[int, int], int] = {}  # (level, prefix) -> table address
        self.addr[(self.start, 0)] = self.root
        r.mem.write(RAM, bytes(1 << self.g))

    def shift(self, level: int) -> int:
        return self.g + self.bits * (3 - level)

    def slot_pa(self, level: int, ia: int) -> int:
        """Where the descriptor of ``ia`` at ``level`` is (its table must exist)."""
        ia &= (1 << self.ia_bits) - 1
        table = self.addr[(level, ia >> self.shift(level - 1) if level > self.start else 0)]
        width = self.bits if level > self.start else self.ia_bits - self.shift(level)
        return table + 8 * ((ia >> self.shift(level)) & ((1 << width) - 1))

    def write_desc(self, level: int, ia: int, desc: int) -> None:
        self.r.mem.write(self.slot_pa(level, ia), desc.to_bytes(8, "little"))

    def path(self, level: int, ia: int, junk: int = 0) -> bool:
        """Make tables down to ``level`` for ``ia``; False when a leaf is in the way."""
        ia &= (1 << self.ia_bits) - 1
        for lvl in range(self.start, level):
            key = (lvl, ia >> self.shift(lvl))
            kind = self.slots.get(key)
            if kind is None:
                table = self.next_table
                assert table + (1 << self.g) <= RAM + RAM_SIZE
                self.next_table += 1 << self.g
                self.r.mem.write(table, bytes(1 << self.g))
                self.write_desc(lvl, ia, table | junk | 0b11)
                self.slots[key] = ("table", None)
                self.addr[(lvl + 1, ia >> self.shift(lvl))] = table
            elif kind[0] != "table":
                return False
        return True

    def map(self, level: int, ia: int, pa: int, *, ap2: int = 0, extra: int = 0,
            junk: int = 0) -> bool:
        """Map the ``level`` region holding ``ia`` to ``pa`` (aligned to the region): a page at
        level 3, a block elsewhere. ``extra`` bits go into the leaf descriptor, ``junk`` into
        every table descriptor made on the way (ignored bits only). False if it collides."""
        assert pa % (1 << self.shift(level)) == 0
        if not self.path(level, ia, junk):
            return False
        key = (level, (ia & ((1 << self.ia_bits) - 1)) >> self.shift(level))
        if key in self.slots:
            return False
        self.write_desc(level, ia, pa | extra | AF | (AP2 if ap2 else 0)
                        | (0b11 if level == 3 else 0b01))
        self.slots[key] = ("leaf", (pa, ap2))
        return True

    def expect(self, ia: int, write: bool = False) -> tuple[str, int]:
        """("pa", PA) or ("fsc", FSC) for an in-range ``ia``, from the model."""
        ia &= (1 << self.ia_bits) - 1
        for level in range(self.start, 4):
            kind = self.slots.get((level, ia >> self.shift(level)))
            if kind is None:
                return "fsc", FSC_TRANSLATION | level
            if kind[0] == "leaf":
                pa, ap2 = kind[1]
                if write and ap2:
                    return "fsc", FSC_PERMISSION | level
                return "pa", pa | (ia & ((1 << self.shift(level)) - 1))
        raise AssertionError("a table at level 3")


def in_range(regime: Regime, ia_bits: int, ia: int, tag: int = 0, tbi: int = 0) -> int:
    """The VA of input address ``ia`` in ``regime``: the bits above ``ia_bits`` all ones in the
    upper range, all zeros otherwise; with TBI, VA[63:56] = ``tag``."""
    va = ia & ((1 << ia_bits) - 1)
    if regime.upper:
        va |= MASK64 & ~((1 << ia_bits) - 1)
    if tbi:
        va = (va & ((1 << 56) - 1)) | tag << 56
    return va


def result(r: Rig, va: int, write: bool = False) -> tuple[str, int]:
    got = r.ours(va, write)
    return ("fsc", got.fsc) if isinstance(got, TranslationFault) else ("pa", got)


def check(r: Rig, va: int, want: tuple[str, int], write: bool = False) -> None:
    """spe_emu gives ``want`` exactly, and Unicorn agrees (same PA, or a fault)."""
    got = result(r, va, write)
    assert got == want, f"VA {va:#x}: {got} != {want}"
    oracle = r.oracle(va, write)
    if want[0] == "pa":
        assert oracle == want[1], f"VA {va:#x}: Unicorn {oracle} != {want[1]:#x}"
    else:
        assert oracle is None, f"VA {va:#x}: Unicorn translates to {oracle:#x}, spe_emu faults"


def setup(granule: str, regime: Regime, ia_bits: int, **kw) -> tuple[Rig, Tables]:
    r = rig()
    t = Tables(r, granule, ia_bits)
    r.configure(regime, granule, 64 - ia_bits, t.root, **kw)
    return r, t


GRANULES = ("4K", "16K", "64K")
LEAF_CASES = [(g, lvl) for g in GRANULES for lvl in (*BLOCK_LEVELS[g], 3)]


@pytest.mark.parametrize("regime", REGIMES, ids=str)
@pytest.mark.parametrize("granule,level", LEAF_CASES)
def test_page_and_block_mappings(granule: str, level: int, regime: Regime) -> None:
    r, t = setup(granule, regime, 48)
    size = 1 << t.shift(level)
    ia = 0x5A5A_5A5A_5A5A & ~(size - 1)
    pa = 0x8765_4321_0000 & ~(size - 1)
    assert t.map(level, ia, pa)
    for offset in (0, 0x18, size - 8):
        check(r, in_range(regime, 48, ia + offset), ("pa", pa + offset))
    # the neighbouring region of the same level is not mapped: fault at that level
    check(r, in_range(regime, 48, ia ^ size), ("fsc", FSC_TRANSLATION | level))
    # a VA with a different top-level index: fault at the start level
    check(r, in_range(regime, 48, ia ^ (1 << 47)), ("fsc", FSC_TRANSLATION | t.start))


@pytest.mark.parametrize("regime", REGIMES, ids=str)
@pytest.mark.parametrize("granule", GRANULES)
def test_start_level_and_index_widths(granule: str, regime: Regime) -> None:
    """Page walks for several input sizes: the start level is 4 - ceil((ia - g) / (g - 3)) and
    the initial table has 2**(ia - level_shift) entries (D8.2)."""
    for ia_bits in (25, 30, 36, 39, 42, 43, 47, 48):
        r, t = setup(granule, regime, ia_bits)
        want_start = {"4K": mmu.GRANULE_4K, "16K": mmu.GRANULE_16K,
                      "64K": mmu.GRANULE_64K}[granule].start_level(ia_bits)
        assert want_start == t.start
        top = (1 << ia_bits) - (1 << t.g)   # the last page of the range
        assert t.map(3, top, 0x1234_5678 << t.g & ((1 << 48) - 1))
        assert t.map(3, 0, 0xA << t.g)
        check(r, in_range(regime, ia_bits, top + 0x10),
              ("pa", (0x1234_5678 << t.g & ((1 << 48) - 1)) + 0x10))
        check(r, in_range(regime, ia_bits, 0x20), ("pa", (0xA << t.g) + 0x20))


def test_start_levels() -> None:
    """Arm ARM D8.2: with 48-bit inputs 4K and 16K start at level 0 (16K: 1 index bit), 64K at
    level 1; 39 bits: 4K level 1, 16K level 1, 64K level 2; 25 bits: 4K level 2, 16K and 64K
    level 3."""
    starts = {(g.name, ia): g.start_level(ia)
              for g in (mmu.GRANULE_4K, mmu.GRANULE_16K, mmu.GRANULE_64K) for ia in (48, 39, 25)}
    assert starts == {("4KB", 48): 0, ("16KB", 48): 0, ("64KB", 48): 1,
                      ("4KB", 39): 1, ("16KB", 39): 1, ("64KB", 39): 2,
                      ("4KB", 25): 2, ("16KB", 25): 3, ("64KB", 25): 3}
    assert [mmu.GRANULE_64K.level_shift(lvl) for lvl in (1, 2, 3)] == [42, 29, 16]
    assert [mmu.GRANULE_16K.level_shift(lvl) for lvl in (0, 1, 2, 3)] == [47, 36, 25, 14]


@pytest.mark.parametrize("regime", REGIMES, ids=str)
@pytest.mark.parametrize("granule", GRANULES)
def test_invalid_descriptor_at_each_level(granule: str, regime: Regime) -> None:
    r, t = setup(granule, regime, 48)
    ia = 0x7123_4567_8000
    for level in range(t.start, 4):
        t.path(level, ia)
        # bit 0 clear: invalid whatever the other bits say (they are ignored)
        t.write_desc(level, ia, 0xFFFF_FFFF_FFFF_FFFE)
        check(r, in_range(regime, 48, ia), ("fsc", FSC_TRANSLATION | level))
        t.write_desc(level, ia, 0)
        check(r, in_range(regime, 48, ia), ("fsc", FSC_TRANSLATION | level))


@pytest.mark.parametrize("regime", REGIMES, ids=str)
@pytest.mark.parametrize("granule", GRANULES)
def test_level3_block_encoding_is_invalid(granule: str, regime: Regime) -> None:
    """bits[1:0] == 0b01 at level 3 is reserved: an invalid descriptor (D8.3.1)."""
    r, t = setup(granule, regime, 48)
    ia = 0x1000_0000_0000
    t.path(3, ia)
    t.write_desc(3, ia, 0x4000_0000 | AF | 0b01)
    check(r, in_range(regime, 48, ia), ("fsc", FSC_TRANSLATION | 3))


FORBIDDEN_CASES = [(g, lvl) for g in GRANULES for lvl in FORBIDDEN_BLOCKS[g]]


def forbidden_block(granule: str, level: int, regime: Regime) -> tuple[Rig, int, int]:
    """A block descriptor for IA 0x4000_0000_1230 at ``level``: (rig, VA, the PA Unicorn
    gives it)."""
    r, t = setup(granule, regime, 48)
    ia = 0x4000_0000_1230
    t.path(level, ia)
    size = 1 << t.shift(level)
    t.write_desc(level, ia, size | AF | 0b01)    # OA = the next block of that size
    return r, in_range(regime, 48, ia), size + (ia & (size - 1))


@pytest.mark.parametrize("regime", REGIMES, ids=str)
@pytest.mark.parametrize("granule,level", FORBIDDEN_CASES)
def test_block_at_a_level_without_blocks_is_a_translation_fault(granule: str, level: int,
                                                                regime: Regime) -> None:
    """A block descriptor where the granule allows none (4K level 0, 16K levels 0-1, 64K level 1
    with a 48-bit OA: ``AArch64.BlockDescSupported()``) is invalid
    (``AArch64.DecodeDescriptorType()``): translation fault at that level."""
    r, va, _ = forbidden_block(granule, level, regime)
    assert result(r, va) == ("fsc", FSC_TRANSLATION | level)


@pytest.mark.parametrize("granule,level", FORBIDDEN_CASES)
def test_unicorn_accepts_blocks_the_architecture_forbids(granule: str, level: int) -> None:
    """Recorded deviation of the oracle: QEMU 5.0 (Unicorn 2.1.4) takes any bits[1:0] == 0b01
    above level 3 as a block. If this starts failing, Unicorn has caught up with the Arm ARM."""
    r, va, pa = forbidden_block(granule, level, EL1_LOWER)
    assert r.oracle(va) == pa


@pytest.mark.parametrize("regime", REGIMES, ids=str)
@pytest.mark.parametrize("granule,level", LEAF_CASES)
def test_read_only_write_is_a_permission_fault(granule: str, level: int, regime: Regime) -> None:
    r, t = setup(granule, regime, 48)
    size = 1 << t.shift(level)
    ia, pa = 3 * size % (1 << 47), 5 * size % (1 << 47)
    assert t.map(level, ia, pa, ap2=1)
    va = in_range(regime, 48, ia + 0x40)
    check(r, va, ("pa", pa + 0x40))
    check(r, va, ("fsc", FSC_PERMISSION | level), write=True)
    # AP[2] == 0: writable; AP[1] (EL0 access) does not matter to a privileged access
    assert t.map(level, ia + size, pa, extra=AP1)
    check(r, va + size, ("pa", pa + 0x40), write=True)


@pytest.mark.parametrize("granule", GRANULES)
def test_out_of_range_vas_fault_at_level_0(granule: str) -> None:
    """``AArch64.VAIsOutOfRange()``: VA[top:ia] all zeros (lower range) or all ones (upper range),
    top = 55 with TBI, else 63. A mapped IA reached through a VA with any other top bits faults
    at level 0."""
    ia_bits = 39
    for regime in REGIMES:
        for tbi in (0, 1):
            r, t = setup(granule, regime, ia_bits, tbi=tbi)
            ia = 0x12_3456_7000 & ~((1 << t.g) - 1)
            assert t.map(3, ia, 0x4000_0000)
            want = ("pa", 0x4000_0000 + 0x10)
            check(r, in_range(regime, ia_bits, ia + 0x10), want)
            for bit in range(ia_bits, 64):
                va = in_range(regime, ia_bits, ia + 0x10) ^ (1 << bit)
                if tbi and bit >= 56:   # the tag byte is ignored
                    check(r, va, want)
                else:
                    check(r, va, ("fsc", FSC_TRANSLATION))
            if tbi:
                check(r, in_range(regime, ia_bits, ia + 0x10, tag=0xA5, tbi=1), want)


@pytest.mark.parametrize("regime", (EL1_LOWER, EL1_UPPER, EL20_LOWER, EL20_UPPER), ids=str)
def test_epd_disables_a_range(regime: Regime) -> None:
    r, t = setup("4K", regime, 48, epd=1)
    assert t.map(3, 0x1000, 0x2000)
    check(r, in_range(regime, 48, 0x1008), ("fsc", FSC_TRANSLATION))


@pytest.mark.parametrize("regime", REGIMES, ids=str)
def test_reserved_tg_values(regime: Regime) -> None:
    """A reserved TGx value is an IMPLEMENTATION DEFINED implemented granule; spe_emu follows
    Unicorn: TG0 == 0b11 is 64 KiB, TG1 == 0b00 is 4 KiB (a walk with another granule would
    index other slots and fault)."""
    assert mmu.TG0_GRANULE[0b11] is mmu.GRANULE_64K
    assert mmu.TG1_GRANULE[0b00] is mmu.GRANULE_4K
    reserved, chosen = (0b00, "4K") if regime.upper else (0b11, "64K")
    r = rig()
    t = Tables(r, chosen, 48)
    r.configure(regime, chosen, 16, t.root, tg=reserved)
    ia = 0x7654_3210_0000 & ~((1 << t.g) - 1)
    assert t.map(3, ia, 0x9 << t.g)
    check(r, in_range(regime, 48, ia + 8), ("pa", (0x9 << t.g) + 8))


@pytest.mark.parametrize("granule,ia_bits,root_bytes", [
    ("16K", 48, 16),     # level 0: 2 entries
    ("64K", 48, 512),    # level 1: 64 entries
    ("4K", 36, 512),     # level 1: 64 entries
    ("4K", 48, 4096),
    ("64K", 36, 1024),   # level 2: 128 entries
])
@pytest.mark.parametrize("regime", REGIMES, ids=str)
def test_initial_table_aligned_to_its_size(granule: str, ia_bits: int, root_bytes: int,
                                           regime: Regime) -> None:
    """TTBR.BADDR holds the initial table aligned to its own size; the bits below it are RES0
    and ignored, as are ASID and CnP (``AArch64.S1TTBaseAddress()``)."""
    r = rig()
    offset = 3 * root_bytes   # not granule-aligned unless the table is a whole granule
    t = Tables(r, granule, ia_bits, root_offset=offset % (1 << PAGE_SHIFT[granule]))
    assert 8 << (ia_bits - t.shift(t.start)) == root_bytes
    junk = (0xBEEF << 48 | (root_bytes - 1)) & ~0b111 | 1   # ASID, RES0 bits, CnP
    r.configure(regime, granule, 64 - ia_bits, t.root | junk)
    ia = (1 << ia_bits) - (1 << t.g)
    assert t.map(3, ia, 0x77 << t.g)
    check(r, in_range(regime, ia_bits, ia + 4), ("pa", (0x77 << t.g) + 4))


@pytest.mark.parametrize("granule", ("16K", "64K"))
def test_low_address_bits_of_large_granule_descriptors_are_ignored(granule: str) -> None:
    """16K: descriptor bits 13:12, 64K: 15:12 are RES0 (OA[51:48] only with FEAT_LPA): neither
    the next-level table address nor the page address uses them (OA[47:16] for 64K)."""
    r, t = setup(granule, EL1_LOWER, 48)
    junk = ((1 << t.g) - 1) & ~0xFFF
    ia = 0x0123_4567_0000 & ~((1 << t.g) - 1)
    assert t.map(3, ia, 0x33 << t.g, extra=junk, junk=junk)
    check(r, ia + 0x20, ("pa", (0x33 << t.g) + 0x20))


def test_block_oa_res0_bits_are_ignored() -> None:
    """A block's OA is OA[47:level_shift] (``AArch64.LeafBase()`` aligns the descriptor's address
    to the block size). Recorded deviation: QEMU 5.0 ORs the RES0 bits in between into the PA."""
    r, t = setup("4K", EL1_LOWER, 39)
    t.path(1, 0)
    t.write_desc(1, 0, 0x8000_0000 | 0x1234_5000 | AF | 0b01)
    assert result(r, 0x1000) == ("pa", 0x8000_1000)
    assert r.oracle(0x1000) == 0x8000_0000 | 0x1234_5000 | 0x1000


@pytest.mark.parametrize("tsz,effective", [(0, 16), (15, 16), (40, 39), (63, 39)])
def test_txsz_outside_the_supported_range_is_clamped(tsz: int, effective: int) -> None:
    """TxSZ < 16 or > 39 is CONSTRAINED UNPREDICTABLE (fault, or the nearest supported size);
    spe_emu, like Unicorn, uses the nearest supported size."""
    r = rig()
    ia_bits = 64 - effective
    t = Tables(r, "4K", ia_bits)
    r.configure(EL1_LOWER, "4K", tsz, t.root)
    ia = (1 << ia_bits) - 0x1000
    assert t.map(3, ia, 0x5000)
    check(r, ia + 0x8, ("pa", 0x5008))
    check(r, 1 << ia_bits, ("fsc", FSC_TRANSLATION))


def test_mmu_off() -> None:
    # (stage 2, HCR_EL2.VM = 1: tests/test_mmu_stage2.py)
    r = rig()
    r.configure(EL2, "4K", 16, RAM)
    r.mem.set_cpr(SCTLR[2], r.mem.cpr(SCTLR[2]) & ~1)
    assert r.ours(0xFFFF_0000_1234_5678) == 0xFFFF_0000_1234_5678


# --- random mappings against the oracle ----------------------------------------------------

@st.composite
def scenarios(draw):
    granule = draw(st.sampled_from(GRANULES))
    regime = draw(st.sampled_from(REGIMES))
    tsz = draw(st.integers(16, 39))
    tbi = draw(st.integers(0, 1))
    g = PAGE_SHIFT[granule]
    ia_bits = 64 - tsz
    start = start_level(g, ia_bits)
    levels = [lvl for lvl in (*BLOCK_LEVELS[granule], 3) if lvl >= start]
    junk_bits = st.integers(0, (1 << g) - 1).map(lambda b: b & ~0xFFF)  # RES0 low OA bits
    maps = draw(st.lists(st.tuples(st.sampled_from(levels), st.integers(0, (1 << ia_bits) - 1),
                                   st.integers(0, (1 << 48) - 1), st.booleans(), junk_bits),
                         min_size=1, max_size=5))
    probes = draw(st.lists(st.tuples(st.integers(0, len(maps)),  # len(maps): a random IA
                                     st.integers(0, (1 << ia_bits) - 1), st.integers(0, 255),
                                     st.booleans(), st.integers(-1, 63)),
                           min_size=1, max_size=8))
    ttbr = draw(st.tuples(st.integers(0, (1 << 16) - 1), st.integers(0, (1 << g) - 1),
                          st.integers(0, (1 << g) - 1)))  # ASID, low bits, root slot
    return granule, regime, tsz, tbi, maps, probes, ttbr


@settings(max_examples=250)
@given(scenarios())
def test_random_mappings_match_unicorn(scenario) -> None:
    """Random page and block mappings (and table descriptors and TTBRs with ignored bits set)
    at random input sizes, in every regime; random probes near the mappings or anywhere, reads
    and writes, tagged, and with one top bit flipped (out of range). spe_emu and Unicorn give
    the same PA or both fault, and spe_emu's PA / FSC is the model's."""
    granule, regime, tsz, tbi, maps, probes, (asid, low, slot) = scenario
    r, g, ia_bits = rig(), PAGE_SHIFT[granule], 64 - tsz
    # The initial table anywhere its own size aligns it in the first granule; the TTBR has an
    # ASID, CnP and the RES0 bits below that alignment set at random: all ignored.
    root_bytes = 8 << (ia_bits - (g + (g - 3) * (3 - start_level(g, ia_bits))))
    t = Tables(r, granule, ia_bits, root_offset=slot * root_bytes % (1 << g))
    r.configure(regime, granule, tsz, t.root | asid << 48 | low & (root_bytes - 1), tbi=tbi)
    placed = []
    for level, ia, pa, ap2, junk in maps:
        size = 1 << t.shift(level)
        extra = junk if level == 3 else 0
        if t.map(level, ia, pa & ~(size - 1), ap2=ap2, extra=extra, junk=junk):
            placed.append((ia & ~(size - 1), size))
    for which, ia, tag, write, flip in probes:
        if which < len(placed):
            base, size = placed[which]
            ia = base + ia % size
        va = in_range(regime, ia_bits, ia, tag, tbi)
        want = t.expect(ia, write)
        if flip >= ia_bits and not (tbi and flip >= 56):
            va ^= 1 << flip
            want = ("fsc", FSC_TRANSLATION)
        check(r, va, want, write)
