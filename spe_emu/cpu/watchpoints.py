"""Hardware watchpoints (Arm ARM D2 "AArch64 Self-hosted Debug", pseudocode
``AArch64.CheckWatchpoint()``, ``AArch64.WatchpointMatch()``, ``AArch64.WatchpointByteMatch()``,
``AArch64.StateMatch()``, ``AArch64.GenerateDebugExceptionsFrom()``,
``AArch64.WatchpointException()``).

Unicorn's QEMU 5.0 keeps DBGWCR<n>_EL1/DBGWVR<n>_EL1 but compiles ``cpu_watchpoint_insert()``
out, so it never raises a Watchpoint exception although ID_AA64DFR0_EL1.WRPs advertises four.
spe_emu raises them with Unicorn memory hooks installed only over the watched ranges (widened by
:data:`SLACK` bytes each side, so that every access of an instruction that touches a watched
byte is seen) and only while a watchpoint can match: MDSCR_EL1.MDE = 1, the OS Lock clear
(OSLSR_EL1.OSLK = 0) and DBGWCR<n>_EL1.E = 1. Writes of those registers reach
``Machine._on_msr``, which stops the run at the next block boundary (the writes take effect
after a context synchronization event, which ends QEMU's block) so the hooks are installed
again (:meth:`Watchpoints.refresh`). Nothing is installed, and nothing runs, while no
watchpoint is enabled.

Unicorn's memory hooks see, and are bounded by, physical addresses once stage 1 is on, while a
watchpoint compares virtual addresses: each watched page is hooked at the PA (or PAs) it
translates to now in the regimes of the Exception levels the watchpoint can match at
(:data:`PAGES`), and a hooked access is matched by the VA of the instruction making it. The
hooks follow the translation: they are installed again after a write of a register that
changes it (SCTLR/TTBR/TCR/VTTBR_EL2/VTCR_EL2, a stage 2 switch) and after TLBI
(``Machine._flush_translations``), and at every stop while a watched page does not translate
(a mapping made later without TLBI, as Linux maps a page after a Translation fault). A range
of more than :data:`MAX_TRANSLATED_PAGES` pages (DBGWCR<n>_EL1.MASK > 24) is hooked at its VA
only (docs/model.md).

A hook call that matches notes the hit, puts the PC back on the instruction and stops
emulation; Unicorn completes the access (and the rest of the instruction) first, so the
instruction is undone at the stop: the CPU registers from a context saved before its first
hooked access, the bytes its hooked stores overwrote. Then the Watchpoint exception is taken
(ELR = the instruction, FAR = the watched address accessed, ESR EC 0x34/0x35 with WnR and DFSC
0b100010).

Choices where the architecture leaves them open (docs/model.md "Exception classes"): the
address comparison uses VA bits [55:bottom] (``AddrTop()`` with TBI); a non-contiguous BAS, or
a BAS not all ones with MASK != 0, matches the bytes BAS selects; MASK 1 or 2 (reserved) acts as
0; linked watchpoints (DBGWCR<n>_EL1.WT = 1) never match (no context-matching breakpoints are
modelled); unprivileged loads/stores (LDTR/STTR) count as privileged at EL1.
"""

from __future__ import annotations

from unicorn import UC_HOOK_MEM_READ, UC_HOOK_MEM_WRITE, UC_MEM_WRITE
from unicorn.unicorn_const import UC_CTL_IO_WRITE, UC_CTL_TLB_FLUSH
from unicorn import arm64_const as A

from ..arch.context import MDCR_EL2, MDCR_EL3, AccessContext
from ..arch.faults import ExternalAbort, TranslationFault, page_chunks
from ..arch.id_regs import ID_AA64DFR0_EL1
from ..sysreg import MASK64, reg
from . import a64
from .exceptions import ABORT_ISS, EC, PSTATE, esr

NUM_WATCHPOINTS = 4   # ID_AA64DFR0_EL1.WRPs + 1 of Unicorn's "max" CPU
DBGWCR = [reg(f"DBGWCR{n}_EL1", (2, 0, 0, n, 7), "MASK 28:24", "WT 20", "LBN 19:16",
              "SSC 15:14", "HMC 13", "BAS 12:5", "LSC 4:3", "PAC 2:1", "E 0",
              doc="Arm ARM D19.3 DBGWCR<n>_EL1") for n in range(NUM_WATCHPOINTS)]
