"""The Performance Monitors Extension (PMUv3, FEAT_PMUv3p5) of one PE, counting from the
machine's virtual time and the same micro-architecture model that gives SPE its events.

Specification: Arm ARM (DDI 0487) chapter D12 "The Performance Monitors Extension" (D11 in
earlier issues): the counters and their enables (D12.5 "Enabling event counters"), event
filtering (D12.6, PMEVTYPER<n>_EL0, PMCCFILTR_EL0), prohibition (MDCR_EL2.HPMD, MDCR_EL3.SPME,
MDCR_EL2.HCCD, MDCR_EL3.SCCD), overflow and the interrupt request (D12.7,
``CheckForPMUOverflow()``), chaining (D12.8, CHAIN); the register descriptions and their
access pseudocode in D23.4 (PMCR_EL0 ... PMUSERENR_EL0, PMEVCNTR<n>_EL0, PMEVTYPER<n>_EL0)
and the common event numbers in D12.11 ("Common microarchitectural events") -- names as
there.

Which PMU: FEAT_PMUv3p5, ID_AA64DFR0_EL1.PMUVer = 0b0110, as QEMU 7.2's ``-cpu max`` presents:
event counters are 64 bits wide and overflow at bit 31 or bit 63 (PMCR_EL0.LP; MDCR_EL2.HLP
for the counters reserved for EL2), the cycle counter always at bit 63 (PMCR_EL0.LC is RES1:
AArch32 is not implemented), evtCount is 16 bits (events 0x4000.. are the SPE events, SPE
supplement §2.6). The number of event counters, PMCR_EL0.N, is the board's (``DeviceSpec``
property ``counters``, 6 by default as QEMU 7.2 ``-cpu max``; 1..31).

Accesses: every PMU register UNDEFs in the patched Unicorn (patches/unicorn/0006,
UC_CTL_ARM_PMU: the CPU is built without QEMU's PMU) and reaches the registry's dispatcher,
which takes the trap or UNDEFINED the access checks below give (pure functions of a
:class:`PmuAccessContext`) and otherwise calls this owner.

Counting (what each event counts, :data:`EVENTS`): the machine's event sources
(:class:`PmuSources`, native counts per Exception level: spe_native.h ``SPE_PMU_*``). Counts
are exact where the architecture defines them -- INST_RETIRED, CPU_CYCLES (the virtual clock:
one cycle per instruction; cycles spent waiting in WFI/WFE are not counted, as a core whose
clock stops there), BR_RETIRED, LD_RETIRED/ST_RETIRED (an instruction counted once, by its
first data access; an atomic or exclusive pair as a load), EXC_TAKEN (in the Exception level
taken from), SW_INCR -- and the micro-architectural events come from the model (L1D_CACHE,
L1D_CACHE_REFILL, L2D_CACHE, L2D_CACHE_REFILL, LL_CACHE, LL_CACHE_MISS, L1D_TLB,
L1D_TLB_REFILL, MEM_ACCESS, BR_MIS_PRED, BR_MIS_PRED_RETIRED, BR_PRED), which is fed every
data access and branch while any counter counts one of them (``model_feed="every"``; with
``"sampled"`` they are not implemented, and PMCEID0_EL0/PMCEID1_EL0 say so). STALL_FRONTEND
and STALL_BACKEND (required from FEAT_PMUv3p1) count 0: the cycle model has no stalls.

Counters are evaluated lazily: each holds its value at the last settling, and every access
to a PMU register settles all of them (the events since, per Exception level, through each
counter's filter at that level), before a write changes the controls. Overflow interrupts:
while a counter with its interrupt enabled counts, a clock event stops the run at the first
instruction where it could overflow (:meth:`PmuV3._plan`): exactly there for instructions
and cycles; for events an instruction can add several of, the checks converge on it, so the
interrupt is requested after the instruction that overflowed the counter.

Board choices where the architecture leaves one: PMXEVTYPER_EL0/PMXEVCNTR_EL0 with
PMSELR_EL0.SEL >= the counters accessible and not 31 are UNDEFINED (CONSTRAINED UNPREDICTABLE,
D23.4); PMCR_EL0.IMP is 0x41 (Arm), IDCODE 0; PMMIR_EL1 reads 0. Not modelled: the Security
state of an event (the counts of an Exception level are filtered with the Security state the
PE is in when the counter settles; spe_emu's guests run Non-secure below EL3), changes of
MDCR_EL2/MDCR_EL3 between two PMU register accesses (they apply to the whole interval), the
AArch32 registers, FEAT_PMUv3_TH/EDGE/ICNTR, PMCR_EL0.X (no export), the PMU snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar, Protocol

from ..arch.context import MDCR_EL2, MDCR_EL3, AccessContext
from ..errors import DeviceError
from ..platform.clock import NEVER, Event
from ..platform.device import Device
from ..sysreg import MASK64, Access, RegisterTable, reg

if TYPE_CHECKING:
    from ..platform.board import DeviceSpec, Platform

PMUVER_V3P5 = 0b0110
"""ID_AA64DFR0_EL1.PMUVer of this PMU (FEAT_PMUv3p5)."""
DEFAULT_COUNTERS = 6
"""PMCR_EL0.N by default: QEMU 7.2 ``-cpu max``'s."""
CYCLE = 31
"""The cycle counter's index in PMCNTENSET_EL0, PMINTENSET_EL1, PMOVSSET_EL0 (bit 31)."""

