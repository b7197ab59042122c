// EL0 reads of counters and ID registers, which spe_emu answers itself for EL1 and above
// (CNTVCT_EL0, CNTPCT_EL0, CNTFRQ_EL0, ID_AA64DFR0_EL1, ID_AA64PFR0_EL1): at EL0 the
// architectural traps and UNDEFs must still happen. Runs from any boot EL.
// Cases (tags; expected values in tests/test_exception_routing.py), in the order they run:
//   0xc00        (EL1) value of ID_AA64MMFR2_EL1: IDS (bits 39:36) says whether EL0 reads of
//                ID registers trap with EC 0x18 (FEAT_IDST) or are UNDEFINED (EC 0x00)
//   0xc01-0xc03  MRS X6, CNTVCT_EL0 / X7, CNTPCT_EL0 / X8, CNTFRQ_EL0 with CNTKCTL_EL1 = 0:
//                EC 0x18 to EL1
//   0xc04-0xc05  MRS X9, ID_AA64DFR0_EL1 / MRS X10, ID_AA64PFR0_EL1
    .include "macros.inc"
    .text
    .global main
main:
    BOOT_TO_EL1 el1_main
el1_main:
    mrs     x0, id_aa64mmfr2_el1
    PUT     0xc00, x0
    ERET_TO 1, 0x0, el0_main        // CNTKCTL_EL1 = 0 from the boot code
el0_main:
    CASE    0xc01
    mrs     x6, cntvct_el0
    CASE    0xc02
    mrs     x7, cntpct_el0
    CASE    0xc03
    mrs     x8, cntfrq_el0
    CASE    0xc04
    mrs     x9, id_aa64dfr0_el1
    CASE    0xc05
    mrs     x10, id_aa64pfr0_el1
    CASE    0xcff
    svc     #FINISH
