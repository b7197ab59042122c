// Traps of HCR_EL2, MDCR_EL2, CPTR_EL2, SCR_EL3, MDCR_EL3 and SCTLR_EL1 controls (issue 13):
// WFI/WFE (EC 0x01, ISS CV = 1, COND = 0b1110, TI), debug and PMU register accesses and
// system instructions (EC 0x18), pointer authentication instructions (EC 0x09). Boots at
// EL3. Each EL2 case sets one control, ERETs to EL1 (or EL0), runs the instruction, and
// climbs back with HVC #ELEVATE (SVC #ELEVATE from EL0). Cases (tags; expected values in
// tests/test_exception_routing.py):
//   0x1401  WFI at EL1 with HCR_EL2.TWI = 1: to EL2, TI = 0b00
//   0x1402  WFE at EL1 with HCR_EL2.TWE = 1 right after an ERET: the exception return set the
//           Event Register, so the WFE completes without entering a low-power state and is
//           not trapped; the next exception is SVC #0x142
//   0x1403  WFI at EL0 with SCTLR_EL1.nTWI = 0: to EL1
//   0x1404  WFI at EL1 with SCR_EL3.TWI = 1: to EL3
//   0x1405  MRS X3, MDSCR_EL1 at EL1 with MDCR_EL2.TDA = 1: EC 0x18 to EL2
//   0x1406  MRS X4, OSLSR_EL1 at EL1 with MDCR_EL2.TDOSA = 1
//   0x1407  MRS X5, PMCR_EL0 at EL1 with MDCR_EL2.TPM = 1
//   0x1408  MRS X6, MDSCR_EL1 at EL1 with MDCR_EL3.TDA = 1: to EL3
//   0x140e  MRS X7, MDRAR_EL1 at EL1 with MDCR_EL2.TDRA = 1: to EL2
//   0x140f  MRS X8, DBGBCR0_EL1 at EL1 with MDCR_EL2.TDE = 1 (TDA behaves as 1): to EL2
//   0x1409  DC ISW, X7 at EL1 with HCR_EL2.TSW = 1: EC 0x18 (Op0 = 1) to EL2
//   0x140a  TLBI VMALLE1 at EL1 with HCR_EL2.TTLB = 1
//   0x140b  MRS X8, CPACR_EL1 at EL1 with CPTR_EL2.TCPAC = 1
//   0x140c  PACIA X0, X1 at EL1 with HCR_EL2.API = 0 and SCTLR_EL1.EnIA = 1: EC 0x09 to EL2
//           (with EnIA = 0 the instruction leaves X0 unchanged and is not trapped)
//   0x140d  MRS X9, ACTLR_EL1 at EL1 with HCR_EL2.TACR = 1
    .include "macros.inc"
    .equ HCR_API_APK, ((1 << 41) | (1 << 40))
    .equ SCR_VALUE, 0x531
    .text
    .global main
main:
    ERET_TO 3, 0x3c9, el2_main
el2_main:
    mrs     x20, mdcr_el2           // HPMN kept; the trap bits are set and cleared below
    bic     x20, x20, #(0xf << 6)   // TPM, TPMCR, TDE, TDA clear
    bic     x20, x20, #(1 << 10)    // TDOSA
    msr     mdcr_el2, x20
    SETREG  hcr_el2, (HCR_RW | HCR_API_APK | (1 << 13))     // TWI
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x1401
    wfi
    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_RW | HCR_API_APK | (1 << 14))     // TWE
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x1402
    wfe
    svc     #0x142
    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_RW | HCR_API_APK)
    ERET_TO 2, 0x3c5, 1f
1:  ERET_TO 1, 0x0, 2f
2:  CASE    0x1403
    wfi
    svc     #ELEVATE                // EL1
    hvc     #ELEVATE                // EL2
    smc     #ELEVATE                // EL3
    SETREG  scr_el3, (SCR_VALUE | (1 << 12))                // TWI
    ERET_TO 3, 0x3c5, 1f
1:  CASE    0x1404
    wfi
    smc     #ELEVATE
    SETREG  scr_el3, SCR_VALUE
    ERET_TO 3, 0x3c9, 1f
1:  orr     x21, x20, #(1 << 9)     // TDA
    msr     mdcr_el2, x21
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x1405
    mrs     x3, mdscr_el1
    hvc     #ELEVATE
    orr     x21, x20, #(1 << 10)    // TDOSA
    msr     mdcr_el2, x21
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x1406
    mrs     x4, oslsr_el1
    hvc     #ELEVATE
    orr     x21, x20, #(1 << 6)     // TPM
    msr     mdcr_el2, x21
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x1407
    mrs     x5, pmcr_el0
    hvc     #ELEVATE
    orr     x21, x20, #(1 << 11)    // TDRA
    msr     mdcr_el2, x21
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x140e
    mrs     x7, mdrar_el1
    hvc     #ELEVATE
    orr     x21, x20, #(1 << 8)     // TDE (TDA, TDOSA, TDRA behave as 1)
    msr     mdcr_el2, x21
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x140f
    mrs     x8, dbgbcr0_el1
    hvc     #ELEVATE
    msr     mdcr_el2, x20
    smc     #ELEVATE                // EL3
    SETREG  mdcr_el3, (3 << 12) | (1 << 9)   // NSPB = 0b11, TDA
    ERET_TO 3, 0x3c5, 1f
1:  CASE    0x1408
    mrs     x6, mdscr_el1
    smc     #ELEVATE
    SETREG  mdcr_el3, (3 << 12)
    ERET_TO 3, 0x3c9, 1f
1:  SETREG  hcr_el2, (HCR_RW | HCR_API_APK | (1 << 22))     // TSW
    ERET_TO 2, 0x3c5, 1f
1:  mov     x7, #0
    CASE    0x1409
    dc      isw, x7
    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_RW | HCR_API_APK | (1 << 25))     // TTLB
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x140a
    tlbi    vmalle1
    hvc     #ELEVATE
    SETREG  hcr_el2, (HCR_RW | HCR_API_APK)
    SETREG  cptr_el2, (0x33ff | (1 << 31))                  // TCPAC
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x140b
    mrs     x8, cpacr_el1
    hvc     #ELEVATE
    SETREG  cptr_el2, 0x33ff
    SETREG  hcr_el2, HCR_RW                                 // API = APK = 0
    SETREG  sctlr_el1, (0x30d00800 | (1 << 31))             // EnIA
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x140c
    .inst   0xdac10020              // PACIA X0, X1 (FEAT_PAuth; the assembler targets v8.2)
    hvc     #ELEVATE
    SETREG  sctlr_el1, 0x30d00800
    SETREG  hcr_el2, (HCR_RW | HCR_API_APK | (1 << 21))     // TACR
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0x140d
    mrs     x9, actlr_el1
    hvc     #ELEVATE
    SETREG  hcr_el2, HCR_RW
    CASE    0x14ff
    svc     #FINISH
