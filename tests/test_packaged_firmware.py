"""The firmware shipped inside the package is the one firmware/build.py produces."""

from pathlib import Path

from spe_emu.platform.loader import load_elf
from spe_emu.session import FIRMWARE_CONFIG_SYMBOL, FIRMWARE_MAGIC, default_firmware

ROOT = Path(__file__).resolve().parents[1]


def test_packaged_firmware_is_the_built_one():
    assert default_firmware().read_bytes() == (ROOT / "firmware" / "spe_fw.elf").read_bytes()


def test_firmware_config_block_defaults():
    image = load_elf(default_firmware())
    assert image.entry == 0x4000_0000
    block = image.symbol(FIRMWARE_CONFIG_SYMBOL)
    assert image.symbols[FIRMWARE_CONFIG_SYMBOL][1] == 80          # ten u64 fields
    seg = next(s for s in image.segments if s.contains(block))
    data = seg.data[block - seg.vaddr: block - seg.vaddr + 16]
    assert int.from_bytes(data[:8], "little") == FIRMWARE_MAGIC
    assert int.from_bytes(data[8:16], "little") == 0x4800_0000      # default guest entry
