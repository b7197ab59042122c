"""Profiling Buffer writes through the EL2 and EL2&0 (VHE) owning regimes, every translation
granule, the Access flag and dirty state per PMBIDR_EL1.F, Address size faults and the
prioritisation of management events (Arm ARM D17.8.1, D17.8.3, D17.8.3.1; SPE supplement
§3.4, §3.5), on bare-metal programs.

A program runs at EL2 with the EL2 (or, HCR_EL2.{E2H, TGE} = {1, 1}, the EL2&0) stage 1 MMU on,
owns the Profiling Buffer (MDCR_EL2.E2PB = 0b00), profiles a loop with PMSCR_EL2.E2SPE, stops,
drains and exits. The translation tables are written into guest RAM by the test with literal
descriptor encodings (Arm ARM D8.3): code and data identity-mapped by level 2 blocks, the
buffer at BUF_VA (EL2&0: a TTBR1_EL2 address) by two level 3 pages that the cases vary.

Records are padded to 64 bytes (PMBIDR_EL1.Align = 6 = PMSIDR_EL1.MaxSize) and the buffer
starts 0x100 bytes below the second page, so exactly 4 records precede the page boundary.
Expected PMBSR_EL1 values come from the specification: S (bit 17), EC (bits 31:26: 0b100100
stage 1 Data Abort, 0b000000 other event), DL (bit 19), MSS.FSC / MSS.BSC (bits 5:0).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from asmrun import BASE, EXIT, mov64, xregs

from spe_emu.asm import assemble
from spe_emu.cpu.machine import Machine, MachineConfig
from spe_emu.platform.loader import Image, Segment
from spe_emu.spe.config import SpeConfig
from spe_emu.spe.packets import iter_records

IA_BITS = 40                                   # T0SZ = T1SZ = 24
BUF_LOWER = 0x80_0000_0000                     # VA[39] = 1, lower range (TTBR0_EL2)
BUF_UPPER = 0xFFFF_FF80_0000_0000              # the same IA in the upper range (TTBR1_EL2)
BUF_PA = 0x4A00_0000
TABLES = 0x4400_0000
IDENTITY = (0x4000_0000, 0x4800_0000)          # code, stack, tables
PAGE_SHIFT = {"4K": 12, "16K": 14, "64K": 16}
TG0 = {"4K": 0b00, "64K": 0b01, "16K": 0b10}   # Arm ARM D19.2 TCR_ELx.TG0
TG1 = {"16K": 0b01, "4K": 0b10, "64K": 0b11}   # TCR_EL1.TG1 (TCR_EL2 with E2H == 1)

# Descriptor bits (Arm ARM D8.3), literal.
TABLE, PAGE, BLOCK = 0b11, 0b11, 0b01
AF, AP2, DBM = 1 << 10, 1 << 7, 1 << 51
SH_INNER = 0b11 << 8
ATTRS = AF | SH_INNER                          # AttrIndx 0 (MAIR_EL2.Attr0 = 0xFF), AP 0b00

S_BIT, DL_BIT = 1 << 17, 1 << 19
EC_S1 = 0b100100
FSC_ADDRESS_SIZE_L3, FSC_ACCESS_FLAG_L3, FSC_PERMISSION_L3 = 0b000011, 0b001011, 0b001111
BSC_FILLED = 0b000001
RECORD = 64


def pmbsr(ec: int, mss: int) -> int:
    return (ec << 26) | S_BIT | mss


class Tables:
    """Stage 1 tables of one granule for a 40-bit input address, built as {PA: descriptor}
    from TABLES up (each table aligned to its size)."""

    def __init__(self, granule: str):
        self.g = PAGE_SHIFT[granule]
        self.bits = self.g - 3
        self.start = 3 - (IA_BITS - self.g - 1) // self.bits
        self.next = TABLES
        self.root = self._alloc(max(8 << (IA_BITS - self.shift(self.start)), 1 << self.g))
        self.tables = {(self.start, 0): self.root}
        self.desc: dict[int, int] = {}

    def shift(self, level: int) -> int:
        return self.g + self.bits * (3 - level)

    def _alloc(self, size: int) -> int:
        addr = -(-self.next // size) * size
        self.next = addr + size
        return addr

    def slot(self, level: int, va: int) -> int:
        ia = va & ((1 << IA_BITS) - 1)
        if level == self.start:
            table, width = self.root, IA_BITS - self.shift(level)
        else:
            table, width = self.tables[(level, ia >> self.shift(level - 1))], self.bits
        return table + 8 * ((ia >> self.shift(level)) & ((1 << width) - 1))

    def map(self, va: int, pa: int, level: int, attrs: int) -> int:
        """Map the ``level`` region of ``va`` to ``pa``; returns the leaf descriptor's PA."""
        ia = va & ((1 << IA_BITS) - 1)
        for lvl in range(self.start, level):
            key = (lvl + 1, ia >> self.shift(lvl))
            if key not in self.tables:
                self.tables[key] = self._alloc(1 << self.g)
                self.desc[self.slot(lvl, va)] = self.tables[key] | TABLE
        at = self.slot(level, va)
        self.desc[at] = pa | attrs | (PAGE if level == 3 else BLOCK)
        return at


