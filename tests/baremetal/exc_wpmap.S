// Watchpoints under a stage 1 mapping whose VAs differ from the PAs (Arm ARM D2
// "AArch64 Self-hosted Debug": a watchpoint compares the virtual address of the access,
// AArch64.WatchpointMatch(); boots at EL3, runs at EL1 with the MMU on).
// EL1&0 regime, 4 KiB granule, T0SZ = T1SZ = 25 (39-bit VAs, walks start at level 1):
//   lower half (TTBR0_EL1): identity, mmu.S's four 2 MiB blocks
//   upper half (TTBR1_EL1): at UPPER = 0xFFFF_FF80_4000_0000 the code block, at
//     UPPER + 2 MiB the data block (EL1 read/write), later moved to PA 0x4060_0000
// Cases (tags; expected values in tests/test_exception_routing.py):
//   0x1701  watchpoint 0 on the upper VA of wdata: EL1 LDR through that VA, Watchpoint
//           EC 0x35, FAR = the upper VA
//   0x1702  the same watchpoint: EL1 LDR of the same bytes through the identity VA does not
//           match (other VA); the next exception is SVC #0x702
//   0x1703  watchpoint 0 on the identity VA of wdata: LDR through the upper VA does not
//           match; the next exception is SVC #0x703
//   0x1704  watchpoint 0 on the upper VA of wdata, STR through it: Watchpoint, WnR 1 ...
//   0x1705  ... and the doubleword read through the identity VA afterwards (value record):
//           unchanged, the store did not complete
//   0x1706  TTBR1_EL1's data block moved to PA 0x4060_0000 (descriptor written, TLBI
//           VMALLE1): EL1 LDR through the same upper VA, Watchpoint, FAR = the upper VA
//   0x1707  TTBR1_EL1 switched to a second table mapping the upper data block at
//           0x4040_0000: EL1 LDR through the upper VA, Watchpoint
    .include "macros.inc"
    .equ TCR_EL1_VAL, 0xb5193519    // TG1 4K, T1SZ 25, TG0 4K, T0SZ 25, IPS 32 bits
    .equ MDSCR_MDE, (1 << 15)
    .equ MDSCR_KDE, (1 << 13)
    .equ DBGWCR_LDST, (1 | (3 << 1) | (3 << 3) | (0xff << 5))   // E, PAC, LSC, BAS
    .equ UPPER, 0xffffff8040000000
    .equ UPPER_DATA, (UPPER + 0x200000)
    .text
    .global main
main:
    DEBUG_TO_EL1 el1_main

el1_main:
    MMU_ON_EL1 TCR_EL1_VAL, l1_table, l1_upper
    msr     oslar_el1, xzr          // OS Lock clear (it is set at a cold reset)
    SETREG  mdscr_el1, (MDSCR_MDE | MDSCR_KDE)
    msr     daifclr, #8             // D = 0
    ldr     x2, =(UPPER_DATA + (wdata - 0x40200000))
    ldr     x3, =wdata

    WATCH   DBGWCR_LDST, (UPPER_DATA + (wdata - 0x40200000))
    CASE    0x1701
    ldr     x0, [x2]
    CASE    0x1702
    ldr     x0, [x3]
    svc     #0x702

    WATCH   DBGWCR_LDST, wdata
    CASE    0x1703
    ldr     x0, [x2]
    svc     #0x703

    WATCH   DBGWCR_LDST, (UPPER_DATA + (wdata - 0x40200000))
    mov     x0, #0x99
    CASE    0x1704
    str     x0, [x2]
    ldr     x5, [x3]
    PUT     0x1705, x5

    WATCH   DBGWCR_LDST, (UPPER_DATA + (wdata - 0x40200000))     // (re-armed: QEMU 7.2 keeps the
                                    // STR hit's WnR until DBGWCR0_EL1 is written)
    ldr     x1, =(l2_upper + 8)     // the upper data block now at PA 0x4060_0000
    ldr     x0, =(0x40600000 + BLOCK_EL1_RW)
    str     x0, [x1]
    dsb     ishst
    tlbi    vmalle1
    dsb     sy
    isb
    CASE    0x1706
    ldr     x0, [x2]

    SETREG  ttbr1_el1, l1_upper2
    tlbi    vmalle1
    dsb     sy
    isb
    CASE    0x1707
    ldr     x0, [x2]
    CASE    0x17ff
    svc     #FINISH

    .data
    .balign 4096
    LOWER_TABLES l1_table, l2_table
    .fill   508, 8, 0
    L1_SECOND_GIB l1_upper, l2_upper  // 1 GiB at UPPER
l2_upper:
    .quad   0x40000000 + BLOCK_EL0_RW
    .quad   0x40200000 + BLOCK_EL1_RW
    .fill   510, 8, 0
    L1_SECOND_GIB l1_upper2, l2_upper2
l2_upper2:
    .quad   0x40000000 + BLOCK_EL0_RW
    .quad   0x40400000 + BLOCK_EL1_RW
    .fill   510, 8, 0
    .balign 8
wdata:
    .quad   0x5555, 0x6666
