"""Kernel placement like ``qemu-system-aarch64 -M virt -kernel K -initrd R``
(spe_emu.platform.boot): synthetic arm64 Images (Linux booting.rst header), gzip Images, raw
binaries and ELFs, placement asserted against QEMU's hw/arm/boot.c rules and, when QEMU is
installed, against QEMU itself (a probe kernel prints x0 and its PC on the PL011)."""

from __future__ import annotations

import dataclasses
import gzip
import shutil
import struct
import subprocess
from pathlib import Path

import fdt
import pytest

from spe_emu.asm import assemble
from spe_emu.errors import ConfigError, ImageError
from spe_emu.platform import boot as boot_mod
from spe_emu.platform.board import VIRT
from spe_emu.platform.boot import load_kernel, load_kernel_with_dtb

MiB = 1 << 20
RAM = 256 * MiB
BASE = VIRT.ram_base
QEMU = "qemu-system-aarch64"


def image(text_offset: int, image_size: int, body: bytes = b"", flags: int = 0b1010,
          size: int = 0x1000) -> bytes:
    """An arm64 Image: code0 = b +64, the 64-byte header, ``body`` from offset 64."""
    header = struct.pack("<IIQQQQQQ4sI", 0x1400_0010, 0, text_offset, image_size, flags,
                         0, 0, 0, b"ARM\x64", 0)
    data = header + body
    return data + bytes(max(0, size - len(data)))


def elf(segments: list[tuple[int, int, bytes, int]], entry: int) -> bytes:
    """An ELF64 AArch64 ET_EXEC with PT_LOAD (vaddr, paddr, data, memsz) segments and no
    section headers."""
    phoff, phsize = 64, 56
    offset = phoff + phsize * len(segments)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    out = struct.pack("<16sHHIQQQIHHHHHH", ident, 2, 183, 1, entry, phoff, 0, 0, 64, phsize,
                      len(segments), 64, 0, 0)
    blobs = b""
    for vaddr, paddr, data, memsz in segments:
        out += struct.pack("<IIQQQQQQ", 1, 5, offset + len(blobs), vaddr, paddr, len(data),
                           memsz, 0x1000)
        blobs += data
    return out + blobs


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def sparse(tmp_path: Path, name: str, size: int) -> Path:
    p = tmp_path / name
    with p.open("wb") as f:
        f.truncate(size)
    return p


# -- arm64 Image ---------------------------------------------------------------------------
def test_image_text_offset_zero_goes_2mib_up(tmp_path):
    data = image(0, 3 * MiB)
    b = load_kernel(write(tmp_path, "Image", data), VIRT, RAM)
    assert (b.format, b.entry, b.is_linux) == ("image", BASE + 2 * MiB, True)
    assert b.segments == ((BASE + 2 * MiB, data),)
    assert b.kernel == (BASE + 2 * MiB, BASE + 5 * MiB)  # image_size, not the file size
    assert b.initrd is None
    assert b.dtb_addr == b.x0 == BASE + 128 * MiB  # min(RAM / 2, 128 MiB), 2 MiB aligned
    assert b.dtb_limit == RAM - 128 * MiB


@pytest.mark.parametrize("text_offset, load", [
    (0x8_0000, 0x8_0000),
    (0x1000, 0x1000),              # 4 KiB: above QEMU's boot stub, kept
    (0xFFF, 0xFFF + 2 * MiB),      # below 4 KiB: one 2 MiB block up
])
def test_image_text_offset(tmp_path, text_offset, load):
    b = load_kernel(write(tmp_path, "Image", image(text_offset, 0x10_0000)), VIRT, RAM)
    assert b.entry == BASE + load
    assert b.kernel == (BASE + load, BASE + load + 0x10_0000)


