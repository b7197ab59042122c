#!/usr/bin/env python3
"""Count the host instructions one run costs, per mode, with callgrind: a measure that does not
move with the host's speed.

Wall-clock figures on a shared machine swing by 2x within minutes (README "Speed"); the number
of host instructions a run executes does not. For each mode this script runs the guest under
``valgrind --tool=callgrind`` twice, in fresh processes with PYTHONHASHSEED=0 (set and dict
orders, and so the work done, are the same every time): two warm-up runs, then garbage
collection off and one or two counted runs. The difference of the two totals is the cost of
one steady-state run (imports, warm-up and interpreter start-up cancel out). It prints host
instructions per run for each mode and, for SPE modes, per sample above the profiling-off run
(the same definition as scripts/bench.py's per-sample column, in instructions instead of
microseconds). Slow: each process takes 20-60 s under valgrind; modes run two at a time.

Usage:
    python scripts/count_insns.py --guest sort                 # modes off, 65536, 4096
    python scripts/count_insns.py --guest interp --mode off --mode 1024 --mode raw

Exit status: 0; 2 when valgrind is missing, a mode is not understood or a run fails.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if (ROOT / "spe_emu" / "__init__.py").exists() and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # measure the checkout this script belongs to

WARMUP_RUNS = 2
_COLLECTED = re.compile(r"Collected : (\d+)")


def run_options(mode: str, outdir: Path):
    """RunOptions for ``mode``: raw, off (profiling disabled) or an SPE interval, as
    scripts/bench.py runs its raw, spe-disabled and spe rows."""
    from bench import modes_for  # (this script's directory is on sys.path)
    intervals = [] if mode in ("raw", "off") else [int(mode)]
    key = {"raw": "raw", "off": "spe-disabled"}.get(mode, f"spe@{mode}")
    return {m.key: m for m in modes_for(intervals, reference=False)}[key].run_options(outdir)


def child(guest: str, mode: str, counted: int) -> None:
    """The process valgrind runs: warm-up runs, then ``counted`` runs with GC off; prints the
    samples of the last run."""
    from spe_emu.session import run_image
    image = ROOT / "guests" / f"{guest}.elf"
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(WARMUP_RUNS):
            run_image(image, run_options(mode, Path(tmp)), console=None)
        gc.collect()
        gc.disable()
        for _ in range(counted):
            session = run_image(image, run_options(mode, Path(tmp)), console=None)
    print(f"samples {session.result.samples}")


def count(guest: str, mode: str, counted: int, workdir: Path) -> tuple[int, int]:
    """(host instructions, samples of one run) of a child process under callgrind."""
    out = workdir / f"{guest}.{mode}.{counted}.callgrind"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
           "--smc-check=all-non-file", sys.executable, __file__, "--child", guest, mode,
           str(counted)]
    # (a fixed hash seed: set and dict orders, and so the work done, are the same every time)
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    found = _COLLECTED.search(proc.stderr)
    samples = re.search(r"samples (\d+)", proc.stdout)
    if proc.returncode != 0 or found is None or samples is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{guest} {mode}: run under valgrind failed: {' | '.join(tail)}")
    return int(found.group(1)), int(samples.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--guest", default="sort", help="guest (guests/NAME.elf); default sort")
    ap.add_argument("--mode", action="append",
                    help="raw, off or an SPE interval; repeatable; default: off 65536 4096")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        guest, mode, counted = args.child
        child(guest, mode, int(counted))
        return 0
    modes = args.mode or ["off", "65536", "4096"]
    for mode in modes:
        if mode not in ("raw", "off") and not mode.isdigit():
            print(f"error: mode {mode!r} is not raw, off or an interval", file=sys.stderr)
            return 2
    if not (ROOT / "guests" / f"{args.guest}.elf").exists():
        print(f"error: no guest guests/{args.guest}.elf", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None:
        print("error: valgrind is not installed (apt install valgrind)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        jobs = {(m, k): pool.submit(count, args.guest, m, k, Path(tmp))
                for m in modes for k in (1, 2)}
        try:
            results = {key: job.result() for key, job in jobs.items()}
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    per_run = {m: results[(m, 2)][0] - results[(m, 1)][0] for m in modes}
    print(f"{args.guest}: host instructions per steady-state run (callgrind, GC off)")
    for m in modes:
        samples = results[(m, 2)][1]
        line = f"  {m:>6}: {per_run[m] / 1e6:9.2f} M"
        if m not in ("raw", "off") and "off" in per_run and samples:
            line += (f"  samples {samples:6d}  per sample above off "
                     f"{(per_run[m] - per_run['off']) / samples / 1e3:8.1f} K")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
