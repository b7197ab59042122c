#!/usr/bin/env python3
"""Build a Linux guest for ``spe-emu run --machine virt``: Debian 12's stock arm64 kernel, its
``arm_spe_pmu.ko`` and initramfs variants from Debian's arm64 packages (docs/linux.md).

    python scripts/build_linux_guest.py                  # build (downloads once, cached)
    python scripts/build_linux_guest.py --print-dir      # where the outputs are
    spe-emu run --machine virt -m 1G --kernel ~/.cache/spe_emu/linux/guest/vmlinuz \\
        --initrd ~/.cache/spe_emu/linux/guest/probe.cpio.gz --append console=ttyAMA0

Steps (as root, as on the developers' machines and CI):

1. ``dpkg --add-architecture arm64`` and ``apt-get update`` when apt knows no arm64 package.
2. ``apt-get download`` into ``CACHE/debs``: the newest ``linux-image-6.1.0-N-arm64`` (the
   highest ABI number N apt knows), ``busybox-static``, ``linux-perf`` and the library
   packages perf's dependencies name, followed recursively (``apt-cache depends``, Depends
   only, first of each alternative, library packages only: names starting ``lib`` and
   ``zlib1g``). A package already in ``CACHE/debs`` is not downloaded again.
3. ``dpkg-deb -x`` of every package into ``CACHE/root``.
4. The shared-library closure of ``/usr/bin/perf`` is what the dynamic linker will load: its
   ``PT_INTERP`` and ``DT_NEEDED`` entries, followed recursively through the libraries'
   own ``DT_NEEDED`` (read with pyelftools, the ``readelf -d`` view), each soname looked up
   in the extracted multiarch library directories. The downloaded packages only need to hold
   that closure; an soname found nowhere is an error naming it.
   ``--kernel-package NAME`` takes another kernel instead, e.g. Debian 12's 6.12 kernels
   ``linux-image-6.12-arm64`` (4 KiB pages) and ``linux-image-6.12-arm64-16k`` (16 KiB
   pages): a metapackage is followed to the image package it depends on; their modules are
   ``.ko.xz``, decompressed into the outputs and the initramfs (busybox's insmod takes ELF).
5. Outputs in ``CACHE/guest`` (``CACHE/guest-NAME`` with ``--kernel-package NAME``;
   ``--out`` changes it): ``vmlinuz`` (the kernel's Image,
   gzip-compressed), ``arm_spe_pmu.ko`` (and the modules its ``.modinfo`` ``depends=`` names,
   none in 6.1), ``probe.cpio.gz`` and ``perf.cpio.gz`` (newc cpio + gzip, written by
   :mod:`spe_emu.tools.cpio`; fixed owners and times, so the same packages give the same
   bytes), and ``manifest.json`` (package versions, file sizes and SHA-256).

``CACHE`` is ``~/.cache/spe_emu/linux`` (``$SPE_EMU_LINUX_CACHE`` or ``--cache`` changes it).
Nothing here is committed to the repository.

Initramfs variants (their ``/init`` is a busybox ``sh`` script; every line it prints itself
starts with ``spe-guest:``):

* ``probe``: mounts proc, sysfs and devtmpfs, ``insmod arm_spe_pmu.ko``, prints the kernel log
  lines naming ``arm_spe``, ``/sys/bus/event_source/devices/arm_spe_0/caps/*`` with their
  values and the names in its ``format/``, then ``poweroff -f`` (PSCI SYSTEM_OFF).
* ``perf``: as ``probe``, then WORKLOAD alone and ``perf record -e arm_spe_0/ts_enable=1,
  pa_enable=1,load_filter=1,store_filter=1,branch_filter=1/ -c 4096 -o /tmp/perf.data --
  WORKLOAD`` (``spe_event=EVENT`` on the kernel command line replaces the event), each
  timed with the guest's clock, ``perf report --stdio`` (also ``--sort pid``), ``perf
  script | head``, ``semihost-put perf.data < /tmp/perf.data`` (the file to the
  host's output directory: ``spe-emu run --semihosting-userspace``), then powers off.
  ``--workload`` replaces the default WORKLOAD, ``/usr/bin/spe-workload`` (:func:`workload_tool`:
  about 100 M instructions in the functions ``fill_array``, ``sum_array`` and ``branchy``).
  ``symfs/usr/bin`` in the output directory holds the guest's own programs for the host's
  ``perf report --symfs``.
* ``open``: as ``probe``, then ``spe-open`` (:func:`open_tool`) with arm_spe_0's type and the
  config words ``spe_config=``, ``spe_config1=``, ``spe_config2=``, ``spe_config3=`` (and
  ``spe_rounds=``) of the kernel command line: any format attribute the driver offers, e.g.
  6.12's ``inv_event_filter`` (config3), which Debian 12's perf 6.1 cannot set.

Exit status: 0 built; 1 a step failed (one line on stderr naming it).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from spe_emu.tools.cpio import Newc  # noqa: E402

ARCH = "arm64"
KERNEL_PACKAGE = re.compile(r"^linux-image-6\.1\.0-(\d+)-arm64$")
BASE_PACKAGES = ("busybox-static", "linux-perf")
LIBRARY_PACKAGE = re.compile(r"^(lib|zlib1g)")
MULTIARCH = "aarch64-linux-gnu"
LIB_DIRS = (f"lib/{MULTIARCH}", f"usr/lib/{MULTIARCH}", "lib", "usr/lib")
"""Where the extracted packages keep shared libraries, searched in this order."""
SPE_MODULE = "arm_spe_pmu"
SPE_EVENT = ("arm_spe_0/ts_enable=1,pa_enable=1,load_filter=1,store_filter=1,"
             "branch_filter=1/")
PERIOD = 4096
DEFAULT_WORKLOAD = "spe-workload"
"""The default WORKLOAD (/usr/bin/spe-workload: :func:`workload_tool`, about 100 M
instructions in three functions perf names)."""
MARK = "spe-guest:"
"""Every line /init prints itself starts with this (the tests read the console for them)."""
VARIANTS = ("probe", "perf", "open")


class BuildError(Exception):
    """A step of the build failed; the message names it."""


def default_cache() -> Path:
    env = os.environ.get("SPE_EMU_LINUX_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "spe_emu" / "linux"


# -- apt -----------------------------------------------------------------------------------
def _run(cmd: list[str], cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise BuildError(f"{cmd[0]}: not found (a Debian host with apt is needed)") from None
    if done.returncode:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise BuildError(f"{' '.join(cmd)}: exit {done.returncode}: {tail[0]}")
    return done.stdout


def _apt_knows_arm64() -> bool:
    try:
        out = _run(["apt-cache", "policy", f"busybox-static:{ARCH}"])
    except BuildError:
        return False
    return "Candidate:" in out and "Candidate: (none)" not in out


def ensure_arm64_apt() -> None:
    """Make apt know Debian's arm64 packages (``dpkg --add-architecture``, ``apt-get
    update``), once.

    Raises:
        BuildError: a command failed (not root, no network).
    """
    if _apt_knows_arm64():
        return
    if ARCH not in _run(["dpkg", "--print-foreign-architectures"]).split():
        _run(["dpkg", "--add-architecture", ARCH])
    _run(["apt-get", "update", "-qq"])
    if not _apt_knows_arm64():
        raise BuildError("apt-get update did not bring arm64 package lists")


def resolve_kernel_package(name: str) -> str:
    """The package that holds the kernel image for ``name``: ``name`` itself, or for a
    metapackage (``linux-image-6.12-arm64``, ``linux-image-arm64``) the ``linux-image-*`` it
    depends on, followed until a package depends on none."""
    seen = set()
    while name not in seen:
        seen.add(name)
        out = _run(["apt-cache", "depends", "--no-recommends", "--no-suggests",
                    f"{name}:{ARCH}"])
        deps = [m.group(1).split(":")[0] for line in out.splitlines()
                if (m := re.match(r"^\s*\|?Depends: (linux-image-\S+)", line))]
        if not deps:
            return name
        name = deps[0]
    raise BuildError(f"{name}: linux-image dependency cycle")


def newest_kernel_package() -> str:
    """``linux-image-6.1.0-N-arm64`` with the highest ABI number N apt knows."""
    out = _run(["apt-cache", "search", "--names-only", r"^linux-image-6\.1\.0-[0-9]+-arm64$"])
    found = [(int(m.group(1)), m.group(0)) for line in out.splitlines()
             if (m := KERNEL_PACKAGE.match(line.split(" ", 1)[0]))]
    if not found:
        raise BuildError("apt knows no linux-image-6.1.0-*-arm64 package")
    return max(found)[1]


def library_closure_packages(roots: tuple[str, ...]) -> list[str]:
    """The library packages ``roots`` depend on, recursively (Depends only; the first of
    each alternative; names matching :data:`LIBRARY_PACKAGE`), roots included, sorted."""
    seen, todo = set(roots), list(roots)
    while todo:
        pkg = todo.pop()
        out = _run(["apt-cache", "depends", "--no-recommends", "--no-suggests",
                    "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
                    f"{pkg}:{ARCH}"])
        alternative = False
        for line in out.splitlines():
            m = re.match(r"^\s*(\|)?(Pre)?Depends: (\S+)", line)
            if not m:
                continue
            name = m.group(3).split(":")[0]
            skip = alternative             # a later member of an alternative group
            alternative = bool(m.group(1))
            if skip or name.startswith("<") or not LIBRARY_PACKAGE.match(name):
                continue
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return sorted(seen)


def cached_deb(debs: Path, package: str) -> Path | None:
    hits = sorted(debs.glob(f"{package}_*_{ARCH}.deb"))
    return hits[-1] if hits else None


def download(packages: list[str], debs: Path) -> dict[str, Path]:
    """``apt-get download`` of each package not already in ``debs``; package -> .deb."""
    debs.mkdir(parents=True, exist_ok=True)
    missing = [p for p in packages if cached_deb(debs, p) is None]
    if missing:
        _run(["apt-get", "download", "-qq"] + [f"{p}:{ARCH}" for p in missing], cwd=debs)
    out = {}
    for p in packages:
        deb = cached_deb(debs, p)
        if deb is None:
            raise BuildError(f"apt-get download {p}:{ARCH} left no .deb in {debs}")
        out[p] = deb
    return out


def deb_version(deb: Path) -> str:
    return _run(["dpkg-deb", "-f", str(deb), "Version"]).strip()


def extract(debs: dict[str, Path], root: Path) -> None:
    """``dpkg-deb -x`` of every package into ``root`` (emptied first)."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for deb in debs.values():
        _run(["dpkg-deb", "-x", str(deb), str(root)])


