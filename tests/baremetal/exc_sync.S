// Synchronous exception classes of issue 13 (boots at EL3; MMU off everywhere): FP/SIMD
// traps, Illegal Execution state, PC and SP alignment, alignment faults with the MMU off, HVC
// at EL3. Cases (tags; expected values in tests/test_exception_routing.py):
//   0xf01  EL1 FMOV with CPACR_EL1.FPEN = 0b00 -> EL1, EC 0x07
//   0xf02  EL0 FMOV with CPACR_EL1.FPEN = 0b01 -> EL1, EC 0x07 (EL1 FP is not trapped)
//   0xf03  EL1 FMOV with CPTR_EL2.TFP = 1 -> EL2, EC 0x07
//   0xf04  EL1 FMOV with FPEN = 0b00 and CPTR_EL2.TFP = 1 -> EL1 (CPACR_EL1 has priority)
//   0xf05  EL2 FMOV with CPTR_EL2.TFP = 1 -> EL2
//   0xf06  EL3 FMOV with CPTR_EL3.TFP = 1 -> EL3
//   0xf07  EL1 FMOV with CPTR_EL3.TFP = 1 -> EL3
//   0xf08  EL1 LDR D7 (a SIMD&FP load) with CPACR_EL1.FPEN = 0b00 -> EL1, EC 0x07
//   0xf09  EL1 MRS X2, FPCR with CPACR_EL1.FPEN = 0b00 -> EL1, EC 0x07
//   0xf0a  EL0 FMOV with CPACR_EL1.FPEN = 0b00 and HCR_EL2.TGE = 1 -> EL2, EC 0x00
//   0xf0b  EL2 FMOV with HCR_EL2.E2H = 1 and CPTR_EL2.FPEN = 0b00 -> EL2, EC 0x07
//   0xf11  EL1 ERET with SPSR_EL1.M = EL2h: illegal return, PSTATE.IL = 1 at EL1, then EC 0x0E
//          on the ERET's target instruction
//   0xf12  EL1 ERET with SPSR_EL1.M = 0b0001 (not a valid mode): likewise
//   0xf13  EL2 ERET to EL1 with HCR_EL2.TGE = 1: illegal return, EC 0x0E at EL2
//   0xf14  EL2 ERET to EL2h with SPSR_EL2.IL = 1: a legal return that sets PSTATE.IL, EC 0x0E
//   0xf21  EL1 BLR to an address with bits[1:0] = 0b10: PC alignment fault, EC 0x22, FAR
//   0xf22  EL0 BLR to a misaligned address: EC 0x22 to EL1
//          (a PE that does not check the PC executes the halfword-straddling BRK #0xF2F)
//   0xf31  EL1t LDR [SP] with SP_EL0 8 mod 16 and SCTLR_EL1.SA = 1: SP alignment, EC 0x26
//   0xf32  EL0 LDR [SP] with SP 8 mod 16 and SCTLR_EL1.SA0 = 1: EC 0x26 to EL1
//   0xf33  EL1t STR X0, [SP, #-8]! with SCTLR_EL1.SA = 1 (SP aligned at the access), then
//          LDR [SP]: SP alignment fault on the LDR
//   0xf34  EL1t LDR [SP] with SP 8 mod 16 and SCTLR_EL1.SA = 0: no fault (the SVC after it)
//   0xf41  EL1 misaligned LDR with SCTLR_EL1.A = 1, MMU off: alignment fault (DFSC 0x21)
//   0xf43  EL1 LDP W2, W3 at 4 mod 8 with SCTLR_EL1.A = 1: each access aligned, no fault
//   0xf44  EL0 STR W0 at 2 mod 4 with SCTLR_EL1.A = 1: alignment fault to EL1, WnR
//   0xf42  EL1 misaligned LDR with SCTLR_EL1.A = 0, MMU off: the access is to Device memory,
//          so alignment fault (DFSC 0x21) too
//   0xf45  EL1 STR X0 at 4 mod 8 with A = 0, MMU off: alignment fault, WnR; 0xf46: the
//          doubleword it would have overwritten is unchanged (0x1111)
//   0xf47  EL1 LDP X2, X3 at 4 mod 8, A = 0, MMU off: alignment fault
//   0xf48  EL1 LDR W2 at 4 mod 8, A = 0, MMU off: aligned to its size, no fault
//   0xf49  EL1 DC ZVA with the MMU off (Device memory): Alignment fault, WnR, CM 0; 0xf4a: the
//          block's first doubleword afterwards (value record), not zeroed
//   0xf51  HVC at EL3 with SCR_EL3.HCE = 1 -> EL3 (AArch64.CallHypervisor()), last: a PE
//          that takes it to EL2 makes an illegal return from there
    .include "macros.inc"
    .equ CPTR_EL2_RES1, 0x33ff
    .equ TFP, (1 << 10)
    .equ SCTLR_EL1_VALUE, 0x30d00800
    .equ SA, (1 << 3)
    .equ SA0, (1 << 4)
    .equ ALIGN_A, (1 << 1)
    .text
    .global main
