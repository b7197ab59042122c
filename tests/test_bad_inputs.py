"""Bad inputs get one line and a documented status, never a traceback or a hang (issue 29
item 7): a RAM size the board cannot map or the host cannot provide, and input files that are
not regular files (a named pipe, a device), which were read until killed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from unicorn import UC_ERR_NOMEM, UcError

import spe_emu
from spe_emu.errors import ConfigError, ImageError
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


# -- input files that are not regular files: refused, never read or waited on -----------------

def bounded(fn, *args, seconds: int = 30):
    """``fn(*args)`` in a forked child with a time limit and at most 2 GiB more address space
    than this process has: an input read until killed (a named pipe waits for a writer,
    /dev/zero never ends) fails the test instead of hanging it or filling the host's memory.
    Returns what ``fn`` returned, or ("raised", exception type name, message)."""
    import multiprocessing
    import resource

    def child(conn):
        vm = next(int(line.split()[1]) for line in open("/proc/self/status")
                  if line.startswith("VmSize:")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (2 << 30), vm + (2 << 30)))
        try:
            conn.send(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - the outcome is the result
            conn.send(("raised", type(exc).__name__, str(exc)))

    ctx = multiprocessing.get_context("fork")
    parent, conn = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=child, args=(conn,))
    proc.start()
    conn.close()
    if not parent.poll(seconds):
        proc.kill()
        proc.join()
        pytest.fail(f"{fn.__name__}{args} still running after {seconds} s: the input was read "
                    f"or waited on")
    outcome = parent.recv()
    proc.join()
    return outcome


def _cli(*args):
    result = invoke(*args)
    return result.exit_code, result.stderr, result.output


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.fixture
def empty_trace(tmp_path) -> Path:
    path = tmp_path / "spe.trace"   # (no records: the commands get as far as their options)
    path.write_bytes(b"")
    return path


def _assert_refused(outcome, line: str) -> None:
    status, stderr, output = outcome
    assert status == EXIT_ERROR, outcome
    assert stderr.splitlines() == [f"spe-emu: error: {line}"], outcome
    assert "Traceback" not in output


NAMED_PIPE, DEVICE = "not a regular file (a named pipe)", "not a regular file (a character device)"


def test_a_named_pipe_as_image_is_refused(fifo, tmp_path):
    _assert_refused(bounded(_cli, "run", fifo, "-o", tmp_path / "out"), f"{fifo}: {NAMED_PIPE}")
    _assert_refused(bounded(_cli, "run", "--no-firmware", fifo, "-o", tmp_path / "out"),
                    f"{fifo}: {NAMED_PIPE}")
    _assert_refused(bounded(_cli, "run", SORT, "--firmware", fifo, "-o", tmp_path / "out"),
                    f"--firmware {fifo}: {NAMED_PIPE}")


@pytest.mark.parametrize("option", ["--kernel", "--initrd", "--dtb"])
def test_board_inputs_that_are_pipes_or_devices_are_refused(fifo, tmp_path, option):
    for path, problem in ((fifo, NAMED_PIPE), (Path("/dev/zero"), DEVICE)):
        args = ["run", "--machine", "virt", "-o", tmp_path / "out", option, path]
        if option != "--kernel":   # (a raw binary: an ELF kernel takes no initrd)
            kernel = tmp_path / "loop.bin"
            kernel.write_bytes((0x14000000).to_bytes(4, "little"))   # b .
            args += ["--kernel", kernel]
        _assert_refused(bounded(_cli, *args), f"{option} {path}: {problem}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("path", ["fifo", "/dev/zero"])
def test_report_and_perf_data_refuse_pipes_and_devices(fifo, empty_trace, tmp_path, path):
    path = fifo if path == "fifo" else Path(path)
    problem = NAMED_PIPE if path == fifo else DEVICE
    _assert_refused(bounded(_cli, "report", empty_trace, "--ground-truth", path),
                    f"--ground-truth {path}: {problem}")
    _assert_refused(bounded(_cli, "report", empty_trace, "--image", path),
                    f"--image {path}: {problem}")
    _assert_refused(bounded(_cli, "perf-data", empty_trace, "--image", SORT, "--image", path,
                            "-o", tmp_path / "p.data"), f"--image {path}: {problem}")
    _assert_refused(bounded(_cli, "decode", path), f"{path}: {problem}")
    assert not (tmp_path / "p.data").exists()


def _library_reads(fifo: Path, tmp_path: Path) -> list:
    """What each library reader raises for a named pipe (none may wait for a writer)."""
    from spe_emu.linux.elf import is_linux_program
    from spe_emu.platform.board import VIRT
    from spe_emu.platform.boot import load_kernel
    from spe_emu.platform.loader import load_elf
    from spe_emu.session import GUEST_REGION
    from spe_emu.tools.perfdata import image_maps
    from spe_emu.tools.report import build_report, load_ground_truth, load_ground_truth_events
    out = []
    for read in (lambda: spe_emu.run(fifo), lambda: spe_emu.run(fifo, firmware=False),
                 lambda: spe_emu.run(machine="virt", kernel=SORT, dtb=fifo),
                 lambda: load_elf(fifo), lambda: load_kernel(fifo, VIRT, 1 << 30),
                 lambda: load_ground_truth(fifo), lambda: load_ground_truth_events(fifo),
                 lambda: build_report(b"", fifo), lambda: image_maps(fifo)):
        try:
            read()
            out.append(None)
        except Exception as exc:  # noqa: BLE001 - the outcome is the result
            out.append((type(exc).__name__, str(exc)))
    out.append(is_linux_program(fifo, GUEST_REGION))
    return out


def test_library_readers_refuse_a_named_pipe(fifo, tmp_path):
    outcome = bounded(_library_reads, fifo, tmp_path)
    *errors, linux = outcome
    dtb = ("ConfigError", f"--dtb {fifo}: {NAMED_PIPE}")
    assert errors == [("ImageError", f"{fifo}: {NAMED_PIPE}")] * 2 + [dtb] + \
        [("ImageError", f"{fifo}: {NAMED_PIPE}")] * 6, outcome
    assert linux is False


def test_the_open_file_is_checked_again(fifo, monkeypatch):
    """A path that becomes a named pipe after its stat(2) is opened without waiting
    (O_NONBLOCK) and refused on the open descriptor."""
    from spe_emu.platform import inputs
    monkeypatch.setattr(inputs, "check_input", lambda *args: None)

    def read(path):
        try:
            inputs.read_input(path, 1 << 20)
        except ImageError as exc:
            return str(exc)
    assert bounded(read, fifo) == f"{fifo}: {NAMED_PIPE}"


def test_inputs_larger_than_their_limit_are_refused(tmp_path):
    from spe_emu.platform import inputs
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(4097)
    with pytest.raises(ConfigError, match=r"^--dtb .*big: 4097 bytes \(a device tree blob may "
                                          r"have at most 4096\)$"):
        inputs.read_input(big, 4096, "a device tree blob", "--dtb", ConfigError)
    assert inputs.read_input(big, 4097) == bytes(4097)