def program(*, vhe: bool, granule: str, ha: int, hd: int, start: int, limit: int) -> str:
    ttbr = Tables(granule).root
    if vhe:   # TCR_EL2 in the TCR_EL1 layout: T0SZ/T1SZ 24, TG0/TG1, IPS 40 bits, HA 39, HD 40
        tcr = (24 | 24 << 16 | TG0[granule] << 14 | TG1[granule] << 30 | 0b010 << 32
               | ha << 39 | hd << 40 | 0b11 << 12 | 0b11 << 28)
        hcr = (1 << 31) | (1 << 34) | (1 << 27)      # RW | E2H | TGE
    else:     # TCR_EL2: RES1 31, 23; T0SZ 24, TG0, PS 40 bits, HA 21, HD 22
        tcr = (1 << 31 | 1 << 23 | 24 | TG0[granule] << 14 | 0b010 << 16 | ha << 21
               | hd << 22 | 0b11 << 12)
        hcr = 1 << 31                                # RW
    return f"""
    {mov64("x1", hcr)}
    msr hcr_el2, x1
    isb
    mov x1, #0xff
    msr s3_4_c10_c2_0, x1       // MAIR_EL2
    {mov64("x1", tcr)}
    msr s3_4_c2_c0_2, x1        // TCR_EL2
    {mov64("x1", ttbr)}
    msr s3_4_c2_c0_0, x1        // TTBR0_EL2
    msr s3_4_c2_c0_1, x1        // TTBR1_EL2 (EL2&0 only; the same tables)
    isb
    mrs x1, s3_4_c1_c0_0        // SCTLR_EL2
    orr x1, x1, #1
    msr s3_4_c1_c0_0, x1
    isb
    msr s3_4_c1_c1_1, xzr       // MDCR_EL2: E2PB = 0b00, EL2 owns the buffer
    {mov64("x0", start)}
    msr pmbptr_el1, x0
    {mov64("x1", limit | 1)}
    msr pmblimitr_el1, x1
    mov x2, #0x100
    msr pmsirr_el1, x2
    msr pmsicr_el1, xzr
    mov x3, #0b10
    msr s3_4_c9_c9_0, x3        // PMSCR_EL2.E2SPE
    isb
    movz x4, #4000
    mov x5, #0
loop:
    add x5, x5, #3
    subs x4, x4, #1
    b.ne loop
    msr s3_4_c9_c9_0, xzr
    isb
    psb csync
    dsb nsh
    mrs x20, pmbsr_el1
    mrs x21, pmbptr_el1
    mov x0, #0
""" + EXIT


