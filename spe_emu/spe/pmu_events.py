"""The PMU events of the Statistical Profiling Extension (SPE supplement §2.6 Table 1), counted
exactly and visible to the guest through the PMU registers of Unicorn's QEMU.

QEMU implements the PMU (PMCR_EL0, PMCNTENSET_EL0, PMEVTYPER<n>_EL0, PMEVCNTR<n>_EL0 ...) but
knows no SPE event: an event counter programmed with event number 0x4000..0x4003 keeps the
value software wrote. This owner answers, from the machine's MRS/MSR instruction hooks, only
what QEMU cannot:

* PMCEID0_EL0[35:32] read as 1 (the four events are implemented, §2.6 note);
* PMEVCNTR<n>_EL0 (and PMXEVCNTR_EL0 for PMSELR_EL0.SEL == n) of a counter whose
  PMEVTYPER<n>_EL0.evtCount is an SPE event: the value software last wrote (or 0 after
  PMCR_EL0.P) plus the events counted since, 32-bit wrapping (PMCR_EL0.N = 4 counters of 32
  bits: FEAT_PMUv3p1 without FEAT_PMUv3p5).

Every other PMU register, and every non-SPE event, stays QEMU's (and the access checks too:
an access this owner's check does not pass is executed by QEMU, which raises its trap or
UNDEF).

Counting (Arm ARM D12.x "Counter enables", "Filtering", PMEVTYPER<n>_EL0; here D12 is the PMU
chapter): an event at Exception level ``el`` in Security state ``secure`` is counted by counter
``n`` when the counter is enabled (PMCNTENSET_EL0.P[n], and PMCR_EL0.E -- or MDCR_EL2.HPME
for n >= MDCR_EL2.HPMN when EL2 is implemented), counting is not prohibited (Secure state:
MDCR_EL3.SPME == 1 needed; Non-secure EL2: MDCR_EL2.HPMD == 1 prohibits counters
n < HPMN) and PMEVTYPER<n>_EL0 does not filter it out (P/U for EL1/EL0, NSK/NSU with EL3
in Non-secure state, NSH for Non-secure EL2, M for EL3). The SPE events occur only where
profiling is enabled (never at EL3).

The events (:data:`SPE_EVENTS`), as :class:`spe_emu.spe.spu.SpuStats` counts them:
SAMPLE_POP = population members; SAMPLE_FEED = operations selected for sampling that did not
collide (§2.2.4); SAMPLE_FILTRATE = of those, the ones ``CollectRecord()`` kept (records
discarded afterwards by a management event included); SAMPLE_COLLISION = selected operations
that collided.

Exactness: the machine attributes the counts accrued since its last call to the context
(Exception level, Security state) that was current (:meth:`SpePmuEvents.accrue`); it calls it
whenever profiling may change Exception level or enable state, and before every access to the
registers of this owner. Control changes through registers this owner does not see --
MDCR_EL2.{HPMN, HPME, HPMD}, MDCR_EL3.SPME -- take effect from the last PMU register access
(the counts between are re-filtered with the new values); programs that change them while SPE
events are being counted get approximate counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..arch.context import AccessContext
from ..sysreg import Access, RegisterTable, parse_fields, reg

SAMPLE_POP, SAMPLE_FEED, SAMPLE_FILTRATE, SAMPLE_COLLISION = 0x4000, 0x4001, 0x4002, 0x4003
SPE_EVENTS = {SAMPLE_POP: "SAMPLE_POP", SAMPLE_FEED: "SAMPLE_FEED",
              SAMPLE_FILTRATE: "SAMPLE_FILTRATE", SAMPLE_COLLISION: "SAMPLE_COLLISION"}
"""SPE supplement §2.6 Table 1: event number -> mnemonic."""
PMU_COUNTERS = 4
"""PMCR_EL0.N of Unicorn's QEMU (measured: PMCR_EL0 reads 0x41002040)."""
COUNTER_MASK = (1 << 32) - 1
"""Event counters are 32 bits (no FEAT_PMUv3p5)."""
PMUVER_V3P1 = 0b0100
"""ID_AA64DFR0_EL1.PMUVer presented with SPE: FEAT_PMUv3p1, which widens evtCount to 16 bits
(event numbers 0x4000.. are not encodable in PMUv3's 10-bit field) and defines PMCEID0_EL0
[63:32] for events 0x4000..0x401F (Arm ARM D19 ID_AA64DFR0_EL1, PMCEID0_EL0)."""

