"""Run a keystone-assembled bare-metal snippet on the spe_emu machine (test helper).

The program is placed at 0x4000_0000 and booted at the requested EL with spe_emu's reset state.
It must end with ``EXIT`` (a semihosting SYS_EXIT_EXTENDED with status x0) from this module.
"""

from __future__ import annotations

from pathlib import Path

from spe_emu.asm import assemble
from spe_emu.board.loader import Image, Segment
from spe_emu.cpu.machine import Machine, MachineConfig
from spe_emu.spe.config import SpeConfig

BASE = 0x4000_0000
# SYS_EXIT_EXTENDED(ADP_Stopped_ApplicationExit, x0): the parameter block is built on the stack.
EXIT = """
    mov x2, x0
    movz x1, #0x0026
    movk x1, #0x2, lsl #16
    sub sp, sp, #16
    stp x1, x2, [sp]
    mov x1, sp
    mov x0, #0x20
    hlt #0xf000
"""


def run_asm(text: str, tmp_path: Path, *, boot_el: int = 1, mode: str = "fast",
            spe: SpeConfig | None = None, stack: int = 0x4100_0000) -> Machine:
    """Assemble ``text`` (which sets nothing up itself but may use SP) and run it."""
    prologue = f"movz x9, #{stack >> 16:#x}, lsl #16\nmov sp, x9\n"
    code = assemble(prologue + text, BASE)
    image = Image(path=Path("<asm>"), entry=BASE,
                  segments=[Segment(BASE, BASE, code, len(code), 0b111)])
    m = Machine(MachineConfig(boot_el=boot_el, mode=mode, spe=spe or SpeConfig(),
                              outdir=tmp_path, max_insns=50_000_000))
    m.load(image)
    m.reset(BASE)
    m.result = m.run()
    return m
