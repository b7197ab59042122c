"""The PMUv3 (spe_emu.devices.pmu, issue 30): register values and access checks against the
Arm ARM (D23.4 access pseudocode: ESR values of the traps), exact and deterministic counts of
the architectural events, per-Exception-level filtering from the native tracking, SW_INCR
and CHAIN, overflow flags and the interrupt request, and the micro-architectural events from
the model -- in both run loops."""

import pytest
from asmrun import EXIT, mov64, run_asm, xregs

from spe_emu.cpu.exceptions import EC, esr, sysreg_trap_iss
from spe_emu.devices.pmu import (EVENTS, PMU_REGISTERS, PMUVER_V3P5, TYPER, event_ids,
                                 pmevcntr)

MODES = ("fast", "reference")
INST_RETIRED, CPU_CYCLES, SW_INCR, CHAIN, EXC_TAKEN = 0x08, 0x11, 0x00, 0x1E, 0x09
LD_RETIRED, ST_RETIRED, BR_RETIRED, MEM_ACCESS = 0x06, 0x07, 0x21, 0x13
U, P = 1 << 30, 1 << 31          # PMEVTYPER<n>_EL0: exclude EL0, exclude EL1
PMCR_E, PMCR_P, PMCR_C, PMCR_D, PMCR_LP = 1, 2, 4, 8, 1 << 7

# A vector table whose EL1 entries for the current EL (+0x200) and a lower EL (+0x400) keep
# ESR_EL1 in X21 and go on at ``back``.
VECTORS = """
    .balign 2048
vectors:
    b vectors
    .balign 512
    mrs x21, esr_el1
    b back
    .balign 512
    mrs x21, esr_el1
    b back
"""

# ERET from EL1 to EL0 (DAIF masked) at the label ``el0``, which follows.
TO_EL0 = """
    mov x9, #0x3c0
    msr spsr_el1, x9
    adr x9, el0
    msr elr_el1, x9
    eret
el0:
"""


def program(types: dict[int, int], body: str, reads: str = "", pmcr: int = PMCR_E | PMCR_P
            | PMCR_C) -> str:
    """Counter n counts ``types[n]`` (PMEVTYPER<n>_EL0), enabled with the cycle counter;
    ``body`` runs between the PMCR_EL0 write of ``pmcr`` and the one that stops counting; the
    counters then land in X22 (cycles) and X23 + n."""
    text = "    adr x9, vectors\n    msr vbar_el1, x9\n    mov x21, #0\n"
    enable = 1 << 31
    for n, value in types.items():
        text += mov64("x9", value) + f"    msr pmevtyper{n}_el0, x9\n"
        enable |= 1 << n
    text += mov64("x9", enable) + "    msr pmcntenset_el0, x9\n"
    text += mov64("x9", pmcr) + "    msr pmcr_el0, x9\n    isb\n"
    text += body + "back:\n    msr pmcr_el0, xzr\n    isb\n    mrs x22, pmccntr_el0\n"
    for n in types:
        text += f"    mrs x{23 + n}, pmevcntr{n}_el0\n"
    return text + reads + "    mov x0, #0\n" + EXIT + VECTORS


def loop(n: int, label: str = "l0", extra: str = "") -> str:
    return f"""
    movz x4, #{n}
{label}:
{extra}    subs x4, x4, #1
    b.ne {label}
"""


def run(text, tmp_path, mode="fast", **kw):
    m = run_asm(text, tmp_path / mode, mode=mode, **kw)
    assert m.result.exit_status == 0, m.result.guest_errors
    return m