# MDCR_EL2 / MDCR_EL3 fields the counting rules read (Arm ARM MDCR_EL2, MDCR_EL3; the
# AccessContext holds the raw values).
MDCR_EL2_PMU = {f.name: f for f in parse_fields("HPMD 17", "HPME 7", "TPM 6", "HPMN 4:0")}
MDCR_EL3_PMU = {f.name: f for f in parse_fields("SPME 17", "TPM 6")}
PMEVTYPER_FIELDS = ("P 31", "U 30", "NSK 29", "NSU 28", "NSH 27", "M 26", "MT 25", "SH 24",
                    "evtCount 15:0")
PMCEID0_SPE = {f.name: f for f in parse_fields("SAMPLE_COLLISION 35", "SAMPLE_FILTRATE 34",
                                                "SAMPLE_FEED 33", "SAMPLE_POP 32")}
"""PMCEID0_EL0 bits of the SPE events: bit 32 + (event - 0x4000) (§2.6 note)."""


def pmevtyper(n: int) -> tuple[int, int, int, int, int]:
    """Encoding of PMEVTYPER<n>_EL0: op0 3, op1 3, CRn 14, CRm 0b11:n[4:3], op2 n[2:0]."""
    return (3, 3, 14, 0b1100 | n >> 3, n & 7)


def pmevcntr(n: int) -> tuple[int, int, int, int, int]:
    """Encoding of PMEVCNTR<n>_EL0: op0 3, op1 3, CRn 14, CRm 0b10:n[4:3], op2 n[2:0]."""
    return (3, 3, 14, 0b1000 | n >> 3, n & 7)


@dataclass(frozen=True)
class PmuAccessContext:
    """The access checks' input: the PE's context, PMUSERENR_EL0 and PMSELR_EL0 (QEMU's)."""

    ctx: AccessContext
    pmuserenr: int
    pmselr: int


SELECTED = -1
"""The counter of PMXEVTYPER_EL0/PMXEVCNTR_EL0: PMSELR_EL0.SEL."""


def pmu_access_check(counter: int | None, counter_register: bool
                     ) -> Callable[[PmuAccessContext, bool], Access]:
    """The access check of a PMU register (``counter``: the event counter it reaches, or
    :data:`SELECTED`, or None; ``counter_register``: an event counter, readable at EL0 with
    PMUSERENR_EL0.ER). Conservative: OK only where QEMU lets the access through without a
    trap; anything else is left to QEMU, which raises the trap or UNDEF itself. EL0 needs
    PMUSERENR_EL0.EN (or ER for a counter read); MDCR_EL2.TPM traps EL0/EL1 when EL2 is
    enabled, MDCR_EL3.TPM traps below EL3 (Arm ARM PMEVCNTR<n>_EL0 accessibility
    pseudocode); counters from PMCR_EL0.N up are not accessed here."""
    def check(pmu: PmuAccessContext, is_read: bool) -> Access:
        ctx = pmu.ctx
        n = counter
        if n == SELECTED:
            n = PMU_REGISTERS["PMSELR_EL0"].get(pmu.pmselr, "SEL")
        if ctx.el == 0:
            user = PMU_REGISTERS["PMUSERENR_EL0"]
            if not (user.get(pmu.pmuserenr, "EN")
                    or (counter_register and is_read and user.get(pmu.pmuserenr, "ER"))):
                return Access.TRAP_EL1
        if ctx.el < 2 and ctx.el2_enabled and MDCR_EL2_PMU["TPM"].get(ctx.mdcr_el2):
            return Access.TRAP_EL2
        if ctx.el < 3 and ctx.have_el3 and MDCR_EL3_PMU["TPM"].get(ctx.mdcr_el3):
            return Access.TRAP_EL3
        if n is not None and n >= PMU_COUNTERS:
            return Access.UNDEFINED
        return Access.OK
    return check


