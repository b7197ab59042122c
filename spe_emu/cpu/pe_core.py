"""One processing element of a machine as an object of its own: the Unicorn instance its
architectural state lives in, with the per-PE parts built around it -- the native structs its
hooks share with the run loop (instruction counter, counter reads, system-register filter,
control-instruction state, INTR hook state), its system-register registry, its SPU and the
PMU events it counts, its exception model (:class:`~spe_emu.cpu.pe.ProcessingElement`, with
the RAS registers), its host-side translations (:class:`~spe_emu.cpu.translation.Translator`),
its PRNG for RNDR, and the synchronous checks and watchpoints that watch it; and its control
state as the access and enable checks see it (:meth:`PeCore.context`: PSTATE.EL with SCR_EL3,
HCR_EL2, MDCR_EL2 and MDCR_EL3, cached in fast mode, with what the native CPU-interface path
derives from it); and its counts: instructions retired (:meth:`PeCore.insns`, per PC with
ground truth), interrupts and exceptions taken, and whether it waits in WFI; and what stops
its runs (a stop asked for, an access to nothing, an exception raised in a hook, an
interrupt held until a sampled instruction completes), and the accounting of the SPE PMU
events it counts.

:class:`~spe_emu.cpu.machine.Machine` holds its PEs in ``pes`` (one today; the run loops
drive ``pes[0]``) next to the shared :class:`~spe_emu.cpu.board.Board`. The trap handlers,
hooks, sampling and prediction that act on a PE are still parts of the machine (its mixins),
which reaches this PE's parts under the same names as before (``machine.uc``,
``machine.counter``, ``machine.spu``, ``machine.context``, ``machine.insns`` ...: the same
objects)."""

from __future__ import annotations

import ctypes
from typing import Any, Callable

from unicorn import UC_ARCH_ARM64, UC_CTL_IO_WRITE, UC_MODE_ARM, Uc, UcError
from unicorn import arm64_const as A
from unicorn.unicorn_py3.unicorn import uclib

from .. import native
from ..arch.context import HCR_EL2, MDCR_EL2, MDCR_EL3, SCR_EL3, AccessContext
from ..arch.id_regs import VPIDR_EL2
from ..devices.gicv3 import ICC_REGISTERS, GicDevice
from ..errors import ConfigError
from ..platform.sysregs import SysregRegistry
from ..spe.interval import Xorshift64
from ..spe.pmu_events import SpePmuEvents
from ..spe.spu import Spu
from ..sysreg import Access
from .config import NEVER, MachineConfig
from .exceptions import PSTATE, VectorKind
from .fastuc import FastAccess
from .native_records import CAPTURE_REGS
from .pe import ProcessingElement
from .qemu_state import ExceptionReader
from .sampling import ALL_ELS
from .sync_checks import PSTATE_EL
from .translation import Translator
from .traps import EXCEPTION_LOOP_LIMIT, RNDR_SEED_SALT

# The control registers of an AccessContext, in its field order (scr_el3 ... mdcr_el3).
CONTEXT_ENCODINGS = tuple(r.encoding.tuple for r in (SCR_EL3, HCR_EL2, MDCR_EL2, MDCR_EL3))

# The ICC registers the native path executes, by name (their encodings, for the registry).
ICC_ENCODINGS = {name: ICC_REGISTERS[name].encoding.tuple for name in GicDevice.NATIVE_ICC}


