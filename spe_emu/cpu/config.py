"""How a machine is built and run (:class:`MachineConfig`) and what a run ends with
(:class:`MachineExit`, :class:`RunResult`); :data:`NEVER`, the instruction count no run
reaches (a stop point that is not planned)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..arch.cpu_features import CpuFeatures
from ..errors import ConfigError
from ..platform.board import MAX_PES, VIRT, BoardSpec
from ..spe.config import SpeConfig

NEVER = (1 << 64) - 1


@dataclass
class MachineConfig:
    """How to build and run the machine.

    Attributes:
        ram_base, ram_size: RAM (bytes); QEMU virt puts RAM at 0x4000_0000.
        boot_el: Exception level the reset state enters (1, 2 or 3).
        mode: "fast" (native run loop), "reference" (Python hook on every instruction) or
            "raw" (no SPE model attached: PMSVer reads 0; the native block hook counts
            instructions for the budget and virtual time; the exception model, GIC and
            semihosting still work; for speed baselines: the exceptions spe_emu raises with
            an instruction or alignment hook -- SIMD&FP traps, alignment faults, SP
            alignment, Illegal Execution state -- are not raised, see docs/model.md).
        spe: the SPU implementation choices.
        outdir: where semihosting files land (the run's output directory).
        max_insns: instruction budget; exceeding it raises :class:`GuestRunaway`. None: no
            budget (the run ends when the guest exits, or on a guest error such as a WFI
            nothing can wake).
        allow_el0_semihosting: treat HLT #0xF000 at EL0 as a semihosting call (QEMU's default
            is to UNDEF it, which this model follows unless set).
        console: receives guest console bytes as they are written.
        firmware_console: receives the console bytes spe_emu's firmware writes (its banner,
            exit and fatal lines; :attr:`Machine.firmware_span`), which are not the guest's.
        tcg_buffer_mb: size of Unicorn's translated-code buffer in MiB (QEMU flushes all
            translations when it is full); bounds the emulator's memory.
        board: the board description (memory map, devices, interrupt assignment); RAM is
            placed at ``ram_base`` with ``ram_size`` bytes whatever the board's default size.
        stdin: where the console's input comes from (a binary file object), or None.
        psci: the PSCI conduit the emulator answers (``"hvc"`` or ``"smc"``: calls through
            it are PSCI calls, not exceptions), or None.
        cpu: the CPU feature choices (:class:`spe_emu.arch.cpu_features.CpuFeatures`: CSV3,
            E0PD presented by default; PAuth may be hidden).
        smp: the number of PEs (1..8; :mod:`spe_emu.cpu.smp`): PE 0 starts at reset, the
            others are off until PSCI CPU_ON starts them.
        smp_quantum: on a several-PE machine, the time slice (instructions of virtual time,
            one counter tick each) each running PE is given in turn (:mod:`spe_emu.cpu.smp`).
        device_alignment: a data access not aligned to its size where stage 1 is disabled
            (Device-nGnRnE memory) takes an Alignment fault, as the architecture says
            (default). False: it completes as to Normal memory, as on QEMU 7.2 (for test
            programs that rely on it; docs/model.md "Exceptions and interrupts").
    """

    ram_base: int = 0x4000_0000
    ram_size: int = 256 << 20
    boot_el: int = 1
    mode: str = "fast"
    spe: SpeConfig = field(default_factory=SpeConfig)
    outdir: Path = Path("spe-out")
    max_insns: int | None = 2_000_000_000
    allow_el0_semihosting: bool = False
    console: Callable[[bytes], None] | None = None
    firmware_console: Callable[[bytes], None] | None = None
    tcg_buffer_mb: int = 4
    board: BoardSpec = VIRT
    stdin: object = None
    psci: str | None = None
    cpu: CpuFeatures = field(default_factory=CpuFeatures)
    device_alignment: bool = True
    smp: int = 1
    smp_quantum: int = 100_000

    def __post_init__(self) -> None:
        if self.boot_el not in (1, 2, 3):
            raise ConfigError(f"boot_el={self.boot_el!r}: must be 1, 2 or 3")
        if self.mode not in ("fast", "reference", "raw"):
            raise ConfigError(f"mode={self.mode!r}: must be 'fast', 'reference' or 'raw'")
        if self.mode == "raw":
            self.spe = replace(self.spe, pmsver=0)
        if self.ram_size <= 0 or self.ram_size % 0x1000 or self.ram_base % 0x1000:
            raise ConfigError("RAM base and size must be positive multiples of 4 KiB")
        if not 4 <= self.tcg_buffer_mb <= 1024:
            raise ConfigError(f"tcg_buffer_mb={self.tcg_buffer_mb!r}: must be 4..1024")
        if self.max_insns is not None and self.max_insns <= 0:
            raise ConfigError(f"max_insns={self.max_insns!r}: must be positive")
        if self.psci not in (None, "hvc", "smc"):
            raise ConfigError(f"psci={self.psci!r}: must be 'hvc', 'smc' or None")
        if not 1 <= self.smp <= MAX_PES:
            raise ConfigError(f"smp={self.smp!r}: must be 1..{MAX_PES}")
        if self.smp > 1:   # (the board's GIC with a redistributor per PE)
            self.board = self.board.with_pes(self.smp)
        if self.smp > 1 and self.psci is None:
            raise ConfigError(f"smp={self.smp}: several PEs need the PSCI conduit (boot_el "
                              f"1 or 2) to be started")
        if self.smp_quantum <= 0:
            raise ConfigError(f"smp_quantum={self.smp_quantum!r}: must be positive")


@dataclass(frozen=True)
class MachineExit:
    """How the guest ended its run.

    Attributes:
        status: the exit status (semihosting: the guest's; PSCI SYSTEM_OFF: 0).
        reason: the semihosting ADP_Stopped_* reason code, or None.
        via: ``"semihosting"``, ``"psci-system-off"``, ``"psci-system-reset"`` or
            ``"psci-cpu-off"``.
    """

    status: int
    reason: int | None
    via: str


@dataclass
class RunResult:
    """What a run produced (counts in instructions unless named otherwise)."""

    exit_status: int | None
    exit_reason: int | None
    instructions: int
    population: int
    samples: int
    records_written: int
    bytes_written: int
    filtered_out: int
    management_events: int
    irqs_taken: int
    exceptions_taken: int
    console: bytes
    guest_errors: list[str]
    pmbsr: int
    pmbptr: int
    pmsicr: int
    exit_via: str | None = None
    """How the run ended (:attr:`MachineExit.via`)."""
    driver_rules: list = field(default_factory=list)
    """The SPE programming rules the guest broke, first time each (spe.driver_rules.RuleBreak
    as dicts: rule, section, text, pc, registers)."""
    firmware_console: bytes = b""
    """What spe_emu's firmware wrote to the console (never part of :attr:`console`)."""
    model_config: dict = field(default_factory=dict)
    """The model's parameters (SpeConfig.model_config) and the PE's MIDR_EL1 (``midr``, hex,
    None: Unicorn's CPU's): what the events and latencies of the records come from."""
    pmu_events: dict = field(default_factory=dict)
    """The SPE PMU events over the run, as the guest's PMU counts them unfiltered (SPE
    supplement §2.6: SAMPLE_POP, SAMPLE_FEED, SAMPLE_FILTRATE, SAMPLE_COLLISION)."""
    pmu: dict = field(default_factory=dict)
    """The PE's PMU counters at the end (spe_emu.devices.pmu.PmuV3.counts: PMCCNTR_EL0 and
    each PMEVCNTR<n>_EL0 with its event); empty without a PMU."""
    model: dict = field(default_factory=dict)
    """The micro-architecture model behind record events (docs/model.md): ``feed`` (its
    ``model_feed``) and the counts of the accesses it recorded (:data:`native.MODEL_STATS`:
    by the level that held the line, all, TLB walks)."""
    per_pe: list = field(default_factory=list)
    """With several PEs (``--smp``): each PE's counts (``pe``, ``mpidr`` and the summed
    fields: instructions, samples, interrupts ...); the fields above are their sums. Empty
    with one PE."""