DBGWVR = [reg(f"DBGWVR{n}_EL1", (2, 0, 0, n, 6), "VA 63:2", doc="Arm ARM D19.3 DBGWVR<n>_EL1")
          for n in range(NUM_WATCHPOINTS)]
MAX_BREAKPOINTS = 16  # DBGBCR<n>_EL1 encodings (ID_AA64DFR0_EL1.BRPs + 1 of them implemented)
DBGBCR = [reg(f"DBGBCR{n}_EL1", (2, 0, 0, n, 5), "BT 23:20", "LBN 19:16", "SSC 15:14",
              "HMC 13", "BAS 8:5", "PMC 2:1", "E 0", doc="Arm ARM D19.3 DBGBCR<n>_EL1")
          for n in range(MAX_BREAKPOINTS)]
DBGBCR_INDEX = {r.encoding.tuple: n for n, r in enumerate(DBGBCR)}
MDSCR_EL1 = reg("MDSCR_EL1", (2, 0, 0, 2, 2), "MDE 15", "KDE 13", "SS 0",
                doc="Arm ARM D19.3 MDSCR_EL1")
OSDLR_EL1 = reg("OSDLR_EL1", (2, 0, 1, 3, 4), "DLK 0", doc="Arm ARM D19.3 OSDLR_EL1")
SHADOWED = frozenset({*DBGBCR_INDEX, MDSCR_EL1.encoding.tuple, OSDLR_EL1.encoding.tuple})
"""Registers whose MRS/MSR the OS Lock shadows follow (:meth:`Watchpoints.read_bcr`)."""
OSLAR_EL1 = reg("OSLAR_EL1", (2, 0, 1, 0, 4), "OSLK 0", doc="Arm ARM D19.3 OSLAR_EL1")
OSLSR_EL1 = reg("OSLSR_EL1", (2, 0, 1, 1, 4), "OSLK 1", read_only=True,
                doc="Arm ARM D19.3 OSLSR_EL1")
DEBUG_WRITES = frozenset(r.encoding.tuple for r in (*DBGWCR, *DBGWVR, *DBGBCR, MDSCR_EL1,
                                                     OSLAR_EL1, OSDLR_EL1))
"""MSRs after which the watchpoint hooks are installed again (and the breakpoints' OS Lock
shadow brought up to date)."""

FSC_DEBUG = 0b100010   # DFSC of a Watchpoint exception ("Debug exception")
FSC_ALIGNMENT = 0b100001   # DFSC of an Alignment fault
SLACK = 64             # bytes: the largest access of one instruction (DC ZVA, LD4 of Q registers)
MAX_TRANSLATED_PAGES = 4096   # 4 KiB pages of a watched range hooked where each maps (16 MiB)
MAX_BLOCK_INSNS = 512  # instructions looked at from a block's start (QEMU's blocks are shorter)


