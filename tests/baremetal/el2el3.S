// Routing between EL0, EL1, EL2 and EL3 (boots at EL3; on QEMU: secure=on,virtualization=on).
// Cases (tags; expected values in tests/test_exception_routing.py):
//   0x301-0x305  EL3: SVC, SMC, UDF; 0x305 SVC with SPSel = 0 (HVC at EL3 is in spe_access.S:
//                QEMU 7.2 wrongly takes it to EL2)
//   0x401-0x405  EL2 (entered with NZCV = Z,C and DAIF = D,I): SVC, HVC, SMC (to EL3), UDF,
//                MRS SCR_EL3 (UNDEFINED at EL2)
//   0x501-0x503  EL1: HVC (to EL2), SMC (to EL3), MRS HCR_EL2 (UNDEFINED)
//   0x504        EL1 SMC with HCR_EL2.TSC = 1: trapped to EL2, EC 0x17, ELR = the SMC
//   0x505-0x506  EL1 MSR/MRS SCTLR_EL1 with HCR_EL2.TVM/TRVM = 1: EC 0x18 to EL2
//   0x507-0x508  EL1 MRS ID_AA64DFR0_EL1 / ID_AA64PFR0_EL1 with HCR_EL2.TID3 = 1: EC 0x18 to EL2
//   0x509        EL1 HVC with SCR_EL3.HCE = 0: UNDEFINED
//   0x601        EL0 SVC #0x1234 -> EL1, whose handler does HVC #0x5678 -> EL2 (nested)
//   0x701-0x704  EL0 with HCR_EL2.TGE = 1: SVC, UDF, MRS SCTLR_EL1, HVC all go to EL2
//   0x801        EL1 SMC with SCR_EL3.SMD = 1: UNDEFINED
    .include "macros.inc"
    .equ SCR_BASE, 0x531            // RW, HCE, RES1, NS
    .equ HCR_RW, 0x80000000
    .text
    .global main
main:
    TAG     0x301
    svc     #0x31
    TAG     0x303
    smc     #0x33
    TAG     0x304
    .global b_udf_el3
b_udf_el3:
    udf     #0
    msr     spsel, #0
    TAG     0x305
    svc     #0x35
    msr     spsel, #1
    ERET_TO 3, 0x60000289, el2_main // EL2h, NZCV = Z,C, DAIF = D,I

el2_main:
    TAG     0x401
    svc     #0x41
    TAG     0x402
    hvc     #0x42
    TAG     0x403
    smc     #0x43
    TAG     0x404
    .global b_udf_el2
b_udf_el2:
    udf     #0
    TAG     0x405
    .global b_mrs_scr_el2
b_mrs_scr_el2:
    mrs     x0, scr_el3
    msr     nzcv, xzr
    ERET_TO 2, 0x3c5, el1_main

el1_main:
    TAG     0x501
    hvc     #0x51
    TAG     0x502
    smc     #0x52
    TAG     0x503
    .global b_mrs_hcr_el1
b_mrs_hcr_el1:
    mrs     x0, hcr_el2

    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_RW | (1 << 19))   // TSC
    ERET_TO 2, 0x3c5, 1f
1:  TAG     0x504
    .global b_smc_tsc
b_smc_tsc:
    smc     #0x54

    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_RW | (1 << 26) | (1 << 30))   // TVM, TRVM
    ERET_TO 2, 0x3c5, 1f
1:  mov     x1, #0
    TAG     0x505
    .global b_msr_sctlr_tvm
b_msr_sctlr_tvm:
    msr     sctlr_el1, x1
    TAG     0x506
    .global b_mrs_sctlr_trvm
b_mrs_sctlr_trvm:
    mrs     x2, sctlr_el1

    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_RW | (1 << 18))   // TID3
    ERET_TO 2, 0x3c5, 1f
1:  TAG     0x507
    .global b_mrs_dfr0_tid3
b_mrs_dfr0_tid3:
    mrs     x3, id_aa64dfr0_el1
    TAG     0x508
    .global b_mrs_pfr0_tid3
b_mrs_pfr0_tid3:
    mrs     x4, id_aa64pfr0_el1

    hvc     #ELEVATE
    SETREG  hcr_el2, HCR_RW
    smc     #ELEVATE
    SETREG  scr_el3, (SCR_BASE & ~(1 << 8)) // HCE = 0
    ERET_TO 3, 0x3c5, 1f
1:  TAG     0x509
    .global b_hvc_hce0
b_hvc_hce0:
    hvc     #0x59

    smc     #ELEVATE
    SETREG  scr_el3, SCR_BASE
    ERET_TO 3, 0x3c5, 1f
1:  ERET_TO 1, 0x0, el0_main

el0_main:
    TAG     0x601
    svc     #0x1234
    svc     #ELEVATE                // EL1
    hvc     #ELEVATE                // EL2
    SETREG  hcr_el2, (HCR_RW | (1 << 27))   // TGE
    ERET_TO 2, 0x0, el0_tge

el0_tge:
    TAG     0x701
    svc     #0x71
    TAG     0x702
    .global b_udf_el0_tge
b_udf_el0_tge:
    udf     #0
    TAG     0x703
    .global b_mrs_sctlr_el0_tge
b_mrs_sctlr_el0_tge:
    mrs     x0, sctlr_el1
    TAG     0x704
    .global b_hvc_el0_tge
b_hvc_el0_tge:
    hvc     #0x74
    svc     #ELEVATE                // EL2 (TGE)
    SETREG  hcr_el2, HCR_RW
    smc     #ELEVATE
    SETREG  scr_el3, (SCR_BASE | (1 << 7))  // SMD = 1
    ERET_TO 3, 0x3c5, 1f
1:  TAG     0x801
    .global b_smc_smd
b_smc_smd:
    smc     #0x81
    TAG     0x8ff
    svc     #FINISH
