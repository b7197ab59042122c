"""The platform's memory-mapped register machinery (spe_emu.platform.mmio): field access modes
as write masks, RAZ/WI registers, 64-bit registers taking 32-bit halves, narrow writes that act
on the written bytes only, and register arrays bound to per-item state (PerItem), directly
and through the Device base. Every expectation is an exact value."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from spe_emu.errors import RegisterTableError
from spe_emu.platform.board import DeviceSpec, Platform
from spe_emu.platform.clock import VirtualClock
from spe_emu.platform.device import Device
from spe_emu.platform.mmio import MmioRegister, PerItem, RegisterMap, mmio, raz_wi
from spe_emu.sysreg import WriteMasks, fields_write, parse_fields, write_masks

# ---- one write rule for every access mode ----------------------------------------------------


def test_fields_write_applies_each_access_mode():
    fields = parse_fields("A 15:12", "B 11:8 RO", "C 7:4 W1C", "D 3:0 W1S", "E 19:16 WO")
    assert write_masks(fields) == WriteMasks(rw=0xF000, ro=0x0F00, w1c=0x00F0, w1s=0x000F)
    old = 0x5A_5A5A
    #   A takes 0x3; B keeps 0xA; C: 0x5 & ~0x6 = 0x1; D: 0xA | 0x6 = 0xE; E stores nothing;
    #   bits 23:20 are RES0
    assert fields_write(fields, old, 0xFF_3666) == 0x3A1E
    assert fields_write(fields, old, 0) == 0x0A5A     # A cleared; C, D unchanged


# ---- plain registers --------------------------------------------------------------------------


def test_raz_wi_register_reads_zero_and_ignores_writes():
    r = raz_wi("X_RAZ", 0x10, count=2)
    storage = [0, 0]
    assert r.write(storage, 1, 0xFFFF_FFFF) == (0, 0xFFFF_FFFF)
    assert storage == [0, 0]
    assert r.read(storage, 1) == 0
    assert r.fields == () and r.field_mask == 0 and r.readable_mask == 0


def test_64_bit_register_takes_either_32_bit_half():
    r = mmio("X_ROUTE", 0x8, "HI 39:32", "MODE 31", "LO 7:0", width=8, sizes=frozenset({4, 8}))
    regs = RegisterMap([r], 0x10)
    assert regs.decode(0x8, 8) == (r, 0, 0)
    assert regs.decode(0xC, 4) == (r, 0, 4)
    assert regs.decode(0x8, 2) is None            # a size it does not accept
    assert regs.decode(0xA, 4) is None            # not naturally aligned
    assert regs.at(0xA) == (r, 0, 2)              # ... though the byte is the register's
    storage = [0]
    r.write(storage, 0, 0xFFFF_FFFF_FFFF_FFFF)
    assert storage == [0xFF_8000_00FF]
    old, written = r.write(storage, 0, 0x12, byte=4, size=4)   # upper half only
    assert (old, written) == (0xFF_8000_00FF, 0x12_8000_00FF)
    assert storage == [0x12_8000_00FF]
    r.write(storage, 0, 0, byte=0, size=4)                     # lower half only
    assert storage == [0x12_0000_0000]
    assert r.read(storage, 0) >> 32 == 0x12


def test_narrow_write_acts_on_the_written_bytes_only():
    r = mmio("X_STATUS", 0, "HIGH 15:8 W1C", "LOW 7:0 W1C", reset=0xFFFF,
             sizes=frozenset({1, 4}), width=4)
    storage = [0xFFFF]
    old, written = r.write(storage, 0, 0x0F, byte=1, size=1)
    assert storage == [0xF0FF]                    # LOW's bits, written back as 1s, stay set
    assert (old, written) == (0xFFFF, 0x0FFF)     # the hook sees the whole element
    r.write(storage, 0, 0x01, byte=0, size=1)
    assert storage == [0xF0FE]


def test_res1_bits_and_write_only_fields():
    r = mmio("X_CMD", 0, "GO 4 WO", "EN 0", res1=0x80, reset=0x80)
    storage = [0x80]
    r.write(storage, 0, 0x11)
    assert storage == [0x81]                      # GO stores nothing, RES1 stays set
    assert r.read(storage, 0) == 0x81
    assert r.readable_mask == 0x81


# ---- registers bound to per-item state --------------------------------------------------------


@dataclass
class Item:
    on: bool = False
    latch: bool = False
    level: bool = False
    prio: int = 0
    cfg: int = 0

    @property
    def pending(self) -> bool:
        return self.latch or self.level


class Tracking(list):
    """Items that count attribute assignments made through the register machinery."""

    def __init__(self, n: int):
        super().__init__(Item() for _ in range(n))
        self.assigned: list[tuple[int, str, object]] = []

    def __getitem__(self, i):
        item = super().__getitem__(i)
        if isinstance(i, int):
            outer = self

            class Spy:
                def __setattr__(self, name, value):
                    outer.assigned.append((i, name, value))
                    setattr(item, name, value)
            return Spy()
        return item


def bits(name: str, offset: int, access: str, attr: str, n_items: int, first: int = 0,
         **kw) -> MmioRegister:
    return MmioRegister(name, offset, parse_fields(*(f"B{x} {x} {access}" for x in range(32))),
                        count=n_items // 32, per_item=PerItem("items", attr, 1, first, **kw))


def test_per_item_w1s_w1c_act_on_the_items_and_keep_flags_bool():
    items = Tracking(64)
    iset = bits("X_ISET<n>", 0x00, "W1S", "on", 32, first=32, flag=True)
    iclr = bits("X_ICLR<n>", 0x04, "W1C", "on", 32, first=32, flag=True)
    iset.write(items, 0, 0b1010)
    assert [i for i, item in enumerate(items) if item.on] == [33, 35]
    assert list.__getitem__(items, 33).on is True         # a flag stays a bool
    assert iset.read(items, 0) == iclr.read(items, 0) == 0b1010
    items.assigned.clear()
    iset.write(items, 0, 0b0010)                  # already set: nothing to assign
    assert items.assigned == []
    iclr.write(items, 0, 0b0110)
    assert items.assigned == [(33, "on", False)]  # only the slot that changed
    assert iset.read(items, 0) == 0b1000


def test_per_item_write_attribute_and_read_attribute_differ():
    items = Tracking(32)
    spend = bits("X_SPEND", 0, "W1S", "latch", 32, read_attr="pending", flag=True)
    cpend = bits("X_CPEND", 4, "W1C", "latch", 32, read_attr="pending", flag=True)
    list.__getitem__(items, 3).level = True       # pending through its input, latch clear
    assert spend.read(items, 0) == 0b1000
    spend.write(items, 0, 0b1001)                 # sets both latches: the level one too
    assert [(i, v) for i, _, v in items.assigned] == [(0, True), (3, True)]
    cpend.write(items, 0, 0b1001)
    assert spend.read(items, 0) == 0b1000         # the input still holds INTID 3 pending
    assert not list.__getitem__(items, 3).latch


def test_per_item_multi_bit_slots_with_unimplemented_bits_and_byte_access():
    items = Tracking(8)
    prio = MmioRegister("X_PRIO<n>", 0x10,
                        parse_fields(*(f"P{x} {8 * x + 7}:{8 * x + 3}" for x in range(4))),
                        count=2, sizes=frozenset({1, 4}), per_item=PerItem("items", "prio", 8))
    prio.write(items, 1, 0xFFFF_FFFF)
    assert [it.prio for it in list(items)] == [0, 0, 0, 0, 0xF8, 0xF8, 0xF8, 0xF8]
    items.assigned.clear()
    prio.write(items, 1, 0xA5, byte=2, size=1)
    assert items.assigned == [(6, "prio", 0xA0)]   # the written byte's item only
    assert prio.read(items, 1) == 0xF8A0_F8F8
    regs = RegisterMap([prio], 0x20)
    assert regs.decode(0x16, 1) == (prio, 1, 2)


def test_per_item_read_only_array_ignores_writes():
    items = Tracking(16)
    for it in list(items):
        it.cfg = 0b10
    cfg = MmioRegister("X_CFG0", 0,
                       parse_fields(*(f"C{x} {2 * x + 1} RO" for x in range(16))),
                       per_item=PerItem("items", "cfg", 2))
    assert cfg.write(items, 0, 0) == (0xAAAA_AAAA, 0)
    assert items.assigned == []
    assert cfg.read(items, 0) == 0xAAAA_AAAA


@pytest.mark.parametrize("kw, fields", [
    (dict(per_item=PerItem("items", "x", 3)), ()),                       # 3 does not tile 32
    (dict(per_item=PerItem("items", "x", 2, flag=True)), ()),            # a flag is one bit
    (dict(per_item=PerItem("items", "x", 1), reset=1), ("A 0",)),        # no reset of its own
    (dict(per_item=PerItem("items", "x", 1)), ("A 0 WO",)),              # WO: nothing stored
    (dict(per_item=PerItem("items", "x", 8)), ("A 8:7",)),               # spans two slots
])
def test_per_item_declarations_are_checked(kw, fields):
    with pytest.raises(RegisterTableError):
        MmioRegister("X_BAD", 0, parse_fields(*fields), **kw)


def test_register_map_storage_and_overlaps():
    stored = mmio("X_CTRL", 0, "EN 0", reset=1)
    per_item = bits("X_SET", 4, "W1S", "on", 32)
    regs = RegisterMap([stored, per_item, raz_wi("X_RAZ", 8)], 0x10)
    assert regs.reset_values() == {"X_CTRL": [1], "X_RAZ": [0]}
    with pytest.raises(RegisterTableError, match="overlaps"):
        RegisterMap([stored, raz_wi("X_OTHER", 0)], 0x10)


# ---- through the Device base ------------------------------------------------------------------


class Toy(Device):
    REGISTERS = RegisterMap([
        mmio("TOYCTRL", 0x00, "MODE 7:4", "EN 0", on_write="_ctrl_written"),
        bits("TOYISEN", 0x04, "W1S", "on", 32, flag=True),
        bits("TOYICEN", 0x08, "W1C", "on", 32, flag=True),
        raz_wi("TOYRSVD", 0x0C),
        mmio("TOYADDR", 0x10, "ADDR 47:0", width=8, sizes=frozenset({4, 8})),
    ], 0x20)

    def __init__(self, *args):
        self.items = [Item() for _ in range(32)]
        self.hook_calls: list[tuple[int, int]] = []
        super().__init__(*args)

    def _ctrl_written(self, r, index, old, written):
        self.hook_calls.append((old, written))


@pytest.fixture
def toy(tmp_path):
    errors: list[str] = []
    dev = Toy(DeviceSpec("toy", "toy", 0x1000, 0x20),
              Platform(clock=VirtualClock(lambda: 0), outdir=tmp_path, guest_error=errors.append))
    dev.errors = errors
    return dev


def test_device_accesses_use_the_register_machinery(toy):
    toy.write(0x00, 4, 0xFFFF_FFFF)
    assert toy.read(0x00, 4) == 0xF1
    assert toy.hook_calls == [(0, 0xFFFF_FFFF)]
    toy.write(0x04, 4, 0x8000_0001)
    assert [i for i, it in enumerate(toy.items) if it.on] == [0, 31]
    toy.write(0x08, 4, 1)
    assert toy.read(0x04, 4) == toy.read(0x08, 4) == 0x8000_0000
    toy.write(0x0C, 4, 0xFFFF_FFFF)
    assert toy.read(0x0C, 4) == 0
    toy.write(0x14, 4, 0xABCD_1234)
    assert toy.read(0x10, 8) == 0x1234_0000_0000   # ADDR is 48 bits: the rest RES0
    assert toy.read(0x14, 4) == 0x1234
    assert toy.errors == []
    assert toy.read(0x12, 4) == 0
    assert toy.errors == ["toy: read of 4 bytes at offset 0x12: no register"]
