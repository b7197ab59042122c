"""Bad inputs get one line and a documented status, never a traceback or a hang (issue 29
item 7): a RAM size the board cannot map or the host cannot provide, and input files that are
not regular files (a named pipe, a device), which were read until killed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from unicorn import UC_ERR_NOMEM, UcError

import spe_emu
from spe_emu.errors import ConfigError
from spe_emu.platform.bus import Bus
from spe_emu.tools.cli import EXIT_EMULATION, EXIT_ERROR, main

ROOT = Path(__file__).resolve().parents[1]
SORT = ROOT / "guests" / "sort.elf"
ENV = {"COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], env=ENV)


def one_line(result, status: int = EXIT_ERROR) -> str:
    """The command's one error line (without ``spe-emu: error: ``), checked."""
    assert result.exit_code == status, (result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("spe-emu: error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0].removeprefix("spe-emu: error: ")


# -- -m: the board's limit, the host's memory ------------------------------------------------

def test_ram_beyond_the_board_is_refused_before_anything_is_mapped(tmp_path):
    # (was: UcError ... UC_ERR_NOMEM, a traceback)
    line = one_line(invoke("run", "--machine", "virt", "--kernel", SORT, "-m", "1000000G",
                           "-o", tmp_path / "out"))
    assert line == "-m 1000000G: the virt board has at most 255G of RAM (from 0x40000000)"
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match=r"^-m 256G: the virt board has at most 255G"):
        spe_emu.run(machine="virt", kernel=SORT, ram_size=256 << 30)


def _host_refuses(monkeypatch, errno: int) -> None:
    def map_ram(self, name, base, size):
        raise UcError(errno)
    monkeypatch.setattr(Bus, "map_ram", map_ram)


def test_ram_the_host_cannot_provide_is_one_line(tmp_path, monkeypatch):
    # (a size the board holds but the host cannot map: -m 24G on a 23 GiB host)
    _host_refuses(monkeypatch, UC_ERR_NOMEM)
    line = one_line(invoke("run", "--machine", "virt", "--kernel", SORT, "-m", "24G",
                           "-o", tmp_path / "out"))
    assert line.startswith("-m 24G: the host cannot provide the memory for the machine "
                           "(Unicorn: "), line
    assert "UC_ERR_NOMEM" in line
    # (a guest for the firmware: its RAM is not the user's choice)
    line = one_line(invoke("run", SORT, "-o", tmp_path / "out"))
    assert line.startswith("guest RAM of 256M: the host cannot provide the memory"), line


def test_other_unicorn_errors_at_set_up_are_emulator_errors(tmp_path, monkeypatch):
    from unicorn import UC_ERR_MAP
    _host_refuses(monkeypatch, UC_ERR_MAP)
    line = one_line(invoke("run", "--machine", "virt", "--kernel", SORT, "-o",
                           tmp_path / "out"), EXIT_EMULATION)
    assert line.startswith("emulator error: setting up the machine: "), line
