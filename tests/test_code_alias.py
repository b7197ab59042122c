"""Code that runs at a virtual address other than the one it was loaded at (as a Linux Image
does: loaded at a physical address, run at KIMAGE_VADDR + a KASLR offset): the fast loop's
control-instruction hooks follow it (Machine._follow_code_mapping), so an interrupt that is
pending while PSTATE.I masks it is taken right after the MSR DAIFClr that unmasks it (Arm ARM
D1.3.6; QEMU takes it there too) -- also in an idle loop whose WFI returns at once, where a
poll every N instructions would never land in the one-instruction unmasked window (Linux's
do_idle after "poweroff -f" spun there for ever)."""

import pytest
from asmrun import ALIAS, BASE, alias_stage1, irq_vectors, run_asm, xregs

TABLE = BASE + 0x10_0000             # the level 1 table

PROGRAM = f"""
    movz x1, #0x0800, lsl #16          // GICD_CTLR = ARE_NS | EnableGrp1NS
    mov w0, #0x12
    str w0, [x1]
    movz x1, #0x080B, lsl #16          // SGI_base: SGI 3 in Group 1, enabled, priority 0x80
    mov w0, #0x8
    str w0, [x1, #0x80]
    str w0, [x1, #0x100]
    mov w0, #0x80
    strb w0, [x1, #0x403]
    mov x0, #1
    msr icc_sre_el1, x0
    msr icc_igrpen1_el1, x0
    mov x0, #0xff
    msr icc_pmr_el1, x0
    // stage 1: VA 0x4000_0000 and VA 0x1_4000_0000 both map PA 0x4000_0000 (1 GiB blocks)
{alias_stage1(TABLE)}
    movz x2, #1, lsl #32               // ALIAS
    adr x0, vectors
    add x0, x0, x2
    msr vbar_el1, x0
    adr x1, alias
    add x1, x1, x2
    br x1                              // on to the alias
alias:
    msr daifset, #2
    movz x0, #0x0300, lsl #16          // SGI 3 to this PE: pending, masked
    orr x0, x0, #1
    msr icc_sgi1r_el1, x0
    isb
    mov x5, #0
    adr x19, after
loop:
    wfi                                // returns at once: an interrupt is pending
    msr daifclr, #2                    // the IRQ is taken here...
after:
    msr daifset, #2                    // ...before this instruction
    add x5, x5, #1
    cmp x5, #200
    b.lt loop
""" + irq_vectors("    msr icc_eoir1_el1, x21\n")


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_irq_taken_after_daifclr_in_code_run_at_an_alias(tmp_path, mode):
    m = run_asm(PROGRAM, tmp_path, mode=mode)
    assert m.result.exit_status == 0                 # (1: the loop ran out, never taken)
    elr, intid, after, loops = xregs(m, 20, 21, 19, 5)
    assert after >= ALIAS                            # the code ran at the alias
    assert elr == after and intid == 3 and loops == 0
    assert m.irqs_taken == 1