def test_identification_registers(tmp_path):
    """PMCR_EL0 = IMP 0x41, N 6, LC (RES1); ID_AA64DFR0_EL1.PMUVer = FEAT_PMUv3p5; PMCEID0/1
    advertise exactly the events counted (SPE's among them)."""
    m = run("""
    mrs x20, pmcr_el0
    mrs x21, pmceid0_el0
    mrs x22, pmceid1_el0
    mrs x23, id_aa64dfr0_el1
    mrs x24, s3_0_c9_c14_6       // PMMIR_EL1
    mov x0, #0
""" + EXIT, tmp_path)
    pmcr, id0, id1, dfr0, pmmir = xregs(m, 20, 21, 22, 23, 24)
    assert pmcr == 0x4100_3040
    assert dfr0 >> 8 & 0xF == PMUVER_V3P5
    assert (id0, id1) == event_ids(set(EVENTS))
    for event in (SW_INCR, INST_RETIRED, CPU_CYCLES, 0x23, 0x24, MEM_ACCESS, 0x4000):
        word = id0 if event < 32 or 0x4000 <= event < 0x4020 else id1
        bit = event & 31 if event < 0x40 else 32 + (event - 0x4000)
        assert word >> bit & 1, hex(event)
    assert not id0 >> 0x1B & 1          # INST_SPEC: not counted, not advertised
    assert pmmir == 0


@pytest.mark.parametrize("mode", MODES)
def test_instructions_and_cycles_exact(tmp_path, mode):
    """INST_RETIRED and CPU_CYCLES count every instruction between the two PMCR_EL0 writes
    (the enabling write itself not, the disabling one counted: its effect follows it), one
    cycle each; PMCR_EL0.D counts the cycle counter every 64 cycles."""
    m = run(program({0: INST_RETIRED, 1: CPU_CYCLES}, loop(1000)), tmp_path, mode)
    cycles, insns, cyc_evt = xregs(m, 22, 23, 24)
    # ISB, MOVZ, 2 x 1000, then the disabling MSR
    assert insns == cyc_evt == cycles == 1 + 1 + 2000 + 1
    m = run(program({0: INST_RETIRED}, loop(1000), pmcr=PMCR_E | PMCR_P | PMCR_C | PMCR_D),
            tmp_path / "d", mode)
    cycles, insns = xregs(m, 22, 23)
    assert (cycles, insns) == (2003 // 64, 2003)


@pytest.mark.parametrize("mode", MODES)
def test_filtered_by_exception_level(tmp_path, mode):
    """The native per-EL tracking: a loop at EL0 between an ERET and an SVC; PMEVTYPER.U
    leaves out EL0, .P EL1; the two add up to the unfiltered count; EXC_TAKEN counts the SVC
    (in the EL it was taken from)."""
    body = TO_EL0 + loop(500) + "    svc #0\n"
    m = run(program({0: INST_RETIRED | U, 1: INST_RETIRED | P, 2: INST_RETIRED,
                     3: EXC_TAKEN | P}, body), tmp_path, mode)
    el1, el0, both, exc, esr_el1 = xregs(m, 23, 24, 25, 26, 21)
    assert esr_el1 == esr(EC.SVC64, 0)
    assert el0 == 1 + 2 * 500 + 1            # MOVZ, the loop, SVC
    assert el1 + el0 == both
    assert el1 == 1 + 5 + 1 + 1 + 1          # ISB, the ERET set-up, the vector's MRS and B, MSR
    assert exc == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fault", ["    .word 0              // UDF #0\n",
                                   "    ldr x1, [x2]         // no memory there\n"])
def test_an_instruction_that_faults_is_not_retired(tmp_path, mode, fault):
    """An instruction that takes a synchronous exception returning to itself (an UNDEFINED
    instruction, an External abort) is not architecturally executed: INST_RETIRED leaves it
    out, CPU_CYCLES counts its cycle; EXC_TAKEN counts the exception (an SVC, which returns
    after itself, is retired: test_filtered_by_exception_level)."""
    body = mov64("x2", 0x7_0000_0000) + TO_EL0 + loop(100) + fault
    m = run(program({0: INST_RETIRED | P, 1: CPU_CYCLES | P, 2: EXC_TAKEN | P}, body),
            tmp_path, mode)
    insns, cycles, exc, syndrome = xregs(m, 23, 24, 25, 21)
    assert syndrome >> 26 in (EC.UNKNOWN, EC.DABORT_LOWER)
    assert (insns, cycles, exc) == (1 + 2 * 100, 1 + 2 * 100 + 1, 1)


