"""Reading a static AArch64 Linux executable (``ET_EXEC`` or static-pie ``ET_DYN``).

Reference: System V gABI ELF-64 (program headers, ``PT_LOAD``, ``PT_PHDR``, ``PT_INTERP``) and
the Linux ``execve`` conventions for where a static-pie program is placed. Only what
:mod:`spe_emu.linux.process` needs is kept. Every offset and size is checked against the file
before it is used, so a malformed file gives one :class:`~spe_emu.errors.ImageError` line,
never a traceback or an unbounded read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ImageError, SpeEmuError
from ..platform.inputs import open_input, read_input
from ..platform.loader import (PF_R, PF_W, PF_X, Image, Segment, elf_errors, open_elf,
                               segment_bytes, symbols_of)

MAX_PROGRAM_BYTES = 256 << 20
"""Largest program file accepted (bytes): a bigger file, or one that is not a regular file
(``/dev/zero``), is refused before it is read."""
PAGE = 0x1000
ET_DYN_BASE = 0x55_5555_0000
"""Where a static-pie program (``ET_DYN``) is placed (bytes; its lowest ``PT_LOAD`` page):
two thirds of the 39-bit user address space, as Linux does for ``ELF_ET_DYN_BASE``."""


@dataclass(frozen=True)
class LinuxProgram:
    """A program ready to be mapped.

    Attributes:
        path: the file.
        bias: added to every ``p_vaddr`` (0 for ``ET_EXEC``; bytes).
        entry: ``e_entry + bias``.
        phdr: address of the program headers in the process (``AT_PHDR``).
        phent, phnum: ``e_phentsize`` and ``e_phnum`` (``AT_PHENT``, ``AT_PHNUM``).
        segments: the ``PT_LOAD`` segments at their process addresses.
        symbols: ``.symtab`` symbols at their process addresses (for reports).
    """

    path: Path
    bias: int
    entry: int
    phdr: int
    phent: int
    phnum: int
    segments: tuple[Segment, ...]
    symbols: Mapping[str, tuple[int, int]]

    def image(self) -> Image:
        """The program as a :class:`~spe_emu.platform.loader.Image` at its process addresses
        (for naming PCs and the control-instruction scan)."""
        return Image(self.path, self.entry, list(self.segments), self.symbols)


def load_linux_program(path: str | Path, va_limit: int) -> LinuxProgram:
    """Read a static AArch64 Linux executable and place it: ``ET_EXEC`` at its own addresses,
    ``ET_DYN`` (static-pie) with its lowest page at :data:`ET_DYN_BASE`.

    Args:
        va_limit: first virtual address above the user address space (bytes).

    Raises:
        ImageError: not an ELF64 little-endian AArch64 ``ET_EXEC``/``ET_DYN``; dynamically
            linked (``PT_INTERP``); no ``PT_LOAD``; an offset or size outside the file; a
            segment outside ``[0, va_limit)``; overlapping segments.
    """
    path = Path(path)
    raw = read_input(path, MAX_PROGRAM_BYTES, "a program")
    if raw[:4] == b"\x7fELF" and (len(raw) < 64 or raw[4] != 2 or raw[5] != 1):
        raise ImageError(f"{path}: not a little-endian ELF64 file")
    with elf_errors(path):
        elf = open_elf(path, raw, ("ET_EXEC", "ET_DYN"), "ET_EXEC or ET_DYN")
        etype = elf["e_type"]
        phoff, phent, phnum = elf["e_phoff"], elf["e_phentsize"], elf["e_phnum"]
        if phnum == 0 or phent < 56:
            raise ImageError(f"{path}: program headers outside the file (e_phoff {phoff:#x}, "
                             f"{phnum} x {phent} bytes)")
        loads, phdr_va = [], None
        for seg in elf.iter_segments():
            kind = seg["p_type"]
            if kind == "PT_INTERP":
                raise ImageError(f"{path}: dynamically linked (PT_INTERP): spe-emu runs static "
                                 f"programs (link with -static or -static-pie; a bare-metal "
                                 f"image needs --no-firmware)")
            if kind == "PT_PHDR":
                phdr_va = seg["p_vaddr"]
            if kind != "PT_LOAD":
                continue
            va, off = seg["p_vaddr"], seg["p_offset"]
            data = segment_bytes(path, raw, seg)
            if (va - off) % PAGE:
                raise ImageError(f"{path}: PT_LOAD at {va:#x}: p_vaddr and p_offset disagree "
                                 f"modulo the 4 KiB page size")
            loads.append((va, off, data, seg["p_memsz"], seg["p_flags"] & (PF_R | PF_W | PF_X)))
        if not loads:
            raise ImageError(f"{path}: no PT_LOAD segments")
        entry = elf["e_entry"]
        lowest = min(va for va, *_ in loads) & ~(PAGE - 1)
        bias = ET_DYN_BASE - lowest if etype == "ET_DYN" else 0
        symbols = symbols_of(path, elf, bias)
    segments = []
    for va, off, data, memsz, flags in sorted(loads):
        lo, hi = va + bias, va + bias + memsz
        if lo < PAGE or hi > va_limit:
            raise ImageError(f"{path}: PT_LOAD {lo:#x}-{hi:#x} outside the user address space "
                             f"{PAGE:#x}-{va_limit:#x}")
        if segments and lo < segments[-1].end:
            raise ImageError(f"{path}: PT_LOAD segments overlap at {lo:#x}")
        segments.append(Segment(lo, lo, data, memsz, flags))
    if phdr_va is None:  # the program headers inside a PT_LOAD's file bytes
        phdr_va = next((va + (phoff - off) for va, off, data, _m, _f in loads
                        if off <= phoff and phoff + phent * phnum <= off + len(data)), None)
        if phdr_va is None:
            raise ImageError(f"{path}: the program headers are not loaded (no PT_PHDR, no "
                             f"PT_LOAD holds e_phoff {phoff:#x})")
    return LinuxProgram(path=path, bias=bias, entry=entry + bias,
                        phdr=phdr_va + bias, phent=phent, phnum=phnum,
                        segments=tuple(segments), symbols=symbols)


def is_linux_program(path: Path, guest_region: tuple[int, int]) -> bool:
    """Whether ``run`` treats ``path`` as a Linux program (rather than a guest linked for the
    firmware's guest region): a static-pie (``ET_DYN``), or an ELF whose entry point is
    outside ``guest_region``. Unreadable or non-ELF files, and what is not a regular file
    (never waited on: :func:`spe_emu.platform.inputs.open_input`), answer False (the guest
    loader then names the problem)."""
    try:
        with open_input(path) as f:
            head = f.read(64)
    except (SpeEmuError, OSError):
        return False
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return False
    e_type = int.from_bytes(head[16:18], "little")
    entry = int.from_bytes(head[24:32], "little")
    return e_type == 3 or not guest_region[0] <= entry < guest_region[1]
