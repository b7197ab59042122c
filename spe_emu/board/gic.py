"""A GICv3 subset: what a bare-metal driver needs to enable and take PPI 21 (PMBIRQ).

Reference: Arm *GIC Architecture Specification, GICv3 and GICv4* (IHI 0069): chapter 4
"Physical Interrupt Handling and Prioritization" (§4.1 interrupt lifecycle, §4.6.2 IRQ/FIQ
assignment, §4.8 interrupt prioritization) for the behaviour, the "Programmers' model"
chapter for the registers.

Model
-----
* One PE (affinity 0.0.0.0), one redistributor, 64 SPIs (INTIDs 32..95), no LPIs, no ITS.
* A GIC without two Security states: ``GICD_CTLR.DS`` reads 1 (RAO/WI) and
  ``GICD_TYPER.SecurityExtn`` is 0, the configuration QEMU's ``virt`` board presents to EL1
  software (a firmware entered at EL3 sets DS itself). Group 0 (signalled as FIQ) and Group 1
  (signalled as IRQ) exist; everything the Non-secure Group 1 path needs is implemented, and
  Group 0 configuration is stored and honoured the same way. ``GICx_IGRPMODR`` and
  ``GICx_NSACR`` are RAZ/WI, as the architecture requires when DS == 1.
* Affinity routing is always on (``GICD_CTLR.ARE_NS`` RAO/WI), so the distributor's
  registers for INTIDs 0..31 are RAZ/WI and SGIs/PPIs are configured through the
  redistributor's SGI_base frame.
* Priority has 5 implemented bits (``ICC_CTLR_EL1.PRIbits`` = 4, priorities step by 8, the
  low three bits of every priority field are RAZ/WI), like QEMU and Arm's GIC-600.
* System-register interface only (``ICC_SRE_ELx.SRE`` is RAO/WI); ``EOImode`` is honoured.

Device habits (see shared/notes/style-anchors.md): the MMIO register map is declared once
below (``GICD_MAP``, ``GICR_RD_MAP``, ``GICR_SGI_MAP``) and validated at import; the CPU
interface registers are declared once in :data:`ICC_REGISTERS`; the IRQ line is a pure
function of the state (:meth:`GicV3.irq_line`) and ``on_change`` is called after every change;
guest mistakes are logged through ``log`` and never raised; host mistakes (an address outside
the GIC, a bad access size, an unknown register name) raise :class:`~spe_emu.errors.DeviceError`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Callable

from ..cpu.context import AccessContext
from ..errors import DeviceError, RegisterTableError
from ..sysreg import Access, Field, RegisterSpec, RegisterTable, parse_fields, reg

# ---------------------------------------------------------------------------------------------
# Board constants
# ---------------------------------------------------------------------------------------------

GICD_BASE = 0x0800_0000
GICD_SIZE = 0x1_0000
GICR_BASE = 0x080A_0000
GICR_SIZE = 0x2_0000
GICR_SGI_OFFSET = 0x1_0000
"""The SGI_base frame follows the RD_base frame."""

NUM_SPIS = 64
NUM_INTIDS = 32 + NUM_SPIS
"""INTIDs 0..15 SGIs, 16..31 PPIs, 32..95 SPIs."""
PRI_BITS = 5
PRIORITY_MASK = (0xFF << (8 - PRI_BITS)) & 0xFF
"""Implemented bits of a priority value (0xF8)."""
IDLE_PRIORITY = 0xFF
INTID_SPURIOUS = 1023
MIN_BPR0 = 7 - PRI_BITS
"""Smallest ICC_BPR0_EL1 value: group priority [7:MIN_BPR0+1] covers all implemented bits."""
MIN_BPR1 = MIN_BPR0 + 1
"""Smallest ICC_BPR1_EL1 value (Group 1 binary points are offset by one)."""
GROUP0, GROUP1 = 0, 1

ARM_JEP106 = 0x43B
"""JEP106 code of Arm, used in the IIDR registers."""

# ---------------------------------------------------------------------------------------------
# MMIO register map
# ---------------------------------------------------------------------------------------------


class Kind(enum.Enum):
    """How a memory-mapped register behaves."""

    RW = "rw"          # storage; only writable fields change
    RO = "ro"          # constant reset value; writes are a logged guest error
    RAZ_WI = "raz/wi"  # reads zero, writes ignored silently (architecturally RAZ/WI)
    W1S = "w1s"        # per-interrupt bits: read the state, write 1 to set
    W1C = "w1c"        # per-interrupt bits: read the state, write 1 to clear


@dataclass(frozen=True)
class IrqArray:
    """A register array holding one ``bits``-wide field per interrupt.

    ``attr`` names the per-interrupt state (:class:`_Irq` attribute); ``implemented`` masks the
    bits of each field that exist (e.g. 0xF8 for priorities, 0b10 for Int_config);
    ``first_intid`` is the INTID of bit 0 of element 0.
    """

    attr: str
    bits: int
    first_intid: int
    implemented: int = 1


@dataclass(frozen=True)
class MmioReg:
    """One memory-mapped register (or a register array of ``count`` elements).

    Attributes:
        name: architectural name; arrays use the name of the first element's group,
            e.g. ``GICD_ISENABLER<n>``.
        offset: byte offset of element 0 inside its frame.
        kind: :class:`Kind`.
        width: element size in bytes (4, or 8 for 64-bit registers, which also accept 32-bit
            accesses to either half).
        count: number of elements (stride = width).
        reset: reset value of every element (RW/RO kinds).
        fields: ``Field``s from :func:`spe_emu.sysreg.parse_fields`; for RW registers only
            writable fields change on a write.
        irqs: for W1S/W1C/RW per-interrupt arrays, the mapping onto interrupt state.
        byte_access: byte accesses are allowed (priority and target arrays).
        on_write: name of a ``GicV3`` hook called after a write, ``hook(reg, index)``.
        doc: where the register is described.
    """

    name: str
    offset: int
    kind: Kind
    width: int = 4
    count: int = 1
    reset: int = 0
    fields: tuple[Field, ...] = ()
    irqs: IrqArray | None = None
    byte_access: bool = False
    on_write: str | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if self.width not in (4, 8) or self.count < 1 or self.offset % self.width:
            raise RegisterTableError(f"{self.name}: bad width/count/alignment")
        seen = 0
        for f in self.fields:
            if f.mask & seen or f.msb >= 8 * self.width:
                raise RegisterTableError(f"{self.name}: field {f.name} overlaps or is too wide")
            seen |= f.mask
        if self.fields and self.reset & ~seen:
            raise RegisterTableError(f"{self.name}: reset {self.reset:#x} sets RES0 bits")
        if self.kind in (Kind.W1S, Kind.W1C) and self.irqs is None:
            raise RegisterTableError(f"{self.name}: W1S/W1C need a per-interrupt mapping")
        if self.irqs is not None and self.kind not in (Kind.RW, Kind.W1S, Kind.W1C):
            raise RegisterTableError(f"{self.name}: a per-interrupt mapping needs RW/W1S/W1C")
        if self.irqs is not None and (8 * self.width) % self.irqs.bits:
            raise RegisterTableError(f"{self.name}: per-interrupt fields do not tile the register")

    @property
    def size(self) -> int:
        return self.width * self.count

    @property
    def write_mask(self) -> int:
        """Bits a write changes (RW registers): the writable fields."""
        out = 0
        for f in self.fields:
            if f.writable:
                out |= f.mask
        return out

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise RegisterTableError(f"{self.name} has no field {name}")

    def get(self, value: int, name: str) -> int:
        return self.field(name).get(value)

    def set(self, value: int, name: str, field_value: int) -> int:
        return self.field(name).set(value, field_value)


def _value(fields: tuple[Field, ...], **values: int) -> int:
    """A register value built from field values by name."""
    by_name = {f.name: f for f in fields}
    out = 0
    for field_name, v in values.items():
        out = by_name[field_name].set(out, v)
    return out


def _ro(name: str, offset: int, *fields: str, width: int = 4, **values: int) -> MmioReg:
    """A read-only identification register whose value is built from field values."""
    parsed = parse_fields(*fields)
    return MmioReg(name, offset, Kind.RO, width=width, fields=parsed,
                   reset=_value(parsed, **values), doc=f"IHI 0069 Programmers' model, {name}")


def _rw(name: str, offset: int, *fields: str, on_write: str | None = None, doc: str = "",
        **reset: int) -> MmioReg:
    """A storage register; ``reset`` gives the reset value by field name."""
    parsed = parse_fields(*fields)
    return MmioReg(name, offset, Kind.RW, fields=parsed, reset=_value(parsed, **reset),
                   on_write=on_write, doc=doc or f"IHI 0069 Programmers' model, {name}")


def _irq_regs(name: str, base: int, first_intid: int, n_intids: int, kind: Kind, attr: str,
              bits: int = 1, implemented: int = 1, byte_access: bool = False) -> MmioReg:
    """A per-interrupt register array covering ``n_intids`` interrupts from ``first_intid``,
    placed where the architecture puts them (``base + first_intid * bits / 8``)."""
    per_reg = 32 // bits
    return MmioReg(name, base + (first_intid // per_reg) * 4, kind,
                   count=n_intids // per_reg, irqs=IrqArray(attr, bits, first_intid, implemented),
                   byte_access=byte_access, doc=f"IHI 0069 Programmers' model, {name}")


def _raz(name: str, offset: int, count: int = 1, width: int = 4, byte_access: bool = False,
         doc: str = "") -> MmioReg:
    return MmioReg(name, offset, Kind.RAZ_WI, width=width, count=count, byte_access=byte_access,
                   doc=doc)


_ARE_RAZ = "RAZ/WI: affinity routing is enabled, INTIDs 0..31 live in the redistributor"
_DS_RAZ = "RAZ/WI: GICD_CTLR.DS == 1"

GICD_MAP: tuple[MmioReg, ...] = (
    _rw("GICD_CTLR", 0x0000, "RWP 31 RO", "DS 6 RO", "ARE_NS 4 RO", "EnableGrp1NS 1",
        "EnableGrp0 0", DS=1, ARE_NS=1,
        doc="IHI 0069 GICD_CTLR, DS == 1 view (bit 1 = Group 1 enable, bit 4 = ARE)"),
    _ro("GICD_TYPER", 0x0004, "No1N 25", "A3V 24", "IDbits 23:19", "SecurityExtn 10",
        "CPUNumber 7:5", "ITLinesNumber 4:0",
        No1N=1, IDbits=0b01111, ITLinesNumber=NUM_INTIDS // 32 - 1),
    _ro("GICD_IIDR", 0x0008, "ProductID 31:24", "Variant 19:16", "Revision 15:12",
        "Implementer 11:0", Implementer=ARM_JEP106),
    _ro("GICD_TYPER2", 0x000C),
    _raz("GICD_STATUSR", 0x0010),
    _raz("GICD_IGROUPR0", 0x0080, doc=_ARE_RAZ),
    _irq_regs("GICD_IGROUPR<n>", 0x0080, 32, NUM_SPIS, Kind.RW, "group"),
    _raz("GICD_ISENABLER0", 0x0100, doc=_ARE_RAZ),
    _irq_regs("GICD_ISENABLER<n>", 0x0100, 32, NUM_SPIS, Kind.W1S, "enabled"),
    _raz("GICD_ICENABLER0", 0x0180, doc=_ARE_RAZ),
    _irq_regs("GICD_ICENABLER<n>", 0x0180, 32, NUM_SPIS, Kind.W1C, "enabled"),
    _raz("GICD_ISPENDR0", 0x0200, doc=_ARE_RAZ),
    _irq_regs("GICD_ISPENDR<n>", 0x0200, 32, NUM_SPIS, Kind.W1S, "pending"),
    _raz("GICD_ICPENDR0", 0x0280, doc=_ARE_RAZ),
    _irq_regs("GICD_ICPENDR<n>", 0x0280, 32, NUM_SPIS, Kind.W1C, "pending"),
    _raz("GICD_ISACTIVER0", 0x0300, doc=_ARE_RAZ),
    _irq_regs("GICD_ISACTIVER<n>", 0x0300, 32, NUM_SPIS, Kind.W1S, "active"),
    _raz("GICD_ICACTIVER0", 0x0380, doc=_ARE_RAZ),
    _irq_regs("GICD_ICACTIVER<n>", 0x0380, 32, NUM_SPIS, Kind.W1C, "active"),
    _raz("GICD_IPRIORITYR0-7", 0x0400, count=8, byte_access=True, doc=_ARE_RAZ),
    _irq_regs("GICD_IPRIORITYR<n>", 0x0400, 32, NUM_SPIS, Kind.RW, "priority", bits=8,
              implemented=PRIORITY_MASK, byte_access=True),
    _raz("GICD_ITARGETSR<n>", 0x0800, count=NUM_INTIDS // 4, byte_access=True, doc=_ARE_RAZ),
    _raz("GICD_ICFGR0-1", 0x0C00, count=2, doc=_ARE_RAZ),
    _irq_regs("GICD_ICFGR<n>", 0x0C00, 32, NUM_SPIS, Kind.RW, "config", bits=2, implemented=0b10),
    _raz("GICD_IGRPMODR<n>", 0x0D00, count=NUM_INTIDS // 32, doc=_DS_RAZ),
    _raz("GICD_NSACR<n>", 0x0E00, count=NUM_INTIDS // 16, doc=_DS_RAZ),
    _raz("GICD_SGIR", 0x0F00, doc=_ARE_RAZ),
    MmioReg("GICD_IROUTER<n>", 0x6000 + 8 * 32, Kind.RW, width=8, count=NUM_SPIS,
            fields=parse_fields("Aff3 39:32", "Interrupt_Routing_Mode 31", "Aff2 23:16",
                                "Aff1 15:8", "Aff0 7:0"),
            doc="IHI 0069 GICD_IROUTER<n>, n = 32..95"),
    _ro("GICD_PIDR2", 0xFFE8, "ArchRev 7:4", "JEDEC 3:0", ArchRev=3, JEDEC=0xB),
)
"""Distributor frame (GICD_BASE)."""

GICR_RD_MAP: tuple[MmioReg, ...] = (
    _rw("GICR_CTLR", 0x0000, "UWP 31 RO", "RWP 3 RO",
        doc="IHI 0069 GICR_CTLR: no LPIs, no DPG; writes have no effect"),
    _ro("GICR_IIDR", 0x0004, "ProductID 31:24", "Variant 19:16", "Revision 15:12",
        "Implementer 11:0", Implementer=ARM_JEP106),
    _ro("GICR_TYPER", 0x0008, "Affinity_Value 63:32", "Processor_Number 23:8", "Last 4",
        width=8, Last=1),
    _raz("GICR_STATUSR", 0x0010),
    _rw("GICR_WAKER", 0x0014, "ChildrenAsleep 2 RO", "ProcessorSleep 1", ChildrenAsleep=1,
        ProcessorSleep=1, on_write="_waker_written",
        doc="IHI 0069 GICR_WAKER: ChildrenAsleep follows ProcessorSleep at once"),
    _raz("GICR_PROPBASER", 0x0070, width=8, doc="RAZ/WI: no LPIs"),
    _raz("GICR_PENDBASER", 0x0078, width=8, doc="RAZ/WI: no LPIs"),
    _ro("GICR_PIDR2", 0xFFE8, "ArchRev 7:4", "JEDEC 3:0", ArchRev=3, JEDEC=0xB),
)
"""Redistributor RD_base frame (GICR_BASE)."""

GICR_SGI_MAP: tuple[MmioReg, ...] = (
    _irq_regs("GICR_IGROUPR0", 0x0080, 0, 32, Kind.RW, "group"),
    _irq_regs("GICR_ISENABLER0", 0x0100, 0, 32, Kind.W1S, "enabled"),
    _irq_regs("GICR_ICENABLER0", 0x0180, 0, 32, Kind.W1C, "enabled"),
    _irq_regs("GICR_ISPENDR0", 0x0200, 0, 32, Kind.W1S, "pending"),
    _irq_regs("GICR_ICPENDR0", 0x0280, 0, 32, Kind.W1C, "pending"),
    _irq_regs("GICR_ISACTIVER0", 0x0300, 0, 32, Kind.W1S, "active"),
    _irq_regs("GICR_ICACTIVER0", 0x0380, 0, 32, Kind.W1C, "active"),
    _irq_regs("GICR_IPRIORITYR<n>", 0x0400, 0, 32, Kind.RW, "priority", bits=8,
              implemented=PRIORITY_MASK, byte_access=True),
    MmioReg("GICR_ICFGR0", 0x0C00, Kind.RO, reset=0xAAAA_AAAA,
            doc="IHI 0069 GICR_ICFGR0: SGIs are always edge-triggered"),
    _irq_regs("GICR_ICFGR1", 0x0C00, 16, 16, Kind.RW, "config", bits=2, implemented=0b10),
    _raz("GICR_IGRPMODR0", 0x0D00, doc=_DS_RAZ),
    _raz("GICR_NSACR", 0x0E00, doc=_DS_RAZ),
)
"""Redistributor SGI_base frame (GICR_BASE + 0x1_0000)."""


@dataclass(frozen=True)
class _Frame:
    name: str
    base: int
    size: int
    words: dict[int, tuple[MmioReg, int, int]]
    """4-byte-aligned offset -> (register, element index, byte offset inside the element)."""


def _build_frame(name: str, base: int, size: int, regs: tuple[MmioReg, ...]) -> _Frame:
    """Index a frame's registers by word offset; refuses overlapping declarations."""
    words: dict[int, tuple[MmioReg, int, int]] = {}
    for r in regs:
        if r.offset + r.size > size:
            raise RegisterTableError(f"{r.name} lies outside the {name} frame")
        for i in range(r.count):
            for sub in range(0, r.width, 4):
                off = r.offset + i * r.width + sub
                if off in words:
                    raise RegisterTableError(f"{r.name} overlaps {words[off][0].name} at {off:#x}")
                words[off] = (r, i, sub)
    return _Frame(name, base, size, words)


