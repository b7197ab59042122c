"""The native record builder (spe_emu/native/record.c, docs/model.md "Native records") against
the Python one it replaces in the fast run loop.

* The model's set-associative LRU levels and the indirect-branch target table behave exactly
  as a Python oracle (an OrderedDict per set) and a dict: the same hit/miss answers for
  random access sequences and geometries (evictions, table growth); a read-only access
  changes nothing; an access goes down the levels as docs/model.md says.
* For random sequences of captured loads/stores (every address form), conditional selects,
  data processing and branches (direct, conditional, indirect, returns), with random
  registers, ``record.c`` writes byte for byte what ``RecordBuilder.build`` gives (padded to
  2**Align), from a model in the same state, with and without Timestamp and Context packets
  and not-taken branch targets.
* It stops where Python must take over and says why: no template yet, an instruction it has
  no template kind for (SVC, MRS, ERET), a capture past the stop (dropped), a capture not at
  the planned event, a branch not observed by its next PC, an end-of-block capture whose
  registers are the live ones; it asks for the translation of a data page it has none of
  when physical addresses are collected.
"""

from __future__ import annotations

import contextlib
import random
from collections import OrderedDict

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_a64 import LDST_GROUPS, normalize

from spe_emu import native
from spe_emu.cpu import a64
from spe_emu.cpu.machine import CAPTURE_REGS, CAPTURE_SLOT, RECORD_BYTES_BOUND, Machine
from spe_emu.cpu.native_records import NativeRecords
from spe_emu.spe import packets as P
from spe_emu.spe.config import MODEL_FEEDS, SpeConfig
from spe_emu.spe.filters import TYPE_FILTERS, collect_record
from spe_emu.spe.records import RecordBuilder, Sample
from spe_emu.spe import records as R

START, NEXT_PC, END = 1, 2, 3
EL, NS = 1, 1
GAP = 257
FIRST = 10_000
X = a64.X_REGS
SMALL = SpeConfig(l1d_lines=4, llc_lines=16, tlb_entries=2)


