"""Fast path == reference mode at the stop points a review found fragile: an exception in the
middle of a translated block, a state change on the instruction just before a sample point,
a write fault's PMBPTR_EL1, and PMBIDR_EL1 / PMSEVFR_EL1 register details (§3.5.3, §4.3.1,
§4.3.8)."""

import pytest
from asmrun import (EL0_SKIP_HANDLER, EXIT, SPE_DRAIN, drained, irq_vectors, mov64, run_asm,
                    spe_prologue, xregs)

from spe_emu.arch.context import HCR_EL2
from spe_emu.cpu.exceptions import EC, ESR, PSTATE
from spe_emu.spe.packets import iter_records

BUF = 0x4200_0000
MODES = ("fast", "reference")


def start(pmscr: int) -> str:
    return spe_prologue(pmscr, BUF)


def records(m):
    return list(iter_records(bytes(m.uc.mem_read(BUF, xregs(m, 21)[0] - BUF))))


def outcomes(text: str, tmp_path, size: int, rules: tuple[str, ...] = ()) -> dict:
    """Per run loop: (samples, population, PMBPTR_EL1/PMSICR_EL1/PMBSR_EL1 at the end, the
    first ``size`` bytes of the buffer) of the program ``text`` ending in SPE_DRAIN, which
    breaks exactly the driver ``rules`` (spe.driver_rules)."""
    got = {}
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode)
        assert [b["rule"] for b in m.result.driver_rules] == list(rules)
        assert len(m.result.guest_errors) == len(rules)
        got[mode] = drained(m, BUF, size)
    return got


def test_trap_in_the_middle_of_a_block_counts_only_retired_instructions(tmp_path):
    # EL0 loop whose first instruction (CNTVCT_EL0 read) traps at run time (CNTKCTL_EL1 = 0):
    # QEMU raises the trap in the middle of a translated block. E0SPE | E1SPE | TS.
    text = start(0b100011) + """
    adr x1, el0code
    msr elr_el1, x1
    msr spsr_el1, xzr
    movz x4, #300
    eret
el0code:
    mrs x0, cntvct_el0
    nop
    nop
    nop
    nop
    subs x4, x4, #1
    b.ne el0code
""" + EL0_SKIP_HANDLER + """
    mrs x25, cntvct_el0
""" + SPE_DRAIN
    got = {}
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode)
        got[mode] = (m.result.instructions, m.result.population, xregs(m, 21, 22, 25),
                     [r.timestamp for r in records(m)])
    assert got["fast"] == got["reference"]
    # 300 x (7 loop + 8 handler instructions) plus set-up: no phantom instructions counted
    # for the rest of the block after each trap (that once gave 300 x 4 extra).
    assert 300 * 15 <= got["fast"][0] < 300 * 15 + 100


@pytest.mark.parametrize("change", ["svc #0", "msr pmscr_el1, xzr", "msr pmblimitr_el1, xzr",
                                    "nop"])
def test_state_change_just_before_the_sample_point(tmp_path, change):
    # Member 256 would be sampled; the instruction before it (member 255) disables profiling
    # (SVC to EL1 with E0SPE only, or a write that disables profiling). Nothing is sampled.
    # The control ("nop" changes nothing) shows member 256 is reached and sampled.
    pmscr = 0b100001 if change.startswith("svc") else 0b100010
    el0 = change.startswith("svc")
    body = "    nop\n" * 254 + f"    {change}\n" + "    nop\n    nop\n"
    if el0:
        text = start(pmscr) + """
    adr x1, el0code
    msr elr_el1, x1
    msr spsr_el1, xzr
    eret
    .balign 64
el0code:
""" + "    nop\n" * 255 + "    svc #0\n    .balign 2048\nvectors:\n    .skip 0x400\n" + SPE_DRAIN
    else:
        text = start(pmscr) + body + SPE_DRAIN + "\n    .balign 2048\nvectors:\n"
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode)
        assert m.result.samples == (1 if change == "nop" else 0), mode
        assert xregs(m, 23)[0] == 0, mode        # PMBSR_EL1: no management event
        assert not m.result.guest_errors


