"""Exception routing: bare-metal programs (tests/baremetal/) run on spe_emu and on QEMU.

Each program installs vector tables at EL1, EL2 and EL3, triggers exceptions and prints one
line per exception taken (tests/baremetal/common.S): the case tag, the vector offset, PSTATE on
entry (CurrentEL | SPSel | DAIF | PAN | UAO), ESR_ELx, ELR_ELx, SPSR_ELx, FAR_ELx (aborts, PC
alignment faults and watchpoints only) and SP on entry; "value" lines (vector field 0xFFFF)
carry a register value read by the program. Every program sets up explicitly the state it
relies on, because QEMU's reset values differ from spe_emu's.

Three kinds of checks:

* ``test_case``: every recorded field against the architectural value written out below
  (Arm ARM D1.10 exception entry, D19.2 ESR_ELx encodings; SPE supplement DDI 0586A §3.2.3,
  §3.4.6, §4.3 for the SPE registers), on spe_emu and, for the programs QEMU can run, on QEMU
  too (which checks this table against a real implementation of the exception model).
* ``test_run_completes``: spe_emu reaches the end of the program, with exactly the expected
  sequence of records (no missing and no spurious exception).
* ``test_identical_to_qemu``: spe_emu's output is identical to QEMU's, line by line, except
  for the lines listed in ``qemu_bugs`` (QEMU 7.2 deviations from the architecture),
  ``cpu_differs`` (features of QEMU's "max" CPU that spe_emu's Unicorn CPU lacks) and
  ``spe_emu_limits``/``spe_emu_bugs`` (spe_emu deviations, strict xfails of ``test_case``).
* ``test_reference_mode_matches_fast``: spe_emu's two run loops print the same.

QEMU (``qemu-system-aarch64 -M virt,gic-version=3,secure=on,virtualization=on -cpu max``)
implements the architectural exception model but no SPE, so spe_access.S runs on spe_emu
only. Skipped when the cross assembler is missing; the QEMU parts skip without QEMU.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from qemu_probe import CROSS, QEMU
from qemu_probe import check as _check

from spe_emu.session import RunOptions, run_image

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "tests" / "baremetal"
AS, LD, NM = CROSS + "as", CROSS + "ld", CROSS + "nm"
QEMU_TIMEOUT = 20
QEMU_MACHINE = {3: "virt,gic-version=3,secure=on,virtualization=on",
                2: "virt,gic-version=3,virtualization=on",
                1: "virt,gic-version=3"}
# The programs need fewer than 50k instructions; a wrong routing can loop (an UNDEF taken
# inside a handler, or an instruction Unicorn re-executes forever): fail fast then.
MAX_INSNS = 80_000

pytestmark = pytest.mark.skipif(shutil.which(AS) is None or shutil.which(LD) is None,
                                reason=f"{AS} not installed (Debian: binutils-aarch64-linux-gnu)")
needs_qemu = pytest.mark.skipif(shutil.which(QEMU) is None,
                                reason=f"{QEMU} not installed (Debian: qemu-system-arm)")


# ------------------------------------------------------------------ architectural values ---
def esr(ec: int, iss: int = 0) -> int:
    """ESR_ELx: EC [31:26], IL [25] = 1 (32-bit instruction), ISS [24:0]."""
    return ec << 26 | 1 << 25 | iss


def sysreg_iss(op0: int, op1: int, crn: int, crm: int, op2: int, rt: int, read: bool) -> int:
    """ISS of EC 0x18 (trapped MSR, MRS or System instruction): Op0 [21:20], Op2 [19:17],
    Op1 [16:14], CRn [13:10], Rt [9:5], CRm [4:1], Direction [0] (1 = read)."""
    return op0 << 20 | op2 << 17 | op1 << 14 | crn << 10 | rt << 5 | crm << 1 | int(read)


EC_UNKNOWN, EC_SVC, EC_HVC, EC_SMC, EC_SYSREG = 0x00, 0x15, 0x16, 0x17, 0x18
EC_IABT_LOWER, EC_IABT_SAME, EC_DABT_LOWER, EC_DABT_SAME, EC_BRK = 0x20, 0x21, 0x24, 0x25, 0x3C
UNDEF = esr(EC_UNKNOWN)
FSC_TRANSLATION_L1, FSC_PERMISSION_L2, FSC_ALIGNMENT = 0b000101, 0b001110, 0b100001
FSC_SYNC_EXTERNAL = 0b010000
WNR = 1 << 6
EC_FP, EC_ILLEGAL, EC_PC_ALIGN, EC_SP_ALIGN, EC_SERROR = 0x07, 0x0E, 0x22, 0x26, 0x2F
EC_BKPT_LOWER, EC_BKPT_SAME, EC_WPT_LOWER, EC_WPT_SAME = 0x30, 0x31, 0x34, 0x35
# EC 0x07 from AArch64: CV [24] = 1, COND [23:20] = 0b1110 (D24.2.45 "ISS encoding for an
# exception from an access to a register or instruction resulting from the FPEN and TFP traps")
FP_TRAP = esr(EC_FP, 1 << 24 | 0b1110 << 20)
FSC_DEBUG = 0b100010                  # IFSC/DFSC of Breakpoint and Watchpoint exceptions


def fsc(kind: str, level: int) -> int:
    """Long-descriptor DFSC of a stage 1 fault at ``level`` (EncodeLDFSC()): address size
    0b0000LL, translation 0b0001LL, access flag 0b0010LL, permission 0b0011LL, synchronous
    External abort on a translation table walk 0b0101LL."""
    return {"size": 0b000000, "translation": 0b000100, "access": 0b001000,
            "permission": 0b001100, "walk_external": 0b010100}[kind] | level


def psr(el: int, sp: int = 1, daif: str = "DAIF", nzcv: str = "", *, pan: int = 0, uao: int = 0,
        btype: int = 0, il: int = 0) -> int:
    """PSTATE in the SPSR layout: N Z C V [31:28], UAO [23], PAN [22], IL [20], BTYPE [11:10],
    D A I F [9:6], M[3:2] = EL, M[0] = SP."""
    bits = {"N": 31, "Z": 30, "C": 29, "V": 28, "D": 9, "A": 8, "I": 7, "F": 6}
    value = el << 2 | sp | uao << 23 | pan << 22 | il << 20 | btype << 10
    for flag in daif + nzcv:
        value |= 1 << bits[flag]
    return value


THIS, NEXT = "this", "next"   # ELR = the case's instruction / the one after it


@dataclass(frozen=True)
class Exc:
    """An exception the case must take. ``esr`` may be a function of the program's records
    (for values that depend on a CPU feature the program read); ``elr`` is THIS, NEXT or
    ``(symbol, offset)``; ``far`` an int, a symbol or ``(symbol, offset)`` (only aborts, PC
    alignment faults and watchpoints record FAR; 0 otherwise); ``entry`` the PSTATE on entry
    (default: target EL, SP_ELx, DAIF masked); SP on entry is always the top of the target
    EL's stack."""

    tag: int
    el: int
    vector: int
    esr: int | Callable[[dict], int]
    elr: str | tuple[str, int]
    spsr: int
    far: int | str = 0
    entry: int | None = None
    why: str = ""


@dataclass(frozen=True)
class Val:
    """A value the program read and recorded (a "value" line)."""

    tag: int
    value: int | None   # None: recorded but not compared (used by other expectations)
    why: str = ""


def _sysreg_trap(tag: int, el: int, iss: int, *, why: str) -> Exc:
    """An EL1 system register access or system instruction trapped to EL ``el`` (EC 0x18,
    ISS ``iss``; vector 0x400, ELR = the instruction, SPSR = EL1h with DAIF masked)."""
    return Exc(tag, el, 0x400, esr(EC_SYSREG, iss), THIS, psr(1), why=why)


# basic.S: EL1 and EL0 exceptions taken to EL1, from any boot EL.
BASIC = [
    Exc(0x101, 1, 0x200, esr(EC_SVC, 0x11), NEXT, psr(1), why="SVC at EL1h"),
    Exc(0x102, 1, 0x200, UNDEF, THIS, psr(1), why="UDF at EL1"),
    Exc(0x103, 1, 0x200, UNDEF, THIS, psr(1), why="HLT #1 (no halting debug): UNDEFINED"),
    Exc(0x104, 1, 0x200, esr(EC_SVC, 0x33), NEXT, psr(1, 1, "AF", "NC"),
        why="SPSR keeps NZCV and DAIF"),
    Exc(0x105, 1, 0x000, esr(EC_SVC, 0x44), NEXT, psr(1, 0, "AF", "NC"),
        why="SVC at EL1t: vector +0x000, handler on SP_EL1"),
    Exc(0x106, 1, 0x000, UNDEF, THIS, psr(1, 0, "AF", "NC"), why="UDF at EL1t"),
    Exc(0x107, 1, 0x200, esr(EC_SVC, 0x88), NEXT, psr(1), entry=psr(1, pan=1),
        why="SCTLR_EL1.SPAN = 0: PSTATE.PAN = 1 on entry to EL1"),
    Exc(0x108, 1, 0x200, esr(EC_SVC, 0x89), NEXT, psr(1, uao=1), entry=psr(1),
        why="PSTATE.UAO = 0 on exception entry, SPSR.UAO = 1"),
    Exc(0x201, 1, 0x400, esr(EC_SVC, 0x55), NEXT, psr(0, 0, ""), why="SVC at EL0"),
    Exc(0x202, 1, 0x400, UNDEF, THIS, psr(0, 0, ""), why="UDF at EL0"),
    Exc(0x203, 1, 0x400, UNDEF, THIS, psr(0, 0, ""), why="EL0 MRS SCTLR_EL1"),
    Exc(0x204, 1, 0x400, UNDEF, THIS, psr(0, 0, ""), why="HVC at EL0 is UNDEFINED"),
    Exc(0x205, 1, 0x400, UNDEF, THIS, psr(0, 0, ""), why="SMC at EL0 is UNDEFINED"),
    Exc(0x206, 1, 0x400, esr(EC_SVC, 0x57), NEXT, psr(0, 0, "", "ZV"), why="SPSR keeps Z, V"),
    Exc(0x207, 1, 0x400, esr(EC_SYSREG, sysreg_iss(3, 3, 4, 2, 1, 0, True)), THIS,
        psr(0, 0, ""), why="EL0 MRS X0, DAIF with SCTLR_EL1.UMA = 0"),
    Exc(0x208, 1, 0x400, esr(EC_SYSREG, sysreg_iss(0, 3, 4, 2, 6, 31, False)), THIS,
        psr(0, 0, ""), why="EL0 MSR DAIFSet, #2 with SCTLR_EL1.UMA = 0: Op0 0, Op1 3, CRn 4, "
                           "CRm = imm, Op2 6, Rt 31"),
    Exc(0x209, 1, 0x400, UNDEF, THIS, psr(0, 0, ""), why="HLT #0xF000 at EL0 (no semihosting)"),
]

