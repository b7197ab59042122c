"""FEAT_SPE_EXC conformance matrices: Tables D17-5 to D17-10 of the Arm ARM (D17.8, Profiling
Buffer management), transcribed row by row below, against spe_emu.spe.exc.

Each row's control-value patterns (X: any bit, "!=0b00") are expanded into every concrete
combination, and every cell of the row is checked for each: the PMBSR_ELx that records a
management event (D17-5..7), the SPE Profiling exception taken from EL0..EL3 and the PMBIRQ
level (D17-8..10). The tables assume EL2 and EL3 implemented, Non-secure state and a Non-secure
buffer owner (MDCR_EL3.NSPB = 0b11); MDCR_EL2.E2PB = 0b00 makes EL2 the owning Exception level.
Each matrix prints how many cases it ran (``pytest -s``).
"""

from __future__ import annotations

import itertools

import pytest

from spe_emu.arch.context import HCR_EL2, MDCR_EL2, MDCR_EL3, SCR_EL3, AccessContext
from spe_emu.spe import exc
from spe_emu.spe.exc import ExcState

# (ec, fsc) of each kind of management event the routing tables name.
EVENTS = {
    "GPF Stage 1": (exc.EC_STAGE1, 0b101000), "GPF Stage 2": (exc.EC_STAGE2, 0b100111),
    "GPC fault": (exc.EC_GPC, 0),
    "EA Stage 1": (exc.EC_STAGE1, 0b010000), "EA Stage 2": (exc.EC_STAGE2, 0b010101),
    "Other abort Stage 1": (exc.EC_STAGE1, 0b000111),
    "Other abort Stage 2": (exc.EC_STAGE2, 0b001111),
    "Other event": (exc.EC_OTHER, 0b000001),
}

WIDTH = {"PMSEE": 2, "SCR_EL3.GPF": 1, "SCR_EL3.EA": 1, "EE2": 2, "KE2": 1, "E2PB": 2,
         "HCR_EL2.GPF": 1, "HCR_EL2.TEA": 1, "TGE": 1, "EE1": 2, "KE1": 1, "PM": 1}

# Table D17-5 SPE Profiling Buffer management event reporting (Granule Protection Checks)
D17_5 = ("PMSEE SCR_EL3.GPF EE2 E2PB HCR_EL2.GPF | GPF Stage 1, GPF Stage 2, GPC fault", """
0b00 X XX   XX   X   | EL1 EL1 EL1
0b01 X 0b0X XX   X   | EL1 EL1 EL1
0b01 X 0b10 0b00 X   | EL2 EL2 EL2
0b01 X 0b10 0b1X 0b0 | EL1 EL2 EL2
0b01 X 0b10 0b1X 0b1 | EL2 EL2 EL2
0b01 X 0b11 XX   X   | EL2 EL2 EL2
0b10 0b0 0b0X XX   X   | EL1 EL1 EL3
0b10 0b0 0b10 0b00 X   | EL2 EL2 EL3
0b10 0b0 0b10 0b1X 0b0 | EL1 EL2 EL3
0b10 0b0 0b10 0b1X 0b1 | EL2 EL2 EL3
0b10 0b0 0b11 XX   X   | EL2 EL2 EL3
0b10 0b1 XX   XX   X   | EL3 EL3 EL3
0b11 X   XX   XX   X   | EL3 EL3 EL3
""")

# Table D17-6 SPE Profiling Buffer management event reporting (External aborts)
D17_6 = ("PMSEE SCR_EL3.EA EE2 E2PB HCR_EL2.TEA | EA Stage 1, EA Stage 2", """
0b00 X   XX   XX   X   | EL1 EL1
0b01 X   0b0X XX   X   | EL1 EL1
0b01 X   0b10 0b00 X   | EL2 EL2
0b01 X   0b10 0b1X 0b0 | EL1 EL2
0b01 X   0b10 0b1X 0b1 | EL2 EL2
0b01 X   0b11 XX   X   | EL2 EL2
0b10 0b0 0b0X XX   X   | EL1 EL1
0b10 0b0 0b10 0b00 X   | EL2 EL2
0b10 0b0 0b10 0b1X 0b0 | EL1 EL2
0b10 0b0 0b10 0b1X 0b1 | EL2 EL2
0b10 0b0 0b11 XX   X   | EL2 EL2
0b10 0b1 XX   XX   X   | EL3 EL3
0b11 X   XX   XX   X   | EL3 EL3
""")