main:
    ERET_TO 3, 0x3c9, el2_main
el2_main:
    ERET_TO 2, 0x3c5, el1_main

    // ---------------------------------------------------------------- FP/SIMD traps ----
el1_main:
    msr     cpacr_el1, xzr          // FPEN = 0b00
    isb
    CASE    0xf01
    fmov    d0, xzr
    SETREG  cpacr_el1, (1 << 20)    // FPEN = 0b01: EL0 only
    fmov    d0, xzr                 // not trapped at EL1
    ERET_TO 1, 0x0, el0_fp
el0_fp:
    CASE    0xf02
    fmov    d1, xzr
    svc     #ELEVATE                // EL1
    SETREG  cpacr_el1, (3 << 20)
    hvc     #ELEVATE                // EL2
    SETREG  cptr_el2, (CPTR_EL2_RES1 | TFP)
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0xf03
    fmov    d2, xzr
    msr     cpacr_el1, xzr
    isb
    CASE    0xf04
    fmov    d3, xzr
    SETREG  cpacr_el1, (3 << 20)
    hvc     #ELEVATE                // EL2
    CASE    0xf05
    fmov    d4, xzr
    SETREG  cptr_el2, CPTR_EL2_RES1
    smc     #ELEVATE                // EL3
    SETREG  cptr_el3, TFP
    CASE    0xf06
    fmov    d5, xzr
    ERET_TO 3, 0x3c5, 1f
1:  CASE    0xf07
    fmov    d6, xzr
    smc     #ELEVATE                // EL3
    msr     cptr_el3, xzr
    isb
    ERET_TO 3, 0x3c5, 1f            // EL1
1:  msr     cpacr_el1, xzr
    isb
    ldr     x1, =aligned_data
    CASE    0xf08
    ldr     d7, [x1]
    CASE    0xf09
    mrs     x2, fpcr
    hvc     #ELEVATE                // EL2
    SETREG  hcr_el2, (HCR_RW | HCR_TGE)
    ERET_TO 2, 0x0, 1f              // EL0, TGE = 1
1:  CASE    0xf0a
    fmov    d8, xzr
    svc     #ELEVATE                // EL2 (TGE = 1)
    SETREG  hcr_el2, (HCR_RW | HCR_E2H)
    msr     cptr_el2, xzr           // FPEN = 0b00 (CPACR_EL1 layout with E2H = 1)
    isb
    CASE    0xf0b
    fmov    d9, xzr
    SETREG  cptr_el2, (3 << 20)
    SETREG  hcr_el2, HCR_RW
    SETREG  cptr_el2, CPTR_EL2_RES1
    SETREG  cpacr_el1, (3 << 20)
    smc     #ELEVATE                // EL3

    // ---------------------------------------------------------------- illegal return ---
    ERET_TO 3, 0x3c5, el1_illegal
el1_illegal:
    msr     nzcv, xzr
    CASE    0xf11
    ERET_TO 1, 0x3c9, illegal_target1   // EL2h from EL1: a return to a higher EL
illegal_target1:
    nop
    msr     daifset, #0xf
    CASE    0xf12
    ERET_TO 1, 0x0c1, illegal_target2   // M = 0b0001, I, F
illegal_target2:
    nop
    msr     daifset, #0xf
    hvc     #ELEVATE                // EL2
    SETREG  hcr_el2, (HCR_RW | HCR_TGE)
    CASE    0xf13
    ERET_TO 2, 0x3c5, illegal_target3   // EL1h with HCR_EL2.TGE = 1
illegal_target3:
    nop
    SETREG  hcr_el2, HCR_RW
    CASE    0xf14
    ERET_TO 2, 0x1003c9, illegal_target4    // EL2h with SPSR_EL2.IL = 1: a legal return
