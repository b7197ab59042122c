"""Helpers for the Linux user-mode tests and the benchmark: building static programs with
Debian's cross gcc, finding Debian's busybox-static (arm64), and running a program on
qemu-aarch64 and on spe-emu with the same arguments."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import child

CC = "aarch64-linux-gnu-gcc"
QEMU_USER = "qemu-aarch64"
CACHE = Path(os.environ.get("SPE_EMU_CACHE", Path.home() / ".cache" / "spe_emu"))
BUSYBOX_DEB_GLOB = "busybox-static_*_arm64.deb"
REPO = Path(__file__).resolve().parent.parent


@dataclass
class Outcome:
    stdout: bytes
    stderr: bytes
    status: int


def build_static(src: str, out: Path, *flags: str, link: str = "-static") -> Path | None:
    """Compile C source text into a static AArch64 Linux program (``link``: -static or
    -static-pie); None without the cross compiler or its C library."""
    if shutil.which(CC) is None:
        return None
    c = out.with_suffix(".c")
    c.write_text(src)
    proc = subprocess.run([CC, link, "-O2", *flags, "-o", str(out), str(c)],
                          capture_output=True, text=True)
    return out if proc.returncode == 0 else None


def busybox() -> Path | None:
    """Debian's busybox-static arm64 binary, extracted from a .deb under the cache directory
    (``apt-get download busybox-static:arm64`` there, after ``dpkg --add-architecture
    arm64 && apt-get update``); None when there is none."""
    target = CACHE / "busybox-static" / "bin" / "busybox"
    if target.is_file():
        return target
    debs = sorted(CACHE.glob(BUSYBOX_DEB_GLOB)) + sorted(CACHE.glob(f"*/{BUSYBOX_DEB_GLOB}"))
    if not debs or shutil.which("dpkg-deb") is None:
        return None
    proc = subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(CACHE / "busybox-static")],
                          capture_output=True)
    return target if proc.returncode == 0 and target.is_file() else None


MUSL_DEB_GLOB = "musl-dev_*_arm64.deb"
MUSL_TRIPLET = "aarch64-linux-musl"


def musl_specs() -> Path | None:
    """A gcc specs file that makes ``aarch64-linux-gnu-gcc -specs FILE -static`` link against
    Debian's musl (arm64), extracted from a ``musl-dev`` .deb under the cache directory
    (``apt-get download musl-dev:arm64`` there, after ``dpkg --add-architecture arm64 &&
    apt-get update``): the .deb's own musl-gcc.specs with its /usr/ paths moved to the
    extracted tree. None when there is no .deb (or no dpkg-deb)."""
    root = CACHE / "musl-dev"
    specs = root / "musl-gcc.specs"
    if specs.is_file():
        return specs
    debs = sorted(CACHE.glob(MUSL_DEB_GLOB)) + sorted(CACHE.glob(f"*/{MUSL_DEB_GLOB}"))
    if not debs or shutil.which("dpkg-deb") is None:
        return None
    if subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(root)],
                      capture_output=True).returncode != 0:
        return None
    original = root / "usr" / "lib" / MUSL_TRIPLET / "musl-gcc.specs"
    if not original.is_file():
        return None
    specs.write_text(original.read_text().replace("/usr/", f"{root}/usr/"))
    return specs


def run_qemu(program: Path | str, args: list[str], cwd: Path, env: dict[str, str],
             stdin: bytes = b"", argv0: str | None = None) -> Outcome:
    """The program on qemu-aarch64; a death by signal N reads as status 128 + N (a shell's
    convention, which spe-emu follows)."""
    cmd = [QEMU_USER]
    if argv0 is not None:
        cmd += ["-0", argv0]
    proc = subprocess.run([*cmd, str(program), *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, timeout=120)
    status = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    return Outcome(proc.stdout, proc.stderr, status)


def run_spe_cli(program: str, args: list[str], share: Path, env: dict[str, str], outdir: Path,
                stdin: bytes = b"", extra: tuple[str, ...] = (), cwd: Path | None = None
                ) -> Outcome:
    """The program on ``spe-emu run`` (this checkout's), environment exactly ``env``."""
    cmd = ["python", "-m", "spe_emu.tools.cli", "run", "--clear-env", "--share", str(share),
           "-o", str(outdir), *extra]
    for k, v in env.items():
        cmd += ["-E", f"{k}={v}"]
    host_env = child.env()
    proc = subprocess.run([*cmd, program, "--", *args], cwd=cwd or share, env=host_env,
                          input=stdin, capture_output=True, timeout=600)
    return Outcome(proc.stdout, proc.stderr, proc.returncode)
