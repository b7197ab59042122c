"""``max_insns`` (``--max-insns``) holds on every path of every run loop (issue 13).

Each guest below never exits; every run loop (fast, reference, raw) must end it with
:class:`GuestRunaway` after exactly ``BUDGET`` instructions, at the same PC. The paths: a plain
loop; a virtual IRQ (HCR_EL2.{IMO, VI}, taken by Unicorn's QEMU itself, with no hook of
spe_emu's) whose handler returns past the loop the guest waited in; a virtual IRQ taken again
at every return; WFI with a masked virtual IRQ pending (a wake-up event: WFI does not wait);
a synchronous exception (SVC) in every iteration; the same virtual IRQ guest with profiling
enabled (captured, predicted and split samples in the fast loop). The raw loop once counted no
instructions and ran these forever; it also took 10,000 SVCs for an exception loop.

Each run is made in a forked child with a time limit, so a loop that ignores the budget fails
the test instead of hanging the suite.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from asmrun import EXIT, asm_machine, spe_prologue
from spe_emu.errors import GuestRunaway

BUDGET = 20_000
TIME_LIMIT = 60   # seconds per run (the reference loop needs about 1 s)
STACK = 0x4100_0000
HCR_RW, HCR_IMO, HCR_VI = 1 << 31, 1 << 4, 1 << 7
SPSR_EL1H_I_CLEAR, SPSR_EL1H_MASKED = 0x345, 0x3C5   # EL1h, D A F (and I) masked

# From EL2: SP_EL1 = SP, VBAR_EL1 = vectors, HCR_EL2 = RW | hcr, ERET to el1 with spsr.
TO_EL1 = """
    mov x0, sp
    msr sp_el1, x0
    adr x0, vectors
    msr vbar_el1, x0
    movz x0, #{hcr_hi:#x}, lsl #16
    mov x1, #{hcr_lo:#x}
    orr x0, x0, x1
    msr hcr_el2, x0
    adr x0, el1
    msr elr_el2, x0
    mov x0, #{spsr:#x}
    msr spsr_el2, x0
    eret
"""


def to_el1(hcr: int, spsr: int) -> str:
    hcr |= HCR_RW
    return TO_EL1.format(hcr_hi=hcr >> 16, hcr_lo=hcr & 0xFFFF, spsr=spsr)


VIRQ_PAST_LOOP = to_el1(HCR_IMO | HCR_VI, SPSR_EL1H_I_CLEAR) + """
el1: b el1
after: b after
    .balign 2048
vectors:
    .skip 0x280
    adr x1, after
    msr elr_el1, x1
    mov x2, #0x3c5
    msr spsr_el1, x2
    eret
"""

# name: (boot EL, program)
GUESTS = {
    "loop": (1, "spin: b spin\n"),
    "virq-returns-past-loop": (2, VIRQ_PAST_LOOP),
    "virq-taken-again": (2, to_el1(HCR_IMO | HCR_VI, SPSR_EL1H_I_CLEAR) + """
el1: b el1
    .balign 2048
vectors:
    .skip 0x280
    eret
"""),
    "wfi-with-masked-virq": (2, to_el1(HCR_IMO | HCR_VI, SPSR_EL1H_MASKED) + """
el1: wfi
    b el1
    .balign 2048
vectors:
"""),
    "svc-loop": (1, """
    adr x0, vectors
    msr vbar_el1, x0
spin: svc #0
    b spin
    .balign 2048
vectors:
    .skip 0x200
    eret
"""),
    # PMSCR_EL1.{E1SPE, E0SPE}, a fixed interval of 256 (captured and predicted samples)
    "virq-profiled": (2, spe_prologue(0x3, 0x4080_0000).replace(
        "adr x0, vectors\n    msr vbar_el1, x0\n", "") + VIRQ_PAST_LOOP),
    # PMSIRR_EL1.RND = 1: no fixed gap, samples are predicted or split
    "virq-profiled-random": (2, spe_prologue(0x3, 0x4080_0000, pmsirr=0x101).replace(
        "adr x0, vectors\n    msr vbar_el1, x0\n", "") + VIRQ_PAST_LOOP),
}
# Guests the exception-loop guard stops (GuestError) before the budget: name: (boot EL, program)
LOOPS = {
    # (issue 29 item 7) the synchronous vector at VBAR_EL1 + 0x200 is itself UNDEFINED: each
    # entry retires that one instruction, which the guard once took for progress
    "undefined-vector": (1, """
    adr x0, vectors
    msr vbar_el1, x0
    isb
    .word 0                     // UDF #0: Undefined Instruction, to EL1's vector ...
    .balign 2048
vectors:
    .skip 0x200
    .word 0                     // ... which is UDF #0 again
