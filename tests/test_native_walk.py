"""The native INTR hook's check of aborts (exception.c ``spe_walk_fault``,
``spe_abort_stands``) against the Python rules it mirrors.

Unicorn's walker reads zeros where there is no memory and lets any output address through,
so a Translation fault it reports may really be an Address size fault or a synchronous
External abort on the walk (Arm ARM D8.3, ``AArch64.S1Walk()``); Python finds them with
:func:`spe_emu.arch.mmu.walk_fault`, and the native hook takes an abort itself only when its
own walk says the fault stands. Here both walk the same random translation tables -- table
descriptors into RAM, into no memory and beyond the output address size, blocks and pages
with any output address, junk -- in every regime, granule, TxSZ (clamped), TBI, EPD and
{I}PS, and must give the same answer for every VA.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from unicorn import UC_ARCH_ARM64, UC_MODE_ARM, UC_PROT_ALL, Uc
from unicorn import arm64_const as A

from spe_emu import native
from spe_emu.arch import mmu
from spe_emu.arch.context import HCR_EL2, SCR_EL3, SCTLR_ENC, TTBR0_ENC, TTBR1_EL1
from spe_emu.arch.faults import ExternalAbort
from spe_emu.cpu.exceptions import PSTATE, set_pstate, walk_tables
from spe_emu.cpu.fastuc import FastAccess

RAM, RAM_SIZE = 0x4000_0000, 0x10_0000     # the tables: 1 MiB, 16 tables of 64 KiB
HOLE = 0x5000_0000                         # no memory
TTBR1_EL2 = (3, 4, 2, 0, 1)
# (regime EL, VA range upper, HCR_EL2.E2H): every range of mmu.VaRange
RANGES = ((1, False, 0), (1, True, 0), (2, False, 0), (2, False, 1), (2, True, 1),
          (3, False, 0))


def table_address(rng: random.Random) -> int:
    """Where a TTBR or a table descriptor points: a 64 KiB-aligned table in RAM (any
    granule's alignment), no memory, an address beyond any output address size, or junk."""
    kind = rng.randrange(6)
    if kind < 3:
        return RAM + (rng.randrange(RAM_SIZE >> 16) << 16)
    if kind == 3:
        return HOLE + (rng.randrange(16) << 16)
    if kind == 4:
        return RAM | 1 << rng.randrange(32, 48)
    return rng.getrandbits(48)


def descriptor(rng: random.Random) -> int:
    kind = rng.randrange(8)
    if kind == 0:
        return 0
    if kind == 1:
        return rng.getrandbits(64) & ~1                      # invalid, other bits set
    if kind < 5:
        return table_address(rng) & ~0b11 | 0b11             # a table (a page at level 3)
    if kind < 7:
        return table_address(rng) & ~0b11 | 0b01             # a block (or invalid)
    return rng.getrandbits(64)


class Rig:
    def __init__(self, seed: int) -> None:
        self.uc = Uc(UC_ARCH_ARM64, UC_MODE_ARM)
        self.uc.ctl_set_cpu_model(A.UC_CPU_ARM64_MAX)
        self.uc.mem_map(RAM, RAM_SIZE, UC_PROT_ALL)
        rng = random.Random(seed)
        self.uc.mem_write(RAM, b"".join(descriptor(rng).to_bytes(8, "little")
                                        for _ in range(RAM_SIZE // 8)))
        self.mem = FastAccess(self.uc)

    def configure(self, rng: random.Random, el: int, upper: bool, e2h: int,
                  stage2: bool = False) -> None:
        mem = self.mem
        mem.set_cpr(SCR_EL3.encoding.tuple, SCR_EL3.make(RW=1, NS=1))
        mem.set_cpr(HCR_EL2.encoding.tuple, HCR_EL2.make(RW=1, E2H=e2h, VM=int(stage2)))
        set_pstate(mem, PSTATE.make(EL=el, SP=1, D=1, A=1, I=1, F=1))
        fields = dict(T0SZ=rng.randrange(64), TG0=rng.randrange(4), PS=rng.randrange(8))
        if el == 1 or e2h:
            tcr = mmu.TCR_EL1.make(T0SZ=fields["T0SZ"], T1SZ=rng.randrange(64),
                                   TG0=fields["TG0"], TG1=rng.randrange(4),
                                   IPS=fields["PS"], TBI0=rng.randrange(2),
                                   TBI1=rng.randrange(2), EPD0=rng.randrange(8) == 0,
                                   EPD1=rng.randrange(8) == 0)
        else:
            tcr = mmu.TCR_EL23.make(TBI=rng.randrange(2), **fields)
        mem.set_cpr(mmu.TCR_ENC[el], tcr)
        ttbrs = ((TTBR0_ENC[1], TTBR1_EL1) if el == 1
                 else (TTBR0_ENC[2], TTBR1_EL2) if el == 2 else (TTBR0_ENC[3],))
        for enc in ttbrs:
            mem.set_cpr(enc, rng.getrandbits(16) << 48 | table_address(rng))
        sctlr = mem.cpr(SCTLR_ENC[el])
        mem.set_cpr(SCTLR_ENC[el], sctlr & ~1 | (rng.randrange(10) != 0))

    def python(self, va: int, regime: int) -> int | None:
        def checked_read(pa: int) -> int:
            try:
                return int.from_bytes(self.mem.read(pa, 8), "little")
            except Exception:
                raise ExternalAbort(pa) from None
        return mmu.walk_fault(self.mem, va, regime, checked_read)

    def native(self, va: int, regime: int) -> int | None:
        found = native.walk_fault(walk_tables(False), self.uc._uch, va, regime)
        assert found != native.WALK_PYTHON
        return None if found == native.WALK_AGREES else found


def random_va(rng: random.Random, upper: bool) -> int:
    va = rng.getrandbits(48)
    if rng.randrange(8) == 0:
        return rng.getrandbits(64)
    tag = rng.getrandbits(8) << 56 if rng.randrange(4) == 0 else 0
    return tag | (0x00FF_0000_0000_0000 | va if upper else va)


@pytest.mark.parametrize("seed", range(4))
def test_native_walk_matches_mmu_walk_fault(seed):
    """For 1,500 random (configuration, VA) pairs per table fill, the native walk gives what
    mmu.walk_fault gives; every kind of answer occurs (so the comparison is not vacuous)."""
    rig = Rig(seed)
    rng = random.Random(1000 + seed)
    kinds = Counter()
    for _ in range(300):
        el, upper, e2h = rng.choice(RANGES)
        rig.configure(rng, el, upper, e2h)
        for _ in range(5):
            va = random_va(rng, upper)
            expected = rig.python(va, el)
            assert rig.native(va, el) == expected, (hex(va), el, upper, e2h)
            kinds[None if expected is None else expected & mmu.FSC_KIND_MASK] += 1
    assert kinds[None] and kinds[mmu.FSC_ADDRESS_SIZE] and kinds[mmu.FSC_WALK_EXTERNAL], kinds


def test_stage2_is_left_to_python():
    """With stage 2 enabled for EL1&0 (HCR_EL2.VM, SCR_EL3.NS) the stage 1 table addresses are
    IPAs: the native walk does not decide."""
    rig = Rig(0)
    rig.configure(random.Random(0), 1, False, 0, stage2=True)
    assert native.walk_fault(walk_tables(False), rig.uc._uch, 0x1000, 1) == native.WALK_PYTHON


def test_possible_e0pd_faults_are_left_to_python():
    """With FEAT_E0PD presented, an abort at EL0 or EL1 in a VA half whose TCR_EL1.E0PDn is set
    (stage 1 on) goes to Python (SyncChecks._e0pd_fault decides); with E0PDn clear, or at
    EL2, an Access flag or Permission fault stands and a Translation fault stands when the walk
    ends with it."""
    rig = Rig(0)
    mem, uch = rig.mem, rig.uc._uch
    set_pstate(mem, PSTATE.make(EL=1, SP=1))
    mem.set_cpr(HCR_EL2.encoding.tuple, HCR_EL2.make(RW=1))
    mem.set_cpr(SCTLR_ENC[1], mem.cpr(SCTLR_ENC[1]) | 1)
    mem.set_cpr(TTBR1_EL1, HOLE)             # (a Translation fault there is really external)
    mem.set_cpr(TTBR0_ENC[1], HOLE)
    permission = mmu.FSC_PERMISSION | 3
    upper_va = 0xFFFF_0000_0000_1000
    mem.set_cpr(mmu.TCR_ENC[1], mmu.TCR_EL1.make(T0SZ=16, T1SZ=16, TG1=0b10, E0PD1=1))
    for el in (0, 1):
        assert not native.abort_stands(walk_tables(True), uch, el, upper_va, permission)
        assert native.abort_stands(walk_tables(True), uch, el, 0x1000, permission)
        assert native.abort_stands(walk_tables(False), uch, el, upper_va, permission)
    assert native.abort_stands(walk_tables(True), uch, 2, upper_va, permission)
    translation = mmu.FSC_TRANSLATION | 0
    assert not native.abort_stands(walk_tables(True), uch, 0, 0x1000, translation)  # (external)
    mem.set_cpr(SCTLR_ENC[1], mem.cpr(SCTLR_ENC[1]) & ~1)
    assert native.abort_stands(walk_tables(True), uch, 0, upper_va, permission)
