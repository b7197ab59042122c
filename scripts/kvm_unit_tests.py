#!/usr/bin/env python3
"""Run kvm-unit-tests' arm64 tests on QEMU and on ``spe-emu run --machine virt``, side by side.

    python scripts/kvm_unit_tests.py --tree PATH [--build/--no-build] [--tests NAME,...]
                                     [--max-smp N] [--qemu/--no-qemu] [--spe-emu CMD]
                                     [--json FILE]

PATH is a kvm-unit-tests checkout you provide (nothing is downloaded). Unless it is already
built, it is configured with ``./configure --arch=arm64 --cross-prefix=aarch64-linux-gnu-``
(Debian's gcc-aarch64-linux-gnu) and built with make. Each test named with --tests (default:
selftest-setup, selftest-vectors-kernel, selftest-vectors-user, gicv3-active, timer, psci) is
looked up in PATH/arm/unittests.cfg, which gives its file, its PE count (smp), test_args (the
-append command line), its QEMU parameters and timeout. Both dialects of the file are read:
``test_args = '...'`` with ``qemu_params = ...``, and the older ``extra_params = ... -append
'...'`` (no test_args; the -append value is the command line then, on QEMU as on spe-emu's
``--append``):

* on ``qemu-system-aarch64 -nodefaults -machine virt,gic-version=3 -accel tcg -cpu max
  -smp N`` plus the devices arm/run adds (chr-testdev on virtio-serial, pci-testdev,
  ``-serial stdio``), the test's -append and parameters, and ``-initrd`` with the environ file
  that arm/run generates under TCG (TARGET=qemu, QEMU_ACCEL=tcg, ERRATA_FORCE=y);
* on ``CMD run --machine virt --kernel X.flat [--smp N] [--append ARGS] [--initrd ENV]
  [-m SIZE] --boot-el 1`` (the EL QEMU's virt machine enters without virtualization=on;
  ``--smp`` left out for one PE; a count above spe-emu's 8 PEs is a SKIP there).

Both get the unittests.cfg timeout (default 90 s; timer: 10 s) and the same PE count N: the
test's unittests.cfg ``smp`` value (1 if it has none) evaluated as scripts/runtime.bash does.
run() there evals a command line holding ``-smp <value>`` in a shell where MAX_SMP is set;
here the value goes through ``bash -c`` with MAX_SMP set to --max-smp (default 4; runtime.bash
defaults it to the host's CPU count, kvm-unit-tests' CI sets MAX_SMP=8). So ``smp = $MAX_SMP``
is --max-smp, ``smp = $((($MAX_SMP < 8)?$MAX_SMP:8))`` the lesser of it and 8, and a plain
number is itself; a value that does not evaluate to one whole number of at least 1 is a usage
error. Beyond what the expression makes of it, MAX_SMP is no limit: runtime.bash neither skips
nor caps a test whose count exceeds MAX_SMP (it hands the count to the VMM; only
``run_tests.sh --probe-maxsmp`` lowers MAX_SMP itself, to what QEMU accepts), and so here
``smp = 2`` runs with 2 PEs even under --max-smp 1. A test whose test_args state the CPU count
(``smp=N``, selftest-setup) gets them unchanged when N is its PE count, as run_tests.sh passes
them; only an ``smp=N`` that differs from it (a unittests.cfg whose smp line and test_args
disagree) is rewritten to the count the machines get, which the row's ``args_adjusted`` says.

How kvm-unit-tests reports a result (lib/arm/io.c exit(), lib/report.c, scripts/arch-run.bash,
scripts/vmm.bash, scripts/runtime.bash): the test prints ``SUMMARY: N tests[, F unexpected
failures][, S skipped]`` on the UART, and exit(code) prints ``EXIT: STATUS=<(code << 1) | 1>``,
then writes ``<code>q`` to chr-testdev (QEMU then exits with that same status) if a
virtio-console is present, then calls PSCI SYSTEM_OFF (a VMM without chr-testdev exits 0),
then halts in a WFI loop. Status 1 is PASS, 77 SKIP (every test skipped), 3 FAIL (unexpected
failures), 127 abort(). For QEMU the exit status is read as qemu_fixup_return_code does (0
without a signal is an error; 1 with non-warning stderr is a QEMU failure); for spe-emu as for
kvmtool (run_test_status): exit 0 stands for 1 and the ``EXIT: STATUS=`` line gives the
status. Trees whose exit() prints no ``EXIT: STATUS=`` line are judged on spe-emu by their
last ``SUMMARY:`` line after an exit 0, as report_summary() computes the status it returns
(summary_status): PASS for no unexpected failures, SKIP when every test was skipped, FAIL
otherwise or after an ``ABORT:`` line. A timeout, a signal, a missing command or an exit 0
with neither line is FAIL, shown with the first error line.

The table has one row per test; the exit status is 0 only if spe-emu passes wherever QEMU
passes (with --no-qemu: if spe-emu fails nowhere; with --spe-emu '': if QEMU fails nowhere),
1 otherwise, 2 for a usage or build error.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

DEFAULT_TESTS = (
    "selftest-setup",
    "selftest-vectors-kernel",
    "selftest-vectors-user",
    "gicv3-active",
    "timer",
    "psci",
)
CROSS_PREFIX = "aarch64-linux-gnu-"
DEFAULT_TIMEOUT_S = 90.0  # scripts/runtime.bash: timeout=${TIMEOUT:-${11:-90s}}
DEFAULT_MAX_SMP = 4  # --max-smp: kvm-unit-tests' MAX_SMP (runtime.bash: the host's CPU count)
SPE_EMU_MAX_PES = 8  # spe-emu run --smp N: N = 1..8
BOOT_EL = 1  # QEMU -M virt without virtualization=on enters the kernel at EL1
QEMU_COUNTER_HZ = 62_500_000
"""CNTFRQ_EL0 of QEMU 7.2's virt (target/arm: GTIMER_SCALE 16 ns, 62.5 MHz), which the
runner gives spe-emu's board by default (``--counter-hz``): with one counter tick per
instruction, the tests' busy waits on the counter (the timer test's mdelay(100) loops) then
take as many instructions as QEMU's 62.5 MHz counter has ticks, and fit the timeouts
unittests.cfg sets for QEMU's real-time clock. The board's own default (1 GHz) makes the
timer test wait 1.6 G instructions, about 18 s against its 10 s timeout."""
# What arm/run's initrd_create puts in the -initrd environ under TCG (host-specific version
# strings left out: none of the arm tests reads them).
ENVIRON = "TARGET=qemu\nQEMU_ACCEL=tcg\nERRATA_FORCE=y\n"

EXIT_RE = re.compile(r"^EXIT: STATUS=(\d+)", re.M)
SUMMARY_RE = re.compile(r"^SUMMARY: (.*)$")
SUMMARY_COUNTS_RE = re.compile(r"^SUMMARY: (\d+) tests((?:, \d+ [a-z ]+)*)\s*$", re.M)
ABORT_RE = re.compile(r"^ABORT: ", re.M)
REPORT_RE = re.compile(r"^(PASS|FAIL|SKIP|XFAIL|XPASS|KFAIL): ", re.M)


class UsageError(Exception):
    """A problem with the arguments or the tree: reported in one line, exit status 2."""


# ---------------------------------------------------------------------------------------------
# arm/unittests.cfg


@dataclass
class UnitTest:
    name: str
    file: str = ""
    smp: str = "1"
    test_args: str = ""
    params: str = ""
    groups: str = ""
    arch: str = ""
    timeout: str = ""
    accel: str = ""
    disabled_if: str = ""

    def append_args(self, smp: int) -> tuple[str | None, bool]:
        """The -append string (None if neither test_args nor an ``-append`` in the params
        give one) and whether an ``smp=N`` in it was rewritten: ``smp`` is the test's PE count
        (:func:`eval_smp`), and only an ``smp=N`` with another N is rewritten to it, so that
        the command line states the count the machine has. An ``-append`` in the params (the
        ``extra_params = -append '...'`` dialect) comes after test_args on QEMU's command
        line, so it is the one QEMU keeps when both are given."""
        texts = [" ".join(shlex.split(self.test_args))] if self.test_args.strip() else []
        # (test_args: what the eval in run() hands to -append)
        texts += self._split_params()[0]
        if not texts:
            return None, False
        text = texts[-1]
        fixed = re.sub(r"(?<!\S)smp=\d+(?!\S)", f"smp={smp}", text)
        return fixed, fixed != text

    def param_words(self) -> list[str]:
        """The params' words other than ``-append ARGS`` (which :meth:`append_args` gives)."""
        return self._split_params()[1]

    def _split_params(self) -> tuple[list[str], list[str]]:
        """(the value of each ``-append`` in the params, in order; the other words). An
        ``-append`` without a value stays among the other words."""
        words = shlex.split(self.params) if self.params.strip() else []
        appends, rest = [], []
        i = 0
        while i < len(words):
            if words[i] == "-append" and i + 1 < len(words):
                appends.append(words[i + 1])
                i += 2
            else:
                rest.append(words[i])
                i += 1
        return appends, rest

    def timeout_s(self) -> float:
        return parse_duration(self.timeout) if self.timeout else DEFAULT_TIMEOUT_S