def test_write_fault_reports_the_faulting_address(tmp_path):
    # Stage 1 on, no valid descriptor anywhere: a Profiling Buffer write at PMBPTR_EL1 =
    # 0x4200_1080 faults, and the fault carries that address (§3.5.3: "PMBPTR_EL1 is set to
    # the address that generated the fault"), not its page's base.
    from spe_emu.cpu.machine import Machine, MachineConfig
    from spe_emu.arch.faults import TranslationFault
    m = Machine(MachineConfig(outdir=tmp_path))
    m.reset(0x4000_0000)
    m.uc.cpr_write(3, 0, 2, 0, 2, 25)            # TCR_EL1.T0SZ = 25, TG0 = 4 KiB
    m.uc.cpr_write(3, 0, 2, 0, 0, 0x4010_0000)   # TTBR0_EL1 -> zeroed table
    m.uc.cpr_write(3, 0, 1, 0, 0, m.uc.cpr_read(3, 0, 1, 0, 0) | 1)   # SCTLR_EL1.M
    with pytest.raises(TranslationFault) as fault:
        m._spu_write(BUF + 0x1080, b"\x01")
    assert fault.value.va == BUF + 0x1080
    assert fault.value.fsc == 0b000101            # translation fault, level 1
    m.spu.regs["PMBPTR_EL1"] = BUF + 0x1080
    m.spu.regs["PMBLIMITR_EL1"] = (BUF + 0x10000) | 1
    written, event = m.spu.buffer.write_record(b"\x01" * 8)
    assert written == 0 and event.kind == "fault"
    assert m.spu.regs["PMBPTR_EL1"] == BUF + 0x1080
    assert m.spu.regs["PMBSR_EL1"] == (0b100100 << 26) | (1 << 17) | 0b000101


def test_pmbidr_at_el3_and_pmsevfr_e1_res1(tmp_path):
    text = """
    movz x0, #0x3000
    msr mdcr_el3, x0           // NSPB = 0b11: buffer owned by Non-secure EL1
    mrs x20, pmbidr_el1
    msr pmsevfr_el1, xzr
    mrs x21, pmsevfr_el1
    mov x0, #0
""" + EXIT
    m = run_asm(text, tmp_path, boot_el=3)
    assert xregs(m, 20, 21) == [0, 0b10]     # P reads 0 at EL3 (§4.3.1); E[1] is RES1 (§4.3.8)


@pytest.mark.parametrize("change, value", [
    ("msr pmsirr_el1, x9", 0x200),             # interval 512 from here on
    ("msr pmsicr_el1, x9", 100),               # COUNT = 100
    ("msr pmsfcr_el1, x9", 0x10002),           # FT, B: branches only
    ("msr pmsevfr_el1, x9", 0x2),              # (E[1] only: the event filter is off)
    ("msr pmbptr_el1, x9", BUF + 0x800),       # records go on further into the buffer
])
def test_spe_register_write_while_profiling(tmp_path, change, value):
    # Profiling at EL1 (interval 256), then, after one sample, a write to an SPE register;
    # the run goes on in a loop of loads and branches under the new value exactly as in the
    # reference mode (the fast run loop re-plans only after the writes that change the
    # interval plan or the capture budget: docs/model.md, "Run loops").
    text = start(0b10) + f"""
    movz x9, #{value >> 16:#x}, lsl #16
    movk x9, #{value & 0xFFFF:#x}
    movz x6, #{BUF >> 16:#x}, lsl #16
""" + "    nop\n" * 300 + f"""
    {change}
    mov x4, #600
loop:
    ldr x5, [x6]
    add x7, x7, x5
    subs x4, x4, #1
    b.ne loop
""" + SPE_DRAIN + "\n    .balign 2048\nvectors:\n"
    # (a write to PMBPTR_EL1 while profiling is enabled breaks §3.4.1: reported, and the
    # records go on at the new pointer -- the model's choice)
    rules = ("ptr-write-enabled",) if "pmbptr" in change else ()
    got = outcomes(text, tmp_path, 0x1000, rules)
    assert got["fast"] == got["reference"]
    assert got["fast"][0] >= 5


# GICv3 set-up for PMBIRQ (INTID 21) as a Non-secure Group 1 interrupt, with ICC_PMR_EL1 = 0
# (every priority masked) and PSTATE.I clear; PMBSR_EL1.S = 1 then drives the PMBIRQ line high.
# The IRQ vector (current EL, SP_ELx) leaves ELR_EL1 in x20 and the acknowledged INTID in x21.
def gic_group1(intids: int) -> str:
    """GICv3 set-up making the SGIs/PPIs of the ``intids`` bit mask Non-secure Group 1 and
    enabled, with the CPU interface's system registers and Group 1 enabled."""
    return f"""
    movz x1, #0x0800, lsl #16          // GICD_CTLR = ARE_NS | EnableGrp1NS
    mov w0, #0x12
    str w0, [x1]
    movz x1, #0x080A, lsl #16          // GICR_WAKER.ProcessorSleep = 0
    str wzr, [x1, #0x14]
    movz x1, #0x080B, lsl #16          // SGI_base: IGROUPR0, ISENABLER0
    mov w0, #{intids:#x}
    str w0, [x1, #0x80]
    str w0, [x1, #0x100]
    mov x0, #1
    msr icc_sre_el1, x0
    msr icc_igrpen1_el1, x0
"""


