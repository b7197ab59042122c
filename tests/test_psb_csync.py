"""PSB CSYNC (Arm ARM C6.2 "PSB CSYNC"; SPE supplement §3.6): every record of an operation
before it is written to memory, so a load after ``psb csync; dsb nsh`` reads it -- in every run
mode, with profiling still enabled (no trapped SPE access in between)."""

import pytest
from asmrun import SPE_DRAIN, drained, run_asm, spe_prologue, xregs

from spe_emu.spe.packets import iter_records

BUF = 0x4200_0000
MODES = ("fast", "reference")

# Profiling enabled (E0SPE | E1SPE) with an interval of 256: a loop of 2000 x 4 instructions
# (~31 samples), then PSB CSYNC; DSB NSH and loads of the buffer's first 16 bytes and of the
# 8 bytes before the last complete record's end, with profiling still on. x26 = how many
# records the guest sees (a load after each PSB CSYNC of a second loop, read from the
# buffer's bytes at PMBPTR_EL1 - 8: must be nonzero). Then stop and drain.


def loop(name: str) -> str:
    return f"""
    movz x4, #2000
{name}:
    ldr x5, [sp]
    subs x4, x4, #1
    nop
    b.ne {name}
"""


PROGRAM = spe_prologue(0b11, BUF) + loop("first") + """
    psb csync
    dsb nsh
    movz x10, #{hi:#x}, lsl #16
    ldr x19, [x10]
    ldr x20, [x10, #8]
""".format(hi=BUF >> 16) + loop("second") + """
    psb csync
    dsb nsh
    ldr x18, [x10, #0x40]
""" + SPE_DRAIN + """
    .balign 2048
vectors:
    b vectors
"""


@pytest.mark.parametrize("mode", MODES)
def test_load_after_psb_csync_reads_the_records(tmp_path, mode):
    m = run_asm(PROGRAM, tmp_path, mode=mode)
    assert not m.result.guest_errors
    first16 = bytes(m.uc.mem_read(BUF, 16))
    x19, x20, x18 = xregs(m, 19, 20, 18)
    # The first record starts at BUF: what the guest loaded after PSB CSYNC is what is there
    # at the end (records are never rewritten), and it is not zeros.
    assert first16 != bytes(16)
    assert x19.to_bytes(8, "little") + x20.to_bytes(8, "little") == first16
    assert x18 == int.from_bytes(m.uc.mem_read(BUF + 0x40, 8), "little") != 0
    recs = list(iter_records(bytes(m.uc.mem_read(BUF, xregs(m, 21)[0] - BUF))))
    assert len(recs) >= 50


def test_psb_csync_same_buffer_in_both_modes(tmp_path):
    # The guest-visible buffer at each synchronisation point (Machine.sync_observer) is the
    # same in both run loops: the two PSB CSYNCs with profiling enabled, and the trapped
    # PMS*/PMB* accesses.
    got = {}
    for mode in MODES:
        points = []

        def setup(m, points=points):
            m.sync_observer = lambda kind, index: points.append(
                (kind, index, bytes(m.uc.mem_read(BUF, 0x1000))))

        m = run_asm(PROGRAM, tmp_path / mode, mode=mode, setup=setup)
        got[mode] = (drained(m, BUF), xregs(m, 18, 19, 20), points)
    assert got["fast"] == got["reference"]
    kinds = [kind for kind, _, _ in got["fast"][2]]
    assert kinds.count("psb") == 2 and kinds.count("sysreg") >= 8
    # At the first PSB CSYNC: 2000 x 4 loop instructions and the set-up have run, interval 256
    # (no RND): one record per 256 members, each starting with a PC packet (header 0xB0..0xB3).
    _, index, first = got["fast"][2][kinds.index("psb")]
    records = list(iter_records(first.rstrip(b"\0")))
    assert len(records) == index // 256
