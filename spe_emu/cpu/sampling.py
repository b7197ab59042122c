"""The sample population and the samples taken from it: accounting the population while
StatisticalProfilingEnabled() holds (SPE supplement §3.1), its re-evaluation at a stop, the
interval counter's step of each member, and what the record of a sampled operation is built
from (:meth:`Sampling._observe`: data address, branch outcome, condition, context IDs,
timestamp, the previous branch target of FEAT_SPE_PBT).

:class:`Sampling` is a part of :class:`spe_emu.cpu.machine.Machine` (its attributes are the
machine's)."""

from __future__ import annotations

from .. import native
from ..arch.context import CONTEXTIDR_EL1, CONTEXTIDR_EL2, AccessContext
from ..arch.faults import TranslationFault
from ..spe import packets as P
from ..spe.records import Sample
from ..sysreg import MASK64
from . import a64
from .exceptions import ELR_REG, PSTATE, SPSR_ENC
from .native_records import NativeRecords
from .prediction import RECORD_BYTES_BOUND

ALL_ELS = 0b1111


class Sampling:
    """The machine's population accounting and sampling (see the module's docstring)."""

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
        pe = self.pe
        pe.pmu_events.accrue(pe.pmu_bucket)
        pe.pmu_bucket = (ctx.el, ctx.is_secure) if now else None
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
        self.pe.last_sample = (s.index, st.filtered_out - filtered, st.collisions - collided)
        if event is not None:
            if event.kind != "buffer-full":
                self._guest_error(f"spe: Profiling Buffer management event ({event.kind}) at "
                                  f"PMBPTR_EL1={event.pmbptr:#x}: PMBSR_EL1={event.pmbsr:#x}")
            # PMBSR_EL1.S is now 1: PMBIRQ asserted, profiling disabled (§3.5).
            self.replan = True
            self._ref_enabled = None
            self.pe.hold_irq_until = self.acct
            self._refresh_enabled()

    def _collection(self, ctx: AccessContext) -> tuple:
        """(CollectTimeStamp(), CollectContextIDR1(), CollectContextIDR2(),
        CollectPhysicalAddress()), cached until the next re-evaluation of the enable state (in
        the reference mode: computed every time)."""
        if self._collect is None or self.cfg.mode != "fast":
            self._collect = (self.spu.collect_timestamp(ctx), self.spu.collect_context1(ctx),
                             self.spu.collect_context2(ctx),
                             self.spu.collect_physical_address(ctx))
        return self._collect
