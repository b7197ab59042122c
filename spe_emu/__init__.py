"""spe_emu: an AArch64 emulator with a model of the Arm Statistical Profiling Extension.

The Python API (README, "Python API"): :func:`run` runs one program with SPE and returns a
:class:`Result` (counts, trace and records, console, registers at exit, exit reason and
status); errors derive from :class:`spe_emu.errors.SpeEmuError`. The pytest plugin
(:mod:`spe_emu.pytest_plugin`) gives users' own tests an ``spe_machine`` fixture.
"""

import os as _os

from .native.sources import UNICORN_DIR as _UNICORN_DIR

# The patched libunicorn that ``pip install .`` builds (spe_emu/native/unicorn_build.py):
# the unicorn binding loads the library LIBUNICORN_PATH names, when it is first imported
# (a process that imported unicorn before spe_emu keeps the binding's own library).
if (_UNICORN_DIR / "libunicorn.so.2").is_file():
    _os.environ.setdefault("LIBUNICORN_PATH", str(_UNICORN_DIR))

from .errors import (ConfigError, GuestError, GuestRunaway, ImageError, SpeEmuError,
                     TraceDecodeError)

__all__ = ["run", "Result", "EXIT_REASONS", "SpeEmuError", "ConfigError", "ImageError",
           "GuestError", "GuestRunaway", "TraceDecodeError", "bundled_guest"]


def bundled_guest(name: str) -> str:
    """The path (str) of the bundled guest ``name`` ("sort", "interp", "matmul",
    "pointer_chase", "asm_loop"; guests/README.md): the copy ``pip install`` puts in the
    package, else, in a source checkout, ``guests/NAME.elf`` beside it. Usable from any
    directory (the pytest plugin's example).

    Raises:
        ImageError: no bundled guest of that name.
    """
    from pathlib import Path
    here = Path(__file__).resolve().parent
    for folder in (here / "guests", here.parent / "guests"):
        path = folder / f"{name}.elf"
        if path.is_file():
            return str(path)
    known = sorted({p.stem for folder in (here / "guests", here.parent / "guests")
                    if folder.is_dir() for p in folder.glob("*.elf")})
    raise ImageError(f"no bundled guest {name!r} (bundled: {', '.join(known) or 'none'})")


def __getattr__(name: str):
    # (the API pulls in Unicorn and the machine: loaded on first use, so that importing a
    # light module such as spe_emu.spe.packets stays light)
    if name in ("run", "Result", "EXIT_REASONS"):
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'spe_emu' has no attribute {name!r}")