class PeCore:
    """One PE (see the module's docstring).

    Args:
        config: the machine's configuration (``tcg_buffer_mb``, ``cpu.midr``, ``mode``,
            ``ram_base``, ``ram_size``, ``spe.seed``).
        index: the PE's number on its machine (0 for the first).
    """

    def __init__(self, config: MachineConfig, index: int = 0):
        self.cfg = config
        self.index = index
        self.uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
        # QEMU's "max" CPU: ARMv8.x features such as LSE atomics (the default is a Cortex-A72).
        self.uc.ctl_set_cpu_model(A.UC_CPU_ARM64_MAX)
        # Without QEMU's PMU, whose counts follow host time: every PMU register UNDEFs and
        # reaches spe_emu's (devices/pmu.py). Unicorn's own library has no such control.
        try:
            self.uc.ctl(native.UC_CTL_ARM_PMU, UC_CTL_IO_WRITE, ctypes.c_int(0))
            self.qemu_pmu = False
        except UcError:
            self.qemu_pmu = True
        # Bound the translated-code cache: blocks split for samples are retranslated, and the
        # default 1 GiB buffer would grow with the number of samples until QEMU flushes it.
        self.uc.ctl_set_tcg_buffer_size(config.tcg_buffer_mb << 20)
        if config.cpu.midr is not None:   # (a core preset: VPIDR_EL2 resets to MIDR_EL1)
            self.uc.cpr_write(*VPIDR_EL2.encoding.tuple, config.cpu.midr)
        self.fast = FastAccess(self.uc)
        self.qemu_exception = ExceptionReader(self.uc)
        # The PE's system registers that Python emulates (the board's devices with
        # registers, the SPU, the PMU events, RAS): :meth:`connect`.
        self.sysregs = SysregRegistry()
        # The native INTR hook's state (fast mode), also where every mode keeps the exception-
        # loop guard (spe_exception_guard): synchronous exceptions taken in a row with no
        # instruction completed in between (the last at count entry_retired): an abort whose
        # vector aborts again retires nothing, an UNDEFINED vector only its own instruction.
        self.intr = native.SpeIntr(entry_retired=NEVER, loop_limit=EXCEPTION_LOOP_LIMIT,
                                   enabled_els=ALL_ELS)
        self.sysreg_filter = native.SpeSysregFilter()
        self.control = native.SpeControl(python=1)
        self.counter = self._new_counter(config)
        # Counter reads (CNTPCT_EL0/CNTVCT_EL0) answered natively (fast and raw modes; the
        # hooks fill it in: UnicornHooks._install_hooks); None in reference mode.
        self.counter_reads = (native.SpeCounterReads() if config.mode in ("fast", "raw")
                              else None)
        # Its host-side translations (a trapped instruction's fetch, semihosting blocks,
        # Profiling Buffer writes, code read for learning), cached per page
        self.translator = Translator(self.fast, self.uc, self.sysreg_filter, config.ram_base,
                                     config.ram_size)
        self.rng = Xorshift64(config.spe.seed ^ RNDR_SEED_SALT)  # RNDR/RNDRRS values
        self._ctx: AccessContext | None = None   # (context(), fast mode)
        self.ref_insns = 0   # reference mode instruction count (the fast modes': counter)
        self.py_irqs_taken = 0   # (taken in Python; the native ones are in self.intr)
        self.py_exceptions_taken = 0
        self.waiting = False   # the PE waits in WFI (Machine._wait_if_wfi)
        # On a several-PE machine (:mod:`.smp`): the PE waits in WFI for the scheduler to
        # wake it; it is powered on (PSCI CPU_ON; the boot PE from reset)
        self.parked = False
        self.powered = index == 0
        # What stopped or is to stop its run: the reference loop stops at its next
        # instruction (Machine._stop_at_block_boundary); (UC_MEM_*, VA) of an access that
        # reached nothing (Machine._on_unmapped); an exception raised by a natively
        # registered hook (Machine._guarded), raised again when the run returns.
        self.stop_requested = False
        self.unmapped: tuple[int, int] | None = None
        self.hook_error: BaseException | None = None
        self.hold_irq_until = 0  # the sampled instruction completes before an IRQ is taken
        # The SPE PMU events' accounting: (EL, Secure) they accrue to while profiling is
        # enabled, and (index, filtered, collided) of the last sample (Machine._pmu_catch_up)
        self.pmu_bucket: tuple[int, bool] | None = None
        self.last_sample: tuple[int, int, int] | None = None
        # context (EL 0) -> (IRQ target, FIQ target, ICC access bits) (_native_context)
        self._native_contexts: dict[AccessContext, tuple[int, int, int]] = {}
        # Built by connect() once the board exists:
        self.spu: Spu
        self.pmu_events: SpePmuEvents
        self.exc: ProcessingElement
        # Set by the machine (they watch the PE through the machine's handlers):
        self.checks: Any = None        # SyncChecks
        self.watchpoints: Any = None   # Watchpoints

    @staticmethod
    def _new_counter(config: MachineConfig) -> native.SpeCounter:
        """The native block hook's instruction counter, with nothing planned."""
        c = native.SpeCounter(emu_stop=ctypes.cast(uclib.uc_emu_stop, ctypes.c_void_p).value)
        c.stop_at = c.event_at = c.poll_at = NEVER
        c.feed_until = NEVER
        # (PSTATE.EL for the PMU's per-EL tracking, spe_native.h pmu_on)
        c.pstate_id = A.UC_ARM64_REG_PSTATE
        el = PSTATE.field("EL")
        c.el_lsb, c.el_mask = el.lsb, el.mask >> el.lsb
        c.reg_read_batch = ctypes.cast(uclib.uc_reg_read_batch, ctypes.c_void_p).value
        c.vmem_translate = ctypes.cast(uclib.uc_vmem_translate, ctypes.c_void_p).value
        c.mem_read = ctypes.cast(uclib.uc_mem_read, ctypes.c_void_p).value
        flush = getattr(uclib, "uc_mem_trace_flush", None)   # (patches/unicorn/0011)
        c.trace_flush = ctypes.cast(flush, ctypes.c_void_p).value if flush else None
        c.ram_base, c.ram_size = config.ram_base, config.ram_size
        for i, rid in enumerate(CAPTURE_REGS):
            c.reg_ids[i] = rid
        return c

    def connect(self, irq: Callable[[], bool], fiq: Callable[[], bool],
                spu_write: Callable, pmbirq: Callable, spu_serror: Callable) -> None:
        """Build the parts wired to the board and the machine's handlers, after the board's
        devices registered their system registers (in this order): the SPU (its buffer
        writes, PMBIRQ output and SError go to ``spu_write``, ``pmbirq``, ``spu_serror``),
        the SPE PMU events, and the exception model, whose IRQ and FIQ inputs are the
        interrupt controller's outputs ``irq`` and ``fiq``."""
        self.spu = Spu(self.cfg.spe, spu_write, pmbirq, spu_serror)
        self.sysregs.register(self.spu, self.spu.table)
        # SAMPLE_POP/FEED/FILTRATE/COLLISION per context, for the PMU (§2.6)
        self.pmu_events = SpePmuEvents(self.spu.stats)
        self.exc = ProcessingElement(self.fast, irq, fiq)
        self.sysregs.register(self.exc.ras, self.exc.ras.table)   # (FEAT_RAS: cpu.ras)

    @property
    def pc(self) -> int:
        return self.fast.reg(A.UC_ARM64_REG_PC)

    # -- counts ----------------------------------------------------------------------------
    @property
    def irqs_taken(self) -> int:
        """Interrupts taken so far (in Python and natively)."""
        return self.py_irqs_taken + self.intr.irqs_taken

    @property
    def exceptions_taken(self) -> int:
        """Synchronous exceptions taken so far (in Python and natively)."""
        return self.py_exceptions_taken + self.intr.taken

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
        if self.cfg.spe.model_feed == "every" and self.cfg.mode == "fast":
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

    def retired_before(self, addr: int) -> int:
        """Instructions retired before the instruction at ``addr`` (called from hooks; the native
        hooks have the same rule, spe_native.h ``spe_retired_before``:
        tests/test_counter_reads.py holds them equal)."""
        if self.cfg.mode == "reference":
            return self.ref_insns - 1
        c = self.counter
        return c.insns - c.block_insns + (addr - c.block_start) // 4

    def insn_index(self, addr: int) -> int:
        """Instruction number of the instruction at ``addr`` when it belongs to the block the
        native hook entered last (fast mode), else the count so far."""
        c = self.counter
        if c.block_start <= addr < c.block_start + 4 * c.block_insns:
            return self.retired_before(addr)
        return c.insns

    # -- the control state -----------------------------------------------------------------
    def context(self) -> AccessContext:
        """The control state for access/enable checks. The fast path caches the control
        registers between the points where they can change (MSR to SCR_EL3/HCR_EL2/MDCR_EL2/
        MDCR_EL3, exception entry: :meth:`forget_context`) and reads PSTATE.EL live every
        time (an ERET in code no control hook covers changes it unseen); the reference mode
        reads everything live."""
        ctx = self._ctx
        if ctx is None:
            ctx = self.live_context()
            if self.cfg.mode == "fast":
                self._ctx = ctx
                self._native_context(ctx)
            return ctx
        el = PSTATE_EL.get(self.fast.reg(A.UC_ARM64_REG_PSTATE))
        if el != ctx.el:
            ctx = self._ctx = ctx.at_el(el)
        return ctx

    def forget_context(self) -> None:
        """The control registers may have changed (an exception entry, an MSR to one of
        them): :meth:`context` reads them again."""
        self._ctx = None

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
            for n, name in enumerate(GicDevice.NATIVE_ICC):
                entry = self.sysregs.lookup(ICC_ENCODINGS[name])
                for el in range(4):
                    if (entry is not None and entry.verdict(n == 0, ctx.at_el(el))
                            is Access.OK):
                        ok |= 1 << (3 * el + n)
            found = self._native_contexts[key] = (
                self.exc.interrupt_target(ctx, VectorKind.IRQ),
                self.exc.interrupt_target(ctx, VectorKind.FIQ), ok)
        h.irq_target, h.fiq_target, h.icc_ok = found
        h.gic_native = int(not self.cfg.spe.spe_exc)   # (PSTATE.PM: Machine._pm_on_entry)

    def live_context(self) -> AccessContext:
        """The control state read now (nothing cached)."""
        pstate, scr, hcr, mdcr2, mdcr3 = self.fast.snapshot((A.UC_ARM64_REG_PSTATE,),
                                                            CONTEXT_ENCODINGS)
        return AccessContext(el=PSTATE_EL.get(pstate), scr_el3=scr, hcr_el2=hcr,
                             mdcr_el2=mdcr2, mdcr_el3=mdcr3)
