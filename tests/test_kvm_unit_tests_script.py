"""scripts/kvm_unit_tests.py without kvm-unit-tests or QEMU: its unittests.cfg reading (the
smp lines evaluated with MAX_SMP as runtime.bash does), its verdicts (kvm-unit-tests'
exit-status conventions) and runs against a stand-in spe-emu and QEMU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "kvm_unit_tests.py"

spec = importlib.util.spec_from_file_location("kvm_unit_tests_script", SCRIPT)
kut = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = kut  # dataclasses look their module up there
spec.loader.exec_module(kut)

# The format of arm/unittests.cfg, written for this test.
CFG = """\
# comment
[alpha]
file = a.flat
smp = 2
test_args = 'check smp=2 mem=256'
qemu_params = -m 256
groups = g1

[beta]
file = b.flat
test_args = one
qemu_params = -machine gic-version=3
timeout = 10s
arch = arm64

[gamma]
file = b.flat
qemu_params = \"\"\"-m 128
-machine gic-version=2\"\"\"

[delta]
file = b.flat
extra_params = -icount 0
"""


def test_cfg_parsing():
    tests = kut.parse_unittests_cfg(CFG)
    assert list(tests) == ["alpha", "beta", "gamma", "delta"]
    a, b, g, d = tests.values()
    assert a.smp == "2" and b.smp == "1"                           # 1 without an smp line
    # smp=N in the command line: kept when it is the test's count, rewritten otherwise
    assert a.append_args(2) == ("check smp=2 mem=256", False)
    assert a.append_args(1) == ("check smp=1 mem=256", True)
    assert a.param_words() == ["-m", "256"] and a.timeout_s() == 90
    assert b.append_args(1) == ("one", False) and b.timeout_s() == 10
    assert g.append_args(1) == (None, False)
    assert g.param_words() == ["-m", "128", "-machine", "gic-version=2"]
    assert kut.not_applicable(g) == "GICv2 only"
    migrating = kut.UnitTest("its-migration", file="gic.flat", groups="its migration")
    assert kut.not_applicable(migrating).startswith("migration group")
    assert kut.not_applicable(kut.UnitTest("its-trigger", file="gic.flat", groups="its")) == ""
    assert d.params == "-icount 0"


# The older dialect: no test_args, the command line as -append in extra_params (or
# qemu_params), next to other QEMU parameters.
OLD_CFG = """\
[selftest-setup]
file = selftest.flat
smp = 2
extra_params = -m 256 -append 'setup smp=2 mem=256'
groups = selftest

[gicv3-active]
file = gic.flat
smp = $((($MAX_SMP < 8)?$MAX_SMP:8))
extra_params = -machine gic-version=3 -append 'active'

[timer]
file = timer.flat
groups = timer
timeout = 10s

[both]
file = b.flat
test_args = 'first'
qemu_params = -append 'second smp=4' -smp 2

