// Generic Timer access checks and values (tests/test_generic_timer.py runs it on QEMU and
// compares each outcome with spe_emu.devices.generic_timer's access checks). Boots at EL3.
// Every MRS/MSR below uses X1, so a trap's ISS has Rt = 1. Cases, in the order they run
// (CNTKCTL = CNTKCTL_EL1, CNTHCTL = CNTHCTL_EL2; HCR_EL2.RW = 1 throughout):
//   0xd01        value: CNTVOFF_EL2 applies to CNTVCT_EL0 at EL2, E2H = 0 (0x10: yes, 0: no)
//   0xd02-0xd09  EL1, CNTHCTL = 0: CNTP_CTL, CNTPCT, CNTV_CTL, CNTHP_CTL, CNTVOFF, MSR CNTFRQ,
//                CNTKCTL_EL12, MSR CNTVCT
//   0xd10-0xd12  EL0, CNTKCTL = 0: CNTV_CTL, CNTP_CTL, CNTVCT
//   0xd13-0xd15  EL0, CNTKCTL = 0x303, CNTHCTL = 0: CNTP_CTL, CNTPCT, CNTV_CVAL
//   0xd16-0xd17  EL0, CNTHCTL = 2 (EL1PCEN): CNTPCT, CNTP_CTL
//   0xd18-0xd19  EL0, CNTHCTL = 1 (EL1PCTEN): CNTPCT, CNTP_CTL
//   0xd20-0xd21  EL0, HCR_EL2.TGE = 1, CNTKCTL = 0: CNTV_CTL, CNTVCT
//   0xd22-0xd24  values at EL2, E2H = TGE = 1: offset applies?; CNTV_CTL (= CNTHV_CTL_EL2,
//                written 3); CNTV_CTL_EL02 (= CNTV_CTL_EL0)
//   0xd25-0xd27  EL0 in host (E2H = TGE = 1), CNTHCTL = 0: CNTV_CTL, CNTVCT, CNTFRQ
//   0xd28-0xd29  values from host EL0, CNTHCTL = 0x303: CNTV_CTL; offset applies?
//   0xd30-0xd32  EL1, E2H = 1, TGE = 0, CNTHCTL = EL1PCTEN (bit 10): CNTP_CTL, CNTPCT;
//                value: offset applies at EL1?
//   0xd33-0xd34  EL1, E2H = 1, CNTHCTL = EL1PTEN (bit 11): CNTPCT, CNTP_CTL
//   0xd35-0xd36  values at EL2, E2H = 1: CNTHCTL (0xc00) after MSR CNTKCTL_EL1 of 3; CNTKCTL_EL1
//   0xd37-0xd39  values at EL2, E2H = 0: CNTP_TVAL<63:31> after expiry (CVAL = count - 100);
//                CNTP_CTL with ENABLE = IMASK = 1 after expiry; CNTP_CTL after ENABLE = 0
//   0xd40-0xd41  EL3: MSR CNTFRQ_EL0; value: CNTFRQ_EL0
    .include "macros.inc"

// Record ((CNTPCT - CNTVCT + 2^20) >> 36): 0x10 when CNTVOFF_EL2 = 2^40 is subtracted, else 0.
    .macro VDIFF tag
    mrs     x1, cntpct_el0
    mrs     x2, cntvct_el0
    sub     x3, x1, x2
    add     x3, x3, #0x100000
    lsr     x3, x3, #36
    PUT     \tag, x3
    .endm

    .text
    .global main
main:
    ERET_TO 3, 0x3c9, el2_a
el2_a:
    SETREG  cntvoff_el2, (1 << 40)
    VDIFF   0xd01
    SETREG  cnthctl_el2, 0
    ERET_TO 2, 0x3c5, el1_a
el1_a:
    CASE    0xd02
    mrs     x1, cntp_ctl_el0
    CASE    0xd03
    mrs     x1, cntpct_el0
    CASE    0xd04
    mrs     x1, cntv_ctl_el0
    CASE    0xd05
    mrs     x1, cnthp_ctl_el2
    CASE    0xd06
    mrs     x1, cntvoff_el2
    CASE    0xd07
    msr     cntfrq_el0, x1
    CASE    0xd08
    mrs     x1, s3_5_c14_c1_0       // CNTKCTL_EL12
    CASE    0xd09
    msr     s3_3_c14_c0_2, x1       // MSR CNTVCT_EL0
    ERET_TO 1, 0x0, el0_a           // CNTKCTL_EL1 = 0 from the boot code
