"""Load the native run-loop helpers: the block-hook instruction counter and the MRS/MSR hooks
(``counter.c``), the record builder for captured samples (``record.c``) and exception entry
with the INTR hook (``exception.c``), declared together in ``spe_native.h``.

``pip install .`` builds them as the extension ``spe_emu.native._counter``. When the package
runs from a source tree without a build, the C files are compiled once with the system C
compiler into ``~/.cache/spe_emu`` (keyed by a hash of the sources). Either way the result is
opened with ctypes; the structs below mirror the C ones and the loader checks their sizes.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import os
import subprocess
import sysconfig
import weakref
from pathlib import Path

from ..errors import ConfigError, SpeEmuError
from .sources import HEADER as _HEADER
from .sources import HERE as _HERE
from .sources import SOURCES as _SOURCES
from .sources import source_digest


class NativeBuildError(SpeEmuError):
    """The native counter could not be found or compiled."""


CAP_MAX = 256         # SPE_CAP_MAX
CAP_REGS = 33         # SPE_CAP_REGS: X0-X30, SP, NZCV
PMU_SOURCE_COUNT = 14 # SPE_PMU_SOURCES (PMU_SOURCES names them)
VERDICTS = 4096       # SPE_VERDICTS
STEPS = 4096          # SPE_STEPS
STEP_ADD, STEP_SUB, STEP_MOV, STEP_LOAD = 1, 2, 3, 4   # SPE_STEP_*
NO_REG = 0xFF         # SPE_NO_REG


class SpeCapture(ctypes.Structure):
    """Mirror of ``struct spe_capture``: a sample observed at the start of its block."""

    _fields_ = [("index", ctypes.c_uint64), ("pc", ctypes.c_uint64),
                ("mode", ctypes.c_uint64), ("next_pc", ctypes.c_uint64),
                ("regs", ctypes.c_uint64 * CAP_REGS), ("fed", ctypes.c_uint64)]


class SpeVerdict(ctypes.Structure):
    _fields_ = [("pc", ctypes.c_uint64), ("n", ctypes.c_uint32), ("k", ctypes.c_uint16),
                ("mode", ctypes.c_uint16), ("plan", ctypes.c_uint16),
                ("plan_len", ctypes.c_uint16)]


class SpeStep(ctypes.Structure):
    """Mirror of ``struct spe_step``: one step of an evaluation plan (registers are capture
    slots)."""

    _fields_ = [("imm", ctypes.c_uint64), ("mask", ctypes.c_uint64), ("wb", ctypes.c_uint64),
                ("at", ctypes.c_uint16),
                *((name, ctypes.c_uint8) for name in (
                    "kind", "dst", "src", "index", "form", "extend", "shift", "size", "sext",
                    "writeback", "op2", "shift_type", "flags"))]


class SpeCounter(ctypes.Structure):
    """Mirror of ``struct spe_counter`` in counter.c (all counts in instructions).

    ``stop_at`` is a property: setting it also zeroes ``fast_limit``, so the hook's next block
    takes the slow path, which derives ``fast_limit`` from the new value."""

    _fields_ = [("insns", ctypes.c_uint64), ("fast_limit", ctypes.c_uint64),
                ("block_start", ctypes.c_uint64),
                ("block_insns", ctypes.c_uint64), ("_stop_at", ctypes.c_uint64),
                ("emu_stop", ctypes.c_void_p), ("stops", ctypes.c_uint64),
                ("stop_block", ctypes.c_uint64), ("stop_block_insns", ctypes.c_uint64),
                ("event_at", ctypes.c_uint64), ("gap", ctypes.c_uint64),
                ("limit", ctypes.c_uint64), ("cap_budget", ctypes.c_uint64),
                ("cap_count", ctypes.c_uint64), ("completing", ctypes.c_uint64),
                ("reg_read_batch", ctypes.c_void_p),
                ("reg_ids", ctypes.c_int32 * (CAP_REGS + 1)),
                ("vmem_translate", ctypes.c_void_p), ("mem_read", ctypes.c_void_p),
                ("ram_base", ctypes.c_uint64), ("ram_size", ctypes.c_uint64),
                ("step_count", ctypes.c_uint64), ("evaluated", ctypes.c_uint64),
                ("gt_table", ctypes.c_void_p), ("gt_cap", ctypes.c_uint64),
                ("gt_used", ctypes.c_uint64),
                ("control", ctypes.c_void_p), ("unmask_fallback", ctypes.c_void_p),
                ("daif_mask", ctypes.c_uint64), ("daif_seen", ctypes.c_uint64),
                ("pstate_id", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("unmasks", ctypes.c_uint64), ("pbt_on", ctypes.c_uint64),
                ("pbt_target", ctypes.c_uint64), ("pbt_insns", ctypes.c_uint64),
                ("poll_at", ctypes.c_uint64), ("unpolled_at", ctypes.c_uint64),
                ("feed", ctypes.c_void_p), ("armed", ctypes.c_uint64),
                ("armed_pc", ctypes.c_uint64), ("reg_read", ctypes.c_void_p),
                ("pc_id", ctypes.c_int32), ("pad2", ctypes.c_int32),
                ("gt_events", ctypes.c_void_p), ("gt_events_cap", ctypes.c_uint64),
                ("gt_events_used", ctypes.c_uint64), ("gt_last_pc", ctypes.c_uint64),
                ("feed_until", ctypes.c_uint64),
                ("pmu_on", ctypes.c_uint64), ("el_lsb", ctypes.c_uint32),
                ("el_mask", ctypes.c_uint32), ("pmu_el", ctypes.c_uint64),
                ("pmu_last_pc", ctypes.c_uint64), ("pmu_branches", ctypes.c_uint64),
                ("pmu_mispredicts", ctypes.c_uint64), ("pmu_loads", ctypes.c_uint64),
                ("pmu_stores", ctypes.c_uint64), ("pmu_exceptions", ctypes.c_uint64),
                ("pmu_faulted", ctypes.c_uint64),
                ("pmu_mark", ctypes.c_uint64 * PMU_SOURCE_COUNT),
                ("pmu_counts", (ctypes.c_uint64 * PMU_SOURCE_COUNT) * 4),
                ("trace_flush", ctypes.c_void_p), ("trace_blocks", ctypes.c_uint64),
                ("handed_start", ctypes.c_uint64), ("handed_insns", ctypes.c_uint64),
                ("handed_valid", ctypes.c_uint64), ("trainer_live", ctypes.c_uint64),
                ("caps", SpeCapture * CAP_MAX), ("verdicts", SpeVerdict * VERDICTS),
                ("steps", SpeStep * STEPS)]

    @property
    def stop_at(self) -> int:
        """Stop before the block that holds instruction number ``stop_at``."""
        return self._stop_at

    @stop_at.setter
    def stop_at(self, value: int) -> None:
        self._stop_at = value
        self.fast_limit = 0


# record.c (values of spe_native.h)
TPL_OTHER, TPL_LDST, TPL_BRANCH, TPL_PYTHON = 1, 2, 3, 4
ADDR_NONE, ADDR_BASE, ADDR_LITERAL, ADDR_REGOFF = 0, 1, 2, 3
BR_COND, BR_INDIRECT, BR_RETURN, BR_BRANCH, BR_CALL, BR_ERET = 1, 2, 4, 8, 16, 32
FED_NONE = (1 << 64) - 1   # SPE_FED_NONE: a capture the model gave no outcome yet
ENCODINGS = 32             # SPE_ENCODINGS: branch encodings model.c takes
REC_DONE, REC_DROP, REC_TEMPLATE, REC_PYTHON, REC_ORDER, REC_XLATE = 0, 1, 2, 3, 4, 5
XLATES = 512          # translation slots of spe_recorder
TEMPLATE_HEAD = 19    # bytes of spe_template.head


class SpeCounterReads(ctypes.Structure):
    """Mirror of ``struct spe_counter_reads`` (spe_native.h): counter and timer-control
    reads answered by ``spe_mrs_hook``."""

    _fields_ = [("valid", ctypes.c_uint64), ("allowed", ctypes.c_uint64),
                ("offset", (ctypes.c_uint64 * 2) * 4),
                ("counter", ctypes.POINTER(SpeCounter)), ("model", ctypes.c_void_p),
                ("fallback", ctypes.c_void_p), ("answered", ctypes.c_uint64),
                ("enc", (ctypes.c_uint32 * 5) * 2), ("filter", ctypes.c_void_p),
                ("ctl_valid", ctypes.c_uint64), ("ctl_allowed", ctypes.c_uint64),
                *((name, (ctypes.c_uint64 * 2) * 4) for name in (
                    "ctl", "ctl_cval", "ctl_offset")),
                ("ctl_enc", (ctypes.c_uint32 * 5) * 2), ("enable_lsb", ctypes.c_uint32),
                ("istatus_lsb", ctypes.c_uint32), ("ctl_answered", ctypes.c_uint64)]


SYSREG_KEYS = 65536   # SPE_SYSREG_KEYS


def sysreg_key(enc: tuple[int, int, int, int, int]) -> int:
    """``spe_sysreg_key()``: the 16-bit key of a system-register encoding (op0, op1, CRn, CRm,
    op2) in the filter's bitmaps."""
    op0, op1, crn, crm, op2 = enc
    return (op0 & 3) << 14 | (op1 & 7) << 11 | (crn & 15) << 7 | (crm & 15) << 3 | (op2 & 7)


