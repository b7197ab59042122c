"""The pytest plugin (spe_emu.pytest_plugin): its ``pytest11`` entry point and the
``spe_machine`` fixture, exercised in a pytest run of its own (pytester)."""

from __future__ import annotations

import sys
from pathlib import Path

import child
import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
SORT = REPO / "guests" / "sort.elf"
# (-p no:spe_emu: the entry point's plugin when spe_emu is installed; then loaded by module
# name, so the run uses this checkout's plugin either way)
PLUGIN_ARGS = ("-p", "no:spe_emu", "-p", "spe_emu.pytest_plugin")


def test_entry_point_is_declared():
    import tomllib
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert data["project"]["entry-points"]["pytest11"] == {"spe_emu": "spe_emu.pytest_plugin"}


USER_TESTS = f"""
import pytest
SORT = {str(SORT)!r}

def test_profile(spe_machine):
    r = spe_machine.run(SORT, interval=1024)
    assert r.status == 0 and r.exit_reason == "exit"
    assert r.report().hot_functions[0][0] == "quick_sort.constprop.0"
    assert (r.outdir / "spe.trace").read_bytes() == r.trace
    assert r.outdir.name == "spe-run-0"

@pytest.mark.spe_options(interval=512, max_insns=20_000)
def test_marker_defaults(spe_machine):
    r = spe_machine.run(SORT)
    assert r.exit_reason == "max-insns" and r.counts["instructions"] == 20_000
    r2 = spe_machine.run(SORT, max_insns=2_000_000_000)
    assert r2.status == 0 and r2.summary["options"]["interval"] == 512
    assert spe_machine.results == [r, r2]
    assert r2.outdir.name == "spe-run-1"

def test_seed_option(spe_machine):
    assert spe_machine.defaults == {{"seed": 5}}
    r = spe_machine.run(SORT, interval=1024, random=True)
    assert r.summary["options"]["seed"] == 5

def test_a_failing_assertion_fails(spe_machine):
    assert spe_machine.run(SORT).status == 1
"""


def test_spe_machine_fixture_in_a_users_test_run(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest(*PLUGIN_ARGS, "--spe-seed", "5", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["E * assert 0 == 1",
                                 "E * Result(status=0, exit_reason='exit', instructions=*"])


def test_marker_is_registered(pytester):
    result = pytester.runpytest(*PLUGIN_ARGS, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.spe_options(**kwargs)*"])
    assert result.ret == 0


def _readme_plugin_example() -> str:
    """The README's pytest plugin example (the python block under "### pytest plugin")."""
    text = (REPO / "README.md").read_text()
    section = text.split("### pytest plugin", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_example_runs_outside_the_checkout(tmp_path):
    """The README's plugin example, as written, passes from a directory that is not the
    repository (issue 29 item 4: it named guests/sort.elf, found only from the root)."""
    import subprocess
    example = _readme_plugin_example()
    assert "bundled_guest" in example
    (tmp_path / "test_example.py").write_text(example)
    env = child.env()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *PLUGIN_ARGS, "test_example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout


def test_bundled_guest_names_what_there_is():
    import spe_emu
    assert Path(spe_emu.bundled_guest("sort")).name == "sort.elf"
    with pytest.raises(spe_emu.ImageError, match="no bundled guest 'nope'.*sort"):
        spe_emu.bundled_guest("nope")