def run(tmp_path: Path, *, vhe: bool, granule: str, page2: int, f: int = 0, ha: int = 0,
        hd: int = 0, start_back: int = 0x100, limit_pages: int = 2,
        page2_pa: int | None = None) -> tuple[Machine, Tables, int, int]:
    """Run the program; ``page2`` is the second buffer page's descriptor attributes. Returns
    (machine, tables, buffer VA, that page's descriptor PA)."""
    t = Tables(granule)
    for pa in range(*IDENTITY, 1 << t.shift(2)):
        t.map(pa, pa, 2, ATTRS)
    size = 1 << t.g
    buf = BUF_UPPER if vhe else BUF_LOWER
    t.map(buf, BUF_PA, 3, ATTRS)
    at = t.map(buf + size, BUF_PA + size if page2_pa is None else page2_pa, 3, page2)
    text = program(vhe=vhe, granule=granule, ha=ha, hd=hd, start=buf + size - start_back,
                   limit=buf + limit_pages * size)
    code = assemble("movz x9, #0x4100, lsl #16\nmov sp, x9\n" + text, BASE)
    image = Image(path=Path("<asm>"), entry=BASE,
                  segments=[Segment(BASE, BASE, code, len(code), 0b111)])
    m = Machine(MachineConfig(boot_el=2, mode="fast", outdir=tmp_path, max_insns=5_000_000,
                              spe=SpeConfig(align_code=6, flag_updates=f)))
    m.load(image)
    m.reset(BASE)
    for pa, desc in t.desc.items():
        m.uc.mem_write(pa, desc.to_bytes(8, "little"))
    m.result = m.run()
    assert m.result.exit_status == 0
    return m, t, buf, at


def descriptor(m: Machine, at: int) -> int:
    return int.from_bytes(m.uc.mem_read(at, 8), "little")


REGIMES = [pytest.param(False, id="EL2"), pytest.param(True, id="EL2&0")]
GRANULES = list(PAGE_SHIFT)


def records_at(m: Machine, pa: int, n: int) -> list:
    return list(iter_records(bytes(m.uc.mem_read(pa, n * RECORD))))


@pytest.mark.parametrize("granule", GRANULES)
@pytest.mark.parametrize("vhe", REGIMES)
def test_records_cross_into_the_next_page(tmp_path, vhe, granule):
    m, t, buf, _ = run(tmp_path, vhe=vhe, granule=granule, page2=ATTRS)
    size = 1 << t.g
    pmbsr_v, ptr = xregs(m, 20, 21)
    n = m.result.records_written
    assert pmbsr_v == 0 and n > 4
    assert ptr == buf + size - 0x100 + n * RECORD
    assert len(records_at(m, BUF_PA + size - 0x100, n)) == n
    assert len(records_at(m, BUF_PA + size, n - 4)) == n - 4   # the 5th record on is page 2


@pytest.mark.parametrize("granule", GRANULES)
@pytest.mark.parametrize("vhe", REGIMES)
@pytest.mark.parametrize("f,ha", [(0, 0), (0, 1), (1, 0)], ids=["F0", "F0-HA1", "F1-HA0"])
def test_access_flag_zero_is_a_fault_unless_the_spu_manages_it(tmp_path, vhe, granule, f, ha):
    """Table D17-11: without SPU management (PMBIDR_EL1.F = 0) or with TCR_ELx.HA = 0, an
    AF = 0 page is an Access flag fault: PMBSR_EL1 = {S, EC stage 1, FSC AF level 3},
    PMBPTR_EL1 = the faulting address; the 4 records before it are complete, so DL stays 0."""
    m, t, buf, at = run(tmp_path, vhe=vhe, granule=granule, page2=ATTRS & ~AF, f=f, ha=ha)
    size = 1 << t.g
    assert xregs(m, 20, 21) == [pmbsr(EC_S1, FSC_ACCESS_FLAG_L3), buf + size]
    assert m.result.records_written == 4
    assert descriptor(m, at) == (BUF_PA + size) | (ATTRS & ~AF) | PAGE   # unchanged


