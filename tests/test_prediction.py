"""Samples inside a translated block taken from the block's start state (issue 3; the run
loop's "predicted" path, docs/model.md "Samples inside a block").

* ``a64.written_registers`` is a superset of what an instruction writes: checked against
  execution in Unicorn (every register an instruction changed is in the set) for random
  encodings of every modelled group, and on a table of forms.
* The machine's predicted samples give the same records as the reference mode where the
  prediction is easy to get wrong: operands written earlier in the block (writeback, ALU,
  loads), a branch resolved by the PC it leaves to, an earlier instruction that traps (the
  prediction is dropped), a trapped SPE register read after the sampled instruction (the
  sample is committed first), and two interval events in one block.
"""

from __future__ import annotations

import ctypes
import random
import struct

import pytest
from asmrun import EL0_SKIP_HANDLER, SPE_DRAIN, run_asm, spe_prologue
from hypothesis import given, settings
from hypothesis import strategies as st
from test_a64 import (DATA_HI, DATA_LO, LDST_GROUPS, Machine, ks_word, make_rng, normalize,
                      random_pointer)
from unicorn import arm64_const as A

from spe_emu.cpu.a64 import X_REGS, decode, written_registers
from spe_emu.cpu.a64 import evaluator as a64_evaluator
from spe_emu import native
from spe_emu.cpu.machine import CAPTURE_REGS, RECORD_BYTES_BOUND
from spe_emu.cpu.machine import Machine as SpeMachine
from spe_emu.spe import packets as P
from spe_emu.spe.config import SpeConfig
from spe_emu.spe.interval import IntervalCounter, Xorshift64
from spe_emu.spe.packets import iter_records
from spe_emu.spe.records import RecordBuilder, Sample
from spe_emu.spe.registers import spe_registers

SP, NZCV = A.UC_ARM64_REG_SP, A.UC_ARM64_REG_NZCV
ALL = X_REGS + (SP, NZCV)


# ------------------------------------------------------------------ written_registers -----
FORMS = [
    ("ldr x0, [x1], #8", {X_REGS[0], X_REGS[1]}),
    ("ldr x0, [x1, #8]!", {X_REGS[0], X_REGS[1]}),
    ("ldr x0, [x1, #8]", {X_REGS[0]}),
    ("str x0, [x1, #8]", set()),                  # (a store writes no register)
    ("str x0, [x1], #8", {X_REGS[1]}),
    ("stp x29, x30, [sp, #-16]!", {SP}),
    ("ldp x2, x3, [x4]", {X_REGS[2], X_REGS[3]}),
    ("add x1, x1, #8", {X_REGS[1]}),
    ("add sp, sp, #16", {SP}),
    ("adds x1, x2, #1", {X_REGS[1], NZCV}),
    ("cmp x1, #3", {SP, NZCV}),                   # Rd = 31 (XZR) reported as SP: superset
    ("mov x1, x2", {X_REGS[1]}),
    ("ands x1, x2, x3", {X_REGS[1], NZCV}),
    ("orr x1, x2, #0xff", {X_REGS[1]}),
    ("movk x5, #1, lsl #16", {X_REGS[5]}),
    ("csel x1, x2, x3, eq", {X_REGS[1]}),
    ("ccmp x1, x2, #0, ne", {X_REGS[0], NZCV}),   # (the nzcv field read as Rd: superset)
    ("madd x1, x2, x3, x4", {X_REGS[1]}),
    ("fmov x7, d0", {X_REGS[7], NZCV}),
    ("fadd d0, d1, d2", set()),                   # SIMD&FP registers only
    ("fcmp d0, d1", {NZCV}),
    ("umov w3, v0.s[1]", {X_REGS[3]}),
    ("fcvtzs x2, d0, #3", {X_REGS[2]}),
    ("ldr q1, [x1, x0]", set()),
    ("ldr q0, [x3], #16", {X_REGS[3]}),
    ("ldp d0, d1, [x5, #16]!", {X_REGS[5]}),
    ("ld1 {v0.16b}, [x3], #16", {X_REGS[3]}),
    ("ldxr x1, [x2]", None),                       # exclusive family: Rs/Rt/Rt2 fields
    ("mrs x3, tpidr_el0", {X_REGS[3]}),
    ("nop", set()),
    ("dmb ish", set()),
    ("hint #17", set()),                           # PSB CSYNC
    ("msr tpidr_el0, x0", "unmodelled"),
    ("b #0x100", "unmodelled"),
    ("svc #0", "unmodelled"),
    ("dc civac, x0", "unmodelled"),
]


