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

import bisect
import ctypes
import struct
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, NamedTuple


from unicorn import (UC_ARCH_ARM64, UC_ERR_FETCH_UNMAPPED, UC_ERR_READ_UNMAPPED,
                     UC_ERR_WRITE_UNMAPPED, UC_HOOK_BLOCK, UC_HOOK_CODE, UC_HOOK_INSN, UC_HOOK_INTR,
                     UC_HOOK_MEM_READ, UC_HOOK_MEM_UNMAPPED, UC_HOOK_MEM_WRITE,
                     UC_MEM_FETCH_UNMAPPED, UC_MEM_WRITE_UNMAPPED,
                     UC_MODE_ARM, UC_PROT_EXEC, Uc, UcError)
from unicorn import arm64_const as A
from unicorn.unicorn_const import UC_CTL_IO_WRITE, UC_CTL_TB_FLUSH
from unicorn.unicorn_py3.arch.arm64 import UcRegCP64
from unicorn.unicorn_py3.unicorn import uclib

from .. import devices  # noqa: F401 -- the device models register themselves
from .. import native
from ..arch import mmu
from ..arch.context import (CONTEXTIDR_EL1, CONTEXTIDR_EL2, CPACR_EL1, HCR_EL2, MDCR_EL2, MDCR_EL3,
                            SCR_EL3, SCTLR_ENC, TTBR0_ENC, TTBR1_EL1, AccessContext, banked)
from ..arch.faults import TranslationFault
from ..arch.firmware_regs import CPTR_EL2, CPTR_EL3
# (registers QEMU implements whose value spe_emu presents: the MRS hook returns it)
from ..arch.id_regs import (ID_AA64DFR0_EL1, ID_AA64DFR2_EL1, ID_AA64PFR0_EL1, MIDR_EL1,
                           VPIDR_EL2)
from ..spe.pmu_events import PMU_COUNTERS, PMUVER_V3P1, SpePmuEvents
from ..devices.gicv3 import ICC_REGISTERS, GicDevice
from ..devices.psci import Psci, PsciAction
from ..devices.semihosting import SemihostExit, Semihosting
from ..errors import ConfigError, GuestError, GuestRunaway
from ..platform.board import Platform
from ..platform.bus import Bus
from ..platform.clock import VirtualClock
from ..platform.console import ConsoleInput, poll_ticks, usable_input
from ..platform.device import DEVICE_TYPES, Device
from ..platform.loader import PF_X, Image, Segment
from ..platform.sysregs import SysregEntry, SysregRegistry
from ..spe import exc as spe_exc
from ..spe import packets as P
from ..spe.interval import Xorshift64
from ..spe.records import Sample
from ..spe.spu import Spu
from ..sysreg import MASK64, Access, Replan
from . import a64
from .exceptions import (ABORT_ISS, EC, ELR_REG, ESR, PSTATE, SPSR_ENC, VectorKind, esr,
                         exception_model, set_pstate, sysreg_trap_iss)
from .fastuc import FastAccess
from .native_records import (CAPTURE_REGS, CAPTURE_SLOT, NativeRecords, block_templates, plan_steps)
from .pe import ISR_EL1, ProcessingElement
from .qemu_state import ExceptionReader, exception_layout
from .ras import PRESENTED_RAS
from .watchpoints import DEBUG_WRITES, SHADOWED, Watchpoints
from .config import NEVER, MachineConfig, MachineExit, RunResult
from .translation import Translation
from .sync_checks import (ABORT_ECS, ERET_WORD, INSN_BYTES, PSTATE_EL, SP_ALIGN,
                          SP_ELX_WRITES,
                          SPSR, SyncChecks)

PSTATE_IL = PSTATE.field("IL")
SEMIHOST_IMM = 0xF000
INTNO_UNDEF, INTNO_SVC, INTNO_PREFETCH_ABORT, INTNO_DATA_ABORT = 1, 2, 3, 4
INTNO_BKPT, INTNO_HVC, INTNO_HYP_TRAP, INTNO_SMC = 7, 11, 12, 13
# QEMU exception numbers that are synchronous exceptions spe_emu takes as QEMU routed them.
QEMU_SYNC_EXCEPTIONS = {INTNO_UNDEF, INTNO_SVC, INTNO_PREFETCH_ABORT, INTNO_DATA_ABORT,
                        INTNO_BKPT, INTNO_HVC, INTNO_HYP_TRAP, INTNO_SMC}
# ESR_ELx.EC values for which FAR_ELx holds the faulting address (Arm ARM D19.2): Instruction
# Abort (lower/same EL), PC alignment, Data Abort (lower/same EL), Watchpoint (lower/same EL).
FAR_ECS = {0x20, 0x21, 0x22, 0x24, 0x25, 0x34, 0x35}

WFI_WORD = 0xD503207F
# Minimum EL that can access a system register, by its op1 (Arm ARM C5.3 "op1 encodes the
# lowest Exception level that can access the register"; op1 == 3 is EL0-accessible).
OP1_MIN_EL = {0: 1, 1: 1, 2: 1, 3: 0, 4: 2, 5: 2, 6: 3, 7: 1}
# Writes that change the enable/owner/routing context (MSR hook: re-plan after them).
WATCHED_WRITES = {r.encoding.tuple for r in (SCR_EL3, HCR_EL2, MDCR_EL2, MDCR_EL3)}
DAIF_ENC = (3, 3, 4, 2, 1)  # MSR DAIF, Xt
# The control registers of an AccessContext, in its field order (scr_el3 ... mdcr_el3).
CONTEXT_ENCODINGS = tuple(r.encoding.tuple for r in (SCR_EL3, HCR_EL2, MDCR_EL2, MDCR_EL3))
# Writes that change stage 1 translation (SCTLR, TTBR0/1, TCR of EL1/EL2/EL3): flush the
# host-side translation cache.
TRANSLATION_WRITES = {enc for table in (SCTLR_ENC, TTBR0_ENC, banked(TTBR1_EL1), mmu.TCR_ENC)
                      for enc in table.values()} | {mmu.VTTBR_EL2.encoding.tuple,
                                                     mmu.VTCR_EL2.encoding.tuple}
CRN_TLBI = 8
# Writes that may turn stage 2 of the EL1&0 regime on or off (HCR_EL2.{VM, E2H, TGE},
# SCR_EL3.NS): the host-side translations are flushed when they do.
STAGE2_SWITCHES = {HCR_EL2.encoding.tuple, SCR_EL3.encoding.tuple}
PSB_CSYNC_WORD = 0xD503223F  # HINT #17 (Arm ARM C6.2 PSB CSYNC)
# The hooked control instructions, (mask, value) over the instruction word. (An unmasking
# MSR DAIFClr or MSR DAIF is seen by the native block hook's unmasking watch, at the block
# after it: QEMU ends a block after MSR DAIFClr. Hooks on them -- hundreds in a kernel --
# slowed every translation: Unicorn looks through all code hooks per instruction.)
CONTROL_MATCHES = ((0xFFFFFFFF, ERET_WORD), (0xFFFFFFFF, PSB_CSYNC_WORD))
# PSTATE.{A, I, F}: an unmasking may let an asserted interrupt (or virtual SError) in
UNMASK_WATCH = PSTATE.make(A=1, I=1, F=1)
UNMASK_INTERRUPTS = PSTATE.make(I=1, F=1)   # (IRQ and FIQ: D1.3.6)
UNMASK_SERROR = PSTATE.make(A=1)              # (a physical or virtual SError)


@lru_cache(maxsize=64)
def control_offsets(code: bytes) -> tuple[int, ...]:
    """Byte offsets of the ERET and PSB CSYNC words in ``code`` (A64 words at multiples of
    4; a trailing partial word is ignored), found natively (:func:`native.word_match`: a
    kernel image's tens of MiB take milliseconds), remembered for the process: every run of
    a program loads the same segments."""
    return tuple(i * INSN_BYTES for i in native.word_match(code, CONTROL_MATCHES)[0])


# Upper bound on the bytes of one record before alignment padding (the largest record, with
# both Context packets, PC, operation type, data VA and PA, the previous branch target,
# events, three counters, a Data Source packet and a timestamp, is 72 bytes;
# tests/test_prediction.py checks the bound).
RECORD_BYTES_BOUND = 128
# Pages from PMBPTR_EL1's on that captured samples' records may fill before Python checks again.
RECORD_WINDOW_PAGES = 4
PREDICTION_CACHE_ENTRIES = 1 << 16  # code sequences whose predictability is remembered
SUCCESSOR_BLOCKS = 8     # blocks learnt ahead at a stop for lack of a verdict
LEARNT_PAGES_MAX = 256   # code pages whose learning is kept for the process (LearntCode)
INTERRUPT_CONTROLLER = "gicv3"  # the device kind the PE's IRQ/FIQ inputs come from
TCG_MAX_INSNS = 256      # the longest translated block seen from Unicorn 2.1 (instructions)
RUNTIME_CODE_PAGES = 64  # pages scanned either side of run-time loaded code (_follow_runtime_code)
PAGE_BYTES = 0x1000
EXCEPTION_LOOP_LIMIT = 10_000  # exceptions in a row raised by their vector's first instruction
MASKED_IRQ_POLL = 4096   # instructions between checks while an interrupt is asserted but masked
PREDICT_NO, PREDICT_START, PREDICT_NEXT_PC, PREDICT_END, PREDICT_EVAL = 0, 1, 2, 3, 4
# SYS with CRn == 7 and CRm == 1 or 5 is an instruction cache invalidation (IC IALLUIS,
# IC IALLU, IC IVAU): code may have changed.
CRN_CACHE, CRM_IC = 7, (1, 5)
# The SYS operations (op0 == 1) Python acts on: every TLBI (CRn == 8) and IC (CRn == 7, CRm
# 1 or 5); the native SYS hook leaves the others (DC ..., AT ...) to QEMU.
PYTHON_SYS = tuple((1, op1, crn, crm, op2) for op1 in range(8) for op2 in range(8)
                   for crn, crms in ((8, range(16)), (CRN_CACHE, CRM_IC)) for crm in crms)
# uc_cb_hookcode_t: (uc, address, size, user_data)
SYS_HOOK = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                            ctypes.c_void_p)  # (uc, reg, uc_arm64_cp_reg *, user data)
# CNTPCT_EL0 and CNTVCT_EL0, in the native table's order (spe_native.h spe_counter_reads)
COUNTER_READS = ((3, 3, 14, 0, 1), (3, 3, 14, 0, 2))
# RNDR and RNDRRS (Arm ARM D19.2, FEAT_RNG), answered from a seeded generator
RANDOM_NUMBER_REGS = ((3, 3, 2, 4, 0), (3, 3, 2, 4, 1))
RNDR_SEED_SALT = 0x524E4452  # "RNDR": the generator's stream differs from the interval's
UNMAPPED_ERRORS = {UC_ERR_READ_UNMAPPED, UC_ERR_WRITE_UNMAPPED, UC_ERR_FETCH_UNMAPPED}
CODE_HOOK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32,
                             ctypes.c_void_p)
# uc_cb_hookintr_t: (uc, intno, user_data)
INTR_HOOK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p)
ALL_ELS = 0b1111
# The ICC registers the native path executes, by name (their encodings, for the registry).
ICC_ENCODINGS = {name: ICC_REGISTERS[name].encoding.tuple for name in GicDevice.NATIVE_ICC}
# UNDEFs that may be spe_emu's to emulate (native INTR hook: (mask, value) of the word): MRS/
# MSR of a system register (op0 2 or 3; L either way) and semihosting's HLT #0xF000.
PYTHON_UNDEFS = ((0xFFD00000, 0xD5100000), (0xFFFFFFFF, 0xD4400000 | 0xF000 << 5))
# uc_hook_add (variadic): a function object of our own, without the binding's argtypes, so
# the binding's own prototype is left as it is (item access makes a new object each time).
UC_HOOK_ADD = uclib["uc_hook_add"]
# uc_err uc_vmem_translate(uc_engine *uc, uint64_t address, uc_prot prot, uint64_t *paddress)
UC_VMEM_TRANSLATE = uclib["uc_vmem_translate"]
UC_HOOK_DEL = uclib["uc_hook_del"]  # uc_err uc_hook_del(uc_engine *uc, uc_hook hh)
UC_HOOK_DEL.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
UC_VMEM_TRANSLATE.argtypes = (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
                              ctypes.POINTER(ctypes.c_uint64))


@lru_cache(maxsize=4096)
def _block_writes(code: bytes) -> tuple | None:
    """For the instructions of a translated block: (words, what each may write, what the
    instructions before each may write, what each and those after it may write), as sets of
    Unicorn register ids (:func:`a64.written_registers`); the last instruction may also be a
    branch (X30 for BL/BLR) or exception-generating (nothing: it is taken first). None when
    an instruction is not modelled."""
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if PSB_CSYNC_WORD in words:
        # (a synchronisation point for the Profiling Buffer: the records of the samples before
        # it are written at its hook, so no sample of its block is predicted or captured)
        return None
    writes = []
    for i, word in enumerate(words):
        written = a64.written_registers(word)
        if written is None and i == len(words) - 1:
            last = a64.decode(word)
            if last.exception is not None:
                written = frozenset()
            elif last.is_branch and not last.is_eret:
                written = frozenset((a64.X_REGS[30],))
        if written is None:
            return None
        writes.append(written)
    before = [frozenset()]
    for w in writes[:-1]:
        before.append(before[-1] | w)
    after = [frozenset()] * len(writes)
    acc = frozenset()
    for i in range(len(writes) - 1, -1, -1):
        acc = acc | writes[i]
        after[i] = acc
    return words, writes, before, after


@lru_cache(maxsize=1 << 16)
def _ends_block(word: int) -> bool:
    """Whether QEMU ends a translated block after this instruction (as far as the guess of
    Machine._guess_block needs): branches and exception returns, exception generation, system
    register writes, PSTATE and SYS operations, ISB, WFI/WFE, and what is not decoded."""
    info = a64.decode(word)
    return bool(info.is_branch or info.exception or info.is_eret or info.pstate is not None
                or info.sys_op is not None or (info.sysreg is not None and not info.is_read)
                or info.mnemonic_class in ("isb", "wfi", "wfe", "wfit", "wfet", "yield",
                                           "unknown", "unallocated"))


