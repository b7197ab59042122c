"""PMSIDR_EL1.{EFT, CRR, FPF} (issue 15): the extended type filters of FEAT_SPE_EFT
(PMSFCR_EL1.{SIMD, FP} and the mask bits), the call/return field of FEAT_SPE_CRR and the
Advanced SIMD / floating-point flags of FEAT_SPE_FPF, in both run loops; the ID and RES0
matrix of the three features with the others."""

import itertools

import pytest
from asmrun import SPE_DRAIN_PMSIDR, mov64, run_asm, spe_prologue, xregs

from spe_emu.asm import assemble
from spe_emu.cpu.a64 import decode
from spe_emu.errors import ConfigError
from spe_emu.spe import packets as P
from spe_emu.spe.config import SpeConfig
from spe_emu.spe.packets import iter_records
from spe_emu.spe.registers import spe_registers

BUF = 0x4200_0000
MODES = ("fast", "reference")
# PMSIDR_EL1 bit positions (Arm ARM PMSIDR_EL1; Linux arch/arm64/tools/sysreg)
PMSIDR_BIT = {"PBT": 24, "CRR": 25, "EFT": 26, "FPF": 27}
# PMSFCR_EL1 bits with FEAT_SPE_EFT: SIMDm 52, FPm 51, STm 50, LDm 49, Bm 48, SIMD 20, FP 19
EFT_BITS = (0b11111 << 48) | (1 << 20) | (1 << 19)
BASE_FCR = (0b111 << 16) | 0b111

# A loop with a call, a return, a conditional branch, a scalar floating-point, an Advanced
# SIMD and an integer operation.
BODY = """
    movz x4, #700
loop:
    bl func
    fadd d0, d0, d1
    add v2.4s, v2.4s, v3.4s
    add x7, x7, #1
    subs x4, x4, #1
    b.ne loop
    b done
func:
    ret
done:
"""


def run(tmp_path, mode, spe, pmsfcr=0):
    m = run_asm(mov64("x0", pmsfcr) + "msr pmsfcr_el1, x0\n" + spe_prologue(0b11, BUF) + BODY + SPE_DRAIN_PMSIDR, tmp_path / mode, mode=mode,
                spe=spe)
    assert m.result.exit_status == 0, m.result.guest_errors
    recs = list(iter_records(bytes(m.uc.mem_read(BUF, xregs(m, 21)[0] - BUF))))
    assert recs
    return m, recs


def mnemonic(m, pc):
    return decode(int.from_bytes(m.uc.mem_read(pc, 4), "little")).mnemonic_class


FADD = int.from_bytes(assemble("fadd d0, d0, d1", 0), "little")
VADD = int.from_bytes(assemble("add v2.4s, v2.4s, v3.4s", 0), "little")


@pytest.mark.parametrize("mode", MODES)
def test_crr_call_return_field(tmp_path, mode):
    m, recs = run(tmp_path, mode, SpeConfig(crr=1))
    assert xregs(m, 22)[0] >> PMSIDR_BIT["CRR"] & 1
    seen = set()
    for r in recs:
        if r.op_class != P.OP_CLASS_BRANCH:
            continue
        name = mnemonic(m, r.pc)
        expect = {"bl": P.CR_CALL, "ret": P.CR_RETURN}.get(name, P.CR_OTHER)
        assert r.op_subclass >> 3 & 0b11 == expect, (hex(r.pc), name)
        assert P.branch_is_indirect(r.op_subclass) == (name == "ret")
        seen.add(expect)
    assert seen == {P.CR_CALL, P.CR_RETURN, P.CR_OTHER}
    m, recs = run(tmp_path / "off", mode, SpeConfig())
    assert all(r.op_subclass >> 3 & 0b11 == 0 for r in recs if r.op_class == 2)


@pytest.mark.parametrize("mode", MODES)
def test_fpf_simd_and_fp_flags(tmp_path, mode):
    m, recs = run(tmp_path, mode, SpeConfig(fpf=1))
    kinds = {}
    for r in recs:
        if r.op_class != P.OP_CLASS_OTHER:
            continue
        word = int.from_bytes(m.uc.mem_read(r.pc, 4), "little")
        ase, fp = bool(r.op_subclass & P.OTHER_ASE), bool(r.op_subclass & P.OTHER_FP)
        kinds[word] = (ase, fp)
    assert kinds[FADD] == (False, True) and kinds[VADD] == (True, False)
    assert all(k == (False, False) for w, k in kinds.items() if w not in (FADD, VADD))
    desc = P.describe(P.op_type_packet(P.OP_CLASS_OTHER, P.OTHER_FP | P.OTHER_ASE))
    assert desc == "OTHER ASE FP INSN-OTHER"


