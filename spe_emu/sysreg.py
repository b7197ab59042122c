"""Declarative system-register tables.

Every system register spe_emu models is declared once, as data: its encoding in architectural
order ``(op0, op1, CRn, CRm, op2)``, its fields with ``msb:lsb``, RES1 bits, reset value, whether
it is read-only, an access check (a pure function returning an :class:`Access` verdict) and
optional read/write side-effect hooks. RES0 masks, write masks and field shifts are derived,
never written by hand, and every table validates itself when it is built (fields inside
63..0, no overlaps, reset value free of RES0 bits) -- the habits of Linux's
``arch/arm64/tools/sysreg`` and QEMU's ``ARMCPRegInfo``.

Field access goes through :meth:`RegisterSpec.get` / :meth:`RegisterSpec.set` (or
:meth:`Field.get` / :meth:`Field.set`); code outside this module never shifts register bits by
hand.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .errors import RegisterTableError

MASK64 = (1 << 64) - 1


class Access(enum.Enum):
    """Verdict of an access check: the ``SysRegAccess`` enumeration of the SPE pseudocode
    (§3.2.3 ``CheckStatisticalProfilingAccess()``, §3.4.6 ``CheckProfilingBufferAccess()``)."""

    OK = "ok"
    UNDEFINED = "undefined"
    TRAP_EL1 = "trap-el1"
    TRAP_EL2 = "trap-el2"
    TRAP_EL3 = "trap-el3"

    @property
    def target_el(self) -> int | None:
        """Exception level a trap verdict is taken to (None for OK / UNDEFINED)."""
        return {Access.TRAP_EL1: 1, Access.TRAP_EL2: 2, Access.TRAP_EL3: 3}.get(self)


@dataclass(frozen=True, slots=True)
class Encoding:
    """A system register encoding, always in architectural order (op0, op1, CRn, CRm, op2)."""

    op0: int
    op1: int
    crn: int
    crm: int
    op2: int

    def __post_init__(self) -> None:
        limits = (("op0", self.op0, 3), ("op1", self.op1, 7), ("CRn", self.crn, 15),
                  ("CRm", self.crm, 15), ("op2", self.op2, 7))
        for name, value, top in limits:
            if not 0 <= value <= top:
                raise RegisterTableError(f"encoding field {name}={value} out of range 0..{top}")

    @property
    def tuple(self) -> tuple[int, int, int, int, int]:
        return (self.op0, self.op1, self.crn, self.crm, self.op2)

    def __str__(self) -> str:
        return f"S{self.op0}_{self.op1}_C{self.crn}_C{self.crm}_{self.op2}"

    def move_word(self, is_read: bool, rt: int = 0) -> int:
        """The A64 word of ``MRS Xt, <reg>`` (``is_read``) or ``MSR <reg>, Xt`` for this
        encoding, op0 2 or 3 (Arm ARM C6.2 MRS, MSR (register): 1101010100 L op0 op1 CRn CRm
        op2 Rt)."""
        return (0xD5000000 | int(is_read) << 21 | self.op0 << 19 | self.op1 << 16
                | self.crn << 12 | self.crm << 8 | self.op2 << 5 | rt)


class FieldAccess(enum.Enum):
    """How software writes (and reads) a field: one mechanism for system and memory-mapped
    registers (the per-field modes of amaranth-soc and Renode; Arm names them RW, RO, W1C ...).

    RW: a write stores the written bits. RO: writes do not change it (reads return the state).
    W1C: writing 1 clears a bit, 0 leaves it. W1S: writing 1 sets a bit, 0 leaves it.
    WO: a write is acted on by the register's write hook; reads return zero.
    """

    RW = "RW"
    RO = "RO"
    W1C = "W1C"
    W1S = "W1S"
    WO = "WO"


@dataclass(frozen=True, slots=True)
class Field:
    """A register field occupying bits ``msb:lsb`` (inclusive), with its write behaviour."""

    name: str
    msb: int
    lsb: int
    writable: bool = True
    access: FieldAccess = FieldAccess.RW
    mask: int = field(init=False, repr=False, compare=False)
    """The field's bits in register position (derived)."""

    def __post_init__(self) -> None:
        if not 0 <= self.lsb <= self.msb <= 63:
            raise RegisterTableError(f"field {self.name} has bad bit range {self.msb}:{self.lsb}")
        object.__setattr__(self, "mask", ((1 << (self.msb - self.lsb + 1)) - 1) << self.lsb)
        if not self.writable and self.access is FieldAccess.RW:
            object.__setattr__(self, "access", FieldAccess.RO)
        object.__setattr__(self, "writable", self.access is not FieldAccess.RO)

    def get(self, value: int) -> int:
        """Extract this field (right-aligned) from a register value."""
        return (value & self.mask) >> self.lsb

    def set(self, value: int, field_value: int) -> int:
        """Return ``value`` with this field replaced by ``field_value``.

        Raises :class:`RegisterTableError` if ``field_value`` does not fit the field.
        """
        if field_value < 0 or field_value > self.mask >> self.lsb:
            raise RegisterTableError(f"value {field_value:#x} does not fit field {self.name} "
                                     f"[{self.msb}:{self.lsb}]")
        return (value & ~self.mask & MASK64) | (field_value << self.lsb)