# brk.S: BRK at every EL, and its routing by MDCR_EL2.TDE and HCR_EL2.TGE.
BRK = [
    Exc(0x901, 3, 0x200, esr(EC_BRK, 0x91), THIS, psr(3), why="BRK at EL3"),
    Exc(0x902, 2, 0x200, esr(EC_BRK, 0x92), THIS, psr(2), why="BRK at EL2"),
    Exc(0x903, 1, 0x200, esr(EC_BRK, 0x93), THIS, psr(1), why="BRK at EL1"),
    Exc(0x904, 1, 0x400, esr(EC_BRK, 0x94), THIS, psr(0, 0, ""), why="BRK at EL0"),
    Exc(0x905, 2, 0x400, esr(EC_BRK, 0x95), THIS, psr(1),
        why="BRK at EL1 with MDCR_EL2.TDE = 1: debug exceptions go to EL2"),
    Exc(0x906, 2, 0x400, esr(EC_BRK, 0x96), THIS, psr(0, 0, ""),
        why="BRK at EL0 with HCR_EL2.TGE = 1"),
]

# el2el3.S: SVC/HVC/SMC/UNDEFINED routing between all ELs, nested exceptions, HCR_EL2.TGE.
EL2EL3 = [
    Exc(0x301, 3, 0x200, esr(EC_SVC, 0x31), NEXT, psr(3), why="SVC at EL3"),
    Exc(0x303, 3, 0x200, esr(EC_SMC, 0x33), NEXT, psr(3), why="SMC at EL3"),
    Exc(0x304, 3, 0x200, UNDEF, THIS, psr(3), why="UDF at EL3"),
    Exc(0x305, 3, 0x000, esr(EC_SVC, 0x35), NEXT, psr(3, 0), why="SVC at EL3t"),
    Exc(0x401, 2, 0x200, esr(EC_SVC, 0x41), NEXT, psr(2, 1, "DI", "ZC"), why="SVC at EL2"),
    Exc(0x402, 2, 0x200, esr(EC_HVC, 0x42), NEXT, psr(2, 1, "DI", "ZC"), why="HVC at EL2"),
    Exc(0x403, 3, 0x400, esr(EC_SMC, 0x43), NEXT, psr(2, 1, "DI", "ZC"), why="SMC at EL2"),
    Exc(0x404, 2, 0x200, UNDEF, THIS, psr(2, 1, "DI", "ZC"), why="UDF at EL2"),
    Exc(0x405, 2, 0x200, UNDEF, THIS, psr(2, 1, "DI", "ZC"), why="MRS SCR_EL3 at EL2"),
    Exc(0x501, 2, 0x400, esr(EC_HVC, 0x51), NEXT, psr(1), why="HVC at EL1"),
    Exc(0x502, 3, 0x400, esr(EC_SMC, 0x52), NEXT, psr(1), why="SMC at EL1"),
    Exc(0x503, 1, 0x200, UNDEF, THIS, psr(1), why="MRS HCR_EL2 at EL1"),
    Exc(0x504, 1, 0x200, UNDEF, THIS, psr(1), why="HVC at EL1 with SCR_EL3.HCE = 0"),
    Exc(0x601, 1, 0x400, esr(EC_SVC, 0x1234), NEXT, psr(0, 0, ""), why="SVC at EL0 (nested 1/2)"),
    # The EL1 handler compares imm16 with 0x1234 just before the HVC: Z = C = 1.
    Exc(0x601, 2, 0x400, esr(EC_HVC, 0x5678), ("nested_hvc", 4), psr(1, 1, "DAIF", "ZC"),
        why="HVC from inside the EL1 handler (nested 2/2)"),
    Exc(0x701, 2, 0x400, esr(EC_SVC, 0x71), NEXT, psr(0, 0, ""), why="SVC at EL0, TGE = 1"),
    Exc(0x702, 2, 0x400, UNDEF, THIS, psr(0, 0, ""), why="UDF at EL0, TGE = 1"),
    Exc(0x703, 2, 0x400, UNDEF, THIS, psr(0, 0, ""), why="EL0 MRS SCTLR_EL1, TGE = 1"),
    Exc(0x704, 2, 0x400, UNDEF, THIS, psr(0, 0, ""), why="HVC at EL0, TGE = 1"),
    Exc(0x801, 1, 0x200, UNDEF, THIS, psr(1), why="SMC at EL1 with SCR_EL3.SMD = 1"),
]

# el2_traps.S: EL1 instructions trapped to EL2.
EL2_TRAPS = [
    _sysreg_trap(0xb01, 2, sysreg_iss(3, 0, 1, 0, 0, 1, False),
                 why="MSR SCTLR_EL1, X1 with HCR_EL2.TVM = 1"),
    _sysreg_trap(0xb02, 2, sysreg_iss(3, 0, 0, 5, 0, 3, True),
                 why="MRS X3, ID_AA64DFR0_EL1 with HCR_EL2.TID3 = 1"),
    _sysreg_trap(0xb03, 2, sysreg_iss(3, 0, 0, 4, 0, 4, True),
                 why="MRS X4, ID_AA64PFR0_EL1 with HCR_EL2.TID3 = 1"),
    _sysreg_trap(0xb04, 2, sysreg_iss(3, 3, 14, 0, 1, 5, True),
                 why="MRS X5, CNTPCT_EL0 with CNTHCTL_EL2.EL1PCTEN = 0"),
    Exc(0xb05, 2, 0x400, esr(EC_SMC, 0x99), THIS, psr(1),
        why="SMC with HCR_EL2.TSC = 1: trapped, ELR = the SMC itself"),
    _sysreg_trap(0xb06, 2, sysreg_iss(3, 0, 1, 0, 0, 2, True),
                 why="MRS X2, SCTLR_EL1 with HCR_EL2.TRVM = 1"),
]


def _id_read_at_el0(rt: int, crm: int) -> Callable[[dict], int]:
    """EL0 MRS of ID_AA64<crm>_EL1: EC 0x18 with FEAT_IDST (ID_AA64MMFR2_EL1.IDS != 0, read
    by the program as case 0xc00), else UNDEFINED."""
    def value(values: dict) -> int:
        if (values[0xc00] >> 36) & 0xF:
            return esr(EC_SYSREG, sysreg_iss(3, 0, 0, crm, 0, rt, True))
        return UNDEF
    return value


# el0_sysreg.S: EL0 reads of registers spe_emu supplies itself above EL0.
EL0_SYSREG = [
    Val(0xc00, None, why="ID_AA64MMFR2_EL1 (IDS decides 0xc04/0xc05)"),
    Exc(0xc01, 1, 0x400, esr(EC_SYSREG, sysreg_iss(3, 3, 14, 0, 2, 6, True)), THIS, psr(0, 0, ""),
        why="EL0 MRS X6, CNTVCT_EL0 with CNTKCTL_EL1.EL0VCTEN = 0"),
    Exc(0xc02, 1, 0x400, esr(EC_SYSREG, sysreg_iss(3, 3, 14, 0, 1, 7, True)), THIS, psr(0, 0, ""),
        why="EL0 MRS X7, CNTPCT_EL0 with CNTKCTL_EL1.EL0PCTEN = 0"),
    Exc(0xc03, 1, 0x400, esr(EC_SYSREG, sysreg_iss(3, 3, 14, 0, 0, 8, True)), THIS, psr(0, 0, ""),
        why="EL0 MRS X8, CNTFRQ_EL0 with CNTKCTL_EL1.{EL0PCTEN, EL0VCTEN} = 0"),
    Exc(0xc04, 1, 0x400, _id_read_at_el0(9, 5), THIS, psr(0, 0, ""),
        why="EL0 MRS X9, ID_AA64DFR0_EL1"),
    Exc(0xc05, 1, 0x400, _id_read_at_el0(10, 4), THIS, psr(0, 0, ""),
        why="EL0 MRS X10, ID_AA64PFR0_EL1"),
]