# ---------------------------------------------------------------- the events -------------
SW_INCR, CHAIN = 0x00, 0x1E
SPE_EVENTS = (0x4000, 0x4001, 0x4002, 0x4003)
"""SAMPLE_POP, SAMPLE_FEED, SAMPLE_FILTRATE, SAMPLE_COLLISION (SPE supplement §2.6)."""

SOURCES = ("insns", "branches", "mispredicts", "loads", "stores", "exceptions", "faulted",
           "l1d_hits", "l2_hits", "llc_hits", "dram", "peer_hits", "accesses", "tlb_walks",
           "sample_pop", "sample_feed", "sample_filtrate", "sample_collision")
"""The event sources, per Exception level (:meth:`PmuSources.totals`): spe_native.h
``SPE_PMU_*`` (``native.PMU_SOURCES``), then the SPE events (SpePmuEvents)."""
_S = {name: i for i, name in enumerate(SOURCES)}


def _src(*names: str, minus: tuple[str, ...] = ()) -> Callable[[list[int]], int]:
    plus = [_S[n] for n in names]
    less = [_S[n] for n in minus]
    return lambda t: sum(t[i] for i in plus) - sum(t[i] for i in less)


@dataclass(frozen=True)
class PmuEvent:
    """A common event (Arm ARM D12.11): its mnemonic, how it counts from one Exception
    level's source totals, whether it needs the model fed (``model``), and the most one
    instruction can add (``most``: where an overflow can come first, :meth:`PmuV3._plan`)."""

    name: str
    count: Callable[[list[int]], int]
    model: bool = False
    most: int = 1


MOST_ACCESSES = 8
"""The most data accesses the model counts for one instruction (one per trace call: a
64-byte LD4 or DC ZVA traced in 8-byte pieces)."""
EVENTS: dict[int, PmuEvent] = {
    0x00: PmuEvent("SW_INCR", lambda t: 0, most=0),
    0x03: PmuEvent("L1D_CACHE_REFILL", _src("accesses", minus=("l1d_hits",)), True,
                   MOST_ACCESSES),
    0x04: PmuEvent("L1D_CACHE", _src("accesses"), True, MOST_ACCESSES),
    0x05: PmuEvent("L1D_TLB_REFILL", _src("tlb_walks"), True, MOST_ACCESSES),
    0x06: PmuEvent("LD_RETIRED", _src("loads"), True),
    0x07: PmuEvent("ST_RETIRED", _src("stores"), True),
    0x08: PmuEvent("INST_RETIRED", _src("insns", minus=("faulted",))),
    0x09: PmuEvent("EXC_TAKEN", _src("exceptions"), most=2),
    0x10: PmuEvent("BR_MIS_PRED", _src("mispredicts"), True),
    0x11: PmuEvent("CPU_CYCLES", _src("insns")),
    0x12: PmuEvent("BR_PRED", _src("branches"), True),
    0x13: PmuEvent("MEM_ACCESS", _src("accesses"), True, MOST_ACCESSES),
    0x16: PmuEvent("L2D_CACHE", _src("accesses", minus=("l1d_hits",)), True,
                   MOST_ACCESSES),
    0x17: PmuEvent("L2D_CACHE_REFILL", _src("accesses", minus=("l1d_hits", "l2_hits")),
                   True, MOST_ACCESSES),
    0x1E: PmuEvent("CHAIN", lambda t: 0, most=0),
    0x21: PmuEvent("BR_RETIRED", _src("branches"), True),
    0x22: PmuEvent("BR_MIS_PRED_RETIRED", _src("mispredicts"), True),
    0x23: PmuEvent("STALL_FRONTEND", lambda t: 0, most=0),
    0x24: PmuEvent("STALL_BACKEND", lambda t: 0, most=0),
    0x25: PmuEvent("L1D_TLB", _src("accesses"), True, MOST_ACCESSES),
    0x32: PmuEvent("LL_CACHE", _src("accesses", minus=("l1d_hits", "l2_hits")), True,
                         MOST_ACCESSES),
    0x33: PmuEvent("LL_CACHE_MISS", _src("dram"), True, MOST_ACCESSES),
    0x4000: PmuEvent("SAMPLE_POP", _src("sample_pop"), most=2),
    0x4001: PmuEvent("SAMPLE_FEED", _src("sample_feed"), most=2),
    0x4002: PmuEvent("SAMPLE_FILTRATE", _src("sample_filtrate"), most=2),
    0x4003: PmuEvent("SAMPLE_COLLISION", _src("sample_collision"), most=2),
}
"""The events this PMU counts, by number (Arm ARM D12.11; SPE supplement §2.6)."""