def test_atomics_and_pointer_auth_loads_are_not_taken_for_stores():
    # Bits 23:22 are A:R in an atomic and M:S in LDRAA/LDRAB, not a load/store opc: both
    # write Rt even when the bits are 0 (encodings from GNU as, -march=armv8.3-a).
    assert written_registers(0xF8210062) == {X_REGS[2]}            # ldadd x1, x2, [x3]
    assert written_registers(0xF8201CA4) == {X_REGS[4], X_REGS[5]}  # ldraa x4, [x5, #8]!


@pytest.mark.parametrize("text,expected", FORMS, ids=[f[0] for f in FORMS])
def test_written_registers_forms(text, expected):
    got = written_registers(ks_word(text))
    if expected == "unmodelled":
        assert got is None
    elif expected is None:
        assert got is not None and X_REGS[1] in got
    else:
        assert got == frozenset(expected)


def _run_all(m: Machine, rng: random.Random, word: int, align: int):
    """Executes ``word`` once with random pointers/values everywhere; returns the registers
    (X0-X30, SP, NZCV) before and after, or None if it did not run cleanly."""
    values = {rid: random_pointer(rng, align) for rid in X_REGS}
    values[SP] = random_pointer(rng, 16 if align < 16 else align)
    values[NZCV] = rng.getrandbits(4) << 28
    m.set_regs(values)
    for q in range(32):
        m.uc.reg_write(A.UC_ARM64_REG_Q0 + q, rng.getrandbits(128))
    before = m.snapshot(ALL)
    _, _, intr = m.step(m.alloc(1), word)
    if intr or m.error is not None:
        return None
    return before, m.snapshot(ALL)


def _check_superset(m: Machine, rng: random.Random, word: int, align: int) -> bool:
    written = written_registers(word)
    if written is None:
        return False
    ran = _run_all(m, rng, word, align)
    if ran is None:
        return False
    before, after = ran
    changed = {rid for rid in ALL if before[rid] != after[rid]}
    assert changed <= written, (f"{word:#010x} ({decode(word).mnemonic_class}) changed "
                                f"{sorted(changed - written)} outside {sorted(written)}")
    return True


@pytest.fixture(scope="module")
def uc_machine():
    return Machine()


@pytest.mark.parametrize("name,value,mask,align,expected", LDST_GROUPS,
                         ids=[g[0] for g in LDST_GROUPS])
def test_written_registers_cover_load_store_execution(uc_machine, name, value, mask, align,
                                                      expected):
    rng = make_rng(f"written {name}")
    checked = 0
    for _ in range(3000):
        word = normalize(rng, name, (rng.getrandbits(32) & ~mask) | value)
        if word is None:
            continue
        checked += _check_superset(uc_machine, rng, word, align)
        if checked >= 120:
            break
    assert checked >= 60, f"{name}: only {checked} encodings executed"


# Data processing (immediate) 100x and (register) x101 (Arm ARM C4.1), and the SIMD&FP forms
# that write general-purpose registers or flags: conversions between FP and integer (FMOV,
# FCVT*), FP compare, UMOV/SMOV. (Random SIMD&FP words at large can abort Unicorn.)
DP_GROUPS = [("dp immediate", 0x10000000, 0x1C000000), ("dp register", 0x0A000000, 0x0E000000),
             ("fp<->integer", 0x1E200000, 0x7F20FC00), ("fp compare", 0x1E202000, 0xFF203C00),
             ("umov/smov", 0x0E002C00, 0xBFE0EC00)]


@pytest.mark.parametrize("name,value,mask", DP_GROUPS, ids=[g[0] for g in DP_GROUPS])
def test_written_registers_cover_data_processing_execution(uc_machine, name, value, mask):
    rng = make_rng(f"written {name}")
    checked = 0
    for _ in range(6000):
        word = (rng.getrandbits(32) & ~mask) | value
        checked += _check_superset(uc_machine, rng, word, 1)
        if checked >= 300:
            break
    assert checked >= 100, f"{name}: only {checked} encodings executed"


def test_unmodelled_groups_are_none():
    rng = random.Random(5)
    for _ in range(2000):
        word = rng.getrandbits(32)
        op0 = (word >> 25) & 0xF
        if op0 in (0b0000, 0b0001, 0b0010, 0b0011):   # SME, unallocated, SVE
            assert written_registers(word) is None, hex(word)
        if op0 & 0b1110 == 0b1010 and not (word & 0xFFF00000 == 0xD5300000 or
                                           word & 0xFFFFF01F in (0xD503201F, 0xD503301F)):
            assert written_registers(word) is None, hex(word)   # branches, MSR, SYS...


# ------------------------------------------------------------------ record size bound -----
def test_largest_record_fits_the_bound():
    builder = RecordBuilder(SpeConfig())
    info = decode(ks_word("ldr x0, [x1]"))
    s = Sample(pc=(1 << 56) - 4, el=1, ns=1, info=info, data_va=(1 << 64) - 8,
               data_pa=(1 << 52) - 8, timestamp=(1 << 64) - 1, context=0xFFFFFFFF,
               context2=0xFFFFFFFF)
    data = builder.build(s).data
    assert len(data) == 60
    assert len(data) <= RECORD_BYTES_BOUND
    assert len(data) <= 1 << 6   # the smallest 2**PMSIDR_EL1.MaxSize (_record_room counts it)


