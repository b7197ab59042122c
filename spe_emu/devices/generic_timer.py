"""The Generic Timer of one PE: the system counter views and four timers, as a device that owns
system registers (no memory-mapped region).

Specification: Arm ARM (DDI 0487 M.a) chapter D12 "The Generic Timer in AArch64 state" (D11 in
earlier issues): D12.2.1-D12.2.2 the physical and virtual counters and the virtual offset,
D12.2.4 the timers (CompareValue and TimerValue views); the register descriptions and their
access pseudocode in D24.10 (CNTFRQ_EL0 .1, CNTHCTL_EL2 .2, CNTHP_* .3-.5, CNTHV_* .9-.11,
CNTKCTL_EL1 .15, CNTP_* .16-.18, CNTPCT_EL0 .19, CNTV_* .25-.27, CNTVCT_EL0 .28, CNTVOFF_EL2
.30); AArch64.CheckTimerConditions(), IsTimerConditionMet(), VirtualCounterTimer(),
ELIsInHost() and CNTHCTL_EL2_VHE() in J1.3.

Time is :attr:`Platform.clock` (:class:`~spe_emu.platform.clock.VirtualClock`): the physical
count is ``clock.ticks()``; the EL1 virtual timer counts ``ticks - CNTVOFF_EL2``. Each timer's
output is a pure function of its CTL, CVAL and the count (:func:`timer_output`), recomputed
in one place (:meth:`GenericTimer._update`), which also keeps exactly one clock event per
timer at the tick where its interrupt will rise. The outputs drive the :data:`IRQ_OUTPUTS`
lines; the board wires them to PPIs (``BoardSpec.ppis``: cntp 30, cntv 27, cnthp 26, cnthv 28
on ``virt``).

Access checks are pure functions of a :class:`TimerAccessContext`: the PE's
:class:`~spe_emu.arch.context.AccessContext` plus the two controls this device owns
(CNTKCTL_EL1, CNTHCTL_EL2). Callers use :meth:`GenericTimer.access`, which builds it.

Modelled: FEAT_VHE (host redirection of CNTP_*/CNTV_* to CNTHP_*/CNTHV_*, CNTKCTL_EL1 at EL2
reaching CNTHCTL_EL2, the *_EL02/*_EL12 aliases), as in QEMU 7.2 ``-cpu max``. Not modelled:
FEAT_ECV (CNTPOFF_EL2, EL1TVT/EL1TVCT, EVNTIS), FEAT_NV, FEAT_SEL2/FEAT_RME timers, the
Secure EL1 physical timer CNTPS_* (Unicorn keeps executing those itself, without an
interrupt), AArch32, event streams (EVNTEN is stored, no event is generated).

Choices where the Arm ARM leaves one (QEMU 7.2 ``-cpu max`` does the same): reset values
(architecturally UNKNOWN) are 0, except CNTHCTL_EL2 = 0b11 (EL1PCTEN and EL1PCEN set, no
traps: what Unicorn's QEMU reads after reset) and CNTFRQ_EL0 = the board's counter frequency
(``BoardSpec.counter_hz``); ISTATUS reads 0 while ENABLE is 0; a TimerValue read while
ENABLE is 0 returns the enabled formula; a write
of CNTKCTL_EL1 at EL2 with HCR_EL2.E2H = 1 stores every CNTHCTL_EL2 bit written (bits 11:10
included, which CNTHCTL_EL2_VHE() makes UNKNOWN). CNTFRQ_EL0 is storage: a write at the
highest implemented EL changes what reads return, never the counter's rate ("the value of the
register is not interpreted by hardware", D24.10.1). Without EL2, the EL2 registers are RES0
from EL3 (read zero, writes ignored).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Callable, ClassVar

from ..arch.context import HCR_EL2, AccessContext
from ..errors import DeviceError
from ..platform.board import BoardSpec, DeviceSpec
from ..platform.clock import CNTFRQ_HZ, NEVER, Event
from ..platform.device import Device
from ..sysreg import MASK64, Access, RegisterSpec, RegisterTable, reg

if TYPE_CHECKING:
    from ..platform.board import Platform

# ---------------------------------------------------------------- register layouts -------
# Layouts shared by several registers (Linux's SysregFields): every timer's control,
# CompareValue and TimerValue registers look alike (D24.10.3-.27).
CTL_FIELDS = ("ISTATUS 2 RO", "IMASK 1", "ENABLE 0")
CVAL_FIELDS = ("CompareValue 63:0",)
TVAL_FIELDS = ("TimerValue 31:0",)
CNTKCTL_FIELDS = ("EL0PTEN 9", "EL0VTEN 8", "EVNTI 7:4", "EVNTDIR 3", "EVNTEN 2", "EL0VCTEN 1",
                  "EL0PCTEN 0")

CNTKCTL_EL1 = reg("CNTKCTL_EL1", (3, 0, 14, 1, 0), *CNTKCTL_FIELDS, doc="D24.10.15")
CNTHCTL_EL2_NVHE = reg("CNTHCTL_EL2", (3, 4, 14, 1, 0), "EVNTI 7:4", "EVNTDIR 3", "EVNTEN 2",
                       "EL1PCEN 1", "EL1PCTEN 0", doc="D24.10.2, layout when !ELIsInHost(EL2)")
CNTHCTL_EL2 = reg("CNTHCTL_EL2", (3, 4, 14, 1, 0), "EL1PTEN 11", "EL1PCTEN 10",
                  *CNTKCTL_FIELDS, reset=CNTHCTL_EL2_NVHE.make(EL1PCEN=1, EL1PCTEN=1),
                  doc="D24.10.2, layout when ELIsInHost(EL2); it covers every stored bit, so "
                      "it is the storage layout too (the other layout is CNTHCTL_EL2_NVHE)")

TIMERS = ("CNTP", "CNTV", "CNTHP", "CNTHV")
"""The timers, in the order of :data:`IRQ_OUTPUTS`: EL1 physical, EL1 virtual, EL2 physical,
EL2 virtual (FEAT_VHE) (D12.2.4, Tables D12-1 and D12-2)."""
IRQ_OUTPUTS = ("cntp", "cntv", "cnthp", "cnthv")
"""Interrupt outputs, named as in ``BoardSpec.ppis``."""


def sign_extend32(value: int) -> int:
    """``SignExtend(value<31:0>, 64)`` as a Python int (may be negative)."""
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value & 0x8000_0000 else value


def timer_output(ctl: int, cval: int, count: int) -> tuple[bool, bool]:
    """(ISTATUS, interrupt level) of one timer: ``IsTimerConditionMet()`` (J1.3.3.71) gated by
    ENABLE as in ``AArch64.CheckTimerConditions()`` (J1.3.3.67).

    Args:
        ctl: the timer's CTL value (ENABLE, IMASK; ISTATUS is ignored).
        cval: CompareValue (64-bit).
        count: the counter the timer compares, ``PhysicalCountInt() - Offset`` (64-bit).

    The condition is the unsigned 64-bit compare ``count >= cval`` (D12.2.4.1: a CompareValue
    near 2^64 may never be met). ISTATUS = ENABLE && condition (0 while disabled, a permitted
    value of the UNKNOWN); the level is ISTATUS && !IMASK.
    """
    istatus = bool(CTL.get(ctl, "ENABLE")) and (count & MASK64) >= cval
    return istatus, istatus and not CTL.get(ctl, "IMASK")


# ---------------------------------------------------------------- access checks ----------
@dataclass(frozen=True, slots=True)
class TimerAccessContext(AccessContext):
    """:class:`AccessContext` plus the Generic Timer controls the checks read, which this
    device owns (built by :meth:`GenericTimer.access`).

    Attributes:
        cntkctl_el1: CNTKCTL_EL1 (EL0 access to the EL1 timers and counters).
        cnthctl_el2: CNTHCTL_EL2 as stored (its field layout depends on ELIsInHost(EL2)).
    """

    cntkctl_el1: int = 0
    cnthctl_el2: int = 0


_CONTEXT_FIELDS = tuple(f.name for f in fields(AccessContext))


def el_is_in_host(ctx: AccessContext, el: int) -> bool:
    """``ELIsInHost(el)`` (J1.3.3.411) for a PE with FEAT_VHE: EL2 when EL2 is enabled and
    HCR_EL2.E2H == 1; EL0 when also HCR_EL2.TGE == 1; never EL1 or EL3."""
    if el not in (0, 2) or not ctx.el2_enabled or not HCR_EL2.get(ctx.hcr_el2, "E2H"):
        return False
    return el == 2 or HCR_EL2.get(ctx.hcr_el2, "TGE") == 1


def virtual_offset_applies(ctx: AccessContext) -> bool:
    """Whether a read of CNTVCT_EL0 at ``ctx.el`` subtracts CNTVOFF_EL2 (D24.10.28 and
    ``VirtualCounterTimer()``, J1.3.3.77): when EL2 is implemented, except at EL2 with
    ELIsInHost(EL2) (HCR_EL2.E2H == 1) and at EL0 with ELIsInHost(EL0) (E2H == TGE == 1).

    The EL1 virtual timer always compares against ``ticks - CNTVOFF_EL2``
    (``AArch64.CheckTimerConditions()``), whatever the EL."""
    if not ctx.have_el2:
        return False
    return not el_is_in_host(ctx, ctx.el) if ctx.el in (0, 2) else True


def _kctl(ctx: TimerAccessContext, name: str) -> int:
    return CNTKCTL_EL1.get(ctx.cntkctl_el1, name)


def _hctl(ctx: TimerAccessContext, name: str) -> int:
    """Field ``name`` of CNTHCTL_EL2 in the layout in effect (D24.10.2)."""
    layout = CNTHCTL_EL2 if el_is_in_host(ctx, 2) else CNTHCTL_EL2_NVHE
    return layout.get(ctx.cnthctl_el2, name)


def _el0_disabled(ctx: TimerAccessContext) -> Access:
    """An EL0 access disabled by CNTKCTL_EL1: ``if EL2Enabled() && HCR_EL2.TGE == '1' then
    AArch64.SystemAccessTrap(EL2, 0x18) else AArch64.SystemAccessTrap(EL1, 0x18)``."""
    return Access.TRAP_EL2 if ctx.el2_enabled and ctx.tge else Access.TRAP_EL1


def check_cntfrq(ctx: TimerAccessContext, is_read: bool) -> Access:
    """CNTFRQ_EL0 (D24.10.1). MRS at EL0 needs CNTKCTL_EL1.EL0PCTEN or EL0VCTEN (with
    ELIsInHost(EL0): CNTHCTL_EL2's); MSR only at the highest implemented EL, else UNDEFINED."""
    if not is_read:
        highest = 3 if ctx.have_el3 else 2 if ctx.have_el2 else 1
        return Access.OK if ctx.el == highest else Access.UNDEFINED
    if ctx.el == 0:
        if not el_is_in_host(ctx, 0):
            if not (_kctl(ctx, "EL0PCTEN") or _kctl(ctx, "EL0VCTEN")):
                return _el0_disabled(ctx)
        elif not (_hctl(ctx, "EL0PCTEN") or _hctl(ctx, "EL0VCTEN")):
            return Access.TRAP_EL2
    return Access.OK


def check_cntpct(ctx: TimerAccessContext, is_read: bool) -> Access:
    """CNTPCT_EL0 (D24.10.19), read-only. EL0: CNTKCTL_EL1.EL0PCTEN, then CNTHCTL_EL2.EL1PCTEN
    (bit 0, or bit 10 with ELIsInHost(EL2) and TGE == 0), then with ELIsInHost(EL0)
    CNTHCTL_EL2.EL0PCTEN. EL1: CNTHCTL_EL2.EL1PCTEN when EL2 is enabled.

    QEMU 7.2 differs at EL0 with HCR_EL2.E2H == 0: it tests CNTHCTL_EL2.EL1PCEN (bit 1) instead
    of EL1PCTEN (bit 0) (measured: tests/baremetal/timer_access.S cases 0xd16, 0xd18)."""
    if not is_read:
        return Access.UNDEFINED
    host0, host2 = el_is_in_host(ctx, 0), el_is_in_host(ctx, 2)
    if ctx.el == 0:
        if not host0 and not _kctl(ctx, "EL0PCTEN"):
            return _el0_disabled(ctx)
        if ctx.el2_enabled and not host2 and not _hctl(ctx, "EL1PCTEN"):
            return Access.TRAP_EL2
        if host2 and not ctx.tge and not _hctl(ctx, "EL1PCTEN"):
            return Access.TRAP_EL2
        if host0 and not _hctl(ctx, "EL0PCTEN"):
            return Access.TRAP_EL2
    elif ctx.el == 1 and ctx.el2_enabled and not _hctl(ctx, "EL1PCTEN"):
        return Access.TRAP_EL2
    return Access.OK


def check_cntvct(ctx: TimerAccessContext, is_read: bool) -> Access:
    """CNTVCT_EL0 (D24.10.28), read-only. EL0 needs CNTKCTL_EL1.EL0VCTEN (with
    ELIsInHost(EL0): CNTHCTL_EL2.EL0VCTEN); EL1 and above always read it (no FEAT_ECV)."""
    if not is_read:
        return Access.UNDEFINED
    if ctx.el == 0:
        if not el_is_in_host(ctx, 0):
            if not _kctl(ctx, "EL0VCTEN"):
                return _el0_disabled(ctx)
        elif not _hctl(ctx, "EL0VCTEN"):
            return Access.TRAP_EL2
    return Access.OK


def check_physical_timer(ctx: TimerAccessContext, is_read: bool) -> Access:
    """CNTP_CTL_EL0, CNTP_CVAL_EL0, CNTP_TVAL_EL0 (D24.10.16-.18). EL0: CNTKCTL_EL1.EL0PTEN;
    then, when EL2 is enabled, CNTHCTL_EL2.EL1PCEN (E2H == 0) or EL1PTEN (E2H == 1, TGE == 0);
    with ELIsInHost(EL0), CNTHCTL_EL2.EL0PTEN. EL1: EL1PCEN or (E2H == 1) EL1PTEN."""
    host0, host2 = el_is_in_host(ctx, 0), el_is_in_host(ctx, 2)
    if ctx.el == 0:
        if not host0 and not _kctl(ctx, "EL0PTEN"):
            return _el0_disabled(ctx)
        if ctx.el2_enabled and not host2 and not _hctl(ctx, "EL1PCEN"):
            return Access.TRAP_EL2
        if host2 and not ctx.tge and not _hctl(ctx, "EL1PTEN"):
            return Access.TRAP_EL2
        if host0 and not _hctl(ctx, "EL0PTEN"):
            return Access.TRAP_EL2
    elif ctx.el == 1:
        if ctx.el2_enabled and not host2 and not _hctl(ctx, "EL1PCEN"):
            return Access.TRAP_EL2
        if host2 and not _hctl(ctx, "EL1PTEN"):
            return Access.TRAP_EL2
    return Access.OK


def check_virtual_timer(ctx: TimerAccessContext, is_read: bool) -> Access:
    """CNTV_CTL_EL0, CNTV_CVAL_EL0, CNTV_TVAL_EL0 (D24.10.25-.27). EL0 needs
    CNTKCTL_EL1.EL0VTEN (with ELIsInHost(EL0): CNTHCTL_EL2.EL0VTEN); EL1 and above always
    (CNTHCTL_EL2.EL1TVT is FEAT_ECV)."""
    if ctx.el == 0:
        if not el_is_in_host(ctx, 0):
            if not _kctl(ctx, "EL0VTEN"):
                return _el0_disabled(ctx)
        elif not _hctl(ctx, "EL0VTEN"):
            return Access.TRAP_EL2
    return Access.OK


def check_el1_register(ctx: TimerAccessContext, is_read: bool) -> Access:
    """CNTKCTL_EL1 (D24.10.15): UNDEFINED at EL0."""
    return Access.UNDEFINED if ctx.el == 0 else Access.OK


def check_el2_register(ctx: TimerAccessContext, is_read: bool) -> Access:
    """CNTHCTL_EL2, CNTVOFF_EL2, CNTHP_*_EL2, CNTHV_*_EL2 (D24.10.2-.11, .30): UNDEFINED at
    EL0 and EL1 (the FEAT_NV traps to EL2 do not exist without FEAT_NV)."""
    return Access.UNDEFINED if ctx.el < 2 else Access.OK


def check_el02_alias(ctx: TimerAccessContext, is_read: bool) -> Access:
    """CNTKCTL_EL12, CNTP_*_EL02, CNTV_*_EL02 (FEAT_VHE; D24.10.15-.18, .25-.27): at EL2 and
    EL3 only, and only when ELIsInHost(EL2); UNDEFINED otherwise."""
    return Access.OK if ctx.el >= 2 and el_is_in_host(ctx, 2) else Access.UNDEFINED


# ---------------------------------------------------------------- the register table -----
def _timer_registers(prefix: str, crm: int, suffix: str, op1: int,
                     check: Callable[[TimerAccessContext, bool], Access], doc: str
                     ) -> list[RegisterSpec]:
    """<prefix>_TVAL/_CTL/_CVAL<suffix> at (3, op1, 14, crm, 0/1/2)."""
    return [
        reg(f"{prefix}_TVAL{suffix}", (3, op1, 14, crm, 0), *TVAL_FIELDS, check=check,
            on_read="_read_tval", on_write="_write_tval", doc=doc),
        reg(f"{prefix}_CTL{suffix}", (3, op1, 14, crm, 1), *CTL_FIELDS, check=check,
            on_read="_read_ctl", on_write="_write_ctl", doc=doc),
        reg(f"{prefix}_CVAL{suffix}", (3, op1, 14, crm, 2), *CVAL_FIELDS, check=check,
            on_read="_read_cval", on_write="_write_cval", doc=doc),
    ]


TIMER_REGISTERS = RegisterTable([
    reg("CNTFRQ_EL0", (3, 3, 14, 0, 0), "ClockFreq 31:0", reset=CNTFRQ_HZ, check=check_cntfrq,
        doc="D24.10.1"),
    reg("CNTPCT_EL0", (3, 3, 14, 0, 1), "PhysicalCount 63:0 RO", read_only=True,
        check=check_cntpct, on_read="_read_cntpct", doc="D24.10.19"),
    reg("CNTVCT_EL0", (3, 3, 14, 0, 2), "VirtualCount 63:0 RO", read_only=True,
        check=check_cntvct, on_read="_read_cntvct", doc="D24.10.28"),
    replace(CNTKCTL_EL1, check=check_el1_register),
    *_timer_registers("CNTP", 2, "_EL0", 3, check_physical_timer, "D24.10.16-.18"),
    *_timer_registers("CNTV", 3, "_EL0", 3, check_virtual_timer, "D24.10.25-.27"),
    reg("CNTVOFF_EL2", (3, 4, 14, 0, 3), "VOffset 63:0", check=check_el2_register,
        on_write="_write_cntvoff", doc="D24.10.30"),
    replace(CNTHCTL_EL2, check=check_el2_register),
    *_timer_registers("CNTHP", 2, "_EL2", 4, check_el2_register, "D24.10.3-.5"),
    *_timer_registers("CNTHV", 3, "_EL2", 4, check_el2_register, "D24.10.9-.11"),
    reg("CNTKCTL_EL12", (3, 5, 14, 1, 0), *CNTKCTL_FIELDS, check=check_el02_alias,
        doc="D24.10.15 (CNTKCTL_EL1 from EL2, FEAT_VHE)"),
    *_timer_registers("CNTP", 2, "_EL02", 5, check_el02_alias, "D24.10.16-.18 (FEAT_VHE)"),
    *_timer_registers("CNTV", 3, "_EL02", 5, check_el02_alias, "D24.10.25-.27 (FEAT_VHE)"),
])
"""Every Generic Timer register the device owns, by name and by encoding."""

TIMER_STATE_REGISTERS = frozenset(
    s.name for s in TIMER_REGISTERS if s.on_write in ("_write_tval", "_write_ctl", "_write_cval"))
"""Each timer's TVAL, CTL and CVAL registers (every accessor: _EL0, _EL2, _EL02)."""

CTL = TIMER_REGISTERS["CNTP_CTL_EL0"]
"""The layout of every timer's control register (CTL_FIELDS)."""

_CLOCK_FREQ = TIMER_REGISTERS["CNTFRQ_EL0"].field("ClockFreq")
MAX_COUNTER_HZ = _CLOCK_FREQ.mask >> _CLOCK_FREQ.lsb
"""The highest counter frequency CNTFRQ_EL0.ClockFreq holds (Hz; D24.10.1)."""

EL2_REGISTERS = frozenset(s.name for s in TIMER_REGISTERS if s.check is check_el2_register)
"""Registers that are RES0 from EL3 when EL2 is not implemented (D24.10.2 "Configuration")."""

ALIASES = {s.name: s.name.replace("_EL02", "_EL0").replace("_EL12", "_EL1")
           for s in TIMER_REGISTERS if s.check is check_el02_alias}
"""The *_EL02 / *_EL12 accessors and the EL0/EL1 registers they reach (FEAT_VHE)."""

HOST_REDIRECT = {f"CNT{t}_{r}_EL0": f"CNTH{t}_{r}_EL2" for t in "PV" for r in ("TVAL", "CTL",
                                                                            "CVAL")}
"""With ELIsInHost(EL0) at EL0 or ELIsInHost(EL2) at EL2, the EL1 timer registers reach the
EL2 timers (D24.10.16-.18, .25-.27: ``X[t, 64] = CNTHP_CTL_EL2`` ...)."""


def redirect(name: str, ctx: AccessContext) -> str:
    """The register an access named ``name`` reaches at ``ctx`` (FEAT_VHE): *_EL02/*_EL12
    reach the EL0/EL1 registers; in a host (EL2 with E2H == 1, EL0 with E2H and TGE == 1)
    CNTP_*/CNTV_* reach CNTHP_*/CNTHV_*, and CNTKCTL_EL1 at EL2 reaches CNTHCTL_EL2."""
    if name in ALIASES:
        return ALIASES[name]
    if ctx.el in (0, 2) and el_is_in_host(ctx, ctx.el):
        if name == "CNTKCTL_EL1" and ctx.el == 2:
            return "CNTHCTL_EL2"
        return HOST_REDIRECT.get(name, name)
    return name


# ---------------------------------------------------------------- the device -------------
@dataclass
class _Timer:
    """One timer's state: CTL (ENABLE, IMASK; ISTATUS is computed on read), CompareValue and
    its pending clock event (its output is ``GenericTimer.irqs``)."""

    name: str
    ctl: int = 0
    cval: int = 0
    event: Event | None = None


_TIMER_OF = {s.name: s.name.split("_")[0] for s in TIMER_REGISTERS
             if s.name.split("_")[0] in TIMERS and s.name not in ALIASES}


class GenericTimer(Device, kind="generic_timer"):
    """The Generic Timer of one PE (module docstring). A system-register owner: size 0, no
    memory-mapped region; the machine routes MRS/MSR of :data:`TIMER_REGISTERS` here::

        spec = timer.lookup((3, 3, 14, 3, 1))                 # CNTV_CTL_EL0
        verdict = timer.access(spec.name, ctx, is_read=False)  # not spec.check(ctx, ...)
        if verdict is Access.OK:
            timer.sysreg_write(spec.name, value, ctx)

    Board description: ``DeviceSpec("generic_timer", "timer", 0, 0, irqs=(("cntp", 30),
    ("cntv", 27), ("cnthp", 26), ("cnthv", 28)))``, or :meth:`for_board` from
    ``BoardSpec.ppis``. The machine must have accounted the retired instructions up to the
    accessing instruction before a counter or timer access (``clock.ticks()`` is read).

    Attributes:
        irqs: the four output lines by name (:data:`IRQ_OUTPUTS`), levels per
            :func:`timer_output`.
    """

    SYSREGS: ClassVar[RegisterTable] = TIMER_REGISTERS
    IRQ_OUTPUTS = IRQ_OUTPUTS
    via_undef = False
    """QEMU knows these registers: the machine answers them from its MRS/MSR instruction hooks
    (:class:`spe_emu.platform.sysregs.SysregOwner`)..."""
    PER_PE = True
    """Each PE has its own (a board builds one per PE, wired to that PE's PPIs)."""
    COUNTER_READ_NEUTRAL = TIMER_STATE_REGISTERS
    """A timer's own TVAL/CTL/CVAL registers: their writes change no counter read (whether
    CNTPCT_EL0/CNTVCT_EL0 may be read depends on CNTKCTL_EL1, CNTHCTL_EL2 and the EL,
    CNTVCT_EL0's value on CNTVOFF_EL2; D24.10.19, D24.10.28)."""
    UNKNOWN_TO_QEMU = frozenset({"CNTKCTL_EL12"})
    """... except these, which UNDEF in Unicorn's QEMU 5.0 (measured: every timer register
    read at EL2 with HCR_EL2.E2H = 1), so they are emulated from the UNDEF hook like the SPE
    registers (the verdict is then the table's own)."""

    @staticmethod
    def present() -> bool:
        return True

    @classmethod
    def for_board(cls, board: BoardSpec, platform: "Platform", name: str = "timer"
                  ) -> "GenericTimer":
        """The PE's Generic Timer with its outputs wired as ``board.ppis`` names them."""
        spec = DeviceSpec(cls.kind, name, 0, 0,
                          irqs=tuple((out, board.ppi(out)) for out in IRQ_OUTPUTS))
        return cls(spec, platform)

    def __init__(self, spec: DeviceSpec, platform: "Platform"):
        self._timers: dict[str, _Timer] = {}
        self._sysregs: dict[str, int] = {}
        self._context_key: tuple | None = None  # (AccessContext, CNTKCTL_EL1, CNTHCTL_EL2)
        self._context: TimerAccessContext | None = None
        super().__init__(spec, platform)

    # -- life cycle ---------------------------------------------------------------------
    def reset(self) -> None:
        """Every register to its reset value (module docstring), events cancelled, outputs
        low."""
        super().reset()
        for timer in self._timers.values():
            self.platform.clock.cancel(timer.event)
        self._timers = {name: _Timer(name) for name in TIMERS}
        self._sysregs = {name: TIMER_REGISTERS[name].reset
                         for name in ("CNTFRQ_EL0", "CNTKCTL_EL1", "CNTHCTL_EL2", "CNTVOFF_EL2")}
        # (the firmware's value: the board's counter frequency, BoardSpec.counter_hz)
        self._sysregs["CNTFRQ_EL0"] = self.platform.clock.hz
        for line in self.irqs.values():
            line.set(False)

    # -- the system-register interface --------------------------------------------------
    @staticmethod
    def lookup(enc: tuple[int, int, int, int, int]) -> RegisterSpec | None:
        """The register at ``(op0, op1, CRn, CRm, op2)``, or None (not a timer register)."""
        return TIMER_REGISTERS.by_encoding(enc)

    def context(self, ctx: AccessContext) -> TimerAccessContext:
        """``ctx`` with this device's CNTKCTL_EL1 and CNTHCTL_EL2: the access checks' input
        (the last one built is kept: every timer access of an interrupt handler asks again)."""
        key = (ctx, self._sysregs["CNTKCTL_EL1"], self._sysregs["CNTHCTL_EL2"])
        if self._context_key != key:
            self._context_key = key
            self._context = TimerAccessContext(**{f: getattr(ctx, f) for f in _CONTEXT_FIELDS},
                                               cntkctl_el1=key[1], cnthctl_el2=key[2])
        return self._context

    def access(self, name: str, ctx: AccessContext, is_read: bool) -> Access:
        """The verdict for an MRS (``is_read``) or MSR of register ``name`` at ``ctx``."""
        return self._spec(name).check(self.context(ctx), is_read)

    def sysreg_read(self, name: str, ctx: AccessContext) -> int:
        """MRS of register ``name`` whose access check passed: the 64-bit value at ``ctx``."""
        self._spec(name)
        name = redirect(name, ctx)
        if name in EL2_REGISTERS and not ctx.have_el2:
            return 0
        spec = TIMER_REGISTERS[name]
        if spec.on_read is not None:
            return getattr(self, spec.on_read)(spec, ctx)
        return self._sysregs[name]

    def sysreg_write(self, name: str, value: int, ctx: AccessContext) -> None:
        """MSR of register ``name`` whose access check passed. Raises :class:`DeviceError` for
        a read-only register (its check makes a write UNDEFINED)."""
        if self._spec(name).read_only:
            raise DeviceError(f"{self.name}: {name} is read-only (its check UNDEFs writes)")
        name = redirect(name, ctx)
        if name in EL2_REGISTERS and not ctx.have_el2:
            return
        spec = TIMER_REGISTERS[name]
        if spec.on_write is not None:
            getattr(self, spec.on_write)(spec, value & MASK64, ctx)
        else:
            self._sysregs[name] = spec.apply_write(self._sysregs[name], value)

    def _spec(self, name: str) -> RegisterSpec:
        if name not in TIMER_REGISTERS:
            raise DeviceError(f"{self.name}: no Generic Timer register {name!r}")
        return TIMER_REGISTERS[name]

    # -- counters and the timer model ---------------------------------------------------
    def physical_count(self) -> int:
        """``PhysicalCountInt()``: the system counter now (ticks)."""
        return self.platform.clock.ticks() & MASK64

    def timer_count(self, timer: str, now: int | None = None) -> int:
        """The count ``timer`` compares (``PhysicalCountInt() - Offset``, D12.2.4.1): the
        physical count, minus CNTVOFF_EL2 for the EL1 virtual timer."""
        now = self.physical_count() if now is None else now
        offset = self._sysregs["CNTVOFF_EL2"] if timer == "CNTV" else 0
        return (now - offset) & MASK64

    def output(self, timer: str) -> tuple[bool, bool]:
        """(ISTATUS, interrupt level) of ``timer`` now."""
        t = self._timers[timer]
        return timer_output(t.ctl, t.cval, self.timer_count(timer))

    def pending_event(self, timer: str) -> Event | None:
        """The clock event pending for ``timer`` (None: its output cannot rise by itself)."""
        return self._timers[timer].event

    def _update(self, timer: str, now: int | None = None) -> bool:
        """Recompute ``timer``'s output line and its one pending event; returns whether either
        changed. An event is pending exactly while the timer is enabled and unmasked with its
        condition not yet met: it fires at the physical tick where the compared count reaches
        CompareValue (``now + (CVAL - count)``)."""
        t = self._timers[timer]
        now = self.physical_count() if now is None else now
        count = self.timer_count(timer, now)
        _, level = timer_output(t.ctl, t.cval, count)
        line = self.irqs[IRQ_OUTPUTS[TIMERS.index(timer)]]
        changed = line.level != level
        line.set(level)
        deadline = None
        if CTL.get(t.ctl, "ENABLE") and not CTL.get(t.ctl, "IMASK") and count < t.cval:
            deadline = now + (t.cval - count)
            if deadline >= NEVER:
                deadline = None  # beyond the counter's range: never met before it wraps
        if t.event is not None and t.event.when == deadline and not t.event.cancelled:
            return changed
        if t.event is None and deadline is None:
            return changed
        self.platform.clock.cancel(t.event)
        t.event = None if deadline is None else self.platform.clock.schedule(
            deadline, f"{self.name}.{timer}", lambda when, timer=timer: self._fire(timer, when))
        return True

    def _fire(self, timer: str, now: int) -> None:
        self._timers[timer].event = None
        self._update(timer, now)
        self.changed()

    def _written(self, timer: str) -> None:
        if self._update(timer):
            self.changed()

    # -- register hooks (named in TIMER_REGISTERS) --------------------------------------
    def _read_cntpct(self, spec: RegisterSpec, ctx: AccessContext) -> int:
        return self.physical_count()

    def _read_cntvct(self, spec: RegisterSpec, ctx: AccessContext) -> int:
        """CNTVCT_EL0 at ``ctx.el`` (:func:`virtual_offset_applies`)."""
        offset = self._sysregs["CNTVOFF_EL2"] if virtual_offset_applies(ctx) else 0
        return (self.physical_count() - offset) & MASK64

    def _read_ctl(self, spec: RegisterSpec, ctx: AccessContext) -> int:
        timer = _TIMER_OF[spec.name]
        istatus, _ = self.output(timer)
        return CTL.set(self._timers[timer].ctl, "ISTATUS", int(istatus))

    def ctl_parts(self, name: str, ctx: AccessContext) -> tuple[int, int, int] | None:
        """What an MRS of the CTL register ``name`` (CNTP_CTL_EL0, CNTV_CTL_EL0, ...) at
        ``ctx`` reads, in parts, for a native reader (the machine's counter-read table): (the
        CTL value without ISTATUS, CompareValue, the count the timer compares now) of the
        timer the access reaches (redirected as :meth:`sysreg_read`); the read is that CTL
        with ISTATUS = ENABLE and count >= CompareValue (:func:`timer_output`), the count
        advancing with the counter. None: the read is not of a timer (an EL2 timer register
        without EL2 reads 0)."""
        name = redirect(name, ctx)
        if name in EL2_REGISTERS and not ctx.have_el2:
            return None
        timer = _TIMER_OF[name]
        t = self._timers[timer]
        return CTL.set(t.ctl, "ISTATUS", 0), t.cval, self.timer_count(timer)

    def _read_tval(self, spec: RegisterSpec, ctx: AccessContext) -> int:
        """``ZeroExtend((CompareValue - count)<31:0>, 64)`` (D12.2.4.2)."""
        timer = _TIMER_OF[spec.name]
        return (self._timers[timer].cval - self.timer_count(timer)) & 0xFFFF_FFFF

    def _write_tval(self, spec: RegisterSpec, value: int, ctx: AccessContext) -> None:
        """CompareValue = count + SignExtend(TimerValue<31:0>) (D12.2.4.2)."""
        timer = _TIMER_OF[spec.name]
        t = self._timers[timer]
        t.cval = (self.timer_count(timer) + sign_extend32(value)) & MASK64
        self._written(timer)

    def _write_ctl(self, spec: RegisterSpec, value: int, ctx: AccessContext) -> None:
        """ENABLE and IMASK (ISTATUS is read-only: computed by every read)."""
        timer = _TIMER_OF[spec.name]
        self._timers[timer].ctl = CTL.apply_write(self._timers[timer].ctl, value)
        self._written(timer)

    def _read_cval(self, spec: RegisterSpec, ctx: AccessContext) -> int:
        return self._timers[_TIMER_OF[spec.name]].cval

    def _write_cval(self, spec: RegisterSpec, value: int, ctx: AccessContext) -> None:
        timer = _TIMER_OF[spec.name]
        self._timers[timer].cval = value
        self._written(timer)

    def _write_cntvoff(self, spec: RegisterSpec, value: int, ctx: AccessContext) -> None:
        self._sysregs["CNTVOFF_EL2"] = value
        self._written("CNTV")
