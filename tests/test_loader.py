"""ELF loading: hand-made images (always) and binutils-built ones (when the cross tools exist)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from spe_emu.platform.loader import PF_R, PF_W, PF_X, Image, Segment, load_elf
from spe_emu.errors import ImageError

EM_AARCH64, EM_X86_64 = 183, 62
ET_REL, ET_EXEC, ET_DYN = 1, 2, 3
PT_LOAD, PT_NOTE = 1, 4


def elf64(*, cls: int = 2, data: int = 1, etype: int = ET_EXEC, machine: int = EM_AARCH64,
          entry: int = 0x4800_0000, segments: list[tuple[int, int, int, bytes, int]] = ()
          ) -> bytes:
    """A section-less ELF64: header, program headers, then the segment bytes.
    ``segments`` holds (p_type, p_flags, vaddr, file bytes, memsz)."""
    phoff = 64
    body_off = phoff + 56 * len(segments)
    phdrs, body = b"", b""
    for p_type, flags, vaddr, payload, memsz in segments:
        phdrs += struct.pack("<IIQQQQQQ", p_type, flags, body_off + len(body), vaddr, vaddr,
                             len(payload), memsz, 0x1000)
        body += payload
    ident = b"\x7fELF" + bytes([cls, data, 1, 0]) + bytes(8)
    endian = "<" if data == 1 else ">"
    header = ident + struct.pack(endian + "HHIQQQIHHHHHH", etype, machine, 1, entry,
                                 phoff if segments else 0, 0, 0, 64, 56, len(segments), 64, 0, 0)
    return header + phdrs + body


def write(tmp_path: Path, name: str, raw: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(raw)
    return path


CODE = bytes.fromhex("1f2003d5") * 4      # four NOPs


# ---- hand-made images -----------------------------------------------------------------------


def test_hand_made_executable(tmp_path):
    path = write(tmp_path, "ok.elf", elf64(segments=[
        (PT_LOAD, PF_R | PF_X, 0x4800_0000, CODE, len(CODE)),
        (PT_NOTE, PF_R, 0x4800_1000, b"note", 4),
        (PT_LOAD, PF_R | PF_W, 0x4801_0000, b"\x01\x02", 0x100),
    ]))
    image = load_elf(path)
    assert image.path == path
    assert image.entry == 0x4800_0000
    assert image.segments == [
        Segment(0x4800_0000, 0x4800_0000, CODE, 16, PF_R | PF_X),
        Segment(0x4801_0000, 0x4801_0000, b"\x01\x02", 0x100, PF_R | PF_W),
    ]
    assert image.symbols == {}
    assert image.function_at(0x4800_0004) is None
    with pytest.raises(ImageError) as info:
        image.symbol("spe_fw_config")
    assert str(info.value) == f"{path}: symbol 'spe_fw_config' not found"


def test_missing_file(tmp_path):
    path = tmp_path / "nope.elf"
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert str(info.value) == f"{path}: no such file"


def test_text_file(tmp_path):
    path = write(tmp_path, "notes.txt", b"just some text\n")
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert str(info.value) == f"{path}: not an ELF file (bad magic b'just')"


def test_empty_file(tmp_path):
    path = write(tmp_path, "empty", b"")
    with pytest.raises(ImageError, match=r"not an ELF file \(bad magic b''\)"):
        load_elf(path)


def test_truncated_header(tmp_path):
    path = write(tmp_path, "trunc.elf", elf64()[:20])
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert str(info.value) == f"{path}: truncated ELF header (20 bytes, an ELF64 header has 64)"


def test_truncated_program_headers(tmp_path):
    raw = elf64(segments=[(PT_LOAD, PF_R | PF_X, 0x4800_0000, CODE, 16)])
    path = write(tmp_path, "short.elf", raw[:80])
    with pytest.raises(ImageError, match=rf"^{path}: "):
        load_elf(path)


def test_segment_past_end_of_file(tmp_path):
    raw = elf64(segments=[(PT_LOAD, PF_R | PF_X, 0x4800_0000, CODE, 16)])
    path = write(tmp_path, "cut.elf", raw[:-4])
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert str(info.value) == (f"{path}: PT_LOAD at 0x48000000 extends past the end of the file "
                               f"(truncated?)")


def test_filesz_larger_than_memsz(tmp_path):
    path = write(tmp_path, "big.elf", elf64(segments=[(PT_LOAD, PF_R, 0x4800_0000, CODE, 8)]))
    with pytest.raises(ImageError, match="p_filesz 0x10 > p_memsz 0x8"):
        load_elf(path)


def test_elfclass32(tmp_path):
    path = write(tmp_path, "c32.elf", elf64(cls=1))
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert str(info.value) == f"{path}: not a 64-bit ELF (EI_CLASS = 1, need ELFCLASS64 = 2)"


def test_big_endian(tmp_path):
    path = write(tmp_path, "be.elf", elf64(data=2))
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert str(info.value) == f"{path}: not little-endian (EI_DATA = 2, need ELFDATA2LSB = 1)"


def test_wrong_machine(tmp_path):
    path = write(tmp_path, "x86.elf", elf64(machine=EM_X86_64))
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert str(info.value) == f"{path}: not an AArch64 ELF (e_machine = EM_X86_64, need EM_AARCH64)"


@pytest.mark.parametrize("etype,name", [(ET_DYN, "ET_DYN"), (ET_REL, "ET_REL")])
def test_not_executable(tmp_path, etype, name):
    path = write(tmp_path, "dyn.elf", elf64(etype=etype))
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert str(info.value) == (f"{path}: not an executable (e_type = {name}, need ET_EXEC; link "
                               f"with a fixed address, not -pie/-shared)")


def test_no_load_segments(tmp_path):
    path = write(tmp_path, "noload.elf", elf64(segments=[(PT_NOTE, PF_R, 0, b"n", 1)]))
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert str(info.value) == f"{path}: no PT_LOAD segments"


def test_host_executable_is_refused():
    true = Path(shutil.which("true") or "/bin/true").resolve()
    if not true.exists() or true.read_bytes()[:4] != b"\x7fELF":
        pytest.skip("no ELF host executable")
    with pytest.raises(ImageError, match=rf"^{true}: not an AArch64 ELF \(e_machine = EM_"):
        load_elf(true)


def test_string_path_is_accepted(tmp_path):
    path = write(tmp_path, "ok.elf", elf64(segments=[(PT_LOAD, PF_R | PF_X, 0x1000, CODE, 16)]))
    assert load_elf(str(path)).path == path


# ---- function_at on a hand-built symbol table ----------------------------------------------


def test_function_at_rules():
    image = Image(Path("x.elf"), 0x1000, [
        Segment(0x1000, 0x1000, bytes(0x100), 0x100, PF_R | PF_X),
        Segment(0x2000, 0x2000, b"", 0x100, PF_R | PF_W),
    ], symbols={
        "_start": (0x1000, 0),        # assembly label, no size
        "alias_start": (0x1000, 0),
        "main": (0x1040, 0x20),
        "inner": (0x1048, 0x4),
        "after": (0x1080, 0),
        "data_obj": (0x2000, 0x10),
    })
    assert image.function_at(0x1000) == ("_start", 0)   # first name among equals
    assert image.function_at(0x103C) == ("_start", 0x3C)
    assert image.function_at(0x1044) == ("main", 4)
    assert image.function_at(0x1049) == ("inner", 1)
    assert image.function_at(0x1050) == ("main", 0x10)  # enclosing sized symbol
    assert image.function_at(0x1070) is None            # past main, no label in between
    assert image.function_at(0x10F0) == ("after", 0x70)
    assert image.function_at(0x2004) is None            # not executable
    assert image.function_at(0x0FFF) is None


# ---- binutils-built images ------------------------------------------------------------------

AS = shutil.which("aarch64-linux-gnu-as")
LD = shutil.which("aarch64-linux-gnu-ld")
needs_binutils = pytest.mark.skipif(not (AS and LD), reason="aarch64 binutils not installed")

SOURCE = """
    .text
    .global _start
