"""Build the native run-loop helpers (block-hook counter, record builder; see spe_emu/native)."""
import importlib.util
from pathlib import Path

from setuptools import Extension, setup

# The source list and digest the loader checks (spe_emu/native/sources.py, standard library
# only), loaded by path: the package is not importable before it is built.
ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("spe_native_sources",
                                               ROOT / "spe_emu/native/sources.py")
sources = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sources)

setup(ext_modules=[Extension("spe_emu.native._counter",
                             [str(p.relative_to(ROOT)) for p in sources.SOURCES],
                             depends=[str(sources.HEADER.relative_to(ROOT))],
                             define_macros=[("SPE_SOURCE_DIGEST",
                                             f'"{sources.source_digest()}"')])])
