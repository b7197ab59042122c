"""Run a tiny bare-metal probe program on ``qemu-system-aarch64 -M virt`` (test helper).

A probe program is a list of steps; each step is assembly text that leaves a value in x0,
which the runtime prints on the PL011 (0x0900_0000) as 16 hex digits and a newline. After the
last step the program calls PSCI SYSTEM_OFF through HVC (QEMU's conduit when the machine has
no EL2: ``hw/arm/virt.c``), so QEMU exits. :func:`run` returns the printed values in step
order. The program runs at EL1 (``-M virt`` without ``virtualization``/``secure``) with DAIF
masked, as QEMU resets the PE.

Used by tests/test_gic.py and tests/test_psci.py to compare spe_emu's models with QEMU 7.2's.
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
SECTIONS { . = 0x40000000; .text : { *(.text.boot) *(.text*) *(.rodata*) }
           .bss : { *(.bss*) } /DISCARD/ : { *(.note*) *(.comment) } }
"""

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


def run(steps: list[str], workdir: Path, machine: str = "virt,gic-version=3") -> list[int]:
    """Assemble ``steps`` into a program, run it on QEMU ``-M machine -cpu max`` and return
    the value each step left in x0."""
    workdir.mkdir(parents=True, exist_ok=True)
    src, obj, elf, ld = (workdir / n for n in ("probe.S", "probe.o", "probe.elf", "probe.ld"))
    src.write_text(program(steps))
    ld.write_text(_LINK)
    _check([AS, "-march=armv8-a", "-o", str(obj), str(src)])
    _check([LD, "--no-warn-rwx-segments", "-T", str(ld), "-o", str(elf), str(obj)])
    cmd = [QEMU, "-M", machine, "-cpu", "max", "-m", "256M", "-display", "none",
           "-monitor", "none", "-serial", "stdio", "-nic", "none", "-kernel", str(elf)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if proc.returncode:
        pytest.fail(f"QEMU exit status {proc.returncode}: {proc.stderr.strip()[-300:]}")
    values = [int(line, 16) for line in proc.stdout.split()]
    if len(values) != len(steps):
        pytest.fail(f"QEMU printed {len(values)} values for {len(steps)} steps:\n{proc.stdout}")
    return values


def _check(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode:
        pytest.fail(f"{' '.join(cmd)} failed:\n{proc.stderr}")