@lru_cache(maxsize=256)
def _block_ends(page: bytes) -> tuple[int, ...]:
    """The instructions of a 4 KiB page of code after which QEMU ends a translated block
    (:func:`_ends_block`), as word indexes in increasing order; remembered for the process (a
    pure function of the page's bytes)."""
    return tuple(i for i, (word,) in enumerate(struct.iter_unpack("<I", page))
                 if _ends_block(word))


@dataclass
class ControlSites:
    """The control instructions (ERET, PSB CSYNC) of one executable
    segment: ``offsets`` are (byte offset, instruction word) from the segment's start at
    ``paddr`` (``size`` bytes); the fast loop's hooks sit at ``paddr + shift + offset``
    (``handles``), ``shift`` following the virtual address the PE runs the segment at
    (:meth:`Machine._follow_code_mapping`)."""

    vaddr: int
    paddr: int
    size: int
    offsets: tuple[tuple[int, int], ...]
    shift: int = 0
    handles: list[int] = field(default_factory=list)

    @classmethod
    def scan(cls, vaddr: int, paddr: int, code: bytes) -> "ControlSites":
        """The sites of ``code`` (its ``len(code)`` bytes at ``vaddr``/``paddr``): the
        offsets :func:`control_offsets` finds, with their words; no hooks yet."""
        return cls(vaddr, paddr, len(code), tuple(
            (off, int.from_bytes(code[off:off + INSN_BYTES], "little"))
            for off in control_offsets(code)))


class LearntPage(NamedTuple):
    """One code page of :class:`LearntCode`."""
    code: bytes                                          # the page's 4 KiB
    blocks: dict[tuple[int, int], tuple[bytes, bytes]]   # (block, length) -> (verdict batch,
    #                                                      template bytes)
    expanded: set[tuple[int, int]]                       # (block, length) learnt at a stop


class LearntCode:
    """What the fast run loop learnt about code -- the native hook's verdicts, the recorder's
    templates, the blocks learnt at a stop with their successors -- kept for the process per
    4 KiB code page, with the page's bytes. A later machine running the same code gets all
    of it when profiling is first enabled (:meth:`Machine._preload`) instead of stopping to
    learn it again: verdicts and templates are pure functions of the code, its address and
    the Exception level and Security state, so they hold wherever the page has the same bytes
    at the same virtual address in the same translation regime. A page whose bytes differ is
    learnt afresh.

    Args:
        max_pages: pages kept; when full, everything is forgotten.
    """

    def __init__(self, max_pages: int):
        self.max_pages = max_pages
        self.pages: dict[tuple[int, int, int, int], LearntPage] = {}  # (regime, EL, NS, VA page)

    def page(self, key: tuple[int, int, int, int], code: bytes) -> LearntPage:
        """What was learnt on the page ``key`` (regime, EL, NS, VA page) holding ``code``
        (empty when it held other bytes)."""
        found = self.pages.get(key)
        if found is None or found.code != code:
            if len(self.pages) >= self.max_pages:
                self.pages.clear()
            found = self.pages[key] = LearntPage(code, {}, set())
        return found


LEARNT_CODE = LearntCode(LEARNT_PAGES_MAX)


