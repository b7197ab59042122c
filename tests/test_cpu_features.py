"""The board's CPU feature choices (spe_emu.arch.cpu_features, ``--cpu-feature``): the ID
register values the guest reads (Arm ARM D19.2) with each choice, and the option's errors.
FEAT_E0PD's fault itself is checked against QEMU 7.2 by tests/baremetal/e0pd.S
(tests/test_exception_routing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from asmrun import BASE, EXIT, xregs
from spe_emu.arch.cpu_features import CpuFeatures
from spe_emu.arch.id_regs import (ID_AA64ISAR1_EL1, ID_AA64ISAR2_EL1, ID_AA64MMFR2_EL1,
                                  ID_AA64PFR0_EL1)
from spe_emu.asm import assemble
from spe_emu.cpu.machine import Machine, MachineConfig
from spe_emu.errors import ConfigError
from spe_emu.platform.loader import Image, Segment
from spe_emu.tools.cli import main

REGS = (ID_AA64PFR0_EL1, ID_AA64MMFR2_EL1, ID_AA64ISAR1_EL1, ID_AA64ISAR2_EL1)
READ = "".join("mrs x{}, s{}_{}_c{}_c{}_{}\n".format(19 + i, *r.encoding.tuple)
               for i, r in enumerate(REGS))


def read_ids(tmp_path: Path, cpu: CpuFeatures, regs=REGS
             ) -> tuple[dict[str, int], dict[str, int]]:
    """(what EL1 reads, what Unicorn's CPU holds) for ``regs``, on a machine with ``cpu``."""
    read_code = "".join("mrs x{}, s{}_{}_c{}_c{}_{}\n".format(19 + i, *r.encoding.tuple)
                        for i, r in enumerate(regs))
    code = assemble("movz x9, #0x4100, lsl #16\nmov sp, x9\n" + read_code + "mov x0, #0\n"
                    + EXIT, BASE)
    m = Machine(MachineConfig(outdir=tmp_path, cpu=cpu))
    m.load(Image(path=Path("<asm>"), entry=BASE,
                 segments=[Segment(BASE, BASE, code, len(code), 0b111)]))
    m.reset(BASE)
    m.run()
    read = dict(zip((r.name for r in regs), xregs(m, *range(19, 19 + len(regs)))))
    raw = {r.name: m.uc.cpr_read(*r.encoding.tuple) for r in regs}
    return read, raw


def test_read_encodings():
    assert READ.splitlines()[0] == "mrs x19, s3_0_c0_c4_0"     # ID_AA64PFR0_EL1
    assert READ.splitlines()[3] == "mrs x22, s3_0_c0_c6_2"     # ID_AA64ISAR2_EL1


def test_default_presents_csv3_and_e0pd(tmp_path):
    read, raw = read_ids(tmp_path, CpuFeatures())
    pfr0, mmfr2 = read["ID_AA64PFR0_EL1"], read["ID_AA64MMFR2_EL1"]
    assert ID_AA64PFR0_EL1.get(raw["ID_AA64PFR0_EL1"], "CSV3") == 0   # Unicorn's CPU: none
    assert ID_AA64MMFR2_EL1.get(raw["ID_AA64MMFR2_EL1"], "E0PD") == 0
    assert ID_AA64PFR0_EL1.get(pfr0, "CSV3") == 1
    assert ID_AA64MMFR2_EL1.get(mmfr2, "E0PD") == 1
    # every other field as Unicorn's CPU has it (GIC: the machine's GICv3 CPU interface;
    # RAS: FEAT_RAS, spe_emu.cpu.ras)
    assert pfr0 == ID_AA64PFR0_EL1.set(ID_AA64PFR0_EL1.set(ID_AA64PFR0_EL1.set(
        raw["ID_AA64PFR0_EL1"], "CSV3", 1), "GIC", 1), "RAS", 1)
    assert mmfr2 == ID_AA64MMFR2_EL1.set(raw["ID_AA64MMFR2_EL1"], "E0PD", 1)
    # PAuth as Unicorn's CPU implements it: QARMA5 for the A keys and generic authentication
    assert read["ID_AA64ISAR1_EL1"] == raw["ID_AA64ISAR1_EL1"]
    assert ID_AA64ISAR1_EL1.get(read["ID_AA64ISAR1_EL1"], "APA") == 1
    assert ID_AA64ISAR1_EL1.get(read["ID_AA64ISAR1_EL1"], "GPA") == 1


def test_features_off(tmp_path):
    read, raw = read_ids(tmp_path, CpuFeatures(csv3=False, e0pd=False, pauth=False))
    assert ID_AA64PFR0_EL1.get(read["ID_AA64PFR0_EL1"], "CSV3") == 0
    assert read["ID_AA64MMFR2_EL1"] == raw["ID_AA64MMFR2_EL1"]
    isar1 = read["ID_AA64ISAR1_EL1"]
    for name in ("APA", "API", "GPA", "GPI"):
        assert ID_AA64ISAR1_EL1.get(isar1, name) == 0
    # nothing else of ID_AA64ISAR1_EL1 changes (JSCVT, FCMA, LRCPC... stay)
    assert isar1 == raw["ID_AA64ISAR1_EL1"] & ~sum(
        ID_AA64ISAR1_EL1.field(n).mask for n in ("APA", "API", "GPA", "GPI"))
    assert isar1 != 0
    for name in ("APA3", "GPA3"):
        assert ID_AA64ISAR2_EL1.get(read["ID_AA64ISAR2_EL1"], name) == 0


def test_with_options():
    cpu = CpuFeatures().with_options(["pauth=off", "E0PD=0", " csv3 = on "])
    assert cpu == CpuFeatures(csv3=True, e0pd=False, pauth=False)
    assert cpu.describe() == {"csv3": True, "e0pd": False, "tgran16": True, "pauth": False,
                              "midr": None}
    with pytest.raises(ConfigError, match="expected NAME=on|off"):
        CpuFeatures().with_options(["sve=on"])
    with pytest.raises(ConfigError, match="not on or off"):
        CpuFeatures().with_options(["pauth=maybe"])


def test_tgran16_presents_the_16k_granule_and_stage_2_fields(tmp_path):
    """ID_AA64MMFR0_EL1 (Arm ARM D19.2): TGran16 0b0001 (16 KiB, no FEAT_LPA2) and TGran4_2,
    TGran16_2, TGran64_2 0b0010 (supported at stage 2) by default; Unicorn's CPU (QEMU 5.0's
    max, Cortex-A57 values) has TGran16 0b0000; tgran16=off gives its value unchanged."""
    from spe_emu.arch.id_regs import ID_AA64MMFR0_EL1 as MMFR0
    read, raw = read_ids(tmp_path / "on", CpuFeatures(), (MMFR0,))
    off, _ = read_ids(tmp_path / "off", CpuFeatures(tgran16=False), (MMFR0,))
    value, unicorn = read["ID_AA64MMFR0_EL1"], raw["ID_AA64MMFR0_EL1"]
    assert MMFR0.get(unicorn, "TGran16") == 0
    assert MMFR0.get(value, "TGran16") == 0b0001
    assert [MMFR0.get(value, f"TGran{g}_2") for g in (4, 16, 64)] == [0b0010] * 3
    assert MMFR0.get(value, "TGran4") == 0 and MMFR0.get(value, "TGran64") == 0  # (supported)
    assert value & 0xFFFFF == unicorn & 0xFFFFF   # PARange ... BigEndEL0 as Unicorn's
    assert off["ID_AA64MMFR0_EL1"] == unicorn


def test_cli_cpu_feature_errors(tmp_path):
    runner = CliRunner()
    r = runner.invoke(main, ["run", "--cpu-feature", "pauth=maybe", "-o", str(tmp_path),
                             "x.elf"])
    assert r.exit_code == 125 and "--cpu-feature 'pauth=maybe'" in r.output
    assert len(r.output.strip().splitlines()) == 1
    r = runner.invoke(main, ["run", "--help"])
    assert "--cpu-feature" in r.output and "pauth" in r.output