illegal_target4:
    nop
    ERET_TO 2, 0x3c5, el1_pcalign

    // ---------------------------------------------------------------- PC alignment -----
el1_pcalign:
    ldr     x1, =misaligned_code + 2
    CASE    0xf21
    blr     x1
    ERET_TO 1, 0x0, el0_pcalign
el0_pcalign:
    ldr     x1, =misaligned_code + 2
    CASE    0xf22
    blr     x1

    svc     #ELEVATE                // EL1

    // ---------------------------------------------------------------- SP alignment -----
    SETREG  sctlr_el1, (SCTLR_EL1_VALUE | SA)
    msr     spsel, #0
    mov     x10, sp
    sub     x9, x10, #8
    mov     sp, x9                  // SP_EL0 = 8 mod 16
    CASE    0xf31
    ldr     x0, [sp]
    mov     sp, x10
    msr     spsel, #1
    SETREG  sctlr_el1, (SCTLR_EL1_VALUE | SA0)
    ERET_TO 1, 0x0, el0_spalign
el0_spalign:
    sub     sp, sp, #8
    CASE    0xf32
    ldr     x0, [sp]
    add     sp, sp, #8
    svc     #ELEVATE                // EL1
    SETREG  sctlr_el1, (SCTLR_EL1_VALUE | SA)
    msr     spsel, #0
    mov     x10, sp
    CASE    0xf33
    str     x0, [sp, #-8]!          // SP_EL0 aligned at the access, 8 mod 16 after it
    ldr     x1, [sp]                // SP alignment fault
    mov     sp, x10
    SETREG  sctlr_el1, SCTLR_EL1_VALUE
    sub     sp, sp, #8
    CASE    0xf34
    ldr     x1, [sp]                // SCTLR_EL1.SA = 0: not checked
    svc     #0xf34
    mov     sp, x10
    msr     spsel, #1

    // ---------------------------------------------------------------- alignment --------
    SETREG  sctlr_el1, (SCTLR_EL1_VALUE | ALIGN_A)
    ldr     x1, =aligned_data + 4
    CASE    0xf41
    ldr     x0, [x1]
    CASE    0xf43
    ldp     w2, w3, [x1]            // two 4-byte accesses, each aligned: no fault
    svc     #0xf43
    ldr     x1, =aligned_data + 2
    ERET_TO 1, 0x0, el0_align
el0_align:
    CASE    0xf44
    str     w0, [x1]
    svc     #ELEVATE                // EL1
    SETREG  sctlr_el1, SCTLR_EL1_VALUE
    ldr     x1, =aligned_data + 4
    CASE    0xf42
    ldr     x0, [x1]
    ldr     x0, =0xcafef00d
    CASE    0xf45
    str     x0, [x1]                // Device memory, 4 mod 8: Alignment fault, nothing stored
    ldr     x2, =aligned_data
    ldr     x3, [x2]
    PUT     0xf46, x3
    ldr     x1, =aligned_data + 4
    CASE    0xf47
    ldp     x2, x3, [x1]            // 8-byte elements at 4 mod 8: Alignment fault
    CASE    0xf48
    ldr     w2, [x1]                // 4 bytes at 4 mod 8: aligned to its size, no fault
    svc     #0xf48
    ldr     x1, =zva_block
    CASE    0xf49
    dc      zva, x1                 // Device memory: Alignment fault, nothing zeroed
    ldr     x3, [x1]
    PUT     0xf4a, x3

    // ---------------------------------------------------------------- HVC at EL3 -------
    smc     #ELEVATE                // EL3
    CASE    0xf51
    hvc     #0xf51
    CASE    0xfff
    svc     #FINISH

// Reached at +2 by the PC alignment cases. A PE that does not check PC alignment fetches
// the word at +2, BRK #0xF2F (0xd421e5e0), then (after the handler's ELR + 4) the word at +6,
// RET, back to the BLR.
    .balign 4
misaligned_code:
    .hword  0x0000
    .hword  0xe5e0, 0xd421          // BRK #0xF2F
    .hword  0x03c0, 0xd65f          // RET
    .hword  0x0000

    .data
    .balign 16
aligned_data:
    .quad   0x1111, 0x2222
    .balign 256
zva_block:
    .quad   0x3333, 0x4444
