"""Control instructions of code loaded at run time (Machine._follow_runtime_code).

A kernel module's text (Linux's arm_spe_pmu driver) is written into memory by the kernel, not
loaded as an image, so the scan of the loaded images does not see its PSB CSYNCs. At the
first SPE register access from such code the machine scans the executable pages around it
and hooks their control instructions. Here the program copies a routine into RAM no image
holds and calls it: the routine's PSB CSYNC with profiling enabled is seen (the records of
the samples before it are written there: the run's sync observer is told), and the
driver-rule reporter checks reads of PMBPTR_EL1 from it (§3.4.1, §3.6).
"""

from __future__ import annotations

import pytest
from asmrun import EXIT, asm_machine, copy_code, spe_prologue

BUF = 0x4200_0000
COPY = 0x4300_0000


def program(synced: bool) -> str:
    return spe_prologue(0b11, BUF) + copy_code("routine", "routine_end", COPY) + f"""
    movz x3, #{COPY >> 16:#x}, lsl #16
    blr x3
    mov x0, #0
""" + EXIT + f"""
routine:
    mrs x0, pmsidr_el1          // an SPE register access from the copied code
    movz x4, #2000
spin:
    ldr x5, [sp]
    subs x4, x4, #1
    b.ne spin
    psb csync                   // profiling enabled: the samples' records are written
    dsb nsh
    msr pmscr_el1, xzr
    isb
    {"psb csync" if synced else "nop"}
    dsb nsh
    mrs x21, pmbptr_el1
    ret
routine_end:
    .balign 2048
vectors:                        // any exception: exit status 1
    mov x0, #1
""" + EXIT


@pytest.mark.parametrize("synced", [True, False])
def test_psb_csync_of_copied_code_is_seen(tmp_path, synced):
    m = asm_machine(program(synced), tmp_path)
    seen = []
    m.sync_observer = lambda kind, index: seen.append((kind, m.pc))
    result = m.run()
    assert result.exit_status == 0
    # the PSB CSYNC at COPY + 0x14 ran with profiling enabled: its hook wrote the records
    assert any(kind == "psb" and COPY <= pc < COPY + 0x100 for kind, pc in seen), seen
    rules = [b["rule"] for b in result.driver_rules]
    assert rules == ([] if synced else ["ptr-read-unsynced"])
    assert COPY in m._runtime_pages
