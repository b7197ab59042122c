"""No lost results (issue 16): each run is written into a fresh sibling directory renamed to
``-o`` at its end, however it ends; a run that never started leaves ``-o`` untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from spe_emu.cpu.machine import Machine
from spe_emu.errors import GuestError
from spe_emu.tools.cli import EXIT_EMULATION, EXIT_ERROR, EXIT_RUNAWAY, main

ROOT = Path(__file__).resolve().parents[1]
SORT = ROOT / "guests" / "sort.elf"
ENV = {"COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], env=ENV)


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name != out.name)


@pytest.fixture(scope="module")
def previous(tmp_path_factory):
    """A finished run's output directory, with a file of the user's in it."""
    out = tmp_path_factory.mktemp("prev") / "out"
    result = invoke("run", SORT, "--interval", "1024", "--ground-truth", "-o", out)
    assert result.exit_code == 0, result.output
    (out / "input.txt").write_text("mine\n")
    return out


@pytest.mark.parametrize("args", [["missing.elf"], [SORT, "--interval", "0"],
                                  [SORT, "--mode", "nonsense"]])
def test_a_run_that_never_starts_leaves_the_old_directory_byte_for_byte(previous, args):
    before = _snapshot(previous)
    result = invoke("run", *args, "-o", previous)
    assert result.exit_code in (EXIT_ERROR, 2), result.output
    assert _snapshot(previous) == before
    assert _siblings(previous) == []


def _run_into_copy(previous: Path, tmp_path: Path, *args):
    out = tmp_path / "out"
    out.mkdir()
    for name, data in _snapshot(previous).items():
        (out / name).write_bytes(data)
    return out, invoke("run", SORT, "--interval", "1024", *args, "-o", out)


def test_budget_run_replaces_the_directory_with_its_summary(previous, tmp_path):
    out, result = _run_into_copy(previous, tmp_path, "--max-insns", "20000")
    assert result.exit_code == EXIT_RUNAWAY, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_reason"] == "max-insns"
    assert "20000" in summary["error"]
    assert not (out / "ground_truth.json").exists()  # (the previous run's: not carried over)
    assert (out / "input.txt").read_text() == "mine\n"  # (the user's files are)
    assert _siblings(out) == []


def _inject(monkeypatch, exc: Exception):
    real = Machine.run

    def run(self, *args, **kwargs):
        self.max_insns = 5000  # (run a little, then fail as injected)
        try:
            real(self, *args, **kwargs)
        except GuestError:
            pass
        raise exc
    monkeypatch.setattr(Machine, "run", run)


def test_guest_error_run_writes_summary_with_exit_reason(previous, tmp_path, monkeypatch):
    _inject(monkeypatch, GuestError("injected guest error"))
    out, result = _run_into_copy(previous, tmp_path)
    assert result.exit_code == EXIT_EMULATION, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_reason"] == "guest-error"
    assert summary["error"] == "injected guest error"
    assert _siblings(out) == []


def test_emulator_error_run_writes_summary_with_exit_reason(previous, tmp_path, monkeypatch):
    _inject(monkeypatch, RuntimeError("injected host failure"))
    out, result = _run_into_copy(previous, tmp_path)
    assert result.exit_code == EXIT_EMULATION, result.output
    line = result.stderr.strip().splitlines()
    assert line == ["spe-emu: error: emulator error: RuntimeError: injected host failure"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_reason"] == "emulator-error"
    assert summary["error"] == "emulator error: RuntimeError: injected host failure"
    assert summary["instructions"] > 0  # (what was collected)
    assert summary["trace_bytes"] == (out / "spe.trace").stat().st_size
    assert _siblings(out) == []


def test_fresh_output_directory_and_no_strays(tmp_path):
    out = tmp_path / "a" / "b"
    result = invoke("run", SORT, "-o", out)
    assert result.exit_code == 0, result.output
    assert "trace: " + str(out / "spe.trace") in result.output
    assert (out / "summary.json").exists() and (out / "spe.trace").exists()
    assert _siblings(out) == []


# -- an output directory a run cannot replace safely (issue 29 item 7) ------------------------
# ('-o /' ran for more than 30 s: the run's directory was made next to / -- inside it -- and
# every file of the host copied into it.) Nothing may be made or copied for these: the staging
# calls fail the test if reached.

def _no_staging(monkeypatch):
    from spe_emu import session

    def reached(*args, **kwargs):
        pytest.fail(f"staged a run for an output directory it cannot replace: {args} {kwargs}")
    monkeypatch.setattr(session.tempfile, "mkdtemp", reached)
    monkeypatch.setattr(session.shutil, "copytree", reached)


def _refused(result, line: str) -> None:
    assert result.exit_code == EXIT_ERROR, result.output
    assert result.stderr.splitlines() == [f"spe-emu: error: {line}"]


OWN = "give a directory of its own, e.g. -o spe-out"
WHOLE = ("a run replaces its output directory as a whole, which a file system root, a mount "
         "point, the home directory, '.' or '..' cannot be: " + OWN)


@pytest.mark.parametrize("where", ["/", ".", "..", "sub/..", "home", "mount"])
def test_roots_mounts_home_and_dots_are_refused_before_anything_is_made(where, tmp_path,
                                                                         monkeypatch):
    import os
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    monkeypatch.chdir(work)
    if where == "home":
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        (tmp_path / "home").mkdir()
        where = tmp_path / "home"
    elif where == "mount":
        if not os.path.ismount("/proc"):
            pytest.skip("/proc is not a mount point here")
        where = "/proc"
    _no_staging(monkeypatch)
    _refused(invoke("run", SORT, "-o", where), f"output directory {where}: {WHOLE}")


def test_a_directory_holding_the_current_one_is_refused(tmp_path, monkeypatch):
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    _no_staging(monkeypatch)
    _refused(invoke("run", SORT, "-o", tmp_path / "a"),
             f"output directory {tmp_path / 'a'}: holds the current directory, which the run "
             f"would replace as a whole: {OWN}")


def test_too_many_files_to_copy_are_refused(tmp_path, monkeypatch):
    from spe_emu import session
    out = tmp_path / "out"
    (out / "d").mkdir(parents=True)
    for n in range(3):
        (out / "d" / str(n)).write_text("x")
    monkeypatch.setattr(session, "MAX_OUTDIR_ENTRIES", 3)   # (out: d and its three files)
    _no_staging(monkeypatch)
    _refused(invoke("run", SORT, "-o", out),
             f"output directory {out}: more than 3 files and directories in it, which each "
             f"run would copy (not an spe-emu output directory?): {OWN}")
    monkeypatch.setattr(session, "MAX_OUTDIR_ENTRIES", 10_000)
    monkeypatch.setattr(session, "MAX_OUTDIR_BYTES", 2)
    _refused(invoke("run", SORT, "-o", out),
             f"output directory {out}: more than 2 bytes in it, which each run would copy (not "
             f"an spe-emu output directory?): {OWN}")


def test_files_a_copy_would_change_are_refused(tmp_path, monkeypatch):
    """A named pipe (the copy would wait on it), a file of another owner or group (the copy
    would be the run's: /etc's /etc/shadow, group shadow)."""
    import os
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "pipe")
    _no_staging(monkeypatch)
    _refused(invoke("run", SORT, "-o", out),
             f"output directory {out}: {out / 'pipe'} is not a file, directory or symbolic "
             f"link a run can copy: {OWN}")
    (out / "pipe").unlink()
    if os.geteuid() != 0:
        return
    (out / "theirs").write_text("x")
    os.chown(out / "theirs", 0, 42)
    _refused(invoke("run", SORT, "-o", out),
             f"output directory {out}: {out / 'theirs'} is owned by 0:42, not by the run's "
             f"user and group (0:{os.getegid()}), which its copy would get: {OWN}")