def _table() -> RegisterTable:
    any_reg = pmu_access_check(None, False)
    regs = [reg("PMCEID0_EL0", (3, 3, 9, 12, 6), "IDhi 63:32", "ID 31:0", read_only=True,
                check=any_reg, doc="Arm ARM PMCEID0_EL0; SPE supplement §2.6"),
            reg("PMCR_EL0", (3, 3, 9, 12, 0), "LP 7", "LC 6", "DP 5", "X 4", "D 3", "C 2",
                "P 1", "E 0", "N 15:11 RO", check=any_reg, doc="Arm ARM PMCR_EL0"),
            reg("PMCNTENSET_EL0", (3, 3, 9, 12, 1), "C 31", "P 30:0", check=any_reg,
                doc="Arm ARM PMCNTENSET_EL0"),
            reg("PMCNTENCLR_EL0", (3, 3, 9, 12, 2), "C 31", "P 30:0", check=any_reg,
                doc="Arm ARM PMCNTENCLR_EL0"),
            reg("PMSELR_EL0", (3, 3, 9, 12, 5), "SEL 4:0", check=any_reg,
                doc="Arm ARM PMSELR_EL0"),
            reg("PMUSERENR_EL0", (3, 3, 9, 14, 0), "ER 3", "CR 2", "SW 1", "EN 0",
                check=pmu_access_check(None, False), doc="Arm ARM PMUSERENR_EL0"),
            reg("PMXEVTYPER_EL0", (3, 3, 9, 13, 1), *PMEVTYPER_FIELDS,
                check=pmu_access_check(SELECTED, False), doc="Arm ARM PMXEVTYPER_EL0"),
            reg("PMXEVCNTR_EL0", (3, 3, 9, 13, 2), "PMEVCNTR 31:0",
                check=pmu_access_check(SELECTED, True), doc="Arm ARM PMXEVCNTR_EL0")]
    for n in range(PMU_COUNTERS):
        regs.append(reg(f"PMEVCNTR{n}_EL0", pmevcntr(n), "EVCNT 31:0",
                        check=pmu_access_check(n, True), doc="Arm ARM PMEVCNTR<n>_EL0"))
        regs.append(reg(f"PMEVTYPER{n}_EL0", pmevtyper(n), *PMEVTYPER_FIELDS,
                        check=pmu_access_check(n, False), doc="Arm ARM PMEVTYPER<n>_EL0"))
    return RegisterTable(regs)


PMU_REGISTERS = _table()
"""The PMU registers this owner sees (QEMU keeps executing every one of them as well)."""
_EVT = {f.name: f for f in PMU_REGISTERS["PMEVTYPER0_EL0"].fields}


def counts(n: int, evtyper: int, pmcr: int, pmcntenset: int, el: int, secure: bool,
           ctx: AccessContext) -> bool:
    """Whether event counter ``n`` counts an event at ``el`` in Security state ``secure``
    (module docstring: enable, prohibition, PMEVTYPER<n>_EL0 filtering), with MDCR_EL2 and
    MDCR_EL3 from ``ctx``."""
    if not PMU_REGISTERS["PMCNTENSET_EL0"].get(pmcntenset, "P") >> n & 1:
        return False
    hpmn = MDCR_EL2_PMU["HPMN"].get(ctx.mdcr_el2) if ctx.have_el2 else PMU_COUNTERS
    if ctx.have_el2 and n >= hpmn:
        if not MDCR_EL2_PMU["HPME"].get(ctx.mdcr_el2):
            return False
    elif not PMU_REGISTERS["PMCR_EL0"].get(pmcr, "E"):
        return False
    if secure and ctx.have_el3 and not MDCR_EL3_PMU["SPME"].get(ctx.mdcr_el3):
        return False
    if el == 2 and not secure and n < hpmn and MDCR_EL2_PMU["HPMD"].get(ctx.mdcr_el2):
        return False
    p, u = _EVT["P"].get(evtyper), _EVT["U"].get(evtyper)
    if el == 3:
        return _EVT["M"].get(evtyper) == p
    if el == 2:
        return not secure and bool(_EVT["NSH"].get(evtyper))
    bit, ns_bit = (p, _EVT["NSK"].get(evtyper)) if el == 1 else (u, _EVT["NSU"].get(evtyper))
    if secure or not ctx.have_el3:
        return bit == 0
    return bit == ns_bit


@dataclass
class _Counter:
    base: int = 0                                   # value at the last settle
    seen: dict = field(default_factory=dict)        # bucket -> totals at the last settle