GIC_PENDING_MASKED = """
    adr x0, vectors
    msr vbar_el1, x0""" + gic_group1(1 << 21) + """    msr icc_pmr_el1, xzr
    movz x0, #0x2, lsl #16             // PMBSR_EL1.S
    msr pmbsr_el1, x0
    msr daifclr, #2
    mov x0, #0xff
"""
GIC_IRQ_VECTOR = irq_vectors()


@pytest.mark.parametrize("masked", [False, True])
def test_irq_unmasked_by_a_gic_register_write_is_taken_after_it(tmp_path, masked):
    # A write to ICC_PMR_EL1 that lets the pending PMBIRQ through: the IRQ is taken before
    # the next instruction (ELR_EL1 = the instruction after the MSR) in both run loops. A
    # write that keeps the line low (PMR 0 -> 0) takes nothing: the program exits with 1.
    value = "xzr" if masked else "x0"
    text = GIC_PENDING_MASKED + "    adr x19, after\n" + "    nop\n" * 20 + f"""
    msr icc_pmr_el1, {value}
after:
""" + "    nop\n" * 20 + GIC_IRQ_VECTOR
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode)
        assert m.result.exit_status == int(masked), mode
        if not masked:
            assert xregs(m, 20, 21) == [xregs(m, 19)[0], 21], mode
            assert m.irqs_taken == 1, mode


def test_irq_made_deliverable_by_a_gic_mmio_write(tmp_path):
    # PMR lets it through but the redistributor disables INTID 21 until an ISENABLER0 write.
    # The reference loop takes the IRQ after the store; the fast loop at the next translated
    # block boundary (docs/model.md, "Known limitations of the fast run loop").
    text = GIC_PENDING_MASKED + """
    adr x19, after_store
    adr x18, next_block
    movz x1, #0x080B, lsl #16
    mov w2, #0x200000
    str w2, [x1, #0x180]               // ICENABLER0: INTID 21 disabled
    msr icc_pmr_el1, x0
    str w2, [x1, #0x100]               // ISENABLER0: INTID 21 enabled
after_store:
    nop
    b next_block
next_block:
""" + "    nop\n" * 4 + GIC_IRQ_VECTOR
    elr = {}
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode)
        assert m.result.exit_status == 0, mode
        assert xregs(m, 21) == [21], mode
        elr[mode] = xregs(m, 20)[0]
        labels = xregs(m, 19, 18)
    assert [elr["reference"], elr["fast"]] == labels


@pytest.mark.parametrize("last", ["pmscr_el1", "pmblimitr_el1", "pmbsr_el1"])
def test_profiling_enabled_at_the_current_el_by_the_last_of_its_writes(tmp_path, last):
    # At EL1, profiling becomes enabled by whichever of PMSCR_EL1.E1SPE, PMBLIMITR_EL1.E and
    # PMBSR_EL1.S = 0 is written last; the writes before it leave profiling disabled (the
    # fast loop does not stop for them) and the last one starts the population at once.
    writes = {"pmscr_el1": "    mov x3, #0b10\n    msr pmscr_el1, x3\n",
              "pmblimitr_el1": f"""    movz x1, #{(BUF + 0x10000) >> 16:#x}, lsl #16
    orr x1, x1, #1
    msr pmblimitr_el1, x1
""",
              "pmbsr_el1": "    msr pmbsr_el1, xzr\n"}
    text = f"""
    adr x0, vectors
    msr vbar_el1, x0
    movz x0, #{BUF >> 16:#x}, lsl #16
    msr pmbptr_el1, x0
    movz x2, #0x100
    msr pmsirr_el1, x2
    msr pmsicr_el1, xzr
    movz x0, #0x2, lsl #16
    msr pmbsr_el1, x0                  // S = 1: profiling disabled until cleared
""" + "".join(w for name, w in writes.items() if name != last) + "    nop\n" * 40 \
        + writes[last] + "    nop\n" * 600 + SPE_DRAIN + "\n    .balign 2048\nvectors:\n"
    got = outcomes(text, tmp_path, 0x400)
    assert got["fast"] == got["reference"]
    assert got["fast"][0] == 2                 # members 257 and 514 of the 600+ after it