class Watchpoints:
    """The machine's watchpoints: hooks, matching, and the exception."""

    def __init__(self, machine):
        """``machine``: the :class:`~spe_emu.cpu.machine.Machine` whose watchpoints these are (not
        imported here: the machine is built on this module)."""
        self.m = machine
        self.dirty = True          # the controls may have changed: refresh before running
        self._hooks: list[int] = []
        self._active: list[tuple[int, int, int]] = []   # (n, DBGWCR, DBGWVR) enabled
        self._key: tuple | None = None                  # the instruction being hooked
        self._block: tuple[int, int] | None = None      # (reported PC, count) of its block
        self._pc, self._left = 0, 0                     # its address, bytes it has to access
        self._saved = None                              # its CPU context before its accesses
        self._undo: list[tuple[int, bytes]] = []        # (VA, old bytes) of its hooked stores
        # (PC, FAR, write, DFSC) to take at the stop: a Watchpoint (FSC_DEBUG) or a Device
        # memory Alignment fault (FSC_ALIGNMENT, :meth:`device_misaligned`)
        self.hit: tuple[int, int, bool, int] | None = None
        # A debugger's watchpoints (spe-emu run --gdb): (VA, bytes, kind) with kind "w"
        # (writes), "r" (reads) or "a" (both); a hit is undone like the guest's, then
        # on_host_hit(PC, address, write) is called instead of taking an exception. An access
        # by the instruction at host_skip = (PC, instructions retired before it) is not a hit
        # (the one the debugger resumes from).
        self.host: list[tuple[int, int, str]] = []
        self.on_host_hit = None
        self.host_skip: tuple[int, int] | None = None
        self._host_hit = False
        # (VA, PA, bytes) of each watched page hooked at the PA it maps to (the guest's and
        # the debugger's); the VA to PA offset of the instruction being followed
        self._pages: list[tuple[int, int, int]] = []
        self._delta = 0
        self.unresolved = False   # a watched page did not translate: refresh at every stop
        # While the OS Lock is set: the guest's DBGBCR<n>_EL1 values, QEMU holding them with
        # E = 0 (:meth:`_shadow_breakpoints`); the values of DBGBCR writes since the last
        # refresh, by n
        self.bp_shadow: dict[int, int] | None = None
        self._bcr_writes: dict[int, int] = {}
        # While the OS Lock is set: the guest's MDSCR_EL1.SS, QEMU holding SS = 0
        self.ss_shadow: int | None = None
        self._mdscr_written: int | None = None
        # OSDLR_EL1 (FEAT_DoubleLock, which ID_AA64DFR0_EL1.DoubleLock = 0 advertises): QEMU 5
        # keeps no value (RAZ/WI), so the guest's is kept here; DBGPRCR_EL1.CORENPDRQ is
        # taken as 0 (UNDEFINED in Unicorn's CPU), so DoubleLockStatus() is DLK
        self.osdlr = 0

    # -- hooks -------------------------------------------------------------------------
    def refresh(self) -> None:
        """Install the memory hooks for the enabled watchpoints (remove the old ones)."""
        self.dirty = False
        uc = self.m.uc
        had = bool(self._hooks)
        for h in self._hooks:
            uc.hook_del(h)
        self._hooks, self._active = [], []
        self._install()
        if self._hooks:
            # (the model's memory hook after these: an access a watchpoint stops before
            # is made again when the run resumes, and must reach the model once)
            self.m.model_hook_last()
        if had or self._hooks:
            # (Unicorn decides whether a page's accesses call the memory hooks when it enters
            # the page in its TLB: pages entered before a change keep the old decision)
            uc.ctl(UC_CTL_TLB_FLUSH, UC_CTL_IO_WRITE)

    @property
    def follows_translation(self) -> bool:
        """Whether a hook is placed by a translation (a change of it must refresh)."""
        return bool(self._pages)

    def _hook_range(self, lo: int, size: int, regimes: set[int]) -> None:
        """Hook the ``size`` bytes at VA ``lo`` (+- :data:`SLACK`) where each page maps now
        in each translation regime of ``regimes``; a page that translates in none is hooked
        at its VA (:attr:`unresolved`), a range of more than :data:`MAX_TRANSLATED_PAGES`
        pages at its VA."""
        m, uc = self.m, self.m.uc
        if size > MAX_TRANSLATED_PAGES << 12:
            self._hooks.append(uc.hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE, self._on_access,
                                           None, max(lo - SLACK, 0),
                                           min(lo + size + SLACK, 1 << 64) - 1))
            return
        for va, start, end in page_chunks(lo, size):
            pas = set()
            for regime in regimes:
                try:
                    pas.add(m._translate(va, regime))
                except (TranslationFault, ExternalAbort):
                    self.unresolved = True
            for pa in sorted(pas) or [va]:
                if pas:
                    self._pages.append((va, pa, end - start))
                self._hooks.append(uc.hook_add(
                    UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE, self._on_access, None,
                    max(pa - SLACK, 0), min(pa + end - start + SLACK, 1 << 64) - 1))

    def _vas(self, address: int) -> list[int]:
        """The VAs a hooked access at ``address`` may have been made by: those of the hooked
        pages mapped there (within :data:`SLACK`), then ``address`` itself (stage 1 off)."""
        vas = [(va + address - pa) & MASK64 for va, pa, n in self._pages
               if pa - SLACK <= address < pa + n + SLACK]
        return [*dict.fromkeys(vas), address] if vas else [address]

    def _install(self) -> None:
        # Unicorn's memory hooks see (and are bounded by) physical addresses once the MMU is
        # on: watched bytes are hooked where they are now mapped (_hook_range).
        m = self.m
        self._pages, self.unresolved = [], False
        el = PSTATE.get(m.fast.reg(A.UC_ARM64_REG_PSTATE), "EL")
        for lo, size, _kind in self.host:
            self._hook_range(lo, size, {m._regime_el(el)})
        cpr = self.m.fast.cpr
        # (AArch64.GenerateDebugExceptionsFrom(): OSLSR_EL1.OSLK, DoubleLockStatus())
        locked = bool(OSLSR_EL1.get(cpr(OSLSR_EL1.encoding.tuple), "OSLK")
                      or OSDLR_EL1.get(self.osdlr, "DLK"))
        self._shadow_breakpoints(locked)
        self._shadow_step(locked)
        if not MDSCR_EL1.get(cpr(MDSCR_EL1.encoding.tuple), "MDE") or locked:
            return
        ctx = m.context()
        for n in range(NUM_WATCHPOINTS):
            wcr = cpr(DBGWCR[n].encoding.tuple)
            if not DBGWCR[n].get(wcr, "E"):
                continue
            wvr = cpr(DBGWVR[n].encoding.tuple)
            self._active.append((n, wcr, wvr))
            lo, size = watched_range(wcr, wvr)
            # (the regimes of the ELs it can match at; EL2 only where EL2 is enabled)
            regimes = {m._regime_el(x) for x in (0, 1, 2)
                       if (x < 2 or ctx.el2_enabled) and state_match(wcr, ctx.at_el(x))}
            self._hook_range(lo, size, regimes or {m._regime_el(el)})

    # -- breakpoints and the OS Lock ------------------------------------------------------
    def bcr_written(self, enc: tuple[int, int, int, int, int], value: int) -> None:
        """From the MSR hook, before QEMU executes an MSR DBGBCR<n>_EL1, MDSCR_EL1 or
        OSDLR_EL1 (it may still trap: an OSDLR_EL1 write that does is not kept)."""
        if enc == OSDLR_EL1.encoding.tuple:
            if not debug_access_trapped(self.m.context(), "TDOSA"):
                self.osdlr = OSDLR_EL1.set(0, "DLK", OSDLR_EL1.get(value, "DLK"))
        elif enc == MDSCR_EL1.encoding.tuple:
            self._mdscr_written = value
        else:
            self._bcr_writes[DBGBCR_INDEX[enc]] = value

    def _shadow_step(self, locked: bool) -> None:
        """Software Step generates no exception while the OS Lock is set (as breakpoints,
        :meth:`_shadow_breakpoints`): QEMU holds MDSCR_EL1.SS = 0, so no step is active
        after an exception return, and :attr:`ss_shadow` the guest's SS, which MRS
        MDSCR_EL1 reads (:meth:`read_bcr`); restored at the unlock."""
        written, self._mdscr_written = self._mdscr_written, None
        if not locked and self.ss_shadow is None:
            return
        fast = self.m.fast
        enc = MDSCR_EL1.encoding.tuple
        held = fast.cpr(enc)
        if locked:
            if self.ss_shadow is None or MDSCR_EL1.get(held, "SS") or written == held:
                self.ss_shadow = MDSCR_EL1.get(held, "SS")
            if MDSCR_EL1.get(held, "SS"):
                fast.set_cpr(enc, MDSCR_EL1.set(held, "SS", 0))
            return
        if written is None and not MDSCR_EL1.get(held, "SS"):
            fast.set_cpr(enc, MDSCR_EL1.set(held, "SS", self.ss_shadow))
        self.ss_shadow = None

    def _shadow_breakpoints(self, locked: bool) -> None:
        """Breakpoints generate no Breakpoint exception while the OS Lock is set
        (``AArch64.GenerateDebugExceptionsFrom()``: OSLSR_EL1.OSLK == 1), which Unicorn's QEMU 5
        does not check. While it is set QEMU holds every DBGBCR<n>_EL1 disarmed
        (:func:`disarmed`: PMC = 0, HMC = 0, which no Exception level matches; QEMU reads them
        when an address matches, and ``uc_reg_write`` writes the raw value, so the
        breakpoint stays inserted with its address) and :attr:`bp_shadow` the guest's
        values, which MRS reads (:meth:`read_bcr`); a DBGBCR write while locked (which QEMU
        executes) is moved into the shadow here. Made at the stop after an OSLAR_EL1 or
        DBGBCR<n>_EL1 write (the run stops after every :data:`DEBUG_WRITES`), nothing per
        instruction."""
        writes, self._bcr_writes = self._bcr_writes, {}
        if not locked and self.bp_shadow is None:
            return
        fast = self.m.fast
        count = ID_AA64DFR0_EL1.get(fast.cpr(ID_AA64DFR0_EL1.encoding.tuple), "BRPs") + 1
        if locked:
            shadow = self.bp_shadow if self.bp_shadow is not None else {}
            for n in range(count):
                enc = DBGBCR[n].encoding.tuple
                held = fast.cpr(enc)
                old = shadow.get(n)
                if old is None or held != disarmed(old) or writes.get(n, held) == held:
                    shadow[n] = held   # (at the lock, or written since)
                if held != disarmed(held):
                    fast.set_cpr(enc, disarmed(held))
            self.bp_shadow = shadow
            return
        for n, value in self.bp_shadow.items():
            enc = DBGBCR[n].encoding.tuple
            if fast.cpr(enc) == disarmed(value) and n not in writes:
                fast.set_cpr(enc, value)
        self.bp_shadow = None

    def read_bcr(self, enc: tuple[int, int, int, int, int], ctx: AccessContext) -> int | None:
        """MRS DBGBCR<n>_EL1 or MDSCR_EL1 while the OS Lock is set, or OSDLR_EL1: the guest's
        value (:attr:`bp_shadow`, :attr:`ss_shadow`, :attr:`osdlr`), or None when QEMU must
        execute it -- no
        shadow, or the access is UNDEFINED or trapped (AArch64 MRS DBGBCR<n>_EL1,
        MDSCR_EL1: EL0; MDCR_EL2.{TDE, TDA} at EL1 with EL2 enabled; MDCR_EL3.TDA below
        EL3), which QEMU raises itself."""
        if enc == OSDLR_EL1.encoding.tuple:
            return None if debug_access_trapped(ctx, "TDOSA") else self.osdlr
        if enc == MDSCR_EL1.encoding.tuple:
            if self.ss_shadow is None:
                return None
        elif self.bp_shadow is None or DBGBCR_INDEX[enc] not in self.bp_shadow:
            return None
        if debug_access_trapped(ctx, "TDA"):
            return None
        if enc == MDSCR_EL1.encoding.tuple:
            return MDSCR_EL1.set(self.m.fast.cpr(enc), "SS", self.ss_shadow)
        return self.bp_shadow[DBGBCR_INDEX[enc]]

    def _on_access(self, uc, access: int, address: int, size: int, _value: int, _data) -> None:
        m = self.m
        write = access == UC_MEM_WRITE
        if self.hit is not None:   # (the rest of a hit instruction)
            return self._log(write, (address + self._delta) & MASK64, size)
        found = self._instruction(address, size, write)
        if found is None:
            return None
        pc, address = found   # (from here on, the access's VA)
        self._log(write, address, size)
        for lo, length, kind in self.host:
            if (address < lo + length and lo < address + size
                    and kind in ("aw" if write else "ar")
                    and self.host_skip != (pc, m._insn_index(pc))):
                self.hit, self._host_hit = (pc, max(address, lo), write, FSC_DEBUG), True
                uc.reg_write(A.UC_ARM64_REG_PC, pc)
                uc.emu_stop()
                return None
        ctx = m.context()
        pstate = m.fast.reg(A.UC_ARM64_REG_PSTATE)
        if debug_target(ctx, pstate, m.fast.cpr(MDSCR_EL1.encoding.tuple)) is None:
            return None
        for _n, wcr, wvr in self._active:
            far = watchpoint_match(wcr, wvr, ctx, address, size, write)
            if far is not None:
                self.hit = (pc, far, write, FSC_DEBUG)
                uc.reg_write(A.UC_ARM64_REG_PC, pc)   # (leaves the block after this access)
                uc.emu_stop()
                return None
        return None

    def _instruction(self, address: int, size: int, write: bool) -> tuple[int, int] | None:
        """(address of the load/store making the access a hook saw at ``address``, the
        access's VA). Inside a memory hook Unicorn's PC is the instruction's or, in blocks
        QEMU translated without synchronising it, the block's start; so the instructions from
        there on, up to the branch or exception-generating instruction that ends the block, are
        decoded and the first whose data range (from the registers now) holds one of the VAs
        the access may have (:meth:`_vas`; failing those, its own data VA translated in the
        current regime, :meth:`_through_translation`), of the right kind, is it. An
        instruction's later accesses (pairs, structures, atomics) are its own until it has
        made all of them. On a new instruction, the CPU context is saved for the undo."""
        m = self.m
        reported = m.pc
        key = (reported, m.insns())   # one execution of the block (or of the instruction)
        if key != self._block:
            self._block, self._pc, self._left = key, reported, 0
        if self._left > 0:   # the current instruction has accesses to make
            self._left -= size
            return self._pc, (address + self._delta) & MASK64
        el = PSTATE.get(m.fast.reg(A.UC_ARM64_REG_PSTATE), "EL")
        vas = self._vas(address)
        pc = self._pc if self._pc == reported else self._pc + 4
        for _ in range(MAX_BLOCK_INSNS):
            try:
                info = a64.decode(m._fetch(pc, el))
            except TranslationFault:
                return None
            lowest = info.data_address(pc, m._regs(info.reads))
            if lowest is not None and (info.is_store if write else info.is_load):
                end = lowest + max(info.access_size, 1)
                va = next((va for va in vas if lowest <= va < end), None)
                if va is None:   # (only then the instruction's own translation)
                    va = next((va for va in self._through_translation(lowest, address, el)
                               if lowest <= va < end), None)
                if va is not None:
                    total = info.access_size * (2 if info.is_load and info.is_store else 1)
                    self._pc, self._left = pc, total - size
                    self._delta = (va - address) & MASK64
                    self._key, self._undo = (pc, key), []
                    self._saved = m.uc.context_save()
                    return pc, va
            if info.is_branch or info.is_eret or info.exception is not None:
                return None   # (a block ends there: a later match would be a coincidence)
            pc += 4
        return None

    def _through_translation(self, lowest: int, address: int, el: int) -> list[int]:
        """[the VA of the hooked ``address`` if the access of an instruction whose data starts
        at VA ``lowest`` maps there at ``el``], else []: for an address no watched page
        accounts for, e.g. the native alignment hook's PA with stage 1 off and stage 2 on
        (IPA = VA, PA elsewhere)."""
        try:
            pa = self.m._translate(lowest, self.m._regime_el(el))
        except (TranslationFault, ExternalAbort):
            return []
        return [(lowest + address - pa) & MASK64] if 0 <= address - pa < SLACK else []

    def _log(self, write: bool, address: int, size: int) -> None:
        if write:
            self._undo.append((address, self.m._read_current(address, size)))

    def device_misaligned(self, write: bool, address: int, size: int) -> None:
        """A misaligned access of ``size`` bytes at ``address`` at an Exception level whose
        data accesses are to Device memory (from the native alignment hook, SyncChecks): the
        instruction making it takes an Alignment fault (the Device check of
        ``AArch64.MemSingle[]``; DFSC 0b100001, FAR = the access's VA, which is ``address``
        unless stage 2 maps the IPA elsewhere, WnR for a store) instead of completing. As for a watchpoint hit, Unicorn completes the instruction first and
        it is undone at the stop (:meth:`take_hit`). Exclusives and atomics are left to QEMU,
        which checks their alignment itself."""
        if self.hit is not None:   # (the rest of a hit instruction)
            return self._log(write, (address + self._delta) & MASK64, size)
        if self._left > 0 and self._hooks:
            return None   # (an instruction the watchpoint hooks follow: its rest)
        found = self._instruction(address, size, write)
        if found is None:
            return None
        pc, address = found   # (from here on, the access's VA)
        el = PSTATE.get(self.m.fast.reg(A.UC_ARM64_REG_PSTATE), "EL")
        info = a64.decode(self.m._fetch(pc, el))
        if info.is_exclusive or info.is_atomic:
            self._left = 0
            return None
        self._log(write, address, size)
        self.hit = (pc, address, write, FSC_ALIGNMENT)
        self.m.uc.reg_write(A.UC_ARM64_REG_PC, pc)
        self.m.uc.emu_stop()
        return None

    # -- the exception -----------------------------------------------------------------
    def take_hit(self) -> None:
        """At the stop after a hit: undo the instruction and take the Watchpoint exception
        (``AArch64.WatchpointException()``) or the Alignment fault (``AArch64.Abort()``
        with ``AlignmentFault()``: Data Abort routed as any other, ``PE.abort``)."""
        pc, far, write, fsc = self.hit
        self.hit, self._key, self._block = None, None, None
        m = self.m
        m.uc.context_restore(self._saved)
        for va, old in reversed(self._undo):
            m._write_current(va, old)
        self._undo = []
        m.pe.forget_context()
        if self._host_hit:
            self._host_hit = False
            m.uc.reg_write(A.UC_ARM64_REG_PC, pc)   # (the saved PC may be its block's start)
            self.on_host_hit(pc, far, write)
            return
        ctx = m.context()
        if fsc == FSC_ALIGNMENT:
            target, syndrome = m.exc.abort(ctx, fetch=False, write=write, fsc=fsc,
                                           external=False)
            m._take_sync(ctx, target, syndrome, pc, far=far)
            return
        target = debug_target(ctx, m.fast.reg(A.UC_ARM64_REG_PSTATE),
                              m.fast.cpr(MDSCR_EL1.encoding.tuple))
        ec = EC.WATCHPOINT_LOWER if target > ctx.el else EC.WATCHPOINT_SAME
        syndrome = esr(ec, ABORT_ISS.make(WnR=int(write), FSC=FSC_DEBUG))
        m._take_sync(ctx, target, syndrome, pc, far=far)