# ----------------------------------------------------------------------- model state -----
class _Oracle:
    """A set-associative LRU level: ``sets`` OrderedDicts of at most ``ways`` keys."""

    def __init__(self, lines: int, ways: int):
        ways = lines if ways == 0 or ways > lines else ways
        self.ways, self.sets = ways, [OrderedDict() for _ in range(lines // max(ways, 1))]

    def touch(self, key: int, update: bool = True) -> bool:
        s = self.sets[key % len(self.sets)]
        hit = key in s
        if update:
            if hit:
                s.move_to_end(key)
            else:
                s[key] = None
                if len(s) > self.ways:
                    s.popitem(last=False)
        return hit

    def remove(self, key: int) -> None:
        self.sets[key % len(self.sets)].pop(key, None)


# (model.c keeps a set of at most 16 ways as a row of keys, one of up to 64 as hashed keys with
# the clock of their last access, a larger one as a hashed LRU list: (20, 0) and (64, 0) are
# of the second kind, (96, 0) and (128, 0) of the third, the rest the first)
GEOMETRIES = st.sampled_from([(1, 0), (7, 0), (20, 0), (16, 4), (16, 1), (64, 8), (32, 2),
                              (8, 8), (8, 64), (64, 0), (96, 0), (128, 0)])


@settings(max_examples=150, deadline=None)
@given(geometry=GEOMETRIES, which=st.sampled_from([native.TOUCH_TLB, native.TOUCH_L1D,
                                                    native.TOUCH_L2, native.TOUCH_LLC]),
       keys=st.lists(st.tuples(st.integers(0, 160), st.booleans()), max_size=400),
       big=st.integers(1, native.MAX_LINE))
def test_model_levels_match_the_oracle(geometry, which, keys, big):
    lines, ways = geometry
    model = native.Model(tuple(v for _ in range(4) for v in geometry))
    oracle = _Oracle(lines, ways)
    for key, update in keys:
        key = (key * big) & native.MAX_LINE if key & 1 else key   # (hash spread and clusters)
        assert model.touch(which, key, update) == oracle.touch(key, update)
    model.close()


@settings(max_examples=80, deadline=None)
@given(l2=st.sampled_from([(0, 0), (16, 2), (64, 0)]),
       accesses=st.lists(st.tuples(st.integers(0, 200), st.booleans()), max_size=300))
def test_model_access_goes_down_the_levels(l2, accesses):
    """spe_model_access: TLB by page; L1D, then the L2 when present, then the LLC, each looked
    up (and filled) only when the ones above miss; counts of recorded accesses."""
    geometry = (4, 0, 8, 2, *l2, 32, 4)
    model = native.Model(geometry)
    tlb, l1d, l2o, llc = (_Oracle(*geometry[i:i + 2]) for i in (0, 2, 4, 6))
    counts = dict.fromkeys(native.MODEL_STATS, 0)
    for line, update in accesses:
        line *= 3
        walk = not tlb.touch(line >> 6, update)
        level = (native.LEVEL_L1D if l1d.touch(line, update) else
                 native.LEVEL_L2 if l2[0] and l2o.touch(line, update) else
                 native.LEVEL_LLC if llc.touch(line, update) else native.LEVEL_DRAM)
        assert model.access(line, update) == (
            walk * native.OUT_WALK | level << native.OUT_LEVEL_SHIFT)
        if update:
            counts[native.MODEL_STATS[level]] += 1
            counts["accesses"] += 1
            counts["tlb_walks"] += walk
    assert model.stats() == counts
    with pytest.raises(ValueError) if not l2[0] else contextlib.nullcontext():
        model.touch(native.TOUCH_L2, 0)


@settings(max_examples=150, deadline=None)
@example(tlb=(17, 0), steps=[(0, 0, True), (1, 0, True), (-2, 0, True),
                             *((p, 0, True) for p in range(2, 18)), (0, 0, True)])
@example(tlb=(17, 0), steps=[*((p, 0, True) for p in range(4)), (-4, 0, True),
                             *((p, 0, True) for p in range(4, 20)), (1, 0, True)])
@given(tlb=st.sampled_from([(2, 0), (4, 0), (17, 0), (20, 0), (24, 0), (48, 0), (80, 0)]),
       steps=st.lists(st.tuples(st.one_of(st.integers(0, 27), st.integers(-6, -2)),
                                st.integers(0, 63), st.booleans()), max_size=500))
def test_model_tlb_walks_match_the_oracle(tlb, steps):
    """The TLB of spe_model_access against the LRU oracle, on page sequences that go back and
    forth (page -k: back to the k-th newest page recorded; a fully associative TLB of more
    than 16 entries is one hashed set, 48 the default): the walk bit and the counts of every
    access, and :meth:`touch` sees the same TLB after."""
    model = native.Model((*tlb, 8, 2, 0, 0, 32, 4))
    oracle = _Oracle(*tlb)
    walks, recent = 0, []   # (distinct pages recorded, newest first)
    for page, offset, update in steps:
        if page < 0:
            page = recent[-page - 1] if len(recent) >= -page else 0
        if update:
            recent = [page] + [p for p in recent if p != page]
        line = page << 6 | offset
        walk = not oracle.touch(page, update)
        out = model.access(line, update)
        assert bool(out & native.OUT_WALK) == walk, (page, update)
        walks += walk and update
    assert model.stats()["tlb_walks"] == walks
    for page in range(28):
        assert model.touch(native.TOUCH_TLB, page, False) == oracle.touch(page, False)
    model.close()


@settings(max_examples=80, deadline=None)
# (PE 0 writes line 0, loses it from its L1D, PE 1 reads it: PE 0's next store snoops it)
@example(l1d=(8, 2), ops=[(0, 0, True), (0, 4, False), (0, 8, False), (1, 0, False),
                          (0, 0, True), (1, 0, False)])
# (a full set of 32 loses its oldest line to PE 1's store: the newest, moved into its place,
# keeps its own age, so line 1 is evicted next, not line 31)
@example(l1d=(32, 0), ops=[*((0, line, False) for line in range(32)), (1, 0, True),
                           (0, 32, False), (0, 33, False), (0, 31, False)])
@given(l1d=st.sampled_from([(8, 2), (16, 0), (32, 0), (96, 0)]),
       ops=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.booleans()),
                    max_size=400))
