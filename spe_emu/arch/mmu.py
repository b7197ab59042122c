"""A VMSAv8-64 table walker for the host side of the emulator: stage 1, and stage 2 for the
EL1&0 regime.

The SPU writes records through the *owning* translation regime as a privileged write (SPE
supplement §3.4, §3.5.3), and semihosting reads guest buffers by virtual address, whatever EL
the PE is executing at. Unicorn's own ``uc_vmem_translate`` translates with the current EL's
permissions, so spe_emu walks the tables itself: the 4 KiB, 16 KiB and 64 KiB translation
granules (Arm ARM D8.2 "Translation granules"), TTBR0/TTBR1 for the EL1&0 regime and the EL2&0
regime (HCR_EL2.E2H == 1), TTBR0 for EL2 and EL3, table, block and page descriptors (Arm ARM
D8.3 "Translation table descriptor formats"), AP[2] write permission, the Access flag (and, for
an agent that manages them, its hardware update and the dirty state, D8.5), with a 48-bit
output address (no FEAT_LPA / FEAT_LPA2 / FEAT_LVA).

With stage 2 enabled for the EL1&0 regime (:func:`stage2_enabled`: HCR_EL2.VM), every
output address of stage 1 and every stage 1 table address is an IPA, translated by the stage 2
walk of VTTBR_EL2 / VTCR_EL2 ({T0SZ, SL0, TG0, PS}; concatenated initial tables; stage 2
descriptors with S2AP and AF): :func:`stage2`.

The walk of one table tree (:func:`walk`) takes the granule, the input address size and the
start level as arguments; stage 1 (:func:`translate`) and stage 2 (:func:`stage2`) use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from ..sysreg import RegisterSpec, reg
from .id_regs import ID_AA64MMFR0_EL1
from .context import HCR_EL2, SCR_EL3, SCTLR_ELX, SCTLR_ENC, TTBR0_ENC, TTBR1_EL1, banked
from .faults import (
    FSC_ACCESS_FLAG, FSC_ADDRESS_SIZE, FSC_KIND_MASK, FSC_PERMISSION, FSC_TRANSLATION,
    FSC_WALK_EXTERNAL, ExternalAbort, TranslationFault,
)


class PhysicalView(Protocol):
    """What the walker reads: system registers by encoding and physical memory (the machine's
    :class:`spe_emu.cpu.fastuc.FastAccess` is one)."""

    def cpr(self, enc: tuple[int, int, int, int, int]) -> int: ...

    def read(self, pa: int, size: int) -> bytes: ...

_TCR_TWO_RANGES = ("E0PD1 56", "E0PD0 55", "HD 40", "HA 39", "TBI1 38", "TBI0 37", "IPS 34:32",
                   "TG1 31:30", "EPD1 23", "T1SZ 21:16", "TG0 15:14", "SH0 13:12", "ORGN0 11:10", "IRGN0 9:8", "EPD0 7",
                   "T0SZ 5:0")
TCR_EL1 = reg("TCR_EL1", (3, 0, 2, 0, 2), *_TCR_TWO_RANGES,
              doc="Arm ARM D19.2 (IPS, SH0, ORGN0 and IRGN0 are not modelled: the firmware "
                  "programs them; HA/HD are read by the SPU's walks only, docs/model.md)")
TCR_EL23 = reg("TCR_EL2", (3, 4, 2, 0, 2), "HD 22", "HA 21", "TBI 20", "PS 18:16", "TG0 15:14",
               "T0SZ 5:0",
               doc="Arm ARM D19.2 (HCR_EL2.E2H == 0; TCR_EL3 has the same layout)")
TCR_EL2_E2H = reg("TCR_EL2", (3, 4, 2, 0, 2), *_TCR_TWO_RANGES,
                  doc="Arm ARM D19.2 TCR_EL2 when HCR_EL2.E2H == 1: the TCR_EL1 layout, for "
                      "the EL2&0 regime's two VA ranges")
TCR_ENC = banked(TCR_EL1.encoding.tuple)
TTBR1_EL2 = (3, 4, 2, 0, 1)
TTBR = reg("TTBRn_ELx", TTBR0_ENC[1], "ASID 63:48", "BADDR 47:1", "CnP 0", doc="Arm ARM D19.2")
# VMSAv8-64 descriptor, stage 1, 48-bit OA (Arm ARM D8.3). OA is the widest address field (a
# 4 KiB granule's next-level table or page address); a granule or block size clears its low
# bits (the 16 KiB / 64 KiB bits 13:12 / 15:12 are RES0, or OA[51:48] with FEAT_LPA).
# SH and AttrIndx (memory attributes, not modelled) are there for the firmware, which builds
# its own tables.
DESC = reg("DESC", (3, 0, 0, 0, 0), "UXN 54", "PXN 53", "DBM 51", "OA 47:12", "AF 10",
           "SH 9:8", "AP2 7", "AP1 6", "AttrIndx 4:2", "TYPE 1", "VALID 0",
           doc="Arm ARM D8.3 (DBM: D8.5.2 hardware management of the dirty state)")

# Stage 2 (Arm ARM D19.2 VTCR_EL2, VTTBR_EL2; D8.3 stage 2 Block and Page descriptors:
# S2AP[1] allows writes, S2AP[0] reads; HA and the stage 2 memory attributes are not modelled).
VTCR_EL2 = reg("VTCR_EL2", (3, 4, 2, 1, 2), "HD 22", "HA 21", "PS 18:16", "TG0 15:14",
               "SH0 13:12",
               "ORGN0 11:10", "IRGN0 9:8", "SL0 7:6", "T0SZ 5:0",
               doc="Arm ARM D19.2 (SH0, ORGN0 and IRGN0 are not modelled)")
VTTBR_EL2 = reg("VTTBR_EL2", (3, 4, 2, 1, 0), "VMID 63:48", "BADDR 47:1", "CnP 0",
                doc="Arm ARM D19.2")
S2DESC = reg("S2DESC", (3, 0, 0, 0, 0), "XN 54", "DBM 51", "OA 47:12", "AF 10", "SH 9:8",
             "S2AP 7:6", "MemAttr 5:2", "TYPE 1", "VALID 0", doc="Arm ARM D8.3 (stage 2)")
# TCR_ELx.{IPS, PS} and ID_AA64MMFR0_EL1.PARange encodings -> bits (Arm ARM D19.2); 0b0110
# (52 bits) needs FEAT_LPA, which the walker does not have: 48.
PA_BITS = {0b000: 32, 0b001: 36, 0b010: 40, 0b011: 42, 0b100: 44, 0b101: 48, 0b110: 48}
OA_MASK = DESC.field("OA").mask
FINAL_LEVEL = 3
# TxSZ range without FEAT_LVA (minimum 16: 48-bit input) and FEAT_TTST (maximum 39).
TXSZ_MIN, TXSZ_MAX = 16, 39


@dataclass(frozen=True, slots=True)
class Granule:
    """One translation granule (Arm ARM D8.2 "Translation granules"): a table is one granule of
    8-byte descriptors, so each level resolves ``page_shift - 3`` bits of the input address,
    and a descriptor at ``level`` maps ``1 << level_shift(level)`` bytes.

    Attributes:
        name: "4KB", "16KB", "64KB".
        page_shift: log2 of the granule size (the page and table alignment).
        block_levels: the levels at which a block descriptor is valid with a 48-bit OA
            (``AArch64.BlockDescSupported()``); elsewhere descriptor bits[1:0] == 0b01 are an
            invalid descriptor (D8.3).
    """

    name: str
    page_shift: int
    block_levels: frozenset[int]

    @property
    def index_bits(self) -> int:
        """Input address bits one granule-sized table resolves (9, 11 or 13)."""
        return self.page_shift - 3

    def level_shift(self, level: int) -> int:
        """log2 of the size a descriptor at ``level`` maps (the lowest IA bit its index uses)."""
        return self.page_shift + self.index_bits * (FINAL_LEVEL - level)

    def start_level(self, ia_bits: int) -> int:
        """Level of the initial lookup for an ``ia_bits`` input address (stage 1,
        ``AArch64.S1StartLevel()``: 4 - RoundUp((ia_bits - page_shift) / index_bits))."""
        return FINAL_LEVEL - (ia_bits - self.page_shift - 1) // self.index_bits


GRANULE_4K = Granule("4KB", 12, frozenset({1, 2}))
GRANULE_16K = Granule("16KB", 14, frozenset({2}))
GRANULE_64K = Granule("64KB", 16, frozenset({2}))
# TCR_ELx.TG0 and TCR_EL1.TG1 encodings (Arm ARM D19.2; note TG1 encodes differently). The
# reserved values (TG0 0b11, TG1 0b00) take the granule Unicorn 2.1.4 walks with (see
# translate()): QEMU 5.0 reads TG0[0] as "64K" and TG0[1] as "16K", 64K first, and TG1 0b00
# as neither, so 4K.
TG0_GRANULE = {0b00: GRANULE_4K, 0b01: GRANULE_64K, 0b10: GRANULE_16K, 0b11: GRANULE_64K}
TG1_GRANULE = {0b00: GRANULE_4K, 0b01: GRANULE_16K, 0b10: GRANULE_4K, 0b11: GRANULE_64K}
# VTCR_EL2.SL0 -> level of the stage 2 initial lookup, per granule (Arm ARM D19.2 VTCR_EL2.SL0,
# ``AArch64.S2StartLevel()``; without FEAT_TTST and FEAT_LPA2 the other values are reserved,
# ``AArch64.S2InvalidSL()``).
S2_START_LEVEL = {GRANULE_4K: {0b00: 2, 0b01: 1, 0b10: 0},
                  GRANULE_16K: {0b00: 3, 0b01: 2, 0b10: 1},
                  GRANULE_64K: {0b00: 3, 0b01: 2, 0b10: 1}}
S2_MAX_CONCATENATED_BITS = 4
"""At most 2**4 = 16 translation tables are concatenated at the stage 2 initial lookup."""
# (granule, start level) -> the smallest PAMax (bits) with which VTCR_EL2.SL0 may select it
# (``AArch64.S2InvalidSL()``: 4 KiB level 0 and 64 KiB level 1 need 44 bits, 16 KiB level 1
# needs 42).
S2_START_MIN_PA = {(GRANULE_4K, 0): 44, (GRANULE_16K, 1): 42, (GRANULE_64K, 1): 44}


@dataclass(frozen=True, slots=True)
class VaRange:
    """Where the TCR fields of one VA range are: the lower range (TTBR0_ELx) of any regime, or
    the upper range (TTBR1_EL1) of EL1&0."""

    tcr: RegisterSpec     # (its encoding is the TCR_ELx of the regime)
    tsz: str
    tg: str
    granules: dict[int, Granule]
    tbi: str
    ps: str               # TCR_EL1.IPS / TCR_ELx.PS: the output address size
    epd: str | None       # (EL2 and EL3 have no EPD: their walks cannot be disabled)
    ttbr: tuple[int, int, int, int, int]
    upper: bool
    ha: str = "HA"        # hardware Access flag / dirty state enables (D8.5)
    hd: str = "HD"


EL1_LOWER = VaRange(TCR_EL1, "T0SZ", "TG0", TG0_GRANULE, "TBI0", "IPS", "EPD0", TTBR0_ENC[1],
                    False)
EL1_UPPER = VaRange(TCR_EL1, "T1SZ", "TG1", TG1_GRANULE, "TBI1", "IPS", "EPD1", TTBR1_EL1,
                    True)
ELX_LOWER = {el: VaRange(TCR_EL23, "T0SZ", "TG0", TG0_GRANULE, "TBI", "PS", None,
                         TTBR0_ENC[el], False)
             for el in (2, 3)}
# The EL2&0 regime (HCR_EL2.E2H == 1, FEAT_VHE): two VA ranges as EL1&0, TCR_EL2 in the
# TCR_EL1 layout, TTBR0_EL2 / TTBR1_EL2 (Arm ARM D8.1.3, D19.2 TCR_EL2).
EL2_VHE_LOWER = VaRange(TCR_EL2_E2H, "T0SZ", "TG0", TG0_GRANULE, "TBI0", "IPS", "EPD0",
                        TTBR0_ENC[2], False)
EL2_VHE_UPPER = VaRange(TCR_EL2_E2H, "T1SZ", "TG1", TG1_GRANULE, "TBI1", "IPS", "EPD1",
                        TTBR1_EL2, True)


@dataclass(frozen=True, slots=True)
class Leaf:
    """The block or page descriptor a walk ended on, its level and the output address."""

    desc: int
    level: int
    oa: int
    at: int = 0           # the (input) address the descriptor was read from


def initial_table(ttbr: int, granule: Granule, ia_bits: int, level: int) -> int:
    """Base address of the initial lookup's table from a TTBRn_ELx value: BADDR aligned to the
    size of that table, 8 << (ia_bits - level_shift(level)) bytes, the lower bits being RES0
    (``AArch64.S1TTBaseAddress()``; v8.0: "baselowerbound" in
    ``AArch64.TranslationTableWalk()``). A 4 KiB granule table starting at level 1 with a
    39-bit input address is 4 KiB; with 36 bits it is 512 bytes."""
    table_bytes = 8 << (ia_bits - granule.level_shift(level))
    return ttbr & TTBR.field("BADDR").mask & ~(table_bytes - 1)


def walk(read_desc: Callable[[int], int], ia: int, table: int, granule: Granule, ia_bits: int,
         level: int, oa_bits: int | None = None) -> Leaf:
    """Walk one translation table tree (Arm ARM D8.2, D8.3; ``AArch64.S1Walk()``).

    ``table`` is the initial table's address, ``level`` its level and ``ia_bits`` the input
    address size: the initial table has ``1 << (ia_bits - level_shift(level))`` entries (so the
    IA bits above ``ia_bits``, all ones in an upper range, are not part of its index); every
    later table is one granule. ``read_desc(pa)`` reads one 64-bit descriptor.

    Descriptor bits[1:0] (``AArch64.DecodeDescriptorType()``): 0bx0 invalid; 0b11 a table
    before the final level, a page at level 3; 0b01 a block at a level of
    ``granule.block_levels``, invalid anywhere else (including level 3). A table's next-level
    address is OA[47:page_shift]; a leaf's output address is OA[47:level_shift(level)] with the
    IA below it (the descriptor bits in between are RES0 and ignored).

    With ``oa_bits`` (the output address size, ``AArch64.S1Walk()``'s
    ``AArch64.OAOutOfRange()`` checks), an initial table address, a next-level table address or
    an output address with a bit set at or above ``oa_bits`` is an Address size fault: level 0
    for the initial table (the TTBR), else the level of the descriptor that holds it; a
    ``read_desc`` that raises :class:`ExternalAbort` (no memory there) is a synchronous
    External abort on the translation table walk at the level being read
    (``AArch64.FetchDescriptor()``). Without it (Unicorn's own walker has neither check) a
    failing read propagates.

    Raises:
        TranslationFault: an invalid descriptor, FSC = translation fault at its level; with
            ``oa_bits``, also the Address size and External abort faults above.
    """
    if oa_bits is not None and table >> oa_bits:
        raise TranslationFault(ia, FSC_ADDRESS_SIZE)  # (level 0)
    index_bits = ia_bits - granule.level_shift(level)
    table_mask = OA_MASK & ~((1 << granule.page_shift) - 1)
    while True:
        shift = granule.level_shift(level)
        index = (ia >> shift) & ((1 << index_bits) - 1)
        if oa_bits is None:
            desc = read_desc(table + 8 * index)
        else:
            try:
                desc = read_desc(table + 8 * index)
            except ExternalAbort:
                raise TranslationFault(ia, FSC_WALK_EXTERNAL | level) from None
        if not DESC.get(desc, "VALID"):
            raise TranslationFault(ia, FSC_TRANSLATION | level)
        if DESC.get(desc, "TYPE"):
            if level < FINAL_LEVEL:
                table = desc & table_mask
                if oa_bits is not None and table >> oa_bits:
                    raise TranslationFault(ia, FSC_ADDRESS_SIZE | level)
                level += 1
                index_bits = granule.index_bits
                continue
        elif level not in granule.block_levels:
            raise TranslationFault(ia, FSC_TRANSLATION | level)
        size_mask = (1 << shift) - 1
        oa = (desc & OA_MASK & ~size_mask) | (ia & size_mask)
        if oa_bits is not None and oa >> oa_bits:
            raise TranslationFault(ia, FSC_ADDRESS_SIZE | level)
        return Leaf(desc, level, oa, table + 8 * index)


def va_range(regime: int, va: int, e2h: bool = False) -> VaRange:
    """The VA range ``va`` selects: VA bit 55 picks TTBR0/TTBR1 in EL1&0 and, with
    HCR_EL2.E2H == 1 (``e2h``), in EL2&0 (``AArch64.GetVARange()``); EL2 without E2H and EL3
    have the lower range only."""
    if regime == 1:
        return EL1_UPPER if (va >> 55) & 1 else EL1_LOWER
    if regime == 2 and e2h:
        return EL2_VHE_UPPER if (va >> 55) & 1 else EL2_VHE_LOWER
    return ELX_LOWER[regime]


def regime_controls(cpr: Callable[[tuple[int, int, int, int, int]], int]) -> tuple[bool, bool]:
    """(stage 2 of EL1&0 enabled, HCR_EL2.E2H): the HCR_EL2 / SCR_EL3 state that decides how
    the host-side walker translates; a write that changes it invalidates cached translations."""
    return stage2_enabled(cpr), bool(HCR_EL2.get(cpr(HCR_EL2.encoding.tuple), "E2H"))


def stage2_enabled(cpr: Callable[[tuple[int, int, int, int, int]], int]) -> bool:
    """Whether the Non-secure EL1&0 regime has stage 2 translation: EL2 is enabled
    (``EL2Enabled()``: SCR_EL3.NS == 1; the machine implements EL2 and EL3), HCR_EL2.VM == 1
    and not HCR_EL2.{E2H, TGE} == {1, 1}, where HCR_EL2.VM behaves as 0 (Arm ARM D19.2
    HCR_EL2.TGE). ``cpr`` reads a system register by encoding."""
    hcr = cpr(HCR_EL2.encoding.tuple)
    return bool(HCR_EL2.get(hcr, "VM") and SCR_EL3.get(cpr(SCR_EL3.encoding.tuple), "NS")
                and not (HCR_EL2.get(hcr, "E2H") and HCR_EL2.get(hcr, "TGE")))


def _pa_max(cpr: Callable[[tuple[int, int, int, int, int]], int]) -> int:
    """``AArch64.PAMax()``: ID_AA64MMFR0_EL1.PARange in bits (48 at most, no FEAT_LPA)."""
    return PA_BITS.get(ID_AA64MMFR0_EL1.get(cpr(ID_AA64MMFR0_EL1.encoding.tuple), "PARange"),
                       48)


DescWriter = Callable[[int, int], None]
"""``write_desc(address, descriptor)``: stores an updated descriptor (hardware management of
the Access flag and dirty state, Arm ARM D8.5) at the address it was read from."""


def _managed(spec: RegisterSpec, desc: int, *, write: bool, ha: bool, hd: bool,
             write_allowed: Callable[[int], bool], make_writable: Callable[[int], int]
             ) -> tuple[int, int | None]:
    """The Access flag and dirty state checks of one leaf descriptor for an agent that manages
    them (Arm ARM D8.5.1, D8.5.2; with ``ha``/``hd`` False, as one that does not): returns (the
    descriptor, updated or not, and the fault kind FSC_ACCESS_FLAG / FSC_PERMISSION or None).

    AF == 0: set to 1 when ``ha``, else an Access flag fault. A write to a descriptor that
    does not allow it: made writable (the descriptor is then dirty) when ``hd`` and the
    descriptor's DBM bit is 1, else a Permission fault. The Access flag fault is checked
    first."""
    if not spec.get(desc, "AF"):
        if not ha:
            return desc, FSC_ACCESS_FLAG
        desc = spec.set(desc, "AF", 1)
    if write and not write_allowed(desc):
        if not (hd and spec.get(desc, "DBM")):
            return desc, FSC_PERMISSION
        desc = make_writable(desc)
    return desc, None


def stage2(mem: PhysicalView, ipa: int, *, write: bool, read_desc: Callable[[int], int],
           va: int | None = None, s1ptw: bool = False,
           write_desc: DescWriter | None = None) -> int:
    """Physical address of the intermediate physical address ``ipa`` by the stage 2
    translation of the EL1&0 regime (Arm ARM D8.2, D8.3; ``AArch64.S2Walk()``), checked for a
    write (``write``: S2AP[1]) or a read (S2AP[0]) and the Access flag. ``read_desc(pa)`` reads
    one descriptor, raising :class:`ExternalAbort` where there is no memory.

    VTCR_EL2: TG0 the granule (its reserved value as for stage 1, :data:`TG0_GRANULE`), T0SZ
    the IPA size (clamped to 16..39 as for stage 1), SL0 the initial lookup level
    (:data:`S2_START_LEVEL`), PS the output address size (at most ID_AA64MMFR0_EL1.PARange).
    The initial lookup may use up to 16 concatenated tables, VTTBR_EL2.BADDR aligned to their
    total size. A stage 2 level 0 Translation fault: an IPA beyond T0SZ
    (``AArch64.IPAIsOutOfRange()``), a reserved SL0 or one inconsistent with T0SZ (the initial
    lookup would resolve no bit, or need more than 16 tables: ``AArch64.S2InconsistentSL()``).
    Address size faults and External aborts on the walk as in :func:`walk`.

    With ``write_desc`` the translating agent manages the Access flag and dirty state (the SPU
    with PMBIDR_EL1.F == 1, Arm ARM D17.8.3.1) where VTCR_EL2.HA (HD: also) enables it: an
    AF == 0 leaf gets AF = 1, a write to a leaf with S2AP[1] == 0 and DBM == 1 gets S2AP[1] = 1
    (D8.5), stored through ``write_desc(pa, descriptor)``. Without it (or with HA == 0) those
    are Access flag and Permission faults.

    Raises:
        TranslationFault: with ``stage`` = 2, ``ipa``, ``s1ptw`` and ``va`` (default: the IPA);
            FSC = translation, Address size, Access flag, permission fault or synchronous
            External abort on the walk, with the level.
    """
    cpr = mem.cpr
    vtcr = cpr(VTCR_EL2.encoding.tuple)
    fault_va = ipa if va is None else va

    def fault(fsc: int) -> TranslationFault:
        return TranslationFault(fault_va, fsc, stage=2, ipa=ipa, s1ptw=s1ptw)

    granule = TG0_GRANULE[VTCR_EL2.get(vtcr, "TG0")]
    ia_bits = 64 - min(max(VTCR_EL2.get(vtcr, "T0SZ"), TXSZ_MIN), TXSZ_MAX)
    level = S2_START_LEVEL[granule].get(VTCR_EL2.get(vtcr, "SL0"))
    pa_max = _pa_max(cpr)
    if (level is None or ipa >> ia_bits or ia_bits > pa_max
            or pa_max < S2_START_MIN_PA.get((granule, level), 0)
            or not 1 <= ia_bits - granule.level_shift(level)
            <= granule.index_bits + S2_MAX_CONCATENATED_BITS):
        raise fault(FSC_TRANSLATION)  # (level 0)
    table = initial_table(cpr(VTTBR_EL2.encoding.tuple), granule, ia_bits, level)
    oa_bits = min(PA_BITS.get(VTCR_EL2.get(vtcr, "PS"), 48), pa_max)
    try:
        leaf = walk(read_desc, ipa, table, granule, ia_bits, level, oa_bits)
    except TranslationFault as found:
        raise fault(found.fsc) from None
    if not write and not S2DESC.get(leaf.desc, "S2AP") & 0b01:
        raise fault(FSC_PERMISSION | leaf.level)
    ha = write_desc is not None and VTCR_EL2.get(vtcr, "HA") == 1
    desc, kind = _managed(S2DESC, leaf.desc, write=write, ha=ha,
                          hd=ha and VTCR_EL2.get(vtcr, "HD") == 1,
                          write_allowed=lambda d: S2DESC.get(d, "S2AP") & 0b10,
                          make_writable=lambda d: S2DESC.set(d, "S2AP",
                                                             S2DESC.get(d, "S2AP") | 0b10))
    if kind is not None:
        raise fault(kind | leaf.level)
    if desc != leaf.desc:
        write_desc(leaf.at, desc)
    return leaf.oa


def translate(mem: PhysicalView, va: int, regime_el: int, *, write: bool = False,
              checked_read: Callable[[int], int] | None = None,
              write_desc: DescWriter | None = None) -> int:
    """Physical address of ``va`` in the translation regime of ``regime_el`` (1 = EL1&0, 2,
    3), checked like a privileged data access (AP[2] for a write, the Access flag; Arm ARM
    D8.4, D8.5). ``mem`` reads the engine's system registers and physical memory. With stage 2
    enabled for EL1&0 (:func:`stage2_enabled`), the stage 1 table addresses and its output
    address are IPAs translated by :func:`stage2` (a read for a stage 1 table, ``s1ptw``; the
    access itself for the output address).

    Before the walk (``AArch64.S1Translate()``; v8.0: ``AArch64.TranslationTableWalk()``,
    "basefound" / "disabled"), a translation fault at level 0:

    - the VA is out of its range (``AArch64.VAIsOutOfRange()``): VA[top:64-TxSZ] must be all
      zeros for the lower range, all ones for the upper range (TTBR1_EL1), top being 55 with
      TCR_ELx.TBIx == 1 (the tag byte is ignored), else 63;
    - TCR_EL1.EPDx == 1 disables walks of the range.

    TxSZ outside 16..39 is CONSTRAINED UNPREDICTABLE (Unpredictable_RESTnSZ: a fault, or the
    nearest supported value); as Unicorn 2.1.4 does, it is clamped.

    A reserved TGx value (TCR_ELx.TG0 == 0b11, TCR_EL1.TG1 == 0b00) is treated as an
    IMPLEMENTATION DEFINED choice among the implemented granules (Arm ARM D19.2 TCR_ELx.TGx,
    CONSTRAINED UNPREDICTABLE). spe_emu makes the choice Unicorn 2.1.4 makes, checked against
    ``uc_vmem_translate`` in tests/test_mmu_granules.py: TG0 == 0b11 is 64 KiB, TG1 == 0b00 is
    4 KiB (:data:`TG0_GRANULE`, :data:`TG1_GRANULE`).

    With ``checked_read`` (reads one descriptor at a PA, raising :class:`ExternalAbort` where
    there is no memory), the walk also makes the output address size checks (TCR_EL1.IPS /
    TCR_ELx.PS, at most ID_AA64MMFR0_EL1.PARange: ``AArch64.PAMax()``) and reports External
    aborts on the walk (:func:`walk`); without it, as Unicorn 2.1.4's walker, stage 1 does
    neither.

    With HCR_EL2.E2H == 1, ``regime_el`` 2 is the EL2&0 regime (FEAT_VHE): TTBR0_EL2 and
    TTBR1_EL2 picked by VA[55], TCR_EL2 in the TCR_EL1 layout (:data:`TCR_EL2_E2H`).

    Hardware management of the Access flag and dirty state (D8.5): the PE's own accesses
    (Unicorn 2.1.4) do not do it, so by default an AF == 0 leaf is an Access flag fault and a
    write to a read-only leaf a Permission fault, whatever DBM says. With ``write_desc`` the
    translating agent manages them (the SPU with PMBIDR_EL1.F == 1, D17.8.3.1) where the
    regime's TCR_ELx.HA (and HD, for the dirty state) enable it: AF is set, and a write to an
    AP[2] == 1 leaf with DBM == 1 clears AP[2]; the updated leaf descriptor is stored through
    ``write_desc(address, descriptor)`` at the address it was read from (a stage 1 table
    address goes through stage 2 as a write, when that applies); stage 2 leaves as
    :func:`stage2` says.

    Not modelled: PSTATE.PAN, hierarchical (table) attributes, TBID (every access is a data
    access), HCR_EL2.{DC, TGE} disabling the EL1&0 stage 1.

    Raises:
        TranslationFault: no valid mapping, AF == 0, or a write to a read-only page (FSC =
            translation, Access flag or permission fault with the level of the failing
            descriptor); with ``stage`` = 2 for a fault of the stage 2 translation.
    """
    regime = max(regime_el, 1)
    cpr = mem.cpr

    def plain_read(pa: int) -> int:
        return int.from_bytes(mem.read(pa, 8), "little")

    raw = checked_read or plain_read
    if regime == 1 and stage2_enabled(cpr):
        def s2(ipa: int, write_access: bool, s1ptw: bool) -> int:
            return stage2(mem, ipa, write=write_access, read_desc=raw, va=va, s1ptw=s1ptw,
                          write_desc=write_desc)

        read_desc = lambda ipa: raw(s2(ipa, False, True))  # noqa: E731 (stage 1 tables)
        update = None if write_desc is None else (
            lambda ipa, desc: write_desc(s2(ipa, True, True), desc))
    else:
        s2 = None
        read_desc = raw
        update = write_desc
    if not SCTLR_ELX.get(cpr(SCTLR_ENC[regime]), "M"):
        return va if s2 is None else s2(va, write, False)
    tcr = cpr(TCR_ENC[regime])
    rng = va_range(regime, va, regime == 2 and HCR_EL2.get(cpr(HCR_EL2.encoding.tuple), "E2H"))
    ia_bits = 64 - min(max(rng.tcr.get(tcr, rng.tsz), TXSZ_MIN), TXSZ_MAX)
    top = 55 if rng.tcr.get(tcr, rng.tbi) else 63
    ones = (1 << (top + 1 - ia_bits)) - 1       # VA[top:ia_bits]
    if (va >> ia_bits) & ones != (ones if rng.upper else 0):
        raise TranslationFault(va, FSC_TRANSLATION)  # (level 0)
    if rng.epd is not None and rng.tcr.get(tcr, rng.epd):
        raise TranslationFault(va, FSC_TRANSLATION)  # (level 0)
    granule = rng.granules[rng.tcr.get(tcr, rng.tg)]
    level = granule.start_level(ia_bits)
    table = initial_table(cpr(rng.ttbr), granule, ia_bits, level)
    if checked_read is None and s2 is None:
        leaf = walk(read_desc, va, table, granule, ia_bits, level)
    else:
        oa_bits = min(PA_BITS.get(rng.tcr.get(tcr, rng.ps), 48), _pa_max(cpr))
        leaf = walk(read_desc, va, table, granule, ia_bits, level, oa_bits)
    ha = update is not None and rng.tcr.get(tcr, rng.ha) == 1
    desc, kind = _managed(DESC, leaf.desc, write=write, ha=ha,
                          hd=ha and rng.tcr.get(tcr, rng.hd) == 1,
                          write_allowed=lambda d: not DESC.get(d, "AP2"),   # AP[2]: read-only
                          make_writable=lambda d: DESC.set(d, "AP2", 0))
    if kind is not None:
        raise TranslationFault(va, kind | leaf.level)
    if desc != leaf.desc:
        update(leaf.at, desc)
    return leaf.oa if s2 is None else s2(leaf.oa, write, False)


def walk_fault(mem: PhysicalView, va: int, regime_el: int,
               checked_read: Callable[[int], int]) -> int | None:
    """The FSC of the Address size fault or synchronous External abort on a translation table
    walk (:data:`FSC_ADDRESS_SIZE`, :data:`FSC_WALK_EXTERNAL` with the level in bits[1:0])
    the stage 1 walk of ``va`` in the regime of ``regime_el`` ends with, or None when it ends
    otherwise (a translation, a translation fault, a fault of the stage 2 translation).
    Unicorn's walker has neither fault (it reads zeros from no memory: a translation fault
    one level down, and lets any output address through), so the machine asks this when a
    fault or an access to no memory comes out of a translation (Arm ARM D8.3,
    ``AArch64.S1Walk()``)."""
    try:
        translate(mem, va, regime_el, checked_read=checked_read)
    except TranslationFault as fault:
        kind = fault.fsc & FSC_KIND_MASK
        if (kind in (FSC_ADDRESS_SIZE, FSC_WALK_EXTERNAL) and type(fault) is TranslationFault
                and fault.stage == 1):
            return fault.fsc
    return None
