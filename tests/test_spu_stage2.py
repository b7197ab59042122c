"""Profiling Buffer writes through stage 2 (EL1&0 with HCR_EL2.VM = 1) and the External abort
options of Arm ARM D17.8.3 / D17.8.4 (SPE supplement §3.5.3, §3.5.4), on bare-metal programs.

A program boots at EL2, programs stage 2 (VTTBR_EL2 / VTCR_EL2) and optionally the EL1 stage 1
(TTBR0_EL1 / TCR_EL1 / SCTLR_EL1.M), enters EL1, profiles a loop into a buffer at BUF_VA, stops
and drains, and exits through semihosting. The translation tables are written into guest RAM by
the test with literal descriptor encodings (Arm ARM D8.3), so each case changes one descriptor.

Expected values come from the specification: PMBSR_EL1 = S (bit 17) | EC (bits 31:26: 0b100100
stage 1, 0b100101 stage 2 Data Abort) | EA (bit 18, External abort reported to the SPU) |
MSS.FSC (bits 5:0, the long-descriptor FSC with the level); PMBPTR_EL1 = the faulting virtual
address; ESR, FAR and HPFAR_EL2 unchanged (D17.8.3 Note); an SError taken for the "serror"
option has ESR_ELx = EC 0x2F, IL = 1, ISS 0 (IDS = 0, DFSC 0b000000: FEAT_RAS's Uncategorized
error).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from asmrun import BASE, ERET_TO_EL1, EXIT, mov64, run_asm, xregs
from click.testing import CliRunner

from unicorn import arm64_const as A

from spe_emu.asm import assemble
from spe_emu.cpu.exceptions import PSTATE, set_pstate
from spe_emu.cpu.machine import Machine, MachineConfig
from spe_emu.errors import ConfigError
from spe_emu.platform.loader import Image, Segment
from spe_emu.spe.config import PMBIDR_EA, SpeConfig
from spe_emu.spe.packets import iter_records
from spe_emu.tools.cli import main

BUF_VA = 0x4800_0000          # the buffer's VA (= IPA with stage 1 off or identity)
BUF_PA = 0x4A00_0000          # where stage 2 puts it (a remap: a stage-1-only write misses)
BUF_SIZE = 0x10000
HOLE = 0x2000_0000            # no memory or device there (docs/design.md memory map)
S2_L1, S2_L2, S2_L3 = 0x4010_0000, 0x4010_1000, 0x4010_2000
S1_L1, S1_L2, S1_L3 = 0x4011_0000, 0x4011_1000, 0x4060_0000   # S1_L3 alone in its 2 MiB
SENTINELS = {"FAR_EL1": ((3, 0, 6, 0, 0), 0x1111_0000), "FAR_EL2": ((3, 4, 6, 0, 0), 0x2222_0000),
             "HPFAR_EL2": ((3, 4, 6, 0, 4), 0x3330), "ESR_EL1": ((3, 0, 5, 2, 0), 0x5555),
             "ESR_EL2": ((3, 4, 5, 2, 0), 0x6666)}

# Descriptor bits (Arm ARM D8.3), literal.
VALID, TABLE, PAGE, BLOCK = 0b1, 0b11, 0b11, 0b01
AF = 1 << 10
SH_INNER = 0b11 << 8
S2AP_RW, S2AP_RO = 0b11 << 6, 0b01 << 6
S2_NORMAL = 0b1111 << 2                       # MemAttr: Normal, Write-Back
S1_RO = 1 << 7                                # AP[2]
S2_ATTRS = AF | SH_INNER | S2AP_RW | S2_NORMAL
S1_ATTRS = AF | SH_INNER                      # AttrIndx 0 (MAIR_EL1.Attr0 = 0xFF), AP 0b00

EC_S1, EC_S2 = 0b100100, 0b100101
S_BIT, EA_BIT, DL_BIT = 1 << 17, 1 << 18, 1 << 19
ESR_SERROR = (0x2F << 26) | (1 << 25)


def pmbsr(ec: int, fsc: int, ea: bool = False) -> int:
    return (ec << 26) | S_BIT | (EA_BIT if ea else 0) | fsc


def program(*, hcr: int, stage1: bool, vtcr: int, vttbr: int = S2_L1, loop_body: str = "",
            buf_va: int = BUF_VA) -> str:
    """EL2 setup, then EL1: SPE on (E1SPE, interval 256) over a loop, drain, x20 = PMBSR_EL1,
    x21 = PMBPTR_EL1, x27 = ``after``, NZCV = 0, unmask SError (DAIFClr #4) just before
    ``after``, exit 0. An SError
    taken to EL1 or EL2 leaves ESR/ELR/SPSR in x24/x25/x26 and exits with 7."""
    sentinels = "".join(mov64("x1", value) + f"msr s{enc[0]}_{enc[1]}_c{enc[2]}_c{enc[3]}_{enc[4]}, x1\n"
                        for enc, value in SENTINELS.values())
    s1 = ""
    if stage1:
        # MAIR_EL1.Attr0 = Normal WB; TCR_EL1: T0SZ 32, TG0 4K, SH0/IRGN0/ORGN0, IPS 40 bits;
        # start level 1 (Arm ARM D8.2), 4 entries.
        s1 = (mov64("x1", 0xFF) + "msr mair_el1, x1\n"
              + mov64("x1", 32 | (1 << 8) | (1 << 10) | (3 << 12) | (0b010 << 32))
              + "msr tcr_el1, x1\n" + mov64("x1", S1_L1) + "msr ttbr0_el1, x1\nisb\n"
              + "mrs x1, sctlr_el1\norr x1, x1, #1\nmsr sctlr_el1, x1\n")
    return f"""
    adr x0, vectors_el2
    msr vbar_el2, x0
    {sentinels}
    {mov64("x1", vttbr)}
    msr s3_4_c2_c1_0, x1        // VTTBR_EL2
    {mov64("x1", vtcr)}
    msr s3_4_c2_c1_2, x1        // VTCR_EL2
    {mov64("x1", hcr)}
    msr s3_4_c1_c1_0, x1        // HCR_EL2
    isb
    {s1}
    {ERET_TO_EL1}
    adr x0, vectors_el1
    msr vbar_el1, x0
    {mov64("x0", buf_va)}
    msr pmbptr_el1, x0
    {mov64("x1", buf_va + BUF_SIZE)}
    orr x1, x1, #1
    msr pmblimitr_el1, x1
    mov x2, #0x100
    msr pmsirr_el1, x2
    msr pmsicr_el1, xzr
    mov x3, #0b10
    msr pmscr_el1, x3           // E1SPE
    isb
    movz x4, #4000
    mov x5, #0
loop:
    add x5, x5, #3
    {loop_body}
    subs x4, x4, #1
    b.ne loop
    msr pmscr_el1, xzr
    isb
    psb csync
    dsb nsh
    mrs x20, pmbsr_el1
    mrs x21, pmbptr_el1
    adr x27, after
    msr nzcv, xzr
    msr daifclr, #4
after:
    mov x0, #0
{EXIT}
    .balign 2048
vectors_el1:
    .skip 0x380
    mrs x24, esr_el1
    mrs x25, elr_el1
    mrs x26, spsr_el1
    mov x0, #7
{EXIT}
    .balign 2048
vectors_el2:
    .skip 0x400
    eret                        // synchronous from EL1 (HVC #0): back after it
    .skip 0x17c
    mrs x24, s3_4_c5_c2_0       // ESR_EL2 (SError from EL1)
    mrs x25, s3_4_c4_c0_1       // ELR_EL2
    mrs x26, s3_4_c4_c0_0       // SPSR_EL2
    mov x0, #7
{EXIT}
"""


def gib1_tables(l2: int, l3: int, attrs: int, buf_out: int) -> dict[int, int]:
    """The level 2 table at ``l2`` for GiB 1 (identity 2 MiB blocks) but BUF_VA's 2 MiB, which
    the level 3 table at ``l3`` maps page by page to ``buf_out``; ``attrs`` on every leaf."""
    t = {l2 + 8 * i: (0x4000_0000 + (i << 21)) | BLOCK | attrs for i in range(512)}
    t[l2 + 8 * (BUF_VA >> 21 & 0x1FF)] = l3 | TABLE
    for i in range(BUF_SIZE >> 12):
        t[l3 + 8 * i] = (buf_out + (i << 12)) | PAGE | attrs
    return t


def stage2_tables() -> dict[int, int]:
    """PA -> descriptor: stage 2, 4K granule, 32-bit IPA, start level 1. IPA GiB 0 is a
    Device-less identity block (for the walk-abort case), GiB 1 is identity in 2 MiB blocks
    but BUF_VA's 2 MiB, which a level 3 table maps to BUF_PA page by page."""
    t = {S2_L1 + 0: 0x0000_0000 | BLOCK | S2_ATTRS, S2_L1 + 8: S2_L2 | TABLE}
    t.update(gib1_tables(S2_L2, S2_L3, S2_ATTRS, BUF_PA))
    return t


def stage1_tables() -> dict[int, int]:
    """IPA (= PA of these tables: identity at stage 2) -> descriptor: EL1 stage 1, 4K, 32-bit
    VA, start level 1; GiB 1 identity in 2 MiB blocks but BUF_VA's 2 MiB (level 3)."""
    t = {S1_L1 + 8: S1_L2 | TABLE}
    t.update(gib1_tables(S1_L2, S1_L3, S1_ATTRS, BUF_VA))
    return t


VTCR = 32 | (1 << 6) | (1 << 8) | (1 << 10) | (3 << 12) | (0b010 << 16)   # T0SZ 32, SL0 1, PS 40
HCR_VM = (1 << 31) | 1                                                     # RW | VM
HCR_AMO = 1 << 5


def run(tmp_path: Path, tables: dict[int, int], *, mode: str = "fast",
        spe: SpeConfig | None = None, **kw) -> Machine:
    code = assemble("movz x9, #0x4100, lsl #16\nmov sp, x9\n" + program(**kw), BASE)
    image = Image(path=Path("<asm>"), entry=BASE,
                  segments=[Segment(BASE, BASE, code, len(code), 0b111)])
    m = Machine(MachineConfig(boot_el=2, mode=mode, spe=spe or SpeConfig(), outdir=tmp_path,
                              max_insns=5_000_000))
    m.load(image)
    m.reset(BASE)
    for pa, desc in tables.items():
        m.uc.mem_write(pa, desc.to_bytes(8, "little"))
    m.result = m.run()
    return m


def sentinels_unchanged(m: Machine) -> bool:
    return all(m.fast.cpr(enc) == value for enc, value in SENTINELS.values())


# --- a buffer owned by EL1, written through stage 2 ----------------------------------------

@pytest.mark.parametrize("mode", ["fast", "reference"])
@pytest.mark.parametrize("stage1", [False, True])
def test_records_land_where_stage2_puts_them(tmp_path, mode, stage1):
    tables = stage2_tables() | (stage1_tables() if stage1 else {})
    m = run(tmp_path, tables, mode=mode, hcr=HCR_VM, stage1=stage1, vtcr=VTCR)
    pmbsr_v, ptr = xregs(m, 20, 21)
    assert m.result.exit_status == 0 and pmbsr_v == 0
    n = ptr - BUF_VA
    assert n > 0 and m.result.records_written > 40
    data = bytes(m.uc.mem_read(BUF_PA, n))
    assert len(list(iter_records(data))) == m.result.records_written
    assert bytes(m.uc.mem_read(BUF_VA, n)) == bytes(n)     # nothing at the IPA's PA


def test_buffer_owned_by_el1_written_while_el2_runs(tmp_path):
    # A record write for a buffer owned by EL1 (MDCR_EL2.E2PB = 0b11) while the PE is at EL2
    # (a record completed after an exception to EL2): the owning regime is EL1&0, so the
    # write goes through stage 2 whatever the current EL (SPE §3.4; before, the emulator
    # used stage 1 only at EL2). The run stops at EL1; the PE is then moved to EL2h.
    m = run(tmp_path, stage2_tables(), hcr=HCR_VM, stage1=False, vtcr=VTCR)
    ptr = xregs(m, 21)[0]
    assert m.result.exit_status == 0 and ptr > BUF_VA
    set_pstate(m.fast, PSTATE.set(m.fast.reg(A.UC_ARM64_REG_PSTATE), "EL", 2) | 1)  # EL2h
    m.pe.forget_context()
    assert m.context().el == 2 and m.spu.owner(m.context()) == (False, 1)
    record = bytes(range(1, 17))
    placed, event = m.spu.buffer.write_record(record)
    assert (placed, event) == (16, None)
    assert bytes(m.uc.mem_read(BUF_PA + ptr - BUF_VA, 16)) == record
    assert bytes(m.uc.mem_read(ptr, 16)) == bytes(16)       # not at the IPA's PA


def test_concatenated_initial_stage2_tables(tmp_path):
    # VTCR_EL2.T0SZ = 24 (40-bit IPA) with SL0 = 1: the level 1 lookup resolves IPA[39:30],
    # 1024 entries in two concatenated 4 KiB tables (VTTBR_EL2 aligned to 8 KiB); the buffer's
    # IPA 0x80_4800_0000 is entry 513, in the second table (Arm ARM D8.2 "Concatenated
    # translation tables for the initial stage 2 lookup").
    buf = 0x80_0000_0000 + BUF_VA
    root = 0x4012_0000
    tables = stage2_tables()
    tables[root + 8 * 1] = S2_L2 | TABLE
    tables[root + 8 * (buf >> 30)] = S2_L2 | TABLE
    m = run(tmp_path, tables, hcr=HCR_VM, stage1=False, vttbr=root, buf_va=buf,
            vtcr=(VTCR & ~0x3F) | 24)
    pmbsr_v, ptr = xregs(m, 20, 21)
    assert m.result.exit_status == 0 and pmbsr_v == 0 and ptr > buf
    data = bytes(m.uc.mem_read(BUF_PA, ptr - buf))
    assert len(list(iter_records(data))) == m.result.records_written > 40


# --- MMU faults on a buffer write: stage 1 and stage 2, each level --------------------------

def _s2_l3_index(va: int) -> int:
    return S2_L3 + 8 * ((va >> 12) & 0x1FF)


def _s1_l3_index(va: int) -> int:
    return S1_L3 + 8 * ((va >> 12) & 0x1FF)


FAULTS = {
    # name: (change to the tables, stage 1 on, buffer VA, PMBSR_EL1)
    "s2-level0-ipa-beyond-t0sz": ({}, False, 0x1_4800_0000, pmbsr(EC_S2, 0b000100)),
    # (IPA / VA GiB 3: its level 1 entry is invalid; GiB 1 holds the program)
    "s2-level1-translation": ({}, False, 0xC800_0000, pmbsr(EC_S2, 0b000101)),
    "s2-level2-translation": ({S2_L2 + 8 * 64: 0}, False, BUF_VA, pmbsr(EC_S2, 0b000110)),
    "s2-level3-translation": ({_s2_l3_index(BUF_VA): 0}, False, BUF_VA,
                              pmbsr(EC_S2, 0b000111)),
    "s2-level3-permission": ({_s2_l3_index(BUF_VA): BUF_PA | PAGE | (S2_ATTRS & ~S2AP_RW)
                              | S2AP_RO}, False, BUF_VA, pmbsr(EC_S2, 0b001111)),
    "s2-level2-block-permission": ({S2_L2 + 8 * 64: BUF_VA | BLOCK | (S2_ATTRS & ~S2AP_RW)
                                    | S2AP_RO}, False, BUF_VA, pmbsr(EC_S2, 0b001110)),
    "s2-level3-access-flag": ({_s2_l3_index(BUF_VA): BUF_PA | PAGE | (S2_ATTRS & ~AF)},
                              False, BUF_VA, pmbsr(EC_S2, 0b001011)),
    "s1-level0-va-beyond-t0sz": ({}, True, 0x1_4800_0000, pmbsr(EC_S1, 0b000100)),
    "s1-level1-translation": ({}, True, 0xC800_0000, pmbsr(EC_S1, 0b000101)),
    "s1-level2-translation": ({S1_L2 + 8 * 64: 0}, True, BUF_VA, pmbsr(EC_S1, 0b000110)),
    "s1-level3-translation": ({_s1_l3_index(BUF_VA): 0}, True, BUF_VA, pmbsr(EC_S1, 0b000111)),
    "s1-level3-permission": ({_s1_l3_index(BUF_VA): BUF_VA | PAGE | S1_ATTRS | S1_RO}, True,
                             BUF_VA, pmbsr(EC_S1, 0b001111)),
    "s1-level3-access-flag": ({_s1_l3_index(BUF_VA): BUF_VA | PAGE | (S1_ATTRS & ~AF)}, True,
                              BUF_VA, pmbsr(EC_S1, 0b001011)),
    # Stage 2 fault on the stage 1 walk's read of its level 3 table (IPA S1_L3 unmapped at
    # stage 2, level 2): a stage 2 Data Abort (S1PTW; D17.8.3).
    "s2-on-s1-walk": ({S2_L2 + 8 * (S1_L3 >> 21 & 0x1FF): 0}, True, BUF_VA,
                      pmbsr(EC_S2, 0b000110)),
}


@pytest.mark.parametrize("mode", ["fast", "reference"])
@pytest.mark.parametrize("case", sorted(FAULTS))
def test_mmu_fault_on_buffer_write(tmp_path, case, mode):
    change, stage1, buf, want = FAULTS[case]
    tables = stage2_tables() | (stage1_tables() if stage1 else {})
    tables |= change
    m = run(tmp_path, tables, mode=mode, hcr=HCR_VM, stage1=stage1, vtcr=VTCR, buf_va=buf)
    pmbsr_v, ptr = xregs(m, 20, 21)
    assert m.result.exit_status == 0
    # D17.8.3: S, EC (stage), MSS.FSC (kind and level), DL = 0 (the fault is at the first
    # byte of a record: PMBPTR_EL1 points after the last complete one), PMBPTR_EL1 = the VA.
    assert pmbsr_v == want
    assert ptr == buf
    assert m.result.management_events == 1 and m.result.records_written == 0
    assert sentinels_unchanged(m)      # ESR, FAR, HPFAR_EL2: unchanged


# --- External aborts (D17.8.4), each board option -------------------------------------------

EXTERNAL = {
    # name: (change, stage 1 on, the FSC reported, stage of the walk or None for the write)
    "write": ({_s2_l3_index(BUF_VA): HOLE | PAGE | S2_ATTRS}, False, 0b010000, None),
    "s2-walk-level3": ({S2_L2 + 8 * 64: HOLE | TABLE}, False, 0b010111, 2),
    "s1-walk-level3": ({S1_L2 + 8 * 64: HOLE | TABLE}, True, 0b010111, 1),
}


@pytest.mark.parametrize("option", ["report", "fault", "ignore"])
@pytest.mark.parametrize("case", sorted(EXTERNAL))
def test_external_abort_options(tmp_path, case, option):
    change, stage1, fsc, walk_stage = EXTERNAL[case]
    tables = (stage2_tables() | (stage1_tables() if stage1 else {})) | change
    m = run(tmp_path, tables, hcr=HCR_VM, stage1=stage1, vtcr=VTCR,
            spe=SpeConfig(external_abort=option))
    pmbsr_v, ptr = xregs(m, 20, 21)
    assert m.result.exit_status == 0
    if option == "ignore":
        # D17.8.4.1: as if no abort; PMBSR_EL1 not modified, the pointer moves on.
        assert pmbsr_v == 0 and m.result.management_events == 0
        assert m.result.records_written > 40 and ptr > BUF_VA
        return
    ec = EC_S2 if walk_stage == 2 else EC_S1
    # D17.8.4.4 (report): EA = 1, EC stage 1 unless on a stage 2 walk, FSC an External abort.
    # D17.8.4.3 (fault): on a walk, an MMU fault (EA unchanged); the write's own abort is
    # reported to the SPU as with "report".
    ea = not (option == "fault" and walk_stage is not None)
    assert pmbsr_v == pmbsr(ec, fsc, ea=ea)
    assert ptr == BUF_VA and m.result.management_events == 1
    assert sentinels_unchanged(m)


@pytest.mark.parametrize("case", sorted(EXTERNAL))
def test_external_abort_as_serror_to_el1(tmp_path, case):
    # D17.8.4.2: PMBSR_EL1 unchanged, profiling goes on; the PE takes a physical SError,
    # routed to EL1 (SCR_EL3.EA = 0, HCR_EL2.{AMO, TGE} = 0), masked by PSTATE.A until the
    # DAIFClr at "after"'s predecessor: ELR_EL1 = "after", SPSR_EL1 = EL1h with D, I, F
    # masked (0x2c5), ESR_EL1 = EC 0x2F, IL, ISS 0.
    change, stage1, _, _ = EXTERNAL[case]
    tables = (stage2_tables() | (stage1_tables() if stage1 else {})) | change
    m = run(tmp_path, tables, hcr=HCR_VM, stage1=stage1, vtcr=VTCR,
            spe=SpeConfig(external_abort="serror"))
    pmbsr_v, ptr, esr, elr, spsr = xregs(m, 20, 21, 24, 25, 26)
    assert m.result.exit_status == 7
    assert pmbsr_v == 0 and m.result.management_events == 0 and ptr > BUF_VA
    assert esr == ESR_SERROR
    assert spsr == 0x2C5
    assert elr == xregs(m, 27)[0]           # "after"
    assert m.exc.serror_pending is False


def test_external_abort_as_serror_routed_to_el2_by_amo(tmp_path):
    # HCR_EL2.AMO = 1: the SError goes to EL2, not masked by PSTATE.A from EL1 (D1.3.6):
    # taken while the loop runs, from EL1h (SPSR_EL2.M = 0b0101), ESR_EL2 = EC 0x2F, IL.
    change, stage1, _, _ = EXTERNAL["write"]
    m = run(tmp_path, stage2_tables() | change, hcr=HCR_VM | HCR_AMO, stage1=stage1, vtcr=VTCR,
            spe=SpeConfig(external_abort="serror"))
    esr, elr, spsr = xregs(m, 24, 25, 26)
    assert m.result.exit_status == 7
    assert esr == ESR_SERROR
    assert spsr & 0x1F == 0b00101 and spsr & (1 << 8)   # from EL1h, A was set (DAIF masked)
    assert BASE <= elr < BASE + 0x1000


@pytest.mark.parametrize("option", sorted(PMBIDR_EA))
def test_pmbidr_ea_advertises_the_option(tmp_path, option):
    # PMBIDR_EL1.EA [11:8] (FEAT_SPEv1p2): 0b0000 not described, 0b0001 ignored, 0b0010
    # SError; RES0 with FEAT_SPE and FEAT_SPEv1p1 (PMSVer 0b0001, 0b0010). Read by MRS at EL1.
    assert PMBIDR_EA == {"report": 0b0000, "ignore": 0b0001, "serror": 0b0010, "fault": 0b0000}
    text = "mrs x19, pmbidr_el1\nmov x0, #0\n" + EXIT
    for pmsver, fne in ((1, 0), (2, 0), (3, 1)):
        cfg = SpeConfig(pmsver=pmsver, fne=fne, external_abort=option)
        m = run_asm(text, tmp_path / str(pmsver), spe=cfg)
        assert xregs(m, 19)[0] >> 8 & 0xF == (PMBIDR_EA[option] if pmsver >= 3 else 0)


def test_default_and_v1p3_rules():
    # Reporting to the SPU is not permitted with FEAT_SPEv1p3 (D17.8.4.4; PMBIDR_EL1.EA
    # 0b0000 not permitted): the default becomes "ignore" there, "report"/"fault" are refused.
    assert SpeConfig().external_abort_behaviour == "report"
    v1p3 = SpeConfig(pmsver=4, fne=1, flag_updates=1)
    assert v1p3.external_abort_behaviour == "ignore" and v1p3.pmbidr_ea == 0b0001
    assert SpeConfig(pmsver=4, fne=1, flag_updates=1, external_abort="serror").pmbidr_ea == 2
    for option in ("report", "fault"):
        with pytest.raises(ConfigError, match="FEAT_SPEv1p3"):
            SpeConfig(pmsver=4, fne=1, flag_updates=1, external_abort=option)


def test_cli_option(tmp_path):
    runner = CliRunner()
    r = runner.invoke(main, ["run", "--help"])
    assert "--spe-external-abort [report|ignore|serror|fault]" in " ".join(r.output.split())
    r = runner.invoke(main, ["run", "--spe-external-abort", "report", "--spe-feature",
                             "PMSVer=4", "--spe-feature", "FnE=1", "--spe-feature", "F=1",
                             "-o", str(tmp_path), "x"])
    assert r.exit_code == 125 and "FEAT_SPEv1p3" in r.output


class _Pstate:
    """The one thing ProcessingElement reads of the engine for SError masking: PSTATE."""

    def __init__(self, el: int, a: int):
        self.value = PSTATE.make(EL=el, A=a)

    def reg(self, _reg: int) -> int:
        return self.value


@pytest.mark.parametrize("el, a, scr_ea, amo, tge, want", [
    # D1.3.5 routing, D1.3.6 masking of a physical SError (SCR_EL3.NS = 1: EL2 enabled)
    (1, 0, 0, 0, 0, 1), (1, 1, 0, 0, 0, None), (0, 1, 0, 0, 0, None), (0, 0, 0, 0, 0, 1),
    (1, 1, 0, 1, 0, 2), (0, 1, 0, 0, 1, 2), (2, 1, 0, 1, 0, None), (2, 0, 0, 1, 0, 2),
    (2, 1, 0, 0, 0, None),                      # routed to EL1, below EL2: stays pending
    (1, 1, 1, 0, 0, 3), (2, 1, 1, 1, 0, 3), (3, 1, 1, 0, 0, None), (3, 0, 1, 0, 0, 3),
])
def test_physical_serror_routing_and_masking(el, a, scr_ea, amo, tge, want):
    from spe_emu.arch.context import HCR_EL2, SCR_EL3, AccessContext
    from spe_emu.cpu.exceptions import VectorKind
    from spe_emu.cpu.pe import ProcessingElement
    pe = ProcessingElement(_Pstate(el, a), lambda: False, lambda: False)
    ctx = AccessContext(el=el, scr_el3=SCR_EL3.make(NS=1, RW=1, EA=scr_ea),
                        hcr_el2=HCR_EL2.make(RW=1, AMO=amo, TGE=tge))
    assert pe.deliverable_interrupt(ctx) is None
    pe.serror_pending = True
    got = pe.deliverable_interrupt(ctx)
    assert got == (None if want is None else (VectorKind.SERROR, want))
    # ISR_EL1.A (bit 8) shows the pending physical SError (AMO = 0 or not at EL1)
    if not (el == 1 and amo):
        assert pe.isr_el1(ctx) >> 8 & 1 == 1


# --- hardware Access flag / dirty state at stage 2 (PMBIDR_EL1.F = 1, D17.8.3.1) -----------

VTCR_HA, VTCR_HD = 1 << 21, 1 << 22
S2_DBM = 1 << 51


@pytest.mark.parametrize("case", ["af", "dirty", "af-ha0", "dirty-dbm0"])
def test_stage2_flags_managed_by_the_spu(tmp_path, case):
    """With PMBIDR_EL1.F = 1 the SPU's stage 2 walk sets AF (VTCR_EL2.HA = 1) and makes a
    DBM = 1 read-only page writable (S2AP[1] := 1, VTCR_EL2.HD = 1), writes the descriptor and
    the records; with HA = 0, or DBM = 0, the fault of Table D17-11 stays (stage 2, level 3)."""
    at = _s2_l3_index(BUF_VA)
    desc = {"af": BUF_PA | PAGE | (S2_ATTRS & ~AF),
            "af-ha0": BUF_PA | PAGE | (S2_ATTRS & ~AF),
            "dirty": BUF_PA | PAGE | (S2_ATTRS & ~S2AP_RW) | S2AP_RO | S2_DBM,
            "dirty-dbm0": BUF_PA | PAGE | (S2_ATTRS & ~S2AP_RW) | S2AP_RO}[case]
    vtcr = VTCR | (0 if case == "af-ha0" else VTCR_HA | VTCR_HD)
    m = run(tmp_path, stage2_tables() | {at: desc}, hcr=HCR_VM, stage1=False, vtcr=vtcr,
            spe=SpeConfig(flag_updates=1))
    pmbsr_v, ptr = xregs(m, 20, 21)
    after = int.from_bytes(m.uc.mem_read(at, 8), "little")
    if case in ("af", "dirty"):
        assert pmbsr_v == 0 and m.result.records_written > 40
        assert after == desc | AF | S2AP_RW
        data = bytes(m.uc.mem_read(BUF_PA, ptr - BUF_VA))
        assert len(list(iter_records(data))) == m.result.records_written
    else:
        fsc = 0b001011 if case == "af-ha0" else 0b001111
        assert (pmbsr_v, ptr) == (pmbsr(EC_S2, fsc), BUF_VA) and after == desc
