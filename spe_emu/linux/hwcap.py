"""AT_HWCAP / AT_HWCAP2 from the PE's ID registers, as the Linux arm64 ABI defines the bits
(``Documentation/arch/arm64/elf_hwcaps.rst``: each hwcap is present when an ID register field
has at least a given value).

Left out, because the firmware does not provide what Linux would provide with them:
HWCAP_CPUID (EL0 reads of ID registers are not emulated: they trap to the firmware as
UNDEFINED), HWCAP_EVTSTRM (no event stream), SVE/SVE2/SME (CPACR_EL1.ZEN is not enabled) and
MTE (no tag memory).
"""

from __future__ import annotations

from typing import Callable

from ..arch.id_regs import (ID_AA64ISAR0_EL1, ID_AA64ISAR1_EL1, ID_AA64MMFR2_EL1,
                             ID_AA64PFR0_EL1, ID_AA64PFR1_EL1)

# (AT_HWCAP word 1 or 2, bit, Linux name, register, field, lowest value that gives it)
HWCAPS = (
    (1, 3, "HWCAP_AES", ID_AA64ISAR0_EL1, "AES", 1),
    (1, 4, "HWCAP_PMULL", ID_AA64ISAR0_EL1, "AES", 2),
    (1, 5, "HWCAP_SHA1", ID_AA64ISAR0_EL1, "SHA1", 1),
    (1, 6, "HWCAP_SHA2", ID_AA64ISAR0_EL1, "SHA2", 1),
    (1, 7, "HWCAP_CRC32", ID_AA64ISAR0_EL1, "CRC32", 1),
    (1, 8, "HWCAP_ATOMICS", ID_AA64ISAR0_EL1, "Atomic", 2),
    (1, 12, "HWCAP_ASIMDRDM", ID_AA64ISAR0_EL1, "RDM", 1),
    (1, 13, "HWCAP_JSCVT", ID_AA64ISAR1_EL1, "JSCVT", 1),
    (1, 14, "HWCAP_FCMA", ID_AA64ISAR1_EL1, "FCMA", 1),
    (1, 15, "HWCAP_LRCPC", ID_AA64ISAR1_EL1, "LRCPC", 1),
    (1, 16, "HWCAP_DCPOP", ID_AA64ISAR1_EL1, "DPB", 1),
    (1, 17, "HWCAP_SHA3", ID_AA64ISAR0_EL1, "SHA3", 1),
    (1, 18, "HWCAP_SM3", ID_AA64ISAR0_EL1, "SM3", 1),
    (1, 19, "HWCAP_SM4", ID_AA64ISAR0_EL1, "SM4", 1),
    (1, 20, "HWCAP_ASIMDDP", ID_AA64ISAR0_EL1, "DP", 1),
    (1, 21, "HWCAP_SHA512", ID_AA64ISAR0_EL1, "SHA2", 2),
    (1, 23, "HWCAP_ASIMDFHM", ID_AA64ISAR0_EL1, "FHM", 1),
    (1, 24, "HWCAP_DIT", ID_AA64PFR0_EL1, "DIT", 1),
    (1, 25, "HWCAP_USCAT", ID_AA64MMFR2_EL1, "AT", 1),
    (1, 26, "HWCAP_ILRCPC", ID_AA64ISAR1_EL1, "LRCPC", 2),
    (1, 27, "HWCAP_FLAGM", ID_AA64ISAR0_EL1, "TS", 1),
    (1, 28, "HWCAP_SSBS", ID_AA64PFR1_EL1, "SSBS", 2),
    (1, 29, "HWCAP_SB", ID_AA64ISAR1_EL1, "SB", 1),
    (1, 30, "HWCAP_PACA", ID_AA64ISAR1_EL1, "APA", 1),
    (1, 30, "HWCAP_PACA", ID_AA64ISAR1_EL1, "API", 1),
    (1, 31, "HWCAP_PACG", ID_AA64ISAR1_EL1, "GPA", 1),
    (1, 31, "HWCAP_PACG", ID_AA64ISAR1_EL1, "GPI", 1),
    (2, 0, "HWCAP2_DCPODP", ID_AA64ISAR1_EL1, "DPB", 2),
    (2, 7, "HWCAP2_FLAGM2", ID_AA64ISAR0_EL1, "TS", 2),
    (2, 8, "HWCAP2_FRINT", ID_AA64ISAR1_EL1, "FRINTTS", 1),
    (2, 13, "HWCAP2_I8MM", ID_AA64ISAR1_EL1, "I8MM", 1),
    (2, 14, "HWCAP2_BF16", ID_AA64ISAR1_EL1, "BF16", 1),
    (2, 15, "HWCAP2_DGH", ID_AA64ISAR1_EL1, "DGH", 1),
    (2, 16, "HWCAP2_RNG", ID_AA64ISAR0_EL1, "RNDR", 1),
    (2, 17, "HWCAP2_BTI", ID_AA64PFR1_EL1, "BT", 1),
)
FP_NOT_IMPLEMENTED = 0xF
"""ID_AA64PFR0_EL1.{FP, AdvSIMD} value for "not implemented" (the others: 0 = implemented,
1 = with half-precision)."""


def hwcaps(read_id: Callable[[tuple[int, int, int, int, int]], int]) -> tuple[int, int]:
    """``(AT_HWCAP, AT_HWCAP2)`` for the PE whose ID registers ``read_id(encoding)`` returns."""
    values = {spec.name: read_id(spec.encoding.tuple)
              for spec in (ID_AA64ISAR0_EL1, ID_AA64ISAR1_EL1, ID_AA64PFR0_EL1,
                           ID_AA64PFR1_EL1, ID_AA64MMFR2_EL1)}
    words = {1: 0, 2: 0}
    pfr0 = values["ID_AA64PFR0_EL1"]
    fp, simd = ID_AA64PFR0_EL1.get(pfr0, "FP"), ID_AA64PFR0_EL1.get(pfr0, "AdvSIMD")
    if fp != FP_NOT_IMPLEMENTED:
        words[1] |= 1 << 0                      # HWCAP_FP
        if fp >= 1:
            words[1] |= 1 << 9                  # HWCAP_FPHP
    if simd != FP_NOT_IMPLEMENTED:
        words[1] |= 1 << 1                      # HWCAP_ASIMD
        if simd >= 1:
            words[1] |= 1 << 10                 # HWCAP_ASIMDHP
    for word, bit, _name, spec, fld, lowest in HWCAPS:
        if spec.get(values[spec.name], fld) >= lowest:
            words[word] |= 1 << bit
    return words[1], words[2]