_FRAMES = (
    _build_frame("GICD", GICD_BASE, GICD_SIZE, GICD_MAP),
    _build_frame("GICR", GICR_BASE, GICR_SGI_OFFSET, GICR_RD_MAP),
    _build_frame("GICR_SGI", GICR_BASE + GICR_SGI_OFFSET, GICR_SIZE - GICR_SGI_OFFSET,
                 GICR_SGI_MAP),
)
_MMIO_BY_NAME = {r.name: r for r in GICD_MAP + GICR_RD_MAP + GICR_SGI_MAP}

# ---------------------------------------------------------------------------------------------
# CPU interface system registers
# ---------------------------------------------------------------------------------------------


def icc_el1_access(ctx: AccessContext, is_read: bool) -> Access:
    """ICC_*_EL1: UNDEFINED at EL0 (no ICC_SRE_ELx.Enable / ICH_HCR_EL2 traps are modelled)."""
    return Access.UNDEFINED if ctx.el < 1 else Access.OK


def icc_el1_read_only_access(ctx: AccessContext, is_read: bool) -> Access:
    """Read-only ICC_*_EL1 (IAR, HPPIR, RPR): writes are UNDEFINED, reads as
    :func:`icc_el1_access`."""
    return Access.UNDEFINED if not is_read else icc_el1_access(ctx, is_read)


