"""The snapshot of control state an access check or enable check looks at.

Access checks (``spe_emu.sysreg.AccessCheck``) are pure functions of an :class:`AccessContext`,
so they can be tested without a running CPU. The machine builds one context per trapped
access from the live registers.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..sysreg import reg

# The control registers QEMU owns and spe_emu reads or programs, each declared once (only the
# fields spe_emu or its firmware uses, see spe_emu.arch.firmware_regs; the other bits are left
# as they are by every access spe_emu makes).
SCR_EL3 = reg("SCR_EL3", (3, 6, 1, 1, 0), "GPF 48", "API 17", "APK 16", "RW 10", "HCE 8", "SMD 7", "EA 3",
              "FIQ 2", "IRQ 1", "NS 0", doc="Arm ARM D19.2")
HCR_EL2 = reg("HCR_EL2", (3, 4, 1, 1, 0), "API 41", "APK 40", "GPF 38", "TEA 37", "E2H 34",
              "RW 31", "TGE 27", "TID3 18", "DC 12", "FB 9", "VSE 8", "VI 7", "VF 6", "AMO 5", "IMO 4",
              "FMO 3", "VM 0", doc="Arm ARM D19.2")
MDCR_EL2 = reg("MDCR_EL2", (3, 4, 1, 1, 1), "HLP 26", "HCCD 23", "HPMD 17", "TPMS 14",
               "E2PB 13:12", "TDOSA 10", "TDA 9", "TDE 8", "HPME 7", "TPM 6", "TPMCR 5",
               "HPMN 4:0",
               doc="SPE supplement 3.4.2; Arm ARM MDCR_EL2 (the PMU's HPMN, HPME, HPMD, HLP, "
                   "HCCD, TPM, TPMCR: spe_emu.devices.pmu)")
MDCR_EL3 = reg("MDCR_EL3", (3, 6, 1, 3, 1), "PMSEE 52:51", "SCCD 23", "SPME 17", "SDD 16",
               "NSPB 13:12", "TDOSA 10", "TDA 9", "TPM 6",
               doc="SPE supplement 3.4.2; Arm ARM MDCR_EL3.PMSEE (FEAT_SPE_EXC); the PMU's "
                   "SPME, SCCD, TPM")
CPACR_EL1 = reg("CPACR_EL1", (3, 0, 1, 0, 2), "FPEN 21:20", doc="Arm ARM D19.2")
CONTEXTIDR_EL1 = reg("CONTEXTIDR_EL1", (3, 0, 13, 0, 1), "PROCID 31:0", doc="Arm ARM D19.2")
CONTEXTIDR_EL2 = reg("CONTEXTIDR_EL2", (3, 4, 13, 0, 1), "PROCID 31:0", doc="Arm ARM D19.2")
CNTKCTL_EL1 = reg("CNTKCTL_EL1", (3, 0, 14, 1, 0), "EL0VCTEN 1", "EL0PCTEN 0",
                  doc="Arm ARM D19.11")
CNTHCTL_EL2 = reg("CNTHCTL_EL2", (3, 4, 14, 1, 0), "EL1PCTEN 0", doc="Arm ARM D19.11")
# Registers banked by Exception level: one layout, and the encoding per EL derived from the
# _EL1 one (the _EL2 and _EL3 registers differ only in op1: 4 and 6, Arm ARM D19).
BANK_OP1 = {1: 0, 2: 4, 3: 6}


def banked(el1_encoding: tuple[int, int, int, int, int]) -> dict[int, tuple[int, ...]]:
    """EL -> (op0, op1, CRn, CRm, op2) of the register banked by EL whose _EL1 encoding is
    ``el1_encoding``."""
    op0, _, crn, crm, op2 = el1_encoding
    return {el: (op0, op1, crn, crm, op2) for el, op1 in BANK_OP1.items()}


SCTLR_ELX = reg("SCTLR_ELx", (3, 0, 1, 0, 0), "SPAN 23", "M 0", doc="Arm ARM D19.2")
SCTLR_ENC = banked(SCTLR_ELX.encoding.tuple)
SPSR_ENC = banked((3, 0, 4, 0, 0))
TTBR0_ENC = banked((3, 0, 2, 0, 0))
TTBR1_EL1 = (3, 0, 2, 0, 1)


@dataclass(frozen=True, slots=True)
class AccessContext:
    """Control state seen by access and enable checks.

    Attributes:
        el: current Exception level (0-3).
        have_el2, have_el3: whether EL2 / EL3 are implemented (``HaveEL()``).
        scr_el3, hcr_el2, mdcr_el2, mdcr_el3: raw register values (0 when the EL is absent).
    """

    el: int
    have_el2: bool = True
    have_el3: bool = True
    scr_el3: int = 0
    hcr_el2: int = 0
    mdcr_el2: int = 0
    mdcr_el3: int = 0

    def at_el(self, el: int) -> AccessContext:
        """This context at Exception level ``el`` (itself when it is at ``el`` already): what
        ``dataclasses.replace(ctx, el=el)`` gives, at a fifth of its cost (the run loop asks
        for it at every stop)."""
        if el == self.el:
            return self
        return AccessContext(el, self.have_el2, self.have_el3, self.scr_el3, self.hcr_el2,
                             self.mdcr_el2, self.mdcr_el3)

    @property
    def ns(self) -> int:
        """SCR_EL3.NS (1 when EL3 is not implemented: this model is Non-secure only then)."""
        return SCR_EL3.get(self.scr_el3, "NS") if self.have_el3 else 1

    @property
    def is_secure(self) -> bool:
        """``IsSecure()``: EL3 is always Secure; otherwise SCR_EL3.NS == 0."""
        if self.have_el3 and self.el == 3:
            return True
        return self.ns == 0

    @property
    def state_ns(self) -> int:
        """The NS bit of the Security state the PE is in: 0 when ``is_secure``, else 1 (the NS
        field of PC and branch target Address packets, SPE supplement §5.3.1)."""
        return 0 if self.is_secure else 1

    @property
    def tge(self) -> int:
        return HCR_EL2.get(self.hcr_el2, "TGE") if self.have_el2 else 0

    @property
    def el2_enabled(self) -> bool:
        """``EL2Enabled()``: EL2 implemented and (no EL3 or Non-secure)."""
        return self.have_el2 and (not self.have_el3 or self.ns == 1)
