"""scripts/kvm_unit_tests.py without kvm-unit-tests or QEMU: its unittests.cfg reading, its
verdicts (kvm-unit-tests' exit-status conventions) and one run against a stand-in spe-emu."""

from __future__ import annotations

import importlib.util
import json
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
    assert a.append_args(1) == ("check smp=1 mem=256", True)
    assert a.param_words() == ["-m", "256"] and a.timeout_s() == 90
    assert b.append_args(1) == ("one", False) and b.timeout_s() == 10
    assert g.append_args(1) == (None, False)
    assert g.param_words() == ["-m", "128", "-machine", "gic-version=2"]
    assert kut.not_applicable(g) == "GICv2 only"
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
    # -append in the parameters is the test's command line (smp=N rewritten as for
    # test_args), and not a QEMU parameter beside it
    assert setup.append_args(1) == ("setup smp=1 mem=256", True)
    assert setup.param_words() == ["-m", "256"]
    assert gic.append_args(1) == ("active", False)
    assert gic.param_words() == ["-machine", "gic-version=3"]
    assert timer.append_args(1) == (None, False) and timer.param_words() == []
    assert timer.timeout_s() == 10
    # both: QEMU keeps the last -append, the one from the parameters
    assert both.append_args(1) == ("second smp=1", True) and both.param_words() == ["-smp", "2"]
    assert dangling.append_args(1) == (None, False)
    assert dangling.param_words() == ["-m", "64", "-append"]

    flat = tmp_path / "selftest.flat"
    append, _ = setup.append_args(1)
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, setup, append, None)
    assert why == "" and cmd == ["spe-emu", "run", "--machine", "virt", "--kernel", str(flat),
                                 "--append", "setup smp=1 mem=256", "-m", "256",
                                 "--boot-el", "1"]
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, gic, "active", None)
    assert why == "" and cmd[-4:] == ["--append", "active", "--boot-el", "1"]
    qemu = kut.qemu_command("qemu", flat, setup, append, None)
    assert qemu.count("-append") == 1
    assert qemu[qemu.index("-append") + 1] == "setup smp=1 mem=256"
    assert qemu[-2:] == ["-m", "256"]
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, both, "second smp=1", None)
    assert cmd == [] and "'-smp'" in why                       # (-smp: as before)
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, dangling, None, None)
    assert cmd == [] and "'-append'" in why


def test_spe_emu_command_mapping(tmp_path):
    tests = kut.parse_unittests_cfg(CFG)
    flat = tmp_path / "a.flat"
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, tests["alpha"], "x", None)
    assert why == "" and cmd == ["spe-emu", "run", "--machine", "virt", "--kernel", str(flat),
                                 "--append", "x", "-m", "256", "--boot-el", "1"]
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, tests["beta"], None, tmp_path / "env")
    assert why == "" and "--initrd" in cmd and "-machine" not in cmd
    cmd, why = kut.spe_emu_command(["spe-emu"], flat, tests["delta"], None, None)
    assert cmd == [] and "-icount" in why


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
    assert doc["tests"][0]["spe_emu"]["args_adjusted"] is True
    assert "--append" in doc["tests"][0]["spe_emu"]["command"]

    missing = subprocess.run(
        [sys.executable, str(SCRIPT), "--tree", str(tree), "--no-build", "--no-qemu",
         "--tests", "alpha", "--spe-emu", str(tmp_path / "no-such-spe-emu")],
        capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "No such file or directory" in missing.stdout
    assert "Traceback" not in missing.stdout + missing.stderr
