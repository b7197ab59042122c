"""The SPE system registers, declared once (SPE supplement §4.1 Table 7, §4.3).

:func:`spe_registers` builds the table for a given :class:`SpeConfig`; the RES0 masks that
depend on the implementation (PMSICR_EL1.ECOUNT, PMSEVFR_EL1 events) come from the
configuration, as data. Access checks are the pure pseudocode functions of §3.2.3 and §3.4.6.
"""

from __future__ import annotations

from ..arch.context import HCR_EL2, MDCR_EL2, MDCR_EL3, AccessContext
from ..sysreg import Access, RegisterTable, Replan, parse_fields, reg
from .config import FEATURES, PMSVER_V1P2, SpeConfig


def _el3_nspb_trap(ctx: AccessContext) -> bool:
    """``HaveEL(EL3) && PSTATE.EL != EL3 && MDCR_EL3.NSPB != SCR_EL3.NS:'1'``."""
    return ctx.have_el3 and ctx.el != 3 and MDCR_EL3.get(ctx.mdcr_el3, "NSPB") != (ctx.ns << 1 | 1)


def check_statistical_profiling_access(ctx: AccessContext, is_read: bool) -> Access:
    """``CheckStatisticalProfilingAccess()`` (§3.2.3): PMSCR_EL1, PMSICR_EL1, PMSIRR_EL1,
    PMSFCR_EL1, PMSEVFR_EL1, PMSLATFR_EL1, PMSIDR_EL1. MDCR_EL2.TPMS traps EL1 to EL2;
    MDCR_EL3.NSPB traps to EL3."""
    if ctx.el == 0:
        return Access.UNDEFINED
    if ctx.have_el2 and not ctx.is_secure and ctx.el == 1 and MDCR_EL2.get(ctx.mdcr_el2, "TPMS"):
        return Access.TRAP_EL2
    if _el3_nspb_trap(ctx):
        return Access.TRAP_EL3
    return Access.OK


def check_profiling_buffer_access(ctx: AccessContext, is_read: bool) -> Access:
    """``CheckProfilingBufferAccess()`` (§3.4.6): PMBLIMITR_EL1, PMBPTR_EL1, PMBSR_EL1.
    MDCR_EL2.E2PB<0> == 0 traps EL1 to EL2; MDCR_EL3.NSPB traps to EL3."""
    if ctx.el == 0:
        return Access.UNDEFINED
    if (ctx.have_el2 and not ctx.is_secure and ctx.el == 1
            and MDCR_EL2.get(ctx.mdcr_el2, "E2PB") & 1 == 0):
        return Access.TRAP_EL2
    if _el3_nspb_trap(ctx):
        return Access.TRAP_EL3
    return Access.OK


def check_pmbidr_access(ctx: AccessContext, is_read: bool) -> Access:
    """PMBIDR_EL1 (§4.3.1): UNDEFINED at EL0, no traps."""
    return Access.UNDEFINED if ctx.el == 0 else Access.OK


def check_pmscr_el2_access(ctx: AccessContext, is_read: bool) -> Access:
    """PMSCR_EL2 (§4.3.7): UNDEFINED at EL1 and EL0; trapped to EL3 from EL2 unless
    MDCR_EL3.NSPB == 0b11."""
    if ctx.el < 2:
        return Access.UNDEFINED
    if ctx.el == 2 and ctx.have_el3 and MDCR_EL3.get(ctx.mdcr_el3, "NSPB") != 0b11:
        return Access.TRAP_EL3
    return Access.OK


def check_pmscr_el12_access(ctx: AccessContext, is_read: bool) -> Access:
    """PMSCR_EL12 (§4.3.6): UNDEFINED at EL1 and EL0, when HCR_EL2.E2H == 0, and in Secure
    state; trapped to EL3 from EL2 unless MDCR_EL3.NSPB == 0b11."""
    if ctx.el < 2 or not HCR_EL2.get(ctx.hcr_el2, "E2H") or (ctx.have_el3 and ctx.ns == 0):
        return Access.UNDEFINED
    if ctx.el == 2 and ctx.have_el3 and MDCR_EL3.get(ctx.mdcr_el3, "NSPB") != 0b11:
        return Access.TRAP_EL3
    return Access.OK


# Registers reached under another name: PMSCR_EL12 is PMSCR_EL1 (§4.3.6).
ALIASES = {"PMSCR_EL12": "PMSCR_EL1"}


