"""The emulator's own accesses on a guest's behalf go through stage 2 when HCR_EL2.VM = 1: an
EL1 access to an SPE register (emulated from UNDEF: the instruction is fetched by the
emulator) and a semihosting call (its parameter block is read by the emulator) work in a
guest whose hypervisor enabled stage 2, instead of ending the run (issue 13)."""

from __future__ import annotations

import pytest
from asmrun import ERET_TO_EL1, EXIT, run_asm, xregs

S2_TABLE = 0x4010_0000

# EL2: a stage 2 identity map of the first 4 GiB of IPA space (VTCR_EL2: T0SZ = 32, SL0 = 1:
# start at level 1, TG0 = 4 KiB, PS = 32 bits; four level-1 block descriptors of 1 GiB with
# AF = 1, S2AP = 0b11, MemAttr = Device-nGnRnE for the first GiB and Normal WB for the rest;
# Arm ARM D8.3 stage 2 descriptors), HCR_EL2 = RW | VM, then ERET to EL1h at el1.
PROGRAM = f"""
    movz x1, #{S2_TABLE >> 16:#x}, lsl #16
    movz x2, #0x04C1            // block, MemAttr 0b0000, S2AP 0b11, AF
    str x2, [x1]
    movz x2, #0x07FD            // block, MemAttr 0b1111, S2AP 0b11, AF, SH 0b11
    movk x2, #0x4000, lsl #16
    str x2, [x1, #8]
    movk x2, #0x8000, lsl #16
    str x2, [x1, #16]
    movk x2, #0xC000, lsl #16
    str x2, [x1, #24]
    dsb sy
    msr s3_4_c2_c1_0, x1        // VTTBR_EL2
    movz x3, #0x0060            // VTCR_EL2: T0SZ 32 = 0x20, SL0 = 1 (bits 7:6)
    movk x3, #0x0000, lsl #16
    orr x3, x3, #0x20
    msr s3_4_c2_c1_2, x3
    movz x4, #0x8000, lsl #16   // HCR_EL2.RW
    orr x4, x4, #1              // HCR_EL2.VM
    msr s3_4_c1_c1_0, x4
    isb
""" + ERET_TO_EL1 + """
    mrs x19, s3_0_c9_c9_7       // PMSIDR_EL1: trapped into the emulator, fetched via stage 2
    mov x0, #0
""" + EXIT


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_el1_trap_and_semihosting_with_stage2_enabled(tmp_path, mode):
    m = run_asm(PROGRAM, tmp_path, boot_el=2, mode=mode)
    assert m.result.exit_status == 0 and m.result.exit_via == "semihosting"
    pmsidr = m.spu.table["PMSIDR_EL1"].reset
    assert xregs(m, 19) == [pmsidr]
