"""Build the tiny native instruction counter used by the run loop (see spe_emu/native)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("spe_emu.native._counter", ["spe_emu/native/counter.c"])])