@pytest.mark.parametrize("buffer", ["disabled", "enabled"])
def test_eret_and_daif_writes_stop_only_when_profiling_may_follow(tmp_path, buffer):
    # 40 round trips EL1 -> EL0 (ERET) -> EL1 (SVC), each reading CNTVCT_EL0 and writing
    # DAIFClr/DAIFSet. With PMBLIMITR_EL1.E == 0 and no IRQ asserted nothing the fast loop
    # plans can change at them, so the native hook never stops; with E == 1 (PMSCR_EL1 = 0)
    # profiling could be enabled at the Exception level an ERET returns to, and it stops
    # after each. Either way virtual time is the reference mode's.
    enable = "" if buffer == "disabled" else f"""
    movz x1, #{(BUF + 0x10000) >> 16:#x}, lsl #16
    orr x1, x1, #1
    msr pmblimitr_el1, x1
"""
    text = """
    adr x0, vectors
    msr vbar_el1, x0
""" + enable + """
    movz x4, #40
    mov x5, #0
    adr x1, el0code
    msr elr_el1, x1
    msr spsr_el1, xzr
    eret
el0code:
    nop
    nop
    svc #0
    .balign 2048
vectors:
    .skip 0x400
    mrs x6, cntvct_el0
    add x5, x5, x6
    msr daifclr, #2
    msr daifset, #2
    subs x4, x4, #1
    b.eq finish
    adr x1, el0code
    msr elr_el1, x1
    eret
finish:
    mov x0, #0
""" + EXIT
    got = {}
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode)
        assert m.result.exit_status == 0, mode
        got[mode] = (m.result.instructions, xregs(m, 5))
        if mode == "fast":
            stops = m.counter.stops
    assert got["fast"] == got["reference"]
    assert stops == 0 if buffer == "disabled" else stops >= 40


# 300 rounds of unmasking and masking IRQs (PSTATE.I)
DAIF_ROUNDS = """
    movz x4, #300
round:
    msr daifclr, #2
    nop
    msr daifset, #2
    subs x4, x4, #1
    b.ne round
"""


def test_unmasking_watch_rests_while_profiling_with_nothing_asserted(tmp_path):
    # Profiling enabled at EL1 (E1SPE | TS), 300 rounds of MSR DAIFClr / DAIFSet with no
    # interrupt asserted: an unmasking lets nothing in, so the native block hook's unmasking
    # watch rests (SpeControl.unmask_idle) and sees none of them; the records and the
    # instruction count are the reference mode's.
    text = start(0b100010) + DAIF_ROUNDS + SPE_DRAIN + "\n    .balign 2048\nvectors:\n"
    got = {}
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode)
        got[mode] = (m.result.instructions, m.result.population, xregs(m, 21, 22),
                     records(m))
        if mode == "fast":
            fast = m
    assert got["fast"] == got["reference"]
    assert len(got["fast"][3]) >= 3
    assert fast.counter.unmasks == 0 and fast.control.unmask_idle == 1


def test_unmasking_watch_wakes_for_an_interrupt_asserted_while_profiling(tmp_path):
    # As above, then an SGI to itself (INTID 1, enabled, Group 1) while PSTATE.I is set: the
    # watch wakes, and the IRQ is taken right after the MSR DAIFClr that unmasks it (ELR_EL1 =
    # the next instruction) in both run loops, with profiling enabled throughout.
    text = start(0b100010) + gic_group1(1 << 1) + """    mov x0, #0xff
    msr icc_pmr_el1, x0
    msr daifset, #2
""" + DAIF_ROUNDS + """
    movz x0, #0x100, lsl #16           // ICC_SGI1R_EL1: INTID 1, TargetList {0}
    orr x0, x0, #1
    msr icc_sgi1r_el1, x0
    isb
    adr x19, after
""" + "    nop\n" * 20 + """
    msr daifclr, #2
after:
""" + "    nop\n" * 20 + irq_vectors()
    got = {}
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode)
        assert m.result.exit_status == 0, mode
        assert xregs(m, 20, 21) == [xregs(m, 19)[0], 1], mode
        got[mode] = (m.result.instructions, m.result.samples)
    assert got["fast"] == got["reference"]
    assert got["fast"][1] >= 3


# x0 = HCR_EL2.{RW, AMO}, x1 = the same with VSE (a virtual SError pending)
HCR_RW_AMO = mov64("x0", HCR_EL2.make(RW=1, AMO=1)) + mov64("x1", HCR_EL2.make(RW=1, AMO=1,
                                                                             VSE=1))