# Table D17-7 SPE Profiling Buffer management event reporting (All other management events)
D17_7 = ("PMSEE EE2 E2PB | Other abort Stage 1, Other abort Stage 2, Other event", """
0b00 XX   XX   | EL1 EL1 EL1
0b01 0b0X XX   | EL1 EL1 EL1
0b01 0b10 0b00 | EL2 EL2 EL1
0b01 0b10 0b1X | EL1 EL2 EL1
0b01 0b11 XX   | EL2 EL2 EL2
0b10 0b0X XX   | EL1 EL1 EL1
0b10 0b10 0b00 | EL2 EL2 EL1
0b10 0b10 0b1X | EL1 EL2 EL1
0b10 0b11 XX   | EL2 EL2 EL2
0b11 XX   XX   | EL3 EL3 EL3
""")

# Table D17-8 SPE Profiling exception and interrupt, when PMBSR_EL1.S is 1
D17_8 = ("PMSEE EE2 TGE EE1 KE1 PM | IRQ, EL0, EL1, EL2, EL3", """
0b00   XX     0b0 XX   X   X   | HIGH None None None None
0b00   XX     0b1 XX   X   X   | HIGH None n/a  None None
!=0b00 0b00   0b0 XX   X   X   | HIGH None None None None
!=0b00 0b00   0b1 XX   X   X   | HIGH None n/a  None None
!=0b00 !=0b00 0b0 0b0X X   X   | HIGH None None None None
!=0b00 !=0b00 0b0 0b1X 0b0 X   | LOW  EL1  C    C    C
!=0b00 !=0b00 0b0 0b1X 0b1 0b0 | LOW  EL1  EL1  C    C
!=0b00 !=0b00 0b0 0b1X 0b1 0b1 | LOW  EL1  B    C    C
!=0b00 !=0b00 0b1 0b0X X   X   | HIGH None n/a  None None
!=0b00 !=0b00 0b1 0b1X X   X   | LOW  EL2  n/a  C    C
""")

# Table D17-9 SPE Profiling exception, when PMBSR_EL2.S is 1
D17_9 = ("PMSEE EE2 KE2 TGE PM | EL0, EL1, EL2, EL3", """
0b00   XX   X   0b0 X   | None None None None
0b00   XX   X   0b1 X   | None n/a  None None
!=0b00 0b0X X   0b0 X   | None None None None
!=0b00 0b0X X   0b1 X   | None n/a  None None
!=0b00 0b10 X   0b0 X   | EL2  EL2  C    C
!=0b00 0b10 X   0b1 X   | EL2  n/a  C    C
!=0b00 0b11 0b0 0b0 X   | EL2  EL2  C    C
!=0b00 0b11 0b0 0b1 X   | EL2  n/a  C    C
!=0b00 0b11 0b1 0b0 0b0 | EL2  EL2  EL2  C
!=0b00 0b11 0b1 0b0 0b1 | EL2  EL2  B    C
!=0b00 0b11 0b1 0b1 0b0 | EL2  n/a  EL2  C
!=0b00 0b11 0b1 0b1 0b1 | EL2  n/a  B    C
""")

# Table D17-10 SPE Profiling exception, when PMBSR_EL3.S is 1
D17_10 = ("PMSEE TGE | EL0, EL1, EL2, EL3", """
0b0X 0b0 | None None None None
0b0X 0b1 | None n/a  None None
0b10 0b0 | EL3  EL3  EL3  C
0b10 0b1 | EL3  n/a  EL3  C
0b11 0b0 | EL3  EL3  EL3  C
0b11 0b1 | EL3  n/a  EL3  C
""")


def values(pattern: str, width: int) -> list[int]:
    """The values a table cell pattern stands for: 0b01, 0b0X, XX, X, !=0b00."""
    if pattern.startswith("!="):
        excluded = int(pattern[2:], 0)
        return [v for v in range(1 << width) if v != excluded]
    bits = pattern[2:] if pattern.startswith("0b") else pattern
    assert len(bits) == width, (pattern, width)
    out = [0]
    for bit in bits:
        out = [v << 1 | b for v in out for b in ((0, 1) if bit == "X" else (int(bit),))]
    return out


def rows(table: tuple[str, str]):
    """(controls, cells) for every concrete combination of every row of ``table``."""
    header, body = table
    names = header.split("|")[0].split()
    for line in body.strip().splitlines():
        patterns, cells = line.split("|")
        patterns = patterns.split()
        assert len(patterns) == len(names), line
        for combo in itertools.product(*(values(p, WIDTH[n]) for p, n in zip(patterns, names))):
            yield dict(zip(names, combo)), cells.split()


def columns(table: tuple[str, str]) -> list[str]:
    return [c.strip() for c in table[0].split("|")[1].split(",")]


