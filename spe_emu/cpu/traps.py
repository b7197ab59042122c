"""What the PE's traps into the emulator do: every exception QEMU raises (Unicorn's INTR
hook: taken as QEMU routed it, or emulated when the UNDEF is spe_emu's -- PMS*/PMB* and other
registered system registers, semihosting's HLT #0xF000, PSCI calls through the board's
conduit), accesses to no RAM or device (synchronous External aborts), and the MRS, MSR and SYS
instructions the native filters pass to Python (registered owners' registers, ID fields
spe_emu presents, RNDR, TLBI and IC maintenance, writes that change the context, translation
or debug state).

:class:`Traps` is a part of :class:`spe_emu.cpu.machine.Machine` (its attributes are the
machine's)."""

from __future__ import annotations

from unicorn import UC_MEM_FETCH_UNMAPPED, UC_MEM_WRITE_UNMAPPED, Uc
from unicorn import arm64_const as A

from .. import native
from ..arch import mmu
from ..arch.faults import TranslationFault
from ..arch.smccc import MPIDR_EL1
from ..arch.context import (HCR_EL2, MDCR_EL2, MDCR_EL3, SCR_EL3, SCTLR_ENC, TTBR0_ENC,
                            TTBR1_EL1, AccessContext, banked)
# (registers QEMU implements whose value spe_emu presents: the MRS hook returns it)
from ..arch.id_regs import (ID_AA64DFR0_EL1, ID_AA64DFR2_EL1, ID_AA64PFR0_EL1, MIDR_EL1,
                            VMPIDR_EL2, VPIDR_EL2)
from ..devices.generic_timer import TIMER_REGISTERS
from ..devices.pmu import PMUVER_V3P5
from ..devices.psci import PeState, PsciAction
from ..devices.semihosting import SemihostExit
from ..errors import GuestError
from ..platform.sysregs import SysregEntry
from ..spe.pmu_events import PMUVER_V3P1
from ..sysreg import MASK64, Access, Replan, reg
from . import a64
from .config import NEVER, MachineExit
from .controls import UNMASK_WATCH
from .exceptions import EC, ESR, VectorKind, esr, sysreg_trap_iss
from .pe import ISR_EL1
from .ras import PRESENTED_RAS
from ..arch import INSN_BYTES
from .watchpoints import DEBUG_WRITES, SHADOWED


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
# Writes that change stage 1 translation (SCTLR, TTBR0/1, TCR of EL1/EL2/EL3): flush the
# host-side translation cache.
TRANSLATION_WRITES = {enc for table in (SCTLR_ENC, TTBR0_ENC, banked(TTBR1_EL1), mmu.TCR_ENC)
                      for enc in table.values()} | {mmu.VTTBR_EL2.encoding.tuple,
                                                     mmu.VTCR_EL2.encoding.tuple}
CRN_TLBI = 8
# Writes that may turn stage 2 of the EL1&0 regime on or off (HCR_EL2.{VM, E2H, TGE},
# SCR_EL3.NS): the host-side translations are flushed when they do.
STAGE2_SWITCHES = {HCR_EL2.encoding.tuple, SCR_EL3.encoding.tuple}
EXCEPTION_LOOP_LIMIT = 10_000  # exceptions in a row raised by their vector's first instruction
# SYS with CRn == 7 and CRm == 1 or 5 is an instruction cache invalidation (IC IALLUIS,
# IC IALLU, IC IVAU): code may have changed.
CRN_CACHE, CRM_IC = 7, (1, 5)
CTR_EL0 = reg("CTR_EL0", (3, 3, 0, 0, 1), "IminLine 3:0", doc="Arm ARM D19.2")
"""Cache Type Register: IminLine, log2 of the words in the smallest instruction cache line."""
# The SYS operations (op0 == 1) Python acts on: every TLBI (CRn == 8) and IC (CRn == 7, CRm
# 1 or 5); the native SYS hook leaves the others (DC ..., AT ...) to QEMU.
PYTHON_SYS = tuple((1, op1, crn, crm, op2) for op1 in range(8) for op2 in range(8)
                   for crn, crms in ((8, range(16)), (CRN_CACHE, CRM_IC)) for crm in crms)