# -- ELF closure ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Needed:
    """An ELF's dynamic-linking needs: ``interp`` (PT_INTERP path or None) and sonames."""

    interp: str | None
    sonames: tuple[str, ...]


def elf_needs(path: Path) -> Needed:
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            interp = next((s.get_interp_name() for s in elf.iter_segments()
                           if s["p_type"] == "PT_INTERP"), None)
            dyn = elf.get_section_by_name(".dynamic")
            names = tuple(t.needed for t in dyn.iter_tags()
                          if t.entry.d_tag == "DT_NEEDED") if dyn else ()
    except (OSError, ELFError) as exc:
        raise BuildError(f"{path}: cannot read as ELF: {exc}") from None
    return Needed(interp, names)


def find_soname(root: Path, soname: str) -> Path:
    for d in LIB_DIRS:
        p = root / d / soname
        if p.exists():
            return p
    raise BuildError(f"shared library {soname} is in none of the downloaded packages "
                     f"({', '.join(LIB_DIRS)} under {root})")


def library_closure(root: Path, binary: Path) -> dict[str, Path]:
    """soname -> file (symlinks resolved) of every library ``binary`` loads, the dynamic
    linker included (keyed by its PT_INTERP path)."""
    needs = elf_needs(binary)
    out: dict[str, Path] = {}
    if needs.interp:
        p = root / needs.interp.lstrip("/")
        if not p.exists():
            raise BuildError(f"dynamic linker {needs.interp} not in the downloaded packages")
        out[needs.interp] = p.resolve()
    todo = list(needs.sonames)
    while todo:
        soname = todo.pop()
        if soname in out or soname == Path(needs.interp or "").name:
            continue
        path = find_soname(root, soname).resolve()
        out[soname] = path
        todo += elf_needs(path).sonames
    return out


