"""The Unicorn backend of the machine: the hooks it installs on its Unicorn instance at reset
-- native ones (the block hook that counts instructions, the MRS/MSR/SYS filters, the INTR
hook that takes exceptions natively, the control-instruction, SP and DC ZVA hooks) with their
Python fallbacks, and the reference loop's Python hooks -- the guard that carries an exception
out of a natively called hook, and the feed of every access and branch to the
micro-architecture model (model_feed "every", docs/model.md).

:class:`UnicornHooks` is a part of :class:`spe_emu.cpu.machine.Machine` (its attributes are
the machine's)."""

from __future__ import annotations

import ctypes
from typing import Callable

from unicorn import (UC_HOOK_BLOCK, UC_HOOK_CODE, UC_HOOK_INSN, UC_HOOK_INTR, UC_HOOK_MEM_READ,
                     UC_HOOK_MEM_UNMAPPED, UC_HOOK_MEM_WRITE)
from unicorn import arm64_const as A
from unicorn.unicorn_py3.arch.arm64 import UcRegCP64
from unicorn.unicorn_py3.unicorn import uclib

from .. import native
from ..arch import mmu
from ..arch.id_regs import ID_AA64DFR0_EL1, ID_AA64DFR2_EL1, ID_AA64PFR0_EL1
from ..arch.smccc import MPIDR_EL1
from ..devices.generic_timer import CTL as TIMER_CTL
from ..errors import GuestError
from ..sysreg import MASK64
from . import a64
from .config import NEVER
from .controls import PSB_CSYNC_WORD, UNMASK_WATCH
from .exceptions import ABORT_ISS, EC, ESR, PSTATE, exception_model, walk_tables
from .pe import ISR_EL1
from .qemu_state import exception_layout
from .sync_checks import ABORT_ECS, ERET_WORD, SP_ALIGN, SP_ELX_WRITES, SPSR
from .traps import (COUNTER_READS, CRN_CACHE, CTR_EL0, DAIF_ENC, FAR_ECS, INTNO_HVC,
                    INTNO_SMC, INTNO_SVC, INTNO_UNDEF, PYTHON_SYS, PYTHON_UNDEFS,
                    QEMU_SYNC_EXCEPTIONS, RANDOM_NUMBER_REGS, TIMER_CTL_READS,
                    TRANSLATION_WRITES, WATCHED_WRITES, WFI_WORD)
from .uc_calls import CODE_HOOK, INTR_HOOK, SYS_HOOK, UC_HOOK_ADD, UC_HOOK_DEL
from .watchpoints import DEBUG_WRITES, SHADOWED