# CNTPCT_EL0 and CNTVCT_EL0, in the native table's order (spe_native.h spe_counter_reads)
COUNTER_READS = ((3, 3, 14, 0, 1), (3, 3, 14, 0, 2))
TIMER_CTL_READS = tuple(TIMER_REGISTERS[name].encoding.tuple
                        for name in ("CNTP_CTL_EL0", "CNTV_CTL_EL0"))
"""The timer-control reads the native MRS hook answers (spe_native.h spe_counter_reads:
which 0 and 1), from the parts :meth:`_fill_counter_reads` puts in its table."""
# RNDR and RNDRRS (Arm ARM D19.2, FEAT_RNG), answered from a seeded generator
RANDOM_NUMBER_REGS = ((3, 3, 2, 4, 0), (3, 3, 2, 4, 1))
RNDR_SEED_SALT = 0x524E4452  # "RNDR": the generator's stream differs from the interval's
# UNDEFs that may be spe_emu's to emulate (native INTR hook: (mask, value) of the word): MRS/
# MSR of a system register (op0 2 or 3; L either way) and semihosting's HLT #0xF000.
PYTHON_UNDEFS = ((0xFFD00000, 0xD5100000), (0xFFFFFFFF, 0xD4400000 | 0xF000 << 5))


class Traps:
    """The machine's trap handlers (see the module's docstring)."""

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
            self._take_sync(ctx, self.exc.sync_target(ctx), esr(EC.UNKNOWN), pc)
            return
        if verdict is not Access.OK:
            iss = sysreg_trap_iss(*info.sysreg, info.rt, info.is_read)
            self._take_sync(ctx, verdict.target_el, esr(EC.SYSREG, iss), pc)
            return
        rt_reg = a64.X_REGS[info.rt] if info.rt < 31 else None  # Rt == 31 is XZR
        retired = self._retired_before(pc)
        self._account(retired + 1)
        if entry.owner is self.spu and self._control_segments:
            self._follow_runtime_code(pc)
        if self.sync_observer is not None and entry.owner is self.spu:
            self.sync_observer("sysreg", self._retired_before(pc))
        self._retired_now = retired   # (the clock at this instruction: the block ends here)
        try:
            if info.is_read:
                value = entry.owner.sysreg_read(entry.spec.name, ctx)
            else:
                value = fast.reg(rt_reg) if rt_reg is not None else 0
                entry.owner.sysreg_write(entry.spec.name, value, ctx)
        finally:
            self._retired_now = None
        self._irq_line_value = None  # (an acknowledge, a PMU overflow change the outputs)
        self._python_controls()
        if info.is_read:
            if rt_reg is not None:
                fast.set_reg(rt_reg, value)
        else:
            if entry.owner is self._native_reads_owner():
                # (CNTKCTL_EL12, emulated, changes the natively answered reads' checks)
                self._counter_reads_changed()
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
        self.exc.take(target, VectorKind.SYNC, preferred, syndrome, far)
        self.pe.forget_context()
        self.pe.py_exceptions_taken += 1
        self.counter.pmu_exceptions += 1   # (EXC_TAKEN: the PMU)
        # (INST_RETIRED, ground truth; the reference loop counted the instruction if its hook
        # ran for it: not for an instruction abort)
        native.exception_from(self.counter, insn, preferred, None if self.cfg.mode != "reference"
                              else self._last_insn == insn)
        self._request_stop()
        if self.exception_observer is not None:
            self.exception_observer(VectorKind.SYNC, target, syndrome)

    def _request_stop(self) -> None:
        self.replan = True
        self._ref_enabled = None
        self.uc.emu_stop()

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
        if intno == INTNO_UNDEF and self.pmu is not None and self._is_pmu_access(pc):
            # (the SPE events before it, with the samples of its block not yet replayed --
            # its own among them -- as the reference loop's instruction hook sees them)
            self._pmu_catch_up(self._retired_before(pc))
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

    def _is_pmu_access(self, pc: int) -> bool:
        """Whether the instruction at ``pc`` is an MRS/MSR of a PMU register (the PMU's)."""
        try:
            info = a64.decode(self._fetch(pc, self.pe.live_context().el))
        except TranslationFault:
            return False
        entry = self._lookup(info.sysreg) if info.sysreg is not None else None
        return entry is not None and entry.owner is self.pmu

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
        pe = self.pe
        if pe.unmapped is None:
            pe.unmapped = (access, address)
        return False

    def _external_abort(self, access: int, reported: int) -> None:
        """The synchronous External abort of an access to no RAM or device on the board's
        bus (:meth:`ProcessingElement.external_abort`; QEMU's virt board faults them too):
        FAR = the access's VA, ELR = the instruction (the fetched address for a fetch)."""
        ctx = self.context()
        pc = self.pc
        fetch = access == UC_MEM_FETCH_UNMAPPED
        target, syndrome = self.exc.external_abort(ctx, fetch=fetch,
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
        result = self.psci.call(fid, tuple(args), PeState(self.mpidr))
        if result.action is PsciAction.CPU_OFF:   # (another PE is on: :mod:`.smp`)
            self.pe.powered = False
            self._request_stop()
            return
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

    def _fill_counter_reads(self) -> None:
        """The native counter-read table's entries for the current Exception level, for the
        present control state, from the registered owner's own access checks and values (the
        rules stay in Python): for each counter, whether a read is permitted and the offset
        from the instruction count (valid until an MSR or a wait changes the control state or
        the idle time: ``valid``); for each timer control register (:data:`TIMER_CTL_READS`),
        whether a read is permitted and the parts of its value (the owner's ``ctl_parts``;
        until a timer register is written: ``ctl_valid``).

        An EL's entries are filled when a read at that EL reaches Python (the native hook
        found no entry: its ``allowed`` bits are clear until then), so a change of the
        control state costs one EL's four entries, not sixteen; nothing when the EL's are
        there already (the read is one the access check does not permit)."""
        reads = self.counter_reads
        if not reads.valid:
            reads.allowed = reads.ctl_allowed = 0
            self._reads_filled = 0
        elif not reads.ctl_valid:
            reads.ctl_allowed = 0
            self._reads_filled = 0   # (an EL's counter entries are filled again with its CTLs)
        ctx = self.context()
        el = ctx.el
        if self._reads_filled >> el & 1:
            return
        el_bits = 0b11 << 2 * el   # (bit 2 * EL + which, in both masks)
        allowed, ctl_allowed = reads.allowed & ~el_bits, reads.ctl_allowed & ~el_bits
        self._retired_now = 0
        try:
            for which, enc in enumerate(COUNTER_READS):
                entry = self._native_read(enc, ctx)
                if entry is None:
                    continue
                value = entry.owner.sysreg_read(entry.spec.name, ctx)
                reads.offset[el][which] = -value & MASK64
                allowed |= 1 << (2 * el + which)
            for which, enc in enumerate(TIMER_CTL_READS):
                entry = self._native_read(enc, ctx)
                parts = entry and entry.owner.ctl_parts(entry.spec.name, ctx)
                if parts is None:
                    continue
                reads.ctl[el][which], reads.ctl_cval[el][which] = parts[0], parts[1]
                reads.ctl_offset[el][which] = -parts[2] & MASK64   # (count at 0 retired)
                ctl_allowed |= 1 << (2 * el + which)
        finally:
            self._retired_now = None
        reads.allowed, reads.ctl_allowed = allowed, ctl_allowed
        reads.valid = reads.ctl_valid = 1
        self._reads_filled |= 1 << el

    def _native_read(self, enc, ctx: AccessContext) -> SysregEntry | None:
        """The registered owner's entry for an MRS at ``enc`` that the native table may
        answer at ``ctx`` (reached through the instruction hook, the access check passes),
        else None."""
        entry = self.sysregs.lookup(enc)
        if entry is None or entry.via_undef or entry.verdict(True, ctx) is not Access.OK:
            return None
        return entry

    def _native_reads_owner(self):
        """The owner of the reads the native MRS hook answers (:data:`COUNTER_READS`,
        :data:`TIMER_CTL_READS`: the generic timer), or None without a table."""
        if self.counter_reads is None:
            return None
        entry = self.sysregs.lookup(COUNTER_READS[0])
        return entry.owner if entry is not None else None

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
        own = self.pe.last_sample
        if own is not None and own[0] == retired:
            # the accessing instruction's own sample, taken before its hook (reference loop):
            # it counts after its access, as its SAMPLE_POP member does
            early -= 1 - own[2]
            kept -= 1 - own[1] - own[2]
            coll -= own[2]
        self.pmu_events.adjust = (retired - self.acct if self.enabled else 0, early, kept,
                                  coll)
        self.pmu_events.accrue(self.pe.pmu_bucket)
        # (the adjusted counts are realised by the next settling, in the same period)
        self.pmu_events.adjust = (0, 0, 0, 0)

    def _counter_reads_changed(self) -> None:
        """The control state or the idle time changed: the native table is refilled at the
        next MRS that reaches Python."""
        if self.counter_reads is not None:
            self.counter_reads.valid = 0

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
        if self._pending is None and not self.counter.cap_count:
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
        if enc == MPIDR_EL1.encoding.tuple:   # (hooked with several PEs: Machine.mpidr)
            ctx = self.context()
            if ctx.el == 0:
                return 0  # UNDEFINED at EL0: QEMU raises it
            # (D19.2 MPIDR_EL1: at EL1 with EL2 enabled a read gives VMPIDR_EL2)
            uc.reg_write(reg, uc.cpr_read(*VMPIDR_EL2.encoding.tuple)
                         if ctx.el == 1 and ctx.el2_enabled else self.mpidr)
            return 1
        if enc == ISR_EL1.encoding.tuple:
            ctx = self.context()
            if ctx.el == 0:
                return 0  # UNDEFINED at EL0: QEMU raises it
            uc.reg_write(reg, self.exc.isr_el1(ctx))
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
                if self.pmu is not None:   # (devices/pmu.py)
                    value = ID_AA64DFR0_EL1.set(value, "PMUVer", PMUVER_V3P5)
                elif self.cfg.spe.pmsver:  # (SPE events need 16-bit evtCount, §2.6)
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
            if self.counter_reads is not None:
                self.counter_reads.ctl_valid = 0   # (a timer's CTL or CompareValue may change)
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
            if enc == HCR_EL2.encoding.tuple and self.context().el >= 2:
                # (FB: IC IALLU at EL1 is broadcast; the hook runs before QEMU's access
                # check, so a write from EL1, which UNDEFs or traps, changes nothing)
                self.sysreg_filter.iallu_broadcast = HCR_EL2.get(cp.val, "FB")
            self.pe.forget_context()
            self._ref_enabled = None
            self._irq_line_value = None  # (HCR_EL2.VSE, AMO, TGE; SCR_EL3.NS)
            self._python_controls(settled=False)   # (QEMU writes the register after this)
            self.intr.gic_native = 0   # (until PeCore._native_context has the new context)
        if enc in DEBUG_WRITES:
            self.watchpoints.dirty = True  # (hooks installed again before the run goes on)
            if enc in SHADOWED:
                self.watchpoints.bcr_written(enc, cp.val)
        if enc in WATCHED_WRITES or enc in DEBUG_WRITES or enc == DAIF_ENC:
            # Takes effect after this instruction; re-plan at the next block boundary.
            self.replan = True
            self._stop_at_block_boundary()
        return 0
