"""PMSIDR_EL1 features and PMSVer as SpeConfig options (issue 15): the ID values, the RES0
masks keyed by the configured features (checked against bit positions written out here from
the Arm ARM register pages / Linux arch/arm64/tools/sysreg), PMSNEVFR_EL1 (FnE), Data Source
packets (LDS, §5.3.5), PMSDSFR_EL1 (FDS), 16-bit counters, and ``--spe-feature``."""

import itertools

import pytest
from asmrun import EXIT, SPE_DRAIN_PMSIDR, mov64, run_asm, spe_prologue, xregs
from click.testing import CliRunner

from spe_emu.errors import ConfigError
from spe_emu.spe.config import FEATURES, REQUIREMENTS, SpeConfig
from spe_emu.spe.packets import iter_records
from spe_emu.spe.registers import spe_registers
from spe_emu.tools.cli import main

BUF = 0x4200_0000
PMSIDR_BITS = {"FE": 0, "FT": 1, "FL": 2, "ArchInst": 3, "LDS": 4, "ERnd": 5, "FnE": 6,
               "FDS": 7}   # + Interval 11:8, MaxSize 15:12, CountSize 19:16


def valid(**kw) -> bool:
    try:
        SpeConfig(**kw)
    except ConfigError:
        return False
    return True


def test_feature_matrix_against_the_register_pages():
    # Every combination of PMSVer 1..5 and the modelled one-bit features (and the two counter
    # sizes): accepted exactly when the architecture's requirements hold, and then PMSIDR_EL1
    # reads the configured values, PMSFCR_EL1 / PMSLATFR_EL1 have exactly the feature's
    # writable bits, and PMSNEVFR_EL1 / PMSDSFR_EL1 exist exactly with FnE / FDS.
    ran = accepted = 0
    for pmsver, fne, lds, fds, ernd, arch, cs, f in itertools.product(
            range(1, 6), (0, 1), (0, 1), (0, 1), (0, 1), (0, 1), (2, 3), (0, 1)):
        ran += 1
        kw = dict(pmsver=pmsver, fne=fne, lds=lds, fds=fds, ernd=ernd, arch_inst=arch,
                  count_size_code=cs, flag_updates=f)
        expect_ok = ((pmsver >= 3) == bool(fne) and (pmsver < 4 or f) and (lds or not fds))
        assert valid(**kw) == expect_ok, kw
        if not expect_ok:
            continue
        accepted += 1
        t = spe_registers(SpeConfig(**kw))
        bits = dict(FE=1, FT=1, FL=1, ArchInst=arch, LDS=lds, ERnd=ernd, FnE=fne, FDS=fds)
        expect = sum(v << PMSIDR_BITS[k] for k, v in bits.items()) | 6 << 12 | cs << 16
        assert t["PMSIDR_EL1"].reset == expect
        fcr = (0b111 << 16) | 0b111 | fne << 3 | fds << 4
        assert t["PMSFCR_EL1"].write_mask == fcr
        assert t["PMSLATFR_EL1"].write_mask == (0xFFFF if cs == 3 else 0xFFF)
        assert ("PMSNEVFR_EL1" in t, "PMSDSFR_EL1" in t) == (bool(fne), bool(fds))
        # E[7], E[5], E[3] (E[1] RES1 in PMSEVFR_EL1), and from FEAT_SPEv1p2 E[6] (Not taken)
        not_taken = (pmsver >= 3) << 6
        assert t["PMSEVFR_EL1"].write_mask == 0b1010_1000 | not_taken
        if fne:
            assert t["PMSNEVFR_EL1"].write_mask == 0b1010_1010 | not_taken
    print(f"feature matrix: {ran} combinations, {accepted} valid")
    # valid: (PMSVer 1 with FnE 0, or 3..5 with FnE 1; PMSVer 2 is FEAT_SPEv1p1, FnE 0) x F
    # (free below v1p3) x (LDS, FDS) in {00, 10, 11} x ERnd x ArchInst x CountSize
    assert ran == 5 * 2 ** 7 and accepted == (2 * 2 + 1 * 2 + 2 * 1) * 3 * 8


@pytest.mark.parametrize("feature", [f for f in FEATURES if f.values == (0,)],
                         ids=lambda f: f.name)
def test_unmodelled_features_are_refused(feature):
    with pytest.raises(ConfigError, match=f"{feature.name} must be one of 0"):
        SpeConfig(**{feature.attr: 1})


def test_requirements_name_their_source():
    for attr, _, needs, _, why in REQUIREMENTS:
        assert why and hasattr(SpeConfig(), attr) and hasattr(SpeConfig(), needs)
    with pytest.raises(ConfigError, match="pmsver >= 3 requires fne >= 1"):
        SpeConfig(pmsver=3)
    with pytest.raises(ConfigError, match="pmsver >= 3 requires fne >= 1"):
        SpeConfig().with_features(["PMSVer=3", "FnE=0"])     # (given: checked, not changed)
    # a version given brings the features it makes mandatory
    assert SpeConfig().with_features(["PMSVer=3"]).fne == 1
    spe = SpeConfig().with_features(["PMSVer=4"])
    assert (spe.fne, spe.flag_updates) == (1, 1)
    with pytest.raises(ConfigError, match="expected NAME=VALUE"):
        SpeConfig().with_features(["bogus=1"])
    assert SpeConfig().with_features(["pmsver=0b11", "FNE=1"]).pmsver == 3


LOADS = """
    movz x4, #600
loop:
    ldr x5, [sp]
    ldr x6, [sp, #8]
    subs x4, x4, #1
    b.ne loop
"""


