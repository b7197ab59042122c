// Virtual interrupts (Arm ARM D1.3.5 "Virtual interrupts"): HCR_EL2.{IMO, FMO, AMO} = 1 route
// the physical ones to EL2 and enable HCR_EL2.VI/VF/VSE, which are taken at EL1 (Non-secure,
// EL2 enabled) when PSTATE.I/F/A is clear. Boots at EL3. The handler returns from an
// asynchronous exception with SPSR.{A, I, F} set (common.S), so a level that stays set is
// taken once. Cases (tags; expected values in tests/test_exception_routing.py):
//   0x1200  SVC #0x12 at EL1: gives ESR_EL1 a known value (an IRQ or FIQ leaves it unchanged)
//   0x1201  ISR_EL1 with HCR_EL2.VI = 1 and PSTATE.I = 1 (value record): I = 1
//   0x1202  MSR DAIFClr, #2 with HCR_EL2.VI = 1: virtual IRQ at EL1, vector +0x280
//   0x1203  MSR DAIFClr, #1 with HCR_EL2.VF = 1: virtual FIQ at EL1, vector +0x300
//   0x1204  MSR DAIFClr, #4 with HCR_EL2.VSE = 1: virtual SError at EL1, vector +0x380,
//           ESR_EL1 EC 0x2F with the ISS of VSESR_EL2 (0 here)
//   0x1205  HCR_EL2 afterwards (value record): taking the virtual SError cleared VSE
//   0x1206  ISR_EL1 with HCR_EL2.{AMO, VSE} = 1 and PSTATE.A = 1 (value record): A = 1
//   0x1207  ERET from EL1 to EL0 with PSTATE.A = 0 and VSE = 1: virtual SError from EL0,
//           vector +0x580, ELR = the ERET's target
//   0x1208  ISR_EL1 with VSE = 1 but AMO = 0 (value record): nothing pending, A = 0, and
//           nothing is taken with PSTATE.A = 0
//   0x1209  VSE set at EL2, ERET to EL1 with SPSR_EL2.A = 0: taken at the ERET's target
//   0x120a  ERET from EL2 to EL0 with HCR_EL2.VI = 1, PSTATE.I = 0: virtual IRQ from EL0,
//           vector +0x480 (ESR_EL1 still holds the virtual SError's syndrome)
//   0x120b  VSESR_EL2 = 0x11 written and read at EL2 (value record; FEAT_RAS)
//   0x120c  MSR DAIFClr, #4 with HCR_EL2.VSE = 1: the virtual SError's ESR_EL1 has IDS and ISS
//           from VSESR_EL2: 0xbe000011
//   0x120d  the same with VSESR_EL2.{IDS, ISS} = {1, 0xabcdef}: ESR_EL1 0xbfabcdef
//   0x120e  DISR_EL1 read at EL1 with HCR_EL2.AMO = 1 (value record): VDISR_EL2, which EL2
//           set to 0x80000022
//   0x120f  VDISR_EL2 read at EL2 after EL1 wrote 0 to DISR_EL1 with AMO = 1 (value record)
//   0x1210  DISR_EL1 read at EL2 after EL1 wrote 0x80000033 to it with AMO = 0 (value record)
//   0x1211  ERRIDR_EL1 read at EL1 (value record): NUM = 0, no error record
    .include "macros.inc"
    .equ HCR_BASE, (HCR_RW | (1 << 5) | (1 << 4) | (1 << 3))   // AMO, IMO, FMO
    .equ HCR_VSE, (1 << 8)
    .equ HCR_VI, (1 << 7)
    .equ HCR_VF, (1 << 6)
    .text
    .global main
main:
    ERET_TO 3, 0x3c9, el2_main
el2_main:
    SETREG  hcr_el2, HCR_BASE
    ERET_TO 2, 0x3c5, el1_main
el1_main:
    CASE    0x1200
    svc     #0x12
    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_BASE | HCR_VI)
    ERET_TO 2, 0x3c5, 1f
1:  mrs     x0, isr_el1
    PUT     0x1201, x0
    CASE    0x1202
    msr     daifclr, #2
    nop
    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_BASE | HCR_VF)
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x1203
    msr     daifclr, #1
    nop
    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_BASE | HCR_VSE)
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x1204
    msr     daifclr, #4
    nop
    hvc     #ELEVATE
    mrs     x0, hcr_el2
    PUT     0x1205, x0

    SETREG  hcr_el2, (HCR_BASE | HCR_VSE)
    ERET_TO 2, 0x3c5, 1f
1:  mrs     x0, isr_el1
    PUT     0x1206, x0
    CASE    0x1207
    ERET_TO 1, 0x0, vserr_el0
    .global vserr_el0
vserr_el0:
    nop
    svc     #ELEVATE                // EL1
    hvc     #ELEVATE                // EL2
    SETREG  hcr_el2, (HCR_RW | (1 << 4) | (1 << 3) | HCR_VSE)   // IMO, FMO, VSE; AMO = 0
    ERET_TO 2, 0x2c5, 1f            // EL1h, A = 0
1:  mrs     x0, isr_el1
    PUT     0x1208, x0
    nop
    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_BASE | HCR_VSE)
    CASE    0x1209
    ERET_TO 2, 0x2c5, vserr_eret_target
    .global vserr_eret_target
vserr_eret_target:
    nop
    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_BASE | HCR_VI)
    CASE    0x120a
    ERET_TO 2, 0x0, virq_el0
    .global virq_el0
virq_el0:
    nop
    svc     #ELEVATE                // EL1
    hvc     #ELEVATE                // EL2
    SETREG  vsesr_el2, 0x11
    mrs     x0, vsesr_el2
    PUT     0x120b, x0
    SETREG  hcr_el2, (HCR_BASE | HCR_VSE)
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x120c
    msr     daifclr, #4
    nop
    hvc     #ELEVATE
    SETREG  vsesr_el2, 0x1abcdef
    SETREG  hcr_el2, (HCR_BASE | HCR_VSE)
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x120d
    msr     daifclr, #4
    nop
    hvc     #ELEVATE
    SETREG  vdisr_el2, 0x80000022
    ERET_TO 2, 0x3c5, 1f            // EL1h, AMO = 1
1:  mrs     x0, disr_el1
    PUT     0x120e, x0
    msr     disr_el1, xzr
    hvc     #ELEVATE
    mrs     x0, vdisr_el2
    PUT     0x120f, x0
    SETREG  hcr_el2, HCR_RW         // AMO = 0
    ERET_TO 2, 0x3c5, 1f
1:  SETREG  disr_el1, 0x80000033
    mrs     x0, erridr_el1
    PUT     0x1211, x0
    hvc     #ELEVATE
    mrs     x0, disr_el1
    PUT     0x1210, x0
    msr     disr_el1, xzr
    msr     vsesr_el2, xzr
    SETREG  hcr_el2, HCR_RW
    CASE    0x12ff
    svc     #FINISH