@pytest.mark.parametrize("granule", GRANULES)
@pytest.mark.parametrize("vhe", REGIMES)
def test_spu_sets_the_access_flag_with_f1(tmp_path, vhe, granule):
    """D17.8.3.1: PMBIDR_EL1.F = 1 and TCR_ELx.HA = 1: the SPU's walk sets AF and writes."""
    m, t, buf, at = run(tmp_path, vhe=vhe, granule=granule, page2=ATTRS & ~AF, f=1, ha=1)
    size = 1 << t.g
    assert xregs(m, 20)[0] == 0 and m.result.records_written > 4
    assert descriptor(m, at) == (BUF_PA + size) | ATTRS | PAGE
    assert len(records_at(m, BUF_PA + size, 1)) == 1


@pytest.mark.parametrize("vhe", REGIMES)
@pytest.mark.parametrize("f,hd,dbm,fault", [(0, 1, 1, True), (1, 0, 1, True), (1, 1, 0, True),
                                            (1, 1, 1, False)],
                         ids=["F0", "F1-HD0", "F1-DBM0", "F1-HD1-DBM1"])
def test_dirty_state(tmp_path, vhe, f, hd, dbm, fault):
    """A read-only (AP[2] = 1) buffer page: a Permission fault (level 3) unless the SPU manages
    the dirty state (F = 1), TCR_ELx.HD = 1 and the descriptor's DBM = 1, when the SPU makes
    it writable-dirty (AP[2] = 0) and writes (D8.5.2, D17.8.3.1, Table D17-11)."""
    attrs = ATTRS | AP2 | (DBM if dbm else 0)
    m, t, buf, at = run(tmp_path, vhe=vhe, granule="4K", page2=attrs, f=f, ha=1, hd=hd)
    size = 1 << t.g
    if fault:
        assert xregs(m, 20, 21) == [pmbsr(EC_S1, FSC_PERMISSION_L3), buf + size]
        assert descriptor(m, at) == (BUF_PA + size) | attrs | PAGE
    else:
        assert xregs(m, 20)[0] == 0 and m.result.records_written > 4
        assert descriptor(m, at) == (BUF_PA + size) | (attrs & ~AP2) | PAGE


@pytest.mark.parametrize("vhe", REGIMES)
def test_address_size_fault(tmp_path, vhe):
    """An output address at or above TCR_EL2.PS / IPS (40 bits) is an Address size fault at
    the level of the descriptor (Arm ARM D8.3, Table D17-11)."""
    m, t, buf, _ = run(tmp_path, vhe=vhe, granule="4K", page2=ATTRS,
                       page2_pa=(1 << 40) | BUF_PA + 0x1000)
    assert xregs(m, 20, 21) == [pmbsr(EC_S1, FSC_ADDRESS_SIZE_L3), buf + 0x1000]
    assert m.result.records_written == 4


@pytest.mark.parametrize("vhe", REGIMES)
@pytest.mark.parametrize("page2,expect", [
    (ATTRS & ~AF, "fault"), (ATTRS, "buffer-full")], ids=["AF0", "mapped"])
def test_fault_has_priority_over_buffer_full(tmp_path, vhe, page2, expect):
    """D17.8.1: a synchronous fault has priority over a buffer full event. The buffer starts
    2**MaxSize bytes below its limit, in the second page: the first record would fill it. With
    that page faulting, the management event is the fault (PMBPTR_EL1 = the record's address,
    nothing written); mapped, buffer full (EC 0, BSC 1, PMBPTR_EL1 = the limit)."""
    m, t, buf, _ = run(tmp_path, vhe=vhe, granule="4K", page2=page2, start_back=-0x1000 + RECORD)
    size = 1 << t.g
    if expect == "fault":
        assert xregs(m, 20, 21) == [pmbsr(EC_S1, FSC_ACCESS_FLAG_L3), buf + 2 * size - RECORD]
        assert m.result.records_written == 0
    else:
        assert xregs(m, 20, 21) == [pmbsr(0, BSC_FILLED), buf + 2 * size]
        assert m.result.records_written == 1