# ------------------------------------------------------------------ interval look-ahead ---
@settings(max_examples=200, deadline=None)
@given(interval=st.integers(1, 8), rnd=st.booleans(), ernd=st.integers(0, 1),
       seed=st.integers(0, 1 << 32), count=st.integers(0, 3000))
def test_members_between_events_predicts_fire(interval, rnd, ernd, seed, count):
    cfg = SpeConfig(ernd=ernd)
    table = spe_registers(cfg)
    counter = IntervalCounter(table["PMSICR_EL1"], table["PMSIRR_EL1"], ernd,
                              Xorshift64(seed), cfg.zero_interval)
    pmsirr = table["PMSIRR_EL1"].make(INTERVAL=interval, RND=int(rnd))
    counter.initialize(pmsirr)
    counter.advance(min(count, counter.members_to_next_event() - 1))
    state = (counter.count, counter.ecount, counter.rng.state)
    gap = counter.members_between_events(pmsirr)
    assert (counter.count, counter.ecount, counter.rng.state) == state
    counter.fire(pmsirr)
    assert counter.members_to_next_event() == gap


# ------------------------------------------------------------------ the machine -----------
BUF = 0x4200_0000
DATA = 0x4180_0000
MODES = ("fast", "reference")


def _prologue(pmscr: int, interval: int = 1, rnd: bool = False) -> str:
    return spe_prologue(pmscr, BUF, pmsirr=(interval << 8) | int(rnd))


def _loop(pmscr: int, count: int, body: str, setup: str = "") -> str:
    """A program that profiles (PMSCR_EL1 = ``pmscr``, INTERVAL 1) ``count`` runs of the
    page-aligned loop ``body`` (which falls through to its SUBS/B.NE) after ``setup``."""
    return _prologue(pmscr) + f"""{setup}
    mov x20, #{count}
    .balign 4096
loop:
{body}    subs x20, x20, #1
    b.ne loop
""" + SPE_DRAIN + "    .balign 2048\nvectors:\n"


# Python predicts samples (Machine._predict) with this model feed only: with "every" a sample
# the native hook does not capture is taken in front of its instruction
PREDICTING = "sampled"


def _run_both(text: str, tmp_path, spe: SpeConfig | None = None):
    out = {}
    for mode in MODES:
        m = run_asm(text, tmp_path / mode, mode=mode, spe=spe)
        end = m.uc.reg_read(A.UC_ARM64_REG_X21)
        regs = [m.uc.reg_read(r) for r in X_REGS]
        out[mode] = (m, bytes(m.uc.mem_read(BUF, end - BUF)), regs, m.result.population,
                     m.result.instructions)
    fast, ref = out["fast"], out["reference"]
    assert fast[1] == ref[1], "records differ from the reference mode"
    assert fast[2:] == ref[2:]
    assert fast[0].result.samples > 20
    return fast[0], list(iter_records(fast[1]))


def test_dependent_operands_match_reference(tmp_path):
    # Loads whose base an earlier instruction of the same block changed (post/pre-index
    # writeback, ADD, a load, LDP writeback), and one whose base nothing changed. E1SPE|CX|PA|TS.
    body = """
    ldr x5, [x1], #8
    ldr x6, [x1]
    add x1, x1, #16
    ldr x7, [x1, #8]!
    ldr x8, [x1, #-8]
    ldr x2, [x3]
    ldr x9, [x2]
    ldp x10, x11, [x4, #16]!
    str x9, [x4, #8]
    ldr x12, [x13]
    add x14, x14, x5
    str x5, [x4]
    ldr x15, [x3]
    ldr x15, [x15]
    subs x20, x20, #1
    b.ne loop
"""
    text = _prologue(0b111010) + f"""
    movz x1, #{DATA >> 16:#x}, lsl #16
    add x3, x1, #0x800
    str x3, [x3]
    add x4, x1, #0x1000
    add x13, x1, #0x40
    mov x20, #600
loop:
{body}
""" + SPE_DRAIN + "    .balign 2048\nvectors:\n"
    m, records = _run_both(text, tmp_path, SpeConfig(seed=3))
    assert m.sample_paths["predicted"] + m.sample_paths["captured"] > 15
    assert m.sample_paths["evaluated"] > 0  # loads through registers loaded before them
    assert m.sample_paths["split"] > 0      # ... with a store in between: not evaluated
    assert any(r.data_va is not None for r in records)


