"""System registers the firmware programs but the model never emulates, declared once for the
firmware's generated header ``firmware/sysreg.h`` (:mod:`spe_emu.tools.generate`).

The firmware (``firmware/``, spe_fw) sets up EL3, EL2 and EL1 registers that QEMU owns and
spe_emu neither reads nor presents. Their layouts are declared here, as data, so the header's
masks and shifts are derived like every other register's, never written by hand:

- :data:`DECLARED`: registers no model table declares -- CurrentEL, CPTR_EL2, CPTR_EL3,
  MAIR_EL1, PMSNEVFR_EL1 -- and the layout of the ``MSR DAIFSet, #<imm>`` immediate. Only the
  fields the firmware names are declared (as in spe_emu.arch.context: the other bits are RES0
  here unless declared RES1).
- :data:`EXTENSIONS`: fields (and RES1 bits) the firmware names in registers a model table
  declares only in part: SCTLR_ELx, SCR_EL3, ID_AA64PFR0_EL1. :func:`extended`
  adds them to the model's declaration; the result is checked like any register (no field
  overlaps the model's own), so every field is still declared once.

Also the field encodings the firmware writes (MAIR_EL1 attributes, TCR_EL1 cacheability and
shareability, MDCR_EL3.NSPB, MDCR_EL2.E2PB, CPACR_EL1.FPEN), each with its Arm ARM section.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..sysreg import Field, RegisterSpec, parse_fields, reg

# -- registers no model table declares -------------------------------------------------------
CURRENTEL = reg("CurrentEL", (3, 0, 4, 2, 2), "EL 3:2", read_only=True,
                doc="Arm ARM C5.2.1 CurrentEL")
DAIFSET = reg("DAIFSet", (0, 3, 4, 0, 6), "D 3", "A 2", "I 1", "F 0",
              doc="Arm ARM C5.2.2 DAIF, C6.2 MSR (immediate): MSR DAIFSet, #<imm> sets the "
                  "PSTATE.{D, A, I, F} bits selected by imm4, which the instruction holds in "
                  "CRm (the encoding here has CRm = 0)")
CPTR_EL2 = reg("CPTR_EL2", (3, 4, 1, 1, 2), "TCPAC 31", "TTA 20", "TFP 10", "TZ 8",
               res1=(0b11 << 12) | (1 << 9) | 0xFF,
               doc="Arm ARM D19.2 CPTR_EL2, layout when HCR_EL2.E2H == 0 (RES1 bits 13:12, 9 "
                   "and 7:0; TZ is FEAT_SVE's, RES1 without it)")
CPTR_EL3 = reg("CPTR_EL3", (3, 6, 1, 1, 2), "TCPAC 31", "TTA 20", "TFP 10", "EZ 8",
               doc="Arm ARM D19.2 CPTR_EL3")
MAIR_EL1 = reg("MAIR_EL1", (3, 0, 10, 2, 0), *(f"Attr{n} {8 * n + 7}:{8 * n}" for n in range(8)),
               doc="Arm ARM D19.2 MAIR_EL1: Attr<n> is the attribute of AttrIndx n")
PMSNEVFR_EL1 = reg("PMSNEVFR_EL1", (3, 0, 9, 9, 1),
                   doc="Arm ARM PMSNEVFR_EL1 (FEAT_SPEv1p2), implemented when "
                       "PMSIDR_EL1.FnE == 1 (SpeConfig.fne; the model's table declares it "
                       "then); the firmware only writes 0 to it, so no field is declared")

DECLARED = (CURRENTEL, DAIFSET, CPTR_EL2, CPTR_EL3, MAIR_EL1, PMSNEVFR_EL1)
"""The registers (and instruction layouts) declared only for the firmware's header."""


# -- fields of registers a model table declares in part ---------------------------------------
@dataclass(frozen=True)
class Extension:
    """Fields and RES1 bits the firmware names in a register a model table declares in part.

    Attributes:
        fields: the added fields (none may overlap the model's).
        res1: added RES1 bits.
        name: name of the extended register when it differs from the model's (the model's
            SCTLR_ELx layout, extended with EL1-only fields, is SCTLR_EL1).
        doc: where the added fields are described.
    """

    fields: tuple[Field, ...] = ()
    res1: int = 0
    name: str | None = None
    doc: str = ""

    def apply(self, spec: RegisterSpec) -> RegisterSpec:
        """``spec`` with the added fields and RES1 bits (a declaration only: no access check
        or hooks). Raises :class:`~spe_emu.errors.RegisterTableError` if an added field
        overlaps a field or RES1 bit of ``spec``."""
        return RegisterSpec(name=self.name or spec.name, encoding=spec.encoding,
                            fields=spec.fields + self.fields, res1=spec.res1 | self.res1,
                            read_only=spec.read_only,
                            doc="; ".join(d for d in (spec.doc, self.doc) if d))