def test_joined_models_invalidate_as_the_oracle(l1d, ops):
    """spe_model_join with three PEs: a recorded store removes the line from the other PEs'
    L1D (kept as rows of ways: (8, 2) and (16, 0); by the clock of each line's last access:
    (32, 0); as a linked list: (96, 0)), which keep the LRU order of the rest; so whether
    each access hits its own L1D is what an LRU per PE that drops the line says. A PE that
    wrote a line its L1D no longer holds snoops again at its next store once another PE has
    read the line."""
    geometry = (64, 0, *l1d, 0, 0, 1024, 16)
    models = [native.Model(geometry) for _ in range(3)]
    native.join_models(models)
    oracles = [_Oracle(*l1d) for _ in range(3)]
    for pe, line, store in ops:
        if store:
            for other, oracle in enumerate(oracles):
                if other != pe:
                    oracle.remove(line)
        hit = oracles[pe].touch(line)
        out = models[pe].store(line) if store else models[pe].access(line, True)
        assert (out >> native.OUT_LEVEL_SHIFT == native.LEVEL_L1D) == hit, (pe, line, store)


@settings(max_examples=50, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(0, 300), st.integers(0, 3)), max_size=600))
def test_target_table_matches_a_dict(ops):
    model = native.Model(SMALL.model_geometry)
    table: dict[int, int] = {}
    for pc, target in ops:
        pc *= 4
        assert model.swap_target(pc, target) == table.get(pc)
        table[pc] = target
    model.close()


COND, IND, RET, CALL = native.BR_COND, native.BR_INDIRECT, native.BR_RETURN, native.BR_CALL
BR_CASES = [
    # (kind, pc, target, taken, mispredicted): docs/model.md "Branch prediction"
    (COND, 0x1000, 0x0F00, True, False),      # gshare's counters start weakly taken
    (COND, 0x1000, 0x0F00, False, True),      # (another counter: the history has moved on)
    (0, 0x1000, 0x9000, True, False),         # direct unconditional: always right
    (CALL, 0x1000, 0x9000, True, False),      # BL: pushes 0x1004
    (IND | CALL, 0x2000, 0x3000, True, True),  # BLR, first time: no last target; pushes 0x2004
    (IND | RET, 0x3010, 0x2004, True, False),   # RET to the newest return address
    (IND | RET, 0x9010, 0x1234, True, True),    # RET elsewhere: mispredicted (pops 0x1004)
    (IND | RET, 0x9010, 0x1004, True, True),    # the stack is empty now
    (IND | RET | native.BR_ERET, 0x1000, 0x5000, True, False),   # ERET: always predicted
    (IND, 0x2000, 0x5000, True, True),        # first time: no last target
    (IND, 0x2000, 0x5000, True, False),       # the last target again
    (IND, 0x2000, 0x6000, True, True),        # another target
    (IND, 0x2004, 0x6000, True, True),        # per PC
    (IND, 0x2000, 0x6000, True, False),
]


def test_branch_predictor_rule():
    # spe_model_branch is the one predictor both record.c and RecordBuilder use
    model = native.Model(SMALL.model_geometry)
    assert [model.branch(k, pc, t, taken) for k, pc, t, taken, _ in BR_CASES] == [
        m for *_, m in BR_CASES]
    model.close()


def test_gshare_learns_a_loop_exit():
    # a loop branch taken three times then not taken: gshare's history tells the fourth
    # apart, so once trained nothing is mispredicted; without history (1 bit, one counter per
    # PC pair) the exit is mispredicted every time
    for bits, expect in ((12, 0), (1, 50)):
        model = native.Model(SMALL.model_geometry, (bits, 16))
        outcomes = [i % 4 != 3 for i in range(400)]
        missed = [model.branch(COND, 0x4000, 0x3F00, taken) for taken in outcomes]
        assert sum(missed[200:]) == expect, bits
        model.close()