@pytest.mark.parametrize("rnd", [True, False], ids=["python", "native"])
def test_branch_resolved_by_next_pc_matches_reference(tmp_path, rnd):
    # Conditional branches whose flags/register are set in the same block (CMP; B.cond,
    # CBZ after a load, TBZ, BR to a computed address), some taken and some not. With RND
    # the interval has no fixed gap and Python predicts; without, the native hook captures.
    text = _prologue(0b111010, interval=1, rnd=rnd) + """
    mov x20, #3000
    adr x15, target
loop:
    and x1, x20, #3
    cmp x1, #2
    b.lo skip
    nop
skip:
    ands x2, x20, #4
    cbz x2, zero
    nop
zero:
    tbnz x20, #3, bitset
    nop
bitset:
    mov x16, x15
    br x16
    nop
target:
    subs x20, x20, #1
    b.ne loop
""" + SPE_DRAIN + "    .balign 2048\nvectors:\n"
    m, records = _run_both(text, tmp_path, SpeConfig(seed=9, model_feed=PREDICTING))
    assert m.sample_paths["captured" if not rnd else "predicted"] > 20
    kinds = {(r.op_class, bool(r.events >> P.EV_NOT_TAKEN & 1)) for r in records}
    assert (P.OP_CLASS_BRANCH, True) in kinds and (P.OP_CLASS_BRANCH, False) in kinds


def test_trap_before_the_sampled_instruction_drops_the_prediction(tmp_path):
    # EL0 block: a CNTVCT_EL0 read that traps at run time (CNTKCTL_EL1 = 0), then NOPs that
    # the interval lands on. The prediction made at the block start is dropped by the trap;
    # the member is sampled after the handler returns, exactly as the reference does.
    text = _prologue(0b111011) + """
    adr x1, el0code
    msr elr_el1, x1
    msr spsr_el1, xzr
    movz x4, #2000
    eret
el0code:
    mrs x0, cntvct_el0
""" + "    nop\n" * 24 + """
    subs x4, x4, #1
    b.ne el0code
""" + EL0_SKIP_HANDLER + SPE_DRAIN
    m, records = _run_both(text, tmp_path, SpeConfig(seed=4))
    assert m.sample_paths["dropped"] > 0
    assert m.sample_paths["captured"] > 0
    assert {r.el for r in records} >= {0}


def test_spe_register_read_after_the_sample_commits_it_first(tmp_path):
    # The sampled NOPs share a block with a trapped PMBPTR_EL1 read: the guest sees the
    # pointer after the record (summed into x14), in both modes.
    text = _prologue(0b111010) + """
    mov x20, #2000
    mov x14, #0
loop:
""" + "    nop\n" * 12 + """
    mrs x5, pmbptr_el1
    add x14, x14, x5
    subs x20, x20, #1
    b.ne loop
""" + SPE_DRAIN + "    .balign 2048\nvectors:\n"
    m, _ = _run_both(text, tmp_path, SpeConfig(seed=2))
    assert m.sample_paths["captured"] > 20


def test_two_events_in_one_block(tmp_path):
    # ERnd = 1 with RND: the secondary counter selects at a random member after each reload,
    # so two interval events can fall inside one long block; the prediction must not run past
    # the second one.
    text = _prologue(0b111010, interval=1, rnd=True) + """
    mov x20, #3000
loop:
""" + "    add x1, x1, #1\n" * 60 + """
    subs x20, x20, #1
    b.ne loop
""" + SPE_DRAIN + "    .balign 2048\nvectors:\n"
    m, _ = _run_both(text, tmp_path, SpeConfig(ernd=1, seed=11, model_feed=PREDICTING))
    assert m.sample_paths["predicted"] > 20


def test_captured_samples_keep_the_fixed_interval(tmp_path):
    # INTERVAL 1 without RND: an event every 257 members, captured by the native hook in long
    # NOP blocks (PMSCR_EL1 TS on: every record carries its instruction number).
    text = _loop(0b111010, 400, "    nop\n" * 500)
    m, records = _run_both(text, tmp_path, SpeConfig(seed=12))
    assert m.sample_paths["captured"] > 100
    stamps = [r.timestamp for r in records]
    assert all(b - a == 257 for a, b in zip(stamps, stamps[1:]))


# ------------------------------------------------------------------ the native hook -------
READ_BATCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32),
                              ctypes.POINTER(ctypes.c_void_p), ctypes.c_int)
STOP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class FakeUnicorn:
    """The two libunicorn functions the hook calls: register values are 0x1000 + id."""

    def __init__(self):
        self.stops = 0
        self.read_batch = READ_BATCH(self._read)
        self.stop = STOP(self._stop)

    def _read(self, uc, ids, vals, count):
        for i in range(count):
            ctypes.c_uint64.from_address(vals[i]).value = 0x1000 + ids[i]
        return 0

    def _stop(self, uc):
        self.stops += 1
        return 0


