"""An independent check of the micro-architecture model (docs/model.md "Events and latency
model", issue 26): three static programs -- a streaming loop over 8x the LLC, a pointer chase
through 4x the LLC and glibc's qsort -- run on spe_emu (model_feed "every", the default) and
on qemu-aarch64 with a TCG plugin of our own (tests/model_check/cache_plugin.c) that runs the
same TLB/L1D/L2/LLC geometry and LRU replacement on every data access QEMU makes. The
whole-run counts of ``summary.json``'s ``model`` (accesses by the level that held the line,
TLB walks) agree within 1%.

What neither side sees, or only one does: accesses the host makes for the program (the
loader's and the system calls' copies into guest memory; on qemu-aarch64 the kernel's, which
it emulates in the host too), translation table walks (spe_emu's user mode has its tables
walked by QEMU's softmmu, qemu-aarch64 has none), and DC ZVA's zeroing, which spe_emu's
model sees as a store of the block (patches/unicorn/0002; 65 byte stores through a stock
library's memory hook) and the plugin not at all (QEMU 7.2's helper makes no callback): the
programs below zero no memory with it after start-up. What runs around the program
differs between the two: spe_emu's counts include its EL1 firmware (about 16,500
instructions of start-up, system call entry and exit and exit for an empty program; the
program's own instructions are qemu-aarch64's), so the counts of an empty program
(``base.c``) are subtracted on both sides. QEMU gives plugins
virtual addresses and spe_emu's model physical ones, so the geometries compared are ones where
any one-to-one mapping of pages gives the same outcomes: fully associative levels, and
set-associative ones whose set index comes from address bits [11:6] only (64 sets of 64-byte
lines, as a VIPT L1D's index; the default L1D's 128 and LLC's 1024 sets take page-number bits
a VA and its PA need not share). The programs never unmap memory (qsort's buffer comes from
the heap: ``mallopt``), so no physical page is used for two virtual ones. The two geometries
cover both kinds of set model.c keeps (a row of at most 16 ways, a hashed LRU list above). QEMU runs ``-cpu cortex-a57`` (no SVE, whose string functions glibc would pick
otherwise) with an empty environment, as ``spe_emu.run`` gives the program.

Skipped without Debian's cross gcc, qemu-aarch64 or a host C compiler.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import spe_emu
from linux_progs import CC, QEMU_USER

HERE = Path(__file__).resolve().parent / "model_check"
PROGRAMS = ("stream", "chase", "sortq")
COUNTS = ("accesses", "l1d_hits", "l2_hits", "llc_hits", "dram", "tlb_walks")
HOST_CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
TOLERANCE = 0.01   # of the plugin's count
SLACK = 50         # counts this small are compared to within this many

pytestmark = pytest.mark.skipif(
    not (shutil.which(CC) and shutil.which(QEMU_USER) and HOST_CC),
    reason=f"needs {CC}, {QEMU_USER} and a host C compiler")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("model_check")
    subprocess.run([HOST_CC, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-o",
                    str(out / "cache_plugin.so"), str(HERE / "cache_plugin.c")], check=True)
    for name in ("base", *PROGRAMS):
        subprocess.run([CC, "-O2", "-static", "-o", str(out / name), str(HERE / f"{name}.c")],
                       check=True)
    return out


# (level: (lines, ways)) -- TLB in 4 KiB pages, the others in 64-byte lines; no L2
GEOMETRIES = {
    "fully-associative": {"tlb": (48, 0), "l1d": (512, 0), "llc": (16384, 0)},
    "page-offset-sets": {"tlb": (48, 0), "l1d": (256, 4), "llc": (4096, 64)},
}


def plugin_counts(built: Path, name: str, geometry: dict) -> dict[str, int]:
    """The plugin's counts for a run of ``name`` on qemu-aarch64."""
    out = built / f"{name}.json"
    levels = ",".join(f"{level}={lines}:{ways}" for level, (lines, ways) in geometry.items())
    subprocess.run([QEMU_USER, "-cpu", "cortex-a57", "-plugin",
                    f"{built / 'cache_plugin.so'},out={out},{levels},l2=0:0", str(built / name)],
                   check=True, env={}, capture_output=True, timeout=120)
    return json.loads(out.read_text())


def model_counts(built: Path, name: str, geometry: dict) -> dict[str, int]:
    model = {"l2_lines": 0}
    for level, (lines, ways) in geometry.items():
        model["tlb_entries" if level == "tlb" else f"{level}_lines"] = lines
        model[f"{level}_ways"] = ways
    result = spe_emu.run(str(built / name), spe_model=model)
    assert result.status == 0 and result.summary["model"]["feed"] == "every"
    return result.summary["model"]


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_plugin_model_agrees_with_spe_emu(built, geometry):
    geometry = GEOMETRIES[geometry]
    spe_base, qemu_base = model_counts(built, "base", geometry), plugin_counts(built, "base",
                                                                              geometry)
    seen = {}
    for name in PROGRAMS:
        spe, qemu = model_counts(built, name, geometry), plugin_counts(built, name, geometry)
        seen[name] = qemu
        assert qemu["accesses"] > 1_000_000, name
        for key in COUNTS:
            ours, theirs = spe[key] - spe_base[key], qemu[key] - qemu_base[key]
            assert abs(ours - theirs) <= max(TOLERANCE * theirs, SLACK), (name, key, ours,
                                                                          theirs)
    # (each program stresses what it is for: the stream misses the L1D line by line, the
    # chase misses the LLC and the TLB at nearly every step)
    assert seen["stream"]["dram"] > 0.06 * seen["stream"]["accesses"]
    assert seen["chase"]["tlb_walks"] > 0.6 * seen["chase"]["accesses"]
