"""Run a tiny bare-metal probe program on ``qemu-system-aarch64 -M virt`` (test helper).

A probe program is a list of steps; each step is assembly text that leaves a value in x0,
which the runtime prints on the PL011 (0x0900_0000) as 16 hex digits and a newline. After the
last step the program calls PSCI SYSTEM_OFF through HVC (QEMU's conduit when the machine has
no EL2: ``hw/arm/virt.c``), so QEMU exits. :func:`run` returns the printed values in step
order. The program runs at EL1 (``-M virt`` without ``virtualization``/``secure``) with DAIF
masked, as QEMU resets the PE.

Used by tests/test_gic.py, tests/test_psci.py and tests/test_virt_board.py to compare
spe_emu's models with QEMU 7.2's (:func:`build` and :func:`run_elf` separately, to run the
same program on spe-emu too).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CROSS = "aarch64-linux-gnu-"
AS, LD = CROSS + "as", CROSS + "ld"
QEMU = "qemu-system-aarch64"
TIMEOUT = 20

needs_qemu = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in (AS, LD, QEMU)),
    reason=f"{QEMU} and {AS}/{LD} are needed (Debian: qemu-system-arm, "
           f"binutils-aarch64-linux-gnu)")

_LINK = """ENTRY(_start)
SECTIONS {{ . = {link:#x}; .text : {{ *(.text.boot) *(.text*) *(.rodata*) }}
           .bss : {{ *(.bss*) }} /DISCARD/ : {{ *(.note*) *(.comment) }} }}
"""
RAM_BASE = 0x4000_0000
"""Where QEMU's virt board has RAM, and the default link address of a probe program (QEMU
then passes no DTB: x0 = 0 at entry; link at RAM_BASE + 0x8_0000 to get one)."""

_RUNTIME = """
    .section .text
    // x0 -> 16 hex digits and '\\n' on the PL011 data register
puthex:
    ldr     x9, =0x09000000
    mov     x10, #60
1:  lsr     x11, x0, x10
    and     x11, x11, #0xF
    add     x12, x11, #'0'
    add     x13, x11, #('a' - 10)
    cmp     x11, #10
    csel    x11, x12, x13, lt
    strb    w11, [x9]
    subs    x10, x10, #4
    b.ge    1b
    mov     w11, #'\\n'
    strb    w11, [x9]
    ret
    .ltorg
    .bss
    .balign 16
    .skip   4096
stack_top:
"""

SYSTEM_OFF = """
    ldr     x0, =0x84000008
    hvc     #0
"""


def program(steps: list[str]) -> str:
    """The assembly text of a probe program running ``steps`` in order."""
    body = []
    for i, step in enumerate(steps):
        body.append(f"    // step {i}\n{step}\n    bl      puthex\n")
    return ("    .section .text.boot, \"ax\"\n    .global _start\n_start:\n"
            "    ldr     x1, =stack_top\n    mov     sp, x1\n" + "".join(body) + SYSTEM_OFF
            + "2:  wfi\n    b       2b\n    .ltorg\n" + _RUNTIME)


def build(steps: list[str], workdir: Path, link: int = RAM_BASE) -> Path:
    """Assemble and link ``steps`` into a program (see :func:`program`) at address ``link``;
    returns the ELF's path (in ``workdir``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    src, obj, elf, ld = (workdir / n for n in ("probe.S", "probe.o", "probe.elf", "probe.ld"))
    src.write_text(program(steps))
    ld.write_text(_LINK.format(link=link))
    check([AS, "-march=armv8-a", "-o", str(obj), str(src)])
    check([LD, "--no-warn-rwx-segments", "-T", str(ld), "-o", str(elf), str(obj)])
    return elf


def run_elf(kernel: Path, machine: str = "virt,gic-version=3", memory: str = "256M",
            timeout: float = TIMEOUT) -> str:
    """Run ``kernel`` on QEMU ``-M machine -cpu max -m memory`` (``-kernel``) and return what
    it printed on the PL011; fails the test if QEMU exits with a non-zero status."""
    cmd = [QEMU, "-M", machine, "-cpu", "max", "-m", memory, "-display", "none",
           "-monitor", "none", "-serial", "stdio", "-nic", "none", "-kernel", str(kernel)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode:
        pytest.fail(f"QEMU exit status {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def values(stdout: str, steps: int, who: str = "QEMU") -> list[int]:
    """The values a probe program printed (one hex line per step)."""
    out = [int(line, 16) for line in stdout.split()]
    if len(out) != steps:
        pytest.fail(f"{who} printed {len(out)} values for {steps} steps:\n{stdout}")
    return out


def run(steps: list[str], workdir: Path, machine: str = "virt,gic-version=3") -> list[int]:
    """Assemble ``steps`` into a program, run it on QEMU ``-M machine -cpu max`` and return
    the value each step left in x0."""
    return values(run_elf(build(steps, workdir), machine), len(steps))


def check(cmd: list[str]) -> str:
    """Run the build tool ``cmd`` (60 s at most) and return its stdout; fails the test with
    its stderr if it exits with a non-zero status."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode:
        pytest.fail(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return proc.stdout