class SpePmuEvents:
    """The owner of :data:`PMU_REGISTERS` (``via_undef`` False: QEMU knows them).

    Args:
        read_cp: reads a system register QEMU holds, by encoding (``uc.cpr_read``).
        stats: the SPU's statistics (population, samples, filtered_out, collisions).

    Attributes:
        totals: ``{(el, secure): [SAMPLE_POP, SAMPLE_FEED, SAMPLE_FILTRATE,
            SAMPLE_COLLISION]}`` counted so far in each context.
    """

    via_undef = False

    def __init__(self, read_cp: Callable[[tuple], int], stats):
        self.read_cp = read_cp
        self.stats = stats
        self.table = PMU_REGISTERS
        self.totals: dict[tuple[int, bool], list[int]] = {}
        self.adjust = (0, 0, 0, 0)
        """What the machine's counts lack (positive) or hold beyond (negative) the
        instruction a hook runs for, per event (SAMPLE_POP, SAMPLE_FEED, SAMPLE_FILTRATE,
        SAMPLE_COLLISION): members not yet accounted or accounted early, samples not yet
        settled."""
        self._last = self._now()
        self._counters = [_Counter() for _ in range(PMU_COUNTERS)]

    @staticmethod
    def present() -> bool:
        return True

    # -- accrual --------------------------------------------------------------------------
    def _now(self) -> tuple[int, int, int, int]:
        st = self.stats
        feed = st.samples - st.collisions
        pop, fed, kept, coll = self.adjust
        return (st.population + pop, feed + fed, feed - st.filtered_out + kept,
                st.collisions + coll)

    def accrue(self, bucket: tuple[int, bool] | None) -> None:
        """Attribute the events counted since the last call to ``bucket`` ((Exception level,
        Secure) of the period; None: profiling was disabled, nothing can have been counted)."""
        now = self._now()
        if now == self._last:
            return
        if bucket is not None:
            total = self.totals.setdefault(bucket, [0, 0, 0, 0])
            for i, (a, b) in enumerate(zip(now, self._last)):
                total[i] += a - b
        self._last = now

    def event_totals(self) -> dict[str, int]:
        """``{mnemonic: count}`` over every context (the run summary's ``pmu_events``)."""
        sums = [sum(t[i] for t in self.totals.values()) for i in range(4)]
        return {name: sums[i] for i, name in enumerate(SPE_EVENTS.values())}

    # -- counters ---------------------------------------------------------------------------
    def _value(self, n: int, ctx: AccessContext) -> int | None:
        """Counter ``n``'s value if it counts an SPE event, else None."""
        evtyper = self.read_cp(pmevtyper(n))
        event = _EVT["evtCount"].get(evtyper)
        if event not in SPE_EVENTS:
            return None
        c = self._counters[n]
        pmcr = self.read_cp(PMU_REGISTERS["PMCR_EL0"].encoding.tuple)
        enset = self.read_cp(PMU_REGISTERS["PMCNTENSET_EL0"].encoding.tuple)
        i = event - SAMPLE_POP
        value = c.base
        for bucket, total in self.totals.items():
            if counts(n, evtyper, pmcr, enset, bucket[0], bucket[1], ctx):
                value += total[i] - c.seen.get(bucket, (0, 0, 0, 0))[i]
        return value & COUNTER_MASK

    def _settle(self, n: int, ctx: AccessContext, base: int | None = None) -> None:
        """Counter ``n`` from now on counts from ``base`` (default: its current value)."""
        c = self._counters[n]
        if base is None:
            value = self._value(n, ctx)
            base = value if value is not None else self.read_cp(pmevcntr(n))
        c.base = base & COUNTER_MASK
        c.seen = {b: tuple(t) for b, t in self.totals.items()}

    def _counter_of(self, name: str) -> int | None:
        """The event counter register ``name`` reaches (PMXEV*: PMSELR_EL0.SEL), or None."""
        if name.startswith("PMXEV"):
            return PMU_REGISTERS["PMSELR_EL0"].get(
                self.read_cp(PMU_REGISTERS["PMSELR_EL0"].encoding.tuple), "SEL")
        for prefix in ("PMEVCNTR", "PMEVTYPER"):
            if name.startswith(prefix):
                return int(name[len(prefix):].partition("_")[0])
        return None

    # -- the system-register interface ------------------------------------------------------
    def context(self, ctx: AccessContext) -> PmuAccessContext:
        """``ctx`` with QEMU's PMUSERENR_EL0 and PMSELR_EL0: the access checks' input."""
        return PmuAccessContext(
            ctx, self.read_cp(PMU_REGISTERS["PMUSERENR_EL0"].encoding.tuple),
            self.read_cp(PMU_REGISTERS["PMSELR_EL0"].encoding.tuple))

    def sysreg_read(self, name: str, ctx: AccessContext) -> int:
        """QEMU's value, except PMCEID0_EL0 (the SPE events' bits set) and the event counters
        of SPE events (the machine has called :meth:`accrue` for this instruction)."""
        qemu = self.read_cp(self.table[name].encoding.tuple)
        if name == "PMCEID0_EL0":
            for f in PMCEID0_SPE.values():
                qemu = f.set(qemu, 1)
            return qemu
        if "CNTR" in name:
            n = self._counter_of(name)
            if n is not None and n < PMU_COUNTERS:
                value = self._value(n, ctx)
                if value is not None:
                    return value
        return qemu

    def sysreg_write(self, name: str, value: int, ctx: AccessContext) -> None:
        """Before QEMU performs the write: the counters it may affect are settled under the
        old controls (PMCR_EL0.P resets them to 0, a counter write sets its base)."""
        n = self._counter_of(name)
        if "CNTR" in name:
            if n is not None and n < PMU_COUNTERS:
                self._settle(n, ctx, value)
            return
        if name == "PMCR_EL0" and PMU_REGISTERS["PMCR_EL0"].get(value, "P"):
            for i in range(PMU_COUNTERS):
                self._settle(i, ctx, 0)
            return
        for i in range(PMU_COUNTERS) if n is None else (n,) if n < PMU_COUNTERS else ():
            self._settle(i, ctx)
