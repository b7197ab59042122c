// Software Step (MDSCR_EL1.SS, PSTATE.SS / SPSR_ELx.SS; Arm ARM D2.12) from EL1 and EL0
// (boots at EL3; MMU off). Cases (tags; expected values in tests/test_exception_routing.py):
//   0x1601  ERET to EL0 with SPSR_EL1.SS = 1, MDSCR_EL1.SS = 1: one instruction, then
//           Software Step to EL1 (EC 0x32, ISV = 1, EX = 0), ELR = the next instruction
//   0x1602  ERET to EL1 with SPSR_EL1.{SS, D} = {1, 0}, MDSCR_EL1.KDE = 1: EC 0x33 at EL1
//   0x1603  likewise with KDE = 0: debug exceptions disabled at EL1, no step (next: SVC)
//   0x1604  ERET to EL0 with SPSR_EL1.SS = 0 (active-pending): the exception is taken before
//           any instruction, ELR = the ERET's target, ISV = 0
//   0x1605  a stepped LDXR: EX = 1
//   0x1606  OS Lock set (OSLSR_EL1.OSLK = 1): no step (next: SVC)
// The common handler stops stepping (MDSCR_EL1.SS = 0) and returns to ELR.
    .include "macros.inc"
    .equ MDSCR_SS, 1
    .equ MDSCR_KDE, (1 << 13)
    .equ SPSR_SS, (1 << 21)
    .text
    .global main
main:
    DEBUG_TO_EL1 el1_main

el1_main:
    msr     oslar_el1, xzr          // OS Lock clear (it is set at a cold reset)
    isb
    SETREG  mdscr_el1, MDSCR_SS
    CASE    0x1601
    ERET_TO 1, SPSR_SS, el0_step    // EL0t, SS = 1
el0_step:
    mov     x0, #1                  // stepped
    svc     #ELEVATE

    SETREG  mdscr_el1, (MDSCR_SS | MDSCR_KDE)
    CASE    0x1602
    ERET_TO 1, (SPSR_SS | 0x1c5), el1_step   // EL1h, D = 0
el1_step:
    mov     x0, #2                  // stepped: EC 0x33 to EL1
    SETREG  mdscr_el1, MDSCR_SS     // KDE = 0
    CASE    0x1603
    ERET_TO 1, (SPSR_SS | 0x1c5), el1_nostep
el1_nostep:
    mov     x0, #3
    svc     #0x603
    msr     daifset, #8

    SETREG  mdscr_el1, MDSCR_SS
    CASE    0x1604
    ERET_TO 1, 0x0, el0_pending     // SS = 0: active-pending
el0_pending:
    mov     x0, #4
    svc     #ELEVATE

    ldr     x1, =step_data
    SETREG  mdscr_el1, MDSCR_SS
    CASE    0x1605
    ERET_TO 1, SPSR_SS, el0_excl
el0_excl:
    ldxr    x0, [x1]                // stepped: EX = 1
    clrex
    svc     #ELEVATE

    mov     x9, #1
    msr     oslar_el1, x9
    isb
    SETREG  mdscr_el1, MDSCR_SS
    CASE    0x1606
    ERET_TO 1, SPSR_SS, el0_locked
el0_locked:
    mov     x0, #6
    svc     #0x606
    svc     #ELEVATE
    msr     mdscr_el1, xzr
    msr     oslar_el1, xzr
    isb
    CASE    0x16ff
    svc     #FINISH

    .data
    .balign 16
step_data:
    .quad   0x1600