IC_LOG = 4096
"""Ranges of IC IVAU a PE logs for the other PEs' engines (spe_native.h SPE_IC_LOG)."""


class SpeSysregFilter(ctypes.Structure):
    """Mirror of ``struct spe_sysreg_filter``: the MRS/MSR encodings the Python hooks must see
    (bitmaps by :func:`sysreg_key`); ``msr_all``: every MSR goes to Python."""

    _fields_ = [("mrs", ctypes.c_uint8 * (SYSREG_KEYS // 8)),
                ("msr", ctypes.c_uint8 * (SYSREG_KEYS // 8)),
                ("sys", ctypes.c_uint8 * (SYSREG_KEYS // 8)),
                ("msr_all", ctypes.c_uint32), ("sys_all", ctypes.c_uint32),
                ("sys_cache", ctypes.c_uint32), ("daif_key", ctypes.c_uint32),
                ("control", ctypes.c_void_p),
                ("msr_fallback", ctypes.c_void_p), ("sys_fallback", ctypes.c_void_p),
                ("skipped", ctypes.c_uint64),
                ("sp_key", ctypes.c_uint32 * 3), ("sp_aligned", ctypes.c_uint32),
                ("sp_align", ctypes.c_uint64), ("zva_python", ctypes.c_uint32),
                ("zva_fallback", ctypes.c_void_p),
                ("code_crn", ctypes.c_uint32), ("sys_code", ctypes.c_uint32),
                ("tlbi_seen", ctypes.c_uint64), ("ic_seen", ctypes.c_uint64),
                ("ic_logged", ctypes.c_uint64), ("ic_all", ctypes.c_uint64),
                ("iallu_broadcast", ctypes.c_uint64),
                ("ic_line", ctypes.c_uint64), ("vmem_translate", ctypes.c_void_p),
                ("smp", ctypes.c_uint32), ("ic_flush_own", ctypes.c_uint32),
                ("ctl", ctypes.c_void_p), ("ctl_remove_phys", ctypes.c_uint32),
                ("ic_pad", ctypes.c_uint32), ("emu_stop", ctypes.c_void_p),
                ("ic_log", (ctypes.c_uint64 * 2) * IC_LOG)]

    def add(self, which: str, enc: tuple[int, int, int, int, int]) -> None:
        """Send ``which`` ("mrs", "msr" or "sys") instructions with encoding ``enc`` to
        Python."""
        key = sysreg_key(enc)
        getattr(self, which)[key >> 3] |= 1 << (key & 7)


class SpeExcModel(ctypes.Structure):
    """Mirror of ``struct spe_exc_model``: registers and PSTATE fields of exception entry
    (filled from the Python tables by :func:`spe_emu.cpu.exceptions.exception_model`)."""

    _fields_ = [("pc_id", ctypes.c_int32), ("sp_id", ctypes.c_int32),
                ("pstate_id", ctypes.c_int32), ("cp_id", ctypes.c_int32),
                *((name, ctypes.c_int32 * 4) for name in ("sp_el", "elr", "esr", "far", "vbar")),
                ("spsr_enc", (ctypes.c_uint32 * 5) * 4), ("sctlr_enc", (ctypes.c_uint32 * 5) * 4),
                ("hcr_enc", ctypes.c_uint32 * 5),
                *((name, ctypes.c_uint32) for name in ("el_lsb", "el_mask", "sp_bit", "pan_bit")),
                ("entry_set", ctypes.c_uint64), ("entry_clear", ctypes.c_uint64),
                *((name, ctypes.c_uint32) for name in ("span_bit", "e2h_bit", "tge_bit")),
                ("reg_read", ctypes.c_void_p), ("reg_write", ctypes.c_void_p)]


class SpeExcEntry(ctypes.Structure):
    """Mirror of ``struct spe_exc_entry``."""

    _fields_ = [("from_el", ctypes.c_uint64), ("spsr", ctypes.c_uint64),
                ("vector", ctypes.c_uint64)]


EXC_SYNDROME, EXC_FAR = 1, 2   # SPE_EXC_* flags of spe_take_exception


class SpeIntr(ctypes.Structure):
    """Mirror of ``struct spe_intr``: the native INTR hook's state (counts in instructions)."""

    _fields_ = [("model", ctypes.POINTER(SpeExcModel)), ("counter", ctypes.POINTER(SpeCounter)),
                ("fallback", ctypes.c_void_p), ("context_save", ctypes.c_void_p),
                ("context", ctypes.c_void_p), ("exc_offset", ctypes.c_uint64),
                ("vmem_translate", ctypes.c_void_p), ("mem_read", ctypes.c_void_p),
                ("native", ctypes.c_uint32), ("enabled_els", ctypes.c_uint32),
                ("native_intnos", ctypes.c_uint64), ("after_insn_intnos", ctypes.c_uint64),
                ("psci_intno", ctypes.c_uint32), ("undef_intno", ctypes.c_uint32),
                ("far_ecs", ctypes.c_uint64), ("ec_lsb", ctypes.c_uint32),
                ("ec_mask", ctypes.c_uint32), ("abort_ecs", ctypes.c_uint64),
                ("python_fscs", ctypes.c_uint64), ("fsc_lsb", ctypes.c_uint32),
                ("fsc_mask", ctypes.c_uint32),
                ("python_undef_mask", ctypes.c_uint32 * 2),
                ("python_undef_value", ctypes.c_uint32 * 2),
                ("entry_retired", ctypes.c_uint64), ("entries_in_place", ctypes.c_uint64),
                ("loop_limit", ctypes.c_uint64), ("taken", ctypes.c_uint64),
                ("gic", ctypes.c_void_p), ("control", ctypes.c_void_p),
                ("gic_native", ctypes.c_uint32), ("icc_ok", ctypes.c_uint32),
                ("icc_word", ctypes.c_uint32 * 3), ("intid_mask", ctypes.c_uint32),
                ("sgi_self_mask", ctypes.c_uint64), ("sgi_self_value", ctypes.c_uint64),
                ("sgi_intid_lsb", ctypes.c_uint32), ("sgi_intid_mask", ctypes.c_uint32),
                ("sgi1r_groups", ctypes.c_uint32), ("pad1", ctypes.c_uint32),
                ("irq_target", ctypes.c_uint32), ("fiq_target", ctypes.c_uint32),
                ("i_bit", ctypes.c_uint32), ("f_bit", ctypes.c_uint32),
                ("x_ids", ctypes.c_int32 * 31), ("icc_native", ctypes.c_uint64),
                ("irqs_taken", ctypes.c_uint64), ("wfx_ec", ctypes.c_uint32),
                ("wfi_word", ctypes.c_uint32), ("walk", ctypes.c_void_p)]


class SpeGranule(ctypes.Structure):
    """Mirror of ``struct spe_granule`` (one translation granule, from mmu.Granule)."""

    _fields_ = [("page_shift", ctypes.c_uint32), ("index_bits", ctypes.c_uint32),
                ("block_levels", ctypes.c_uint32), ("level_shift", ctypes.c_uint32 * 4),
                ("start_level", ctypes.c_uint32 * 49)]


class SpeVaRange(ctypes.Structure):
    """Mirror of ``struct spe_va_range`` (one VA range, from mmu.VaRange)."""

    _fields_ = [("tcr_enc", ctypes.c_uint32 * 5), ("ttbr_enc", ctypes.c_uint32 * 5),
                *((name, ctypes.c_uint32) for name in (
                    "tsz_lsb", "tsz_mask", "tg_lsb", "tg_mask", "tbi_lsb", "ps_lsb", "ps_mask",
                    "epd_lsb", "upper")),
                ("granule", ctypes.c_uint32 * 4)]


class SpeWalk(ctypes.Structure):
    """Mirror of ``struct spe_walk``: what the native stage 1 walk-fault check reads
    (filled by :func:`spe_emu.cpu.exceptions.walk_tables`)."""

    _fields_ = [("model", ctypes.POINTER(SpeExcModel)), ("mem_read", ctypes.c_void_p),
                ("ranges", SpeVaRange * 6), ("granules", SpeGranule * 3),
                ("scr_enc", ctypes.c_uint32 * 5), ("mmfr0_enc", ctypes.c_uint32 * 5),
                *((name, ctypes.c_uint32) for name in (
                    "m_lsb", "vm_lsb", "ns_lsb", "parange_lsb", "parange_mask")),
                ("pa_bits", ctypes.c_uint32 * 8),
                *((name, ctypes.c_uint32) for name in (
                    "txsz_min", "txsz_max", "final_level", "valid_lsb", "type_lsb",
                    "fsc_address_size", "fsc_walk_external", "e0pd")),
                ("e0pd_lsb", ctypes.c_uint32 * 2), ("pad", ctypes.c_uint32),
                ("translation_fscs", ctypes.c_uint64),
                ("baddr_mask", ctypes.c_uint64), ("oa_mask", ctypes.c_uint64)]


WALK_AGREES, WALK_PYTHON = -1, -2   # SPE_WALK_* results of spe_walk_fault


def walk_fault(walk: SpeWalk, uch, va: int, regime: int) -> int:
    """``spe_walk_fault()`` (exception.c): the FSC of the Address size fault or External
    abort on the walk that the stage 1 walk of ``va`` in the regime of ``regime`` (1 = EL1&0,
    2, 3) ends with, :data:`WALK_AGREES` when it ends otherwise, :data:`WALK_PYTHON` when
    stage 2 applies; the native mirror of :func:`spe_emu.arch.mmu.walk_fault`."""
    return library().spe_walk_fault(ctypes.byref(walk), uch, ctypes.c_uint64(va),
                                    ctypes.c_uint32(regime))


def abort_stands(walk: SpeWalk, uch, el: int, va: int, fsc: int) -> bool:
    """``spe_abort_stands()`` (exception.c): whether the abort Unicorn reports with ISS.FSC
    ``fsc`` at ``va``, from EL ``el``, is one
    :meth:`spe_emu.cpu.sync_checks.SyncChecks.refine_abort` leaves unchanged (then the
    native INTR hook takes it)."""
    return bool(library().spe_abort_stands(ctypes.byref(walk), uch, ctypes.c_uint32(el),
                                           ctypes.c_uint64(va), ctypes.c_uint32(fsc)))


def exception_from(counter: SpeCounter, insn: int, preferred: int,
                   counted: bool | None = None) -> None:
    """``spe_exception_from()``: the instruction at ``insn`` took a synchronous exception
    with preferred return address ``preferred``; when they are the same and the instruction
    was counted (``counted``; None: it is in the block the native hook counted last) it was
    not architecturally executed (PMU INST_RETIRED, ground truth ``faulted``)."""
    library().spe_exception_from(ctypes.byref(counter), insn, preferred,
                                 -1 if counted is None else int(counted))


def end_block_at(counter: SpeCounter, insn: int) -> int:
    """``spe_end_block_at()``: the instruction at ``insn`` takes a synchronous exception; the
    block the hook counted on entry ends there (ground truth corrected too). Returns the
    instructions retired up to and including it."""
    return library().spe_end_block_at(ctypes.byref(counter), insn)


def pmu_settle(counter: SpeCounter) -> None:
    """``spe_pmu_settle()``: the event sources' growth since the last settling goes to
    ``counter.pmu_counts[counter.pmu_el]``."""
    library().spe_pmu_settle(ctypes.byref(counter))


def pmu_totals(counter: SpeCounter, retired: int) -> list[list[int]]:
    """Each Exception level's event totals (``[el][source]``, :data:`PMU_SOURCES`) with
    ``retired`` instructions retired (the exact count at an access in the middle of a block:
    the hook counted the whole block at its entry)."""
    pmu_settle(counter)
    totals = [list(row) for row in counter.pmu_counts]
    el = counter.pmu_el & 3
    totals[el][0] -= counter.insns - retired
    return totals


def exception_guard(intr: "SpeIntr", retired: int) -> bool:
    """``spe_exception_guard()``: True (nothing counted) when a synchronous exception after
    ``retired`` instructions would be ``intr.loop_limit`` in a row with none retired."""
    return bool(library().spe_exception_guard(ctypes.byref(intr), retired))


def unmasked(target: int, el: int, pstate: int, mask_bit: int) -> bool:
    """``spe_unmasked()`` (Arm ARM D1.3.6): whether an asynchronous exception routed to EL
    ``target`` is taken at EL ``el`` with PSTATE ``pstate`` (``mask_bit``: the lsb of PSTATE.A,
    I or F)."""
    return bool(library().spe_unmasked(target, el, pstate, mask_bit))


def deliverable(lines: int, irq_target: int, fiq_target: int, el: int, pstate: int,
                i_bit: int, f_bit: int) -> tuple[int, int] | None:
    """``spe_deliverable()`` (Arm ARM D1.3.6): the interrupt taken now, as (vector offset
    0x080 IRQ / 0x100 FIQ, target EL), or None; ``lines`` bit 0 IRQ, bit 1 FIQ asserted."""
    kind = ctypes.c_uint32()
    target = library().spe_deliverable(lines, irq_target, fiq_target, el, pstate, i_bit,
                                       f_bit, ctypes.byref(kind))
    return (kind.value, target) if target else None


class SpeControl(ctypes.Structure):
    """Mirror of ``struct spe_control``: whether the control-instruction hook calls Python
    (``python``: Python's own reasons; ``irq``: the native CPU-interface path left the GIC's
    output asserted; ``unmask_idle``: the block hook's unmasking watch rests although
    ``python`` is set)."""

    _fields_ = [("python", ctypes.c_uint32), ("irq", ctypes.c_uint32),
                ("unmask_idle", ctypes.c_uint32), ("unmask_pad", ctypes.c_uint32),
                ("fallback", ctypes.c_void_p), ("skipped", ctypes.c_uint64),
                ("eret_il", ctypes.c_uint64 * 4), ("model", ctypes.POINTER(SpeExcModel)),
                ("spsr_il_lsb", ctypes.c_uint32), ("spsr_m_lsb", ctypes.c_uint32),
                ("spsr_m_mask", ctypes.c_uint32), ("pad2", ctypes.c_uint32),
                ("psb", ctypes.c_uint32), ("psb_pad", ctypes.c_uint32),
                ("psb_fallback", ctypes.c_void_p), ("psb_skipped", ctypes.c_uint64)]


def eret_hook_address() -> int:
    """Address of ``spe_eret_hook`` for ``uc_hook_add(UC_HOOK_CODE, ...)`` on an ERET (user
    data: a :class:`SpeControl`)."""
    return ctypes.cast(library().spe_eret_hook, ctypes.c_void_p).value


def align_hook_address() -> int:
    """Address of ``spe_align_hook`` for ``uc_hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE,
    ...)`` (user data: the address of a ctypes memory-hook callback, called only for a
    misaligned access)."""
    return ctypes.cast(library().spe_align_hook, ctypes.c_void_p).value


def psb_hook_address() -> int:
    """Address of ``spe_psb_hook`` for ``uc_hook_add(UC_HOOK_CODE, ...)`` on a PSB CSYNC (user
    data: a :class:`SpeControl`; Python's ``psb_fallback`` runs only while ``psb`` is set)."""
    return ctypes.cast(library().spe_psb_hook, ctypes.c_void_p).value


GIC_MAX_INTIDS = 992  # SPE_GIC_MAX_INTIDS
GIC_SPURIOUS = 1023
EOI_SPECIAL, EOI_NO_SUCH, EOI_NO_ACTIVE, EOI_WRONG_GROUP, EOI_NOT_ACTIVE = 1, 2, 4, 8, 16


class SpeGicIrq(ctypes.Structure):
    """Mirror of ``struct spe_gic_irq``: one interrupt's state (IHI 0069 §4.1). ``edge`` and
    ``pending`` derive from it as the model defines them (Int_config bit 1: edge-triggered;
    pending: the latch, or a level-sensitive input that is high)."""

    _fields_ = [(name, ctypes.c_uint8) for name in (
        "group", "enabled", "latch", "level", "active", "priority", "config", "pad")]

    @property
    def edge(self) -> bool:
        return bool(self.config & 0b10)

    @property
    def pending(self) -> bool:
        return bool(self.latch or (self.level and not self.edge))


UART_BUF = 4096       # SPE_UART_BUF


class SpeUart(ctypes.Structure):
    """Mirror of ``struct spe_uart`` (uart.c): the console UART's native transmit path (the
    PL011 model sets ``steady`` and ``fr``; ``buf[:len]`` are characters sent and not yet
    taken by its ``flush`` callback)."""

    _fields_ = [("steady", ctypes.c_uint32), ("fr", ctypes.c_uint32),
                ("dr_offset", ctypes.c_uint64), ("fr_offset", ctypes.c_uint64),
                ("len", ctypes.c_uint32), ("last_size", ctypes.c_uint32),
                ("last_value", ctypes.c_uint64), ("sent", ctypes.c_uint64),
                ("read_fallback", ctypes.c_void_p), ("write_fallback", ctypes.c_void_p),
                ("flush", ctypes.c_void_p), ("buf", ctypes.c_uint8 * UART_BUF)]


def uart_callbacks() -> tuple[int, int]:
    """Addresses of ``spe_uart_read`` and ``spe_uart_write`` for ``uc_mmio_map`` (user data:
    a :class:`SpeUart`)."""
    lib = library()
    return (ctypes.cast(lib.spe_uart_read, ctypes.c_void_p).value,
            ctypes.cast(lib.spe_uart_write, ctypes.c_void_p).value)


class SpeGic(ctypes.Structure):
    """Mirror of ``struct spe_gic`` (gic.c): the GICv3 model's interrupt state and the ICC
    registers its prioritisation reads."""

    _fields_ = [("num_intids", ctypes.c_uint32), ("pri_bits", ctypes.c_uint32),
                ("grp_enabled", ctypes.c_uint32), ("awake", ctypes.c_uint32),
                *((name, ctypes.c_uint64) for name in (
                    "icc_pmr", "icc_bpr0", "icc_bpr1", "icc_ctlr", "icc_igrpen0",
                    "icc_igrpen1", "icc_ap0r0", "icc_ap1r0")),
                *((name, ctypes.c_uint32) for name in (
                    "cbpr_bit", "eoimode_bit", "enable_bit", "edge_bit", "dirty", "pad")),
                ("routed", ctypes.c_uint8 * GIC_MAX_INTIDS),
                ("irqs", SpeGicIrq * GIC_MAX_INTIDS)]


class GicCore:
    """gic.c's functions on one :class:`SpeGic` (the model's prioritisation, IHI 0069 §4.8,
    and the CPU interface's acknowledge and end of interrupt)."""

    def __init__(self, state: SpeGic):
        lib = library()
        self.state = state
        self._ref = ctypes.byref(state)
        self._hppi_fn, self._lines_fn = lib.spe_gic_hppi, lib.spe_gic_lines
        self._out = (ctypes.c_uint32 * 3)()
        self._outs = [ctypes.byref(self._out, 4 * i) for i in range(3)]

    def hppi(self) -> tuple[int, int, int] | None:
        """``(priority, INTID, group)`` of the highest-priority pending interrupt the
        redistributor forwards, or None (``spe_gic_hppi``)."""
        if not self._hppi_fn(self._ref, *self._outs):
            return None
        return self._out[0], self._out[1], self._out[2]

    def lines(self) -> int:
        """bit 0: the IRQ output, bit 1: the FIQ output (``spe_gic_lines``)."""
        return self._lines_fn(self._ref)

    def running_priority(self) -> int:
        return library().spe_gic_running_priority(self._ref)

    def acknowledge(self, group: int) -> int:
        """The INTID acknowledged (1023: none), with its side effects."""
        return library().spe_gic_acknowledge(self._ref, group)

    def eoi(self, group: int, intid: int, commit: bool = True) -> int:
        """End of interrupt: the ``EOI_*`` bits of what happened (0: clean)."""
        return library().spe_gic_eoi(self._ref, group, intid, int(commit))


def zva_hook_address() -> int:
    """Address of ``spe_zva_hook`` for ``uc_hook_add(UC_HOOK_CODE, ...)`` on a DC ZVA
    instruction (user data: a :class:`SpeSysregFilter`; its ``zva_fallback``, a ctypes code
    hook, is called only while ``zva_python`` is set)."""
    return ctypes.cast(library().spe_zva_hook, ctypes.c_void_p).value


def msr_hook_address() -> int:
    """Address of ``spe_msr_hook`` for ``uc_hook_add(UC_HOOK_INSN, ..., UC_ARM64_INS_MSR)``
    (user data: a :class:`SpeSysregFilter`)."""
    return ctypes.cast(library().spe_msr_hook, ctypes.c_void_p).value


def sys_hook_address() -> int:
    """Address of ``spe_sys_hook`` for ``uc_hook_add(UC_HOOK_INSN, ..., UC_ARM64_INS_SYS)``
    (user data: a :class:`SpeSysregFilter`)."""
    return ctypes.cast(library().spe_sys_hook, ctypes.c_void_p).value


# The uc_ctl controls the patched library adds (after Unicorn's own, in patch order)
UC_CTL_ARM_PMU = 15
"""Whether the CPU is built with QEMU's PMU: written 0 before the CPU is initialised, it is
built without (patches/unicorn/0006)."""
UC_CTL_TB_REMOVE_CACHE_PHYS = 16
"""Drop the translated code of a physical address range (patches/unicorn/0012)."""
UC_CTL_EXIT_ON_YIELD = 17
"""Whether uc_emu_start returns at a yield; a read gives the yields (patches/unicorn/0013)."""
CTL_REMOVE_PHYS = 1 << 30 | 2 << 26 | UC_CTL_TB_REMOVE_CACHE_PHYS
"""UC_CTL_WRITE(UC_CTL_TB_REMOVE_CACHE_PHYS, 2): uc_ctl's first argument for it."""


def ic_replay(uch: int, source: SpeSysregFilter, start: int) -> int:
    """Drop from the engine ``uch`` (a ``uc_engine *``) the translated code of the physical
    ranges ``source``'s PE logged with IC IVAU since it had logged ``start`` of them
    (``ic_logged``; spe_native.h ``spe_ic_replay``): how many ranges it dropped, or -1 when
    the log no longer holds them all or the library has no UC_CTL_TB_REMOVE_CACHE_PHYS
    (the caller then drops all the engine's code)."""
    return library().spe_ic_replay(uch, ctypes.byref(source), start)


def intr_hook_address() -> int:
    """Address of ``spe_intr_hook`` for ``uc_hook_add(UC_HOOK_INTR, ...)`` (user data: a
    :class:`SpeIntr`)."""
    return ctypes.cast(library().spe_intr_hook, ctypes.c_void_p).value


def set_pstate(model: SpeExcModel, uch, new: int,
               sync_enc: tuple[int, int, int, int, int]) -> None:
    """``spe_set_pstate()``: PSTATE = ``new`` on the engine ``uch`` with the SP banked as the
    PE does, then a rewrite of the CP register ``sync_enc`` so QEMU sees the new EL."""
    library().spe_set_pstate(ctypes.byref(model), uch, new, (ctypes.c_uint32 * 5)(*sync_enc))


def take_exception(model: SpeExcModel, uch, target: int, kind: int, preferred: int,
                   syndrome: int | None, far: int | None) -> SpeExcEntry:
    """``spe_take_exception()``: AArch64.TakeException() on the engine ``uch`` (a
    ``uc_engine *``) to EL ``target`` at vector offset ``kind`` (bytes), with ELR_ELx =
    ``preferred``, ESR_ELx = ``syndrome`` and FAR_ELx = ``far`` when not None."""
    entry = SpeExcEntry()
    flags = (EXC_SYNDROME if syndrome is not None else 0) | (EXC_FAR if far is not None else 0)
    library().spe_take_exception(ctypes.byref(model), uch, target, kind, preferred,
                                 syndrome or 0, far or 0, flags, ctypes.byref(entry))
    return entry


def mrs_hook_address() -> int:
    """Address of ``spe_mrs_hook`` for ``uc_hook_add(UC_HOOK_INSN, ..., UC_ARM64_INS_MRS)``."""
    return ctypes.cast(library().spe_mrs_hook, ctypes.c_void_p).value


class SpeTemplate(ctypes.Structure):
    """Mirror of ``struct spe_template``: what one instruction puts in its record."""

    _fields_ = [("pc", ctypes.c_uint64), ("offset", ctypes.c_uint64),
                ("target", ctypes.c_uint64), ("el", ctypes.c_uint8),
                ("ns", ctypes.c_uint8), ("kind", ctypes.c_uint8), ("cond", ctypes.c_int8),
                ("addr", ctypes.c_uint8), ("base", ctypes.c_uint8), ("index", ctypes.c_uint8),
                ("extend", ctypes.c_uint8), ("shift", ctypes.c_uint8),
                ("store_only", ctypes.c_uint8), ("branch", ctypes.c_uint8),
                ("optypes", ctypes.c_uint8), ("head_len", ctypes.c_uint8),
                ("head", ctypes.c_uint8 * TEMPLATE_HEAD)]


#: spe_model_access outcome: the TLB walked; the level that held the line (bits above);
#: how many outcomes there are
OUT_WALK, OUT_LEVEL_SHIFT, OUTCOMES = 1, 1, 10
#: levels of the model (spe_model_access's outcome >> OUT_LEVEL_SHIFT; Model.stats keys);
#: LEVEL_PEER: another PE's cache held the line modified (several PEs: join_models)
LEVEL_L1D, LEVEL_L2, LEVEL_LLC, LEVEL_DRAM, LEVEL_PEER = 0, 1, 2, 3, 4
#: Unicorn's UC_MEM_WRITE (the model's memory hook tells stores by it)
UC_MEM_WRITE = 17
#: spe_model_touch's levels
TOUCH_TLB, TOUCH_L1D, TOUCH_L2, TOUCH_LLC = 0, 1, 2, 3
#: Model.stats names, in the order of the C counters (SPE_LEVEL_*, SPE_STAT_*)
MODEL_STATS = ("l1d_hits", "l2_hits", "llc_hits", "dram", "peer_hits", "accesses", "tlb_walks")
PMU_SOURCES = ("insns", "branches", "mispredicts", "loads", "stores", "exceptions",
               "faulted") + MODEL_STATS
"""The PMU's event sources (``SPE_PMU_*``): instructions of every block entered, branches
executed and mispredicted, load and store instructions, exceptions taken (in the EL taken
from), instructions that took a synchronous exception with themselves as the preferred return
address (not architecturally executed), then the model's counts (:data:`MODEL_STATS`)."""
assert len(PMU_SOURCES) == PMU_SOURCE_COUNT


class SpeRecorder(ctypes.Structure):
    """Mirror of ``struct spe_recorder`` (record.c): per-drain inputs, fixed packet headers,
    event numbers and latencies, results and the C-owned model and buffers."""

    _fields_ = [("insn_index", ctypes.c_uint64), ("next_pc", ctypes.c_uint64),
                ("expect", ctypes.c_uint64), ("gap", ctypes.c_uint64),
                ("el", ctypes.c_uint32), ("ns", ctypes.c_uint32),
                ("timestamp", ctypes.c_uint32), ("collect_pa", ctypes.c_uint32),
                ("prefix_len", ctypes.c_uint32), ("prefix", ctypes.c_uint8 * 16),
                ("align", ctypes.c_uint32), ("not_taken_target", ctypes.c_uint32),
                *((name, ctypes.c_uint8) for name in (
                    "hdr_target", "hdr_va", "hdr_total", "hdr_issue", "hdr_xlat",
                    "hdr_timestamp", "hdr_end", "pad0")),
                ("hdr_events", ctypes.c_uint8 * 4),
                *((name, ctypes.c_uint32) for name in (
                    "ev_retired", "ev_not_taken", "ev_mispred", "lat_store", "lat_mispredict",
                    "lat_issue")),
                ("outcome_events", ctypes.c_uint64 * OUTCOMES),
                ("outcome_execute", ctypes.c_uint32 * OUTCOMES),
                ("outcome_xlat", ctypes.c_uint32 * OUTCOMES),
                ("counter_max", ctypes.c_uint32),
                ("out_len", ctypes.c_uint64), ("records", ctypes.c_uint64),
                ("reason", ctypes.c_uint64), ("out", ctypes.c_void_p),
                ("out_size", ctypes.c_uint64), ("model", ctypes.c_void_p),
                ("templates", ctypes.c_void_p),
                ("template_used", ctypes.c_void_p), ("ts_offset", ctypes.c_uint64),
                ("type_filter", ctypes.c_uint64), ("filtered", ctypes.c_uint64),
                ("hdr_pa", ctypes.c_uint64), ("pa_mask", ctypes.c_uint64),
                ("pa_ns", ctypes.c_uint64), ("xlate_va", ctypes.c_uint64),
                ("xlate_regime", ctypes.c_uint64),
                ("xlate_tag", ctypes.c_uint64 * XLATES), ("xlate_pa", ctypes.c_uint64 * XLATES),
                ("feed_every", ctypes.c_uint64)]


def _built_extension() -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = _HERE / f"_counter{suffix}"
        if candidate.exists():
            return candidate
    return None


def _compile_into_cache() -> Path:
    digest = source_digest()
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spe_emu"
    target = cache / f"counter-{digest}.so"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    include = sysconfig.get_paths()["include"]
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cmd = [os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-pthread", f"-I{include}",
           f'-DSPE_SOURCE_DIGEST="{digest}"', "-o", str(tmp), *map(str, _SOURCES)]
    try:
        subprocess.run(cmd, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        raise NativeBuildError(f"cannot compile {_SOURCES[0].name} with {cmd[0]}: "
                               f"{detail.decode(errors='replace').strip() or exc}") from exc
    os.replace(tmp, target)
    return target


_LIB: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """The loaded native library (built extension, else compiled into the cache)."""
    global _LIB
    if _LIB is None:
        built = _built_extension()
        lib = ctypes.CDLL(str(built)) if built else None
        if lib is None or not _layout_matches(lib):
            # No build, or a stale one (e.g. an in-place build older than the sources).
            lib = ctypes.CDLL(str(_compile_into_cache()))
            if not _layout_matches(lib):
                raise NativeBuildError(f"{_HEADER.name}: the native structs do not match "
                                       f"their ctypes mirrors")
        _declare(lib)
        ctypes.c_int.in_dll(lib, "spe_model_threads").value = model_threads()
        _LIB = lib
    return _LIB


def use_model_threads(on: bool) -> bool:
    """Whether models record accesses on a thread of their own (see :func:`model_threads`,
    which sets it when the library loads) from now on: read when a model without one first
    has accesses to hand over (a model that has its thread keeps it); returns the setting it
    replaces."""
    flag = ctypes.c_int.in_dll(library(), "spe_model_threads")
    old, flag.value = bool(flag.value), int(on)
    return old


def model_threads_in_use() -> bool:
    """Whether models made or fed from now on record on a thread of their own (the setting
    :func:`use_model_threads` and :func:`model_threads` give the library)."""
    return bool(ctypes.c_int.in_dll(library(), "spe_model_threads").value)


def model_threads() -> bool:
    """Whether each model records the plain accesses of the batched memory trace on a thread
    of its own (model.c, docs/model.md "The model's thread"): ``SPE_EMU_MODEL_THREAD`` 1 or
    0 when set; else when this process may run on at least two host CPUs. The results are the
    same either way; only the time a run takes changes.

    Raises:
        ConfigError: ``SPE_EMU_MODEL_THREAD`` is set to neither 0 nor 1.
    """
    setting = os.environ.get("SPE_EMU_MODEL_THREAD")
    if setting is not None:
        if setting not in ("0", "1"):
            raise ConfigError(f"SPE_EMU_MODEL_THREAD={setting!r}: expected 0 or 1")
        return setting == "1"
    return len(os.sched_getaffinity(0)) >= 2


# Fields of struct spe_counter whose offsets the loader compares with the mirror's
# (counter.c spe_counter_offsets, in this order)
COUNTER_OFFSETS = ("caps", "gt_table", "feed", "feed_until", "pmu_counts", "trace_flush",
                   "verdicts", "steps")


def _layout_matches(lib: ctypes.CDLL) -> bool:
    """The library was built from these sources, its structs match the mirrors and it keeps
    as many model counts as :data:`MODEL_STATS` names."""
    try:
        if (ctypes.c_char * 17).in_dll(lib, "spe_source_digest").value.decode() != \
                source_digest():
            return False
        sizes = [ctypes.c_uint64.in_dll(lib, name).value for name in (
            "spe_counter_size", "spe_recorder_size", "spe_template_size",
            "spe_counter_reads_size", "spe_sysreg_filter_size", "spe_exc_model_size",
            "spe_intr_size", "spe_control_size", "spe_gic_size", "spe_uart_size",
            "spe_walk_size")]
        stats = ctypes.c_uint64.in_dll(lib, "spe_model_stats_count").value
    except ValueError:
        return False
    if stats != len(MODEL_STATS):
        return False
    offsets = (ctypes.c_uint64 * len(COUNTER_OFFSETS)).in_dll(lib, "spe_counter_offsets")
    if list(offsets) != [getattr(SpeCounter, name).offset for name in COUNTER_OFFSETS]:
        return False
    return sizes == [ctypes.sizeof(t) for t in (SpeCounter, SpeRecorder, SpeTemplate,
                                                SpeCounterReads, SpeSysregFilter, SpeExcModel,
                                                SpeIntr, SpeControl, SpeGic, SpeUart,
                                                SpeWalk)]


def verdict_add(counter: SpeCounter, pc: int, n: int, k: int, mode: int) -> bool:
    """Let the hook capture instruction ``k`` of the ``n``-instruction block at ``pc``, observed
    as ``mode`` says (1: at the block's start, 2: branch outcome from the next block entered,
    3: at the block's end); False when the table has no room for it (it is then simply not
    captured)."""
    return bool(library().spe_verdict_add(ctypes.byref(counter), ctypes.c_uint64(pc),
                                          ctypes.c_uint32(n), ctypes.c_uint32(k),
                                          ctypes.c_uint32(mode)))


def verdicts_add(counter: SpeCounter, batch: bytes) -> bool:
    """:func:`verdict_add` for several blocks in one call. ``batch`` holds, per block, its
    address (u64), length (u32) and number of verdicts (u32), then per verdict k, mode, the
    number of steps of its evaluation plan and a zero (u16 each) followed by those steps (the
    bytes of ``SpeStep`` structs), all little-endian (:data:`VERDICT_BLOCK`,
    :data:`VERDICT_ENTRY`). False when one found no room (the ones before it are stored)."""
    return bool(library().spe_verdicts_add(ctypes.byref(counter), batch, len(batch)))


#: struct formats of :func:`verdicts_add`'s batch: a block's header and one verdict.
VERDICT_BLOCK, VERDICT_ENTRY = "<QII", "<HHHH"


@functools.lru_cache(maxsize=8)
def word_match(code: bytes, patterns: tuple) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``spe_word_match()``: (the indexes of the little-endian 32-bit words of ``code`` (a
    trailing partial word ignored) that match any (mask, value) of ``patterns``, in order;
    those words). Remembered for the last few images: each PE of a board scans the same
    ones."""
    n = len(patterns)
    masks = (ctypes.c_uint32 * n)(*(m for m, _ in patterns))
    values = (ctypes.c_uint32 * n)(*(v for _, v in patterns))
    cap = max(4096, len(code) // 128)   # (one pass for a kernel image's SP writers)
    while True:
        out, words = (ctypes.c_uint64 * cap)(), (ctypes.c_uint32 * cap)()
        found = library().spe_word_match(code, len(code) // 4, masks, values, n, out, words,
                                         cap)
        if found <= cap:
            return tuple(out[:found]), tuple(words[:found])
        cap = found


def verdicts_clear(counter: SpeCounter) -> None:
    """Forget every verdict (code may have changed)."""
    library().spe_verdicts_clear(ctypes.byref(counter))


class GtEntry(ctypes.Structure):
    """Mirror of ``struct spe_gt_entry``: the block at ``addr`` of ``n`` instructions was
    entered ``count`` times."""

    _fields_ = [("addr", ctypes.c_uint64), ("n", ctypes.c_uint64), ("count", ctypes.c_uint64)]


def ground_truth_enable(counter: SpeCounter, capacity: int = 1 << 12) -> None:
    """Make the block hook count executions per block (``capacity`` initial entries, a power
    of two; the table grows). Raises MemoryError when the table cannot be allocated."""
    if not library().spe_gt_enable(ctypes.byref(counter), capacity):
        raise MemoryError("ground-truth table")


def ground_truth_add(counter: SpeCounter, addr: int, n: int, times: int) -> None:
    """Add ``times`` (negative: take back) executions of the ``n``-instruction block at
    ``addr``."""
    if not library().spe_gt_add(ctypes.byref(counter), addr, n, times):
        raise MemoryError("ground-truth table")


def ground_truth_blocks(counter: SpeCounter) -> dict[tuple[int, int], int]:
    """``{(block address, instructions): executions}`` counted so far (empty when off)."""
    if not counter.gt_table:
        return {}
    table = (GtEntry * counter.gt_cap).from_address(counter.gt_table)
    return {(e.addr, e.n): e.count for e in table if e.n and e.count}


GTE_COUNTS = 8   # SPE_GTE_COUNTS
GT_EVENTS = ("ops", "l1d_refill", "llc_access", "llc_miss", "tlb_walk", "branches",
             "mispredicted", "faulted")
"""The counts per PC of :func:`ground_truth_events`, in the order of spe_native.h's
SPE_GTE_*: load/store executions, of those whose (first) access the L1D missed, the L2 missed
too (an LLC access), the LLC missed, the TLB missed; branch executions, of those
mispredicted; executions that took a synchronous exception returning to the instruction (not
architecturally executed: PMU INST_RETIRED leaves them out)."""


class GtEvent(ctypes.Structure):
    """Mirror of ``struct spe_gt_event``."""

    _fields_ = [("pc", ctypes.c_uint64), ("n", ctypes.c_uint64 * GTE_COUNTS)]


def ground_truth_events_enable(counter: SpeCounter, capacity: int = 1 << 12) -> None:
    """Record per PC what the model (model_feed "every") gives each execution (the memory
    and block hooks then read the PC of every access: slow). Raises MemoryError when the table
    cannot be allocated."""
    if not library().spe_gt_events_enable(ctypes.byref(counter), capacity):
        raise MemoryError("ground-truth event table")


def ground_truth_events(counter: SpeCounter) -> dict[int, tuple[int, ...]]:
    """``{pc: counts}`` (:data:`GT_EVENTS`) recorded so far (empty when off)."""
    if not counter.gt_events:
        return {}
    table = (GtEvent * counter.gt_events_cap).from_address(counter.gt_events)
    return {e.pc: tuple(e.n) for e in table if e.pc}


def ground_truth_free(counter: SpeCounter) -> None:
    """Stop counting and release the table."""
    library().spe_gt_free(ctypes.byref(counter))


def unicorn_patches() -> list[str]:
    """The patches (``patches/unicorn``) of the libunicorn this process runs on: the names
    of the ``PATCHES`` list beside it when it is the build ``pip install .`` made
    (``spe_emu/_unicorn``, spe_emu/native/unicorn_build.py), else ``[]`` (the unicorn
    binding's own library: no patch; a process that imported unicorn before spe_emu, or an
    install where the build could not run)."""
    from unicorn.unicorn_py3.unicorn import uclib

    from .sources import UNICORN_DIR
    loaded = Path(uclib._name).resolve()
    listing = UNICORN_DIR / "PATCHES"
    if loaded.parent != UNICORN_DIR.resolve() or not listing.is_file():
        return []
    return listing.read_text().split()


def has_own_pmu() -> bool:
    """Whether the libunicorn this process runs on builds CPUs without QEMU's PMU
    (patches/unicorn/0006, UC_CTL_ARM_PMU), so spe_emu's PMUv3 is the guest's."""
    return any(p.startswith("0006-") for p in unicorn_patches())


def block_hook_address() -> int:
    """Address of ``spe_block_hook`` for ``uc_hook_add(UC_HOOK_BLOCK, ...)``."""
    return ctypes.cast(library().spe_block_hook, ctypes.c_void_p).value


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and result types of the record.c entry points and spe_verdicts_add."""
    rec = ctypes.POINTER(SpeRecorder)
    u32, u64 = ctypes.c_uint32, ctypes.c_uint64
    for name, args, result in (
            ("spe_recorder_init", (rec, ctypes.c_void_p, u64), ctypes.c_int),
            ("spe_recorder_free", (rec,), None),
            ("spe_model_new", (ctypes.POINTER(u32), ctypes.POINTER(u32)), ctypes.c_void_p),
            ("spe_model_set_encodings", (ctypes.c_void_p, ctypes.POINTER(u32),
                                         ctypes.POINTER(u32), ctypes.POINTER(u32), u32), None),
            ("spe_model_classify", (ctypes.c_void_p, u32), u32),
            ("spe_model_sites_clear", (ctypes.c_void_p,), None),
            ("spe_model_sync", (ctypes.c_void_p,), None),
            ("spe_model_worker_stats", (ctypes.c_void_p, ctypes.POINTER(u64)), None),
            ("spe_model_free", (ctypes.c_void_p,), None),
            ("spe_model_access", (ctypes.c_void_p, u64, ctypes.c_int), ctypes.c_int),
            ("spe_model_access_rw", (ctypes.c_void_p, u64, ctypes.c_int, ctypes.c_int),
             ctypes.c_int),
            ("spe_model_join", (ctypes.POINTER(ctypes.c_void_p), u32), ctypes.c_int),
            ("spe_model_touch", (ctypes.c_void_p, u32, u64, ctypes.c_int), ctypes.c_int),
            ("spe_model_target_swap", (ctypes.c_void_p, u64, u64, ctypes.POINTER(u64)),
             ctypes.c_int),
            ("spe_model_branch", (ctypes.c_void_p, u32, u64, u64, ctypes.c_int, ctypes.c_int),
             ctypes.c_int),
            ("spe_model_stats", (ctypes.c_void_p, ctypes.POINTER(u64)), None),
            ("spe_templates_add", (rec, ctypes.c_char_p, u32), ctypes.c_int),
            ("spe_templates_clear", (rec,), None),
            ("spe_xlate_add", (rec, u64, u64), None),
            ("spe_xlate_clear", (rec,), None),
            ("spe_record_captures", (ctypes.POINTER(SpeCounter), rec, u32, u32), u32),
            ("spe_verdicts_add", (ctypes.POINTER(SpeCounter), ctypes.c_char_p, u64),
             ctypes.c_int),
            ("spe_gt_enable", (ctypes.POINTER(SpeCounter), u64), ctypes.c_int),
            ("spe_gt_add", (ctypes.POINTER(SpeCounter), u64, u64, ctypes.c_int64),
             ctypes.c_int),
            ("spe_gt_free", (ctypes.POINTER(SpeCounter),), None),
            ("spe_gt_events_enable", (ctypes.POINTER(SpeCounter), u64), ctypes.c_int),
            ("spe_exception_from", (ctypes.POINTER(SpeCounter), u64, u64, ctypes.c_int),
             None),
            ("spe_gic_hppi", (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p), ctypes.c_int),
            ("spe_gic_lines", (ctypes.c_void_p,), u32),
            ("spe_gic_running_priority", (ctypes.c_void_p,), u32),
            ("spe_gic_acknowledge", (ctypes.c_void_p, u32), u32),
            ("spe_gic_eoi", (ctypes.c_void_p, u32, u32, ctypes.c_int), u32),
            ("spe_deliverable", (u32, u32, u32, u32, u64, u32, u32, ctypes.POINTER(u32)),
             u32),
            ("spe_unmasked", (u32, u32, u64, u32), ctypes.c_int),
            ("spe_word_match", (ctypes.c_char_p, u64, ctypes.POINTER(u32), ctypes.POINTER(u32),
                                u32, ctypes.POINTER(u64), ctypes.POINTER(u32), u64), u64),
            ("spe_end_block_at", (ctypes.POINTER(SpeCounter), u64), u64),
            ("spe_ic_replay", (ctypes.c_void_p, ctypes.POINTER(SpeSysregFilter), u64),
             ctypes.c_int64),
            ("spe_pmu_settle", (ctypes.POINTER(SpeCounter),), None),
            ("spe_exception_guard", (ctypes.POINTER(SpeIntr), u64), ctypes.c_int),
            ("spe_set_pstate", (ctypes.POINTER(SpeExcModel), ctypes.c_void_p, u64,
                                ctypes.POINTER(u32)), None),
            ("spe_take_exception", (ctypes.POINTER(SpeExcModel), ctypes.c_void_p, u32, u32, u64,
                                    u64, u64, u32, ctypes.POINTER(SpeExcEntry)), None),
            ("spe_walk_fault", (ctypes.POINTER(SpeWalk), ctypes.c_void_p, u64, u32), ctypes.c_int),
            ("spe_abort_stands", (ctypes.POINTER(SpeWalk), ctypes.c_void_p, u32, u64, u32),
             ctypes.c_int)):
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = result


MAX_LINE = (1 << 58) - 1
"""The largest 64-byte line number of a 64-bit address: the model's keys (lines, pages) are at
most this (model.c keeps key + 1 in its set rows, 0 marking an empty way)."""


def join_models(models: "list[Model]") -> None:
    """Make the models of several PEs one coherent memory system (model.c spe_model_join;
    docs/model.md "Several PEs"): they share the first one's LLC, a store invalidates the
    line in the other PEs' L1D and L2, and a load another PE's cache holds modified is
    served by that peer (:data:`LEVEL_PEER`). The models are kept alive by each other.

    Raises:
        NativeBuildError: out of memory."""
    array = (ctypes.c_void_p * len(models))(*(m.ptr for m in models))
    if not models[0].lib.spe_model_join(array, len(models)):
        raise NativeBuildError("model.c: no memory to join the models")
    for m in models:
        m._joined = (array, models)


class Model:
    """The micro-architecture model of records (model.c; docs/model.md "Events and latency
    model"): set-associative LRU TLB, L1D, optional L2 and LLC, and the branch predictor
    (gshare, a return stack, the last target of each indirect branch).

    Args:
        geometry: entries and ways of the TLB (4 KiB pages), L1D, L2 and LLC (64-byte lines),
            8 integers in that order; ways 0 is fully associative, L2 entries 0 means no L2.
            Entries must be a power-of-two multiple of ways (SpeConfig checks it).
        predictor: gshare bits (1..24: 2**bits two-bit counters, as many bits of global
            history) and return stack entries (0..1024).
        encodings: (mask, value, kind) of the branch encodings (at most :data:`ENCODINGS`),
            by which the block hook knows the branch that ended a block
            (:data:`spe_emu.spe.records.BRANCH_ENCODINGS`).

    Raises:
        NativeBuildError: the library cannot be loaded, out of memory, or a bad geometry.
    """

    def __init__(self, geometry: tuple[int, ...], predictor: tuple[int, int] = (12, 16),
                 encodings: tuple[tuple[int, int, int], ...] = ()):
        self.lib = library()
        self.geometry = tuple(geometry)
        self.ptr = self.lib.spe_model_new((ctypes.c_uint32 * 8)(*geometry),
                                          (ctypes.c_uint32 * 2)(*predictor))
        if not self.ptr:
            raise NativeBuildError(f"model.c: cannot make a model of geometry {geometry} "
                                   f"and predictor {predictor}")
        if len(encodings) > ENCODINGS:
            raise ValueError(f"model.c takes at most {ENCODINGS} branch encodings")
        words = [(ctypes.c_uint32 * max(1, len(encodings)))(*column)
                 for column in zip(*encodings)] if encodings else [None, None, None]
        self.lib.spe_model_set_encodings(self.ptr, *words, len(encodings))
        self._old = ctypes.c_uint64()
        self._access = self.lib.spe_model_access
        self._free = weakref.finalize(self, self.lib.spe_model_free, ctypes.c_void_p(self.ptr))

    def close(self) -> None:
        """Free the C storage now (idempotent; the model must not be used after)."""
        self._free()

    def access(self, line: int, update: bool) -> int:
        """The outcome (0 .. OUTCOMES - 1) of a data access to 64-byte line ``line`` (0 ..
        MAX_LINE): OUT_WALK when the TLB misses its 4 KiB page (``line >> 6``), ORed with the
        LEVEL_* that holds the line shifted by OUT_LEVEL_SHIFT. ``update``: record the access
        (else the model is only read).

        Raises:
            ValueError: ``line`` is not a line of a 64-bit address."""
        if not 0 <= line <= MAX_LINE:
            raise ValueError(f"line {line:#x} is not a 64-byte line of a 64-bit address")
        return self._access(self.ptr, line, int(update))

    def store(self, line: int, update: bool = True) -> int:
        """:meth:`access` of a store: with several PEs (:func:`join_models`) a recorded store
        first invalidates the line in the other PEs' L1D and L2.

        Raises:
            ValueError: ``line`` is not a line of a 64-bit address."""
        if not 0 <= line <= MAX_LINE:
            raise ValueError(f"line {line:#x} is not a 64-byte line of a 64-bit address")
        return self.lib.spe_model_access_rw(self.ptr, line, int(update), 1)

    def touch(self, which: int, key: int, update: bool = True) -> bool:
        """One level alone (TOUCH_*): True if ``key`` (a page or line number, 0 .. MAX_LINE)
        is there; recorded with ``update``.

        Raises:
            ValueError: the level is absent (no L2), or ``key`` is out of range."""
        if not 0 <= key <= MAX_LINE:
            raise ValueError(f"key {key:#x} is not a page or line number of a 64-bit address")
        hit = self.lib.spe_model_touch(self.ptr, which, key, int(update))
        if hit < 0:
            raise ValueError(f"model level {which} is absent")
        return bool(hit)

    def swap_target(self, pc: int, target: int) -> int | None:
        """Set the last target of the indirect branch at ``pc``; its previous one or None."""
        had = self.lib.spe_model_target_swap(self.ptr, pc, target, ctypes.byref(self._old))
        if had < 0:
            raise MemoryError("model.c: no memory for the branch target table")
        return self._old.value if had else None

    def branch(self, kind: int, pc: int, target: int, taken: bool, update: bool = True
               ) -> bool:
        """``spe_model_branch()``, the branch predictor: whether the branch at ``pc`` of
        ``kind`` (BR_* flags: :func:`spe_emu.spe.records.branch_kind`), taken or not, to
        ``target`` is mispredicted; ``update``: the branch trains the predictor (False: only
        predicted; with model_feed "every" its execution trains it)."""
        out = self.lib.spe_model_branch(self.ptr, kind, pc, target, int(taken), int(update))
        if out < 0:
            raise MemoryError("model.c: no memory for the branch target table")
        return bool(out)

    def sync(self) -> None:
        """``spe_model_sync()``: waits until the model's thread (:func:`model_threads`) has
        recorded what it was handed as far as the last capture, so that the captures'
        outcomes (``spe_capture.fed``) it sets can be read. Every other method waits for
        all of it by itself."""
        self.lib.spe_model_sync(self.ptr)

    def worker_stats(self) -> tuple[int, int, int]:
        """What the model's thread did so far: the words of its ring handed to it (a batch's
        entries, two words each after a header of four; two for each block the branch
        trainer is handed by the block hook), the times its thread started (it ends after a
        while asleep, and starts again when entries come), and the words it has recorded
        (without waiting for it); (0, 0, 0) when the model has no thread."""
        out = (ctypes.c_uint64 * 3)()
        self.lib.spe_model_worker_stats(self.ptr, out)
        return out[0], out[1], out[2]

    def classify(self, word: int) -> int:
        """The kind (BR_* | BR_BRANCH) of the instruction ``word`` by the branch encodings
        (0: no branch), as the block hook classifies the end of a block."""
        return self.lib.spe_model_classify(self.ptr, word & 0xFFFFFFFF)

    def forget_sites(self) -> None:
        """Code or its mapping may have changed: the block hook classifies every site
        again."""
        self.lib.spe_model_sites_clear(self.ptr)

    def stats(self) -> dict[str, int]:
        """Counts of the accesses recorded: per level that held the line, all, TLB walks
        (:data:`MODEL_STATS`)."""
        out = (ctypes.c_uint64 * len(MODEL_STATS))()
        self.lib.spe_model_stats(self.ptr, out)
        return dict(zip(MODEL_STATS, out))


def model_trace_batch_address() -> int:
    """Address of ``spe_model_trace_batch`` for ``uc_mem_trace_batch_set`` (the patched
    libunicorn: patches/unicorn/0011) with the block hook's :class:`SpeCounter` as user data."""
    return ctypes.cast(library().spe_model_trace_batch, ctypes.c_void_p).value


def model_hook_address() -> int:
    """Address of ``spe_model_hook`` for ``uc_hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE,
    ...)`` with the block hook's :class:`SpeCounter` as user data (its ``feed`` a
    :class:`Model`'s ``ptr``)."""
    return ctypes.cast(library().spe_model_hook, ctypes.c_void_p).value


class Recorder:
    """The native record builder (record.c), over the machine's :class:`Model`.

    Args:
        model: the model records read and update (kept alive by the recorder).
        out_size: bytes of the output buffer (records of one drain, padded).

    Raises:
        NativeBuildError: the library cannot be loaded, or out of memory.
    """

    def __init__(self, model: Model, out_size: int):
        self.lib = library()
        self.model = model
        self.s = SpeRecorder()
        self.ref = ctypes.byref(self.s)
        if not self.lib.spe_recorder_init(self.ref, model.ptr, out_size):
            raise NativeBuildError("record.c: out of memory for the recorder")
        # The C storage is freed when the recorder is collected (or at close()).
        self._free = weakref.finalize(self, self.lib.spe_recorder_free, self.ref)

    def close(self) -> None:
        """Free the C storage now (idempotent)."""
        self._free()

    def add_templates(self, data: bytes) -> bool:
        """Store the templates of ``data`` (the bytes of consecutive ``SpeTemplate`` structs);
        False when one found no room (the ones before it are stored)."""
        return bool(self.lib.spe_templates_add(self.ref, data,
                                               len(data) // ctypes.sizeof(SpeTemplate)))

    def clear_templates(self) -> None:
        self.lib.spe_templates_clear(self.ref)

    def add_translation(self, va: int, pa_page: int) -> None:
        """Remember that the page of ``va`` translates to ``pa_page`` in the regime
        ``s.xlate_regime``, for the Physical Address packets of the records built."""
        self.lib.spe_xlate_add(self.ref, va, pa_page)

    def clear_translations(self) -> None:
        """Translations may have changed (Machine._flush_translations)."""
        self.lib.spe_xlate_clear(self.ref)

    def record(self, counter: SpeCounter, start: int, count: int) -> int:
        """Record captures [start, count) until one needs Python: its position (``count``
        when done); ``self.s.reason`` says why (REC_*). The captures' outcomes must be
        settled first (:meth:`Model.sync`)."""
        return self.lib.spe_record_captures(ctypes.byref(counter), self.ref, start, count)

    def take_output(self) -> bytes:
        """The padded records built since the last call, and empty the buffer."""
        data = ctypes.string_at(self.s.out, self.s.out_len)
        self.s.out_len = 0
        return data