def event_ids(implemented: set[int]) -> tuple[int, int]:
    """(PMCEID0_EL0, PMCEID1_EL0) advertising ``implemented``: bit n of the low words for
    event n (0..63: events 0..31 in PMCEID0, 32..63 in PMCEID1), bit 32 + n - 0x4000 for the
    events 0x4000..0x403F (D23.4 PMCEID0_EL0, PMCEID1_EL0)."""
    ids = [0, 0]
    for e in implemented:
        if e < 0x40:
            ids[e >> 5] |= 1 << (e & 31)
        elif 0x4000 <= e < 0x4040:
            ids[(e - 0x4000) >> 5] |= 1 << (32 + ((e - 0x4000) & 31))
    return ids[0], ids[1]


# ---------------------------------------------------------------- the registers ----------
TYPER_FIELDS = ("P 31", "U 30", "NSK 29", "NSU 28", "NSH 27", "M 26", "MT 25",
                "evtCount 15:0")
FILTR_FIELDS = ("P 31", "U 30", "NSK 29", "NSU 28", "NSH 27", "M 26")
ENABLE_FIELDS = ("C 31", "P 30:0")
MAX_COUNTERS = 31


_ENABLE = RegisterTable([reg("PMCNTENSET_EL0", (3, 3, 9, 12, 1), *ENABLE_FIELDS)])[
    "PMCNTENSET_EL0"]


def counter_bit(mask: int, n: int) -> bool:
    """Counter ``n``'s bit (-1: the cycle counter's, C) of a PMCNTENSET_EL0-layout value
    (PMCNTEN*, PMINTEN*, PMOVS*, PMSWINC_EL0: P<n> = bit n, C = bit 31)."""
    return bool(_ENABLE.get(mask, "C") if n < 0 else _ENABLE.get(mask, "P") >> n & 1)


def counter_mask(n: int) -> int:
    """The value of that layout with only counter ``n``'s bit set (-1: C)."""
    return _ENABLE.make(C=1) if n < 0 else _ENABLE.make(P=1 << n)


def pmevcntr(n: int) -> tuple[int, int, int, int, int]:
    """PMEVCNTR<n>_EL0: op0 3, op1 3, CRn 14, CRm 0b10:n[4:3], op2 n[2:0]."""
    return (3, 3, 14, 0b1000 | n >> 3, n & 7)


def pmevtyper(n: int) -> tuple[int, int, int, int, int]:
    """PMEVTYPER<n>_EL0: op0 3, op1 3, CRn 14, CRm 0b11:n[4:3], op2 n[2:0]."""
    return (3, 3, 14, 0b1100 | n >> 3, n & 7)


@dataclass(frozen=True)
class PmuAccessContext:
    """The access checks' input: the PE's context, this PMU's PMUSERENR_EL0 and PMSELR_EL0
    and its number of event counters (PMCR_EL0.N)."""

    ctx: AccessContext
    pmuserenr: int
    pmselr: int
    counters: int


def accessible(pmu: PmuAccessContext) -> int:
    """``GetNumEventCountersAccessible()``: MDCR_EL2.HPMN at EL0/EL1 with EL2 enabled, else
    PMCR_EL0.N."""
    ctx = pmu.ctx
    if ctx.el < 2 and ctx.el2_enabled:
        return min(MDCR_EL2.get(ctx.mdcr_el2, "HPMN"), pmu.counters)
    return pmu.counters


def _el0_trap(ctx: AccessContext) -> Access:
    """A trap from EL0 goes to EL1, or EL2 with HCR_EL2.TGE set."""
    return Access.TRAP_EL2 if ctx.el2_enabled and ctx.tge else Access.TRAP_EL1


SELECTED_TYPE, SELECTED_COUNT = -1, -2
"""``pmu_check`` counters: PMSELR_EL0.SEL's, for PMXEVTYPER_EL0 (SEL 31: PMCCFILTR_EL0) and
PMXEVCNTR_EL0 (SEL 31: UNDEFINED, the board's choice)."""