"""),
}
UNDEFINED_VECTOR = 0x4000_0A00   # (asmrun's BASE + 0x800, the table, + 0x200)
MODES = ("fast", "reference", "raw")
PROFILED = {"virq-profiled", "virq-profiled-random"}   # not raw: it has no SPE model


def modes(name: str) -> tuple[str, ...]:
    return MODES[:2] if name in PROFILED else MODES


def _run(name: str, mode: str, outdir: str, budget: int, conn) -> None:
    """Child: run the guest, send (exception name, instructions, PC)."""
    boot_el, text = GUESTS[name] if name in GUESTS else LOOPS[name]
    m = asm_machine(text, Path(outdir), boot_el=boot_el, mode=mode, stack=STACK,
                    max_insns=budget)
    try:
        r = m.run()
        conn.send(("exit", r.exit_status, r.instructions, m.pc))
    except Exception as exc:  # noqa: BLE001 - the outcome is the result
        conn.send((type(exc).__name__, str(exc)[:200], m.insns(), m.pc))


def run_guarded(name: str, mode: str, tmp_path: Path, budget: int = BUDGET) -> tuple:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_run, args=(name, mode, str(tmp_path), budget, child))
    proc.start()
    child.close()
    ready = parent.poll(TIME_LIMIT)
    if not ready:
        proc.kill()
        proc.join()
        pytest.fail(f"{name} in the {mode} loop still running after {TIME_LIMIT} s: "
                    f"the budget of {budget} instructions did not stop it")
    outcome = parent.recv()
    proc.join()
    return outcome


@pytest.mark.parametrize("name", list(GUESTS))
def test_budget_ends_the_run(name, tmp_path):
    """Every loop raises GuestRunaway after exactly BUDGET instructions, at the same PC."""
    out = {mode: run_guarded(name, mode, tmp_path / mode) for mode in modes(name)}
    pc = out["fast"][3]
    assert {mode: (kind, insns, hex(at)) for mode, (kind, _, insns, at) in out.items()} == \
        {mode: (GuestRunaway.__name__, BUDGET, hex(pc)) for mode in out}, out


def test_raw_loop_counts_exceptions_as_retired_instructions(tmp_path):
    """12,000 SVCs in the raw loop: each retires its instruction (no 'exception loop'), and
    the raw loop counts what the fast loop counts."""
    text = """
    adr x0, vectors
    msr vbar_el1, x0
    movz x3, #12000
again: svc #0
    subs x3, x3, #1
    b.ne again
    mov x0, #0
""" + EXIT + """
    .balign 2048
vectors:
    .skip 0x200
    eret
"""
    GUESTS["svc-12000"] = (1, text)
    try:
        out = {mode: run_guarded("svc-12000", mode, tmp_path / mode, 200_000)
               for mode in ("fast", "raw")}
    finally:
        del GUESTS["svc-12000"]
    assert out["raw"][:3] == out["fast"][:3] == ("exit", 0, 5 + 12000 * 4 + 9), out


def test_default_budget_per_kind_of_run(tmp_path):
    """No instruction budget by default for a kernel on a board (as qemu-system-aarch64 has
    none); BARE_METAL_MAX_INSNS for a firmware guest or bare-metal image; --max-insns
    (RunOptions.max_insns) gives any."""
    from spe_emu.cpu.machine import NEVER
    from spe_emu.session import (BARE_METAL_MAX_INSNS, KernelOptions, RunOptions,
                                 prepare_kernel_machine, prepare_machine)
    kernel = tmp_path / "loop.bin"
    kernel.write_bytes((0x14000000).to_bytes(4, "little"))   # b .
    for given, want in ((None, NEVER), (1000, 1000)):
        m, _ = prepare_kernel_machine(KernelOptions(board="virt", kernel=kernel),
                                      RunOptions(firmware=False, max_insns=given,
                                                 outdir=tmp_path / "virt"))
        assert m.budget == want
    guest = Path(__file__).resolve().parent.parent / "guests" / "sort.elf"
    for given, want in ((None, BARE_METAL_MAX_INSNS), (1000, 1000)):
        m = prepare_machine(guest, RunOptions(max_insns=given, outdir=tmp_path / "fw"))
        assert m.budget == want
    assert BARE_METAL_MAX_INSNS == 2_000_000_000


@pytest.mark.parametrize("mode", MODES)
def test_an_undefined_vector_is_a_named_exception_loop(mode, tmp_path):
    """A synchronous vector that is itself an UNDEFINED instruction took exceptions at about
    2 M instructions/s until the budget (the default one: about 15 minutes); the guard stops
    it after EXCEPTION_LOOP_LIMIT entries in every loop, naming the vector and the EC."""
    from spe_emu.cpu.machine import EXCEPTION_LOOP_LIMIT
    kind, message, insns, pc = run_guarded("undefined-vector", mode, tmp_path)
    assert kind == "GuestError", (kind, message)
    assert message.startswith(f"exception loop: the EL1 vector at {UNDEFINED_VECTOR:#x} "
                              f"raised {EXCEPTION_LOOP_LIMIT} synchronous exceptions in a "
                              f"row with its first instruction (EC 0x00 UNKNOWN, ESR "
                              f"0x2000000)"), message
    assert EXCEPTION_LOOP_LIMIT <= insns < EXCEPTION_LOOP_LIMIT + 20 and pc == UNDEFINED_VECTOR


def test_undefined_vector_from_the_cli_is_one_line_with_status_126(tmp_path):
    """``spe-emu run --no-firmware`` of that guest: one line naming the loop, status 126, and
    summary.json kept with the error."""
    import json

    from click.testing import CliRunner

    from asmrun import BASE
    from spe_emu.asm import assemble
    from spe_emu.tools.cli import EXIT_EMULATION, main
    from test_loader import PT_LOAD, elf64
    code = assemble(LOOPS["undefined-vector"][1], BASE)
    image = tmp_path / "undefined-vector.elf"
    image.write_bytes(elf64(entry=BASE, segments=[(PT_LOAD, 7, BASE, code, len(code))]))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["run", "--no-firmware", str(image), "-o", str(out),
                                    "--max-insns", str(BUDGET)])
    assert res.exit_code == EXIT_EMULATION, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"spe-emu: error: exception loop: the EL1 vector at {BASE + 0x800 + 0x200:#x}"), lines
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_reason"] == "guest-error" and "EC 0x00" in summary["error"]
