"""The machine: Unicorn + exception model + SPU + board devices + the run loop.

:class:`Machine` is the facade sessions and the API use. The shared board (RAM, bus, devices,
GIC, virtual clock, console input) is a :class:`~spe_emu.cpu.board.Board` it owns; its PEs are
:class:`~spe_emu.cpu.pe_core.PeCore` objects in ``pes`` (one: :attr:`Machine.pe`, which the run
loops drive), each with its Unicorn instance, native structs, SPU, PMU events, exception model
and system-register registry, which the machine reaches under the names it always had
(``uc``, ``counter``, ``spu`` ...). What acts on the PE is in the module of its concern,
mixed into :class:`Machine` (they share its attributes): :mod:`.translation` (host-side
translation), :mod:`.prediction` (samples inside a block, learnt code, captures),
:mod:`.sampling` (population and samples), :mod:`.controls` (ERET, PSB CSYNC and unmasking
hooks), :mod:`.interrupts` (interrupt and SPE exception delivery), :mod:`.traps` (exceptions,
MRS/MSR/SYS traps, semihosting, PSCI), :mod:`.hooks` (the Unicorn hooks) and :mod:`.runloop`
(the run loops); :mod:`.config` holds :class:`MachineConfig` and what a run returns. This
module builds the machine and resets its PE (reset state, access context, instruction
counts, ground truth).

Run loop ("fast" mode, the default): Unicorn runs natively. A native block hook
(:mod:`spe_emu.native`) counts retired instructions per translated block and stops emulation in
front of the block that holds the next instruction of interest. A sample inside a block is
taken from the state at the block's start or end when that is provably the instruction's own
(the hook captures the common case itself, without stopping; see docs/model.md "Samples inside
a block"); otherwise an exact ``until`` run reaches the instruction itself. Python only runs at
*stop points*: samples the hook cannot capture, exceptions (Unicorn's INTR hook), trapped
system-register accesses, exception returns and DAIF writes (bounded code hooks on the few
addresses that hold them), and WFI.

"reference" mode is the oracle: a Python code hook on every instruction counts the sample
population, tracks the Exception level and steps the interval counter one member at a time.
Both modes share everything else (exception entry, register dispatch, record building), so a
difference between them is a bug in population counting, EL tracking or stop planning.

Interrupts are recognised at instruction boundaries where the run loop has control: after a
sample, an exception entry or return, a trapped register access, a DAIF write or a WFI
(docs/model.md). GIC MMIO writes are recognised at the next such point.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Callable

from unicorn import arm64_const as A

from .. import devices  # noqa: F401 -- the device models register themselves
from ..arch.context import CPACR_EL1, HCR_EL2, MDCR_EL2, MDCR_EL3, SCR_EL3
from ..arch.firmware_regs import CPTR_EL2, CPTR_EL3
from ..arch.id_regs import VMPIDR_EL2
from ..arch.smccc import pe_mpidr
from ..devices.psci import Psci
from ..devices.semihosting import Semihosting
from ..platform.clock import PeClock
from ..platform.loader import Image
from .board import Board
from .config import NEVER, MachineConfig, MachineExit, RunResult
from .controls import (CONTROL_MATCHES, PSB_CSYNC_WORD, ControlInstructions, ControlSites,
                       control_offsets)
from .exceptions import PSTATE, VectorKind, set_pstate
from .hooks import UnicornHooks
from .interrupts import Interrupts
from .native_records import CAPTURE_REGS, CAPTURE_SLOT, NativeRecords
from .pe_core import PeCore
from .pmu_feed import PmuFeed
from .prediction import LEARNT_CODE, RECORD_BYTES_BOUND, Prediction
from .runloop import RunLoops
from .sampling import Sampling
from .sync_checks import ERET_WORD, SyncChecks
from .translation import Translation
from .traps import EXCEPTION_LOOP_LIMIT, Traps
from .watchpoints import Watchpoints

# The names this module has always offered (each defined in the module of its concern).
__all__ = ["CAPTURE_REGS", "CAPTURE_SLOT", "CONTROL_MATCHES", "ERET_WORD", "EXCEPTION_LOOP_LIMIT",
           "LEARNT_CODE", "NEVER", "PSB_CSYNC_WORD", "RECORD_BYTES_BOUND", "ControlSites",
           "Machine", "MachineConfig", "MachineExit", "RunResult", "control_offsets"]


class Machine(RunLoops, UnicornHooks, Traps, Interrupts, ControlInstructions, Sampling,
              Prediction, Translation):
    """An AArch64 machine with SPE, a GICv3 subset and semihosting, on Unicorn: one PE, the
    board and the run loops; with ``config.smp`` > 1, the first of several PEs, which builds
    the others (each a :class:`Machine` over the same board, :attr:`smp`).

    Args:
        config: how to build and run it.
        board: the board to attach to (a further PE of a several-PE machine); None: build
            one.
        index: the PE's number (0 for the one that builds the board).
    """

    def __init__(self, config: MachineConfig, *, board: Board | None = None, index: int = 0):
        self.cfg = config
        self.index = index
        self.mpidr = pe_mpidr(index)   # (MPIDR_EL1: its affinity on the board)
        # The PE the run loops drive; the machine reaches its parts under the names below
        # (the same objects).
        core = PeCore(config, index)
        self.pes: list[PeCore] = [core]
        self.uc, self.fast, self.qemu_exception = core.uc, core.fast, core.qemu_exception
        self.sysregs = core.sysregs
        self.intr, self.sysreg_filter, self.control = core.intr, core.sysreg_filter, core.control
        self.counter, self.counter_reads = core.counter, core.counter_reads
        self._rng = core.rng
        self.context = core.context   # (the PE's control state: PeCore.context)
        # (the PE's instruction counts: PeCore)
        self.insns, self._retired_before = core.insns, core.retired_before
        self._insn_index = core.insn_index
        # (the PE's host-side translations: Translator)
        t = core.translator
        self._regime_el, self._translate, self._fetch = t.regime_el, t.translate, t.fetch
        self._stage2_switch, self._in_ram, self._ram_at = t.stage2_switch, t.in_ram, t.ram_at
        self._read_current, self._write_current = t.read_current, t.write_current
        self.guest_errors: list[str] = []
        self._retired_now: int | None = None  # set while a hook reads the clock mid-block
        self._reads_filled = 0   # (ELs whose native counter-read entries are filled)
        # The shared board: RAM, bus, devices, GIC, virtual clock, console input.
        # (with several PEs each has its own time: a PeClock over the board's clock)
        if board is None:
            pe_clock = None
            if config.smp > 1:
                def pe_clock(clock):
                    return PeClock(clock, index, self._clock_retired)
            board = Board(config, self.uc, self._clock_retired, self.sysregs,
                          self._guest_error, self._device_changed, lambda: core.waiting,
                          pe_clock)
        else:
            board.attach_pe(index, self.uc, self.sysregs,
                            PeClock(board.clock, index, self._clock_retired))
        self.board = board
        # (its parts this PE and the machine's users reach directly)
        self.clock, self.bus, self.platform = (self.board.pe_clocks[index], self.board.bus,
                                               self.board.platform)
        self.devices, self.gic = self.board.devices, self.board.gic
        self.gic_cpu = self.board.cpu_interface(index)   # (this PE's CPU interface)
        self._pmbirq_input = self.board.ppi_input(config.board.ppi("pmbirq"), index)
        core.connect(self.gic_cpu.irq_line, self.gic_cpu.fiq_line, self._spu_write,
                     self._pmbirq, self._spu_serror)
        self.spu, self.pmu_events, self.exc = core.spu, core.pmu_events, core.exc
        # The PE's PMUv3 (devices/pmu.py), counting from this machine's sources; none with
        # Unicorn's own library, whose CPU keeps QEMU's PMU (patches/unicorn/0006)
        self.pmu = next((d for d in self.board.pe_devices[index].values()
                         if d.kind == "pmuv3"), None)
        if core.qemu_pmu:
            self.pmu = None
        self.pmu_feed = PmuFeed(self)
        self._pmu_feed = self._buffer_feed = False   # (who wants the model fed: hooks.py)
        if self.pmu is not None:
            self.pmu.connect(self.pmu_feed)
        self.spu.rules.report, self.spu.rules.pc = self._guest_error, lambda: self.pc
        self.spu.rules.psb_visible = self._in_scanned_code
        self.spu.live_context = self.context
        if config.spe.spe_exc:
            self.exc.on_entry = self._pm_on_entry
        self._gic_state = self.gic_cpu.state
        self.checks = core.checks = SyncChecks(self)
        # the instruction budget (MachineConfig.max_insns; None: none)
        self.budget = NEVER if config.max_insns is None else config.max_insns
        # The run loops return at this instruction count (the end of the PE's time slice on a
        # several-PE machine; NEVER: run to the end), and the several-PE machine's scheduler
        # when this PE is its first (None: one PE).
        self.yield_at = NEVER
        self._slice_start = 0   # (instructions retired when the slice began: run_slice)
        # Several PEs: whether a WFE or YIELD ends the slice (RunLoops.exit_on_yield), the
        # yields the engine counted so far, and whether the last slice ended with one
        self._exit_on_yield = False
        self._yields = ctypes.c_uint64(0)
        self.yielded = False
        self.smp = None
        self._interrupted = 0   # (the signal that asked the run to stop: RunLoops.interrupt)
        self.watchpoints = core.watchpoints = Watchpoints(self)
        self.semihost = Semihosting(Path(config.outdir), self._read_current, self._write_current,
                                    console=self.board.console, clock=self.clock.centiseconds,
                                    firmware_console=config.firmware_console)
        # [start, end) of spe_emu's firmware image, whose semihosting console writes are its
        # own lines, not the guest's (set by whoever loads the firmware)
        self.firmware_span: tuple[int, int] | None = None
        self.exit: MachineExit | None = None
        self.psci = Psci() if config.psci else None
        self.images: list[Image] = []
        # Hook the instructions of the images that may misalign SP (SyncChecks): not for an
        # operating system that runs its code elsewhere than it was loaded (a Linux Image).
        self.scan_sp_writers = True
        # population accounting
        self.acct = 0            # instruction index up to which the population is accounted
        self.enabled = False     # StatisticalProfilingEnabled() since the last stop
        self.replan = True
        self._verdicts_added = False   # the native verdict table may hold entries
        # Called as (kind, instruction number) at each PSB CSYNC executed while profiling is
        # enabled ("psb", after its records are written) and each trapped PMS*/PMB* access
        # ("sysreg", before it): the differential tests compare guest memory there.
        self.sync_observer: Callable[[str, int], None] | None = None
        # A debugger (spe-emu run --gdb: tools/gdbstub.py): the fast and raw loops call
        # debug_hook() at their first stop point at or after instruction count debug_stop_at
        # (a count of instructions retired; NEVER: no stop); exception_observer is called as
        # (kind, target EL, ESR or None) after each exception Python takes.
        self.debug_hook: Callable[[], None] | None = None
        self.debug_stop_at = NEVER
        self.exception_observer: Callable[[VectorKind, int, int | None], None] | None = None
        self._psb_addresses: frozenset[int] = frozenset()  # reference mode (the scan's)
        self._ref_deadline = NEVER  # reference mode: instruction count of the next clock event
        self._control_segments: list[ControlSites] = []  # (fast loop: _follow_code_mapping)
        self._runtime_pages: dict[int, int] = {}  # VA page -> PA (_follow_runtime_code)
        self._last_insn = -1  # reference mode: address of the last instruction run
        # FEAT_SPE_PBT: the reference loop's (last taken branch target, 1 + instructions
        # retired before it; 0: none), and the instruction number from which profiling has
        # been enabled without a break (_prev_branch)
        self._ref_pbt = (0, 0)
        self._pbt_since = 0
        # (the reference loop's per-instruction tests of FEAT_SPE_EXC and FEAT_SPE_PBT, as
        # plain attributes: nothing else runs for them while the features are off)
        self._spe_exc_on = bool(config.spe.spe_exc)
        self._pbt_on = bool(config.spe.pbt)
        # model_feed "every": a record shows the model as its operation found it: captured
        # by the native hooks (spe_capture.fed), else read in front of the instruction (no
        # prediction by Python: _predict)
        self._model_every = config.spe.model_feed == "every"
        self._ref_sites: dict[int, int] = {}   # reference loop: PC -> kind (_feed_branch)
        self._model_hook: int | None = None    # (model_hook_last)
        self._feeding = False   # every access and branch feeds the model (_start_model_feed)
        self._feed_paused = False   # ... but not now: model_feed_linger ran out (_on_buffer_write)
        self._linger_event = None
        self._feed_flush = False   # translated code to flush before the run goes on
        self._budget_spent = False
        # (PMBPTR_EL1 page, owner EL) whose page and the next translate (_record_room)
        self._headroom_pages: set[tuple[int, int]] = set()
        # (PC, EL) -> instruction word of captured samples; forgotten with the verdicts.
        self._captured_words: dict[tuple[int, int], int] = {}
        # (VA page, regime) -> the 4 KiB of code read there for learning; forgotten with the
        # verdicts (code or its mapping may have changed).
        self._code_pages: dict[tuple[int, int], bytes] = {}
        self._learnt: set[tuple[int, int]] = set()  # (block, length) given verdicts
        self._expanded: set[tuple[int, int]] = set()  # learnt at a stop, with successors
        self._collect: tuple | None = None
        self._irq_line_value: bool | None = None
        self._ref_enabled: dict[int, bool] | None = None  # reference mode: EL -> enabled
        self._hooks_installed = False
        self.records: NativeRecords | None = None  # fast mode: the native record builder
        # A predicted sample: (instruction number, what was observed, PREDICT_* mode, undo
        # state or None): see _predict() and _settle().
        self._pending: tuple | None = None
        self._relearnt_at: tuple[int, int] | None = None  # (PC, count) of the last relearn
        # How samples were reached (fast mode; for tests and benchmarks): "captured" by the
        # native hook, "predicted" by Python (_predict), "evaluated" (of those two, by
        # evaluating earlier instructions of the block: in Python or by the hook's native
        # evaluator), "dropped" (predicted, but an earlier instruction took an exception),
        # "split" (the block was retranslated to stop at the instruction). The others: at a
        # block's first instruction.
        self.sample_paths = {"predicted": 0, "evaluated": 0, "captured": 0, "dropped": 0,
                             "split": 0}
        if config.smp > 1 and index == 0:
            from .smp import Smp   # (the scheduler builds the other PEs, each a Machine)
            self.smp = Smp(self)

    # ------------------------------------------------------------------ set-up ------------
    def load(self, image: Image) -> None:
        """Copy an ELF image's PT_LOAD segments into RAM (by physical address:
        :meth:`Board.load`); its executable segments are the code this PE scans for control
        instructions (:attr:`images`)."""
        self.board.load(image)
        self.images.append(image)

    def reset(self, entry: int) -> None:
        """Reset state entering ``entry`` at ``boot_el`` (AArch64, Non-secure below EL3, DAIF
        masked, MMU off). Lower ELs are configured so the boot EL is usable: SCR_EL3.{RW, NS,
        HCE} = 1, HCR_EL2.RW = 1, MDCR_EL3.NSPB = 0b11 and MDCR_EL2.E2PB = 0b11 (the
        Profiling Buffer is owned by Non-secure EL1; HPMN = PMCR_EL0.N, its Warm reset value),
        CPACR_EL1.FPEN = 0b11 (SIMD&FP usable).
        SCR_EL3.{API, APK} = 1, CPTR_EL3.EZ = 1, HCR_EL2.{API, APK} = 1 and CPTR_EL2.{TZ,
        TFP} = 0: software booted at EL1 or EL2 finds pointer authentication and SVE
        untrapped by the levels above it, as the arm64 boot protocol requires (Linux
        Documentation/arch/arm64/booting.rst; QEMU's virt has no EL2/EL3 then). Software
        booted at EL3 or EL2 programs the levels below itself."""
        uc = self.uc
        for spec, value in ((SCR_EL3, SCR_EL3.make(RW=1, NS=1, HCE=1, API=1, APK=1)),
                            (HCR_EL2, HCR_EL2.make(RW=1, API=1, APK=1)),
                            (CPTR_EL3, CPTR_EL3.make(EZ=1)),
                            (CPTR_EL2, CPTR_EL2.make()),
                            (MDCR_EL3, MDCR_EL3.make(NSPB=0b11)),
                            (MDCR_EL2, MDCR_EL2.make(E2PB=0b11, HPMN=self.pmu_counters)),
                            (CPACR_EL1, CPACR_EL1.make(FPEN=0b11)),
                            (VMPIDR_EL2, self.mpidr)):
            uc.cpr_write(*spec.encoding.tuple, value)
        self.sysreg_filter.iallu_broadcast = 0   # (HCR_EL2.FB is 0 now)
        el = self.cfg.boot_el
        if el < 2:
            # No EL2 software will program PMSCR_EL2: reset it as a permissive hypervisor
            # would (PA = PCT = 1), so PMSCR_EL1.{PA, PCT} alone decide (§3.3, docs/model.md).
            self.spu.regs["PMSCR_EL2"] = self.spu.table["PMSCR_EL2"].make(PA=1, PCT=1)
        pstate = PSTATE.make(EL=el, SP=1, D=1, A=1, I=1, F=1)
        set_pstate(self.fast, pstate)
        uc.reg_write(A.UC_ARM64_REG_PC, entry)
        self._install_hooks()
        if self.cfg.mode != "raw":
            self.checks.refresh()
        if self.index == 0:
            self.board.start_console_input()

    # ------------------------------------------------------------------ state views --------
    @property
    def pe(self) -> PeCore:
        """The PE the run loops drive: ``pes[0]``, the only one."""
        return self.pes[0]

    @property
    def pc(self) -> int:
        return self.fast.reg(A.UC_ARM64_REG_PC)

    @property
    def irqs_taken(self) -> int:
        """Interrupts the PE has taken so far (:attr:`PeCore.irqs_taken`)."""
        return self.pe.irqs_taken

    @property
    def exceptions_taken(self) -> int:
        """Synchronous exceptions the PE has taken so far (:attr:`PeCore.exceptions_taken`)."""
        return self.pe.exceptions_taken

    def enable_ground_truth(self) -> None:
        """:meth:`PeCore.enable_ground_truth` of the PE."""
        self.pe.enable_ground_truth()

    def ground_truth_events(self) -> dict[int, tuple[int, ...]]:
        """:meth:`PeCore.ground_truth_events` of the PE."""
        return self.pe.ground_truth_events()

    def ground_truth(self) -> dict[int, int]:
        """:meth:`PeCore.ground_truth` of the PE."""
        return self.pe.ground_truth()

    def _guest_error(self, message: str) -> None:
        self.guest_errors.append(message)

    # ------------------------------------------------------------------ virtual time ------
    def sleep(self, ticks: int) -> None:
        """Advance virtual time by ``ticks`` with no instruction retired (a sleep the host
        answers for the guest, as a WFI would wait; events now due fire at the next stop)."""
        self.clock.idle_ticks += max(0, ticks)
        self._counter_reads_changed()
        self.replan = True

    @property
    def pmu_counters(self) -> int:
        """PMCR_EL0.N of the PE's PMU (MDCR_EL2.HPMN's reset value; 0 without one)."""
        return self.pmu.counters if self.pmu is not None else 0

    def _clock_retired(self) -> int:
        """Instructions retired, for the clock: exact at the instruction a hook runs for."""
        return self.insns() if self._retired_now is None else self._retired_now
