"""No host randomness or host time reaches a guest of the virt board: the same program,
configuration and seed give byte-identical console output, whatever stdin is attached.

* RNDR (FEAT_RNG) is answered from a seeded generator with NZCV = 0b0000 (success; Arm ARM
  D19.2 RNDR): same seed, same values; another seed, other values.
* A WFI wait ends only when an interrupt is asserted: console-input polls (stdin attached as
  a file) do not change the instruction count.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from qemu_probe import AS, LD
from test_virt_board import build_virt_timer

needs_as = pytest.mark.skipif(not (shutil.which(AS) and shutil.which(LD)),
                              reason="needs Debian's binutils-aarch64-linux-gnu")

RNDR_PROGRAM = """
    .global _start
_start:
    movz x1, #0x0900, lsl #16
    msr nzcv, x1                // N = 0, Z = 0, C = 0, V = 0 ... then set all four:
    mov x3, #0xF0000000
    msr nzcv, x3
    mrs x2, s3_3_c2_c4_0        // RNDR
    mrs x3, nzcv
    mov x4, #16
1:  and x5, x2, #0xf            // 16 hex digits, low nibble first, as 'a'..'p'
    add x5, x5, #'a'
    strb w5, [x1]
    lsr x2, x2, #4
    subs x4, x4, #1
    b.ne 1b
    lsr x3, x3, #28             // NZCV after RNDR
    add x3, x3, #'0'
    strb w3, [x1]
    movz w0, #0x0008            // PSCI SYSTEM_OFF
    movk w0, #0x8400, lsl #16
    hvc #0
"""


def _run(kernel: Path, out: Path, *args, stdin=subprocess.DEVNULL) -> tuple[bytes, dict]:
    proc = subprocess.run(["spe-emu", "run", "--machine", "virt", "--kernel", str(kernel),
                           "-o", str(out), *map(str, args)], stdin=stdin,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout, json.loads((out / "summary.json").read_text())


@needs_as
def test_rndr_is_seeded_and_succeeds(tmp_path):
    (tmp_path / "r.S").write_text(RNDR_PROGRAM)
    subprocess.run([AS, "-march=armv8.5-a+rng", "-o", tmp_path / "r.o", tmp_path / "r.S"],
                   check=True)
    elf = tmp_path / "r.elf"
    subprocess.run([LD, "-Ttext=0x40080000", "-o", elf, tmp_path / "r.o"], check=True)
    a, _ = _run(elf, tmp_path / "a")
    b, _ = _run(elf, tmp_path / "b")
    c, _ = _run(elf, tmp_path / "c", "--seed", 7)
    assert len(a) == 17 and a.endswith(b"0")   # 16 digits, then NZCV = 0b0000
    assert a == b                              # same seed: the same value
    assert c != a and c.endswith(b"0")         # another seed: another value


@pytest.mark.skipif(not shutil.which("aarch64-linux-gnu-gcc"),
                    reason="needs Debian's gcc-aarch64-linux-gnu")
def test_attached_input_does_not_change_the_run(tmp_path):
    elf = build_virt_timer(tmp_path / "virt-timer.elf")
    typed = tmp_path / "typed.txt"
    typed.write_bytes(b"ignored input\n")
    quiet_out, quiet = _run(elf, tmp_path / "quiet")
    with typed.open("rb") as stdin:
        fed_out, fed = _run(elf, tmp_path / "fed", stdin=stdin)
    assert fed_out == quiet_out and b"timer interrupts: 10" in quiet_out
    assert (fed["instructions"], fed["irqs_taken"]) == (quiet["instructions"],
                                                        quiet["irqs_taken"])
