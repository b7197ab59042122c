"""Files generated from the board description: the firmware's ``firmware/board.h`` and the
memory-map tables of docs/design.md.

    python -m spe_emu.platform.generate --check    # exit 1 naming every stale file
    python -m spe_emu.platform.generate --write    # rewrite the stale files

Both come from :data:`spe_emu.platform.board.VIRT` (addresses, INTIDs) and
:data:`FIRMWARE_REGIONS` (how the firmware divides RAM), so an address changes in one place;
``tests/test_generated.py`` fails while a generated file is stale. The macro names are the
ones the firmware sources use; a changed value changes the firmware image, a changed comment
does not (``python scripts/build_images.py --check``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .board import GIC_PPI_BASE, GIC_SPI_BASE, GICR_FRAME_BYTES, VIRT, BoardSpec, DeviceSpec
from .dtb import GICR_BYTES_PER_PE

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]
"""The source checkout this module sits in (the generated files live there, not in an
installed package)."""
HEADER = Path("firmware/board.h")
DESIGN = Path("docs/design.md")
BEGIN_MARK = ("<!-- BEGIN GENERATED board memory map: edit spe_emu/platform/board.py, then "
              "run python -m spe_emu.platform.generate --write -->")
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

FW_PAGE_SIZE = 0x1000
"""The firmware's translation granule (TCR_EL1.TG0 = 4 KiB)."""

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
        " * `python -m spe_emu.platform.generate --write`: do not edit (a test fails",
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
    return {HEADER: firmware_header(board), DESIGN: design_doc(design, board)}


def stale_files(root: Path = REPO, board: BoardSpec = VIRT) -> list[Path]:
    """The generated files (relative paths) whose content differs from what is expected."""
    out = []
    for rel, text in expected_files(root, board).items():
        path = root / rel
        if not path.exists() or path.read_text() != text:
            out.append(rel)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spe_emu.platform.generate",
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
                print(f"stale: {rel} (run python -m spe_emu.platform.generate --write)")
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