def eval_smp(value: str, max_smp: int) -> int:
    """A unittests.cfg ``smp`` value as scripts/runtime.bash evaluates it: run() evals its
    command line, which holds ``-smp <value>``, in a shell where MAX_SMP is set; here the
    value goes through ``bash -c`` with MAX_SMP=max_smp in its environment. UsageError unless
    that gives one whole number of at least 1."""
    env = dict(os.environ, MAX_SMP=str(max_smp))
    try:
        proc = subprocess.run(["bash", "-c", f"printf '%s\\n' {value}"], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"cannot evaluate smp = {value} with bash: {exc}") from None
    got = proc.stdout.strip()
    if proc.returncode != 0 or not re.fullmatch(r"[0-9]+", got) or int(got) < 1:
        why = (proc.stderr.strip().splitlines() or [f"gave {got!r}"])[-1]
        raise UsageError(f"smp = {value} does not evaluate to a PE count with "
                         f"MAX_SMP={max_smp} (bash: {why})")
    return int(got)


def parse_duration(text: str) -> float:
    """A timeout(1) duration: a number with an optional s/m/h/d suffix."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([smhd]?)\s*", text)
    if not m:
        raise UsageError(f"bad timeout {text!r} in unittests.cfg")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def parse_unittests_cfg(text: str) -> dict[str, UnitTest]:
    """Parse arm/unittests.cfg the way scripts/common.bash's for_each_unittest reads it."""
    tests: dict[str, UnitTest] = {}
    cur: UnitTest | None = None
    lines = iter(text.splitlines())
    simple = ("file", "smp", "test_args", "groups", "arch", "timeout", "accel", "disabled_if")
    for raw in lines:
        line = raw.strip()
        m = re.fullmatch(r"\[(.*)\]", line)
        if m:
            cur = UnitTest(m.group(1))
            tests[cur.name] = cur
            continue
        if cur is None:
            continue
        m = re.fullmatch(r"(extra_params|qemu_params)\s*=\s*(.*)", line)
        if m:
            value = m.group(2)
            if value.startswith('"""'):
                parts = [value[3:]]
                while not parts[-1].rstrip().endswith('"""'):
                    nxt = next(lines, None)
                    if nxt is None:
                        break
                    parts.append(nxt.strip())
                value = " ".join(p for p in parts if p).rstrip()
                value = value[:-3] if value.endswith('"""') else value
            cur.params = value
            continue
        m = re.fullmatch(r"(\w+)\s*=\s*(.*)", line)
        if m and m.group(1) in simple:
            setattr(cur, m.group(1), m.group(2))
    return tests


