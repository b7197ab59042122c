"""What the fast run loop learns about code is kept for the process (LearntCode, per code page
with its bytes): a later machine running the same code is given it when profiling is first
enabled instead of stopping to learn it, and code that differs at the same address is learnt
afresh. Records are the same either way (docs/model.md, "Samples inside a block")."""

from asmrun import BASE, SPE_DRAIN, drained, run_asm, spe_prologue

from spe_emu.cpu import machine as M

BUF = 0x4200_0000


def loop_program(first: str) -> str:
    # Profiling at EL1, interval 256: a loop whose load is sampled in the middle of its block;
    # ``first`` is the instruction before the load.
    return spe_prologue(0b10, BUF) + f"""
    movz x6, #{BUF >> 16:#x}, lsl #16
    add x6, x6, #0x40000
    mov x4, #3000
    .balign 64
loop:
    {first}
    ldr x5, [x6]
    subs x4, x4, #1
    b.ne loop
""" + SPE_DRAIN + "\n    .balign 2048\nvectors:\n"


def test_a_later_machine_reuses_what_was_learnt(tmp_path):
    M.LEARNT_CODE.pages.clear()
    text = loop_program("add x3, x3, #1")
    first = run_asm(text, tmp_path / "first")
    assert any(va_page == BASE >> 12 for (_, _, _, va_page) in M.LEARNT_CODE.pages)
    second = run_asm(text, tmp_path / "second")
    reference = run_asm(text, tmp_path / "reference", mode="reference")
    assert drained(second, BUF) == drained(first, BUF) == drained(reference, BUF)
    assert drained(first, BUF)[0] >= 10
    # The first machine stopped in front of the loop's block to learn it; the second did not.
    assert second.counter.stops < first.counter.stops


def test_other_code_at_the_same_address_is_learnt_afresh(tmp_path):
    # The same loop but the load's base register is written just before it: what was learnt
    # for the first program (the load's operands are known at the block's start) would give
    # the wrong data address here.
    M.LEARNT_CODE.pages.clear()
    run_asm(loop_program("add x3, x3, #1"), tmp_path / "first")
    text = loop_program("add x6, x6, #8")
    fast = run_asm(text, tmp_path / "fast")
    reference = run_asm(text, tmp_path / "reference", mode="reference")
    assert drained(fast, BUF) == drained(reference, BUF)
    assert drained(fast, BUF)[0] >= 10
