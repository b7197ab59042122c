"""The newc cpio writer (spe_emu.tools.cpio): header bytes against the format
(Linux buffer-format.rst) and archives read back by GNU cpio."""

import os
import shutil
import stat
import subprocess

import pytest

from spe_emu.errors import ConfigError
from spe_emu.tools.cpio import NEWC_HEADER_BYTES, Newc


def test_header_layout():
    a = Newc()
    a.file("init", b"abc", mode=0o755)
    blob = a.finish()
    # magic, ino 1, mode 0100755, uid, gid, nlink 1, mtime 0, filesize 3, ..., namesize 5
    assert blob[:NEWC_HEADER_BYTES] == (
        b"070701" b"00000001" b"000081ED" b"00000000" b"00000000" b"00000001" b"00000000"
        b"00000003" b"00000000" b"00000000" b"00000000" b"00000000" b"00000005" b"00000000")
    # name "init\0" then pad to 4 (110 + 5 = 115 -> 116), data "abc" padded to 4
    assert blob[110:116] == b"init\0\0"
    assert blob[116:120] == b"abc\0"
    trailer = blob[120:]
    assert trailer.startswith(b"070701") and b"TRAILER!!!\0" in trailer
    assert len(blob) % 4 == 0
    assert blob == _same_archive()      # deterministic


def _same_archive():
    a = Newc()
    a.file("init", b"abc", mode=0o755)
    return a.finish()


def test_parents_added_and_misuse_refused():
    a = Newc()
    a.file("usr/lib/x.so", b"")
    assert a.has("usr") and a.has("usr/lib")
    with pytest.raises(ConfigError):
        a.file("usr/lib/x.so", b"")
    with pytest.raises(ConfigError):
        a.file("a/../b", b"")
    a.finish()
    with pytest.raises(ConfigError):
        a.directory("late")


@pytest.mark.skipif(shutil.which("cpio") is None, reason="GNU cpio not installed")
def test_gnu_cpio_reads_it(tmp_path):
    a = Newc()
    a.directory("dev")
    a.char_device("dev/console", 5, 1)
    a.file("bin/busybox", bytes(range(256)) * 3 + b"x", mode=0o755)
    a.symlink("bin/sh", "busybox")
    a.file("etc/empty", b"")
    (tmp_path / "a.cpio").write_bytes(a.finish())
    listing = subprocess.run(["cpio", "-itv", "--quiet", "-F", "a.cpio"], cwd=tmp_path,
                             capture_output=True, text=True, check=True).stdout.splitlines()
    names = [line.split()[-1] if "->" not in line else line.split()[-3] for line in listing]
    assert names == ["dev", "dev/console", "bin", "bin/busybox", "bin/sh", "etc", "etc/empty"]
    console = next(line for line in listing if line.endswith("dev/console"))
    assert console.startswith("crw-------") and "5," in console and " 1 " in console
    assert listing[4].startswith("lrwxrwxrwx") and listing[4].endswith("bin/sh -> busybox")
    out = tmp_path / "x"
    out.mkdir()
    # extract everything but the device node (no root needed for that)
    subprocess.run(["cpio", "-id", "--quiet", "--no-absolute-filenames", "-F", "../a.cpio",
                    "bin/*", "etc/*"], cwd=out, check=True)
    assert (out / "bin/busybox").read_bytes() == bytes(range(256)) * 3 + b"x"
    assert stat.S_IMODE((out / "bin/busybox").stat().st_mode) == 0o755
    assert os.readlink(out / "bin/sh") == "busybox"
    assert (out / "etc/empty").read_bytes() == b""