[dangling]
file = b.flat
qemu_params = \"\"\"-m 64
-append\"\"\"
"""


def test_cfg_parsing_extra_params_dialect(tmp_path):
    tests = kut.parse_unittests_cfg(OLD_CFG)
    setup, gic, timer, both, dangling = tests.values()
    # -append in the parameters is the test's command line (its smp=N kept or rewritten
    # as for test_args), and not a QEMU parameter beside it
    assert setup.append_args(2) == ("setup smp=2 mem=256", False)
    assert setup.append_args(1) == ("setup smp=1 mem=256", True)
    assert setup.param_words() == ["-m", "256"]
    assert gic.smp == "$((($MAX_SMP < 8)?$MAX_SMP:8))"
    assert gic.append_args(4) == ("active", False)
    assert gic.param_words() == ["-machine", "gic-version=3"]
    assert timer.append_args(1) == (None, False) and timer.param_words() == []
    assert timer.timeout_s() == 10
    # both: QEMU keeps the last -append, the one from the parameters
    assert both.append_args(1) == ("second smp=1", True) and both.param_words() == ["-smp", "2"]
    assert dangling.append_args(1) == (None, False)
    assert dangling.param_words() == ["-m", "64", "-append"]

    flat = tmp_path / "selftest.flat"
    append, _ = setup.append_args(2)
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, setup, append, None, smp=2)
    assert why == "" and cmd == ["spe-emu", "run", "--machine", "virt", "--kernel", str(flat),
                                 "--smp", "2", "--append", "setup smp=2 mem=256", "-m", "256",
                                 "--boot-el", "1"]
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, gic, "active", None, smp=4)
    assert why == "" and cmd[-6:] == ["--smp", "4", "--append", "active", "--boot-el", "1"]
    qemu = kut.qemu_command("qemu", flat, setup, append, None, smp=2)
    assert qemu.count("-append") == 1 and qemu.count("-smp") == 1
    assert qemu[qemu.index("-append") + 1] == "setup smp=2 mem=256"
    assert qemu[qemu.index("-smp") + 1] == "2"
    assert qemu[-2:] == ["-m", "256"]
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, both, "second smp=1", None, smp=1)
    assert cmd == [] and "'-smp'" in why                       # (-smp: as before)
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, dangling, None, None, smp=1)
    assert cmd == [] and "'-append'" in why


def test_spe_emu_command_mapping(tmp_path):
    tests = kut.parse_unittests_cfg(CFG)
    flat = tmp_path / "a.flat"
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, tests["alpha"], "x", None, smp=1)
    assert why == "" and cmd == ["spe-emu", "run", "--machine", "virt", "--kernel", str(flat),
                                 "--append", "x", "-m", "256", "--boot-el", "1"]  # no --smp 1
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, tests["beta"], None, tmp_path / "env",
                                   smp=1)
    assert why == "" and "--initrd" in cmd and "-machine" not in cmd
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, tests["delta"], None, None, smp=1)
    assert cmd == [] and "-icount" in why
    # (the runner's default: QEMU 7.2 virt's counter frequency, 1 GHz / 16)
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, tests["alpha"], "x", None, smp=1,
                                   counter_hz=kut.QEMU_COUNTER_HZ)
    assert why == "" and cmd[-2:] == ["--counter-hz", "62500000"]
    default = {p.name: p.default for p in kut.main.params}["counter_hz"]
    assert default == kut.QEMU_COUNTER_HZ == 1_000_000_000 // 16


@pytest.mark.parametrize("smp", [1, 2, 3, 8, 9, 12])
def test_commands_carry_the_pe_count(tmp_path, smp):
    test = kut.parse_unittests_cfg(CFG)["alpha"]
    flat = tmp_path / "a.flat"
    qemu = kut.qemu_command("qemu", flat, test, "x", None, smp=smp)
    assert qemu.count("-smp") == 1 and qemu[qemu.index("-smp") + 1] == str(smp)
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, test, "x", None, smp=smp)
    if smp > 8:  # more PEs than spe-emu's --smp takes: a SKIP there, with why
        assert cmd == [] and why == f"smp {smp}: spe-emu models at most 8 PEs"
    elif smp == 1:
        assert why == "" and "--smp" not in cmd
    else:
        assert why == "" and cmd.count("--smp") == 1
        assert cmd[cmd.index("--smp") + 1] == str(smp)


CAP8 = "$((($MAX_SMP < 8)?$MAX_SMP:8))"
CAP3 = "$((($MAX_SMP < 3)?$MAX_SMP:3))"


@pytest.mark.parametrize("value, max_smp, expected", [
    ("1", 4, 1), ("2", 4, 2), ("2", 1, 2),       # a plain number is itself, MAX_SMP or not
    ("$MAX_SMP", 4, 4), ("$MAX_SMP", 1, 1), ("$MAX_SMP", 8, 8),
    (CAP8, 4, 4), (CAP8, 8, 8), (CAP8, 12, 8),
    (CAP3, 4, 3), (CAP3, 3, 3), (CAP3, 2, 2),
    ("`echo 5`", 4, 5),                                    # backticks: eval'd as in run()
])
def test_eval_smp(value, max_smp, expected):
    assert kut.eval_smp(value, max_smp) == expected


def test_eval_smp_ignores_the_callers_max_smp(monkeypatch):
    monkeypatch.setenv("MAX_SMP", "7")
    assert kut.eval_smp("$MAX_SMP", 2) == 2


@pytest.mark.parametrize("value", ["", "two", "0", "1 2", "$((1/0))", "$NO_SUCH_VARIABLE_X"])
def test_eval_smp_refuses_what_is_not_a_pe_count(value, monkeypatch):
    monkeypatch.delenv("NO_SUCH_VARIABLE_X", raising=False)
    with pytest.raises(kut.UsageError, match=r"smp = .* does not evaluate to a PE count "
                                             r"with MAX_SMP=4"):
        kut.eval_smp(value, 4)


def verdict(vmm, rc, stdout, stderr=""):
    out = kut.Outcome(vmm, ["x"], timeout_s=1.0)
    out.returncode, out.stdout, out.stderr = rc, stdout, stderr
    out = kut.judge(out, False, "")
    return out.status, out.reason, out.summary


PASSED = "PASS: t\nSUMMARY: 1 tests\n\nEXIT: STATUS=1\n"
FAILED = "FAIL: t\nSUMMARY: 1 tests, 1 unexpected failures\n\nEXIT: STATUS=3\n"
SKIPPED = "SKIP: t\nSUMMARY: 1 tests, 1 skipped\n\nEXIT: STATUS=77\n"


@pytest.mark.parametrize("vmm, rc, stdout, stderr, expected", [
    # QEMU with chr-testdev exits with the status itself.
    ("qemu", 1, PASSED, "", ("PASS", "", "(1 tests)")),
    ("qemu", 3, FAILED, "", ("FAIL", "exit status 3", "(1 tests, 1 unexpected failures)")),
    ("qemu", 77, SKIPPED, "", ("SKIP", "", "(1 tests, 1 skipped)")),
    ("qemu", 1, PASSED, "qemu: warning: x\n", ("PASS", "", "(1 tests)")),
    ("qemu", 1, PASSED, "qemu: boom\n", ("FAIL", "exit status 1: qemu: boom", "(1 tests)")),
    ("qemu", 0, "no status\n", "", ("FAIL", "exit status 0: no status", "")),
    # spe-emu ends at PSCI SYSTEM_OFF with status 0; the status line decides.
    ("spe-emu", 0, PASSED, "", ("PASS", "", "(1 tests)")),
    ("spe-emu", 0, FAILED, "", ("FAIL", "exit status 3", "(1 tests, 1 unexpected failures)")),
    ("spe-emu", 0, SKIPPED, "", ("SKIP", "", "(1 tests, 1 skipped)")),
    ("spe-emu", 3, FAILED, "", ("FAIL", "exit status 3", "(1 tests, 1 unexpected failures)")),
    ("spe-emu", 0, "SUMMARY: 0 tests\n\nEXIT: STATUS=127\n", "", ("FAIL", "abort()",
                                                                  "(0 tests)")),
    ("spe-emu", 0, "hello\n", "", ("FAIL", "exited 0 without an 'EXIT: STATUS=' or "
                                    "'SUMMARY:' line", "")),
    # no EXIT: STATUS= line (older trees): the SUMMARY line decides after an exit 0
    ("spe-emu", 0, "PASS: t\nSUMMARY: 1 tests\n", "", ("PASS", "", "(1 tests)")),
    ("spe-emu", 0, "SUMMARY: 12 tests, 2 expected failures, 3 skipped\n", "",
     ("PASS", "", "(12 tests, 2 expected failures, 3 skipped)")),
    ("spe-emu", 0, "SUMMARY: 12 tests, 1 unexpected failures, 2 skipped\n", "",
     ("FAIL", "1 unexpected failures (SUMMARY line, no EXIT: line)",
      "(12 tests, 1 unexpected failures, 2 skipped)")),
    ("spe-emu", 0, "SUMMARY: 3 tests, 3 skipped\n", "", ("SKIP", "", "(3 tests, 3 skipped)")),
    ("spe-emu", 0, "SUMMARY: 0 tests\n", "", ("SKIP", "", "(0 tests)")),
    ("spe-emu", 0, "ABORT: x\nSUMMARY: 1 tests\n", "",
     ("FAIL", "abort() (ABORT: line)", "(1 tests)")),
    ("spe-emu", 3, "SUMMARY: 1 tests\n", "", ("FAIL", "exit status 3: SUMMARY: 1 tests",
                                              "(1 tests)")),       # only after an exit 0
    ("qemu", 0, "SUMMARY: 1 tests\n", "", ("FAIL", "exit status 0: SUMMARY: 1 tests",
                                           "(1 tests)")),          # QEMU: as before
    ("spe-emu", 2, "", "Usage: x\n\nError: No such option\n",
     ("FAIL", "exit status 2: Error: No such option", "")),
])
def test_verdicts(vmm, rc, stdout, stderr, expected):
    assert verdict(vmm, rc, stdout, stderr) == expected


def test_run_with_stand_in(tmp_path):
    tree = tmp_path / "kut"
    (tree / "arm").mkdir(parents=True)
    (tree / "arm" / "unittests.cfg").write_text(CFG)
    (tree / "config.mak").write_text("ARCH=arm64\n")
    for name in ("a.flat", "b.flat"):
        (tree / "arm" / name).write_bytes(b"\0" * 16)
    fake = tmp_path / "fake_spe_emu.py"
    fake.write_text(
        "import sys\n"
        "args = sys.argv[1:]\n"
        "assert args[:3] == ['run', '--machine', 'virt'], args\n"
        "if args[args.index('--kernel') + 1].endswith('a.flat'):\n"
        "    print('PASS: x\\nSUMMARY: 1 tests\\n\\nEXIT: STATUS=1')\n"
        "else:\n"
        "    print('FAIL: x\\nSUMMARY: 1 tests, 1 unexpected failures\\n\\nEXIT: STATUS=3')\n")
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(tree), "--no-build", "--no-qemu",
         "--tests", "alpha,beta,gamma", "--spe-emu", f"{sys.executable} {fake}",
         "--json", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    got = {t["name"]: t["spe_emu"]["status"] for t in doc["tests"]}
    assert got == {"alpha": "PASS", "beta": "FAIL", "gamma": "SKIP"}
    assert doc["max_smp"] == 4 and "smp" not in doc
    alpha = doc["tests"][0]
    assert alpha["smp"] == 2 and alpha["cfg_smp"] == "2"
    assert alpha["spe_emu"]["args_adjusted"] is False       # smp=2 is alpha's count
    command = alpha["spe_emu"]["command"]
    assert command[command.index("--append") + 1] == "check smp=2 mem=256"
    assert command[command.index("--smp") + 1] == "2"

    missing = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(tree), "--no-build", "--no-qemu",
         "--tests", "alpha", "--spe-emu", str(tmp_path / "no-such-spe-emu")],
        capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "No such file or directory" in missing.stdout
    assert "Traceback" not in missing.stdout + missing.stderr


# Tests that state their PE count, as arm/unittests.cfg's do.
SMP_CFG = """\
[one]
file = a.flat
test_args = 'setup smp=1'

