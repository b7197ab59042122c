// Hardware breakpoints and watchpoints (Arm ARM D2 "AArch64 Self-hosted Debug"; boots at
// EL3, MMU off). Breakpoint 0 and watchpoint 0 (every PE with debug has at least two of
// each: ID_AA64DFR0_EL1.BRPs/WRPs), enabled by MDSCR_EL1.MDE with the OS Lock clear; debug
// exceptions taken to EL1 from EL1 also need MDSCR_EL1.KDE = 1 and PSTATE.D = 0.
// Cases (tags; expected values in tests/test_exception_routing.py):
//   0x1100       ID_AA64DFR0_EL1[23:12] (value record: WRPs, bits [19:16], BRPs)
//   0x1101       EL1 instruction at DBGBVR0_EL1 (address match, PMC = 0b11): Breakpoint from
//                the current EL, EC 0x31, IFSC 0x22, ELR = the instruction
//   0x1102       EL0 instruction at DBGBVR0_EL1: EC 0x30 to EL1
//   0x1103       EL1 LDR of the doubleword at DBGWVR0_EL1 (LSC = 0b11, BAS = 0xFF): Watchpoint,
//                EC 0x35, DFSC 0x22, WnR 0, FAR = the address
//   0x1104       EL1 STR to it: EC 0x35, WnR 1
//   0x1105       EL0 LDR of it: EC 0x34 to EL1
//   0x1106       EL1 instruction at DBGBVR0_EL1 with PSTATE.D = 1: masked, no exception; the
//                SVC #0x16 after it is the next exception
//   0x1107       EL1 STP whose second doubleword is watched: Watchpoint, WnR 1, FAR = it
//   0x1108       EL1 LDR X0 of a watched doubleword with X0 = 0x77: Watchpoint ...
//   0x1109       ... and X0 afterwards (value record): 0x77, the load did not complete
//   0x110a       EL1 LDR with DBGWCR0_EL1.PAC = 0b10 (EL0 only): no match, next is SVC #0x10a
//   0x110b       DBGWCR0_EL1.LSC = 0b10 (stores): an LDR does not match, the STR after it does
//   0x110c       DBGWCR0_EL1.MASK = 4 (16 bytes, BAS all ones): LDR of the second doubleword
//   0x110d       OS Lock set (OSLAR_EL1.OSLK = 1): no match, next is SVC #0x10d
//   0x110e       MDCR_EL2.TDE = 1: EL1 LDR of a watched doubleword, Watchpoint to EL2 (EC 0x34)
//                although PSTATE.D = 1 (D masks only debug exceptions to the current EL)
//   0x110f       EL1 LDR with PSTATE.D = 1 (KDE = 1): masked, next is SVC #0x10f
//   0x1110       OS Lock set: an EL1 instruction at DBGBVR0_EL1 does not break, next is
//                SVC #0x110
//   0x1111       OS Lock set: MRS DBGBCR0_EL1 reads the value written (E = 1)
//   0x1112       OS Lock cleared again: the breakpoint (DBGBVR0_EL1 moved) is taken
//   0x1113       ID_AA64DFR0_EL1.DoubleLock (value record)
//   0x1114       OSDLR_EL1 after writing DLK = 1 (value record): 1
//   0x1115       OS Double Lock set (OSDLR_EL1.DLK = 1): an EL1 LDR of a watched doubleword
//                does not match (DoubleLockStatus()), next is SVC #0x115
//   0x1116       OSDLR_EL1.DLK cleared: the same LDR takes the Watchpoint
    .include "macros.inc"
    .equ MDSCR_MDE, (1 << 15)
    .equ MDSCR_KDE, (1 << 13)
    .equ DBGBCR_ADDR, (1 | (3 << 1) | (0xf << 5))               // E, PMC EL1+EL0, BAS
    .equ DBGWCR_LDST, (1 | (3 << 1) | (3 << 3) | (0xff << 5))   // E, PAC, LSC, BAS
    .equ DBGWCR_EL0ONLY, (1 | (2 << 1) | (3 << 3) | (0xff << 5))
    .equ DBGWCR_ST, (1 | (3 << 1) | (2 << 3) | (0xff << 5))
    .equ DBGWCR_MASK16, (1 | (3 << 1) | (3 << 3) | (0xff << 5) | (4 << 24))

    .text
    .global main
main:
    DEBUG_TO_EL1 el1_main

