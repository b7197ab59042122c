"""FEAT_RAS without error records: the PE's RAS system registers (Arm ARM "FEAT_RAS"; D19.2
DISR_EL1, VDISR_EL2, VSESR_EL2; ERRIDR_EL1) and the syndrome of a virtual SError.

The board presents ID_AA64PFR0_EL1.RAS = 0b0001 (:data:`PRESENTED_RAS`) because VSESR_EL2,
the register that gives a virtual SError its syndrome (``AArch64.TakeVirtualSErrorException()``:
ESR_EL1.ISS = VSESR_EL2.{IDS, ISS}), is present only when FEAT_RAS is implemented. QEMU 7.2's
``-cpu max`` presents FEAT_RAS too (measured: ID_AA64PFR0_EL1.RAS = 0b0010, FEAT_RASv1p1,
which QEMU reads as FEAT_DoubleFault as well); the board stops at 0b0001 because
FEAT_DoubleFault's controls, SCR_EL3.{NMEA, EASE}, are bits Unicorn's CPU (QEMU 5.0) does not
hold (a write drops them).

Unicorn's CPU has none of these registers (MRS and MSR of them UNDEF, measured), so they are
emulated from the UNDEF hook like the SPE registers (:class:`RasRegisters`, a
:class:`~spe_emu.platform.sysregs.SysregOwner`), the set QEMU 7.2 implements: no error records
(ERRIDR_EL1.NUM = 0), so ERRSELR_EL1 and the ERX*_EL1 registers stay UNDEFINED, as the
architecture permits when no record is implemented.

Limitations: ESB executes as the hint-space NOP Unicorn's CPU makes of it, so it does not
defer a pending SError that PSTATE.A masks into DISR_EL1 or VDISR_EL2; HCR_EL2.TERR and
SCR_EL3.TERR read as 0 in Unicorn's CPU (a write drops them), so no ERRIDR_EL1 access is
trapped by them.
"""

from __future__ import annotations

from ..arch.context import HCR_EL2, SCR_EL3, AccessContext
from ..platform.sysregs import AlwaysPresent
from ..sysreg import Access, RegisterTable, reg

PRESENTED_RAS = 0b0001
"""ID_AA64PFR0_EL1.RAS the board presents: FEAT_RAS (module docstring)."""


def check_el1_access(ctx: AccessContext, is_read: bool) -> Access:
    """DISR_EL1 and ERRIDR_EL1: UNDEFINED at EL0, accessible from EL1 up (Arm ARM D19.2
    DISR_EL1, ERRIDR_EL1; no FEAT_FGT, and the TERR traps cannot be set: module
    docstring)."""
    return Access.UNDEFINED if ctx.el == 0 else Access.OK


def check_el2_access(ctx: AccessContext, is_read: bool) -> Access:
    """VDISR_EL2 and VSESR_EL2: accessible at EL2 and EL3 only, UNDEFINED at EL0 and EL1
    (Arm ARM D19.2 VDISR_EL2, VSESR_EL2; no FEAT_NV)."""
    return Access.OK if ctx.el >= 2 else Access.UNDEFINED


# Each RAS register declared once; the syndrome fields are those for an AArch64 EL1 (the
# only EL1 this model runs).
RAS_REGISTERS = RegisterTable([
    reg("ERRIDR_EL1", (3, 0, 5, 3, 0), "NUM 15:0", read_only=True, check=check_el1_access,
        doc="Arm ARM ERRIDR_EL1: NUM = 0, no error record"),
    reg("VSESR_EL2", (3, 4, 5, 2, 3), "IDS 24", "ISS 23:0", check=check_el2_access,
        doc="Arm ARM D19.2 VSESR_EL2: the ESR_EL1.{IDS, ISS} of a virtual SError taken to "
            "AArch64 EL1"),
    reg("DISR_EL1", (3, 0, 12, 1, 1), "A 31", "IDS 24", "ISS 23:0", check=check_el1_access,
        doc="Arm ARM D19.2 DISR_EL1 (A: an SError deferred by ESB)"),
    reg("VDISR_EL2", (3, 4, 12, 1, 1), "A 31", "IDS 24", "ISS 23:0", check=check_el2_access,
        doc="Arm ARM D19.2 VDISR_EL2: DISR_EL1 as EL1 sees it with HCR_EL2.AMO == 1"),
])

