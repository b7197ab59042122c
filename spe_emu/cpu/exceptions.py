"""AArch64 exception entry, done by spe_emu because Unicorn takes no architectural exceptions.

Implements the parts of the Arm ARM pseudocode ``AArch64.TakeException()`` that a bare-metal
program can observe: ESR_ELx (EC, IL, ISS), ELR_ELx (preferred return address), SPSR_ELx
(PSTATE at the time of the exception), PSTATE after entry (EL, SP = SP_ELx, DAIF all set) and
the vector ``VBAR_ELx + offset`` (Arm ARM D1.10.2 "Exception vectors": +0x000 current EL with
SP_EL0, +0x200 current EL with SP_ELx, +0x400 lower EL using AArch64; +0x000 synchronous,
+0x080 IRQ, +0x100 FIQ, +0x180 SError).

The entry itself is native (``spe_emu/native/exception.c``, shared with the native INTR hook
of the fast run loop); this module holds its tables. Unicorn quirks handled there
(shared/notes/unicorn-aarch64-facts.md): the stack pointers are banked by hand (QEMU's
env->sp_el[] versus the live SP), and the EL change is made visible to translated code by a
CP-register write, which rebuilds QEMU's cached hflags.
"""

from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass
from functools import lru_cache

from unicorn import arm64_const as A
from unicorn.unicorn_py3.unicorn import uclib

from .. import native

from ..sysreg import reg
from ..arch import mmu
from ..arch.context import HCR_EL2, SCR_EL3, SCTLR_ELX, SCTLR_ENC, SPSR_ENC
from ..arch.id_regs import ID_AA64MMFR0_EL1
from .fastuc import FastAccess

ESR = reg("ESR_ELx", (3, 0, 5, 2, 0), "EC 31:26", "IL 25", "ISS 24:0", doc="Arm ARM D19.2")
ABORT_ISS = reg("ISS_ABORT", (3, 0, 5, 2, 0), "ISV 24", "EA 9", "CM 8", "S1PTW 7", "WnR 6",
                "FSC 5:0",
                doc="Arm ARM D19.2 ISS encoding for an exception from a Data/Instruction Abort")
ISS_SVC = reg("ISS_SVC", (3, 0, 5, 2, 0), "imm16 15:0",
              doc="Arm ARM D19.2 ISS encoding for an exception from HVC or SVC instruction "
                  "execution")
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
    WFX = 0x01
    FP_ACCESS = 0x07
    PAC_TRAP = 0x09
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
    SERROR = 0x2F
    WATCHPOINT_LOWER = 0x34
    WATCHPOINT_SAME = 0x35
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


@lru_cache(maxsize=1)
def exception_model() -> native.SpeExcModel:
    """The registers and PSTATE/SCTLR/HCR fields exception entry uses, from this module's
    tables, for the native code (``spe_emu/native/exception.c``); one per process."""
    m = native.SpeExcModel()
    m.pc_id, m.sp_id = A.UC_ARM64_REG_PC, A.UC_ARM64_REG_SP
    m.pstate_id, m.cp_id = A.UC_ARM64_REG_PSTATE, A.UC_ARM64_REG_CP_REG
    for el in range(4):
        m.sp_el[el] = SP_BANK[el]
    for el in (1, 2, 3):
        m.elr[el], m.esr[el], m.far[el] = ELR_REG[el], ESR_REG[el], FAR_REG[el]
        m.vbar[el] = VBAR_REG[el]
        m.spsr_enc[el][:] = SPSR_ENC[el]
        m.sctlr_enc[el][:] = SCTLR_ENC[el]
    m.hcr_enc[:] = HCR_EL2.encoding.tuple
    el = PSTATE.field("EL")
    m.el_lsb, m.el_mask = el.lsb, el.mask >> el.lsb
    m.sp_bit, m.pan_bit = PSTATE.field("SP").lsb, PSTATE.field("PAN").lsb
    m.entry_set = PSTATE.make(D=1, A=1, I=1, F=1)
    m.entry_clear = 0
    for name in ENTRY_CLEARS:
        m.entry_clear |= PSTATE.field(name).mask
    m.span_bit = SCTLR_ELX.field("SPAN").lsb
    m.e2h_bit, m.tge_bit = HCR_EL2.field("E2H").lsb, HCR_EL2.field("TGE").lsb
    m.reg_read = ctypes.cast(uclib.uc_reg_read, ctypes.c_void_p).value
    m.reg_write = ctypes.cast(uclib.uc_reg_write, ctypes.c_void_p).value
    return m


