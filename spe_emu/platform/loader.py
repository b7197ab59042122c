"""Loading AArch64 ELF executables (firmware and guests) with pyelftools.

Reference: the System V gABI ELF-64 object file format and the Arm *ELF for the Arm 64-bit
Architecture (AArch64)* ABI (IHI 0056). Only what the machine needs is kept: the entry point,
the ``PT_LOAD`` segments (file bytes plus the zero-filled tail up to ``p_memsz``) and the
symbol table (for the firmware config block and for naming PCs in reports).
"""

from __future__ import annotations

import bisect
import io
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.construct import ConstructError
from elftools.elf.constants import P_FLAGS
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from ..errors import ImageError
from .inputs import read_input

PF_X, PF_W, PF_R = P_FLAGS.PF_X, P_FLAGS.PF_W, P_FLAGS.PF_R
ELF_MAGIC = b"\x7fELF"
EM_AARCH64 = "EM_AARCH64"


@dataclass(frozen=True)
class Segment:
    """One ``PT_LOAD`` segment.

    Attributes:
        vaddr, paddr: ``p_vaddr`` / ``p_paddr`` (bytes).
        data: the ``p_filesz`` bytes from the file; the rest up to ``memsz`` is zero.
        memsz: ``p_memsz`` in bytes (>= ``len(data)``).
        flags: ``p_flags``, a mask of :data:`PF_X`, :data:`PF_W`, :data:`PF_R`.
    """

    vaddr: int
    paddr: int
    data: bytes
    memsz: int
    flags: int

    @property
    def end(self) -> int:
        """First virtual address after the segment."""
        return self.vaddr + self.memsz

    def contains(self, addr: int) -> bool:
        return self.vaddr <= addr < self.end


@dataclass
class Image:
    """A loaded executable.

    Attributes:
        path: the file it was read from.
        entry: ``e_entry``.
        segments: the ``PT_LOAD`` segments in program-header order.
        symbols: ``name -> (st_value, st_size)`` for the defined, named symbols of ``.symtab``
            (sections, files and the ``$x``/``$d`` mapping symbols left out). When a name is
            defined more than once, a global or weak definition wins over a local one, and the
            first one in the table wins otherwise.
    """

    path: Path
    entry: int
    segments: list[Segment]
    symbols: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    _code_index: list[tuple[int, str, int]] | None = field(default=None, init=False, repr=False,
                                                            compare=False)

    def symbol(self, name: str) -> int:
        """The value (address) of ``name``. Raises :class:`ImageError` naming the symbol and
        the file if it is absent."""
        try:
            return self.symbols[name][0]
        except KeyError:
            raise ImageError(f"{self.path}: symbol {name!r} not found") from None

    def function_at(self, addr: int) -> tuple[str, int] | None:
        """``(name, offset)`` of the code symbol containing ``addr``, or None.

        Only symbols inside executable segments count. A symbol with a size contains
        ``[value, value + size)``; otherwise (assembly labels without ``.size``) the nearest
        symbol at or below ``addr`` in the same segment is used, unless a sized symbol ends
        between them. Among candidates the innermost (highest start) wins; ties go to the
        lexicographically first name, so the answer is deterministic.
        """
        seg = next((s for s in self.segments if s.flags & PF_X and s.contains(addr)), None)
        if seg is None:
            return None
        table = self._code_table()
        below = bisect.bisect_right(table, (addr, "\U0010ffff"))  # entries with value <= addr
        blocked = False  # a sized symbol ended between addr and the candidates further down
        for value, name, size in reversed(table[:below]):
            if not seg.contains(value):
                break
            if size:
                if addr < value + size:
                    return name, addr - value
                blocked = True
            elif not blocked:
                return name, addr - value
        return None

    def _code_table(self) -> list[tuple[int, str, int]]:
        """Symbols inside executable segments, sorted by address; one per address (the sized
        one if any, then the first name). Built on first use."""
        if self._code_index is None:
            exec_segs = [s for s in self.segments if s.flags & PF_X]
            best: dict[int, tuple[int, str, int]] = {}
            for name, (value, size) in sorted(self.symbols.items()):
                if not any(s.contains(value) for s in exec_segs):
                    continue
                if value not in best or (size and not best[value][2]):
                    best[value] = (value, name, size)
            self._code_index = sorted(best.values())
        return self._code_index


def _fail(path: Path, problem: str) -> ImageError:
    return ImageError(f"{path}: {problem}")


MAX_IMAGE_BYTES = 256 << 20
"""Largest ELF file accepted (bytes)."""


