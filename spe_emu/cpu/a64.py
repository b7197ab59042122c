"""A64 instruction classification for the SPE model.

When the SPE model samples an instruction, the emulator has stopped Unicorn *just before* it
executes. This module turns the 32-bit instruction word (plus the PC and the register values
at that point) into what a sample record needs (SPE supplement DDI 0586A):

* the Operation Type packet (§5.3.8): CLASS (other / load-store-atomic / branch) and the
  payload byte, and the load/store/branch distinctions the operation-type filter uses (§3.2.2);
* the data virtual address of a load/store: the lowest address accessed (§2.3.2);
* the outcome of a branch or exception return: taken/not taken and the target (§2.3.1);
* the condition-code result of every conditional instruction (§2.3.3, event E[6]);
* what the machine needs to emulate traps: exception-generating instructions (SVC, HVC, SMC,
  BRK, HLT and their imm16), MRS/MSR register forms, HINT numbers (PSB CSYNC = HINT #17).

Decoding follows the A64 encoding tables (Arm ARM C4.1, "A64 instruction set encoding"):
top-level op0 = word[28:25], then the per-group fields. Capstone's operand access flags are
not used (they are wrong for STLR, LD1, LDADD; see shared/notes/unicorn-aarch64-facts.md).

Classification choices (documented here once):

* Prefetches (PRFM immediate/register/literal, PRFUM), cache maintenance, address translation
  and TLB maintenance (SYS/SYSL, including DC ZVA) are CLASS *other* (§2.3.4); they report no
  data address (``data_address()`` returns None for every non load/store).
* Exception-generating instructions (SVC, HVC, SMC, BRK, HLT) are *other*: "A sampled
  operation that generates an exception is not treated as a branch" (§2.3.1 note).
* ERET/ERETAA/ERETAB are unconditional *indirect* branches (§2.3.1: exception returns are
  treated as unconditional branches); the target comes from ELR_ELx, which the caller reads.
  DRPS (Debug state only) is *other*.
* Atomics (§3.2.2, §5.3.8): every atomic is a store (``is_store``, counted by PMSFCR_EL1.ST);
  it is also a load (``is_load``) when it returns a value to a register. LD<op> with Rt = XZR
  (the ST<op> aliases) returns nothing, so it is store-only and its LDST bit is 1. SWP and
  CAS/CASP are "swaps": always ``is_load`` with LDST = 0. Following the LD<op>/SWP
  pseudocode, A = 1 gives acquire semantics only when Rt != 31.
* LDAPR, LDAPUR/STLUR, LDLAR/STLLR are acquire/release (AR = 1), not atomic.
* Memory-tagging (LDG/STG/..., STGP), FEAT_MOPS (CPY*/SET*), FEAT_LSE128/FEAT_LRCPC3 and
  other encodings this module does not know are *other* with ``mnemonic_class`` "unknown";
  unallocated encodings are *other* with ``mnemonic_class`` "unallocated".
* Pointer-authenticated branches and LDRAA/LDRAB use the register value as is: the result is
  right when authentication is disabled or the pointer is not signed (QEMU/Unicorn with the
  keys disabled does exactly that); with PAuth in use the caller should prefer the PC it
  observes after execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping

from .exceptions import PSTATE
from unicorn.arm64_const import (
    UC_ARM64_REG_NZCV,
    UC_ARM64_REG_SP,
    UC_ARM64_REG_X0,
    UC_ARM64_REG_X29,
    UC_ARM64_REG_X30,
)

__all__ = [
    "InsnInfo",
    "decode",
    "condition_holds",
    "OP_CLASS_OTHER",
    "OP_CLASS_LDST",
    "OP_CLASS_BRANCH",
    "X_REGS",
]

M64 = (1 << 64) - 1

#: §5.3.8 Operation Type packet, CLASS field values.
OP_CLASS_OTHER = 0
OP_CLASS_LDST = 1
OP_CLASS_BRANCH = 2

#: Unicorn ids of X0..X30 (X0-X28 are contiguous in unicorn.arm64_const, X29/X30 are not).
X_REGS: tuple[int, ...] = tuple(UC_ARM64_REG_X0 + i for i in range(29)) + (
    UC_ARM64_REG_X29, UC_ARM64_REG_X30)

_HINT_NAMES = {0: "nop", 1: "yield", 2: "wfe", 3: "wfi", 4: "sev", 5: "sevl", 6: "dgh",
               7: "xpaclri", 16: "esb", 17: "psb", 18: "tsb", 20: "csdb", 22: "clrbhb"}


_NZCV_FIELDS = tuple(PSTATE.field(name) for name in "NZCV")


def condition_holds(cond: int, nzcv: int) -> bool:
    """``ConditionHolds(cond)`` (Arm ARM J1, shared/functions/system) on ``nzcv``.

    ``nzcv`` is the value Unicorn returns for ``UC_ARM64_REG_NZCV``: N, Z, C, V in bits
    31, 30, 29, 28 (the NZCV system-register layout). ``cond`` 0b1111 ("NV") holds always.
    """
    n, z, c, v = (f.get(nzcv) for f in _NZCV_FIELDS)
    base = (cond >> 1) & 7
    if base == 0:
        result = z == 1
    elif base == 1:
        result = c == 1
    elif base == 2:
        result = n == 1
    elif base == 3:
        result = v == 1
    elif base == 4:
        result = c == 1 and z == 0
    elif base == 5:
        result = n == v
    elif base == 6:
        result = n == v and z == 0
    else:
        result = True
    if cond & 1 and cond != 0b1111:
        result = not result
    return result


@dataclass(frozen=True, slots=True)
class InsnInfo:
    """Everything the SPE model needs to know about one A64 instruction word.

    Attributes:
        word: the instruction word.
        mnemonic_class: short human tag ("ldr", "stp", "ld1", "ldadd", "b.cond", "csel",
            "svc", "mrs", "hint", ...). Returns are tagged "ret"/"retaa"/"retab" and nothing
            else starts with "ret".
        op_class: §5.3.8 CLASS: 0 other, 1 load/store/atomic, 2 branch or exception return.
        op_subclass: §5.3.8 payload byte. Other: bit 0 = conditional. Branch: bit 1 =
            indirect, bit 0 = conditional. Load/store: general-purpose 0b0000000x, SIMD&FP
            0b0000010x, extended (atomic/acquire/release/exclusive) 0b000[AR][EXCL][AT]1x;
            bit 0 (LDST) = 1 for a store, 0 for a load or swap.
        is_load, is_store: §3.2.2 filter types (an atomic is a store, and also a load when it
            returns a value to a register).
        is_atomic, is_exclusive, is_acqrel, is_simd_fp: §2.3.2 / §5.3.8 load/store kind
            (``is_simd_fp``: the transfer registers are SIMD&FP; loads/stores only).
        is_branch, is_indirect, is_conditional, is_eret: branch kind (§2.3.1);
            ``is_conditional`` is also set for conditional selects/compares (§2.3.3).
        exception: "svc" | "hvc" | "smc" | "brk" | "hlt" for exception-generating
            instructions, else None (DCPS<n> is UNDEFINED outside Debug state: None).
        imm16: the immediate of an exception-generating instruction (0 otherwise).
        sysreg: (op0, op1, CRn, CRm, op2) for MRS/MSR register forms only (None otherwise,
            including for SYS/SYSL; see ``sys_op``).
        rt: the Rt field for loads/stores, MRS/MSR, SYS/SYSL, CBZ/TBZ; -1 when there is none.
        is_read: True for MRS (and SYSL), False otherwise.
        hint: HINT number CRm:op2 for the hint space (NOP 0, WFE 2, WFI 3, PSB CSYNC 17 ...).
        access_size: bytes accessed by a load/store (total for pairs and structures), else 0.
        reads: Unicorn register ids that ``data_address``/``branch``/``condition_passed``
            read from ``regs``.
        pstate: (op1, op2, CRm) of an MSR (immediate) / PSTATE instruction, else None.
        sys_op: (op1, CRn, CRm, op2) of SYS/SYSL (DC, IC, AT, TLBI, ...), else None.
        branch_offset: target - PC of a direct branch (B, BL, B.cond, CBZ/CBNZ, TBZ/TBNZ),
            else None (see ``direct_target``).
    """

    word: int
    mnemonic_class: str
    op_class: int = OP_CLASS_OTHER
    op_subclass: int = 0
    is_load: bool = False
    is_store: bool = False
    is_atomic: bool = False
    is_exclusive: bool = False
    is_acqrel: bool = False
    is_simd_fp: bool = False
    is_branch: bool = False
    is_indirect: bool = False
    is_conditional: bool = False
    is_eret: bool = False
    exception: str | None = None
    imm16: int = 0
    sysreg: tuple[int, int, int, int, int] | None = None
    rt: int = -1
    is_read: bool = False
    hint: int | None = None
    access_size: int = 0
    reads: tuple[int, ...] = ()
    pstate: tuple[int, int, int] | None = None
    sys_op: tuple[int, int, int, int] | None = None
    branch_offset: int | None = None
    _addr: Callable[[int, Mapping[int, int]], int] | None = field(
        default=None, repr=False, compare=False)
    _branch: Callable[[int, Mapping[int, int]], tuple[bool, int | None]] | None = field(
        default=None, repr=False, compare=False)
    _cond: Callable[[Mapping[int, int]], bool] | None = field(
        default=None, repr=False, compare=False)

    def direct_target(self, pc: int) -> int | None:
        """The target of a direct branch at ``pc`` (taken or not), else None."""
        return None if self.branch_offset is None else (pc + self.branch_offset) & M64

    @property
    def address_form(self) -> BaseOffset | Literal | RegisterOffset | None:
        """How ``data_address`` computes the address (None: no data address)."""
        return self._addr

    @property
    def condition_check(self) -> Callable[[Mapping[int, int]], bool] | None:
        """What ``condition_passed`` evaluates (a :class:`ConditionCheck` for instructions that
        check a condition code; None when not conditional)."""
        return self._cond

    def data_address(self, pc: int, regs: Mapping[int, int]) -> int | None:
        """Lowest data virtual address the load/store accesses (§2.3.2), before execution.

        ``regs`` maps the ids in ``reads`` to unsigned 64-bit values. Post-indexed forms give
        the base before the update; register 31 as a base is SP, as an index XZR. The value
        is the full 64-bit VA including any top-byte tag (§2.3.2 TBI). None for instructions
        that are not loads/stores (including prefetches, see the module docstring).
        """
        f = self._addr
        return None if f is None else f(pc, regs)

    def branch(self, pc: int, regs: Mapping[int, int]) -> tuple[bool, int | None]:
        """(taken, target) of a branch (§2.3.1); target is the next PC when taken.

        A not-taken conditional branch still reports its target address. ERET returns
        ``(True, None)``: the caller supplies ELR_ELx. Non-branches return ``(False, None)``.
        """
        if self.branch_offset is not None:   # direct: taken when its condition holds
            return (self._cond is None or self._cond(regs)), self.direct_target(pc)
        f = self._branch
        return (False, None) if f is None else f(pc, regs)

    def condition_passed(self, regs: Mapping[int, int]) -> bool | None:
        """Condition-code check result (§2.3.3) or None when the instruction is not
        conditional. For CBZ/CBNZ/TBZ/TBNZ it is the branch-taken result."""
        f = self._cond
        return None if f is None else f(regs)


# ----------------------------------------------------------------------------- helpers ----

def _sext(value: int, bits: int) -> int:
    sign = 1 << (bits - 1)
    return (value & (sign - 1)) - (value & sign)


def _base_id(n: int) -> int:
    """Register id of a base register field (31 = SP)."""
    return UC_ARM64_REG_SP if n == 31 else X_REGS[n]


@dataclass(frozen=True, slots=True)
class BaseOffset:
    """Data address form: register ``base`` (a Unicorn id) plus ``offset`` (modulo 2**64)."""

    base: int
    offset: int

    def __call__(self, pc: int, regs: Mapping[int, int]) -> int:
        return (regs[self.base] + self.offset) & M64


@dataclass(frozen=True, slots=True)
class Literal:
    """Data address form: the instruction's PC plus ``offset`` (PC-relative literal; modulo
    2**64)."""

    offset: int

    def __call__(self, pc: int, regs: Mapping[int, int]) -> int:
        return (pc + self.offset) & M64


#: ``RegisterOffset.extend`` values: how the index register is extended (Arm ARM ``ExtendReg``;
#: the same numbers as SPE_EXTEND_* in spe_emu/native/spe_native.h).
EXTEND_LSL = 0   # LSL / UXTX / SXTX: the whole 64-bit register
EXTEND_UXTW = 1  # the low 32 bits, zero-extended
EXTEND_SXTW = 2  # the low 32 bits, sign-extended


@dataclass(frozen=True, slots=True)
class RegisterOffset:
    """Data address form: ``base`` + ExtendReg(``index``, ``extend``, ``shift``) (Unicorn ids;
    ``extend`` one of the EXTEND_* values, ``shift`` in bits)."""

    base: int
    index: int
    extend: int
    shift: int

    def __call__(self, pc: int, regs: Mapping[int, int]) -> int:
        value = regs[self.index]
        if self.extend == EXTEND_UXTW:
            value &= 0xFFFFFFFF
        elif self.extend == EXTEND_SXTW:
            value = _sext(value, 32)
        return (regs[self.base] + (value << self.shift)) & M64


@dataclass(frozen=True, slots=True)
class ConditionCheck:
    """``ConditionHolds(cond)`` on the NZCV value in ``regs`` (conditional selects, compares
    and B.cond)."""

    cond: int

    def __call__(self, regs: Mapping[int, int]) -> bool:
        return condition_holds(self.cond, regs[UC_ARM64_REG_NZCV])


def _addr_base(rid: int, offset: int) -> BaseOffset:
    return BaseOffset(rid, offset & M64)


def _addr_regoff(rn: int, rm: int, option: int, shift: int) -> BaseOffset | RegisterOffset:
    """Base + ExtendReg(Rm, option, shift) (Arm ARM: ``ExtendReg``); Rm 31 = XZR."""
    base = _base_id(rn)
    if rm == 31:
        return _addr_base(base, 0)
    extend = {0b010: EXTEND_UXTW, 0b110: EXTEND_SXTW}.get(option, EXTEND_LSL)
    return RegisterOffset(base, X_REGS[rm], extend, shift)


def _unallocated(word: int) -> InsnInfo:
    return InsnInfo(word, "unallocated")


def _unknown(word: int) -> InsnInfo:
    return InsnInfo(word, "unknown")


def _ldst(word: int, name: str, *, load: bool, store: bool, size: int, addr, reads,
          simd: bool = False, atomic: bool = False, excl: bool = False, acqrel: bool = False,
          ldst_bit: int | None = None) -> InsnInfo:
    """Builds a load/store InsnInfo with the §5.3.8 payload."""
    if ldst_bit is None:
        ldst_bit = 0 if load else 1
    if atomic or excl or acqrel:
        sub = 0x02 | (acqrel << 4) | ((excl and not atomic) << 3) | (atomic << 2) | ldst_bit
    elif simd:
        sub = 0x04 | ldst_bit
    else:
        sub = ldst_bit
    return InsnInfo(word, name, OP_CLASS_LDST, sub, is_load=load, is_store=store,
                    is_atomic=atomic, is_exclusive=excl, is_acqrel=acqrel, is_simd_fp=simd,
                    rt=word & 31, access_size=size, reads=tuple(reads), _addr=addr)


# ------------------------------------------------------------------- loads and stores ----

_SZ = ("b", "h", "", "")


def _single_kind(size: int, opc: int, v: int):
    """(is_load, bytes, suffix) for the single-register forms, or None if unallocated, or
    "prfm" for the prefetch slot (size 11, opc 10, V 0)."""
    if v:
        if opc & 2:
            if size != 0:
                return None
            return (bool(opc & 1), 16, "")
        return (bool(opc & 1), 1 << size, "")
    if opc == 0:
        return (False, 1 << size, _SZ[size])
    if opc == 1:
        return (True, 1 << size, _SZ[size])
    if opc == 2:
        if size == 3:
            return "prfm"
        return (True, 1 << size, "s" + "bhw"[size])
    if size >= 2:
        return None
    return (True, 1 << size, "s" + "bh"[size])


def _single_or_prfm(w: int, size: int, opc: int, v: int):
    """:func:`_single_kind` for the scaled-offset forms (unsigned immediate, register offset),
    with the unallocated and PRFM slots already decoded (an :class:`InsnInfo`)."""
    kind = _single_kind(size, opc, v)
    if kind is None:
        return _unallocated(w)
    if kind == "prfm":
        return InsnInfo(w, "prfm", rt=w & 31)
    return kind


def _dec_ldst(w: int) -> InsnInfo:
    rt = w & 31
    rn = (w >> 5) & 31
    v = (w >> 26) & 1

    # Advanced SIMD load/store multiple structures (optionally post-indexed).
    if w & 0xBFBF0000 == 0x0C000000 or w & 0xBFA00000 == 0x0C800000:
        opcode = (w >> 12) & 0xF
        nregs, sel = {0b0000: (4, 4), 0b0010: (4, 1), 0b0100: (3, 3), 0b0110: (3, 1),
                      0b0111: (1, 1), 0b1000: (2, 2), 0b1010: (2, 1)}.get(opcode, (0, 0))
        size = (w >> 10) & 3
        q = (w >> 30) & 1
        if not nregs or (size == 3 and q == 0 and sel != 1):
            return _unallocated(w)
        load = bool(w >> 22 & 1)
        name = ("ld" if load else "st") + str(sel)
        base = _base_id(rn)
        return _ldst(w, name, load=load, store=not load, simd=True,
                     size=nregs * (16 if q else 8), addr=_addr_base(base, 0), reads=(base,))

    # Advanced SIMD load/store single structure (optionally post-indexed).
    if w & 0xBF9F0000 == 0x0D000000 or w & 0xBF800000 == 0x0D800000:
        load = bool(w >> 22 & 1)
        r = (w >> 21) & 1
        opcode = (w >> 13) & 7
        s = (w >> 12) & 1
        size = (w >> 10) & 3
        selem = ((opcode & 1) << 1 | r) + 1
        scale = opcode >> 1
        if scale == 3:                       # LD1R..LD4R
            if not load or s:
                return _unallocated(w)
            esize = 1 << size
            name = "ld%dr" % selem
        else:
            if scale == 1 and size & 1:
                return _unallocated(w)
            if scale == 2:
                if size & 2 or (size == 1 and s):
                    return _unallocated(w)
                scale = 3 if size == 1 else 2
            esize = 1 << scale
            name = ("ld" if load else "st") + str(selem)
        base = _base_id(rn)
        return _ldst(w, name, load=load, store=not load, simd=True, size=selem * esize,
                     addr=_addr_base(base, 0), reads=(base,))

    # Load/store exclusive, load-acquire/store-release (ordered), compare and swap.
    if w & 0x3F000000 == 0x08000000:
        size = w >> 30
        o2 = (w >> 23) & 1
        load = bool(w >> 22 & 1)
        o1 = (w >> 21) & 1
        o0 = (w >> 15) & 1
        base = _base_id(rn)
        addr = _addr_base(base, 0)
        if v:
            return _unallocated(w)
        if o2 == 0 and o1 == 0:              # LDXR/LDAXR/STXR/STLXR
            name = ("ld" + ("a" if o0 else "") + "xr") if load else \
                   ("st" + ("l" if o0 else "") + "xr")
            return _ldst(w, name + _SZ[size], load=load, store=not load, excl=True,
                         acqrel=bool(o0), size=1 << size, addr=addr, reads=(base,))
        if o2 == 0 and o1 == 1:
            if size & 2:                     # LDXP/LDAXP/STXP/STLXP
                name = ("ld" + ("a" if o0 else "") + "xp") if load else \
                       ("st" + ("l" if o0 else "") + "xp")
                return _ldst(w, name, load=load, store=not load, excl=True, acqrel=bool(o0),
                             size=2 * (4 << (size & 1)), addr=addr, reads=(base,))
            # CASP/CASPA/CASPL/CASPAL: L = acquire, o0 = release; Rs and Rt must be even.
            if w & (1 << 16) or w & 1:
                return _unallocated(w)
            name = "casp" + ("a" if load else "") + ("l" if o0 else "")
            return _ldst(w, name, load=True, store=True, atomic=True, acqrel=load or bool(o0),
                         size=2 * (4 << (size & 1)), addr=addr, reads=(base,), ldst_bit=0)
        if o2 == 1 and o1 == 0:              # LDAR/LDLAR/STLR/STLLR
            if load:
                name = "ldar" if o0 else "ldlar"
            else:
                name = "stlr" if o0 else "stllr"
            return _ldst(w, name + _SZ[size], load=load, store=not load, acqrel=True,
                         size=1 << size, addr=addr, reads=(base,))
        # CAS/CASA/CASL/CASAL (+B/H)
        name = "cas" + ("a" if load else "") + ("l" if o0 else "") + _SZ[size]
        return _ldst(w, name, load=True, store=True, atomic=True, acqrel=load or bool(o0),
                     size=1 << size, addr=addr, reads=(base,), ldst_bit=0)

    # LDAPUR/STLUR (FEAT_LRCPC2): size 011001 opc 0 imm9 00 Rn Rt.
    if w & 0x3F200C00 == 0x19000000:
        size = w >> 30
        opc = (w >> 22) & 3
        if opc == 0:
            load, name = False, "stlur" + _SZ[size]
        elif opc == 1:
            load, name = True, "ldapur" + _SZ[size]
        elif size == 3 or (size == 2 and opc == 3):
            return _unallocated(w)
        else:
            load, name = True, "ldapurs" + "bhw"[size]
        base = _base_id(rn)
        return _ldst(w, name, load=load, store=not load, acqrel=True, size=1 << size,
                     addr=_addr_base(base, _sext(w >> 12, 9)), reads=(base,))

    # Load register (literal): opc 011 V 00 imm19 Rt.
    if w & 0x3B000000 == 0x18000000:
        opc = w >> 30
        if v:
            if opc == 3:
                return _unallocated(w)
            size = 4 << opc
            return _ldst(w, "ldr", load=True, store=False, simd=True, size=size,
                         addr=Literal(_sext(w >> 5, 19) * 4 & M64), reads=())
        if opc == 3:
            return InsnInfo(w, "prfm", rt=rt)
        return _ldst(w, "ldrsw" if opc == 2 else "ldr", load=True, store=False,
                     size=8 if opc == 1 else 4, addr=Literal(_sext(w >> 5, 19) * 4 & M64),
                     reads=())

    # Load/store register pair: opc 101 V idx(2) L imm7 Rt2 Rn Rt.
    if w & 0x38000000 == 0x28000000:
        opc = w >> 30
        idx = (w >> 23) & 3
        load = bool(w >> 22 & 1)
        if v:
            if opc == 3:
                return _unallocated(w)
            esize = 4 << opc
            name = "ldp" if load else "stp"
        else:
            if opc == 3:
                return _unallocated(w)
            if opc == 1:
                if not load:
                    return _unknown(w)       # STGP (FEAT_MTE)
                if idx == 0:
                    return _unallocated(w)
                esize, name = 4, "ldpsw"
            else:
                esize = 4 << (opc >> 1)
                name = "ldp" if load else "stp"
        if idx == 0:
            name = name[:2] + "n" + name[2:]
        offset = 0 if idx == 1 else _sext(w >> 15, 7) * esize
        base = _base_id(rn)
        return _ldst(w, name, load=load, store=not load, simd=bool(v), size=2 * esize,
                     addr=_addr_base(base, offset), reads=(base,))

    # Load/store register (single): size 111 V 0x opc ...
    if w & 0x3A000000 == 0x38000000:
        size = w >> 30
        opc = (w >> 22) & 3
        base = _base_id(rn)
        if w & (1 << 24):                   # unsigned immediate offset
            kind = _single_or_prfm(w, size, opc, v)
            if isinstance(kind, InsnInfo):
                return kind
            load, nbytes, sfx = kind
            imm = ((w >> 10) & 0xFFF) * nbytes
            return _ldst(w, ("ldr" if load else "str") + sfx, load=load, store=not load,
                         simd=bool(v), size=nbytes, addr=_addr_base(base, imm), reads=(base,))
        op4 = (w >> 10) & 3
        if w & (1 << 21) == 0:
            # unscaled (00), post-index (01), unprivileged (10), pre-index (11)
            kind = _single_kind(size, opc, v)
            if kind is None or (kind != "prfm" and op4 == 0b10 and v):
                return _unallocated(w)
            if kind == "prfm":
                return InsnInfo(w, "prfum", rt=rt) if op4 == 0 else _unallocated(w)
            load, nbytes, sfx = kind
            imm9 = _sext(w >> 12, 9)
            stem = "ld" if load else "st"
            if op4 == 0:
                name = stem + "ur" + sfx
            elif op4 == 2:
                name = stem + "tr" + sfx
            else:
                name = stem + "r" + sfx
            offset = 0 if op4 == 0b01 else imm9
            return _ldst(w, name, load=load, store=not load, simd=bool(v), size=nbytes,
                         addr=_addr_base(base, offset), reads=(base,))
        if op4 == 0b10:                      # register offset
            option = (w >> 13) & 7
            if not option & 2:
                return _unallocated(w)
            kind = _single_or_prfm(w, size, opc, v)
            if isinstance(kind, InsnInfo):
                return kind
            load, nbytes, sfx = kind
            shift = (nbytes.bit_length() - 1) if (w >> 12) & 1 else 0
            rm = (w >> 16) & 31
            reads = (base,) if rm == 31 else (base, X_REGS[rm])
            return _ldst(w, ("ldr" if load else "str") + sfx, load=load, store=not load,
                         simd=bool(v), size=nbytes, addr=_addr_regoff(rn, rm, option, shift),
                         reads=reads)
        if op4 & 1:                          # LDRAA/LDRAB (FEAT_PAuth)
            if size != 3 or v:
                return _unallocated(w)
            offset = _sext(((w >> 22) & 1) << 9 | (w >> 12) & 0x1FF, 10) * 8
            return _ldst(w, "ldrab" if w >> 23 & 1 else "ldraa", load=True, store=False,
                         size=8, addr=_addr_base(base, offset), reads=(base,))
        # op4 == 00: atomic memory operations (FEAT_LSE), LDAPR, LS64
        if v:
            return _unallocated(w)
        a = (w >> 23) & 1
        r = (w >> 22) & 1
        rs = (w >> 16) & 31
        o3 = (w >> 15) & 1
        aop = (w >> 12) & 7
        addr = _addr_base(base, 0)
        if o3 == 0 or aop == 0:
            stem = ("ldadd", "ldclr", "ldeor", "ldset", "ldsmax", "ldsmin", "ldumax",
                    "ldumin")[aop] if o3 == 0 else "swp"
            if o3 == 0 and rt == 31 and not a:
                stem = "st" + stem[2:]         # ST<op> alias: no value returned
            name = stem + ("a" if a else "") + ("l" if r else "") + _SZ[size]
            returns = rt != 31
            acq = bool(a) and rt != 31
            if o3 == 0:
                load, ldst_bit = returns, (0 if returns else 1)
            else:
                load, ldst_bit = True, 0
            return _ldst(w, name, load=load, store=True, atomic=True, acqrel=acq or bool(r),
                         size=1 << size, addr=addr, reads=(base,), ldst_bit=ldst_bit)
        if aop == 0b100 and a == 1 and r == 0 and rs == 31:
            return _ldst(w, "ldapr" + _SZ[size], load=True, store=False, acqrel=True,
                         size=1 << size, addr=addr, reads=(base,))
        if size == 3 and a == 0 and r == 0:  # FEAT_LS64: 64-byte single-copy atomic
            if aop == 0b101 and rs == 31:
                return _ldst(w, "ld64b", load=True, store=False, size=64, addr=addr,
                             reads=(base,))
            if aop in (0b010, 0b011) or (aop == 0b001 and rs == 31):
                name = {1: "st64b", 2: "st64bv0", 3: "st64bv"}[aop]
                return _ldst(w, name, load=False, store=True, size=64, addr=addr,
                             reads=(base,))
        return _unallocated(w)

    return _unknown(w)


# --------------------------------------------------------- branches, exceptions, system ----

def _cond_branch(w: int, name: str, offset: int, taken: Callable[[Mapping[int, int]], bool],
                 reads: tuple[int, ...], rt: int = -1) -> InsnInfo:
    """A conditional direct branch (B.cond, CBZ/CBNZ, TBZ/TBNZ): Operation Type payload
    0b01 (conditional, direct; §5.3.8), target PC + ``offset``, outcome ``taken(regs)``."""
    return InsnInfo(w, name, OP_CLASS_BRANCH, 0x01, is_branch=True, is_conditional=True, rt=rt,
                    reads=reads, branch_offset=offset, _cond=taken)


def _dec_branch_sys(w: int) -> InsnInfo:
    # B / BL: op 00101 imm26
    if (w >> 26) & 0x1F == 0b00101:
        link = bool(w >> 31)
        offset = _sext(w, 26) * 4
        return InsnInfo(w, "bl" if link else "b", OP_CLASS_BRANCH, 0x00, is_branch=True,
                        branch_offset=offset)

    # CBZ / CBNZ: sf 011010 op imm19 Rt
    if w & 0x7E000000 == 0x34000000:
        rt = w & 31
        nz = bool(w >> 24 & 1)
        mask = M64 if w >> 31 else 0xFFFFFFFF
        offset = _sext(w >> 5, 19) * 4
        rid = None if rt == 31 else X_REGS[rt]

        def taken(regs):
            val = 0 if rid is None else regs[rid] & mask
            return (val != 0) == nz
        return _cond_branch(w, "cbnz" if nz else "cbz", offset, taken,
                            () if rid is None else (rid,), rt)

    # TBZ / TBNZ: b5 011011 op b40 imm14 Rt
    if w & 0x7E000000 == 0x36000000:
        rt = w & 31
        nz = bool(w >> 24 & 1)
        bit = (w >> 31) << 5 | (w >> 19) & 31
        offset = _sext(w >> 5, 14) * 4
        rid = None if rt == 31 else X_REGS[rt]

        def taken(regs):
            val = 0 if rid is None else regs[rid]
            return bool(val >> bit & 1) == nz
        return _cond_branch(w, "tbnz" if nz else "tbz", offset, taken,
                            () if rid is None else (rid,), rt)

    # B.cond / BC.cond: 0101010 0 imm19 o0 cond
    if w & 0xFF000000 == 0x54000000:
        offset = _sext(w >> 5, 19) * 4
        return _cond_branch(w, "bc.cond" if w & 0x10 else "b.cond", offset,
                            ConditionCheck(w & 0xF), (UC_ARM64_REG_NZCV,))

    # Exception generation: 11010100 opc imm16 op2 LL
    if w & 0xFF000000 == 0xD4000000:
        opc = (w >> 21) & 7
        imm16 = (w >> 5) & 0xFFFF
        op2 = (w >> 2) & 7
        ll = w & 3
        name = None
        if op2 == 0:
            if opc == 0:
                name = (None, "svc", "hvc", "smc")[ll]
            elif opc == 1 and ll == 0:
                name = "brk"
            elif opc == 2 and ll == 0:
                name = "hlt"
            elif opc == 5 and ll != 0:
                name = "dcps"
        if name is None:
            return _unallocated(w) if opc != 3 else _unknown(w)   # 011: FEAT_TME TCANCEL
        if name == "dcps":                   # UNDEFINED outside Debug state; not a trap
            return InsnInfo(w, "dcps%d" % ll, imm16=imm16)
        return InsnInfo(w, name, exception=name, imm16=imm16)

    # System: 1101010100 L op0 op1 CRn CRm op2 Rt
    if w & 0xFFC00000 == 0xD5000000:
        rd = w & 31
        read = bool(w >> 21 & 1)
        op0 = (w >> 19) & 3
        op1 = (w >> 16) & 7
        crn = (w >> 12) & 0xF
        crm = (w >> 8) & 0xF
        op2 = (w >> 5) & 7
        if op0 >= 2:
            return InsnInfo(w, "mrs" if read else "msr", sysreg=(op0, op1, crn, crm, op2),
                            rt=rd, is_read=read)
        if op0 == 1:
            return InsnInfo(w, "sysl" if read else "sys", sys_op=(op1, crn, crm, op2), rt=rd,
                            is_read=read)
        if read:
            return _unallocated(w)
        if crn == 0b0100 and rd == 31:
            return InsnInfo(w, "msr_imm", pstate=(op1, op2, crm))
        if crn == 0b0010 and op1 == 3 and rd == 31:
            num = crm << 3 | op2
            return InsnInfo(w, _HINT_NAMES.get(num, "bti" if num in (32, 34, 36, 38) else "hint"),
                            hint=num)
        if crn == 0b0011 and op1 == 3:
            name = {2: "clrex", 4: "dsb", 5: "dmb", 6: "isb", 7: "sb"}.get(op2)
            if op2 == 1 and crm & 3 == 2:
                name = "dsb"                 # DSB nXS (FEAT_XS)
            if name is not None and rd == 31:
                return InsnInfo(w, name)
        if crn == 0b0001 and op1 == 3 and crm == 0 and op2 in (0, 1):
            return InsnInfo(w, ("wfet", "wfit")[op2], rt=rd)
        return _unknown(w)

    # Unconditional branch (register): 1101011 opc op2 op3 Rn op4
    if w & 0xFE000000 == 0xD6000000:
        opc = (w >> 21) & 0xF
        op2 = (w >> 16) & 31
        op3 = (w >> 10) & 0x3F
        rn = (w >> 5) & 31
        op4 = w & 31
        if op2 != 31:
            return _unallocated(w)
        pac = op3 in (2, 3)
        key = "ab"[op3 & 1]
        if opc in (0b0100, 0b0101) and rn == 31:
            if opc == 0b0101 and op3 == 0 and op4 == 0:
                return InsnInfo(w, "drps")
            if opc == 0b0100 and ((op3 == 0 and op4 == 0) or (pac and op4 == 31)):
                return InsnInfo(w, "eret" + (key if pac else ""), OP_CLASS_BRANCH, 0x02,
                                is_branch=True, is_indirect=True, is_eret=True,
                                _branch=lambda pc, regs: (True, None))
            return _unallocated(w)
        name = None
        if opc in (0b0000, 0b0001, 0b0010):
            stem = ("br", "blr", "ret")[opc]
            if op3 == 0 and op4 == 0:
                name = stem
            elif pac and op4 == 31 and (opc != 0b0010 or rn == 31):
                name = stem + ("a" + key if opc == 0b0010 else "a" + key + "z")
                if opc == 0b0010:
                    rn = 30
        elif opc in (0b1000, 0b1001) and pac:
            name = ("braa", "blraa")[opc & 1][:-1] + key   # BRAA/BRAB/BLRAA/BLRAB
        if name is None:
            return _unallocated(w)
        rid = None if rn == 31 else X_REGS[rn]
        if rid is None:
            def br(pc, regs):
                return True, 0
        else:
            def br(pc, regs):
                return True, regs[rid]
        return InsnInfo(w, name, OP_CLASS_BRANCH, 0x02, is_branch=True, is_indirect=True,
                        reads=() if rid is None else (rid,), _branch=br)

    return _unallocated(w)


# ---------------------------------------------------------- data processing (cond) -------

def _conditional_other(w: int, name: str, cond: int) -> InsnInfo:
    return InsnInfo(w, name, OP_CLASS_OTHER, 0x01, is_conditional=True,
                    reads=(UC_ARM64_REG_NZCV,), _cond=ConditionCheck(cond))


def _dec_dp_reg(w: int) -> InsnInfo:
    # Conditional compare: sf op 1 11010010 Rm|imm5 cond x o2 Rn o3 nzcv
    if w & 0x3FE00410 == 0x3A400000:
        return _conditional_other(w, "ccmp" if w >> 30 & 1 else "ccmn", (w >> 12) & 0xF)
    # Conditional select: sf op 0 11010100 Rm cond op2 Rn Rd
    if w & 0x3FE00800 == 0x1A800000:
        name = (("csel", "csinc"), ("csinv", "csneg"))[w >> 30 & 1][w >> 10 & 1]
        return _conditional_other(w, name, (w >> 12) & 0xF)
    return InsnInfo(w, "dp")


def _dec_simd_fp(w: int) -> InsnInfo:
    # FCCMP/FCCMPE: M 0 S 11110 ftype 1 Rm cond 01 Rn op nzcv
    # FCSEL:        M 0 S 11110 ftype 1 Rm cond 11 Rn Rd
    if w & 0xFF200400 == 0x1E200400 and (w >> 22) & 3 != 2:
        if w & 0x800:
            return _conditional_other(w, "fcsel", (w >> 12) & 0xF)
        return _conditional_other(w, "fccmpe" if w & 0x10 else "fccmp", (w >> 12) & 0xF)
    return InsnInfo(w, "simd_fp")


@lru_cache(maxsize=1 << 16)
def decode(word: int) -> InsnInfo:
    """Decodes one A64 instruction word (pure; cached, so each word is decoded once).

    Dispatch on word[28:25] (Arm ARM C4.1): 100x data processing (immediate), 101x branches/
    exception generation/system, x1x0 loads and stores, x101 data processing (register),
    x111 data processing (SIMD&FP). Classification follows §5.3.8 and §2.3.1-§2.3.4 of the
    SPE supplement; see the module docstring for the deliberate choices.
    """
    w = word & 0xFFFFFFFF
    op0 = (w >> 25) & 0xF
    if op0 & 0b1110 == 0b1010:
        return _dec_branch_sys(w)
    if op0 & 0b0101 == 0b0100:
        return _dec_ldst(w)
    if op0 & 0b0111 == 0b0101:
        return _dec_dp_reg(w)
    if op0 & 0b0111 == 0b0111:
        return _dec_simd_fp(w)
    if op0 & 0b1110 == 0b1000:
        return InsnInfo(w, "dp_imm")
    return _unknown(w)


# ------------------------------------------------------------------ registers written -----

def _x(n: int) -> tuple[int, ...]:
    """X<n> as a written destination (n == 31 is XZR: nothing is written)."""
    return (X_REGS[n],) if n < 31 else ()


def _x_or_sp(n: int) -> tuple[int, ...]:
    """A destination where 31 may mean SP (add/sub immediate/extended, logical immediate,
    base-register writeback): n == 31 -> SP."""
    return (X_REGS[n],) if n < 31 else (UC_ARM64_REG_SP,)


# HINT numbers (CRm:op2) that write no general-purpose register nor the flags: NOP, YIELD,
# WFE, WFI, SEV, SEVL, DGH, ESB, PSB CSYNC, TSB CSYNC, GCSB, CSDB, CLRBHB, BTI variants.
_QUIET_HINTS = frozenset(range(0, 7)) | frozenset(range(16, 23)) | frozenset(range(32, 40, 2))
# Pointer-authentication hints (XPACLRI, PAC*/AUT*1716, PAC*/AUT*Z/SP): X17 and/or X30.
_PAC_HINTS = frozenset(range(7, 16)) | frozenset(range(24, 32))


def _written_ldst(w: int) -> tuple[int, ...] | None:
    rt, rn, rt2, rs = w & 31, (w >> 5) & 31, (w >> 10) & 31, (w >> 16) & 31
    op2 = (w >> 23) & 3
    kind = (w >> 28) & 3
    wb = _x_or_sp(rn)
    if kind == 0b00:
        if w & (1 << 26):  # Advanced SIMD structures: V registers; post-index writes Rn
            return wb if w >> 31 == 0 and op2 & 1 else () if w >> 31 == 0 else None
        if op2 & 0b10:     # memory tagging and unallocated
            return None
        # exclusives, load-acquire/store-release, compare-and-swap (pairs): Rs, Rt, Rt2
        out = [*_x(rt), *_x(rt2), *_x(rs)]
        for n in (rt, rs):
            if n < 30:
                out.append(X_REGS[n + 1])
        return tuple(out)
    if kind == 0b01:
        if op2 & 0b10 == 0:                                    # load register (literal)
            return _x(rt)
        if (w >> 21) & 1 == 0 and (w >> 10) & 3 == 0:         # RCpc unscaled (LDAPUR ...)
            return _x(rt)
        return None                                            # FEAT_MOPS and others
    simd = (w >> 26) & 1                                       # Rt/Rt2 are SIMD&FP registers
    if kind == 0b10:                                           # pairs (L, bit 22: a load)
        loaded = () if simd or not (w >> 22) & 1 else (*_x(rt), *_x(rt2))
        return (*loaded, *(wb if op2 & 1 else ()))
    # kind 0b11: single register, every addressing mode
    op4 = (w >> 10) & 3
    writeback = op2 & 0b10 == 0 and op4 & 1
    # opc (bits 23:22) == 0 is a store in the unsigned-offset, unscaled/pre/post-index and
    # register-offset forms; atomics and LDRAA/LDRAB (bit 21 set, bits 11:10 not 0b10) use
    # those bits otherwise and write Rt.
    store = (w >> 22) & 3 == 0 and ((w >> 24) & 1 or not (w >> 21) & 1 or op4 == 0b10)
    return (*(() if simd or store else _x(rt)), *(wb if writeback else ()))


def _written_simd_fp(w: int) -> tuple[int, ...]:
    """SIMD&FP data processing: only these forms write a general-purpose register or NZCV."""
    rd = w & 31
    if (w >> 24) & 0x5F == 0x1E:                               # scalar floating-point
        if not (w >> 21) & 1:                                  # FP <-> fixed-point
            return _x(rd)
        if (w >> 10) & 0x3F == 0:                              # FP <-> integer, FJCVTZS
            return (*_x(rd), UC_ARM64_REG_NZCV)
        if (w >> 10) & 0xF == 0b1000 or (w >> 10) & 3 == 0b01:  # FCMP/FCMPE, FCCMP/FCCMPE
            return (UC_ARM64_REG_NZCV,)
        return ()
    if w & 0x9FE08400 == 0x0E000400 and (w >> 11) & 0xF in (0b0101, 0b0111):  # SMOV, UMOV
        return _x(rd)
    return ()


def _written_branch_sys(w: int) -> tuple[int, ...] | None:
    if w & 0xFFFFF01F == 0xD503201F:                           # HINT
        imm = (w >> 5) & 0x7F
        if imm in _QUIET_HINTS:
            return ()
        if imm in _PAC_HINTS:
            return (X_REGS[17], X_REGS[30])
        return None
    if w & 0xFFFFF01F == 0xD503301F:                           # CLREX, DSB, DMB, ISB, SB
        return ()
    if w & 0xFFF00000 == 0xD5300000:                           # MRS
        return _x(w & 31)
    return None  # MSR, SYS/SYSL, branches, exception generation: not modelled


# FEAT_PAuth instructions (Arm ARM C6): (mask, value) of PACIA..AUTDZB and XPACI/XPACD
# (data-processing 1-source), PACGA, the HINT-space forms (PACIA1716 .. AUTIBSP), BRAA..BLRABZ,
# RETAA/RETAB, ERETAA/ERETAB, and LDRAA/LDRAB.
PAUTH_PATTERNS = ((0xFFFF8000, 0xDAC10000), (0xFFE0FC00, 0x9AC03000), (0xFFFFFD1F, 0xD503211F),
                  (0xFE9FF800, 0xD61F0800), (0xFFFFFBFF, 0xD65F0BFF), (0xFFFFFBFF, 0xD69F0BFF),
                  (0xFF200400, 0xF8200400))


def is_pauth(word: int) -> bool:
    """Whether ``word`` is a pointer authentication instruction (the ones HCR_EL2.API and
    SCR_EL3.API trap; Arm ARM D19.2 EC 0x09)."""
    return any(word & mask == value for mask, value in PAUTH_PATTERNS)


@lru_cache(maxsize=1 << 16)
def written_registers(word: int) -> frozenset[int] | None:
    """Unicorn register ids (X0-X30, SP, NZCV) that ``word`` may write, as a superset; None
    when the instruction is not modelled (branches, exception generation, MSR, SYS/SYSL, SVE,
    SME, unallocated encodings).

    Used to decide whether the operands of a sampled instruction can be read at the start of
    its translated block (docs/model.md, "Samples inside a block"): a register outside this set
    keeps its value across the instruction. The set may contain registers the instruction does
    not write (never the reverse): extra registers only make the run loop take the exact path.
    SIMD&FP registers are not reported (no sampled operand reads them). Dispatch follows the
    A64 encoding index (Arm ARM C4.1) on word[28:25].
    """
    w = word & 0xFFFFFFFF
    op0 = (w >> 25) & 0xF
    rd = w & 31
    if op0 & 0b1110 == 0b1010:
        regs = _written_branch_sys(w)
    elif op0 & 0b0101 == 0b0100:
        regs = _written_ldst(w)
    elif op0 & 0b0111 == 0b0101:                               # data processing (register)
        if (w >> 24) & 0x1F == 0b01010:                       # logical (shifted register)
            flags = (w >> 29) & 3 == 3                         # ANDS, BICS
        else:                                                 # ADDS/SUBS/ADCS/CCMP/SETF/..
            flags = bool((w >> 29) & 1)
        regs = (*_x_or_sp(rd), *((UC_ARM64_REG_NZCV,) if flags else ()))
    elif op0 & 0b0111 == 0b0111:
        regs = _written_simd_fp(w)
    elif op0 & 0b1110 == 0b1000:                               # data processing (immediate)
        op1 = (w >> 23) & 7
        if op1 in (0b010, 0b011):
            flags = bool((w >> 29) & 1)                        # ADDS/SUBS immediate
        elif op1 == 0b100:
            flags = (w >> 29) & 3 == 3                         # ANDS immediate
        else:
            flags = False
        regs = (*_x_or_sp(rd), *((UC_ARM64_REG_NZCV,) if flags else ()))
    else:
        regs = None
    return None if regs is None else frozenset(regs)


# ------------------------------------------------------------------ evaluation ------------

@dataclass(frozen=True, slots=True)
class Step:
    """One instruction :func:`evaluator` can execute on register values: it reads ``sources``
    (Unicorn ids), writes exactly ``dests``, and ``load`` is (size in bytes, sign-extend to
    32 or 64 bits, or 0) for a load."""

    word: int
    sources: tuple[int, ...]
    dests: tuple[int, ...]
    load: tuple[int, int] | None
    _run: Callable = field(repr=False, compare=False)
    #: What the step does, for the native evaluator (spe_emu/native/counter.c): ("add" |
    #: "sub", rd, rn, operand2, mask, sets flags) with operand2 ("imm", value) or ("reg", rm,
    #: shift type, amount), ("mov", rd, rm, mask) or ("load", rt, size in bytes,
    #: sign-extension (0, 32 or 64), writeback increment or None, address form); register
    #: fields are Unicorn ids, None for XZR.
    op: tuple = field(default=(), compare=False)

    def run(self, pc: int, regs: Mapping[int, int],
            read: Callable[[int, int], int]) -> dict[int, int]:
        """The values written, from ``regs`` (which holds ``sources``); ``read(va, size)``
        reads guest memory for a load (little-endian, zero-extended)."""
        return self._run(pc, regs, read)


def _add_with_carry(x: int, y: int, carry: int, mask: int) -> tuple[int, int]:
    """``AddWithCarry(x, y, carry)`` (Arm ARM J1, shared/functions/integer) for 32 or 64 bits
    (``mask``): (result, NZCV as Unicorn's UC_ARM64_REG_NZCV holds it: PSTATE.{N, Z, C, V})."""
    bits = mask.bit_length()
    unsigned = x + y + carry
    result = unsigned & mask
    signed = _sext(x, bits) + _sext(y, bits) + carry
    n, z = result >> (bits - 1), int(result == 0)
    c, v = int(result != unsigned), int(_sext(result, bits) != signed)
    return result, PSTATE.make(N=n, Z=z, C=c, V=v)


def _shift_reg(value: int, kind: int, amount: int, mask: int) -> int:
    """``ShiftReg()``: LSL (0), LSR (1) or ASR (2) of a 32- or 64-bit register value."""
    value &= mask
    if kind == 0:
        return (value << amount) & mask
    if kind == 1:
        return value >> amount
    return (_sext(value, mask.bit_length()) >> amount) & mask


def _eval_add_sub(sub: int, flags: int, rd: int | None, rn: int | None, operand2: tuple,
                  mask: int, w: int) -> Step:
    """ADD/SUB/ADDS/SUBS with Rn (None: XZR) and ``operand2``, ("imm", value) or ("reg", Rm
    or None for XZR, shift type, amount); Rd None is XZR (CMP/CMN). Flags as
    ``AddWithCarry()`` gives them (Arm ARM C6.2 ADDS, SUBS)."""
    rm = operand2[1] if operand2[0] == "reg" else None
    sources = tuple(r for r in (rn, rm) if r is not None)
    dests = tuple(r for r in (rd,) if r is not None) + ((UC_ARM64_REG_NZCV,) if flags else ())

    def run(pc, regs, read):
        x = regs[rn] & mask if rn is not None else 0
        if operand2[0] == "imm":
            y = operand2[1]
        else:
            y = _shift_reg(regs[rm] if rm is not None else 0, operand2[2], operand2[3], mask)
        if sub:
            y = ~y & mask
        result, nzcv = _add_with_carry(x, y, sub, mask)
        out = {rd: result} if rd is not None else {}
        if flags:
            out[UC_ARM64_REG_NZCV] = nzcv
        return out
    return Step(w, sources, dests, None, run,
                ("sub" if sub else "add", rd, rn, operand2, mask, flags))


def _eval_add_sub_imm(w: int) -> Step | None:
    # ADD/ADDS/SUB/SUBS (immediate): Rn 31 is SP; Rd 31 is SP, or XZR when flags are set.
    sf, sub, s = w >> 31, (w >> 30) & 1, (w >> 29) & 1
    if (w >> 23) & 0x3F != 0b100010:
        return None
    imm = ((w >> 10) & 0xFFF) << (12 if (w >> 22) & 1 else 0)
    rn = _base_id((w >> 5) & 31)
    rd = (X_REGS[w & 31] if w & 31 != 31 else None) if s else _base_id(w & 31)
    return _eval_add_sub(sub, s, rd, rn, ("imm", imm), M64 if sf else 0xFFFFFFFF, w)


def _eval_add_sub_shifted(w: int) -> Step | None:
    # ADD/ADDS/SUB/SUBS (shifted register): register 31 is XZR everywhere.
    if w & 0x1F200000 != 0x0B000000:
        return None
    sf, sub, s = w >> 31, (w >> 30) & 1, (w >> 29) & 1
    kind, amount = (w >> 22) & 3, (w >> 10) & 63
    if kind == 3 or (not sf and amount >= 32):
        return None                                 # reserved
    rd, rn, rm = w & 31, (w >> 5) & 31, (w >> 16) & 31

    def reg(n: int) -> int | None:
        return X_REGS[n] if n != 31 else None
    return _eval_add_sub(sub, s, reg(rd), reg(rn), ("reg", reg(rm), kind, amount),
                         M64 if sf else 0xFFFFFFFF, w)


def _eval_move_wide(w: int) -> Step | None:
    # MOVN/MOVZ (move wide immediate); MOVK keeps the other bits (not evaluated).
    sf, opc, hw = w >> 31, (w >> 29) & 3, (w >> 21) & 3
    if (w >> 23) & 0x3F != 0b100101 or opc in (0b01, 0b11) or (not sf and hw >= 2) \
            or w & 31 == 31:
        return None
    mask = M64 if sf else 0xFFFFFFFF
    value = ((w >> 5) & 0xFFFF) << (16 * hw)
    if opc == 0b00:
        value = ~value & mask
    rd = X_REGS[w & 31]
    return Step(w, (), (rd,), None, lambda pc, regs, read: {rd: value},
                ("add", rd, None, ("imm", value), mask, False))


def _eval_store_writeback(w: int) -> Step | None:
    # STR* (immediate, pre/post-index) and STP/STNP-class pairs with writeback, of general or
    # SIMD&FP registers: only the base register's update is evaluated (what is stored is not
    # an operand of anything after it).
    if (w >> 27) & 7 != 0b101 and (w >> 27) & 7 != 0b111:
        return None
    simd = (w >> 26) & 1
    if (w >> 27) & 7 == 0b111:                      # single register
        if (w >> 24) & 1 or (w >> 21) & 1 or not (w >> 10) & 1 or (w >> 22) & 3 != 0:
            return None                             # not pre/post-index, or not a store
        imm = _sext(w >> 12, 9)
    else:                                           # pairs: bits 29:28 = 10, writeback, L = 0
        if (w >> 28) & 3 != 0b10 or not (w >> 23) & 1 or (w >> 22) & 1:
            return None
        opc = w >> 30
        if opc == 0b11 or (opc == 0b01 and not simd):
            return None                             # unallocated, STGP
        imm = _sext(w >> 15, 7) << ((2 + opc) if simd else (2 + (opc >> 1)))
    base = _base_id((w >> 5) & 31)
    inc = imm & M64
    return Step(w, (base,), (base,), None,
                lambda pc, regs, read: {base: (regs[base] + inc) & M64},
                ("add", base, base, ("imm", inc), M64, False))


def _eval_mov(w: int) -> Step | None:
    # MOV Xd, Xm / Wd, Wm: ORR (shifted register) with Rn = XZR, LSL #0.
    if w & 0x7FE0FFE0 != 0x2A0003E0 or w & 31 == 31:
        return None
    rm, rd = (w >> 16) & 31, X_REGS[w & 31]
    mask = M64 if w >> 31 else 0xFFFFFFFF
    if rm == 31:
        return Step(w, (), (rd,), None, lambda pc, regs, read: {rd: 0}, ("mov", rd, None, mask))
    src = X_REGS[rm]
    return Step(w, (src,), (rd,), None, lambda pc, regs, read: {rd: regs[src] & mask},
                ("mov", rd, src, mask))


def _eval_load(w: int) -> Step | None:
    # Load register (general-purpose, not SIMD&FP): unsigned offset, unscaled, pre/post-index,
    # register offset (Arm ARM C4.1.66, "Load/store register ...").
    if (w >> 27) & 7 != 0b111 or (w >> 26) & 1:
        return None
    size, opc = w >> 30, (w >> 22) & 3
    if opc == 0 or (size == 3 and opc >= 2) or (size == 2 and opc == 3):
        return None                                 # store, PRFM, unallocated
    if not (w >> 24) & 1:
        if (w >> 21) & 1:
            if (w >> 10) & 3 != 0b10:               # atomics, LDRAA/LDRAB
                return None
        elif (w >> 10) & 3 == 0b10:                 # LDTR* (unprivileged): not evaluated
            return None
    info = decode(w)
    if not info.is_load or info.is_store or info.address_form is None:
        return None
    nbytes = 1 << size
    extend = 0 if opc == 1 else (64 if opc == 2 else 32)
    rt = w & 31
    dests = []
    writeback = not (w >> 24) & 1 and not (w >> 21) & 1 and (w >> 10) & 1
    base = _base_id((w >> 5) & 31)
    if writeback:
        dests.append(base)
        imm = _sext(w >> 12, 9) & M64
    if rt != 31:
        dests.append(X_REGS[rt])
    dest = X_REGS[rt] if rt != 31 else None
    addr_of = info.address_form
    bits = 8 * nbytes

    def run(pc, regs, read):
        va = addr_of(pc, regs)
        value = read(va, nbytes)
        if extend and value >> (bits - 1):
            value = (value - (1 << bits)) & (M64 if extend == 64 else 0xFFFFFFFF)
        out = {}
        if writeback:
            out[base] = (regs[base] + imm) & M64
        if dest is not None:
            out[dest] = value
        return out
    return Step(w, tuple(info.reads), tuple(dests), (nbytes, extend), run,
                ("load", dest, nbytes, extend, imm if writeback else None, addr_of))


@lru_cache(maxsize=1 << 16)
def evaluator(word: int) -> Step | None:
    """A :class:`Step` for ``word`` when it is one of the instructions the run loop evaluates
    to predict a sample's operands (docs/model.md, "Samples inside a block"): ADD/SUB and
    ADDS/SUBS (immediate and shifted register; CMP/CMN), MOV (register), MOVZ/MOVN, loads of
    a general-purpose register (every addressing form but unprivileged, atomic and
    pointer-authenticated ones) and the base update of a store with writeback; else None."""
    w = word & 0xFFFFFFFF
    for make in (_eval_add_sub_imm, _eval_add_sub_shifted, _eval_move_wide, _eval_mov,
                 _eval_load, _eval_store_writeback):
        step = make(w)
        if step is not None:
            return step
    return None