def context(c: dict, el: int = 1) -> tuple[AccessContext, ExcState]:
    """The context and SPE state of one table combination (the other controls 0)."""
    ctx = AccessContext(
        el=el, scr_el3=SCR_EL3.make(NS=1, RW=1, EA=c.get("SCR_EL3.EA", 0),
                                    GPF=c.get("SCR_EL3.GPF", 0)),
        hcr_el2=HCR_EL2.make(RW=1, TGE=c.get("TGE", 0), E2H=c.get("TGE", 0),
                             TEA=c.get("HCR_EL2.TEA", 0), GPF=c.get("HCR_EL2.GPF", 0)),
        mdcr_el2=MDCR_EL2.make(E2PB=c.get("E2PB", 0b11)),
        mdcr_el3=MDCR_EL3.make(NSPB=0b11, PMSEE=c["PMSEE"]))
    st = ExcState(implemented=True, ee1=c.get("EE1", 0), ke1=c.get("KE1", 0),
                  ee2=c.get("EE2", 0), ke2=c.get("KE2", 0), pm=c.get("PM", 0),
                  owner_secure=False, owner_el=2 if c.get("E2PB", 0b11) == 0 else 1)
    return ctx, st


def cell(text: str) -> int | str | None:
    return {"None": None, "B": exc.MASKED_BY_PM, "C": exc.MASKED}.get(
        text, int(text[2:]) if text.startswith("EL") else text)


@pytest.mark.parametrize("table", [D17_5, D17_6, D17_7], ids=["D17-5", "D17-6", "D17-7"])
def test_management_event_routing(table):
    """ReportSPEEvent(): the PMBSR_ELx of each event kind, for every control combination."""
    cases = 0
    for controls, cells in rows(table):
        ctx, st = context(controls)
        for kind, expected in zip(columns(table), cells):
            ec, fsc = EVENTS[kind]
            assert exc.report_spe_event(ec, fsc, ctx, st) == cell(expected), (controls, kind)
            cases += 1
    print(f"{cases} cases")
    assert cases >= 3 * 10


@pytest.mark.parametrize("x,table", [(1, D17_8), (2, D17_9), (3, D17_10)],
                         ids=["D17-8", "D17-9", "D17-10"])
def test_exception_enable_and_masking(x, table):
    """CheckForSPEException() cells (and PMBIRQ for D17-8) from EL0..EL3 with PMBSR_ELx.S = 1
    (only that S bit; the others 0)."""
    cases = 0
    for controls, cells in rows(table):
        names = columns(table)
        for name, expected in zip(names, cells):
            if expected == "n/a":
                continue
            if name == "IRQ":
                ctx, st = context(controls)
                st = ExcState(**{**st.__dict__, "s1": 1})
                assert exc.pmbirq(ctx, st) == (expected == "HIGH"), controls
            else:
                el = int(name[2:])
                ctx, st = context(controls, el)
                st = ExcState(**{**st.__dict__, f"s{x}": 1})
                assert exc.exception_cell(x, ctx, st) == cell(expected), (controls, name)
                taken = cell(expected) if isinstance(cell(expected), int) else None
                assert exc.pending_exception(ctx, st) == taken, (controls, name)
            cases += 1
    print(f"{cases} cases")
    assert cases >= 24


def test_without_feat_spe_exc_everything_is_pmbsr_el1_and_pmbirq():
    """FEAT_SPE_EXC not implemented: every event is recorded in PMBSR_EL1, PMBIRQ follows
    PMBSR_EL1.S, no SPE Profiling exception, PMBSR_EL2/EL3.S do not stop profiling."""
    ctx = AccessContext(el=1, scr_el3=SCR_EL3.make(NS=1, RW=1),
                        mdcr_el3=MDCR_EL3.make(NSPB=0b11, PMSEE=0b11))
    st = ExcState(implemented=False, ee1=0b11, ke1=1, ee2=0b11, ke2=1, s1=1, s2=1, s3=1)
    assert {exc.report_spe_event(ec, fsc, ctx, st) for ec, fsc in EVENTS.values()} == {1}
    assert exc.pmbirq(ctx, st)
    assert all(exc.exception_cell(x, ctx, st) is None for x in (1, 2, 3))
    assert not exc.profiling_stopped(ctx, ExcState(implemented=False, s2=1, s3=1))


@pytest.mark.parametrize("pmsee,ee2,s2,s3,stopped", [
    (0b00, 0b11, 1, 1, False), (0b01, 0b11, 1, 0, True), (0b01, 0b01, 1, 0, False),
    (0b10, 0b00, 0, 1, True), (0b01, 0b00, 0, 1, False), (0b11, 0b10, 0, 0, False)])
def test_profiling_stopped(pmsee, ee2, s2, s3, stopped):
    """SPEProfilingStopped(): PMBSR_EL3.S counts when MDCR_EL3.PMSEE is 0b1x, PMBSR_EL2.S when
    the effective PMSCR_EL2.EE is 0b1x (0b00 whenever PMSEE is 0b00)."""
    ctx = AccessContext(el=1, scr_el3=SCR_EL3.make(NS=1, RW=1),
                        mdcr_el3=MDCR_EL3.make(NSPB=0b11, PMSEE=pmsee))
    st = ExcState(implemented=True, ee2=ee2, s2=s2, s3=s3)
    assert exc.profiling_stopped(ctx, st) == stopped