class UnicornHooks:
    """The machine's hooks on its Unicorn instance (see the module's docstring)."""

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
        # (IC IVAU's line, logged for the other PEs' engines: spe_emu.cpu.smp)
        flt.vmem_translate = ctypes.cast(uclib.uc_vmem_translate, ctypes.c_void_p).value
        flt.ctl = ctypes.cast(uclib.uc_ctl, ctypes.c_void_p).value
        flt.ctl_remove_phys = native.CTL_REMOVE_PHYS
        flt.emu_stop = ctypes.cast(uclib.uc_emu_stop, ctypes.c_void_p).value
        flt.ic_line = 4 << CTR_EL0.get(self.fast.cpr(CTR_EL0.encoding.tuple), "IminLine")
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
        if self.cfg.mode == "fast":
            self._install_intr_hook()
        else:
            uc.hook_add(UC_HOOK_INTR, self._on_intr)
        if self.cfg.mode in ("fast", "raw"):
            # Counter reads (CNTPCT_EL0/CNTVCT_EL0) answered natively; every other MRS, and a
            # read the table does not cover, goes to _on_mrs (_mrs_fallback). (The raw loop
            # too: a speed baseline must not call Python at every counter read.)
            reads = self.counter_reads   # (built with the PE: PeCore)
            reads.counter = ctypes.pointer(self.counter)
            reads.model = ctypes.addressof(exception_model())
            for which, enc in enumerate(COUNTER_READS):
                reads.enc[which][:] = enc
            for which, enc in enumerate(TIMER_CTL_READS):
                reads.ctl_enc[which][:] = enc
            reads.enable_lsb = TIMER_CTL.field("ENABLE").lsb
            reads.istatus_lsb = TIMER_CTL.field("ISTATUS").lsb
            reads.filter = ctypes.addressof(self.sysreg_filter)
            self._mrs_callback = SYS_HOOK(self._mrs_fallback)
            reads.fallback = ctypes.cast(self._mrs_callback, ctypes.c_void_p).value
            self._native_hook(UC_HOOK_INSN, ctypes.c_void_p(native.mrs_hook_address()),
                              ctypes.byref(reads), 1, 0, A.UC_ARM64_INS_MRS)
        else:
            uc.hook_add(UC_HOOK_INSN, self._on_mrs, None, 1, 0, A.UC_ARM64_INS_MRS)
        self._block_hook = None
        if self.cfg.mode != "reference":
            self._block_hook = self._native_hook(
                UC_HOOK_BLOCK, ctypes.c_void_p(native.block_hook_address()),
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
        self._inline_block_counter(self._block_hook is not None and not self.counter.pbt_on
                                   and (not self.counter.feed or self.counter.trace_blocks))
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
        """After a write of PMBLIMITR_EL1 (model_feed "every"): :meth:`_follow_buffer`; on a
        several-PE machine every PE's feed follows whether any PE's buffer is enabled (one
        coherent memory system: :meth:`spe_emu.cpu.smp.Smp.buffer_written`)."""
        if self.smp is not None:
            self.smp.buffer_written(enabled)
        else:
            self._follow_buffer(enabled)

    def _pmu_wants_feed(self, on: bool) -> None:
        """The PMU counts a model event (``on``) or no longer does: the model is fed while
        it does or the Profiling Buffer is enabled (:meth:`_follow_buffer`), with
        model_feed "every" (otherwise the PMU implements no model event)."""
        self._pmu_feed = on
        if self._model_every and self.cfg.mode != "raw":
            self._follow_buffer(self._buffer_feed)

    def _follow_buffer(self, enabled: bool) -> None:
        """The Profiling Buffer's E (``enabled``), or the PMU's demand (:meth:`_pmu_wants_feed`)
        changed. E = 1 starts the feed
        (model_feed_from "enable") or resumes it; E = 0 lets it go on for
        SpeConfig.model_feed_linger instructions more (virtual time, an event on the clock,
        at which both run loops stop exactly, so they pause it at the same instruction), then
        pauses it: accesses and branches long after profiling (a guest's perf report) do not
        feed the model, and run at sampled-mode speed but for the trace calls themselves."""
        self._buffer_feed = enabled
        enabled = enabled or self._pmu_feed
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
        on the TLB fast path; 0011 has the translated code append them to a buffer that
        reaches ``spe_model_trace_batch`` in batches: block_slow flushes it first) or, with
        Unicorn's own library, a memory hook. The branches: with the patched library and the
        model's thread (:func:`spe_emu.native.model_threads`; one PE: several PEs' models
        have none), the blocks the translated code counts itself go to the same buffer (0014,
        ``uc_mem_trace_blocks``), which hands them to the model's branch trainer, and the
        block hook hands it the others (counter.c hand_block); otherwise the block hook's
        block_fed trains the predictor at every block (on one thread that call costs less
        than the blocks' entries). The run stops
        after that instruction, in both loops, and the translated code is flushed before it
        goes on (:meth:`_start`): code translated before calls neither."""
        if self._feeding:
            return
        self._feeding = True
        c = self.counter
        c.feed = self.spu.builder.model.ptr
        # (the patched library's trace, patches/unicorn/0002, 0011 and 0014; a patched library
        # has every patch: tests/test_unicorn_patches.py)
        trace_set = getattr(uclib, "uc_mem_trace_batch_set", None)
        if trace_set is None:
            self._inline_block_counter(False)   # (block_fed trains the predictor)
            self.model_hook_last(install=True)
        else:
            trace_set.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
            trace_set(self.uc._uch, ctypes.c_void_p(native.model_trace_batch_address()),
                      ctypes.byref(c))
            if native.model_threads_in_use() and self.cfg.smp == 1:
                blocks = uclib.uc_mem_trace_blocks
                blocks.argtypes = (ctypes.c_void_p, ctypes.c_bool)
                if blocks(self.uc._uch, True):
                    raise GuestError("cannot trace the blocks (uc_mem_trace_blocks)")
                c.trace_blocks = 1
                self._inline_block_counter(self._block_hook is not None and not c.pbt_on)
            else:   # (on one thread the block hook's call costs less than the blocks' entries)
                self._inline_block_counter(False)
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
                ID_AA64PFR0_EL1.encoding.tuple} | self.cfg.cpu.presented | (
                {MPIDR_EL1.encoding.tuple} if self.cfg.smp > 1 else set())
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
        # (an abort refine_abort would leave unchanged is taken natively: spe_abort_stands)
        self._walk_tables = walk_tables(self.cfg.cpu.e0pd)   # (h.walk points into it)
        h.walk = ctypes.addressof(self._walk_tables)
        fsc = ABORT_ISS.field("FSC")
        h.fsc_lsb, h.fsc_mask = fsc.lsb, fsc.mask >> fsc.lsb
        for i, (mask, value) in enumerate(PYTHON_UNDEFS):
            h.python_undef_mask[i], h.python_undef_value[i] = mask, value
        # The CPU interface's common accesses, natively on the GIC's state (gicv3.py,
        # gic.c); the context-dependent fields are refreshed with the context
        # (PeCore._native_context).
        self.gic_cpu.fill_native_path(h)
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
            pe = self.pe
            if pe.hook_error is None:
                pe.hook_error = exc
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

    def _inline_block_counter(self, on: bool) -> None:
        """Give the native block hook its inline fast path (patches/unicorn/0009,
        ``uc_hook_block_counter``: the translated code counts a block that ends by
        ``fast_limit`` itself, as spe_block_hook's common path would, and calls the hook
        only for the others), or take it away. Only while that path is all the hook would do
        for such a block: no FEAT_SPE_PBT tracking, no model feed. Applies to code translated
        from then on (the caller flushes the rest when it matters: :meth:`_start_model_feed`).
        Nothing with Unicorn's own library."""
        try:
            counter_set = uclib.uc_hook_block_counter
        except AttributeError:
            return
        counter_set.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
        err = counter_set(self.uc._uch, self._block_hook or 0,
                          ctypes.byref(self.counter) if on else None)
        if err:
            raise GuestError(f"cannot set the block hook's inline counter (uc error {err})")

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

    def _mrs_fallback(self, _uch, reg: int, cp_ptr, _data) -> int:
        """The native MRS hook's fallback (fast and raw modes): fills the counter-read
        table's entries of the current EL when this is a counter or timer-control read (and
        they are not there), then :meth:`_on_mrs` (:meth:`_guarded`)."""
        def body() -> int:
            cp = self._cp_reg(cp_ptr)
            enc = (cp.op0, cp.op1, cp.crn, cp.crm, cp.op2)
            if enc in COUNTER_READS or enc in TIMER_CTL_READS:
                self._fill_counter_reads()
            return self._on_mrs(self.uc, reg, cp, None)
        return self._guarded(body, 0)