# mmu.S: stage 1 faults (regions and permissions in mmu.S).
MMU = [
    Exc(0xd01, 1, 0x200, esr(EC_DABT_SAME, FSC_TRANSLATION_L1), THIS, psr(1), far=0x8000_0000,
        why="EL1 load from an unmapped VA: translation fault, level 1"),
    Exc(0xd02, 1, 0x200, esr(EC_DABT_SAME, WNR | FSC_PERMISSION_L2), THIS, psr(1),
        far="ro_word", why="EL1 store to a read-only block: permission fault, level 2"),
    Exc(0xd03, 1, 0x200, esr(EC_IABT_SAME, FSC_PERMISSION_L2), ("el0rw_code", 0),
        psr(1, btype=0b10), far="el0rw_code",
        why="EL1 BLR into EL0-writable memory (implicit PXN); BLR left BTYPE = 0b10"),
    Exc(0xd04, 1, 0x200, esr(EC_DABT_SAME, FSC_ALIGNMENT), THIS, psr(1), far=("el1_data", 4),
        why="EL1 misaligned LDR with SCTLR_EL1.A = 1: alignment fault"),
    Exc(0xd0a, 1, 0x200, esr(EC_DABT_SAME, FSC_ALIGNMENT), THIS, psr(1),
        far=("el1_data", 0x600004), why="EL1 misaligned LDR from Device-nGnRnE memory (MAIR_EL1 "
                                        "AttrIndx 1) with SCTLR_EL1.A = 0: alignment fault "
                                        "(AArch64.MemSingle[]'s Device check)"),
    Exc(0xd05, 1, 0x400, esr(EC_DABT_LOWER, FSC_PERMISSION_L2), THIS, psr(0, 0, ""),
        far="el1_data", why="EL0 load from EL1-only data"),
    Exc(0xd06, 1, 0x400, esr(EC_DABT_LOWER, WNR | FSC_PERMISSION_L2), THIS, psr(0, 0, ""),
        far="ro_word", why="EL0 store to a read-only block"),
    Exc(0xd07, 1, 0x400, esr(EC_IABT_LOWER, FSC_PERMISSION_L2), ("el1only_code", 0),
        psr(0, 0, "", btype=0b10), far="el1only_code", why="EL0 BLR into UXN (EL1-only) code"),
    Exc(0xd08, 1, 0x400, esr(EC_DABT_LOWER, FSC_TRANSLATION_L1), THIS, psr(0, 0, ""),
        far=0x8000_0000, why="EL0 load from an unmapped VA"),
    Exc(0xd09, 1, 0x400, esr(EC_SVC, 0xD9), NEXT, psr(0, 0, ""),
        why="EL0 fetch and load from its own block succeed; the next exception is this SVC"),
]

# exc_sync.S: FP/SIMD traps, Illegal Execution state, PC/SP alignment, alignment faults with
# the MMU off, HVC at EL3 (issue 13 survey).
EXC_SYNC = [
    Exc(0xf01, 1, 0x200, FP_TRAP, THIS, psr(1), why="EL1 FMOV with CPACR_EL1.FPEN = 0b00"),
    Exc(0xf02, 1, 0x400, FP_TRAP, THIS, psr(0, 0, ""), why="EL0 FMOV with CPACR_EL1.FPEN = 0b01"),
    Exc(0xf03, 2, 0x400, FP_TRAP, THIS, psr(1), why="EL1 FMOV with CPTR_EL2.TFP = 1"),
    Exc(0xf04, 1, 0x200, FP_TRAP, THIS, psr(1),
        why="EL1 FMOV with CPACR_EL1.FPEN = 0b00 and CPTR_EL2.TFP = 1: EL1 first"),
    Exc(0xf05, 2, 0x200, FP_TRAP, THIS, psr(2), why="EL2 FMOV with CPTR_EL2.TFP = 1"),
    Exc(0xf06, 3, 0x200, FP_TRAP, THIS, psr(3), why="EL3 FMOV with CPTR_EL3.TFP = 1"),
    Exc(0xf07, 3, 0x400, FP_TRAP, THIS, psr(1), why="EL1 FMOV with CPTR_EL3.TFP = 1"),
    Exc(0xf08, 1, 0x200, FP_TRAP, THIS, psr(1),
        why="EL1 LDR D7 (SIMD&FP load) with CPACR_EL1.FPEN = 0b00"),
    Exc(0xf09, 1, 0x200, FP_TRAP, THIS, psr(1), why="EL1 MRS X2, FPCR with CPACR_EL1.FPEN = 0b00"),
    Exc(0xf0a, 2, 0x400, UNDEF, THIS, psr(0, 0, ""),
        why="EL0 FMOV with CPACR_EL1.FPEN = 0b00 and HCR_EL2.TGE = 1: the trap to EL1 is "
            "taken to EL2 as EC 0x00 (AArch64.AdvSIMDFPAccessTrap())"),
    Exc(0xf0b, 2, 0x200, FP_TRAP, THIS, psr(2),
        why="EL2 FMOV with HCR_EL2.E2H = 1 and CPTR_EL2.FPEN = 0b00 (CPACR_EL1 layout)"),
    # Illegal return (SetPSTATEFromPSR()): EL, SP kept, NZCV/DAIF from SPSR, IL = 1 (UAO and
    # BTYPE UNKNOWN: 0 here); the next instruction takes EC 0x0E, ELR = that instruction.
    Exc(0xf11, 1, 0x200, esr(EC_ILLEGAL), ("illegal_target1", 0), psr(1, il=1),
        why="EL1 ERET with SPSR_EL1.M = EL2h: illegal return, then Illegal Execution state"),
    Exc(0xf12, 1, 0x200, esr(EC_ILLEGAL), ("illegal_target2", 0), psr(1, 1, "IF", il=1),
        why="EL1 ERET with SPSR_EL1.M = 0b0001 (not a valid mode): DAIF from the SPSR"),
    Exc(0xf13, 2, 0x200, esr(EC_ILLEGAL), ("illegal_target3", 0), psr(2, il=1),
        why="EL2 ERET to EL1 with HCR_EL2.TGE = 1 is an illegal return"),
    Exc(0xf14, 2, 0x200, esr(EC_ILLEGAL), ("illegal_target4", 0), psr(2, il=1),
        why="EL2 ERET with SPSR_EL2.IL = 1: a legal return sets PSTATE.IL = SPSR.IL "
            "(AArch64.ExceptionReturn()), then Illegal Execution state"),
    Exc(0xf21, 1, 0x200, esr(EC_PC_ALIGN), ("misaligned_code", 2), psr(1, btype=0b10),
        far=("misaligned_code", 2), why="EL1 BLR to PC[1:0] = 0b10: PC alignment fault"),
    Exc(0xf22, 1, 0x400, esr(EC_PC_ALIGN), ("misaligned_code", 2), psr(0, 0, "", btype=0b10),
        far=("misaligned_code", 2), why="EL0 BLR to a misaligned PC: PC alignment fault to EL1"),
    Exc(0xf31, 1, 0x000, esr(EC_SP_ALIGN), THIS, psr(1, 0),
        why="EL1t LDR [SP] with SP_EL0 8 mod 16 and SCTLR_EL1.SA = 1: SP alignment fault"),
    Exc(0xf32, 1, 0x400, esr(EC_SP_ALIGN), THIS, psr(0, 0, ""),
        why="EL0 LDR [SP] with SP 8 mod 16 and SCTLR_EL1.SA0 = 1: SP alignment fault"),
    Exc(0xf33, 1, 0x000, esr(EC_SP_ALIGN), ("case_0xf33", 4), psr(1, 0),
        why="EL1t STR X0, [SP, #-8]! with SCTLR_EL1.SA = 1: SP aligned at the access (no "
            "fault), 8 mod 16 after the writeback: the LDR [SP] after it takes the SP "
            "alignment fault"),
    Exc(0xf34, 1, 0x000, esr(EC_SVC, 0xF34), ("case_0xf34", 8), psr(1, 0),
        why="EL1t LDR [SP] with SP 8 mod 16 and SCTLR_EL1.SA = 0: not checked, the next "
            "exception is this SVC"),
    Exc(0xf41, 1, 0x200, esr(EC_DABT_SAME, FSC_ALIGNMENT), THIS, psr(1), far=("aligned_data", 4),
        why="EL1 misaligned LDR with SCTLR_EL1.A = 1, MMU off: alignment fault"),
    Exc(0xf43, 1, 0x200, esr(EC_SVC, 0xF43), ("case_0xf43", 8), psr(1),
        why="EL1 LDP W2, W3 at 4 mod 8 with SCTLR_EL1.A = 1: two 4-byte accesses, each "
            "aligned (AArch64.CheckAlignment() per access): the next exception is this SVC"),
    Exc(0xf44, 1, 0x400, esr(EC_DABT_LOWER, WNR | FSC_ALIGNMENT), THIS, psr(0, 0, ""),
        far=("aligned_data", 2), why="EL0 STR W0 at 2 mod 4 with SCTLR_EL1.A = 1: alignment "
                                     "fault to EL1, WnR = 1"),
    Exc(0xf42, 1, 0x200, esr(EC_DABT_SAME, FSC_ALIGNMENT), THIS, psr(1), far=("aligned_data", 4),
        why="EL1 misaligned LDR with the MMU off: Device-nGnRnE memory, alignment fault "
            "(AArch64.S1DisabledOutput())"),
    Exc(0xf45, 1, 0x200, esr(EC_DABT_SAME, WNR | FSC_ALIGNMENT), THIS, psr(1),
        far=("aligned_data", 4), why="EL1 misaligned STR with the MMU off: Device memory, "
                                     "alignment fault, WnR = 1"),
    Val(0xf46, 0x1111, why="the faulting store wrote nothing (AArch64.MemSingle[] "
                             "faults before the access)"),
    Exc(0xf47, 1, 0x200, esr(EC_DABT_SAME, FSC_ALIGNMENT), THIS, psr(1), far=("aligned_data", 4),
        why="EL1 LDP X2, X3 at 4 mod 8 with the MMU off: Device memory, 8-byte elements "
            "misaligned: alignment fault"),
    Exc(0xf48, 1, 0x200, esr(EC_SVC, 0xF48), ("case_0xf48", 8), psr(1),
        why="EL1 LDR W2 at 4 mod 8 with the MMU off: aligned to its 4 bytes, no fault; the "
            "next exception is this SVC"),
    Exc(0xf49, 1, 0x200, esr(EC_DABT_SAME, WNR | FSC_ALIGNMENT), THIS, psr(1),
        far=("zva_block", 0), why="EL1 DC ZVA with the MMU off: Device memory, so an Alignment "
        "fault (Arm ARM DC ZVA: 'any type of Device memory'), WnR 1, CM 0, FAR = Xt"),
    Val(0xf4a, 0x3333, why="the DC ZVA that faulted zeroed nothing"),
    Exc(0xf51, 3, 0x200, esr(EC_HVC, 0xF51), NEXT, psr(3),
        why="HVC at EL3 with SCR_EL3.HCE = 1 is taken to EL3 (AArch64.CallHypervisor())"),
]

