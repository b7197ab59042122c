"""spe_emu.linux.memory.AddressSpace: the page tables it writes for a process's mappings, walked
here independently of it (level 1, 2, 3 descriptors of a 4 KiB granule, Arm ARM D8.2)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spe_emu.arch.mmu import DESC
from spe_emu.linux.memory import (PAGE, PROT_EXEC, PROT_READ, PROT_WRITE, AddressSpace,
                                  OutOfMemory)

RAM = 0x80_0000            # bytes of the fake physical memory (room for every page the
                           # mappings below can hold at once, 1,200, and their tables)
L1 = 0x1000                # the level 1 table (as the firmware's)
POOL = (0x2000, RAM)       # pages and tables
BASE = 0x40_0000 - 40 * PAGE   # mappings start 40 pages below a 2 MiB boundary
PROTS = (0, PROT_READ, PROT_READ | PROT_WRITE, PROT_READ | PROT_EXEC)


def space(pool=POOL) -> tuple[AddressSpace, bytearray]:
    ram = bytearray(RAM)

    def read(pa, size):
        return bytes(ram[pa:pa + size])

    def write(pa, data):
        ram[pa:pa + len(data)] = data

    mem = AddressSpace(read, write, pool)
    mem.attach(L1)
    return mem, ram


def walk(ram: bytearray, va: int) -> int:
    """The level 3 descriptor of ``va`` (0 when a table on the way is absent)."""
    table = L1
    for shift in (30, 21, 12):
        slot = table + ((va >> shift) & 511) * 8
        desc = int.from_bytes(ram[slot:slot + 8], "little")
        if shift == 12 or not DESC.get(desc, "VALID"):
            return desc if shift == 12 else 0
        table = DESC.get(desc, "OA") << 12


def check(mem: AddressSpace, ram: bytearray, lo: int, hi: int) -> None:
    for va in range(lo, hi, PAGE):
        entry = mem.pages.get(va >> 12)
        want = 0 if entry is None or entry[0] is None else mem._pte(entry[0], entry[1])
        assert walk(ram, va) == want, hex(va)


@settings(max_examples=40, deadline=None)
@given(maps=st.lists(st.tuples(st.integers(0, 600), st.integers(1, 600),
                               st.sampled_from(PROTS)), min_size=1, max_size=4))
def test_map_writes_the_descriptor_of_every_page(maps):
    """map() over ranges that cross a level 3 table's end (2 MiB), replacing earlier ones:
    each page's level 3 descriptor is the one its PA and PROT_* give (_pte), 0 for PROT_NONE
    and unmapped pages."""
    mem, ram = space()
    for start, count, prot in maps:
        mem.map(BASE + start * PAGE, BASE + (start + count) * PAGE, prot)
    check(mem, ram, BASE, BASE + 1200 * PAGE)


def test_out_of_pages_leaves_the_pages_mapped_so_far_in_the_tables():
    """map() that runs out of physical pages part way through a level 3 table raises
    OutOfMemory; the pages it mapped before are in the tables, as their entries say."""
    mem, ram = space(pool=(0x2000, 0x2000 + 30 * PAGE))   # tables and pages: 30 pages
    with pytest.raises(OutOfMemory):
        mem.map(BASE, BASE + 100 * PAGE, PROT_READ | PROT_WRITE)
    mapped = [va >> 12 for va in range(BASE, BASE + 100 * PAGE, PAGE) if va >> 12 in mem.pages]
    assert len(mapped) >= 20
    check(mem, ram, BASE, BASE + 100 * PAGE)