def parse_fields(*specs: str) -> tuple[Field, ...]:
    """Build fields from ``"NAME msb:lsb"`` / ``"NAME bit"`` strings; a trailing access mode
    (:class:`FieldAccess`: ``RO``, ``W1C``, ``W1S``, ``WO``; default RW) says how writes act,
    e.g. ``"S 17"``, ``"P 4 RO"``, ``"RXIC 4 W1C"``."""
    out = []
    for spec in specs:
        parts = spec.split()
        if len(parts) not in (2, 3):
            raise RegisterTableError(f"bad field spec {spec!r}")
        try:
            access = FieldAccess(parts[2]) if len(parts) == 3 else FieldAccess.RW
        except ValueError:
            raise RegisterTableError(f"bad field spec {spec!r}: unknown access mode "
                                     f"{parts[2]!r}") from None
        name, bits = parts[0], parts[1]
        msb, _, lsb = bits.partition(":")
        out.append(Field(name, int(msb), int(lsb or msb), access=access))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class WriteMasks:
    """The access modes of a register's fields as bit masks, so that a write acts on every
    field at once (:meth:`apply`); built once per register by :func:`write_masks`.

    Attributes:
        rw, ro, w1c, w1s: the bits of the fields with that access mode (WO fields, RES0 and
            RES1 bits are in none of them).
    """

    rw: int = 0
    ro: int = 0
    w1c: int = 0
    w1s: int = 0

    def apply(self, old: int, written: int) -> int:
        """The fields' value after software writes ``written`` over ``old`` (see
        :func:`fields_write`)."""
        return ((written & self.rw) | (old & self.ro) | (old & ~written & self.w1c)
                | ((old | written) & self.w1s))


def write_masks(fields: Iterable[Field]) -> WriteMasks:
    """The :class:`WriteMasks` of ``fields`` (by each field's :class:`FieldAccess`)."""
    masks = {FieldAccess.RW: 0, FieldAccess.RO: 0, FieldAccess.W1C: 0, FieldAccess.W1S: 0,
             FieldAccess.WO: 0}
    for f in fields:
        masks[f.access] |= f.mask
    return WriteMasks(masks[FieldAccess.RW], masks[FieldAccess.RO], masks[FieldAccess.W1C],
                      masks[FieldAccess.W1S])


def fields_write(fields: Iterable[Field], old: int, written: int) -> int:
    """The fields' value after software writes ``written`` over ``old``, each field by its
    :class:`FieldAccess` (bits outside every field come out zero; the caller adds RES1):
    RW fields take the written bits, RO fields keep theirs, W1C bits written 1 clear, W1S bits
    written 1 set, WO fields store nothing (the register's write hook acts on them).
    One rule for system registers (:meth:`RegisterSpec.apply_write`) and memory-mapped ones
    (:class:`spe_emu.platform.mmio.MmioRegister`); both keep their fields'
    :class:`WriteMasks` so that a write costs the same whatever the number of fields."""
    return write_masks(fields).apply(old, written)