# ---------------------------------------------------------------------------------------------
# building the tree


def read_config_mak(tree: Path) -> dict[str, str]:
    values = {}
    for line in (tree / "config.mak").read_text(errors="replace").splitlines():
        m = re.fullmatch(r"([A-Z_][A-Z0-9_]*)=(.*)", line.strip())
        if m:
            values[m.group(1)] = m.group(2)
    return values


def run_build_step(cmd: list[str], tree: Path) -> None:
    click.echo(f"+ (cd {tree} && {shlex.join(cmd)})", err=True)
    proc = subprocess.run(cmd, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace")
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-15:])
        raise UsageError(f"{shlex.join(cmd)} failed with status {proc.returncode}:\n{tail}")


def ensure_built(tree: Path, flats: list[Path], build: bool) -> None:
    config = tree / "config.mak"
    if config.exists():
        arch = read_config_mak(tree).get("ARCH")
        if arch != "arm64":
            raise UsageError(f"{tree} is configured for ARCH={arch}, not arm64; "
                             "run 'make distclean' there or point --tree at another checkout")
        if all(f.exists() for f in flats):
            return
    missing = [str(f.relative_to(tree)) for f in flats if not f.exists()]
    if not build:
        raise UsageError(f"{tree} is not built (missing: {', '.join(missing) or 'config.mak'}); "
                         "drop --no-build")
    if not (tree / "configure").exists() or not (tree / "arm").is_dir():
        raise UsageError(f"{tree} does not look like a kvm-unit-tests tree (no configure, arm/)")
    if shutil.which(CROSS_PREFIX + "gcc") is None:
        raise UsageError(f"{CROSS_PREFIX}gcc not found; "
                         "apt-get install gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu")
    if not config.exists():
        run_build_step(["./configure", "--arch=arm64", f"--cross-prefix={CROSS_PREFIX}"], tree)
    run_build_step(["make", f"-j{os.cpu_count() or 1}"], tree)
    missing = [str(f) for f in flats if not f.exists()]
    if missing:
        raise UsageError(f"build finished but these are missing: {', '.join(missing)}")