def redirect(name: str, ctx: AccessContext) -> str:
    """The register an access named ``name`` reaches: with HCR_EL2.E2H == 1, PMSCR_EL1 at EL2
    is PMSCR_EL2 (§4.3.5); PMSCR_EL12 is PMSCR_EL1 (§4.3.6)."""
    if name == "PMSCR_EL1" and ctx.el == 2 and HCR_EL2.get(ctx.hcr_el2, "E2H"):
        return "PMSCR_EL2"
    return ALIASES.get(name, name)


# Sub-layouts of PMBSR_EL1.MSS (§4.3.4): "other buffer management event" and data aborts.
PMBSR_MSS_OTHER = parse_fields("BSC 5:0")
PMBSR_MSS_ABORT = parse_fields("FSC 5:0")
BSC_NOT_FILLED = 0b000000
BSC_FILLED = 0b000001
EC_OTHER = 0b000000
EC_STAGE1_ABORT = 0b100100
EC_STAGE2_ABORT = 0b100101
# PMBLIMITR_EL1.FM (§4.3.2): fill mode, the one mode the supplement defines.
FM_FILL = 0b00

# The PMSEVFR_EL1 bits CollectRecord() compares (§3.2.3): events<63:48,31:24,15:12,7,5,3,1>.
PMSEVFR_FILTERABLE = ((0xFFFF << 48) | (0xFF << 24) | (0xF << 12) | (1 << 7) | (1 << 6)
                      | (1 << 5) | (1 << 3) | (1 << 1))
# Of those, the events this model implements (docs/model.md): E[3], E[5], E[7] are filter
# fields; E[1] (architecturally retired) is RES1 because the model never samples speculative
# operations (§4.3.8).
MODEL_FILTER_EVENTS = ("E7 7", "E5 5", "E3 3")
PMSEVFR_RES1 = 1 << 1
# PMSNEVFR_EL1 (FEAT_SPEv1p2, Arm ARM PMSNEVFR_EL1): the same events, and E[1] (a record is
# discarded when any event selected here is 1; every modelled record has E[1] = 1).
# E[6], Not taken, is a filter field of both with FEAT_SPEv1p2 (Arm ARM PMSEVFR_EL1.E[6];
# Linux arch/arm64/include/asm/sysreg.h PMSEVFR_EL1_RES0_V1P2 makes it writable from v1p2).
V1P2_FILTER_EVENTS = ("E6 6",)


def filter_events(config: SpeConfig) -> tuple[str, ...]:
    """The event fields of PMSEVFR_EL1 that ``config`` implements (those of PMSNEVFR_EL1 add
    E[1])."""
    return MODEL_FILTER_EVENTS + (V1P2_FILTER_EVENTS if config.pmsver >= PMSVER_V1P2 else ())

# PMSIDR_EL1 (Arm ARM PMSIDR_EL1; bit positions as Linux arch/arm64/tools/sysreg). A field
# settable by name takes its SpeConfig attribute from config.FEATURES; the others read as the
# constants of PMSIDR_CONSTANTS: SME and ALTCLK are FEAT_SPE_SME / FEAT_SPE_ALTCLK (no SME in
# the model): 0; Format 0 is the only format.
PMSIDR_FIELDS = ("ALTCLK 31:28 RO", "FPF 27 RO", "EFT 26 RO", "CRR 25 RO", "PBT 24 RO",
                 "Format 23:20 RO", "CountSize 19:16 RO", "MaxSize 15:12 RO", "Interval 11:8 RO",
                 "FDS 7 RO", "FnE 6 RO", "ERnd 5 RO", "LDS 4 RO", "ArchInst 3 RO", "FL 2 RO",
                 "FT 1 RO", "FE 0 RO")
PMSIDR_CONSTANTS = {"ALTCLK": 0, "Format": 0, "FL": 1, "FT": 1, "FE": 1}

# Fields that exist only with a feature (RES0 otherwise): (register, SpeConfig attribute,
# value that implements them, fields). Arm ARM PMSFCR_EL1, PMSLATFR_EL1; Linux
# arch/arm64/tools/sysreg for the bit positions.
FEATURE_FIELDS = (
    ("PMSFCR_EL1", "fne", 1, ("FnE 3",)),
    ("PMSFCR_EL1", "fds", 1, ("FDS 4",)),
    ("PMSFCR_EL1", "eft", 1, ("SIMDm 52", "FPm 51", "STm 50", "LDm 49", "Bm 48", "SIMD 20",
                              "FP 19")),
    ("PMSLATFR_EL1", "count_size_code", 0b0011, ("MINLAT 15:0",)),
    ("PMSCR_EL1", "spe_exc", 1, ("KE 10", "EE 9:8")),     # Arm ARM D24.7.8 (FEAT_SPE_EXC)
    ("PMSCR_EL2", "spe_exc", 1, ("KE 10", "EE 9:8")),     # Arm ARM D24.7.9
)
BASE_FIELDS = {
    "PMSCR_EL1": ("PCT 6", "TS 5", "PA 4", "CX 3", "E1SPE 1", "E0SPE 0"),
    "PMSCR_EL2": ("PCT 6", "TS 5", "PA 4", "CX 3", "E2SPE 1", "E0HSPE 0"),
    "PMSFCR_EL1": ("ST 18", "LD 17", "B 16", "FL 2", "FT 1", "FE 0"),
    "PMSLATFR_EL1": ("MINLAT 11:0",),
}
# Registers that exist only with a feature (UNDEFINED otherwise): name -> (attribute, value).
FEATURE_REGISTERS = {"PMSNEVFR_EL1": ("fne", 1), "PMSDSFR_EL1": ("fds", 1),
                     "PMBSR_EL2": ("spe_exc", 1), "PMBSR_EL3": ("spe_exc", 1)}