class Replan(enum.Enum):
    """What a write to a register may change for the run loop, which decides from it whether
    to stop and re-plan after the write (spe_emu.cpu.machine, docs/model.md "Run loops").

    NONE: nothing planned (storage, or read at each use). ENABLE: whether profiling is
    enabled, the Profiling Buffer's state or PMBIRQ (SPE §3.2.3 Table 3, §3.4.6, §3.5).
    PLAN: the interval counter's plan or the capture budget (§3.1), while profiling is
    enabled. IRQ: the interrupt outputs of the GIC or a device (GICv3 IHI 0069 §4.1; the
    generic timer, Arm ARM D11): stop only when an interrupt is then asserted.
    """

    NONE = "none"
    ENABLE = "enable"
    PLAN = "plan"
    IRQ = "irq"


AccessCheck = Callable[[Any, bool], Access]
"""An access check: ``check(ctx, is_read) -> Access``. ``ctx`` is the machine's view of the
controlling registers (see :class:`spe_emu.cpu.machine.AccessContext`). Must be pure."""


def access_ok(ctx: Any, is_read: bool) -> Access:
    """The trivial access check (always OK)."""
    return Access.OK


class FieldAccessors:
    """Field access by name, shared by every register declaration that has ``name``,
    ``fields`` and ``res1`` (:class:`RegisterSpec`, :class:`spe_emu.platform.mmio.MmioRegister`):
    the one field mechanism's read side."""

    name: str
    fields: tuple[Field, ...]
    res1: int
    _by_name: Mapping[str, Field]
    _write: WriteMasks

    def _index_fields(self) -> int:
        """Build the fields' by-name index and :class:`WriteMasks` (each declaration's
        ``__post_init__`` calls it once) and return the bits of all fields. Raises
        :class:`RegisterTableError` for overlapping fields or a duplicate field name."""
        seen = 0
        for f in self.fields:
            if f.mask & seen:
                raise RegisterTableError(f"{self.name}: field {f.name} overlaps another field")
            seen |= f.mask
        names = {f.name: f for f in self.fields}
        if len(names) != len(self.fields):
            raise RegisterTableError(f"{self.name}: duplicate field name")
        object.__setattr__(self, "_by_name", names)
        object.__setattr__(self, "_write", write_masks(self.fields))
        return seen

    def field(self, name: str) -> Field:
        """The field called ``name`` (by a dictionary: tables are large). Raises
        :class:`RegisterTableError` naming the register."""
        try:
            return self._by_name[name]
        except KeyError:
            raise RegisterTableError(f"{self.name} has no field {name}") from None

    def get(self, value: int, name: str) -> int:
        """Field ``name`` of ``value``, right-aligned."""
        f = self.field(name)
        return (value & f.mask) >> f.lsb

    def set(self, value: int, name: str, field_value: int) -> int:
        """``value`` with field ``name`` replaced."""
        return self.field(name).set(value, field_value)

    def make(self, **fields: int) -> int:
        """Build a value from field values (others zero, RES1 bits set)."""
        value = self.res1
        for name, v in fields.items():
            value = self.set(value, name, v)
        return value


