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


# The virtual timer programmed 300 ticks ahead (CNTV_CVAL_EL0 = CNTVCT_EL0 + 300, enabled and
# masked), then polled: a loop of CNTV_CTL_EL0 reads until ISTATUS; the count and CTL after it,
# a CTL with the timer disabled, CVAL moved back and the physical timer's CTL (never enabled).
TIMER_POLL = """
    mrs x1, s3_3_c14_c0_2       // CNTVCT_EL0
    add x1, x1, #300
    msr s3_3_c14_c3_2, x1       // CNTV_CVAL_EL0
    mov x2, #3                  // ENABLE | IMASK
    msr s3_3_c14_c3_1, x2       // CNTV_CTL_EL0
    mov x5, #0
poll:
    add x5, x5, #1
    mrs x3, s3_3_c14_c3_1
    tbz x3, #2, poll            // ISTATUS
    mrs x19, s3_3_c14_c0_2
    mov x20, x3
    mov x2, #2                  // IMASK only: disabled
    msr s3_3_c14_c3_1, x2
    mrs x21, s3_3_c14_c3_1
    mov x2, #1
    msr s3_3_c14_c3_1, x2       // enabled again, unmasked (the interrupt masked by PSTATE)
    movz x6, #1, lsl #16
    add x1, x1, x6
    msr s3_3_c14_c3_2, x1       // CompareValue 65536 ahead again: ISTATUS clears
    mrs x22, s3_3_c14_c3_1
    mrs x23, s3_3_c14_c2_1      // CNTP_CTL_EL0
    mov x24, x5
    mov x0, #0
""" + EXIT


def test_native_timer_control_reads_equal_the_python_path(tmp_path):
    """CNTV_CTL_EL0/CNTP_CTL_EL0 reads answered natively (ISTATUS from the instructions
    retired, Arm ARM D12.2.4: ENABLE and count >= CompareValue) give what the Python path
    gives, at the same instruction: a poll loop ends at the same iteration, CTL reads after
    writes of CTL and CVAL follow them; the fast loop answered them natively."""
    fast = run_asm(TIMER_POLL, tmp_path / "f", boot_el=1, mode="fast")
    ref = run_asm(TIMER_POLL, tmp_path / "r", boot_el=1, mode="reference")
    values = xregs(fast, 19, 20, 21, 22, 23, 24)
    assert values == xregs(ref, 19, 20, 21, 22, 23, 24)
    vct, ctl, disabled, ahead, pctl, polls = values
    assert ctl == 0b111 and disabled == 0b010 and ahead == 0b001 and pctl == 0
    assert 300 // 3 - 2 <= polls <= 300 // 3 + 2     # (three instructions a poll)
    assert fast.counter_reads.ctl_answered >= polls - 1


# Boot at EL2 with E2H = 1, TGE = 0: EL0 may use the timers (CNTKCTL_EL1 = 0x303), the EL1
# virtual timer is enabled and met; a CNTV_CTL_EL0 read at EL2 fills the native table, then
# CNTKCTL_EL12 = 0 (emulated: QEMU 5 does not know the EL12 alias) takes EL0's access away,
# and EL0 reads CNTV_CTL_EL0 and CNTP_CTL_EL0 (reported by review helper-15).
CNTKCTL12_THEN_EL0 = """
    adr x0, vec1
    msr s3_0_c12_c0_0, x0        // VBAR_EL1
    adr x0, vec2
    msr s3_4_c12_c0_0, x0        // VBAR_EL2
    mov x0, #0x303               // EL0PTEN|EL0VTEN|EL0VCTEN|EL0PCTEN
    msr s3_0_c14_c1_0, x0        // CNTKCTL_EL1
    movz x7, #0x4100, lsl #16
    msr s3_4_c4_c1_0, x7         // SP_EL1
    msr s3_4_c14_c0_3, xzr       // CNTVOFF_EL2 = 0
    msr s3_3_c14_c3_2, xzr       // CNTV_CVAL_EL0 = 0 (EL1 virtual timer)
    mov x0, #1
    msr s3_3_c14_c3_1, x0        // CNTV_CTL_EL0 = ENABLE
    mov x0, #3
    msr s3_4_c14_c1_0, x0        // CNTHCTL_EL2 = EL1PCTEN|EL1PCEN
    movz x0, #0x8000, lsl #16    // HCR_EL2.RW
    movk x0, #0x4, lsl #32       // HCR_EL2.E2H
    msr s3_4_c1_c1_0, x0
    isb
    adr x2, el0
    msr s3_4_c4_c0_1, x2         // ELR_EL2
    msr s3_4_c4_c0_0, xzr        // SPSR_EL2 = EL0t
    mov x25, #0
    mov x20, #0x777
    mov x21, #0x777
    mrs x19, s3_3_c14_c3_1       // CNTV_CTL_EL0 at EL2 (fills the native table)
    msr s3_5_c14_c1_0, xzr       // CNTKCTL_EL12 = 0: EL0 loses timer/counter access
    isb
    eret
el0:
    mrs x20, s3_3_c14_c3_1       // CNTV_CTL_EL0 at EL0: should trap to EL1 (EC 0x18)
    mrs x21, s3_3_c14_c2_1       // CNTP_CTL_EL0
    svc #0
    nop
    .balign 2048
vec1:
    .skip 0x400
    mrs x9, s3_0_c5_c2_0         // ESR_EL1
    lsr x10, x9, #26
    cmp x10, #0x15
    b.eq done
    add x25, x25, #1
    mov x26, x9
    mrs x24, s3_0_c4_c0_1
    add x24, x24, #4
    msr s3_0_c4_c0_1, x24
    eret
done:
    mov x0, #0
""" + EXIT + """
    .balign 2048
vec2:
    .skip 0x200
    mrs x27, s3_4_c5_c2_0
    mrs x28, s3_4_c4_c0_1
    mov x0, #2
""" + EXIT



def test_an_emulated_cntkctl_el12_write_refills_the_native_table(tmp_path):
    """The native table's access bits follow a write that reaches the timer through the
    UNDEF path (CNTKCTL_EL12): the fast loop reads at EL0 what the reference loop reads, not
    the ENABLE | ISTATUS an out-of-date table gave."""
    fast = run_asm(CNTKCTL12_THEN_EL0, tmp_path / "f", boot_el=2, mode="fast")
    ref = run_asm(CNTKCTL12_THEN_EL0, tmp_path / "r", boot_el=2, mode="reference")
    assert xregs(fast, 19, 20, 21, 25, 26) == xregs(ref, 19, 20, 21, 25, 26)
    assert xregs(fast, 20)[0] != 0b101
