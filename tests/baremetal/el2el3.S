// Routing between EL0, EL1, EL2 and EL3 (boots at EL3; on QEMU: secure=on,virtualization=on).
// Cases (tags; expected values in tests/test_exception_routing.py):
//   0x301, 0x303-0x305  EL3: SVC, SMC, UDF; 0x305 SVC with SPSel = 0 (HVC at EL3 is case
//                0xe01 of spe_access.S, which QEMU does not run: QEMU 7.2 takes it to EL2)
//   0x401-0x405  EL2 (entered with NZCV = Z,C and DAIF = D,I): SVC, HVC, SMC (to EL3), UDF,
//                MRS SCR_EL3 (UNDEFINED at EL2)
//   0x501-0x503  EL1: HVC (to EL2), SMC (to EL3), MRS HCR_EL2 (UNDEFINED)
//   0x504        EL1 HVC with SCR_EL3.HCE = 0: UNDEFINED
//   (traps of EL1 instructions to EL2 by HCR_EL2/MDCR_EL2 controls: el2_traps.S)
//   0x601        EL0 SVC #0x1234 -> EL1, whose handler does HVC #0x5678 -> EL2 (nested)
//   0x701-0x704  EL0 with HCR_EL2.TGE = 1: SVC, UDF, MRS SCTLR_EL1, HVC all go to EL2
//   0x801        EL1 SMC with SCR_EL3.SMD = 1: UNDEFINED
    .include "macros.inc"
    .equ SCR_BASE, 0x531            // RW, HCE, RES1, NS
    .text
    .global main
main:
    CASE    0x301
    svc     #0x31
    CASE    0x303
    smc     #0x33
    CASE    0x304
    udf     #0
    msr     spsel, #0
    CASE    0x305
    svc     #0x35
    msr     spsel, #1
    ERET_TO 3, 0x60000289, el2_main // EL2h, NZCV = Z,C, DAIF = D,I

el2_main:
    CASE    0x401
    svc     #0x41
    CASE    0x402
    hvc     #0x42
    CASE    0x403
    smc     #0x43
    CASE    0x404
    udf     #0
    CASE    0x405
    mrs     x0, scr_el3
    msr     nzcv, xzr
    ERET_TO 2, 0x3c5, el1_main

el1_main:
    CASE    0x501
    hvc     #0x51
    CASE    0x502
    smc     #0x52
    CASE    0x503
    mrs     x0, hcr_el2

    smc     #ELEVATE
    SETREG  scr_el3, (SCR_BASE & ~(1 << 8)) // HCE = 0
    ERET_TO 3, 0x3c5, 1f
1:  CASE    0x504
    hvc     #0x59

    smc     #ELEVATE
    SETREG  scr_el3, SCR_BASE
    ERET_TO 3, 0x3c5, 1f
1:  ERET_TO 1, 0x0, el0_main

el0_main:
    CASE    0x601
    svc     #0x1234
    svc     #ELEVATE                // EL1
    hvc     #ELEVATE                // EL2
    SETREG  hcr_el2, (HCR_RW | HCR_TGE)
    ERET_TO 2, 0x0, el0_tge

el0_tge:
    CASE    0x701
    svc     #0x71
    CASE    0x702
    udf     #0
    CASE    0x703
    mrs     x0, sctlr_el1
    CASE    0x704
    hvc     #0x74
    svc     #ELEVATE                // EL2 (TGE)
    SETREG  hcr_el2, HCR_RW
    smc     #ELEVATE
    SETREG  scr_el3, (SCR_BASE | (1 << 7))  // SMD = 1
    ERET_TO 3, 0x3c5, 1f
1:  CASE    0x801
    smc     #0x81
    CASE    0x8ff
    svc     #FINISH
