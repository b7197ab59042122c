"""CNTPCT_EL0/CNTVCT_EL0 reads answered in native code (counter.c ``spe_mrs_hook``, fast mode)
give the same values as the Python path (the reference mode): the instructions retired
before the MRS (the C twin of ``Machine._retired_before``), plus idle ticks, less CNTVOFF_EL2
where it applies (Arm ARM D12.2.4)."""

from __future__ import annotations

from asmrun import EXIT, run_asm, xregs

# Boot at EL2: CNTVOFF_EL2 = 1000, then reads at EL2 and (after an ERET) at EL1, some in the
# middle of a block, one after a loop.
PROGRAM = """
    mov x0, #1000
    msr s3_4_c14_c0_3, x0   // CNTVOFF_EL2
    isb
    mrs x19, s3_3_c14_c0_1  // CNTPCT_EL0
    add x1, x1, #1
    mrs x20, s3_3_c14_c0_2  // CNTVCT_EL0
    movz x0, #0x8000, lsl #16     // HCR_EL2.RW
    msr s3_4_c1_c1_0, x0
    movz x7, #0x4100, lsl #16
    msr s3_4_c4_c1_0, x7        // SP_EL1 (EXIT uses the stack)
    adr x2, el1
    msr s3_4_c4_c0_1, x2
    mov x3, #0x3c5
    msr s3_4_c4_c0_0, x3
    isb
    eret
el1:
    mov x4, #200
spin:
    subs x4, x4, #1
    b.ne spin
    mrs x21, s3_3_c14_c0_1
    nop
    nop
    mrs x22, s3_3_c14_c0_2
    mov x0, #0
""" + EXIT


def test_native_counter_reads_equal_the_python_path(tmp_path):
    fast = run_asm(PROGRAM, tmp_path / "f", boot_el=2, mode="fast")
    ref = run_asm(PROGRAM, tmp_path / "r", boot_el=2, mode="reference")
    values = xregs(fast, 19, 20, 21, 22)
    assert values == xregs(ref, 19, 20, 21, 22)
    pct, vct, pct1, vct1 = values
    # (at EL2 with E2H == 0 the virtual offset applies to CNTVCT_EL0 too; D12.2.4)
    mask = (1 << 64) - 1
    assert vct == (pct + 2 - 1000) & mask and vct1 == (pct1 + 3 - 1000) & mask
    assert pct1 > pct + 400          # the loop's 400 instructions passed in between
    assert fast.counter_reads.answered >= 2   # (at least the reads after the first MSR)