@lru_cache(maxsize=2)
def walk_tables(e0pd: bool) -> native.SpeWalk:
    """The translation controls, fields and granules of :mod:`spe_emu.arch.mmu` for the
    native check of what a stage 1 walk ends with (``spe_walk_fault()``, exception.c; the
    mirror of :func:`spe_emu.arch.mmu.walk_fault`) and of the aborts
    :meth:`spe_emu.cpu.sync_checks.SyncChecks.refine_abort` leaves unchanged
    (``spe_abort_stands()``), for a PE with FEAT_E0PD presented or not (``e0pd``); one
    each per process."""
    w = native.SpeWalk()
    w.e0pd = e0pd
    w.e0pd_lsb[:] = [mmu.TCR_EL1.field(name).lsb for name in ("E0PD0", "E0PD1")]
    w.translation_fscs = sum(1 << (mmu.FSC_TRANSLATION | level) for level in range(4))
    w.model = ctypes.pointer(exception_model())
    w.mem_read = ctypes.cast(uclib.uc_mem_read, ctypes.c_void_p).value
    granules = (mmu.GRANULE_4K, mmu.GRANULE_16K, mmu.GRANULE_64K)
    for g, granule in zip(w.granules, granules):
        g.page_shift, g.index_bits = granule.page_shift, granule.index_bits
        g.block_levels = sum(1 << level for level in granule.block_levels)
        g.level_shift[:] = [granule.level_shift(level) for level in range(4)]
        g.start_level[:] = [granule.start_level(max(ia_bits, 64 - mmu.TXSZ_MAX))
                            for ia_bits in range(49)]
    ranges = ((mmu.EL1_LOWER, 1), (mmu.EL1_UPPER, 1), (mmu.ELX_LOWER[2], 2),
              (mmu.EL2_VHE_LOWER, 2), (mmu.EL2_VHE_UPPER, 2), (mmu.ELX_LOWER[3], 3))
    for r, (rng, regime) in zip(w.ranges, ranges):
        r.tcr_enc[:] = mmu.TCR_ENC[regime]   # (EL3's TCR has TCR_EL2's layout: rng.tcr)
        r.ttbr_enc[:] = rng.ttbr
        for name, field in (("tsz", rng.tsz), ("tg", rng.tg), ("ps", rng.ps)):
            f = rng.tcr.field(field)
            setattr(r, name + "_lsb", f.lsb)
            setattr(r, name + "_mask", f.mask >> f.lsb)
        r.tbi_lsb = rng.tcr.field(rng.tbi).lsb
        r.epd_lsb = 64 if rng.epd is None else rng.tcr.field(rng.epd).lsb
        r.upper = rng.upper
        r.granule[:] = [granules.index(rng.granules[tg]) for tg in range(4)]
    w.scr_enc[:] = SCR_EL3.encoding.tuple
    w.mmfr0_enc[:] = ID_AA64MMFR0_EL1.encoding.tuple
    w.m_lsb, w.vm_lsb = SCTLR_ELX.field("M").lsb, HCR_EL2.field("VM").lsb
    w.ns_lsb = SCR_EL3.field("NS").lsb
    parange = ID_AA64MMFR0_EL1.field("PARange")
    w.parange_lsb, w.parange_mask = parange.lsb, parange.mask >> parange.lsb
    w.pa_bits[:] = [mmu.PA_BITS.get(value, 48) for value in range(8)]
    w.txsz_min, w.txsz_max, w.final_level = mmu.TXSZ_MIN, mmu.TXSZ_MAX, mmu.FINAL_LEVEL
    w.valid_lsb, w.type_lsb = mmu.DESC.field("VALID").lsb, mmu.DESC.field("TYPE").lsb
    w.fsc_address_size, w.fsc_walk_external = mmu.FSC_ADDRESS_SIZE, mmu.FSC_WALK_EXTERNAL
    w.baddr_mask, w.oa_mask = mmu.TTBR.field("BADDR").mask, mmu.OA_MASK
    return w


#: PSTATE fields exception entry clears (AArch64.TakeException(): SS, IL, BTYPE; UAO with
#: FEAT_UAO).
ENTRY_CLEARS = ("SS", "IL", "BTYPE", "UAO")


def set_pstate(mem: FastAccess, new: int,
               sync_reg: tuple[int, int, int, int, int] = (3, 0, 12, 0, 0)) -> None:
    """Switch PSTATE (possibly changing EL and SP selection) the way QEMU's own exception
    code does: save the live SP into its bank, write PSTATE, load SP from the new bank, and
    rebuild QEMU's hflags with a CP-register write (re-writing ``sync_reg``, VBAR_EL1 by
    default) so translated code sees the new EL (``spe_set_pstate()``)."""
    native.set_pstate(exception_model(), mem.uch, new, sync_reg)


def take_exception(mem: FastAccess, target_el: int, kind: VectorKind, *, preferred_return: int,
                   syndrome: int | None = None, far: int | None = None) -> ExceptionEntry:
    """Take an exception to ``target_el`` (``AArch64.TakeException()``, Arm ARM D1.10).

    Writes FAR_ELx = ``far`` (when given), ESR_ELx = ``syndrome`` (synchronous exceptions
    only; IRQ leaves ESR unchanged), SPSR_ELx = PSTATE, ELR_ELx = ``preferred_return``, then
    PSTATE.{EL, SP} = {target, 1}, PSTATE.DAIF = 0b1111, PSTATE.{SS, IL, BTYPE, UAO} = 0,
    PSTATE.PAN = 1 where FEAT_PAN sets it (entry to EL1, or to EL2 in a host, with
    SCTLR_ELx.SPAN == 0), and PC = VBAR_ELx + the D1.10.2 offset. Performed by
    ``spe_take_exception()`` (``spe_emu/native/exception.c``), which the native INTR hook
    uses too.
    """
    entry = native.take_exception(exception_model(), mem.uch, target_el, int(kind),
                                  preferred_return, syndrome, far)
    return ExceptionEntry(kind, entry.from_el, target_el, syndrome, preferred_return,
                          entry.spsr, entry.vector)