# PMBSR_EL1 and, with FEAT_SPE_EXC, PMBSR_EL2 / PMBSR_EL3 (Arm ARM D24.7.5-7): one layout.
PMBSR_FIELDS = ("EC 31:26", "DL 19", "EA 18", "S 17", "COLL 16", "MSS 15:0")


def check_pmbsr_el2_access(ctx: AccessContext, is_read: bool) -> Access:
    """PMBSR_EL2 (Arm ARM D24.7.6, FEAT_SPE_EXC): UNDEFINED at EL1 and EL0 (no FEAT_NV);
    from EL2 trapped to EL3 by MDCR_EL3.NSPB (as PMBSR_EL1) or when MDCR_EL3.PMSEE == 0b00."""
    if ctx.el < 2:
        return Access.UNDEFINED
    if ctx.el == 2 and (_el3_nspb_trap(ctx) or (
            ctx.have_el3 and MDCR_EL3.get(ctx.mdcr_el3, "PMSEE") == 0b00)):
        return Access.TRAP_EL3
    return Access.OK


def check_pmbsr_el3_access(ctx: AccessContext, is_read: bool) -> Access:
    """PMBSR_EL3 (Arm ARM D24.7.7): accessible at EL3 only, UNDEFINED elsewhere."""
    return Access.OK if ctx.el == 3 and ctx.have_el3 else Access.UNDEFINED


def id_field_values(register: str, config: SpeConfig) -> dict[str, int]:
    """``{field: value}`` of the ID register ``register`` (PMSIDR_EL1, PMBIDR_EL1) fields
    settable by name: those of :data:`~spe_emu.spe.config.FEATURES` it holds, from
    ``config``."""
    return {f.name: getattr(config, f.attr) for f in FEATURES if f.register == register}


def feature_fields(name: str, config: SpeConfig) -> tuple[str, ...]:
    """The fields of ``name`` (PMSFCR_EL1, PMSLATFR_EL1, PMSCR_EL1, PMSCR_EL2) ``config``
    implements: the base
    fields with those of :data:`FEATURE_FIELDS` whose feature is configured replacing any field
    of the same name (MINLAT 15:0 for 16-bit counters)."""
    out = {f.split()[0]: f for f in BASE_FIELDS[name]}
    for reg_name, attr, value, fields in FEATURE_FIELDS:
        if reg_name == name and getattr(config, attr) == value:
            out.update((f.split()[0], f) for f in fields)
    return tuple(out.values())


