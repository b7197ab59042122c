"""Exceptions taken natively (spe_emu/native/exception.c) agree with the Python oracle.

examples/exceptions (EL0 SVC -> EL1 -> ERET round trips, then SGIs acknowledged and ended
through the GICv3 CPU interface) runs in the fast loop, where the native INTR hook takes the
SVCs, the native MRS/MSR hooks leave ESR_ELx reads to QEMU and the ERET hook stays in C, and
in the reference loop, where every exception, MRS/MSR and ERET goes through Python. Both must
print the same, retire the same number of instructions and take the same exceptions; the fast
run must have taken the SVCs natively (a silent fall-back to Python would pass the rest).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from spe_emu.session import KernelOptions, RunOptions, prepare_kernel_machine

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "exceptions"
CC = "aarch64-linux-gnu-gcc"
SVC_ROUNDS, IRQ_ROUNDS = 300, 20
EXPECTED = (f"svc round trips: {SVC_ROUNDS}\ninterrupts: {IRQ_ROUNDS}\nbye\n").encode()


def build_exceptions(elf: Path, svc_rounds: int, irq_rounds: int) -> Path:
    """examples/exceptions built with the command of its README."""
    subprocess.run([CC, "-O2", "-ffreestanding", "-nostdlib", "-mgeneral-regs-only",
                    "-mstrict-align", "-T", "link.ld", "-Wl,--no-warn-rwx-segments",
                    f"-DSVC_ROUNDS={svc_rounds}", f"-DIRQ_ROUNDS={irq_rounds}",
                    "-o", str(elf), "start.S", "main.c"], cwd=EXAMPLE, check=True)
    return elf


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Path:
    if shutil.which(CC) is None:
        pytest.skip(f"{CC} is needed (Debian: gcc-aarch64-linux-gnu)")
    return build_exceptions(tmp_path_factory.mktemp("exc") / "exceptions.elf", SVC_ROUNDS,
                            IRQ_ROUNDS)


def run(image: Path, mode: str, outdir: Path):
    console = bytearray()
    machine, _ = prepare_kernel_machine(KernelOptions(kernel=image),
                                        RunOptions(mode=mode, outdir=outdir,
                                                   max_insns=5_000_000),
                                        console=console.extend)
    result = machine.run()
    return machine, result, bytes(console)


@pytest.fixture(scope="module")
def runs(image, tmp_path_factory):
    return {mode: run(image, mode, tmp_path_factory.mktemp(mode))
            for mode in ("fast", "reference")}


def test_same_console_instructions_and_exceptions(runs):
    (_, fast, fast_console), (_, ref, ref_console) = runs["fast"], runs["reference"]
    assert fast_console == ref_console == EXPECTED
    assert fast.exit_via == ref.exit_via == "psci-system-off"
    assert fast.instructions == ref.instructions
    # SVC_ROUNDS SVC #0, one SVC #1, the HVC of PSCI SYSTEM_OFF (answered, not taken)
    assert fast.exceptions_taken == ref.exceptions_taken == SVC_ROUNDS + 1
    assert fast.irqs_taken == ref.irqs_taken == IRQ_ROUNDS


def test_fast_loop_took_the_svcs_natively(runs):
    machine, result, _ = runs["fast"]
    assert machine.intr.taken == SVC_ROUNDS + 1
    # Each handler's MRS ESR_EL1 was left to QEMU, and so was each ERET of both handlers.
    assert machine.sysreg_filter.skipped >= SVC_ROUNDS
    assert machine.control.skipped >= SVC_ROUNDS + IRQ_ROUNDS


def test_fast_loop_took_the_interrupts_natively(runs):
    """Each round's ICC_SGI1R_EL1 write, ICC_IAR1_EL1 read and ICC_EOIR1_EL1 write ran on the
    GIC's state in C, and the SGI was taken right after the write, in C."""
    machine, result, _ = runs["fast"]
    assert machine.intr.icc_native == 3 * IRQ_ROUNDS
    assert machine.intr.irqs_taken == IRQ_ROUNDS
    assert result.guest_errors == []


def test_eoi_check_changes_nothing():
    """spe_gic_eoi(commit=0), which the native path asks before it acts, reports what an EOI
    would do without doing it; commit=1 drops the priority and deactivates (IHI 0069 ICC_EOIR1_EL1,
    EOImode == 0)."""
    from spe_emu.devices.gicv3 import GicV3
    from spe_emu import native
    gic = GicV3()
    st = gic.state
    st.irqs[5].active, st.icc_ap1r0 = 1, 1 << 16
    assert gic.core.eoi(1, 5, commit=False) == 0
    assert (st.irqs[5].active, st.icc_ap1r0) == (1, 1 << 16)
    assert gic.core.eoi(0, 5, commit=False) == native.EOI_WRONG_GROUP
    assert gic.core.eoi(1, 6, commit=False) == native.EOI_NOT_ACTIVE
    assert gic.core.eoi(1, 1023, commit=False) == native.EOI_SPECIAL
    assert (st.irqs[5].active, st.icc_ap1r0) == (1, 1 << 16)
    assert gic.core.eoi(1, 5) == 0
    assert (st.irqs[5].active, st.icc_ap1r0) == (0, 0)


def test_reference_loop_takes_them_in_python(runs):
    machine, _, _ = runs["reference"]
    assert machine.intr.taken == 0


@pytest.mark.parametrize("lines, irq_t, fiq_t, el, i, f, expected", [
    (0b01, 1, 1, 1, 0, 0, (0x080, 1)),   # to the current EL, unmasked
    (0b01, 1, 1, 1, 1, 0, None),         # to the current EL, PSTATE.I
    (0b01, 1, 1, 0, 1, 0, None),         # to EL1 from EL0: PSTATE.I masks it too
    (0b01, 1, 1, 0, 0, 0, (0x080, 1)),
    (0b01, 2, 1, 1, 1, 0, (0x080, 2)),   # to a higher EL (not EL1): PSTATE.I does not mask
    (0b01, 3, 1, 2, 1, 0, (0x080, 3)),
    (0b01, 1, 1, 2, 0, 0, None),         # routed below the current EL: never
    (0b11, 1, 1, 1, 0, 0, (0x100, 1)),   # FIQ first
    (0b11, 1, 1, 1, 0, 1, (0x080, 1)),   # FIQ masked, IRQ taken
    (0b10, 1, 3, 1, 1, 1, (0x100, 3)),
])
def test_interrupt_masking(lines, irq_t, fiq_t, el, i, f, expected):
    """spe_deliverable() (the PE model's and the native path's interrupt masking) against the
    Arm ARM D1.3.6 table for AArch64 (QEMU's arm_excp_unmasked() agrees)."""
    from spe_emu import native
    from spe_emu.cpu.exceptions import PSTATE
    pstate = PSTATE.make(EL=el, I=i, F=f)
    assert native.deliverable(lines, irq_t, fiq_t, el, pstate, PSTATE.field("I").lsb,
                              PSTATE.field("F").lsb) == expected