def debug_access_trapped(ctx: AccessContext, trap: str) -> bool:
    """Whether an MRS/MSR from ``ctx`` of a debug register in the trap group ``trap`` -- "TDA"
    (DBGBCR<n>_EL1, MDSCR_EL1) or "TDOSA" (OSDLR_EL1) -- is UNDEFINED or trapped, which QEMU
    raises itself (Arm ARM D19.3, the registers' access pseudocode: UNDEFINED at EL0; at
    EL1 with EL2 enabled trapped by MDCR_EL2.TDE, which HCR_EL2.TGE makes 1, or
    MDCR_EL2.<trap>; below EL3 by MDCR_EL3.<trap>)."""
    if ctx.el == 0:
        return True
    if ctx.el == 1 and ctx.el2_enabled and (MDCR_EL2.get(ctx.mdcr_el2, "TDE") or ctx.tge
                                            or MDCR_EL2.get(ctx.mdcr_el2, trap)):
        return True
    return ctx.el < 3 and ctx.have_el3 and bool(MDCR_EL3.get(ctx.mdcr_el3, trap))


def disarmed(bcr: int) -> int:
    """DBGBCR<n>_EL1 value ``bcr`` with PMC = 0 and HMC = 0: with SSC, a combination that
    matches at no Exception level (``AArch64.StateMatch()``; QEMU's ``bp_wp_matches()``
    returns false for it at every EL), for the OS Lock shadow."""
    return DBGBCR[0].set(DBGBCR[0].set(bcr, "PMC", 0), "HMC", 0)


