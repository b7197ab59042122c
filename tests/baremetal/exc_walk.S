// Stage 1 faults of the EL1&0 4 KiB-granule walk at every level (Arm ARM D8 "The AArch64
// Virtual Memory System Architecture"; DFSC values D24.2 ESR_ELx). Boots at EL3, MMU on at
// EL1 only: TCR_EL1.T0SZ = T1SZ = 16 (48-bit VAs, walks start at level 0), IPS = 0b000
// (32-bit output addresses), TTBR0_EL1 -> l0_table, TTBR1_EL1 -> a PA with no memory.
// Translation tables (VA = PA where mapped):
//   l0[0] -> l1, l0[1] invalid
//   l1[1] -> l2 (0x4000_0000); l1[2] invalid; l1[3] table at PA 0x1_0000_0000 (beyond the
//   OA size); l1[4] 1 GiB block at PA 0x1_0000_0000; l1[5] table at PA 0x8000_0000 (no memory)
//   l2[0] 0x4000_0000 code (read-only, executable); l2[1] 0x4020_0000 data (EL1 RW, XN);
//   l2[2] -> l3 (0x4040_0000); l2[3] invalid; l2[4] block with AF = 0; l2[5] block at PA
//   0x1_0000_0000; l2[6] block at PA 0x8000_0000 (no memory)
//   l3[0] page (EL1 RW); l3[1] invalid; l3[2] page with AF = 0; l3[3] page read-only;
//   l3[4] page at PA 0x1_0000_0000; l3[5] descriptor 0b01 (reserved at level 3)
// Cases (tags; expected values in tests/test_exception_routing.py), all EL1 LDR/STR -> EL1,
// EC 0x25, FAR = the VA:
//   0x1301  VA 0x80_0000_0000: translation fault, level 0 (DFSC 0x04)
//   0x1302  VA 0x8000_0000: translation fault, level 1 (0x05)
//   0x1303  VA 0x4060_0000: translation fault, level 2 (0x06)
//   0x1304  VA 0x4040_1000: translation fault, level 3 (0x07)
//   0x1305  VA 0x4040_5000: level 3 descriptor 0b01: translation fault, level 3 (0x07)
//   0x1306  VA 0x4080_0000: access flag fault, level 2 (0x0A)
//   0x1307  VA 0x4040_2000: access flag fault, level 3 (0x0B)
//   0x1308  STR to VA 0x4040_3000: permission fault, level 3 (0x0F, WnR)
//   0x1309  VA 0x4040_0000 (valid page): no fault; the SVC #0x39 after it is the exception
//   0x130a  VA 0xC000_0000: next-level table address beyond the OA size: address size fault,
//           level 1 (0x01)
//   0x130b  VA 0x1_0000_0000: block OA beyond the OA size: address size fault, level 1 (0x01)
//   0x130c  VA 0x40A0_0000: address size fault, level 2 (0x02)
//   0x130d  VA 0x4040_4000: address size fault, level 3 (0x03)
//   0x130e  VA 0x1_4000_0000: level 2 table at a PA with no memory: synchronous External
//           abort on translation table walk, level 2 (0x16)
//   0x130f  VA 0xFFFF_0000_0000_0000 (TTBR1, table at a PA with no memory): synchronous
//           External abort on translation table walk, level 0 (0x14)
//   0x1310  same with TTBR1_EL1 beyond the OA size: address size fault, level 0 (0x00)
//   0x1311  VA 0x40C0_0000, a valid block at PA 0x8000_0000 (no memory): synchronous External
//           abort, not on a walk (0x10); FAR is the VA
    .include "macros.inc"
    .equ TCR_VALUE, 0xb5103510      // TG1 4K, SH1/ORGN1/IRGN1, T1SZ 16, SH0/ORGN0/IRGN0,
                                    // TG0 4K, T0SZ 16, IPS 32 bits
    .equ NO_MEMORY, 0x80000000
    .equ BEYOND_OA, 0x100000000
    .equ BLOCK_RW, 0x701                          // AF, SH inner, AP 0b00, block
    .equ PAGE_RW, 0x703                           // AF, SH inner, AP 0b00, page
    .equ XN, (3 << 53)
    .text
    .global main
main:
    ERET_TO 3, 0x3c5, el1_main
el1_main:
    MMU_ON_EL1 TCR_VALUE, l0_table, NO_MEMORY
    msr     nzcv, xzr

    .macro  LOAD tag, va
    ldr     x1, =\va
    CASE    \tag
    ldr     x0, [x1]
    .endm
    LOAD    0x1301, 0x8000000000
    LOAD    0x1302, 0x80000000
    LOAD    0x1303, 0x40600000
    LOAD    0x1304, 0x40401000
    LOAD    0x1305, 0x40405000
    LOAD    0x1306, 0x40800000
    LOAD    0x1307, 0x40402000
    ldr     x1, =0x40403000
    ldr     x0, [x1]                // read-only page: the load is permitted
    CASE    0x1308
    str     x0, [x1]
    ldr     x1, =0x40400000
    str     x0, [x1]
    ldr     x0, [x1]
    CASE    0x1309
    svc     #0x39
    LOAD    0x130a, 0xc0000000
    LOAD    0x130b, 0x100000000
    LOAD    0x130c, 0x40a00000
    LOAD    0x130d, 0x40404000
    LOAD    0x130e, 0x140000000
    LOAD    0x130f, 0xffff000000000000
    SETREG  ttbr1_el1, BEYOND_OA
    tlbi    vmalle1
    dsb     sy
    isb
    LOAD    0x1310, 0xffff000000000000
    LOAD    0x1311, 0x40c00000
    CASE    0x13ff
    svc     #FINISH

    .data
    .balign 4096
l0_table:
    .quad   l1_table + 3
    .fill   511, 8, 0
l1_table:
    .quad   0
    .quad   l2_table + 3
    .quad   0
    .quad   BEYOND_OA + 3                       // table beyond the OA size
    .quad   BEYOND_OA + BLOCK_RW                // 1 GiB block beyond the OA size
    .quad   NO_MEMORY + 3                       // table where there is no memory
    .fill   506, 8, 0
l2_table:
    .quad   0x40000000 + BLOCK_EL0_RW
    .quad   0x40200000 + BLOCK_RW + XN
    .quad   l3_table + 3
    .quad   0
    .quad   0x40800000 + BLOCK_RW - 0x400 + XN  // AF = 0
    .quad   BEYOND_OA + BLOCK_RW + XN
    .quad   NO_MEMORY + BLOCK_RW + XN
    .fill   505, 8, 0
l3_table:
    .quad   0x40400000 + PAGE_RW + XN
    .quad   0
    .quad   0x40402000 + PAGE_RW - 0x400 + XN   // AF = 0
    .quad   0x40403000 + PAGE_RW + 0x80 + XN    // AP 0b10: read-only at EL1
    .quad   BEYOND_OA + PAGE_RW + XN
    .quad   0x40405000 + 0x701 + XN             // bits[1:0] = 0b01: reserved at level 3
    .fill   506, 8, 0
