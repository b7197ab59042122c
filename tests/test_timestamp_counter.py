"""Timestamp packets hold the system counter (SPE supplement §5.3.8: the physical or virtual
count, CollectTimeStamp()), which advances one tick per instruction and by the ticks the PE
spends waiting (platform/clock.py): after a wait the timestamps follow CNTVCT_EL0, not the
instruction count (Linux's perf orders the records against its own events by them: a lag
attributed the samples to the wrong process)."""

import pytest
from asmrun import EXIT, SPE_DRAIN, run_asm, spe_prologue, xregs

from spe_emu.spe.packets import iter_records

BUF = 0x4200_0000
WAITED = 10_000_000   # ticks the PE spent waiting before the program runs

PMSCR = 0b11 | 1 << 5   # PMSCR_EL1.E0SPE, E1SPE, TS
PROGRAM = spe_prologue(PMSCR, BUF) + """
    mrs x19, cntvct_el0
    movz x4, #2000
spin:
    ldr x5, [sp]
    subs x4, x4, #1
    b.ne spin
    mrs x20, cntvct_el0
""" + SPE_DRAIN + """
    .balign 2048
vectors:
    mov x0, #1
""" + EXIT


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_timestamps_are_the_counter_after_a_wait(tmp_path, mode):
    def waited(m):
        m.clock.idle_ticks = WAITED
    m = run_asm(PROGRAM, tmp_path, mode=mode, setup=waited)
    assert m.result.exit_status == 0
    start, end = xregs(m, 19, 20)
    assert start >= WAITED
    ptr = xregs(m, 21)[0]
    recs = list(iter_records(bytes(m.uc.mem_read(BUF, ptr - BUF))))
    assert len(recs) > 10
    assert all(start < r.timestamp < end for r in recs), (start, end, recs[0].timestamp)