def _counter(fake: FakeUnicorn, *, insns=1000, event=1005, gap=257, budget=4,
             limit=10**9) -> native.SpeCounter:
    c = native.SpeCounter()
    c.insns, c.stop_at, c.event_at, c.gap = insns, event, event, gap
    c.cap_budget, c.limit = budget, limit
    c.emu_stop = ctypes.cast(fake.stop, ctypes.c_void_p).value
    c.reg_read_batch = ctypes.cast(fake.read_batch, ctypes.c_void_p).value
    for i, rid in enumerate(CAPTURE_REGS):
        c.reg_ids[i] = rid
    return c


def _hook(c: native.SpeCounter, address: int, n: int) -> None:
    native.library().spe_block_hook(None, ctypes.c_uint64(address), ctypes.c_uint32(4 * n),
                                    ctypes.byref(c))


def test_native_hook_captures_with_a_verdict():
    fake = FakeUnicorn()
    c = _counter(fake)
    assert native.verdict_add(c, 0x8000, 10, 5, 1)
    _hook(c, 0x8000, 10)                     # instructions 1000..1009 hold event 1005
    assert fake.stops == 0 and c.cap_count == 1 and c.insns == 1010
    cap = c.caps[0]
    assert (cap.index, cap.pc) == (1005, 0x8000 + 4 * 5)
    assert [cap.regs[i] for i in range(len(CAPTURE_REGS))] == [0x1000 + r for r in CAPTURE_REGS]
    assert c.event_at == c.stop_at == 1005 + 257 and c.cap_budget == 3


@pytest.mark.parametrize("case", ["no verdict", "no budget", "limit", "forced stop",
                                  "next event in the block", "no fixed gap"])
def test_native_hook_stops_instead_of_capturing(case):
    fake = FakeUnicorn()
    c = _counter(fake, budget=0 if case == "no budget" else 4,
                 limit=1008 if case == "limit" else 10**9,
                 gap=3 if case == "next event in the block" else
                 0 if case == "no fixed gap" else 257)
    if case != "no verdict":
        native.verdict_add(c, 0x8000, 10, 5, 1)
    if case == "forced stop":
        c.stop_at = 1000
    _hook(c, 0x8000, 10)
    assert fake.stops == 1 and c.cap_count == 0 and c.insns == 1000
    assert (c.stop_block, c.stop_block_insns) == (0x8000, 10)


def test_native_hook_sees_a_new_stop_point_after_counting_fast():
    # Blocks that end before stop_at are counted on the hook's one-compare path (fast_limit);
    # a stop_at set from Python afterwards (as a hook in the middle of a block does) must
    # still stop the next block.
    fake = FakeUnicorn()
    c = _counter(fake, event=10**6)
    for _ in range(3):
        _hook(c, 0x8000, 10)
    assert fake.stops == 0 and c.insns == 1030 and c.fast_limit == 10**6
    c.stop_at = c.insns
    _hook(c, 0x8000, 10)
    assert fake.stops == 1 and c.insns == 1030 and c.stop_block == 0x8000


@pytest.mark.parametrize("mode", [2, 3])
def test_native_hook_completes_a_capture_at_the_next_block(mode):
    # Modes 2 (branch outcome from the next PC) and 3 (registers at the block's end): the
    # capture is completed when the next block is entered.
    fake = FakeUnicorn()
    c = _counter(fake)
    native.verdict_add(c, 0x8000, 10, 9 if mode == 2 else 5, mode)
    c.event_at = c.stop_at = 1009 if mode == 2 else 1005
    _hook(c, 0x8000, 10)
    assert c.cap_count == 1 and c.completing == 1 and c.caps[0].next_pc == 0
    c.caps[0].regs[0] = 0                    # (so a second read shows)
    _hook(c, 0x9000, 3)
    assert c.completing == 0 and c.caps[0].next_pc == 0x9000 and c.insns == 1013
    assert c.caps[0].regs[0] == (0x1000 + CAPTURE_REGS[0] if mode == 3 else 0)
    assert fake.stops == 0


def test_native_hook_captures_a_block_start_without_verdict():
    fake = FakeUnicorn()
    c = _counter(fake, event=1000)
    _hook(c, 0x9000, 4)
    assert fake.stops == 0 and c.cap_count == 1 and c.caps[0].pc == 0x9000


def test_native_hook_forgets_cleared_verdicts():
    fake = FakeUnicorn()
    c = _counter(fake)
    native.verdict_add(c, 0x8000, 10, 5, 1)
    native.verdicts_clear(c)                 # (an IC instruction: code may have changed)
    _hook(c, 0x8000, 10)
    assert fake.stops == 1 and c.cap_count == 0


