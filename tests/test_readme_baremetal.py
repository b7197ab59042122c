"""The README's "Write your own bare-metal guest" recipe, run as written (issue 16): its
assembly source and its shell commands are taken from README.md, so the test fails when the
text stops working. Skips without Debian's aarch64 binutils."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "### Write your own bare-metal guest"
EXIT_STATUS = 3   # what the recipe's hello.S passes to SYS_EXIT_EXTENDED


def _blocks() -> tuple[str, list[str]]:
    text = README.read_text().split(SECTION, 1)[1].split("\n#", 1)[0]
    asm = re.search(r"```asm\n(.*?)```", text, re.S).group(1)
    sh = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    return asm, [line.split("#")[0].strip() for line in sh.splitlines() if line.strip()]


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-as") is None,
                    reason="binutils-aarch64-linux-gnu not installed")
def test_readme_bare_metal_recipe_runs(tmp_path):
    asm, commands = _blocks()
    (tmp_path / "hello.S").write_text(asm)
    *build, run = commands
    for cmd in build:
        subprocess.run(cmd.split(), cwd=tmp_path, check=True)
    argv = run.split()
    assert argv[0] == "spe-emu"
    proc = subprocess.run([sys.executable, "-c", "from spe_emu.tools.cli import main; main()",
                           *argv[1:]], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == EXIT_STATUS, proc.stderr
    assert proc.stdout.startswith("hello from EL1\n")
    refused = subprocess.run([sys.executable, "-c", "from spe_emu.tools.cli import main; main()",
                              *argv[1:2], "--interval", "512", *argv[2:]], cwd=tmp_path,
                             capture_output=True, text=True)
    assert refused.returncode == 125
    assert refused.stderr.strip() == (
        "spe-emu: error: --interval: with --no-firmware the image programs SPE itself (the "
        "firmware's driver, which these options configure, is not loaded): leave it out")