def test_image_without_image_size_is_at_kernel_offset(tmp_path):
    # before v3.17: image_size 0, text_offset not to be trusted -> 0x80000, file size
    data = image(0x20_0000, 0, size=0x3000)
    b = load_kernel(write(tmp_path, "Image", data), VIRT, RAM)
    assert b.entry == BASE + VIRT.kernel_offset == 0x4008_0000
    assert b.kernel == (0x4008_0000, 0x4008_3000)


def test_initrd_after_small_kernel(tmp_path):
    rd = bytes(range(256)) * 0x123
    b = load_kernel(write(tmp_path, "Image", image(0, 3 * MiB)), VIRT, RAM,
                    write(tmp_path, "initrd", rd))
    assert b.initrd == (BASE + 128 * MiB, BASE + 128 * MiB + len(rd))
    assert b.segments[1] == (BASE + 128 * MiB, rd)
    assert b.dtb_addr == BASE + 130 * MiB  # next 2 MiB boundary after the initrd


def test_small_ram_puts_initrd_at_half(tmp_path):
    b = load_kernel(write(tmp_path, "Image", image(0, 3 * MiB)), VIRT, 64 * MiB,
                    write(tmp_path, "initrd", b"\xaa" * 0x12345))
    assert b.initrd == (BASE + 32 * MiB, BASE + 32 * MiB + 0x12345)
    assert b.dtb_addr == BASE + 34 * MiB


def test_initrd_above_a_large_kernel_page_aligned(tmp_path):
    # 8 MiB RAM: RAM/2 = 4 MiB lies inside the kernel's image_size; the initrd follows the
    # kernel, rounded up to 4 KiB, and the DTB the initrd, rounded up to 2 MiB
    b = load_kernel(write(tmp_path, "Image", image(0, 0x30_0123)), VIRT, 8 * MiB,
                    write(tmp_path, "initrd", b"r" * 0x800))
    assert b.kernel[1] == BASE + 0x50_0123
    assert b.initrd == (BASE + 0x50_1000, BASE + 0x50_1800)
    assert b.dtb_addr == BASE + 0x60_0000


def test_big_endian_image_refused(tmp_path):
    with pytest.raises(ImageError, match="big-endian"):
        load_kernel(write(tmp_path, "Image", image(0, MiB, flags=0b1011)), VIRT, RAM)


# -- gzip, raw -------------------------------------------------------------------------------
def test_gzip_image_is_decompressed(tmp_path):
    data = image(0, 3 * MiB, body=b"kernel text" * 100)
    plain = load_kernel(write(tmp_path, "Image", data), VIRT, RAM)
    b = load_kernel(write(tmp_path, "vmlinuz", gzip.compress(data, mtime=0)), VIRT, RAM)
    assert b.format == "image+gzip"
    assert (b.entry, b.segments, b.kernel, b.dtb_addr) == (plain.entry, plain.segments,
                                                            plain.kernel, plain.dtb_addr)


def test_gzip_raw_binary(tmp_path):
    b = load_kernel(write(tmp_path, "k.gz", gzip.compress(b"\x01\x02" * 10, mtime=0)), VIRT, RAM)
    assert (b.format, b.segments) == ("raw+gzip", ((0x4008_0000, b"\x01\x02" * 10),))


