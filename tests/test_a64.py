"""Tests for spe_emu.cpu.a64: A64 classification for SPE (DDI 0586A §2.3, §3.2.2, §5.3.8).

Two kinds of checks:

* a classification table (assembly text -> expected Operation Type packet fields), assembled
  with keystone (ARMv8.0) or, for later instructions keystone does not know, hard-coded words
  (checked against GNU as when ``aarch64-linux-gnu-as`` is installed); capstone independently
  confirms each word is the intended mnemonic;
* differential checks against real execution in Unicorn: the lowest address (and span) of the
  memory accesses a load/store makes, the PC after a branch, the result of a conditional
  select/compare, for randomly generated encodings and register values (seeded).
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest
from capstone import CS_ARCH_ARM64, CS_MODE_ARM, Cs
from keystone import KS_ARCH_ARM64, KS_MODE_LITTLE_ENDIAN, Ks
from unicorn import (UC_ARCH_ARM64, UC_HOOK_INTR, UC_HOOK_MEM_READ, UC_HOOK_MEM_WRITE,
                     UC_MEM_READ, UC_MEM_WRITE, UC_MODE_ARM, Uc, UcError)
from unicorn import arm64_const as A

from spe_emu.cpu.a64 import X_REGS, condition_holds, decode

M64 = (1 << 64) - 1
KS = Ks(KS_ARCH_ARM64, KS_MODE_LITTLE_ENDIAN)
CS = Cs(CS_ARCH_ARM64, CS_MODE_ARM)
GNU_AS = shutil.which("aarch64-linux-gnu-as")
GNU_OBJCOPY = shutil.which("aarch64-linux-gnu-objcopy")
# Every random draw is seeded; set A64_TEST_SEED to explore other seeds.
SEED = int(os.environ.get("A64_TEST_SEED", "0"))


def make_rng(tag) -> random.Random:
    return random.Random(zlib.crc32(str(tag).encode()) ^ SEED)


def ks_word(text: str) -> int:
    """Assembles one instruction at address 0 (keystone takes PC-relative operands as
    absolute targets, so at address 0 "#0x100" means PC + 0x100)."""
    enc, _ = KS.asm(text, 0)
    assert enc is not None and len(enc) == 4, text
    return int.from_bytes(bytes(enc), "little")


def cs_mnemonic(word: int) -> str | None:
    for insn in CS.disasm(word.to_bytes(4, "little"), 0):
        return insn.mnemonic
    return None


# ------------------------------------------------------------------ classification table --
# Flags: L load, S store, A atomic, X exclusive, R acquire/release, V SIMD&FP, B branch,
# I indirect, C conditional, E exception return. Expected payloads written from §5.3.8:
#   GP load/store 0b0000000[LDST]; SIMD&FP 0b0000010[LDST];
#   extended 0b000[AR][EXCL][AT]1[LDST]; branch 0b000000[indirect][cond]; other 0b0000000[cond].
# word None: assembled by keystone. Hard-coded words come from GNU as 2.40
# (-march=armv8.4-a+profile+pauth) and are re-checked when it is installed.
TABLE = [
    # -- general-purpose loads/stores, every addressing mode
    ("ldr x0, [x1]", None, 1, 0x00, "L", 8),
    ("ldr w0, [x1, #4]", None, 1, 0x00, "L", 4),
    ("ldrb w0, [x1, #4095]", None, 1, 0x00, "L", 1),
    ("ldrsh x0, [x1, #2]", None, 1, 0x00, "L", 2),
    ("ldrsw x0, [sp, #8]", None, 1, 0x00, "L", 4),
    ("str x0, [x1, #8]!", None, 1, 0x01, "S", 8),
    ("strh w0, [x1], #-2", None, 1, 0x01, "S", 2),
    ("ldr w0, [sp, #8]!", None, 1, 0x00, "L", 4),
    ("ldur x0, [x1, #-1]", None, 1, 0x00, "L", 8),
    ("ldursw x0, [x1, #-1]", None, 1, 0x00, "L", 4),
    ("stur w0, [sp, #3]", None, 1, 0x01, "S", 4),
    ("ldtr x0, [x1, #-8]", None, 1, 0x00, "L", 8),
    ("sttrb w0, [x1]", None, 1, 0x01, "S", 1),
    ("ldr x0, [x1, w2, sxtw #3]", None, 1, 0x00, "L", 8),
    ("ldr x0, [x1, x2, lsl #3]", None, 1, 0x00, "L", 8),
    ("strb w0, [x1, x2]", None, 1, 0x01, "S", 1),
    ("ldrsb w0, [x1, w2, uxtw]", None, 1, 0x00, "L", 1),
    ("ldrh w0, [sp, x2, sxtx #1]", None, 1, 0x00, "L", 2),
    ("ldr x0, #0x100", None, 1, 0x00, "L", 8),
    ("ldrsw x0, #-0x100", None, 1, 0x00, "L", 4),
    ("ldp x0, x1, [x2]", None, 1, 0x00, "L", 16),
    ("stp w0, w1, [sp, #-8]!", None, 1, 0x01, "S", 8),
    ("ldp x0, x1, [sp], #16", None, 1, 0x00, "L", 16),
    ("ldnp x0, x1, [x2, #16]", None, 1, 0x00, "L", 16),
    ("stnp w0, w1, [x2]", None, 1, 0x01, "S", 8),
    ("ldpsw x0, x1, [x2, #-8]!", None, 1, 0x00, "L", 8),
    ("ldraa x0, [x1, #-8]", 0xF87FF420, 1, 0x00, "L", 8),
    ("ldrab x0, [x1, #4088]!", 0xF8BFFC20, 1, 0x00, "L", 8),
    # -- SIMD&FP loads/stores
    ("ldr q0, [x1], #16", None, 1, 0x04, "LV", 16),
    ("str d0, [x1, #8]", None, 1, 0x05, "SV", 8),
    ("ldr s0, #0x40", None, 1, 0x04, "LV", 4),
    ("ldr q1, #-0x40", None, 1, 0x04, "LV", 16),
    ("ldur h0, [x1, #-1]", None, 1, 0x04, "LV", 2),
    ("str b0, [x1, x2]", None, 1, 0x05, "SV", 1),
    ("str h0, [x0, w1, uxtw #1]", None, 1, 0x05, "SV", 2),
    ("ldr q0, [x0, x1, lsl #4]", None, 1, 0x04, "LV", 16),
    ("ldp q0, q1, [x0, #32]", None, 1, 0x04, "LV", 32),
    ("stp s0, s1, [x0], #-8", None, 1, 0x05, "SV", 8),
    ("stnp q0, q1, [sp, #-32]", None, 1, 0x05, "SV", 32),
    ("ld1 {v0.16b}, [x0]", None, 1, 0x04, "LV", 16),
    ("ld1 {v0.16b, v1.16b}, [x1], #32", None, 1, 0x04, "LV", 32),
    ("ld1 {v0.16b}, [x1], x2", None, 1, 0x04, "LV", 16),
    ("st1 {v0.2d, v1.2d, v2.2d}, [x0]", None, 1, 0x05, "SV", 48),
    ("ld2 {v0.8b, v1.8b}, [x0]", None, 1, 0x04, "LV", 16),
    ("ld3 {v0.4h, v1.4h, v2.4h}, [x0], #24", None, 1, 0x04, "LV", 24),
    ("st4 {v0.4s, v1.4s, v2.4s, v3.4s}, [x0]", None, 1, 0x05, "SV", 64),
    ("ld4 {v0.s, v1.s, v2.s, v3.s}[1], [x3]", None, 1, 0x04, "LV", 16),
    ("st1 {v0.d}[1], [x0], #8", None, 1, 0x05, "SV", 8),
    ("ld2 {v0.h, v1.h}[7], [x0], x5", None, 1, 0x04, "LV", 4),
    ("ld3r {v0.4s, v1.4s, v2.4s}, [sp]", None, 1, 0x04, "LV", 12),
    ("ld1r {v0.8b}, [x0]", None, 1, 0x04, "LV", 1),
    # -- exclusive, load-acquire/store-release
    ("ldxr x0, [x1]", None, 1, 0x0A, "LX", 8),
    ("ldxrb w0, [x1]", None, 1, 0x0A, "LX", 1),
    ("stxr w3, x0, [x1]", None, 1, 0x0B, "SX", 8),
    ("stxrh w3, w0, [sp]", None, 1, 0x0B, "SX", 2),
    ("ldaxr w0, [sp]", None, 1, 0x1A, "LXR", 4),
    ("stlxr w3, x0, [x1]", None, 1, 0x1B, "SXR", 8),
    ("ldxp x0, x1, [x2]", None, 1, 0x0A, "LX", 16),
    ("ldaxp x0, x1, [x2]", None, 1, 0x1A, "LXR", 16),
    ("stlxp w4, w0, w1, [x2]", None, 1, 0x1B, "SXR", 8),
    ("ldar w0, [x1]", None, 1, 0x12, "LR", 4),
    ("stlr x0, [sp]", None, 1, 0x13, "SR", 8),
    ("stlrb w0, [x1]", None, 1, 0x13, "SR", 1),
    ("ldlar x0, [x1]", 0xC8DF7C20, 1, 0x12, "LR", 8),          # FEAT_LOR
    ("stllrh w0, [x1]", 0x489F7C20, 1, 0x13, "SR", 2),
    ("ldapr x0, [x1]", 0xF8BFC020, 1, 0x12, "LR", 8),          # FEAT_LRCPC
    ("ldaprb w0, [sp]", 0x38BFC3E0, 1, 0x12, "LR", 1),
    ("ldapur x0, [x1, #-3]", 0xD95FD020, 1, 0x12, "LR", 8),    # FEAT_LRCPC2
    ("stlur w0, [x1, #5]", 0x99005020, 1, 0x13, "SR", 4),
    ("ldapursw x0, [x1, #255]", 0x998FF020, 1, 0x12, "LR", 4),
    ("ldapursb w0, [x1, #-256]", 0x19D00020, 1, 0x12, "LR", 1),
    ("stlurh w0, [sp]", 0x590003E0, 1, 0x13, "SR", 2),
    # -- atomics (FEAT_LSE): all are stores; those returning a value are loads too (§3.2.2)
    ("ldadd x0, x1, [x2]", 0xF8200041, 1, 0x06, "LSA", 8),
    ("ldaddal w0, w1, [sp]", 0xB8E003E1, 1, 0x16, "LSAR", 4),
    ("stadd x0, [x2]", 0xF820005F, 1, 0x07, "SA", 8),
    ("staddl w0, [x2]", 0xB860005F, 1, 0x17, "SAR", 4),
    # A=1 with Rt=XZR: the pseudocode drops the acquire, nothing is returned -> store only
    ("ldadda x0, xzr, [x1]", 0xF8A0003F, 1, 0x07, "SA", 8),
    ("ldclrab w3, w4, [x5]", 0x38A310A4, 1, 0x16, "LSAR", 1),
    ("ldeorh w0, w1, [x2]", 0x78202041, 1, 0x06, "LSA", 2),
    ("ldsetl x0, x1, [x2]", 0xF8603041, 1, 0x16, "LSAR", 8),
    ("ldsmax x0, x1, [x2]", 0xF8204041, 1, 0x06, "LSA", 8),
    ("ldsminal w0, w1, [x2]", 0xB8E05041, 1, 0x16, "LSAR", 4),
    ("ldumaxb w0, w1, [x2]", 0x38206041, 1, 0x06, "LSA", 1),
    ("lduminah w0, w1, [x2]", 0x78A07041, 1, 0x16, "LSAR", 2),
    ("stsmaxl x3, [sp]", 0xF86343FF, 1, 0x17, "SAR", 8),
    ("swp x0, x1, [x2]", 0xF8208041, 1, 0x06, "LSA", 8),
    ("swpal w0, w1, [x2]", 0xB8E08041, 1, 0x16, "LSAR", 4),
    ("swpb w0, w1, [x2]", 0x38208041, 1, 0x06, "LSA", 1),
    ("cas x0, x1, [x2]", 0xC8A07C41, 1, 0x06, "LSA", 8),
    ("casal w0, w1, [x2]", 0x88E0FC41, 1, 0x16, "LSAR", 4),
    ("casab w0, w1, [x2]", 0x08E07C41, 1, 0x16, "LSAR", 1),
    ("caslh w0, w1, [sp]", 0x48A0FFE1, 1, 0x16, "LSAR", 2),
    ("casp x0, x1, x2, x3, [x4]", 0x48207C82, 1, 0x06, "LSA", 16),
    ("caspal w0, w1, w2, w3, [x4]", 0x0860FC82, 1, 0x16, "LSAR", 8),
    # -- prefetch and cache maintenance: "other" (§2.3.4)
    ("prfm pldl1keep, [x0, #8]", None, 0, 0x00, "", 0),
    ("prfm pldl1keep, #0x40", None, 0, 0x00, "", 0),
    ("prfum pldl2strm, [x0, #-1]", None, 0, 0x00, "", 0),
    ("prfm pstl1keep, [x0, x1]", None, 0, 0x00, "", 0),
    ("dc zva, x0", None, 0, 0x00, "", 0),
    ("dc civac, x1", None, 0, 0x00, "", 0),
    # -- branches (§2.3.1)
    ("b #0x100", None, 2, 0x00, "B", 0),
    ("bl #-0x100", None, 2, 0x00, "B", 0),
    ("b.ne #-8", None, 2, 0x01, "BC", 0),
    ("b.al #8", None, 2, 0x01, "BC", 0),
    ("cbz w3, #12", None, 2, 0x01, "BC", 0),
    ("cbnz x3, #-12", None, 2, 0x01, "BC", 0),
    ("tbnz x5, #40, #0x40", None, 2, 0x01, "BC", 0),
    ("tbz w5, #3, #-4", None, 2, 0x01, "BC", 0),
    ("br x3", None, 2, 0x02, "BI", 0),
    ("blr x30", None, 2, 0x02, "BI", 0),
    ("ret", None, 2, 0x02, "BI", 0),
    ("ret x5", None, 2, 0x02, "BI", 0),
    ("eret", None, 2, 0x02, "BIE", 0),
    ("retaa", 0xD65F0BFF, 2, 0x02, "BI", 0),                    # FEAT_PAuth
    ("retab", 0xD65F0FFF, 2, 0x02, "BI", 0),
    ("braaz x3", 0xD61F087F, 2, 0x02, "BI", 0),
    ("blrabz x4", 0xD63F0C9F, 2, 0x02, "BI", 0),
    ("braa x1, x2", 0xD71F0822, 2, 0x02, "BI", 0),
    ("blraa x5, sp", 0xD73F08BF, 2, 0x02, "BI", 0),
    ("eretaa", 0xD69F0BFF, 2, 0x02, "BIE", 0),
    # -- other: conditional (§2.3.3) and unconditional
    ("csel x0, x1, x2, eq", None, 0, 0x01, "C", 0),
    ("csinc w0, w1, w2, lt", None, 0, 0x01, "C", 0),
    ("csinv x0, x1, x2, hi", None, 0, 0x01, "C", 0),
    ("csneg w0, w1, w2, vs", None, 0, 0x01, "C", 0),
    ("cset w0, eq", None, 0, 0x01, "C", 0),
    ("csetm x0, hs", None, 0, 0x01, "C", 0),
    ("cinc x0, x1, ne", None, 0, 0x01, "C", 0),
    ("cinv w0, w1, le", None, 0, 0x01, "C", 0),
    ("cneg x0, x1, mi", None, 0, 0x01, "C", 0),
    ("ccmp x0, #5, #4, hi", None, 0, 0x01, "C", 0),
    ("ccmp w0, w1, #15, al", None, 0, 0x01, "C", 0),
    ("ccmn w0, w1, #0, eq", None, 0, 0x01, "C", 0),
    ("ccmn x3, #31, #2, gt", None, 0, 0x01, "C", 0),
    ("fcsel d0, d1, d2, lt", None, 0, 0x01, "C", 0),
    ("fcsel s3, s4, s5, ge", None, 0, 0x01, "C", 0),
    ("fccmp d0, d1, #0, eq", None, 0, 0x01, "C", 0),
    ("fccmpe s0, s1, #0, ge", None, 0, 0x01, "C", 0),
    ("add x0, x1, x2", None, 0, 0x00, "", 0),
    ("adds x0, x1, #1", None, 0, 0x00, "", 0),
    ("adc x0, x1, x2", None, 0, 0x00, "", 0),
    ("movz x0, #1", None, 0, 0x00, "", 0),
    ("adr x0, #0x40", None, 0, 0x00, "", 0),
    ("fadd d0, d1, d2", None, 0, 0x00, "", 0),
    ("fcmp d0, d1", None, 0, 0x00, "", 0),
    ("add v0.4s, v1.4s, v2.4s", None, 0, 0x00, "", 0),
    ("svc #0x10", None, 0, 0x00, "", 0),
    ("hvc #2", None, 0, 0x00, "", 0),
    ("smc #1", None, 0, 0x00, "", 0),
    ("brk #1", None, 0, 0x00, "", 0),
    ("hlt #0xf000", None, 0, 0x00, "", 0),
    ("mrs x0, s3_0_c9_c9_0", None, 0, 0x00, "", 0),
    ("msr s3_0_c9_c9_0, x5", None, 0, 0x00, "", 0),
    ("msr daifset, #2", None, 0, 0x00, "", 0),
    ("hint #17", None, 0, 0x00, "", 0),
    ("psb csync", 0xD503223F, 0, 0x00, "", 0),                  # FEAT_SPE
    ("esb", 0xD503221F, 0, 0x00, "", 0),
    ("csdb", 0xD503229F, 0, 0x00, "", 0),
    ("bti c", 0xD503245F, 0, 0x00, "", 0),
    ("wfi", None, 0, 0x00, "", 0),
    ("wfe", None, 0, 0x00, "", 0),
    ("nop", None, 0, 0x00, "", 0),
    ("isb", None, 0, 0x00, "", 0),
    ("dsb sy", None, 0, 0x00, "", 0),
    ("dmb ish", None, 0, 0x00, "", 0),
    ("clrex", None, 0, 0x00, "", 0),
]

# capstone spells a few of the table's texts differently
CS_ALIASES = {"ldadda x0, xzr, [x1]": {"ldadda"}, "movz x0, #1": {"mov"}, "hint #17": {"psb", "hint"},
              "b.al #8": {"b.al", "b"}}


def table_word(text: str, word: int | None) -> int:
    return ks_word(text) if word is None else word


TABLE_WORDS = [(row[0], table_word(row[0], row[1])) + tuple(row[2:]) for row in TABLE]


@pytest.mark.parametrize("text,word,op_class,subclass,flags,size", TABLE_WORDS,
                         ids=[r[0] for r in TABLE])
def test_classification_table(text, word, op_class, subclass, flags, size):
    info = decode(word)
    got = (info.op_class, info.op_subclass, info.access_size)
    assert got == (op_class, subclass, size), f"{text}: {info}"
    actual = {
        "L": info.is_load, "S": info.is_store, "A": info.is_atomic, "X": info.is_exclusive,
        "R": info.is_acqrel, "V": info.is_simd_fp, "B": info.is_branch,
        "I": info.is_indirect, "C": info.is_conditional, "E": info.is_eret,
    }
    assert {k for k, v in actual.items() if v} == set(flags), f"{text}: {info}"
    # the Operation Type payload must agree with the individual flags (§5.3.8)
    if op_class == 1:
        assert subclass & 1 == (0 if info.is_load else 1)
    # capstone independently confirms we assembled / hard-coded the intended instruction
    mnemonic = text.split()[0]
    assert cs_mnemonic(word) in CS_ALIASES.get(text, {mnemonic}), (text, hex(word))


@pytest.mark.skipif(not (GNU_AS and GNU_OBJCOPY), reason="aarch64-linux-gnu-as not installed")
def test_hardcoded_words_match_gnu_as():
    rows = [(text, word) for text, word, *_ in TABLE if word is not None]
    with tempfile.TemporaryDirectory() as tmp:
        src, obj, binf = Path(tmp, "t.s"), Path(tmp, "t.o"), Path(tmp, "t.bin")
        src.write_text("".join(text + "\n" for text, _ in rows))
        subprocess.run([GNU_AS, "-march=armv8.4-a+profile+pauth", "-o", str(obj), str(src)],
                       check=True)
        subprocess.run([GNU_OBJCOPY, "-O", "binary", "-j", ".text", str(obj), str(binf)],
                       check=True)
        data = binf.read_bytes()
    words = struct.unpack("<%dI" % (len(data) // 4), data)
    assert [hex(w) for w in words] == [hex(w) for _, w in rows]


def test_mnemonic_classes():
    assert decode(ks_word("ldr x0, [x1]")).mnemonic_class == "ldr"
    assert decode(ks_word("stp x0, x1, [sp, #-16]!")).mnemonic_class == "stp"
    assert decode(ks_word("b.eq #8")).mnemonic_class == "b.cond"
    assert decode(ks_word("csel x0, x1, x2, eq")).mnemonic_class == "csel"
    assert decode(ks_word("svc #0")).mnemonic_class == "svc"
    assert decode(ks_word("ret")).mnemonic_class == "ret"
    assert decode(0xD65F0BFF).mnemonic_class == "retaa"
    assert decode(ks_word("eret")).mnemonic_class == "eret"
    assert decode(0xF820005F).mnemonic_class == "stadd"
    # the machine's return-stack heuristics rely on only returns starting with "ret"
    others = {decode(table_word(t, w)).mnemonic_class for t, w, *_ in TABLE
              if not t.startswith("ret")}
    assert not any(m.startswith("ret") for m in others)


def test_exception_generating():
    for text, exc, imm in [("svc #0x10", "svc", 0x10), ("hvc #2", "hvc", 2),
                           ("smc #0xffff", "smc", 0xFFFF), ("brk #0x3e8", "brk", 0x3E8),
                           ("hlt #0xf000", "hlt", 0xF000)]:
        info = decode(ks_word(text))
        assert (info.exception, info.imm16, info.op_class, info.is_branch) == (exc, imm, 0, False)
    for text in ("nop", "eret", "ldr x0, [x1]", "msr daifset, #2"):
        assert decode(ks_word(text)).exception is None
    assert decode(0xD4A00001).exception is None          # DCPS1: UNDEFINED outside Debug


def test_system_instructions():
    info = decode(ks_word("mrs x7, s3_0_c9_c9_7"))        # PMSIDR_EL1
    assert (info.sysreg, info.rt, info.is_read, info.mnemonic_class) == (
        (3, 0, 9, 9, 7), 7, True, "mrs")
    info = decode(ks_word("msr s3_4_c9_c9_0, x30"))       # PMSCR_EL2
    assert (info.sysreg, info.rt, info.is_read) == ((3, 4, 9, 9, 0), 30, False)
    info = decode(ks_word("mrs x0, nzcv"))
    assert (info.sysreg, info.rt, info.is_read) == ((3, 3, 4, 2, 0), 0, True)
    info = decode(ks_word("msr tpidr_el0, xzr"))
    assert (info.sysreg, info.rt) == ((3, 3, 13, 0, 2), 31)
    # MSR (immediate): DAIFSet op1=3 op2=6, DAIFClr op1=3 op2=7; the imm4 is CRm
    info = decode(ks_word("msr daifset, #2"))
    assert (info.sysreg, info.pstate, info.mnemonic_class) == (None, (3, 6, 2), "msr_imm")
    assert decode(ks_word("msr daifclr, #0xf")).pstate == (3, 7, 15)
    assert decode(ks_word("msr spsel, #1")).pstate == (0, 5, 1)
    # SYS/SYSL are not MRS/MSR: sysreg stays None (the machine emulates sysreg != None)
    info = decode(ks_word("dc zva, x3"))
    assert (info.sysreg, info.sys_op, info.rt, info.mnemonic_class) == (
        None, (3, 7, 4, 1), 3, "sys")
    assert decode(ks_word("sysl x2, #0, c1, c2, #3")).sys_op == (0, 1, 2, 3)
    assert decode(ks_word("sysl x2, #0, c1, c2, #3")).is_read
    for text, num, name in [("nop", 0, "nop"), ("yield", 1, "yield"), ("wfe", 2, "wfe"),
                            ("wfi", 3, "wfi"), ("sev", 4, "sev"), ("sevl", 5, "sevl"),
                            ("hint #17", 17, "psb"), ("hint #0x7f", 127, "hint")]:
        info = decode(ks_word(text))
        assert (info.hint, info.mnemonic_class, info.sysreg) == (num, name, None), text
    assert decode(0xD503223F).hint == 17                   # PSB CSYNC
    for text, name in [("isb", "isb"), ("dsb sy", "dsb"), ("dsb ish", "dsb"),
                       ("dmb ishld", "dmb"), ("clrex", "clrex")]:
        info = decode(ks_word(text))
        assert (info.mnemonic_class, info.hint, info.sysreg) == (name, None, None), text
    assert decode(ks_word("eret")).is_eret
    assert decode(ks_word("eret")).branch(0x1000, {}) == (True, None)
    assert decode(ks_word("add x0, x1, x2")).branch(0x1000, {}) == (False, None)
    assert decode(ks_word("add x0, x1, x2")).condition_passed({}) is None
    assert decode(ks_word("b #8")).condition_passed({}) is None
    assert decode(ks_word("prfm pldl1keep, [x0]")).data_address(0, {}) is None


def test_unallocated_and_unknown_are_other():
    for word in (0x00000000,            # UDF #0
                 0xF8600800,            # LDR (register) with option 000 (UXTB): unallocated
                 0x38202800,            # STRB (register) with option 001: unallocated
                 0x7DC00000,            # LDR Q (unsigned offset) with size 01: unallocated
                 0x48217C82,            # CASP with odd Rs: UNDEFINED
                 0xD9200400):           # STG post-index (FEAT_MTE): not modelled
        info = decode(word)
        assert info.op_class == 0 and not info.is_load and not info.is_store, hex(word)
        assert info.data_address(0, {}) is None


def test_decode_is_cached():
    assert decode(0xF9400020) is decode(0xF9400020)


def test_reads_use_unicorn_ids():
    info = decode(ks_word("ldr x0, [sp, x29, lsl #3]"))
    assert info.reads == (A.UC_ARM64_REG_SP, A.UC_ARM64_REG_X29)
    assert decode(ks_word("ldr x0, [x30, xzr]")).reads == (A.UC_ARM64_REG_X30,)
    assert decode(ks_word("b.eq #8")).reads == (A.UC_ARM64_REG_NZCV,)
    assert decode(ks_word("cbz xzr, #8")).reads == ()
    assert decode(ks_word("ret")).reads == (A.UC_ARM64_REG_X30,)
    assert decode(ks_word("ldr x0, #8")).reads == ()
    assert decode(ks_word("b #8")).reads == ()


def test_condition_holds_table():
    # ConditionHolds() pseudocode, spelled out per condition (N=8, Z=4, C=2, V=1)
    ref = {
        0: lambda n, z, c, v: z, 1: lambda n, z, c, v: not z,
        2: lambda n, z, c, v: c, 3: lambda n, z, c, v: not c,
        4: lambda n, z, c, v: n, 5: lambda n, z, c, v: not n,
        6: lambda n, z, c, v: v, 7: lambda n, z, c, v: not v,
        8: lambda n, z, c, v: c and not z, 9: lambda n, z, c, v: not (c and not z),
        10: lambda n, z, c, v: n == v, 11: lambda n, z, c, v: n != v,
        12: lambda n, z, c, v: not z and n == v, 13: lambda n, z, c, v: not (not z and n == v),
        14: lambda n, z, c, v: True, 15: lambda n, z, c, v: True,
    }
    for cond in range(16):
        for flags in range(16):
            n, z, c, v = (bool(flags >> i & 1) for i in (3, 2, 1, 0))
            assert condition_holds(cond, flags << 28) == bool(ref[cond](n, z, c, v))
    # bits other than 31:28 are ignored
    assert condition_holds(0, 0x0FFF_FFFF) is False


# ------------------------------------------------------------------ Unicorn harness -------
RAM_SIZE = 16 << 20
CODE_LO, CODE_HI = 0x100000, 0x400000       # literal loads reach +-1 MiB from here
DATA_LO, DATA_HI = 0x600000, 0xA00000


class Machine:
    """One Unicorn instance (cpu model "max": LSE, RCpc, PAuth) with memory hooks."""

    def __init__(self):
        uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
        uc.ctl_set_cpu_model(A.UC_CPU_ARM64_MAX)
        uc.mem_map(0, RAM_SIZE)
        uc.reg_write(A.UC_ARM64_REG_CPACR_EL1, 3 << 20)
        self.uc = uc
        self.accesses: list[tuple[int, int, int]] = []
        self.intr: list[int] = []
        self.next_pc = CODE_LO
        self.error: UcError | None = None
        uc.hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE, self._on_mem)
        uc.hook_add(UC_HOOK_INTR, self._on_intr)

    def _on_mem(self, uc, access, address, size, value, data):
        self.accesses.append((access, address, size))

    def _on_intr(self, uc, intno, data):
        self.intr.append(intno)
        uc.emu_stop()

    def alloc(self, nwords: int) -> int:
        """A code address for the next run (each run gets a different PC)."""
        if self.next_pc + 4 * nwords >= CODE_HI:
            self.next_pc = CODE_LO
        pc = self.next_pc
        self.next_pc += 4 * nwords
        return pc

    def step(self, pc: int, word: int):
        """Executes the single instruction ``word`` at ``pc``; returns (accesses, pc after,
        interrupt numbers)."""
        uc = self.uc
        uc.mem_write(pc, struct.pack("<I", word))
        # Unicorn quirk: mem_write does not invalidate a translation of this address made
        # earlier (e.g. when a previous branch targeted it), so drop it explicitly.
        uc.ctl_remove_cache(pc, pc + 4)
        self.accesses = []
        self.intr = []
        self.error = None
        try:
            uc.emu_start(pc, pc + 4, count=1)
        except UcError as exc:
            self.error = exc    # e.g. a branch to unmapped memory: the PC is the target
        return self.accesses, uc.reg_read(A.UC_ARM64_REG_PC), self.intr

    def set_regs(self, values: dict[int, int]):
        for rid, val in values.items():
            self.uc.reg_write(rid, val)

    def snapshot(self, ids) -> dict[int, int]:
        return {rid: self.uc.reg_read(rid) for rid in ids}


@pytest.fixture(scope="module")
def machine():
    return Machine()


def random_pointer(rng: random.Random, align: int) -> int:
    return (rng.randrange(DATA_LO, DATA_HI) // align) * align


def is_register_offset(word: int) -> bool:
    return word & 0x3B200C00 == 0x38200800


def index_value(rng: random.Random, option: int) -> int:
    """A small index for register-offset forms, with garbage where the extend ignores it."""
    if option == 0b010:                                   # UXTW: high half ignored
        return rng.getrandbits(32) << 32 | rng.randrange(0, 0x1000)
    if option == 0b110:                                   # SXTW
        return rng.getrandbits(32) << 32 | (rng.randrange(-0x1000, 0x1000) & 0xFFFFFFFF)
    return rng.randrange(-0x1000, 0x1000) & M64          # LSL/UXTX/SXTX


def exclusive_prelude(word: int) -> int | None:
    """For a store-exclusive, the matching load-exclusive (same size, same base) that arms the
    monitor: without it the store writes nothing."""
    if word & 0x3FC00000 != 0x08000000:                   # o2=0, L=0 (o1 any)
        return None
    if word & (1 << 21) and not word & (1 << 31):         # CASP
        return None
    pre = (word & 0xFFA003E0) | (1 << 22) | (31 << 16) | 16   # L=1, Rs=31, o0=0, Rt=x16
    return pre | ((17 if word & (1 << 21) else 31) << 10)    # Rt2 = x17 for pairs


def run_load_store(m: Machine, rng: random.Random, word: int, align: int):
    """Runs ``word`` with random pointers in every register; returns (info, regs, accesses)."""
    info = decode(word)
    values = {rid: random_pointer(rng, align) for rid in X_REGS}
    values[A.UC_ARM64_REG_SP] = random_pointer(rng, 16 if align < 16 else align)
    if is_register_offset(word) and (word >> 16) & 31 != 31:
        values[X_REGS[(word >> 16) & 31]] = index_value(rng, (word >> 13) & 7)
    for q in range(32):
        m.uc.reg_write(A.UC_ARM64_REG_Q0 + q, rng.getrandbits(128))
    m.set_regs(values)
    prelude = exclusive_prelude(word)
    pc = m.alloc(2)
    if prelude is not None:
        m.step(pc, prelude)
        pc += 4
    regs = m.snapshot(info.reads)
    accesses, _, intr = m.step(pc, word)
    assert m.error is None, f"{word:#010x}: {m.error}"
    return info, pc, regs, accesses, intr


def check_access(info, pc, regs, accesses, intr, what):
    assert not intr, f"{what}: exception {intr} in Unicorn"
    assert accesses, f"{what}: no memory access observed"
    low = min(a for _, a, _ in accesses)
    high = max(a + s for _, a, s in accesses)
    assert info.data_address(pc, regs) == low, f"{what}: {info}"
    assert high - low == info.access_size, f"{what}: span {high - low}, {info}"
    kinds = {k for k, _, _ in accesses}
    if info.is_load and not info.is_store:
        assert kinds == {UC_MEM_READ}, what
    if info.is_store:
        assert UC_MEM_WRITE in kinds, what

ALIGNED = {"A", "X"}      # atomics and exclusives fault on unaligned addresses in Unicorn


def test_table_loads_stores_execute(machine):
    """Every load/store of the table, executed 8 times with random register values."""
    rng = make_rng(1)
    for text, word, op_class, _sub, flags, _size in TABLE_WORDS:
        if op_class != 1:
            continue
        align = 64 if set(flags) & ALIGNED or text.startswith(("ldar", "stlr", "ldlar",
                                                                 "stllr")) else 1
        for _ in range(8):
            check_access(*run_load_store(machine, rng, word, align), what=text)


# Random encodings per load/store encoding group (Arm ARM C4.1.4 "Loads and Stores"):
# (name, fixed value, mask of fixed bits, alignment of the pointers, expected mnemonics)
LDST_GROUPS = [
    ("unsigned offset", 0x39000000, 0x3B000000, 1, {"ldr", "str", "ldrsw", "ldrb", "strh"}),
    ("unscaled/pre/post/unpriv", 0x38000000, 0x3B200000, 1,
     {"ldur", "stur", "ldr", "str", "ldtr", "sttr", "ldursw", "ldtrsb"}),
    ("register offset", 0x38200800, 0x3B200C00, 1, {"ldr", "str", "ldrsh"}),
    ("pair", 0x28000000, 0x3A000000, 1, {"ldp", "stp", "ldnp", "stnp", "ldpsw"}),
    ("literal", 0x18000000, 0x3B000000, 1, {"ldr", "ldrsw"}),
    ("simd multiple", 0x0C000000, 0xBFBF0000, 1, {"ld1", "st1", "ld2", "st3", "ld4"}),
    ("simd multiple post", 0x0C800000, 0xBFA00000, 1, {"ld1", "st1", "ld2", "st4"}),
    ("simd single", 0x0D000000, 0xBF9F0000, 1, {"ld1", "st2", "ld3", "ld4r", "ld1r"}),
    ("simd single post", 0x0D800000, 0xBF800000, 1, {"ld1", "st1", "ld2r", "st4"}),
    ("exclusive/ordered/cas", 0x08000000, 0x3F000000, 64,
     {"ldxr", "stxr", "ldaxp", "stlxp", "ldar", "stlr", "ldlar", "stllr", "cas", "casp"}),
    ("ldapur/stlur", 0x19000000, 0x3F200C00, 1, {"ldapur", "stlur", "ldapursw"}),
    ("atomics", 0x38200000, 0x3F200C00, 64, {"ldadd", "stadd", "swp", "ldapr", "ldumin"}),
    ("ldraa/ldrab", 0xF8200400, 0xFF200400, 1, {"ldraa", "ldrab"}),
]


def _writeback(word: int) -> bool:
    if word & 0x3A000000 == 0x28000000:                  # pairs: post (01) and pre (11)
        return (word >> 23) & 1 == 1
    if word & 0x3B200000 == 0x38000000:                  # single: post (01), pre (11)
        return (word >> 10) & 1 == 1
    if word & 0xFF200400 == 0xF8200400:                  # LDRAA/LDRAB with W
        return (word >> 11) & 1 == 1
    return False


def normalize(rng: random.Random, name: str, word: int) -> int | None:
    """Turns a random word of a group into a well-defined instruction (None: draw again):
    sets should-be-one fields, avoids CONSTRAINED UNPREDICTABLE register overlaps, and
    biases the draw towards rare forms (ST<op> aliases, LDAPR)."""
    rt, rn, rt2 = word & 31, (word >> 5) & 31, (word >> 10) & 31
    if name == "exclusive/ordered/cas":
        o2, o1 = (word >> 23) & 1, (word >> 21) & 1
        if not (o1 and not o2 and word >> 31):          # not LDXP/STXP: Rt2 is SBO
            word |= 31 << 10
        if (o2 and not o1) or (not o1 and word >> 22 & 1):  # LDAR/STLR.., LDXR: Rs is SBO
            word |= 31 << 16
    if name == "atomics":
        r = rng.random()
        if r < 0.25:
            word |= 31                                     # ST<op> alias / no result
        elif r < 0.4:
            word = (word & ~0x00DF7000) | 0x00BFC000        # LDAPR: A=1 R=0 Rs=31 o3=1 opc=100
    rt = word & 31
    if _writeback(word) and rn != 31 and rn in (rt, rt2 if word & 0x38000000 == 0x28000000
                                                 else rt):
        return None
    if word & 0x3A400000 == 0x28400000 and rt == rt2:    # load pair into one register
        return None
    if name == "exclusive/ordered/cas" and word & 0x00A00000 == 0x00200000 and \
            word >> 31 and word >> 22 & 1 and rt == rt2:   # LDXP into one register
        return None
    return word


@pytest.mark.parametrize("name,value,mask,align,expected", LDST_GROUPS,
                         ids=[g[0] for g in LDST_GROUPS])
def test_random_load_store_encodings(machine, name, value, mask, align, expected):
    """Random encodings of one group: data_address() is the lowest address Unicorn accessed
    and access_size the span of the accesses (§2.3.2); capstone names the same instruction."""
    rng = make_rng(name)
    seen: set[str] = set()
    tested = 0
    tries = 0

    def missing():
        return {e for e in expected if not any(s.startswith(e) for s in seen)}

    while (tested < 150 or missing()) and tries < 20000:
        tries += 1
        word = normalize(rng, name, (rng.getrandbits(32) & ~mask) | value)
        if word is None:
            continue
        info = decode(word)
        if info.op_class != 1:
            if info.mnemonic_class not in ("prfm", "prfum"):
                # what we call unallocated, capstone must not decode either
                assert cs_mnemonic(word) is None, f"{word:#010x}: {info.mnemonic_class}"
            continue
        rn = (word >> 5) & 31
        rm = (word >> 16) & 31
        if is_register_offset(word) and rm == rn:
            continue                                  # the index would be a pointer
        if info.mnemonic_class.startswith(("ld64b", "st64b")):
            continue                                  # FEAT_LS64: not in Unicorn or capstone
        if info.is_exclusive and not info.is_load:
            rs = (word >> 16) & 31
            rt2 = (word >> 10) & 31
            if rs in (rn, word & 31, rt2, 16, 17) or rn in (16, 17):
                continue                              # CONSTRAINED UNPREDICTABLE / prelude
        if not (word & 0x3B200C00 == 0x38000800 and rn == word & 31):
            # (capstone 5 wrongly rejects LDTR/STTR with Rt == Rn, which has no writeback)
            assert cs_mnemonic(word) == info.mnemonic_class, f"{name}: {word:#010x} {info}"
        check_access(*run_load_store(machine, rng, word, align),
                     what=f"{name} {word:#010x} ({cs_mnemonic(word)})")
        seen.add(info.mnemonic_class)
        tested += 1
    assert tested >= 150, f"{name}: only {tested} valid encodings"
    assert not missing(), f"{name}: missing {missing()}; saw {sorted(seen)}"


def test_post_index_reports_base_before_update(machine):
    rng = make_rng(7)
    for text in ("ldr x0, [x1], #-256", "str q0, [sp], #255", "ldp x0, x1, [x2], #-512",
                 "ld1 {v0.16b, v1.16b, v2.16b, v3.16b}, [x3], #64",
                 "st1 {v0.b}[3], [x4], x5"):
        word = ks_word(text)
        info, pc, regs, accesses, intr = run_load_store(machine, rng, word, 1)
        base = regs[info.reads[0]]
        assert info.data_address(pc, regs) == base == min(a for _, a, _ in accesses), text


def test_literal_is_pc_relative():
    info = decode(ks_word("ldr x0, #-0x100000"))           # imm19 minimum
    assert info.data_address(0x200000, {}) == 0x100000
    info = decode(ks_word("ldr q0, #0xffffc"))             # imm19 maximum
    assert info.data_address(0x1000, {}) == 0x1000 + 0xFFFFC
    assert decode(ks_word("ldr w0, #0")).data_address(M64 - 3, {}) == M64 - 3


def test_register_offset_extends():
    x1, x2, sp = A.UC_ARM64_REG_X1, A.UC_ARM64_REG_X2, A.UC_ARM64_REG_SP
    regs = {x1: 0x1000, x2: 0xDEADBEEF_FFFFFFFE, sp: 0x8000}
    assert decode(ks_word("ldr x0, [x1, w2, sxtw #3]")).data_address(0, regs) == 0x1000 - 16
    assert decode(ks_word("ldr x0, [x1, w2, uxtw #3]")).data_address(0, regs) == \
        0x1000 + 0xFFFFFFFE * 8
    assert decode(ks_word("ldrb w0, [x1, x2]")).data_address(0, regs) == \
        (0x1000 + 0xDEADBEEF_FFFFFFFE) & M64
    assert decode(ks_word("ldr x0, [sp, x2, sxtx]")).data_address(0, regs) == \
        (0x8000 + 0xDEADBEEF_FFFFFFFE) & M64
    assert decode(ks_word("ldr q0, [x1, x2, lsl #4]")).data_address(0, regs) == \
        (0x1000 + (0xDEADBEEF_FFFFFFFE << 4)) & M64
    assert decode(ks_word("ldr x0, [x1, xzr, lsl #3]")).data_address(0, regs) == 0x1000
    # top-byte tags are part of the VA (§2.3.2)
    tagged = {x1: 0xAB00_0000_0000_1000, x2: 8}
    assert decode(ks_word("ldr x0, [x1, x2]")).data_address(0, tagged) == 0xAB00_0000_0000_1008


# ------------------------------------------------------------------ branches ---------------
def _random_branch_word(rng: random.Random, kind: str) -> int:
    if kind == "b/bl":
        return (rng.getrandbits(32) & ~0x7C000000) | 0x14000000
    if kind == "b.cond":
        return (rng.getrandbits(32) & ~0xFF000010) | 0x54000000
    if kind == "cbz/cbnz":
        return (rng.getrandbits(32) & ~0x7E000000) | 0x34000000
    if kind == "tbz/tbnz":
        return (rng.getrandbits(32) & ~0x7E000000) | 0x36000000
    rn = rng.randrange(32)
    if kind == "br/blr/ret":
        return rng.choice([0xD61F0000, 0xD63F0000, 0xD65F0000]) | rn << 5
    # FEAT_PAuth forms; with the keys disabled (reset) authentication is a no-op in QEMU
    return rng.choice([0xD65F0BFF, 0xD65F0FFF, 0xD61F081F | rn << 5, 0xD63F0C1F | rn << 5,
                       0xD71F0800 | rn << 5 | rng.randrange(32),
                       0xD73F0C00 | rn << 5 | rng.randrange(32)])


@pytest.mark.parametrize("kind", ["b/bl", "b.cond", "cbz/cbnz", "tbz/tbnz", "br/blr/ret",
                                  "pauth"])
def test_random_branches(machine, kind):
    """(taken, target) from branch() equals the PC after Unicorn executes one step (§2.3.1),
    and condition_passed() of conditional branches equals taken (§2.3.3)."""
    rng = make_rng(kind)
    outcomes = set()
    for i in range(200):
        word = _random_branch_word(rng, kind)
        info = decode(word)
        assert info.is_branch and info.op_class == 2, hex(word)
        values = {}
        for rid in X_REGS:
            r = rng.random()
            if r < 0.2:
                values[rid] = 0
            elif r < 0.4:
                values[rid] = rng.getrandbits(32) << 32          # W form sees zero
            elif r < 0.6:
                values[rid] = rng.getrandbits(32)
            else:
                values[rid] = rng.randrange(0, 1 << 48) & ~3
        values[A.UC_ARM64_REG_NZCV] = rng.randrange(16) << 28
        machine.set_regs(values)
        pc = machine.alloc(1)
        regs = machine.snapshot(info.reads)
        # (an UNDEF reported here comes from the zeros at a taken target: Unicorn's count=1
        # stop happens at the next instruction's start, after it was translated)
        _, pc_after, _ = machine.step(pc, word)
        taken, target = info.branch(pc, regs)
        assert target is not None
        assert pc_after == (target if taken else pc + 4), \
            f"{word:#010x} {cs_mnemonic(word)}: {taken}, {target:#x} vs pc {pc_after:#x}"
        if info.is_conditional:
            assert info.condition_passed(regs) == taken
            assert info.op_subclass == 0x01
        else:
            assert taken and info.condition_passed(regs) is None
        outcomes.add(taken)
    if kind in ("b.cond", "cbz/cbnz", "tbz/tbnz"):
        assert outcomes == {True, False}


def test_b_cond_all_conditions_and_flags(machine):
    """ConditionHolds() against Unicorn for every cond x NZCV (also confirms NZCV layout)."""
    for cond in range(16):
        word = 0x54000000 | (4 << 5) | cond                     # b.<cond> #16
        info = decode(word)
        for flags in range(16):
            machine.set_regs({A.UC_ARM64_REG_NZCV: flags << 28})
            pc = machine.alloc(1)
            _, pc_after, _ = machine.step(pc, word)
            assert pc_after in (pc + 4, pc + 16)
            assert info.condition_passed({A.UC_ARM64_REG_NZCV: flags << 28}) == \
                (pc_after == pc + 16), (cond, flags)


def test_unicorn_nzcv_layout(machine):
    """UC_ARM64_REG_NZCV reads N, Z, C, V in bits 31..28 (as MSR NZCV writes them)."""
    word = ks_word("msr nzcv, x0")
    for bit in (31, 30, 29, 28):
        machine.set_regs({A.UC_ARM64_REG_X0: 1 << bit})
        machine.step(machine.alloc(1), word)
        assert machine.uc.reg_read(A.UC_ARM64_REG_NZCV) == 1 << bit


# ------------------------------------------------------------------ conditional "other" ----
def _add_flags(x: int, y: int, carry: int, bits: int) -> int:
    """AddWithCarry() NZCV (<< 28)."""
    mask = (1 << bits) - 1
    usum = (x & mask) + (y & mask) + carry
    sx = x & mask
    sx -= (sx >> (bits - 1)) << bits
    sy = y & mask
    sy -= (sy >> (bits - 1)) << bits
    ssum = sx + sy + carry
    res = usum & mask
    n = res >> (bits - 1)
    z = int(res == 0)
    c = int(usum != res)
    sres = res - ((res >> (bits - 1)) << bits)
    v = int(sres != ssum)
    return (n << 3 | z << 2 | c << 1 | v) << 28


def _xval(values, r):
    return 0 if r == 31 else values[X_REGS[r]]


def test_random_conditional_selects(machine):
    """CSEL/CSINC/CSINV/CSNEG (and the CSET/CINC/... aliases they cover): the condition
    passed iff Unicorn selected Rn (§2.3.3)."""
    rng = make_rng(11)
    checked = {True: 0, False: 0}
    for _ in range(300):
        word = (rng.getrandbits(32) & ~0x3FE00800) | 0x1A800000
        info = decode(word)
        assert info.is_conditional and info.op_subclass == 1 and info.op_class == 0
        sf = word >> 31
        mask = M64 if sf else 0xFFFFFFFF
        rd, rn, rm = word & 31, (word >> 5) & 31, (word >> 16) & 31
        if rd == 31:
            continue
        values = {rid: rng.getrandbits(64) for rid in X_REGS}
        values[A.UC_ARM64_REG_NZCV] = rng.randrange(16) << 28
        n_val, m_val = _xval(values, rn) & mask, _xval(values, rm) & mask
        alt = [m_val, (m_val + 1) & mask, ~m_val & mask, -m_val & mask][
            (word >> 30 & 1) << 1 | (word >> 10 & 1)]
        if alt == n_val:
            continue
        machine.set_regs(values)
        regs = machine.snapshot(info.reads)
        machine.step(machine.alloc(1), word)
        result = machine.uc.reg_read(X_REGS[rd]) & mask
        assert result in (n_val, alt), hex(word)
        passed = info.condition_passed(regs)
        assert passed == (result == n_val), f"{word:#010x} {cs_mnemonic(word)}"
        checked[passed] += 1
    assert min(checked.values()) > 50


def test_random_conditional_compares(machine):
    """CCMP/CCMN (register and immediate): NZCV is the comparison's when the condition
    passed, the #nzcv immediate when it failed."""
    rng = make_rng(12)
    checked = {True: 0, False: 0}
    for _ in range(300):
        word = (rng.getrandbits(32) & ~0x3FE00410) | 0x3A400000
        info = decode(word)
        assert info.is_conditional and info.op_subclass == 1, hex(word)
        bits = 64 if word >> 31 else 32
        rn = (word >> 5) & 31
        values = {rid: rng.choice([rng.getrandbits(64), rng.randrange(32)]) for rid in X_REGS}
        values[A.UC_ARM64_REG_NZCV] = rng.randrange(16) << 28
        x = _xval(values, rn)
        y = (word >> 16) & 31 if word & 0x800 else _xval(values, (word >> 16) & 31)
        if word >> 30 & 1:                                    # CCMP: x - y
            cmp_flags = _add_flags(x, ~y, 1, bits)
        else:                                                 # CCMN: x + y
            cmp_flags = _add_flags(x, y, 0, bits)
        imm_flags = (word & 0xF) << 28
        if cmp_flags == imm_flags:
            continue
        machine.set_regs(values)
        regs = machine.snapshot(info.reads)
        machine.step(machine.alloc(1), word)
        out = machine.uc.reg_read(A.UC_ARM64_REG_NZCV)
        assert out in (cmp_flags, imm_flags), f"{word:#010x} {cs_mnemonic(word)}"
        passed = info.condition_passed(regs)
        assert passed == (out == cmp_flags), f"{word:#010x} {cs_mnemonic(word)}"
        checked[passed] += 1
    assert min(checked.values()) > 50