def watched_range(wcr: int, wvr: int) -> tuple[int, int]:
    """(lowest VA, bytes) a watchpoint can match: 2^MASK bytes (MASK >= 3), else the
    doubleword (word when DBGWVR<n>_EL1[2] = 1) at DBGWVR<n>_EL1."""
    mask = DBGWCR[0].get(wcr, "MASK")
    if mask >= 3:
        return wvr & ~((1 << mask) - 1) & MASK64, 1 << mask
    bottom = 2 if wvr & 4 else 3
    return wvr & ~((1 << bottom) - 1) & MASK64, 1 << bottom


def debug_target(ctx: AccessContext, pstate: int, mdscr: int) -> int | None:
    """The EL a debug exception from the current state is taken to, or None when debug
    exceptions are disabled (``AArch64.GenerateDebugExceptionsFrom(PSTATE.EL, IsSecure(),
    PSTATE.D)`` with MDSCR_EL1.MDE, the OS Lock being checked when the hooks are installed):
    EL2 when EL2 is enabled and HCR_EL2.TGE or MDCR_EL2.TDE is set, else EL1; from that EL
    itself only with MDSCR_EL1.KDE = 1 and PSTATE.D = 0; never from a higher EL; from Secure
    state not with MDCR_EL3.SDD = 1."""
    if not MDSCR_EL1.get(mdscr, "MDE"):
        return None
    route_to_el2 = ctx.el2_enabled and (ctx.tge or MDCR_EL2.get(ctx.mdcr_el2, "TDE"))
    target = 2 if route_to_el2 else 1
    if ctx.is_secure and MDCR_EL3.get(ctx.mdcr_el3, "SDD"):
        return None
    if ctx.el == target:
        if not MDSCR_EL1.get(mdscr, "KDE") or PSTATE.get(pstate, "D"):
            return None
    elif ctx.el > target:
        return None
    return target