def pmu_check(user: tuple[str, ...] = (), user_read: tuple[str, ...] = (),
              el0: bool = True, counter: int | None = None, pmcr: bool = False
              ) -> Callable[[PmuAccessContext, bool], Access]:
    """The access check of a PMU register (the D23.4 access pseudocode): at EL0, UNDEFINED
    unless ``el0``, else trapped unless PMUSERENR_EL0.EN or one of ``user`` (any access) or
    ``user_read`` (reads) is set; UNDEFINED when the event counter it reaches (``counter``,
    or :data:`SELECTED_TYPE`/:data:`SELECTED_COUNT`) is not accessible; MDCR_EL2.TPM
    (and TPMCR for ``pmcr``) traps EL0/EL1 to EL2 when EL2 is enabled, MDCR_EL3.TPM every EL
    below EL3 to EL3."""
    def check(pmu: PmuAccessContext, is_read: bool) -> Access:
        ctx = pmu.ctx
        if counter is not None:
            n = PMU_REGISTERS["PMSELR_EL0"].get(pmu.pmselr, "SEL") if counter < 0 else counter
            if not (counter == SELECTED_TYPE and n == CYCLE) and n >= (
                    accessible(pmu) if ctx.el < 2 else pmu.counters):
                return Access.UNDEFINED
        if ctx.el == 0:
            if not el0:
                return Access.UNDEFINED
            u = PMU_REGISTERS["PMUSERENR_EL0"]
            if not (u.get(pmu.pmuserenr, "EN") or any(u.get(pmu.pmuserenr, f) for f in user)
                    or (is_read and any(u.get(pmu.pmuserenr, f) for f in user_read))):
                return _el0_trap(ctx)
        if ctx.el < 2 and ctx.el2_enabled and (
                MDCR_EL2.get(ctx.mdcr_el2, "TPM")
                or (pmcr and MDCR_EL2.get(ctx.mdcr_el2, "TPMCR"))):
            return Access.TRAP_EL2
        if ctx.el < 3 and ctx.have_el3 and MDCR_EL3.get(ctx.mdcr_el3, "TPM"):
            return Access.TRAP_EL3
        return Access.OK
    return check


_RW_CHECK = pmu_check()


def _pmuserenr_check(pmu: PmuAccessContext, is_read: bool) -> Access:
    """PMUSERENR_EL0: read-only at EL0 (a write UNDEFINED), TPM traps as any PMU register."""
    if pmu.ctx.el == 0 and not is_read:
        return Access.UNDEFINED
    return _RW_CHECK(pmu, is_read)


_SW_CHECK = pmu_check(user=("SW",))


def _pmswinc_check(pmu: PmuAccessContext, is_read: bool) -> Access:
    """PMSWINC_EL0: write-only (an MRS is UNDEFINED); PMUSERENR_EL0.SW lets EL0 write."""
    if is_read:
        return Access.UNDEFINED
    return _SW_CHECK(pmu, is_read)


def _table() -> RegisterTable:
    rw = _RW_CHECK
    regs = [
        reg("PMCR_EL0", (3, 3, 9, 12, 0), "IMP 31:24 RO", "IDCODE 23:16 RO", "N 15:11 RO",
            "LP 7", "DP 5", "X 4", "D 3", "C 2 WO", "P 1 WO", "E 0", res1=1 << 6,
            check=pmu_check(pmcr=True), doc="D23.4 PMCR_EL0 (LC, bit 6, RES1)"),
        reg("PMCNTENSET_EL0", (3, 3, 9, 12, 1), *ENABLE_FIELDS, check=rw,
            doc="D23.4 PMCNTENSET_EL0"),
        reg("PMCNTENCLR_EL0", (3, 3, 9, 12, 2), *ENABLE_FIELDS, check=rw,
            doc="D23.4 PMCNTENCLR_EL0"),
        reg("PMOVSCLR_EL0", (3, 3, 9, 12, 3), *ENABLE_FIELDS, check=rw,
            doc="D23.4 PMOVSCLR_EL0"),
        reg("PMSWINC_EL0", (3, 3, 9, 12, 4), "P 30:0 WO", check=_pmswinc_check,
            doc="D23.4 PMSWINC_EL0 (reads UNDEFINED: write-only)"),
        reg("PMSELR_EL0", (3, 3, 9, 12, 5), "SEL 4:0", check=pmu_check(user=("ER",)),
            doc="D23.4 PMSELR_EL0"),
        reg("PMCEID0_EL0", (3, 3, 9, 12, 6), "IDhi 63:32", "ID 31:0", read_only=True,
            check=rw, doc="D23.4 PMCEID0_EL0"),
        reg("PMCEID1_EL0", (3, 3, 9, 12, 7), "IDhi 63:32", "ID 31:0", read_only=True,
            check=rw, doc="D23.4 PMCEID1_EL0"),
        reg("PMCCNTR_EL0", (3, 3, 9, 13, 0), "CCNT 63:0", check=pmu_check(user_read=("CR",)),
            doc="D23.4 PMCCNTR_EL0"),
        reg("PMXEVTYPER_EL0", (3, 3, 9, 13, 1), *TYPER_FIELDS,
            check=pmu_check(counter=SELECTED_TYPE),
            doc="D23.4 PMXEVTYPER_EL0"),
        reg("PMXEVCNTR_EL0", (3, 3, 9, 13, 2), "PMEVCNTR 63:0",
            check=pmu_check(user_read=("ER",), counter=SELECTED_COUNT),
            doc="D23.4 PMXEVCNTR_EL0"),
        reg("PMUSERENR_EL0", (3, 3, 9, 14, 0), "ER 3", "CR 2", "SW 1", "EN 0",
            check=_pmuserenr_check, doc="D23.4 PMUSERENR_EL0"),
        reg("PMINTENSET_EL1", (3, 0, 9, 14, 1), *ENABLE_FIELDS, check=pmu_check(el0=False),
            doc="D23.4 PMINTENSET_EL1"),
        reg("PMINTENCLR_EL1", (3, 0, 9, 14, 2), *ENABLE_FIELDS, check=pmu_check(el0=False),
            doc="D23.4 PMINTENCLR_EL1"),
        reg("PMOVSSET_EL0", (3, 3, 9, 14, 3), *ENABLE_FIELDS, check=rw,
            doc="D23.4 PMOVSSET_EL0"),
        reg("PMMIR_EL1", (3, 0, 9, 14, 6), "SLOTS 7:0", read_only=True,
            check=pmu_check(el0=False), doc="D23.4 PMMIR_EL1 (FEAT_PMUv3p4)"),
        reg("PMCCFILTR_EL0", (3, 3, 14, 15, 7), *FILTR_FIELDS, check=rw,
            doc="D23.4 PMCCFILTR_EL0"),
    ]
    for n in range(MAX_COUNTERS):
        regs.append(reg(f"PMEVCNTR{n}_EL0", pmevcntr(n), "EVCNT 63:0",
                        check=pmu_check(user_read=("ER",), counter=n),
                        doc="D23.4 PMEVCNTR<n>_EL0"))
        regs.append(reg(f"PMEVTYPER{n}_EL0", pmevtyper(n), *TYPER_FIELDS,
                        check=pmu_check(counter=n), doc="D23.4 PMEVTYPER<n>_EL0"))
    return RegisterTable(regs)


