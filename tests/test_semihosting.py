"""Semihosting host: console, files confined to the output directory, exits, virtual time."""

from __future__ import annotations

import errno
import os

import pytest

from spe_emu.devices.semihosting import (
    FEATURES_DATA, TICK_HZ, SemihostExit, Semihosting,
)
from spe_emu.errors import SemihostingError

SYS_OPEN, SYS_CLOSE, SYS_WRITEC, SYS_WRITE0, SYS_WRITE = 0x01, 0x02, 0x03, 0x04, 0x05
SYS_READ = 0x06
SYS_ISTTY, SYS_SEEK, SYS_FLEN, SYS_CLOCK, SYS_TIME, SYS_ERRNO = 0x09, 0x0A, 0x0C, 0x10, 0x11, 0x13
SYS_GET_CMDLINE, SYS_HEAPINFO, SYS_EXIT, SYS_EXIT_EXTENDED = 0x15, 0x16, 0x18, 0x20
SYS_ELAPSED, SYS_TICKFREQ = 0x30, 0x31
MODE_R, MODE_RB, MODE_W, MODE_WB, MODE_AB = 0, 1, 4, 5, 9
MINUS_ONE = (1 << 64) - 1
BASE = 0x4800_0000


class GuestMemory:
    """A flat guest memory with a bump allocator for test data."""

    def __init__(self, size: int = 0x1_0000):
        self.mem = bytearray(size)
        self.top = 0x100

    def read(self, addr: int, n: int) -> bytes:
        off = addr - BASE
        if off < 0 or off + n > len(self.mem):
            raise IndexError(f"unmapped {addr:#x}+{n}")
        return bytes(self.mem[off:off + n])

    def write(self, addr: int, data: bytes) -> None:
        off = addr - BASE
        if off < 0 or off + len(data) > len(self.mem):
            raise IndexError(f"unmapped {addr:#x}+{len(data)}")
        self.mem[off:off + len(data)] = data

    def put(self, data: bytes) -> int:
        addr = BASE + self.top
        self.write(addr, data)
        self.top += (len(data) + 15) & ~15
        return addr

    def block(self, *words: int) -> int:
        return self.put(b"".join((w & MINUS_ONE).to_bytes(8, "little") for w in words))

    def word(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 8), "little")


class Env:
    def __init__(self, tmp_path, clock=None, cmdline=""):
        self.mem = GuestMemory()
        self.outdir = tmp_path / "out"
        self.chunks: list[bytes] = []
        self.log: list[str] = []
        self.sh = Semihosting(self.outdir, self.mem.read, self.mem.write,
                              console=self.chunks.append, clock=clock, cmdline=cmdline,
                              log=self.log.append)

    def open(self, name: str | bytes, mode: int) -> int:
        raw = name.encode() if isinstance(name, str) else name
        return self.sh.call(SYS_OPEN, self.mem.block(self.mem.put(raw + b"\0"), mode, len(raw)))

    def write(self, handle: int, data: bytes) -> int:
        return self.sh.call(SYS_WRITE, self.mem.block(handle, self.mem.put(data), len(data)))

    def read(self, handle: int, n: int) -> tuple[int, bytes]:
        buf = self.mem.put(bytes(n))
        left = self.sh.call(SYS_READ, self.mem.block(handle, buf, n))
        return left, self.mem.read(buf, n - left) if left <= n else b""

    def close(self, handle: int) -> int:
        return self.sh.call(SYS_CLOSE, self.mem.block(handle))

    def errno(self) -> int:
        return self.sh.call(SYS_ERRNO, 0)


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    e.sh.close_all()


# ---- console --------------------------------------------------------------------------------


def test_outdir_is_created(env):
    assert env.outdir.is_dir()
    assert env.sh.outdir == env.outdir.resolve()


def test_console_writes(env):
    assert env.sh.call(SYS_WRITEC, env.mem.put(b"A")) == 0
    assert env.sh.call(SYS_WRITE0, env.mem.put(b"hello\n\0ignored")) == 0
    tt = env.open(":tt", MODE_W)
    assert tt == 1
    assert env.write(tt, b"via :tt\n") == 0
    err = env.open(":tt", MODE_AB)
    assert env.write(err, b"err\n") == 0
    assert env.sh.console_output == b"Ahello\nvia :tt\nerr\n"
    assert env.chunks == [b"A", b"hello\n", b"via :tt\n", b"err\n"]
    assert env.sh.call(SYS_ISTTY, env.mem.block(tt)) == 1
    assert env.close(tt) == 0
    assert env.sh.files_written == {}


