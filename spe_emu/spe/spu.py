"""The Statistical Profiling Unit: SPE register state, enable/collection controls, sampling.

Ties the layers together: register storage and side effects (:mod:`.registers`), the sample
interval counter (:mod:`.interval`), record building (:mod:`.records`), ``CollectRecord()``
(:mod:`.filters`) and the Profiling Buffer (:mod:`.buffer`). The CPU glue decides *when*
population members occur and calls :meth:`Spu.sample` for selected operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..arch.context import HCR_EL2, MDCR_EL2, MDCR_EL3, AccessContext
from . import exc
from .buffer import ManagementEvent, ProfilingBuffer
from .config import SpeConfig
from .filters import FILTER_ENABLES, collect_record, type_mask
from .interval import IntervalCounter, Xorshift64
from .driver_rules import DriverRules
from .records import RecordBuilder, Sample
from .registers import ALIASES, redirect, spe_registers


@dataclass
class SpuStats:
    """Counters reported at the end of a run (all counts of operations or records)."""

    population: int = 0          # SAMPLE_POP: members of the sample population
    samples: int = 0             # operations selected for sampling (SAMPLE_FEED + collisions)
    collisions: int = 0          # SAMPLE_COLLISION: selected while the in-flight limit was met
    filtered_out: int = 0        # selected but removed by CollectRecord()
    records_written: int = 0     # records written to the Profiling Buffer
    bytes_written: int = 0
    management_events: list = field(default_factory=list)


class Spu:
    """The SPU of one PE.

    Args:
        config: implementation choices.
        write_va: writes guest memory through the owning translation regime (raises
            :class:`spe_emu.spe.buffer.TranslationFault`).
        on_irq: called with the new PMBIRQ level whenever PMBSR_EL1.S may have changed.
        on_serror: called when an External abort on a buffer write is to be taken as a
            physical SError exception (``SpeConfig.external_abort == "serror"``).
    """

    def __init__(self, config: SpeConfig, write_va: Callable[[int, bytes], None],
                 on_irq: Callable[[bool], None] | None = None,
                 on_serror: Callable[[], None] | None = None):
        self.config = config
        self.table = spe_registers(config)
        self.regs = {name: value for name, value in self.table.reset_values().items()
                     if name not in ALIASES}
        self.interval = IntervalCounter(self.table["PMSICR_EL1"], self.table["PMSIRR_EL1"],
                                        config.ernd, Xorshift64(config.seed),
                                        config.zero_interval)
        self.builder = RecordBuilder(config)
        # the driver-bug reporter (the machine sets its report and pc callbacks)
        self.rules = DriverRules(self.regs, self.table, config)
        self.buffer = ProfilingBuffer(self.regs, self.table, config, write_va, on_serror)
        self.on_irq = on_irq
        self.on_buffer_write: Callable[[bool], None] | None = None
        """Called after each write of PMBLIMITR_EL1 with its E bit (the machine's model feed:
        SpeConfig.model_feed_from, model_feed_linger)."""
        self.stats = SpuStats()
        self._pmbsr_s = self.table["PMBSR_EL1"].field("S")
        # PSTATE.PM with FEAT_SPE_EXC (the machine keeps it: Machine._pm_on_entry, _restore_pm)
        self.pstate_pm = 0
        self._filters: tuple | None = None   # (PMSFCR fields, PMSEVFR, MINLAT), until a write
        self._owner_for: tuple[AccessContext | None, tuple[bool, int]] = (None, (False, 1))
        # ProfilingBufferEnabled() for the last (context, PMBLIMITR_EL1, PMBSR_ELx) sampled in.
        self._enabled_for: tuple[tuple | None, bool] = (None, False)
        self._in_flight: list[int] = []   # instruction numbers of sampled operations in flight
        self.live_context: Callable[[], AccessContext] | None = None
        """The PE's current context (the machine sets it): with FEAT_SPE_EXC, PMBIRQ and
        whether profiling is stopped depend on MDCR_EL3 / SCR_EL3 (:mod:`.exc`)."""
        self._exc = bool(config.spe_exc)
        self._irq_level: bool | None = None
        if self._exc:
            self.buffer.route = self._route

    # -- register access (after the access check passed) -------------------------------------
    via_undef = True
    """The registry reaches the SPE registers through UNDEF: QEMU does not know them
    (:class:`spe_emu.platform.sysregs.SysregOwner`)."""

    def present(self) -> bool:
        """The PMS*/PMB* registers exist only when FEAT_SPE is implemented (PMSVer != 0)."""
        return self.config.pmsver != 0

    @staticmethod
    def context(ctx: AccessContext) -> AccessContext:
        """The access checks need nothing beyond the PE's context (§3.2.3, §3.4.6)."""
        return ctx

    def sysreg_read(self, name: str, ctx: AccessContext) -> int:
        return self.read(name, ctx)

    def sysreg_write(self, name: str, value: int, ctx: AccessContext) -> None:
        self.write(name, value, ctx)

    def _redirect(self, name: str, ctx: AccessContext) -> str:
        """:func:`redirect`, and with FEAT_SPE_EXC PMBSR_EL1 at EL2 in the host (HCR_EL2.E2H
        == 1) is PMBSR_EL2 unless the effective PMSCR_EL2.EE is 0b00 (Arm ARM D24.7.5,
        Accessing PMBSR_EL1)."""
        name = redirect(name, ctx)
        if (self._exc and name == "PMBSR_EL1" and ctx.el == 2 and HCR_EL2.get(ctx.hcr_el2, "E2H")
                and exc.effective_pmscr_el2_ee(ctx, self.exc_state(ctx)) != exc.EE_DISABLED):
            return "PMBSR_EL2"
        return name

    def read(self, name: str, ctx: AccessContext) -> int:
        """Direct read of register ``name`` (after its access check), with VHE redirection."""
        name = self._redirect(name, ctx)
        spec = self.table[name]
        if name == "PMBPTR_EL1":
            self.rules.pmbptr_read(self.profiling_enabled(ctx))
        if spec.on_read:
            return getattr(self, spec.on_read)(name, ctx)
        return self.regs[name]

    def write(self, name: str, value: int, ctx: AccessContext) -> None:
        """Direct write of register ``name`` (after its access check), with VHE redirection."""
        self._filters = None
        name = self._redirect(name, ctx)
        spec = self.table[name]
        new = spec.apply_write(self.regs[name], value)
        if name == "PMBPTR_EL1":
            self.rules.pmbptr_written(new, self.profiling_enabled(ctx))
        if spec.on_write:
            getattr(self, spec.on_write)(name, new, ctx)
        else:
            self.regs[name] = new
        if name == "PMBLIMITR_EL1" and self.on_buffer_write is not None:
            self.on_buffer_write(bool(spec.get(new, "E")))

    def read_pmsicr(self, name: str, ctx: AccessContext) -> int:
        return self.interval.value

    def write_pmsicr(self, name: str, value: int, ctx: AccessContext) -> None:
        self.interval.value = value

    def read_pmbidr(self, name: str, ctx: AccessContext) -> int:
        """PMBIDR_EL1.P reads 1 when the buffer is owned by a higher EL or the other Security
        state (§4.3.1)."""
        secure, owner_el = self.owner(ctx)
        prohibited = ctx.el != 3 and (owner_el > ctx.el or secure != ctx.is_secure)
        spec = self.table[name]
        return spec.set(self.regs[name], "P", int(prohibited))

    def write_control(self, name: str, value: int, ctx: AccessContext) -> None:
        self.regs[name] = value
        if name.startswith("PMBSR") or self._exc:
            self.update_irq()

    # -- FEAT_SPE_EXC (Arm ARM D17.8) ---------------------------------------------------------
    def exc_state(self, ctx: AccessContext) -> exc.ExcState:
        """The register fields :mod:`.exc` reads, and PSTATE.PM (:attr:`pstate_pm`)."""
        if not self._exc:
            return exc.ExcState(implemented=False, s1=self._pmbsr_s.get(self.regs["PMBSR_EL1"]))
        t, r = self.table, self.regs
        secure, owner_el = self.owner(ctx)
        return exc.ExcState(
            implemented=True, ee1=t["PMSCR_EL1"].get(r["PMSCR_EL1"], "EE"),
            ke1=t["PMSCR_EL1"].get(r["PMSCR_EL1"], "KE"),
            ee2=t["PMSCR_EL2"].get(r["PMSCR_EL2"], "EE"),
            ke2=t["PMSCR_EL2"].get(r["PMSCR_EL2"], "KE"),
            s1=self._pmbsr_s.get(r["PMBSR_EL1"]), s2=self._pmbsr_s.get(r["PMBSR_EL2"]),
            s3=self._pmbsr_s.get(r["PMBSR_EL3"]), pm=self.pstate_pm, owner_secure=secure,
            owner_el=owner_el)

    def _route(self, ec: int, fsc: int) -> str:
        ctx = self.live_context() if self.live_context else None
        if ctx is None:
            return "PMBSR_EL1"
        return f"PMBSR_EL{exc.report_spe_event(ec, fsc, ctx, self.exc_state(ctx))}"

    def stopped(self, ctx: AccessContext | None = None) -> bool:
        """``SPEProfilingStopped()``: PMBSR_EL1.S, or with FEAT_SPE_EXC a PMBSR_EL2/EL3.S the
        controls make count (:func:`.exc.profiling_stopped`)."""
        if not self._exc:
            return bool(self._pmbsr_s.get(self.regs["PMBSR_EL1"]))
        ctx = ctx or (self.live_context() if self.live_context else None)
        if ctx is None:
            return self._any_pmbsr_s()
        return exc.profiling_stopped(ctx, self.exc_state(ctx))

    def _any_pmbsr_s(self) -> bool:
        """Whether PMBSR_EL1.S, PMBSR_EL2.S or PMBSR_EL3.S is 1 (FEAT_SPE_EXC)."""
        return any(self._pmbsr_s.get(self.regs[n]) for n in ("PMBSR_EL1", "PMBSR_EL2",
                                                             "PMBSR_EL3"))

    def exception_may_be_pending(self) -> bool:
        """With FEAT_SPE_EXC, whether a PMBSR_ELx.S is 1, so an SPE Profiling exception may be
        pending (cheap: the machine then checks :meth:`exception_target` at its stops and
        after exception returns)."""
        return self._exc and self._any_pmbsr_s()

    def exception_target(self, ctx: AccessContext) -> int | None:
        """``CheckForSPEException()`` (Arm ARM D17.8, Tables D17-8 to D17-10): the Exception
        level the SPE Profiling exception is taken to from ``ctx`` now, or None (none pending,
        or masked)."""
        if not self._exc:
            return None
        return exc.pending_exception(ctx, self.exc_state(ctx))

    # -- PMBIRQ ------------------------------------------------------------------------------
    @property
    def pmbirq(self) -> bool:
        """PMBIRQ level: PMBSR_EL1.S (§3.5); with FEAT_SPE_EXC, low unless
        ``SPEInterruptEnabled()`` (Arm ARM D17.8 RTSJRP)."""
        s1 = bool(self._pmbsr_s.get(self.regs["PMBSR_EL1"]))
        if not self._exc or not s1 or self.live_context is None:
            return s1
        ctx = self.live_context()
        return exc.pmbirq(ctx, self.exc_state(ctx))

    def update_irq(self) -> None:
        if self.on_irq:
            self._irq_level = self.pmbirq
            self.on_irq(self._irq_level)

    def refresh_irq(self) -> None:
        """:meth:`update_irq` when the PMBIRQ level differs from the one last reported (with
        FEAT_SPE_EXC it depends on controls outside the SPU: MDCR_EL3.PMSEE, SCR_EL3.NS)."""
        if self.on_irq and self.pmbirq != self._irq_level:
            self.update_irq()

    # -- §3.4.6, §3.2.3 ----------------------------------------------------------------------
    def owner(self, ctx: AccessContext) -> tuple[bool, int]:
        """``ProfilingBufferOwner()`` -> (secure, owning Exception level); memoised for the
        last context object (contexts are immutable)."""
        if self._owner_for[0] is ctx:
            return self._owner_for[1]
        result = self._owner(ctx)
        self._owner_for = (ctx, result)
        return result

    def _owner(self, ctx: AccessContext) -> tuple[bool, int]:
        if ctx.have_el3:  # secure = (MDCR_EL3.NSPB<1> == '0'), §3.4.6 pseudocode
            secure = MDCR_EL3.get(ctx.mdcr_el3, "NSPB") >> 1 == 0
        else:
            secure = ctx.is_secure
        el2_owns = not secure and ctx.have_el2 and MDCR_EL2.get(ctx.mdcr_el2, "E2PB") == 0
        return secure, 2 if el2_owns else 1

    def buffer_enabled(self, ctx: AccessContext) -> bool:
        """``ProfilingBufferEnabled()`` (§3.4.6; the owning EL is AArch64 in this model)."""
        if not self.buffer_may_be_enabled():
            return False
        secure, _ = self.owner(ctx)
        return (0 if secure else 1) == ctx.ns

    def buffer_may_be_enabled(self) -> bool:
        """Whether ``ProfilingBufferEnabled()`` (§3.4.6) can be TRUE in any context: FEAT_SPE,
        PMBLIMITR_EL1.E == 1 and PMBSR_EL1.S == 0 (its terms that do not depend on the
        Security state or the owning Exception level). When False, profiling is disabled at
        every Exception level until one of those registers is written."""
        return (self.config.pmsver != 0 and not self.stopped()
                and self.table["PMBLIMITR_EL1"].get(self.regs["PMBLIMITR_EL1"], "E") == 1)

    def profiling_enabled(self, ctx: AccessContext) -> bool:
        """``StatisticalProfilingEnabled()`` at ctx.el (§3.2.3, Table 3)."""
        if not self.buffer_enabled(ctx):
            return False
        in_host = not ctx.is_secure and ctx.have_el2 and HCR_EL2.get(ctx.hcr_el2, "TGE") == 1
        secure, el = self.owner(ctx)
        if el < ctx.el or secure != ctx.is_secure or (in_host and el == 1):
            return False
        pmscr1 = self.table["PMSCR_EL1"]
        pmscr2 = self.table["PMSCR_EL2"]
        if ctx.el == 3:
            return False
        if ctx.el == 2:
            return bool(pmscr2.get(self.regs["PMSCR_EL2"], "E2SPE"))
        if ctx.el == 1:
            return bool(pmscr1.get(self.regs["PMSCR_EL1"], "E1SPE"))
        if in_host:
            return bool(pmscr2.get(self.regs["PMSCR_EL2"], "E0HSPE"))
        return bool(pmscr1.get(self.regs["PMSCR_EL1"], "E0SPE"))

    # -- §3.3.1 collection controls ----------------------------------------------------------
    def collect_timestamp(self, ctx: AccessContext) -> str | None:
        """``CollectTimeStamp()``: None, "virtual" or "physical"."""
        secure, el = self.owner(ctx)
        p1, p2 = self.table["PMSCR_EL1"], self.table["PMSCR_EL2"]
        v1, v2 = self.regs["PMSCR_EL1"], self.regs["PMSCR_EL2"]
        if el == 2:
            if not p2.get(v2, "TS"):
                return None
        elif not p1.get(v1, "TS"):
            return None
        if not secure and ctx.have_el2:
            pct = p2.get(v2, "PCT") and (el == 2 or p1.get(v1, "PCT"))
        else:
            pct = p1.get(v1, "PCT")
        return "physical" if pct else "virtual"

    def collect_context1(self, ctx: AccessContext) -> bool:
        """``CollectContextIDR1()``."""
        if ctx.el == 2:
            return False
        if ctx.have_el2 and not ctx.is_secure and ctx.tge:
            return False
        return bool(self.table["PMSCR_EL1"].get(self.regs["PMSCR_EL1"], "CX"))

    def collect_context2(self, ctx: AccessContext) -> bool:
        """``CollectContextIDR2()``."""
        if not ctx.have_el2 or ctx.is_secure:
            return False
        return bool(self.table["PMSCR_EL2"].get(self.regs["PMSCR_EL2"], "CX"))

    def collect_physical_address(self, ctx: AccessContext) -> bool:
        """``CollectPhysicalAddress()``."""
        secure, el = self.owner(ctx)
        p1, p2 = self.table["PMSCR_EL1"], self.table["PMSCR_EL2"]
        v1, v2 = self.regs["PMSCR_EL1"], self.regs["PMSCR_EL2"]
        if not secure and ctx.have_el2:
            return bool(p2.get(v2, "PA") and (el == 2 or p1.get(v1, "PA")))
        return bool(p1.get(v1, "PA"))

    # -- sampling ----------------------------------------------------------------------------
    def sample(self, s: Sample, ctx: AccessContext) -> ManagementEvent | None:
        """Build the record of a selected operation, filter it with ``CollectRecord()`` and write
        it to the Profiling Buffer.

        Returns the Profiling Buffer management event the write raised (PMBSR_EL1.S is then 1
        and PMBIRQ asserted), or None."""
        data = self.record(s, ctx)
        if data is None:
            return None
        written, event = self.buffer.write_record(data)
        if written:
            self.stats.records_written += 1
            self.stats.bytes_written += written
        if event is not None:
            self.stats.management_events.append(event)
            self.update_irq()
        return event

    def write_batch(self, data: bytes, records: int, built_natively: int = 0,
                    filtered_natively: int = 0) -> None:
        """Write ``records`` records, already padded to 2**PMBIDR_EL1.Align and joined in
        ``data``, to the Profiling Buffer in one go. ``built_natively`` of them were built by
        the native recorder, which also discarded ``filtered_natively`` records by their type
        (for statistics: :meth:`record` counted the others).

        The caller guarantees that none of the writes can raise a Profiling Buffer management
        event (every record fits with 2**MaxSize bytes to spare, in pages that translate).

        Raises:
            AssertionError: the guarantee does not hold (nothing is written then).
        """
        self.stats.samples += built_natively + filtered_natively
        self.stats.filtered_out += filtered_natively
        if not records:
            return
        if self.buffer.write_padded(data) is None:
            raise AssertionError("records of a batch would raise a management event")
        self.stats.records_written += records
        self.stats.bytes_written += len(data)

    def native_record_filter(self, ctx: AccessContext) -> int | None:
        """Whether the native recorder can build the records, and with what filter: None
        when it cannot (``CollectRecord()`` is more than PMSFCR_EL1.FT's OR filter, or the
        records have Data Source packets or counters other than 12-bit: PMSIDR_EL1.LDS == 1,
        CountSize != 0b0010 ...); else the OpType bits of the types recorded (0: every type;
        :func:`.filters.type_mask`). Checks ``ProfilingBufferEnabled()`` as :meth:`record`
        does."""
        self._check_enabled(ctx)
        if (self.config.lds or self.config.counter_bits != 12 or self.config.in_flight_ops
                or self.config.fpf or self.config.crr or self.config.pbt):
            return None
        return type_mask(self._filter_state()[1])

    def filters_enabled(self) -> bool:
        """Whether any PMSFCR_EL1 filter (FE, FT, FL, FnE, FDS) is enabled."""
        return self._filter_state()[0]

    def _check_enabled(self, ctx: AccessContext) -> None:
        key = (ctx, self.regs["PMBLIMITR_EL1"], self.regs["PMBSR_EL1"],
               self.regs.get("PMBSR_EL2"), self.regs.get("PMBSR_EL3"))
        if self._enabled_for[0] != key:
            self._enabled_for = (key, self.buffer_enabled(ctx))
        if not self._enabled_for[1]:  # callers sample only while profiling is enabled
            raise AssertionError("SPU asked to sample while the Profiling Buffer is disabled")

    def _filter_state(self) -> tuple:
        """(any filter enabled, PMSFCR_EL1 fields, PMSEVFR_EL1, PMSLATFR_EL1.MINLAT,
        PMSNEVFR_EL1, PMSDSFR_EL1 -- 0 where not implemented), kept until the next register
        write."""
        if self._filters is None:
            fcr = self.table["PMSFCR_EL1"]
            value = self.regs["PMSFCR_EL1"]
            fields = {f.name: fcr.get(value, f.name) for f in fcr.fields}
            minlat = self.table["PMSLATFR_EL1"].get(self.regs["PMSLATFR_EL1"], "MINLAT")
            active = any(fields.get(name) for name in FILTER_ENABLES)
            self._filters = (active, fields, self.regs["PMSEVFR_EL1"], minlat,
                             self.regs.get("PMSNEVFR_EL1", 0), self.regs.get("PMSDSFR_EL1", 0))
        return self._filters

    def _collides(self, index: int) -> bool:
        """Sample collision (§2.2.4, ``SpeConfig.max_in_flight``/``in_flight_ops``): the
        operation at instruction number ``index`` was selected while the maximum number of
        sampled operations is in flight -- it is not recorded, PMBSR_EL1.COLL is set to 1 and
        SAMPLE_COLLISION counts it (§2.6). Otherwise it is in flight from now on."""
        window = self.config.in_flight_ops
        self._in_flight = [j for j in self._in_flight if index - j <= window]
        if len(self._in_flight) >= self.config.max_in_flight:
            self.stats.collisions += 1
            self.regs["PMBSR_EL1"] = self.table["PMBSR_EL1"].set(self.regs["PMBSR_EL1"],
                                                                 "COLL", 1)
            return True
        self._in_flight.append(index)
        return False

    def record(self, s: Sample, ctx: AccessContext) -> bytes | None:
        """The record of a selected operation after ``CollectRecord()`` (None: filtered out);
        counts the sample."""
        self._check_enabled(ctx)
        self.stats.samples += 1
        if self.config.in_flight_ops and self._collides(s.index):
            return None
        built = self.builder.build(s)
        active, fields, pmsevfr, minlat, pmsnevfr, pmsdsfr = self._filter_state()
        if active and not collect_record(built.events, built.total_latency, built.optypes,
                                         fields, pmsevfr, minlat, self.config, pmsnevfr,
                                         built.data_source, pmsdsfr):
            self.stats.filtered_out += 1
            return None
        return built.data
