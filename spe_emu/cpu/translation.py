"""Host-side address translation on the guest's behalf: the translation regime of an
Exception level, stage 1 (and stage 2 of the EL1&0 regime) walks by the emulator's own walker
(:func:`spe_emu.arch.mmu.translate`) cached per 4 KiB page, the reads and writes made through
them (a trapped instruction's fetch, semihosting blocks, Profiling Buffer writes, code read
for learning), and the flush of that cache (SCTLR/TTBR/TCR/VTTBR_EL2/VTCR_EL2 writes, TLBI).

:class:`Translator` is a PE's (:class:`spe_emu.cpu.pe_core.PeCore`: the walks and their cache);
:class:`Translation` is a part of :class:`spe_emu.cpu.machine.Machine` (its attributes are the
machine's, which reaches the PE's translator's methods under their old names, ``_translate``,
``_fetch`` ...): the flush of every cache that depends on translations, Profiling Buffer
writes and code pages read for learning."""

from __future__ import annotations

from unicorn import Uc, UcError

from .. import native
from ..arch import mmu
from ..arch.faults import ExternalAbort, TranslationFault, page_chunks
from ..errors import GuestError
from .exceptions import PSTATE, current_pstate
from .fastuc import FastAccess


class Translator:
    """One PE's host-side translations (see the module's docstring): its stage 1 (and stage 2)
    walks cached per 4 KiB page, and the reads and writes made through them.

    Args:
        fast: the PE's registers and memory; uc: its Unicorn instance.
        sysreg_filter: the PE's native MRS/MSR/SYS filter (TLBI reaches Python once
            something is cached).
        ram_base, ram_size: the board's RAM.
    """

    def __init__(self, fast: FastAccess, uc: Uc, sysreg_filter: native.SpeSysregFilter,
                 ram_base: int, ram_size: int):
        self.fast, self.uc, self.sysreg_filter = fast, uc, sysreg_filter
        self.ram_base, self.ram_size = ram_base, ram_size
        self.cache: dict[tuple[int, int, bool], int] = {}  # (regime, VA page, write) -> PA page

    @staticmethod
    def regime_el(el: int) -> int:
        return max(el, 1)

    def translate(self, va: int, regime: int, write: bool = False,
                   manage_flags: bool = False) -> int:
        """Translation for host-side accesses on the guest's behalf (the fetch of a trapped
        instruction, semihosting blocks, Profiling Buffer writes, PA packets): stage 1 and,
        for the EL1&0 regime with HCR_EL2.VM == 1, stage 2 by the emulator's own walker
        (:func:`mmu.translate`, with the Address size and External abort checks), whatever
        EL the PE is at; cached per 4 KiB page (flushed on SCTLR/TTBR/TCR/VTTBR_EL2/VTCR_EL2
        writes, an HCR_EL2 or SCR_EL3 write that turns stage 2 on or off or changes
        HCR_EL2.E2H, and TLBI). With ``manage_flags`` the walk sets Access flags and dirty
        state where the regime enables their hardware management (:func:`mmu.translate`'s
        ``write_desc``: the SPU with PMBIDR_EL1.F == 1).

        Raises:
            TranslationFault: the access does not translate (its ``stage``, FSC with the
                level, and for stage 2 the IPA).
        """
        key = (regime, va >> 12, write)
        page = self.cache.get(key)
        if page is None:
            try:
                page = mmu.translate(self.fast, va & ~0xFFF, regime, write=write,
                                     checked_read=self.descriptor,
                                     write_desc=self.store_descriptor if manage_flags
                                     else None) & ~0xFFF
            except TranslationFault as fault:
                ipa = fault.ipa
                if ipa is not None and not fault.s1ptw:
                    ipa |= va & 0xFFF
                raise TranslationFault(va, fault.fsc, stage=fault.stage, ipa=ipa,
                                       s1ptw=fault.s1ptw) from None  # (the address that faulted)
            self.cache[key] = page
            self.sysreg_filter.sys_cache = 1   # (a TLBI must reach _on_sys now)
        return page | (va & 0xFFF)

    def descriptor(self, pa: int) -> int:
        """One translation table descriptor at ``pa`` (a host-side walk's read).

        Raises:
            ExternalAbort: no RAM or device at ``pa``.
        """
        try:
            return int.from_bytes(self.fast.read(pa, 8), "little")
        except UcError:
            raise ExternalAbort(pa) from None

    def store_descriptor(self, pa: int, desc: int) -> None:
        """A hardware update of the descriptor at ``pa`` (Access flag, dirty state).

        Raises:
            ExternalAbort: no RAM or device at ``pa``."""
        try:
            self.fast.write(pa, desc.to_bytes(8, "little"))
        except UcError:
            raise ExternalAbort(pa) from None

    def stage2_switch(self, enc: tuple[int, ...], value: int) -> bool:
        """Whether writing ``value`` to the register ``enc`` (HCR_EL2, SCR_EL3) turns stage 2
        of the EL1&0 regime on or off or changes HCR_EL2.E2H (the EL2 or EL2&0 regime):
        :func:`mmu.regime_controls`."""
        cpr = self.fast.cpr
        return mmu.regime_controls(cpr) != mmu.regime_controls(
            lambda e: value if e == enc else cpr(e))

    def fetch(self, pc: int, el: int) -> int:
        """The instruction word at ``pc`` in the regime of ``el`` (memory is re-read every time,
        so code written by the guest is seen)."""
        return self.fast.word(self.translate(pc, self.regime_el(el)))

    def read_current(self, va: int, n: int) -> bytes:
        """Guest memory by VA in the current regime (semihosting, instruction fetch)."""
        regime = self.regime_el(PSTATE.get(current_pstate(self.fast), "EL"))
        out = bytearray()
        for page_va, start, end in page_chunks(va, n):
            try:
                pa = self.translate(page_va, regime)
            except TranslationFault as fault:
                raise GuestError(f"host read of unmapped guest VA {fault.va:#x}") from None
            out += self.uc.mem_read(pa, end - start)
        return bytes(out)

    def write_current(self, va: int, data: bytes) -> None:
        regime = self.regime_el(PSTATE.get(current_pstate(self.fast), "EL"))
        for page_va, start, end in page_chunks(va, len(data)):
            self.write_regime(page_va, data[start:end], regime)

    def write_regime(self, va: int, data: bytes, regime: int) -> None:
        """Write ``data`` (within one page) at ``va`` through ``regime``, privileged."""
        self.fast.write(self.translate(va, regime, write=True), data)

    def in_ram(self, pa: int, size: int) -> bool:
        """Whether ``size`` bytes at physical address ``pa`` are RAM (not MMIO)."""
        return self.ram_base <= pa <= self.ram_base + self.ram_size - size

    def ram_at(self, va: int, size: int, regime: int) -> int | None:
        """The physical address of ``size`` bytes at ``va`` (within one page) in ``regime``,
        or None when they do not translate or are not RAM."""
        if (va & 0xFFF) + size > 0x1000:
            return None
        try:
            pa = self.translate(va, regime)
        except TranslationFault:
            return None
        return pa if self.in_ram(pa, size) else None


