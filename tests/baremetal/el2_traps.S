// EL1 instructions trapped to EL2 by HCR_EL2/CNTHCTL_EL2 controls, reported with EC 0x18
// (ISS = Op0, Op2, Op1, CRn, Rt, CRm, Direction) or EC 0x17 (trapped SMC). Boots at EL3.
// Cases (tags; expected values in tests/test_exception_routing.py), in the order they run:
//   0xb01        MSR SCTLR_EL1, X1 with HCR_EL2.TVM = 1
//   0xb02-0xb03  MRS X3, ID_AA64DFR0_EL1 / MRS X4, ID_AA64PFR0_EL1 with HCR_EL2.TID3 = 1
//   0xb04        MRS X5, CNTPCT_EL0 with CNTHCTL_EL2.EL1PCTEN = 0
//   0xb05        SMC #0x99 with HCR_EL2.TSC = 1: EC 0x17, ELR = the SMC itself
//   0xb06        MRS X2, SCTLR_EL1 with HCR_EL2.TRVM = 1 (last: the EL1 handler itself reads
//                ESR_EL1, which TRVM traps too, so a wrong routing to EL1 never ends)
    .include "macros.inc"
    .text
    .global main
main:
    ERET_TO 3, 0x3c9, el2_main
el2_main:
    SETREG  hcr_el2, (HCR_RW | (1 << 26))   // TVM
    ERET_TO 2, 0x3c5, 1f
1:  mov     x1, #0x800              // SCTLR_EL1 RES1 bit 11 only: MMU off, like the reset
    CASE    0xb01
    msr     sctlr_el1, x1

    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_RW | (1 << 18))   // TID3
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0xb02
    mrs     x3, id_aa64dfr0_el1
    CASE    0xb03
    mrs     x4, id_aa64pfr0_el1

    hvc     #ELEVATE
    SETREG  hcr_el2, HCR_RW
    SETREG  cnthctl_el2, 2          // EL1PCEN only: EL1PCTEN = 0
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0xb04
    mrs     x5, cntpct_el0

    hvc     #ELEVATE
    SETREG  cnthctl_el2, 3
    SETREG  hcr_el2, (HCR_RW | (1 << 19))   // TSC
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0xb05
    smc     #0x99

    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_RW | (1 << 30))   // TRVM
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0xb06
    mrs     x2, sctlr_el1
    hvc     #ELEVATE
    SETREG  hcr_el2, HCR_RW
    CASE    0xbff
    svc     #FINISH                 // SVC #0xFFFF at EL2: finish there
