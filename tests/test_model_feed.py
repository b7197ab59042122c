"""What feeds the micro-architecture model behind record events (docs/model.md "Events and
latency model", SpeConfig.model_feed).

A loop loads line A three times, then line B (in another 4 KiB page). With a one-line L1D and
a one-entry TLB:

* ``model_feed="every"``: every access updates the model, so a load finds the line of the
  access before it in program order: the first load of A (after B) and the load of B refill
  the L1D (E[3]), walk the TLB (E[5]) and hit the LLC (E[8], not E[9]), TOT = 1 + llc_latency
  + walk_latency - 1, XLAT = walk_latency; the second and third loads of A hit (TOT 5);
* ``"sampled"``: only the sampled loads update it, so a sampled load refills and walks exactly
  when the sampled load before it was of the other line (and hits with TOT 5 otherwise).

With a two-line L1D and two TLB entries, ``"every"`` hits from the first sample on (the model
is warm from reset). The counts of the model equal what a Python memory hook on the same run
sees (each access, each distinct line: with the default 1 MiB LLC only first touches reach
DRAM), and the fast loop and the reference loop write the same records.

The branch predictor's last-target table: with ``"every"`` each BR/BLR execution feeds it,
with ``"sampled"`` only the sampled ones (:func:`br_loop`).
"""

from __future__ import annotations

import pytest
from unicorn import UC_HOOK_MEM_READ, UC_HOOK_MEM_WRITE

from asmrun import EXIT, SPE_DRAIN, drained, run_asm, spe_prologue
from spe_emu.errors import ConfigError
from spe_emu.spe import packets as P
from spe_emu.spe.config import SpeConfig

BUF = 0x4800_0000
LINE_A, LINE_B = 0x4810_0000, 0x4810_2040
LOOP = spe_prologue(0b10, BUF) + f"""
    ldr x5, ={LINE_A:#x}
    ldr x6, ={LINE_B:#x}
    ldr x4, =3000
loop:
    ldr x1, [x5]                 // A, after B
    ldr x1, [x5]                 // A, after A
    ldr x1, [x5]                 // A, after A
    ldr x2, [x6]                 // B, after A
    subs x4, x4, #1
    nop
    nop
    b.ne loop
""" + SPE_DRAIN + """
    .balign 2048
vectors:                         // (no exception is taken)
"""
TINY = dict(l1d_lines=1, tlb_entries=1)
E = {name: 1 << bit for name, bit in (("refill", P.EV_L1D_REFILL), ("walk", P.EV_TLB_WALK),
                                      ("llc", P.EV_LLC_ACCESS), ("miss", P.EV_LLC_MISS))}


def loads(tmp_path, mode: str, setup=None, **spe) -> tuple[bytes, list[P.Record], object]:
    """The drained buffer, the records of sampled loads, and the machine."""
    m = run_asm(LOOP, tmp_path / mode, mode=mode, spe=SpeConfig(**spe), setup=setup)
    assert m.result.exit_status == 0
    data = drained(m, BUF)[3]
    recs = [r for r in P.iter_records(data) if r.data_va is not None]
    assert len(recs) > 40 and {r.data_va for r in recs} <= {LINE_A, LINE_B}
    return data, recs, m


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_every_access_feeds_the_model(tmp_path, mode):
    config = SpeConfig()
    _, recs, _ = loads(tmp_path, mode, model_feed="every", **TINY)
    loop = next(r.pc for r in recs if r.data_va == LINE_B) - 12
    after_other_line = {loop, loop + 12}
    assert {r.pc for r in recs} == {loop, loop + 4, loop + 8, loop + 12}
    for r in recs:
        if r.pc in after_other_line:
            assert r.events & (E["refill"] | E["walk"] | E["llc"] | E["miss"]) == \
                E["refill"] | E["walk"] | E["llc"]
            assert r.latency_total == 1 + config.llc_latency + config.walk_latency - 1
            assert r.latency_xlat == config.walk_latency
        else:
            assert not r.events & (E["refill"] | E["walk"])
            assert (r.latency_total, r.latency_xlat) == (1 + config.l1d_latency, 1)
    _, warm, _ = loads(tmp_path / "two", mode, model_feed="every", l1d_lines=2, tlb_entries=2)
    assert all(not r.events & (E["refill"] | E["walk"]) for r in warm)
    assert {r.latency_total for r in warm} == {1 + config.l1d_latency}