# -- kernel modules ------------------------------------------------------------------------
def modinfo(ko: Path) -> dict[str, str]:
    """The ``key=value`` strings of a module's ``.modinfo`` section (what modinfo prints)."""
    import io
    sec = ELFFile(io.BytesIO(module_bytes(ko))).get_section_by_name(".modinfo")
    data = sec.data() if sec else b""
    pairs = (s.decode(errors="replace").partition("=") for s in data.split(b"\0") if s)
    return {k: v for k, _, v in pairs}


def module_name(path: Path) -> str:
    """The module file name insmod is given: ``arm_spe_pmu.ko`` for ``arm_spe_pmu.ko`` and
    for Debian 6.12's xz-compressed ``arm_spe_pmu.ko.xz`` (busybox's insmod reads neither
    compressed form, so the initramfs holds it decompressed)."""
    return path.name.removesuffix(".xz")


def module_bytes(path: Path) -> bytes:
    """The module's ELF bytes (decompressed from ``.ko.xz``)."""
    data = path.read_bytes()
    return lzma.decompress(data) if path.suffix == ".xz" else data


def module_load_order(moddir: Path, name: str) -> list[Path]:
    """``name``'s module file after the modules its ``depends=`` names (recursively), in an
    order ``insmod`` can load them (``.ko`` files, or ``.ko.xz`` as Debian's 6.12 ships)."""
    by_name = {module_name(p).removesuffix(".ko").replace("-", "_"): p
               for pattern in ("*.ko", "*.ko.xz") for p in moddir.rglob(pattern)}
    order: list[Path] = []

    def visit(n: str, stack: tuple[str, ...]) -> None:
        n = n.replace("-", "_")
        if n in stack:
            raise BuildError(f"module dependency cycle: {' -> '.join(stack + (n,))}")
        if n not in by_name:
            raise BuildError(f"module {n}.ko not found under {moddir}")
        ko = by_name[n]
        if ko in order:
            return
        for dep in filter(None, modinfo(ko).get("depends", "").split(",")):
            visit(dep, stack + (n,))
        order.append(ko)

    visit(name, ())
    return order


# -- the perf.data channel: a semihosting put tool ---------------------------------------
PUT_TOOL = "usr/bin/semihost-put"
"""Where the put tool sits in the ``perf`` initramfs (``semihost-put NAME < FILE``)."""
PUT_BASE = 0x400000          # its one PT_LOAD segment's virtual address (and file offset 0)
PUT_BUFFER = 1 << 16         # bytes read from stdin and written to the host per step
PUT_SOURCE = f"""
    // semihost-put NAME: copy stdin to the host file NAME (in spe-emu's output directory)
    // through semihosting from EL0 (spe-emu run --semihosting-userspace; QEMU's
    // -semihosting-config enable=on,userspace=on). Linux syscalls read (63), exit (93);
    // semihosting SYS_OPEN (1), SYS_CLOSE (2), SYS_WRITE (5): HLT #0xF000, W0 = operation,
    // X1 = parameter block. Exit status 0, or 1 when anything failed.
    ldr x0, [sp]                // argc
    cmp x0, #2
    b.ne fail
    ldr x19, [sp, #16]          // argv[1]
    mov x2, #0
strlen:
    ldrb w3, [x19, x2]
    cbz w3, open
    add x2, x2, #1
    b strlen
open:
    adr x1, block
    str x19, [x1]               // SYS_OPEN: name, mode 5 ("wb"), name length
    mov x3, #5
    str x3, [x1, #8]
    str x2, [x1, #16]
    mov w0, #1
    hlt #0xf000
    cmn x0, #1
    b.eq fail
    mov x20, x0                 // the host file's handle
copy:
    mov x0, #0                  // read(0, buffer, {PUT_BUFFER})
    adr x1, buffer
    mov x2, #{PUT_BUFFER}
    mov x8, #63
    svc #0
    cmp x0, #0
    b.lt fail
    b.eq done
    adr x1, block               // SYS_WRITE: handle, buffer, length -> bytes not written
    str x20, [x1]
    adr x3, buffer
    str x3, [x1, #8]
    str x0, [x1, #16]
    mov w0, #5
    hlt #0xf000
    cbnz x0, fail
    b copy
done:
    adr x1, block               // SYS_CLOSE: handle
    str x20, [x1]
    mov w0, #2
    hlt #0xf000
    cbnz x0, fail
    mov x0, #0
    mov x8, #93
    svc #0
fail:
    mov x0, #1
    mov x8, #93
    svc #0
    .balign 8
block:
    .quad 0, 0, 0
buffer:
"""
ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")     # Elf64_Ehdr (64 bytes)
PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")         # Elf64_Phdr (56 bytes)
SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")       # Elf64_Shdr (64 bytes)
SYMBOL = struct.Struct("<IBBHQQ")                   # Elf64_Sym (24 bytes)
ET_EXEC, EM_AARCH64, EV_CURRENT, PT_LOAD = 2, 183, 1, 1
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 1, 2, 3
SHF_ALLOC_EXECINSTR = 0x2 | 0x4
STB_GLOBAL_STT_FUNC = 1 << 4 | 2
PF_RWX, PF_RX, PF_RW = 0b111, 0b101, 0b110    # p_flags: PF_R 4, PF_W 2, PF_X 1
CODE_START = ELF_HEADER.size + 2 * PROGRAM_HEADER.size
"""File offset of the first function: after the ELF header and room for two program headers."""