def test_return_stack_depth():
    # 18 nested calls on a 16-entry stack: the 16 innermost returns are predicted, the two
    # outermost (overwritten) are not; ras_entries 0 mispredicts every return
    for depth, expect in ((16, [False] * 16 + [True] * 2), (0, [True] * 18)):
        model = native.Model(SMALL.model_geometry, (12, depth))
        for i in range(18):
            model.branch(CALL, 0x1000 + 0x100 * i, 0x1000 + 0x100 * (i + 1), True)
        assert [model.branch(IND | RET, 0x8000, 0x1004 + 0x100 * i, True)
                for i in reversed(range(18))] == expect
        model.close()


@pytest.mark.parametrize("word, kind", [
    (0x54000040, COND),                                    # b.eq
    (0xB4000040, COND),                                    # cbz x0
    (0x36000040, COND),                                    # tbz w0, #0
    (0x14000002, 0),                                       # b
    (0x94000002, CALL),                                    # bl
    (0xD61F0020, IND),                                     # br x1
    (0xD63F0020, IND | CALL),                              # blr x1
    (0xD65F03C0, IND | RET),                               # ret
    (0xD69F03E0, IND | RET | native.BR_ERET),              # eret
])
def test_branch_kinds(word, kind):
    assert R.branch_kind(a64.decode(word)) == kind
    # the block hook knows the branch that ends a block by the same kinds
    assert native.Model(SMALL.model_geometry, (12, 16), R.BRANCH_ENCODINGS).classify(
        word) == kind | native.BR_BRANCH


def test_branch_encodings_agree_with_the_decoder():
    # BRANCH_ENCODINGS (model.c spe_model_classify) give every word a64 decodes as a branch
    # the kind branch_kind gives it, and no other word a kind
    model = native.Model(SMALL.model_geometry, (12, 16), R.BRANCH_ENCODINGS)
    rng = random.Random(26)
    words = [rng.getrandbits(32) for _ in range(20000)]
    for mask, value, _ in R.BRANCH_ENCODINGS:   # every row, with random free bits
        words += [value | (rng.getrandbits(32) & ~mask) for _ in range(300)]
    for word in words:
        info = a64.decode(word)
        expect = R.branch_kind(info) | native.BR_BRANCH if info.is_branch else 0
        assert model.classify(word) == expect, hex(word)
    model.close()


# ----------------------------------------------------------------------- records ----------
def _branch_words(rng: random.Random) -> int:
    imm26, imm19, imm14 = rng.getrandbits(26), rng.getrandbits(19), rng.getrandbits(14)
    if rng.random() < 0.2:   # a branch to itself: backward (predicted taken)
        imm26 = imm19 = imm14 = 0
    rt, rn, cond = rng.randrange(31), rng.randrange(31), rng.randrange(15)
    return rng.choice([
        0x14000000 | imm26, 0x94000000 | imm26,                       # B, BL
        0x54000000 | imm19 << 5 | cond,                               # B.cond
        0xB4000000 | imm19 << 5 | rt, 0xB5000000 | imm19 << 5 | rt,   # CBZ, CBNZ
        0x36000000 | rng.getrandbits(5) << 19 | imm14 << 5 | rt,      # TBZ
        0xD61F0000 | rn << 5, 0xD63F0000 | rn << 5, 0xD65F0000 | rn << 5,  # BR, BLR, RET
    ])


def _other_words(rng: random.Random) -> int:
    rd, rn, rm, cond = (rng.randrange(31) for _ in range(4))
    return rng.choice([
        0x9A800000 | rm << 16 | cond << 12 | rn << 5 | rd,   # CSEL
        0xFA400800 | rng.getrandbits(5) << 16 | cond << 12 | rn << 5 | rng.getrandbits(4),  # CCMP
        0x91000000 | rng.getrandbits(12) << 10 | rn << 5 | rd,   # ADD (immediate)
        0xD503201F,                                               # NOP
    ])


def _ldst_word(rng: random.Random) -> int:
    while True:
        name, value, mask = rng.choice(LDST_GROUPS)[:3]
        word = normalize(rng, name, (rng.getrandbits(32) & ~mask) | value)
        if word is not None:
            return word