def test_sampled_feed_sees_only_the_samples(tmp_path):
    _, recs, _ = loads(tmp_path, "fast", **TINY)
    before = None
    for r in recs:
        missed = r.data_va != before
        assert bool(r.events & E["refill"]) == bool(r.events & E["walk"]) == missed
        assert missed or r.latency_total == 1 + SpeConfig().l1d_latency
        before = r.data_va
    same = sum(r.data_va == b.data_va for r, b in zip(recs, recs[1:]))
    assert 10 < same < len(recs) - 10   # (both outcomes occur)


def test_model_counts_equal_a_python_hook_and_both_loops_agree(tmp_path):
    seen: list[int] = []

    def setup(m):
        m.uc.hook_add(UC_HOOK_MEM_READ | UC_HOOK_MEM_WRITE,
                      lambda _uc, _type, addr, size, _value, _data: seen.extend(
                          range(addr >> 6, ((addr + size - 1) >> 6) + 1)))

    data, _, m = loads(tmp_path, "fast", setup=setup, model_feed="every", **TINY)
    stats = m.result.model
    assert stats["feed"] == "every"
    assert stats["accesses"] == len(seen) > 12_000   # (3000 iterations of 4 loads)
    assert stats["dram"] == len(set(seen))
    assert stats["l1d_hits"] + stats["l2_hits"] + stats["llc_hits"] + stats["dram"] == len(seen)
    ref, _, _ = loads(tmp_path / "ref", "reference", model_feed="every", **TINY)
    assert ref == data


# A register-indirect branch alternating between two targets (x2 even: ta, odd: tb). The
# sample interval is the largest (PMSIRR_EL1.INTERVAL 0xFFFFFF), and every fourth iteration
# writes PMSICR_EL1 so that the BR is the sampled operation (§3.1.1): the BR is sampled at
# iterations 0, 4, 8 ..., always going to ta, while the BR executed in the iteration before
# went to tb.
def sampled_loop(count: int, setup: str = "") -> str:
    """The prologue of a 400-iteration loop (counter x2, bound x6) whose every fourth
    iteration writes PMSICR_EL1.COUNT = ``count`` at ``loop``, before ``nosample``."""
    return spe_prologue(0b10, BUF, pmsirr=0xFFFF_FF00) + setup + f"""
    mov x2, #0
    ldr x6, =400
loop:
    tst x2, #3
    b.ne nosample
    mov x7, #{count}
    msr pmsicr_el1, x7
nosample:"""


def br_loop(count: int) -> str:
    return sampled_loop(count, "\n    adr x4, ta\n    adr x5, tb") + """
    tst x2, #1
    csel x1, x4, x5, eq
    br x1
ta: b join
tb: nop
join:
    add x2, x2, #1
    cmp x2, x6
    b.ne loop
""" + SPE_DRAIN + """
    .balign 2048
vectors:                         // (no exception is taken)
"""


BR_COUNT = 2   # PMSICR_EL1.COUNT that makes the BR the sampled operation


def br_records(tmp_path, mode: str, feed: str) -> tuple[bytes, list[P.Record]]:
    m = run_asm(br_loop(BR_COUNT), tmp_path / f"{mode}-{feed}", mode=mode,
                spe=SpeConfig(model_feed=feed))
    assert m.result.exit_status == 0
    data = drained(m, BUF)[3]
    return data, list(P.iter_records(data))


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_every_branch_feeds_the_predictor(tmp_path, mode):
    # model_feed "every": the BR's last target is tb, from the iteration before, so every
    # sample of it (to ta) is MISPREDICTED; "sampled": the last *sampled* target is ta, so
    # only the first sample is.
    for feed, expect_all in (("every", True), ("sampled", False)):
        _, recs = br_records(tmp_path, mode, feed)
        assert len(recs) == 100
        assert all(r.op_class == P.OP_CLASS_BRANCH and r.op_subclass & P.BRANCH_INDIRECT
                   for r in recs)
        assert len({(r.pc, r.branch_target) for r in recs}) == 1
        mispredicted = [bool(r.events & 1 << P.EV_MISPRED) for r in recs]
        assert mispredicted == [True] * (len(recs) if expect_all else 1) + [False] * (
            0 if expect_all else len(recs) - 1), feed


def test_every_branch_feed_same_in_both_loops(tmp_path):
    assert br_records(tmp_path, "fast", "every")[0] == br_records(tmp_path, "reference",
                                                                  "every")[0]