# exc_debug.S: hardware breakpoints and watchpoints (issue 13 survey).
EXC_DEBUG = [
    Val(0x1100, 0x305, why="ID_AA64DFR0_EL1[23:12]: WRPs = 3 (4 watchpoints), BRPs = 5 (6)"),
    Exc(0x1101, 1, 0x200, esr(EC_BKPT_SAME, FSC_DEBUG), THIS, psr(1, 1, "AIF"),
        why="EL1 breakpoint (DBGBCR0_EL1 address match), MDSCR_EL1.{MDE, KDE} = 1, D = 0"),
    Exc(0x1102, 1, 0x400, esr(EC_BKPT_LOWER, FSC_DEBUG), THIS, psr(0, 0, ""),
        why="EL0 breakpoint: EC 0x30 to EL1"),
    Exc(0x1103, 1, 0x200, esr(EC_WPT_SAME, FSC_DEBUG), THIS, psr(1, 1, "AIF"), far="watched",
        why="EL1 LDR of a watched doubleword: Watchpoint, WnR 0 (WPTV 0: IMPLEMENTATION "
            "DEFINED without FEAT_Debugv8p9)"),
    Exc(0x1104, 1, 0x200, esr(EC_WPT_SAME, WNR | FSC_DEBUG), THIS, psr(1, 1, "AIF"),
        far="watched", why="EL1 STR to it: Watchpoint, WnR 1"),
    Exc(0x1105, 1, 0x400, esr(EC_WPT_LOWER, FSC_DEBUG), THIS, psr(0, 0, ""), far="watched",
        why="EL0 LDR of it: Watchpoint to EL1, WnR 0"),
    Exc(0x1106, 1, 0x200, esr(EC_SVC, 0x16), ("case_0x1106", 8), psr(1),
        why="a breakpoint at EL1 with PSTATE.D = 1 is masked: the next exception is the SVC"),
    Exc(0x1107, 1, 0x200, esr(EC_WPT_SAME, WNR | FSC_DEBUG), THIS, psr(1, 1, "AIF"),
        far=("watched", 8), why="EL1 STP whose second doubleword is watched: FAR = that one"),
    Exc(0x1108, 1, 0x200, esr(EC_WPT_SAME, FSC_DEBUG), THIS, psr(1, 1, "AIF"), far="watched",
        why="EL1 LDR X0 of a watched doubleword"),
    Val(0x1109, 0x77, why="X0 after the LDR that took the Watchpoint: unchanged"),
    Exc(0x110a, 1, 0x200, esr(EC_SVC, 0x10a), ("case_0x110a", 8), psr(1, 1, "AIF"),
        why="DBGWCR0_EL1.PAC = 0b10 (EL0 only): an EL1 load does not match"),
    Exc(0x110b, 1, 0x200, esr(EC_WPT_SAME, WNR | FSC_DEBUG), THIS, psr(1, 1, "AIF"),
        far="watched", why="DBGWCR0_EL1.LSC = 0b10: the LDR before does not match, the STR does"),
    Exc(0x110c, 1, 0x200, esr(EC_WPT_SAME, FSC_DEBUG), THIS, psr(1, 1, "AIF"),
        far=("watched", 8), why="DBGWCR0_EL1.MASK = 4: 16 bytes watched, LDR of the second "
                                "doubleword matches"),
    Exc(0x110d, 1, 0x200, esr(EC_SVC, 0x10d), ("case_0x110d", 8), psr(1, 1, "AIF"),
        why="OS Lock set (OSLAR_EL1.OSLK = 1): debug exceptions disabled, no match"),
    Exc(0x110e, 2, 0x400, esr(EC_WPT_LOWER, FSC_DEBUG), THIS, psr(1), far="watched",
        why="MDCR_EL2.TDE = 1: Watchpoint from EL1 to EL2 (EC 0x34), not masked by PSTATE.D"),
    Exc(0x110f, 1, 0x200, esr(EC_SVC, 0x10f), ("case_0x110f", 8), psr(1),
        why="EL1 load with PSTATE.D = 1: the Watchpoint is masked"),
    Exc(0x1110, 1, 0x200, esr(EC_SVC, 0x110), ("case_0x1110", 8), psr(1, 1, "AIF"),
        why="OS Lock set: no Breakpoint exception (AArch64.GenerateDebugExceptionsFrom())"),
    Val(0x1111, 0x1E7, why="MRS DBGBCR0_EL1 with the OS Lock set reads the value written "
                           "(E = 1, PMC = 0b11, BAS = 0xF)"),
    Exc(0x1112, 1, 0x200, esr(EC_BKPT_SAME, FSC_DEBUG), THIS, psr(1, 1, "AIF"),
        why="OS Lock cleared: the breakpoint generates Breakpoint exceptions again"),
    Val(0x1113, 0, why="ID_AA64DFR0_EL1.DoubleLock = 0b0000: FEAT_DoubleLock implemented"),
    Val(0x1114, 1, why="OSDLR_EL1 reads DLK = 1 after it is written (Unicorn's QEMU 5 keeps no "
                       "value: spe_emu keeps it)"),
    Exc(0x1115, 1, 0x200, esr(EC_SVC, 0x115), ("case_0x1115", 8), psr(1, 1, "AIF"),
        why="OS Double Lock set: no Watchpoint (AArch64.GenerateDebugExceptionsFrom(): "
            "DoubleLockStatus()); the next exception is the SVC"),
    Exc(0x1116, 1, 0x200, esr(EC_WPT_SAME, FSC_DEBUG), THIS, psr(1, 1, "AIF"), far="watched",
        why="OSDLR_EL1.DLK cleared: the same load takes the Watchpoint"),
]

# exc_wpmap.S: watchpoints where the watched VA and the PA differ (issue 13).
WPMAP_UPPER = ("wdata", 0xFFFF_FF80_4000_0000 + 0x20_0000 - 0x4020_0000)  # wdata via TTBR1


def _wpmap_hit(tag: int, why: str, wnr: int = 0) -> Exc:
    return Exc(tag, 1, 0x200, esr(EC_WPT_SAME, wnr | FSC_DEBUG), THIS, psr(1, 1, "AIF"),
               far=WPMAP_UPPER, why=why)


EXC_WPMAP = [
    _wpmap_hit(0x1701, "EL1 LDR through the watched upper-half VA (PA 0x4020_xxxx): Watchpoint, "
                       "FAR = the VA"),
    Exc(0x1702, 1, 0x200, esr(EC_SVC, 0x702), ("case_0x1702", 8), psr(1, 1, "AIF"),
        why="the same bytes loaded through their identity VA: no match (watchpoints compare "
            "VAs); the next exception is the SVC"),
    Exc(0x1703, 1, 0x200, esr(EC_SVC, 0x703), ("case_0x1703", 8), psr(1, 1, "AIF"),
        why="watchpoint on the identity VA, load through the upper alias: no match"),
    _wpmap_hit(0x1704, "EL1 STR through the watched upper VA: Watchpoint, WnR 1", wnr=WNR),
    Val(0x1705, 0x5555, why="the doubleword read through the identity VA: the STR that took "
                            "the Watchpoint did not complete"),
    _wpmap_hit(0x1706, "the upper data block moved to PA 0x4060_0000 (descriptor, TLBI): the "
                       "same VA still watched"),
    _wpmap_hit(0x1707, "TTBR1_EL1 switched to tables mapping it at PA 0x4040_0000: watched"),
]

# exc_virq.S: virtual IRQ, FIQ and SError (issue 13 survey). An IRQ or FIQ writes no ESR: the
# records show the SVC of case 0x1200.
EXC_VIRQ = [
    Exc(0x1200, 1, 0x200, esr(EC_SVC, 0x12), NEXT, psr(1), why="SVC at EL1 (sets ESR_EL1)"),
    Val(0x1201, 0x80, why="ISR_EL1.I with HCR_EL2.{IMO, VI} = 1 and PSTATE.I = 1"),
    Exc(0x1202, 1, 0x280, esr(EC_SVC, 0x12), NEXT, psr(1, 1, "DAF"),
        why="HCR_EL2.{IMO, VI} = 1, PSTATE.I cleared at EL1: virtual IRQ at EL1"),
    Exc(0x1203, 1, 0x300, esr(EC_SVC, 0x12), NEXT, psr(1, 1, "DAI"),
        why="HCR_EL2.{FMO, VF} = 1, PSTATE.F cleared at EL1: virtual FIQ at EL1"),
    Exc(0x1204, 1, 0x380, esr(EC_SERROR), NEXT, psr(1, 1, "DIF"),
        why="HCR_EL2.{AMO, VSE} = 1, PSTATE.A cleared at EL1: virtual SError at EL1, "
            "ESR EC 0x2F, IL 1, ISS = VSESR_EL2.{IDS, ISS} = 0 (FEAT_RAS)"),
    Val(0x1205, 0x8000_0038, why="HCR_EL2 after the virtual SError: VSE cleared "
                                 "(ClearPendingVirtualSError()), RW, AMO, IMO, FMO kept"),
    Val(0x1206, 0x100, why="ISR_EL1.A with HCR_EL2.{AMO, VSE} = 1 and PSTATE.A = 1"),
    Exc(0x1207, 1, 0x580, esr(EC_SERROR), ("vserr_el0", 0), psr(0, 0, ""),
        why="ERET to EL0 with PSTATE.A = 0 and HCR_EL2.VSE = 1: virtual SError from EL0 at "
            "the ERET's target, vector +0x580"),
    Val(0x1208, 0, why="ISR_EL1 with HCR_EL2.VSE = 1, AMO = 0: no virtual SError pending "
                       "(and none is taken with PSTATE.A = 0)"),
    Exc(0x1209, 1, 0x380, esr(EC_SERROR), ("vserr_eret_target", 0), psr(1, 1, "DIF"),
        why="HCR_EL2.VSE set at EL2, ERET to EL1 with SPSR_EL2.A = 0: taken at the ERET's "
            "target"),
    Exc(0x120a, 1, 0x480, esr(EC_SERROR), ("virq_el0", 0), psr(0, 0, ""),
        why="ERET from EL2 to EL0 with HCR_EL2.{IMO, VI} = 1, PSTATE.I = 0: virtual IRQ from "
            "EL0, vector +0x480; ESR_EL1 keeps the virtual SError's syndrome"),
    Val(0x120b, 0x11, why="VSESR_EL2 read back at EL2 (FEAT_RAS: IDS [24], ISS [23:0])"),
    Exc(0x120c, 1, 0x380, esr(EC_SERROR, 0x11), NEXT, psr(1, 1, "DIF"),
        why="virtual SError with VSESR_EL2 = 0x11: ESR_EL1 = 0xbe000011, IDS and ISS from "
            "VSESR_EL2 (AArch64.TakeVirtualSErrorException() with FEAT_RAS)"),
    Exc(0x120d, 1, 0x380, esr(EC_SERROR, 1 << 24 | 0xABCDEF), NEXT, psr(1, 1, "DIF"),
        why="VSESR_EL2.IDS = 1, ISS = 0xabcdef: ESR_EL1 = 0xbfabcdef"),
    Val(0x120e, 0x8000_0022, why="DISR_EL1 at EL1 with HCR_EL2.AMO = 1 reads VDISR_EL2"),
    Val(0x120f, 0, why="VDISR_EL2 after EL1 wrote 0 to DISR_EL1 with AMO = 1"),
    Val(0x1211, 0, why="ERRIDR_EL1.NUM = 0: no error record"),
    Val(0x1210, 0x8000_0033, why="DISR_EL1 at EL2 after EL1 wrote it with HCR_EL2.AMO = 0"),
]


