"""Loading a kernel the way ``qemu-system-aarch64 -M virt -kernel K [-initrd R]`` does.

Where everything lands follows QEMU's ``hw/arm/boot.c`` for an AArch64 CPU (checked against
QEMU 7.2 by ``tests/test_boot.py``), so a kernel finds x0, its initrd and the DTB at the
addresses it would find under QEMU:

* **ELF** (``EM_AARCH64`` executable): ``PT_LOAD`` segments at their physical addresses,
  entry ``e_entry``. Booted as a bare-metal program: x0 = 0 and no initrd; a DTB is placed
  at the base of RAM when the image leaves room there (below its lowest segment), as QEMU
  does for ``-kernel`` ELFs.
* **arm64 Linux Image** (``"ARM\\x64"`` at offset 56, Linux
  ``Documentation/arch/arm64/booting.rst``): with a non-zero ``image_size`` it is placed
  ``text_offset`` bytes above the (2 MiB aligned) RAM base, one 2 MiB block higher when
  ``text_offset`` < 4 KiB (QEMU keeps the first 4 KiB of RAM for its boot stub, so a v5.8+
  kernel with ``text_offset`` 0 lands at RAM + 2 MiB); with ``image_size`` 0 (kernels before
  v3.17) at RAM + :attr:`BoardSpec.kernel_offset` (0x8_0000).
* **gzip** (Debian's ``vmlinuz``, ``Image.gz``): decompressed, then an Image or raw binary.
* **raw binary** (anything else, e.g. a kvm-unit-tests ``.flat``): at RAM + ``kernel_offset``.

Images and raw binaries are booted as Linux: the initrd goes at
``RAM + min(RAM size / 2, 128 MiB)``, or just above the kernel's ``image_size`` footprint
when that is higher, rounded up to 4 KiB; the DTB at the next 2 MiB boundary after the
initrd's end (after that initrd start when there is none); x0 = the DTB address, entry = the
image's first byte (QEMU's stub sets x0..x3 and branches there; spe_emu sets the registers
directly).

Sizes are checked before files are read in full: a file larger than RAM is refused from its
size alone, and decompression stops once the output would exceed RAM.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from elftools.common.exceptions import ELFError
from elftools.construct import ConstructError
from elftools.elf.elffile import ELFFile
from isal import isal_zlib   # ISA-L's zlib: a kernel's gzip in less than half zlib's time

from ..platform.loader import ELF_MAGIC, load_elf
from ..errors import ConfigError, ImageError
from .inputs import check_input, open_input, read_input
from ..sysreg import layout
from .board import BoardSpec

KiB, MiB = 1 << 10, 1 << 20

# -- the arm64 Image header (booting.rst "Call the kernel image"), all little-endian ----------
IMAGE_HEADER_FIELDS = ("code0", "code1", "text_offset", "image_size", "flags", "res2", "res3",
                       "res4", "magic", "res5")
IMAGE_HEADER = struct.Struct("<IIQQQQQQ4sI")
"""The 64-byte header, fields in :data:`IMAGE_HEADER_FIELDS` order."""
IMAGE_MAGIC = b"ARM\x64"
IMAGE_FLAGS = layout("flags", "BE 0", "PageSize 2:1", "PhysPlacement 3")
"""The header's ``flags``: kernel endianness (1: big-endian), page size, physical placement."""
IMAGE_BASE_ALIGN = 2 * MiB
"""An Image sits ``text_offset`` above a 2 MiB aligned base."""

GZIP_MAGIC = b"\x1f\x8b\x08"
"""gzip ID1, ID2 and CM = 8 (deflate) (RFC 1952 §2.3.1)."""

# -- QEMU's placement rules (hw/arm/boot.c) ---------------------------------------------------
BOOT_STUB_BYTES = 4 * KiB
"""QEMU writes its boot stub at the RAM base: an Image asking for a ``text_offset`` below this
is moved up by :data:`IMAGE_BASE_ALIGN`."""
INITRD_OFFSET_LIMIT = 128 * MiB
"""The initrd goes at ``min(RAM size / 2, this)`` above the RAM base (or above the kernel)."""
INITRD_ALIGN = 4 * KiB
DTB_ALIGN = 2 * MiB
"""The DTB starts on a 2 MiB boundary (some kernels map it with one 2 MiB block)."""
DTB_MAX_BYTES = 2 * MiB
"""Largest DTB Linux accepts (booting.rst "Setup the device tree")."""


