// Stage 2 faults (Arm ARM D8 "The AArch64 Virtual Memory System Architecture", stage 2
// translation; D19.2 HPFAR_EL2, ESR_ELx ISS encoding for an exception from a Data Abort).
// Boots at EL3; EL2 builds stage 2 tables (VTCR_EL2: 4 KiB granule, 32-bit IPA, start at
// level 1), sets HCR_EL2.VM and runs EL1 with its MMU off (IPA = VA). Each fault is taken to
// EL2 with FAR_EL2 = the VA and HPFAR_EL2.FIPA = IPA[47:12] (recorded by EL2 as a value); a
// data access by a single load/store has a valid instruction syndrome (ISV = 1, SAS, SRT, SF).
// Stage 2 map (2 MiB blocks, level 2, Normal Write-Back): 0x4000_0000 and 0x4020_0000 RW (code,
// data); 0x4060_0000 read-only (S2AP = 0b01); 0x4080_0000 AF = 0; 0x40A0_0000 invalid;
// 0x40C0_0000 RW, XN; 0x40E0_0000 RW at PA 0x4020_0000; level 1 entry 2 (0x8000_0000) invalid.
// Cases (tags; expected values in tests/test_exception_routing.py):
//   0x1501/0x1511  STR X3 to the read-only block: permission fault, level 2, WnR; HPFAR_EL2
//   0x1502/0x1512  LDR X4 from the AF = 0 block: access flag fault, level 2; HPFAR_EL2
//   0x1503/0x1513  LDR W5 from the invalid level 2 entry: translation fault, level 2
//   0x1504/0x1514  LDRB W6 from 0x8000_0000: translation fault, level 1
//   0x1505/0x1515  BLR to the XN block: Instruction Abort (EC 0x20), permission fault, level 2
//   0x1506         LDR X7 from the read-only block: no fault; the next exception is HVC #0x156
//   0x1507         LDR X8 at IPA 0x40E0_0004 (stage 2: PA 0x4020_0004) with stage 1 off:
//                  Device memory, misaligned: Alignment fault to EL1, FAR = the VA
//   0x1508         X8 afterwards (value record): 0x77, the load did not complete
    .include "macros.inc"
    .equ VTCR, (0x80000000 | (2 << 16) | (3 << 12) | (1 << 10) | (1 << 8) | (1 << 6) | 32)
    .equ S2_RW, 0x7fd               // block, MemAttr 0b1111, S2AP 0b11, SH 0b11, AF
    .equ S2_RO, 0x77d               // S2AP 0b01
    .equ S2_NOAF, 0x3fd
    .equ S2_XN, (1 << 54)

// Run \insn at EL1 (with stage 2), then record HPFAR_EL2 at EL2 under \tag.
    .macro AT_EL1 case, tag, insn:vararg
    ERET_TO 2, 0x3c5, .Lel1\@
.Lel1\@:
    CASE    \case
    \insn
    hvc     #ELEVATE
    mrs     x0, hpfar_el2
    PUT     \tag, x0
    .endm

    .text
    .global main
main:
    ERET_TO 3, 0x3c9, el2_main
el2_main:
    adrp    x0, s2_l1
    msr     vttbr_el2, x0
    SETREG  vtcr_el2, VTCR
    SETREG  hcr_el2, (HCR_RW | 1)   // VM
    tlbi    vmalls12e1
    dsb     sy
    isb
    ldr     x1, =0x40600000
    mov     x3, #0x33
    AT_EL1  0x1501, 0x1511, str x3, [x1]
    ldr     x1, =0x40800000
    AT_EL1  0x1502, 0x1512, ldr x4, [x1]
    ldr     x1, =0x40a00000
    AT_EL1  0x1503, 0x1513, ldr w5, [x1]
    ldr     x1, =0x80000000
    AT_EL1  0x1504, 0x1514, ldrb w6, [x1]
    ldr     x1, =0x40c00000
    AT_EL1  0x1505, 0x1515, blr x1
    ldr     x1, =0x40600000
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x1506
    ldr     x7, [x1]
    hvc     #0x156
    ldr     x1, =0x40e00004
    mov     x8, #0x77
    CASE    0x1507
    ldr     x8, [x1]                // stage 1 off: Device memory, misaligned
    PUT     0x1508, x8
    hvc     #ELEVATE
    SETREG  hcr_el2, HCR_RW
    CASE    0x15ff
    svc     #FINISH

    .data
    .balign 4096
s2_l1:                              // level 1: 1 GiB per entry, 4 entries (32-bit IPA)
    .quad   0
    .quad   s2_l2 + 3               // 0x4000_0000: table
    .quad   0                       // 0x8000_0000: invalid
    .quad   0
    .balign 4096
s2_l2:                              // level 2 for 0x4000_0000: 2 MiB blocks
    .quad   0x40000000 + S2_RW
    .quad   0x40200000 + S2_RW
    .quad   0x40400000 + S2_RW
    .quad   0x40600000 + S2_RO
    .quad   0x40800000 + S2_NOAF
    .quad   0                       // 0x40A0_0000: invalid
    .quad   0x40c00000 + S2_RW + S2_XN
    .quad   0x40200000 + S2_RW      // 0x40E0_0000: the data block again (IPA != PA)
    .balign 4096
