"""Files generated from the board description (spe_emu.platform.generate): firmware/board.h and
the memory-map tables of docs/design.md must be current, and their values must follow the
board."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from spe_emu.errors import ConfigError
from spe_emu.platform import generate
from spe_emu.platform.board import VIRT, DeviceSpec, ppi, spi

REPO = Path(__file__).resolve().parent.parent
FIX = "run python -m spe_emu.platform.generate --write"

FIRMWARE_MACROS = {
    "DEVICE_BASE", "DEVICE_SIZE", "GICD_BASE", "GICR_BASE", "GICR_SGI_OFFSET", "RAM_BASE",
    "RAM_SIZE", "FW_REGION_BASE", "FW_REGION_SIZE", "SPE_BUF_REGION_BASE",
    "SPE_BUF_REGION_SIZE", "GUEST_REGION_BASE", "GUEST_REGION_SIZE", "GUEST_STACK_TOP",
    "PMBIRQ_INTID", "PAGE_SIZE"}
"""The board.h names the firmware sources use (firmware/*.c, *.S, config.h)."""


def macros(header: str) -> dict[str, int | str]:
    out: dict[str, int | str] = {}
    for m in re.finditer(r"^#define\s+(\w+)\s+(.+?)(?:\s*/\*.*\*/)?$", header, re.M):
        name, value = m.groups()
        ul = re.fullmatch(r"UL\((0x[0-9A-F]+)\)", value)
        out[name] = int(ul.group(1), 16) if ul else int(value) if value.isdigit() else value
    return out


def test_firmware_header_is_current():
    assert (REPO / "firmware/board.h").read_text() == generate.firmware_header(VIRT), \
        f"firmware/board.h is stale: {FIX}"


def test_design_tables_are_current():
    text = (REPO / "docs/design.md").read_text()
    assert generate.design_doc(text, VIRT) == text, f"docs/design.md memory map is stale: {FIX}"


def test_header_values_follow_the_board():
    m = macros(generate.firmware_header(VIRT))
    assert FIRMWARE_MACROS <= set(m)
    assert (m["GICD_BASE"], m["GICR_BASE"], m["GICR_SGI_OFFSET"]) == (0x0800_0000, 0x080A_0000,
                                                                      0x1_0000)
    assert (m["PL011_BASE"], m["PL011_INTID"]) == (0x0900_0000, 33)
    assert (m["RAM_BASE"], m["RAM_SIZE"], m["DEVICE_BASE"], m["DEVICE_SIZE"]) == (
        0x4000_0000, 0x1000_0000, 0, 0x4000_0000)
    assert (m["FW_REGION_BASE"], m["FW_REGION_SIZE"]) == (0x4000_0000, 0x0800_0000)
    assert (m["SPE_BUF_REGION_BASE"], m["SPE_BUF_REGION_SIZE"]) == (0x4400_0000, 0x0400_0000)
    assert (m["GUEST_REGION_BASE"], m["GUEST_REGION_SIZE"]) == (0x4800_0000, 0x0800_0000)
    assert m["GUEST_STACK_TOP"] == "(GUEST_REGION_BASE + GUEST_REGION_SIZE)"
    assert (m["PMBIRQ_INTID"], m["PMU_INTID"], m["CNTV_INTID"]) == (21, 23, 27)
    assert m["PAGE_SIZE"] == 0x1000

    gic = VIRT.device("intc")
    moved = dataclasses.replace(gic, base=0x0600_0000,
                                regions=((0x0600_0000, 0x1_0000), (0x0610_0000, 0x4_0000)))
    uart = dataclasses.replace(VIRT.device("pl011"), name="uart0", base=0x0910_0000,
                               irqs=(("intr", spi(7)),))
    board = dataclasses.replace(
        VIRT, ram_base=0x8000_0000, ram_size=512 << 20, devices=(moved, uart),
        ppis=tuple((n, ppi(6)) if n == "pmbirq" else (n, i) for n, i in VIRT.ppis))
    m = macros(generate.firmware_header(board))
    assert (m["GICD_BASE"], m["GICR_BASE"]) == (0x0600_0000, 0x0610_0000)
    assert (m["UART0_BASE"], m["UART0_INTID"]) == (0x0910_0000, 39)
    assert (m["RAM_BASE"], m["RAM_SIZE"], m["DEVICE_SIZE"]) == (0x8000_0000, 0x2000_0000,
                                                                0x8000_0000)
    assert (m["GUEST_REGION_BASE"], m["SPE_BUF_REGION_BASE"]) == (0x8800_0000, 0x8400_0000)
    assert m["PMBIRQ_INTID"] == 22
    table = generate.memory_map_markdown(board)
    assert ("| 0x0610_0000 - 0x0613_FFFF | GICv3 redistributor of CPUs 0-1 (RD_base frame, "
            "then SGI_base frame at +0x1_0000) | |") in table
    assert "| 0x0910_0000 - 0x0910_0FFF | PL011 UART | SPI 7 (INTID 39), level |" in table
    assert "| 0x8000_0000 - 0x9FFF_FFFF | RAM (512 MiB by default) | |" in table
    assert "| 6 | 22 | SPE Profiling Buffer (PMBIRQ)" in table


def test_layout_errors():
    with pytest.raises(ConfigError, match="need 0x10000000 bytes of RAM"):
        generate.firmware_header(dataclasses.replace(VIRT, ram_size=128 << 20))
    above = DeviceSpec("pl011", "late", 0x4000_0000, 0x1000, irqs=(("intr", spi(2)),))
    with pytest.raises(ConfigError, match="late .* is not below RAM"):
        generate.firmware_header(dataclasses.replace(VIRT, devices=VIRT.devices + (above,)))
    with pytest.raises(ConfigError, match="markers are missing"):
        generate.design_doc("# no markers\n")


@pytest.fixture
def checkout(tmp_path) -> Path:
    for rel in (generate.HEADER, generate.DESIGN):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, tmp_path / rel)
    return tmp_path


def test_cli_check_and_write(checkout, capsys):
    root = ["--root", str(checkout)]
    assert generate.main(["--check", *root]) == 0
    header = checkout / generate.HEADER
    header.write_text(header.read_text().replace("UL(0x080A0000)", "UL(0x080B0000)"))
    design = checkout / generate.DESIGN
    design.write_text(design.read_text().replace("| 7 | 23 | PMU overflow |\n", ""))
    capsys.readouterr()
    assert generate.main(["--check", *root]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"stale: firmware/board.h ({FIX})", f"stale: docs/design.md ({FIX})"]
    assert generate.main(["--write", *root]) == 0
    assert capsys.readouterr().out.splitlines() == ["wrote firmware/board.h",
                                                    "wrote docs/design.md"]
    assert header.read_text() == (REPO / generate.HEADER).read_text()
    assert design.read_text() == (REPO / generate.DESIGN).read_text()
    assert generate.main(["--check", *root]) == 0


def test_cli_errors(tmp_path, capsys):
    assert generate.main(["--check", "--root", str(tmp_path)]) == 2
    assert "generate: error:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        generate.main([])  # --check or --write is required
