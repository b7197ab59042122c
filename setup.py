"""Build the native run-loop helpers (block-hook counter, record builder; see spe_emu/native)."""
import importlib.util
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The source list and digest the loader checks (spe_emu/native/sources.py, standard library
# only), loaded by path: the package is not importable before it is built.
ROOT = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("spe_native_sources",
                                               ROOT / "spe_emu/native/sources.py")
sources = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sources)

_spec = importlib.util.spec_from_file_location("spe_unicorn_build",
                                               ROOT / "spe_emu/native/unicorn_build.py")
unicorn_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(unicorn_build)


class BuildExtAndUnicorn(build_ext):
    """The native helpers, then libunicorn with the patches of patches/unicorn
    (spe_emu/native/unicorn_build.py) into spe_emu/_unicorn/ next to the built package."""

    def run(self):
        super().run()
        package = Path(self.get_ext_fullpath("spe_emu.native._counter")).parent.parent
        # The bundled guests (guests/*.elf) go into the package, so that an installed spe_emu
        # runs them from anywhere (spe_emu.bundled_guest)
        (package / "guests").mkdir(parents=True, exist_ok=True)
        for elf in sorted((ROOT / "guests").glob("*.elf")):
            (package / "guests" / elf.name).write_bytes(elf.read_bytes())
        dest = package / "_unicorn"
        if os.environ.get("SPE_EMU_STOCK_UNICORN"):
            print("spe_emu: SPE_EMU_STOCK_UNICORN is set: the unicorn binding's own library "
                  "is used", file=sys.stderr)
            return
        try:
            lib = unicorn_build.build(dest)
        except (RuntimeError, OSError, ImportError) as err:
            print(f"spe_emu: WARNING: the patched libunicorn was not built ({err}); the "
                  f"unicorn binding's own library will be used (slower memory hooks)",
                  file=sys.stderr)
        else:
            print(f"spe_emu: patched libunicorn: {lib}", file=sys.stderr)


setup(cmdclass={"build_ext": BuildExtAndUnicorn},
      ext_modules=[Extension("spe_emu.native._counter",
                             [str(p.relative_to(ROOT)) for p in sources.SOURCES],
                             depends=[str(sources.HEADER.relative_to(ROOT))],
                             define_macros=[("SPE_SOURCE_DIGEST",
                                             f'"{sources.source_digest()}"')],
                             # (the model's per-access and per-block paths call across
                             # files and through exported names: let the compiler inline)
                             extra_compile_args=["-flto", "-fno-semantic-interposition"],
                             extra_link_args=["-flto", "-O3"])])