@pytest.mark.parametrize("mode", MODES)
def test_loads_stores_and_branches(tmp_path, mode):
    """LD_RETIRED, ST_RETIRED and BR_RETIRED count instructions (an LDP once), MEM_ACCESS the
    model's accesses."""
    extra = "    ldp x5, x6, [sp]\n    str x5, [sp, #16]\n    ldr x7, [sp, #8]\n"
    m = run(program({0: LD_RETIRED, 1: ST_RETIRED, 2: BR_RETIRED, 3: MEM_ACCESS},
                    loop(300, extra=extra)), tmp_path, mode)
    loads, stores, branches, accesses = xregs(m, 23, 24, 25, 26)
    assert (loads, stores, branches) == (600, 300, 300)
    assert accesses >= 900
    assert m.result.pmu["PMEVCNTR0_EL0"] == {"event": "LD_RETIRED", "value": 600}


def test_counts_are_deterministic_and_the_loops_agree(tmp_path):
    """Same program, same counts: twice in the fast loop and in the reference loop."""
    types = {0: INST_RETIRED, 1: MEM_ACCESS, 2: 0x03, 3: BR_RETIRED, 4: 0x10, 5: 0x05}
    extra = "    ldr x5, [x8], #72\n    eor x6, x6, x5\n"
    text = program(types, "    mov x8, sp\n" + loop(2000, extra=extra))
    seen = [xregs(run(text, tmp_path / str(i), mode), 22, 23, 24, 25, 26, 27, 28)
            for i, mode in enumerate(("fast", "fast", "reference"))]
    assert seen[0] == seen[1] == seen[2]
    assert seen[0][2] == 2000 and seen[0][3] > 0    # MEM_ACCESS (one line each), L1D refills


@pytest.mark.parametrize("mode", MODES)
def test_sw_incr_chain_and_overflow(tmp_path, mode):
    """PMSWINC_EL0: counter 0 (SW_INCR) from 0xFFFF_FFF0 wraps bit 31 after 16 increments
    (PMCR_EL0.LP = 0: the overflow flag, bits 63:32 still count: FEAT_PMUv3p5) and its CHAIN
    neighbour counts the overflow; with LP = 1 the flag waits for bit 63."""
    body = mov64("x9", 0xFFFF_FFF0) + "    msr pmevcntr0_el0, x9\n" + loop(
        100, extra="    mov x9, #1\n    msr pmswinc_el0, x9\n")
    reads = "    mrs x20, pmovsclr_el0\n"
    m = run(program({0: SW_INCR, 1: CHAIN}, body, reads), tmp_path, mode)
    c0, c1, ovs = xregs(m, 23, 24, 20)
    assert (c0, c1, ovs) == (0xFFFF_FFF0 + 100, 1, 0b1)
    m = run(program({0: SW_INCR, 1: CHAIN}, body, reads,
                    pmcr=PMCR_E | PMCR_P | PMCR_C | PMCR_LP), tmp_path / "lp", mode)
    assert xregs(m, 23, 24, 20) == [0xFFFF_FFF0 + 100, 0, 0]


@pytest.mark.parametrize("mode", MODES)
def test_overflow_requests_the_interrupt_at_the_instruction(tmp_path, mode):
    """INST_RETIRED from 2^32 - 100 with PMINTENSET_EL1 set: the interrupt request rises
    where the counter wraps, while the loop runs (IRQs masked: it stays pending); PMOVSSET_EL0
    shows the flag; clearing it drops the request."""
    body = (mov64("x9", 0xFFFF_FF9C) + "    msr pmevcntr0_el0, x9\n    mov x9, #1\n"
            "    msr pmintenset_el1, x9\n" + loop(200))
    reads = "    mrs x20, pmovsset_el0\n"
    m = run(program({0: INST_RETIRED}, body, reads), tmp_path, mode)
    (ovs,) = xregs(m, 20)
    assert ovs == 1
    assert m.pmu.irqs["pmuirq"].level is False   # (PMCR_EL0.E cleared at the end)
    assert m.pmu.ovs == 1