def icc_el1_write_only_access(ctx: AccessContext, is_read: bool) -> Access:
    """Write-only ICC_*_EL1 (EOIR, DIR, SGI1R): reads are UNDEFINED, writes as
    :func:`icc_el1_access`."""
    return Access.UNDEFINED if is_read else icc_el1_access(ctx, is_read)


def icc_el2_access(ctx: AccessContext, is_read: bool) -> Access:
    """ICC_*_EL2: UNDEFINED below EL2."""
    return Access.UNDEFINED if ctx.el < 2 else Access.OK


def icc_el3_access(ctx: AccessContext, is_read: bool) -> Access:
    """ICC_*_EL3: UNDEFINED below EL3."""
    return Access.UNDEFINED if ctx.el < 3 else Access.OK


_CTLR_ID_FIELDS = ("ExtRange 19 RO", "RSS 18 RO", "A3V 15 RO", "SEIS 14 RO", "IDbits 13:11 RO",
                   "PRIbits 10:8 RO", "PMHE 6 RO")
_SRE_FIELDS = ("DIB 2 RO", "DFB 1 RO", "SRE 0 RO")
_INTID = "INTID 23:0"


def _icc(name: str, enc: tuple[int, int, int, int, int], *fields: str,
         resets: dict[str, int] | None = None, **kw) -> RegisterSpec:
    """An ICC_* register; ``resets`` gives its reset value by field name."""
    kw.setdefault("doc", f"IHI 0069 Programmers' model, {name}")
    spec = reg(name, enc, *fields, **kw)
    return replace(spec, reset=spec.make(**resets)) if resets else spec