# ---------------------------------------------------------------------------------------------
# running and judging


@dataclass
class Outcome:
    vmm: str
    command: list[str]
    status: str = "FAIL"  # PASS, FAIL, SKIP
    reason: str = ""
    summary: str = ""
    returncode: int | None = None
    exit_status: int | None = None  # from the "EXIT: STATUS=" line
    seconds: float = 0.0
    timeout_s: float = 0.0
    reports: dict[str, int] = field(default_factory=dict)
    args_adjusted: bool = False
    stdout: str = ""
    stderr: str = ""


def first_error_line(stderr: str, stdout: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if re.match(r"(\w*Error|error|ERROR|fatal|Fatal)\b", ln):
            return ln
    if lines:
        return lines[0]
    out = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    return out[-1] if out else "(no output)"


def extract_summary(stdout: str) -> str:
    """runtime.bash extract_summary: the SUMMARY line among the last 5 lines."""
    for line in stdout.splitlines()[-5:]:
        m = SUMMARY_RE.match(line)
        if m:
            return f"({m.group(1)})"
    return ""


def summary_status(stdout: str) -> tuple[int, str] | None:
    """The status a test's output gives without an ``EXIT: STATUS=`` line (kvm-unit-tests
    before lib/arm/io.c printed one), as run_test_status's return code with its reason, or
    None without a ``SUMMARY:`` line. The last SUMMARY line counts, read as report_summary()
    (lib/report.c) computes its return value: 0 PASS for no unexpected failures, 77 SKIP when
    every test was skipped (``tests == skipped``, so also for 0 tests), 3 FAIL for unexpected
    failures (exit(1), ``(1 << 1) | 1``); an ``ABORT:`` line (report_abort() prints the
    summary, then aborts: exit status 127) is 127 whatever the summary says."""
    found = SUMMARY_COUNTS_RE.findall(stdout)
    if not found:
        return None
    total, rest = found[-1]
    counts = {name: int(n) for n, name in re.findall(r", (\d+) ([a-z ]+)", rest)}
    failures = counts.get("unexpected failures", 0)
    if ABORT_RE.search(stdout):
        return 127, "abort() (ABORT: line)"
    if int(total) == counts.get("skipped", 0):
        return 77, ""
    if failures:
        return 3, f"{failures} unexpected failures (SUMMARY line, no EXIT: line)"
    return 0, ""


def execute(cmd: list[str], timeout_s: float, vmm: str) -> tuple[Outcome, bool, str]:
    """Run cmd: the raw outcome, whether it timed out, and the OS error if it did not start."""
    out = Outcome(vmm=vmm, command=cmd, timeout_s=timeout_s)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return out, False, f"{cmd[0]}: {exc.strerror or exc}"
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        for sig, grace in ((signal.SIGTERM, 1.0), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)  # the session we started for this command only
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        stdout, stderr = proc.communicate()
    out.seconds = time.monotonic() - start
    out.returncode = proc.returncode
    out.stdout = stdout.decode(errors="replace").replace("\r", "")
    out.stderr = stderr.decode(errors="replace").replace("\r", "")
    return out, timed_out, ""


def judge(out: Outcome, timed_out: bool, start_error: str) -> Outcome:
    """Turn the raw outcome into PASS/FAIL/SKIP as kvm-unit-tests' scripts do."""
    if start_error:
        out.status, out.reason = "FAIL", start_error
        return out
    out.summary = extract_summary(out.stdout)
    out.reports = {}
    for kind in REPORT_RE.findall(out.stdout):
        out.reports[kind] = out.reports.get(kind, 0) + 1
    m = EXIT_RE.search(out.stdout)
    out.exit_status = int(m.group(1)) if m else None
    rc = out.returncode
    if timed_out:
        out.status, out.reason = "FAIL", f"timeout; duration={out.timeout_s:g}s"
        return out
    if rc is not None and rc < 0:
        out.status, out.reason = "FAIL", f"terminated on {signal.Signals(-rc).name}"
        return out

    if out.vmm == "qemu":
        # vmm.bash qemu_fixup_return_code; QEMU exits (code << 1) | 1 through chr-testdev.
        real_errors = [ln for ln in out.stderr.splitlines()
                       if ln.strip() and "warning" not in ln.lower()]
        if rc == 0:
            ret = 1  # "Exiting with zero (non-debugexit) is an error" ...
            if out.exit_status is not None:  # ... unless the test printed its status
                ret = 0 if out.exit_status == 1 else out.exit_status  # (run_test_status)
        elif rc == 1:
            ret = 1 if real_errors else 0
        else:
            ret = rc
    else:
        # vmm.bash kvmtool_fixup_return_code + arch-run.bash run_test_status: exit 0 means
        # "look at the EXIT: STATUS line"; a VMM that passes the status on exits with it.
        # Without that line (older trees do not print it), the SUMMARY line decides.
        ret = 1 if rc == 0 else rc
        if out.exit_status is not None and ret in (1, out.exit_status):
            ret = 0 if out.exit_status == 1 else out.exit_status
        elif rc == 0:
            found = summary_status(out.stdout)
            if found is None:
                out.status = "FAIL"
                out.reason = "exited 0 without an 'EXIT: STATUS=' or 'SUMMARY:' line"
                return out
            ret, why = found
            if ret not in (0, 77):
                out.status, out.reason = "FAIL", why
                return out

    if ret == 0:
        out.status = "PASS"
    elif ret == 77:
        out.status = "SKIP"
    else:
        out.status = "FAIL"
        if out.exit_status is not None and ret == out.exit_status != 1:
            out.reason = "abort()" if ret == 127 else f"exit status {ret}"
        else:
            out.reason = f"exit status {rc}: {first_error_line(out.stderr, out.stdout)}"
    return out


def qemu_command(qemu: str, flat: Path, test: UnitTest, append: str | None,
                 environ: Path | None, *, smp: int) -> list[str]:
    """arm/run's command line (TCG), with GICv3 and ``smp`` PEs."""
    cmd = [qemu, "-nodefaults", "-machine", "virt,gic-version=3", "-accel", "tcg",
           "-cpu", "max",
           "-device", "virtio-serial-device",
           "-device", "virtconsole,chardev=ctd", "-chardev", "testdev,id=ctd",
           "-device", "pci-testdev",
           "-display", "none", "-serial", "stdio",
           "-kernel", str(flat), "-smp", str(smp)]
    if append is not None:
        cmd += ["-append", append]
    cmd += test.param_words()
    if environ is not None:
        cmd += ["-initrd", str(environ)]
    return cmd


def spe_emu_command(spe: list[str], flat: Path, test: UnitTest, append: str | None,
                    environ: Path | None, *, smp: int,
                    counter_hz: int | None = None) -> tuple[list[str], str]:
    """The spe-emu command line with ``smp`` PEs (``--smp`` left out for one) and the
    system counter at ``counter_hz`` (None: the board's own), or an empty list and why the
    test cannot map: more PEs than spe-emu models, or QEMU parameters without an equivalent
    (``-append`` is not among them: ``append`` is the test's command line,
    :meth:`UnitTest.append_args`)."""
    if smp > SPE_EMU_MAX_PES:
        return [], f"smp {smp}: spe-emu models at most {SPE_EMU_MAX_PES} PEs"
    cmd = [*spe, "run", "--machine", "virt", "--kernel", str(flat)]
    if smp != 1:
        cmd += ["--smp", str(smp)]
    if append is not None:
        cmd += ["--append", append]
    if environ is not None:
        cmd += ["--initrd", str(environ)]
    words = test.param_words()
    i = 0
    while i < len(words):
        word = words[i]
        value = words[i + 1] if i + 1 < len(words) else ""
        if word == "-m" and value:
            cmd += ["-m", value]  # QEMU's unit is MiB when no suffix is given
        elif word in ("-machine", "-M") and value:
            for opt in value.split(","):
                if opt not in ("virt", "gic-version=3"):
                    return [], f"qemu_params {word} {value} has no spe-emu equivalent"
        else:
            return [], f"qemu_params {word!r} has no spe-emu equivalent"
        i += 2
    cmd += ["--boot-el", str(BOOT_EL)]
    if counter_hz is not None:
        cmd += ["--counter-hz", str(counter_hz)]
    return cmd, ""


def not_applicable(test: UnitTest) -> str:
    if test.arch and test.arch != "arm64":
        return f"{test.arch} only"
    if test.accel and test.accel != "tcg":
        return f"{test.accel} only"
    if "gic-version=2" in test.params:
        return "GICv2 only"
    if "migration" in test.groups.split():
        # (arm/run migrates such a test between two QEMU processes when it asks to; run
        # once, it waits for that until its timeout, on QEMU as on spe-emu)
        return "migration group: needs arm/run's migration harness"
    return ""


def write_log(logs: Path | None, name: str, out: Outcome) -> None:
    if logs is None:
        return
    logs.mkdir(parents=True, exist_ok=True)
    text = (f"$ {shlex.join(out.command)}\n# status={out.status} rc={out.returncode} "
            f"{out.seconds:.2f}s {out.reason}\n--- stdout\n{out.stdout}--- stderr\n{out.stderr}")
    (logs / f"{name}.{out.vmm}.log").write_text(text)


def run_on(vmm: str, cmd: list[str], test: UnitTest, skip: str, args_adjusted: bool,
           logs: Path | None) -> Outcome:
    """``test`` on one VMM with ``cmd``: run and judged, or SKIP for the reason ``skip``;
    logged (write_log)."""
    out = (Outcome(vmm, cmd, status="SKIP", reason=skip) if skip else
           judge(*execute(cmd, test.timeout_s(), vmm)))
    out.args_adjusted = args_adjusted
    write_log(logs, test.name, out)
    return out


def cell(out: Outcome | None) -> str:
    if out is None:
        return "-"
    detail = out.summary if out.status == "PASS" or not out.reason else out.reason
    if out.status == "SKIP" and out.summary:
        detail = out.summary
    return f"{out.status} {out.seconds:5.2f}s {detail}".rstrip()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--tree", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="kvm-unit-tests checkout (built here if needed).")
@click.option("--build/--no-build", default=True, show_default=True,
              help="Configure and build the tree if the test binaries are missing.")
@click.option("--tests", "tests_opt", default=",".join(DEFAULT_TESTS), show_default=True,
              help="Comma-separated test names from arm/unittests.cfg.")
@click.option("--max-smp", "max_smp", type=click.IntRange(1, SPE_EMU_MAX_PES),
              default=DEFAULT_MAX_SMP, show_default=True, metavar="N",
              help="kvm-unit-tests' MAX_SMP (1..8): the value unittests.cfg's smp lines use "
                   "(smp = $MAX_SMP, smp = $((($MAX_SMP < 8)?$MAX_SMP:8))); each test runs "
                   "with its smp value evaluated by bash with MAX_SMP=N (1 if none).")
@click.option("--qemu/--no-qemu", "use_qemu", default=True, show_default=True,
              help="Run the QEMU baseline.")
@click.option("--qemu-binary", default=lambda: os.environ.get("QEMU", "qemu-system-aarch64"),
              show_default="$QEMU or qemu-system-aarch64")
@click.option("--spe-emu", "spe_emu", default="spe-emu", show_default=True,
              help="Command that starts spe-emu (split like a shell would); '' to skip it.")
@click.option("--environ/--no-environ", default=True, show_default=True,
              help="Pass arm/run's TCG environ file as -initrd/--initrd.")
@click.option("--counter-hz", "counter_hz", type=click.IntRange(min=0),
              default=QEMU_COUNTER_HZ, show_default=True, metavar="HZ",
              help="spe-emu's system counter frequency (run --counter-hz): QEMU 7.2 virt's "
                   "by default, so the tests' waits on the counter fit their timeouts; 0: "
                   "the board's own (1 GHz).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write machine-readable results here.")
@click.option("--logs", type=click.Path(file_okay=False, path_type=Path),
              help="Write each run's command line and output to DIR/<test>.<vmm>.log.")
def main(tree: Path, build: bool, tests_opt: str, max_smp: int, use_qemu: bool,
         qemu_binary: str, spe_emu: str, environ: bool, counter_hz: int,
         json_path: Path | None, logs: Path | None) -> None:
    try:
        code = run_all(tree.resolve(), build, tests_opt, use_qemu, qemu_binary, spe_emu,
                       environ, json_path, logs, max_smp, counter_hz or None)
    except UsageError as exc:
        click.echo(f"error: {exc}", err=True)
        code = 2
    sys.exit(code)


def run_all(tree: Path, build: bool, tests_opt: str, use_qemu: bool, qemu_binary: str,
            spe_emu: str, environ: bool, json_path: Path | None, logs: Path | None,
            max_smp: int = DEFAULT_MAX_SMP, counter_hz: int | None = QEMU_COUNTER_HZ) -> int:
    cfg_path = tree / "arm" / "unittests.cfg"
    if not cfg_path.exists():
        raise UsageError(f"{cfg_path} not found: is --tree a kvm-unit-tests checkout?")
    cfg = parse_unittests_cfg(cfg_path.read_text(errors="replace"))
    names = [n.strip() for n in tests_opt.split(",") if n.strip()]
    unknown = [n for n in names if n not in cfg]
    if unknown:
        raise UsageError(f"not in arm/unittests.cfg: {', '.join(unknown)}")
    tests = [cfg[n] for n in names]
    smps = {}  # a test's PE count; a smp line that does not evaluate stops the run here
    for test in tests:
        try:
            smps[test.name] = eval_smp(test.smp, max_smp)
        except UsageError as exc:
            raise UsageError(f"arm/unittests.cfg [{test.name}]: {exc}") from None
    flats = sorted({tree / "arm" / t.file for t in tests})
    ensure_built(tree, flats, build)
    spe_cmd = shlex.split(spe_emu)
    if not use_qemu and not spe_cmd:
        raise UsageError("nothing to run: --no-qemu and --spe-emu ''")

    rows = []
    with tempfile.TemporaryDirectory(prefix="kut-") as tmp:
        env_file = None
        if environ:
            env_file = Path(tmp) / "environ"
            env_file.write_text(ENVIRON)
        for test in tests:
            flat = tree / "arm" / test.file
            smp = smps[test.name]
            append, adjusted = test.append_args(smp)
            row = {"name": test.name, "file": test.file, "cfg_smp": test.smp, "smp": smp,
                   "test_args": test.test_args, "params": test.params,
                   "timeout_s": test.timeout_s(), "qemu": None, "spe_emu": None}
            na = not_applicable(test)
            if na:
                row["not_applicable"] = na
            if use_qemu:
                cmd = [] if na else qemu_command(qemu_binary, flat, test, append, env_file,
                                                 smp=smp)
                row["qemu"] = run_on("qemu", cmd, test, na, adjusted, logs)
            if spe_cmd:
                cmd, why = spe_emu_command(spe_cmd, flat, test, append, env_file, smp=smp,
                                           counter_hz=counter_hz)
                row["spe_emu"] = run_on("spe-emu", cmd, test, na or why, adjusted, logs)
            rows.append(row)
            click.echo(f"{test.name:<26} qemu: {cell(row['qemu']):<40} "
                       f"spe-emu: {cell(row['spe_emu'])}")

    ok = True
    for row in rows:
        q, s = row["qemu"], row["spe_emu"]
        if q is not None and s is not None:
            row["ok"] = q.status != "PASS" or s.status == "PASS"
        elif s is not None:
            row["ok"] = s.status != "FAIL"
        else:
            row["ok"] = q.status != "FAIL"
        ok &= row["ok"]
    if json_path is not None:
        doc = {"tree": str(tree), "max_smp": max_smp, "boot_el": BOOT_EL,
               "environ": ENVIRON if environ else None, "ok": ok, "tests": []}
        for row in rows:
            item = dict(row)
            for key in ("qemu", "spe_emu"):
                if item[key] is not None:
                    d = asdict(item[key])
                    d["stdout_tail"] = "\n".join(d.pop("stdout").splitlines()[-20:])
                    d["stderr_tail"] = "\n".join(d.pop("stderr").splitlines()[-20:])
                    item[key] = d
            doc["tests"].append(item)
        json_path.write_text(json.dumps(doc, indent=2) + "\n")
    click.echo("OK" if ok else
               "NOT OK: " + ", ".join(r["name"] for r in rows if not r["ok"]))
    return 0 if ok else 1


if __name__ == "__main__":
    main()