def test_instruction_cache_invalidation_clears_verdicts(tmp_path):
    # Verdicts are kept per block address; IC IALLU (how software publishes new code) drops
    # them all.
    body = """
    mov x20, #600
loop:
    add x1, x1, #8
    ldr x2, [sp, #-16]
    ldr x3, [x1]
    subs x20, x20, #1
    b.ne loop
"""
    for tail, cleared in (("", False), ("    ic iallu\n    dsb ish\n    isb\n", True)):
        text = _prologue(0b111010) + "    mov x1, sp\n" + body + tail + SPE_DRAIN + \
            "    .balign 2048\nvectors:\n"
        m = run_asm(text, tmp_path / str(cleared), spe=SpeConfig(seed=5))
        used = sum(1 for v in m.counter.verdicts if v.pc)
        assert (used == 0) == cleared, used


# ------------------------------------------------------------------ evaluator -------------
EVAL_GROUPS = [  # (name, fixed value, mask, alignment): GPR loads, ADD(S)/SUB(S), MOV
    ("load unsigned offset", 0x39400000, 0x3F400000, 8),
    ("load unscaled/pre/post", 0x38400000, 0x3F600000, 1),
    ("load register offset", 0x38600800, 0x3F600C00, 8),
    ("add/sub immediate", 0x11000000, 0x3F800000, 1),
    ("adds/subs immediate", 0x31000000, 0x3F800000, 1),
    ("add/sub shifted register", 0x0B000000, 0x1F200000, 1),
    ("move wide", 0x12800000, 0x1F800000, 1),
    ("store pre/post-index", 0x38000400, 0x3F600400, 16),
    ("store pair writeback", 0x28800000, 0x3A400000, 16),
    ("mov register", 0x2A0003E0, 0x7FE0FFE0, 1),
]


@pytest.mark.parametrize("name,value,mask,align", EVAL_GROUPS, ids=[g[0] for g in EVAL_GROUPS])
def test_evaluator_matches_execution(uc_machine, name, value, mask, align):
    """a64.evaluator() computes what Unicorn computes, for random encodings of each form it
    accepts (random register values, memory as Unicorn has it)."""
    rng = make_rng(f"eval {name}")
    m = uc_machine
    m.uc.mem_write(DATA_LO, rng.randbytes(DATA_HI - DATA_LO))   # (sign bits set and clear)
    checked = 0
    for _ in range(4000):
        word = (rng.getrandbits(32) & ~mask) | value
        step = a64_evaluator(word)
        if step is None:
            continue
        rn, rt = (word >> 5) & 31, word & 31
        if step.load and len(step.dests) == 2 and rn == rt:
            continue                                  # writeback into Rt: UNPREDICTABLE
        if "register offset" in name and (word >> 16) & 31 == rn:
            continue
        values = {rid: random_pointer(rng, align) for rid in X_REGS}
        values[SP] = random_pointer(rng, 16)
        if "register offset" in name and (word >> 16) & 31 != 31:
            values[X_REGS[(word >> 16) & 31]] = rng.randrange(0, 0x100)
        m.set_regs(values)
        pc = m.alloc(1)
        expect = step.run(pc, values, lambda va, n: int.from_bytes(m.uc.mem_read(va, n),
                                                                   "little"))
        _, _, intr = m.step(pc, word)
        if intr or m.error is not None:
            continue
        got = m.snapshot(step.dests)
        assert got == expect, f"{word:#010x}: {got} != {expect}"
        checked += 1
        if checked >= 200:
            break
    assert checked >= 100, f"{name}: only {checked} encodings executed"


def _verdict_batch(*blocks):
    """The batch native.verdicts_add takes: per block (pc, n, [(k, mode), ...])."""
    return b"".join(struct.pack(native.VERDICT_BLOCK, pc, n, len(pairs))
                    + b"".join(struct.pack(native.VERDICT_ENTRY, *p, 0, 0) for p in pairs)
                    for pc, n, pairs in blocks)


def _full_probe_sequence(c):
    """Fill the verdict table with one-verdict blocks until a probe sequence is full; the
    address of the first block that found no room."""
    added = 0
    while native.verdict_add(c, 0x1000 + 4 * added, 8, 1, 1):
        added += 1
    assert added > 0
    return 0x1000 + 4 * added


def test_full_verdict_table_is_emptied_for_a_new_verdict(tmp_path):
    from spe_emu.cpu.machine import Machine, MachineConfig
    m = Machine(MachineConfig(outdir=tmp_path))
    m.reset(0x4000_0000)
    blocked = _full_probe_sequence(m.counter)
    code = bytes.fromhex("1f2003d5") * 3 + struct.pack("<I", 0x14000000)  # 3 NOPs, B .
    m._learn_blocks([(blocked, code)])
    used = sorted((v.pc, v.n, v.k, v.mode) for v in m.counter.verdicts if v.pc)
    assert used == [(blocked, 4, 1, 1), (blocked, 4, 2, 1), (blocked, 4, 3, 2)]
    assert m._learnt == {(blocked, 4)}


