#!/usr/bin/env python3
"""Reproducibly build the spe_emu guest images (and the firmware).

Usage:
    python scripts/build_images.py                  # rebuild guests/*.elf in place
                                                    # (+ firmware/spe_fw.elf)
    python scripts/build_images.py --out-dir DIR    # DIR/guests/*.elf, DIR/firmware/spe_fw.elf
    python scripts/build_images.py --check          # build into a temp dir and compare
                                                    # byte for byte with the committed files
    python scripts/build_images.py --no-firmware sort matmul   # only some guests

The output depends only on the sources and the toolchain (Debian bookworm
gcc-aarch64-linux-gnu 12.2 + picolibc-aarch64-linux-gnu 1.8): the compiler
runs from the repository root on relative paths with -ffile-prefix-map, no
debug information, no build-id, and no timestamps are involved.

Standard library only.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GUEST_DIR = "guests"
GUEST_SRC = f"{GUEST_DIR}/src"
LINKER_SCRIPT = f"{GUEST_DIR}/guest.ld"
FIRMWARE_BUILD = REPO / "firmware" / "build.py"
FIRMWARE_IMAGE = "spe_fw.elf"

DEFAULT_CC = "aarch64-linux-gnu-gcc"

# Flags shared by every guest (C and assembly).
COMMON_FLAGS = [
    "-static",
    "-no-pie",
    "-fno-pie",
    "-nostartfiles",                # our own crt0 (picolibc's touches EL1 registers)
    "-g0",
    "-mbranch-protection=none",
    "-T", LINKER_SCRIPT,            # a gcc -T, so picolibc.specs does not add its own
    "-Wl,--build-id=none",
    "-Wl,--strip-debug",            # picolibc's libc.a carries DWARF; keep only symbols
    "-Wl,-z,max-page-size=4096",
    "-Wl,-z,common-page-size=4096",
    "-Wl,-z,noexecstack",
    "-Wl,--gc-sections",
]

# C guests: picolibc (tinystdio, integer-only printf), armv8.0-A.
C_FLAGS = [
    "--specs=picolibc.specs",
    "-DPICOLIBC_INTEGER_PRINTF_SCANF",  # link printf = __i_vfprintf
    "-march=armv8-a",
    "-O2",
    "-std=gnu11",
    "-Wall",
    "-Wextra",
    "-fno-stack-protector",
    "-fno-asynchronous-unwind-tables",
    "-fno-unwind-tables",
    "-mno-outline-atomics",
    "-ffunction-sections",
    "-fdata-sections",
]

# The assembly guest uses LSE atomics (LDADD), hence armv8.2-a; no libc.
ASM_FLAGS = [
    "-march=armv8.2-a",
    "-nostdlib",
]

C_RUNTIME = [f"{GUEST_SRC}/crt0.S", f"{GUEST_SRC}/syscalls.c"]


@dataclass(frozen=True)
class Guest:
    name: str
    sources: tuple[str, ...]
    flags: tuple[str, ...]


def _c_guest(name: str) -> Guest:
    return Guest(name, tuple(C_RUNTIME + [f"{GUEST_SRC}/{name}.c"]), tuple(C_FLAGS))


GUESTS: dict[str, Guest] = {
    g.name: g
    for g in (
        _c_guest("sort"),
        _c_guest("matmul"),
        _c_guest("pointer_chase"),
        _c_guest("interp"),
        Guest("asm_loop", (f"{GUEST_SRC}/asm_loop.S",), tuple(ASM_FLAGS)),
    )
}


class BuildError(Exception):
    """A build step failed; the message is one line for the user."""


def check_toolchain(cc: str) -> None:
    """Fail early, with one line, when the cross compiler or picolibc is missing."""
    if shutil.which(cc) is None:
        raise BuildError(
            f"{cc} not found: install gcc-aarch64-linux-gnu, binutils-aarch64-linux-gnu "
            "and picolibc-aarch64-linux-gnu")
    specs = subprocess.run([cc, "-print-file-name=picolibc.specs"], capture_output=True,
                           text=True, check=False).stdout.strip()
    if not specs or not os.path.isabs(specs) or not os.path.exists(specs):
        raise BuildError(f"picolibc.specs not found by {cc}: install picolibc-aarch64-linux-gnu")


def guest_command(cc: str, guest: Guest, output: Path) -> list[str]:
    """The compiler command line for one guest (run from the repository root)."""
    return [cc, *COMMON_FLAGS, *guest.flags, f"-ffile-prefix-map={REPO}=.",
            "-I", GUEST_SRC, "-o", str(output), *guest.sources]


def _build_env() -> dict[str, str]:
    env = dict(os.environ)
    env["LC_ALL"] = "C"
    env["SOURCE_DATE_EPOCH"] = "0"
    return env


def build_guest(cc: str, guest: Guest, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / f"{guest.name}.elf"
    # Link to a temporary name first so a failed build never leaves a
    # truncated image behind.
    tmp = out_dir / f".{guest.name}.elf.tmp"
    cmd = guest_command(cc, guest, tmp.resolve())
    proc = subprocess.run(cmd, cwd=REPO, env=_build_env(), capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        sys.stderr.write(proc.stdout + proc.stderr)
        raise BuildError(f"building {guest.name} failed: {' '.join(cmd)}")
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)
    tmp.replace(output)
    return output


def build_firmware(out_dir: Path) -> Path | None:
    """Run firmware/build.py --out OUT_DIR/spe_fw.elf; None if that script is absent."""
    if not FIRMWARE_BUILD.exists():
        print(f"firmware: {FIRMWARE_BUILD.relative_to(REPO)} does not exist yet, skipped")
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / FIRMWARE_IMAGE
    cmd = [sys.executable, str(FIRMWARE_BUILD), "--out", str(output.resolve())]
    proc = subprocess.run(cmd, cwd=REPO, env=_build_env(), check=False)
    if proc.returncode != 0:
        raise BuildError(f"building the firmware failed (exit {proc.returncode}): "
                         f"{' '.join(cmd)}")
    return output


def build_all(out_root: Path | None, names: list[str], cc: str,
              firmware: bool) -> list[Path]:
    """Build the selected guests (and the firmware); out_root None means in place."""
    check_toolchain(cc)
    guest_out = REPO / GUEST_DIR if out_root is None else out_root / "guests"
    fw_out = REPO / "firmware" if out_root is None else out_root / "firmware"
    built = [build_guest(cc, GUESTS[name], guest_out) for name in names]
    if firmware:
        fw = build_firmware(fw_out)
        if fw is not None:
            built.append(fw)
    return built


def check(names: list[str], cc: str, firmware: bool) -> int:
    """Rebuild into a temporary directory and compare with the committed images."""
    differences = []
    with tempfile.TemporaryDirectory(prefix="spe_emu_images_") as tmp:
        root = Path(tmp)
        for built in build_all(root, names, cc, firmware):
            rel = built.relative_to(root)
            committed = REPO / rel
            if not committed.exists():
                differences.append(f"{rel}: not committed")
            elif not filecmp.cmp(built, committed, shallow=False):
                differences.append(f"{rel}: differs from the rebuilt image")
            else:
                print(f"{rel}: identical")
    for line in differences:
        print(line)
    return 1 if differences else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("guests", nargs="*", metavar="GUEST",
                        help=f"guests to build (default: all of {', '.join(GUESTS)})")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="build into DIR/guests and DIR/firmware instead of in place")
    parser.add_argument("--check", action="store_true",
                        help="build into a temporary directory and compare byte for byte "
                             "with the committed images (exit 1 on any difference)")
    parser.add_argument("--no-firmware", action="store_true",
                        help="do not run firmware/build.py")
    parser.add_argument("--cc", default=os.environ.get("SPE_EMU_CC", DEFAULT_CC),
                        help=f"cross compiler driver (default: {DEFAULT_CC}, or $SPE_EMU_CC)")
    args = parser.parse_args(argv)

    unknown = [g for g in args.guests if g not in GUESTS]
    if unknown:
        parser.error(f"unknown guest(s): {', '.join(unknown)}")
    names = args.guests or list(GUESTS)
    firmware = not args.no_firmware

    try:
        if args.check:
            return check(names, args.cc, firmware)
        for path in build_all(args.out_dir, names, args.cc, firmware):
            print(f"built {path}")
        return 0
    except BuildError as exc:
        print(f"build_images: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