[two]
file = a.flat
smp = 2
test_args = 'setup smp=2 mem=256'

[max]
file = a.flat
smp = $MAX_SMP
test_args = smp

[capped]
file = a.flat
smp = $((($MAX_SMP < 3)?$MAX_SMP:3))

[wide]
file = a.flat
smp = 12

[mismatch]
file = a.flat
smp = 2
test_args = 'setup smp=4'

[bad]
file = a.flat
smp = lots
"""

# A stand-in VMM (QEMU's -smp N or spe-emu's --smp N, 1 without): like selftest-setup, it
# passes only if an smp=N on its command line is the PE count it was given; it records the
# PE count it ran with.
FAKE_VMM = """\
import re, sys
args = sys.argv[1:]
qemu = "-nodefaults" in args
opt = "-smp" if qemu else "--smp"
pes = int(args[args.index(opt) + 1]) if opt in args else 1
app = args[args.index("-append" if qemu else "--append") + 1] if (
    "-append" in args or "--append" in args) else ""
m = re.search(r"(?<!\\S)smp=(\\d+)", app)
ok = m is None or int(m.group(1)) == pes
with open(sys.argv[0] + ".log", "a") as log:
    log.write(f"{pes}\\n")
print("PASS: x" if ok else "FAIL: x")
print("SUMMARY: 1 tests" + ("" if ok else ", 1 unexpected failures"))
print("EXIT: STATUS=" + ("1" if ok else "3"))
sys.exit((1 if ok else 3) if qemu else 0)
"""


@pytest.fixture()
def smp_tree(tmp_path):
    tree = tmp_path / "kut"
    (tree / "arm").mkdir(parents=True)
    (tree / "arm" / "unittests.cfg").write_text(SMP_CFG)
    (tree / "config.mak").write_text("ARCH=arm64\n")
    (tree / "arm" / "a.flat").write_bytes(b"\0" * 16)
    fakes = {}
    for name in ("qemu", "spe_emu"):
        fake = tmp_path / f"fake_{name}"
        fake.write_text(f"#!{sys.executable}\n" + FAKE_VMM)
        fake.chmod(0o755)
        fakes[name] = fake
    return tree, fakes


def run_script(tree, fakes, *args):
    env = {k: v for k, v in os.environ.items() if k != "MAX_SMP"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(tree), "--no-build",
         "--qemu-binary", str(fakes["qemu"]), "--spe-emu", str(fakes["spe_emu"]), *args],
        capture_output=True, text=True, timeout=120, env=env)


def pes_ran(fake):
    log = Path(str(fake) + ".log")
    return [int(n) for n in log.read_text().split()] if log.exists() else []


@pytest.mark.parametrize("max_smp, expected", [
    # one, two, max, capped, wide, mismatch
    (None, [1, 2, 4, 3, 12, 2]),                         # --max-smp defaults to 4
    ("4", [1, 2, 4, 3, 12, 2]),
    ("8", [1, 2, 8, 3, 12, 2]),
    ("1", [1, 2, 1, 1, 12, 2]),  # two: smp 2 > MAX_SMP 1 still runs with 2, as in runtime.bash
])
def test_run_with_the_cfg_pe_counts(smp_tree, tmp_path, max_smp, expected):
    tree, fakes = smp_tree
    out = tmp_path / "r.json"
    names = ["one", "two", "max", "capped", "wide", "mismatch"]
    proc = run_script(tree, fakes, "--tests", ",".join(names), "--json", str(out),
                      *(["--max-smp", max_smp] if max_smp else []))
    # wide passes on QEMU only: not OK (spe-emu must pass wherever QEMU passes)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.endswith("NOT OK: wide\n")
    doc = json.loads(out.read_text())
    assert doc["max_smp"] == int(max_smp or 4) and doc["ok"] is False
    rows = {t["name"]: t for t in doc["tests"]}
    assert [n for n in names if not rows[n]["ok"]] == ["wide"]
    assert [rows[n]["smp"] for n in names] == expected
    for name, smp in zip(names, expected):
        row = rows[name]
        qemu, spe = row["qemu"]["command"], row["spe_emu"]["command"]
        assert qemu[qemu.index("-smp") + 1] == str(smp)
        assert row["qemu"]["status"] == "PASS"
        if smp > 8:
            assert spe == [] and row["spe_emu"]["status"] == "SKIP"
            assert row["spe_emu"]["reason"] == f"smp {smp}: spe-emu models at most 8 PEs"
        else:
            assert spe.count("--smp") == (smp != 1)
            assert smp == 1 or spe[spe.index("--smp") + 1] == str(smp)
            assert row["spe_emu"]["status"] == "PASS"
    # the stand-ins ran with those counts (wide: on QEMU only)
    assert pes_ran(fakes["qemu"]) == expected
    assert pes_ran(fakes["spe_emu"]) == [n for n in expected if n <= 8]
    # smp=N kept where it is the test's count; rewritten (and said so) where it is not
    for name, append, adjusted in (("one", "setup smp=1", False),
                                   ("two", "setup smp=2 mem=256", False),
                                   ("max", "smp", False),
                                   ("mismatch", "setup smp=2", True)):
        for vmm, opt in (("qemu", "-append"), ("spe_emu", "--append")):
            cmd = rows[name][vmm]["command"]
            assert cmd[cmd.index(opt) + 1] == append, (name, vmm)
            assert rows[name][vmm]["args_adjusted"] is adjusted, (name, vmm)


def test_run_refuses_an_smp_that_does_not_evaluate(smp_tree):
    tree, fakes = smp_tree
    proc = run_script(tree, fakes, "--tests", "one,bad")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("error: arm/unittests.cfg [bad]: smp = lots does not evaluate to a PE count "
            "with MAX_SMP=4") in proc.stderr
    assert "Traceback" not in proc.stderr
    assert pes_ran(fakes["qemu"]) == pes_ran(fakes["spe_emu"]) == []   # nothing ran


@pytest.mark.parametrize("max_smp", ["0", "9"])
def test_max_smp_range(smp_tree, max_smp):
    tree, fakes = smp_tree
    proc = run_script(tree, fakes, "--tests", "one", "--max-smp", max_smp)
    assert proc.returncode == 2 and "--max-smp" in proc.stderr
    assert pes_ran(fakes["qemu"]) == []
