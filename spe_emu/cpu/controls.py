"""The control instructions of the fast run loop -- ERET and PSB CSYNC, found by a scan of
the executable code (:func:`control_offsets`, :class:`ControlSites`) and hooked where the PE
runs them, loaded images and code loaded at run time alike -- and the unmasking of
PSTATE.{A, I, F} the native block hook watches: when Python must see them
(:meth:`ControlInstructions._python_controls`) and what it does then (stop at the next block
boundary to re-plan, write the records pending before a PSB CSYNC: SPE supplement §3.6, Arm
ARM D17.6.1).

:class:`ControlInstructions` is a part of :class:`spe_emu.cpu.machine.Machine` (its
attributes are the machine's)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterator

from unicorn import UC_HOOK_CODE, UC_PROT_EXEC, Uc

from .. import native
from ..arch import INSN_BYTES
from ..platform.loader import PF_X, Segment
from ..sysreg import MASK64
from .exceptions import PSTATE
from .sync_checks import ERET_WORD
from .uc_calls import UC_HOOK_DEL, UC_VMEM_TRANSLATE


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


RUNTIME_CODE_PAGES = 64  # pages scanned either side of run-time loaded code (_follow_runtime_code)
PAGE_BYTES = 0x1000


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


class ControlInstructions:
    """The machine's control-instruction hooks (see the module's docstring)."""

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
