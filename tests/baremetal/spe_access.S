// SPE system-register access checks and traps (SPE supplement DDI 0586A §3.2.3
// CheckStatisticalProfilingAccess(), §3.4.6 CheckProfilingBufferAccess(), §4.3 register
// descriptions). spe_emu only: on QEMU every SPE register is UNDEFINED. Boots at EL3.
// Also HVC at EL3 (taken to EL3, Arm ARM AArch64.CallHypervisor()), which QEMU 7.2 takes to EL2.
// Cases (tags; expected values in tests/test_exception_routing.py):
//   0xe01        HVC #0xe1 at EL3 -> EL3, EC 0x16, vector +0x200
//   MDCR_EL3.NSPB = 0b11, MDCR_EL2.E2PB = 0b11, TPMS = 0 (buffer owned by Non-secure EL1):
//   0xe02-0xe03  PMBIDR_EL1 read at EL2 / EL1: P = 0
//   0xe04        PMSIDR_EL1 read at EL1
//   0xe05        PMSLATFR_EL1 written with all ones at EL1 reads 0xFFF (RES0 bits)
//   0xe06        MSR PMSIDR_EL1 (read-only) at EL1: UNDEFINED
//   0xe07-0xe09  MRS/MSR PMSCR_EL2 and MRS PMSCR_EL12 at EL1: UNDEFINED
//   0xe0a        PSB CSYNC at EL1: no exception (value record only)
//   MDCR_EL2.TPMS = 1:
//   0xe11        EL1 MSR PMSCR_EL1, X3 -> EL2, EC 0x18
//   0xe12        EL1 MRS X7, PMSIDR_EL1 -> EL2, EC 0x18
//   0xe13        EL1 PMBPTR_EL1 write/read round trip (not trapped by TPMS)
//   MDCR_EL2.E2PB = 0b00 (buffer owned by EL2):
//   0xe14        PMBIDR_EL1 read at EL2: P = 0
//   0xe21        EL1 MRS X2, PMBSR_EL1 -> EL2, EC 0x18
//   0xe22        EL1 MSR PMBLIMITR_EL1, X4 -> EL2, EC 0x18
//   0xe23        EL1 PMBIDR_EL1 read (never trapped): P = 1
//   0xe24        EL1 PMSCR_EL1 written with all ones reads 0x7B (not trapped: TPMS = 0)
//   MDCR_EL2.E2PB = 0b10:
//   0xe25        EL1 MRS X6, PMBPTR_EL1 -> EL2 (E2PB<0> == 0)
//   0xe26        EL1 PMBIDR_EL1 read: P = 0 (owner is EL1 again)
//   MDCR_EL3.NSPB = 0b01 (buffer owned by Secure EL1), E2PB = 0b11:
//   0xe31-0xe32  EL1 MSR PMSCR_EL1, X3 / MRS X2, PMBSR_EL1 -> EL3
//   0xe33        EL1 PMBIDR_EL1 read: P = 1
//   0xe34-0xe35  EL2 MSR PMSCR_EL1, X3 / MRS X1, PMSCR_EL2 -> EL3
//   0xe36        EL2 PMBIDR_EL1 read: P = 1
//   0xe37        EL3 PMSCR_EL2 written with all ones reads 0x7B
//   EL0, with MDCR_EL2.TPMS = 1 (EL0 accesses are UNDEFINED before any trap):
//   0xe41-0xe42  MRS X0, PMSCR_EL1 / MRS X0, PMBIDR_EL1 -> EL1, EC 0x00
//   0xe43        PSB CSYNC at EL0 then SVC #0xe4: the SVC is the next exception
    .include "macros.inc"
    .text
    .global main
main:
    SETREG  mdcr_el3, 0x3000                // NSPB = 0b11
    SETREG  mdcr_el2, 0x3000                // E2PB = 0b11, TPMS = 0
    CASE    0xe01
    hvc     #0xe1
    ERET_TO 3, 0x3c9, el2_main
el2_main:
    mrs     x0, pmbidr_el1
    PUT     0xe02, x0
    ERET_TO 2, 0x3c5, el1_main
el1_main:
    mrs     x0, pmbidr_el1
    PUT     0xe03, x0
    mrs     x0, pmsidr_el1
    PUT     0xe04, x0
    mov     x0, #-1
    msr     pmslatfr_el1, x0
    mrs     x1, pmslatfr_el1
    PUT     0xe05, x1
    msr     pmslatfr_el1, xzr
    CASE    0xe06
    msr     s3_0_c9_c9_7, x0        // PMSIDR_EL1
    CASE    0xe07
    mrs     x0, s3_4_c9_c9_0        // PMSCR_EL2
    CASE    0xe08
    msr     s3_4_c9_c9_0, x0
    CASE    0xe09
    mrs     x0, s3_5_c9_c9_0        // PMSCR_EL12
    psb     csync
    PUT     0xe0a, xzr

    hvc     #ELEVATE
    SETREG  mdcr_el2, 0x7000                // TPMS, E2PB = 0b11
    ERET_TO 2, 0x3c5, 1f
1:  mov     x3, #0
    CASE    0xe11
    msr     pmscr_el1, x3
    CASE    0xe12
    mrs     x7, pmsidr_el1
    ldr     x0, =0x44000000
    msr     pmbptr_el1, x0
    mrs     x5, pmbptr_el1
    PUT     0xe13, x5

    hvc     #ELEVATE
    SETREG  mdcr_el2, 0x0000                // E2PB = 0b00, TPMS = 0
    mrs     x0, pmbidr_el1
    PUT     0xe14, x0
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0xe21
    mrs     x2, pmbsr_el1
    mov     x4, #0
    CASE    0xe22
    msr     pmblimitr_el1, x4
    mrs     x0, pmbidr_el1
    PUT     0xe23, x0
    mov     x0, #-1
    msr     pmscr_el1, x0
    mrs     x1, pmscr_el1
    PUT     0xe24, x1
    msr     pmscr_el1, xzr

    hvc     #ELEVATE
    SETREG  mdcr_el2, 0x2000                // E2PB = 0b10
    ERET_TO 2, 0x3c5, 1f
1:  CASE    0xe25
    mrs     x6, pmbptr_el1
    mrs     x0, pmbidr_el1
    PUT     0xe26, x0

    smc     #ELEVATE
    SETREG  mdcr_el2, 0x3000
    SETREG  mdcr_el3, 0x1000                // NSPB = 0b01
    ERET_TO 3, 0x3c5, 1f
1:  mov     x3, #0
    CASE    0xe31
    msr     pmscr_el1, x3
    CASE    0xe32
    mrs     x2, pmbsr_el1
    mrs     x0, pmbidr_el1
    PUT     0xe33, x0
    hvc     #ELEVATE
    CASE    0xe34
    msr     pmscr_el1, x3
    CASE    0xe35
    mrs     x1, pmscr_el2
    mrs     x0, pmbidr_el1
    PUT     0xe36, x0
    smc     #ELEVATE
    mov     x0, #-1
    msr     pmscr_el2, x0
    mrs     x1, pmscr_el2
    PUT     0xe37, x1
    msr     pmscr_el2, xzr

    SETREG  mdcr_el3, 0x3000
    SETREG  mdcr_el2, 0x7000                // TPMS, E2PB = 0b11
    ERET_TO 3, 0x3c5, 1f
1:  ERET_TO 1, 0x0, el0_main
el0_main:
    CASE    0xe41
    mrs     x0, pmscr_el1
    CASE    0xe42
    mrs     x0, pmbidr_el1
    psb     csync
    CASE    0xe43
    svc     #0xe4
    CASE    0xeff
    svc     #FINISH