def test_the_firmwares_own_lines_are_its_console(tmp_path):
    """SYS_WRITEC/SYS_WRITE0 called from spe_emu's firmware (caller_is_firmware, set by the
    machine from the PC) go to the firmware's console; its SYS_WRITE to :tt relays the
    guest's output, which stays the console (issue 29 item 6)."""
    fw: list[bytes] = []
    e = Env(tmp_path)
    e.sh = Semihosting(e.outdir, e.mem.read, e.mem.write, console=e.chunks.append,
                       firmware_console=fw.append)
    e.sh.caller_is_firmware = True
    assert e.sh.call(SYS_WRITE0, e.mem.put(b"spe_fw: banner\n\0")) == 0
    assert e.sh.call(SYS_WRITEC, e.mem.put(b"!")) == 0
    tt = e.open(":tt", MODE_W)
    assert e.write(tt, b"guest line\n") == 0
    e.sh.caller_is_firmware = False
    assert e.sh.call(SYS_WRITE0, e.mem.put(b"bare metal\n\0")) == 0
    assert fw == [b"spe_fw: banner\n", b"!"]
    assert e.sh.firmware_output == b"spe_fw: banner\n!"
    assert e.sh.console_output == b"guest line\nbare metal\n" and e.chunks == [
        b"guest line\n", b"bare metal\n"]
    e.sh.close_all()


def test_write0_across_chunks(env):
    text = b"x" * 700
    assert env.sh.call(SYS_WRITE0, env.mem.put(text + b"\0")) == 0
    assert env.sh.console_output == text


def test_stdin_is_empty(env):
    tt = env.open(":tt", MODE_R)
    assert env.read(tt, 16) == (16, b"")
    assert env.write(tt, b"no") == 2          # read-only handle: nothing written
    assert env.errno() == errno.EBADF


# ---- files ----------------------------------------------------------------------------------


def test_file_round_trip_inside_outdir(env):
    h = env.open("spe.trace", MODE_WB)
    assert h == 1
    payload = bytes(range(256)) * 3
    assert env.write(h, payload[:500]) == 0
    assert env.write(h, payload[500:]) == 0
    assert env.sh.call(SYS_ISTTY, env.mem.block(h)) == 0
    assert env.sh.call(SYS_FLEN, env.mem.block(h)) == 768
    assert env.close(h) == 0
    assert (env.outdir / "spe.trace").read_bytes() == payload
    assert env.sh.files_written == {"spe.trace": 768}

    h = env.open("spe.trace", MODE_RB)
    assert env.sh.call(SYS_SEEK, env.mem.block(h, 700)) == 0
    assert env.read(h, 100) == (32, payload[700:])
    assert env.read(h, 10) == (10, b"")       # end of file
    assert env.close(h) == 0
    assert env.sh.files_written == {"spe.trace": 768}


def test_append_and_subdirectory(env):
    (env.outdir / "sub").mkdir()
    h = env.open("sub/log.txt", MODE_AB)
    env.write(h, b"one\n")
    env.close(h)
    h = env.open("sub/../sub/log.txt", MODE_AB)
    env.write(h, b"two\n")
    env.close(h)
    assert (env.outdir / "sub" / "log.txt").read_bytes() == b"one\ntwo\n"
    assert env.sh.files_written == {"sub/log.txt": 8}


def test_missing_file_for_reading(env):
    assert env.open("absent.bin", MODE_RB) == MINUS_ONE
    assert env.errno() == errno.ENOENT


@pytest.mark.parametrize("name", ["../x", "/tmp/x", "a/../../x", "", "."])
def test_paths_escaping_outdir_are_refused(env, tmp_path, name):
    before = set(tmp_path.rglob("*"))
    assert env.open(name, MODE_WB) == MINUS_ONE
    assert env.errno() == errno.EACCES
    assert set(tmp_path.rglob("*")) == before
    assert not (tmp_path / "x").exists()
    assert env.log == [f"semihosting: SYS_OPEN: refused {name!r}: files must stay inside "
                       f"{env.sh.outdir}"]
    assert env.sh.files_written == {}


def test_symlink_out_of_outdir_is_refused(env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside / "victim", env.outdir / "link")       # dangling link to a new file
    os.symlink(outside, env.outdir / "dirlink")
    assert env.open("link", MODE_WB) == MINUS_ONE
    assert env.open("dirlink/victim", MODE_WB) == MINUS_ONE
    assert env.open("link", MODE_RB) == MINUS_ONE
    assert list(outside.iterdir()) == []
    assert env.errno() == errno.EACCES