def test_geometry_and_feed_are_checked():
    with pytest.raises(ConfigError, match="l1d_lines=512 must be a power-of-two multiple"):
        SpeConfig(l1d_ways=3)
    with pytest.raises(ConfigError, match="model_feed='all': must be one of sampled, every"):
        SpeConfig(model_feed="all")
    with pytest.raises(ConfigError, match="--spe-model 'l2_ways': expected NAME=VALUE"):
        SpeConfig().with_model(["l2_ways"])
    assert SpeConfig().with_model(["L2_LINES=8192", "l2_ways=0x8", "model_feed=every"]) == \
        SpeConfig(l2_lines=8192, l2_ways=8, model_feed="every")


def test_every_feed_captures_samples_natively(tmp_path):
    # model_feed "every" keeps the native capture: a captured load takes what the memory hook
    # saw of its own access (spe_capture.fed), so the records equal the reference loop's
    # while nearly every sample is taken without a Python stop
    data, recs, m = loads(tmp_path, "fast", model_feed="every", **TINY)
    assert m.sample_paths["captured"] >= 0.9 * m.result.samples
    assert loads(tmp_path / "ref", "reference", model_feed="every", **TINY)[0] == data


# A call and its return, the RET made the sampled operation every fourth iteration (as
# br_loop does): with "every" the BL, never sampled, pushes its return address on the return
# stack, so each sampled RET is predicted; with "sampled" only sampled branches train the
# predictor, the stack stays empty and each sampled RET is mispredicted.
def call_loop(count: int) -> str:
    return sampled_loop(count) + """
    bl func
    add x2, x2, #1
    cmp x2, x6
    b.ne loop
    b done
func:
    ret
done:
""" + SPE_DRAIN + """
    .balign 2048
vectors:                         // (no exception is taken)
"""


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_every_branch_trains_the_return_stack(tmp_path, mode):
    out = {}
    for feed in ("every", "sampled"):
        m = run_asm(call_loop(1), tmp_path / f"{mode}-{feed}", mode=mode,
                    spe=SpeConfig(model_feed=feed))
        assert m.result.exit_status == 0
        recs = list(P.iter_records(drained(m, BUF)[3]))
        assert len(recs) == 100 and all(r.op_class == P.OP_CLASS_BRANCH for r in recs)
        assert len({r.pc for r in recs}) == 1   # (the RET)
        out[feed] = {bool(r.events & 1 << P.EV_MISPRED) for r in recs}
    assert out == {"every": {False}, "sampled": {True}}


def test_ground_truth_records_what_the_model_gave_every_execution(tmp_path):
    # --ground-truth with model_feed "every": per PC, each load's first access and each
    # branch as the model saw them. With a one-line L1D and a one-entry TLB (module
    # docstring) the first load of A and the load of B refill and walk at every iteration,
    # the other two loads of A never; the loop's B.NE is taken 2999 times of 3000.
    m = run_asm(LOOP, tmp_path, spe=SpeConfig(**TINY),
                setup=lambda m: m.enable_ground_truth())
    events = m.ground_truth_events()
    loads = {pc: n for pc, n in events.items() if n[0] == 3000}
    assert len(loads) == 4
    first = min(loads)
    refills = [loads[first + 4 * i][1] for i in range(4)]
    walks = [loads[first + 4 * i][4] for i in range(4)]
    assert refills == walks == [3000, 0, 0, 3000]
    loop_branch = [n for n in events.values() if n[5] == 3000]
    assert len(loop_branch) == 1 and 1 <= loop_branch[0][6] <= 8   # (gshare learns it)


def test_readme_report_estimates_hold_the_exact_l1d_rates():
    # The README's first report (guests/sort.elf at the defaults): for every function with
    # sampled loads/stores, the model's exact L1D miss rate lies in the 95% confidence
    # interval of SPE's estimate
    import spe_emu
    from pathlib import Path
    sort = Path(__file__).resolve().parent.parent / "guests" / "sort.elf"
    rep = spe_emu.run(str(sort), ground_truth=True).report()
    rows = [r for r in rep.event_truth["rates"] if r[1] == "l1d_refill"]
    assert any(r[0] == "quick_sort.constprop.0" for r in rows)
    assert all(inside for *_, inside in rows), rows