def state_match(wcr: int, ctx: AccessContext) -> bool:
    """``AArch64.StateMatch()`` for a watchpoint (not linked), privileged access at EL1+:
    the Exception level (HMC, SSC, PAC) and Security state (SSC) conditions."""
    spec = DBGWCR[0]
    ssc, hmc, pac = spec.get(wcr, "SSC"), spec.get(wcr, "HMC"), spec.get(wcr, "PAC")
    el_match = {3: hmc == 1 and ssc & 1 == 0,
                2: (hmc == 1 and (ssc << 2 | pac) != 0b1000) or ssc == 0b11,
                1: pac & 1 == 1,
                0: pac & 2 == 2}[ctx.el]
    secure = ctx.is_secure
    security_match = {0b00: True, 0b01: not secure, 0b10: secure,
                      0b11: hmc == 1 or secure}[ssc]
    return el_match and security_match


def watchpoint_match(wcr: int, wvr: int, ctx: AccessContext, address: int, size: int,
                     write: bool) -> int | None:
    """``AArch64.WatchpointMatch()`` for an access of ``size`` bytes at ``address``: the
    first matching byte's address (for FAR_ELx), or None."""
    spec = DBGWCR[0]
    if not spec.get(wcr, "E") or spec.get(wcr, "WT"):
        return None
    if not spec.get(wcr, "LSC") & (2 if write else 1):
        return None
    if not state_match(wcr, ctx):
        return None
    for byte in range(size):
        va = (address + byte) & MASK64
        if byte_match(wcr, wvr, va):
            return va
    return None


def byte_match(wcr: int, wvr: int, va: int) -> bool:
    """``AArch64.WatchpointByteMatch()`` with VA bits [55:bottom] compared (TBI)."""
    spec = DBGWCR[0]
    bottom = 2 if wvr & 4 else 3
    bas = spec.get(wcr, "BAS")
    mask = spec.get(wcr, "MASK")
    if mask in (1, 2):
        mask = 0
    byte_select = bool(bas >> (va & ((1 << bottom) - 1)) & 1)
    low = mask if mask > bottom else bottom
    top_mask = ((1 << 56) - 1) & ~((1 << low) - 1)
    return (va & top_mask) == (wvr & top_mask) and byte_select
