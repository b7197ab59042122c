// FEAT_E0PD (Arm ARM D8 "FEAT_E0PD", D19.2 TCR_EL1.E0PD0/E0PD1): with TCR_EL1.E0PDn = 1 an
// unprivileged access (EL0, or LDTR/STTR at EL1) to the half of the address space TTBRn_EL1
// translates is a level 0 Translation fault, whatever the translation tables hold. spe_emu
// presents FEAT_E0PD by default (CpuFeatures.e0pd); QEMU 7.2's -cpu max implements it.
// EL1&0 regime, 4 KiB granule, T0SZ = T1SZ = 25 (39-bit VAs, walks start at level 1):
//   lower half (TTBR0_EL1): mmu.S's four 2 MiB blocks (code AP 0b11; data EL1-only, XN;
//     EL1-only code; EL0 read/write)
//   upper half (TTBR1_EL1): at UPPER = 0xFFFF_FF80_4000_0000 the code block again (AP 0b11:
//     EL0 and EL1 may read and execute), at UPPER + 2 MiB the data block (AP 0b00: EL1 only,
//     UXN, PXN), UPPER + 4 MiB unmapped
// Cases (tags; expected values in tests/test_exception_routing.py):
//   0xe01  EL1 LDR from the upper data block, E0PD1 = 1: no fault (privileged); value
//   0xe02  EL1 LDTR from the upper data block, E0PD1 = 1: translation fault level 0 (EC 0x25)
//   0xe03  EL1 LDTR from the lower code block (EL0-readable), E0PD0 = 1: translation fault,
//          level 0
//   0xe04  EL1 LDTR from the same with E0PD0 = 0: no fault; value
//   0xe05  EL0 LDR from the upper data block (EL1-only), E0PD1 = 1: translation fault level 0
//          (without E0PD a permission fault, level 2)
//   0xe06  EL0 STR to the unmapped upper VA: translation fault level 0, WnR (not level 2)
//   0xe07  EL0 LDR from the upper code block, which EL0 may read: translation fault level 0
//   0xe08  EL0 BLR to the upper data block: Instruction Abort, translation fault level 0
//   0xe09  EL0 LDR from the upper data block with E0PD1 = 0: permission fault, level 2
//   0xe0a  (EL0 LDR from the upper code block with E0PD1 = 0 succeeds; then SVC #0xEA)
    .include "macros.inc"
    .equ TCR_BASE, 0xb5193519       // TG1 4K, SH1/ORGN1/IRGN1, T1SZ 25, SH0/ORGN0/IRGN0,
                                    // TG0 4K, T0SZ 25, IPS 32 bits
    .equ E0PD0, (1 << 55)
    .equ E0PD1, (1 << 56)
    .equ UPPER, 0xffffff8040000000
    .equ UPPER_DATA, (UPPER + 0x200000)
    .equ UPPER_NONE, (UPPER + 0x400000)
    .text
    .global main
main:
    BOOT_TO_EL1 el1_main

el1_main:
    MMU_ON_EL1 (TCR_BASE | E0PD1), l1_table, l1_upper
    msr     nzcv, xzr

    ldr     x1, =(UPPER_DATA + (el1_data - 0x40200000))
    ldr     x0, [x1]
    PUT     0xe01, x0
    ldr     x1, =(UPPER_DATA + (el1_data - 0x40200000))
    CASE    0xe02
    ldtr    x0, [x1]
    SETREG  tcr_el1, (TCR_BASE | E0PD0 | E0PD1)
    tlbi    vmalle1
    dsb     sy
    isb
    ldr     x1, =ro_word
    CASE    0xe03
    ldtr    x0, [x1]
    SETREG  tcr_el1, (TCR_BASE | E0PD1)
    tlbi    vmalle1
    dsb     sy
    isb
    ldr     x1, =ro_word
    ldtr    x0, [x1]
    PUT     0xe04, x0
    ERET_TO 1, 0x0, el0_main

el0_main:
    ldr     x1, =(UPPER_DATA + (el1_data - 0x40200000))
    CASE    0xe05
    ldr     x0, [x1]
    ldr     x1, =UPPER_NONE
    CASE    0xe06
    str     x0, [x1]
    ldr     x1, =(UPPER + (ro_word - 0x40000000))
    CASE    0xe07
    ldr     x0, [x1]
    ldr     x1, =UPPER_DATA
    CASE    0xe08
    blr     x1
    svc     #ELEVATE
    SETREG  tcr_el1, TCR_BASE
    tlbi    vmalle1
    dsb     sy
    isb
    ERET_TO 1, 0x0, el0_second

el0_second:
    ldr     x1, =(UPPER_DATA + (el1_data - 0x40200000))
    CASE    0xe09
    ldr     x0, [x1]
    ldr     x1, =(UPPER + (ro_word - 0x40000000))
    ldr     x0, [x1]
    CASE    0xe0a
    svc     #0xea
    CASE    0xeff
    svc     #FINISH

    .section .rodata
    .balign 8
ro_word:
    .quad   0x0123456789abcdef

    .data
    .balign 4096
    LOWER_TABLES l1_table, l2_table
    .fill   508, 8, 0
    L1_SECOND_GIB l1_upper, l2_upper  // 1 GiB at UPPER
l2_upper:
    .quad   0x40000000 + BLOCK_EL0_RW
    .quad   0x40200000 + BLOCK_EL1_RW
    .fill   510, 8, 0
el1_data:
    .quad   0x1111, 0x2222