@pytest.mark.parametrize("mode", MODES)
def test_eft_type_filters(tmp_path, mode):
    spe = SpeConfig(eft=1)
    # FT with FP (OR filter): only the floating-point operation is recorded
    m, recs = run(tmp_path / "fp", mode, spe, (1 << 1) | (1 << 19))
    assert {int.from_bytes(m.uc.mem_read(r.pc, 4), "little") for r in recs} == {FADD}
    # FT with SIMD: only the Advanced SIMD one
    m, recs = run(tmp_path / "simd", mode, spe, (1 << 1) | (1 << 20))
    assert {int.from_bytes(m.uc.mem_read(r.pc, 4), "little") for r in recs} == {VADD}
    # Bm = 1 with B = 0 (AND filter): no branch is recorded, everything else is
    m, recs = run(tmp_path / "nob", mode, spe, (1 << 1) | (1 << 48))
    assert recs and all(r.op_class != P.OP_CLASS_BRANCH for r in recs)
    assert m.result.filtered_out > 0
    # B = 1 (OR) with FPm = 1, FP = 0 (AND): branches only, none floating-point anyway;
    # LD = 1 with LDm = 1 and B = 1: loads AND (branch) -> nothing (no load is a branch)
    m, recs = run(tmp_path / "b", mode, spe, (1 << 1) | (1 << 16) | (1 << 51))
    assert recs and all(r.op_class == P.OP_CLASS_BRANCH for r in recs)
    m = run_asm(mov64("x0", 0x3 << 16 | 2 | 0x2 << 48) + "msr pmsfcr_el1, x0\n" + spe_prologue(0b11, BUF) + BODY + SPE_DRAIN_PMSIDR, tmp_path / "none" / mode, mode=mode, spe=spe)
    assert xregs(m, 21)[0] == BUF and m.result.samples > 0
    # without FEAT_SPE_EFT the bits are RES0: writing them changes nothing
    m, recs = run(tmp_path / "res0", mode, SpeConfig(), (1 << 1) | (1 << 48) | (1 << 16))
    assert recs and all(r.op_class == P.OP_CLASS_BRANCH for r in recs)


def test_feature_matrix_eft_crr_fpf():
    """Every combination of EFT, CRR, FPF with PMSVer, FnE, LDS/FDS and CountSize: PMSIDR_EL1
    reads them at their bit positions; PMSFCR_EL1's writable bits are exactly the base
    fields, FnE's, FDS's and EFT's (the RES0 mask keyed by the features)."""
    ran = accepted = 0
    for eft, crr, fpf, pmsver, lds, fds, cs in itertools.product(
            (0, 1), (0, 1), (0, 1), (1, 3), (0, 1), (0, 1), (2, 3)):
        ran += 1
        fne = int(pmsver >= 3)
        kw = dict(eft=eft, crr=crr, fpf=fpf, pmsver=pmsver, fne=fne, lds=lds, fds=fds,
                  count_size_code=cs)
        try:
            t = spe_registers(SpeConfig(**kw))
        except ConfigError:
            assert fds and not lds
            continue
        accepted += 1
        pmsidr = t["PMSIDR_EL1"].reset
        for name, value in (("EFT", eft), ("CRR", crr), ("FPF", fpf), ("PBT", 0)):
            assert pmsidr >> PMSIDR_BIT[name] & 1 == value
        fcr = BASE_FCR | fne << 3 | fds << 4 | (EFT_BITS if eft else 0)
        assert t["PMSFCR_EL1"].write_mask == fcr, kw
        assert t["PMSFCR_EL1"].apply_write(0, (1 << 64) - 1) == fcr
    print(f"EFT/CRR/FPF matrix: {ran} combinations, {accepted} valid")
    assert ran == 2 ** 3 * 2 * 2 * 2 * 2 and accepted == ran * 3 // 4
