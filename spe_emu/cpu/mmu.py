"""A minimal VMSAv8-64 stage 1 table walker for the host side of the emulator.

The SPU writes records through the *owning* translation regime as a privileged write (SPE
supplement §3.4, §3.5.3), and semihosting reads guest buffers by virtual address, whatever EL
the PE is executing at. Unicorn's own ``uc_vmem_translate`` translates with the current EL's
permissions, so spe_emu walks the tables itself: 4 KiB granule, TTBR0/TTBR1 for the EL1&0
regime, TTBR0 for EL2 and EL3, block and page descriptors, AP[2] write permission. Anything
else (16/64 KiB granules, stage 2) raises :class:`spe_emu.spe.buffer.TranslationFault` with a
documented FSC, never a silent guess.
"""

from __future__ import annotations

from ..errors import GuestError
from ..spe.buffer import TranslationFault
from ..sysreg import reg
from .context import HCR_EL2, SCTLR_ELX, SCTLR_ENC, TTBR0_ENC, TTBR1_EL1, banked
from .fastuc import FastAccess

TCR_EL1 = reg("TCR_EL1", (3, 0, 2, 0, 2), "TG1 31:30", "T1SZ 21:16", "EPD1 23", "TG0 15:14",
              "EPD0 7", "T0SZ 5:0")
TCR_EL23 = reg("TCR_EL2", (3, 4, 2, 0, 2), "TG0 15:14", "T0SZ 5:0")  # (TCR_EL3: same layout)
TCR_ENC = banked(TCR_EL1.encoding.tuple)
# Stage 1 VMSAv8-64 descriptor (Arm ARM D8.3): AP[2:1] are bits 7:6.
DESC = reg("DESC", (3, 0, 0, 0, 0), "UXN 54", "PXN 53", "OA 47:12", "AF 10", "AP2 7",
           "AP1 6", "TYPE 1", "VALID 0")

FSC_TRANSLATION = 0b000100
FSC_PERMISSION = 0b001100
BADDR_MASK = DESC.field("OA").mask  # (also TTBRn_ELx.BADDR[47:12] of a 4 KiB-aligned table)


def translate(mem: FastAccess, va: int, regime_el: int, *, write: bool = False) -> int:
    """Physical address of ``va`` in the stage 1 regime of ``regime_el`` (1 = EL1&0, 2, 3),
    checked like a privileged data access (AP[2] for a write; Arm ARM D8.4). PSTATE.PAN and
    hierarchical (table) attributes are not modelled. ``mem`` reads the engine's system
    registers and physical memory.

    Raises:
        TranslationFault: no valid mapping, unsupported granule, or a write to a read-only page
            (FSC = translation or permission fault with the level of the failing descriptor).
    """
    regime = max(regime_el, 1)
    cpr = mem.cpr
    if regime == 1 and HCR_EL2.get(cpr(HCR_EL2.encoding.tuple), "VM"):
        raise GuestError("stage 2 translation (HCR_EL2.VM == 1) is not modelled for the "
                         "emulator's own accesses (Profiling Buffer, semihosting)")
    if not SCTLR_ELX.get(cpr(SCTLR_ENC[regime]), "M"):
        return va
    tcr = cpr(TCR_ENC[regime])
    top = (va >> 55) & 1
    if regime == 1:
        if top:
            tsz, tg, ttbr = TCR_EL1.get(tcr, "T1SZ"), TCR_EL1.get(tcr, "TG1"), TTBR1_EL1
            if tg != 0b10:
                raise TranslationFault(va, FSC_TRANSLATION)
        else:
            tsz, tg, ttbr = TCR_EL1.get(tcr, "T0SZ"), TCR_EL1.get(tcr, "TG0"), TTBR0_ENC[1]
            if tg != 0b00:
                raise TranslationFault(va, FSC_TRANSLATION)
    else:
        if top:
            raise TranslationFault(va, FSC_TRANSLATION)
        tsz, tg, ttbr = TCR_EL23.get(tcr, "T0SZ"), TCR_EL23.get(tcr, "TG0"), TTBR0_ENC[regime]
        if tg != 0b00:
            raise TranslationFault(va, FSC_TRANSLATION)
    ia_bits = 64 - tsz
    level = 4 - (ia_bits - 12 + 8) // 9  # levels needed for ia_bits with 9 bits per level
    table = cpr(ttbr) & BADDR_MASK
    while True:
        shift = 12 + 9 * (3 - level)
        index = (va >> shift) & 0x1FF
        desc = int.from_bytes(mem.read(table + 8 * index, 8), "little")
        if not DESC.get(desc, "VALID"):
            raise TranslationFault(va, FSC_TRANSLATION | max(level, 0))
        is_table = DESC.get(desc, "TYPE") == 1 and level < 3
        if level == 3 and DESC.get(desc, "TYPE") != 1:
            raise TranslationFault(va, FSC_TRANSLATION | 3)
        if is_table:
            table = desc & BADDR_MASK
            level += 1
            continue
        if write and DESC.get(desc, "AP2"):  # read-only
            raise TranslationFault(va, FSC_PERMISSION | level)
        block_mask = (1 << shift) - 1
        return (desc & BADDR_MASK & ~block_mask) | (va & block_mask)
