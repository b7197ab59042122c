// EL1 and EL0 exceptions: runs from any boot EL (EL3, EL2 or EL1) and must give the same
// results from each. Cases (tags, see tests/test_exception_routing.py for the expected
// values):
//   0x101-0x104  SVC, BRK, UDF, HLT #1 at EL1 (SPSel = 1)
//   0x105        SVC at EL1 with NZCV = N,C and DAIF = A,F: SPSR keeps them
//   0x106-0x107  SVC, UDF at EL1 with SPSel = 0 (vector +0x000)
//   0x108        SVC at EL1 with SCTLR_EL1.SPAN = 0: PSTATE.PAN = 1 on entry
//   0x109        SVC at EL1 with PSTATE.UAO = 1: SPSR.UAO = 1, PSTATE.UAO = 0 on entry
//   0x201-0x206  EL0: SVC, UDF, BRK, MRS SCTLR_EL1, HVC, SMC (the last two UNDEFINED)
//   0x207        SVC at EL0 with NZCV = Z,V
//   0x208-0x209  EL0 MRS DAIF and MSR DAIFSet with SCTLR_EL1.UMA = 0 (EC 0x18)
//   0x20a        EL0 MRS ID_AA64DFR0_EL1 (UNDEFINED)
//   0x20b-0x20c  EL0 MRS CNTVCT_EL0 / CNTFRQ_EL0 with CNTKCTL_EL1 = 0 (EC 0x18)
//   0x20d        EL0 HLT #0xF000 (semihosting is not available at EL0: UNDEFINED)
    .include "macros.inc"
    .text
    .global main
main:
    mrs     x0, CurrentEL
    lsr     x0, x0, #2
    cmp     x0, #3
    b.ne    1f
    ERET_TO 3, 0x3c5, el1_main
1:  cmp     x0, #2
    b.ne    el1_main
    ERET_TO 2, 0x3c5, el1_main

el1_main:
    msr     nzcv, xzr               // the boot-EL dispatch above left flags behind
    TAG     0x101
    .global a_svc_el1
a_svc_el1:
    svc     #0x11
    TAG     0x102
    .global a_brk_el1
a_brk_el1:
    brk     #0x22
    TAG     0x103
    .global a_udf_el1
a_udf_el1:
    udf     #0
    TAG     0x104
    .global a_hlt_el1
a_hlt_el1:
    hlt     #1

    mov     x0, #0xa0000000
    msr     nzcv, x0
    msr     daifclr, #0xf
    msr     daifset, #0x5           // A, F
    TAG     0x105
    .global a_svc_flags
a_svc_flags:
    svc     #0x33

    msr     spsel, #0
    TAG     0x106
    .global a_svc_sp0
a_svc_sp0:
    svc     #0x44
    TAG     0x107
    .global a_udf_sp0
a_udf_sp0:
    udf     #1
    msr     spsel, #1
    msr     daifset, #0xf
    msr     nzcv, xzr

    SETREG  sctlr_el1, 0x30500800   // SPAN = 0
    TAG     0x108
    .global a_svc_pan
a_svc_pan:
    svc     #0x88
    SETREG  sctlr_el1, 0x30d00800

    msr     uao, #1
    TAG     0x109
    .global a_svc_uao
a_svc_uao:
    svc     #0x89
    msr     uao, #0

    ERET_TO 1, 0x0, el0_main

el0_main:
    TAG     0x201
    .global a_svc_el0
a_svc_el0:
    svc     #0x55
    TAG     0x202
    .global a_udf_el0
a_udf_el0:
    udf     #2
    TAG     0x203
    .global a_brk_el0
a_brk_el0:
    brk     #0x66
    TAG     0x204
    .global a_mrs_sctlr_el0
a_mrs_sctlr_el0:
    mrs     x0, sctlr_el1
    TAG     0x205
    .global a_hvc_el0
a_hvc_el0:
    hvc     #0x77
    TAG     0x206
    .global a_smc_el0
a_smc_el0:
    smc     #0x88
    mov     x0, #0x50000000
    msr     nzcv, x0
    TAG     0x207
    .global a_svc_el0_flags
a_svc_el0_flags:
    svc     #0x57
    msr     nzcv, xzr
    TAG     0x208
    .global a_mrs_daif_el0
a_mrs_daif_el0:
    mrs     x0, daif
    TAG     0x209
    .global a_daifset_el0
a_daifset_el0:
    msr     daifset, #2
    TAG     0x20a
    .global a_mrs_id_el0
a_mrs_id_el0:
    mrs     x3, id_aa64dfr0_el1
    TAG     0x20b
    .global a_mrs_cntvct_el0
a_mrs_cntvct_el0:
    mrs     x0, cntvct_el0
    TAG     0x20c
    .global a_mrs_cntfrq_el0
a_mrs_cntfrq_el0:
    mrs     x0, cntfrq_el0
    TAG     0x20d
    mov     x0, #0x13               // SYS_ERRNO, harmless if it ever ran
    .global a_hlt_el0
a_hlt_el0:
    hlt     #0xf000
    TAG     0x2ff
    svc     #FINISH
