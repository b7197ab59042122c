"""Files generated from the project's descriptions: the firmware's ``firmware/board.h`` and
``firmware/sysreg.h`` and the memory-map tables of docs/design.md.

    python -m spe_emu.tools.generate --check    # exit 1 naming every stale file
    python -m spe_emu.tools.generate --write    # rewrite the stale files

board.h and the tables come from :data:`spe_emu.platform.board.VIRT` (addresses, INTIDs) and
:data:`FIRMWARE_REGIONS` (how the firmware divides RAM), so an address changes in one place.
sysreg.h comes from the system-register tables (:func:`sysreg_header` names them), so an
encoding or a field is declared once, in Python. ``tests/test_generated.py`` fails while a
generated file is stale. The macro names are the ones the firmware sources use; a changed value
changes the firmware image, a changed comment does not (``python scripts/build_images.py
--check``).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..devices.gicv3 import ICC_REGISTERS
from ..arch import firmware_regs as fw
from ..arch.context import CPACR_EL1, HCR_EL2, MDCR_EL2, MDCR_EL3, SCR_EL3, SCTLR_ELX
from ..cpu.exceptions import EC, ESR, ISS_SVC, PSTATE
from ..arch.id_regs import ID_AA64DFR0_EL1, ID_AA64PFR0_EL1
from ..arch.mmu import DESC, GRANULE_4K, TCR_EL1, TG0_GRANULE
from ..devices.generic_timer import CNTHCTL_EL2_NVHE, TIMER_REGISTERS
from ..errors import ConfigError
from ..spe import config as spe_config
from ..spe import registers as spe_regs
from ..spe.config import SpeConfig
from ..sysreg import Field, RegisterSpec
from ..platform.board import (GIC_PPI_BASE, GIC_SPI_BASE, GICR_FRAME_BYTES, VIRT, BoardSpec,
                              DeviceSpec)
from ..platform.dtb import GICR_BYTES_PER_PE

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]
"""The source checkout this module sits in (the generated files live there, not in an
installed package)."""
HEADER = Path("firmware/board.h")
SYSREG_HEADER = Path("firmware/sysreg.h")
DESIGN = Path("docs/design.md")
BEGIN_MARK = ("<!-- BEGIN GENERATED board memory map: edit spe_emu/platform/board.py, then "
              "run python -m spe_emu.tools.generate --write -->")
END_MARK = "<!-- END GENERATED board memory map -->"


@dataclass(frozen=True)
class FirmwareRegion:
    """A part of RAM the firmware (spe_fw) gives one use (docs/design.md "Firmware (EL1)
    contract"): ``offset`` and ``size`` from the RAM base, in bytes."""

    macro: str
    offset: int
    size: int
    comment: str
    size_comment: str = ""


FIRMWARE_REGIONS = (
    FirmwareRegion("FW_REGION", 0, 128 * MiB, "firmware-private region: EL1 only"),
    FirmwareRegion("SPE_BUF_REGION", 64 * MiB, 64 * MiB,
                   "where the SPE buffer may live (inside the firmware region)", "at most 64 MiB"),
    FirmwareRegion("GUEST_REGION", 128 * MiB, 128 * MiB, "guest region: EL0 RWX, PXN"),
)
"""The firmware's use of RAM. The firmware needs at least their extent of RAM."""

FW_GRANULE = GRANULE_4K
"""The firmware's translation granule (TCR_EL1.TG0)."""
FW_PAGE_SIZE = 1 << FW_GRANULE.page_shift

PPI_WHAT = {
    "cntps": "secure physical timer (CNTPS)",
    "cntp": "EL1 physical timer (CNTP)",
    "cntv": "virtual timer (CNTV)",
    "cnthp": "EL2 physical timer (CNTHP)",
    "cnthv": "EL2 virtual timer (CNTHV)",
    "pmbirq": "SPE Profiling Buffer (PMBIRQ), asserted exactly while PMBSR_EL1.S == 1",
    "pmu": "PMU overflow",
}
"""Description of each ``board.ppis`` name (docs table)."""


# -- the firmware header ---------------------------------------------------------------------
def _define(name: str, value: str, comment: str = "") -> str:
    head = f"#define {name}"
    tabs = max(1, 4 - len(head) // 8)  # values start at column 32 (tab width 8)
    return head + "\t" * tabs + value + (f"\t/* {comment} */" if comment else "")


def _ul(value: int, digits: int = 8) -> str:
    return f"UL(0x{value:0{digits}X})"


def _intc(board: BoardSpec) -> DeviceSpec:
    gics = [d for d in board.devices if d.kind == "gicv3"]
    if len(gics) != 1:
        raise ConfigError(f"board {board.name} has {len(gics)} GICv3s; the firmware needs one")
    return gics[0]


def _irq_name(intid: int) -> str:
    if GIC_PPI_BASE <= intid < GIC_SPI_BASE:
        return f"PPI {intid - GIC_PPI_BASE}"
    return f"SPI {intid - GIC_SPI_BASE}"


def _check_layout(board: BoardSpec) -> None:
    for d in board.devices:
        for base, size in d.all_regions:
            if base + size > board.ram_base:
                raise ConfigError(f"{d.name} [{base:#x}, {base + size:#x}) is not below RAM: "
                                  f"the firmware maps everything below RAM as devices")
    top = max(r.offset + r.size for r in FIRMWARE_REGIONS)
    if top > board.ram_size:
        raise ConfigError(f"the firmware's regions need {top:#x} bytes of RAM, board "
                          f"{board.name} has {board.ram_size:#x}")


def firmware_header(board: BoardSpec = VIRT) -> str:
    """The text of ``firmware/board.h``: the board's addresses and INTIDs and the firmware's
    regions as C/assembly macros (``UL()`` from bits.h)."""
    _check_layout(board)
    gic = _intc(board)
    gicd, gicr = gic.all_regions[0], gic.all_regions[1]
    lines = [
        "/* SPDX-License-Identifier: MIT */",
        "/*",
        " * Board memory map (docs/design.md \"Board memory map\", QEMU virt compatible)",
        " * and the firmware's use of it. Shared by C and assembly.",
        " *",
        f" * Generated from spe_emu.platform.board.{board.name.upper()} by",
        " * `python -m spe_emu.tools.generate --write`: do not edit (a test fails",
        " * when this file is stale).",
        " */",
        "#ifndef SPE_FW_BOARD_H",
        "#define SPE_FW_BOARD_H",
        "",
        "#include \"bits.h\"",
        "",
        f"/* devices: everything below RAM ({_size(board.ram_base)}), mapped Device-nGnRnE, "
        "EL1 only, XN */",
        _define("DEVICE_BASE", _ul(0)),
        _define("DEVICE_SIZE", _ul(board.ram_base)),
        "",
        f"/* GICv3 ({gic.name}) */",
        _define("GICD_BASE", _ul(gicd[0])),
        _define("GICR_BASE", _ul(gicr[0]), "RD_base of CPU 0"),
        _define("GICR_SGI_OFFSET", _ul(GICR_FRAME_BYTES, 0),
                f"SGI_base = RD_base + {_size(GICR_FRAME_BYTES)}"),
    ]
    for d in board.devices:
        if d.kind == "pl011":
            stem = d.name.upper()
            lines += ["", f"/* PL011 UART ({d.name}) */", _define(f"{stem}_BASE", _ul(d.base)),
                      _define(f"{stem}_INTID", str(d.irq("intr")), _irq_name(d.irq("intr")))]
    lines += [
        "",
        "/* RAM */",
        _define("RAM_BASE", _ul(board.ram_base)),
        _define("RAM_SIZE", _ul(board.ram_size), _size(board.ram_size)),
    ]
    for r in FIRMWARE_REGIONS:
        lines += ["", f"/* {r.comment} */",
                  _define(f"{r.macro}_BASE", _ul(board.ram_base + r.offset)),
                  _define(f"{r.macro}_SIZE", _ul(r.size), r.size_comment)]
    lines += [_define("GUEST_STACK_TOP", "(GUEST_REGION_BASE + GUEST_REGION_SIZE)"), "",
              "/* private peripheral interrupts of the PE (INTIDs), level-sensitive */"]
    for name, intid in sorted(board.ppis, key=lambda p: p[1]):
        lines.append(_define(f"{name.upper()}_INTID", str(intid), _irq_name(intid)))
    lines += ["", _define("PAGE_SIZE", _ul(FW_PAGE_SIZE, 0)), "",
              "#endif /* SPE_FW_BOARD_H */", ""]
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit, name in ((1 << 30, "GiB"), (MiB, "MiB"), (1 << 10, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} bytes"


# -- the firmware's system-register header -----------------------------------------------------
FIRMWARE_SPE = SpeConfig(ernd=1)
"""The SPE implementation ``firmware/sysreg.h`` is generated for: one where every field the
firmware names exists (PMSIDR_EL1.ERnd = 1 gives PMSICR_EL1.ECOUNT). The firmware reads the ID
registers at run time, so the header does not depend on the modelled configuration."""
FW_MEMORY_TYPES = (("MT_DEVICE_nGnRnE", fw.ATTR_DEVICE_nGnRnE),
                   ("MT_NORMAL", fw.ATTR_NORMAL_WB_RWA))
"""The firmware's MAIR_EL1: the AttrIndx macro of each attribute, AttrIndx = position."""


WIDTH = 80
"""Longest line (tabs of 8) the header generator writes, where it can."""


def _width(line: str) -> int:
    return len(line.expandtabs(8))


class _Header:
    """The lines of a C/assembly header; each macro is defined once."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: set[str] = set()

    def define(self, name: str, value: str, comment: str = "") -> None:
        """``#define name value /* comment */``; a comment that would make the line longer
        than :data:`WIDTH` goes on the line before, an OR of terms is continued."""
        if name in self.names:
            raise ConfigError(f"{SYSREG_HEADER}: macro {name} defined twice")
        self.names.add(name)
        if comment and _width(_define(name, value, comment)) > WIDTH:
            self.lines.append(f"/* {comment} */")
            comment = ""
        line = _define(name, value, comment)
        inner = value[1:-1] if value.startswith("(") and value.endswith(")") else value
        terms = inner.split(" | ")
        if _width(line) > WIDTH and len(terms) > 1:
            line = _define(name, "(" + terms[0])
            for term in terms[1:]:
                if _width(f"{line} | {term}") > WIDTH - 3:
                    self.lines.append(line + " | \\")
                    line = "\t\t\t\t " + term
                else:
                    line += " | " + term
            line += ")"
        self.lines.append(line)

    def section(self, title: str, *sources: str) -> None:
        """A section heading and the modules of spe_emu its macros come from."""
        self.lines += ["", f"/* ---- {title} " + "-" * max(3, 66 - len(title)) + " */",
                       f"/* from spe_emu: {', '.join(sources)} */"]

    def comment(self, text: str) -> None:
        if not self.lines[-1].startswith("/* from "):
            self.lines.append("")
        self.lines.append(f"/* {text} */")


def _mask(mask: int) -> str:
    """``mask`` as BIT()/GENMASK() terms, runs of ones from bit 0 up."""
    parts, bit = [], 0
    while mask >> bit:
        if not (mask >> bit) & 1:
            bit += 1
            continue
        lsb = bit
        while (mask >> bit) & 1:
            bit += 1
        parts.append(f"BIT({lsb})" if bit - 1 == lsb else f"GENMASK({bit - 1}, {lsb})")
    if not parts:
        return "UL(0)"
    return parts[0] if len(parts) == 1 else f"({' | '.join(parts)})"


def _field(fields: tuple[Field, ...], name: str, where: str) -> Field:
    for f in fields:
        if f.name == name:
            return f
    raise ConfigError(f"{where} has no field {name}, which firmware/sysreg.h names")


def _fields(h: _Header, prefix: str, where: str, fields: tuple[Field, ...],
            names: tuple[str, ...] | None = None, *, shifts: tuple[str, ...] = (),
            widths: tuple[str, ...] = ()) -> None:
    """``<prefix>_<FIELD>`` masks of the fields ``names`` (default: all), in bit order, and
    ``_SHIFT`` / ``_WIDTH`` of the fields in ``shifts`` / ``widths`` (assembly's FIELD_VAL()
    and ubfx). FIELD is the field's architectural name, upper-cased."""
    chosen = [_field(fields, n, where) for n in names] if names is not None else list(fields)
    for n in (*shifts, *widths):
        _field(fields, n, where)
    for f in sorted(chosen, key=lambda f: f.lsb):
        macro = f"{prefix}_{f.name.upper()}"
        h.define(macro, _mask(f.mask))
        if f.name in shifts or f.name in widths:
            h.define(f"{macro}_SHIFT", str(f.lsb))
        if f.name in widths:
            h.define(f"{macro}_WIDTH", str(f.msb - f.lsb + 1))


def _register(h: _Header, spec: RegisterSpec, names: tuple[str, ...] | None = None, *,
              prefix: str | None = None, **kw: tuple[str, ...]) -> None:
    """A comment naming ``spec`` and its field macros (see :func:`_fields`)."""
    h.comment(spec.name)
    _fields(h, prefix or spec.name, spec.name, spec.fields, names, **kw)


def _encoding(h: _Header, value: int, field: Field, name: str, comment: str = "", *,
              plain: bool = False) -> None:
    """An encoding of ``field`` (right-aligned): ``UL(0x..)`` for C, a plain number where
    assembly pastes it into FIELD_VAL()."""
    field.set(0, value)  # (raises if it does not fit)
    h.define(name, str(value) if plain else f"UL(0x{value:X})", comment)


def _field_value(h: _Header, prefix: str, field: Field, value: int, name: str,
                 comment: str = "") -> None:
    """``name`` = ``value`` placed in ``field``, as FIELD_VAL(<prefix>_<FIELD>, value); defines
    the field's ``_SHIFT`` if it is not yet defined."""
    field.set(0, value)
    macro = f"{prefix}_{field.name.upper()}"
    if f"{macro}_SHIFT" not in h.names:
        h.define(f"{macro}_SHIFT", str(field.lsb))
    h.define(name, f"FIELD_VAL({macro}, {value})", comment)


def _same_layout(a: RegisterSpec, b: RegisterSpec, names: tuple[str, ...]) -> None:
    for n in names:
        if _field(a.fields, n, a.name).mask != _field(b.fields, n, b.name).mask:
            raise ConfigError(f"{a.name}.{n} and {b.name}.{n} differ: firmware/sysreg.h gives "
                              f"one ICC_SRE_ELx layout")


def sysreg_header(spe: SpeConfig = FIRMWARE_SPE) -> str:
    """The text of ``firmware/sysreg.h``: encodings (``SYS_<REG>``) and fields
    (``<REG>_<FIELD>`` masks, ``_SHIFT``, encodings) of the system registers the firmware
    uses, from the register tables -- SPE (:func:`spe_emu.spe.registers.spe_registers` for
    ``spe``), GICv3 CPU interface (:data:`spe_emu.devices.gicv3.ICC_REGISTERS`), generic timer
    (:mod:`spe_emu.devices.generic_timer`), control registers (:mod:`spe_emu.arch.context`,
    :mod:`~spe_emu.cpu.exceptions`, :mod:`~spe_emu.arch.mmu`, :mod:`~spe_emu.cpu.machine`)
    and the declarations for the firmware alone (:mod:`spe_emu.arch.firmware_regs`).

    Raises:
        ConfigError: a field the header names is missing from its table (e.g. PMSICR_EL1.ECOUNT
            when ``spe.ernd == 0``).
    """
    h = _Header()
    h.lines += [
        "/* SPDX-License-Identifier: MIT */",
        "/*",
        " * AArch64 system registers used by the firmware: encodings and fields.",
        " *",
        " * Generated from spe_emu's register tables by",
        " * `python -m spe_emu.tools.generate --write`: do not edit (a test fails",
        " * when this file is stale). Each section names the tables it comes from.",
        " *",
        " * Registers that old assemblers may not know are accessed through their",
        " * generic S<op0>_<op1>_C<n>_C<m>_<op2> names (SYS_*). A field is a mask",
        " * <REG>_<FIELD> (C: FIELD_PREP/FIELD_GET), FIELD being its architectural",
        " * name upper-cased; where assembly needs them, also <REG>_<FIELD>_SHIFT",
        " * for FIELD_VAL() and _WIDTH for ubfx.",
        " */",
        "#ifndef SPE_FW_SYSREG_H",
        "#define SPE_FW_SYSREG_H",
        "",
        "#include \"bits.h\"",
        "#include \"sysreg_access.h\"",
    ]

    # -- SPE
    table = spe_regs.spe_registers(spe)
    h.section("SPE (DDI0586A Table 7)", "spe.registers", "arch.firmware_regs (FEAT_SPEv1p2)")
    spe_el1 = [s for s in table if s.name.endswith("_EL1")] + [fw.PMSNEVFR_EL1]
    for s in sorted(spe_el1, key=lambda s: s.encoding.tuple):
        h.define(f"SYS_{s.name}", str(s.encoding),
                 "FEAT_SPEv1p2, only if PMSIDR_EL1.FnE" if s is fw.PMSNEVFR_EL1 else "")
    _register(h, table["PMSCR_EL1"])
    _register(h, table["PMSIRR_EL1"])
    _register(h, table["PMSICR_EL1"], ("COUNT", "ECOUNT"))
    _register(h, table["PMSFCR_EL1"])
    _register(h, table["PMSLATFR_EL1"])
    pmsidr = fw.extended(table["PMSIDR_EL1"])
    _register(h, pmsidr)
    _encoding(h, spe_config.COUNT_SIZE_12BIT_SAT, pmsidr.field("CountSize"),
              "PMSIDR_EL1_COUNTSIZE_12_BIT_SAT")
    sizes = spe_config.MAX_SIZE_CODES
    _encoding(h, sizes[0], pmsidr.field("MaxSize"), "PMSIDR_EL1_MAXSIZE_MIN",
              _size(1 << sizes[0]))
    _encoding(h, sizes[-1], pmsidr.field("MaxSize"), "PMSIDR_EL1_MAXSIZE_MAX",
              _size(1 << sizes[-1]))
    pmblimitr = table["PMBLIMITR_EL1"]
    _register(h, pmblimitr)
    _encoding(h, spe_regs.FM_FILL, pmblimitr.field("FM"), "PMBLIMITR_EL1_FM_FILL")
    pmbsr = table["PMBSR_EL1"]
    _register(h, pmbsr)
    for value, name, what in (
            (spe_regs.EC_OTHER, "BUF", "other buffer management event"),
            (spe_regs.EC_STAGE1_ABORT, "FAULT_S1", "stage 1 data abort on buffer write"),
            (spe_regs.EC_STAGE2_ABORT, "FAULT_S2", "stage 2 data abort on buffer write")):
        _encoding(h, value, pmbsr.field("EC"), f"PMBSR_EL1_EC_{name}", what)
    h.comment("MSS when EC == PMBSR_EL1_EC_BUF")
    _fields(h, "PMBSR_EL1_BUF", "PMBSR_EL1.MSS", spe_regs.PMBSR_MSS_OTHER)
    _encoding(h, spe_regs.BSC_FILLED, _field(spe_regs.PMBSR_MSS_OTHER, "BSC", "PMBSR_EL1.MSS"),
              "PMBSR_EL1_BUF_BSC_FULL")
    h.comment("MSS when EC is a data abort")
    _fields(h, "PMBSR_EL1_FAULT", "PMBSR_EL1.MSS", spe_regs.PMBSR_MSS_ABORT)
    pmbidr = table["PMBIDR_EL1"]
    _register(h, pmbidr)
    align = spe_config.ALIGN_CODES[-1]
    _encoding(h, align, pmbidr.field("Align"), "PMBIDR_EL1_ALIGN_MAX", _size(1 << align))

    # -- ID registers
    h.section("ID registers", "arch.id_regs", "arch.firmware_regs (ID_AA64PFR0_EL1.EL2)")
    _register(h, ID_AA64DFR0_EL1)
    _encoding(h, spe_config.PMSVER_NI, ID_AA64DFR0_EL1.field("PMSVer"),
              "ID_AA64DFR0_EL1_PMSVER_NI")
    _register(h, fw.extended(ID_AA64PFR0_EL1), widths=("EL2", "GIC"))

    # -- PSTATE and exceptions
    h.section("PSTATE / exception state", "cpu.exceptions", "arch.firmware_regs")
    _register(h, fw.CURRENTEL, prefix="CURRENTEL")
    for el in (1, 2, 3):
        _field_value(h, "CURRENTEL", fw.CURRENTEL.field("EL"), el, f"CURRENTEL_EL{el}")
    h.comment("SPSR_ELx (PSTATE)")
    h.define("SPSR_M_EL0T", f"UL(0x{PSTATE.make(EL=0, SP=0):X})", "M[3:0]: EL0t")
    h.define("SPSR_M_EL1H", f"UL(0x{PSTATE.make(EL=1, SP=1):X})", "M[3:0]: EL1h")
    daif = ("F", "I", "A", "D")
    _fields(h, "SPSR", PSTATE.name, PSTATE.fields, daif)
    h.define("SPSR_DAIF", "(" + " | ".join(f"SPSR_{n}" for n in reversed(daif)) + ")")
    h.define("DAIFSET_ALL", f"0x{fw.DAIFSET.make(D=1, A=1, I=1, F=1):x}",
             "msr daifset immediate: D, A, I, F")
    _register(h, ESR, prefix="ESR_ELx")
    _encoding(h, EC.UNKNOWN, ESR.field("EC"), "ESR_ELx_EC_UNKNOWN")
    _encoding(h, EC.SVC64, ESR.field("EC"), "ESR_ELx_EC_SVC64")
    _fields(h, "ESR_ELx_SVC", ISS_SVC.name, ISS_SVC.fields)

    # -- EL3
    h.section("EL3", "arch.context", "arch.firmware_regs")
    scr = fw.extended(SCR_EL3)
    _register(h, scr)
    h.define("SCR_EL3_RES1", _mask(scr.res1))
    _register(h, MDCR_EL3)
    _field_value(h, "MDCR_EL3", MDCR_EL3.field("NSPB"), fw.NSPB_NS_EL1, "MDCR_EL3_NSPB_NS_EL1",
                 "Profiling Buffer owned by Non-secure EL1 (or EL2, see MDCR_EL2.E2PB)")
    _register(h, fw.CPTR_EL3)

    # -- EL2
    h.section("EL2", "arch.context", "devices.generic_timer", "arch.firmware_regs")
    _register(h, HCR_EL2)
    _register(h, MDCR_EL2)
    h.define("MDCR_EL2_HPMN_MASK", "MDCR_EL2_HPMN", "reset value PMCR_EL0.N")
    _field_value(h, "MDCR_EL2", MDCR_EL2.field("E2PB"), fw.E2PB_EL1, "MDCR_EL2_E2PB_EL1",
                 "Profiling Buffer owned by EL1, its accesses from EL1 not trapped")
    cptr = fw.CPTR_EL2
    _register(h, cptr)
    h.define("CPTR_EL2_RES1", _mask(cptr.res1), "with HCR_EL2.E2H == 0")
    _register(h, CNTHCTL_EL2_NVHE)

    # -- EL1
    h.section("EL1", "arch.context", "arch.mmu", "devices.generic_timer", "arch.firmware_regs")
    sctlr = fw.extended(SCTLR_ELX)
    _register(h, sctlr)
    h.define("SCTLR_EL1_RES1", "(" + " | ".join(
        f"SCTLR_EL1_{n.upper()}" for n in sorted(
            fw.SCTLR_EL1_V80_RES1, key=lambda n: sctlr.field(n).lsb)) + ")",
        "RES1 in Armv8.0: keep its behaviour")
    _register(h, CPACR_EL1)
    _field_value(h, "CPACR_EL1", CPACR_EL1.field("FPEN"), fw.FPEN_NOTRAP,
                 "CPACR_EL1_FPEN_NOTRAP")
    _register(h, TIMER_REGISTERS["CNTKCTL_EL1"])
    mair = fw.MAIR_EL1
    h.comment("MAIR_EL1: the firmware's attribute indices")
    stride = mair.field("Attr1").lsb
    if any(mair.field(f"Attr{n}").lsb != n * stride for n in range(8)):
        raise ConfigError("MAIR_EL1: Attr<n> fields are not evenly spaced")
    h.define("MAIR_ATTR_DEVICE_nGnRnE", f"UL(0x{fw.ATTR_DEVICE_nGnRnE:02X})")
    h.define("MAIR_ATTR_NORMAL_WB", f"UL(0x{fw.ATTR_NORMAL_WB_RWA:02X})",
             "Normal WB RW-allocate")
    h.define("MAIR_ATTR_SHIFT(idx)", f"((idx) * {stride})")
    for index, (macro, _attr) in enumerate(FW_MEMORY_TYPES):
        h.define(macro, str(index))
    _register(h, TCR_EL1, shifts=("T0SZ", "IRGN0", "ORGN0", "SH0", "TG0", "IPS"))
    _encoding(h, fw.IPS_32BIT, TCR_EL1.field("IPS"), "TCR_IPS_32BIT",
              "4 GiB of physical address space covers the board", plain=True)
    _encoding(h, fw.RGN_WBWA, TCR_EL1.field("IRGN0"), "TCR_RGN_WBWA", plain=True)
    _encoding(h, fw.SH_INNER, TCR_EL1.field("SH0"), "TCR_SH_INNER", plain=True)
    tg0_4k = [code for code, g in TG0_GRANULE.items() if g is FW_GRANULE]
    _encoding(h, tg0_4k[0], TCR_EL1.field("TG0"), "TCR_TG0_4K", plain=True)

    # -- descriptors
    h.section(f"stage 1 translation table descriptors "
              f"({_size(1 << FW_GRANULE.page_shift)} granule)", "arch.mmu")
    _fields(h, "PTE", DESC.name, DESC.fields, shifts=("AttrIndx", "SH"))
    _field_value(h, "PTE", DESC.field("TYPE"), 1, "PTE_TYPE_TABLE",
                 "level 0-2: next-level table (else block)")
    for macro, ap, what in (("PTE_AP_EL1_RW", fw.AP_EL1_RW, "EL1 RW, EL0 none"),
                            ("PTE_AP_EL0_RW", fw.AP_EL0_RW, "EL1 RW, EL0 RW")):
        value = DESC.make(AP2=ap >> 1, AP1=ap & 1)
        h.define(macro, f"UL(0x{value:X})", f"AP[2:1] = 0b{ap:02b}: {what}")
    _field_value(h, "PTE", DESC.field("SH"), fw.SH_INNER, "PTE_SH_INNER")
    h.define("PT_ENTRIES", str(1 << FW_GRANULE.index_bits))
    h.define("PT_ENTRY_SIZE_LOG2", str(FW_GRANULE.page_shift - FW_GRANULE.index_bits))
    for level in (1, 2):
        shift = FW_GRANULE.level_shift(level)
        h.define(f"L{level}_BLOCK_SHIFT", str(shift),
                 f"{_size(1 << shift)} per level-{level} entry")

    # -- GIC
    h.section("GICv3 CPU interface (system registers)", "devices.gicv3.ICC_REGISTERS")
    icc = ("ICC_PMR_EL1", "ICC_IAR1_EL1", "ICC_EOIR1_EL1", "ICC_BPR1_EL1", "ICC_SRE_EL1",
           "ICC_IGRPEN1_EL1", "ICC_SRE_EL2", "ICC_SRE_EL3")
    for s in sorted((ICC_REGISTERS[n] for n in icc), key=lambda s: s.encoding.tuple):
        h.define(f"SYS_{s.name}", str(s.encoding))
    sre = ICC_REGISTERS["ICC_SRE_EL3"]
    _same_layout(ICC_REGISTERS["ICC_SRE_EL1"], sre, ("SRE", "DFB", "DIB"))
    _same_layout(ICC_REGISTERS["ICC_SRE_EL2"], sre, ("SRE", "DFB", "DIB", "Enable"))
    h.comment("ICC_SRE_EL1/EL2/EL3 (Enable: EL2/EL3 only, lower EL may use ICC_SRE_ELx)")
    _fields(h, "ICC_SRE_ELx", sre.name, sre.fields)
    for name in ("ICC_IAR1_EL1", "ICC_IGRPEN1_EL1", "ICC_PMR_EL1", "ICC_BPR1_EL1"):
        _register(h, ICC_REGISTERS[name])

    h.lines += ["", "#endif /* SPE_FW_SYSREG_H */", ""]
    return "\n".join(h.lines)


# -- the docs tables -------------------------------------------------------------------------
def _hex(n: int) -> str:
    return f"0x{n:09_X}"  # 0x0800_FFFF


def _regions(board: BoardSpec) -> list[tuple[int, int, str, str]]:
    rows = []
    for d in board.devices:
        irq = ", ".join(f"{_irq_name(i)} (INTID {i}), level" for _, i in d.irqs)
        if d.kind == "gicv3":
            gicd, *gicrs = d.all_regions
            rows.append((*gicd, "GICv3 distributor (GICD)", irq))
            for base, size in gicrs:
                n = size // GICR_BYTES_PER_PE
                who = "of CPU 0" if n == 1 else f"of CPUs 0-{n - 1}"
                rows.append((base, size, f"GICv3 redistributor {who} (RD_base frame, then "
                             f"SGI_base frame at +0x{GICR_FRAME_BYTES:_X})", irq))
        elif d.kind == "pl011":
            rows.append((d.base, d.size, "PL011 UART", irq))
        else:
            rows += [(b, s, f"{d.name} ({d.kind})", irq) for b, s in d.all_regions]
    rows.append((board.ram_base, board.ram_size,
                 f"RAM ({_size(board.ram_size)} by default)", ""))
    return sorted(rows)


def memory_map_markdown(board: BoardSpec = VIRT) -> str:
    """The memory-map and PPI tables of docs/design.md "Board memory map" (Markdown, between
    :data:`BEGIN_MARK` and :data:`END_MARK`)."""
    lines = ["| range | what | interrupt |", "| --- | --- | --- |"]
    for base, size, what, irq in _regions(board):
        lines.append(f"| {_hex(base)} - {_hex(base + size - 1)} | {what} | {irq} |"
                     .replace("|  |", "| |"))
    lines += ["", "| PPI | INTID | what (level-sensitive) |", "| --- | --- | --- |"]
    for name, intid in sorted(board.ppis, key=lambda p: p[1]):
        lines.append(f"| {intid - GIC_PPI_BASE} | {intid} | {PPI_WHAT.get(name, name)} |")
    return "\n".join(lines)


def design_doc(text: str, board: BoardSpec = VIRT) -> str:
    """``text`` (docs/design.md) with the generated tables between the markers replaced.

    Raises:
        ConfigError: the markers are missing or out of order.
    """
    begin, end = text.find(BEGIN_MARK), text.find(END_MARK)
    if begin < 0 or end < begin:
        raise ConfigError(f"{DESIGN}: the generated-table markers are missing (put the "
                          f"{BEGIN_MARK!r} and {END_MARK!r} lines around the table)")
    head = text[:begin + len(BEGIN_MARK)]
    return f"{head}\n{memory_map_markdown(board)}\n{text[end:]}"


# -- files -------------------------------------------------------------------------------------
def expected_files(root: Path = REPO, board: BoardSpec = VIRT) -> dict[Path, str]:
    """Relative path -> the content the generated file must have, for the checkout at
    ``root``."""
    design = (root / DESIGN).read_text()
    return {HEADER: firmware_header(board), SYSREG_HEADER: sysreg_header(),
            DESIGN: design_doc(design, board)}


def stale_files(root: Path = REPO, board: BoardSpec = VIRT) -> list[Path]:
    """The generated files (relative paths) whose content differs from what is expected."""
    out = []
    for rel, text in expected_files(root, board).items():
        path = root / rel
        if not path.exists() or path.read_text() != text:
            out.append(rel)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spe_emu.tools.generate",
                                 description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if a generated file is stale")
    mode.add_argument("--write", action="store_true", help="rewrite the stale generated files")
    ap.add_argument("--root", type=Path, default=REPO,
                    help="the source checkout (default: the one this module is in)")
    args = ap.parse_args(argv)
    try:
        stale = stale_files(args.root)
        if args.check:
            for rel in stale:
                print(f"stale: {rel} (run python -m spe_emu.tools.generate --write)")
            return 1 if stale else 0
        for rel, text in expected_files(args.root).items():
            if rel in stale:
                (args.root / rel).write_text(text)
                print(f"wrote {rel}")
        return 0
    except (ConfigError, OSError) as exc:
        print(f"generate: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