PMU_REGISTERS = _table()
"""Every AArch64 PMU register (event counters 0..30; those from PMCR_EL0.N up UNDEF)."""
PMCR = PMU_REGISTERS["PMCR_EL0"]
TYPER = PMU_REGISTERS["PMEVTYPER0_EL0"]
FILTR = PMU_REGISTERS["PMCCFILTR_EL0"]
WRITE_ONLY = frozenset({"PMSWINC_EL0"})


def counter_filtered(typer: int, el: int, secure: bool, have_el3: bool) -> bool:
    """Whether PMEVTYPER<n>_EL0/PMCCFILTR_EL0 value ``typer`` filters out the events at
    ``el`` in Security state ``secure`` (D12.6: P/U for EL1/EL0, NSK/NSU in Non-secure state
    with EL3 implemented, NSH for Non-secure EL2, M for EL3)."""
    p, u = TYPER.get(typer, "P"), TYPER.get(typer, "U")
    if el == 3:
        return TYPER.get(typer, "M") != p
    if el == 2:
        return secure or not TYPER.get(typer, "NSH")
    bit, ns = (p, TYPER.get(typer, "NSK")) if el == 1 else (u, TYPER.get(typer, "NSU"))
    if secure or not have_el3:
        return bit == 1
    return bit != ns


# ---------------------------------------------------------------- the sources ------------
class PmuSources(Protocol):
    """What the PMU counts from: the PE's machine (``PmuFeed``)."""

    def totals(self) -> list[list[int]]:
        """Each Exception level's totals of :data:`SOURCES` now (``[el][source]``)."""

    def context(self) -> AccessContext:
        """The PE's control state now (MDCR_EL2, MDCR_EL3, SCR_EL3, the EL)."""

    def counting(self, on: bool, model: bool) -> None:
        """Whether any counter counts (the per-EL tracking runs) and whether one counts a
        model event (the model must be fed every access and branch)."""

    def model_events(self) -> bool:
        """Whether the model can be fed (``model_feed="every"``): its events exist."""

    def spe_events(self) -> bool:
        """Whether SPE is implemented: its events exist."""