SCTLR_EL1_V80_RES1 = ("EOS", "TSCXT", "EIS", "SPAN", "nTLSMD", "LSMAOE")
"""SCTLR_EL1 fields that are RES1 in Armv8.0: set, each keeps the Armv8.0 behaviour (exception
entry and return context synchronizing, SCXTNUM_EL0 trapped, PSTATE.PAN unchanged on exception
entry, A32/T32 multiple loads and stores to Device memory not trapped)."""

EXTENSIONS = {
    "SCTLR_ELx": Extension(
        parse_fields("LSMAOE 29", "nTLSMD 28", "UCI 26", "EIS 22", "TSCXT 20", "WXN 19",
                     "nTWE 18", "nTWI 16", "UCT 15", "DZE 14", "I 12", "EOS 11", "SA0 4",
                     "SA 3", "C 2", "A 1"),
        name="SCTLR_EL1", doc="Arm ARM D19.2 SCTLR_EL1"),
    "SCR_EL3": Extension(res1=0b11 << 4, doc="Arm ARM D19.2 SCR_EL3: bits 5:4 are RES1"),
    "ID_AA64PFR0_EL1": Extension(parse_fields("EL2 11:8 RO"),
                                 doc="Arm ARM D19.2 ID_AA64PFR0_EL1 (QEMU's value)"),
}
"""Register name in the model's table -> what the firmware adds to it."""


def extended(spec: RegisterSpec) -> RegisterSpec:
    """``spec`` with the firmware's :data:`EXTENSIONS` for it (``spec`` itself if none)."""
    ext = EXTENSIONS.get(spec.name)
    return ext.apply(spec) if ext else spec


# -- field encodings the firmware writes -----------------------------------------------------
ATTR_DEVICE_nGnRnE = 0b0000_0000
"""MAIR_EL1.Attr<n>: Device-nGnRnE memory (Arm ARM D19.2 MAIR_EL1)."""
ATTR_NORMAL_WB_RWA = 0b1111_1111
"""MAIR_EL1.Attr<n>: Normal memory, Outer and Inner Write-Back Non-transient, Read-Allocate and
Write-Allocate (Arm ARM D19.2 MAIR_EL1)."""
IPS_32BIT = 0b000
"""TCR_EL1.IPS: 32-bit (4 GiB) intermediate physical address size (Arm ARM D19.2 TCR_EL1)."""
RGN_WBWA = 0b01
"""TCR_EL1.{IRGN0, ORGN0}: Normal memory, Write-Back Read-Allocate Write-Allocate Cacheable
(Arm ARM D19.2 TCR_EL1)."""
SH_INNER = 0b11
"""Inner Shareable: TCR_EL1.SH0 and a stage 1 descriptor's SH (Arm ARM D19.2 TCR_EL1, D8.5
"Memory region attributes")."""
AP_EL1_RW = 0b00
AP_EL0_RW = 0b01
"""Stage 1 descriptor AP[2:1]: read/write at EL1 only; read/write at EL1 and EL0 (Arm ARM D8.4
"Memory access control", data access permissions)."""
NSPB_NS_EL1 = 0b11
"""MDCR_EL3.NSPB: the Profiling Buffer uses Non-secure EL1 (or EL2) translation and Non-secure
accesses to its registers are not trapped to EL3 (SPE supplement 3.4.2)."""
E2PB_EL1 = 0b11
"""MDCR_EL2.E2PB: the Profiling Buffer uses the EL1&0 translation regime and EL1 accesses to
its registers are not trapped to EL2 (SPE supplement 3.4.2)."""
FPEN_NOTRAP = 0b11
"""CPACR_EL1.FPEN: SIMD and floating-point instructions not trapped (Arm ARM D19.2 CPACR_EL1)."""