def test_el2_not_enabled_makes_pmscr_el2_ee_delegated():
    """EffectivePMSCR_EL2_EE(): 0b01 when EL2 is not enabled in the current Security state
    (Secure, no Secure EL2); PMSCR_EL1.EE then decides alone."""
    ctx = AccessContext(el=1, scr_el3=SCR_EL3.make(NS=0, RW=1),
                        mdcr_el3=MDCR_EL3.make(NSPB=0b00, PMSEE=0b01))
    st = ExcState(implemented=True, ee1=0b11, ke1=1, ee2=0b00, s1=1, owner_secure=True)
    assert exc.effective_pmscr_el2_ee(ctx, st) == exc.EE_DELEGATED
    assert exc.exception_cell(1, ctx, st) == 1 and not exc.pmbirq(ctx, st)


# --- the SPU with FEAT_SPE_EXC: PMBSR_ELx written, PMBIRQ, profiling stopped --------------

from spe_emu.arch.faults import TranslationFault  # noqa: E402
from spe_emu.spe.config import SpeConfig  # noqa: E402
from spe_emu.spe.spu import Spu  # noqa: E402
from spe_emu.sysreg import Access  # noqa: E402
from asmrun import EXIT, copy_code, spe_prologue, xregs  # noqa: E402

BUF = 0x4800_0000
S_BIT = 1 << 17
ESR_SPE_EXCEPTION = 0xF600_0002   # EC 0b111101, IL 1, ISS.FSC 0b00001, SYNC 0


def spu_in(ctx: AccessContext, fault: TranslationFault | None = None, **config) -> Spu:
    """An SPU with FEAT_SPE_EXC whose PE is in ``ctx``; its buffer writes raise ``fault``."""
    def write_va(va: int, data: bytes) -> None:
        if fault is not None:
            raise fault

    spu = Spu(SpeConfig(spe_exc=1, **config), write_va)
    spu.live_context = lambda: ctx
    el3 = AccessContext(el=3, scr_el3=ctx.scr_el3, hcr_el2=ctx.hcr_el2,
                        mdcr_el2=ctx.mdcr_el2, mdcr_el3=ctx.mdcr_el3)
    spu.write("PMBPTR_EL1", BUF, el3)
    spu.write("PMBLIMITR_EL1", (BUF + 0x1000) | 1, el3)
    return spu


def el1_context(pmsee: int, e2pb: int = 0b11) -> AccessContext:
    return AccessContext(el=1, scr_el3=SCR_EL3.make(NS=1, RW=1), hcr_el2=HCR_EL2.make(RW=1),
                         mdcr_el2=MDCR_EL2.make(E2PB=e2pb),
                         mdcr_el3=MDCR_EL3.make(NSPB=0b11, PMSEE=pmsee))


def pmbsr(spu: Spu) -> list[int]:
    return [spu.regs[f"PMBSR_EL{x}"] for x in (1, 2, 3)]


def test_registers_exist_only_with_feat_spe_exc():
    """PMBSR_EL2/EL3 are UNDEFINED (absent) and PMSCR_ELx.{EE, KE} RES0 without the feature."""
    ctx = el1_context(0b01)
    plain = Spu(SpeConfig(), lambda va, data: None)
    assert "PMBSR_EL2" not in plain.regs and "PMBSR_EL3" not in plain.regs
    plain.write("PMSCR_EL1", 0x702, ctx)
    assert plain.regs["PMSCR_EL1"] == 0x2
    spu = spu_in(ctx)
    spu.write("PMSCR_EL1", 0x702, ctx)
    assert spu.table["PMSCR_EL1"].get(spu.regs["PMSCR_EL1"], "EE") == 0b11
    assert spu.table["PMSCR_EL1"].get(spu.regs["PMSCR_EL1"], "KE") == 1


@pytest.mark.parametrize("el,pmsee,nspb,verdict", [
    (0, 0b01, 0b11, Access.UNDEFINED), (1, 0b01, 0b11, Access.UNDEFINED),
    (2, 0b01, 0b11, Access.OK), (2, 0b00, 0b11, Access.TRAP_EL3),
    (2, 0b01, 0b01, Access.TRAP_EL3), (3, 0b00, 0b00, Access.OK)])
def test_pmbsr_el2_access(el, pmsee, nspb, verdict):
    """Arm ARM D24.7.6 Accessing PMBSR_EL2 (no FEAT_NV): EL0/EL1 UNDEFINED; EL2 trapped to EL3
    by MDCR_EL3.NSPB or MDCR_EL3.PMSEE == 0b00; EL3 OK. PMBSR_EL3: EL3 only (D24.7.7)."""
    t = Spu(SpeConfig(spe_exc=1), lambda va, data: None).table
    ctx = AccessContext(el=el, scr_el3=SCR_EL3.make(NS=1, RW=1),
                        mdcr_el3=MDCR_EL3.make(NSPB=nspb, PMSEE=pmsee))
    assert t["PMBSR_EL2"].check(ctx, True) is verdict
    assert t["PMBSR_EL3"].check(ctx, False) is (Access.OK if el == 3 else Access.UNDEFINED)


