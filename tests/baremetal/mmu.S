// Stage 1 translation faults and permission faults (EL1&0 regime, 4 KiB granule, 39-bit VA
// starting at level 1, 2 MiB blocks at level 2 for the four regions of link.ld):
//   0x4000_0000 AP = 0b11 (read-only at EL1 and EL0), executable at both
//   0x4020_0000 AP = 0b00 (EL1 read/write only), UXN, PXN (data: results, stacks, tables)
//   0x4040_0000 AP = 0b00, UXN (EL1-only code)
//   0x4060_0000 AP = 0b01 (read/write at EL1 and EL0), so implicitly PXN for EL1
// everything else unmapped. Runs from any boot EL; MMU on at EL1 only.
// Cases (tags; expected values in tests/test_exception_routing.py):
//   0xd01  EL1 LDR from unmapped 0x8000_0000: Data Abort, translation fault level 1
//   0xd02  EL1 STR to the read-only block: permission fault level 2, WnR = 1
//   0xd03  EL1 BLR to code in the EL0-writable block: Instruction Abort, permission level 2
//   0xd04  EL1 LDR X0, [X1] misaligned with SCTLR_EL1.A = 1: alignment fault
//   0xd05  EL0 LDR from the EL1-only data block: permission fault level 2 (EC 0x24)
//   0xd06  EL0 STR to the read-only block: permission fault level 2, WnR = 1
//   0xd07  EL0 BLR into EL1-only (UXN) code: Instruction Abort from EL0 (EC 0x20)
//   0xd08  EL0 LDR from unmapped 0x8000_0000: translation fault level 1
//   0xd09  (EL0 BLR into the EL0 block and LDR from it succeed; then SVC #0xD9 to record it)
//   0xd0a  EL1 misaligned LDR from 0x4080_0000 + (the data block mapped again with MAIR_EL1
//          Attr1, Device-nGnRnE), SCTLR_EL1.A = 0: alignment fault
    .include "macros.inc"
    .equ DEVICE_ALIAS, 0x600000     // 0x4080_0000: the data block as Device-nGnRnE
    .text
    .global main
main:
    BOOT_TO_EL1 el1_main

el1_main:
    // TCR_EL1: T0SZ 25, WB WA inner/outer, inner shareable, 4 KiB, EPD1, IPS 32 bits
    MMU_ON_EL1 0x803519, l1_table
    msr     nzcv, xzr

    mov     x1, #0x80000000
    CASE    0xd01
    ldr     x0, [x1]
    ldr     x1, =ro_word
    CASE    0xd02
    str     x0, [x1]
    ldr     x1, =el0rw_code
    CASE    0xd03
    blr     x1
    SETREG  sctlr_el1, (SCTLR_EL1_MMU | 2)  // A: alignment checks
    ldr     x1, =el1_data + 4
    CASE    0xd04
    ldr     x0, [x1]
    SETREG  sctlr_el1, SCTLR_EL1_MMU
    ldr     x1, =el1_data + DEVICE_ALIAS + 4
    CASE    0xd0a
    ldr     x0, [x1]                // Device-nGnRnE (MAIR Attr1), misaligned, A = 0
    msr     nzcv, xzr
    ERET_TO 1, 0x0, el0_main

el0_main:
    ldr     x1, =el1_data
    CASE    0xd05
    ldr     x0, [x1]
    ldr     x1, =ro_word
    CASE    0xd06
    str     x0, [x1]
    ldr     x1, =el1only_code
    CASE    0xd07
    blr     x1
    mov     x1, #0x80000000
    CASE    0xd08
    ldr     x0, [x1]
    ldr     x1, =el0rw_code
    blr     x1                      // returns x0 = 0x0e10
    ldr     x1, =el0rw_word
    ldr     x2, [x1]
    CASE    0xd09
    svc     #0xd9
    CASE    0xdff
    svc     #FINISH

    .section .rodata
    .balign 8
ro_word:
    .quad   0x0123456789abcdef

    .data
    .balign 4096
    LOWER_TABLES l1_table, l2_table
    .quad   0x40200000 + 0x705 + (3 << 53)              // the data block again, AttrIndx 1
    .fill   507, 8, 0
el1_data:
    .quad   0x1111, 0x2222

    .section .el1only, "ax"
el1only_code:
    ret

    .section .el0rw, "awx"
el0rw_code:
    mov     x0, #0x0e10
    ret
    .balign 8
el0rw_word:
    .quad   0x0e0e0e0e