def test_gzip_errors(tmp_path):
    z = gzip.compress(bytes(3 * MiB), mtime=0)
    with pytest.raises(ImageError, match="truncated gzip"):
        load_kernel(write(tmp_path, "t.gz", z[:len(z) // 2]), VIRT, RAM)
    with pytest.raises(ImageError, match="corrupt gzip"):
        load_kernel(write(tmp_path, "c.gz", z[:10] + b"\xff" * 40), VIRT, RAM)
    with pytest.raises(ConfigError, match="decompresses to more than the 2097152 bytes"):
        load_kernel(write(tmp_path, "big.gz", z), VIRT, 2 * MiB)


def test_raw_binary(tmp_path):
    data = b"\x00\x00\x00\x14" + bytes(0x1234)
    b = load_kernel(write(tmp_path, "test.flat", data), VIRT, RAM,
                    write(tmp_path, "rd", b"x" * 10))
    assert (b.format, b.entry, b.is_linux) == ("raw", 0x4008_0000, True)
    assert b.segments == ((0x4008_0000, data), (BASE + 128 * MiB, b"x" * 10))
    assert b.kernel == (0x4008_0000, 0x4008_0000 + len(data))
    assert b.x0 == BASE + 130 * MiB


# -- ELF -------------------------------------------------------------------------------------
def test_elf_segments_by_paddr(tmp_path):
    text, data = b"\x1f\x20\x03\xd5" * 4, b"DATA"
    path = write(tmp_path, "k.elf", elf([
        (0xFFFF_0000_0010_0000, 0x4010_0000, text, len(text)),
        (0xFFFF_0000_0020_0000, 0x4020_0000, data, 0x10),       # .bss tail
    ], entry=0xFFFF_0000_0010_0008))
    b = load_kernel(path, VIRT, RAM)
    assert (b.format, b.is_linux, b.initrd) == ("elf", False, None)
    assert b.segments == ((0x4010_0000, text), (0x4020_0000, data + bytes(12)))
    assert b.entry == 0x4010_0008  # MMU off: the physical address of e_entry
    assert b.kernel == (0x4010_0000, 0x4020_0010)
    assert (b.dtb_addr, b.dtb_limit, b.x0) == (BASE, 0x10_0000, 0)


def test_elf_at_ram_base_leaves_no_dtb_room(tmp_path):
    b = load_kernel(write(tmp_path, "fw.elf", elf([(BASE, BASE, b"\0" * 8, 8)], BASE)),
                    VIRT, RAM)
    assert b.dtb_addr is None and b.x0 == 0
    with pytest.raises(ConfigError, match="no room for a DTB"):
        b.with_dtb(b"\xd0\x0d\xfe\xed")
    assert load_kernel_with_dtb(b.path, VIRT, RAM).segments == b.segments


def test_packaged_firmware_loads(tmp_path):
    fw = Path(__file__).resolve().parent.parent / "spe_emu" / "images" / "spe_fw.elf"
    b = load_kernel(fw, VIRT, RAM)
    assert b.entry == BASE and b.kernel[0] == BASE and b.format == "elf"


def test_elf_errors(tmp_path):
    with pytest.raises(ConfigError, match="an initrd needs a Linux Image"):
        load_kernel(write(tmp_path, "a.elf", elf([(BASE, BASE, b"x", 1)], BASE)), VIRT, RAM,
                    write(tmp_path, "rd", b"r"))
    with pytest.raises(ImageError, match="overlap"):
        load_kernel(write(tmp_path, "b.elf", elf([(0x4010_0000, 0x4010_0000, b"a" * 16, 16),
                                                  (0x4010_0008, 0x4010_0008, b"b", 1)],
                                                 0x4010_0000)), VIRT, RAM)
    with pytest.raises(ConfigError, match=r"segment \[0x1000, 0x1010\) is outside RAM"):
        load_kernel(write(tmp_path, "c.elf", elf([(0x1000, 0x1000, b"c" * 16, 16)], 0x1000)),
                    VIRT, RAM)
    with pytest.raises(ConfigError, match="PT_LOAD segments of 536870912 bytes do not fit"):
        load_kernel(write(tmp_path, "d.elf", elf([(BASE, BASE, b"d", 512 * MiB)], BASE)),
                    VIRT, RAM)
    with pytest.raises(ImageError, match="malformed ELF"):
        load_kernel(write(tmp_path, "e.elf", b"\x7fELF\x02\x01\x01" + bytes(20)), VIRT, RAM)


# -- files and sizes -----------------------------------------------------------------------
def test_missing_files(tmp_path):
    with pytest.raises(ImageError, match="no such file"):
        load_kernel(tmp_path / "nope", VIRT, RAM)
    with pytest.raises(ImageError, match="not a regular file"):
        load_kernel(tmp_path, VIRT, RAM)
    with pytest.raises(ImageError, match="rd: no such file"):
        load_kernel(write(tmp_path, "Image", image(0, MiB)), VIRT, RAM, tmp_path / "rd")


def test_files_larger_than_ram_are_refused_unread(tmp_path, monkeypatch):
    def no_read(path):
        raise AssertionError(f"{path} read")
    monkeypatch.setattr(boot_mod, "_read", no_read)
    with pytest.raises(ConfigError, match="4194305 bytes do not fit in 4194304 bytes of RAM"):
        load_kernel(sparse(tmp_path, "huge", 4 * MiB + 1), VIRT, 4 * MiB)
    monkeypatch.undo()
    # an initrd of 2 MiB + 1: 4 MiB of RAM leave 2 MiB above RAM / 2
    with pytest.raises(ConfigError, match=r"rd: 2097153 bytes do not fit in RAM after the "
                                          r"kernel \(2097152 bytes from 0x40200000\)"):
        load_kernel(write(tmp_path, "raw", b"\0" * 16), VIRT, 4 * MiB,
                    sparse(tmp_path, "rd", 2 * MiB + 1))


def test_kernel_must_fit(tmp_path):
    with pytest.raises(ConfigError, match=r"the kernel \[0x40200000, 0x48200000\) does not fit"):
        load_kernel(write(tmp_path, "Image", image(0, 128 * MiB)), VIRT, 64 * MiB)


def test_no_room_for_initrd_or_dtb(tmp_path):
    # the kernel's image_size reaches the end of RAM exactly
    k = write(tmp_path, "Image", image(0, 62 * MiB))
    with pytest.raises(ConfigError, match="no room for the DTB"):
        load_kernel(k, VIRT, 64 * MiB)
    with pytest.raises(ConfigError, match=r"initrd: 1 bytes do not fit in RAM after the "
                                          r"kernel \(0 bytes"):
        load_kernel(k, VIRT, 64 * MiB, write(tmp_path, "initrd", b"r"))


def test_ram_base_must_be_2mib_aligned(tmp_path):
    board = dataclasses.replace(VIRT, ram_base=0x4010_0000)
    with pytest.raises(ConfigError, match="not 2 MiB aligned"):
        load_kernel(write(tmp_path, "Image", image(0, MiB)), board, RAM)


# -- the DTB -----------------------------------------------------------------------------------
def test_with_dtb(tmp_path):
    b = load_kernel(write(tmp_path, "Image", image(0, MiB)), VIRT, RAM)
    d = b.with_dtb(b"\xd0\x0d\xfe\xed" + bytes(60))
    assert d.segments == b.segments + ((b.dtb_addr, b"\xd0\x0d\xfe\xed" + bytes(60)),)
    with pytest.raises(ConfigError, match="does not fit the 2097152 bytes"):
        b.with_dtb(bytes(2 * MiB + 8))
    small = load_kernel(write(tmp_path, "raw", b"\0" * 16), VIRT, 5 * MiB)
    assert small.dtb_addr == BASE + 4 * MiB and small.dtb_limit == MiB
    with pytest.raises(ConfigError, match="does not fit the 1048576 bytes at 0x40400000"):
        small.with_dtb(bytes(MiB + 8))


def test_load_kernel_with_dtb(tmp_path):
    b = load_kernel_with_dtb(write(tmp_path, "Image", image(0, MiB)), VIRT, 64 * MiB,
                             write(tmp_path, "rd", b"r" * 100), bootargs="console=ttyAMA0")
    addr, blob = b.segments[-1]
    assert addr == b.x0 == b.dtb_addr == BASE + 34 * MiB
    tree = fdt.parse_dtb(blob)
    assert tree.get_property("linux,initrd-start", "/chosen").data == [0, BASE + 32 * MiB]
    assert tree.get_property("linux,initrd-end", "/chosen").data == [0, BASE + 32 * MiB + 100]
    assert tree.get_property("bootargs", "/chosen").value == "console=ttyAMA0"
    assert tree.get_property("reg", "/memory@40000000").data == [0, BASE, 0, 64 * MiB]


# -- against QEMU ----------------------------------------------------------------------------
needs_qemu = pytest.mark.skipif(shutil.which(QEMU) is None,
                                reason=f"{QEMU} not installed (Debian: qemu-system-arm)")

PROBE = """
start:
    b code
    .space 60
code:
    mov x19, x0
    adr x20, start
    movz x21, #{uart_hi:#x}, lsl #16
    mov x0, x19
    bl hex
    mov x0, x20
    bl hex
    mov w1, #10
    strb w1, [x21]
    movz w0, #0x8400, lsl #16
    movk w0, #8
    hvc #0
    b .
hex:
    mov x2, #60
digit:
    lsr x3, x0, x2
    and x3, x3, #0xf
    add x4, x3, #0x30
    add x5, x3, #0x57
    cmp x3, #10
    csel x4, x4, x5, lt
    strb w4, [x21]
    subs x2, x2, #4
    b.ge digit
    mov w1, #0x20
    strb w1, [x21]
    ret
"""
"""Prints x0 and its own address in hex on the PL011, then PSCI SYSTEM_OFF (hvc)."""


def _probe() -> bytes:
    uart = VIRT.device("pl011").base
    assert uart & 0xFFFF == 0
    return assemble(PROBE.format(uart_hi=uart >> 16), 0)


def _qemu(kernel: Path, ram: str, initrd: Path | None, dump: Path | None = None):
    machine = "virt,gic-version=3" + (f",dumpdtb={dump}" if dump else "")
    cmd = [QEMU, "-M", machine, "-cpu", "max", "-m", ram, "-display", "none",
           "-monitor", "none", "-serial", "stdio", "-kernel", str(kernel)]
    if initrd:
        cmd += ["-initrd", str(initrd)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    if dump:
        return fdt.parse_dtb(dump.read_bytes())
    x0, pc = out.split()
    return int(x0, 16), int(pc, 16)


@needs_qemu
@pytest.mark.parametrize("kind, ram, with_initrd", [
    ("image0", "256M", False), ("image0", "256M", True), ("image0", "64M", True),
    ("image80000", "256M", True), ("image-gz", "256M", True), ("raw", "256M", True),
    ("elf", "256M", False),
])
def test_placement_matches_qemu(tmp_path, kind, ram, with_initrd):
    code = _probe()
    files = {
        "image0": lambda: image(0, 3 * MiB, body=code[64:]),
        "image80000": lambda: image(0x8_0000, 3 * MiB, body=code[64:]),
        "image-gz": lambda: gzip.compress(image(0, 3 * MiB, body=code[64:]), mtime=0),
        "raw": lambda: code,
        "elf": lambda: elf([(0x4008_0000, 0x4008_0000, code, len(code))], 0x4008_0000),
    }
    kernel = write(tmp_path, kind, files[kind]())
    initrd = write(tmp_path, "initrd", b"\xaa" * 0x12345) if with_initrd else None
    ram_size = int(ram[:-1]) * MiB
    ours = load_kernel(kernel, VIRT, ram_size, initrd)
    assert _qemu(kernel, ram, initrd) == (ours.x0, ours.entry)
    if with_initrd:
        chosen = _qemu(kernel, ram, initrd, tmp_path / "q.dtb").get_node("/chosen")
        start, end = ours.initrd
        # QEMU 7.2 writes one cell, later versions #address-cells (2): compare values
        assert chosen.get_property("linux,initrd-start").data[-1] == start
        assert chosen.get_property("linux,initrd-end").data[-1] == end