@dataclass(frozen=True)
class RegisterSpec(FieldAccessors):
    """One system register, declared once.

    Attributes:
        name: architectural name, e.g. ``"PMBSR_EL1"``.
        encoding: (op0, op1, CRn, CRm, op2).
        fields: named fields; bits covered by no field and not RES1 are RES0.
        res1: mask of RES1 bits.
        reset: reset value (RES0 bits must be zero, RES1 bits one); default: the RES1 bits.
        read_only: direct writes are UNDEFINED (e.g. ID registers).
        check: access check returning an :class:`Access` verdict.
        on_read / on_write: names of side-effect hooks the owning device implements
            (``device.<on_read>(spec) -> value``, ``device.<on_write>(spec, value)``); None means
            plain storage.
        replan: what a write may change for the run loop (:class:`Replan`); None takes the
            owner's default (:class:`spe_emu.platform.sysregs.SysregRegistry`).
        doc: spec section the register is described in.
    """

    name: str
    encoding: Encoding
    fields: tuple[Field, ...]
    res1: int = 0
    reset: int | None = None
    read_only: bool = False
    check: AccessCheck = access_ok
    on_read: str | None = None
    on_write: str | None = None
    replan: Replan | None = None
    doc: str = ""
    field_mask: int = field(init=False, repr=False, compare=False)
    """The bits of all fields."""
    _by_name: Mapping[str, Field] = field(init=False, repr=False, compare=False)
    _write: WriteMasks = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "field_mask", self._index_fields())
        if self.res1 & self.field_mask:
            raise RegisterTableError(f"{self.name}: RES1 bits overlap a field")
        if self.reset is None:
            object.__setattr__(self, "reset", self.res1)
        if self.reset & self.res0:
            raise RegisterTableError(f"{self.name}: reset value {self.reset:#x} sets RES0 bits")
        if self.reset & self.res1 != self.res1:
            raise RegisterTableError(f"{self.name}: reset value {self.reset:#x} clears RES1 bits")

    @property
    def res0(self) -> int:
        """Mask of RES0 bits: everything not in a field and not RES1."""
        return MASK64 & ~self.field_mask & ~self.res1

    @property
    def write_mask(self) -> int:
        """Bits a direct write (MSR) can change."""
        out = 0
        for f in self.fields:
            if f.writable:
                out |= f.mask
        return out

    def apply_write(self, old: int, written: int) -> int:
        """Value after a direct write of ``written``: writable fields take the new bits, read-only
        fields keep theirs, RES0 bits read as zero, RES1 bits as one (:func:`fields_write`)."""
        return self._write.apply(old, written) | self.res1

    def describe(self, value: int) -> str:
        """``NAME=0x... (F1=.. F2=..)`` for logs and error messages."""
        parts = " ".join(f"{f.name}={f.get(value):#x}" for f in self.fields if f.get(value))
        return f"{self.name}={value:#x}" + (f" ({parts})" if parts else "")


class RegisterTable:
    """An ordered collection of :class:`RegisterSpec`, indexed by name and by encoding."""

    def __init__(self, specs: Iterable[RegisterSpec]):
        self._by_name: dict[str, RegisterSpec] = {}
        self._by_enc: dict[tuple[int, int, int, int, int], RegisterSpec] = {}
        for spec in specs:
            if spec.name in self._by_name:
                raise RegisterTableError(f"register {spec.name} declared twice")
            if spec.encoding.tuple in self._by_enc:
                other = self._by_enc[spec.encoding.tuple].name
                raise RegisterTableError(f"{spec.name} and {other} share encoding {spec.encoding}")
            self._by_name[spec.name] = spec
            self._by_enc[spec.encoding.tuple] = spec

    def __iter__(self):
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> RegisterSpec:
        return self._by_name[name]

    def by_encoding(self, enc: tuple[int, int, int, int, int]) -> RegisterSpec | None:
        """The register at ``(op0, op1, CRn, CRm, op2)``, or None."""
        return self._by_enc.get(tuple(enc))

    def reset_values(self) -> dict[str, int]:
        return {spec.name: spec.reset for spec in self}


def reg(name: str, enc: tuple[int, int, int, int, int], *fields: str, **kw: Any) -> RegisterSpec:
    """Shorthand: ``reg("PMSCR_EL1", (3, 0, 9, 9, 0), "PCT 6", "TS 5", ..., reset=0)``."""
    return RegisterSpec(name=name, encoding=Encoding(*enc), fields=parse_fields(*fields), **kw)


@dataclass(frozen=True)
class Layout(FieldAccessors):
    """A named bit layout that is no register (an SMC Calling Convention Function Identifier,
    a PSCI argument...): the same field access by name as a register (:class:`FieldAccessors`)
    without an encoding or access rules.

    Raises:
        RegisterTableError: overlapping fields or a duplicate field name.
    """

    name: str
    fields: tuple[Field, ...]
    res1: int = 0
    field_mask: int = field(init=False, repr=False, compare=False)
    """The bits of all fields."""
    _by_name: Mapping[str, Field] = field(init=False, repr=False, compare=False)
    _write: WriteMasks = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "field_mask", self._index_fields())


def layout(name: str, *fields: str, res1: int = 0) -> Layout:
    """Shorthand: ``layout("Function Identifier", "Type 31", "CallConv 30", ...)``."""
    return Layout(name, parse_fields(*fields), res1)
