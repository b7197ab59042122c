// EL1 and EL0 exceptions taken to EL1. Runs from any boot EL (EL3, EL2 or EL1: the test runs
// it from each and expects the same results). Cases (tags; expected values in
// tests/test_exception_routing.py):
//   0x101-0x103  SVC, UDF, HLT #1 (UNDEFINED) at EL1 with SPSel = 1: vector +0x200
//   0x104        SVC at EL1 with NZCV = N,C and DAIF = A,F: SPSR keeps them
//   0x105-0x106  SVC, UDF at EL1 with SPSel = 0: vector +0x000, SPSR.M = EL1t
//   0x107        SVC at EL1 with SCTLR_EL1.SPAN = 0: PSTATE.PAN = 1 on entry
//   0x108        SVC at EL1 with PSTATE.UAO = 1: SPSR.UAO = 1, PSTATE.UAO = 0 on entry
//   0x201-0x205  EL0 (SP_EL0): SVC, UDF, MRS SCTLR_EL1, HVC, SMC (the last three UNDEFINED)
//   0x206        SVC at EL0 with NZCV = Z,V
//   0x207-0x208  EL0 MRS DAIF and MSR DAIFSet with SCTLR_EL1.UMA = 0: EC 0x18
//   0x209        EL0 HLT #0xF000: semihosting is not available at EL0, so UNDEFINED
    .include "macros.inc"
    .text
    .global main
main:
    BOOT_TO_EL1 el1_main

el1_main:
    msr     nzcv, xzr               // the boot-EL dispatch above left flags behind
    CASE    0x101
    svc     #0x11
    CASE    0x102
    udf     #0
    CASE    0x103
    hlt     #1

    mov     x0, #0xa0000000
    msr     nzcv, x0
    msr     daifclr, #0xf
    msr     daifset, #0x5           // A, F
    CASE    0x104
    svc     #0x33

    msr     spsel, #0
    CASE    0x105
    svc     #0x44
    CASE    0x106
    udf     #1
    msr     spsel, #1
    msr     daifset, #0xf
    msr     nzcv, xzr

    SETREG  sctlr_el1, 0x30500800   // SPAN = 0
    CASE    0x107
    svc     #0x88
    SETREG  sctlr_el1, 0x30d00800

    msr     uao, #1
    CASE    0x108
    svc     #0x89
    msr     uao, #0

    ERET_TO 1, 0x0, el0_main

el0_main:
    CASE    0x201
    svc     #0x55
    CASE    0x202
    udf     #2
    CASE    0x203
    mrs     x0, sctlr_el1
    CASE    0x204
    hvc     #0x77
    CASE    0x205
    smc     #0x88
    mov     x0, #0x50000000
    msr     nzcv, x0
    CASE    0x206
    svc     #0x57
    msr     nzcv, xzr
    CASE    0x207
    mrs     x0, daif
    CASE    0x208
    msr     daifset, #2
    mov     x0, #0x13               // SYS_ERRNO, harmless if it ever ran
    CASE    0x209
    hlt     #0xf000
    CASE    0x2ff
    svc     #FINISH