ICC_REGISTERS = RegisterTable([
    _icc("ICC_PMR_EL1", (3, 0, 4, 6, 0), "Priority 7:0", check=icc_el1_access,
         on_write="_icc_pmr_write"),
    _icc("ICC_IAR0_EL1", (3, 0, 12, 8, 0), _INTID, read_only=True,
         check=icc_el1_read_only_access, on_read="_icc_iar_read"),
    _icc("ICC_EOIR0_EL1", (3, 0, 12, 8, 1), _INTID, check=icc_el1_write_only_access,
         on_write="_icc_eoir_write"),
    _icc("ICC_HPPIR0_EL1", (3, 0, 12, 8, 2), _INTID, read_only=True,
         check=icc_el1_read_only_access, on_read="_icc_hppir_read"),
    _icc("ICC_BPR0_EL1", (3, 0, 12, 8, 3), "BinaryPoint 2:0", reset=MIN_BPR0,
         check=icc_el1_access, on_read="_icc_bpr_read", on_write="_icc_bpr_write"),
    _icc("ICC_AP0R0_EL1", (3, 0, 12, 8, 4), "P 31:0", check=icc_el1_access),
    _icc("ICC_AP1R0_EL1", (3, 0, 12, 9, 0), "P 31:0", check=icc_el1_access),
    _icc("ICC_DIR_EL1", (3, 0, 12, 11, 1), _INTID, check=icc_el1_write_only_access,
         on_write="_icc_dir_write"),
    _icc("ICC_RPR_EL1", (3, 0, 12, 11, 3), "Priority 7:0", read_only=True,
         check=icc_el1_read_only_access, on_read="_icc_rpr_read"),
    _icc("ICC_SGI1R_EL1", (3, 0, 12, 11, 5), "Aff3 55:48", "RS 47:44", "IRM 40", "Aff2 39:32",
         "INTID 27:24", "Aff1 23:16", "TargetList 15:0", check=icc_el1_write_only_access,
         on_write="_icc_sgi1r_write"),
    _icc("ICC_IAR1_EL1", (3, 0, 12, 12, 0), _INTID, read_only=True,
         check=icc_el1_read_only_access, on_read="_icc_iar_read"),
    _icc("ICC_EOIR1_EL1", (3, 0, 12, 12, 1), _INTID, check=icc_el1_write_only_access,
         on_write="_icc_eoir_write"),
    _icc("ICC_HPPIR1_EL1", (3, 0, 12, 12, 2), _INTID, read_only=True,
         check=icc_el1_read_only_access, on_read="_icc_hppir_read"),
    _icc("ICC_BPR1_EL1", (3, 0, 12, 12, 3), "BinaryPoint 2:0", reset=MIN_BPR1,
         check=icc_el1_access, on_read="_icc_bpr_read", on_write="_icc_bpr_write"),
    _icc("ICC_CTLR_EL1", (3, 0, 12, 12, 4), *_CTLR_ID_FIELDS, "EOImode 1", "CBPR 0",
         resets={"PRIbits": PRI_BITS - 1}, check=icc_el1_access),
    _icc("ICC_SRE_EL1", (3, 0, 12, 12, 5), *_SRE_FIELDS, resets=dict(DIB=1, DFB=1, SRE=1), check=icc_el1_access),
    _icc("ICC_IGRPEN0_EL1", (3, 0, 12, 12, 6), "Enable 0", check=icc_el1_access),
    _icc("ICC_IGRPEN1_EL1", (3, 0, 12, 12, 7), "Enable 0", check=icc_el1_access),
    _icc("ICC_SRE_EL2", (3, 4, 12, 9, 5), "Enable 3", *_SRE_FIELDS,
         resets=dict(Enable=1, DIB=1, DFB=1, SRE=1),
         check=icc_el2_access),
    _icc("ICC_CTLR_EL3", (3, 6, 12, 12, 4), *_CTLR_ID_FIELDS, "nDS 17 RO", "RM 5 RO",
         "EOImode_EL1NS 4", "EOImode_EL1S 3", "EOImode_EL3 2", "CBPR_EL1NS 1", "CBPR_EL1S 0",
         resets={"PRIbits": PRI_BITS - 1}, check=icc_el3_access, on_read="_icc_ctlr_el3_read",
         on_write="_icc_ctlr_el3_write"),
    _icc("ICC_SRE_EL3", (3, 6, 12, 12, 5), "Enable 3", *_SRE_FIELDS,
         resets=dict(Enable=1, DIB=1, DFB=1, SRE=1),
         check=icc_el3_access),
    _icc("ICC_IGRPEN1_EL3", (3, 6, 12, 12, 7), "EnableGrp1S 1", "EnableGrp1NS 0",
         check=icc_el3_access, on_read="_icc_igrpen1_el3_read",
         on_write="_icc_igrpen1_el3_write"),
])
"""The CPU interface registers (system-register access only). Plain-storage registers use
:meth:`RegisterSpec.apply_write`; the others name their hook in ``on_read``/``on_write``."""

