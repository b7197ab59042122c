"""The machine: Unicorn + exception model + SPU + board devices + the run loop.

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

from dataclasses import asdict
from pathlib import Path
from typing import Callable


from unicorn import (UC_ARCH_ARM64, UC_ERR_FETCH_UNMAPPED, UC_ERR_READ_UNMAPPED,
                     UC_ERR_WRITE_UNMAPPED, UC_MODE_ARM, Uc, UcError)
from unicorn import arm64_const as A
from unicorn.unicorn_const import UC_CTL_IO_WRITE, UC_CTL_TB_FLUSH

from .. import devices  # noqa: F401 -- the device models register themselves
from .. import native
from ..arch.context import CPACR_EL1, HCR_EL2, MDCR_EL2, MDCR_EL3, SCR_EL3, AccessContext
from ..arch.faults import TranslationFault
from ..arch.firmware_regs import CPTR_EL2, CPTR_EL3
# (registers QEMU implements whose value spe_emu presents: the MRS hook returns it)
from ..arch.id_regs import VPIDR_EL2
from ..spe.pmu_events import PMU_COUNTERS, SpePmuEvents
from ..devices.gicv3 import ICC_REGISTERS, GicDevice
from ..devices.psci import Psci
from ..devices.semihosting import Semihosting
from ..errors import ConfigError, GuestError, GuestRunaway
from ..platform.board import Platform
from ..platform.bus import Bus
from ..platform.clock import VirtualClock
from ..platform.console import ConsoleInput, poll_ticks, usable_input
from ..platform.device import DEVICE_TYPES, Device
from ..platform.loader import Image
from ..platform.sysregs import SysregRegistry
from ..spe.interval import Xorshift64
from ..spe.spu import Spu
from ..sysreg import Access, Replan
from .exceptions import PSTATE, VectorKind, set_pstate
from .fastuc import FastAccess
from .native_records import CAPTURE_REGS, CAPTURE_SLOT, NativeRecords
from .pe import ProcessingElement
from .qemu_state import ExceptionReader
from .watchpoints import Watchpoints
from .config import NEVER, MachineConfig, MachineExit, RunResult
from .controls import (CONTROL_MATCHES, PSB_CSYNC_WORD, ControlInstructions, ControlSites,
                       control_offsets)
from .prediction import (LEARNT_CODE, PREDICT_END, PREDICT_NEXT_PC, RECORD_BYTES_BOUND, Prediction)
from .translation import Translation
from .hooks import UnicornHooks
from .interrupts import Interrupts
from .sampling import ALL_ELS, Sampling
from .traps import (EXCEPTION_LOOP_LIMIT, RNDR_SEED_SALT, WFI_WORD, Traps)
from .sync_checks import ERET_WORD, INSN_BYTES, PSTATE_EL, SyncChecks

# The names this module has always offered (each defined in the module of its concern).
__all__ = ["CAPTURE_REGS", "CAPTURE_SLOT", "CONTROL_MATCHES", "ERET_WORD", "EXCEPTION_LOOP_LIMIT",
           "LEARNT_CODE", "NEVER", "PSB_CSYNC_WORD", "RECORD_BYTES_BOUND", "ControlSites",
           "Machine", "MachineConfig", "MachineExit", "RunResult", "control_offsets"]

PSTATE_IL = PSTATE.field("IL")

# The control registers of an AccessContext, in its field order (scr_el3 ... mdcr_el3).
CONTEXT_ENCODINGS = tuple(r.encoding.tuple for r in (SCR_EL3, HCR_EL2, MDCR_EL2, MDCR_EL3))


INTERRUPT_CONTROLLER = "gicv3"  # the device kind the PE's IRQ/FIQ inputs come from
MASKED_IRQ_POLL = 4096   # instructions between checks while an interrupt is asserted but masked
UNMAPPED_ERRORS = {UC_ERR_READ_UNMAPPED, UC_ERR_WRITE_UNMAPPED, UC_ERR_FETCH_UNMAPPED}
# The ICC registers the native path executes, by name (their encodings, for the registry).
ICC_ENCODINGS = {name: ICC_REGISTERS[name].encoding.tuple for name in GicDevice.NATIVE_ICC}


class Machine(UnicornHooks, Traps, Interrupts, ControlInstructions, Sampling, Prediction,
              Translation):
    """One AArch64 PE with SPE, a GICv3 subset and semihosting, on Unicorn."""

    def __init__(self, config: MachineConfig):
        self.cfg = config
        self.uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
        # QEMU's "max" CPU: ARMv8.x features such as LSE atomics (the default is a Cortex-A72).
        self.uc.ctl_set_cpu_model(A.UC_CPU_ARM64_MAX)
        # Bound the translated-code cache: blocks split for samples are retranslated, and the
        # default 1 GiB buffer would grow with the number of samples until QEMU flushes it.
        self.uc.ctl_set_tcg_buffer_size(config.tcg_buffer_mb << 20)
        if config.cpu.midr is not None:   # (a core preset: VPIDR_EL2 resets to MIDR_EL1)
            self.uc.cpr_write(*VPIDR_EL2.encoding.tuple, config.cpu.midr)
        self.guest_errors: list[str] = []
        self._retired_now: int | None = None  # set while a hook reads the clock mid-block
        self.clock = VirtualClock(self._clock_retired, config.board.counter_hz)
        self.bus = Bus(self.uc)
        self.bus.map_ram("ram", config.ram_base, config.ram_size)
        self.platform = Platform(clock=self.clock, outdir=Path(config.outdir),
                                 guest_error=self._guest_error, console=config.console)
        self.devices: dict[str, Device] = {}
        self.sysregs = SysregRegistry()
        # The interrupt controller first: the other devices' outputs are wired into it.
        specs = sorted(config.board.devices, key=lambda d: d.kind != INTERRUPT_CONTROLLER)
        if not specs or specs[0].kind != INTERRUPT_CONTROLLER:
            raise ConfigError(f"board {config.board.name}: no {INTERRUPT_CONTROLLER} device")
        self.gic = self._add_device(specs[0])
        self._pmbirq_input = self.gic.input(config.board.ppi("pmbirq"))
        for spec in specs[1:]:
            self._add_device(spec)
        self.spu = Spu(config.spe, self._spu_write, self._pmbirq, self._spu_serror)
        self.sysregs.register(self.spu, self.spu.table)
        # SAMPLE_POP/FEED/FILTRATE/COLLISION through QEMU's PMU registers (§2.6)
        self.pmu_events = SpePmuEvents(lambda enc: self.uc.cpr_read(*enc), self.spu.stats)
        self.sysregs.register(self.pmu_events, self.pmu_events.table)
        self._pmu_bucket: tuple[int, bool] | None = None  # (EL, Secure) while enabled
        self._last_sample: tuple[int, int, int] | None = None  # (index, filtered, collided)
        self.spu.rules.report, self.spu.rules.pc = self._guest_error, lambda: self.pc
        self.spu.rules.psb_visible = self._in_scanned_code
        self.spu.live_context = self.context
        self.qemu_exception = ExceptionReader(self.uc)
        self.fast = FastAccess(self.uc)
        self.pe = ProcessingElement(self.fast, self.gic.irq_line, self.gic.fiq_line)
        self.sysregs.register(self.pe.ras, self.pe.ras.table)   # (FEAT_RAS: cpu.ras)
        if config.spe.spe_exc:
            self.pe.on_entry = self._pm_on_entry
        self._gic_state = self.gic.gic.state
        self.checks = SyncChecks(self)
        # the instruction budget (MachineConfig.max_insns; None: none)
        self.budget = NEVER if config.max_insns is None else config.max_insns
        self.watchpoints = Watchpoints(self)
        self.semihost = Semihosting(Path(config.outdir), self._read_current, self._write_current,
                                    console=config.console, clock=self.clock.centiseconds,
                                    firmware_console=config.firmware_console)
        # [start, end) of spe_emu's firmware image, whose semihosting console writes are its
        # own lines, not the guest's (set by whoever loads the firmware)
        self.firmware_span: tuple[int, int] | None = None
        self.exit: MachineExit | None = None
        self.psci = Psci() if config.psci else None
        self._py_irqs_taken = 0        # (taken in Python; the native ones are in self.intr)
        self._py_exceptions_taken = 0
        self.images: list[Image] = []
        # Hook the instructions of the images that may misalign SP (SyncChecks): not for an
        # operating system that runs its code elsewhere than it was loaded (a Linux Image).
        self.scan_sp_writers = True
        # population accounting
        self.acct = 0            # instruction index up to which the population is accounted
        self.enabled = False     # StatisticalProfilingEnabled() since the last stop
        self.ref_insns = 0       # reference mode instruction count
        self.replan = True
        self._stop_requested = False
        self._unmapped: tuple[int, int] | None = None  # (UC_MEM_*, VA) of a failed access
        # The native INTR hook's state (fast mode), also where every mode keeps the exception-
        # loop guard (spe_exception_guard): synchronous exceptions taken in a row with no
        # instruction completed in between (the last at count entry_retired): an abort whose
        # vector aborts again retires nothing, an UNDEFINED vector only its own instruction.
        self.intr = native.SpeIntr(entry_retired=NEVER, loop_limit=EXCEPTION_LOOP_LIMIT,
                                   enabled_els=ALL_ELS)
        self.sysreg_filter = native.SpeSysregFilter()
        self._verdicts_added = False   # the native verdict table may hold entries
        # context (EL 0) -> (IRQ target, FIQ target, ICC access bits) (_native_context)
        self._native_contexts: dict[AccessContext, tuple[int, int, int]] = {}
        self.control = native.SpeControl(python=1)
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
        self._waiting = False  # the PE waits in WFI (_wait_if_wfi)
        self._control_segments: list[ControlSites] = []  # (fast loop: _follow_code_mapping)
        self._runtime_pages: dict[int, int] = {}  # VA page -> PA (_follow_runtime_code)
        self._rng = Xorshift64(config.spe.seed ^ RNDR_SEED_SALT)  # RNDR/RNDRRS values
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
        self.hold_irq_until = 0  # the sampled instruction completes before an IRQ is taken
        self._budget_spent = False
        self._ctx: AccessContext | None = None
        self._xlate: dict[tuple[int, int, bool], int] = {}  # (regime, VA page, write) -> PA page
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
        self._hook_error: BaseException | None = None  # raised by a natively registered hook
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

    # ------------------------------------------------------------------ set-up ------------
    def _add_device(self, spec) -> Device:
        """Build the registered device ``spec.kind``, map it on the bus and wire its
        interrupt outputs into the GIC.

        Raises:
            ConfigError: no device of that kind is registered.
        """
        cls = DEVICE_TYPES.get(spec.kind)
        if cls is None:
            raise ConfigError(f"board {self.cfg.board.name}: no device model {spec.kind!r} "
                              f"(known: {', '.join(sorted(DEVICE_TYPES))})")
        dev = cls(spec, self.platform)
        dev.on_change = self._device_changed
        if spec.size:
            self.bus.map_device(dev, spec.all_regions)
        if dev.SYSREGS is not None:
            self.sysregs.register(dev, dev.SYSREGS, Replan.IRQ)
        for output, intid in spec.irqs:
            dev.irqs[output].connect(self.gic.input(intid))
        self.devices[spec.name] = dev
        return dev

    def _start_console_input(self) -> None:
        """Offer host input (``cfg.stdin``) to the board's console device every
        :func:`~spe_emu.platform.console.poll_ticks` of virtual time
        (:mod:`spe_emu.platform.console`)."""
        stream = usable_input(self.cfg.stdin)
        device = self.devices.get(self.cfg.board.console)
        if stream is None or device is None or not hasattr(device, "feed"):
            return
        self._console_in = (ConsoleInput(stream), device)
        self.clock.schedule(self.clock.ticks() + poll_ticks(self.clock.hz), "console-input",
                            self._poll_console)

    def _poll_console(self, now: int) -> None:
        source, device = self._console_in
        # (while the PE waits in WFI, a terminal is given a moment, so an idle shell does not
        # spin the host; virtual time moves by the poll period either way)
        data = source.read(device.rx_space(), patience=0.02 if self._waiting else 0.0)
        if data:
            device.feed(data)
        if not source.eof:
            self.clock.schedule(now + poll_ticks(self.clock.hz), "console-input",
                                self._poll_console)

    def _device_changed(self) -> None:
        """A device changed state the run loop acts on (an interrupt level, an event on the
        clock): re-plan, and stop at the next block boundary when an interrupt is now
        asserted or an event is due before the planned stop (devices are accessed from
        inside a run, through MMIO or system registers, or at a stop, from a clock event)."""
        self.replan = True
        self._irq_line_value = None
        if self._irq_line():
            # (an interrupt asserted now may be let in by the next DAIF write or ERET; with
            # every line low, those find nothing more to do than before the change)
            self._python_controls()
        if not self._hooks_installed or self.cfg.mode == "raw":
            # (raw: no instruction count to stop by; uc_emu_stop from an MMIO callback would
            # restart the access. The change is seen at the next stop.)
            return
        fast = self.cfg.mode == "fast"
        planned = max(self.insns(), self.counter.stop_at) if fast else self._ref_deadline
        deadline = self.clock.next_deadline_insns()
        if fast and self.counter.poll_at != NEVER and deadline < self.counter.unpolled_at:
            # (the native hook may find the planned poll moot and run on to unpolled_at,
            # which must not pass the new event)
            self.counter.unpolled_at = max(deadline, self.counter.insns)
        if not (self._irq_line() or (deadline != NEVER and deadline < planned)):
            return
        self._stop_at_block_boundary()
        if not fast:
            self._ref_deadline = 0  # stop at the next instruction: the clock may have news

    def _stop_at_block_boundary(self) -> None:
        """Stop the run at the next block boundary: the fast and raw loops' native block hook
        stops once the instruction count reaches ``counter.stop_at``; the reference loop
        (:meth:`_on_every_insn`) stops at its next instruction if an interrupt is then
        deliverable (it re-derives everything else at every instruction)."""
        if self.cfg.mode == "reference":
            self._stop_requested = True
        else:
            self.counter.stop_at = min(self.counter.stop_at, self.counter.insns)
            self.counter.poll_at = NEVER   # (a stop asked for is never a moot poll)

    def load(self, image: Image) -> None:
        """Copy an ELF image's PT_LOAD segments into RAM (by physical address)."""
        for seg in image.segments:
            lo, hi = seg.paddr, seg.paddr + seg.memsz
            if lo < self.cfg.ram_base or hi > self.cfg.ram_base + self.cfg.ram_size:
                raise ConfigError(f"{image.path}: segment {lo:#x}-{hi:#x} is outside RAM "
                                  f"{self.cfg.ram_base:#x}-"
                                  f"{self.cfg.ram_base + self.cfg.ram_size:#x}")
            self.uc.mem_write(seg.paddr, bytes(seg.data))
            if seg.memsz > len(seg.data):
                self.uc.mem_write(seg.paddr + len(seg.data), bytes(seg.memsz - len(seg.data)))
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
                            (MDCR_EL2, MDCR_EL2.make(E2PB=0b11, HPMN=PMU_COUNTERS)),
                            (CPACR_EL1, CPACR_EL1.make(FPEN=0b11))):
            uc.cpr_write(*spec.encoding.tuple, value)
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
        self._start_console_input()

    # ------------------------------------------------------------------ state views --------
    def context(self) -> AccessContext:
        """The control state for access/enable checks. The fast path caches the control
        registers between the points where they can change (MSR to SCR_EL3/HCR_EL2/MDCR_EL2/
        MDCR_EL3, exception entry) and reads PSTATE.EL live every time (an ERET in code no
        control hook covers changes it unseen); the reference mode reads everything live."""
        ctx = self._ctx
        if ctx is None:
            ctx = self._live_context()
            if self.cfg.mode == "fast":
                self._ctx = ctx
                self._native_context(ctx)
            return ctx
        el = PSTATE_EL.get(self.fast.reg(A.UC_ARM64_REG_PSTATE))
        if el != ctx.el:
            ctx = self._ctx = ctx.at_el(el)
        return ctx

    def _native_context(self, ctx: AccessContext) -> None:
        """Give the native CPU-interface path (exception.c) what it needs of a new context:
        where a physical IRQ and FIQ are routed (:meth:`ProcessingElement.interrupt_target`)
        and at which ELs its ICC accesses pass their access checks (the registry's
        verdicts); until then (a write to SCR_EL3, HCR_EL2 ... cleared ``gic_native``) it
        leaves them to Python."""
        h = self.intr
        key = ctx.at_el(0)
        found = self._native_contexts.get(key)
        if found is None:
            ok = 0
            for n, name in enumerate(self.gic.NATIVE_ICC):
                entry = self.sysregs.lookup(ICC_ENCODINGS[name])
                for el in range(4):
                    if (entry is not None and entry.verdict(n == 0, ctx.at_el(el))
                            is Access.OK):
                        ok |= 1 << (3 * el + n)
            found = self._native_contexts[key] = (
                self.pe.interrupt_target(ctx, VectorKind.IRQ),
                self.pe.interrupt_target(ctx, VectorKind.FIQ), ok)
        h.irq_target, h.fiq_target, h.icc_ok = found
        h.gic_native = int(not self.cfg.spe.spe_exc)   # (PSTATE.PM: _pm_on_entry)

    def _live_context(self) -> AccessContext:
        pstate, scr, hcr, mdcr2, mdcr3 = self.fast.snapshot((A.UC_ARM64_REG_PSTATE,),
                                                            CONTEXT_ENCODINGS)
        return AccessContext(el=PSTATE_EL.get(pstate), scr_el3=scr, hcr_el2=hcr,
                             mdcr_el2=mdcr2, mdcr_el3=mdcr3)

    @property
    def irqs_taken(self) -> int:
        """Interrupts taken so far (in Python and natively)."""
        return self._py_irqs_taken + self.intr.irqs_taken

    @property
    def exceptions_taken(self) -> int:
        """Synchronous exceptions taken so far (in Python and natively)."""
        return self._py_exceptions_taken + self.intr.taken

    @property
    def pc(self) -> int:
        return self.fast.reg(A.UC_ARM64_REG_PC)

    def insns(self) -> int:
        """Instructions retired so far (at a stop point)."""
        return self.ref_insns if self.cfg.mode == "reference" else self.counter.insns

    def enable_ground_truth(self) -> None:
        """Count every executed instruction per PC from now on (``spe-emu run
        --ground-truth``): the native block hook counts executions per (block, length), so
        each block takes its slow path (no Python call); with model_feed "every", the native
        hooks also record per PC what the model gives each execution
        (:meth:`ground_truth_events`). Raises ConfigError in reference mode."""
        if self.cfg.mode == "reference":
            raise ConfigError("--ground-truth counts blocks in the native hook: use --mode "
                              "fast or raw")
        native.ground_truth_enable(self.counter)
        if self._model_every and self.cfg.mode == "fast":
            native.ground_truth_events_enable(self.counter)

    def ground_truth_events(self) -> dict[int, tuple[int, ...]]:
        """``{pc: counts}`` (:data:`native.GT_EVENTS`: what the model gave every execution
        of the instruction at pc) since :meth:`enable_ground_truth`, with model_feed "every"
        (else empty)."""
        return dict(sorted(native.ground_truth_events(self.counter).items()))

    def ground_truth(self) -> dict[int, int]:
        """``{pc: instructions executed at pc}`` since :meth:`enable_ground_truth` (empty when
        it was not called); the counts add up to the instructions retired since then."""
        counts: dict[int, int] = {}
        for (addr, n), times in native.ground_truth_blocks(self.counter).items():
            for pc in range(addr, addr + 4 * n, 4):
                counts[pc] = counts.get(pc, 0) + times
        return {pc: n for pc, n in sorted(counts.items()) if n}

    def _retired_before(self, addr: int) -> int:
        """Instructions retired before the instruction at ``addr`` (called from hooks; the native
        hooks have the same rule, spe_native.h ``spe_retired_before``:
        tests/test_counter_reads.py holds them equal)."""
        if self.cfg.mode == "reference":
            return self.ref_insns - 1
        c = self.counter
        return c.insns - c.block_insns + (addr - c.block_start) // 4

    def _insn_index(self, addr: int) -> int:
        """Instruction number of the instruction at ``addr`` when it belongs to the block the
        native hook entered last (fast mode), else the count so far."""
        c = self.counter
        if c.block_start <= addr < c.block_start + 4 * c.block_insns:
            return self._retired_before(addr)
        return c.insns

    def _guest_error(self, message: str) -> None:
        self.guest_errors.append(message)

    # ------------------------------------------------------------------ interrupts ---------

    # ------------------------------------------------------------------ population ---------

    # ------------------------------------------------------------------ sampling -----------

    # ------------------------------------------------------------------ predicted samples --

    # ------------------------------------------------------------------ system registers ---

    def debug_break_before(self, addr: int) -> int:
        """A debugger's breakpoint or watchpoint at the instruction at ``addr``, which has
        not executed (called from a code hook at ``addr``, or at the stop after a watchpoint
        hit undid it): the block the native hook counted ends before it, a pending or captured
        sample at or after it is dropped (planned again: it is taken when the instruction
        runs), the population is accounted up to it, and the run stops there for
        :attr:`debug_hook`. Fast and raw loops only. Returns the instructions retired before
        ``addr`` (the count the guest's counters see at the stop)."""
        c = self.counter
        index = self._insn_index(addr)
        if index:
            self._catch_up(index - 1, addr)
        dropped = c.insns - index
        if dropped:
            c.block_insns -= dropped
            c.insns = index
        if c.block_insns == 0:
            c.block_start = NEVER   # (no instruction of that block ran: no WFI before the PC)
        self._account(index)
        self.debug_stop_at = min(self.debug_stop_at, index)
        self._request_stop()
        return index

    # ------------------------------------------------------------------ hooks --------------

    def sleep(self, ticks: int) -> None:
        """Advance virtual time by ``ticks`` with no instruction retired (a sleep the host
        answers for the guest, as a WFI would wait; events now due fire at the next stop)."""
        self.clock.idle_ticks += max(0, ticks)
        self._counter_reads_changed()
        self.replan = True

    def _clock_retired(self) -> int:
        """Instructions retired, for the clock: exact at the instruction a hook runs for."""
        return self.insns() if self._retired_now is None else self._retired_now

    def _feed_branch(self, last: int, address: int) -> None:
        """Reference loop, model_feed "every": the instruction run last, at ``last``, was
        followed by the one at ``address``; a branch trains the predictor with that outcome,
        as the block hook's ``feed_branch`` (counter.c) does with the branch that ends a
        block, and classified by the same encodings (``Model.classify``)."""
        kind = self._ref_sites.get(last)
        model = self.spu.builder.model
        if kind is None:
            try:
                kind = model.classify(self._fetch(last, self._live_context().el))
            except TranslationFault:
                return
            self._ref_sites[last] = kind
        if kind:
            model.branch(kind, last, address, address != last + INSN_BYTES)

    def _on_every_insn(self, uc: Uc, address: int, size: int, _data) -> None:
        """Reference mode: one population step per instruction, in Python. The Exception level
        is read from PSTATE at every instruction; whether profiling is enabled at each EL is
        re-derived whenever a hook reported a change of control state."""
        if self.watchpoints.dirty:  # (installed again before this instruction: _start)
            uc.emu_stop()
            return
        if self._stop_requested or self._irq_line():
            # (every instruction while an interrupt is asserted: the unmasking MSR DAIFClr or
            # ERET may be in code no control hook covers)
            self._stop_requested = False
            if self._deliverable_irq_target() is not None:
                uc.emu_stop()
                return
        if (self._spe_exc_on and self.spu.exception_may_be_pending()
                and self.spu.exception_target(self.context()) is not None):
            uc.emu_stop()   # (every instruction while one is pending: _take_spe_exception)
            return
        if self.ref_insns >= self.budget:
            self._budget_spent = True
            uc.emu_stop()
            return
        if self.ref_insns >= self._ref_deadline:  # an event on the clock is due
            self._ref_deadline = NEVER
            uc.emu_stop()
            return
        pstate = uc.reg_read(A.UC_ARM64_REG_PSTATE)
        if (self._spe_exc_on and self.spu.pstate_pm
                and self._fetch(address, PSTATE_EL.get(pstate)) == ERET_WORD):
            self._restore_pm()
        if PSTATE_IL.get(pstate) or address % INSN_BYTES:
            # Illegal Execution state or a misaligned PC: taken at the stop (SyncChecks)
            self.checks.il_pending = True
            uc.emu_stop()
            return
        if self._pbt_on and address != self._last_insn + 4:   # (a taken branch)
            self._ref_pbt = (address, self.ref_insns + 1)
        if self._feeding and not self._feed_paused and self._last_insn >= 0:
            self._feed_branch(self._last_insn, address)
        self.ref_insns += 1
        self._last_insn = address
        index = self.ref_insns - 1
        table = self._ref_enabled
        if table is None:
            ctx = self._live_context()
            table = self._ref_enabled = {
                el: self.spu.profiling_enabled(ctx.at_el(el)) for el in range(4)}
        el = PSTATE_EL.get(pstate)
        now = table[el]
        if (self._pmu_bucket[0] if self._pmu_bucket else None) != (el if now else None):
            self.pmu_events.accrue(self._pmu_bucket)
            self._pmu_bucket = (el, self._live_context().at_el(el).is_secure) if now else None
        if now and not self.enabled:
            self.spu.interval.initialize(self.spu.regs["PMSIRR_EL1"])
            self.spu.rules.profiling_started()
            self._pbt_since = index
        self.enabled = now
        self.acct = index
        if now and self.spu.interval.members_to_next_event() == 1:
            self._member_selected(index)
        else:
            self._account(index + 1)
        if address in self._psb_addresses:
            self.spu.rules.psb_csync(now)
            if self.sync_observer is not None and now:
                # (records are written at once here; observed after the PSB CSYNC's own
                # sample, as the fast hook, which runs after a capture at its own instruction)
                self.sync_observer("psb", index)

    # ------------------------------------------------------------------ run loop -----------
    def run(self, progress: Callable[[int], None] | None = None) -> RunResult:
        """Run until the guest exits through semihosting.

        Raises:
            GuestRunaway: more than ``max_insns`` instructions.
            GuestError: an unhandled Unicorn error (unmapped fetch, ...), or the PE waits for
                an interrupt that can never come.
        """
        try:
            if self.cfg.mode == "reference":
                return self._run_reference(progress)
            if self.cfg.mode == "raw":
                return self._run_raw()
            return self._run_fast(progress)
        finally:
            # (also when the run ends with an error: what the guest wrote is kept)
            self.close()

    def close(self) -> None:
        """Close the host files of the run (semihosting handles, device output such as
        console.log); idempotent."""
        self.semihost.close_all()
        for dev in self.devices.values():
            dev.close()

    def _start(self, pc: int, until: int = 0, count: int = 0) -> None:
        self._unmapped = None
        if self._feed_flush:   # (_start_model_feed)
            self._feed_flush = False
            self.uc.ctl(UC_CTL_TB_FLUSH, UC_CTL_IO_WRITE)
        if self.watchpoints.dirty or self.watchpoints.unresolved:
            self.watchpoints.refresh()
        try:
            self.uc.emu_start(pc, until, 0, count)
        except UcError as exc:
            if exc.errno in UNMAPPED_ERRORS and self._unmapped is not None:
                self._external_abort(*self._unmapped)
            else:
                raise GuestError(f"emulation stopped at PC {self.pc:#x} after {self.insns()} "
                                 f"instructions: {exc}") from None
        if self.watchpoints.hit is not None:
            self.watchpoints.take_hit()
        if self._hook_error is not None:
            exc, self._hook_error = self._hook_error, None
            raise exc

    def _run_fast(self, progress) -> RunResult:
        c = self.counter
        budget = self.budget
        last_progress = 0
        irq_check = True  # the IRQ line or its masking may have changed since the last check
        while self.exit is None:
            if self.checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            if c.insns >= self.debug_stop_at:
                self.debug_hook()
                irq_check = True
                continue
            self.clock.run_due(c.insns)
            if self.replan or self._irq_line():
                # (also at a masked-interrupt poll stop: the mask may have been lifted)
                irq_check = True
            if self.replan:
                self._ctx = None
                self._refresh_enabled()
                if self._take_spe_exception():
                    self._refresh_enabled()
                    irq_check = True
            hold = self.hold_irq_until > c.insns
            if irq_check and not hold:
                irq_check = False
                if self._deliver_irq():
                    self._refresh_enabled()
                elif self._irq_line():
                    self._follow_code_mapping()
            self.replan = False
            event = NEVER
            if self.enabled:
                event = self.acct + self.spu.interval.members_to_next_event() - 1
            # (an event on the clock is due at or after the instruction count it converts to)
            unpolled = min(budget, self.hold_irq_until if hold else NEVER,
                           max(self.clock.next_deadline_insns(), c.insns),
                           max(self.debug_stop_at, c.insns))
            poll = self._poll_at(c.insns)
            limit = min(unpolled, poll)
            target = min(event, limit)
            if target < c.insns:  # (never: every stop point is planned ahead of the run)
                raise AssertionError(f"run loop passed its stop point {target} ({c.insns})")
            c.stop_at = target
            c.gap = 0
            if event != NEVER and target == event:
                # Let the native hook capture the samples it can (counter.c).
                # (not with FEAT_SPE_PBT: a sample needs the taken branch before it,
                # _prev_branch, which the native capture does not take)
                gap = (None if self.cfg.spe.pbt
                       else self.spu.interval.fixed_gap(self.spu.regs["PMSIRR_EL1"]))
                if gap is not None:
                    c.event_at, c.limit = event, limit
                    # (a pending predicted sample's record is written first, at _settle)
                    c.cap_budget = max(0, self._record_room(self.context())
                                       - (self._pending is not None))
                    c.gap = gap
            # A poll for an interrupt the GIC asserts is moot once the native CPU-interface
            # path has lowered every GIC output (an IAR read acknowledged it): the native hook
            # then runs on to the stop point without it (counter.c, poll_at).
            polled = (not c.gap and target == poll < min(event, unpolled)
                      and not self._serror_line())
            c.poll_at, c.unpolled_at = (poll, min(event, unpolled)) if polled else (NEVER, NEVER)
            if polled:
                self.control.irq = 1   # (the native GIC path clears it as it lowers them)
            stops = c.stops
            capturing = c.gap
            pc = self.pc
            self._start(pc)
            if polled and c.poll_at == NEVER:
                # (the poll was moot, or a stop was asked for: planned without it)
                limit = min(unpolled, c.unpolled_at)
                target = min(event, limit)
            c.poll_at = NEVER
            self._catch_up(c.insns)
            if self.checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            if c.gap and c.event_at != event:  # samples were captured: plan from what is left
                c.gap = 0
                event = NEVER
                if self.enabled:
                    event = self.acct + self.spu.interval.members_to_next_event() - 1
                target = min(event, limit)
            if self.exit is not None:
                break
            # Stopped by the hook in front of the block that holds instruction #target (and
            # that block ends before the budget or hold point), for the planned sample?
            in_front = c.stops != stops and c.insns < target and c.stop_at == target
            at_sample = (in_front and target == event and not self.replan
                         and c.insns + c.stop_block_insns <= limit)
            if (at_sample and capturing and c.cap_budget
                    and target + capturing >= c.insns + c.stop_block_insns
                    and self._relearnt_at != (self.pc, c.insns)
                    and self._learn_stop_block(self.pc, c.stop_block_insns, target - c.insns)):
                # Stopped in front of the block that holds the sample because the hook had no
                # verdict for it; now it has one: run again from here, the hook captures it
                # (once: if it stops here again, it is predicted or split below).
                self._relearnt_at = (self.pc, c.insns)
                continue
            if at_sample and self._predict(self.pc, target - c.insns, c.stop_block_insns,
                                           target):
                # Stopped in front of the block that holds the sampled instruction, which is
                # predicted. From the block's start: the member has fired, the record is
                # written after the next run (or by a hook on the way). From the block's end
                # or its next PC: the block runs now and stops in front of the next one.
                if self._pending is not None and self._pending[2] in (PREDICT_END,
                                                                      PREDICT_NEXT_PC):
                    c.gap = 0
                    c.stop_at = c.insns + c.stop_block_insns
                    self._start(self.pc)
                    if self._pending is not None:
                        self._settle(c.insns, self.pc)
                    c.stop_at = target
                    if self.exit is not None:
                        break
            elif in_front:
                # Stopped in front of the block that holds instruction #target: run exactly
                # up to it.
                self.sample_paths["split"] += 1
                # (the split block ends just before instruction #target; should the flow
                # leave it -- an exception inside -- the hook stops in front of the first
                # block that would pass the target, with no capture)
                c.gap = 0
                end = self._run_exactly_to(target)
                c.stop_at = target
                if self.exit is not None:
                    break
                if c.insns != target or self.pc != end:
                    # An exception or a hook changed the flow inside the block: re-plan.
                    self._account(min(c.insns, target))
                    continue
            executed_to = c.insns
            if executed_to >= budget:
                self._account(budget)  # members before the budget; the next one never runs
                raise GuestRunaway(f"guest did not exit within {budget} instructions "
                                   f"(PC {self.pc:#x})")
            if (event != NEVER and executed_to == event and c.stop_at == target
                    and not self.replan):
                # (A hook that changed state stopped the run here: re-plan first, the event
                # is recomputed with the new enable state.)
                self._member_selected(event)
            else:
                self._account(executed_to)
            if progress and executed_to - last_progress > 5_000_000:
                last_progress = executed_to
                progress(executed_to)
            if self.exit is None and c.block_start + 4 * c.block_insns == self.pc:
                # The last block run ended where the PC is: if it ended with a WFI, that WFI
                # executed in this run (Unicorn returns after it, or a planned stop fell
                # right after it).
                self._wait_if_wfi()
        return self._result()

    def _run_exactly_to(self, target: int) -> int:
        """Stopped in front of the block that holds instruction #``target`` (a count of
        instructions): run from the PC up to that instruction, and return the address it
        stops at. The cached block starting at the PC runs past the target, so it is
        invalidated ([pc, end) overlaps it; a cached block starting at the target itself
        survives) and retranslated with the exit baked in."""
        pc = self.pc
        end = pc + INSN_BYTES * (target - self.counter.insns)
        self.uc.ctl_remove_cache(pc, end)
        self._start(pc, end)
        if self.pc == end:
            # (the block just translated ends with Unicorn's exit: _unicorn_exit; dropped so
            # that later runs through it do not stop there)
            self.uc.ctl_remove_cache(pc, end)
        return end

    def _poll_at(self, insns: int) -> int:
        """While the GIC asserts an interrupt that PSTATE masks, the instruction count at which
        to look again (a safety net: the block hook's unmasking watch sees the unmasking
        itself, docs/model.md "Interrupts"); else NEVER."""
        return insns + MASKED_IRQ_POLL if self._irq_line() else NEVER

    def _wait_if_wfi(self) -> None:
        """If the instruction before the PC, just executed, is a WFI (Unicorn returns from
        emu_start after it: QEMU halts the PE), the PE waits for a wake-up event (Arm ARM
        D1.6.2 "Wait For Interrupt"): an interrupt the GIC asserts, or a pending virtual IRQ
        or FIQ, wakes it even when PSTATE masks it; otherwise virtual time advances to the
        next event on the clock.

        Raises:
            GuestError: nothing is scheduled that could ever wake the PE.
        """
        pc = self.pc
        try:
            word = self._fetch(pc - 4, self.context().el)
        except (TranslationFault, UcError):
            return
        if (word != WFI_WORD or self._irq_line()
                or self.pe.virtual_interrupt_pending(self.context())):
            return
        self._counter_reads_changed()
        # Events that assert no interrupt (a console poll that found no input) do not end
        # the wait: the result is the same whether input is attached or not.
        self._waiting = True
        try:
            while not self._irq_line():
                if not self.clock.wait_for_event():
                    raise GuestError(f"WFI at PC {pc - 4:#x} with no interrupt that can wake "
                                     f"the PE and no event scheduled")
                self.clock.run_due()
        finally:
            self._waiting = False

    def _run_raw(self) -> RunResult:
        """No SPE model: the native block hook counts instructions and stops in front of the
        block that holds the next stop point (the budget, the next clock event, a
        masked-interrupt poll); that block is then run exactly up to it, as in the fast
        loop, so ``max_insns`` holds exactly on every path."""
        c = self.counter
        budget = self.budget
        while self.exit is None:
            if c.insns >= self.debug_stop_at:
                self.debug_hook()
                continue
            self.clock.run_due(c.insns)
            self._deliver_irq()
            self.replan = False
            if c.insns >= budget:
                raise GuestRunaway(f"guest did not exit within {budget} instructions "
                                   f"(PC {self.pc:#x})")
            target = c.stop_at = min(budget, max(self.clock.next_deadline_insns(), c.insns),
                                     self._poll_at(c.insns), max(self.debug_stop_at, c.insns))
            stops = c.stops
            self._start(self.pc)
            if self.checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            if self.exit is None and c.stops != stops and c.insns < target == c.stop_at:
                # In front of the block holding instruction #target: run exactly up to it.
                self._run_exactly_to(target)
            if (self.exit is None and not self.replan and c.insns < budget
                    and c.block_start + 4 * c.block_insns == self.pc):
                self._wait_if_wfi()
        return self._result()

    def _run_reference(self, progress) -> RunResult:
        while self.exit is None:
            if self.checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            self.clock.run_due()
            self._ref_enabled = None
            self._take_spe_exception()
            self._deliver_irq()
            self.replan = False
            self._ref_deadline = min(self.clock.next_deadline_insns(),
                                     self._poll_at(self.ref_insns))
            self._start(self.pc)
            if self.checks.after_stop():  # PC alignment, Illegal Execution state
                continue
            if self._budget_spent:
                raise GuestRunaway(f"guest did not exit within {self.cfg.max_insns} "
                                   f"instructions (PC {self.pc:#x})")
            if self.exit is None and self._last_insn + 4 == self.pc:
                self._wait_if_wfi()  # (the last instruction run is the one before the PC)
        return self._result()

    def result(self) -> RunResult:
        """What the run has produced so far: the counts of a run that stopped on an error
        too (:class:`RunResult`)."""
        return self._result()

    def _result(self) -> RunResult:
        """(:meth:`run` closes the run's files on every way out.)"""
        st = self.spu.stats
        self.pmu_events.accrue(self._pmu_bucket)
        return RunResult(
            exit_status=self.exit.status if self.exit else None,
            exit_reason=self.exit.reason if self.exit else None,
            exit_via=self.exit.via if self.exit else None,
            instructions=self.insns(), population=st.population, samples=st.samples,
            records_written=st.records_written, bytes_written=st.bytes_written,
            filtered_out=st.filtered_out, management_events=len(st.management_events),
            irqs_taken=self.irqs_taken, exceptions_taken=self.exceptions_taken,
            console=self.semihost.console_output, guest_errors=list(self.guest_errors),
            firmware_console=self.semihost.firmware_output,
            driver_rules=[asdict(b) for b in self.spu.rules.breaks],
            pmu_events=self.pmu_events.event_totals(),
            model={"feed": self.cfg.spe.model_feed, **self.spu.builder.model.stats()},
            model_config={**self.cfg.spe.model_config(),
                          "midr": self.cfg.cpu.describe()["midr"]},
            pmbsr=self.spu.regs["PMBSR_EL1"], pmbptr=self.spu.regs["PMBPTR_EL1"],
            pmsicr=self.spu.interval.value)