el0_a:
    CASE    0xd10
    mrs     x1, cntv_ctl_el0
    CASE    0xd11
    mrs     x1, cntp_ctl_el0
    CASE    0xd12
    mrs     x1, cntvct_el0
    svc     #ELEVATE
    SETREG  cntkctl_el1, 0x303
    ERET_TO 1, 0x0, el0_b
el0_b:
    CASE    0xd13
    mrs     x1, cntp_ctl_el0
    CASE    0xd14
    mrs     x1, cntpct_el0
    CASE    0xd15
    mrs     x1, cntv_cval_el0
    svc     #ELEVATE
    hvc     #ELEVATE
    SETREG  cnthctl_el2, 2
    ERET_TO 2, 0x0, el0_c
el0_c:
    CASE    0xd16
    mrs     x1, cntpct_el0
    CASE    0xd17
    mrs     x1, cntp_ctl_el0
    svc     #ELEVATE
    hvc     #ELEVATE
    SETREG  cnthctl_el2, 1
    ERET_TO 2, 0x0, el0_d
el0_d:
    CASE    0xd18
    mrs     x1, cntpct_el0
    CASE    0xd19
    mrs     x1, cntp_ctl_el0
    svc     #ELEVATE
    hvc     #ELEVATE
    SETREG  cnthctl_el2, 3
    msr     cntkctl_el1, xzr
    SETREG  hcr_el2, (HCR_RW | HCR_TGE)
    ERET_TO 2, 0x0, el0_e
el0_e:
    CASE    0xd20
    mrs     x1, cntv_ctl_el0
    CASE    0xd21
    mrs     x1, cntvct_el0
    svc     #ELEVATE                // taken to EL2 (TGE)
    SETREG  hcr_el2, (HCR_RW | HCR_TGE | HCR_E2H)
    SETREG  cnthctl_el2, 0
    VDIFF   0xd22
    SETREG  cnthv_cval_el2, 0xffffffffffffffff
    SETREG  cnthv_ctl_el2, 3
    mrs     x1, cntv_ctl_el0
    PUT     0xd23, x1
    mrs     x1, s3_5_c14_c3_1       // CNTV_CTL_EL02
    PUT     0xd24, x1
    ERET_TO 2, 0x0, el0_f
el0_f:
    CASE    0xd25
    mrs     x1, cntv_ctl_el0
    CASE    0xd26
    mrs     x1, cntvct_el0
    CASE    0xd27
    mrs     x1, cntfrq_el0
    svc     #ELEVATE
    SETREG  cnthctl_el2, 0x303
    ERET_TO 2, 0x0, el0_g
el0_g:
    mrs     x5, cntv_ctl_el0
    mrs     x6, cntpct_el0
    mrs     x7, cntvct_el0
    svc     #ELEVATE
    PUT     0xd28, x5
    sub     x3, x6, x7
    add     x3, x3, #0x100000
    lsr     x3, x3, #36
    PUT     0xd29, x3
    SETREG  hcr_el2, (HCR_RW | HCR_E2H)
    SETREG  cnthctl_el2, (1 << 10)
    ERET_TO 2, 0x3c5, el1_b
el1_b:
    CASE    0xd30
    mrs     x1, cntp_ctl_el0
    CASE    0xd31
    mrs     x1, cntpct_el0
    VDIFF   0xd32
    hvc     #ELEVATE
    SETREG  cnthctl_el2, (1 << 11)
    ERET_TO 2, 0x3c5, el1_c
el1_c:
    CASE    0xd33
    mrs     x1, cntpct_el0
    CASE    0xd34
    mrs     x1, cntp_ctl_el0
    hvc     #ELEVATE
    SETREG  cnthctl_el2, 0xc00
    SETREG  cntkctl_el1, 3          // at EL2 with E2H = 1: reaches CNTHCTL_EL2
    mrs     x1, cnthctl_el2
    PUT     0xd35, x1
    mrs     x1, cntkctl_el1
    PUT     0xd36, x1
    SETREG  hcr_el2, HCR_RW
    SETREG  cnthctl_el2, 3
    mrs     x1, cntpct_el0
    sub     x1, x1, #100
    msr     cntp_cval_el0, x1
    SETREG  cntp_ctl_el0, 3
    mrs     x1, cntp_tval_el0
    lsr     x2, x1, #31
    PUT     0xd37, x2
    mrs     x1, cntp_ctl_el0
    PUT     0xd38, x1
    SETREG  cntp_ctl_el0, 0
    mrs     x1, cntp_ctl_el0
    PUT     0xd39, x1
    smc     #ELEVATE
    mrs     x1, cntfrq_el0
    CASE    0xd40
    msr     cntfrq_el0, x1
    PUT     0xd41, x1
    CASE    0xdff
    svc     #FINISH