def program(pmsfcr: int, extra: str = "") -> str:
    # E0SPE | E1SPE, interval 256; filter registers written before PMSCR_EL1
    return (mov64("x0", pmsfcr) + "msr pmsfcr_el1, x0\n" + extra + spe_prologue(0b11, BUF)
            + LOADS + SPE_DRAIN_PMSIDR)


def records(m):
    return list(iter_records(bytes(m.uc.mem_read(BUF, xregs(m, 21)[0] - BUF))))


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_pmsnevfr_discards_records_with_a_selected_event(tmp_path, mode):
    # (model_feed "sampled": each sampled load of a new line refills the L1D)
    spe = SpeConfig(pmsver=3, fne=1, model_feed="sampled")
    # FnE (bit 3) with PMSNEVFR_EL1.E[1] (retired): every record has E[1] = 1 -> none kept
    m = run_asm(program(1 << 3, "mov x1, #2\nmsr pmsnevfr_el1, x1\n"), tmp_path / "e1",
                mode=mode, spe=spe)
    assert m.result.samples > 5 and m.result.records_written == 0
    assert m.result.filtered_out == m.result.samples
    assert xregs(m, 22)[0] >> 6 & 1 == 1     # PMSIDR_EL1.FnE
    # PMSNEVFR_EL1.E[3] (L1D refill): only the loads that refill are dropped
    m = run_asm(program(1 << 3, "mov x1, #8\nmsr pmsnevfr_el1, x1\n"), tmp_path / "e3",
                mode=mode, spe=spe)
    kept = records(m)
    assert kept and all(not r.events >> 3 & 1 for r in kept)
    assert m.result.filtered_out >= 1       # the first load of each line refills


def test_pmsnevfr_is_undefined_without_fne(tmp_path):
    # PMSVer 1: MSR PMSNEVFR_EL1 is UNDEFINED (EC 0x00) -- the vector spins; the budget ends it
    text = "mov x1, #2\nmsr pmsnevfr_el1, x1\nmov x0, #0\n" + EXIT + """
    .balign 2048
vectors:
    .skip 0x200
    mrs x20, esr_el1
    mov x0, #7
""" + EXIT
    code = "adr x0, vectors\nmsr vbar_el1, x0\n" + text
    m = run_asm(code, tmp_path)
    assert m.result.exit_status == 7 and xregs(m, 20)[0] >> 26 == 0


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_data_source_packets(tmp_path, mode):
    m = run_asm(program(0), tmp_path, mode=mode, spe=SpeConfig(lds=1))
    recs = records(m)
    loads = [r for r in recs if r.data_va is not None]
    others = [r for r in recs if r.data_va is None]
    assert loads and others
    assert all(r.data_source is None for r in others)
    # the model's outcomes (docs/model.md): L1D hit 0x0, system cache 0xB, DRAM 0xE
    for r in loads:
        refill, llc_miss = r.events >> 3 & 1, r.events >> 9 & 1
        assert r.data_source == (0xE if llc_miss else 0xB if refill else 0x0)
    raw = bytes(m.uc.mem_read(BUF, xregs(m, 21)[0] - BUF))
    # Data Source packet, halfword payload: header 0b01_01_0011 (§5.3.5)
    assert raw.count(bytes([0x53, 0x00, 0x00])) >= 1
    assert xregs(m, 22)[0] >> 4 & 1 == 1     # PMSIDR_EL1.LDS


def test_data_source_filter(tmp_path):
    spe = SpeConfig(lds=1, fds=1)
    # FDS (bit 4), PMSDSFR_EL1.S = bit 0xE only: loads from DRAM and every non-load kept
    m = run_asm(program(1 << 4, "mov x1, #1\nlsl x1, x1, #14\nmsr pmsdsfr_el1, x1\n"),
                tmp_path, spe=spe)
    recs = records(m)
    assert recs and m.result.filtered_out > 0
    assert all(r.data_source in (None, 0xE) for r in recs)


def test_sixteen_bit_counters_widen_minlat(tmp_path):
    text = """
    mov x1, #0xFFFF
    msr pmslatfr_el1, x1
    mrs x19, pmslatfr_el1
    mrs x20, pmsidr_el1
    mov x0, #0
""" + EXIT
    got = {cs: xregs(run_asm(text, tmp_path / str(cs), spe=SpeConfig(count_size_code=cs)),
                     19, 20) for cs in (2, 3)}
    assert got[2][0] == 0xFFF and got[3][0] == 0xFFFF
    assert got[2][1] >> 16 & 0xF == 2 and got[3][1] >> 16 & 0xF == 3


def test_pmsver_reads_in_id_aa64dfr0(tmp_path):
    text = "mrs x19, id_aa64dfr0_el1\nmov x0, #0\n" + EXIT
    m = run_asm(text, tmp_path, spe=SpeConfig(pmsver=5, fne=1, flag_updates=1))
    assert xregs(m, 19)[0] >> 32 & 0xF == 5   # ID_AA64DFR0_EL1.PMSVer, bits 35:32


def test_cli_spe_feature_errors(tmp_path):
    runner = CliRunner()
    r = runner.invoke(main, ["run", "--spe-feature", "PBT=2", "-o", str(tmp_path), "x.elf"])
    assert r.exit_code == 125 and "PBT must be one of 0, 1" in r.output
    r = runner.invoke(main, ["run", "--spe-feature", "PBT=1", "-o", str(tmp_path), "x.elf"])
    assert r.exit_code == 125 and "requires pmsver >= 3" in r.output   # (FEAT_SPEv1p2)
    r = runner.invoke(main, ["run", "--help"])
    assert all(f.name in r.output for f in FEATURES)