def test_random_fp_conditional(machine):
    """FCSEL selects Rn iff the condition passed; FCCMP/FCCMPE set the comparison's flags iff
    it passed (equal operands compare as 0b0110)."""
    rng = make_rng(13)
    checked = {True: 0, False: 0}
    for _ in range(300):
        ftype = rng.choice([0, 1, 3])                         # S, D, H
        cond = rng.randrange(16)
        rn, rm, rd = rng.randrange(32), rng.randrange(32), rng.randrange(32)
        sel = rng.random() < 0.5
        if sel:
            word = 0x1E200C00 | ftype << 22 | rm << 16 | cond << 12 | rn << 5 | rd
        else:
            word = (0x1E200400 | ftype << 22 | rm << 16 | cond << 12 | rn << 5
                    | rng.randrange(2) << 4 | rng.randrange(16))
        info = decode(word)
        assert info.is_conditional and info.op_subclass == 1 and info.op_class == 0, hex(word)
        assert info.mnemonic_class == ("fcsel" if sel else cs_mnemonic(word)), hex(word)
        nzcv = rng.randrange(16) << 28
        width = {0: 32, 1: 64, 3: 16}[ftype]
        one = {0: 0x3F800000, 1: 0x3FF0000000000000, 3: 0x3C00}[ftype]
        for q in range(32):
            # operands: equal (1.0) for the compares, distinct random bits for FCSEL
            machine.uc.reg_write(A.UC_ARM64_REG_Q0 + q, rng.getrandbits(width) if sel else one)
        machine.set_regs({A.UC_ARM64_REG_NZCV: nzcv})
        regs = machine.snapshot(info.reads)
        n_val = machine.uc.reg_read(A.UC_ARM64_REG_Q0 + rn) & ((1 << width) - 1)
        m_val = machine.uc.reg_read(A.UC_ARM64_REG_Q0 + rm) & ((1 << width) - 1)
        if sel and n_val == m_val:
            continue
        if not sel and (word & 0xF) == 0b0110:
            continue
        machine.step(machine.alloc(1), word)
        passed = info.condition_passed(regs)
        if sel:
            result = machine.uc.reg_read(A.UC_ARM64_REG_Q0 + rd) & ((1 << width) - 1)
            assert result in (n_val, m_val)
            assert passed == (result == n_val), hex(word)
        else:
            out = machine.uc.reg_read(A.UC_ARM64_REG_NZCV)
            assert passed == (out == 0b0110 << 28), hex(word)
        checked[passed] += 1
    assert min(checked.values()) > 50