def _item(rng: random.Random, pool: list[int], i: int):
    """(word, pc, registers, mode, next_pc) of capture ``i`` (each at its own PC)."""
    kind = rng.random()
    word = (_ldst_word(rng) if kind < 0.5 else _branch_words(rng) if kind < 0.8
            else _other_words(rng))
    pc = rng.choice((0x40080000, 0xFFFF000000100000)) + 0x1000 * i + 4 * rng.randrange(0x400)
    regs = [rng.choice(pool) + rng.randrange(-256, 256) if rng.random() < 0.8
            else rng.getrandbits(64) for _ in range(31)]
    regs = [r & ((1 << 64) - 1) for r in regs] + [rng.choice(pool), rng.getrandbits(4) << 28]
    info = a64.decode(word)
    mode, next_pc = START, 0
    if info.is_branch:
        mode = NEXT_PC
        values = {rid: regs[CAPTURE_SLOT[rid]] for rid in info.reads}
        taken, target = info.branch(pc, values)
        if info.is_conditional:
            next_pc = target if rng.random() < 0.5 else pc + 4
        else:
            next_pc = target
        if rng.random() < 0.1:
            next_pc = 0   # not completed: the drain's next PC
    elif rng.random() < 0.3:
        mode, next_pc = END, rng.choice((0x40090000, 0x40090040))   # (registers at the end)
    return word, pc, regs, mode, next_pc


def _translate(va: int) -> int | None:
    """A made-up translation for Physical Address packets: every 5th page faults."""
    page = va >> 12
    return None if page % 5 == 0 else ((page * 0x9E37) & 0xFFFFFFFFF) << 12 | (va & 0xFFF)


def _python_record(builder: RecordBuilder, config: SpeConfig, item, index: int,
                   go_on: int, timestamp: bool, prefix: bytes, collect_pa: bool = False,
                   types: frozenset = frozenset(), fed: int | None = None) -> bytes:
    """What Machine._replay gives for the capture (the Sample _observe builds from it), with
    PMSFCR_EL1.FT's filter of ``types`` (B, LD, ST) when not empty, and what the model gave
    the operation as it executed (``fed``, model_feed "every")."""
    word, pc, regs, mode, next_pc = item
    info = a64.decode(word)
    values = {rid: regs[CAPTURE_SLOT[rid]] for rid in info.reads}
    s = Sample(pc=pc, el=EL, ns=NS, info=info, timestamp=index if timestamp else None,
               fed=fed)
    s.cond_passed = info.condition_passed(values)
    if info.is_branch:
        s.branch_taken, s.branch_target = info.branch(pc, values)
        s.target_el, s.target_ns = EL, NS
        Machine._resolve_branch(s, next_pc or go_on)
    if info.op_class == P.OP_CLASS_LDST and (info.is_load or info.is_store):
        s.data_va = info.data_address(pc, values)
        if collect_pa and s.data_va is not None:
            s.data_pa = _translate(s.data_va)
    built = builder.build(s)
    if types and not collect_record(built.events, built.total_latency, built.optypes,
                                    {"FE": 0, "FL": 0, "FT": 1, "B": "B" in types,
                                     "LD": "LD" in types, "ST": "ST" in types}, 0, 0, config):
        return b""
    data = prefix + built.data
    return data + bytes(-len(data) % config.align_bytes)


def _captures(items, first: int = FIRST, fed=None) -> native.SpeCounter:
    counter = native.SpeCounter()
    for i, (word, pc, regs, mode, next_pc) in enumerate(items):
        cap = counter.caps[i]
        cap.index, cap.pc, cap.mode, cap.next_pc = first + i * GAP, pc, mode, next_pc
        cap.regs[:] = regs
        cap.fed = native.FED_NONE if fed is None else fed[i]
    return counter


def _recorder(config: SpeConfig, timestamp=True, prefix=b"", collect_pa=False,
              insn_index=1 << 40, go_on=0x40100000, model=None) -> NativeRecords:
    nr = NativeRecords(config, model or native.Model(config.model_geometry), native.CAP_MAX,
                       RECORD_BYTES_BOUND)
    nr.begin(insn_index, go_on, EL, NS, timestamp, collect_pa, prefix, GAP)
    nr.recorder.s.expect = FIRST
    return nr


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 1 << 32), timestamp=st.booleans(), context=st.booleans(),
       small=st.booleans(), not_taken_target=st.booleans(), align_code=st.sampled_from([0, 6]),
       collect_pa=st.booleans(), types=st.frozensets(st.sampled_from(["B", "LD", "ST"])),
       feed=st.sampled_from(MODEL_FEEDS))