def test_bad_handles_and_modes(env):
    assert env.close(42) == MINUS_ONE
    assert env.errno() == errno.EBADF
    assert env.write(42, b"abc") == 3
    assert env.read(42, 4)[0] == MINUS_ONE
    assert env.sh.call(SYS_ISTTY, env.mem.block(42)) == MINUS_ONE
    assert env.sh.call(SYS_FLEN, env.mem.block(42)) == MINUS_ONE
    assert env.open("f", 12) == MINUS_ONE
    assert env.errno() == errno.EINVAL
    h = env.open("f", MODE_WB)
    assert env.read(h, 4)[0] == MINUS_ONE               # write-only file
    assert env.errno() == errno.EBADF
    assert env.close(h) == 0
    assert env.close(h) == MINUS_ONE                    # already closed


def test_features_file(env):
    h = env.open(":semihosting-features", MODE_RB)
    assert env.sh.call(SYS_FLEN, env.mem.block(h)) == 5
    assert env.read(h, 8) == (3, b"SHFB\x01")
    assert FEATURES_DATA == b"SHFB\x01"
    assert env.open(":semihosting-features", MODE_WB) == MINUS_ONE


def test_close_all_closes_files(env):
    h = env.open("a.bin", MODE_WB)
    env.write(h, b"data")
    env.sh.close_all()
    assert (env.outdir / "a.bin").read_bytes() == b"data"
    assert env.write(h, b"more") == 4                   # handle gone
    env.sh.close_all()                                  # idempotent


def test_unknown_operation(env):
    assert env.sh.call(0x0E, 0) == MINUS_ONE            # SYS_REMOVE is not offered
    assert env.log == ["semihosting: unsupported operation 0xe (param 0x0)"]


def test_outdir_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with pytest.raises(SemihostingError, match="cannot create semihosting output directory"):
        Semihosting(blocker / "out", lambda a, n: b"", lambda a, d: None)


# ---- exits ----------------------------------------------------------------------------------


@pytest.mark.parametrize("op", [SYS_EXIT, SYS_EXIT_EXTENDED])
def test_application_exit_status(env, op):
    with pytest.raises(SemihostExit) as info:
        env.sh.call(op, env.mem.block(0x20026, 70))
    assert (info.value.status, info.value.reason) == (70, 0x20026)
    with pytest.raises(SemihostExit) as info:
        env.sh.call(op, env.mem.block(0x20026, -1))
    assert (info.value.status, info.value.reason) == (-1, 0x20026)


@pytest.mark.parametrize("op", [SYS_EXIT, SYS_EXIT_EXTENDED])
def test_other_exit_reasons(env, op):
    with pytest.raises(SemihostExit) as info:
        env.sh.call(op, env.mem.block(0x20023, 0))    # ADP_Stopped_RunTimeErrorUnknown
    assert (info.value.status, info.value.reason) == (1, 0x20023)


def test_exit_is_not_an_spe_emu_error():
    from spe_emu.errors import SpeEmuError
    assert not issubclass(SemihostExit, SpeEmuError)


# ---- time, command line, heap ---------------------------------------------------------------


def test_clock_uses_the_supplied_clock(tmp_path):
    centiseconds = [0]
    e = Env(tmp_path, clock=lambda: centiseconds[0])
    assert e.sh.call(SYS_CLOCK, 0) == 0
    centiseconds[0] = 150                             # 1.5 s of virtual time
    assert e.sh.call(SYS_CLOCK, 0) == 150
    assert e.sh.call(SYS_TICKFREQ, 0) == TICK_HZ == 100
    block = e.mem.block(0)
    assert e.sh.call(SYS_ELAPSED, block) == 0
    assert e.mem.word(block) == 150
    assert e.sh.call(SYS_TIME, 0) == 0


def test_no_clock_means_time_zero(env):
    assert env.sh.call(SYS_CLOCK, 0) == 0
    assert env.sh.call(SYS_TIME, 0) == 0


def test_get_cmdline(tmp_path):
    e = Env(tmp_path, cmdline="guest --n 3")
    buf = e.mem.put(bytes(64))
    block = e.mem.block(buf, 64)
    assert e.sh.call(SYS_GET_CMDLINE, block) == 0
    assert e.mem.read(buf, 12) == b"guest --n 3\0"
    assert e.mem.word(block + 8) == 11
    small = e.mem.block(buf, 4)
    assert e.sh.call(SYS_GET_CMDLINE, small) == MINUS_ONE


def test_heapinfo_returns_zeros(env):
    area = env.mem.put(b"\xff" * 32)
    assert env.sh.call(SYS_HEAPINFO, env.mem.block(area)) == 0
    assert env.mem.read(area, 32) == bytes(32)
