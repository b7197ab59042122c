"""Run a keystone-assembled bare-metal snippet on the spe_emu machine (test helper).

The program is placed at 0x4000_0000 and booted at the requested EL with spe_emu's reset state.
It must end with ``EXIT`` (a semihosting SYS_EXIT_EXTENDED with status x0) from this module.
"""

from __future__ import annotations

from pathlib import Path

from spe_emu.asm import assemble
from spe_emu.platform.loader import Image, Segment
from spe_emu.cpu.a64 import X_REGS
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
# From EL2 with stage 2 programmed: invalidate the EL1&0 TLB entries, then ERET to EL1h (DAIF
# masked, SP_EL1 = 0x4100_0000) at the label ``el1`` the program defines next.
ERET_TO_EL1 = """
    tlbi alle1
    dsb sy
    isb
    movz x7, #0x4100, lsl #16
    msr s3_4_c4_c1_0, x7        // SP_EL1
    adr x5, el1
    msr s3_4_c4_c0_1, x5        // ELR_EL2
    mov x6, #0x3c5              // SPSR_EL2: EL1h, DAIF masked
    msr s3_4_c4_c0_0, x6
    eret
el1:
"""


def mov64(reg: str, value: int) -> str:
    """Assembly that loads the 64-bit ``value`` into ``reg``: MOVZ, then a MOVK per nonzero
    further 16-bit chunk."""
    text = f"movz {reg}, #{value & 0xFFFF:#x}\n"
    for shift in (16, 32, 48):
        if (value >> shift) & 0xFFFF:
            text += f"movk {reg}, #{(value >> shift) & 0xFFFF:#x}, lsl #{shift}\n"
    return text


ALIAS = 1 << 32
"""The second virtual address of RAM that :func:`alias_stage1` maps: VA = PA + 4 GiB."""


def alias_stage1(table: int, reg: str = "x1") -> str:
    """Stage 1 of the EL1&0 regime on, RAM's first GiB (PA 0x4000_0000, Normal memory) mapped
    at its own address and at + ALIAS by 1 GiB blocks: a level 1 table at ``table`` (4 KiB
    granule, TCR_EL1.T0SZ 25: 39-bit VA, EPD1), TTBR0_EL1, MAIR_EL1 (Attr0 Device-nGnRnE,
    Attr1 Normal write-back), then SCTLR_EL1.M. Uses X0 and ``reg``."""
    block = BASE | (1 << 10) | (1 << 2) | 0b01   # PA, AF, AttrIndx 1, block descriptor
    return f"""
    {mov64(reg, table)}
    {mov64("x0", block)}
    str x0, [{reg}, #8]
    str x0, [{reg}, #40]
    msr ttbr0_el1, {reg}
    mov x0, #0xff00
    msr mair_el1, x0
    mov x0, #25
    orr x0, x0, #(1 << 23)
    msr tcr_el1, x0
    isb
    mrs x0, sctlr_el1
    orr x0, x0, #1
    msr sctlr_el1, x0
    isb
"""


def spe_prologue(pmscr: int, buf: int, *, limit: int = 0x100000, ptr: int | None = None,
                 pmsirr: int = 0x100) -> str:
    """Assembly that points VBAR_EL1 at ``vectors``, programs the Profiling Buffer at ``ptr``
    (default ``buf``) with its limit ``buf + limit`` (enabled), PMSIRR_EL1 (default: INTERVAL
    1, i.e. 256 members), PMSICR_EL1 = 0 and PMSCR_EL1 = ``pmscr``, then ISB."""
    ptr = buf if ptr is None else ptr
    return f"""
    adr x0, vectors
    msr vbar_el1, x0
    movz x0, #{ptr >> 16:#x}, lsl #16
    movk x0, #{ptr & 0xFFFF:#x}
    msr pmbptr_el1, x0
    movz x1, #{(buf + limit) >> 16:#x}, lsl #16
    orr x1, x1, #1
    msr pmblimitr_el1, x1
    movz x2, #{pmsirr >> 16:#x}, lsl #16
    movk x2, #{pmsirr & 0xFFFF:#x}
    msr pmsirr_el1, x2
    msr pmsicr_el1, xzr
    mov x3, #{pmscr:#x}
    msr pmscr_el1, x3
    isb
"""


# Stop profiling, drain (PSB CSYNC; DSB) and leave PMBPTR_EL1, PMSICR_EL1 and PMBSR_EL1 in
# x21, x22 and x23, then exit with status 0.
SPE_DRAIN = """
    msr pmscr_el1, xzr
    isb
    psb csync
    dsb nsh
    mrs x21, pmbptr_el1
    mrs x22, pmsicr_el1
    mrs x23, pmbsr_el1
    mov x0, #0
""" + EXIT