class Machine(Translation):
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

    def _python_controls(self, settled: bool = True) -> None:
        """Something :meth:`_on_control_insn` acts on may have changed (an interrupt level,
        the enable state, a Profiling Buffer control): its next call must run in Python, which
        then decides again whether the ones after it must. ``settled``: the change has taken
        effect (False from a hook that runs before QEMU performs the write: nothing is judged
        from the old state then)."""
        self.control.python = 1
        # (every change that could assert something comes back here)
        self.control.unmask_idle = int(settled and self._unmask_watch_may_rest())
        if self._hooks_installed and self.cfg.mode == "fast":
            self.counter.fast_limit = 0   # (the unmasking watch runs from the next block)

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

    def _install_hooks(self) -> None:
        if self._hooks_installed:
            return
        self._hooks_installed = True
        uc = self.uc
        ram_end = self.cfg.ram_base + self.cfg.ram_size
        for lo, hi in ((0, self.cfg.ram_base - 1), (ram_end, MASK64)):
            uc.hook_add(UC_HOOK_MEM_UNMAPPED, self._on_unmapped, None, lo, hi)
        # MSR: the writes a Python table cares about go to _on_msr, the rest QEMU executes
        # alone (the reference mode sees every one, as the oracle).
        flt = self.sysreg_filter
        for enc in self._python_sysreg_encodings("msr"):
            flt.add("msr", enc)
        for enc in self._python_sysreg_encodings("mrs"):
            flt.add("mrs", enc)
        for enc in PYTHON_SYS:
            flt.add("sys", enc)
        flt.msr_all = flt.sys_all = int(self.cfg.mode == "reference")
        flt.daif_key = native.sysreg_key(DAIF_ENC)
        flt.code_crn = CRN_CACHE
        # (MSR SP_ELx of a 16-byte aligned value while every SP is: SyncChecks.refresh)
        flt.sp_key[:] = sorted(native.sysreg_key(enc) for enc in SP_ELX_WRITES)
        flt.sp_align = SP_ALIGN
        flt.control = ctypes.addressof(self.control)
        self._msr_callback = SYS_HOOK(self._msr_fallback)
        flt.msr_fallback = ctypes.cast(self._msr_callback, ctypes.c_void_p).value
        self._native_hook(UC_HOOK_INSN, ctypes.c_void_p(native.msr_hook_address()),
                          ctypes.byref(flt), 1, 0, A.UC_ARM64_INS_MSR)
        self._sys_callback = SYS_HOOK(self._sys_fallback)
        flt.sys_fallback = ctypes.cast(self._sys_callback, ctypes.c_void_p).value
        self._native_hook(UC_HOOK_INSN, ctypes.c_void_p(native.sys_hook_address()),
                          ctypes.byref(flt), 1, 0, A.UC_ARM64_INS_SYS)
        self.counter = native.SpeCounter(
            emu_stop=ctypes.cast(uclib.uc_emu_stop, ctypes.c_void_p).value)
        self.counter.stop_at = self.counter.event_at = self.counter.poll_at = NEVER
        self.counter.feed_until = NEVER
        self.counter.reg_read_batch = ctypes.cast(uclib.uc_reg_read_batch, ctypes.c_void_p).value
        self.counter.vmem_translate = ctypes.cast(uclib.uc_vmem_translate, ctypes.c_void_p).value
        self.counter.mem_read = ctypes.cast(uclib.uc_mem_read, ctypes.c_void_p).value
        self.counter.ram_base, self.counter.ram_size = self.cfg.ram_base, self.cfg.ram_size
        for i, rid in enumerate(CAPTURE_REGS):
            self.counter.reg_ids[i] = rid
        if self.cfg.mode == "fast":
            self._install_intr_hook()
        else:
            uc.hook_add(UC_HOOK_INTR, self._on_intr)
        if self.cfg.mode in ("fast", "raw"):
            # Counter reads (CNTPCT_EL0/CNTVCT_EL0) answered natively; every other MRS, and a
            # read the table does not cover, goes to _on_mrs (_mrs_fallback). (The raw loop
            # too: a speed baseline must not call Python at every counter read.)
            reads = self.counter_reads = native.SpeCounterReads()
            reads.counter = ctypes.pointer(self.counter)
            reads.model = ctypes.addressof(exception_model())
            for which, enc in enumerate(COUNTER_READS):
                reads.enc[which][:] = enc
            reads.filter = ctypes.addressof(self.sysreg_filter)
            self._mrs_callback = SYS_HOOK(self._mrs_fallback)
            reads.fallback = ctypes.cast(self._mrs_callback, ctypes.c_void_p).value
            self._native_hook(UC_HOOK_INSN, ctypes.c_void_p(native.mrs_hook_address()),
                              ctypes.byref(reads), 1, 0, A.UC_ARM64_INS_MRS)
        else:
            self.counter_reads = None
            uc.hook_add(UC_HOOK_INSN, self._on_mrs, None, 1, 0, A.UC_ARM64_INS_MRS)
        if self.cfg.mode != "reference":
            self._native_hook(UC_HOOK_BLOCK, ctypes.c_void_p(native.block_hook_address()),
                              ctypes.byref(self.counter), 1, 0)
        if self.cfg.mode == "fast":
            # One callback object for every control instruction, registered directly: the
            # binding's hook_add costs about 30 us per address and run.
            # (in C: Python's hook runs only while self.control.python says it has work)
            self._control_callback = CODE_HOOK(self._guarded_control_insn)
            self.control.fallback = ctypes.cast(self._control_callback, ctypes.c_void_p).value
            # The unmasking watch of the native block hook (spe_native.h): _on_unmask
            self._unmask_callback = CODE_HOOK(self._guarded_unmask)
            c = self.counter
            c.control = ctypes.addressof(self.control)
            c.unmask_fallback = ctypes.cast(self._unmask_callback, ctypes.c_void_p).value
            c.daif_mask, c.pstate_id = UNMASK_WATCH, A.UC_ARM64_REG_PSTATE
            c.pbt_on = self.cfg.spe.pbt   # (the block hook tracks taken branches)
            ctl = self.control
            ctl.model = ctypes.pointer(exception_model())
            spsr_m = SPSR.field("M")
            ctl.spsr_il_lsb, ctl.spsr_m_lsb = SPSR.field("IL").lsb, spsr_m.lsb
            ctl.spsr_m_mask = spsr_m.mask >> spsr_m.lsb
            self._psb_callback = CODE_HOOK(self._guarded_psb_csync)
            ctl.psb_fallback = ctypes.cast(self._psb_callback, ctypes.c_void_p).value
            hooks = {ERET_WORD: ctypes.c_void_p(native.eret_hook_address()),
                     PSB_CSYNC_WORD: ctypes.c_void_p(native.psb_hook_address())}
            self._control_hooks = hooks
            self._control_segments = self._control_sites()
            for site in self._control_segments:
                self._hook_control_site(site, (site.vaddr - site.paddr) & MASK64)
            # After each instruction that may misalign SP: SyncChecks.on_sp_written
            self._sp_callback = CODE_HOOK(lambda _uch, address, _size, _data: self._guarded(
                lambda: self.checks.on_sp_written(address)))
            for addr in self.checks.sp_scan_addresses():
                self._native_hook(UC_HOOK_CODE, self._sp_callback, None, addr, addr + 3)
            # (self.records is made when profiling is first enabled: _refresh_enabled)
        elif self.cfg.mode == "reference":
            self._psb_addresses = frozenset(site.vaddr + off for site in self._control_sites()
                                            for off, word in site.offsets
                                            if word == PSB_CSYNC_WORD)
            uc.hook_add(UC_HOOK_CODE, self._on_every_insn)
        if self.cfg.mode != "raw":
            # On each DC ZVA: Python only at an EL with Device data (SyncChecks.dc_zva)
            self._zva_callback = CODE_HOOK(lambda _uch, address, _size, _data: self._guarded(
                lambda: self.checks.dc_zva(address)))
            flt = self.sysreg_filter
            flt.zva_fallback = ctypes.cast(self._zva_callback, ctypes.c_void_p).value
            for addr in self.checks.dc_zva_addresses():
                self._native_hook(UC_HOOK_CODE, ctypes.c_void_p(native.zva_hook_address()),
                                  ctypes.byref(flt), addr, addr + 3)
        if self.cfg.mode != "raw" and self._model_every:
            # Every data access updates the micro-architecture model (model.c), and every
            # branch trains its predictor: the block hook's (counter.c feed_branch) or, in the
            # reference loop, _on_every_insn's (_feed_branch); from reset, or from the first
            # write that enables the Profiling Buffer (SpeConfig.model_feed_from)
            c = self.counter
            c.reg_read = ctypes.cast(uclib.uc_reg_read, ctypes.c_void_p).value
            c.pc_id = A.UC_ARM64_REG_PC
            if self.cfg.spe.model_feed_from == "reset":
                self._start_model_feed()
            self.spu.on_buffer_write = self._on_buffer_write

    def _on_buffer_write(self, enabled: bool) -> None:
        """After a write of PMBLIMITR_EL1 (model_feed "every"): E = 1 starts the feed
        (model_feed_from "enable") or resumes it; E = 0 lets it go on for
        SpeConfig.model_feed_linger instructions more (virtual time, an event on the clock,
        at which both run loops stop exactly, so they pause it at the same instruction), then
        pauses it: accesses and branches long after profiling (a guest's perf report) do not
        feed the model, and run at sampled-mode speed but for the trace calls themselves."""
        if enabled:
            self.clock.cancel(self._linger_event)
            self._linger_event = None
            if not self._feeding:
                self._start_model_feed()
            elif self._feed_paused:
                self._feed_paused = False
                self.counter.feed_until = NEVER
            return
        linger = self.cfg.spe.model_feed_linger
        if (not self._feeding or self._feed_paused or linger < 0
                or self._linger_event is not None):
            return
        now = self.clock.ticks(self._retired_before(self.pc))
        self._linger_event = self.clock.schedule(now + linger, "model feed linger",
                                                 self._linger_over)
        self._request_stop()   # (the run loop plans its stops again)

    def _linger_over(self, _now: int) -> None:
        """model_feed_linger ran out with the Profiling Buffer still disabled: pause the feed
        (the native hooks: feed_until; the reference loop: _feed_paused)."""
        self._linger_event = None
        self._feed_paused = True
        self.counter.feed_until = 0

    def _start_model_feed(self) -> None:
        """From now on every data access and branch feeds the model (idempotent): at reset,
        or in the handler of the MSR that first sets PMBLIMITR_EL1.E. The accesses reach it
        through the patched libunicorn's memory trace (patches/unicorn/0002, which keeps them
        on the TLB fast path) or, with Unicorn's own library, a memory hook. The run stops
        after that instruction, in both loops, and the translated code is flushed before it
        goes on (:meth:`_start`): code translated before calls neither."""
        if self._feeding:
            return
        self._feeding = True
        self.counter.feed = self.spu.builder.model.ptr
        try:   # (the patched library's trace: patches/unicorn/0002)
            trace_set = uclib.uc_mem_trace_set
        except AttributeError:
            self.model_hook_last(install=True)
        else:
            trace_set.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
            trace_set(self.uc._uch, ctypes.c_void_p(native.model_trace_address()),
                      ctypes.byref(self.counter))
        self._feed_flush = True
        self.uc.emu_stop()

    def model_hook_last(self, install: bool = False) -> None:
        """(Re)install the model's memory hook (model_feed "every") as the last memory hook:
        Unicorn calls a page's memory hooks in the order they were added and calls none after
        one stopped the run, so an access a watchpoint hook stops before (to be made again
        when the run resumes) or the alignment hook faults reaches the model once (or never).
        Nothing without the hook, unless ``install``."""
        if self._model_hook is None and not install:
            return
        if self._model_hook is not None:
            UC_HOOK_DEL(self.uc._uch, ctypes.c_size_t(self._model_hook))
        self._model_hook = self._native_hook(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE,
                                             ctypes.c_void_p(native.model_hook_address()),
                                             ctypes.byref(self.counter), 1, 0)

    def _python_sysreg_encodings(self, which: str) -> set[tuple[int, int, int, int, int]]:
        """The encodings whose MRS (``which`` == "mrs") or MSR ("msr") the Python hooks
        (:meth:`_on_mrs`, :meth:`_on_msr`) act on; the native hooks leave every other one to
        QEMU without a Python call."""
        hooked = {enc for enc, entry in self.sysregs.entries() if not entry.via_undef}
        if which == "mrs":
            return hooked | set(RANDOM_NUMBER_REGS) | set(COUNTER_READS) | set(SHADOWED) | {
                ISR_EL1.encoding.tuple, ID_AA64DFR0_EL1.encoding.tuple,
                ID_AA64DFR2_EL1.encoding.tuple,
                ID_AA64PFR0_EL1.encoding.tuple} | self.cfg.cpu.presented
        return (hooked | TRANSLATION_WRITES | WATCHED_WRITES | DEBUG_WRITES | {DAIF_ENC}
                | self.checks.control_regs | SP_ELX_WRITES)

    def _install_intr_hook(self) -> None:
        """The native INTR hook (``spe_intr_hook``, exception.c): synchronous exceptions with
        nothing of Python's involved are taken natively; the rest reach :meth:`_on_intr`."""
        h = self.intr
        h.model = ctypes.pointer(exception_model())
        h.counter = ctypes.pointer(self.counter)
        self._intr_callback = INTR_HOOK(self._intr_fallback)
        h.fallback = ctypes.cast(self._intr_callback, ctypes.c_void_p).value
        self._intr_context = self.uc.context_save()
        h.context_save = ctypes.cast(uclib.uc_context_save, ctypes.c_void_p).value
        h.context = self._intr_context._context.value
        h.exc_offset = exception_layout()
        h.vmem_translate = ctypes.cast(uclib.uc_vmem_translate, ctypes.c_void_p).value
        h.mem_read = ctypes.cast(uclib.uc_mem_read, ctypes.c_void_p).value
        h.native_intnos = sum(1 << n for n in QEMU_SYNC_EXCEPTIONS)
        h.after_insn_intnos = sum(1 << n for n in (INTNO_SVC, INTNO_HVC, INTNO_SMC))
        h.psci_intno = {"hvc": INTNO_HVC, "smc": INTNO_SMC}.get(
            self.cfg.psci if self.psci is not None else None, 0xFFFFFFFF)
        h.undef_intno = INTNO_UNDEF
        h.wfx_ec, h.wfi_word = EC.WFX, WFI_WORD
        h.far_ecs = sum(1 << ec for ec in FAR_ECS)
        ec = ESR.field("EC")
        h.ec_lsb, h.ec_mask = ec.lsb, ec.mask >> ec.lsb
        h.abort_ecs = sum(1 << ec for ec in ABORT_ECS)
        h.python_fscs = sum(1 << (mmu.FSC_TRANSLATION | level) for level in range(4))
        if self.cfg.cpu.e0pd:  # (an E0PD fault may come out as any of them: refine_abort)
            h.python_fscs |= sum(1 << (kind | level) for level in range(4) for kind in
                                 (mmu.FSC_ACCESS_FLAG, mmu.FSC_PERMISSION))
        fsc = ABORT_ISS.field("FSC")
        h.fsc_lsb, h.fsc_mask = fsc.lsb, fsc.mask >> fsc.lsb
        for i, (mask, value) in enumerate(PYTHON_UNDEFS):
            h.python_undef_mask[i], h.python_undef_value[i] = mask, value
        # The CPU interface's common accesses, natively on the GIC's state (gicv3.py,
        # gic.c); the context-dependent fields are refreshed with the context
        # (_native_context).
        self.gic.fill_native_path(h)
        h.control = ctypes.addressof(self.control)
        h.i_bit, h.f_bit = PSTATE.field("I").lsb, PSTATE.field("F").lsb
        h.x_ids[:] = a64.X_REGS[:31]
        # (with FEAT_SPE_EXC every exception entry goes through Python: PSTATE.PM,
        # _pm_on_entry)
        h.native = int(not self.cfg.spe.spe_exc)
        self._native_hook(UC_HOOK_INTR, ctypes.c_void_p(native.intr_hook_address()),
                          ctypes.byref(h), 1, 0)

    def _guarded(self, body: Callable[[], object], default: object = None) -> object:
        """Run the body of a hook that native code calls: an exception in it stops the run
        and is raised by :meth:`_start` (ctypes would only print it); ``default`` is then
        returned to the caller."""
        try:
            return body()
        except BaseException as exc:  # noqa: BLE001 -- re-raised after emu_start returns
            if self._hook_error is None:
                self._hook_error = exc
            self.uc.emu_stop()
            return default

    @staticmethod
    def _cp_reg(cp_ptr: int) -> UcRegCP64:
        """The ``uc_arm64_cp_reg`` a native MRS/MSR/SYS hook passes, viewed in place (the
        binding's structure, with CpReg's field names; valid for the hook's call only): no
        cast and no copy into a CpReg on each call that reaches Python."""
        return UcRegCP64.from_address(cp_ptr)

    def _intr_fallback(self, _uch, intno: int, _data) -> None:
        """The native INTR hook's fallback: :meth:`_on_intr` (:meth:`_guarded`)."""
        self._guarded(lambda: self._on_intr(self.uc, intno, None))

    def _sys_fallback(self, _uch, reg: int, cp_ptr, _data) -> int:
        """The native SYS hook's fallback: :meth:`_on_sys` (:meth:`_guarded`)."""
        return self._guarded(lambda: self._on_sys(self.uc, reg, self._cp_reg(cp_ptr), None), 0)

    def _msr_fallback(self, _uch, reg: int, cp_ptr, _data) -> int:
        """The native MSR hook's fallback: :meth:`_on_msr` (:meth:`_guarded`)."""
        return self._guarded(lambda: self._on_msr(self.uc, reg, self._cp_reg(cp_ptr), None), 0)

    def _native_hook(self, kind: int, callback, user_data, begin: int, end: int,
                     *insn: int) -> int:
        """``uc_hook_add`` without the binding's per-hook Python wrapper (the caller keeps
        ``callback`` alive for the machine's lifetime); ``insn``: the instruction of a
        UC_HOOK_INSN hook. Returns the hook's handle (for ``uc_hook_del``).

        Raises:
            GuestError: Unicorn refused the hook.
        """
        handle = ctypes.c_size_t()
        err = UC_HOOK_ADD(self.uc._uch, ctypes.byref(handle), kind, callback,
                          user_data, ctypes.c_uint64(begin), ctypes.c_uint64(end),
                          *(ctypes.c_int(i) for i in insn))
        if err:
            raise GuestError(f"cannot install a native hook (type {kind}, uc error {err})")
        return handle.value

    def _guarded_psb_csync(self, _uch, address: int, size: int, _data) -> None:
        """The PSB CSYNC hook's callback: :meth:`_on_psb_csync` (:meth:`_guarded`)."""
        self._guarded(lambda: self._on_psb_csync(address))

    def _guarded_unmask(self, _uch, address: int, cleared: int, _data) -> None:
        """The unmasking watch's callback (``cleared``: the PSTATE bits it saw cleared, in
        the size argument): :meth:`_on_unmask` (:meth:`_guarded`)."""
        self._guarded(lambda: self._on_unmask(address, cleared))

    def _guarded_control_insn(self, _uch, address: int, size: int, _data) -> None:
        """The control instructions' callback: :meth:`_on_control_insn` (:meth:`_guarded`)."""
        self._guarded(lambda: self._on_control_insn(self.uc, address, size, None))

    def _in_scanned_code(self, pc: int) -> bool:
        """Whether ``pc`` is in a loaded image's executable segment where its hooks sit (its
        link address, or where the PE runs it: :meth:`_follow_code_mapping`), i.e. code whose
        control instructions and PSB CSYNCs the scan found and hooked."""
        if self._control_segments:  # (fast loop)
            return any((pc - site.paddr - site.shift) & MASK64 < site.size
                       for site in self._control_segments)
        return any(seg.vaddr <= pc < seg.vaddr + seg.memsz for seg in self.code_segments())

    def code_segments(self) -> Iterator[Segment]:
        """The loaded images' executable (PF_X) segments, in load order."""
        return (seg for image in self.images for seg in image.segments if seg.flags & PF_X)

    def _control_sites(self) -> list[ControlSites]:
        """The ERET and PSB CSYNC instructions (:func:`control_offsets`) of each
        executable segment, with no hooks yet."""
        return [ControlSites.scan(seg.vaddr, seg.paddr, bytes(seg.data))
                for seg in self.code_segments()]

    def _hook_control_site(self, site: ControlSites, shift: int) -> None:
        """(Re)install ``site``'s control-instruction hooks at physical address + ``shift``
        (the segment's virtual addresses when the PE runs it there)."""
        for handle in site.handles:
            UC_HOOK_DEL(self.uc._uch, handle)
        site.handles = [self._native_hook(UC_HOOK_CODE, self._control_hooks[word],
                                          ctypes.byref(self.control), addr, addr + 3)
                        for off, word in site.offsets
                        for addr in [(site.paddr + shift + off) & MASK64]]
        site.shift = shift

    def _follow_runtime_code(self, pc: int) -> None:
        """An SPE register access at ``pc``, or an exception entry to ``pc`` with FEAT_SPE_EXC
        (fast loop): when ``pc`` is in code no loaded
        image holds -- a kernel module's text, loaded at run time, such as Linux's
        arm_spe_pmu driver -- find the control instructions (ERET, PSB CSYNC:
        :func:`control_offsets`) of the executable pages around it and hook them as those of
        the loaded images are (:meth:`_hook_control_site`): the driver's PSB CSYNCs then
        write the records of the samples before them and count for the driver-rule
        reporter. The pages are the run of consecutive pages the current regime maps
        executable (a vmalloc'd module text ends at an unmapped guard page or its
        non-executable data), at most :data:`RUNTIME_CODE_PAGES` either side; each page is
        scanned once for its virtual and physical address (code loaded again at the same
        addresses with other control instructions is not seen). Costs a page walk per SPE
        register access from such code (a dictionary look-up once known), nothing elsewhere."""
        page = pc & ~(PAGE_BYTES - 1)
        if page in self._runtime_pages or self._in_scanned_code(pc):
            return
        for step in (-1, 1):
            for k in range(0 if step == 1 else 1, RUNTIME_CODE_PAGES):
                va = (page + step * k * PAGE_BYTES) & MASK64
                pa = ctypes.c_uint64()
                if va in self._runtime_pages:
                    continue
                if UC_VMEM_TRANSLATE(self.uc._uch, va, UC_PROT_EXEC, ctypes.byref(pa)) \
                        or not self._in_ram(pa.value, PAGE_BYTES):
                    break
                self._runtime_pages[va] = pa.value
                site = ControlSites.scan(va, pa.value, bytes(self.uc.mem_read(pa.value,
                                                                              PAGE_BYTES)))
                self._control_segments.append(site)
                self._hook_control_site(site, (va - pa.value) & MASK64)
                # (blocks translated before the hooks existed would not call them)
                self.uc.ctl_remove_cache(va, va + PAGE_BYTES)

    def _follow_code_mapping(self) -> bool:
        """Move the control-instruction hooks of the segment the PC executes in to where the
        PE runs it, when that is not where they are: a Linux Image is loaded at a physical
        address and runs at a virtual one it chooses (KIMAGE_VADDR, plus a random KASLR
        offset), so hooks at its load addresses would never fire and an unmasking ERET
        would be seen only at the next block entry. Called at a stop while
        an interrupt is asserted but masked; translates the PC with the current EL's stage 1
        (and 2) fetch permissions. Returns True when the hooks moved (the translated code is
        flushed so that the new hooks are in it).

        Only the translation regime of the PC is followed: a second alias of the same code
        (executed from two virtual addresses) keeps the hooks at the last one seen."""
        pc = self.pc
        pa = ctypes.c_uint64()
        if UC_VMEM_TRANSLATE(self.uc._uch, pc, UC_PROT_EXEC, ctypes.byref(pa)):
            return False
        for site in self._control_segments:
            if site.paddr <= pa.value < site.paddr + site.size:
                shift = (pc - pa.value) & MASK64
                if shift == site.shift:
                    return False
                self._hook_control_site(site, shift)
                self.uc.ctl_flush_tb()
                return True
        return False

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

    def _forget_code(self) -> None:
        """Code or its mapping may have changed: drop the native hook's verdicts and the
        instruction words and code pages remembered for captured samples and learning."""
        self._captured_words.clear()
        self._code_pages.clear()
        if self._model_every:   # (the branches that end blocks)
            self.spu.builder.model.forget_sites()
            self._ref_sites.clear()
        if self.records is not None:
            self.records.clear_templates()
        self._forget_verdicts()
        # (nothing of code is remembered now: an IC stays native until profiling is enabled)
        self.sysreg_filter.sys_code = int(self.enabled)

    def _forget_verdicts(self) -> None:
        self._learnt.clear()
        self._expanded.clear()
        if self.cfg.mode == "fast" and (self.counter.step_count or self._verdicts_added):
            native.verdicts_clear(self.counter)
            self._verdicts_added = False

    def _spu_serror(self) -> None:
        """An External abort on a Profiling Buffer write is a physical SError exception
        (``SpeConfig.external_abort == "serror"``, Arm ARM D17.8.4.2): pending from now on,
        taken at the next stop where PSTATE.A and the routing allow it."""
        self.pe.serror_pending = True
        self._device_changed()

    def _guest_error(self, message: str) -> None:
        self.guest_errors.append(message)

    # ------------------------------------------------------------------ interrupts ---------
    def _pmbirq(self, level: bool) -> None:
        self._pmbirq_input(level)
        self._irq_line_value = None
        self._python_controls()
        if self.spu.exception_may_be_pending():   # (FEAT_SPE_EXC: _take_spe_exception)
            self.replan = True
            self._stop_at_block_boundary()

    def _pm_on_entry(self, target: int) -> None:
        """FEAT_SPE_EXC, after every exception entry (ProcessingElement.on_entry): PSTATE.PM
        := 1, its old value in SPSR_ELx.PM (Arm ARM D1.4), which QEMU does not know; restored
        by the exception return (:meth:`_restore_pm`). Every entry goes through Python while
        the feature is configured (the native INTR and GIC paths are off). A handler written
        at run time (its vector table not in a loaded image) has its ERETs hooked from here,
        as an SPE register access does for a driver (:meth:`_follow_runtime_code`): the
        pages around the vector entered."""
        enc = SPSR_ENC[target]
        self.fast.set_cpr(enc, SPSR.set(self.fast.cpr(enc), "PM", self.spu.pstate_pm))
        self.spu.pstate_pm = 1
        self._python_controls()
        if self.cfg.mode == "fast" and self._hooks_installed:
            self._follow_runtime_code(self.pc)

    def _restore_pm(self) -> None:
        """Before an ERET while PSTATE.PM is 1 (FEAT_SPE_EXC): PSTATE.PM := SPSR_ELx.PM of
        the current EL (Arm ARM D1.4), which QEMU's exception return does not restore."""
        el = PSTATE_EL.get(self.fast.reg(A.UC_ARM64_REG_PSTATE))
        if el:
            self.spu.pstate_pm = SPSR.get(self.fast.cpr(SPSR_ENC[el]), "PM")

    def _take_spe_exception(self) -> bool:
        """FEAT_SPE_EXC: take the SPE Profiling exception when one is pending and unmasked
        (``CheckForSPEException()``, Arm ARM D17.8): ESR_ELx.EC 0b111101, ISS.FSC 0b00001
        (Profiling Buffer management event), SYNC 0, IL 1; the synchronous vector (offset
        0x0) of the target's table; ELR_ELx = the next instruction not executed. Checked at
        the run loops' stops: one follows each PMBSR_ELx.S change (:meth:`_pmbirq`), each
        write of a control it depends on, and each exception return while a PMBSR_ELx.S is 1
        (:meth:`_replan_owed`). True if it was taken."""
        if not self.spu.exception_may_be_pending():
            return False
        ctx = self.context()
        target = self.spu.exception_target(ctx)
        if target is None:
            return False
        syndrome = esr(spe_exc.ESR_EC_PROFILING, spe_exc.ISS_SPE_EXCEPTION)
        self.pe.take(target, VectorKind.SYNC, self.pc, syndrome)   # (PSTATE.PM: _pm_on_entry)
        self._ctx = None
        self._py_exceptions_taken += 1
        if self.exception_observer is not None:
            self.exception_observer(VectorKind.SYNC, target, syndrome)
        return True

    def _irq_line(self) -> bool:
        """Whether the GIC asserts IRQ or FIQ to the PE or a physical or virtual SError
        (HCR_EL2.VSE) is pending, recomputed only after GIC state or HCR_EL2/SCR_EL3 may have
        changed (the native CPU-interface path marks the GIC's state dirty)."""
        if self._irq_line_value is None or self._gic_state.dirty:
            self._gic_state.dirty = 0
            self._irq_line_value = (self.gic.irq_line() or self.gic.fiq_line()
                                    or self._serror_line())
        return self._irq_line_value

    def _serror_line(self) -> bool:
        """Whether a physical or virtual SError (HCR_EL2.VSE) is pending (part of
        :meth:`_irq_line` that the GIC does not drive)."""
        return self.pe.serror_pending or self.pe.virtual_serror_pending(self.context())

    def _deliverable_interrupt(self) -> tuple[VectorKind, int] | None:
        """(IRQ or FIQ, target EL) of the interrupt the PE would take now, or None."""
        if not self._irq_line():
            return None
        return self.pe.deliverable_interrupt(self.context())

    def _deliverable_irq_target(self) -> int | None:
        """The EL a pending interrupt would be taken to now, or None."""
        found = self._deliverable_interrupt()
        return None if found is None else found[1]

    def _deliver_irq(self) -> bool:
        """Take a pending, deliverable IRQ or FIQ; True if one was taken."""
        found = self._deliverable_interrupt()
        if found is None:
            return False
        kind, target = found
        if kind is VectorKind.SERROR:
            self.pe.take_serror(self.context(), self.pc)
            self._irq_line_value = None  # (HCR_EL2.VSE or the physical SError cleared)
            self._ctx = None
        else:
            # (an IRQ or FIQ entry changes only PSTATE, whose EL context() reads live)
            self.pe.take(target, kind, self.pc)
        self._py_irqs_taken += 1
        if self.exception_observer is not None:
            self.exception_observer(kind, target, None)
        return True

    # ------------------------------------------------------------------ population ---------
    def _account(self, upto: int) -> None:
        """Account population members in [acct, upto) under the current enabled state."""
        n = upto - self.acct
        if n <= 0:
            return
        if self.enabled:
            self.spu.interval.advance(n)
            self.spu.stats.population += n
        self.acct = upto

    def _refresh_enabled(self) -> None:
        """Re-evaluate StatisticalProfilingEnabled(); on a disabled->enabled transition reload
        PMSICR_EL1 if it is zero (§3.1.1)."""
        ctx = self.context()
        if self.spu.config.spe_exc:
            self.spu.refresh_irq()   # (MDCR_EL3.PMSEE, SCR_EL3.NS: SPEInterruptEnabled())
        may = self.spu.buffer_may_be_enabled()
        now = may and self.spu.profiling_enabled(ctx)
        self.pmu_events.accrue(self._pmu_bucket)
        self._pmu_bucket = (ctx.el, ctx.is_secure) if now else None
        if now and not self.enabled:
            self.spu.interval.initialize(self.spu.regs["PMSIRR_EL1"])
            self.spu.rules.profiling_started()
            self._pbt_since = self.counter.insns
            if self.records is None and self.cfg.mode == "fast":
                # Records of captured samples are built natively, from the machine's one
                # model (made here, before the first sample, so a run that never profiles
                # does not allocate the recorder's tables).
                self.records = NativeRecords(self.cfg.spe, self.spu.builder.model,
                                             native.CAP_MAX, RECORD_BYTES_BOUND)
                self._preload()
        self.enabled = now
        self._collect = None
        # The native INTR hook takes an exception only between ELs where profiling is
        # disabled (else the population and records must see it: Python), and the native MSR
        # hook leaves writes to QEMU only while profiling is disabled (a write can change what
        # a record holds, e.g. CONTEXTIDR_EL1).
        self.intr.enabled_els = (
            ALL_ELS if now else 0 if not may else sum(
                1 << el for el in range(4) if el != ctx.el
                and self.spu.profiling_enabled(ctx.at_el(el)))) | self.checks.python_els()
        self.sysreg_filter.msr_all = int(now or self.cfg.mode == "reference")
        if now:
            self.sysreg_filter.sys_cache = self.sysreg_filter.sys_code = 1
        self._psb_hook_state()
        self._python_controls()

    def _member_selected(self, index: int, observed: tuple | None = None) -> None:
        """The population member at instruction ``index`` fires its interval step; sample it if
        selected. Either the machine is stopped in front of that instruction, or ``observed``
        is the (Sample, context) a prediction built for it (:meth:`_predict`)."""
        if self._fire_member(index):
            if observed is None:
                ctx = self.context()
                pc = self.pc
                observed = (self._observe(pc, a64.decode(self._fetch(pc, ctx.el)), ctx, index),
                            ctx)
            self._sample(*observed)

    def _prev_branch(self, pc: int, index: int) -> int | None:
        """FEAT_SPE_PBT (Arm ARM D17.6.3.1): the target VA of the most recent taken branch
        before the operation at ``pc`` (instruction number ``index``), or None when there is
        none since reset or profiling was not enabled throughout from its target on. A taken
        branch is a block entered anywhere but where the block before it ended (the native
        block hook's ``pbt_target``; the reference loop's ``_ref_pbt``): exception entries and
        returns count (IMPLEMENTATION DEFINED), a taken branch to the next instruction does
        not. The fast loop stops in front of the block holding a sample (no native
        captures), so a sample there is in the block the hook entered last or the next one."""
        if self.cfg.mode == "reference":
            target, after = self._ref_pbt
        else:
            c = self.counter
            target, after = c.pbt_target, c.pbt_insns
            if index >= c.insns:   # (in the block not entered yet, from pc - 4 * (index - insns))
                start = (pc - 4 * (index - c.insns)) & MASK64
                if start != (c.block_start + 4 * c.block_insns) & MASK64:
                    target, after = start, c.insns + 1
        if after == 0 or after - 1 < self._pbt_since:
            return None
        return target

    def _fire_member(self, index: int) -> bool:
        """Account the population up to member ``index`` and apply its interval step; True if
        it is selected for sampling."""
        self._account(index)
        self.spu.stats.population += 1
        self.acct = index + 1
        return self.spu.interval.fire(self.spu.regs["PMSIRR_EL1"])

    # ------------------------------------------------------------------ sampling -----------
    def _regs(self, ids: tuple[int, ...]) -> dict[int, int]:
        return self.fast.regs(ids) if ids else {}

    def _observe(self, pc: int, info, ctx: AccessContext, index: int,
                 regs: dict[int, int] | None = None) -> Sample:
        """What the record of the operation at ``pc`` (instruction number ``index``) needs,
        read from the current register state (or ``regs``, which holds ``info.reads``): data
        address, branch outcome, condition result, context IDs, timestamp (virtual time =
        ``index``)."""
        uc = self.uc
        if regs is None:
            regs = self._regs(info.reads)
        ts, _, _, collect_pa = self._collection(ctx)
        s = Sample(pc=pc, el=ctx.el, ns=ctx.state_ns, info=info, index=index)
        if self.cfg.spe.pbt:
            s.prev_branch = self._prev_branch(pc, index)
        s.exception = self._generates_exception(info, ctx)
        if not s.exception:
            s.cond_passed = info.condition_passed(regs)
            if info.is_branch:
                if info.is_eret:  # (ERET at EL0 is UNDEFINED: _generates_exception)
                    s.branch_taken = True
                    s.branch_target = uc.reg_read(ELR_REG[ctx.el])
                    s.target_el = PSTATE.get(uc.cpr_read(*SPSR_ENC[ctx.el]), "EL")
                else:
                    s.branch_taken, s.branch_target = info.branch(pc, regs)
                    s.target_el = ctx.el
                s.target_ns = s.ns
            if info.op_class == P.OP_CLASS_LDST and (info.is_load or info.is_store):
                s.data_va = info.data_address(pc, regs)
                if s.data_va is not None and (collect_pa or self._model_every):
                    try:
                        pa = self._translate(s.data_va, self._regime_el(ctx.el))
                    except TranslationFault:
                        pa = None
                    s.data_pa = pa if collect_pa else None
                    s.model_address = pa
        if ts is not None:
            # the system counter at the sampled instruction (§5.3.8 Timestamp packet: the
            # physical or virtual count; CNTVOFF_EL2 is not subtracted): the instruction
            # number plus the ticks the PE spent waiting (platform/clock.py)
            s.timestamp = self.clock.ticks(index)
        s.context, s.context2 = self._context_ids(ctx)
        return s

    def _context_ids(self, ctx: AccessContext) -> tuple[int | None, int | None]:
        """CONTEXTIDR_EL1.PROCID and CONTEXTIDR_EL2.PROCID when CollectContextIDR1() and
        CollectContextIDR2() say they are collected (§3.3.1), else None."""
        _, cx1, cx2, _ = self._collection(ctx)
        return (CONTEXTIDR_EL1.get(self.fast.cpr(CONTEXTIDR_EL1.encoding.tuple), "PROCID")
                if cx1 else None,
                CONTEXTIDR_EL2.get(self.fast.cpr(CONTEXTIDR_EL2.encoding.tuple), "PROCID")
                if cx2 else None)

    def _sample(self, s: Sample, ctx: AccessContext) -> None:
        st = self.spu.stats
        filtered, collided = st.filtered_out, st.collisions
        event = self.spu.sample(s, ctx)
        # (the reference loop samples an instruction before its MRS hook runs: _pmu_catch_up)
        self._last_sample = (s.index, st.filtered_out - filtered, st.collisions - collided)
        if event is not None:
            if event.kind != "buffer-full":
                self._guest_error(f"spe: Profiling Buffer management event ({event.kind}) at "
                                  f"PMBPTR_EL1={event.pmbptr:#x}: PMBSR_EL1={event.pmbsr:#x}")
            # PMBSR_EL1.S is now 1: PMBIRQ asserted, profiling disabled (§3.5).
            self.replan = True
            self._ref_enabled = None
            self.hold_irq_until = self.acct
            self._refresh_enabled()

    # ------------------------------------------------------------------ predicted samples --
    def _predict(self, block: int, k: int, n: int, index: int) -> bool:
        """Sample instruction ``k`` of the ``n``-instruction translated block at ``block``
        (instruction number ``index``) without stopping at it, when the state the run loop can
        see is provably the one the instruction sees (docs/model.md, "Samples inside a
        block"). Four ways (:meth:`_prediction_mode`):

        * PREDICT_START: no instruction before it in the block can write a register it reads
          (:func:`a64.written_registers`): observed now, at the block's start;
        * PREDICT_END: no instruction from it to the end of the block can write one: observed
          when the run has left the block (or at an exception on the way);
        * PREDICT_NEXT_PC: a branch (always the last instruction of its block): its outcome is
          the PC the block leaves to (a conditional branch to the next instruction is
          ambiguous and is not predicted);
        * PREDICT_EVAL: the earlier instructions that compute its operands are evaluated from
          the block's start (:meth:`_evaluate`).

        Every instruction of the block must be modelled (or be its final branch or exception-
        generating instruction): those cannot change the Exception level, the context registers
        or SPE state (the ones that can end their block in QEMU or are not modelled). The record
        must not be able to raise a Profiling Buffer management event (PMBIRQ timing is then
        not at stake), and the next interval event must not fall inside the block. The sample
        is then *pending* (:meth:`_settle`): committed when the run gets past instruction
        ``index``, dropped if an earlier instruction takes an exception. Returns False when the
        exact path (stop at the instruction) is needed.
        """
        if self._model_every:
            return False
        ctx = self.context()
        if not self._record_room(ctx):
            return False
        code = self._block_code(block, n, ctx)
        if code is None:
            return False
        self._learn_block(block, code)
        mode, plan = self._mode(code, k)
        if mode == PREDICT_NO:
            return False
        if index + self.spu.interval.members_between_events(
                self.spu.regs["PMSIRR_EL1"]) < index - k + n:
            return False  # the event after this one falls inside the block
        pc = block + 4 * k
        info = a64.decode(int.from_bytes(code[4 * k:4 * k + 4], "little"))
        if mode == PREDICT_END:  # observed at the settling point
            self._pending = (index, (pc, info, ctx), mode, None)
            self.sample_paths["predicted"] += 1
            return True
        if mode == PREDICT_EVAL:
            regs = self._evaluate(block, code, plan, info, ctx)
            if regs is None:
                return False
            self.sample_paths["evaluated"] += 1
            s = self._observe(pc, info, ctx, index, regs)
        else:
            s = self._observe(pc, info, ctx, index)
        if mode == PREDICT_NEXT_PC:
            self._pending = (index, (s, ctx), mode, None)
            self.sample_paths["predicted"] += 1
            return True
        # The interval step happens now (the run loop plans the next event from it); the
        # record is written when the run passes the instruction. Dropping the prediction
        # restores the interval counter, the population and the accounting point.
        interval = self.spu.interval
        undo = (interval.state, self.spu.stats.population, self.acct)
        selected = self._fire_member(index)
        self._pending = (index, (s, ctx) if selected else None, mode, undo)
        self.sample_paths["predicted"] += 1
        return True

    def _learn_blocks(self, blocks: list[tuple[int, bytes]]) -> None:
        """Give the native hook a verdict for every instruction it can capture in each block
        (address, code) not learnt yet (:meth:`_verdicts`), and the native recorder the
        templates of their instructions at the current EL and Security state, each in one
        call, so that later samples anywhere in them need no stop and no Python. Once per
        block address and length (forgotten with the verdicts); a full table is emptied first
        (the places sampled from now on are learnt again). Kept for the process in
        :data:`LEARNT_CODE`."""
        ctx = self.context()
        batch, templates, new = [], [], {}
        for block, code in blocks:
            key = (block, len(code) // 4)
            if key in self._learnt or key in new:
                continue
            new[key] = code
            verdicts = self._verdict_batch(block, code)
            tpl = (b"" if self.records is None
                   else block_templates(block, code, ctx.el, ctx.state_ns))
            batch.append(verdicts)
            templates.append(tpl)
            learnt = self._learnt_page(block, ctx)
            if learnt is not None:
                learnt.blocks[key] = (verdicts, tpl)
        self._add_verdicts(b"".join(batch))
        self._learnt.update(new)
        if new and self.records is not None:
            self.records.add_templates(b"".join(templates))

    def _learnt_page(self, block: int, ctx: AccessContext) -> LearntPage | None:
        """The :data:`LEARNT_CODE` page of ``block`` at ``ctx``'s EL and Security state (None:
        its code page does not translate or is not RAM)."""
        regime = self._regime_el(ctx.el)
        page = self._code_page(block, regime)
        if page is None:
            return None
        return LEARNT_CODE.page((regime, ctx.el, ctx.state_ns, block >> 12), page)

    def _add_verdicts(self, data: bytes) -> bool:
        """Give the native hook the verdict batch ``data``; a full table is emptied first (the
        places sampled from now on are learnt again). False: it does not fit even then."""
        self._verdicts_added = True
        if not data or native.verdicts_add(self.counter, data):
            return True
        self._forget_verdicts()
        return bool(native.verdicts_add(self.counter, data))

    def _preload(self) -> None:
        """Give the native hook and recorder what :data:`LEARNT_CODE` holds for the code pages
        that have the same bytes here (read through the current translation), as if it had
        been learnt in this run."""
        batch, templates, keys, expanded = [], [], set(), set()
        for (regime, _, _, va_page), learnt in LEARNT_CODE.pages.items():
            if self._code_page(va_page << 12, regime) != learnt.code:
                continue
            for verdicts, tpl in learnt.blocks.values():
                batch.append(verdicts)
                templates.append(tpl)
            keys.update(learnt.blocks)
            expanded.update(learnt.expanded)
        if not keys:
            return
        if self._add_verdicts(b"".join(batch)):
            self._learnt.update(keys)
            self._expanded.update(expanded)
            self.records.add_templates(b"".join(templates))

    @staticmethod
    @lru_cache(maxsize=PREDICTION_CACHE_ENTRIES)
    def _verdict_batch(block: int, code: bytes) -> bytes:
        """The verdicts of the block ``code`` at ``block`` as packed for
        :func:`native.verdicts_add` (empty: none); remembered for the process."""
        verdicts, entries = Machine._verdicts(code)
        if not verdicts:
            return b""
        return struct.pack(native.VERDICT_BLOCK, block, len(code) // 4, len(verdicts)) + entries

    @staticmethod
    def _prediction_mode(code: bytes, k: int) -> tuple[int, tuple | None]:
        """How instruction ``k`` of the block ``code`` can be predicted (see :meth:`_predict`):
        (PREDICT_START | PREDICT_NEXT_PC | PREDICT_END | PREDICT_NO, None), or (PREDICT_EVAL,
        (plan, start registers)) when the operands can be computed from the block's start by
        evaluating the instructions of ``plan`` (indexes, in order; :func:`a64.evaluator`),
        which need ``start registers`` from the start."""
        analysis = _block_writes(code)
        if analysis is None:
            return PREDICT_NO, None
        words, writes, before, after = analysis
        info = a64.decode(words[k])
        reads = frozenset(info.reads)
        if reads.isdisjoint(before[k]):
            return PREDICT_START, None
        if Machine._final_branch(words, k, info):
            return PREDICT_NEXT_PC, None
        if reads.isdisjoint(after[k]):
            return PREDICT_END, None
        # Backward from the sampled instruction: every earlier instruction that may write a
        # register still needed must be one the evaluator executes.
        needed = set(reads)
        plan = []
        for j in range(k - 1, -1, -1):
            if writes[j].isdisjoint(needed):
                continue
            step = a64.evaluator(words[j])
            if step is None:
                return PREDICT_NO, None
            if needed.isdisjoint(step.dests):
                continue                               # (the superset named a register)
            needed = (needed - set(step.dests)) | set(step.sources)
            plan.append(j)
        plan.reverse()
        if any(a64.evaluator(words[j]).load for j in plan) and any(
                a64.decode(w).is_store for w in words[:k]):
            return PREDICT_NO, None                    # a store may change what a load reads
        return PREDICT_EVAL, (tuple(plan), tuple(sorted(needed)))

    @staticmethod
    def _final_branch(words: tuple[int, ...], k: int, info) -> bool:
        """Whether instruction ``k`` of the block ``words`` is its final branch and its outcome
        follows from the PC the block leaves to (PREDICT_NEXT_PC): not ERET, and not a
        conditional branch to the next instruction (taken or not looks alike)."""
        if not info.is_branch or info.is_eret or k != len(words) - 1:
            return False
        return not (info.is_conditional and info.branch_offset == 4)

    @staticmethod
    @lru_cache(maxsize=PREDICTION_CACHE_ENTRIES)
    def _mode(code: bytes, k: int) -> tuple[int, tuple | None]:
        """:meth:`_prediction_mode`, remembered per (code, k) for the process (a pure
        function of the code)."""
        return Machine._prediction_mode(code, k)

    def _learn_block(self, block: int, code: bytes) -> dict[int, int]:
        """:meth:`_learn_blocks` for one block; returns its verdicts (instruction ->
        PREDICT_*)."""
        self._learn_blocks([(block, code)])
        return self._verdicts(code)[0]

    @staticmethod
    @lru_cache(maxsize=PREDICTION_CACHE_ENTRIES)
    def _verdicts(code: bytes) -> tuple[dict[int, int], bytes]:
        """How the native hook can capture each instruction of the block ``code``: at its
        start or end (:meth:`_mode`), with its operands evaluated from the start (an
        evaluation plan the native evaluator runs: a load that cannot be read there makes it
        stop instead), a final branch by the PC the block leaves to (even when its operands
        are known at the start: the native recorder builds branch records from that PC).
        Instruction 0 needs no verdict unless it is a final branch (without one it is taken at
        the start). Returns ({k: mode}, the same as packed for :func:`native.verdicts_add`),
        remembered for the process (a pure function of the code; the result is not to be
        changed)."""
        n = len(code) // 4
        words = struct.unpack(f"<{n}I", code)
        found: dict[int, int] = {}
        entries = []

        def add(k: int, mode: int, steps: bytes = b"") -> None:
            found[k] = mode
            entries.append(struct.pack(native.VERDICT_ENTRY, k, mode,
                                       len(steps) // ctypes.sizeof(native.SpeStep), 0) + steps)

        def add_predicted(k: int) -> None:
            mode, plan = Machine._mode(code, k)
            if mode in (PREDICT_START, PREDICT_END):
                add(k, mode)
            elif mode == PREDICT_EVAL:
                steps = plan_steps(words, plan[0])
                if steps is not None:
                    add(k, mode, steps)

        for k in range(1, n - 1):
            add_predicted(k)
        if Machine._final_branch(words, n - 1, a64.decode(words[-1])):
            add(n - 1, PREDICT_NEXT_PC)
        elif n > 1:
            add_predicted(n - 1)
        return found, b"".join(entries)

    def _block_code(self, block: int, n: int, ctx: AccessContext) -> bytes | None:
        """The code of the ``n``-instruction block at ``block`` (None: it crosses a page,
        does not translate or is not RAM)."""
        offset = block & 0xFFF
        if offset + 4 * n > 0x1000:
            return None
        page = self._code_page(block, self._regime_el(ctx.el))
        return None if page is None else page[offset:offset + 4 * n]

    def _learn_stop_block(self, block: int, n: int, k: int) -> bool:
        """At a stop in front of the block holding the sample (instruction ``k`` of the
        ``n``-instruction block at ``block``), for lack of a verdict: learn the block, and the
        blocks it is likely to lead to (:meth:`_learn_successors`); True when the native hook
        can now capture the sample (the run loop runs again from here). A block already
        learnt at an earlier stop has no verdict for ``k`` (the hook would have captured it):
        False at once."""
        if (block, n) in self._expanded:
            return False
        ctx = self.context()
        code = self._block_code(block, n, ctx)
        if code is None:
            return False
        self._expanded.add((block, n))
        self._learnt_page(block, ctx).expanded.add((block, n))  # (code was read from it)
        captured = k in self._learn_block(block, code)
        self._learn_successors(block, code, ctx)
        return captured

    def _learn_successors(self, block: int, code: bytes, ctx: AccessContext) -> None:
        """Learn ahead the blocks the block ``code`` at ``block`` can go to directly (the
        target of a direct branch, the next instruction after a conditional branch or a BL),
        and theirs, up to SUCCESSOR_BLOCKS blocks, so that later samples there need no stop
        either. Their extent is guessed as QEMU translates (up to the first instruction that
        ends a translated block, the page end or TCG_MAX_INSNS, measured): a verdict is keyed by the
        block's address *and* length and derived from the code there, so a wrong guess is
        never used."""
        todo = [(block, code)]
        found: list[tuple[int, bytes]] = []
        seen = {(block, len(code) // 4)}
        while todo and len(found) < SUCCESSOR_BLOCKS:
            start, words = todo.pop(0)
            n = len(words) // 4
            last = a64.decode(int.from_bytes(words[-4:], "little"))
            nexts = []
            if last.branch_offset is not None:
                nexts.append(last.direct_target(start + 4 * (n - 1)))
            if last.is_conditional or last.mnemonic_class == "bl":
                nexts.append(start + 4 * n)
            for succ in nexts:
                guess = self._guess_block(succ, ctx)
                if guess is None:
                    continue
                key = (succ, len(guess) // 4)
                if key not in seen and key not in self._learnt:
                    seen.add(key)
                    found.append((succ, guess))
                    todo.append((succ, guess))
        self._learn_blocks(found)

    def _guess_block(self, start: int, ctx: AccessContext) -> bytes | None:
        """The code of the block QEMU would translate at ``start`` (see
        :meth:`_learn_successors`), or None when it does not translate."""
        page = self._code_page(start, self._regime_el(ctx.el))
        if page is None:
            return None
        first = (start & 0xFFF) // 4
        ends = _block_ends(page)
        i = bisect.bisect_left(ends, first)
        last = min(ends[i] if i < len(ends) else 0x3FF, first + TCG_MAX_INSNS - 1)
        return page[4 * first:4 * (last + 1)]

    def _evaluate(self, block: int, code: bytes, plan: tuple, info, ctx: AccessContext
                  ) -> dict[int, int] | None:
        """The registers ``info`` reads, computed from the block's start by the evaluation
        plan of :meth:`_prediction_mode` (loads read RAM through the current regime); None when
        a load would read outside RAM or does not translate."""
        steps, start = plan
        regime = self._regime_el(ctx.el)
        words = struct.unpack(f"<{len(code) // 4}I", code)
        values = dict(self._regs(start))
        failed = []

        def read(va: int, size: int) -> int:
            pa = self._ram_at(va, size, regime)
            if pa is None:
                failed.append(va)
                return 0
            return int.from_bytes(self.fast.read(pa, size), "little")

        for j in steps:
            values.update(a64.evaluator(words[j]).run(block + 4 * j, values, read))
            if failed:
                return None
        return {rid: values[rid] for rid in info.reads}

    def _settle(self, insn_index: int, next_pc: int) -> None:
        """A stop or hook at instruction number ``insn_index``: commit the pending sample if
        the run got to the sampled instruction, else drop it (an earlier instruction took an
        exception; the member is still ahead and will be planned again). ``next_pc`` is the
        PC the run continues at (where a branch predicted by its next PC went)."""
        index, observed, mode, undo = self._pending
        self._pending = None
        if insn_index < index:
            self.sample_paths["dropped"] += 1
            if undo is not None:
                interval = self.spu.interval
                interval.state, self.spu.stats.population, self.acct = undo
            return
        if mode == PREDICT_END:
            pc, info, ctx = observed
            observed = (self._observe(pc, info, ctx, index), ctx)
        elif mode == PREDICT_NEXT_PC:
            self._resolve_branch(observed[0], next_pc)
        if undo is None:
            self._member_selected(index, observed)
        elif observed is not None:
            self._sample(*observed)

    def _catch_up(self, insn_index: int, next_pc: int | None = None) -> None:
        """Before anything at instruction number ``insn_index`` (a stop, or a hook about to
        change state), where the run goes on at ``next_pc`` (default: the PC): settle the
        pending predicted sample, then replay the native captures, in instruction order."""
        if self._pending is not None:
            self._settle(insn_index, self.pc if next_pc is None else next_pc)
        if self.counter.cap_count:
            self._drain(insn_index, next_pc)

    def _drain(self, insn_index: int, next_pc: int | None = None) -> None:
        """Replay the samples the native hook captured (in order) at a stop or hook at
        instruction number ``insn_index``, where the run goes on at ``next_pc`` (default: the
        PC): each fires its interval step and, if selected, is recorded from the registers the
        hook captured (a capture still waiting for the end of its block is completed from the
        live state, as :meth:`_settle` does). A capture beyond ``insn_index`` is dropped (an
        earlier instruction of its block took an exception), and so are the ones after it; the
        run loop plans from the interval counter again.

        The native recorder (``record.c``, :mod:`.native_records`) builds the records of runs
        of captures; Python builds the others (:meth:`_replay`), in order. All are written to
        the Profiling Buffer in one batch (the capture budget guarantees no Profiling Buffer
        management event)."""
        c = self.counter
        count = c.cap_count
        c.cap_count = c.completing = c.armed = 0
        self.sample_paths["evaluated"] += c.evaluated
        c.evaluated = 0
        ctx = self.context()  # (no control state changes while captures are pending)
        go_on = self.pc if next_pc is None else next_pc
        interval = self.spu.interval
        gap = interval.fixed_gap(self.spu.regs["PMSIRR_EL1"])
        records = self.records if gap is not None else None
        types = None if records is None else self.spu.native_record_filter(ctx)
        if types is not None:
            ts, _, _, collect_pa = self._collection(ctx)
            prefix = self.spu.builder.context_packets(*self._context_ids(ctx))
            records.begin(insn_index, go_on, ctx.el, ctx.state_ns, ts is not None, collect_pa,
                          prefix, gap, self.clock.idle_ticks, types, self._regime_el(ctx.el))
        else:
            records = None
        chunks: list[bytes] = []   # padded records, in order
        python_records = 0
        i = 0
        while i < count:
            if records is not None:
                expect = self.acct + interval.members_to_next_event() - 1
                records.recorder.s.expect = expect
                j = records.recorder.record(c, i, count)
                if j > i:
                    self._fire_captured(expect, j - i, gap)
                i = j
                reason = records.recorder.s.reason
                if reason == native.REC_TEMPLATE:
                    pc = c.caps[i].pc
                    records.add_template(records.template(
                        pc, ctx.el, ctx.state_ns, self._captured_word(pc, ctx.el)))
                    continue
                if reason == native.REC_XLATE:   # (as _observe translates for a PA packet)
                    va = records.recorder.s.xlate_va
                    try:
                        pa = self._translate(va, records.recorder.s.xlate_regime)
                    except TranslationFault:
                        # (not remembered, as _translate does not: a translation fault is
                        # not cached, so the page may translate at the next sample with no
                        # TLBI. Python records this one.)
                        reason = native.REC_PYTHON
                    else:
                        records.add_translation(va, pa)
                        continue
                if reason == native.REC_ORDER:
                    raise AssertionError(f"captured sample at {c.caps[i].index} is not the "
                                         f"planned event {expect}")
                if reason != native.REC_PYTHON:
                    break  # done, or the rest is dropped
                chunks.append(records.recorder.take_output())
            if c.caps[i].index > insn_index:
                break
            data = self._replay(c.caps[i], ctx, go_on)
            if data is not None:
                chunks.append(self.spu.buffer.padded(data))
                python_records += 1
            i += 1
        if i < count:
            self.sample_paths["dropped"] += count - i
        built = filtered = 0
        if records is not None:
            built, filtered = records.recorder.s.records, records.recorder.s.filtered
            chunks.append(records.recorder.take_output())
        self.spu.write_batch(b"".join(chunks), python_records + built, built, filtered)

    def _fire_captured(self, first: int, n: int, gap: int) -> None:
        """The interval steps of ``n`` captured members, the first at instruction number
        ``first`` and then one every ``gap`` (a fixed gap: COUNT reaches zero at each, which
        selects it and reloads the same value, §3.1.2)."""
        self.sample_paths["captured"] += n
        if not self._fire_member(first):
            raise AssertionError(f"captured member {first} is not selected")
        if n > 1:
            self.spu.stats.population += (n - 1) * gap
            self.acct = first + (n - 1) * gap + 1

    def _captured_word(self, pc: int, el: int) -> int:
        """The instruction word of a captured sample (remembered until code may have changed,
        read from its code page)."""
        words = self._captured_words
        word = words.get((pc, el))
        if word is None:
            if len(words) >= PREDICTION_CACHE_ENTRIES:
                words.clear()
            page = self._code_page(pc, self._regime_el(el))
            if page is None:
                word = self._fetch(pc, el)
            else:
                word = int.from_bytes(page[pc & 0xFFF:(pc & 0xFFF) + 4], "little")
            words[(pc, el)] = word
        return word

    def _replay(self, cap: native.SpeCapture, ctx: AccessContext, go_on: int) -> bytes | None:
        """Python's replay of one capture: its interval step and, if selected, its record
        (None: not selected, or removed by ``CollectRecord()``)."""
        index = cap.index
        if self.acct + self.spu.interval.members_to_next_event() - 1 != index:
            raise AssertionError(f"captured sample at {index} is not the planned event")
        self.sample_paths["captured"] += 1
        if not self._fire_member(index):
            return None
        info = a64.decode(self._captured_word(cap.pc, ctx.el))
        if cap.mode == PREDICT_END and not cap.next_pc:
            observed = None                                   # live registers
        else:
            regs = cap.regs
            observed = {rid: regs[CAPTURE_SLOT[rid]] for rid in info.reads}
        s = self._observe(cap.pc, info, ctx, index, observed)
        if cap.mode == PREDICT_NEXT_PC:
            self._resolve_branch(s, cap.next_pc or go_on)
        if cap.fed != native.FED_NONE:   # (model_feed "every": what the hooks saw)
            s.fed = cap.fed
        return self.spu.record(s, ctx)

    @staticmethod
    def _resolve_branch(s: Sample, next_pc: int) -> None:
        """Outcome of the sampled branch ``s`` from the PC its block left to."""
        if s.info.is_conditional:
            s.branch_taken = s.cond_passed = next_pc == s.branch_target
        else:
            s.branch_taken, s.branch_target = True, next_pc

    def _record_room(self, ctx: AccessContext) -> int:
        """How many records can be written from PMBPTR_EL1 on with no Profiling Buffer
        management event (§3.5.2, §3.5.3): each record (at most 2**PMSIDR_EL1.MaxSize bytes,
        and RECORD_BYTES_BOUND, plus alignment padding) leaves 2**PMSIDR_EL1.MaxSize bytes
        below the limit, and lands in PMBPTR_EL1's page or the RECORD_WINDOW_PAGES - 1 after
        it, all of which translate for the owning regime."""
        ptr = self.spu.regs["PMBPTR_EL1"]
        _, owner_el = self.spu.owner(ctx)
        key = (ptr >> 12, owner_el)
        if key not in self._headroom_pages:
            try:
                for page in range(RECORD_WINDOW_PAGES):
                    pa = self._translate((ptr & ~0xFFF) + 0x1000 * page, owner_el, write=True)
                    if self.bus.find(pa) is None:  # (an External abort: written one by one)
                        return 0
            except TranslationFault:
                return 0
            self._headroom_pages.add(key)
            self.sysreg_filter.sys_cache = 1
        end = min(self.spu.buffer.headroom_end, (ptr & ~0xFFF) + 0x1000 * RECORD_WINDOW_PAGES)
        bound = min(RECORD_BYTES_BOUND, self.cfg.spe.max_record_bytes) + self.cfg.spe.align_bytes
        return max(0, (end - ptr) // bound)

    def _collection(self, ctx: AccessContext) -> tuple:
        """(CollectTimeStamp(), CollectContextIDR1(), CollectContextIDR2(),
        CollectPhysicalAddress()), cached until the next re-evaluation of the enable state (in
        the reference mode: computed every time)."""
        if self._collect is None or self.cfg.mode != "fast":
            self._collect = (self.spu.collect_timestamp(ctx), self.spu.collect_context1(ctx),
                             self.spu.collect_context2(ctx),
                             self.spu.collect_physical_address(ctx))
        return self._collect

    def _generates_exception(self, info, ctx: AccessContext) -> bool:
        """Whether the sampled instruction will take a synchronous exception, decided before
        it executes: SVC/HVC/SMC/BRK always do (HVC/SMC UNDEF where not permitted); ERET does at
        EL0; HLT does
        unless it is a permitted semihosting call; an access to a PMS*/PMB*/ICC_* register
        follows its access check; an access to another system register does when the current
        EL is below the minimum EL its op1 encodes (Arm ARM C5.3; finer traps QEMU applies are
        not predicted -- docs/model.md)."""
        if info.exception in ("svc", "hvc", "smc", "brk"):
            return True
        if info.is_eret:  # ERET is UNDEFINED at EL0 (Arm ARM C6.2 ERET)
            return ctx.el == 0
        if info.exception == "hlt":
            return not self._is_semihosting_call(info, ctx)
        if info.sysreg is not None:
            entry = self._lookup(info.sysreg)
            if entry is None:
                return ctx.el < OP1_MIN_EL[info.sysreg[1]]
            return entry.verdict(info.is_read, ctx) is not Access.OK
        return False

    def _is_semihosting_call(self, info, ctx: AccessContext) -> bool:
        """HLT #0xF000 is a semihosting call (Arm semihosting specification, AArch64), at EL0
        only when ``allow_el0_semihosting``; otherwise it UNDEFs as in QEMU."""
        return (info.exception == "hlt" and info.imm16 == SEMIHOST_IMM
                and (ctx.el > 0 or self.cfg.allow_el0_semihosting))

    # ------------------------------------------------------------------ system registers ---
    def _lookup(self, enc) -> SysregEntry | None:
        """The registered register at ``enc`` (op0, op1, CRn, CRm, op2), or None."""
        return self.sysregs.lookup(enc)

    def _emulate_sysreg(self, info, entry: SysregEntry, pc: int) -> None:
        """Execute a trapped MRS/MSR of a registered register (``entry`` from
        :meth:`_lookup`), or take the exception its access check asks for. Called from the
        INTR hook (the instruction UNDEFs in QEMU)."""
        fast = self.fast
        ctx = self.context()
        verdict = entry.verdict(info.is_read, ctx)
        if verdict is Access.UNDEFINED:
            self._take_sync(ctx, self.pe.sync_target(ctx), esr(EC.UNKNOWN), pc)
            return
        if verdict is not Access.OK:
            iss = sysreg_trap_iss(*info.sysreg, info.rt, info.is_read)
            self._take_sync(ctx, verdict.target_el, esr(EC.SYSREG, iss), pc)
            return
        rt_reg = a64.X_REGS[info.rt] if info.rt < 31 else None  # Rt == 31 is XZR
        self._account(self._retired_before(pc) + 1)
        if entry.owner is self.spu and self._control_segments:
            self._follow_runtime_code(pc)
        if self.sync_observer is not None and entry.owner is self.spu:
            self.sync_observer("sysreg", self._retired_before(pc))
        if info.is_read:
            value = entry.owner.sysreg_read(entry.spec.name, ctx)
            self._irq_line_value = None  # (an acknowledge changes the GIC's outputs)
            self._python_controls()
            if rt_reg is not None:
                fast.set_reg(rt_reg, value)
        else:
            value = fast.reg(rt_reg) if rt_reg is not None else 0
            entry.owner.sysreg_write(entry.spec.name, value, ctx)
            self._irq_line_value = None
            self._python_controls()
            if self._stop_after_write(entry.replan, ctx):
                self._request_stop()
        fast.set_reg(A.UC_ARM64_REG_PC, pc + 4)

    def _stop_after_write(self, replan: Replan, ctx: AccessContext) -> bool:
        """Whether a register write with this :class:`Replan` property stops the run to
        re-plan (docs/model.md "Run loops").

        ENABLE: while profiling is enabled always; otherwise when the reference loop must
        recompute its per-EL enables, PMBIRQ changed level (``replan`` set through the GIC's
        on_change) or profiling became enabled (§3.2.3 Table 3). PLAN: while profiling is
        enabled (§3.1). IRQ: an IRQ is taken only while the GIC asserts it (IHI 0069 §4.1;
        Arm ARM D1.3): with the output low the run goes on."""
        if replan is Replan.ENABLE:
            return (self.enabled or self.cfg.mode == "reference" or self.replan
                    or self.spu.profiling_enabled(ctx))
        if replan is Replan.PLAN:
            return self.enabled
        if replan is Replan.IRQ:
            return self.cfg.mode == "reference" or self._irq_line()
        return False

    def _take_sync(self, ctx: AccessContext, target: int, syndrome: int, preferred: int,
                   insn: int | None = None, far: int | None = None) -> None:
        """Synchronous exception caused by the instruction at ``insn`` (default: ``preferred``,
        the faulting instruction itself), with FAR_ELx = ``far`` when given; the population
        is accounted up to and including it."""
        insn = preferred if insn is None else insn
        if self.cfg.mode != "reference":
            # (the block ends at the faulting instruction: spe_end_block_at, which the native
            # INTR hook uses too)
            retired = native.end_block_at(self.counter, insn)
        else:
            retired = self._retired_before(insn) + 1
        self._account(retired)
        if native.exception_guard(self.intr, retired):
            # (in place: the faulting instruction is the first after the previous entry, so
            # insn is the vector that entry went to)
            ec = ESR.get(syndrome, "EC")
            name = EC(ec).name if ec in EC._value2member_map_ else "not named"
            raise GuestError(
                f"exception loop: the EL{target} vector at {insn:#x} raised "
                f"{EXCEPTION_LOOP_LIMIT} synchronous exceptions in a row with its first "
                f"instruction (EC {ec:#04x} {name}, ESR {syndrome:#x}); is the vector table "
                f"mapped and code?")
        self.pe.take(target, VectorKind.SYNC, preferred, syndrome, far)
        self._ctx = None
        self._py_exceptions_taken += 1
        self._request_stop()
        if self.exception_observer is not None:
            self.exception_observer(VectorKind.SYNC, target, syndrome)

    def _request_stop(self) -> None:
        self.replan = True
        self._ref_enabled = None
        self.uc.emu_stop()

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
    def _on_intr(self, uc: Uc, intno: int, _data) -> None:
        """Every exception QEMU raises arrives here (Unicorn never enters the vector itself) --
        in the fast loop, those the native INTR hook (``spe_intr_hook``, exception.c) does not
        take itself, with exactly the same outcome.

        UNDEFINED encodings that are spe_emu's to execute -- PMS*/PMB* and ICC_* register
        accesses, semihosting HLT #0xF000 -- are emulated. Everything else is taken exactly as
        QEMU decided: its syndrome, fault address and target EL (with all its trap controls)
        are read back from the CPU state (:mod:`spe_emu.cpu.qemu_state`)."""
        pc = self.pc
        # SVC/HVC/SMC leave the PC after the instruction; the others at the instruction.
        insn = pc - 4 if intno in (INTNO_SVC, INTNO_HVC, INTNO_SMC) else pc
        self._catch_up(self._insn_index(insn), pc)
        ctx = self.context()
        if (intno in (INTNO_HVC, INTNO_SMC) and self.psci is not None and ctx.el > 0
                and self.cfg.psci == ("hvc" if intno == INTNO_HVC else "smc")):
            self._psci_call(insn)
            return
        if intno == INTNO_UNDEF:
            word = self._fetch(pc, ctx.el)
            if self._unicorn_exit(pc, word):
                return
            info = a64.decode(word)
            if self._is_semihosting_call(info, ctx):
                self._semihost(pc)
                return
            entry = self._lookup(info.sysreg) if info.sysreg is not None else None
            if entry is not None and entry.via_undef:
                self._emulate_sysreg(info, entry, pc)
                return
        elif intno not in QEMU_SYNC_EXCEPTIONS:
            raise GuestError(f"unexpected exception {intno} from Unicorn at PC {pc:#x}")
        exc = self.qemu_exception.read()
        syndrome = exc.syndrome or self._rebuild_syndrome(pc, ctx)
        # An exception is never taken to a lower EL (QEMU routes HVC at EL3 to EL2).
        target = max(exc.target_el, ctx.el, 1)
        far = exc.vaddress if ESR.get(syndrome, "EC") in FAR_ECS else None
        target, syndrome = self.checks.refine_abort(ctx, target, syndrome, far)
        self._take_sync(ctx, target, syndrome, pc, insn, far)

    def _unicorn_exit(self, pc: int, word: int) -> bool:
        """Whether the UNDEF QEMU raised at ``pc`` (instruction ``word``) is Unicorn's
        emu_start exit rather than the guest's: Unicorn ends a run at its ``until`` address by
        translating a WFI there (Unicorn 2 translate-a64.c), which QEMU raises at EL0 under
        SCTLR_EL1.nTWI == 0 (Linux's setting) as a trapped WFI (ESR_ELx.EC 0x01) of the
        instruction before the exit, ``pc``, already executed. Then the PE is put at the exit,
        ``pc`` + 4, as the run asked, and the run stops there; no exception is taken. (A block
        translated with an exit stays cached: a later run through it stops there the same
        way.)"""
        if word == WFI_WORD or ESR.get(self.qemu_exception.read().syndrome, "EC") != EC.WFX:
            return False
        self.uc.reg_write(A.UC_ARM64_REG_PC, pc + INSN_BYTES)
        self.uc.emu_stop()
        return True

    def _rebuild_syndrome(self, pc: int, ctx: AccessContext) -> int:
        """QEMU 5's helpers that raise with a return address (``raise_exception_ra``) have the
        syndrome overwritten by ``restore_state_to_opc``; an all-zero ESR is never what the
        architecture reports for AArch64, so rebuild it. Such traps reachable here: MSR
        DAIFSet/DAIFClr at EL0 with SCTLR_EL1.UMA == 0: EC 0x18 with Op0 0, Op1, CRn 4, CRm =
        imm, Op2, Rt 0b11111; a pointer authentication instruction trapped by HCR_EL2.API or
        SCR_EL3.API: EC 0x09, ISS 0 (Arm ARM D19.2). Anything else is reported as EC 0x00."""
        word = self._fetch(pc, ctx.el)
        info = a64.decode(word)
        if info.pstate is not None:
            op1, op2, crm = info.pstate
            return esr(EC.SYSREG, sysreg_trap_iss(0, op1, 4, crm, op2, 31, False))
        if a64.is_pauth(word):
            return esr(EC.PAC_TRAP)
        return esr(EC.UNKNOWN)

    def _on_unmapped(self, _uc: Uc, access: int, address: int, _size: int, _value: int,
                     _data) -> bool:
        """A fetch, load or store reached an address with no RAM or device behind it: note
        it (Unicorn then ends emu_start with UC_ERR_*_UNMAPPED, and :meth:`_start` takes the
        abort). ``address`` is the access's address as Unicorn reports it: the physical one
        once the MMU is on (:meth:`_abort_va`)."""
        if self._unmapped is None:
            self._unmapped = (access, address)
        return False

    def _external_abort(self, access: int, reported: int) -> None:
        """The synchronous External abort of an access to no RAM or device on the board's
        bus (:meth:`ProcessingElement.external_abort`; QEMU's virt board faults them too):
        FAR = the access's VA, ELR = the instruction (the fetched address for a fetch)."""
        ctx = self.context()
        pc = self.pc
        fetch = access == UC_MEM_FETCH_UNMAPPED
        target, syndrome = self.pe.external_abort(ctx, fetch=fetch,
                                                  write=access == UC_MEM_WRITE_UNMAPPED)
        far = pc if fetch else self._abort_va(pc, ctx, reported)
        target, syndrome = self.checks.refine_abort(ctx, target, syndrome, far, translated=True)
        self._take_sync(ctx, target, syndrome, pc, far=far)

    def _abort_va(self, pc: int, ctx: AccessContext, reported: int) -> int:
        """The virtual address of the byte of the load/store at ``pc`` that reached no memory.
        Unicorn's unmapped-memory hook reports the *physical* address once the MMU is on, so
        the VA is the one in the access's range [lowest, lowest + size) with the same offset
        in its 4 KiB page (translation keeps those bits); the reported address when the
        instruction gives no data address."""
        info = a64.decode(self._fetch(pc, ctx.el))
        lowest = info.data_address(pc, self._regs(info.reads))
        if lowest is None:
            return reported
        return (lowest + ((reported - lowest) & 0xFFF)) & MASK64

    def _psci_call(self, insn: int) -> None:
        """An HVC or SMC through the board's PSCI conduit (at ``insn``; the PC is already
        after it): the emulator is the firmware that answers it (Arm DEN 0022,
        :class:`spe_emu.devices.psci.Psci`). X0 takes the result; SYSTEM_OFF, CPU_OFF of the
        one PE and SYSTEM_RESET end the run (docs/model.md "PSCI")."""
        self._account(self._retired_before(insn) + 1)
        fid, *args = (self.fast.reg(a64.X_REGS[i]) for i in range(4))
        result = self.psci.call(fid, tuple(args))
        if result.action in (PsciAction.POWER_OFF, PsciAction.RESET):
            status = result.exit_status if result.exit_status is not None else 0
            self.exit = MachineExit(status, None, f"psci-{result.reason}")
            self._request_stop()
            return
        self.fast.set_reg(a64.X_REGS[0], result.x0_value)

    def _semihost(self, pc: int) -> None:
        op = self.uc.reg_read(A.UC_ARM64_REG_X0) & 0xFFFFFFFF
        param = self.uc.reg_read(A.UC_ARM64_REG_X1)
        self._account(self._retired_before(pc) + 1)
        span = self.firmware_span
        self.semihost.caller_is_firmware = span is not None and span[0] <= pc < span[1]
        try:
            result = self.semihost.call(op, param)
        except SemihostExit as done:
            self.exit = MachineExit(done.status, done.reason, "semihosting")
            self.uc.reg_write(A.UC_ARM64_REG_PC, pc + 4)
            self._request_stop()
            return
        self.uc.reg_write(A.UC_ARM64_REG_X0, result & ((1 << 64) - 1))
        self.uc.reg_write(A.UC_ARM64_REG_PC, pc + 4)

    def _mrs_fallback(self, _uch, reg: int, cp_ptr, _data) -> int:
        """The native MRS hook's fallback (fast and raw modes): fills the counter-read table
        when it is invalid and this is a counter read, then :meth:`_on_mrs`
        (:meth:`_guarded`)."""
        def body() -> int:
            cp = self._cp_reg(cp_ptr)
            if (not self.counter_reads.valid
                    and (cp.op0, cp.op1, cp.crn, cp.crm, cp.op2) in COUNTER_READS):
                self._fill_counter_reads()
            return self._on_mrs(self.uc, reg, cp, None)
        return self._guarded(body, 0)

    def _fill_counter_reads(self) -> None:
        """The native counter-read table for the present control state, from the registered
        owner's own access checks and values (the rules stay in Python): for each EL and
        counter, whether a read is permitted and the offset from the instruction count
        (valid until an MSR or a wait changes the control state or the idle time)."""
        reads = self.counter_reads
        ctx = self.context()
        allowed = 0
        self._retired_now = 0
        try:
            for el in range(4):
                ctx_el = ctx.at_el(el)
                for which, enc in enumerate(COUNTER_READS):
                    entry = self.sysregs.lookup(enc)
                    if (entry is None or entry.via_undef
                            or entry.verdict(True, ctx_el) is not Access.OK):
                        continue
                    value = entry.owner.sysreg_read(entry.spec.name, ctx_el)
                    reads.offset[el][which] = -value & MASK64
                    allowed |= 1 << (2 * el + which)
        finally:
            self._retired_now = None
        reads.allowed = allowed
        reads.valid = 1

    def _pmu_catch_up(self, retired: int) -> None:
        """Before a PMU register access by instruction number ``retired`` (from its MRS/MSR
        hook, in the middle of a translated block): attribute the SPE events of the
        instructions before it (:class:`SpePmuEvents`).

        When nothing pending is at or after it, the pending samples are settled first (exact).
        Otherwise -- the native hook captured a sample of a later instruction of the block at
        the block's entry, or a prediction is pending -- nothing is settled (settling would
        drop the later ones) and the samples of the earlier instructions still pending are
        counted as SAMPLE_FEED, and as SAMPLE_FILTRATE while no PMSFCR_EL1 filter is enabled
        (with one, their SAMPLE_FILTRATE counts from the next stop on). SAMPLE_POP is exact
        either way: the members before ``retired`` while profiling is enabled."""
        c = self.counter
        caps = [c.caps[i].index for i in range(c.cap_count)]
        pending = self._pending
        early = 0
        if pending is None and not c.completing and all(i < retired for i in caps):
            self._catch_up(retired)
        else:
            early = sum(1 for i in caps if i < retired)
            if pending is not None and pending[0] < retired and (pending[3] is None
                                                                  or pending[1] is not None):
                early += 1
        kept, coll = (0 if self.spu.filters_enabled() else early), 0
        own = self._last_sample
        if own is not None and own[0] == retired:
            # the accessing instruction's own sample, taken before its hook (reference loop):
            # it counts after its access, as its SAMPLE_POP member does
            early -= 1 - own[2]
            kept -= 1 - own[1] - own[2]
            coll -= own[2]
        self.pmu_events.adjust = (retired - self.acct if self.enabled else 0, early, kept,
                                  coll)
        self.pmu_events.accrue(self._pmu_bucket)
        # (the adjusted counts are realised by the next settling, in the same period)
        self.pmu_events.adjust = (0, 0, 0, 0)

    def _counter_reads_changed(self) -> None:
        """The control state or the idle time changed: the native table is refilled at the
        next MRS that reaches Python."""
        if self.counter_reads is not None:
            self.counter_reads.valid = 0

    def sleep(self, ticks: int) -> None:
        """Advance virtual time by ``ticks`` with no instruction retired (a sleep the host
        answers for the guest, as a WFI would wait; events now due fire at the next stop)."""
        self.clock.idle_ticks += max(0, ticks)
        self._counter_reads_changed()
        self.replan = True

    def _clock_retired(self) -> int:
        """Instructions retired, for the clock: exact at the instruction a hook runs for."""
        return self.insns() if self._retired_now is None else self._retired_now

    def _hooked_sysreg(self, entry: SysregEntry, is_read: bool, value: int = 0) -> int | None:
        """An MRS/MSR of a register QEMU knows and a registered owner answers (the generic
        timer), from the instruction hook: the value read (or 0 after a write), or None when
        the access check does not pass -- QEMU then executes the instruction and raises the
        same trap or UNDEF itself (returning 1 from the hook where QEMU's own check fails
        re-executes the instruction forever: ../shared/notes/unicorn-aarch64-facts.md)."""
        ctx = self.context()
        if entry.verdict(is_read, ctx) is not Access.OK:
            return None
        retired = self._retired_before(self.pc)
        if entry.owner is self.pmu_events:
            # (no accounting here: it would step the interval counter past samples the
            # native hook captured ahead in this block)
            self._pmu_catch_up(retired)
        elif self._pending is None and not self.counter.cap_count:
            # (an early update only; while a predicted sample or native captures are not yet
            # replayed, their members must be fired by the replay, at the next stop, not
            # passed by this accounting: that drove the interval counter below zero)
            self._account(retired + 1)
        self._retired_now = retired
        try:
            if is_read:
                return entry.owner.sysreg_read(entry.spec.name, ctx)
            entry.owner.sysreg_write(entry.spec.name, value, ctx)
            return 0
        finally:
            self._retired_now = None

    def _on_mrs(self, uc: Uc, reg: int, cp, _data) -> int:
        """Supply the values of registers QEMU knows but spe_emu models: registered owners
        (the generic timer on virtual time), ISR_EL1 and the ID fields spe_emu changes --
        only when the access is permitted; otherwise QEMU executes the MRS and raises the
        trap or UNDEF itself (returning 0)."""
        enc = (cp.op0, cp.op1, cp.crn, cp.crm, cp.op2)
        entry = self.sysregs.lookup(enc)
        if entry is not None and not entry.via_undef:
            value = self._hooked_sysreg(entry, True)
            if value is None:
                return 0
            uc.reg_write(reg, value)
            return 1
        if enc in RANDOM_NUMBER_REGS:
            # FEAT_RNG: a seeded generator, so no host randomness reaches the guest (the run's
            # seed, a stream apart from the interval counter's); NZCV = 0b0000 (success).
            uc.reg_write(reg, self._rng.next64())
            uc.reg_write(A.UC_ARM64_REG_NZCV, 0)
            return 1
        if enc in SHADOWED:
            value = self.watchpoints.read_bcr(enc, self.context())   # (OS Lock set)
            if value is None:
                return 0
            uc.reg_write(reg, value)
            return 1
        if enc == ISR_EL1.encoding.tuple:
            ctx = self.context()
            if ctx.el == 0:
                return 0  # UNDEFINED at EL0: QEMU raises it
            uc.reg_write(reg, self.pe.isr_el1(ctx))
            return 1
        if (enc in (ID_AA64DFR0_EL1.encoding.tuple, ID_AA64DFR2_EL1.encoding.tuple,
                    ID_AA64PFR0_EL1.encoding.tuple)
                or enc in self.cfg.cpu.presented):
            ctx = self.context()
            if ctx.el == 0 or (ctx.el == 1 and ctx.el2_enabled
                               and HCR_EL2.get(ctx.hcr_el2, "TID3")):
                return 0
            value = uc.cpr_read(*enc)
            if enc == MIDR_EL1.encoding.tuple and ctx.el == 1 and ctx.el2_enabled:
                # (D19.2 MIDR_EL1: at EL1 with EL2 enabled a read gives VPIDR_EL2)
                uc.reg_write(reg, uc.cpr_read(*VPIDR_EL2.encoding.tuple))
                return 1
            if enc == ID_AA64DFR0_EL1.encoding.tuple:
                value = ID_AA64DFR0_EL1.set(value, "PMSVer", self.cfg.spe.pmsver)
                if self.cfg.spe.pmsver:  # (SPE events need 16-bit evtCount, §2.6)
                    value = ID_AA64DFR0_EL1.set(value, "PMUVer", max(
                        PMUVER_V3P1, ID_AA64DFR0_EL1.get(value, "PMUVer")))
            elif enc == ID_AA64DFR2_EL1.encoding.tuple:  # FEAT_SPE_EXC (Arm ARM D17.8)
                value = ID_AA64DFR2_EL1.set(value, "SPE_EXC", self.cfg.spe.spe_exc)
            elif enc == ID_AA64PFR0_EL1.encoding.tuple:  # the GICv3 CPU interface, FEAT_RAS
                value = ID_AA64PFR0_EL1.set(ID_AA64PFR0_EL1.set(value, "GIC", 1), "RAS",
                                            PRESENTED_RAS)
            value = self.cfg.cpu.present(enc, value)
            uc.reg_write(reg, value)
            return 1
        return 0

    def _on_sys(self, uc: Uc, reg: int, cp, _data) -> int:
        """SYS instructions (op0 == 1) the native filter passes on (TLBI, IC; every one in
        the reference loop): a TLBI invalidates the host translation cache, an IC the code
        the machine learnt."""
        self._catch_up(NEVER)  # (a SYS is never before a predicted or captured sample)
        if cp.crn == CRN_CACHE and cp.crm in CRM_IC:
            self._forget_code()
        if cp.crn == CRN_TLBI:
            self._flush_translations()
        return 0

    def _on_msr(self, uc: Uc, reg: int, cp, _data) -> int:
        self._catch_up(NEVER)  # (an MSR is never before a predicted or captured sample)
        enc = (cp.op0, cp.op1, cp.crn, cp.crm, cp.op2)
        if enc == DAIF_ENC:
            if not self._replan_owed():
                # PSTATE.DAIF changes nothing the run loop planned: no interrupt is asserted
                # (an unmasking takes none) and profiling is disabled.
                self._controls_idle()
                return 0
            # (DAIF, Xt holds D, A, I, F at PSTATE's bits 9:6: Arm ARM C5.2.2 "DAIF")
            if not self._unmask_owes_replan(self.fast.reg(A.UC_ARM64_REG_PSTATE)
                                            & ~cp.val & UNMASK_WATCH):
                return 0
        entry = self.sysregs.lookup(enc)
        if entry is None or not entry.counter_read_neutral:
            self._counter_reads_changed()
        if entry is not None and not entry.via_undef:
            # The owner performs the write, and QEMU then executes it as well (returning 0):
            # QEMU's copy of the trap controls (CNTKCTL_EL1, CNTHCTL_EL2) is what it raises
            # the traps of later MRS/MSR by when the owner's verdict is not OK
            # (:meth:`_hooked_sysreg`), so both must hold the same value.
            self._hooked_sysreg(entry, False, cp.val)
            return 0
        if self.checks.control_written(enc):
            # (a trap control of SyncChecks: refreshed at the stop right after this write)
            if self.cfg.mode == "fast":
                self._stop_at_block_boundary()
            elif self.cfg.mode == "reference":
                self._ref_deadline = 0
        if enc in TRANSLATION_WRITES:
            self._flush_translations()
            return 0
        if enc in WATCHED_WRITES:
            if enc in STAGE2_SWITCHES and self._stage2_switch(enc, cp.val):
                self._flush_translations()
            self._ctx = None
            self._ref_enabled = None
            self._irq_line_value = None  # (HCR_EL2.VSE, AMO, TGE; SCR_EL3.NS)
            self._python_controls(settled=False)   # (QEMU writes the register after this)
            self.intr.gic_native = 0   # (until _native_context has the new context)
        if enc in DEBUG_WRITES:
            self.watchpoints.dirty = True  # (hooks installed again before the run goes on)
            if enc in SHADOWED:
                self.watchpoints.bcr_written(enc, cp.val)
        if enc in WATCHED_WRITES or enc in DEBUG_WRITES or enc == DAIF_ENC:
            # Takes effect after this instruction; re-plan at the next block boundary.
            self.replan = True
            self._stop_at_block_boundary()
        return 0

    def _controls_idle(self) -> None:
        """Nothing a control instruction (ERET, DAIF write) changes needs Python until a
        device, a register write or the enable state says otherwise (:meth:`_python_controls`):
        the native hooks skip them, except an ERET whose SPSR_ELx may set PSTATE.IL (the
        table for this context); with a Profiling Buffer that may be enabled they stay."""
        if self.spu.buffer_may_be_enabled():
            return
        self.control.eret_il[:] = self.checks.eret_table(self.context().at_el(0))
        self.control.python = self.control.irq = 0

    def _replan_owed(self) -> bool:
        """Whether a change of PSTATE.DAIF or the EL must stop the run to re-plan: the
        reference loop always; otherwise while profiling is enabled or an interrupt (or a
        virtual SError) is asserted, which an unmasking may let in, or a PMBSR_ELx.S is 1
        with FEAT_SPE_EXC (an SPE Profiling exception a lower EL unmasks:
        :meth:`_take_spe_exception`)."""
        return self._replan_owed_by_state() or self._irq_line()

    def _replan_owed_by_state(self) -> bool:
        """:meth:`_replan_owed`'s reasons other than an asserted interrupt."""
        return self.cfg.mode == "reference" or self.enabled or self._spe_exception_in_play()

    def _spe_exception_in_play(self) -> bool:
        """FEAT_SPE_EXC: an SPE Profiling exception may be pending, or PSTATE.PM is in play
        (Arm ARM D17.8)."""
        return self.spu.exception_may_be_pending() or bool(self.spu.pstate_pm)

    def _unmask_may_let_in(self) -> bool:
        """Whether clearing PSTATE.{A, I, F} may let an exception in: an interrupt or SError
        (physical or virtual) is asserted, or :meth:`_spe_exception_in_play` (Arm ARM D1.3.6
        "Asynchronous exception masking")."""
        return self._irq_line() or self._spe_exception_in_play()

    def _unmask_watch_may_rest(self) -> bool:
        """Whether the block hook's unmasking watch may rest (``SpeControl.unmask_idle``)
        while Python keeps the control hooks: a Profiling Buffer that may be enabled is the
        only reason (profiling does not depend on PSTATE.{A, I, F}) and nothing an unmasking
        could let in is asserted or pending."""
        return self.spu.buffer_may_be_enabled() and not self._unmask_may_let_in()

    def _unmask_owes_replan(self, cleared: int) -> bool:
        """Given that a re-plan is owed (:meth:`_replan_owed`), whether clearing the
        PSTATE.{A, I, F} bits ``cleared`` (an MSR DAIF, or the unmasking watch after an MSR
        DAIF or DAIFClr) must stop the run for it: always for a reason other than an
        asserted interrupt; for an asserted interrupt only when a cleared bit masks it (Arm
        ARM D1.3.6 "Asynchronous exception masking"): PSTATE.I or F for an IRQ or FIQ,
        PSTATE.A for a physical or virtual SError. Linux's el1_interrupt() writes DAIF with
        only A and D cleared while the IRQ it is taking is still asserted: that write lets
        nothing in, and no longer stops the run."""
        return bool(self._replan_owed_by_state() or cleared & UNMASK_INTERRUPTS
                    or cleared & UNMASK_SERROR and self._serror_line())

    def _on_control_insn(self, uc: Uc, address: int, size: int, _data) -> None:
        """ERET: state changes after this instruction; stop at the next
        block boundary (an ERET ends its block, so that is exactly after it) to re-plan.

        Not when nothing planned can change: profiling is disabled, the GIC's IRQ output is
        low (no IRQ to take, whatever PSTATE.I and the Exception level) and the Profiling
        Buffer cannot be enabled in any context (:meth:`SPU.buffer_may_be_enabled`), so
        profiling stays disabled at the Exception level returned to. (A re-plan owed for an
        earlier write would find the same: it waits for the next stop.) The cached context
        stays: an ERET changes only the EL, which :meth:`context` reads live."""
        if self.spu.pstate_pm:
            self._restore_pm()
        if not (self.checks.eret_needs_stop(address) or self._replan_owed()
                or self.spu.buffer_may_be_enabled()):
            # Nothing to do until one of them changes: the native hooks skip the control
            # instructions until then (_python_controls), except an ERET whose SPSR_ELx may
            # set PSTATE.IL in this context (the table eret_il_table gives them).
            self._controls_idle()
            return
        self._catch_up(self._insn_index(address), address)
        self.replan = True
        self._stop_at_block_boundary()

    def _on_unmask(self, address: int, cleared: int) -> None:
        """From the native block hook, at the entry of the block at ``address`` (not yet
        run), while the control hooks have work: the PSTATE.{A, I, F} bits ``cleared`` were
        set at the last block watched and are clear now (an MSR DAIFClr or MSR DAIF ended
        it). As :meth:`_on_control_insn` after the instruction: stop in front of this block
        to re-plan (an interrupt may be taken now), unless nothing planned can change."""
        if self._unmask_watch_may_rest():
            # (until a new reason, _python_controls; the ERET and DAIF write hooks still call
            # Python meanwhile)
            self.control.unmask_idle = 1
            return
        if not self.spu.buffer_may_be_enabled():
            if not self._replan_owed():
                self._controls_idle()
                return
            if not self._unmask_owes_replan(cleared):
                return
        self._catch_up(self.counter.insns)
        self.replan = True
        self._stop_at_block_boundary()

    def _psb_hook_state(self) -> None:
        """Whether the PSB CSYNC hook calls :meth:`_on_psb_csync`: while profiling is enabled
        (records may be unwritten) or the driver-bug reporter waits for a PSB CSYNC."""
        self.control.psb = int(self.enabled or not self.spu.rules.synced)

    def _on_psb_csync(self, address: int) -> None:
        """Fast mode, a PSB CSYNC at ``address`` while profiling is enabled (SPE supplement
        §3.6; Arm ARM D17.6.1): the records of every sampled operation before it -- a pending
        predicted sample, the native captures -- are written to the Profiling Buffer now, so
        a load after the following DSB reads them. A block holding a PSB CSYNC has no
        predicted or captured sample (:func:`_block_writes`), so everything pending is before
        it. The run then stops at the next block boundary to re-plan (the capture budget was
        computed from the room before these writes). While profiling is disabled (the hook
        runs for the driver-bug reporter) nothing is pending."""
        enabled = self.enabled
        self.spu.rules.psb_csync(enabled)
        self._psb_hook_state()
        if not enabled:
            return
        self._catch_up(self._insn_index(address), address)
        self.replan = True
        self._stop_at_block_boundary()
        if self.sync_observer is not None:
            self.sync_observer("psb", self._insn_index(address))

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
