#!/usr/bin/env python3
"""The far side of ``scripts/bench.py --sampled-anchor PYTHON``: runs under PYTHON, an
interpreter with another spe_emu installed (scripts/make-bench-anchor.sh installs the one of
commit 7ff7996, on which issue 26 measured "today's sampled mode"), and times runs of it the
way bench.py times its own: one request per line on stdin, one JSON answer per line on stdout.

Requests (JSON objects):

    {"image": PATH, "interval": N, "outdir": DIR}
        run_image(PATH, RunOptions(mode="fast", interval=N, outdir=DIR,
                                   spe=SpeConfig(model_feed="sampled")))
    {"program": PATH, "args": [...], "interval": N, "outdir": DIR, "stdout": FILE}
        spe_emu.linux.run.run_program with the same options, the program's stdout to FILE

Answer: {"seconds": wall seconds of the call, "instructions": N, "exit_status": N} or
{"error": "one line"}. Only APIs that both sides have are used (run_image, run_program,
RunOptions, LinuxOptions, SpeConfig(model_feed=...)). It refuses to time this checkout's
own spe_emu (the same session.py: the checkout, or an install of it): run it with the
anchor's interpreter from outside the checkout's root (bench.py runs it from its work
directory)."""

import gc
import json
import sys
import time
from pathlib import Path


def serve() -> None:
    try:
        import spe_emu
        from spe_emu.session import RunOptions, run_image
        from spe_emu.spe.config import SpeConfig
    except ImportError as exc:
        raise SystemExit(f"bench_anchor.py: {exc}") from None
    here = Path(__file__).resolve().parents[1] / "spe_emu" / "session.py"
    there = Path(spe_emu.__file__).resolve().parent / "session.py"
    if here.exists() and there.read_bytes() == here.read_bytes():   # (or an install of it)
        raise SystemExit("bench_anchor.py: this is the checkout's own spe_emu, not an anchor")
    for line in sys.stdin:
        req = json.loads(line)
        opts = RunOptions(mode="fast", interval=req["interval"], outdir=Path(req["outdir"]),
                          spe=SpeConfig(model_feed="sampled"))
        gc.collect()
        try:
            if "image" in req:
                t0 = time.perf_counter()
                session = run_image(Path(req["image"]), opts, console=None)
                seconds = time.perf_counter() - t0
            else:
                from spe_emu.linux.process import LinuxOptions
                from spe_emu.linux.run import run_program
                program = Path(req["program"])
                with open(req["stdout"], "wb") as f:
                    lopts = LinuxOptions(argv=[program.name, *req["args"]], stdin_fd=None,
                                         stdout_fd=f.fileno())
                    t0 = time.perf_counter()
                    session = run_program(program, lopts, opts)
                    seconds = time.perf_counter() - t0
            result = session.result
            answer = {"seconds": seconds, "instructions": result.instructions,
                      "exit_status": result.exit_status}
        except Exception as exc:   # (reported to bench.py, which stops with it)
            answer = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    serve()