VSESR_EL2 = RAS_REGISTERS["VSESR_EL2"]
EL2_REGISTERS = frozenset({"VDISR_EL2", "VSESR_EL2"})
"""RES0 from EL3 when EL2 is not implemented (Arm ARM D19.2 VDISR_EL2, VSESR_EL2)."""


def effective_amo(ctx: AccessContext) -> bool:
    """HCR_EL2.AMO as it behaves for everything but a direct read, with EL2 enabled (Arm ARM
    D19.2 HCR_EL2.AMO): as 1 when TGE == 1 and E2H == 0, as 0 when both are 1."""
    if not ctx.el2_enabled:
        return False
    hcr = ctx.hcr_el2
    if HCR_EL2.get(hcr, "TGE"):
        return not HCR_EL2.get(hcr, "E2H")
    return bool(HCR_EL2.get(hcr, "AMO"))


def redirect(name: str, ctx: AccessContext) -> str | None:
    """The register an access named ``name`` reaches at ``ctx``, or None for RAZ/WI (Arm ARM
    D19.2 DISR_EL1): at EL1 with the effective HCR_EL2.AMO == 1, DISR_EL1 is VDISR_EL2; below
    EL3 with SCR_EL3.EA == 1 it is RAZ/WI otherwise (as QEMU 7.2's ``disr_read()``,
    ``disr_write()``); the EL2 registers are RES0 from EL3 without EL2."""
    if name == "DISR_EL1":
        if ctx.el == 1 and effective_amo(ctx):
            return "VDISR_EL2"
        if ctx.el < 3 and ctx.have_el3 and SCR_EL3.get(ctx.scr_el3, "EA"):
            return None
    if name in EL2_REGISTERS and not ctx.have_el2:
        return None
    return name


class RasRegisters(AlwaysPresent):
    """The RAS registers' state (module docstring): a system-register owner the machine
    registers (:class:`spe_emu.platform.sysregs.SysregRegistry`), and the virtual SError's
    syndrome (:meth:`virtual_serror_syndrome`) for :class:`~spe_emu.cpu.pe.ProcessingElement`.
    """

    table = RAS_REGISTERS
    via_undef = True
    """Unicorn's CPU does not know the registers: their MRS/MSR UNDEF and reach the registry
    from the UNDEF hook."""

    def __init__(self) -> None:
        self.values = RAS_REGISTERS.reset_values()

    def sysreg_read(self, name: str, ctx: AccessContext) -> int:
        """MRS of ``name`` whose access check passed (:func:`redirect`)."""
        target = redirect(name, ctx)
        return 0 if target is None else self.values[target]

    def sysreg_write(self, name: str, value: int, ctx: AccessContext) -> None:
        """MSR of ``name`` whose access check passed (:func:`redirect`; RES0 bits dropped)."""
        target = redirect(name, ctx)
        if target is not None:
            self.values[target] = RAS_REGISTERS[target].apply_write(self.values[target], value)

    def virtual_serror_syndrome(self) -> int:
        """ESR_EL1.ISS of a virtual SError taken to AArch64 EL1: VSESR_EL2.{IDS, ISS}
        (``AArch64.TakeVirtualSErrorException()`` with FEAT_RAS)."""
        vsesr = self.values["VSESR_EL2"]
        return VSESR_EL2.make(IDS=VSESR_EL2.get(vsesr, "IDS"), ISS=VSESR_EL2.get(vsesr, "ISS"))
