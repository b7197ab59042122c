"""Memory-mapped register maps, declared once per device with the same field machinery as
system registers (:class:`spe_emu.sysreg.Field`, :func:`spe_emu.sysreg.parse_fields`,
:func:`spe_emu.sysreg.fields_write`): per-field access modes (RW, RO, W1C, W1S, WO), RES0 bits
derived, reset values checked, and side-effect hooks named on the register.

* Bits covered by no field (and not RES1) are RES0: they read as zero and writes to them are
  ignored. A register the implementation makes RAZ/WI is therefore one with no fields
  (:func:`raz_wi`), and a field with unimplemented low bits is declared over its implemented
  bits only (e.g. a priority field ``7:3`` when three low bits are RAZ/WI).
* A register array either stores its elements (``count`` values) or, with a :class:`PerItem`
  binding, is a view onto per-item state the device keeps (one entry per interrupt, channel,
  ...): each element packs one slot per item, and the fields' access modes apply to the
  slots as to stored bits (``GICD_ISENABLER<n>``: 32 one-bit W1S fields).
* A register wider than some accesses (``sizes``) takes them on any naturally aligned part:
  a 64-bit register with ``sizes={4, 8}`` accepts 32-bit accesses to either half. A narrow
  write acts on the bytes it writes only (W1C/W1S bits in the other bytes are not touched).

A :class:`RegisterMap` decodes an offset into (register, element, byte) and
:meth:`MmioRegister.read`/:meth:`MmioRegister.write` perform the access on the owner's
storage; the owning :class:`~spe_emu.platform.device.Device` supplies the hooks. Accesses that
match no register, or have a size the register does not accept, are guest errors (logged;
reads return zero, writes are ignored), never host exceptions (QEMU's ``LOG_GUEST_ERROR``
habit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, MutableSequence, Sequence

from ..errors import RegisterTableError
from ..sysreg import Field, FieldAccess, FieldAccessors, WriteMasks, parse_fields


@dataclass(frozen=True)
class PerItem:
    """Binds a register array to per-item state of its owner (an interrupt controller's
    interrupts, a DMA controller's channels, ...) instead of stored element values.

    Element ``i`` of the array is a row of ``bits``-wide slots: slot ``j`` (bits
    ``(j+1)*bits-1 : j*bits``) is attribute ``attr`` of item ``first + i * per_element + j``,
    ``per_element`` = register width in bits / ``bits``. A read gathers the slots (from
    ``read_attr`` if given); a write gathers ``attr``, applies the fields' access modes
    (:func:`spe_emu.sysreg.fields_write`) and assigns the slots whose value changed.

    Attributes:
        items: name of the owner's attribute holding the item sequence (e.g. ``"_irqs"``).
        attr: item attribute the slots hold; writes assign it.
        bits: slot width in bits (divides the register width).
        first: item of slot 0 of element 0.
        read_attr: the attribute reads return when it is not ``attr`` (e.g. a pending state
            computed from a latch that writes set or clear and an input level).
        flag: slots are one-bit flags kept as ``bool`` (else ``int``).
    """

    items: str
    attr: str
    bits: int = 1
    first: int = 0
    read_attr: str | None = None
    flag: bool = False


@dataclass(frozen=True)
class MmioRegister(FieldAccessors):
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
        sizes: access sizes (bytes) accepted, each on any naturally aligned part of an
            element; default ``width`` only.
        per_item: the array is a view onto per-item state (:class:`PerItem`) rather than
            stored values (then ``reset`` and ``res1`` are 0 and no field is WO).
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
    per_item: PerItem | None = None
    on_read: str | None = None
    on_write: str | None = None
    doc: str = ""
    field_mask: int = field(init=False, repr=False, compare=False)
    readable_mask: int = field(init=False, repr=False, compare=False)
    """Bits a read returns from storage: the fields but WO ones, and RES1 (derived)."""
    _by_name: Mapping[str, Field] = field(init=False, repr=False, compare=False)
    _write: WriteMasks = field(init=False, repr=False, compare=False)
    _shifts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    """Per-item registers: bit position of each slot of an element."""

    def __post_init__(self) -> None:
        if self.width not in (1, 2, 4, 8) or self.count < 1 or self.offset % self.width:
            raise RegisterTableError(f"{self.name}: bad width, count or alignment")
        seen = 0
        for f in self.fields:
            if f.mask & seen or f.msb >= 8 * self.width:
                raise RegisterTableError(f"{self.name}: field {f.name} overlaps or is too wide")
            seen |= f.mask
        object.__setattr__(self, "field_mask", seen)
        readable = self.res1
        for f in self.fields:
            if f.access is not FieldAccess.WO:
                readable |= f.mask
        object.__setattr__(self, "readable_mask", readable)
        self._index_fields()
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
        shifts: tuple[int, ...] = ()
        p = self.per_item
        if p is not None:
            bits = p.bits
            if not 1 <= bits <= 8 * self.width or (8 * self.width) % bits:
                raise RegisterTableError(f"{self.name}: {bits}-bit slots do not tile a "
                                         f"{self.width}-byte register")
            if p.flag and bits != 1:
                raise RegisterTableError(f"{self.name}: flag slots are one bit wide")
            if self.reset or self.res1:
                raise RegisterTableError(f"{self.name}: a per-item register has no reset "
                                         f"value or RES1 bits of its own")
            for f in self.fields:
                if f.access is FieldAccess.WO or f.lsb // bits != f.msb // bits:
                    raise RegisterTableError(f"{self.name}: field {f.name} is WO or spans "
                                             f"two slots")
            shifts = tuple(range(0, 8 * self.width, bits))
        object.__setattr__(self, "_shifts", shifts)

    @property
    def size(self) -> int:
        """Bytes the register (array) occupies."""
        return self.width * self.count

    def apply_write(self, old: int, written: int, lanes: int = -1) -> int:
        """Stored value after software writes ``written`` (each field by its access mode,
        :func:`spe_emu.sysreg.fields_write`); bits outside ``lanes`` (the bytes a narrower
        access did not write) keep their old value."""
        return (self._write.apply(old, written) & lanes) | (old & ~lanes) | self.res1

    # -- accesses ---------------------------------------------------------------------------
    def read(self, storage: Sequence[Any], index: int) -> int:
        """Value of element ``index`` as software reads it (WO fields read as zero).

        ``storage`` is the register's element values (a list of ``count`` ints, see
        :meth:`RegisterMap.reset_values`) or, for a :class:`PerItem` register, the owner's
        item sequence."""
        p = self.per_item
        if p is None:
            return storage[index] & self.readable_mask
        return self._gather(storage, index, p.read_attr or p.attr) & self.readable_mask

    def write(self, storage: MutableSequence[Any], index: int, value: int, byte: int = 0,
              size: int = 0) -> tuple[int, int]:
        """Software writes ``value`` (``size`` bytes, default the width, at byte ``byte`` of
        element ``index``): each field acts by its access mode on the bytes written; the
        result is stored (or, for a :class:`PerItem` register, assigned to the items whose
        slot changed). ``storage`` as for :meth:`read`.

        Returns:
            ``(old, written)``: the element before the write and the whole element as
            written (the bytes a narrower access did not write taken from ``old``), the
            arguments of the ``on_write`` hook.
        """
        shift = 8 * byte
        lanes = ((1 << (8 * (size or self.width))) - 1) << shift
        p = self.per_item
        old = storage[index] if p is None else self._gather(storage, index, p.attr)
        written = (old & ~lanes) | ((value << shift) & lanes)
        new = self.apply_write(old, written, lanes)
        if p is None:
            storage[index] = new
        elif new != old:
            self._scatter(storage, index, old ^ new, new)
        return old, written

    def _gather(self, items: Sequence[Any], index: int, attr: str) -> int:
        n = len(self._shifts)
        first = self.per_item.first + index * n
        slot_mask = (1 << self.per_item.bits) - 1
        value = 0
        for shift, item in zip(self._shifts, items[first:first + n]):
            value |= (getattr(item, attr) & slot_mask) << shift
        return value

    def _scatter(self, items: MutableSequence[Any], index: int, changed: int, new: int) -> None:
        p = self.per_item
        bits, attr, flag = p.bits, p.attr, p.flag
        first = p.first + index * len(self._shifts)
        slot_mask = (1 << bits) - 1
        while changed:
            slot = ((changed & -changed).bit_length() - 1) // bits
            shift = slot * bits
            v = (new >> shift) & slot_mask
            setattr(items[first + slot], attr, bool(v) if flag else v)
            changed &= ~(slot_mask << shift)


def mmio(name: str, offset: int, *fields: str, **kw: Any) -> MmioRegister:
    """Shorthand: ``mmio("UARTFR", 0x18, "TXFE 7 RO", "RXFF 6 RO", ..., reset=0x90)``."""
    return MmioRegister(name, offset, parse_fields(*fields), **kw)


def raz_wi(name: str, offset: int, **kw: Any) -> MmioRegister:
    """A register (array) the implementation makes RAZ/WI: every bit RES0, so reads return
    zero and writes are ignored, without a guest error (the architecture allows the access).
    ``kw`` as for :class:`MmioRegister` (``width``, ``count``, ``sizes``, ``doc``)."""
    return MmioRegister(name, offset, (), **kw)


class RegisterMap:
    """A device's register map: offsets decoded once, registers by name.

    Raises:
        RegisterTableError: two registers overlap or share a name, or one ends beyond the
            region.
    """

    def __init__(self, registers: Iterable[MmioRegister], size: int):
        self.size = size
        self.registers = tuple(registers)
        self.by_name = {r.name: r for r in self.registers}
        if len(self.by_name) != len(self.registers):
            raise RegisterTableError("duplicate register name in a register map")
        self._at: dict[int, tuple[MmioRegister, int, int]] = {}
        for r in sorted(self.registers, key=lambda r: r.offset):
            if r.offset + r.size > size:
                raise RegisterTableError(f"{r.name} ends beyond the region ({size:#x} bytes)")
            for a in range(r.offset, r.offset + r.size):
                if a in self._at:
                    raise RegisterTableError(f"{r.name} overlaps {self._at[a][0].name}")
                rel = a - r.offset
                self._at[a] = (r, rel // r.width, rel % r.width)

    def __getitem__(self, name: str) -> MmioRegister:
        return self.by_name[name]

    def at(self, offset: int) -> tuple[MmioRegister, int, int] | None:
        """``(register, element index, byte offset in the element)`` of the register that
        covers byte ``offset``, or None, whatever the access size (for devices that tell an
        unknown offset from a bad size in their guest-error messages)."""
        return self._at.get(offset)

    def decode(self, offset: int, size: int) -> tuple[MmioRegister, int, int] | None:
        """``(register, element index, byte offset in the element)`` for an access of
        ``size`` bytes at ``offset``, or None when no register takes it (no register there,
        a size it does not accept, or not naturally aligned)."""
        found = self._at.get(offset)
        if found is None or size not in found[0].sizes or offset % size:
            return None
        return found

    def reset_values(self) -> dict[str, list[int]]:
        """Fresh storage: register name -> list of element values (registers with a
        :class:`PerItem` binding have none: their state is the owner's items)."""
        return {r.name: [r.reset] * r.count for r in self.registers if r.per_item is None}
