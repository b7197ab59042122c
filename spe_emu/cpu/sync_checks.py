"""Synchronous exceptions Unicorn's QEMU 5.0 never raises, raised by spe_emu (issue 13).

Each check costs nothing while its control is off: it is made on a path that is already slow
(a fault QEMU took, an access to no memory), or at a point spe_emu already sees (the ERET
control hook, the run loop's stops, the native block hook's one compare), or by a hook
installed only while the control is on (docs/model.md "Exceptions"):

- Address size faults and synchronous External aborts on a translation table walk: QEMU's
  walker reads zeros from no memory and checks no output address against TCR_ELx.{IPS, PS};
  a translation fault it takes, or an access of a translated address that reaches no memory,
  is walked again by :func:`spe_emu.arch.mmu.walk_fault`, whose verdict replaces QEMU's
  (:meth:`SyncChecks.refine_abort`).
- Illegal Execution state (EC 0x0E): QEMU 5 sets PSTATE.IL on an illegal exception return
  (and on a return with SPSR_ELx.IL == 1) but never raises the exception. The fast loop's
  ERET control hook (natively, by :func:`eret_il_table`) asks
  :meth:`SyncChecks.eret_needs_stop` (the ``IllegalExceptionReturn()`` conditions on
  SPSR_ELx); when it may, the run stops right after the ERET and
  :meth:`SyncChecks.after_stop` takes the exception if PSTATE.IL is set. The
  reference loop, which sees PSTATE at every instruction, stops at an instruction with
  PSTATE.IL set.
- PC alignment fault (EC 0x22): QEMU 5 fetches at any PC. The fast loop's native block hook
  (counter.c) stops in front of a block at a misaligned address (one more test on its common
  path); the reference loop stops at such an instruction; :meth:`SyncChecks.after_stop`
  takes the fault.
- SIMD&FP access traps (EC 0x07): stock Unicorn's QEMU has ``fp_exception_el()`` return 0, so
  CPACR_EL1.FPEN, CPTR_EL2.{TFP, FPEN} and CPTR_EL3.TFP never trap. The libunicorn
  ``pip install .`` builds restores it (patches/unicorn/0003, :func:`native_fp_traps`): QEMU
  raises the trap and the native INTR hook takes it, with no hook and no stop here. With
  Unicorn's own library the checks below remain: the MSR hook notes writes
  of the controls (:data:`CONTROL_REGS`) and the run stops after them; at the stop
  :meth:`SyncChecks.refresh` works out, per Exception level, where a SIMD&FP instruction is
  trapped to (:func:`fp_trap_routes`), and an instruction hook (:meth:`SyncChecks._on_insn`)
  is installed only while the PE is at such an EL (EL0 and EL1 count as one: the PE moves
  between them with no stop); exceptions and ERETs to such an EL stop the run while it is
  not installed (:meth:`SyncChecks.python_els`, :meth:`SyncChecks.eret_table`). The hook
  reads PSTATE.EL, and at a trapping EL decodes the instruction and takes the trap before it
  executes.
- Alignment faults (Data Abort, DFSC 0b100001): QEMU 5 checks alignment for exclusives and
  atomics only. The same refresh works out, per EL, whether ordinary loads and stores are
  checked (SCTLR_ELx.A == 1 of the EL's regime: :func:`alignment_checked`); the instruction
  hook then computes each load's or store's address and takes the fault before it executes
  (``AArch64.CheckAlignment()``, ``AArch64.AlignmentFault()``). Where stage 1 is disabled
  every data access is to Device-nGnRnE memory and must be aligned to its size whatever
  SCTLR_ELx.A (:func:`device_data`): a native memory hook (exception.c ``spe_align_hook``),
  installed only while the PE is at such an EL (:meth:`SyncChecks._place_mem_hook`), calls
  Python only for a misaligned access; the instruction is undone and takes the fault
  (:meth:`spe_emu.cpu.watchpoints.Watchpoints.device_misaligned`).
- SP alignment fault (EC 0x26): QEMU 5 makes no SP alignment check, and SCTLR_ELx.SA/SA0 are
  set by nearly all software, so the check cannot wait for the control. It runs only while
  some stack pointer is not 16-byte aligned (:attr:`SyncChecks.sp_misaligned`): the loaded
  images are scanned for the instructions that can misalign SP (:func:`sp_writer_offsets`:
  ADD/SUB/logical with Rd = SP other than an ADD/SUB of SP with a multiple of 16, a
  writeback of SP by a multiple of 8 but not 16 ...), a hook on the instruction after each
  looks at SP and, when misaligned, stops there; MSR SP_ELx writes and :meth:`refresh` look
  at the banked SPs (the native MSR filter leaves a write of an aligned value to QEMU while
  every SP is aligned: nothing changes). While a stack pointer is misaligned, the instruction hook checks the
  loads and stores with base SP (``CheckSPAlignment()``) at the ELs where SCTLR_ELx.SA
  (SA0 at EL0) is set.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

from unicorn import (
    UC_HOOK_CODE,
    UC_HOOK_MEM_READ,
    UC_HOOK_MEM_WRITE,
    UC_MEM_WRITE,
    UcError,
)
from unicorn import arm64_const as A
from unicorn.unicorn_const import UC_CTL_IO_WRITE, UC_CTL_TLB_FLUSH
from unicorn.unicorn_py3.unicorn import uclib

from .. import native
from ..arch import INSN_BYTES, mmu
from ..arch.context import (
    CPACR_EL1,
    HCR_EL2,
    SCR_EL3,
    SCTLR_ELX,
    SCTLR_ENC,
    SPSR_ENC,
    AccessContext,
)
from ..arch.cpu_features import e0pd_fault
from ..arch.faults import ExternalAbort
from ..arch.firmware_regs import CPTR_EL2, CPTR_EL3, extended
from ..sysreg import reg
from . import a64
from .exceptions import ABORT_ISS, EC, ESR, PSTATE, current_pstate, esr
from .watchpoints import FSC_ALIGNMENT

# ESR_ELx.EC of the aborts a walk can cause: Instruction / Data Abort, lower / same EL.
ABORT_ECS = {EC.IABORT_LOWER, EC.IABORT_SAME, EC.DABORT_LOWER, EC.DABORT_SAME}
FETCH_ECS = {EC.IABORT_LOWER, EC.IABORT_SAME}
UNPRIVILEGED_LDST = (0x3F20_0C00, 0x3800_0800)
"""(mask, value) of the A64 "Load/store register (unprivileged)" class: LDTR, STTR and their
byte, halfword and signed forms (Arm ARM C4.1.4: size:111:V=0:00:opc:0:imm9:10:Rn:Rt)."""
FSC_LEVEL_MASK = 0b11   # the level in a long-descriptor FSC (EncodeLDFSC())
PSTATE_EL = PSTATE.field("EL")   # (the instruction hook reads it at every instruction)
SPSR = reg("SPSR_ELx", SPSR_ENC[1], "PM 32", "IL 20", "M 4:0",
           doc="Arm ARM C5.2.18 SPSR_EL1 (exceptions taken from AArch64): PM (FEAT_SPE_EXC, "
               "D1.4: Machine._pm_on_entry, _restore_pm), IL, M[4:0]")
# SPSR_ELx.M values of the AArch64 modes -> their Exception level (EL0t, EL1t, EL1h, EL2t,
# EL2h, EL3t, EL3h; ``ELFromSPSR()``): any other value with M[4] == 0 is not a valid mode.
AARCH64_MODES = {0b00000: 0, 0b00100: 1, 0b00101: 1, 0b01000: 2, 0b01001: 2, 0b01100: 3,
                 0b01101: 3}
M_AARCH32 = 0b10000     # SPSR_ELx.M[4] set: a return to AArch32 (decided by QEMU)
ERET_WORD = 0xD69F03E0    # ERET (Arm ARM C6.2); the control hooks of Machine sit on it too
ISS_FP = reg("ISS_FP", (3, 0, 5, 2, 0), "CV 24", "COND 23:20",
             doc="Arm ARM D19.2 ISS encoding for an exception from an access to SIMD or "
                 "floating-point functionality, resulting from the FPEN and TFP traps")
COND_ALWAYS = 0b1110    # ConditionSyndrome() of an A64 instruction: CV = 1, COND = 0b1110
FP_TRAP_SYNDROME = esr(EC.FP_ACCESS, ISS_FP.make(CV=1, COND=COND_ALWAYS))
FPEN_EL0_ONLY, FPEN_NONE = 0b01, 0b11     # CPACR_EL1.FPEN: trap EL0 only; trap nothing
# FPCR and FPSR (MRS/MSR of them are SIMD&FP accesses, AArch64.CheckFPEnabled())
FP_SYSREGS = {(3, 3, 4, 4, 0), (3, 3, 4, 4, 1)}
FP_CLASSES = {"simd_fp", "fcsel", "fccmp", "fccmpe"}   # a64.decode's SIMD&FP data processing
FP_CONTROL_REGS = frozenset(r.encoding.tuple for r in (CPACR_EL1, CPTR_EL2, CPTR_EL3))
"""Writes that change only where a SIMD&FP instruction traps (:func:`fp_trap_routes`)."""
CONTROL_REGS = (FP_CONTROL_REGS | {r.encoding.tuple for r in (HCR_EL2, SCR_EL3)}
                | set(SCTLR_ENC.values()))
"""Writes that change where a SIMD&FP instruction traps (:func:`fp_trap_routes`) or which
accesses are checked for alignment (:func:`alignment_checked`)."""
FP_TRAP_PATCH = "0003-fp-exception-el-simd-fp-access-traps.patch"
"""The libunicorn patch with which QEMU takes the SIMD&FP access traps itself."""


@lru_cache(maxsize=1)
def native_fp_traps() -> bool:
    """Whether the libunicorn this process runs on takes the SIMD&FP access traps itself
    (patches/unicorn/0003: ``fp_exception_el()`` restored): then no instruction hook is
    needed for them and writes of :data:`FP_CONTROL_REGS` need no stop."""
    return FP_TRAP_PATCH in native.unicorn_patches()
SCTLR = extended(SCTLR_ELX)   # SCTLR_ELx with A, SA, SA0 (Arm ARM D19.2 SCTLR_EL1)
PAIR_CLASSES = {"ldp", "stp", "ldnp", "stnp", "ldpsw"}
SIMD_STRUCT_SINGLE = 1 << 24  # A64 Advanced SIMD load/store: single structure (C4.1.66)
SIMD_STRUCT_SIZE_LSB = 10     # its size field [11:10] (multiple structures: element size)


MEM_HOOK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int,
                            ctypes.c_int64, ctypes.c_void_p)
"""A Unicorn memory hook (``uc_cb_hookmem_t``), as the native alignment hook calls it."""

SP_ALIGN = 16             # CheckSPAlignment(): SP must be a multiple of 16 bytes
SP_REGS = (A.UC_ARM64_REG_SP, A.UC_ARM64_REG_SP_EL0, A.UC_ARM64_REG_SP_EL1,
           A.UC_ARM64_REG_SP_EL2, A.UC_ARM64_REG_SP_EL3)
SP_ELX_WRITES = {(3, 0, 4, 1, 0), (3, 4, 4, 1, 0), (3, 6, 4, 1, 0)}  # MSR SP_EL0/1/2, Xt
SP_NUM = 31               # register number 31 as Rd/Rn: SP in these encodings
# A64 encodings that write SP (Arm ARM C4.1), as (mask, value) over the instruction word:
# ADD/SUB (immediate) with Rd = SP; ADD/SUB (extended register) with Rd = SP; AND/ORR/EOR
# (immediate) with Rd = SP; loads/stores (immediate, pre/post-index) and pairs
# (pre/post-index) with Rn = SP, which write SP back.
SP_ADDSUB_IMM = (0x3F80001F, 0x1100001F)
SP_ADDSUB_EXT = (0x3FE0001F, 0x0B20001F)
SP_LOGICAL_IMM = (0x1F80001F, 0x1200001F)
SP_LDST_WB = (0x3B2007E0, 0x380007E0)
SP_PAIR_WB = (0x3A8003E0, 0x288003E0)
SP_WRITERS = (SP_ADDSUB_IMM, SP_ADDSUB_EXT, SP_LOGICAL_IMM, SP_LDST_WB, SP_PAIR_WB)


def _field(word: int, lsb: int, width: int) -> int:
    """Instruction field word[lsb + width - 1:lsb] (A64 encoding, Arm ARM C4.1)."""
    return (word >> lsb) & ((1 << width) - 1)


def may_misalign_sp(word: int) -> bool:
    """Whether the instruction ``word``, which matched one of :data:`SP_WRITERS`, may leave SP
    not 16-byte aligned when it was: everything but an ADD/SUB (immediate) of SP to SP, and
    a writeback, by a multiple of 16 (``sub sp, sp, #32``, ``stp x29, x30, [sp, #-16]!``);
    ANDS/ADDS/SUBS write XZR, not SP."""
    if word & SP_ADDSUB_IMM[0] == SP_ADDSUB_IMM[1]:
        imm = _field(word, 10, 12) << (12 * _field(word, 22, 1))
        return _field(word, 5, 5) != SP_NUM or not _field(word, 31, 1) or imm % SP_ALIGN != 0
    if word & SP_LOGICAL_IMM[0] == SP_LOGICAL_IMM[1]:
        return _field(word, 29, 2) != 0b11
    if word & SP_LDST_WB[0] == SP_LDST_WB[1]:
        return a64._sext(word >> 12, 9) % SP_ALIGN != 0
    if word & SP_PAIR_WB[0] == SP_PAIR_WB[1]:
        opc, simd = _field(word, 30, 2), _field(word, 26, 1)
        scale = 4 << (opc if simd else opc >> 1)
        return a64._sext(word >> 15, 7) * scale % SP_ALIGN != 0
    return True   # ADD/SUB (extended register)


DC_ZVA = (0xFFFFFFE0, 0xD50B7420)
"""(mask, value) of DC ZVA, Xt (SYS #3, C7, C4, #1; Arm ARM C5.3 "DC ZVA")."""


def dc_zva_offsets(code: bytes) -> list[int]:
    """Offsets (multiples of 4) in ``code`` of its DC ZVA instructions
    (:func:`spe_emu.native.word_match`)."""
    return [i * INSN_BYTES for i in native.word_match(code, (DC_ZVA,))[0]]


@lru_cache(maxsize=4)
def sp_writer_offsets(code: bytes) -> tuple[int, ...]:
    """Offsets (multiples of 4) in ``code`` of the instructions that may misalign SP
    (:func:`may_misalign_sp`), the candidates :func:`spe_emu.native.word_match` finds.
    Remembered for the last few images (each PE of a board scans the same ones)."""
    indexes, words = native.word_match(code, SP_WRITERS)
    # (a kernel's 125,000 candidates are 2,400 distinct words)
    misaligning = {w for w in set(words) if may_misalign_sp(w)}
    return tuple(i * INSN_BYTES for i, w in zip(indexes, words) if w in misaligning)


def stage1_regimes(ctx: AccessContext) -> tuple[int, ...]:
    """Per Exception level 0-3, the EL whose SCTLR_ELx controls its stage 1 translation: EL1
    for EL0 and EL1 (EL1&0), EL2 for EL0 in a host (HCR_EL2.{E2H, TGE} == {1, 1}: EL2&0),
    else the EL itself (Arm ARM D8.1 "Translation regimes")."""
    host = ctx.el2_enabled and HCR_EL2.get(ctx.hcr_el2, "E2H") and ctx.tge
    return (2 if host else 1, 1, 2, 3)


def sp_checked(ctx: AccessContext, sctlr: dict[int, int]) -> tuple[bool, ...]:
    """Per Exception level 0-3, whether a load or store with base SP checks SP's alignment
    (``CheckSPAlignment()``): SCTLR_ELx.SA0 at EL0 (of EL1, or of EL2 in a host), else
    SCTLR_ELx.SA of the EL. ``sctlr``: SCTLR_EL1, SCTLR_EL2, SCTLR_EL3 by EL."""
    return tuple(bool(SCTLR.get(sctlr[regime], "SA0" if el == 0 else "SA"))
                 for el, regime in enumerate(stage1_regimes(ctx)))


def element_bytes(info: a64.InsnInfo) -> int:
    """The size of each single access of a load or store, which alignment is checked
    against (the Arm ARM's ``Mem[address, size, accdesc]`` calls): a register of a pair, an
    element of an Advanced SIMD structure, else the whole access."""
    name = info.mnemonic_class
    if name in PAIR_CLASSES:
        return info.access_size // 2
    if name[:2] in ("ld", "st") and name[2:3] in ("1", "2", "3", "4") and name[3:] in ("", "r"):
        if info.word & SIMD_STRUCT_SINGLE:
            return info.access_size // int(name[2])
        return 1 << ((info.word >> SIMD_STRUCT_SIZE_LSB) & 0b11)
    return info.access_size


def alignment_checked(ctx: AccessContext, sctlr: dict[int, int]) -> tuple[bool, ...]:
    """Per Exception level 0-3, whether every load and store must be aligned to its
    :func:`element_bytes` because SCTLR_ELx.A of the EL's stage 1 regime is set (EL1&0;
    EL2&0 for EL0 in a host, HCR_EL2.{E2H, TGE} == {1, 1}). ``sctlr``: SCTLR_EL1, SCTLR_EL2,
    SCTLR_EL3 by EL.

    Accesses to Device memory with SCTLR_ELx.A == 0 are checked apart, where stage 1 is
    disabled (:func:`device_data`); with the MMU on, not (docs/model.md "Exceptions")."""
    return tuple(bool(SCTLR.get(sctlr[regime], "A")) for regime in stage1_regimes(ctx))


def device_data(ctx: AccessContext, sctlr: dict[int, int]) -> tuple[bool, ...]:
    """Per Exception level 0-3, whether every data access is to Device-nGnRnE memory because
    stage 1 of the EL's regime is disabled (``AArch64.S1Enabled()``: SCTLR_ELx.M == 0 of the
    regime, or the EL1&0 regime with EL2 enabled and HCR_EL2.TGE == 1;
    ``AArch64.S1DisabledOutput()``: data accesses are Device-nGnRnE unless the regime is
    EL1&0 with EL2 enabled and HCR_EL2.DC == 1, Normal then), so a data access not aligned
    to its size takes an Alignment fault whatever SCTLR_ELx.A. ``sctlr``: SCTLR_EL1,
    SCTLR_EL2, SCTLR_EL3 by EL. Stage 2 cannot make such memory Normal."""
    out = []
    for regime in stage1_regimes(ctx):
        off = not SCTLR.get(sctlr[regime], "M") or (regime == 1 and ctx.el2_enabled
                                                     and bool(ctx.tge))
        normal = regime == 1 and ctx.el2_enabled and bool(HCR_EL2.get(ctx.hcr_el2, "DC"))
        out.append(off and not normal)
    return tuple(out)


def uses_fp(info: a64.InsnInfo) -> bool:
    """Whether the instruction is one ``AArch64.CheckFPAdvSIMDEnabled()`` / ``CheckFPEnabled()``
    is called for: SIMD&FP data processing, SIMD&FP loads and stores, MRS/MSR of FPCR/FPSR."""
    return (info.mnemonic_class in FP_CLASSES or (info.is_simd_fp and info.op_class)
            or info.sysreg in FP_SYSREGS)


def fp_trap_routes(ctx: AccessContext, cpacr: int, cptr2: int, cptr3: int
                   ) -> tuple[tuple[int, int] | None, ...]:
    """Per Exception level 0-3, (target EL, ESR value) of the trap a SIMD&FP instruction
    takes there, or None (``AArch64.CheckFPEnabled()``, ``AArch64.AdvSIMDFPAccessTrap()``):
    CPACR_EL1.FPEN at EL0 and EL1 outside a host (0bx0: both, 0b01: EL0), to EL1; then,
    with EL2 enabled, at EL0-EL2 CPTR_EL2.TFP, or with HCR_EL2.E2H == 1 CPTR_EL2.FPEN (which
    has CPACR_EL1's layout then; 0b01 traps EL0 with HCR_EL2.TGE == 1), to EL2; then
    CPTR_EL3.TFP at every EL, to EL3. The syndrome is EC 0x07 with CV = 1, COND = 0b1110; a
    trap to EL1 with EL2 enabled and HCR_EL2.TGE == 1 is taken to EL2 as EC 0x00."""
    e2h = ctx.el2_enabled and HCR_EL2.get(ctx.hcr_el2, "E2H")
    routes = []
    for el in range(4):
        in_host = e2h and (el == 2 or (el == 0 and ctx.tge))
        target = None
        fpen = CPACR_EL1.get(cpacr, "FPEN")
        if el <= 1 and not in_host and (fpen != FPEN_NONE and (fpen != FPEN_EL0_ONLY
                                                                or el == 0)):
            target = 1
        elif el <= 2 and ctx.el2_enabled:
            if e2h:
                fpen2 = CPACR_EL1.get(cptr2, "FPEN")   # (CPTR_EL2 with E2H == 1)
                if fpen2 != FPEN_NONE and (fpen2 != FPEN_EL0_ONLY or (el == 0 and ctx.tge)):
                    target = 2
            elif CPTR_EL2.get(cptr2, "TFP"):
                target = 2
        if target is None and CPTR_EL3.get(cptr3, "TFP"):
            target = 3
        if target == 1 and ctx.el2_enabled and ctx.tge:
            routes.append((2, esr(EC.UNKNOWN)))
        else:
            routes.append(None if target is None else (target, FP_TRAP_SYNDROME))
    return tuple(routes)


def eret_sets_il(spsr: int, ctx: AccessContext) -> bool:
    """Whether an ERET at ``ctx.el`` with SPSR_ELx = ``spsr`` leaves PSTATE.IL set, for a
    return to AArch64: SPSR_ELx.IL is set, or ``IllegalExceptionReturn()`` holds (Arm ARM
    ``AArch64.ExceptionReturn()``): M is not a valid AArch64
    mode, the target EL is higher than the current one, EL2 is not enabled (Secure, no
    FEAT_SEL2) for a return to EL2, the target EL (or EL1 for a return to EL0) uses AArch32
    by SCR_EL3.RW / HCR_EL2.RW, or a return to EL1 with EL2 enabled and HCR_EL2.TGE == 1.
    A return to AArch32 (M[4] == 1) counts as may-set: QEMU decides, the caller checks
    PSTATE.IL after the ERET."""
    if SPSR.get(spsr, "IL"):
        return True
    mode = SPSR.get(spsr, "M")
    if mode & M_AARCH32 or mode not in AARCH64_MODES:
        return True
    target = AARCH64_MODES[mode]
    if target > ctx.el or (target == 2 and not ctx.el2_enabled):
        return True
    el1_aarch32 = ((ctx.have_el3 and not SCR_EL3.get(ctx.scr_el3, "RW"))
                   or (ctx.el2_enabled and not HCR_EL2.get(ctx.hcr_el2, "RW")))
    if target == 2 and ctx.have_el3 and not SCR_EL3.get(ctx.scr_el3, "RW"):
        return True
    if target in (0, 1) and el1_aarch32:
        return True
    return target == 1 and ctx.el2_enabled and bool(ctx.tge)


@lru_cache(maxsize=64)
def eret_il_table(ctx: AccessContext) -> tuple[int, int, int, int]:
    """:func:`eret_sets_il` as a table for the native ERET hook (exception.c
    ``spe_eret_hook``): per Exception level of the ERET (index 0-3), a 64-bit mask with bit
    ``SPSR_ELx.IL << 5 | SPSR_ELx.M`` set when such an ERET may leave PSTATE.IL set in
    context ``ctx`` (its ``el`` is ignored). EL0: 0 (ERET is UNDEFINED there)."""
    out = [0]
    for el in (1, 2, 3):
        here = ctx.at_el(el)
        out.append(sum(1 << (il << 5 | m) for il in (0, 1) for m in range(32)
                       if eret_sets_il(SPSR.make(IL=il, M=m), here)))
    return tuple(out)


class SyncChecks:
    """The machine's checks for the synchronous exceptions listed in the module docstring."""

    def __init__(self, machine):
        """``machine``: the :class:`~spe_emu.cpu.machine.Machine` whose PE it checks (not
        imported here: the machine is built on this module)."""
        self.m = machine
        # An ERET that may have set PSTATE.IL ran (fast loop), or the reference loop stopped
        # at an instruction with PSTATE.IL set: look at the next stop.
        self.il_pending = False
        self.controls_changed = True  # a control of CONTROL_REGS was written: refresh()
        self.fp_routes: tuple = (None,) * 4
        self.native_fp = native_fp_traps()
        # the writes that stop the run for refresh() (the SIMD&FP controls only without the
        # native traps)
        self.control_regs = CONTROL_REGS - FP_CONTROL_REGS if self.native_fp else CONTROL_REGS
        self.sp_checks: tuple[bool, ...] = (False,) * 4
        self.sp_misaligned = False  # some SP (live or banked) is not 16-byte aligned
        self.aligned: tuple[bool, ...] = (False,) * 4
        self._insn_hook = None  # the instruction hook's handle while installed
        self.hooked_els: frozenset[int] = frozenset()  # where the hook must run
        self.device: tuple[bool, ...] = (False,) * 4   # device_data() per EL
        self.mem_els: frozenset[int] = frozenset()     # where the alignment hook must run
        self._mem_hook = None   # the native alignment hook's handle while installed
        self._mem_callback = MEM_HOOK(self._on_misaligned)

    # -- controls and the instruction hook ------------------------------------------------
    def control_written(self, enc: tuple[int, int, int, int, int]) -> bool:
        """From the MSR hook, before QEMU writes the register: True when ``enc`` is one of
        :data:`CONTROL_REGS` (the caller stops the run after the write, for :meth:`refresh`)."""
        if enc in self.control_regs or enc in SP_ELX_WRITES:
            self.controls_changed = True
            return True
        return False

    def refresh(self) -> None:
        """Work out the traps and checks from the live control registers (at a stop, after
        a write of :data:`CONTROL_REGS`), and the Exception levels where the instruction
        hook must run (:meth:`_place_hook`)."""
        self.controls_changed = False
        m = self.m
        cpr = m.fast.cpr
        ctx = m.pe.live_context()
        # (with the patched library QEMU takes the SIMD&FP traps: native_fp_traps)
        self.fp_routes = (None,) * 4 if self.native_fp else fp_trap_routes(
            ctx, cpr(CPACR_EL1.encoding.tuple), cpr(CPTR_EL2.encoding.tuple),
            cpr(CPTR_EL3.encoding.tuple))
        sctlr = {el: cpr(SCTLR_ENC[el]) for el in (1, 2, 3)}
        self.aligned = alignment_checked(ctx, sctlr)
        self.device = device_data(ctx, sctlr) if m.cfg.device_alignment else (False,) * 4
        mem = {el for el in range(4) if self.device[el]}
        if mem & {0, 1}:
            mem |= {0, 1}
        self.sp_checks = sp_checked(ctx, sctlr)
        self.sp_misaligned = any(m.fast.reg(r) % SP_ALIGN for r in SP_REGS)
        m.sysreg_filter.sp_aligned = int(not self.sp_misaligned)
        # (the reference loop has no scan hooks: there it checks wherever SA/SA0 is set)
        sp_on = self.sp_misaligned or m.cfg.mode == "reference"
        needed = {el for el in range(4)
                  if self.fp_routes[el] or self.aligned[el] or (sp_on and self.sp_checks[el])}
        if needed & {0, 1}:
            # (EL0 <-> EL1 changes may happen with no stop: SVC and ERET between them)
            needed |= {0, 1}
        if frozenset(needed) != self.hooked_els or frozenset(mem) != self.mem_els:
            self.hooked_els, self.mem_els = frozenset(needed), frozenset(mem)
            m.replan = True          # (the native hooks' tables: python_els, eret_table)
            m._python_controls()
        self._place_hook(ctx.el)

    def _place_hook(self, el: int) -> None:
        """Install the instruction hook while the PE is at an EL of :attr:`hooked_els`,
        remove it otherwise (a removed hook leaves the blocks it was translated into). The
        PE changes between EL0/EL1 and EL2/EL3 only through exceptions, which stop the run,
        and ERETs, which the control hook stops after when they return to an EL where the
        hook is missing (:meth:`eret_needs_stop`); at every stop :meth:`after_stop` places
        the hook for the EL the PE is at."""
        m = self.m
        # (the reference loop has no ERET control hook: there the hooks run wherever they
        # may be needed, at the reference loop's speed anyway)
        anywhere = m.cfg.mode == "reference"
        changed = self._place_mem_hook(el in self.mem_els or (anywhere and bool(self.mem_els)))
        wanted = el in self.hooked_els or (anywhere and bool(self.hooked_els))
        if wanted and self._insn_hook is None:
            self._insn_hook = m.uc.hook_add(UC_HOOK_CODE, self._on_insn)
            # Blocks translated without the hook keep running without it (the block at the
            # PC, too: the native hook stops inside it): translate everything again.
            m.uc.ctl_flush_tb()
        elif not wanted and self._insn_hook is not None:
            m.uc.hook_del(self._insn_hook)
            self._insn_hook = None
        elif not changed:
            return
        # (the native hooks' tables depend on it: python_els, eret_table)
        m.replan = True
        m._python_controls()

    def _place_mem_hook(self, wanted: bool) -> bool:
        """Install or remove the native alignment hook (exception.c ``spe_align_hook``, on
        every data access: it calls :meth:`_on_misaligned` only for a misaligned one);
        whether that changed anything."""
        m = self.m
        m.sysreg_filter.zva_python = int(wanted)   # (spe_zva_hook: dc_zva)
        if wanted == (self._mem_hook is not None):
            return False
        if wanted:
            self._mem_hook = m._native_hook(
                UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE, ctypes.c_void_p(native.align_hook_address()),
                ctypes.cast(self._mem_callback, ctypes.c_void_p), 1, 0)
            m.model_hook_last()   # (a faulting access does not reach the model)
        else:
            uclib.uc_hook_del(m.uc._uch, self._mem_hook)
            self._mem_hook = None
        # (Unicorn decides whether a page's accesses call the memory hooks when it enters the
        # page in its TLB: pages entered before the change keep the old decision)
        m.uc.ctl(UC_CTL_TLB_FLUSH, UC_CTL_IO_WRITE)
        return True

    def _on_misaligned(self, _uch, access: int, address: int, size: int, _value: int,
                       _data) -> None:
        """The native alignment hook's fallback: a data access of ``size`` bytes at
        ``address`` not aligned to its size. At an EL whose data accesses are to Device
        memory (:func:`device_data`) the instruction takes the Alignment fault
        (:meth:`Watchpoints.device_misaligned`)."""
        m = self.m

        def body() -> None:
            if self.device[PSTATE_EL.get(m.fast.reg(A.UC_ARM64_REG_PSTATE))]:
                m.watchpoints.device_misaligned(access == UC_MEM_WRITE, address, size)
        m._guarded(body)

    def dc_zva(self, address: int) -> None:
        """The native DC ZVA hook's fallback (``spe_zva_hook``: only at an EL whose data
        accesses are to Device memory, where the alignment hook is installed): the DC ZVA at
        ``address`` generates an Alignment fault instead of executing (Arm ARM C5.3 DC ZVA:
        "any type of Device memory"; a Data Abort, WnR = 1, CM = 0, FAR = Xt: our reading of
        AArch64.DataMemZero()). QEMU's own checks are traps taken before any memory access,
        so an EL0 DC ZVA (SCTLR_EL1.DZE, HCR_EL2.TDZ) is left to QEMU. Only DC ZVA in the
        loaded images is hooked (docs/model.md)."""
        m = self.m
        el = PSTATE_EL.get(m.fast.reg(A.UC_ARM64_REG_PSTATE))
        if el == 0 or not self.device[el]:
            return
        info = a64.decode(m._fetch(address, el))
        far = m.fast.reg(a64.X_REGS[info.rt]) if info.rt != 31 else 0   # (XZR)
        ctx = m.context()
        target, syndrome = m.exc.abort(ctx, fetch=False, write=True, fsc=FSC_ALIGNMENT,
                                       external=False)
        m._catch_up(m._insn_index(address), address)
        m._take_sync(ctx, target, syndrome, address, far=far)

    def _on_insn(self, uc, address: int, _size: int, _data) -> None:
        """The instruction hook (installed only while a trap or check is enabled): at an EL
        where SIMD&FP instructions trap, a SIMD&FP instruction takes the trap; where accesses
        are checked for alignment, a load or store with a misaligned address takes the
        alignment fault (Data Abort, DFSC 0b100001, FAR = the address, WnR for a store);
        either instead of executing (Unicorn does not execute an instruction whose hook
        moved the PC and stopped). The trap comes first (it is taken before the access)."""
        m = self.m
        el = PSTATE_EL.get(m.fast.reg(A.UC_ARM64_REG_PSTATE))
        route = self.fp_routes[el]
        aligned = self.aligned[el]
        if route is None and not aligned and not self.sp_checks[el]:
            return
        info = a64.decode(m._fetch(address, el))
        if route is not None and uses_fp(info):
            target, syndrome, far = route[0], route[1], None
        elif (self.sp_checks[el] and info.op_class == a64.OP_CLASS_LDST
              and info.reads[:1] == (A.UC_ARM64_REG_SP,)
              and m.fast.reg(A.UC_ARM64_REG_SP) % SP_ALIGN):
            # CheckSPAlignment(): EC 0x26, ISS 0 (AArch64.SPAlignmentFault())
            target, syndrome, far = m.exc.sync_target(m.context()), esr(EC.SP_ALIGN), None
        elif (aligned and (info.is_load or info.is_store) and not info.is_atomic
              and not info.is_exclusive):
            # (QEMU checks exclusives and atomics itself)
            va = info.data_address(address, m._regs(info.reads))
            if va is None or va % element_bytes(info) == 0:
                return
            ctx = m.context()
            target, syndrome = m.exc.abort(ctx, fetch=False, write=info.is_store,
                                           fsc=FSC_ALIGNMENT, external=False)
            far = va
        else:
            return
        m._catch_up(m._insn_index(address), address)
        m._take_sync(m.context(), target, syndrome, address, far=far)

    def sp_scan_addresses(self) -> list[int]:
        """Addresses of the instructions after the ones that may misalign SP, in the loaded
        images' executable segments (:func:`sp_writer_offsets`), for :meth:`on_sp_written`."""
        m = self.m
        if not m.scan_sp_writers:
            return []
        return [seg.vaddr + off + INSN_BYTES for seg in m.code_segments()
                for off in sp_writer_offsets(bytes(seg.data))]

    def dc_zva_addresses(self) -> list[int]:
        """Addresses of the DC ZVA instructions in the loaded images' executable segments
        (:func:`dc_zva_offsets`), for :meth:`dc_zva`."""
        return [seg.vaddr + off for seg in self.m.code_segments()
                for off in dc_zva_offsets(bytes(seg.data))]

    def on_sp_written(self, address: int) -> None:
        """Hook on the instruction after one that may have misaligned SP (fast loop): when
        SP is misaligned now and the SP checks are off, stop in front of this instruction
        (it has not executed) so :meth:`after_stop` turns them on."""
        m = self.m
        if self.sp_misaligned or not any(self.sp_checks):
            return
        if not m.fast.reg(A.UC_ARM64_REG_SP) % SP_ALIGN:
            return
        m._catch_up(m._insn_index(address), address)
        c = m.counter
        if c.block_start <= address < c.block_start + INSN_BYTES * c.block_insns:
            # (the native hook counted the whole block; the rest of it has not run)
            retired = m._retired_before(address)
            c.block_insns -= c.insns - retired
            c.insns = retired
        self.controls_changed = True
        m.fast.set_reg(A.UC_ARM64_REG_PC, address)
        m._request_stop()

    # -- Illegal Execution state ----------------------------------------------------------
    def python_els(self) -> int:
        """Bit mask of the ELs an exception from or to which the native INTR hook leaves to
        Python (which stops the run, so :meth:`after_stop` places the instruction hook): the
        ELs where the hook must run while it is not installed."""
        return sum(1 << el for el in self._missing_els())

    def _missing_els(self) -> frozenset[int]:
        """The ELs where a hook must run that is not installed now."""
        out = frozenset() if self._insn_hook is not None else self.hooked_els
        return out if self._mem_hook is not None else out | self.mem_els

    def eret_table(self, ctx: AccessContext) -> tuple[int, ...]:
        """The native ERET hook's table (exception.c ``spe_eret_hook``, :func:`eret_il_table`):
        the ERETs that may set PSTATE.IL and, while the instruction hook is not installed,
        those returning to an EL where it must run (both: :meth:`eret_needs_stop`)."""
        table = eret_il_table(ctx)
        missing = self._missing_els()
        if not missing:
            return table
        extra = sum(1 << (il << 5 | mode) for il in (0, 1)
                    for mode, el in AARCH64_MODES.items() if el in missing)
        return (table[0],) + tuple(t | extra for t in table[1:])

    def eret_needs_stop(self, address: int) -> bool:
        """From the fast loop's control hook, before the ERET or MSR DAIFSet/DAIFClr at
        ``address`` executes: True when it is an ERET after which the run must stop, because
        it may leave PSTATE.IL set (:func:`eret_sets_il`; the check is then owed at the
        stop), or it returns to an EL where the instruction hook must run and it is not
        installed (:meth:`_place_hook`)."""
        m = self.m
        ctx = m.context()
        if ctx.el == 0 or m._fetch(address, ctx.el) != ERET_WORD:
            return False
        spsr = m.fast.cpr(SPSR_ENC[ctx.el])
        if eret_sets_il(spsr, ctx):
            self.il_pending = True
            return True
        return AARCH64_MODES.get(SPSR.get(spsr, "M")) in self._missing_els()

    def after_stop(self) -> bool:
        """At a run-loop stop, before the instruction at the PC executes: take the exception
        it takes for the state the run left, and say whether one was taken (the loop then
        plans again). In priority order (Arm ARM D1.3.5 "Synchronous exception
        prioritization"):

        - a PC alignment fault when PC[1:0] != 0 (``AArch64.CheckPCAlignment()``,
          ``AArch64.PCAlignmentFault()``): EC 0x22, ISS 0, FAR_ELx = ELR_ELx = the PC. The
          fast loop's native block hook stops in front of a block at a misaligned PC; the
          reference loop stops at the instruction.
        - owed by :attr:`il_pending`, with PSTATE.IL set: the Illegal Execution state
          exception (Arm ARM D1.4.5, ``CheckIllegalState()``): EC 0x0E, ISS 0, ELR = the
          instruction, SPSR_ELx.IL = 1.

        Both are taken to the EL an UNDEFINED instruction would be (EL1 from EL0, EL2 with
        HCR_EL2.TGE); the instruction does not execute (nor count)."""
        m = self.m
        if m.cfg.mode == "raw":
            pass   # (the engine alone, a speed baseline: no instruction or alignment hook; PC
            # alignment only -- docs/model.md "Exception classes")
        elif self.controls_changed:
            self.refresh()
        elif self.sp_misaligned and not any(m.fast.reg(r) % SP_ALIGN for r in SP_REGS):
            self.refresh()   # (every SP aligned again: the SP checks stop)
        elif (self.hooked_els or self.mem_els or self._insn_hook is not None
              or self._mem_hook is not None):
            self._place_hook(PSTATE_EL.get(m.fast.reg(A.UC_ARM64_REG_PSTATE)))
        pc = m.pc
        if pc % INSN_BYTES:
            syndrome, far = esr(EC.PC_ALIGN), pc
        elif self.il_pending and PSTATE.get(m.fast.reg(A.UC_ARM64_REG_PSTATE), "IL"):
            syndrome, far = esr(EC.ILLEGAL_STATE), None
        else:
            self.il_pending = False
            return False
        self.il_pending = False
        ctx = m.context()
        if m.cfg.mode != "reference":
            # (the stop is at a block boundary: the instruction at the PC is in no block the
            # native hook counted)
            m.counter.block_insns = 0
        m._take_sync(ctx, m.exc.sync_target(ctx), syndrome, pc, far=far)
        return True

    # -- FEAT_E0PD ------------------------------------------------------------------------
    def _e0pd_fault(self, ctx, ec: int, va: int) -> bool:
        """Whether the access that aborted at ``va`` is unprivileged -- from EL0, or an
        LDTR/STTR at EL1 with PSTATE.UAO == 0 (``AArch64.AccessUsesEL()``) -- in the EL1&0
        regime with its stage 1 MMU on and TCR_EL1.E0PDn set for the VA's half: a level 0
        Translation fault, whatever the translation tables say (Arm ARM D8 "FEAT_E0PD";
        :func:`spe_emu.arch.cpu_features.e0pd_fault`). Unicorn's CPU (QEMU 5.0) has no
        FEAT_E0PD: it walks the tables and reports what it finds there."""
        if ctx.el > 1 or ctx.tge:
            return False
        fast = self.m.fast
        if not e0pd_fault(fast.cpr(mmu.TCR_ENC[1]), va):
            return False
        if not SCTLR_ELX.get(fast.cpr(SCTLR_ENC[1]), "M"):
            return False
        if ctx.el == 0:
            return True
        if ec != EC.DABORT_SAME or PSTATE.get(current_pstate(fast), "UAO"):
            return False
        word = self.m._fetch(self.m.pc, ctx.el)
        return word & UNPRIVILEGED_LDST[0] == UNPRIVILEGED_LDST[1]

    # -- Address size faults, External aborts on a walk ---------------------------------
    def _descriptor(self, pa: int) -> int:
        """One translation table descriptor at ``pa`` (a walk's read).

        Raises:
            ExternalAbort: no RAM or device at ``pa``.
        """
        try:
            return int.from_bytes(self.m.fast.read(pa, 8), "little")
        except UcError:
            raise ExternalAbort(pa) from None

    def refine_abort(self, ctx, target: int, syndrome: int, va: int | None,
                     *, translated: bool = False) -> tuple[int, int]:
        """(target EL, ESR value) of the abort QEMU took (a translation fault: FSC 0b0001LL;
        with FEAT_E0PD presented also an Access flag or Permission fault) or spe_emu took for
        an access to no memory (``translated``: the access's address came out of a stage 1
        walk), at ``va``: the level 0 Translation fault of FEAT_E0PD (:meth:`_e0pd_fault`),
        else the Address size fault or External abort on the walk that the walk really ends
        with (``AArch64.S1Walk()``), else unchanged."""
        ec = ESR.get(syndrome, "EC")
        if va is None or ec not in ABORT_ECS:
            return target, syndrome
        fsc = ABORT_ISS.get(syndrome, "FSC")
        if self.m.cfg.cpu.e0pd and fsc != FSC_ALIGNMENT and self._e0pd_fault(ctx, ec, va):
            found, cm = mmu.FSC_TRANSLATION, ABORT_ISS.get(syndrome, "CM")  # (level 0)
            target, syndrome = self.m.exc.abort(ctx, fetch=ec in FETCH_ECS,
                                                write=bool(ABORT_ISS.get(syndrome, "WnR")),
                                                fsc=found, external=False)
            return target, ABORT_ISS.set(syndrome, "CM", cm)
        if not (translated or fsc & ~FSC_LEVEL_MASK == mmu.FSC_TRANSLATION):
            return target, syndrome
        found = mmu.walk_fault(self.m.fast, va, max(ctx.el, 1), self._descriptor)
        if found is None:
            return target, syndrome
        return self.m.exc.abort(ctx, fetch=ec in FETCH_ECS,
                                write=bool(ABORT_ISS.get(syndrome, "WnR")), fsc=found,
                                external=found & ~FSC_LEVEL_MASK == mmu.FSC_WALK_EXTERNAL)