def _walk_fault(tag: int, kind: str, level: int, va: int, why: str, wnr: int = 0) -> Exc:
    return Exc(tag, 1, 0x200, esr(EC_DABT_SAME, wnr | fsc(kind, level)), THIS, psr(1), far=va,
               why=why)


# exc_walk.S: stage 1 faults of the 4 KiB-granule walk at every level (issue 13 survey).
EXC_WALK = [
    _walk_fault(0x1301, "translation", 0, 0x80_0000_0000, "invalid level 0 descriptor"),
    _walk_fault(0x1302, "translation", 1, 0x8000_0000, "invalid level 1 descriptor"),
    _walk_fault(0x1303, "translation", 2, 0x4060_0000, "invalid level 2 descriptor"),
    _walk_fault(0x1304, "translation", 3, 0x4040_1000, "invalid level 3 descriptor"),
    _walk_fault(0x1305, "translation", 3, 0x4040_5000, "level 3 descriptor 0b01 (reserved)"),
    _walk_fault(0x1306, "access", 2, 0x4080_0000, "level 2 block with AF = 0"),
    _walk_fault(0x1307, "access", 3, 0x4040_2000, "level 3 page with AF = 0"),
    _walk_fault(0x1308, "permission", 3, 0x4040_3000, "STR to a read-only page", wnr=WNR),
    Exc(0x1309, 1, 0x200, esr(EC_SVC, 0x39), NEXT, psr(1),
        why="load and store to a valid page take no exception: the next one is this SVC"),
    _walk_fault(0x130a, "size", 1, 0xC000_0000,
                "level 1 table descriptor with a next-level address beyond TCR_EL1.IPS"),
    _walk_fault(0x130b, "size", 1, 0x1_0000_0000, "level 1 block with an OA beyond the OA size"),
    _walk_fault(0x130c, "size", 2, 0x40A0_0000, "level 2 block with an OA beyond the OA size"),
    _walk_fault(0x130d, "size", 3, 0x4040_4000, "level 3 page with an OA beyond the OA size"),
    _walk_fault(0x130e, "walk_external", 2, 0x1_4000_0000,
                "level 2 table at a PA with no memory: External abort on the walk, level 2"),
    _walk_fault(0x130f, "walk_external", 0, 0xFFFF_0000_0000_0000,
                "TTBR1_EL1 at a PA with no memory: External abort on the walk, level 0"),
    _walk_fault(0x1310, "size", 0, 0xFFFF_0000_0000_0000,
                "TTBR1_EL1 beyond the OA size: address size fault, level 0"),
    Exc(0x1311, 1, 0x200, esr(EC_DABT_SAME, FSC_SYNC_EXTERNAL), THIS, psr(1), far=0x40C0_0000,
        why="valid block at a PA with no memory: synchronous External abort, FAR = the VA"),
]

# e0pd.S: FEAT_E0PD, TCR_EL1.E0PD0/E0PD1 (issue 14: the board presents it by default).
E0PD_UPPER = 0xFFFF_FF80_4000_0000
E0PD_UPPER_DATA = ("el1_data", E0PD_UPPER + 0x20_0000 - 0x4020_0000)  # el1_data seen via TTBR1


def _e0pd_fault(tag: int, el: int, why: str, far, wnr: int = 0) -> Exc:
    return Exc(tag, 1, 0x400 if el == 0 else 0x200,
               esr(EC_DABT_LOWER if el == 0 else EC_DABT_SAME, wnr | fsc("translation", 0)),
               THIS, psr(0, 0, "") if el == 0 else psr(1), far=far, why=why)


E0PD = [
    Val(0xe01, 0x1111, why="EL1 LDR from the upper half with E0PD1 = 1: privileged, no fault"),
    _e0pd_fault(0xe02, 1, "EL1 LDTR (unprivileged) from the upper half with E0PD1 = 1: level 0 "
                "translation fault instead of the permission fault the tables give",
                E0PD_UPPER_DATA),
    _e0pd_fault(0xe03, 1, "EL1 LDTR from an EL0-readable lower-half page with E0PD0 = 1",
                "ro_word"),
    Val(0xe04, 0x0123_4567_89AB_CDEF, why="the same LDTR with E0PD0 = 0 reads the word"),
    _e0pd_fault(0xe05, 0, "EL0 LDR from EL1-only upper-half data with E0PD1 = 1: level 0 "
                "translation fault, not the tables' permission fault at level 2",
                E0PD_UPPER_DATA),
    _e0pd_fault(0xe06, 0, "EL0 STR to an unmapped upper-half VA with E0PD1 = 1: level 0, not 2",
                E0PD_UPPER + 0x40_0000, wnr=WNR),
    _e0pd_fault(0xe07, 0, "EL0 LDR from an upper-half page the tables let EL0 read, E0PD1 = 1",
                ("ro_word", E0PD_UPPER - 0x4000_0000)),
    Exc(0xe08, 1, 0x400, esr(EC_IABT_LOWER, fsc("translation", 0)), E0PD_UPPER + 0x20_0000,
        psr(0, 0, "", btype=0b10), far=E0PD_UPPER + 0x20_0000,
        why="EL0 BLR into the upper half with E0PD1 = 1: Instruction Abort, level 0 translation"),
    Exc(0xe09, 1, 0x400, esr(EC_DABT_LOWER, FSC_PERMISSION_L2), THIS, psr(0, 0, ""),
        far=E0PD_UPPER_DATA, why="EL0 LDR from EL1-only upper-half data with E0PD1 = 0: the "
                                 "tables' permission fault, level 2"),
    Exc(0xe0a, 1, 0x400, esr(EC_SVC, 0xEA), NEXT, psr(0, 0, ""),
        why="EL0 LDR from the EL0-readable upper half with E0PD1 = 0 succeeds; next: this SVC"),
]


def wfx(ti: int) -> int:
    """EC 0x01 (trapped WFI/WFE) from AArch64: CV [24] = 1, COND [23:20] = 0b1110, TI [1:0]
    (0b00 WFI, 0b01 WFE)."""
    return esr(0x01, 1 << 24 | 0b1110 << 20 | ti)


EC_PAC_TRAP = 0x09

# exc_traps.S: WFI/WFE, debug, PMU, cache/TLB maintenance, CPACR_EL1, PAuth and ACTLR_EL1
# traps of HCR_EL2, MDCR_EL2, CPTR_EL2, SCR_EL3, MDCR_EL3 and SCTLR_EL1 (issue 13).
EXC_TRAPS = [
    Exc(0x1401, 2, 0x400, wfx(0b00), THIS, psr(1), why="EL1 WFI with HCR_EL2.TWI = 1"),
    Exc(0x1402, 1, 0x200, esr(EC_SVC, 0x142), ("case_0x1402", 8), psr(1),
        why="EL1 WFE with HCR_EL2.TWE = 1 right after an ERET: the exception return set the "
            "Event Register, the WFE would not enter a low-power state, so it is not trapped "
            "(Arm ARM 'Wait for Event mechanism'; HCR_EL2.TWE)"),
    Exc(0x1403, 1, 0x400, wfx(0b00), THIS, psr(0, 0, ""), why="EL0 WFI with SCTLR_EL1.nTWI = 0"),
    Exc(0x1404, 3, 0x400, wfx(0b00), THIS, psr(1), why="EL1 WFI with SCR_EL3.TWI = 1"),
    _sysreg_trap(0x1405, 2, sysreg_iss(2, 0, 0, 2, 2, 3, True),
                 why="EL1 MRS X3, MDSCR_EL1 with MDCR_EL2.TDA = 1"),
    _sysreg_trap(0x1406, 2, sysreg_iss(2, 0, 1, 1, 4, 4, True),
                 why="EL1 MRS X4, OSLSR_EL1 with MDCR_EL2.TDOSA = 1"),
    _sysreg_trap(0x1407, 2, sysreg_iss(3, 3, 9, 12, 0, 5, True),
                 why="EL1 MRS X5, PMCR_EL0 with MDCR_EL2.TPM = 1"),
    _sysreg_trap(0x140e, 2, sysreg_iss(2, 0, 1, 0, 0, 7, True),
                 why="EL1 MRS X7, MDRAR_EL1 with MDCR_EL2.TDRA = 1"),
    _sysreg_trap(0x140f, 2, sysreg_iss(2, 0, 0, 0, 5, 8, True),
                 why="EL1 MRS X8, DBGBCR0_EL1 with MDCR_EL2.TDE = 1: TDA behaves as 1"),
    _sysreg_trap(0x1408, 3, sysreg_iss(2, 0, 0, 2, 2, 6, True),
                 why="EL1 MRS X6, MDSCR_EL1 with MDCR_EL3.TDA = 1"),
    _sysreg_trap(0x1409, 2, sysreg_iss(1, 0, 7, 6, 2, 7, False),
                 why="EL1 DC ISW, X7 with HCR_EL2.TSW = 1"),
    _sysreg_trap(0x140a, 2, sysreg_iss(1, 0, 8, 7, 0, 31, False),
                 why="EL1 TLBI VMALLE1 with HCR_EL2.TTLB = 1"),
    _sysreg_trap(0x140b, 2, sysreg_iss(3, 0, 1, 0, 2, 8, True),
                 why="EL1 MRS X8, CPACR_EL1 with CPTR_EL2.TCPAC = 1"),
    Exc(0x140c, 2, 0x400, esr(EC_PAC_TRAP), THIS, psr(1),
        why="EL1 PACIA with HCR_EL2.API = 0, SCTLR_EL1.EnIA = 1: EC 0x09, ISS 0 "
            "(AArch64.AddPACIA(): not trapped while EnIA = 0)"),
    _sysreg_trap(0x140d, 2, sysreg_iss(3, 0, 1, 0, 1, 9, True),
                 why="EL1 MRS X9, ACTLR_EL1 with HCR_EL2.TACR = 1"),
]