WRITE_ONLY = frozenset({"ICC_EOIR0_EL1", "ICC_EOIR1_EL1", "ICC_DIR_EL1", "ICC_SGI1R_EL1"})
"""ICC registers whose reads are UNDEFINED (their check says so too)."""

_CTLR_EL1 = ICC_REGISTERS["ICC_CTLR_EL1"]
_CTLR_EL3 = ICC_REGISTERS["ICC_CTLR_EL3"]
_IGRPEN1_EL1 = ICC_REGISTERS["ICC_IGRPEN1_EL1"]
_IGRPEN1_EL3 = ICC_REGISTERS["ICC_IGRPEN1_EL3"]
_GICD_CTLR = _MMIO_BY_NAME["GICD_CTLR"]
_GICR_WAKER = _MMIO_BY_NAME["GICR_WAKER"]
_GICD_IROUTER = _MMIO_BY_NAME["GICD_IROUTER<n>"]


def _group_of(spec: RegisterSpec) -> int:
    """Group 0 CPU interface registers are the CRm == 8 ones (IAR0, EOIR0, HPPIR0, BPR0)."""
    return GROUP0 if spec.encoding.crm == 8 else GROUP1


# ---------------------------------------------------------------------------------------------
# The device
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Irq:
    """State of one interrupt (IHI 0069 §4.1, interrupt lifecycle)."""

    group: int = GROUP0
    enabled: bool = False
    latch: bool = False     # pending latch: ISPENDR write or (edge) a rising input edge
    level: bool = False     # the input line from the device
    active: bool = False
    priority: int = 0
    config: int = 0         # Int_config field as written: 0b00 level, 0b10 edge

    @property
    def edge(self) -> bool:
        return bool(self.config & 0b10)

    @property
    def pending(self) -> bool:
        """Level-sensitive: pending while the input is high or the latch is set;
        edge-triggered: the latch."""
        return self.latch or (self.level and not self.edge)

    @pending.setter
    def pending(self, value: bool) -> None:
        self.latch = bool(value)


