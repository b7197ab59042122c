"""AArch64 exception entry, done by spe_emu because Unicorn takes no architectural exceptions.

Implements the parts of the Arm ARM pseudocode ``AArch64.TakeException()`` that a bare-metal
program can observe: ESR_ELx (EC, IL, ISS), ELR_ELx (preferred return address), SPSR_ELx
(PSTATE at the time of the exception), PSTATE after entry (EL, SP = SP_ELx, DAIF all set) and
the vector ``VBAR_ELx + offset`` (Arm ARM D1.10.2 "Exception vectors": +0x000 current EL with
SP_EL0, +0x200 current EL with SP_ELx, +0x400 lower EL using AArch64; +0x000 synchronous,
+0x080 IRQ, +0x100 FIQ, +0x180 SError).

Unicorn quirks handled here (shared/notes/unicorn-aarch64-facts.md): the stack pointers are
banked by hand (QEMU's env->sp_el[] versus the live SP), and the EL change is made visible to
translated code by a CP-register write, which rebuilds QEMU's cached hflags.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from unicorn import arm64_const as A

from ..sysreg import reg
from ..arch.context import HCR_EL2, SCTLR_ELX, SCTLR_ENC, SPSR_ENC
from .fastuc import FastAccess

ESR = reg("ESR_ELx", (3, 0, 5, 2, 0), "EC 31:26", "IL 25", "ISS 24:0", doc="Arm ARM D19.2")
ABORT_ISS = reg("ISS_ABORT", (3, 0, 5, 2, 0), "ISV 24", "EA 9", "S1PTW 7", "WnR 6", "FSC 5:0",
                doc="Arm ARM D19.2 ISS encoding for an exception from a Data/Instruction Abort")
ISS_SVC = reg("ISS_SVC", (3, 0, 5, 2, 0), "imm16 15:0",
              doc="Arm ARM D19.2 ISS encoding for an exception from HVC or SVC instruction "
                  "execution")
FSC_SYNC_EXTERNAL = 0b010000
"""FSC: synchronous External abort, not on a translation table walk."""
ISS_SYSREG = reg("ISS_SYSREG", (3, 0, 5, 2, 0), "Op0 21:20", "Op2 19:17", "Op1 16:14",
                 "CRn 13:10", "Rt 9:5", "CRm 4:1", "Direction 0",
                 doc="Arm ARM D19.2 ISS encoding for an exception from MSR, MRS or System "
                     "instruction execution in AArch64 state")
PSTATE = reg("PSTATE", (3, 0, 4, 0, 0), "N 31", "Z 30", "C 29", "V 28", "TCO 25", "DIT 24",
             "UAO 23", "PAN 22", "SS 21", "IL 20", "SSBS 12", "BTYPE 11:10", "D 9", "A 8",
             "I 7", "F 6", "nRW 4", "EL 3:2", "SP 0",
             doc="SPSR_ELx layout for exceptions taken from AArch64 (Arm ARM C5.2.18)")


class EC(enum.IntEnum):
    """ESR_ELx.EC values used by spe_emu (Arm ARM D19.2 Table "ESR_ELx.EC")."""

    UNKNOWN = 0x00
    FP_ACCESS = 0x07
    ILLEGAL_STATE = 0x0E
    SVC64 = 0x15
    HVC64 = 0x16
    SMC64 = 0x17
    SYSREG = 0x18
    IABORT_LOWER = 0x20
    IABORT_SAME = 0x21
    PC_ALIGN = 0x22
    DABORT_LOWER = 0x24
    DABORT_SAME = 0x25
    SP_ALIGN = 0x26
    BRK64 = 0x3C


class VectorKind(enum.IntEnum):
    """Offset of the exception type inside a vector-table quarter."""

    SYNC = 0x000
    IRQ = 0x080
    FIQ = 0x100
    SERROR = 0x180


# Unicorn register ids of the banked registers exception entry touches.
ELR_REG = {1: A.UC_ARM64_REG_ELR_EL1, 2: A.UC_ARM64_REG_ELR_EL2, 3: A.UC_ARM64_REG_ELR_EL3}
FAR_REG = {1: A.UC_ARM64_REG_FAR_EL1, 2: A.UC_ARM64_REG_FAR_EL2, 3: A.UC_ARM64_REG_FAR_EL3}
ESR_REG = {1: A.UC_ARM64_REG_ESR_EL1, 2: A.UC_ARM64_REG_ESR_EL2, 3: A.UC_ARM64_REG_ESR_EL3}
VBAR_REG = {1: A.UC_ARM64_REG_VBAR_EL1, 2: A.UC_ARM64_REG_VBAR_EL2, 3: A.UC_ARM64_REG_VBAR_EL3}
SP_BANK = {0: A.UC_ARM64_REG_SP_EL0, 1: A.UC_ARM64_REG_SP_EL1, 2: A.UC_ARM64_REG_SP_EL2,
           3: A.UC_ARM64_REG_SP_EL3}


def esr(ec: int, iss: int = 0, il: int = 1) -> int:
    """ESR_ELx value: EC, IL (1 = 32-bit instruction), ISS."""
    return ESR.make(EC=ec, IL=il, ISS=iss)


def sysreg_trap_iss(op0: int, op1: int, crn: int, crm: int, op2: int, rt: int,
                    is_read: bool) -> int:
    """ISS for EC 0x18 (trapped MSR/MRS): Op0, Op2, Op1, CRn, Rt, CRm, Direction (1 = read)."""
    return ISS_SYSREG.make(Op0=op0, Op2=op2, Op1=op1, CRn=crn, Rt=rt, CRm=crm,
                           Direction=int(is_read))


@dataclass(frozen=True, slots=True)
class ExceptionEntry:
    """What an exception entry did (for logs, traces and tests)."""

    kind: VectorKind
    from_el: int
    target_el: int
    esr: int | None
    elr: int
    spsr: int
    vector: int


def current_pstate(mem: FastAccess) -> int:
    """PSTATE in SPSR layout (Unicorn's UC_ARM64_REG_PSTATE read, which is QEMU's
    pstate_read(): NZCV, DAIF, EL, SP ...)."""
    return mem.reg(A.UC_ARM64_REG_PSTATE)


def sp_bank(pstate: int) -> int:
    """Which SP_ELn the live SP is: SP_EL0 when PSTATE.SP == 0, else SP_EL<PSTATE.EL>."""
    return PSTATE.get(pstate, "EL") if PSTATE.get(pstate, "SP") else 0


def set_pstate(mem: FastAccess, new: int,
               sync_reg: tuple[int, int, int, int, int] = (3, 0, 12, 0, 0)) -> None:
    """Switch PSTATE (possibly changing EL and SP selection) the way QEMU's own exception
    code does: save the live SP into its bank, write PSTATE, load SP from the new bank, and
    rebuild QEMU's hflags with a CP-register write (re-writing ``sync_reg``, VBAR_EL1 by
    default) so translated code sees the new EL."""
    old = current_pstate(mem)
    mem.set_reg(SP_BANK[sp_bank(old)], mem.reg(A.UC_ARM64_REG_SP))
    mem.set_reg(A.UC_ARM64_REG_PSTATE, new)
    mem.set_reg(A.UC_ARM64_REG_SP, mem.reg(SP_BANK[sp_bank(new)]))
    mem.set_cpr(sync_reg, mem.cpr(sync_reg))


def vector_offset(from_el: int, target_el: int, pstate: int, kind: VectorKind) -> int:
    """Offset from VBAR_ELx (Arm ARM D1.10.2)."""
    if target_el > from_el:
        base = 0x400
    else:
        base = 0x200 if PSTATE.get(pstate, "SP") else 0x000
    return base + int(kind)


def take_exception(mem: FastAccess, target_el: int, kind: VectorKind, *, preferred_return: int,
                   syndrome: int | None = None) -> ExceptionEntry:
    """Take an exception to ``target_el`` (``AArch64.TakeException()``).

    Writes SPSR_ELx = PSTATE, ELR_ELx = ``preferred_return``, ESR_ELx = ``syndrome`` (synchronous
    exceptions only; IRQ leaves ESR unchanged), then PSTATE.{EL, SP} = {target, 1}, PSTATE.DAIF
    = 0b1111, PSTATE.{SS, IL, BTYPE, UAO} = 0, PSTATE.PAN = 1 where FEAT_PAN sets it, and PC =
    VBAR_ELx + offset.
    """
    old = current_pstate(mem)
    from_el = PSTATE.get(old, "EL")
    offset = vector_offset(from_el, target_el, old, kind)
    vbar = mem.reg(VBAR_REG[target_el])
    mem.set_cpr(SPSR_ENC[target_el], old)
    mem.set_reg(ELR_REG[target_el], preferred_return)
    if syndrome is not None:
        mem.set_reg(ESR_REG[target_el], syndrome)
    new = old
    for name, value in (("EL", target_el), ("SP", 1), ("D", 1), ("A", 1), ("I", 1), ("F", 1),
                        ("SS", 0), ("IL", 0), ("BTYPE", 0), ("UAO", 0)):
        new = PSTATE.set(new, name, value)
    # FEAT_PAN (AArch64.TakeException(): "if HavePANExt() && (PSTATE.EL == EL1 ||
    # (PSTATE.EL == EL2 && ELIsInHost(EL0))) && SCTLR[].SPAN == '0' then PSTATE.PAN = '1'"):
    # entry to EL1, or to EL2 in a host (HCR_EL2.{E2H, TGE} == {1, 1}).
    hcr = mem.cpr(HCR_EL2.encoding.tuple) if target_el == 2 else 0
    in_host = HCR_EL2.get(hcr, "E2H") == 1 and HCR_EL2.get(hcr, "TGE") == 1
    if (target_el == 1 or in_host) and not SCTLR_ELX.get(mem.cpr(SCTLR_ENC[target_el]), "SPAN"):
        new = PSTATE.set(new, "PAN", 1)
    set_pstate(mem, new, sync_reg=SPSR_ENC[target_el])
    mem.set_reg(A.UC_ARM64_REG_PC, vbar + offset)
    return ExceptionEntry(kind, from_el, target_el, syndrome, preferred_return, old, vbar + offset)
