"""FEAT_SPE_PBT (Arm ARM D17.6.3.1, D18.2 Address packet index 0b00100, PMSIDR_EL1.PBT):
every record carries the target of the most recent taken branch retired with profiling
enabled before the sampled operation, with the EL and NS bits of the PC packet; none before
the first taken branch after profiling was enabled; the same records in both run loops."""

from __future__ import annotations

import pytest

from asmrun import SPE_DRAIN, drained, run_asm, spe_prologue
from spe_emu.errors import ConfigError
from spe_emu.spe import packets as P
from spe_emu.spe.config import SpeConfig

BUF = 0x4800_0000
# FEAT_SPEv1p2 (PBT needs it; v1p2 implements FnE), 128-byte records at most
PBT = dict(pbt=1, pmsver=3, fne=1, max_size_code=7)
LOOP = spe_prologue(0b10, BUF) + """
    ldr x4, =3000
loop:
    add x1, x1, #1
    add x2, x2, #2
    add x3, x3, #3
    subs x4, x4, #1
    b.ne loop
""" + SPE_DRAIN + """
    .balign 2048
vectors:                         // (no exception is taken)
"""


def records(tmp_path, mode: str, **spe) -> tuple[bytes, list[P.Record]]:
    m = run_asm(LOOP, tmp_path / mode, mode=mode, spe=SpeConfig(**spe))
    assert m.result.exit_status == 0
    data = drained(m, BUF)[3]
    return data, list(P.iter_records(data))


def prev_branch(r: P.Record) -> int | None:
    """The record's previous branch target (Address index 0b00100), sign-extended from bit
    55 as the PC; None without one. (The decoders print and keep index 4 raw, as perf 6.1.)"""
    for p in r.packets:
        if p.type is P.PacketType.ADDRESS and p.index == P.ADDR_PREV_BRANCH:
            addr = p.payload & ((1 << 56) - 1)
            return addr - (1 << 56) if addr >> 55 else addr
    return None


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_previous_branch_target_packets(tmp_path, mode):
    data, recs = records(tmp_path, mode, **PBT)
    loop = {r.branch_target for r in recs if r.branch_target is not None}
    assert len(loop) == 1   # (the B.NE's target: the loop's first instruction)
    loop = loop.pop()
    with_pbt = [r for r in recs if prev_branch(r) is not None]
    # every sample after the first taken branch has it, and it is the loop's start
    assert {prev_branch(r) for r in with_pbt} == {loop}
    assert len(with_pbt) >= len(recs) - 1 and len(recs) > 40
    first = next(r for r in recs if prev_branch(r) is not None)
    packet = bytes([0xB4]) + (loop | first.el << 61 | first.ns << 63).to_bytes(8, "little")
    assert packet in data   # (short header 0b10110100: Address, index 0b00100)


def test_same_records_in_both_loops_and_none_without_pbt(tmp_path):
    fast, _ = records(tmp_path, "fast", **PBT)
    ref, _ = records(tmp_path, "reference", **PBT)
    assert fast == ref
    _, plain = records(tmp_path, "fast")
    assert all(prev_branch(r) is None for r in plain)


def test_pbt_needs_spev1p2_and_128_byte_records():
    with pytest.raises(ConfigError, match="requires pmsver >= 3"):
        SpeConfig(pbt=1, max_size_code=7)
    with pytest.raises(ConfigError, match="requires max_size_code >= 7"):
        SpeConfig(pbt=1, pmsver=3, fne=1)