class Translation:
    """The machine's host-side translations (see the module's docstring)."""

    def _flush_translations(self) -> None:
        """Forget host-side translations (SCTLR/TTBR/TCR write, TLBI), and the native hook's
        verdicts, which are kept by virtual address."""
        self.pe.translator.cache.clear()
        if self.records is not None:
            self.records.clear_translations()
        self._headroom_pages.clear()
        self._forget_code()
        if self.watchpoints.follows_translation:   # (hooked where watched pages mapped)
            self.watchpoints.dirty = True
            self._stop_at_block_boundary()
        # Nothing is cached now (learnt code and records are only made while profiling is
        # enabled): TLBI and IC stay native until something is.
        self.sysreg_filter.sys_cache = int(self.enabled)

    def _spu_write(self, va: int, data: bytes) -> None:
        """Profiling Buffer writes (within one page): privileged, owning regime, through
        stage 2 when it applies to it (§3.4; Arm ARM D17.8.3). A write that reaches no memory
        or device is an External abort (§3.5.4), which the buffer handles as
        ``SpeConfig.external_abort`` says.

        Raises:
            TranslationFault: a stage 1 or stage 2 fault (including an External abort on a
                walk); ExternalAbort: no memory behind the write."""
        _, owner_el = self.spu.owner(self.context())
        pa = self._translate(va, owner_el, write=True,
                             manage_flags=self.spu.config.flag_updates == 1)
        if self.bus.find(pa) is None:
            raise ExternalAbort(va)
        self.fast.write(pa, data)

    def _code_page(self, va: int, regime: int) -> bytes | None:
        """The 4 KiB page of code holding ``va`` in ``regime`` (None: it does not translate or
        is not RAM), read once until code or its mapping may have changed
        (:meth:`_forget_code`, as the verdicts learnt from it)."""
        key = (va >> 12, regime)
        page = self._code_pages.get(key)
        if page is None:
            pa = self._ram_at(va & ~0xFFF, 0x1000, regime)
            if pa is None:
                return None
            page = self._code_pages[key] = self.fast.read(pa, 0x1000)
            self.sysreg_filter.sys_cache = self.sysreg_filter.sys_code = 1
        return page
