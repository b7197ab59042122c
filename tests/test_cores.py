"""Core presets (spe_emu/arch/cores.py, ``spe-emu run --core``): each value names its source,
the PE presents the preset's MIDR_EL1 (VPIDR_EL2 at EL1 with EL2 enabled), the SPU and the
model take its values, and Linux perf decodes the Data Source packets of a Neoverse preset
as the Neoverse levels: ``perf mem report`` of a pointer chase through twice the system
cache shows L1, L2, L3 (system cache) and RAM sources."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from asmrun import EXIT, run_asm, xregs
from linux_progs import CC
from spe_emu.arch.cores import CORES, NO_SOURCE, core_preset
from spe_emu.arch.cpu_features import CpuFeatures
from spe_emu.arch.id_regs import MIDR_EL1
from spe_emu.errors import ConfigError
from spe_emu.spe.config import SpeConfig

ROOT = Path(__file__).resolve().parent.parent
PERF = shutil.which("perf")


def test_every_preset_value_names_its_source():
    assert {"neoverse-n1", "neoverse-v1"} <= set(CORES)
    for preset in CORES.values():
        assert len({v.attr for v in preset.values}) == len(preset.values)
        for v in preset.values:
            assert v.source, (preset.name, v.attr)
        spe, cpu = preset.apply(SpeConfig(), CpuFeatures())
        assert cpu.midr == preset.midr and MIDR_EL1.get(cpu.midr, "Implementer") == 0x41
        assert spe.lds == 1 and spe.l2_lines > 0
        for v in preset.values:
            if v.attr != "midr":
                assert getattr(spe, v.attr) == v.value
    assert any(NO_SOURCE in v.source for v in CORES["neoverse-n1"].values)
    with pytest.raises(ConfigError, match="--core 'nope': not a core preset"):
        core_preset("nope")


MIDR_READS = """
    mrs x20, midr_el1
    mrs x21, vpidr_el2
    mov x0, #0
""" + EXIT


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_the_pe_presents_the_preset_midr(tmp_path, mode):
    preset = CORES["neoverse-n1"]
    _, cpu = preset.apply(SpeConfig(), CpuFeatures())
    m = run_asm(MIDR_READS, tmp_path / "n1", mode=mode, boot_el=2, cpu=cpu)
    assert xregs(m, 20, 21) == [preset.midr, preset.midr]   # (VPIDR_EL2 resets to it)
    m = run_asm(MIDR_READS, tmp_path / "max", mode=mode, boot_el=2)
    assert xregs(m, 20)[0] == 0x000F0510                     # (Unicorn's "max")


@pytest.mark.skipif(not (shutil.which(CC) and PERF), reason=f"needs {CC} and perf")
def test_n1_preset_perf_mem_shows_every_level(tmp_path):
    program = tmp_path / "bigchase"
    subprocess.run([CC, "-O2", "-static", "-DNODES=(1<<20)", "-DLAPS=2", "-o", str(program),
                    str(ROOT / "tests" / "model_check" / "chase.c")], check=True)
    out = tmp_path / "out"
    done = subprocess.run(["spe-emu", "run", "--core", "neoverse-n1", "--perf-data",
                           "--interval", "1024", "-o", str(out), str(program)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = subprocess.run([PERF, "mem", "report", "-i", str(out / "perf.data"), "--stdio",
                             "--sort", "mem", "--itrace=M"],
                            capture_output=True, text=True, timeout=120).stdout
    for level in ("L1 or L1 hit", "L2 or L2 hit", "L3 or L3 hit", "RAM hit"):
        assert level in report, report