def s2_data_abort(fsc_value: int, *, size_log2: int, rt: int, sf: int, write: bool = False
                  ) -> int:
    """ESR of a stage 2 Data Abort from a lower EL on a single general-purpose load/store:
    ISV [24] = 1, SAS [23:22], SSE [21] = 0, SRT [20:16], SF [15], AR [14] = 0, WnR [6], DFSC."""
    return esr(EC_DABT_LOWER, 1 << 24 | size_log2 << 22 | rt << 16 | sf << 15
               | (WNR if write else 0) | fsc_value)


def hpfar(ipa: int) -> int:
    """HPFAR_EL2: FIPA [43:4] = IPA[51:12]."""
    return (ipa >> 12) << 4


# exc_s2.S: stage 2 faults with HPFAR_EL2 (issue 13).
EXC_S2 = [
    Exc(0x1501, 2, 0x400, s2_data_abort(fsc("permission", 2), size_log2=3, rt=3, sf=1,
                                        write=True), THIS, psr(1), far=0x4060_0000,
        why="EL1 STR to a stage 2 read-only block: permission fault, level 2, ISV = 1"),
    Val(0x1511, hpfar(0x4060_0000), why="HPFAR_EL2 of the stage 2 permission fault"),
    Exc(0x1502, 2, 0x400, s2_data_abort(fsc("access", 2), size_log2=3, rt=4, sf=1), THIS, psr(1),
        far=0x4080_0000, why="EL1 LDR from a stage 2 block with AF = 0: access flag, level 2"),
    Val(0x1512, hpfar(0x4080_0000), why="HPFAR_EL2 of the access flag fault"),
    Exc(0x1503, 2, 0x400, s2_data_abort(fsc("translation", 2), size_log2=2, rt=5, sf=0), THIS,
        psr(1), far=0x40A0_0000, why="EL1 LDR W5 from an invalid stage 2 level 2 entry"),
    Val(0x1513, hpfar(0x40A0_0000), why="HPFAR_EL2 of the level 2 translation fault"),
    Exc(0x1504, 2, 0x400, s2_data_abort(fsc("translation", 1), size_log2=0, rt=6, sf=0), THIS,
        psr(1), far=0x8000_0000, why="EL1 LDRB from an invalid stage 2 level 1 entry"),
    Val(0x1514, hpfar(0x8000_0000), why="HPFAR_EL2 of the level 1 translation fault"),
    Exc(0x1505, 2, 0x400, esr(EC_IABT_LOWER, fsc("permission", 2)), 0x40C0_0000,
        psr(1, btype=0b10), far=0x40C0_0000,
        why="EL1 BLR into a stage 2 XN block: Instruction Abort to EL2, permission, level 2"),
    Val(0x1515, hpfar(0x40C0_0000), why="HPFAR_EL2 of the stage 2 Instruction Abort"),
    Exc(0x1506, 2, 0x400, esr(EC_HVC, 0x156), ("case_0x1506", 8), psr(1),
        why="EL1 LDR from the stage 2 read-only block: no fault, the next exception is the HVC"),
    Exc(0x1507, 1, 0x200, esr(EC_DABT_SAME, FSC_ALIGNMENT), THIS, psr(1), far=0x40E0_0004,
        why="EL1 LDR X8 at 4 mod 8 with stage 1 off (Device memory) through a stage 2 mapping "
            "to another PA: Alignment fault to EL1 (a stage 1 fault), FAR = the VA"),
    Val(0x1508, 0x77, why="X8 after the load that took the Alignment fault: unchanged"),
]

PMSCR = (3, 0, 9, 9, 0)
PMSIDR = (3, 0, 9, 9, 7)
PMBLIMITR, PMBPTR, PMBSR = (3, 0, 9, 10, 0), (3, 0, 9, 10, 1), (3, 0, 9, 10, 3)
PMSCR_EL2 = (3, 4, 9, 9, 0)


def spe_trap(enc: tuple[int, int, int, int, int], rt: int, read: bool) -> int:
    op0, op1, crn, crm, op2 = enc
    return esr(EC_SYSREG, sysreg_iss(op0, op1, crn, crm, op2, rt, read))


# PMSIDR_EL1 of the modelled SPU (docs/model.md): CountSize 0b0010 (12-bit saturating)
# [19:16], MaxSize 0b0110 (64 bytes) [15:12], Interval 0 [11:8], ERnd 0, LDS 0, ArchInst 1
# [3], FL, FT, FE = 1.
PMSIDR_VALUE = 0b0010 << 16 | 0b0110 << 12 | 0b1111
PMBIDR_P = 1 << 4   # PMBIDR_EL1.P (§4.3.1); F = 0 and Align = 0 in the model

# spe_access.S: SPE access checks (spe_emu only).
SPE = [
    Exc(0xe01, 3, 0x200, esr(EC_HVC, 0xE1), NEXT, psr(3),
        why="HVC at EL3 is taken to EL3 (AArch64.CallHypervisor())"),
    Val(0xe02, 0, why="PMBIDR_EL1.P at EL2, buffer owned by Non-secure EL1: 0 (§4.3.1 "
                      "'otherwise, this bit reads as zero')"),
    Val(0xe03, 0, why="PMBIDR_EL1.P at EL1, buffer owned by Non-secure EL1"),
    Val(0xe04, PMSIDR_VALUE, why="PMSIDR_EL1"),
    Val(0xe05, 0xFFF, why="PMSLATFR_EL1 all ones: MINLAT [11:0], the rest RES0 (§4.3.13)"),
    Exc(0xe06, 1, 0x200, UNDEF, THIS, psr(1), why="MSR PMSIDR_EL1 (read-only)"),
    Exc(0xe07, 1, 0x200, UNDEF, THIS, psr(1), why="MRS PMSCR_EL2 at EL1 (§4.3.7)"),
    Exc(0xe08, 1, 0x200, UNDEF, THIS, psr(1), why="MSR PMSCR_EL2 at EL1"),
    Exc(0xe09, 1, 0x200, UNDEF, THIS, psr(1), why="MRS PMSCR_EL12 at EL1 (no E2H)"),
    Val(0xe0a, 0, why="PSB CSYNC at EL1 takes no exception"),
    Exc(0xe11, 2, 0x400, spe_trap(PMSCR, 3, False), THIS, psr(1),
        why="MSR PMSCR_EL1, X3 at EL1 with MDCR_EL2.TPMS = 1"),
    Exc(0xe12, 2, 0x400, spe_trap(PMSIDR, 7, True), THIS, psr(1),
        why="MRS X7, PMSIDR_EL1 at EL1 with MDCR_EL2.TPMS = 1"),
    Val(0xe13, 0x4400_0000, why="PMBPTR_EL1 round trip at EL1 (TPMS does not trap it)"),
    Val(0xe14, 0, why="PMBIDR_EL1.P at EL2 with E2PB = 0b00 (owned by EL2)"),
    Exc(0xe21, 2, 0x400, spe_trap(PMBSR, 2, True), THIS, psr(1),
        why="MRS X2, PMBSR_EL1 at EL1 with MDCR_EL2.E2PB = 0b00"),
    Exc(0xe22, 2, 0x400, spe_trap(PMBLIMITR, 4, False), THIS, psr(1),
        why="MSR PMBLIMITR_EL1, X4 at EL1 with MDCR_EL2.E2PB = 0b00"),
    Val(0xe23, PMBIDR_P, why="PMBIDR_EL1.P at Non-secure EL1 with E2PB = 0b00: 1 (never trapped)"),
    Val(0xe24, 0x7B, why="PMSCR_EL1 all ones: PCT, TS, PA, CX, E1SPE, E0SPE (§4.3.5)"),
    Exc(0xe25, 2, 0x400, spe_trap(PMBPTR, 6, True), THIS, psr(1),
        why="MRS X6, PMBPTR_EL1 at EL1 with MDCR_EL2.E2PB = 0b10 (E2PB<0> == 0)"),
    Val(0xe26, 0, why="PMBIDR_EL1.P at EL1 with E2PB = 0b10 (owned by EL1)"),
    Exc(0xe31, 3, 0x400, spe_trap(PMSCR, 3, False), THIS, psr(1),
        why="MSR PMSCR_EL1 at EL1 with MDCR_EL3.NSPB = 0b01, SCR_EL3.NS = 1"),
    Exc(0xe32, 3, 0x400, spe_trap(PMBSR, 2, True), THIS, psr(1),
        why="MRS PMBSR_EL1 at EL1 with MDCR_EL3.NSPB = 0b01"),
    Val(0xe33, PMBIDR_P, why="PMBIDR_EL1.P at Non-secure EL1 with NSPB = 0b01: 1"),
    Exc(0xe34, 3, 0x400, spe_trap(PMSCR, 3, False), THIS, psr(2),
        why="MSR PMSCR_EL1 at EL2 with MDCR_EL3.NSPB = 0b01"),
    Exc(0xe35, 3, 0x400, spe_trap(PMSCR_EL2, 1, True), THIS, psr(2),
        why="MRS PMSCR_EL2 at EL2 with MDCR_EL3.NSPB != 0b11"),
    Val(0xe36, PMBIDR_P, why="PMBIDR_EL1.P at EL2 with NSPB = 0b01: 1"),
    Val(0xe37, 0x7B, why="PMSCR_EL2 all ones at EL3: PCT, TS, PA, CX, E2SPE, E0HSPE (§4.3.7)"),
    Exc(0xe41, 1, 0x400, UNDEF, THIS, psr(0, 0, ""),
        why="EL0 MRS PMSCR_EL1 (UNDEFINED before the TPMS trap)"),
    Exc(0xe42, 1, 0x400, UNDEF, THIS, psr(0, 0, ""), why="EL0 MRS PMBIDR_EL1"),
    Exc(0xe43, 1, 0x400, esr(EC_SVC, 0xE4), NEXT, psr(0, 0, ""),
        why="PSB CSYNC at EL0 takes no exception: the next one is this SVC"),
]

