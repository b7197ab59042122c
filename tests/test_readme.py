"""The README's recipes run as written, their text taken from README.md, so a test fails when
the text stops working:

* the quick start (issue 29 item 2): every command of its shell blocks, in order, in a fresh
  directory, each exiting 0 and making what the README says it makes, every file a command
  reads made by an earlier one (or the repository's guests/ and examples/); commands that
  need a tool that is absent are skipped, and said so;
* "Write your own bare-metal guest" (issue 16): its assembly source and shell commands
  (skipped without Debian's aarch64 binutils).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
QUICK_START = "## Quick start"


def quick_start_commands() -> list[str]:
    """The commands of the quick start's ``sh`` blocks in order: continuation lines joined,
    comments cut, ``a && b`` split into ``a`` and ``b``."""
    text = README.read_text().split("\n" + QUICK_START + "\n", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            # (re-quoted by shlex: a pipe stays a pipe, the rest one word each)
            line = " ".join(w if w in ("|", "&&") else shlex.quote(w) for w in words)
            commands += [c.strip() for c in line.split(" && ")]
    return commands


def _needs(command: str) -> str | None:
    """Why ``command`` cannot run here (a tool that is absent, or one the test does not run
    on purpose), or None."""
    argv = shlex.split(command)
    if argv[0] == "pip":
        return ("pip install: the test runs the spe-emu already installed (installing it "
                "again would take minutes and change the environment the suite runs in)")
    if argv[0] == "pytest":
        return "pytest: the test suite itself, which this test is part of"
    if shutil.which(argv[0]) is None:
        return f"{argv[0]} is not installed"
    return None


# What each quick-start command makes, as the README says: (command pattern, its output
# when it has no -o, the files it makes ("{out}": its -o), text its stdout starts with or
# holds). A command the table lacks fails the test.
MAKES = [
    (r"spe-emu run (-o \S+ )?guests/sort\.elf( -o \S+)?", "spe-out",
     ["{out}/spe.trace", "{out}/summary.json"], None),
    (r"aarch64-linux-gnu-gcc .*-o virt-timer\.elf .*", None, ["virt-timer.elf"], None),
    (r"spe-emu run --machine virt --kernel virt-timer\.elf( -o \S+)?", "spe-out",
     ["{out}/summary.json", "{out}/console.log"], None),
    (r"spe-emu decode \S+ \| head", None, [], r"\. \.\.\. ARM SPE data: size "),
    (r"spe-emu report \S+ --image guests/sort\.elf", None, [],
     r"SPE report from guests/sort\.elf: \d+ records"),
    (r"spe-emu perf-data \S+ --image guests/sort\.elf( -o \S+)?", "perf.data", ["{out}"],
     None),
    (r"perf report -i \S+ --itrace=i1i --stdio", None, [],
     r"(?s).*# Samples: \d+\s+of event 'instructions'"),
    (r"perf mem report -i \S+ --itrace=M --stdio", None, [],
     r"(?s).*# Samples: \d+\s+of event 'memory'"),
    (r"perf annotate -i \S+ --itrace=i1i --stdio \S+", None, [],
     r"(?s).*Disassembly of sort\.elf for instructions"),
    (r"perf c2c report -i \S+ --stdio", None, [], r"(?s).*Total records\s+:\s+\d+"),
    (r"perf script -i \S+ --itrace=i1i .*", None, [], r"\s*sort\s+1000 "),
    (r"perf report -i \S+ -D", None, [], r"(?s).*\. \.\.\. ARM SPE data: size "),
]


def _reads(command: str) -> list[str]:
    """The files ``command`` names that it does not make: every argument that is a path
    (has a ``/`` or an image/trace suffix), not an option and not an ``-o`` output."""
    argv = shlex.split(command)
    paths = []
    for i, arg in enumerate(argv[1:], 1):
        if arg.startswith("-") or argv[i - 1] == "-o" or arg == "|":
            continue
        if "/" in arg or re.search(r"\.(elf|trace|data|S|c|ld)$", arg):
            paths.append(arg)
    return paths


@pytest.mark.skipif(shutil.which("spe-emu") is None, reason="the spe-emu command is not "
                    "installed (pip install .)")
def test_readme_quick_start_runs_in_order(tmp_path):
    """The quick start, command after command as written, in a fresh directory holding only
    the repository's guests/ and examples/ (what its commands name): each exits 0 and makes
    what the README says; a file a command reads must have been made by an earlier one."""
    for name in ("guests", "examples"):
        os.symlink(ROOT / name, tmp_path / name)
    commands = quick_start_commands()
    assert commands[0] == "pip install ." and commands[1] == "spe-emu run guests/sort.elf"
    env = {**os.environ, "PAGER": "cat", "PERF_PAGER": "cat", "COLUMNS": "200"}
    skipped, ran = [], []
    for command in commands:
        why = _needs(command)
        missing = [p for p in _reads(command) if not (tmp_path / p).exists()]
        if why is None and missing and any(m in s for s, _ in skipped for m in missing):
            why = f"its input {missing} comes from a skipped command"
        if why is not None:
            skipped.append((command, why))
            continue
        assert not missing, (f"{command!r} reads {missing}, which no earlier quick-start "
                             "command made")
        makes = [m for m in MAKES if re.fullmatch(m[0], command)]
        assert makes, f"a quick-start command this test does not know: {command!r}"
        _, default_out, files, stdout = makes[0]
        argv = shlex.split(command)
        out = argv[argv.index("-o") + 1] if "-o" in argv else default_out
        files = [f.format(out=out) for f in files]
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, (command, done.stderr[-2000:])
        for f in files:
            assert (tmp_path / f).is_file(), f"{command!r} did not make {f}"
        if stdout is not None:
            assert re.match(stdout, done.stdout), (command, done.stdout[:500])
        ran.append(command)
    assert ran[:1] == ["spe-emu run guests/sort.elf"]
    assert any(c.startswith("spe-emu report ") for c in ran)
    for command, why in skipped:   # (shown with pytest -s)
        print(f"skipped {command!r}: {why}")
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
