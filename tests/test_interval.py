"""Sample interval counter (SPE §3.1): reload rules, the INTERVAL*256+1 distance, and the
equivalence of the batched operations (fast path) with one-member steps (reference)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from spe_emu.spe.config import SpeConfig
from spe_emu.spe.interval import IntervalCounter, Xorshift64
from spe_emu.spe.registers import spe_registers


def counter(ernd=0, seed=1):
    t = spe_registers(SpeConfig(ernd=ernd))
    return IntervalCounter(t["PMSICR_EL1"], t["PMSIRR_EL1"], ernd, Xorshift64(seed), 1), t


def pmsirr(t, interval, rnd=0):
    return t["PMSIRR_EL1"].make(INTERVAL=interval, RND=rnd)


def selections(c, irr, members):
    return [i for i in range(members) if c.step(irr)]


def test_initialisation_loads_interval_when_zero():
    c, t = counter()
    c.initialize(pmsirr(t, 3))
    assert c.value == 3 << 8           # COUNT[31:8] = INTERVAL, COUNT[7:0] = 0 (§3.1.1)
    c.value = 5
    c.initialize(pmsirr(t, 3))
    assert c.value == 5                # nonzero PMSICR_EL1 restarts from its value


def test_counted_zero_keeps_its_selection_across_disable():
    """A COUNT that reached zero by counting selects the next member even when profiling is
    disabled and enabled in between (§3.1.3 "retain their values"; §2.2 step 3); only a zero
    software wrote is reloaded by §3.1.1."""
    c, t = counter()
    irr = pmsirr(t, 1)
    c.initialize(irr)
    assert selections(c, irr, 256) == []   # COUNT 256 -> 0, no selection yet
    assert c.value == 0
    c.initialize(irr)                        # back from an EL where profiling is disabled
    assert c.value == 0
    assert c.step(irr)                       # the next member is the one selected
    c.value = 0                              # software writes zero: uninitialised again
    c.initialize(irr)
    assert c.value == 1 << 8


def test_distance_is_interval_times_256_plus_one():
    c, t = counter()
    irr = pmsirr(t, 2)
    c.initialize(irr)
    sel = selections(c, irr, 5 * 513 + 10)
    assert sel[0] == 512               # the member that finds COUNT == 0
    assert [b - a for a, b in zip(sel, sel[1:])] == [2 * 256 + 1] * (len(sel) - 1)


def test_random_low_byte_with_ernd0():
    c, t = counter(seed=7)
    irr = pmsirr(t, 1, rnd=1)
    c.initialize(irr)
    sel = selections(c, irr, 20000)
    gaps = {b - a for a, b in zip(sel, sel[1:])}
    assert len(gaps) > 5 and all(257 <= g <= 257 + 255 for g in gaps)


def test_rng_is_deterministic():
    a, b = Xorshift64(42), Xorshift64(42)
    assert [a.byte() for _ in range(50)] == [b.byte() for _ in range(50)]
    assert [Xorshift64(1).byte() for _ in range(3)] != [Xorshift64(2).byte() for _ in range(3)]


@settings(max_examples=60, deadline=None)
@given(ernd=st.integers(0, 1), rnd=st.integers(0, 1), interval=st.integers(1, 3),
       start=st.integers(0, 2000), chunks=st.lists(st.integers(1, 900), min_size=1, max_size=8),
       seed=st.integers(0, 2**32))
def test_batched_operations_match_single_steps(ernd, rnd, interval, start, chunks, seed):
    ref, t = counter(ernd, seed)
    fast, _ = counter(ernd, seed)
    irr = pmsirr(t, interval, rnd)
    ref.value = fast.value = start
    ref.initialize(irr)
    fast.initialize(irr)
    ref_sel, fast_sel = [], []
    pos = 0
    for n in chunks:
        # reference: n single steps
        for i in range(n):
            if ref.step(irr):
                ref_sel.append(pos + i)
        # fast: jump from event to event
        done = 0
        while done < n:
            k = fast.members_to_next_event()
            if done + k <= n:
                fast.advance(k - 1)
                if fast.fire(irr):
                    fast_sel.append(pos + done + k - 1)
                done += k
            else:
                fast.advance(n - done)
                done = n
        pos += n
        assert fast.value == ref.value
    assert fast_sel == ref_sel