def spe_registers(config: SpeConfig) -> RegisterTable:
    """The SPE register table for ``config`` (§4.1 Table 7).

    Returns a :class:`RegisterTable` with PMSCR_EL1, PMSICR_EL1, PMSIRR_EL1, PMSFCR_EL1,
    PMSEVFR_EL1, PMSLATFR_EL1, PMSIDR_EL1, PMBLIMITR_EL1, PMBPTR_EL1, PMBSR_EL1, PMBIDR_EL1 and
    PMSCR_EL2. Side effects are named hooks implemented by :class:`spe_emu.spe.spu.Spu`.
    """
    pmsicr_fields = ["COUNT 31:0"] + (["ECOUNT 63:56"] if config.ernd else [])
    pmsidr_value = reg("PMSIDR_EL1", (3, 0, 9, 9, 7), *PMSIDR_FIELDS).make(
        **PMSIDR_CONSTANTS, **id_field_values("PMSIDR_EL1", config))
    pmsidr = reg("PMSIDR_EL1", (3, 0, 9, 9, 7), *PMSIDR_FIELDS, read_only=True,
                 reset=pmsidr_value, check=check_statistical_profiling_access,
                 doc="§4.3.11; Arm ARM PMSIDR_EL1")
    optional = {
        "PMSNEVFR_EL1": reg("PMSNEVFR_EL1", (3, 0, 9, 9, 1), *filter_events(config), "E1 1",
                            check=check_statistical_profiling_access,
                            doc="Arm ARM PMSNEVFR_EL1 (FEAT_SPEv1p2)"),
        "PMSDSFR_EL1": reg("PMSDSFR_EL1", (3, 0, 9, 10, 4), "S 63:0",
                           check=check_statistical_profiling_access,
                           doc="Arm ARM PMSDSFR_EL1 (FEAT_SPE_FDS): S[n] keeps loads whose "
                               "Data Source value is n"),
        "PMBSR_EL2": reg("PMBSR_EL2", (3, 4, 9, 10, 3), *PMBSR_FIELDS,
                         check=check_pmbsr_el2_access, on_write="write_control",
                         replan=Replan.ENABLE, doc="Arm ARM D24.7.6 (FEAT_SPE_EXC)"),
        "PMBSR_EL3": reg("PMBSR_EL3", (3, 6, 9, 10, 3), *PMBSR_FIELDS,
                         check=check_pmbsr_el3_access, on_write="write_control",
                         replan=Replan.ENABLE, doc="Arm ARM D24.7.7 (FEAT_SPE_EXC)"),
    }
    pmbidr_fields = ("EA 11:8 RO", "F 5 RO", "P 4 RO", "Align 3:0 RO")
    pmbidr_reset = reg("PMBIDR_EL1", (3, 0, 9, 10, 7), *pmbidr_fields).make(
        EA=config.pmbidr_ea, P=0, **id_field_values("PMBIDR_EL1", config))
    return RegisterTable([
        reg("PMSCR_EL1", (3, 0, 9, 9, 0), *feature_fields("PMSCR_EL1", config),
            check=check_statistical_profiling_access, on_write="write_control",
            replan=Replan.ENABLE, doc="§4.3.5"),
        reg("PMSICR_EL1", (3, 0, 9, 9, 2), *pmsicr_fields,
            check=check_statistical_profiling_access, on_read="read_pmsicr",
            on_write="write_pmsicr", replan=Replan.PLAN, doc="§4.3.10"),
        reg("PMSIRR_EL1", (3, 0, 9, 9, 3), "INTERVAL 31:8", "RND 0",
            check=check_statistical_profiling_access, replan=Replan.PLAN, doc="§4.3.12"),
        reg("PMSFCR_EL1", (3, 0, 9, 9, 4), *feature_fields("PMSFCR_EL1", config),
            check=check_statistical_profiling_access, doc="§4.3.9"),
        reg("PMSEVFR_EL1", (3, 0, 9, 9, 5), *filter_events(config), res1=PMSEVFR_RES1,
            check=check_statistical_profiling_access, doc="§4.3.8"),
        reg("PMSLATFR_EL1", (3, 0, 9, 9, 6), *feature_fields("PMSLATFR_EL1", config),
            check=check_statistical_profiling_access, doc="§4.3.13"),
        *(spec for name, spec in optional.items()
          if getattr(config, FEATURE_REGISTERS[name][0]) == FEATURE_REGISTERS[name][1]),
        pmsidr,
        reg("PMBLIMITR_EL1", (3, 0, 9, 10, 0), "LIMIT 63:12", "FM 2:1", "E 0",
            check=check_profiling_buffer_access, on_write="write_control", replan=Replan.ENABLE,
            doc="§4.3.2"),
        reg("PMBPTR_EL1", (3, 0, 9, 10, 1), "PTR 63:0",
            check=check_profiling_buffer_access, replan=Replan.PLAN, doc="§4.3.3"),
        reg("PMBSR_EL1", (3, 0, 9, 10, 3), *PMBSR_FIELDS, check=check_profiling_buffer_access, on_write="write_control",
            replan=Replan.ENABLE, doc="§4.3.4"),
        reg("PMBIDR_EL1", (3, 0, 9, 10, 7), *pmbidr_fields, read_only=True,
            reset=pmbidr_reset, check=check_pmbidr_access, on_read="read_pmbidr", doc="§4.3.1"),
        reg("PMSCR_EL2", (3, 4, 9, 9, 0), *feature_fields("PMSCR_EL2", config),
            check=check_pmscr_el2_access, on_write="write_control", replan=Replan.ENABLE,
            doc="§4.3.7"),
        reg("PMSCR_EL12", (3, 5, 9, 9, 0), *feature_fields("PMSCR_EL1", config), check=check_pmscr_el12_access, replan=Replan.ENABLE,
            doc="§4.3.6 (PMSCR_EL1 from EL2)"),
    ])
