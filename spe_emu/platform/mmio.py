"""Memory-mapped register maps, declared once per device with the same field machinery as
system registers (:class:`spe_emu.sysreg.Field`, :func:`spe_emu.sysreg.parse_fields`,
:func:`spe_emu.sysreg.fields_write`): per-field access modes (RW, RO, W1C, W1S, WO), RES0 bits
derived, reset values checked, and side-effect hooks named on the register.

A :class:`RegisterMap` decodes an offset into (register, element) and performs plain storage;
the owning :class:`~spe_emu.platform.device.Device` supplies the hooks. Accesses that match
no register, or have a size the register does not accept, are guest errors (logged; reads
return zero, writes are ignored), never host exceptions (QEMU's ``LOG_GUEST_ERROR`` habit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from ..errors import RegisterTableError
from ..sysreg import Field, FieldAccess, fields_write, parse_fields


@dataclass(frozen=True)
class MmioRegister:
    """One memory-mapped register, or an array of ``count`` registers ``width`` bytes apart.

    Attributes:
        name: the name the device's TRM or specification uses (e.g. ``"UARTFR"``).
        offset: byte offset of element 0 in the device's region.
        fields: bits covered by no field (and not RES1) are RES0: they read as zero and
            writes to them are ignored.
        width: bytes (1, 2, 4 or 8).
        count: elements of an array (stride ``width``).
        reset: reset value of each element.
        res1: RES1 bits.
        sizes: access sizes (bytes) accepted; default ``width`` only.
        on_read: name of a device method ``hook(reg, index) -> value`` that supplies the value
            (else the stored value is returned).
        on_write: name of a device method ``hook(reg, index, old, written)`` called after a
            write stored its value (by the fields' access modes; ``written`` is the whole
            element as written, with the bytes a narrower access did not write kept).
        doc: where the register is described.
    """

    name: str
    offset: int
    fields: tuple[Field, ...] = ()
    width: int = 4
    count: int = 1
    reset: int = 0
    res1: int = 0
    sizes: frozenset[int] = frozenset()
    on_read: str | None = None
    on_write: str | None = None
    doc: str = ""
    field_mask: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.width not in (1, 2, 4, 8) or self.count < 1 or self.offset % self.width:
            raise RegisterTableError(f"{self.name}: bad width, count or alignment")
        seen = 0
        for f in self.fields:
            if f.mask & seen or f.msb >= 8 * self.width:
                raise RegisterTableError(f"{self.name}: field {f.name} overlaps or is too wide")
            seen |= f.mask
        object.__setattr__(self, "field_mask", seen)
        if self.res1 & seen:
            raise RegisterTableError(f"{self.name}: RES1 bits overlap a field")
        if self.reset & ~(seen | self.res1) or self.reset & self.res1 != self.res1:
            raise RegisterTableError(f"{self.name}: reset {self.reset:#x} sets RES0 bits or "
                                     f"clears RES1 bits")
        if not self.sizes:
            object.__setattr__(self, "sizes", frozenset({self.width}))
        if any(s > self.width or s not in (1, 2, 4, 8) for s in self.sizes):
            raise RegisterTableError(f"{self.name}: access sizes {sorted(self.sizes)} do not "
                                     f"fit a {self.width}-byte register")

    @property
    def size(self) -> int:
        """Bytes the register (array) occupies."""
        return self.width * self.count

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise RegisterTableError(f"{self.name} has no field {name}")

    def get(self, value: int, name: str) -> int:
        """Field ``name`` of ``value``, right-aligned."""
        return self.field(name).get(value)

    def set(self, value: int, name: str, field_value: int) -> int:
        """``value`` with field ``name`` replaced."""
        return self.field(name).set(value, field_value)

    def make(self, **values: int) -> int:
        """A value built from field values (others zero, RES1 set)."""
        out = self.res1
        for name, v in values.items():
            out = self.set(out, name, v)
        return out

    def apply_write(self, old: int, written: int) -> int:
        """Stored value after software writes ``written`` (each field by its access mode)."""
        return fields_write(self.fields, old, written) | self.res1

    @property
    def readable_mask(self) -> int:
        """Bits a read returns from storage (WO fields read as zero)."""
        out = self.res1
        for f in self.fields:
            if f.access is not FieldAccess.WO:
                out |= f.mask
        return out


def mmio(name: str, offset: int, *fields: str, **kw) -> MmioRegister:
    """Shorthand: ``mmio("UARTFR", 0x18, "TXFE 7 RO", "RXFF 6 RO", ..., reset=0x90)``."""
    return MmioRegister(name, offset, parse_fields(*fields), **kw)


class RegisterMap:
    """A device's register map: offsets decoded once, registers by name.

    Raises:
        RegisterTableError: two registers overlap or share a name.
    """

    def __init__(self, registers: Iterable[MmioRegister], size: int):
        self.size = size
        self.registers = tuple(registers)
        self.by_name = {r.name: r for r in self.registers}
        if len(self.by_name) != len(self.registers):
            raise RegisterTableError("duplicate register name in a register map")
        self._by_word: dict[int, MmioRegister] = {}
        for r in sorted(self.registers, key=lambda r: r.offset):
            if r.offset + r.size > size:
                raise RegisterTableError(f"{r.name} ends beyond the region ({size:#x} bytes)")
            for a in range(r.offset, r.offset + r.size):
                if a in self._by_word:
                    raise RegisterTableError(f"{r.name} overlaps {self._by_word[a].name}")
                self._by_word[a] = r

    def __getitem__(self, name: str) -> MmioRegister:
        return self.by_name[name]

    def decode(self, offset: int, size: int) -> tuple[MmioRegister, int, int] | None:
        """``(register, element index, byte offset in the element)`` for an access of
        ``size`` bytes at ``offset``, or None when no register takes it (no register there,
        a size it does not accept, or not naturally aligned)."""
        r = self._by_word.get(offset)
        if r is None or size not in r.sizes or offset % size:
            return None
        rel = offset - r.offset
        return r, rel // r.width, rel % r.width

    def reset_values(self) -> dict[str, list[int]]:
        """Fresh storage: register name -> list of element values."""
        return {r.name: [r.reset] * r.count for r in self.registers}
