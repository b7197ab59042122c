"""Core presets (``spe-emu run --core NAME``, ``spe_emu.run(core=NAME)``): the MIDR_EL1 a
PE presents, the SPU's ID register fields and the micro-architecture model's geometry and
latencies of a public core, each value with where it comes from (docs/model.md "Core
presets" prints the table). A value no public source gives is marked so and set to a
documented default. Options given after the preset (``--spe-feature``, ``--spe-model``)
override its values.

The Neoverse presets present MIDR_EL1 values Linux perf knows (tools/perf/util/arm-spe.c,
``neoverse_spe``: Neoverse N1, N2, V1 in perf 6.1), so perf decodes their Data Source packets
as the Neoverse levels (L1D, L2, peer core, system cache, DRAM: the encoding of
:data:`spe_emu.spe.records.DATA_SOURCE`), and they set PMSIDR_EL1.LDS = 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigError
from .cpu_features import CpuFeatures
from .id_regs import MIDR_EL1

NO_SOURCE = "no public source found: a documented default"


@dataclass(frozen=True)
class Value:
    """One preset value: what it sets (a SpeConfig attribute, or ``midr``), the value, and
    its source."""

    attr: str
    value: int
    source: str


@dataclass(frozen=True)
class CorePreset:
    name: str
    title: str
    values: tuple[Value, ...]

    @property
    def midr(self) -> int:
        return next(v.value for v in self.values if v.attr == "midr")

    def apply(self, spe, cpu: CpuFeatures):
        """(SpeConfig, CpuFeatures) with the preset's values: the SPU and model fields of
        ``spe`` and the MIDR_EL1 of ``cpu``. Raises ConfigError for a combination SpeConfig
        refuses."""
        changes = {v.attr: v.value for v in self.values if v.attr != "midr"}
        return spe.with_(**changes), replace(cpu, midr=self.midr)


def _midr(implementer: int, variant: int, part: int, revision: int) -> int:
    return MIDR_EL1.make(Implementer=implementer, Variant=variant, Architecture=0xF,
                         PartNum=part, Revision=revision)


N1_TRM = "Arm Neoverse N1 Core Technical Reference Manual (Arm 100616, r4p1)"
WIKI = "WikiChip, Neoverse N1 microarchitecture, memory hierarchy"
ANANDTECH_N1 = "AnandTech, 'Cloud Clash: Graviton2' (2020), page 3"
V1_SPE_LOG = ("a public Graviton3 (V1) boot log in Arm's Learning Paths, 'Enable SPE with "
              "Kernel Modules': arm_spe_pmu 'probed SPEv1.1 ... [max_record_sz 64, align 64, "
              "features 0x17]' (decoded as drivers/perf/arm_spe_pmu.c does)")
A76 = ("the Cortex-A76 MMU table (N1's base core; Arm Cortex-A76 TRM, as reprinted in "
       "Intel's Agilex 5 HPS TRM 814346 §3.5.3.4.1)")
V1_TRM = "Arm Neoverse V1 Core Technical Reference Manual (Arm 101427)"
CPUTYPE = "Linux arch/arm64/include/asm/cputype.h"

CORES = {
    "neoverse-n1": CorePreset("neoverse-n1", "Arm Neoverse N1 r4p1", (
        Value("midr", _midr(0x41, 4, 0xD0C, 1),
              f"{N1_TRM} MIDR_EL1; QEMU's neoverse-n1 CPU model (target/arm, r4p1); part "
              f"0xD0C: {CPUTYPE} ARM_CPU_PART_NEOVERSE_N1"),
        Value("interval_code", 0b0100,
              f"{N1_TRM} Statistical Profiling Extension functional description: a minimum "
              f"sampling interval of 1024, in PMSIDR_EL1.Interval (0b0100)"),
        Value("pmsver", 1, f"{N1_TRM} ID_AA64DFR0_EL1.PMSVer (FEAT_SPE, Armv8.2)"),
        Value("lds", 1, "Linux perf decodes N1's Data Source packets "
                        "(tools/perf/util/arm-spe.c neoverse_spe)"),
        Value("l1d_lines", 1024, f"{N1_TRM} L1 data cache: 64 KB, 64-byte lines; {WIKI}"),
        Value("l1d_ways", 4, f"{N1_TRM} L1 data cache: 4-way set associative; {WIKI}"),
        Value("l2_lines", 16384, f"{N1_TRM} L2 cache: 512 KB or 1 MB ({WIKI}; 1 MB here, as "
                                 f"in AWS Graviton2 and Ampere Altra)"),
        Value("l2_ways", 8, f"{N1_TRM} L2 cache: 8-way set associative; {WIKI}"),
        Value("llc_lines", 1 << 19, "system level cache of the SoC (CMN-600): 32 MB in AWS "
                                    "Graviton2 and Ampere Altra product data; ways: "
                                    + NO_SOURCE + " (16)"),
        Value("llc_ways", 16, NO_SOURCE),
        Value("tlb_entries", 48, f"L1 data TLB: 48 entries, fully associative ({A76}); the "
                                 f"model has one TLB level (the L2 TLB: 1280 entries, 5-way)"),
        Value("tlb_ways", 0, f"L1 data TLB: fully associative ({A76})"),
        Value("l1d_latency", 4, f"4-cycle fastest load-to-use latency ({WIKI})"),
        Value("l2_latency", 11, f"9 to 11 cycles load-to-use ({WIKI}); 11 for a 1 MB L2, "
                                f"as measured on Graviton2 ({ANANDTECH_N1})"),
        Value("llc_latency", 75, "system cache hit: " + NO_SOURCE + " (about 30 ns at "
                                 "2.5 GHz)"),
        Value("dram_latency", 208, f"DRAM: about 83 ns (Arm's figure; 81 ns measured on "
                                   f"Graviton2, {ANANDTECH_N1}) at 2.5 GHz"),
        Value("walk_latency", 30, NO_SOURCE + " (spe_emu's default)"),
        Value("mispredict_penalty", 11, NO_SOURCE + " (a typical 11-stage front end)"),
    )),
    "neoverse-v1": CorePreset("neoverse-v1", "Arm Neoverse V1 r1p2", (
        Value("midr", _midr(0x41, 1, 0xD40, 2),
              f"QEMU's neoverse-v1 CPU model (target/arm, r1p2); part 0xD40: {CPUTYPE} "
              f"ARM_CPU_PART_NEOVERSE_V1"),
        Value("interval_code", 0b0000, f"{V1_TRM} PMSIDR_EL1.Interval: " + NO_SOURCE
                                       + " (256, the smallest)"),
        Value("pmsver", 2, f"{V1_TRM} ID_AA64DFR0_EL1.PMSVer (FEAT_SPEv1p1, Armv8.4)"),
        Value("lds", 1, "Linux perf decodes V1's Data Source packets "
                        "(tools/perf/util/arm-spe.c neoverse_spe); LDS = 1 in " + V1_SPE_LOG),
        Value("max_size_code", 6, "PMSIDR_EL1.MaxSize = 6 (64-byte records): " + V1_SPE_LOG),
        Value("align_code", 6, "PMBIDR_EL1.Align = 6 (records padded to 64 bytes): "
                               + V1_SPE_LOG),
        Value("arch_inst", 0, "PMSIDR_EL1.ArchInst = 0 (features 0x17): " + V1_SPE_LOG),
        Value("l1d_lines", 1024, f"{V1_TRM} L1 data cache: 64 KB, 64-byte lines"),
        Value("l1d_ways", 4, f"{V1_TRM} L1 data cache: 4-way set associative"),
        Value("l2_lines", 16384, f"{V1_TRM} L2 cache: 512 KB or 1 MB (1 MB here, as in AWS "
                                 f"Graviton3)"),
        Value("l2_ways", 8, f"{V1_TRM} L2 cache: 8-way set associative"),
        Value("llc_lines", 1 << 19, "system level cache of the SoC (CMN-650): 32 MB in AWS "
                                    "Graviton3 product data; ways: " + NO_SOURCE + " (16)"),
        Value("llc_ways", 16, NO_SOURCE),
        Value("tlb_entries", 48, "L1 data TLB: " + NO_SOURCE + " (N1's 48 entries)"),
        Value("tlb_ways", 0, "L1 data TLB: " + NO_SOURCE + " (fully associative, as N1's)"),
        Value("l1d_latency", 4, "L1D load-to-use: " + NO_SOURCE + " (N1's 4 cycles)"),
        Value("l2_latency", 11, "L2 load-to-use: " + NO_SOURCE + " (N1's 11 cycles)"),
        Value("llc_latency", 80, "system cache hit: " + NO_SOURCE + " (about 30 ns at "
                                 "Graviton3's 2.6 GHz, WikiChip)"),
        Value("dram_latency", 300, "DRAM: " + NO_SOURCE + " (about 115 ns at 2.6 GHz)"),
        Value("walk_latency", 30, NO_SOURCE + " (spe_emu's default)"),
        Value("mispredict_penalty", 11, "AnandTech, Arm Neoverse V1 announcement (2021): a "
                                        "pipeline of a minimum of 11 stages"),
    )),
}
"""The core presets by name (``--core``)."""


def core_preset(name: str) -> CorePreset:
    """The preset ``name`` (any case). Raises ConfigError naming the known ones."""
    preset = CORES.get(name.strip().lower())
    if preset is None:
        raise ConfigError(f"--core {name!r}: not a core preset (one of {', '.join(CORES)})")
    return preset
