"""SPE PMU events (SPE supplement §2.6 Table 1, issue 15): SAMPLE_POP, SAMPLE_FEED,
SAMPLE_FILTRATE and SAMPLE_COLLISION counted by the guest through PMEVTYPER<n>_EL0 /
PMEVCNTR<n>_EL0 (the PMUv3, spe_emu.devices.pmu), advertised in PMCEID0_EL0[35:32], equal
to the run's own counts in both run loops and in summary.json."""

import pytest
from asmrun import EXIT, run_asm, spe_prologue, xregs

from spe_emu.spe.config import SpeConfig
from spe_emu.devices.pmu import TYPER, counter_filtered
from spe_emu.spe.pmu_events import SAMPLE_COLLISION, SAMPLE_FEED, SAMPLE_FILTRATE, SAMPLE_POP

BUF = 0x4200_0000
MODES = ("fast", "reference")
EVENTS = (SAMPLE_POP, SAMPLE_FEED, SAMPLE_FILTRATE, SAMPLE_COLLISION)
VECTORS = "\n    .balign 2048\nvectors:\n    b vectors\n"


def pmu_setup(evtyper_bits: int = 0, enable: int = 0xF) -> str:
    """PMEVTYPER<n>_EL0 = EVENTS[n] | evtyper_bits, PMCNTENSET_EL0 = enable, PMCR_EL0.E = 1
    with P = 1 (event counters reset)."""
    text = ""
    for n, event in enumerate(EVENTS):
        value = event | evtyper_bits
        text += f"""
    movz x9, #{value >> 16:#x}, lsl #16
    movk x9, #{value & 0xFFFF:#x}
    msr pmevtyper{n}_el0, x9"""
    return text + f"""
    mov x9, #{enable:#x}
    msr pmcntenset_el0, x9
    mov x9, #3
    msr pmcr_el0, x9
    isb
"""


def loop(n: int) -> str:
    return f"""
    movz x4, #{n}
1:
    ldr x5, [sp]
    subs x4, x4, #1
    b.ne 1b
""".replace("1:", "loop:").replace("1b", "loop")


READ = """
    msr pmscr_el1, xzr
    isb
    psb csync
    dsb nsh
    mrs x24, pmevcntr0_el0
    mrs x25, pmevcntr1_el0
    mrs x26, pmevcntr2_el0
    mrs x27, pmevcntr3_el0
    mrs x28, pmceid0_el0
    mrs x29, id_aa64dfr0_el1
    mrs x23, pmbsr_el1
    mov x0, #0
""" + EXIT


def run(text, tmp_path, mode, spe=None):
    m = run_asm(text, tmp_path / mode, mode=mode, spe=spe)
    assert m.result.exit_status == 0, m.result.guest_errors
    return m


@pytest.mark.parametrize("mode", MODES)
def test_counts_equal_the_run(tmp_path, mode):
    m = run(pmu_setup() + spe_prologue(0b11, BUF) + loop(3000) + READ + VECTORS, tmp_path,
            mode)
    r = m.result
    pop, feed, filtrate, coll, pmceid0, dfr0 = xregs(m, 24, 25, 26, 27, 28, 29)
    assert r.samples > 10
    assert (pop, feed, filtrate, coll) == (r.population, r.samples, r.samples, 0)
    assert r.pmu_events == {"SAMPLE_POP": pop, "SAMPLE_FEED": feed,
                            "SAMPLE_FILTRATE": filtrate, "SAMPLE_COLLISION": 0}
    assert pmceid0 >> 32 & 0xF == 0xF
    assert dfr0 >> 8 & 0xF == 6  # ID_AA64DFR0_EL1.PMUVer: FEAT_PMUv3p5 (16-bit evtCount)
    # the population: the loop (3 x 3000), its MOVZ, the ISB after MSR PMSCR_EL1 and the MSR
    # that disables profiling (§3.1: every architecturally executed instruction while enabled)
    assert pop == 3 * 3000 + 3