def test_verdicts_are_added_per_block_up_to_the_first_without_room():
    c = native.SpeCounter()
    batch = _verdict_batch((0x8000, 10, [(1, 1), (4, 3)]), (0x9000, 3, [(2, 2)]))
    assert native.verdicts_add(c, batch)
    assert sorted((v.pc, v.n, v.k, v.mode) for v in c.verdicts if v.pc) == [
        (0x8000, 10, 1, 1), (0x8000, 10, 4, 3), (0x9000, 3, 2, 2)]
    blocked = _full_probe_sequence(c)
    assert not native.verdicts_add(c, _verdict_batch((blocked, 8, [(1, 1)])))


def test_branch_to_the_next_instruction_is_not_predicted(tmp_path):
    # CBZ to the very next instruction: the PC after it does not tell taken from not taken, so
    # neither Python nor the native hook may predict it (records say E[6] "not taken" or not).
    text = _prologue(0b111010) + """
    mov x20, #4000
loop:
    and x1, x20, #1
    cbz x1, next
next:
    subs x20, x20, #1
    b.ne loop
""" + SPE_DRAIN + "    .balign 2048\nvectors:\n"
    m, records = _run_both(text, tmp_path, SpeConfig(seed=13, model_feed=PREDICTING))
    cbz = [r for r in records if r.op_class == P.OP_CLASS_BRANCH and r.branch_target
           and r.branch_target == r.pc + 4]
    assert {bool(r.events >> P.EV_NOT_TAKEN & 1) for r in cbz} == {True, False}


def test_first_stop_in_a_block_learns_it_and_the_hook_captures(tmp_path):
    # INTERVAL 1 without RND: a block of 42 instructions (loads, stores, ALU) ending in a
    # branch, entered 300 times, so events fall at every position of it. The first event in
    # it stops the run (no verdict yet); the block is learnt and the run goes on, and the hook
    # captures that sample and every later one: nothing is predicted in Python or split, and
    # the records are the reference mode's.
    body = "    ldr x2, [x1, #8]\n    add x3, x2, #1\n    str x3, [x1, #16]\n    eor x4, x4, x3\n"
    text = _loop(0b111011, 300, body * 10, f"    ldr x1, ={DATA:#x}")
    m, records = _run_both(text, tmp_path, SpeConfig(seed=3))
    paths = m.sample_paths
    assert paths["predicted"] == 0 and paths["split"] == 0
    assert paths["captured"] == m.result.samples
    ops = {P.OP_CLASS_LDST: 0, P.OP_CLASS_OTHER: 0, P.OP_CLASS_BRANCH: 0}
    for r in records:
        ops[r.op_class] += 1
    assert min(ops.values()) > 0


def test_blocks_a_learnt_block_leads_to_are_learnt_ahead(tmp_path, monkeypatch):
    # Two 60-instruction blocks in a loop: the first ends with a branch to the second, the
    # second (62 instructions) with the loop's conditional branch back. The first stop for lack
    # of a verdict learns its block and the one it leads to, so the run stops for that once,
    # not twice.
    body = "    ldr x2, [x1, #8]\n    add x3, x2, #1\n    str x3, [x1, #16]\n" * 20
    text = _loop(0b111011, 200, f"{body}    b second\nsecond:\n{body}", f"    ldr x1, ={DATA:#x}")
    learnt = []
    original = SpeMachine._learn_stop_block

    def spy(self, block, n, k):
        learnt.append((hex(block), n, k))
        return original(self, block, n, k)
    monkeypatch.setattr(SpeMachine, "_learn_stop_block", spy)
    m, records = _run_both(text, tmp_path, SpeConfig(seed=5))
    # (the alignment NOPs before the loop run once, in 256-instruction blocks)
    assert [n for _, n, _ in learnt if n in (61, 62)] == [61]
    assert m.sample_paths["captured"] > 0.9 * m.result.samples   # (a few: buffer page checks)
    pcs = {r.pc for r in records}
    loop = min(pcs)
    assert any(pc < loop + 61 * 4 for pc in pcs) and any(pc >= loop + 61 * 4 for pc in pcs)