def test_stage2_fault_recorded_in_pmbsr_el2():
    """PMSCR_EL2.EE = 0b10, buffer owned by EL1: a stage 2 fault goes to PMBSR_EL2 (Table
    D17-7), PMBSR_EL1 is untouched, PMBIRQ stays low, and profiling is stopped."""
    ctx = el1_context(0b01)
    spu = spu_in(ctx, TranslationFault(BUF, 0b000111, stage=2, ipa=BUF))
    spu.regs["PMSCR_EL2"] = spu.table["PMSCR_EL2"].make(EE=0b10)
    assert spu.buffer_may_be_enabled()
    written, event = spu.buffer.write_record(bytes(16))
    assert written == 0 and event.register == "PMBSR_EL2"
    assert pmbsr(spu) == [0, (0b100101 << 26) | S_BIT | 0b000111, 0]
    assert not spu.pmbirq and spu.stopped() and not spu.buffer_may_be_enabled()


def test_stage1_fault_stays_in_pmbsr_el1_and_asserts_pmbirq():
    ctx = el1_context(0b01)
    spu = spu_in(ctx, TranslationFault(BUF, 0b000111))
    spu.regs["PMSCR_EL2"] = spu.table["PMSCR_EL2"].make(EE=0b10)
    spu.buffer.write_record(bytes(16))
    assert pmbsr(spu) == [(0b100100 << 26) | S_BIT | 0b000111, 0, 0]
    assert spu.pmbirq and spu.stopped()


def test_trap_all_to_el3_and_pmbsr_el1_exception_instead_of_pmbirq():
    """MDCR_EL3.PMSEE = 0b11: a buffer full event is recorded in PMBSR_EL3. With PMSCR_EL1.EE
    = 0b11 instead, PMBSR_EL1 records it and PMBIRQ stays low: the event is an SPE Profiling
    exception to EL1 (taken from EL0; from EL1 with KE = 1 and PSTATE.PM = 0)."""
    ctx = el1_context(0b11)
    spu = spu_in(ctx)
    spu.regs["PMBPTR_EL1"] = BUF + 0x1000 - 64 - 8
    assert spu.buffer.write_record(bytes(16))[1].register == "PMBSR_EL3"
    assert pmbsr(spu) == [0, 0, S_BIT | 0b000001]
    assert spu.stopped() and exc.pending_exception(replace_el(ctx, 1), spu.exc_state(ctx)) == 3

    ctx = el1_context(0b01)
    spu = spu_in(ctx)
    spu.regs["PMSCR_EL2"] = spu.table["PMSCR_EL2"].make(EE=0b01)
    spu.regs["PMSCR_EL1"] = spu.table["PMSCR_EL1"].make(EE=0b11, KE=1)
    spu.regs["PMBPTR_EL1"] = BUF + 0x1000 - 64 - 8
    assert spu.buffer.write_record(bytes(16))[1].register == "PMBSR_EL1"
    assert pmbsr(spu) == [S_BIT | 0b000001, 0, 0]
    assert not spu.pmbirq
    assert exc.pending_exception(ctx, spu.exc_state(ctx)) == 1
    assert exc.pending_exception(replace_el(ctx, 2), spu.exc_state(ctx)) is None


def replace_el(ctx: AccessContext, el: int) -> AccessContext:
    return AccessContext(el=el, scr_el3=ctx.scr_el3, hcr_el2=ctx.hcr_el2,
                         mdcr_el2=ctx.mdcr_el2, mdcr_el3=ctx.mdcr_el3)


# --- on the machine: EL3 delegates to EL2, EL2 traps every event (PMSCR_EL2.EE = 0b11) ----

