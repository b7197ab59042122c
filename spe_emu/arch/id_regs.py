"""The AArch64 feature ID registers spe_emu reads or presents, each declared once (Arm ARM
D19.2), with the fields some part of spe_emu uses: the machine (presented values: GIC,
RAS, PMSVer; the CPU feature options of :mod:`spe_emu.arch.cpu_features`: CSV3, E0PD, the
PAuth fields), the stage 1/2 walkers (PARange) and Linux user mode's AT_HWCAP/AT_HWCAP2.
"""

from __future__ import annotations

from ..sysreg import reg

MIDR_EL1 = reg("MIDR_EL1", (3, 0, 0, 0, 0), "Implementer 31:24", "Variant 23:20",
               "Architecture 19:16", "PartNum 15:4", "Revision 3:0", read_only=True,
               doc="Arm ARM D19.2 MIDR_EL1 (a core preset presents its own: spe_emu.arch.cores)")
VPIDR_EL2 = reg("VPIDR_EL2", (3, 4, 0, 0, 0), "Implementer 31:24", "Variant 23:20",
                "Architecture 19:16", "PartNum 15:4", "Revision 3:0",
                doc="Arm ARM D19.2 VPIDR_EL2: what MIDR_EL1 reads at EL1 with EL2 enabled "
                    "(resets to the PE's MIDR_EL1)")
VMPIDR_EL2 = reg("VMPIDR_EL2", (3, 4, 0, 0, 5), "Aff3 39:32", "U 30", "MT 24", "Aff2 23:16",
                 "Aff1 15:8", "Aff0 7:0", res1=1 << 31,
                 doc="Arm ARM D19.2 VMPIDR_EL2: what MPIDR_EL1 reads at EL1 with EL2 enabled "
                     "(resets to the PE's MPIDR_EL1)")
ID_AA64PFR0_EL1 = reg("ID_AA64PFR0_EL1", (3, 0, 0, 4, 0), "CSV3 63:60", "DIT 51:48",
                      "RAS 31:28", "GIC 27:24", "AdvSIMD 23:20", "FP 19:16", read_only=True,
                      doc="Arm ARM D19.2 ID_AA64PFR0_EL1")
ID_AA64PFR1_EL1 = reg("ID_AA64PFR1_EL1", (3, 0, 0, 4, 1), "SSBS 7:4", "BT 3:0",
                      read_only=True, doc="Arm ARM D19.2 ID_AA64PFR1_EL1")
ID_AA64DFR0_EL1 = reg("ID_AA64DFR0_EL1", (3, 0, 0, 5, 0), "PMSVer 35:32", "BRPs 15:12",
                      "PMUVer 11:8",
                      read_only=True,
                      doc="Arm ARM D19.2 ID_AA64DFR0_EL1")
ID_AA64DFR2_EL1 = reg("ID_AA64DFR2_EL1", (3, 0, 0, 5, 2), "TRBE_EXC 27:24", "SPE_nVM 23:20",
                      "SPE_EXC 19:16", "BWE 7:4", "STEP 3:0", read_only=True,
                      doc="Arm ARM D24.2.82 ID_AA64DFR2_EL1 (RAZ in Unicorn's CPU)")
ID_AA64ISAR0_EL1 = reg("ID_AA64ISAR0_EL1", (3, 0, 0, 6, 0), "RNDR 63:60", "TLB 59:56",
                       "TS 55:52", "FHM 51:48", "DP 47:44", "SM4 43:40", "SM3 39:36",
                       "SHA3 35:32", "RDM 31:28", "TME 27:24", "Atomic 23:20", "CRC32 19:16",
                       "SHA2 15:12", "SHA1 11:8", "AES 7:4", read_only=True,
                       doc="Arm ARM D19.2 ID_AA64ISAR0_EL1")
ID_AA64ISAR1_EL1 = reg("ID_AA64ISAR1_EL1", (3, 0, 0, 6, 1), "LS64 63:60", "XS 59:56",
                       "I8MM 55:52", "DGH 51:48", "BF16 47:44", "SPECRES 43:40", "SB 39:36",
                       "FRINTTS 35:32", "GPI 31:28", "GPA 27:24", "LRCPC 23:20", "FCMA 19:16",
                       "JSCVT 15:12", "API 11:8", "APA 7:4", "DPB 3:0", read_only=True,
                       doc="Arm ARM D19.2 ID_AA64ISAR1_EL1")
ID_AA64MMFR0_EL1 = reg("ID_AA64MMFR0_EL1", (3, 0, 0, 7, 0), "TGran4_2 43:40",
                       "TGran64_2 39:36", "TGran16_2 35:32", "TGran4 31:28", "TGran64 27:24",
                       "TGran16 23:20", "BigEndEL0 19:16", "SNSMem 15:12", "BigEnd 11:8",
                       "ASIDBits 7:4", "PARange 3:0", read_only=True,
                       doc="Arm ARM D19.2 ID_AA64MMFR0_EL1")
ID_AA64ISAR2_EL1 = reg("ID_AA64ISAR2_EL1", (3, 0, 0, 6, 2), "APA3 15:12", "GPA3 11:8",
                       read_only=True, doc="Arm ARM D19.2 ID_AA64ISAR2_EL1")
ID_AA64MMFR2_EL1 = reg("ID_AA64MMFR2_EL1", (3, 0, 0, 7, 2), "E0PD 63:60", "AT 35:32",
                       read_only=True,
                       doc="Arm ARM D19.2 ID_AA64MMFR2_EL1")