el1_main:
    mrs     x0, id_aa64dfr0_el1
    ubfx    x0, x0, #12, #12        // WRPs [23:20], bits [19:16], BRPs [15:12]
    PUT     0x1100, x0
    msr     oslar_el1, xzr          // OS Lock clear (it is set at a cold reset)
    SETREG  mdscr_el1, (MDSCR_MDE | MDSCR_KDE)
    ldr     x9, =case_0x1101
    msr     dbgbvr0_el1, x9
    SETREG  dbgbcr0_el1, DBGBCR_ADDR
    msr     daifclr, #8             // D = 0
    isb
    CASE    0x1101
    nop
    msr     daifset, #8
    ldr     x9, =case_0x1102
    msr     dbgbvr0_el1, x9
    isb
    ERET_TO 1, 0x0, el0_bp
el0_bp:
    CASE    0x1102
    nop
    svc     #ELEVATE                // EL1
    msr     dbgbcr0_el1, xzr

    ldr     x1, =watched
    msr     dbgwvr0_el1, x1
    SETREG  dbgwcr0_el1, DBGWCR_LDST
    msr     daifclr, #8
    isb
    CASE    0x1103
    ldr     x0, [x1]
    CASE    0x1104
    str     x0, [x1]
    msr     daifset, #8
    ERET_TO 1, 0x0, el0_wp
el0_wp:
    ldr     x1, =watched
    CASE    0x1105
    ldr     x0, [x1]
    svc     #ELEVATE                // EL1
    msr     dbgwcr0_el1, xzr

    ldr     x9, =case_0x1106
    msr     dbgbvr0_el1, x9
    SETREG  dbgbcr0_el1, DBGBCR_ADDR
    CASE    0x1106
    nop                             // PSTATE.D = 1: the breakpoint is masked
    svc     #0x16
    msr     dbgbcr0_el1, xzr

    msr     daifclr, #8
    WATCH   DBGWCR_LDST, watched + 8
    ldr     x2, =watched
    mov     x3, #0x77
    mov     x4, #0x78
    CASE    0x1107
    stp     x3, x4, [x2]
    WATCH   DBGWCR_LDST, watched
    mov     x0, #0x77
    CASE    0x1108
    ldr     x0, [x2]
    mov     x5, x0
    PUT     0x1109, x5
    WATCH   DBGWCR_EL0ONLY, watched
    CASE    0x110a
    ldr     x0, [x2]
    svc     #0x10a
    WATCH   DBGWCR_ST, watched
    ldr     x0, [x2]
    CASE    0x110b
    str     x0, [x2]
    WATCH   DBGWCR_MASK16, watched
    CASE    0x110c
    ldr     x0, [x2, #8]
    WATCH   DBGWCR_LDST, watched
    mov     x9, #1
    msr     oslar_el1, x9
    isb
    CASE    0x110d
    ldr     x0, [x2]
    svc     #0x10d
    msr     oslar_el1, xzr
    isb
    msr     daifset, #8
    hvc     #ELEVATE                // EL2: MDCR_EL2.TDE = 1
    mrs     x20, mdcr_el2
    orr     x20, x20, #(1 << 8)
    msr     mdcr_el2, x20
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x110e
    ldr     x0, [x2]
    hvc     #ELEVATE
    bic     x20, x20, #(1 << 8)
    msr     mdcr_el2, x20
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x110f
    ldr     x0, [x2]
    svc     #0x10f
    msr     dbgwcr0_el1, xzr
    ldr     x9, =case_0x1110
    msr     dbgbvr0_el1, x9
    SETREG  dbgbcr0_el1, DBGBCR_ADDR
    mov     x9, #1
    msr     oslar_el1, x9
    msr     daifclr, #8
    isb
    CASE    0x1110
    nop
    svc     #0x110
    mrs     x3, dbgbcr0_el1         // OS Lock set: still the value written (E = 1)
    PUT     0x1111, x3
    msr     oslar_el1, xzr          // OS Lock clear: the breakpoint is back
    ldr     x9, =case_0x1112
    msr     dbgbvr0_el1, x9
    isb
    CASE    0x1112
    nop
    msr     daifset, #8
    mrs     x3, id_aa64dfr0_el1
    ubfx    x3, x3, #36, #4         // DoubleLock
    PUT     0x1113, x3
    mov     x9, #1
    msr     osdlr_el1, x9           // DLK: RES0 without FEAT_DoubleLock
    isb
    mrs     x3, osdlr_el1
    PUT     0x1114, x3
    ldr     x2, =watched
    WATCH   DBGWCR_LDST, watched
    msr     daifclr, #8
    isb
    CASE    0x1115
    ldr     x0, [x2]                // OS Double Lock: no Watchpoint
    svc     #0x115
    msr     osdlr_el1, xzr
    isb
    CASE    0x1116
    ldr     x0, [x2]                // unlocked: Watchpoint
    msr     daifset, #8
    msr     dbgwcr0_el1, xzr
    msr     dbgbcr0_el1, xzr
    msr     mdscr_el1, xzr
    isb
    CASE    0x11ff
    svc     #FINISH

    .data
    .balign 16
watched:
    .quad   0x5151, 0
