"""FEAT_SPE_EXC: where Profiling Buffer management events are recorded (PMBSR_EL1, PMBSR_EL2 or
PMBSR_EL3), whether PMBIRQ is driven, and the SPE Profiling exception's enable, masking and
target Exception level (Arm ARM D17.8, rule RHJXHT and Tables D17-5 to D17-10; pseudocode
``ReportSPEEvent()``, ``SPEInterruptEnabled()``, ``SPEProfilingStopped()``,
``CheckForSPEException()``, ``EffectivePMSCR_EL1_EE()``, ``EffectivePMSCR_EL2_EE()``).

Every function is pure: it reads an :class:`~spe_emu.arch.context.AccessContext` (SCR_EL3,
HCR_EL2, MDCR_EL2, MDCR_EL3) and an :class:`ExcState` (PMSCR_EL1/EL2 and the PMBSR_ELx.S bits,
read through the SPE register table, and PSTATE.PM), so the tables can be checked row by row
without a running PE (tests/test_spe_exc.py).

Model choices (docs/model.md):

- PMSCR_EL1.EE 0b01 / 0b10 (reserved without FEAT_NV) behave as FEAT_NV defines them for the
  exception and PMBIRQ: as 0b00 and 0b11 (``EffectivePMSCR_EL1_EE()``'s ``ee<0> = ee<1>``).
- Secure EL2 is not implemented: EL2 is enabled in the current Security state when SCR_EL3.NS
  is 1 (or EL3 is not implemented).
- No FEAT_RME: GPC faults and GPFs never occur in a run; the routing of their management
  events (Table D17-5) is implemented for completeness and checked by the tests.
- When several SPE Profiling exceptions are pending and unmasked (an IMPLEMENTATION DEFINED
  priority), the highest target Exception level is taken first.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arch.context import HCR_EL2, MDCR_EL3, SCR_EL3, AccessContext

EE_DISABLED, EE_DELEGATED, EE_ENABLED, EE_TRAP_ALL = 0b00, 0b01, 0b10, 0b11
"""PMSCR_EL2.EE / MDCR_EL3.PMSEE encodings (Arm ARM D24.7.9, D24.3 MDCR_EL3.PMSEE);
PMSCR_EL1.EE uses 0b00 (disabled) and 0b11 (enabled)."""

EC_OTHER = 0b000000
EC_GPC = 0b011110
EC_STAGE1 = 0b100100
EC_STAGE2 = 0b100101
# FSC values that ReportSPEEvent() classifies (Arm ARM PMBSR_ELx.FSC): Granule Protection
# Faults (0b10001x, 0b1001xx, 0b101000) and synchronous External aborts (0b010000 not on a walk,
# 0b01001x / 0b0101xx on a walk, 0b011011 parity/ECC on a walk, level -1).
GPF_FSCS = frozenset({0b100010, 0b100011, 0b100100, 0b100101, 0b100110, 0b100111, 0b101000})
SYNC_EXTERNAL_FSCS = frozenset({0b010000, 0b010010, 0b010011, 0b010100, 0b010101, 0b010110,
                                0b010111, 0b011011})

MASKED_BY_PM = "B"
"""Table D17-8..10 cell: enabled, masked by PSTATE.PM (pending)."""
MASKED = "C"
"""Table D17-8..10 cell: enabled, masked whatever PSTATE.PM (pending)."""


@dataclass(frozen=True)
class ExcState:
    """The SPE state the functions read, as field values.

    Attributes:
        implemented: FEAT_SPE_EXC (ID_AA64DFR2_EL1.SPE_EXC == 1).
        ee1, ke1: PMSCR_EL1.{EE, KE}; ee2, ke2: PMSCR_EL2.{EE, KE}.
        s1, s2, s3: PMBSR_EL1.S, PMBSR_EL2.S, PMBSR_EL3.S.
        pm: PSTATE.PM.
        owner_secure, owner_el: ``ProfilingBufferOwner()``.
    """

    implemented: bool
    ee1: int = 0
    ke1: int = 0
    ee2: int = 0
    ke2: int = 0
    s1: int = 0
    s2: int = 0
    s3: int = 0
    pm: int = 0
    owner_secure: bool = False
    owner_el: int = 1


def effective_pmsee(ctx: AccessContext) -> int:
    """MDCR_EL3.PMSEE; 0b01 when EL3 is not implemented (Arm ARM MDCR_EL3.PMSEE)."""
    return MDCR_EL3.get(ctx.mdcr_el3, "PMSEE") if ctx.have_el3 else EE_DELEGATED


def effective_pmscr_el2_ee(ctx: AccessContext, st: ExcState) -> int:
    """``EffectivePMSCR_EL2_EE()``: 0b00 without FEAT_SPE_EXC or with MDCR_EL3.PMSEE == 0b00;
    0b01 when EL2 is not implemented or not enabled in the current Security state."""
    if not st.implemented or effective_pmsee(ctx) == EE_DISABLED:
        return EE_DISABLED
    return st.ee2 if ctx.el2_enabled else EE_DELEGATED


def effective_pmscr_el1_ee(ctx: AccessContext, st: ExcState) -> int:
    """``EffectivePMSCR_EL1_EE()``: 0b00 when the effective PMSCR_EL2.EE is 0b00; the reserved
    values 0b01 / 0b10 behave as 0b00 / 0b11 (module doc)."""
    if effective_pmscr_el2_ee(ctx, st) == EE_DISABLED:
        return EE_DISABLED
    return EE_TRAP_ALL if st.ee1 & 0b10 else EE_DISABLED


def spe_interrupt_enabled(ctx: AccessContext, st: ExcState) -> bool:
    """``SPEInterruptEnabled()`` (rule RTSJRP): PMBIRQ is driven from PMBSR_EL1.S."""
    return effective_pmscr_el1_ee(ctx, st) == EE_DISABLED


def pmbirq(ctx: AccessContext, st: ExcState) -> bool:
    """The PMBIRQ level: PMBSR_EL1.S when the interrupt is enabled, else LOW."""
    return bool(st.s1) and spe_interrupt_enabled(ctx, st)


def profiling_stopped(ctx: AccessContext, st: ExcState) -> bool:
    """``SPEProfilingStopped()``: a PMBSR_ELx.S that stops profiling is 1 (PMBSR_EL3.S when
    MDCR_EL3.PMSEE is 0b1x, PMBSR_EL2.S when the effective PMSCR_EL2.EE is 0b1x)."""
    if st.s1:
        return True
    if not st.implemented:
        return False
    if ctx.have_el3 and effective_pmsee(ctx) & 0b10 and st.s3:
        return True
    return bool(effective_pmscr_el2_ee(ctx, st) & 0b10 and st.s2)


def report_spe_event(ec: int, fsc: int, ctx: AccessContext, st: ExcState) -> int:
    """``ReportSPEEvent()``: the Exception level x of the PMBSR_ELx that records a management
    event of class ``ec`` (PMBSR_ELx.EC) and, for an abort, fault status ``fsc``: Tables D17-5
    (Granule Protection Checks), D17-6 (External aborts) and D17-7 (the others). Always 1
    without FEAT_SPE_EXC."""
    if not st.implemented:
        return 1
    s1fault, s2fault = ec == EC_STAGE1, ec == EC_STAGE2
    gpcfault = ec == EC_GPC
    gpfault = (s1fault or s2fault) and fsc in GPF_FSCS
    sync_ext_abort = (s1fault or s2fault) and fsc in SYNC_EXTERNAL_FSCS
    pmsee = effective_pmsee(ctx)
    if ctx.have_el3 and pmsee & 0b10 and (
            pmsee == EE_TRAP_ALL or gpcfault
            or (gpfault and SCR_EL3.get(ctx.scr_el3, "GPF"))
            or (sync_ext_abort and SCR_EL3.get(ctx.scr_el3, "EA"))):
        return 3
    if effective_pmscr_el2_ee(ctx, st) & 0b10 and (
            st.ee2 == EE_TRAP_ALL or (s1fault and st.owner_el == 2) or s2fault or gpcfault
            or (gpfault and HCR_EL2.get(ctx.hcr_el2, "GPF"))
            or (sync_ext_abort and HCR_EL2.get(ctx.hcr_el2, "TEA"))):
        return 2
    return 1


def exception_cell(x: int, ctx: AccessContext, st: ExcState) -> int | str | None:
    """The SPE Profiling exception that PMBSR_ELx.S == 1 (``x`` = 1, 2, 3) makes when the PE
    is at ``ctx.el``: a cell of Tables D17-8 (x = 1), D17-9 (x = 2) and D17-10 (x = 3), as
    ``CheckForSPEException()`` decides it: None (disabled), :data:`MASKED_BY_PM` ("B"),
    :data:`MASKED` ("C") or the target Exception level (taken)."""
    if not st.implemented:
        return None
    in_owning = st.owner_secure == ctx.is_secure
    el = ctx.el
    if x == 3:
        if not (ctx.have_el3 and effective_pmsee(ctx) & 0b10):
            return None
        return MASKED if el == 3 else 3
    if x == 2:
        if not effective_pmscr_el2_ee(ctx, st) & 0b10:
            return None
        if not in_owning or el == 3:
            return MASKED
        if el == 2:
            if st.ee2 != EE_TRAP_ALL or not st.ke2:
                return MASKED
            return MASKED_BY_PM if st.pm else 2
        return 2
    if effective_pmscr_el1_ee(ctx, st) != EE_TRAP_ALL:
        return None
    target = 2 if ctx.tge else 1
    if not in_owning or el >= 2:
        return MASKED
    if el == 1:
        if not st.ke1:
            return MASKED
        return MASKED_BY_PM if st.pm else target
    return target


def pending_exception(ctx: AccessContext, st: ExcState) -> int | None:
    """``CheckForSPEException()``: the Exception level an SPE Profiling exception is taken to
    now (a PMBSR_ELx.S is 1, the exception enabled and unmasked), or None; the highest target
    first when several are (module doc)."""
    targets = [cell for x, s in ((3, st.s3), (2, st.s2), (1, st.s1)) if s
               for cell in (exception_cell(x, ctx, st),) if isinstance(cell, int)]
    return max(targets) if targets else None


ESR_EC_PROFILING = 0b111101
"""ESR_ELx.EC of a Profiling exception (Arm ARM ESR_ELx; ``TakeProfilingException()``: taken
at offset 0x0 of the vector table, the preferred return address the next instruction)."""
ISS_SPE_EXCEPTION = 0b000010
"""ESR_ELx.ISS of an SPE Profiling exception: ISS[5:1] = 0b00001 (Profiling Buffer management
event), ISS[0] = 0 (asynchronous)."""
