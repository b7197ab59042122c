"""Build libunicorn from the ``unicorn`` source distribution with spe_emu's patches
(``patches/unicorn/*.patch``, each a documented change small enough to propose upstream).

``pip install .`` runs :func:`build` from setup.py (standard library, pip, cmake and patch_ng,
the build requirements of pyproject.toml): it downloads the source distribution of
:data:`UNICORN_VERSION` with pip, applies the patches, builds the AArch64 library with cmake
and puts ``libunicorn.so.2`` and a ``PATCHES`` list in ``spe_emu/_unicorn/``; importing
spe_emu points the ``unicorn`` binding at it (``LIBUNICORN_PATH``, unless already set). A
built library is kept under ``~/.cache/spe_emu`` by version and patch digest, so installing
again does not rebuild. Where the build cannot run (no compiler, no network), the install
goes on with the binding's own library and says so; ``spe_emu.native.unicorn_patches()``
tells which one a process uses.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

UNICORN_VERSION = "2.1.4"   # (pyproject.toml pins the binding to it: the patches apply to it)
LIB_NAME = "libunicorn.so.2"
PATCH_LIST = "PATCHES"    # (native.unicorn_patches reads it)
ROOT = Path(__file__).resolve().parents[2]
PATCH_DIR = ROOT / "patches" / "unicorn"
CMAKE_OPTIONS = ("-DCMAKE_BUILD_TYPE=Release", "-DUNICORN_ARCH=aarch64",
                 "-DUNICORN_BUILD_TESTS=off", "-DCMAKE_C_VISIBILITY_PRESET=hidden",
                 "-DCMAKE_C_FLAGS=-fno-semantic-interposition")
"""How the library is configured. Only the API (``UNICORN_EXPORT``, default visibility) is
exported and calls inside the library are not interposable, so they are direct calls the
compiler may inline rather than calls through the PLT (the stock build exports its 3,000
internal functions): Debian's 6.1 kernel booted on four PEs took 4.40 s against 4.64 s
(means of three alternating runs each; the debug-info build's perf profile showed
``tcg_emit_op``, ``cpu_get_tb_cpu_state`` and ``flatview_translate`` called through the
PLT)."""


def patches() -> list[Path]:
    """The patch files, in the order they apply."""
    return sorted(PATCH_DIR.glob("*.patch"))


def digest() -> str:
    """What identifies a build: the version, the cmake options and the patches' contents."""
    h = hashlib.sha256(UNICORN_VERSION.encode())
    h.update("\0".join(CMAKE_OPTIONS).encode())
    for p in patches():
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def _cache() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spe_emu"
    return base / f"unicorn-{UNICORN_VERSION}-{digest()}"


def _run(args: list, cwd: Path | None = None) -> None:
    done = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        tail = (done.stdout + done.stderr).strip().splitlines()[-20:]
        raise RuntimeError(f"{' '.join(map(str, args[:4]))} ... failed:\n" + "\n".join(tail))


def _compile(work: Path) -> Path:
    """Download, patch and build in ``work``; the built library's path."""
    import patch_ng

    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
          f"unicorn=={UNICORN_VERSION}", "-d", work])
    sdists = sorted(work.glob(f"unicorn-{UNICORN_VERSION}.tar.gz"))
    if not sdists:
        raise RuntimeError(f"pip gave no unicorn-{UNICORN_VERSION}.tar.gz")
    with tarfile.open(sdists[0]) as tar:
        try:
            tar.extractall(work, filter="data")
        except TypeError:   # (a Python without extraction filters)
            tar.extractall(work)
    source = work / f"unicorn-{UNICORN_VERSION}"
    for p in patches():
        ps = patch_ng.fromfile(str(p))
        if not ps or not ps.apply(strip=0, root=str(source)):
            raise RuntimeError(f"{p.name} does not apply to unicorn {UNICORN_VERSION}")
    build_dir = work / "build"
    _run(["cmake", "-S", source / "src", "-B", build_dir, *CMAKE_OPTIONS])
    _run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 1)])
    return build_dir / LIB_NAME


def build(dest: Path) -> Path:
    """Put the patched library and its ``PATCHES`` list in ``dest`` (built, or taken from the
    cache); returns the library's path. Raises RuntimeError (or OSError) when it cannot be
    built."""
    if not sys.platform.startswith("linux"):
        raise RuntimeError(f"the patched build is made on Linux only ({sys.platform})")
    if shutil.which("cmake") is None:
        raise RuntimeError("no cmake")
    cached = _cache() / LIB_NAME
    if not cached.is_file():
        with tempfile.TemporaryDirectory(prefix="spe-emu-unicorn-") as tmp:
            built = _compile(Path(tmp))
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(".partial")
            shutil.copy2(built, partial)
            partial.replace(cached)
    dest.mkdir(parents=True, exist_ok=True)
    # (a new file renamed over the old one: a process running on the old library keeps it)
    partial = dest / (LIB_NAME + ".partial")
    shutil.copy2(cached, partial)
    partial.replace(dest / LIB_NAME)
    (dest / PATCH_LIST).write_text("".join(f"{p.name}\n" for p in patches()))
    return dest / LIB_NAME