def test_a_block_learnt_at_a_stop_is_not_read_again_at_later_stops(tmp_path, monkeypatch):
    # Dependent operands whose evaluation cannot read its load: ``ldr x2, [x3]`` reads 8 bytes
    # across a page boundary, so neither the native evaluator nor Python's evaluates the
    # operands of the instructions after it, and the run stops every time a sample falls on
    # one of them. The first such stop learns the block and the ones it leads to; later stops
    # there return at once (the block is read again only by _predict, which then splits it).
    body = "    ldr x2, [x3]\n    ldr x9, [x2]\n    add x14, x14, x9\n" * 4
    text = _loop(0b111011, 1600, body,
                 f"    ldr x3, ={DATA + 0xFFC:#x}\n    ldr x4, ={DATA + 0x800:#x}\n"
                 f"    str x4, [x3]")
    stops, reads, predictions = [], [], []
    learn, code, predict = (SpeMachine._learn_stop_block, SpeMachine._block_code,
                            SpeMachine._predict)

    def spy_learn(self, block, n, k):
        stops.append((block, n))
        return learn(self, block, n, k)

    def spy_code(self, block, n, ctx):
        reads.append((block, n))
        return code(self, block, n, ctx)

    def spy_predict(self, block, k, n, index):
        predictions.append((block, n))
        return predict(self, block, k, n, index)
    monkeypatch.setattr(SpeMachine, "_learn_stop_block", spy_learn)
    monkeypatch.setattr(SpeMachine, "_block_code", spy_code)
    monkeypatch.setattr(SpeMachine, "_predict", spy_predict)
    m, _ = _run_both(text, tmp_path, SpeConfig(seed=7, model_feed=PREDICTING))
    assert m.sample_paths["split"] > 10
    # the page-aligned loop block: the body's 12 instructions, SUBS and B.NE
    loop = (min(block for block, _ in stops if block % 4096 == 0), 4 * 3 + 2)
    assert stops.count(loop) > 10
    # learning read the block once; _predict reads it at each sample it tries to predict
    assert reads.count(loop) == 1 + predictions.count(loop)


def test_capture_budget_leaves_room_for_a_pending_prediction(tmp_path):
    # asm_loop at interval 256 in a 4 KiB buffer: near the buffer's end a sample predicted at
    # its block's start (its record is written when the run gets past it, at _settle) is
    # followed by captures in the same run. The capture budget counts that record, so the
    # native batch never crosses the headroom (the SPU would raise AssertionError), and every
    # sample is recorded, as many PMBIRQs as the reference run would take.
    from pathlib import Path

    from spe_emu.session import RunOptions, run_image
    image = Path(__file__).resolve().parents[1] / "guests" / "asm_loop.elf"
    result = run_image(image, RunOptions(outdir=tmp_path, interval=256, buffer_size=4096),
                       console=None).result
    assert result.samples > 1000 and result.records_written == result.samples
    assert result.irqs_taken > 10 and result.pmbsr == 0


def test_native_evaluator_matches_reference(tmp_path):
    # Operands computed by earlier instructions of the block and overwritten later in it (so
    # neither the block's start nor its end shows them), through every step the native
    # evaluator runs: sign-extending loads (LDRSW, LDRSH into W), a byte load, register-offset
    # addresses (LSL, SXTW, plain), SUB, MOV, a pre-index writeback, flags from CMP (shifted
    # register) and ADDS (immediate) for CINC, CSEL and CSET, ADD with an ASR operand,
    # MOVZ/MOVN, and the base update of a pre-index store. The hook captures those
    # samples with the plan evaluated (no stop, records built natively: E1SPE | TS), and the
    # records are the reference mode's.
    body = """
    ldrsw x2, [x3]
    ldr x9, [x1, x2, lsl #3]
    ldrsh w2, [x3]
    ldr x6, [x1, w2, sxtw]
    ldrb w2, [x3, #1]
    ldr x8, [x1, x2]
    sub x2, x3, #8
    ldr x13, [x2, #8]
    mov x2, x3
    ldr x16, [x2, #16]
    ldr x4, [x3, #-16]!
    ldr x14, [x3, #16]
    add x3, x3, #16
    mov x2, xzr
    ldr x17, [x3]
    cmp x17, x1
    cinc x18, x18, hi
    csel x19, x17, x1, lt
    add x24, x1, x17, asr #2
    ldr x25, [x24, #8]
    adds x26, x17, #5
    cset x27, mi
    mov x17, xzr
    cmn x24, #1
    mov x11, #0x800
    ldr x12, [x1, x11]
    mov x11, #-8
    ldr x15, [x3, x11]
    mov x11, xzr
    str x11, [x28, #-32]!
    ldr x12, [x28, #8]
    add x28, x28, #32
"""
    text = _loop(0b100010, 1000, body,
                 f"    ldr x3, ={DATA + 0x800:#x}\n    ldr x1, ={DATA:#x}\n"
                 f"    mov x10, #-3\n    str x10, [x3]\n    mov x28, x3")
    m, records = _run_both(text, tmp_path, SpeConfig(seed=11))
    assert m.sample_paths["evaluated"] > 10
    assert m.sample_paths["predicted"] == 0 and m.sample_paths["split"] == 0
    vas = {r.data_va for r in records}
    assert {DATA - 24, DATA - 3, DATA + 0xFF, DATA + 0x800, DATA + 0x810, DATA + 0x7F8,
            DATA + 0x7E8} <= vas