# exc_step.S: Software Step (MDSCR_EL1.SS, SPSR_ELx.SS; Arm ARM D2.12), ISS: ISV [24], EX [6],
# IFSC [5:0] = 0b100010 (D19.2 "ISS encoding for an exception from a Software Step exception").
EC_STEP_LOWER, EC_STEP_SAME, STEP_ISV, STEP_EX = 0x32, 0x33, 1 << 24, 1 << 6
EXC_STEP = [
    Exc(0x1601, 1, 0x400, esr(EC_STEP_LOWER, STEP_ISV | FSC_DEBUG), ("el0_step", 4),
        psr(0, 0, ""), why="ERET to EL0 with SPSR_EL1.SS = 1 and MDSCR_EL1.SS = 1: one "
                           "instruction executes, then Software Step to EL1, ELR = the next"),
    Exc(0x1602, 1, 0x200, esr(EC_STEP_SAME, STEP_ISV | FSC_DEBUG), ("el1_step", 4),
        psr(1, 1, "AIF"), why="EL1 stepping itself: MDSCR_EL1.KDE = 1, PSTATE.D = 0"),
    Exc(0x1603, 1, 0x200, esr(EC_SVC, 0x603), ("el1_nostep", 8), psr(1, 1, "AIF"),
        why="KDE = 0: debug exceptions disabled at EL1 (AArch64.GenerateDebugExceptionsFrom())"
            ", no step; the next exception is the SVC"),
    Exc(0x1604, 1, 0x400, esr(EC_STEP_LOWER, FSC_DEBUG), ("el0_pending", 0), psr(0, 0, ""),
        why="ERET with SPSR_EL1.SS = 0: active-pending, the exception is taken before the "
            "first instruction, ISV = 0"),
    Exc(0x1605, 1, 0x400, esr(EC_STEP_LOWER, STEP_ISV | STEP_EX | FSC_DEBUG), ("el0_excl", 4),
        psr(0, 0, ""), why="a stepped load-exclusive (LDXR): EX = 1"),
    Exc(0x1606, 1, 0x400, esr(EC_SVC, 0x606), ("el0_locked", 8), psr(0, 0, ""),
        why="OS Lock set: no Software Step (AArch64.GenerateDebugExceptionsFrom()); the next "
            "exception is the SVC"),
]


@dataclass(frozen=True)
class Program:
    source: str
    cases: list
    boot_els: tuple[int, ...] = (3,)
    qemu: bool = True
    # tag -> reason: QEMU 7.2 deviates from the architecture (case not checked on QEMU, line
    # not compared)
    qemu_bugs: dict[int, str] = field(default_factory=dict)
    # tag -> reason: QEMU's "max" CPU has a feature spe_emu's lacks (the case's expectation
    # covers both; the line is not compared)
    cpu_differs: dict[int, str] = field(default_factory=dict)
    # tag -> reason: a known limitation of spe_emu (documented in docs/model.md); the case is
    # a strict xfail on spe_emu, is not expected in the run, and its line is not compared
    spe_emu_limits: dict[int, str] = field(default_factory=dict)
    # tag -> what spe_emu does instead: spe_emu deviates from the architecture (open, issue
    # 13); the case is a strict xfail on spe_emu (a fix turns it into a failure: move the tag
    # out of here), its records are neither expected nor forbidden in the run, and its lines
    # are not compared with QEMU's
    spe_emu_bugs: dict[int, str] = field(default_factory=dict)

    @property
    def not_compared(self) -> set[int]:
        return (set(self.qemu_bugs) | set(self.cpu_differs) | set(self.spe_emu_limits)
                | set(self.spe_emu_bugs))


PROGRAMS = {
    "basic": Program("basic.S", BASIC, boot_els=(3, 2, 1), qemu_bugs={
        0x208: "QEMU 7.2 swaps Op1 and Op2 in the ISS of a trapped MSR DAIFSet/DAIFClr "
               "(prints 0x620793e4 for Op1 = 3, Op2 = 6)"}),
    "brk": Program("brk.S", BRK),
    "el2el3": Program("el2el3.S", EL2EL3),
    "el2_traps": Program("el2_traps.S", EL2_TRAPS),
    "el0_sysreg": Program("el0_sysreg.S", EL0_SYSREG, cpu_differs={
        0xc00: "ID_AA64MMFR2_EL1 differs: QEMU 7.2 -cpu max has FEAT_IDST, Unicorn's max not",
        0xc04: "EC 0x18 (FEAT_IDST) on QEMU, UNDEFINED on spe_emu's CPU",
        0xc05: "EC 0x18 (FEAT_IDST) on QEMU, UNDEFINED on spe_emu's CPU"}),
    "mmu": Program("mmu.S", MMU, boot_els=(3, 2, 1), qemu_bugs={
        0xd0a: "QEMU 7.2 makes no memory-type alignment check: the misaligned load from Device "
               "memory completes"}, spe_emu_limits={
        0xd0a: "no alignment check of Device memory mapped by stage 1 with SCTLR_ELx.A = 0 "
               "(docs/model.md \"Exceptions\"): the load completes"}),
    "spe_access": Program("spe_access.S", SPE, qemu=False),
    "exc_sync": Program("exc_sync.S", EXC_SYNC, qemu_bugs={
        0xf31: "QEMU 7.2 does not check SP alignment (SCTLR_EL1.SA): the load completes",
        0xf32: "QEMU 7.2 does not check SP alignment (SCTLR_EL1.SA0): the load completes",
        0xf33: "QEMU 7.2 does not check SP alignment (SCTLR_EL1.SA): the load completes",
        0xf42: "QEMU 7.2 makes no memory-type alignment check with the MMU off: the misaligned "
               "load from Device memory completes",
        0xf45: "QEMU 7.2: no alignment check with the MMU off, the store completes",
        0xf46: "QEMU 7.2: the misaligned store of 0xf45 was made (0xcafef00d00001111)",
        0xf47: "QEMU 7.2: no alignment check with the MMU off, the load completes",
        0xf49: "QEMU 7.2: DC ZVA to Device memory (MMU off) zeroes the block, no fault",
        0xf4a: "QEMU 7.2: the block of 0xf49 was zeroed",
        0xf51: "QEMU 7.2 takes HVC at EL3 to EL2 (ESR_EL2 0x5a000f51, SPSR 0x3cd); the EL2 "
               "handler's ERET to EL3 is then an illegal return (a second record, EC 0x0E)"},
        ),
    "exc_debug": Program("exc_debug.S", EXC_DEBUG, qemu_bugs={
        0x1105: "QEMU 7.2 keeps a watchpoint's write-hit flag after the STR of case 0x1104: this "
                "load reports WnR = 1 (ESR 0xd2000062); re-arming DBGWCR0_EL1 clears it",
        0x110d: "QEMU 7.2 takes the Watchpoint (ESR 0xd6000022) with the OS Lock set: it does "
                "not check OSLSR_EL1.OSLK, which AArch64.GenerateDebugExceptionsFrom() does",
        0x1110: "QEMU 7.2 takes the Breakpoint (ESR 0xc6000022) with the OS Lock set (no "
                "OSLSR_EL1.OSLK check)"}),
    "exc_step": Program("exc_step.S", EXC_STEP, qemu_bugs={
        0x1606: "QEMU 7.2 steps with the OS Lock set (a Software Step record, ESR 0xcb000022, "
                "before the SVC): it does not check OSLSR_EL1.OSLK"}),
    "exc_virq": Program("exc_virq.S", EXC_VIRQ),
    "exc_wpmap": Program("exc_wpmap.S", EXC_WPMAP),
    "exc_traps": Program("exc_traps.S", EXC_TRAPS),
    "exc_s2": Program("exc_s2.S", EXC_S2, qemu_bugs={
        0x1507: "QEMU 7.2 makes no memory-type alignment check with stage 1 off: the "
                "misaligned load from Device memory completes",
        0x1508: "QEMU 7.2: the load of 0x1507 completed (0x4020100300000000)"}),
    "exc_walk": Program("exc_walk.S", EXC_WALK),
    "e0pd": Program("e0pd.S", E0PD, spe_emu_limits={
        0xe03: "the LDTR completes: as 0xe07",
        0xe07: "the load completes: an access the translation tables permit raises no "
               "exception in Unicorn's CPU (QEMU 5.0, no FEAT_E0PD) for spe_emu to refine "
               "(docs/linux.md \"Board options\"; Linux maps nothing EL0-accessible in "
               "the TTBR1_EL1 half)"}),
}


# ------------------------------------------------------------------ build and run ---------
@dataclass
class Record:
    tag: int
    vector: int
    entry: int      # PSTATE on entry; the value for a value line
    esr: int
    elr: int
    spsr: int
    far: int
    sp: int

    @property
    def is_value(self) -> bool:
        return self.vector == 0xFFFF