def test_native_records_equal_python_records(seed, timestamp, context, small,
                                             not_taken_target, align_code, collect_pa, types,
                                             feed):
    # (with collect_pa, record.c asks for each data page's translation once: REC_XLATE, and
    # Python records a capture whose page does not translate, from the same model, as
    # Machine._drain does; with a type filter it builds every record, so the model sees the
    # operation, and keeps those of the types selected, as Spu.record does with
    # CollectRecord())
    rng = random.Random(seed)
    # (model_feed "every": each capture comes with what the model gave its operation, a
    # load/store's outcome or a branch's misprediction, and both builders take that)
    config = (SMALL if small else SpeConfig()).with_(not_taken_target=not_taken_target,
                                                     align_code=align_code, model_feed=feed)
    pool = [0x40200000 + 64 * rng.randrange(64) for _ in range(6)]
    items = [_item(rng, pool, i) for i in range(native.CAP_MAX)]
    fed = ([rng.randrange(native.OUTCOMES) if not a64.decode(word).is_branch
            else rng.randrange(2) for word, *_ in items] if feed == "every"
           else [None] * len(items))
    prefix = P.context_bytes(P.CONTEXT_EL1, rng.getrandbits(32)) if context else b""
    go_on = 0x40100000
    python = RecordBuilder(config)        # (Machine._replay's, on the recorder's model)
    nr = _recorder(config, timestamp, prefix, go_on=go_on, collect_pa=collect_pa,
                   model=python.model)
    nr.recorder.s.type_filter = sum(1 << t.value for t, bit, _ in TYPE_FILTERS if bit in types)
    for word, pc, *_ in items:
        t = nr.template(pc, EL, NS, word)
        assert t.kind != native.TPL_PYTHON, hex(word)
        nr.add_template(t)
    builder = RecordBuilder(config)
    assert isinstance(builder.model, native.Model)
    expected = [_python_record(builder, config, item, FIRST + i * GAP, go_on, timestamp,
                               prefix, collect_pa, types, fed[i])
                for i, item in enumerate(items)]
    counter = _captures(items, fed=None if feed == "sampled" else fed)
    out, by_python = [], []
    i = asked = 0
    while (i := nr.recorder.record(counter, i, len(items))) < len(items):
        assert nr.recorder.s.reason == native.REC_XLATE and collect_pa
        va = nr.recorder.s.xlate_va
        asked += 1
        assert asked <= len(items)   # (once per load/store at most: the table keeps it)
        if _translate(va) is not None:
            nr.add_translation(va, _translate(va))
            continue
        out.append(nr.recorder.take_output())
        out.append(_python_record(python, config, items[i], FIRST + i * GAP, go_on,
                                  timestamp, prefix, collect_pa, types, fed[i]))
        by_python.append(i)
        i += 1
        nr.recorder.s.expect += GAP
    out.append(nr.recorder.take_output())
    assert nr.recorder.s.reason == native.REC_DONE
    native_expected = [e for k, e in enumerate(expected) if k not in by_python]
    assert nr.recorder.s.records == sum(map(bool, native_expected))
    assert nr.recorder.s.filtered == len(native_expected) - nr.recorder.s.records
    assert b"".join(out) == b"".join(expected)


