"""spe-emu run --ground-truth: exact per-PC execution counts from the native block hook, and
the sampling error ``spe-emu report`` derives from them (shrinking about as 1/sqrt(samples)
with --random; stuck at the aliasing error with a fixed interval the loop length divides)."""

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from spe_emu.cpu.machine import Machine
from spe_emu.session import RunOptions, prepare_machine, run_image
from spe_emu.tools.report import build_report, load_ground_truth

ROOT = Path(__file__).resolve().parents[1]
SORT = ROOT / "guests" / "sort.elf"
CC = shutil.which("aarch64-linux-gnu-gcc")

# A loop of 5 instructions: 5 divides INTERVAL x 256 + 1 (the period of a fixed interval,
# docs/model.md "Sample population") for INTERVAL = 4, 9, 19 (1024, 2304, 4864 operations).
LOOP5 = """
    .section .text.start, "ax", %progbits
    .global _start
    .type _start, %function
_start:
    movz x0, #0x5000, lsl #16
    mov sp, x0
    ldr x1, =200000
    mov x2, #0
    .global loop
    .type loop, %function
loop:
    add x2, x2, #1
    eor x3, x2, x1
    add x4, x3, #7
    subs x1, x1, #1
    b.ne loop
    .size loop, .-loop
    mov x0, #0
    mov x8, #93
    svc #0
"""


@pytest.fixture(scope="module")
def loop5(tmp_path_factory):
    if CC is None:
        pytest.skip("aarch64-linux-gnu-gcc not installed")
    d = tmp_path_factory.mktemp("loop5")
    (d / "loop5.S").write_text(LOOP5)
    subprocess.run([CC, "-nostdlib", "-static", "-no-pie", "-T", str(ROOT / "guests/guest.ld"),
                    "-Wl,--build-id=none", "-Wl,--no-warn-rwx-segments", "-o",
                    str(d / "loop5.elf"), str(d / "loop5.S")], check=True)
    return d / "loop5.elf"


def _run(image, out, **kw):
    session = run_image(image, RunOptions(outdir=out, ground_truth=True, **kw))
    exact = load_ground_truth(out / "ground_truth.json")
    return session, exact


def test_ground_truth_counts_every_instruction(tmp_path):
    session, exact = _run(SORT, tmp_path)
    data = json.loads((tmp_path / "ground_truth.json").read_text())
    assert data["instructions"] == sum(exact.values()) == session.result.instructions
    # guests/README.md: 1,159,795 instructions of sort.elf (_start to the exit svc), counted
    # independently with a Unicorn code hook; the firmware's PCs are outside the guest region
    assert sum(n for pc, n in exact.items() if 0x4800_0000 <= pc < 0x5000_0000) == 1_159_795
    assert all(pc % 4 == 0 and n > 0 for pc, n in exact.items())


def test_ground_truth_matches_a_per_instruction_hook(loop5, tmp_path):
    """Per PC, the block counts equal a Unicorn code hook's (one Python call per instruction,
    the independent count), firmware included."""
    from unicorn import UC_HOOK_CODE

    opts = RunOptions(outdir=tmp_path, interval=1024)
    machine: Machine = prepare_machine(loop5, opts)
    hooked: dict[int, int] = {}

    def on_code(uc, address, size, _):
        hooked[address] = hooked.get(address, 0) + 1
    machine.uc.hook_add(UC_HOOK_CODE, on_code)
    machine.enable_ground_truth()
    result = machine.run()
    counts = machine.ground_truth()
    assert sum(counts.values()) == result.instructions
    loop = {pc: n for pc, n in counts.items() if 0x4800_0000 <= pc < 0x5000_0000}
    assert loop == {pc: n for pc, n in hooked.items() if 0x4800_0000 <= pc < 0x5000_0000}
    assert sorted(loop.values()).count(200_000) == 5          # the loop body
    # (a code hook also sees instructions an exception entry abandons: at most a few)
    assert sum(hooked.values()) - sum(counts.values()) in range(0, 64)


def test_default_run_writes_no_ground_truth(tmp_path):
    (tmp_path / "ground_truth.json").write_text("{}")      # a stale one is removed
    run_image(SORT, RunOptions(outdir=tmp_path))
    assert not (tmp_path / "ground_truth.json").exists()


def _error(loop5, out, **kw) -> tuple[int, float]:
    session, exact = _run(loop5, out, **kw)
    gt = build_report(session.trace_path.read_bytes(), loop5, ground_truth=exact).ground_truth
    return gt["samples"], gt["error_pcs"]


def test_random_sampling_error_shrinks_as_one_over_sqrt_samples(loop5, tmp_path):
    """With --random the per-PC error (total variation distance, percent points) falls about
    as 1/sqrt(samples): the slope of log(error) over log(samples) is near -1/2."""
    points = []
    for interval in (256, 1024, 4096, 16384):
        runs = [_error(loop5, tmp_path / f"r{interval}-{seed}", interval=interval,
                       random=True, seed=seed) for seed in range(4)]
        n = sum(r[0] for r in runs) / len(runs)
        err = sum(r[1] for r in runs) / len(runs)
        points.append((n, err))
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(e) for _, e in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
             / sum((x - mx) ** 2 for x in xs))
    assert -0.8 < slope < -0.3, points
    assert points[0][1] < 4.0 < points[-1][1], points    # ~2600 samples vs ~40


def test_fixed_interval_aliasing_does_not_shrink(loop5, tmp_path):
    """A fixed interval whose period (INTERVAL x 256 + 1) the 5-instruction loop divides
    samples one PC of the loop only: the error stays at 80 points however many samples."""
    errors = [_error(loop5, tmp_path / str(i), interval=i) for i in (1024, 2304, 4864)]
    assert [n for n, _ in errors] == sorted((n for n, _ in errors), reverse=True)
    for _, err in errors:
        assert err == pytest.approx(80.0, abs=1.0)



def test_exception_ends_the_counted_block():
    """spe_end_block_at (Machine._take_sync and the native INTR hook): the block hook counted a
    5-instruction block whole on entry; an exception at its third instruction leaves 2 + 1
    retired in it and the ground-truth count moved from the 5-instruction block to its first 3.
    An instruction outside the block (an Instruction Abort) retires nothing more."""
    from spe_emu import native
    c = native.SpeCounter()
    native.ground_truth_enable(c)
    c.insns, c.block_start, c.block_insns = 12, 0x1000, 5
    native.ground_truth_add(c, 0x1000, 5, 1)
    assert native.end_block_at(c, 0x1008) == 10
    assert (c.insns, c.block_insns) == (10, 3)
    assert native.ground_truth_blocks(c) == {(0x1000, 3): 1}
    assert native.end_block_at(c, 0x2000) == 10 and (c.insns, c.block_insns) == (10, 3)
    native.ground_truth_free(c)