# 500 loads of distinct lines before the Profiling Buffer is enabled, then LOOP
EARLY = f"""
    ldr x5, ={LINE_A + 0x10000:#x}
    mov x4, #500
early:
    ldr x1, [x5], #64
    subs x4, x4, #1
    b.ne early
""" + LOOP


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_the_feed_starts_when_the_buffer_is_first_enabled(tmp_path, mode):
    # model_feed_from "enable" (the default): the accesses before the MSR that sets
    # PMBLIMITR_EL1.E reach no model (a Linux boot then costs what it did without the
    # feed); "reset": all of them do
    counts = {}
    for start in ("enable", "reset"):
        m = run_asm(EARLY, tmp_path / start, mode=mode, spe=SpeConfig(model_feed_from=start))
        assert m.result.exit_status == 0
        counts[start] = m.result.model["accesses"]
    assert counts["reset"] - counts["enable"] == 500
    fast = run_asm(EARLY, tmp_path / "f", spe=SpeConfig(**TINY))
    ref = run_asm(EARLY, tmp_path / "r", mode="reference", spe=SpeConfig(**TINY))
    assert drained(fast, BUF)[3] == drained(ref, BUF)[3]


# LOOP's profiling session, then the Profiling Buffer disabled and 500 loads of distinct lines
# (1,500 instructions)
LATE = LOOP.split(SPE_DRAIN)[0] + SPE_DRAIN.replace(EXIT, "") + f"""
    msr pmblimitr_el1, xzr
    isb
    ldr x5, ={LINE_A + 0x10000:#x}
    mov x4, #500
late:
    ldr x1, [x5], #64
    subs x4, x4, #1
    b.ne late
    mov x0, #0
""" + EXIT + """
    .balign 2048
vectors:
"""


def test_the_feed_lingers_after_the_buffer_is_disabled(tmp_path):
    # model_feed_linger: after the write that clears PMBLIMITR_EL1.E the model is still fed
    # for that many instructions (an event on the virtual clock, so both run loops pause it
    # at the same instruction), then not until the next enable; -1 never pauses
    counts = {}
    for linger in (-1, 0, 600):
        for mode in ("fast", "reference"):
            m = run_asm(LATE, tmp_path / f"{linger}{mode}", mode=mode,
                        spe=SpeConfig(model_feed_linger=linger))
            assert m.result.exit_status == 0
            counts[linger, mode] = m.result.model["accesses"]
    for linger in (-1, 0, 600):
        assert counts[linger, "fast"] == counts[linger, "reference"], counts
    late = counts[-1, "fast"] - counts[0, "fast"]
    assert 500 <= late <= 505    # (the late loop's loads, its literal load, the exit's)
    assert 150 < counts[600, "fast"] - counts[0, "fast"] < 250   # (600 of 1,500 instructions)
    with pytest.raises(ConfigError, match="model_feed_linger"):
        SpeConfig(model_feed_linger=-2)


# Every other iteration a load-exclusive from an odd address takes an Alignment fault in the
# middle of its block (the handler skips it): the block ends there, early, at an instruction
# that is no branch (a branch ends a block), so nothing trains on the way to the vector, as
# in the reference loop, which runs instruction by instruction. The block's last
# instruction, the CBZ the fault kept from running, must not train the predictor: with the
# global history of gshare every later prediction would shift (counter.c hand_block,
# model.c spe_model_train_last). Without the ADD the CBZ is taken to the next instruction,
# which the predictor sees as not taken in both loops (a sampled CBZ's record asks it so).
def faulting(after_cbz: str) -> str:
    return spe_prologue(0b10, BUF) + """
    ldr x10, =0x40800001
    mov x2, #0
    ldr x6, =3000
loop:
    tst x2, #1
    b.eq skip
    mov x9, #0
    ldxr x9, [x10]               // Alignment fault: the handler skips it
    cbz x9, odd                  // (taken: x9 is still 0)
""" + after_cbz + """odd:
    add x3, x3, #1
skip:
    tst x2, #2
    b.ne next
    add x4, x4, #1
next:
    add x2, x2, #1
    cmp x2, x6
    b.ne loop
""" + SPE_DRAIN + """
    .balign 2048
vectors:
    .org vectors + 0x200         // current EL, SPx, synchronous
    mrs x12, elr_el1
    add x12, x12, #4
    msr elr_el1, x12
    eret
"""


@pytest.mark.parametrize("after_cbz", ["    add x5, x5, #1\n", ""], ids=["past", "next"])
def test_a_block_an_exception_ends_early_trains_no_branch_at_its_end(tmp_path, after_cbz):
    out = {}
    for mode in ("fast", "reference"):
        m = run_asm(faulting(after_cbz), tmp_path / mode, mode=mode,
                    spe=SpeConfig(model_feed="every", gshare_bits=6))
        assert m.result.exit_status == 0
        out[mode] = drained(m, BUF)
        recs = list(P.iter_records(out[mode][3]))
        assert sum(r.op_class == P.OP_CLASS_BRANCH for r in recs) > 20
    assert out["fast"] == out["reference"]