@dataclass
class Outcome:
    lines: list[str]
    records: list[Record]
    error: str | None       # why the run did not reach "END" with status 0, or None

    def describe(self) -> str:
        return self.error or "run completed"


def parse(text: str, error: str | None) -> Outcome:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    records = []
    for ln in lines:
        words = ln.split()
        if len(words) == 8:
            records.append(Record(*(int(w, 16) for w in words)))
    if error is None and (not lines or lines[0] != "BEGIN" or lines[-1] != "END"):
        error = "output does not go from BEGIN to END"
    return Outcome(lines, records, error)


@dataclass
class Built:
    elf: Path
    symbols: dict[str, int]


class Runs:
    """Builds the programs once and caches each (program, backend, boot EL) run."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.built: dict[str, Built] = {}
        self.outcomes: dict[tuple[str, str, int], Outcome] = {}

    def build(self, name: str) -> Built:
        if name not in self.built:
            out = self.workdir / name
            out.mkdir(exist_ok=True)
            objs = []
            for src in ("common.S", PROGRAMS[name].source):
                obj = out / (Path(src).stem + ".o")
                _check([AS, "-march=armv8.2-a+profile", "-I", str(SRC), "-o", str(obj),
                        str(SRC / src)])
                objs.append(str(obj))
            elf = out / f"{name}.elf"
            _check([LD, "--no-warn-rwx-segments", "-T", str(SRC / "link.ld"), "-o", str(elf),
                    *objs])
            symbols = {}
            for ln in _check([NM, str(elf)]).splitlines():
                words = ln.split()
                if len(words) == 3:
                    symbols[words[2]] = int(words[0], 16)
            self.built[name] = Built(elf, symbols)
        return self.built[name]

    def run(self, name: str, backend: str, boot_el: int) -> Outcome:
        key = (name, backend, boot_el)
        if key not in self.outcomes:
            elf = self.build(name).elf
            outdir = self.workdir / f"{name}-{backend}-el{boot_el}"
            if backend == "qemu":
                self.outcomes[key] = self._qemu(elf, boot_el, outdir)
            else:
                mode = "reference" if backend == "spe_emu-reference" else "fast"
                self.outcomes[key] = self._spe_emu(elf, boot_el, outdir, mode)
        return self.outcomes[key]

    @staticmethod
    def _spe_emu(elf: Path, boot_el: int, outdir: Path, mode: str) -> Outcome:
        chunks: list[bytes] = []
        error = None
        try:
            session = run_image(elf, RunOptions(firmware=False, boot_el=boot_el, outdir=outdir,
                                                max_insns=MAX_INSNS, mode=mode),
                                console=chunks.append)
            console = session.result.console
            if session.result.exit_status != 0:
                error = f"exit status {session.result.exit_status}"
        except Exception as exc:  # noqa: BLE001 - the error is the result to report
            console = b"".join(chunks)
            error = f"spe_emu: {type(exc).__name__}: {exc}"
        return parse(console.decode(errors="replace"), error)

    @staticmethod
    def _qemu(elf: Path, boot_el: int, outdir: Path) -> Outcome:
        outdir.mkdir(exist_ok=True)
        cmd = [QEMU, "-M", QEMU_MACHINE[boot_el], "-cpu", "max", "-m", "256M", "-display", "none",
               "-monitor", "none", "-serial", "none", "-nic", "none", "-chardev", "stdio,id=sh",
               "-semihosting-config", "enable=on,target=native,chardev=sh", "-kernel", str(elf)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=outdir,
                                  timeout=QEMU_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            return parse(out, f"QEMU timed out after {QEMU_TIMEOUT} s")
        error = None if proc.returncode == 0 else (f"QEMU exit status {proc.returncode}: "
                                                    f"{proc.stderr.strip()[-300:]}")
        return parse(proc.stdout, error)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory.mktemp("exception_routing"))


# ------------------------------------------------------------------ checks -----------------
def _case_params():
    for name, prog in PROGRAMS.items():
        for backend in ("spe_emu", "qemu"):
            if backend == "qemu" and not prog.qemu:
                continue
            for boot_el in prog.boot_els:
                seen: dict[int, int] = {}
                for case in prog.cases:
                    nth = seen.get(case.tag, 0)
                    seen[case.tag] = nth + 1
                    marks = [needs_qemu] if backend == "qemu" else []
                    if backend == "qemu" and case.tag in prog.qemu_bugs:
                        marks.append(pytest.mark.skip(reason=prog.qemu_bugs[case.tag]))
                    if backend == "spe_emu" and case.tag in prog.spe_emu_limits:
                        marks.append(pytest.mark.xfail(
                            strict=True, reason=prog.spe_emu_limits[case.tag]))
                    if backend == "spe_emu" and case.tag in prog.spe_emu_bugs:
                        marks.append(pytest.mark.xfail(
                            strict=True, reason=f"spe_emu bug: {prog.spe_emu_bugs[case.tag]}"))
                    repeated = sum(c.tag == case.tag for c in prog.cases) > 1
                    suffix = f"-{nth + 1}" if repeated else ""
                    yield pytest.param(name, backend, boot_el, case, nth, marks=marks,
                                       id=f"{name}-{backend}-boot{boot_el}-{case.tag:#x}{suffix}")


def _find(outcome: Outcome, tag: int, nth: int) -> Record | None:
    found = [r for r in outcome.records if r.tag == tag]
    return found[nth] if nth < len(found) else None


def _address(spec, symbols: dict[str, int]) -> int:
    if isinstance(spec, int):
        return spec
    name, offset = (spec, 0) if isinstance(spec, str) else spec
    return symbols[name] + offset


def _fmt(value: int) -> str:
    return f"{value:#x}"


@pytest.mark.parametrize("name, backend, boot_el, case, nth", list(_case_params()))
def test_case(runs, name, backend, boot_el, case, nth):
    outcome = runs.run(name, backend, boot_el)
    symbols = runs.build(name).symbols
    rec = _find(outcome, case.tag, nth)
    assert rec is not None, (f"{case.why}: no record for case {case.tag:#x} "
                             f"({outcome.describe()})")
    values = {r.tag: r.entry for r in outcome.records if r.is_value}
    if isinstance(case, Val):
        assert rec.is_value, f"{case.why}: an exception was taken instead ({rec})"
        if case.value is not None:
            assert _fmt(rec.entry) == _fmt(case.value), case.why
        return
    expected_esr = case.esr(values) if callable(case.esr) else case.esr
    here = symbols[f"case_{case.tag:#x}"]
    elr = {THIS: here, NEXT: here + 4}.get(case.elr) if isinstance(case.elr, str) else \
        _address(case.elr, symbols)
    expected = {
        "target EL": case.el,
        "vector offset": _fmt(case.vector),
        "ESR": _fmt(expected_esr),
        "ELR": _fmt(elr),
        "SPSR": _fmt(case.spsr),
        "FAR": _fmt(_address(case.far, symbols)),
        "PSTATE on entry": _fmt(case.entry if case.entry is not None else psr(case.el)),
        "SP on entry": _fmt(symbols[f"stack_el{case.el}_top"]),
    }
    actual = {
        "target EL": (rec.entry >> 2) & 3,
        "vector offset": _fmt(rec.vector),
        "ESR": _fmt(rec.esr),
        "ELR": _fmt(rec.elr),
        "SPSR": _fmt(rec.spsr),
        "FAR": _fmt(rec.far),
        "PSTATE on entry": _fmt(rec.entry),
        "SP on entry": _fmt(rec.sp),
    }
    assert actual == expected, f"{case.why} (case {case.tag:#x})"


def _run_params():
    for name, prog in PROGRAMS.items():
        for boot_el in prog.boot_els:
            yield pytest.param(name, boot_el, id=f"{name}-boot{boot_el}")


@pytest.mark.parametrize("name, boot_el", list(_run_params()))
def test_run_completes(runs, name, boot_el):
    """spe_emu runs the program to its end and takes exactly the expected exceptions, in
    order (a missing or a spurious exception shows here)."""
    outcome = runs.run(name, "spe_emu", boot_el)
    prog = PROGRAMS[name]
    got = [f"{r.tag:#x}" for r in outcome.records if r.tag not in prog.spe_emu_bugs]
    want = [f"{c.tag:#x}" for c in prog.cases
            if c.tag not in prog.spe_emu_limits and c.tag not in prog.spe_emu_bugs]
    assert (outcome.error, got) == (None, want)


def _qemu_params():
    for name, prog in PROGRAMS.items():
        if prog.qemu:
            for boot_el in prog.boot_els:
                yield pytest.param(name, boot_el, id=f"{name}-boot{boot_el}", marks=needs_qemu)


@pytest.mark.parametrize("name, boot_el", list(_qemu_params()))
def test_identical_to_qemu(runs, name, boot_el):
    """Line by line, spe_emu prints what QEMU prints (qemu_bugs and cpu_differs aside)."""
    differs = PROGRAMS[name].not_compared
    reference = runs.run(name, "qemu", boot_el)
    assert reference.error is None, f"the QEMU reference run failed: {reference.error}"
    ours = runs.run(name, "spe_emu", boot_el)

    def keep(lines):
        return [ln for ln in lines if not (len(ln.split()) == 8 and int(ln.split()[0], 16)
                                           in differs)]
    assert keep(ours.lines) == keep(reference.lines), ours.describe()


def test_boot_el_does_not_change_results(runs):
    """basic.S and mmu.S set up every EL they use, so they print the same from any boot EL."""
    for name in ("basic", "mmu"):
        outs = {el: runs.run(name, "spe_emu", el).lines for el in PROGRAMS[name].boot_els}
        assert outs[2] == outs[3] and outs[1] == outs[3], name


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_reference_mode_matches_fast(runs, name):
    """The exception model is shared by both run loops: same output, same end."""
    fast = runs.run(name, "spe_emu", 3)
    reference = runs.run(name, "spe_emu-reference", 3)
    assert (reference.lines, reference.error) == (fast.lines, fast.error)
