"""The C sources of the native run-loop helpers and their digest.

Standard library only: setup.py loads this file by path (before the package is installed) to
build the extension with ``SPE_SOURCE_DIGEST``, and the loader compares that digest with the
sources next to it, so a build of other sources is never used.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "counter.c", HERE / "record.c", HERE / "model.c", HERE / "exception.c",
           HERE / "gic.c", HERE / "decode.c", HERE / "uart.c")
HEADER = HERE / "spe_native.h"
# where ``pip install .`` puts the patched libunicorn (unicorn_build.py) and its PATCHES list
UNICORN_DIR = HERE.parent / "_unicorn"


def source_digest() -> str:
    """16 hex digits of SHA-256 over the sources and the header, in that order."""
    return hashlib.sha256(b"".join(p.read_bytes() for p in (*SOURCES, HEADER))).hexdigest()[:16]