def _align_up(value: int, align: int) -> int:
    return -(-value // align) * align


@dataclass(frozen=True)
class BootImage:
    """What to write into RAM and how to start.

    Attributes:
        path: the kernel file.
        format: ``"elf"``, ``"image"`` (arm64 Linux Image), ``"raw"``; ``"+gzip"`` appended
            when the file was gzip-compressed.
        entry: the PC to start at (physical address).
        segments: (address, bytes) to write, in order (the DTB is added by :meth:`with_dtb`).
        kernel: [start, end) the kernel occupies, bss/``image_size`` included (bytes).
        initrd: [start, end) of the initrd, or None.
        dtb_addr: where the DTB goes, or None when there is no room for one (an ELF covering
            the RAM base).
        dtb_limit: bytes available at ``dtb_addr``.
        is_linux: booted with the Linux protocol (x0 = DTB address, x1..x3 = 0); False for an
            ELF (all registers zero, as on QEMU).
    """

    path: Path
    format: str
    entry: int
    segments: tuple[tuple[int, bytes], ...]
    kernel: tuple[int, int]
    initrd: tuple[int, int] | None
    dtb_addr: int | None
    dtb_limit: int
    is_linux: bool

    @property
    def x0(self) -> int:
        """The value of x0 at entry: the DTB address for a Linux boot, else 0."""
        return self.dtb_addr if self.is_linux and self.dtb_addr is not None else 0

    def with_dtb(self, dtb: bytes) -> "BootImage":
        """This boot image with ``dtb`` written at :attr:`dtb_addr`.

        Raises:
            ConfigError: there is no room for a DTB, or ``dtb`` is larger than the room left
                (or than the 2 MiB Linux accepts).
        """
        if self.dtb_addr is None:
            raise ConfigError(f"{self.path}: no room for a DTB at the RAM base below the "
                              f"ELF's lowest segment ({self.kernel[0]:#x})")
        limit = min(self.dtb_limit, DTB_MAX_BYTES)
        if len(dtb) > limit:
            raise ConfigError(f"DTB of {len(dtb)} bytes does not fit the {limit} bytes at "
                              f"{self.dtb_addr:#x}")
        return replace(self, segments=self.segments + ((self.dtb_addr, bytes(dtb)),))


def load_kernel(path: str | os.PathLike, board: BoardSpec, ram_size: int,
                initrd_path: str | os.PathLike | None = None) -> BootImage:
    """Place a kernel (and an initrd) in ``board``'s RAM like QEMU's ``-kernel``/``-initrd``.

    Args:
        path: an AArch64 ELF executable, an arm64 Linux Image, a gzip-compressed Image, or a
            raw binary.
        board: the board (RAM base, ``kernel_offset``).
        ram_size: bytes of RAM from ``board.ram_base``.
        initrd_path: an initial RAM disk, loaded unchanged (not with an ELF kernel).

    Returns:
        The placement (:class:`BootImage`); add the DTB with :meth:`BootImage.with_dtb`.

    Raises:
        ImageError: a file is missing or unreadable, a malformed ELF or gzip stream, a
            big-endian Image, overlapping ELF segments.
        ConfigError: the kernel, the initrd or the DTB does not fit in RAM (a file larger
            than RAM is refused before it is read), an ELF segment outside RAM, an initrd
            with an ELF kernel, a RAM base that is not 2 MiB aligned.
    """
    path = Path(path)
    ram_base, ram_end = board.ram_base, board.ram_base + ram_size
    if ram_size <= 0:
        raise ConfigError(f"ram_size must be positive, not {ram_size}")
    if ram_base % IMAGE_BASE_ALIGN:
        raise ConfigError(f"board {board.name}: RAM base {ram_base:#x} is not 2 MiB aligned "
                          f"(the arm64 boot protocol places an Image above a 2 MiB boundary)")
    head = _read_head(path, 64)
    if head.startswith(ELF_MAGIC):
        if initrd_path is not None:
            raise ConfigError(f"{path}: an initrd needs a Linux Image or raw binary; an ELF "
                              f"is booted as a bare-metal program (QEMU ignores -initrd here)")
        return _load_elf(path, board, ram_size)

    size = _file_size(path)
    if size > ram_size:
        raise ConfigError(f"{path}: {size} bytes do not fit in {ram_size} bytes of RAM")
    data = _read(path, ram_size)
    fmt = ""
    if data.startswith(GZIP_MAGIC):
        data, fmt = _gunzip(path, data, ram_size), "+gzip"

    load_offset, footprint = board.kernel_offset, len(data)
    if len(data) >= IMAGE_HEADER.size and data[56:60] == IMAGE_MAGIC:
        fmt = "image" + fmt
        header = dict(zip(IMAGE_HEADER_FIELDS, IMAGE_HEADER.unpack_from(data)))
        if IMAGE_FLAGS.get(header["flags"], "BE"):
            raise ImageError(f"{path}: big-endian arm64 Image (flags bit 0); spe_emu runs "
                             f"little-endian kernels")
        if header["image_size"]:  # v3.17+: text_offset and image_size are meaningful
            load_offset = header["text_offset"]
            if load_offset < BOOT_STUB_BYTES:
                load_offset += IMAGE_BASE_ALIGN
            footprint = max(header["image_size"], len(data))
    else:
        fmt = "raw" + fmt

    entry = ram_base + load_offset
    kernel = (entry, entry + footprint)
    if kernel[1] > ram_end:
        raise ConfigError(f"{path}: the kernel [{kernel[0]:#x}, {kernel[1]:#x}) does not fit "
                          f"in RAM [{ram_base:#x}, {ram_end:#x}) (ram_size {ram_size:#x})")
    segments: list[tuple[int, bytes]] = [(entry, data)]

    initrd_start = _align_up(max(ram_base + min(ram_size // 2, INITRD_OFFSET_LIMIT), kernel[1]),
                             INITRD_ALIGN)
    initrd = None
    if initrd_path is not None:
        initrd_path = Path(initrd_path)
        room = ram_end - initrd_start
        size = _file_size(initrd_path)
        if room <= 0 or size > room:
            raise ConfigError(f"{initrd_path}: {size} bytes do not fit in RAM after the "
                              f"kernel ({max(room, 0)} bytes from {initrd_start:#x})")
        initrd = (initrd_start, initrd_start + size)
        segments.append((initrd_start, _read(initrd_path, room)))
    dtb_addr = _align_up(initrd[1] if initrd else initrd_start, DTB_ALIGN)
    if dtb_addr >= ram_end:
        raise ConfigError(f"no room for the DTB after the kernel and initrd: "
                          f"{dtb_addr:#x} is past the end of RAM ({ram_end:#x})")
    boot = BootImage(path=path, format=fmt, entry=entry, segments=tuple(segments),
                     kernel=kernel, initrd=initrd, dtb_addr=dtb_addr,
                     dtb_limit=ram_end - dtb_addr, is_linux=True)
    return boot


def load_kernel_with_dtb(path: str | os.PathLike, board: BoardSpec, ram_size: int,
                         initrd_path: str | os.PathLike | None = None,
                         **dtb_options: Any) -> BootImage:
    """:func:`load_kernel`, then the board's DTB (:func:`spe_emu.platform.dtb.build_dtb` with
    this RAM size, the initrd's placement and ``dtb_options``) added at its address; no DTB
    when an ELF leaves no room for one below its lowest segment (as on QEMU).

    Raises:
        ImageError, ConfigError: as :func:`load_kernel` and ``build_dtb``.
    """
    from .dtb import build_dtb

    boot = load_kernel(path, board, ram_size, initrd_path)
    if boot.dtb_addr is None:
        return boot
    return boot.with_dtb(build_dtb(board, ram_size=ram_size, initrd=boot.initrd,
                                   **dtb_options))


# -- ELF ---------------------------------------------------------------------------------------
def _load_elf(path: Path, board: BoardSpec, ram_size: int) -> BootImage:
    ram_base, ram_end = board.ram_base, board.ram_base + ram_size
    _check_elf_fits(path, ram_size)
    image = load_elf(path)
    segments = []
    for seg in image.segments:
        if not seg.memsz:
            continue
        start, end = seg.paddr, seg.paddr + seg.memsz
        if not ram_base <= start < end <= ram_end:
            raise ConfigError(f"{path}: segment [{start:#x}, {end:#x}) is outside RAM "
                              f"[{ram_base:#x}, {ram_end:#x}) (ram_size {ram_size:#x})")
        segments.append((start, seg.data + bytes(seg.memsz - len(seg.data))))
    if not segments:
        raise ImageError(f"{path}: no PT_LOAD segment with a non-zero size")
    ordered = sorted((a, a + len(d)) for a, d in segments)
    for (s0, e0), (s1, e1) in zip(ordered, ordered[1:]):
        if s1 < e0:
            raise ImageError(f"{path}: segments [{s0:#x}, {e0:#x}) and [{s1:#x}, {e1:#x}) "
                             f"overlap")
    low, high = ordered[0][0], max(e for _, e in ordered)
    # QEMU (MMU off, PC physical): the entry point translated by the segment holding it
    entry = image.entry
    for seg in image.segments:
        if seg.contains(entry):
            entry = entry - seg.vaddr + seg.paddr
            break
    # the DTB at the RAM base when the image leaves room below it
    dtb_addr = ram_base if low > ram_base else None
    return BootImage(path=path, format="elf", entry=entry, segments=tuple(segments),
                     kernel=(low, high), initrd=None, dtb_addr=dtb_addr,
                     dtb_limit=low - ram_base if dtb_addr is not None else 0, is_linux=False)


def _check_elf_fits(path: Path, ram_size: int) -> None:
    """Refuse an ELF whose ``PT_LOAD`` memory sizes add up to more than RAM, reading only its
    headers (an ELF with debug information may be larger than RAM and still fit)."""
    try:
        with open_input(path) as f:
            total = sum(seg["p_memsz"] for seg in ELFFile(f).iter_segments()
                        if seg["p_type"] == "PT_LOAD")
    except OSError as exc:
        raise ImageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (ELFError, ConstructError, ValueError, KeyError, EOFError, struct.error) as exc:
        raise ImageError(f"{path}: malformed ELF: {type(exc).__name__}: {exc}") from None
    if total > ram_size:
        raise ConfigError(f"{path}: PT_LOAD segments of {total} bytes do not fit in "
                          f"{ram_size} bytes of RAM")


# -- files (regular files only, never waited on: spe_emu.platform.inputs) ----------------------
def _file_size(path: Path) -> int:
    return check_input(path).st_size


def _read_head(path: Path, n: int) -> bytes:
    try:
        with open_input(path) as f:
            return f.read(n)
    except OSError as exc:
        raise ImageError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _read(path: Path, limit: int) -> bytes:
    """The file's bytes, refused beyond ``limit`` (what RAM has room for; its size was
    checked before, this holds if the file grew since)."""
    return read_input(path, limit, "a file loaded into RAM")


def _gunzip(path: Path, data: bytes, limit: int) -> bytes:
    """The first gzip member of ``data`` decompressed, refusing output beyond ``limit``
    bytes (trailing bytes after the member are ignored, as QEMU's loader does)."""
    d = isal_zlib.decompressobj(wbits=16 + isal_zlib.MAX_WBITS)
    try:
        out = d.decompress(data, limit + 1)
    except isal_zlib.error as exc:
        raise ImageError(f"{path}: corrupt gzip data: {exc}") from None
    if len(out) > limit:
        raise ConfigError(f"{path}: decompresses to more than the {limit} bytes of RAM")
    if not d.eof:
        raise ImageError(f"{path}: truncated gzip data")
    return out

