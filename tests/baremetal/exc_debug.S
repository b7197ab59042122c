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
    .include "macros.inc"
    .equ MDSCR_MDE, (1 << 15)
    .equ MDSCR_KDE, (1 << 13)
    .equ DBGBCR_ADDR, (1 | (3 << 1) | (0xf << 5))               // E, PMC EL1+EL0, BAS
    .equ DBGWCR_LDST, (1 | (3 << 1) | (3 << 3) | (0xff << 5))   // E, PAC, LSC, BAS
    .text
    .global main
main:
    msr     mdcr_el3, xzr
    mrs     x20, mdcr_el2           // keep HPMN; clear TDE, TDA, TDOSA
    bic     x20, x20, #(7 << 8)
    msr     mdcr_el2, x20
    ERET_TO 3, 0x3c5, el1_main

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
    msr     mdscr_el1, xzr
    isb
    CASE    0x11ff
    svc     #FINISH

    .data
    .balign 16
watched:
    .quad   0x5151, 0