class GicV3:
    """GICv3 distributor + one redistributor + one CPU interface (see the module docstring).

    ``log`` receives one line per guest error (``"gic: guest error: ..."``) or unimplemented
    feature (``"gic: unimplemented: ..."``). ``on_change`` (attribute, default None) is called
    after any change that may alter :meth:`irq_line` or :meth:`fiq_line`.
    """

    def __init__(self, log: Callable[[str], None] | None = None):
        self._log = log
        self.on_change: Callable[[], None] | None = None
        self.reset()

    # ---- lifecycle -------------------------------------------------------------------------

    def reset(self) -> None:
        """Cold reset: every register to its reset value, every interrupt inactive, disabled,
        Group 0, priority 0, level-sensitive (SGIs edge), inputs low. Calls ``on_change``."""
        self._irqs = [_Irq(config=0b10 if intid < 16 else 0) for intid in range(NUM_INTIDS)]
        self._mmio = {r.name: [r.reset] * r.count
                      for r in _MMIO_BY_NAME.values() if r.kind == Kind.RW and r.irqs is None}
        self._icc = ICC_REGISTERS.reset_values()
        self._changed()

    # ---- MMIO ------------------------------------------------------------------------------

    def mmio_read(self, addr: int, size: int) -> int:
        """Read ``size`` (1, 2, 4 or 8) bytes at physical ``addr`` inside GICD or GICR.

        Returns the little-endian value. Unknown offsets and unsupported access sizes read as
        zero and log a guest error. Raises :class:`DeviceError` if ``addr`` is outside the GIC
        or ``size`` is not 1/2/4/8 (a host wiring bug).
        """
        decoded = self._decode(addr, size, "read")
        if decoded is None:
            return 0
        r, index, shift = decoded
        value = self._read_element(r, index)
        return (value >> shift) & ((1 << (8 * size)) - 1)

    def mmio_write(self, addr: int, size: int, value: int) -> None:
        """Write ``size`` bytes of ``value`` at physical ``addr`` inside GICD or GICR.

        Writes to read-only registers, unknown offsets or with an unsupported size are ignored
        and logged; RAZ/WI registers ignore writes silently. Raises :class:`DeviceError` as
        :meth:`mmio_read` does.
        """
        decoded = self._decode(addr, size, "write")
        if decoded is None:
            return
        r, index, shift = decoded
        value &= (1 << (8 * size)) - 1
        if 8 * size < 8 * r.width:   # narrow access: merge into the element
            mask = ((1 << (8 * size)) - 1) << shift
            value = (self._read_element(r, index) & ~mask) | (value << shift)
        self._write_element(r, index, value)
        self._changed()

    def _decode(self, addr: int, size: int, what: str) -> tuple[MmioReg, int, int] | None:
        if size not in (1, 2, 4, 8):
            raise DeviceError(f"gic: {what} of size {size} at {addr:#x}: size must be 1/2/4/8")
        frame = next((f for f in _FRAMES if f.base <= addr < f.base + f.size), None)
        if frame is None:
            raise DeviceError(f"gic: {what} at {addr:#x} is outside the GIC frames")
        off = addr - frame.base
        where = f"{frame.name}+{off:#06x} (size {size})"
        entry = frame.words.get(off & ~3)
        if entry is None:
            self._guest_error(f"{what} of unknown offset {where}")
            return None
        r, index, sub = entry
        byte_in_element = sub + (off & 3)
        ok = (off % size == 0) and (
            size == r.width
            or (size == 4 and r.width == 8)
            or (size == 1 and r.byte_access))
        if not ok:
            self._guest_error(f"{what} of {r.name} with unsupported size/alignment at {where}")
            return None
        return r, index, 8 * byte_in_element

    def _read_element(self, r: MmioReg, index: int) -> int:
        if r.kind == Kind.RAZ_WI:
            return 0
        if r.kind == Kind.RO:
            return r.reset
        if r.irqs is None:
            return self._mmio[r.name][index]
        a = r.irqs
        per_reg = 8 * r.width // a.bits
        first = a.first_intid + index * per_reg
        value = 0
        for i in range(per_reg):
            value |= (int(getattr(self._irqs[first + i], a.attr)) & a.implemented) << (i * a.bits)
        return value

    def _write_element(self, r: MmioReg, index: int, value: int) -> None:
        if r.kind == Kind.RAZ_WI:
            return
        if r.kind == Kind.RO:
            self._guest_error(f"write of {value:#x} to read-only {r.name} ignored")
            return
        if r.irqs is None:
            old = self._mmio[r.name][index]
            self._mmio[r.name][index] = (old & ~r.write_mask) | (value & r.write_mask)
            if r.on_write:
                getattr(self, r.on_write)(r, index)
            return
        a = r.irqs
        per_reg = 8 * r.width // a.bits
        first = a.first_intid + index * per_reg
        for i in range(per_reg):
            field_value = (value >> (i * a.bits)) & ((1 << a.bits) - 1)
            irq = self._irqs[first + i]
            if r.kind == Kind.W1S:
                if field_value & 1:
                    setattr(irq, a.attr, True)
            elif r.kind == Kind.W1C:
                if field_value & 1:
                    setattr(irq, a.attr, False)
            else:
                setattr(irq, a.attr, field_value & a.implemented)

    def _waker_written(self, r: MmioReg, index: int) -> None:
        """GICR_WAKER: ChildrenAsleep follows ProcessorSleep immediately (no quiescence)."""
        value = self._mmio[r.name][index]
        self._mmio[r.name][index] = r.set(value, "ChildrenAsleep", r.get(value, "ProcessorSleep"))

    # ---- device inputs ---------------------------------------------------------------------

    def set_level(self, intid: int, level: bool) -> None:
        """Drive the input line of PPI/SPI ``intid`` (16..95) to ``level``.

        A rising edge of an edge-triggered interrupt sets its pending latch; a level-sensitive
        interrupt is pending while the level is high. Raises :class:`DeviceError` for SGIs
        (no input line) and INTIDs this GIC does not have.
        """
        if not 16 <= intid < NUM_INTIDS:
            raise DeviceError(f"gic: set_level: INTID {intid} has no input line "
                              f"(PPIs/SPIs are 16..{NUM_INTIDS - 1})")
        irq = self._irqs[intid]
        level = bool(level)
        if irq.level == level:
            return
        irq.level = level
        if level and irq.edge:
            irq.latch = True
        self._changed()

    # ---- prioritisation (IHI 0069 §4.8) ----------------------------------------------------

    def _distributor_group_enabled(self, group: int) -> bool:
        ctlr = self._mmio["GICD_CTLR"][0]
        return bool(_GICD_CTLR.get(ctlr, "EnableGrp1NS" if group == GROUP1 else "EnableGrp0"))

    def _redistributor_awake(self) -> bool:
        return not _GICR_WAKER.get(self._mmio["GICR_WAKER"][0], "ProcessorSleep")

    def _routed_here(self, intid: int) -> bool:
        """An SPI reaches this PE if GICD_IROUTER says 1-of-N or names affinity 0.0.0.0."""
        value = self._mmio[_GICD_IROUTER.name][intid - 32]
        return bool(_GICD_IROUTER.get(value, "Interrupt_Routing_Mode")) or value == 0

    def _hppi(self) -> tuple[int, int, int] | None:
        """Highest-priority pending interrupt the redistributor forwards: ``(priority, intid,
        group)`` of the pending, enabled, not active interrupt whose group is enabled in
        GICD_CTLR, lowest INTID first among equal priorities; None if there is none or the
        redistributor is asleep."""
        if not self._redistributor_awake():
            return None
        best: tuple[int, int, int] | None = None
        for intid, irq in enumerate(self._irqs):
            if not (irq.enabled and not irq.active and irq.pending):  # (most are disabled)
                continue
            if not self._distributor_group_enabled(irq.group):
                continue
            if intid >= 32 and not self._routed_here(intid):
                continue
            if best is None or irq.priority < best[0]:
                best = (irq.priority, intid, irq.group)
        return best

    def _group_enabled_at_cpu(self, group: int) -> bool:
        name = "ICC_IGRPEN1_EL1" if group == GROUP1 else "ICC_IGRPEN0_EL1"
        return bool(ICC_REGISTERS[name].get(self._icc[name], "Enable"))

    def _group_priority_mask(self, group: int) -> int:
        """``GroupBits()``: mask keeping the group-priority bits of a priority value. Group 1
        uses BPR1 (field [7:BPR1]) unless ICC_CTLR_EL1.CBPR, then BPR0 (field [7:BPR0+1])."""
        cbpr = _CTLR_EL1.get(self._icc["ICC_CTLR_EL1"], "CBPR")
        if group == GROUP1 and not cbpr:
            shift = self._icc["ICC_BPR1_EL1"]
        else:
            shift = self._icc["ICC_BPR0_EL1"] + 1
        return (0xFF << shift) & 0xFF

    def _running_priority(self) -> int:
        """Priority of the highest active priority bit in the AP registers, or 0xFF idle."""
        aprs = self._icc["ICC_AP0R0_EL1"] | self._icc["ICC_AP1R0_EL1"]
        if not aprs:
            return IDLE_PRIORITY
        lowest_bit = (aprs & -aprs).bit_length() - 1
        return lowest_bit << (8 - PRI_BITS)

    def _can_signal(self, hppi: tuple[int, int, int] | None) -> bool:
        """The CPU interface signals ``hppi`` if its group is enabled (ICC_IGRPENn_EL1), its
        priority is below ICC_PMR_EL1 and its group priority beats the running priority."""
        if hppi is None:
            return False
        prio, _, group = hppi
        if not self._group_enabled_at_cpu(group) or prio >= self._icc["ICC_PMR_EL1"]:
            return False
        running = self._running_priority()
        if running == IDLE_PRIORITY:
            return True
        mask = self._group_priority_mask(group)
        return (prio & mask) < (running & mask)

    def irq_line(self) -> bool:
        """The IRQ signal to the PE: a Group 1 interrupt can be signalled (see
        :meth:`_can_signal`). Pure function of the state."""
        hppi = self._hppi()
        return hppi is not None and hppi[2] == GROUP1 and self._can_signal(hppi)

    def fiq_line(self) -> bool:
        """The FIQ signal (Group 0 interrupts, DS == 1). Not wired on this board."""
        hppi = self._hppi()
        return hppi is not None and hppi[2] == GROUP0 and self._can_signal(hppi)

    # ---- system registers ------------------------------------------------------------------

    def sysreg_read(self, name: str) -> int:
        """Value of ICC register ``name`` (an :data:`ICC_REGISTERS` name), with side effects
        (reading ICC_IAR{0,1}_EL1 acknowledges). The caller has already run the register's
        access check. Raises :class:`DeviceError` for unknown names and write-only registers.
        """
        spec = self._spec(name)
        if name in WRITE_ONLY:
            raise DeviceError(f"gic: {name} is write-only (its access check UNDEFs reads)")
        if spec.on_read:
            return getattr(self, spec.on_read)(spec)
        return self._icc[name]

    def sysreg_write(self, name: str, value: int) -> None:
        """Write ICC register ``name``, with side effects (EOIR drops priority and deactivates,
        ...). Raises :class:`DeviceError` for unknown names and read-only registers."""
        spec = self._spec(name)
        if spec.read_only:
            raise DeviceError(f"gic: {name} is read-only (its access check UNDEFs writes)")
        if spec.on_write:
            getattr(self, spec.on_write)(spec, value)
        else:
            self._icc[name] = spec.apply_write(self._icc[name], value)
        self._changed()

    @staticmethod
    def _spec(name: str) -> RegisterSpec:
        if name not in ICC_REGISTERS:
            raise DeviceError(f"gic: {name} is not a GIC CPU interface register")
        return ICC_REGISTERS[name]

    def _icc_pmr_write(self, spec: RegisterSpec, value: int) -> None:
        self._icc[spec.name] = spec.apply_write(0, value) & PRIORITY_MASK

    def _icc_bpr_read(self, spec: RegisterSpec) -> int:
        """BPR1 with ICC_CTLR_EL1.CBPR == 1 reads BPR0 + 1 (saturating at 7)."""
        if _group_of(spec) == GROUP1 and _CTLR_EL1.get(self._icc["ICC_CTLR_EL1"], "CBPR"):
            return min(self._icc["ICC_BPR0_EL1"] + 1, 7)
        return self._icc[spec.name]

    def _icc_bpr_write(self, spec: RegisterSpec, value: int) -> None:
        """Values below the minimum are raised to it; BPR1 writes are ignored when CBPR."""
        group = _group_of(spec)
        if group == GROUP1 and _CTLR_EL1.get(self._icc["ICC_CTLR_EL1"], "CBPR"):
            return
        value = spec.apply_write(0, value)
        self._icc[spec.name] = max(value, MIN_BPR1 if group == GROUP1 else MIN_BPR0)

    def _icc_hppir_read(self, spec: RegisterSpec) -> int:
        """HPPIR: INTID of the highest-priority pending interrupt if it belongs to this
        register's group and that group is enabled at the CPU interface, else 1023 (PMR and
        running priority are not considered)."""
        hppi = self._hppi()
        if hppi is None or hppi[2] != _group_of(spec) or not self._group_enabled_at_cpu(hppi[2]):
            return INTID_SPURIOUS
        return hppi[1]

    def _icc_iar_read(self, spec: RegisterSpec) -> int:
        """IAR: acknowledge the highest-priority pending interrupt of this register's group if
        it can be signalled: it becomes active, its pending latch clears (a level interrupt
        stays pending while its input is high) and its group priority is recorded in the AP
        register (raising the running priority). Otherwise 1023, with no side effect."""
        hppi = self._hppi()
        group = _group_of(spec)
        if hppi is None or hppi[2] != group or not self._can_signal(hppi):
            return INTID_SPURIOUS
        prio, intid, _ = hppi
        irq = self._irqs[intid]
        irq.active = True
        irq.latch = False
        ap = "ICC_AP1R0_EL1" if group == GROUP1 else "ICC_AP0R0_EL1"
        bit = (prio & self._group_priority_mask(group)) >> (8 - PRI_BITS)
        self._icc[ap] |= 1 << bit
        self._changed()
        return intid

    def _icc_eoir_write(self, spec: RegisterSpec, value: int) -> None:
        """EOIR: priority drop (clear the highest active priority bit of this group), then
        deactivate the INTID unless ICC_CTLR_EL1.EOImode == 1. Special INTIDs are ignored;
        mismatches are logged guest errors (UNPREDICTABLE in the architecture)."""
        intid = spec.get(value, "INTID")
        group = _group_of(spec)
        if intid >= NUM_INTIDS:
            if not 1020 <= intid <= 1023:
                self._guest_error(f"{spec.name} write of INTID {intid}, which does not exist")
            return
        ap0, ap1 = self._icc["ICC_AP0R0_EL1"], self._icc["ICC_AP1R0_EL1"]
        if not ap0 | ap1:
            self._guest_error(f"{spec.name} write of INTID {intid} with no active priority")
            return
        lowest0 = (ap0 & -ap0).bit_length() if ap0 else 33
        lowest1 = (ap1 & -ap1).bit_length() if ap1 else 33
        active_group = GROUP0 if lowest0 <= lowest1 else GROUP1
        if active_group != group:
            self._guest_error(f"{spec.name} write of INTID {intid} while the highest active "
                              f"priority belongs to Group {active_group}: ignored")
            return
        ap = "ICC_AP1R0_EL1" if group == GROUP1 else "ICC_AP0R0_EL1"
        self._icc[ap] &= self._icc[ap] - 1
        if not _CTLR_EL1.get(self._icc["ICC_CTLR_EL1"], "EOImode"):
            self._deactivate(spec.name, intid)

    def _icc_dir_write(self, spec: RegisterSpec, value: int) -> None:
        """DIR: deactivate the INTID (only meaningful with EOImode == 1)."""
        intid = spec.get(value, "INTID")
        if intid >= NUM_INTIDS:
            if not 1020 <= intid <= 1023:
                self._guest_error(f"ICC_DIR_EL1 write of INTID {intid}, which does not exist")
            return
        if not _CTLR_EL1.get(self._icc["ICC_CTLR_EL1"], "EOImode"):
            self._guest_error("ICC_DIR_EL1 written while ICC_CTLR_EL1.EOImode == 0: ignored")
            return
        self._deactivate("ICC_DIR_EL1", intid)

    def _deactivate(self, via: str, intid: int) -> None:
        irq = self._irqs[intid]
        if not irq.active:
            self._guest_error(f"{via} deactivates INTID {intid}, which is not active")
        irq.active = False

    def _icc_rpr_read(self, spec: RegisterSpec) -> int:
        return self._running_priority()

    def _icc_sgi1r_write(self, spec: RegisterSpec, value: int) -> None:
        self._unimplemented(f"ICC_SGI1R_EL1 write {value:#x} ignored: SGI generation is not "
                            f"modelled")

    def _icc_ctlr_el3_read(self, spec: RegisterSpec) -> int:
        """ICC_CTLR_EL3: EOImode_EL1NS and CBPR_EL1NS alias ICC_CTLR_EL1.{EOImode,CBPR}."""
        el1 = self._icc["ICC_CTLR_EL1"]
        value = spec.set(self._icc[spec.name], "EOImode_EL1NS", _CTLR_EL1.get(el1, "EOImode"))
        return spec.set(value, "CBPR_EL1NS", _CTLR_EL1.get(el1, "CBPR"))

    def _icc_ctlr_el3_write(self, spec: RegisterSpec, value: int) -> None:
        value = spec.apply_write(self._icc[spec.name], value)
        el1 = _CTLR_EL1.set(self._icc["ICC_CTLR_EL1"], "EOImode", spec.get(value, "EOImode_EL1NS"))
        self._icc["ICC_CTLR_EL1"] = _CTLR_EL1.set(el1, "CBPR", spec.get(value, "CBPR_EL1NS"))
        self._icc[spec.name] = value

    def _icc_igrpen1_el3_read(self, spec: RegisterSpec) -> int:
        """ICC_IGRPEN1_EL3.EnableGrp1NS aliases ICC_IGRPEN1_EL1.Enable."""
        enable = _IGRPEN1_EL1.get(self._icc["ICC_IGRPEN1_EL1"], "Enable")
        return spec.set(self._icc[spec.name], "EnableGrp1NS", enable)

    def _icc_igrpen1_el3_write(self, spec: RegisterSpec, value: int) -> None:
        value = spec.apply_write(self._icc[spec.name], value)
        self._icc["ICC_IGRPEN1_EL1"] = _IGRPEN1_EL1.make(Enable=spec.get(value, "EnableGrp1NS"))
        self._icc[spec.name] = value

    # ---- reporting -------------------------------------------------------------------------

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def _guest_error(self, message: str) -> None:
        if self._log is not None:
            self._log(f"gic: guest error: {message}")

    def _unimplemented(self, message: str) -> None:
        if self._log is not None:
            self._log(f"gic: unimplemented: {message}")