class PmuV3(Device, kind="pmuv3"):
    """The PMUv3 of one PE (module docstring): a system-register owner with one interrupt
    output, ``pmuirq`` (the board wires it to its PPI: 23 on ``virt``).

    Board description: ``DeviceSpec("pmuv3", "pmu", 0, 0, irqs=(("pmuirq", 23),),
    props=(("counters", 6),))``. The machine calls :meth:`connect` with its sources before
    the PE runs; until then nothing counts.

    Raises:
        DeviceError: ``counters`` outside 1..31.
    """

    SYSREGS: ClassVar[RegisterTable] = PMU_REGISTERS
    IRQ_OUTPUTS = ("pmuirq",)
    via_undef = True
    """Unicorn's CPU has no PMU (patches/unicorn/0006): every access UNDEFs and reaches the
    registry's dispatcher."""
    PER_PE = True

    @staticmethod
    def present() -> bool:
        return True

    def __init__(self, spec: "DeviceSpec", platform: "Platform"):
        self.counters = int(dict(spec.props).get("counters", DEFAULT_COUNTERS))
        if not 1 <= self.counters <= MAX_COUNTERS:
            raise DeviceError(f"{spec.name}: counters {self.counters} outside 1..31")
        self.sources: PmuSources | None = None
        self._event: Event | None = None
        super().__init__(spec, platform)

    def connect(self, sources: PmuSources) -> None:
        """Count from ``sources`` (the PE's machine) from now on."""
        self.sources = sources
        self._last = sources.totals()
        self._implemented = {e for e, ev in EVENTS.items()
                             if (not ev.model or sources.model_events())
                             and (e < 0x4000 or sources.spe_events())}
        self.pmceid = event_ids(self._implemented)

    # -- life cycle ---------------------------------------------------------------------
    def reset(self) -> None:
        """Warm reset: counters and controls 0 (architecturally UNKNOWN but PMCR_EL0.E, the
        enables and overflow flags, which reset to 0), PMCR_EL0.N the board's."""
        super().reset()
        self.platform.clock.cancel(self._event)
        self._event = None
        self.pmcr = PMCR.make(IMP=0x41, N=self.counters)
        self.value = [0] * (self.counters + 1)     # [n]: event counter n; [-1]: PMCCNTR
        self.typer = [0] * (self.counters + 1)     # [-1]: PMCCFILTR_EL0
        self.cnten = self.inten = self.ovs = 0
        self.pmselr = self.pmuserenr = 0
        self._cycle_rest = 0                       # cycles towards the next one with D
        self._last = self.sources.totals() if self.sources is not None else None
        for line in self.irqs.values():
            line.set(False)

    # -- the system-register interface --------------------------------------------------
    def context(self, ctx: AccessContext) -> PmuAccessContext:
        """``ctx`` with this PMU's PMUSERENR_EL0, PMSELR_EL0 and N: the checks' input."""
        return PmuAccessContext(ctx, self.pmuserenr, self.pmselr, self.counters)

    def _selected(self) -> int:
        n = PMU_REGISTERS["PMSELR_EL0"].get(self.pmselr, "SEL")
        return -1 if n == CYCLE else n

    def sysreg_read(self, name: str, ctx: AccessContext) -> int:
        """MRS of ``name`` whose access check passed: its value now (the counters settled)."""
        self.settle(ctx)
        if name == "PMCR_EL0":
            value = self.pmcr
            if ctx.el < 2 and ctx.el2_enabled:
                value = PMCR.set(value, "N", MDCR_EL2.get(ctx.mdcr_el2, "HPMN"))
            return value
        if name in ("PMCNTENSET_EL0", "PMCNTENCLR_EL0"):
            return self.cnten
        if name in ("PMINTENSET_EL1", "PMINTENCLR_EL1"):
            return self.inten
        if name in ("PMOVSSET_EL0", "PMOVSCLR_EL0"):
            return self.ovs
        if name == "PMSELR_EL0":
            return self.pmselr
        if name == "PMUSERENR_EL0":
            return self.pmuserenr
        if name == "PMCEID0_EL0":
            return self.pmceid[0]
        if name == "PMCEID1_EL0":
            return self.pmceid[1]
        if name == "PMMIR_EL1":
            return 0
        if name == "PMCCNTR_EL0":
            return self.value[-1]
        if name == "PMCCFILTR_EL0":
            return self.typer[-1]
        if name == "PMSWINC_EL0":
            return 0
        n = self._index(name)
        return (self.value if "CNTR" in name else self.typer)[n]

    def sysreg_write(self, name: str, value: int, ctx: AccessContext) -> None:
        """MSR of ``name`` whose access check passed: the counters are settled under the old
        controls first."""
        self.settle(ctx)
        value &= MASK64
        spec = PMU_REGISTERS[name]
        mask = _ENABLE.make(C=1, P=(1 << self.counters) - 1)   # (the implemented ones)
        if name == "PMCR_EL0":
            self._write_pmcr(value, ctx)
        elif name == "PMCNTENSET_EL0":
            self.cnten |= value & mask
        elif name == "PMCNTENCLR_EL0":
            self.cnten &= ~value
        elif name == "PMINTENSET_EL1":
            self.inten |= value & mask
        elif name == "PMINTENCLR_EL1":
            self.inten &= ~value
        elif name == "PMOVSSET_EL0":
            self.ovs |= value & mask
        elif name == "PMOVSCLR_EL0":
            self.ovs &= ~value
        elif name == "PMSELR_EL0":
            self.pmselr = spec.apply_write(self.pmselr, value)
        elif name == "PMUSERENR_EL0":
            self.pmuserenr = spec.apply_write(self.pmuserenr, value)
        elif name == "PMSWINC_EL0":
            self._software_increment(value, ctx)
        elif name == "PMCCNTR_EL0":
            self.value[-1] = value
        elif name == "PMCCFILTR_EL0":
            self.typer[-1] = spec.apply_write(self.typer[-1], value)
        else:
            n = self._index(name)
            if "CNTR" in name:
                self.value[n] = value
            else:
                self.typer[n] = TYPER.apply_write(self.typer[n], value)
        self._follow(ctx)

    def _index(self, name: str) -> int:
        """The counter ``name`` reaches (PMXEV*: PMSELR_EL0.SEL; 31 is the cycle counter,
        for PMXEVTYPER_EL0: -1)."""
        if name.startswith("PMXEV"):
            return self._selected()
        for prefix in ("PMEVCNTR", "PMEVTYPER"):
            if name.startswith(prefix):
                return int(name[len(prefix):].partition("_")[0])
        raise DeviceError(f"{self.name}: no PMU register {name!r}")

    def _write_pmcr(self, value: int, ctx: AccessContext) -> None:
        """PMCR_EL0: E, D, X, DP, LP stored; C zeroes PMCCNTR_EL0; P zeroes the event
        counters (those below MDCR_EL2.HPMN only, from EL0/EL1 with EL2 enabled)."""
        if PMCR.get(value, "C"):
            self.value[-1] = 0
            self._cycle_rest = 0
        if PMCR.get(value, "P"):
            top = self.counters
            if ctx.el < 2 and ctx.el2_enabled:
                top = min(top, MDCR_EL2.get(ctx.mdcr_el2, "HPMN"))
            for n in range(top):
                self.value[n] = 0
        self.pmcr = PMCR.apply_write(self.pmcr, value)

    # -- counting -----------------------------------------------------------------------
    def _hyp(self, n: int, ctx: AccessContext) -> bool:
        """Counter ``n`` is reserved for EL2 (n >= MDCR_EL2.HPMN; EL2 implemented)."""
        return ctx.have_el2 and n >= MDCR_EL2.get(ctx.mdcr_el2, "HPMN")

    def _enabled(self, n: int, ctx: AccessContext) -> bool:
        """``PMUCounterIsEnabled``: PMCNTENSET_EL0 and PMCR_EL0.E (MDCR_EL2.HPME for a
        counter reserved for EL2); ``n`` = -1: the cycle counter."""
        if not counter_bit(self.cnten, n):
            return False
        if n >= 0 and self._hyp(n, ctx):
            return bool(MDCR_EL2.get(ctx.mdcr_el2, "HPME"))
        return bool(PMCR.get(self.pmcr, "E"))

    def _counts_at(self, n: int, el: int, ctx: AccessContext) -> bool:
        """Counter ``n`` (-1: cycles) counts events at ``el`` (D12.6: not prohibited, not
        filtered), in the Security state the PE is in."""
        secure = ctx.have_el3 and (el == 3 or not ctx.ns)
        if secure and ctx.have_el3 and not MDCR_EL3.get(ctx.mdcr_el3, "SPME"):
            if n >= 0 or MDCR_EL3.get(ctx.mdcr_el3, "SCCD") or PMCR.get(self.pmcr, "DP"):
                return False
        if el == 2 and not secure and ctx.have_el2:
            if n >= 0 and not self._hyp(n, ctx) and MDCR_EL2.get(ctx.mdcr_el2, "HPMD"):
                return False
            if n < 0 and (MDCR_EL2.get(ctx.mdcr_el2, "HCCD")
                          or (MDCR_EL2.get(ctx.mdcr_el2, "HPMD") and PMCR.get(self.pmcr,
                                                                                "DP"))):
                return False
        return not counter_filtered(self.typer[n], el, secure, ctx.have_el3)

    def _long(self, n: int, ctx: AccessContext) -> bool:
        """Counter ``n`` overflows at bit 63 (PMCR_EL0.LP, or MDCR_EL2.HLP when reserved for
        EL2; the cycle counter always: LC is RES1)."""
        if n < 0:
            return True
        if self._hyp(n, ctx):
            return bool(MDCR_EL2.get(ctx.mdcr_el2, "HLP"))
        return bool(PMCR.get(self.pmcr, "LP"))

    def _add(self, n: int, events: int, ctx: AccessContext) -> int:
        """Add ``events`` to counter ``n``; returns how many times it overflowed (sets
        PMOVSSET_EL0)."""
        old = self.value[n]
        new = old + events
        self.value[n] = new & MASK64
        bits = 64 if self._long(n, ctx) else 32
        wraps = (new >> bits) - (old >> bits) if bits == 64 else (
            ((old & 0xFFFF_FFFF) + events) >> 32)
        if wraps:
            self.ovs |= counter_mask(n)
        return wraps

    def settle(self, ctx: AccessContext | None = None) -> None:
        """Bring every counter up to now: each enabled counter adds, per Exception level it
        counts at, its event's count since the last settling; then chained counters, the
        overflow flags and the interrupt request."""
        if self.sources is None:
            return
        if ctx is None:
            ctx = self.sources.context()
        now = self.sources.totals()
        last, self._last = self._last, now
        if last is None:
            return
        delta = [[a - b for a, b in zip(now[el], last[el])] for el in range(4)]
        chained = 0
        for n in range(self.counters):
            event = TYPER.get(self.typer[n], "evtCount")
            if event == CHAIN and n % 2:
                if chained and self._enabled(n, ctx) and not self._long(n - 1, ctx):
                    self._add(n, chained, ctx)
                chained = 0
                continue
            chained = 0
            ev = EVENTS.get(event)
            if ev is None or not self._enabled(n, ctx):
                continue
            count = sum(ev.count(delta[el]) for el in range(4) if self._counts_at(n, el, ctx))
            if count:
                chained = self._add(n, count, ctx)
        if self._enabled(-1, ctx):
            cycles = sum(delta[el][_S["insns"]] for el in range(4)
                         if self._counts_at(-1, el, ctx))
            if PMCR.get(self.pmcr, "D"):   # (one count every 64 cycles)
                cycles, self._cycle_rest = divmod(self._cycle_rest + cycles, 64)
            if cycles:
                self._add(-1, cycles, ctx)
        self._update_irq(ctx)

    def _software_increment(self, value: int, ctx: AccessContext) -> None:
        """PMSWINC_EL0: each counter named whose event is SW_INCR and that counts at the
        current EL increments by one (its odd CHAIN neighbour on a 32-bit overflow)."""
        for n in range(self.counters):
            if (counter_bit(value, n) and TYPER.get(self.typer[n], "evtCount") == SW_INCR
                    and self._enabled(n, ctx) and self._counts_at(n, ctx.el, ctx)):
                if self._add(n, 1, ctx) and n % 2 == 0 and n + 1 < self.counters:
                    if (TYPER.get(self.typer[n + 1], "evtCount") == CHAIN
                            and self._enabled(n + 1, ctx) and not self._long(n, ctx)):
                        self._add(n + 1, 1, ctx)

    def interrupt_requested(self, ctx: AccessContext) -> bool:
        """``CheckForPMUOverflow()``: an overflow flag set whose interrupt is enabled, of a
        counter that is enabled at PMCR_EL0.E (MDCR_EL2.HPME for EL2's)."""
        pending = self.ovs & self.inten
        if counter_bit(pending, -1) and PMCR.get(self.pmcr, "E"):
            return True
        for n in range(self.counters):
            if counter_bit(pending, n):
                on = (MDCR_EL2.get(ctx.mdcr_el2, "HPME") if self._hyp(n, ctx)
                      else PMCR.get(self.pmcr, "E"))
                if on:
                    return True
        return False

    def _update_irq(self, ctx: AccessContext) -> None:
        line = self.irqs["pmuirq"]
        level = self.interrupt_requested(ctx)
        if line.level != level:
            line.set(level)
            self.changed()

    def _follow(self, ctx: AccessContext) -> None:
        """After a write: tell the sources what is counted and plan the next overflow
        check."""
        self._update_irq(ctx)
        if self.sources is None:
            return
        active = [n for n in range(-1, self.counters) if self._enabled(n, ctx)]
        model = any(EVENTS.get(TYPER.get(self.typer[n], "evtCount"), EVENTS[0]).model
                    for n in active if n >= 0)
        self.sources.counting(bool(active), model)
        self._plan(ctx, active)

    def _plan(self, ctx: AccessContext, active: list[int]) -> None:
        """The clock event of the next overflow check: for each counter with its interrupt
        enabled, the first instruction at which it could overflow (its distance to the
        overflow, divided by the most one instruction adds to its event: exact for
        instructions and cycles, converging on it for the others)."""
        self.platform.clock.cancel(self._event)
        self._event = None
        now = self.platform.clock.ticks()
        due = NEVER
        for n in active:
            if not counter_bit(self.inten, n):
                continue
            event = EVENTS.get(0x11 if n < 0 else TYPER.get(self.typer[n], "evtCount"))
            if event is None or not event.most:
                continue
            top = 1 << (64 if self._long(n, ctx) else 32)
            left = top - (self.value[n] % top)
            if n < 0 and PMCR.get(self.pmcr, "D"):
                left = left * 64 - self._cycle_rest
            due = min(due, now + max(1, left // event.most))
        if due < NEVER:
            self._event = self.platform.clock.schedule(due, f"{self.name}.overflow",
                                                       self._check)
            self.changed()   # (the run loop plans its stop for it)

    def _check(self, _now: int) -> None:
        self._event = None
        ctx = self.sources.context()
        self.settle(ctx)
        self._plan(ctx, [n for n in range(-1, self.counters) if self._enabled(n, ctx)])

    # -- summary ------------------------------------------------------------------------
    def counts(self) -> dict:
        """The counters now, for summary.json: ``{"PMCCNTR_EL0": v, "PMEVCNTR<n>_EL0":
        {"event": name or number, "value": v}, ...}`` (settled first)."""
        self.settle()
        out: dict = {"PMCCNTR_EL0": self.value[-1]}
        for n in range(self.counters):
            event = TYPER.get(self.typer[n], "evtCount")
            out[f"PMEVCNTR{n}_EL0"] = {
                "event": EVENTS[event].name if event in EVENTS else f"{event:#x}",
                "value": self.value[n]}
        return out