TO_EL1 = """
    ldr x1, =(0b11 << 12) | (0b01 << 51)   // MDCR_EL3: NSPB = 0b11, PMSEE = 0b01 (delegated)
    msr mdcr_el3, x1
    ldr x1, =(1 << 10) | (1 << 8) | 1      // SCR_EL3: RW, HCE, NS
    msr scr_el3, x1
    movz x7, #0x4100, lsl #16
    msr sp_el2, x7
    adr x1, el2
    msr elr_el3, x1
    mov x1, #0x3c9                         // EL2h, DAIF masked
    msr spsr_el3, x1
    eret
el2:
    adr x0, vectors_el2
    msr vbar_el2, x0
    mov x0, #(1 << 31)                     // HCR_EL2.RW
    msr hcr_el2, x0
    mov x0, #(0b11 << 12)                  // MDCR_EL2.E2PB = 0b11: EL1 owns the buffer
    msr mdcr_el2, x0
    mov x0, #{ee2:#x}
    msr s3_4_c9_c9_0, x0                   // PMSCR_EL2.EE
    msr sp_el1, x7
    adr x5, el1
    msr elr_el2, x5
    mov x6, #0x3c5
    msr spsr_el2, x6
    eret
el1:
"""
"""From EL3: MDCR_EL3.PMSEE = 0b01 (delegated to EL2), NSPB = 0b11; EL2 sets
PMSCR_EL2 = {ee2}, MDCR_EL2.E2PB = 0b11 (EL1 owns the buffer) and VBAR_EL2 =
``vectors_el2``, then ERETs to EL1h at ``el1`` (format with ee2)."""
EL3_TO_EL1 = TO_EL1 + """    movz x0, #0x4800, lsl #16
    msr pmbptr_el1, x0
    movz x1, #0x4800, lsl #16
    movk x1, #0x1000
    orr x1, x1, #1                         // a 4 KiB buffer: fills after ~64 records
    msr pmblimitr_el1, x1
    mov x2, #0x100
    msr pmsirr_el1, x2
    msr pmsicr_el1, xzr
    mov x3, #0b10
    msr pmscr_el1, x3                      // E1SPE
    isb
    ldr x4, =60000
loop:
    subs x4, x4, #1
    b.ne loop
    msr pmscr_el1, xzr
    isb
    psb csync
    dsb nsh
    mrs x20, pmbsr_el1
    mrs x21, pmbptr_el1
    hvc #0
    .balign 2048
vectors_el2:
    .skip 0x400
    mrs x22, s3_4_c9_c10_3                 // PMBSR_EL2
    mrs x20, pmbsr_el1
    mrs x21, pmbptr_el1
    mrs x23, esr_el2
    mov x0, #0
""" + EXIT


def test_buffer_full_recorded_in_pmbsr_el2_on_the_machine(tmp_path):
    """FEAT_SPE_EXC on a bare-metal run: MDCR_EL3.PMSEE = 0b01, PMSCR_EL2.EE = 0b11 (trap all):
    the buffer full event of an EL1-owned buffer is recorded in PMBSR_EL2 (Table D17-7),
    PMBSR_EL1 stays 0, profiling stops (SPEProfilingStopped()), PMBIRQ stays low and the SPE
    Profiling exception is taken from EL1 to EL2 (Table D17-9: EE 0b11, KE 0, TGE 0; ESR_EL2
    EC 0b111101); without the EL2 enable (EE = 0b00) the same run records it in PMBSR_EL1,
    asserts PMBIRQ and reaches EL2 by its HVC."""
    from asmrun import run_asm

    for ee2, (el1, el2) in ((0b11, (0, S_BIT | 0b1)), (0b00, (S_BIT | 0b1, 0))):
        m = run_asm(EL3_TO_EL1.format(ee2=ee2 << 8), tmp_path, boot_el=3,
                    spe=SpeConfig(spe_exc=1))
        assert m.result.exit_status == 0
        pmbsr1, ptr, pmbsr2, esr2 = xregs(m, 20, 21, 22, 23)
        assert (pmbsr1, pmbsr2) == (el1, el2)
        assert esr2 == (ESR_SPE_EXCEPTION if ee2 else 0x5A00_0000)
        assert 0x4800_1000 - 64 < ptr <= 0x4800_1000
        assert m.spu.pmbirq == bool(el1)


@pytest.mark.parametrize("e2h,ee2,reaches", [(1, 0b01, "PMBSR_EL2"), (1, 0b00, "PMBSR_EL1"),
                                             (0, 0b11, "PMBSR_EL1")])
def test_pmbsr_el1_at_el2_in_the_host_is_pmbsr_el2(e2h, ee2, reaches):
    """Arm ARM D24.7.5 (Accessing PMBSR_EL1): at EL2 with HCR_EL2.E2H = 1 and the effective
    PMSCR_EL2.EE != 0b00, the PMBSR_EL1 encoding reaches PMBSR_EL2."""
    ctx = AccessContext(el=2, scr_el3=SCR_EL3.make(NS=1, RW=1),
                        hcr_el2=HCR_EL2.make(RW=1, E2H=e2h, TGE=e2h),
                        mdcr_el3=MDCR_EL3.make(NSPB=0b11, PMSEE=0b01))
    spu = Spu(SpeConfig(spe_exc=1), lambda va, data: None)
    spu.live_context = lambda: ctx
    spu.regs["PMSCR_EL2"] = spu.table["PMSCR_EL2"].make(EE=ee2)
    spu.write("PMBSR_EL1", S_BIT | 0b1, ctx)
    assert spu.regs[reaches] == S_BIT | 0b1
    assert spu.read("PMBSR_EL1", ctx) == S_BIT | 0b1
    other = {"PMBSR_EL1", "PMBSR_EL2"} - {reaches}
    assert spu.regs[other.pop()] == 0


