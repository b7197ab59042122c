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