# Stop profiling and drain as SPE_DRAIN, leaving PMBPTR_EL1 in x21 and PMSIDR_EL1 in x22, exit
# with status 0; then VBAR_EL1's table ``vectors`` (no exception is expected: it spins).
SPE_DRAIN_PMSIDR = """
    msr pmscr_el1, xzr
    isb
    psb csync
    dsb nsh
    mrs x21, pmbptr_el1
    mrs x22, pmsidr_el1
    mov x0, #0
""" + EXIT + """
    .balign 2048
vectors:
    b vectors
"""


# Ends EL0 code with SVC #0 and supplies VBAR_EL1's table: an SVC from EL0 goes on at ``done``
# (at EL1); any other synchronous exception from EL0 skips the instruction that took it.
EL0_SKIP_HANDLER = """
    svc #0
    nop                        // (keystone 0.9.2 rejects this text without it)
    .balign 2048
vectors:
    .skip 0x400
    mrs x20, esr_el1
    lsr x20, x20, #26
    cmp x20, #0x15
    b.eq done
    mrs x24, elr_el1
    add x24, x24, #4
    msr elr_el1, x24
    eret
done:
"""


def copy_code(start: str, end: str, dest: int) -> str:
    """Assembly that copies the code from label ``start`` up to label ``end`` to ``dest`` (an
    address whose low 16 bits are 0) word by word and publishes it as instructions (DSB ISH,
    IC IALLU, DSB ISH, ISB), as software that writes code at run time does. Uses x10-x13
    and the label ``copy_code``."""
    assert dest & 0xFFFF == 0, f"{dest:#x}: low 16 bits must be 0"
    return f"""
    adr x10, {start}
    adr x11, {end}
    movz x12, #{dest >> 16:#x}, lsl #16
copy_code:
    ldr w13, [x10], #4
    str w13, [x12], #4
    cmp x10, x11
    b.lo copy_code
    dsb ish
    ic iallu
    dsb ish
    isb
"""


def irq_vectors(body: str = "") -> str:
    """Ends a program that must take an IRQ at EL1: exit status 1 if it runs on to here; then
    VBAR_EL1's table ``vectors`` whose IRQ entry (current EL, SPx: offset 0x280) leaves ELR_EL1
    in x20 and ICC_IAR1_EL1 (the INTID acknowledged) in x21, runs ``body`` and exits with
    status 0."""
    return "    mov x0, #1\n" + EXIT + f"""
    .balign 2048
vectors:
    .skip 0x280
    mrs x20, elr_el1
    mrs x21, icc_iar1_el1
{body}    mov x0, #0
""" + EXIT


def xregs(m: Machine, *ns: int) -> list[int]:
    """X<n> of the stopped machine ``m``, for each ``n``."""
    return [m.uc.reg_read(X_REGS[n]) for n in ns]


def drained(m: Machine, buf: int, size: int | None = None) -> tuple:
    """What a program ending in SPE_DRAIN leaves: (samples, population, PMBPTR_EL1,
    PMSICR_EL1 and PMBSR_EL1 at the end, the first ``size`` bytes of the buffer at ``buf``;
    default: up to PMBPTR_EL1)."""
    ptr = xregs(m, 21)[0]
    return (m.result.samples, m.result.population, xregs(m, 21, 22, 23),
            bytes(m.uc.mem_read(buf, ptr - buf if size is None else size)))


def asm_machine(text: str, tmp_path: Path, *, boot_el: int = 1, mode: str = "fast",
                spe: SpeConfig | None = None, stack: int = 0x4100_0000,
                max_insns: int = 50_000_000, cpu=None) -> Machine:
    """Assemble ``text`` (which sets nothing up itself but may use SP, set to ``stack``
    first), load it at BASE and reset the machine there, ready to run. The programs run at
    ``boot_el`` with the MMU off and some make misaligned loads on purpose (operands across
    a page boundary): ``device_alignment=False`` lets them complete, as to Normal memory."""
    prologue = f"movz x9, #{stack >> 16:#x}, lsl #16\nmov sp, x9\n"
    code = assemble(prologue + text, BASE)
    image = Image(path=Path("<asm>"), entry=BASE,
                  segments=[Segment(BASE, BASE, code, len(code), 0b111)])
    extra = {} if cpu is None else {"cpu": cpu}
    m = Machine(MachineConfig(boot_el=boot_el, mode=mode, spe=spe or SpeConfig(),
                              outdir=tmp_path, max_insns=max_insns, device_alignment=False,
                              **extra))
    m.load(image)
    m.reset(BASE)
    return m


def run_asm(text: str, tmp_path: Path, *, boot_el: int = 1, mode: str = "fast",
            spe: SpeConfig | None = None, stack: int = 0x4100_0000,
            setup=None, cpu=None) -> Machine:
    """Assemble ``text`` (which sets nothing up itself but may use SP) and run it
    (:func:`asm_machine`); ``setup(machine)`` is called before the run."""
    m = asm_machine(text, tmp_path, boot_el=boot_el, mode=mode, spe=spe, stack=stack, cpu=cpu)
    if setup is not None:
        setup(m)
    m.result = m.run()
    return m