_start:
    b main
    .type main, %function
    .global main
main:
    mov x0, #1
    ret
    .size main, . - main
    .data
    .balign 8
    .global spe_fw_config
    .type spe_fw_config, %object
spe_fw_config:
    .quad 0x5350455F46570001
    .quad 0x48000000
    .size spe_fw_config, . - spe_fw_config
    .bss
buffer:
    .space 64
"""


def build(tmp_path: Path, *ld_flags: str) -> Path:
    src = tmp_path / "prog.S"
    src.write_text(SOURCE)
    obj, out = tmp_path / "prog.o", tmp_path / "prog.elf"
    subprocess.run([AS, "-o", obj, src], check=True, capture_output=True)
    subprocess.run([LD, "-static", "-nostdlib", "-Ttext=0x48000000", "-Tdata=0x48010000",
                    *ld_flags, "-o", out, obj], check=True, capture_output=True)
    return out


@needs_binutils
def test_binutils_executable(tmp_path):
    image = load_elf(build(tmp_path))
    assert image.entry == 0x4800_0000
    assert image.symbol("_start") == 0x4800_0000
    assert image.symbols["main"] == (0x4800_0004, 8)
    assert image.symbols["spe_fw_config"] == (0x4801_0000, 16)
    assert "buffer" in image.symbols                  # local symbols are kept
    assert not any(name.startswith("$") for name in image.symbols)
    text = next(s for s in image.segments if s.contains(0x4800_0000))  # may include headers
    assert text.flags == PF_R | PF_X
    start = 0x4800_0000 - text.vaddr
    assert text.data[start:start + 4] == bytes.fromhex("01000014")  # b main
    data = next(s for s in image.segments if s.contains(0x4801_0000))
    assert data.flags == PF_R | PF_W
    at = 0x4801_0000 - data.vaddr
    assert data.data[at:at + 16] == (0x5350455F46570001).to_bytes(8, "little") + \
        (0x48000000).to_bytes(8, "little")
    assert data.end >= 0x4801_0000 + 16 + 64           # .bss tail is zero-filled memory
    assert len(data.data) < data.memsz
    assert image.function_at(0x4800_0000) == ("_start", 0)
    assert image.function_at(0x4800_0008) == ("main", 4)
    with pytest.raises(ImageError, match=r"symbol 'missing' not found"):
        image.symbol("missing")


@needs_binutils
def test_binutils_object_and_pie_are_refused(tmp_path):
    build(tmp_path)
    with pytest.raises(ImageError, match=r"e_type = ET_REL, need ET_EXEC"):
        load_elf(tmp_path / "prog.o")
    pie = tmp_path / "pie.elf"
    subprocess.run([LD, "-pie", "-nostdlib", "-o", pie, tmp_path / "prog.o"], check=True,
                   capture_output=True)
    with pytest.raises(ImageError, match=r"e_type = ET_DYN, need ET_EXEC"):
        load_elf(pie)


def _section_header(raw: bytes, section: bytes = b".symtab") -> int:
    """File offset of a section's header (ELF64, little-endian)."""
    shoff, = struct.unpack_from("<Q", raw, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", raw, 0x3A)
    names_off, = struct.unpack_from("<Q", raw, shoff + shstrndx * shentsize + 24)
    for i in range(shnum):
        name, = struct.unpack_from("<I", raw, shoff + i * shentsize)
        if raw[names_off + name:].startswith(section + b"\0"):
            return shoff + i * shentsize
    raise AssertionError(f"no {section!r}")


@needs_binutils
@pytest.mark.parametrize("field, offset, fmt, value, problem", [
    ("sh_link past the section headers", 40, "<I", 0xFFF0, r"malformed ELF"),
    ("sh_link to .text", 40, "<I", 1, r"(SHT_STRTAB|not a string table)"),
    ("sh_entsize 0", 56, "<Q", 0, r"(entry size|sh_entsize)"),
    ("sh_entsize 12", 56, "<Q", 12, r"sh_entsize 12 .* \(an ELF64 symbol is 24 bytes\)"),
])
def test_a_malformed_symbol_table_is_refused_at_load(tmp_path, field, offset, fmt, value,
                                                    problem):
    """The .symtab's headers are checked when the image loads (its symbols are parsed only
    when first looked up: LazySymbols)."""
    raw = bytearray(build(tmp_path).read_bytes())
    struct.pack_into(fmt, raw, _section_header(raw) + offset, value)
    with pytest.raises(ImageError, match=problem):
        load_elf(write(tmp_path, "bad.elf", bytes(raw)))


def _name_past_its_table(raw: bytearray) -> None:
    symtab, = struct.unpack_from("<Q", raw, _section_header(raw) + 24)
    struct.pack_into("<I", raw, symtab + 24, 0x7FFF_FFFF)   # (symbol 1's st_name)


def _last_name_without_its_nul(raw: bytearray) -> None:
    strtab = _section_header(raw, b".strtab")
    size, = struct.unpack_from("<Q", raw, strtab + 32)
    struct.pack_into("<Q", raw, strtab + 32, size - 1)   # (cuts the last name's NUL)


@needs_binutils
@pytest.mark.parametrize("corrupt, at", [(_name_past_its_table, "0x7fffffff"),
                                         (_last_name_without_its_nul, "0x[0-9a-f]+")])
def test_a_bad_symbol_name_is_an_image_error_at_the_first_look_up(tmp_path, corrupt, at):
    """A symbol whose st_name is past its string table, or whose name runs to the table's
    end without a NUL: the image loads (the run needs no symbols), and looking a symbol up
    raises ImageError naming the file and the name's offset."""
    raw = bytearray(build(tmp_path).read_bytes())
    corrupt(raw)
    image = load_elf(write(tmp_path, "bad.elf", bytes(raw)))
    with pytest.raises(ImageError, match=rf"bad\.elf: \.symtab: the name at {at} is not a "
                                         r"string of its string table"):
        image.symbol("main")


@needs_binutils
def test_the_symbol_tables_are_read_as_the_file_holds_them(tmp_path):
    """A string table flagged SHF_COMPRESSED is read as its bytes are, not expanded (it is
    not zlib data here: expanding it would fail), as pyelftools' own symbol iteration does;
    and a symbol table holding only the null symbol, with an empty string table, has no
    symbols."""
    path = build(tmp_path)
    raw = bytearray(path.read_bytes())
    strtab = _section_header(raw, b".strtab")
    flags, = struct.unpack_from("<Q", raw, strtab + 8)
    struct.pack_into("<Q", raw, strtab + 8, flags | 0x800)   # (SHF_COMPRESSED)
    image = load_elf(write(tmp_path, "flagged.elf", bytes(raw)))
    assert dict(image.symbols) == dict(load_elf(path).symbols)
    raw = bytearray(path.read_bytes())
    struct.pack_into("<Q", raw, _section_header(raw) + 32, 24)      # (the null symbol)
    struct.pack_into("<Q", raw, _section_header(raw, b".strtab") + 32, 0)
    assert dict(load_elf(write(tmp_path, "empty.elf", bytes(raw))).symbols) == {}