def static_elf(functions: list[tuple[str, str]], bss: int, data_at: int | None = None) -> bytes:
    """A static AArch64 Linux ELF executable (System V gABI, ELF-64): ``functions`` (name,
    assembly text; the first is the entry point) assembled with keystone
    (:func:`spe_emu.asm.assemble`) one after the other from :data:`PUT_BASE` +
    :data:`CODE_START`, each in its 4 KiB slot, in a PT_LOAD segment from file offset 0; a
    ``.text`` section and a ``.symtab`` naming each function (what perf reports samples by).
    A text may call a later function by its name as ``{name}`` (replaced by its address).

    ``bss`` zero bytes follow the code in the same read, write and execute segment, or, with
    ``data_at`` (a page-aligned address above the code), in a read and write segment of their
    own there, as a linker lays out a program's data: the code segment is then read and
    execute only. (Stores to a page mapped executable take Unicorn's slow path, which looks
    for translated code to invalidate: about 35 ns a store.)"""
    from spe_emu.asm import assemble

    addrs, at = {}, PUT_BASE + CODE_START
    for name, _ in functions:           # (each function fits in its 4 KiB slot, checked below)
        addrs[name] = at
        at += 0x1000
    code, symbols = b"", []
    for name, text in functions:
        body = assemble(text.format(**{n: hex(a) for n, a in addrs.items()}), addrs[name])
        if len(body) > 0x1000:
            raise BuildError(f"{name}: {len(body)} bytes of code do not fit its 4 KiB")
        code = code.ljust(addrs[name] - PUT_BASE - CODE_START, b"\0") + body
        symbols.append((name, addrs[name], len(body)))
    filesz = CODE_START + len(code)
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n, _, _ in symbols)
    symtab = bytes(SYMBOL.size) + b"".join(
        SYMBOL.pack(strtab.index(n.encode() + b"\0"), STB_GLOBAL_STT_FUNC, 0, 1, a, size)
        for n, a, size in symbols)
    shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    tables = symtab + strtab + shstrtab
    shoff = (filesz + len(tables) + 7) & ~7
    sections = [bytes(SECTION_HEADER.size),
                SECTION_HEADER.pack(shstrtab.index(b".text"), SHT_PROGBITS, SHF_ALLOC_EXECINSTR,
                                    PUT_BASE + CODE_START, CODE_START, len(code), 0, 0, 4, 0),
                SECTION_HEADER.pack(shstrtab.index(b".symtab"), SHT_SYMTAB, 0, 0, filesz,
                                    len(symtab), 3, 1, 8, SYMBOL.size),
                SECTION_HEADER.pack(shstrtab.index(b".strtab"), SHT_STRTAB, 0, 0,
                                    filesz + len(symtab), len(strtab), 0, 0, 1, 0),
                SECTION_HEADER.pack(shstrtab.index(b".shstrtab"), SHT_STRTAB, 0, 0,
                                    filesz + len(symtab) + len(strtab), len(shstrtab), 0, 0, 1,
                                    0)]
    ident = b"\x7fELF" + bytes([2, 1, 1, 0])            # ELFCLASS64, little-endian, SysV
    if data_at is None:
        segments = [PROGRAM_HEADER.pack(PT_LOAD, PF_RWX, 0, PUT_BASE, PUT_BASE, filesz,
                                        -(-(filesz + bss) // 16) * 16 + 16, 0x1000)]
    else:
        if data_at & 0xFFF or data_at < PUT_BASE + filesz:
            raise BuildError(f"data at {data_at:#x}: not a page above the code")
        segments = [PROGRAM_HEADER.pack(PT_LOAD, PF_RX, 0, PUT_BASE, PUT_BASE, filesz, filesz,
                                        0x1000),
                    PROGRAM_HEADER.pack(PT_LOAD, PF_RW, 0, data_at, data_at, 0, bss, 0x1000)]
    header = ELF_HEADER.pack(ident.ljust(16, b"\0"), ET_EXEC, EM_AARCH64, EV_CURRENT,
                             PUT_BASE + CODE_START, ELF_HEADER.size, shoff, 0, ELF_HEADER.size,
                             PROGRAM_HEADER.size, len(segments), SECTION_HEADER.size,
                             len(sections), len(sections) - 1)
    image = ((header + b"".join(segments)).ljust(CODE_START, b"\0") + code
             + tables).ljust(shoff, b"\0")
    return image + b"".join(sections)


def put_tool() -> bytes:
    """The put tool (:data:`PUT_SOURCE`) as a static executable (:func:`static_elf`) with its
    parameter block and a :data:`PUT_BUFFER`-byte buffer zero-filled after the code."""
    return static_elf([("_start", PUT_SOURCE)], PUT_BUFFER)


WORKLOAD_TOOL = "usr/bin/spe-workload"
"""The default workload (:func:`workload_tool`): ``spe-workload [ROUNDS]``."""
WORKLOAD_ROUNDS = 4600
"""Rounds of the default workload: about 100 M instructions (21 629 per round: spe-emu run
--mode raw of it reports 2 162 911 instructions for 100 rounds)."""
WORKLOAD_WORDS = 2048          # 64-bit words of its array (16 KiB, in its bss)


def decimal_asm(ptr: str, out: str, ch: str, ten: str, loop: str, end: str) -> str:
    """Assembly that reads the NUL-terminated decimal string at register ``ptr`` (advanced
    past it) into ``out`` and branches to ``end`` (``ch``, ``ten``: scratch registers, 32-bit
    ``ch`` view used for the byte; ``loop``: a label name for the loop)."""
    return f"""
    mov {out}, #0
    mov {ten}, #10
{loop}:
    ldrb w{ch[1:]}, [{ptr}], #1
    cbz w{ch[1:]}, {end}
    sub w{ch[1:]}, w{ch[1:]}, #0x30
    madd {out}, {out}, {ten}, {ch}
    b {loop}
"""


def workload_tool() -> bytes:
    """The default perf workload, a static executable (:func:`static_elf`) whose functions
    perf names: ``_start`` calls, ROUNDS times (argv[1] in decimal, default
    :data:`WORKLOAD_ROUNDS`), ``fill_array`` (a store per word of a 16 KiB array),
    ``sum_array`` (a load per word) and ``branchy`` (a conditional branch per word, taken
    as a bit of the word says), then exits with status 0 (Linux exit, 93)."""
    array = PUT_BASE + 0x100000          # (its bss: above every function's slot)
    mov_array = (f"movz x0, #{array & 0xFFFF:#x}\n"
                 f"    movk x0, #{array >> 16:#x}, lsl #16")
    functions = [
        ("_start", f"""
    movz x19, #{WORKLOAD_ROUNDS}
    ldr x0, [sp]                // argc
    cmp x0, #2
    b.lt rounds
    ldr x1, [sp, #16]           // argv[1]: decimal
{decimal_asm("x1", "x19", "x2", "x3", "digit", "rounds")}
rounds:
    cbz x19, done
    bl {{fill_array}}
    bl {{sum_array}}
    bl {{branchy}}
    sub x19, x19, #1
    b rounds
done:
    mov x0, #0
    mov x8, #93
    svc #0
"""),
        ("fill_array", f"""
    {mov_array}
    mov x1, #{WORKLOAD_WORDS}
fill:
    str x1, [x0], #8
    subs x1, x1, #1
    b.ne fill
    ret
"""),
        ("sum_array", f"""
    {mov_array}
    mov x1, #{WORKLOAD_WORDS}
    mov x2, #0
sum:
    ldr x3, [x0], #8
    add x2, x2, x3
    subs x1, x1, #1
    b.ne sum
    ret
"""),
        ("branchy", f"""
    mov x1, #{WORKLOAD_WORDS}
    mov x2, #0
branch:
    tbz x1, #1, skip
    add x2, x2, x1
skip:
    subs x1, x1, #1
    b.ne branch
    ret
"""),
    ]
    if array - PUT_BASE < CODE_START + 0x1000 * len(functions):
        raise BuildError("the workload's array overlaps its code")
    return static_elf(functions, 8 * WORKLOAD_WORDS, data_at=array)


# -- the perf_event_open tool: any arm_spe_0 config field, whatever perf knows ---------------
OPEN_TOOL = "usr/bin/spe-open"
"""Where the open tool sits in the ``open`` initramfs (:func:`open_tool`)."""
OPEN_ROUNDS = 400
"""Default rounds of the open tool's loop (a load, a store and a conditional branch per
iteration, 2048 iterations a round)."""
PERF_ATTR_SIZE_VER8 = 136      # struct perf_event_attr up to config3 (Linux 6.3+ uapi)
OPEN_AUX_PAGES = 16            # AUX area pages (a power of two)


def open_tool() -> bytes:
    """``spe-open TYPE CONFIG CONFIG1 CONFIG2 CONFIG3 [ROUNDS]`` (decimal): a static
    executable (:func:`static_elf`) that opens a sampling perf event of PMU TYPE on itself
    with those config words (perf_event_open, 241; ``struct perf_event_attr`` of
    :data:`PERF_ATTR_SIZE_VER8` bytes, sample_period 4096, disabled), maps its ring buffer
    (one data page) and an AUX area of :data:`OPEN_AUX_PAGES` pages (mmap, 222; the page size
    from AT_PAGESZ), enables it (ioctl PERF_EVENT_IOC_ENABLE), runs ROUNDS (default
    :data:`OPEN_ROUNDS`) rounds of ``spe_loop`` (a store, a load and a conditional branch per
    word of a 16 KiB array), disables it and exits with status 0; 2-5 when
    perf_event_open, the mmap of the ring buffer, of the AUX area, or the ioctl failed.

    Debian 12's perf (6.1) has no ``config3`` (Linux 6.12's ``inv_event_filter``, FEAT_SPEv1p2):
    with this tool the guest programs any field the driver offers; the SPU's records reach
    the host with ``spe-emu run --perf-data`` (``spe.trace``)."""
    array = PUT_BASE + 0x100000
    attr = array + 8 * WORKLOAD_WORDS        # (bss after the array)
    mov = lambda reg, value: (f"movz {reg}, #{value & 0xFFFF:#x}\n"
                              f"    movk {reg}, #{value >> 16:#x}, lsl #16")
    functions = [
        ("_start", f"""
    ldr x0, [sp]                // argc
    cmp x0, #6
    b.lt bad
    mov x20, sp                 // argv[1..]: x21-x25, rounds x26
    {mov('x27', attr)}
    add x1, x20, #8
    ldr x0, [x1], #8            // (argv[0])
    mov x2, #0
args:                           // parse argv[1]..argv[5] (and argv[6]) as decimal
    cmp x2, #6
    b.eq parsed
    ldr x3, [x1], #8
    cbz x3, parsed
{decimal_asm("x3", "x4", "x6", "x5", "digit", "store")}
store:
    str x4, [x27, x2, lsl #3]   // (parsed values in the attr area's tail first)
    add x2, x2, #1
    b args
parsed:
    cmp x2, #6
    mov x26, #{OPEN_ROUNDS}
    b.lt noround
    ldr x26, [x27, #40]
noround:
    ldp x21, x22, [x27]         // type, config
    ldp x23, x24, [x27, #16]    // config1, config2
    ldr x25, [x27, #32]         // config3
    stp xzr, xzr, [x27]         // (clear the attr: {PERF_ATTR_SIZE_VER8} bytes)
    stp xzr, xzr, [x27, #16]
    stp xzr, xzr, [x27, #32]
    str w21, [x27]              // type
    mov w0, #{PERF_ATTR_SIZE_VER8}
    str w0, [x27, #4]           // size
    str x22, [x27, #8]          // config
    mov x0, #4096
    str x0, [x27, #16]          // sample_period
    mov x0, #1
    str x0, [x27, #40]          // flags: disabled
    str x23, [x27, #56]         // config1
    str x24, [x27, #64]         // config2
    str x25, [x27, #128]        // config3
    // the page size: AT_PAGESZ (6) in the auxiliary vector after argv and envp
    ldr x0, [x20]
    add x1, x20, #16
    add x1, x1, x0, lsl #3      // envp
env:
    ldr x0, [x1], #8
    cbnz x0, env
aux:
    ldp x0, x2, [x1], #16
    cbz x0, bad
    cmp x0, #6
    b.ne aux
    mov x28, x2                 // page size
    mov x0, x27                 // perf_event_open(attr, 0, -1, -1, 0)
    mov x1, #0
    mov x2, #-1
    mov x3, #-1
    mov x4, #0
    mov x8, #241
    svc #0
    neg x9, x0                  // (failed: exit status 100 + errno)
    add x9, x9, #100
    tbnz x0, #63, fail
    mov x19, x0                 // fd
    mov x0, #0                  // mmap(0, 2 pages, RW, SHARED, fd, 0)
    lsl x1, x28, #1
    mov x2, #3
    mov x3, #1
    mov x4, x19
    mov x5, #0
    mov x8, #222
    svc #0
    mov x9, #3
    tbnz x0, #63, fail
    lsl x1, x28, #1             // aux_offset = 2 pages, aux_size = {OPEN_AUX_PAGES} pages
    str x1, [x0, #1072]
    mov x2, #{OPEN_AUX_PAGES}
    mul x2, x2, x28
    str x2, [x0, #1080]
    mov x5, x1                  // mmap(0, aux_size, RW, SHARED, fd, aux_offset)
    mov x1, x2
    mov x0, #0
    mov x2, #3
    mov x3, #1
    mov x4, x19
    mov x8, #222
    svc #0
    mov x9, #4
    tbnz x0, #63, fail
    mov x0, x19                 // ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)
    mov x1, #0x2400
    mov x2, #0
    mov x8, #29
    svc #0
    mov x9, #5
    cbnz x0, fail
rounds:
    cbz x26, done
    bl {{spe_loop}}
    sub x26, x26, #1
    b rounds
done:
    mov x0, x19                 // ioctl(fd, PERF_EVENT_IOC_DISABLE, 0)
    mov x1, #0x2401
    mov x2, #0
    mov x8, #29
    svc #0
    mov x0, #0
    mov x8, #93
    svc #0
bad:
    mov x9, #1
fail:
    mov x0, x9
    mov x8, #93
    svc #0
"""),
        ("spe_loop", f"""
    {mov('x0', array)}
    mov x1, #{WORKLOAD_WORDS}
    mov x2, #0
loop:
    str x1, [x0]
    ldr x3, [x0], #8
    tbz x3, #0, even
    add x2, x2, x3
even:
    subs x1, x1, #1
    b.ne loop
    ret
"""),
    ]
    return static_elf(functions, 8 * WORKLOAD_WORDS + 256, data_at=array)


# -- initramfs -----------------------------------------------------------------------------
UPTIME_MS = "t() { awk '{ printf \"%d %d\\n\", $1 * 1000, $2 * 1000 }' /proc/uptime; }"
"""A shell function printing /proc/uptime's two columns in ms: the time since boot and the
time the CPU idled (the kernel's clock, which counts the board's virtual time)."""


def _probe_lines(modules: list[str]) -> list[str]:
    """The start every ``/init`` shares: mounts, the modules loaded in order, the driver's
    dmesg lines and ``arm_spe_0``'s caps."""
    lines = [
        "#!/bin/busybox sh",
        "/bin/busybox mkdir -p /proc /sys /dev /tmp",
        "/bin/busybox mount -t proc proc /proc",
        "/bin/busybox --install -s /bin",
        "export PATH=/bin:/usr/bin HOME=/tmp",
        f"export LD_LIBRARY_PATH=/lib/{MULTIARCH}",
        "mount -t sysfs sysfs /sys",
        "mount -t devtmpfs devtmpfs /dev",
        f"echo '{MARK} /init reached'",
    ]
    for m in modules:
        lines.append(f"if insmod /lib/modules/{m}; then echo '{MARK} insmod {m} ok'; "
                     f"else echo '{MARK} insmod {m} failed'; fi")
    lines += [
        f"dmesg | grep -i arm_spe | sed 's/^/{MARK} dmesg: /'",
        "d=/sys/bus/event_source/devices/arm_spe_0",
        "if [ -d $d ]; then",
        "  for f in $d/caps/*; do echo \"" + MARK + " caps/${f##*/} = $(cat $f)\"; done",
        "  echo \"" + MARK + " type = $(cat $d/type)\"",
        # the perf event format attributes the driver offers (6.12 adds FEAT_SPEv1p2's
        # inv_event_filter when PMSVer >= 3)
        "  echo \"" + MARK + " format = $(ls $d/format | tr '\\n' ' ')\"",
        "else",
        f"  echo '{MARK} no arm_spe_0 PMU'",
        "fi",
    ]
    return lines


def init_script(variant: str, modules: list[str], workload: str) -> str:
    """The ``/init`` of a variant (:data:`VARIANTS`)."""
    lines = _probe_lines(modules)
    if variant == "perf":
        record = f"perf record -e \"$event\" -c {PERIOD} -o /tmp/perf.data"
        lines += [
            # the event: spe_event=EVENT on the kernel command line (the kernel passes an
            # unknown NAME=VALUE parameter to /init's environment), else SPE_EVENT
            f"event=\"${{spe_event:-{SPE_EVENT}}}\"",
            f"echo \"{MARK} event $event\"",
            # guest time in ms: the first of UPTIME_MS's columns (${t% *})
            UPTIME_MS,
            f"echo '{MARK} workload alone'",
            f"t0=$(t); {workload} > /dev/null; t1=$(t)",
            f"echo \"{MARK} workload alone took $((${{t1% *}} - ${{t0% *}})) ms\"",
            # perf's own cost (start-up, build-ids, kallsyms): the same command on `true`,
            # timed the second time (the first loads perf and its libraries into the page
            # cache, as the workload's run then finds them)
            f"{record.replace('/tmp/perf.data', '/tmp/true.data')} -- true > /dev/null 2>&1",
            f"echo '{MARK} perf record of true'",
            f"t0=$(t); {record.replace('/tmp/perf.data', '/tmp/true.data')} -- true "
            f"> /dev/null 2>&1; t1=$(t)",
            f"echo \"{MARK} perf record of true took $((${{t1% *}} - ${{t0% *}})) ms\"",
            f"echo '{MARK} perf record'",
            f"t0=$(t); {record} -- {workload}",
            f"rc=$?; t1=$(t)",
            f"echo \"{MARK} perf record exit $rc took $((${{t1% *}} - ${{t0% *}})) ms\"",
            # perf synthesises one sample per SPE record and event kind (memory, l1d-access,
            # branch-miss ...): a "# Samples: N of event 'E'" header per kind
            "perf report --stdio -i /tmp/perf.data --sort comm,dso,sym 2>&1 | grep -v '^#$' "
            "| head -n 200",
            f"echo \"{MARK} perf report done\"",
            "perf report --stdio -i /tmp/perf.data --sort pid 2>&1 | grep -v '^#$' "
            "| head -n 80",
            f"echo \"{MARK} perf report pid done\"",
            "perf script -i /tmp/perf.data -F comm,tid,event,ip,sym 2>&1 | head -n 20",
            f"echo \"{MARK} perf script done\"",
            # the perf.data channel to the host (semihosting from EL0; docs/linux.md)
            f"if {PUT_TOOL.removeprefix('usr/bin/')} perf.data < /tmp/perf.data; "
            f"then echo '{MARK} perf.data sent'; else echo '{MARK} perf.data not sent'; fi",
        ]
    elif variant == "open":
        # spe-open with arm_spe_0's type from sysfs and the config words from the kernel
        # command line (spe_config=, spe_config1=, spe_config2=, spe_config3=, spe_rounds=;
        # decimal; 0 when absent)
        lines += [
            f"echo \"{MARK} spe-open config=${{spe_config:-0}} config1=${{spe_config1:-0}} "
            f"config2=${{spe_config2:-0}} config3=${{spe_config3:-0}}\"",
            f"{OPEN_TOOL.removeprefix('usr/bin/')} $(cat $d/type) ${{spe_config:-0}} "
            f"${{spe_config1:-0}} ${{spe_config2:-0}} ${{spe_config3:-0}} "
            f"${{spe_rounds:-{OPEN_ROUNDS}}}",
            f"echo \"{MARK} spe-open exit $?\"",
        ]
    elif variant != "probe":
        raise BuildError(f"unknown initramfs variant {variant!r} (one of {VARIANTS})")
    lines += [f"echo '{MARK} power off'", "poweroff -f", ""]
    return "\n".join(lines)


TIMING = f"{MARK} timing"
"""The prefix of :func:`timing_init`'s lines."""


def timing_init(modules: list[str], phases: list[tuple[str, str]]) -> str:
    """An ``/init`` for the ``perf`` variant's files that times commands (scripts/bench.py's
    linux-perf row): the shared start (:func:`_probe_lines`), then each ``(key, command)``
    of ``phases`` run twice with its output discarded, the second run timed (the first loads
    its files into the page cache), then power-off. Around the timed run it prints
    ``spe-guest: timing KEY start`` and ``spe-guest: timing KEY done U0 I0 U1 I1 STATUS``:
    :data:`UPTIME_MS` before and after (ms) and the command's exit status."""
    lines = _probe_lines(modules) + [UPTIME_MS]
    for key, command in phases:
        lines += [f"{command} > /dev/null 2>&1",
                  f"echo '{TIMING} {key} start'",
                  f"a=$(t); {command} > /dev/null 2>&1; rc=$?; b=$(t)",
                  f"echo \"{TIMING} {key} done $a $b $rc\""]
    lines += [f"echo '{MARK} power off'", "poweroff -f", ""]
    return "\n".join(lines)


def init_overlay(init: str) -> bytes:
    """A gzip-compressed newc archive holding only ``/init``: appended to an initramfs
    image it replaces that image's ``/init``, since Linux unpacks concatenated archives in
    order and a later file overwrites an earlier one (Documentation/driver-api/
    early-userspace/buffer-format.rst)."""
    a = Newc()
    a.file("init", init.encode(), mode=0o755)
    return gzip.compress(a.finish(), 6, mtime=0)


def initramfs(variant: str, root: Path, modules: list[Path], workload: str) -> bytes:
    """The newc cpio archive (not compressed) of a variant."""
    a = Newc()
    for d in ("dev", "proc", "sys", "tmp", "usr/bin", f"lib/{MULTIARCH}"):
        a.directory(d)
    a.char_device("dev/console", 5, 1)
    a.file("bin/busybox", (root / "bin/busybox").read_bytes(), mode=0o755)
    if variant == "open":
        a.file(OPEN_TOOL, open_tool(), mode=0o755)
    for ko in modules:
        a.file(f"lib/modules/{module_name(ko)}", module_bytes(ko))
    if variant == "perf":
        perf = root / "usr/bin/perf"
        a.file("usr/bin/perf", perf.read_bytes(), mode=0o755)
        a.file(PUT_TOOL, put_tool(), mode=0o755)
        a.file(WORKLOAD_TOOL, workload_tool(), mode=0o755)
        for soname, path in sorted(library_closure(root, perf).items()):
            name = soname.lstrip("/") if soname.startswith("/") else f"lib/{MULTIARCH}/{soname}"
            a.file(name, path.read_bytes(), mode=0o755)
    a.file("init", init_script(variant, [module_name(ko) for ko in modules], workload).encode(),
           mode=0o755)
    return a.finish()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def guest_dir(cache: Path, kernel_package: str | None) -> Path:
    """Where a build puts its outputs: ``CACHE/guest`` for the default kernel,
    ``CACHE/guest-PACKAGE`` for ``--kernel-package PACKAGE``."""
    return cache / ("guest" if kernel_package is None else f"guest-{kernel_package}")


def build(cache: Path, out: Path, workload: str, log=print,
          kernel_package: str | None = None) -> dict:
    """Download (or reuse), extract and pack; returns the manifest written to
    ``out/manifest.json``. ``kernel_package``: the Debian arm64 package of the kernel (a
    metapackage such as ``linux-image-6.12-arm64`` is followed to its image package); None:
    the newest ``linux-image-6.1.0-N-arm64``.

    Raises:
        BuildError: a step failed.
    """
    debs_dir = cache / "debs"
    try:
        ensure_arm64_apt()
        kernel_pkg = (newest_kernel_package() if kernel_package is None
                      else resolve_kernel_package(kernel_package))
        packages = [kernel_pkg] + library_closure_packages(BASE_PACKAGES)
    except BuildError:
        # offline: whatever the cache holds
        if kernel_package is None:
            cached = sorted(debs_dir.glob(f"linux-image-6.1.0-*-{ARCH}_*_{ARCH}.deb"))
            pick = (lambda: max(cached, key=lambda p: int(p.name.split("-")[4]))
                    .name.split("_")[0])
        else:
            cached = sorted(debs_dir.glob(f"{kernel_package}_*_{ARCH}.deb"))
            pick = (lambda: kernel_package)
        if not cached:
            raise
        log("apt unavailable; using the cached packages")
        kernel_pkg = pick()
        packages = [kernel_pkg] + sorted({p.name.split("_")[0] for p in debs_dir.glob("*.deb")
                                          if not p.name.startswith("linux-image")})
    log(f"kernel package {kernel_pkg}; {len(packages)} packages")
    debs = download(packages, debs_dir)
    root = cache / "root"
    extract(debs, root)
    vmlinuz = next((root / "boot").glob("vmlinuz-*"), None)
    if vmlinuz is None:
        raise BuildError(f"{debs[kernel_pkg]}: no boot/vmlinuz-*")
    release = vmlinuz.name.removeprefix("vmlinuz-")
    moddir = root / "lib/modules" / release
    modules = module_load_order(moddir, SPE_MODULE)

    out.mkdir(parents=True, exist_ok=True)
    outputs: dict[str, bytes] = {}
    image = vmlinuz.read_bytes()
    outputs["vmlinuz"] = image if image[:2] == b"\x1f\x8b" else gzip.compress(image, 9, mtime=0)
    for ko in modules:
        outputs[module_name(ko)] = module_bytes(ko)
    for variant in VARIANTS:
        outputs[f"{variant}.cpio.gz"] = gzip.compress(
            initramfs(variant, root, modules, workload), 6, mtime=0)
    # the guest's own programs where perf report --symfs looks for them
    outputs[f"symfs/{WORKLOAD_TOOL}"] = workload_tool()
    outputs[f"symfs/{PUT_TOOL}"] = put_tool()
    outputs[f"symfs/{OPEN_TOOL}"] = open_tool()
    for name, data in outputs.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
        log(f"{out / name}: {len(data)} bytes")
    manifest = {
        "kernel_release": release,
        "packages": {p: deb_version(d) for p, d in sorted(debs.items())},
        "modules": [module_name(ko) for ko in modules],
        "workload": workload,
        "files": {n: {"bytes": len(d), "sha256": _sha256(d)} for n, d in outputs.items()},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


@click.command()
@click.option("--cache", type=click.Path(path_type=Path), default=None,
              help="download/extract cache (default ~/.cache/spe_emu/linux or "
                   "$SPE_EMU_LINUX_CACHE)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="output directory (default CACHE/guest)")
@click.option("--workload", default=DEFAULT_WORKLOAD, show_default=True,
              help="the command perf records in the perf initramfs (busybox sh syntax)")
@click.option("--kernel-package", default=None, metavar="NAME",
              help="Debian arm64 kernel package, e.g. linux-image-6.12-arm64 or "
                   "linux-image-6.12-arm64-16k (metapackages are followed); default: the "
                   "newest linux-image-6.1.0-N-arm64; outputs then in CACHE/guest-NAME")
@click.option("--print-dir", is_flag=True, help="print the output directory and exit")
def main(cache: Path | None, out: Path | None, workload: str, kernel_package: str | None,
         print_dir: bool) -> None:
    """Download Debian's arm64 kernel, busybox and perf, and pack the guest's initramfs."""
    cache = cache or default_cache()
    out = out or guest_dir(cache, kernel_package)
    if print_dir:
        click.echo(out)
        return
    try:
        build(cache, out, workload, log=click.echo, kernel_package=kernel_package)
    except (BuildError, OSError) as exc:
        click.echo(f"build_linux_guest: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
