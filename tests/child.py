"""The environment of a child process that must run the same spe_emu as this test process.

A clean checkout tested after ``pip install .`` imports the installed package, whose
``spe_emu/_unicorn`` holds the patched libunicorn (patches/unicorn); the checkout's own
``spe_emu`` has none, so a child pointed at the checkout (``PYTHONPATH=<checkout>``) would
run on the unicorn binding's stock library, without the patches (no PMUv3 of ours, no
native paths that need them). ``env()`` points the child at the package this process
imported, wherever it is.
"""
from __future__ import annotations

import os
from pathlib import Path

import spe_emu

#: The directory the imported ``spe_emu`` package sits in (the checkout for an editable
#: install, site-packages for ``pip install .``).
PACKAGE_PARENT = Path(spe_emu.__file__).resolve().parent.parent


def env(base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """``base`` (default: this process's environment) plus ``extra``, with PYTHONPATH
    putting :data:`PACKAGE_PARENT` first and PYTHONSAFEPATH set, so ``python -m spe_emu...``
    or ``python -c ...`` in the child imports the package this process runs, whatever its
    working directory (tests/test_child_env.py checks it)."""
    out = dict(os.environ if base is None else base, **extra)
    rest = out.get("PYTHONPATH", "")
    out["PYTHONPATH"] = str(PACKAGE_PARENT) + (os.pathsep + rest if rest else "")
    # (Python 3.11+: no current directory or script directory ahead of PYTHONPATH, so a
    # child started in the checkout still imports PACKAGE_PARENT's spe_emu)
    out["PYTHONSAFEPATH"] = "1"
    return out
