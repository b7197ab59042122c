"""Build the native run-loop helpers (block-hook counter, record builder; see spe_emu/native)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("spe_emu.native._counter",
                            ["spe_emu/native/counter.c", "spe_emu/native/record.c"],
                            depends=["spe_emu/native/spe_native.h"])])