@pytest.mark.parametrize("mode", MODES)
def test_filtered_out_of_the_count(tmp_path, mode):
    """PMEVTYPER<n>_EL0.P = 1: events at EL1 are not counted; PMCNTENSET_EL0 without counter
    1: it does not count either."""
    m = run(pmu_setup(evtyper_bits=1 << 31, enable=0xF) + spe_prologue(0b11, BUF) + loop(900)
            + READ + VECTORS, tmp_path, mode)
    assert xregs(m, 24, 25, 26, 27) == [0, 0, 0, 0]
    assert m.result.samples > 0
    m = run(pmu_setup(enable=0b1101) + spe_prologue(0b11, BUF) + loop(900) + READ + VECTORS,
            tmp_path / "b", mode)
    pop, feed, filtrate, _ = xregs(m, 24, 25, 26, 27)
    assert (pop, feed, filtrate) == (m.result.population, 0, m.result.samples)


@pytest.mark.parametrize("mode", MODES)
def test_filtrate_with_a_filter(tmp_path, mode):
    """PMSFCR_EL1.FT with B only: loads are sampled (SAMPLE_FEED) and removed by filtering
    (not SAMPLE_FILTRATE)."""
    text = (pmu_setup() + spe_prologue(0b11, BUF) + """
    movz x9, #1, lsl #16
    movk x9, #2
    msr pmsfcr_el1, x9
    isb
""" + loop(3000) + READ + VECTORS)
    m = run(text, tmp_path, mode)
    r = m.result
    pop, feed, filtrate, coll = xregs(m, 24, 25, 26, 27)
    assert r.filtered_out > 0
    assert (pop, feed, filtrate, coll) == (r.population, r.samples,
                                           r.samples - r.filtered_out, 0)


@pytest.mark.parametrize("mode", MODES)
def test_counter_written_and_read_while_counting(tmp_path, mode):
    """A write to PMEVCNTR0_EL0 sets the base; a read while profiling is enabled returns the
    members before the reading instruction."""
    text = (pmu_setup() + spe_prologue(0b11, BUF) + """
    movz x9, #1000
    msr pmevcntr0_el0, x9
""" + loop(500) + """
    mrs x20, pmevcntr0_el0
""" + READ + VECTORS)
    m = run(text, tmp_path, mode)
    (mid,) = xregs(m, 20)
    # An instruction's own SAMPLE_POP event counts after its PMU register access: after the
    # write of 1000, the MSR itself, MOVZ x4 and the loop; the MRS's own is not in what it reads
    assert mid == 1000 + 1 + 1 + 3 * 500
    # then the MRS x20 and the MSR PMSCR_EL1 that disables profiling
    assert xregs(m, 24)[0] == mid + 2


@pytest.mark.parametrize("mode", MODES)
def test_collisions(tmp_path, mode):
    """§2.2.4: one sampled operation in flight for 300 operations, samples every 257: every
    second sample collides -- no record, PMBSR_EL1.COLL = 1, SAMPLE_COLLISION and not
    SAMPLE_FEED."""
    spe = SpeConfig(max_in_flight=1, in_flight_ops=300)
    m = run(pmu_setup() + spe_prologue(0b11, BUF) + loop(3000) + READ + VECTORS, tmp_path,
            mode, spe)
    r = m.result
    pop, feed, filtrate, coll, pmbsr = xregs(m, 24, 25, 26, 27, 23)
    assert r.samples == 35 and coll == r.samples // 2
    assert (pop, feed, filtrate) == (r.population, r.samples - coll, r.samples - coll)
    assert r.records_written == feed
    assert pmbsr == 1 << 16   # PMBSR_EL1.COLL only (S = 0: no management event)
    assert r.pmu_events["SAMPLE_COLLISION"] == coll
    # two in flight: the previous one has left when the third is selected -- no collision
    m = run(pmu_setup() + spe_prologue(0b11, BUF) + loop(3000) + READ + VECTORS,
            tmp_path / "two", mode, SpeConfig(max_in_flight=2, in_flight_ops=300))
    assert xregs(m, 27, 23) == [0, 0]