def test_the_request_follows_the_flag_and_enable(tmp_path):
    """CheckForPMUOverflow(): the request is high while a flag with its interrupt enabled is
    set and PMCR_EL0.E is 1."""
    text = """
    mov x9, #1
    msr pmintenset_el1, x9
    msr pmovsset_el0, x9
    mov x9, #1
    msr pmcr_el0, x9
    mov x0, #0
""" + EXIT
    m = run(text, tmp_path)
    assert m.pmu.irqs["pmuirq"].level is True


EL0_READ = TO_EL0 + """
    mrs x5, pmccntr_el0
    nop
"""


@pytest.mark.parametrize("pmuserenr, trapped", ((0, True), (1, False), (4, False), (8, True)))
def test_el0_access_follows_pmuserenr(tmp_path, pmuserenr, trapped):
    """PMCCNTR_EL0 read at EL0: trapped to EL1 (EC 0x18, the MRS's ISS) unless
    PMUSERENR_EL0.EN or .CR; ER does not open the cycle counter."""
    text = (f"    mov x9, #{pmuserenr}\n    msr pmuserenr_el0, x9\n" + EL0_READ
            + "    svc #0\n")
    m = run(program({}, text), tmp_path / str(pmuserenr))
    (got,) = xregs(m, 21)
    want = (esr(EC.SYSREG, sysreg_trap_iss(3, 3, 9, 13, 0, 5, True)) if trapped
            else esr(EC.SVC64, 0))
    assert got == want


def test_hpmn_hides_counters_from_el1(tmp_path):
    """MDCR_EL2.HPMN = 2: at EL1, PMCR_EL0.N reads 2 and PMEVCNTR2_EL0 is UNDEFINED (EC 0);
    MDCR_EL2.TPM traps PMCR_EL0 to EL2; at EL2 all six are there."""
    from asmrun import ERET_TO_EL1
    text = """
    adr x9, vectors
    msr vbar_el1, x9
    msr vbar_el2, x9
    mrs x20, pmcr_el0
    mov x9, #2
    msr mdcr_el2, x9
    mov x21, #0
""" + ERET_TO_EL1 + """
    mrs x22, pmcr_el0
    mrs x23, pmevcntr2_el0
back:
    mov x0, #0
""" + EXIT + VECTORS
    m = run(text, tmp_path, boot_el=2)
    at_el2, esr_el1, at_el1 = xregs(m, 20, 21, 22)
    assert PMU_REGISTERS["PMCR_EL0"].get(at_el2, "N") == 6
    assert PMU_REGISTERS["PMCR_EL0"].get(at_el1, "N") == 2
    assert esr_el1 == esr(EC.UNKNOWN, 0)


def test_event_ids_layout():
    """PMCEID0_EL0/PMCEID1_EL0 bit layout (D23.4): event n < 32 in PMCEID0[n], 32..63 in
    PMCEID1[n - 32], 0x4000 + k in PMCEID0[32 + k] / PMCEID1[32 + k - 32]."""
    assert event_ids({0x00, 0x11, 0x21, 0x4000, 0x4021}) == (
        1 | 1 << 0x11 | 1 << 32, 1 << 1 | 1 << 33)
    assert pmevcntr(0) == (3, 3, 14, 8, 0) and pmevcntr(30) == (3, 3, 14, 11, 6)
    assert TYPER.get(TYPER.make(evtCount=0x4003), "evtCount") == 0x4003
