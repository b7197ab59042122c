#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Build the spe_fw firmware ELF reproducibly (Python standard library only).

    python firmware/build.py [--out PATH] [--cross-compile PREFIX] [--selftest]

The same sources give the same bytes from any checkout path: sources are
compiled from the repository root by relative path with
-ffile-prefix-map=<repo>=., there is no build-id, no debug info, no
timestamps, and objects are linked in a fixed order.
Needs a GNU AArch64 cross toolchain (Debian: gcc-aarch64-linux-gnu,
binutils-aarch64-linux-gnu); prints a one-line error and exits 1 without it.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FW_DIR = Path(__file__).resolve().parent
REPO = FW_DIR.parent
DEFAULT_OUT = FW_DIR / "spe_fw.elf"
DEFAULT_CROSS = "aarch64-linux-gnu-"

# link order = this order; start.S provides _start (placed first by fw.ld anyway)
SOURCES = [
    "start.S",
    "vectors.S",
    "main.c",
    "spe.c",
    "gic.c",
    "semihost.c",
    "lib.c",
]
LINKER_SCRIPT = "fw.ld"

CFLAGS = [
    "-march=armv8.2-a+profile",
    "-mgeneral-regs-only",
    "-mstrict-align",
    "-mcmodel=small",
    "-std=gnu11",
    "-O2",
    "-g0",
    "-ffreestanding",
    "-fno-builtin",
    "-fno-common",
    "-fno-pie",
    "-fno-stack-protector",
    "-fno-asynchronous-unwind-tables",
    "-fno-unwind-tables",
    "-fno-ident",
    "-Wall",
    "-Wextra",
]
LDFLAGS = [
    "-nostdlib",
    "-static",
    "-no-pie",
    "-Wl,--build-id=none",
    "-Wl,-z,max-page-size=4096",
    "-Wl,-z,noexecstack",
    "-Wl,--no-undefined",
]


def run(cmd, cwd):
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True, text=True)
    if proc.stdout or proc.stderr:  # warnings
        sys.stderr.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.stderr.write("build.py: command failed: %s\n" % " ".join(cmd))
        sys.exit(1)


def _env():
    env = dict(os.environ)
    env.update(LC_ALL="C", SOURCE_DATE_EPOCH="0", TZ="UTC")
    return env


def build(out: Path, cross: str, selftest: bool = False) -> Path:
    gcc = shutil.which(cross + "gcc")
    if gcc is None:
        print(
            "build.py: error: %sgcc not found (install gcc-aarch64-linux-gnu and "
            "binutils-aarch64-linux-gnu, or pass --cross-compile)" % cross,
            file=sys.stderr,
        )
        sys.exit(1)

    rel_fw = FW_DIR.relative_to(REPO).as_posix()
    cflags = CFLAGS + [
        "-ffile-prefix-map=%s=." % REPO,
        "-I", rel_fw,
    ]
    if selftest:
        cflags.append("-DSPE_FW_SELFTEST")

    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="spe_fw_build_") as tmp:
        objs = []
        for i, src in enumerate(SOURCES):
            obj = os.path.join(tmp, "%02d_%s.o" % (i, src.replace(".", "_")))
            run([gcc] + cflags + ["-c", "%s/%s" % (rel_fw, src), "-o", obj], cwd=REPO)
            objs.append(obj)
        tmp_out = os.path.join(tmp, "spe_fw.elf")
        run(
            [gcc] + cflags + LDFLAGS
            + ["-T", "%s/%s" % (rel_fw, LINKER_SCRIPT), "-o", tmp_out] + objs,
            cwd=REPO,
        )
        shutil.copyfile(tmp_out, out)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT),
                    help="output ELF (default: firmware/spe_fw.elf)")
    ap.add_argument("--cross-compile", default=os.environ.get("CROSS_COMPILE", DEFAULT_CROSS),
                    help="toolchain prefix (default: $CROSS_COMPILE or %s)" % DEFAULT_CROSS)
    ap.add_argument("--selftest", action="store_true",
                    help="test build: pend PMBIRQ by software before entering the guest")
    args = ap.parse_args(argv)
    out = build(Path(args.out), args.cross_compile, args.selftest)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
