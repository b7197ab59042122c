"""Load the native block-hook instruction counter (``counter.c``).

``pip install .`` builds it as the extension ``spe_emu.native._counter``. When the package runs
from a source tree without a build, the C file is compiled once with the system C compiler into
``~/.cache/spe_emu`` (keyed by a hash of the source). Either way the result is opened with
ctypes and only its ``spe_block_hook`` symbol is used.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.machinery
import os
import subprocess
import sysconfig
from pathlib import Path

from ..errors import SpeEmuError

_HERE = Path(__file__).resolve().parent
_SOURCE = _HERE / "counter.c"


class NativeBuildError(SpeEmuError):
    """The native counter could not be found or compiled."""


CAP_MAX = 64          # SPE_CAP_MAX
CAP_REGS = 33         # SPE_CAP_REGS: X0-X30, SP, NZCV
VERDICTS = 4096       # SPE_VERDICTS


class SpeCapture(ctypes.Structure):
    """Mirror of ``struct spe_capture``: a sample observed at the start of its block."""

    _fields_ = [("index", ctypes.c_uint64), ("pc", ctypes.c_uint64),
                ("mode", ctypes.c_uint64), ("next_pc", ctypes.c_uint64),
                ("regs", ctypes.c_uint64 * CAP_REGS)]


class SpeVerdict(ctypes.Structure):
    _fields_ = [("pc", ctypes.c_uint64), ("n", ctypes.c_uint32), ("k", ctypes.c_uint16),
                ("mode", ctypes.c_uint16)]


class SpeCounter(ctypes.Structure):
    """Mirror of ``struct spe_counter`` in counter.c (all counts in instructions)."""

    _fields_ = [("insns", ctypes.c_uint64), ("block_start", ctypes.c_uint64),
                ("block_insns", ctypes.c_uint64), ("stop_at", ctypes.c_uint64),
                ("emu_stop", ctypes.c_void_p), ("stops", ctypes.c_uint64),
                ("stop_block", ctypes.c_uint64), ("stop_block_insns", ctypes.c_uint64),
                ("event_at", ctypes.c_uint64), ("gap", ctypes.c_uint64),
                ("limit", ctypes.c_uint64), ("cap_budget", ctypes.c_uint64),
                ("cap_count", ctypes.c_uint64), ("completing", ctypes.c_uint64),
                ("reg_read_batch", ctypes.c_void_p),
                ("reg_ids", ctypes.c_int32 * (CAP_REGS + 1)),
                ("caps", SpeCapture * CAP_MAX), ("verdicts", SpeVerdict * VERDICTS)]


def _built_extension() -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = _HERE / f"_counter{suffix}"
        if candidate.exists():
            return candidate
    return None


def _compile_into_cache() -> Path:
    source = _SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spe_emu"
    target = cache / f"counter-{digest}.so"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    include = sysconfig.get_paths()["include"]
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cmd = [os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", f"-I{include}", "-o", str(tmp),
           str(_SOURCE)]
    try:
        subprocess.run(cmd, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        raise NativeBuildError(f"cannot compile {_SOURCE.name} with {cmd[0]}: "
                               f"{detail.decode(errors='replace').strip() or exc}") from exc
    os.replace(tmp, target)
    return target


_LIB: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """The loaded native library (built extension, else compiled into the cache)."""
    global _LIB
    if _LIB is None:
        built = _built_extension()
        lib = ctypes.CDLL(str(built)) if built else None
        if lib is None or not _layout_matches(lib):
            # No build, or a stale one (e.g. an in-place build older than counter.c).
            lib = ctypes.CDLL(str(_compile_into_cache()))
            if not _layout_matches(lib):
                raise NativeBuildError(f"{_SOURCE.name}: struct spe_counter does not match "
                                       f"SpeCounter")
        _LIB = lib
    return _LIB


def _layout_matches(lib: ctypes.CDLL) -> bool:
    try:
        size = ctypes.c_uint64.in_dll(lib, "spe_counter_size").value
    except ValueError:
        return False
    return size == ctypes.sizeof(SpeCounter)


def verdict_add(counter: SpeCounter, pc: int, n: int, k: int, mode: int) -> bool:
    """Let the hook capture instruction ``k`` of the ``n``-instruction block at ``pc``, observed
    as ``mode`` says (1: at the block's start, 2: branch outcome from the next block entered,
    3: at the block's end); False when the table has no room for it (it is then simply not
    captured)."""
    return bool(library().spe_verdict_add(ctypes.byref(counter), ctypes.c_uint64(pc),
                                          ctypes.c_uint32(n), ctypes.c_uint32(k),
                                          ctypes.c_uint32(mode)))


def verdicts_clear(counter: SpeCounter) -> None:
    """Forget every verdict (code may have changed)."""
    library().spe_verdicts_clear(ctypes.byref(counter))


def block_hook_address() -> int:
    """Address of ``spe_block_hook`` for ``uc_hook_add(UC_HOOK_BLOCK, ...)``."""
    return ctypes.cast(library().spe_block_hook, ctypes.c_void_p).value
