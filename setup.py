"""Build the native run-loop helpers (block-hook counter, record builder; see spe_emu/native)."""
import hashlib
from pathlib import Path

from setuptools import Extension, setup

NATIVE = Path("spe_emu/native")
SOURCES = [NATIVE / "counter.c", NATIVE / "record.c"]
HEADER = NATIVE / "spe_native.h"
# The digest spe_emu.native.source_digest() expects: the loader uses only a build of these
# sources.
DIGEST = hashlib.sha256(b"".join(p.read_bytes() for p in (*SOURCES, HEADER))).hexdigest()[:16]

setup(ext_modules=[Extension("spe_emu.native._counter", [str(p) for p in SOURCES],
                             depends=[str(HEADER)],
                             define_macros=[("SPE_SOURCE_DIGEST", f'"{DIGEST}"')])])