def load_elf(path: str | Path) -> Image:
    """Read an AArch64 little-endian ELF64 executable (``ET_EXEC``).

    Raises:
        ImageError: the file is missing or unreadable, is not an ELF file (bad magic), is
            truncated or malformed, is not ELFCLASS64 / little-endian / EM_AARCH64, is not
            ``ET_EXEC``, has no ``PT_LOAD`` segment, or has a segment whose file bytes are
            missing or larger than its memory size. The message names the file and the
            problem.
    """
    path = Path(path)
    raw = read_input(path, MAX_IMAGE_BYTES, "an image")   # (a regular file only: .inputs)
    with elf_errors(path):
        elf = open_elf(path, raw, ("ET_EXEC",),
                       "ET_EXEC; link with a fixed address, not -pie/-shared")
        segments = [Segment(seg["p_vaddr"], seg["p_paddr"], segment_bytes(path, raw, seg),
                            seg["p_memsz"], seg["p_flags"] & (PF_X | PF_W | PF_R))
                    for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
        if not segments:
            raise _fail(path, "no PT_LOAD segments")
        entry = elf["e_entry"]
        symbols = symbols_of(path, elf)
    return Image(path=path, entry=entry, segments=segments, symbols=symbols)


@contextmanager
def elf_errors(path: Path) -> Iterator[None]:
    """Inside the block, pyelftools' exceptions on a truncated or malformed file become one
    :class:`ImageError` naming ``path`` (its bundled construct raises ConstructError
    subclasses on short data)."""
    try:
        yield
    except (ELFError, ConstructError, ValueError, KeyError, IndexError, EOFError,
            OverflowError) as exc:
        raise _fail(path, f"malformed ELF: {type(exc).__name__}: {exc}") from None


def open_elf(path: Path, raw: bytes, e_types: tuple[str, ...], need: str) -> ELFFile:
    """``raw`` (the bytes of ``path``) as an :class:`ELFFile` after checking the ELF header
    (gABI "ELF Header": magic, ELFCLASS64, ELFDATA2LSB, EM_AARCH64, ``e_type`` one of
    ``e_types``; ``need`` says what is accepted) and that the header tables and sections lie
    inside the file (:func:`check_tables`). Call it inside :func:`elf_errors`.

    Raises:
        ImageError: naming the file and the first problem found.
    """
    if raw[:4] != ELF_MAGIC:
        raise _fail(path, f"not an ELF file (bad magic {raw[:4]!r})")
    if len(raw) < 64:
        raise _fail(path, f"truncated ELF header ({len(raw)} bytes, an ELF64 header has 64)")
    if raw[4] != 2:
        raise _fail(path, f"not a 64-bit ELF (EI_CLASS = {raw[4]}, need ELFCLASS64 = 2)")
    if raw[5] != 1:
        raise _fail(path, f"not little-endian (EI_DATA = {raw[5]}, need ELFDATA2LSB = 1)")
    elf = ELFFile(io.BytesIO(raw))
    machine = elf["e_machine"]
    if machine != EM_AARCH64:
        raise _fail(path, f"not an AArch64 ELF (e_machine = {machine}, need {EM_AARCH64})")
    if elf["e_type"] not in e_types:
        raise _fail(path, f"not an executable (e_type = {elf['e_type']}, need {need})")
    check_tables(path, elf, raw)
    return elf


def segment_bytes(path: Path, raw: bytes, seg) -> bytes:
    """The ``p_filesz`` file bytes of the ``PT_LOAD`` segment ``seg`` (a pyelftools segment
    of the file ``raw``).

    Raises:
        ImageError: ``p_filesz > p_memsz``, or the bytes extend past the end of the file.
    """
    off, filesz, memsz = seg["p_offset"], seg["p_filesz"], seg["p_memsz"]
    if filesz > memsz:
        raise _fail(path, f"PT_LOAD at {seg['p_vaddr']:#x} has p_filesz {filesz:#x} > "
                          f"p_memsz {memsz:#x}")
    if off + filesz > len(raw):
        raise _fail(path, f"PT_LOAD at {seg['p_vaddr']:#x} extends past the end of the "
                          f"file (truncated?)")
    return raw[off:off + filesz]


SHT_NOBITS = 8
SHDR = struct.Struct("<IIQQQQIIQQ")
"""Elf64_Shdr: sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info,
sh_addralign, sh_entsize (gABI, "Section Header")."""


def check_tables(path: Path, elf: ELFFile, raw: bytes) -> None:
    """The program and section header tables, and every section's bytes, lie inside the
    file ``raw`` (offsets up to 2**64 - 1 are refused here, before anything seeks to them).

    Raises:
        ImageError: naming the table or section.
    """
    size = len(raw)
    for what, off, num, ent in (("program headers", elf["e_phoff"], elf["e_phnum"],
                                 elf["e_phentsize"]),
                                ("section headers", elf["e_shoff"], elf["e_shnum"],
                                 elf["e_shentsize"])):
        if num and (off > size or num * ent > size - off):
            raise _fail(path, f"{what} outside the file (offset {off:#x}, {num} x {ent} bytes)")
    if elf["e_shentsize"] < SHDR.size:
        return
    for i in range(elf["e_shnum"]):
        _n, kind, _f, _a, off, sz, *_ = SHDR.unpack_from(raw, elf["e_shoff"]
                                                          + i * elf["e_shentsize"])
        if kind != SHT_NOBITS and (off > size or sz > size - off):
            raise _fail(path, f"section {i} outside the file (sh_offset {off:#x}, "
                              f"sh_size {sz:#x})")


class LazySymbols(Mapping):
    """The ``.symtab`` symbols of an ELF file: name -> (``st_value`` + ``bias``, ``st_size``,
    in bytes), a global or weak one winning over a local of the same name; undefined,
    section, file and mapping (``$x``, ``$d``) symbols left out. Parsed when first looked
    up: a run looks up only the firmware's configuration symbol (reports read the file
    themselves), and pyelftools takes about 60 ms over the 3,000 symbols of a static glibc
    program (``spe-emu run`` of examples/linux-user/bench.c). Made by :func:`symbols_of`,
    which checks the table's headers at load and keeps only the bytes of the table and of
    its string table.

    Raises (on first use):
        ImageError: a symbol's name starts outside its string table, or has no NUL before
            the table's end (naming the file)."""

    def __init__(self, path: Path, parts: tuple | None, bias: int = 0):
        self._path, self._parts, self._bias = path, parts, bias
        self._table: dict[str, tuple[int, int]] | None = None

    def _symbols(self) -> dict[str, tuple[int, int]]:
        if self._table is None:
            table = {} if self._parts is None else _parse_symbols(self._path, *self._parts)
            self._table = {name: (value + self._bias, size)
                           for name, (value, size) in table.items()}
            self._parts = None
        return self._table

    def __getitem__(self, name: str) -> tuple[int, int]:
        return self._symbols()[name]

    def __iter__(self):
        return iter(self._symbols())

    def __len__(self) -> int:
        return len(self._symbols())


def symbols_of(path: Path, elf: ELFFile, bias: int = 0) -> LazySymbols:
    """The ``.symtab`` symbols of ``elf`` (read from ``path``), to be parsed on first use
    (:class:`LazySymbols`; empty without a ``.symtab``). The tables' bytes are kept as the
    file holds them (a table marked SHF_COMPRESSED is not expanded, as pyelftools' symbol
    iteration never did). Call it inside :func:`elf_errors`.

    Raises:
        ImageError: the ``.symtab``'s entry size is not an ELF64 symbol's, its size is not a
            multiple of it, or its ``sh_link`` is not a string table (gABI "Symbol Table";
            pyelftools refuses most of these itself, with its own message)."""
    symtab = elf.get_section_by_name(".symtab")
    if not isinstance(symtab, SymbolTableSection):
        return LazySymbols(path, None, bias)
    entsize = elf.structs.Elf_Sym.sizeof()
    if symtab["sh_entsize"] != entsize or symtab["sh_size"] % entsize:
        raise _fail(path, f".symtab: sh_entsize {symtab['sh_entsize']} and sh_size "
                          f"{symtab['sh_size']} (an ELF64 symbol is {entsize} bytes)")
    link = symtab["sh_link"]
    if not 0 < link < elf.num_sections() or elf.get_section(link)["sh_type"] != "SHT_STRTAB":
        raise _fail(path, f".symtab: sh_link {link} is not a string table")
    return LazySymbols(path, (elf.structs, _section_bytes(elf, symtab),
                              _section_bytes(elf, elf.get_section(link))), bias)


def _section_bytes(elf: ELFFile, section) -> bytes:
    """A section's bytes as the file holds them (:func:`check_tables` has bounded them)."""
    elf.stream.seek(section["sh_offset"])
    return elf.stream.read(section["sh_size"])


def _parse_symbols(path: Path, structs, symtab: bytes, strtab: bytes
                   ) -> dict[str, tuple[int, int]]:
    """The symbols (:class:`LazySymbols`, without the bias) of a symbol table's bytes, its
    string table's and the file's pyelftools structs (``Elf_Sym``)."""
    out: dict[str, tuple[int, int]] = {}
    is_global: dict[str, bool] = {}
    sym_struct = structs.Elf_Sym
    size = sym_struct.sizeof()
    with elf_errors(path):
        for offset in range(0, len(symtab), size):
            sym = sym_struct.parse(symtab[offset:offset + size])
            at = sym["st_name"]
            if not at:   # (the empty name, even of an empty string table: nothing to keep)
                continue
            end = strtab.find(b"\0", at)
            if at >= len(strtab) or end < 0:
                raise _fail(path, f".symtab: the name at {at:#x} is not a string of its "
                                  f"string table ({len(strtab)} bytes)")
            name = strtab[at:end].decode("utf-8", errors="replace")
            info = sym["st_info"]
            if (not name or sym["st_shndx"] == "SHN_UNDEF"
                    or info["type"] in ("STT_SECTION", "STT_FILE")
                    or name.startswith("$")):
                continue
            glob = info["bind"] in ("STB_GLOBAL", "STB_WEAK")
            if name in out and (is_global[name] or not glob):
                continue
            out[name] = (sym["st_value"], sym["st_size"])
            is_global[name] = glob
    return out