def pmb_enabled() -> str:
    """PMBLIMITR_EL1.E = 1: a Profiling Buffer that may be enabled (profiling itself follows
    PMSCR_EL1)."""
    return f"""
    movz x1, #{(BUF + 0x100000) >> 16:#x}, lsl #16
    orr x1, x1, #1
    msr pmblimitr_el1, x1
    movz x0, #{BUF >> 16:#x}, lsl #16
    msr pmbptr_el1, x0
"""


@pytest.mark.parametrize("buffer", [False, True])
@pytest.mark.parametrize("at_el1", ["eret", "daifclr", "iar"])
def test_virtual_serror_set_at_el2_is_taken_at_el1(tmp_path, buffer, at_el1):
    # From a review of the resting unmasking watch: EL2 sets HCR_EL2.VSE by MSR (a hook that
    # runs before QEMU writes the register, so nothing may be judged from the old value),
    # then ERETs to EL1h. The virtual SError is taken at EL1 (Arm ARM D1.3.6) as soon as
    # PSTATE.A is clear there: at once ("eret": SPSR_EL2.A clear; "iar": the same, with an
    # ICC_IAR1_EL1 read the native CPU-interface path answers after it), or at the first MSR
    # DAIFClr #4 ("daifclr", profiling EL1 meanwhile). With a Profiling Buffer that may be
    # enabled or not, in both run loops.
    spsr = PSTATE.make(EL=1, SP=1, D=1, A=int(at_el1 == "daifclr"), I=1, F=1)   # EL1h
    body = {"eret": "    nop\n",
            "iar": "    nop\n" * 10 + "    mrs x22, icc_iar1_el1\n" + "    nop\n" * 10,
            "daifclr": "    movz x4, #200\nround:\n    msr daifclr, #4\n    nop\n"
                       "    msr daifset, #4\n    subs x4, x4, #1\n    b.ne round\n"}[at_el1]
    text = (start(0b100010) if at_el1 == "daifclr" else "    adr x0, vectors\n"
            "    msr vbar_el1, x0\n") + (pmb_enabled() if buffer else "") \
        + (gic_group1(1 << 1) if at_el1 == "iar" else "") + HCR_RW_AMO + """
    msr hcr_el2, x0
    isb
    msr hcr_el2, x1
    isb
    movz x7, #0x4100, lsl #16
    msr sp_el1, x7
    adr x5, el1
    msr elr_el2, x5
""" + mov64("x6", spsr) + """    msr spsr_el2, x6
    adr x19, el1
    eret
el1:
""" + body + "    mov x0, #1\n" + EXIT + """
    .balign 2048
vectors:
    .skip 0x380
    mrs x20, elr_el1
    mrs x21, esr_el1
    mov x0, #0
""" + EXIT
    got = {}
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode, boot_el=2)
        assert m.result.exit_status == 0, (mode, "virtual SError not taken")
        got[mode] = (m.result.instructions, xregs(m, 20, 21))
    assert got["fast"] == got["reference"]
    elr, esr = got["fast"][1]
    assert ESR.get(esr, "EC") == EC.SERROR       # (Arm ARM D19.2 ESR_ELx)
    if at_el1 == "eret":
        assert elr == xregs(m, 19)[0]            # at el1, before its first instruction


@pytest.mark.parametrize("buffer", [False, True])
def test_wfi_waits_after_a_virtual_serror_is_cleared(tmp_path, buffer):
    # HCR_EL2.VSE set, then cleared, at EL2 with the virtual timer due in 5000 ticks: the
    # WFI after it waits for the timer (nothing else is pending), in both run loops.
    text = (pmb_enabled() if buffer else "") + gic_group1(1 << 27) + """
    mov x0, #0xff
    msr icc_pmr_el1, x0
    msr daifset, #2
    movz x2, #5000
    msr cntv_tval_el0, x2
    mov x2, #1
    msr cntv_ctl_el0, x2
    isb
""" + HCR_RW_AMO + """
    msr hcr_el2, x1                    // VSE set
    isb
    msr hcr_el2, x0                    // VSE clear
    isb
    mrs x26, cntvct_el0
    wfi
    mrs x27, cntvct_el0
    sub x20, x27, x26
    mov x0, #0
""" + EXIT
    waited = {}
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode, boot_el=2)
        assert m.result.exit_status == 0, mode
        waited[mode] = xregs(m, 20)[0]
    assert waited["fast"] == waited["reference"] >= 4900