@pytest.mark.parametrize("feed", MODEL_FEEDS)
def test_native_record_bytes_of_a_load(feed):
    """A worked example, packet by packet (§5.3): LDR X0, [X1, #8] at 0x40080000, X1 = 0x1000,
    EL1 NS, timestamp = the instruction number; its line in DRAM and its page not in the TLB
    (a cold model with "sampled"; what the memory hook saw with "every")."""
    word = 0xF9400420   # LDR X0, [X1, #8]
    regs = [0] * 33
    regs[1] = 0x1000
    nr = _recorder(SpeConfig(model_feed=feed))
    nr.add_template(nr.template(0x40080000, EL, NS, word))
    fed = [native.LEVEL_DRAM << native.OUT_LEVEL_SHIFT | native.OUT_WALK]
    if feed == "every":   # (no outcome captured: Python records it)
        assert nr.recorder.record(_captures([(word, 0x40080000, regs, START, 0)]), 0, 1) == 0
        assert nr.recorder.s.reason == native.REC_PYTHON
    counter = _captures([(word, 0x40080000, regs, START, 0)],
                        fed=fed if feed == "every" else None)
    assert nr.recorder.record(counter, 0, 1) == 1
    pc = 0x40080000 | EL << 61 | NS << 63
    assert nr.recorder.take_output() == (
        bytes([0xB0]) + pc.to_bytes(8, "little")            # PC
        + bytes([0x49, 0x00])                               # Operation Type: load/store, GP load
        + bytes([0xB2]) + (0x1008).to_bytes(8, "little")    # data virtual address
        + bytes([0x52]) + (0x033E).to_bytes(2, "little")    # Events: retired, L1D/TLB access+
        #   refill, walk, LLC access, miss (E1,2,3,4,5,8,9)
        + bytes([0x98]) + (1 + 120 + 29).to_bytes(2, "little")   # TOT
        + bytes([0x99]) + (1).to_bytes(2, "little")         # ISSUE
        + bytes([0x9A]) + (30).to_bytes(2, "little")        # XLAT
        + bytes([0x71]) + FIRST.to_bytes(8, "little"))      # Timestamp


@pytest.mark.parametrize("case", ["svc", "mrs", "eret", "branch at start", "live registers",
                                  "physical address", "past the stop", "not planned",
                                  "no template"])
def test_native_recorder_hands_over(case):
    word, mode, next_pc = 0xF9400420, START, 0
    kw = {}
    expect_reason = native.REC_PYTHON
    if case == "svc":
        word = 0xD4000001
    elif case == "mrs":
        word = 0xD53BD040   # MRS X0, TPIDR_EL0
    elif case == "eret":
        word = 0xD69F03E0
    elif case == "branch at start":
        word = 0x14000010
    elif case == "live registers":
        mode = END
    elif case == "physical address":   # (a data page not translated yet: X1 + 8)
        kw["collect_pa"] = True
        expect_reason = native.REC_XLATE
    elif case == "past the stop":
        kw["insn_index"] = FIRST - 1
        expect_reason = native.REC_DROP
    elif case == "not planned":
        expect_reason = native.REC_ORDER
    elif case == "no template":
        expect_reason = native.REC_TEMPLATE
    nr = _recorder(SpeConfig(), **kw)
    if case == "not planned":
        nr.recorder.s.expect = FIRST + 1
    if case != "no template":
        t = nr.template(0x40080000, EL, NS, word)
        assert (t.kind == native.TPL_PYTHON) == (case in ("svc", "mrs", "eret"))
        nr.add_template(t)
    # (with what the memory hook saw of its access, as the default model_feed gives it)
    counter = _captures([(word, 0x40080000, [0] * 33, mode, next_pc)], fed=[0])
    assert nr.recorder.record(counter, 0, 1) == 0
    assert nr.recorder.s.reason == expect_reason
    assert nr.recorder.s.out_len == 0 and nr.recorder.s.records == 0
    if case == "physical address":
        assert nr.recorder.s.xlate_va == 8


def test_templates_are_per_exception_level():
    nr = _recorder(SpeConfig())
    word = 0xF9400420
    nr.add_template(nr.template(0x40080000, 0, NS, word))
    counter = _captures([(word, 0x40080000, [0] * 33, START, 0)])
    assert nr.recorder.record(counter, 0, 1) == 0          # recorded at EL1: no template
    assert nr.recorder.s.reason == native.REC_TEMPLATE
    nr.clear_templates()
    nr.recorder.s.el = 0
    assert nr.recorder.record(counter, 0, 1) == 0          # cleared
    assert nr.recorder.s.reason == native.REC_TEMPLATE


def test_capture_registers_are_in_capture_order():
    assert [CAPTURE_SLOT[r] for r in CAPTURE_REGS] == list(range(native.CAP_REGS))
