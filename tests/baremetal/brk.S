// BRK (EC 0x3C, ISS = imm16, ELR = the BRK itself) at every EL and its routing (boots at
// EL3). Cases (tags; expected values in tests/test_exception_routing.py):
//   0x901        BRK at EL3 -> EL3          0x902  BRK at EL2 -> EL2
//   0x903        BRK at EL1 -> EL1          0x904  BRK at EL0 -> EL1
//   0x905        BRK at EL1 with MDCR_EL2.TDE = 1 -> EL2 (debug exceptions routed to EL2)
//   0x906        BRK at EL0 with HCR_EL2.TGE = 1 -> EL2
    .include "macros.inc"
    .text
    .global main
main:
    CASE    0x901
    brk     #0x91
    ERET_TO 3, 0x3c9, el2_main
el2_main:
    mrs     x20, mdcr_el2           // QEMU and spe_emu reset it differently: keep it, set TDE
    bic     x20, x20, #(1 << 8)
    msr     mdcr_el2, x20
    CASE    0x902
    brk     #0x92
    ERET_TO 2, 0x3c5, el1_main
el1_main:
    CASE    0x903
    brk     #0x93
    ERET_TO 1, 0x0, el0_main
el0_main:
    CASE    0x904
    brk     #0x94
    svc     #ELEVATE                // EL1
    hvc     #ELEVATE                // EL2
    orr     x21, x20, #(1 << 8)     // TDE
    msr     mdcr_el2, x21
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x905
    brk     #0x95
    hvc     #ELEVATE
    msr     mdcr_el2, x20
    SETREG  hcr_el2, (HCR_RW | HCR_TGE)
    ERET_TO 2, 0x0, 1f
1:  CASE    0x906
    brk     #0x96
    svc     #ELEVATE                // EL2 (TGE)
    SETREG  hcr_el2, HCR_RW
    CASE    0x9ff
    svc     #FINISH