def test_counting_rules():
    """PMEVTYPER<n>_EL0 filtering, row by row (Arm ARM PMEVTYPER<n>_EL0: P, U, NSK, NSU, NSH,
    M) in Non-secure state with EL3 implemented, and in Secure state."""
    cases = 0
    for p in (0, 1):
        for u in (0, 1):
            for nsk in (0, 1):
                for nsu in (0, 1):
                    for nsh in (0, 1):
                        for m in (0, 1):
                            v = TYPER.make(P=p, U=u, NSK=nsk, NSU=nsu, NSH=nsh, M=m,
                                           evtCount=SAMPLE_POP)
                            assert counter_filtered(v, 1, False, True) == (p != nsk)
                            assert counter_filtered(v, 0, False, True) == (u != nsu)
                            assert counter_filtered(v, 2, False, True) == (not nsh)
                            assert counter_filtered(v, 3, True, True) == (m != p)
                            assert counter_filtered(v, 1, True, True) == bool(p)
                            assert counter_filtered(v, 0, False, False) == bool(u)
                            cases += 6
    assert cases == 6 * 64


def test_spe_options_by_name():
    """``--spe-option``: the choices of SpeConfig by name (CHOICES), typed, validated."""
    from spe_emu.errors import ConfigError
    from spe_emu.spe.config import CHOICES
    cfg = SpeConfig().with_options(["in_flight_ops=300", "max_in_flight=2",
                                    "no_space_data_loss=true", "FT_ALL_ZERO_DISCARDS=1"])
    assert (cfg.in_flight_ops, cfg.max_in_flight) == (300, 2)
    assert cfg.no_space_data_loss is True and cfg.ft_all_zero_discards is True
    for bad, match in (("bogus=1", "expected NAME=VALUE"), ("max_in_flight=0", ">= 1"),
                       ("zero_interval=x", "not a number")):
        with pytest.raises(ConfigError, match=match):
            SpeConfig().with_options([bad])
    assert all(hasattr(SpeConfig(), name) for name in CHOICES)
    from click.testing import CliRunner
    from spe_emu.tools.cli import main
    r = CliRunner().invoke(main, ["run", "--help"])
    assert "--spe-option" in r.output and "--strict" in r.output
    r = CliRunner().invoke(main, ["run", "--spe-option", "max_in_flight=0", "x.elf"])
    assert r.exit_code == 125 and "max_in_flight" in r.output


@pytest.mark.parametrize("variant", ("plain", "filter", "collisions"))
def test_reads_inside_the_sampled_loop_agree_across_loops(tmp_path, variant):
    """An MRS of PMEVCNTR<n>_EL0 in the same translated block as sampled loads and ALU
    operations (captured or predicted samples pending in the fast loop): every value read,
    and the records, are the reference loop's."""
    spe = SpeConfig(in_flight_ops=300) if variant == "collisions" else None
    fcr = """
    movz x9, #2, lsl #16
    movk x9, #2
    msr pmsfcr_el1, x9
""" if variant == "filter" else ""
    body = fcr + """
    movz x4, #1500
    mov x10, #0
loop:
    ldr x5, [sp]
    add x6, x6, #1
    mrs x7, pmevcntr1_el0
    mrs x8, pmevcntr0_el0
    mrs x12, pmevcntr2_el0
    add x10, x10, x7
    eor x11, x11, x8
    add x13, x13, x12
    subs x4, x4, #1
    b.ne loop
"""
    out = {}
    for mode in MODES:
        m = run(pmu_setup() + spe_prologue(0b11, BUF) + body + READ + VECTORS, tmp_path,
                mode, spe)
        data = bytes(m.uc.mem_read(BUF, m.result.bytes_written))
        out[mode] = (xregs(m, 10, 11, 13, 24, 25, 26, 27), data, m.result.samples)
        assert xregs(m, 24)[0] == m.result.population
    assert out["fast"] == out["reference"]
    assert out["fast"][2] > 20