# --- the SPE Profiling exception taken (CheckForSPEException(), Table D17-8) ---------------

def exc_taken(pmscr: int) -> str:
    """EL3 -> EL2 (PMSCR_EL2.EE = 0b01: left to PMSCR_EL1.EE) -> EL1, a buffer 4 KiB below its
    limit (fills after ~100 records) and PMSCR_EL1 = ``pmscr``; a loop, then ERET to EL0, whose SVC ends the
    run; the EL1 vectors record ESR/ELR/SPSR_EL1 and exit with 1 (current EL) or 2 (lower
    EL)."""
    return (TO_EL1.format(ee2=0b01 << 8) + spe_prologue(pmscr, 0x4800_0000, limit=0x10000,
                                                        ptr=0x4800_F000)
            + EXC_TAKEN_BODY)


EXC_TAKEN_BODY = """
    ldr x4, =60000
loop:
    subs x4, x4, #1
    b.ne loop
    mrs x20, pmbsr_el1
    adr x5, el0
    msr elr_el1, x5
    msr spsr_el1, xzr                      // EL0t, DAIF clear
    eret
el0:
    svc #0
    .balign 2048
vectors:
    .skip 0x200
    mrs x22, esr_el1                       // current EL, SPx
    mrs x23, elr_el1
    mrs x24, spsr_el1
    mov x0, #1
""" + EXIT + """
    .balign 1024
    mrs x22, esr_el1                       // lower EL, AArch64
    mrs x23, elr_el1
    mrs x24, spsr_el1
    mov x0, #2
""" + EXIT + """
    .balign 2048
vectors_el2:                               // (nothing is taken to EL2)
"""

ESR_SVC0 = 0x5600_0000


@pytest.mark.parametrize("mode", ["fast", "reference"])
@pytest.mark.parametrize("spe_exc,ke,vector,esr", [
    (1, 1, 1, ESR_SPE_EXCEPTION),   # D17-8: EE 0b1X, KE 1, PM 0: from EL1, taken to EL1
    (1, 0, 2, ESR_SPE_EXCEPTION),   # KE 0: masked at EL1 (C), taken after the ERET to EL0
    (0, 1, 2, ESR_SVC0),            # no FEAT_SPE_EXC: PMBIRQ (GIC off), the EL0 SVC next
])
def test_spe_profiling_exception_taken(tmp_path, mode, spe_exc, ke, vector, esr):
    """Arm ARM D17.8, CheckForSPEException() and Table D17-8: with MDCR_EL3.PMSEE = 0b01,
    PMSCR_EL2.EE = 0b01 and PMSCR_EL1.EE = 0b11, a buffer-full event of an EL1-owned buffer
    sets PMBSR_EL1.S and, PMBIRQ being disabled (SPEInterruptEnabled() is FALSE), makes an SPE
    Profiling exception pending: taken at once from EL1 when PMSCR_EL1.KE = 1 (vector +0x200,
    ELR_EL1 in the loop), masked at EL1 when KE = 0 and taken from EL0 right after the ERET
    (vector +0x400, ELR_EL1 = the first EL0 instruction, SPSR_EL1 = the ERET's target
    state); ESR_EL1 = EC 0b111101, IL 1, ISS.FSC 0b00001 (Profiling Buffer management
    event), SYNC 0 (Arm ARM ESR_ELx, ISS encoding for a Profiling exception)."""
    from asmrun import asm_machine

    pmscr = 0b10 | 0b11 << 8 | ke << 10
    m = asm_machine(exc_taken(pmscr), tmp_path, boot_el=3, mode=mode,
                    spe=SpeConfig(spe_exc=spe_exc))
    m.result = m.run()
    assert m.result.exit_status == vector
    esr_el1, elr, spsr, loops_left, pmbsr1 = xregs(m, 22, 23, 24, 4, 20)
    assert esr_el1 == esr
    if vector == 1:
        assert loops_left > 0   # (taken inside the loop, at the stop after the event)
        assert 0x4000_0000 < elr < 0x4000_0200
        assert spsr & 0xF == 0b0101   # from EL1h
    elif spe_exc:
        assert pmbsr1 == S_BIT | 0b1   # (pending at EL1 until the ERET)
        assert spsr == 0 and loops_left == 0
    else:
        assert m.spu.pmbirq


@pytest.mark.parametrize("spe_exc", [0, 1])
def test_id_aa64dfr2_el1_spe_exc(tmp_path, spe_exc):
    """Arm ARM D24.2.82: ID_AA64DFR2_EL1.SPE_EXC (bits [19:16]) is 0b0001 with FEAT_SPE_EXC,
    else 0b0000; the other fields read 0 (RAZ in Unicorn's CPU)."""
    from asmrun import run_asm

    m = run_asm("mrs x20, s3_0_c0_c5_2\nmov x0, #0\n" + EXIT, tmp_path,
                spe=SpeConfig(spe_exc=spe_exc))
    assert m.result.exit_status == 0
    assert xregs(m, 20) == [spe_exc << 16]


PM_MASKS = """
    adr x0, vectors
    msr vbar_el1, x0
    mov x3, #(0b11 << 8 | 1 << 10)         // PMSCR_EL1: EE = 0b11, KE = 1
    msr pmscr_el1, x3
    isb
    mov x25, #0
    mov x26, #0
    svc #1
    mov x0, #3                             // (not reached: the exception is taken first)
""" + EXIT + """
    .balign 2048
vectors:
    .skip 0x200
    mrs x22, esr_el1                       // current EL, SPx
    lsr x9, x22, #26
    cmp x9, #0x15
    b.ne spe_taken
    cbnz x26, nested
    mov x26, #1
    mrs x19, elr_el1
    mrs x24, spsr_el1                      // the SVC's: PM 0
    movz x0, #0x2, lsl #16                 // PMBSR_EL1.S: pending, masked by PSTATE.PM = 1
    msr pmbsr_el1, x0
    isb
    nop
    mov x25, #1                            // the handler ran on
    eret                                   // PSTATE.PM := 0: taken right after
spe_taken:
    mov x20, x22
    mrs x23, elr_el1
    mrs x21, spsr_el1                      // PM 0 (restored by the ERET)
    msr pmbsr_el1, xzr
    isb
    svc #2
nested:
    mrs x27, spsr_el1                      // the nested SVC's: PM 1
    mov x0, #1
""" + EXIT


# PM_MASKS with its vector table and handlers copied at run time to RUNTIME_VECTORS, where
# no loaded image holds them, and PMBSR_EL1 written by a subroutine of the loaded image (an
# SPE register access from the copy would make the fast loop follow the copied code, and
# hook its ERET, by itself): only the exception entry to the copied table can.
RUNTIME_VECTORS = 0x4200_0000
PM_MASKS_RUNTIME = PM_MASKS.replace("""    adr x0, vectors
    msr vbar_el1, x0
""", copy_code("vectors", "vectors_end", RUNTIME_VECTORS) + f"""
    movz x0, #{RUNTIME_VECTORS >> 16:#x}, lsl #16
    msr vbar_el1, x0
    adr x28, set_pmbsr
""", 1).replace("""    movz x0, #0x2, lsl #16                 // PMBSR_EL1.S: pending, masked by PSTATE.PM = 1
    msr pmbsr_el1, x0
""", """    blr x28                                // PMBSR_EL1.S: pending, masked by PSTATE.PM = 1
""", 1).replace("""    .balign 2048
vectors:
""", """set_pmbsr:
    movz x0, #0x2, lsl #16
    msr pmbsr_el1, x0
    ret
    .balign 2048
vectors:
""", 1) + "vectors_end:\n"


@pytest.mark.parametrize("runtime", [False, True])
@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_pstate_pm_masks_the_exception_in_handlers(tmp_path, mode, runtime):
    """Arm ARM D1.4 with FEAT_SPE_EXC: an exception entry sets PSTATE.PM to 1 (its old value in
    SPSR_ELx.PM, bit 32) and the exception return restores it; D17-8 (EE 0b1X, KE 1): at EL1
    the SPE Profiling exception is masked while PM is 1 ("B"). A PMBSR_EL1.S set in an SVC
    handler leaves the handler running; the exception is taken right after its ERET (ELR =
    the SVC's return address, SPSR.PM = 0), and an SVC in its handler saves PM = 1."""
    from asmrun import asm_machine

    # (runtime: the handlers run from a copy made at run time, whose ERET no loaded image
    # holds: the fast loop hooks it when the first exception enters the copied table)
    m = asm_machine(TO_EL1.format(ee2=0b01 << 8) + (PM_MASKS_RUNTIME if runtime else PM_MASKS)
                    + "\n    .balign 2048\nvectors_el2:\n",
                    tmp_path, boot_el=3, mode=mode, spe=SpeConfig(spe_exc=1))
    m.result = m.run()
    assert m.result.exit_status == 1
    ran_on, esr_el1, elr, svc_elr, svc_spsr, exc_spsr, nested_spsr = xregs(
        m, 25, 20, 23, 19, 24, 21, 27)
    assert ran_on == 1 and esr_el1 == ESR_SPE_EXCEPTION and elr == svc_elr
    assert (svc_spsr >> 32 & 1, exc_spsr >> 32 & 1, nested_spsr >> 32 & 1) == (0, 0, 1)
