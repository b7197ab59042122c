"""A writer of the ``newc`` cpio archives Linux unpacks as an initramfs, no root needed.

The format (Linux ``Documentation/driver-api/early-userspace/buffer-format.rst``, the SVR4
"new ASCII" cpio): each member is a 110-byte header -- the magic ``070701`` and thirteen
8-digit hexadecimal fields (:data:`NEWC_FIELDS`) -- then the NUL-terminated name, padded with
NULs to a multiple of 4 bytes counted from the header's start, then the data, padded to a
multiple of 4 bytes. A symbolic link's data is its target. The archive ends with a member named
``TRAILER!!!``. Owners, times and inode numbers are fixed (uid/gid 0, mtime 0, inodes counted
from 1), so the same members give the same bytes.

    archive = Newc()
    archive.directory("dev")
    archive.char_device("dev/console", 5, 1)
    archive.file("init", b"#!/bin/sh\\n", mode=0o755)
    archive.symlink("bin/sh", "busybox")
    blob = archive.finish()            # bytes; gzip it for -initrd
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field

from ..errors import ConfigError

NEWC_MAGIC = b"070701"
NEWC_FIELDS = ("ino", "mode", "uid", "gid", "nlink", "mtime", "filesize", "devmajor",
               "devminor", "rdevmajor", "rdevminor", "namesize", "check")
"""The header's fields after the magic, in order, each 8 hexadecimal digits."""
NEWC_HEADER_BYTES = len(NEWC_MAGIC) + 8 * len(NEWC_FIELDS)
TRAILER = "TRAILER!!!"
FIELD_MAX = (1 << 32) - 1


def _pad4(n: int) -> int:
    return -n % 4


@dataclass
class Newc:
    """An archive being written; members are kept in the order they are added.

    Names are relative (a leading ``/`` is dropped); the directories a member's path goes
    through are added automatically (mode 0755) when they were not added before.
    """

    _out: list[bytes] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)
    _ino: int = 0
    _finished: bool = False

    def _member(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0),
                nlink: int = 1) -> None:
        if self._finished:
            raise ConfigError("cpio archive already finished")
        name = name.strip("/")
        if not name or name in self._names or name == TRAILER:
            raise ConfigError(f"cpio member name {name!r}: empty or given twice")
        parts = name.split("/")
        if ".." in parts or "." in parts:
            raise ConfigError(f"cpio member name {name!r}: '.' or '..' component")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in self._names:
                self.directory(parent)
        self._names.add(name)
        self._ino += 1
        self._emit(name, self._ino, mode, data, rdev, nlink)

    def _emit(self, name: str, ino: int, mode: int, data: bytes, rdev: tuple[int, int],
              nlink: int) -> None:
        raw_name = name.encode() + b"\0"
        values = dict(ino=ino, mode=mode, uid=0, gid=0, nlink=nlink, mtime=0,
                      filesize=len(data), devmajor=0, devminor=0, rdevmajor=rdev[0],
                      rdevminor=rdev[1], namesize=len(raw_name), check=0)
        for key, value in values.items():
            if not 0 <= value <= FIELD_MAX:
                raise ConfigError(f"cpio member {name!r}: {key} {value} does not fit 32 bits")
        header = NEWC_MAGIC + b"".join(b"%08X" % values[k] for k in NEWC_FIELDS)
        self._out += [header, raw_name, b"\0" * _pad4(NEWC_HEADER_BYTES + len(raw_name)),
                      data, b"\0" * _pad4(len(data))]

    def directory(self, name: str, mode: int = 0o755) -> None:
        """A directory (permission bits ``mode``)."""
        self._member(name, stat.S_IFDIR | (mode & 0o7777), nlink=2)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        """A regular file holding ``data`` (at most 4 GiB - 1 bytes)."""
        self._member(name, stat.S_IFREG | (mode & 0o7777), bytes(data))

    def symlink(self, name: str, target: str) -> None:
        """A symbolic link to ``target``."""
        self._member(name, stat.S_IFLNK | 0o777, target.encode())

    def char_device(self, name: str, major: int, minor: int, mode: int = 0o600) -> None:
        """A character device node (e.g. ``dev/console``, 5:1), made without root."""
        self._member(name, stat.S_IFCHR | (mode & 0o7777), rdev=(major, minor))

    def has(self, name: str) -> bool:
        """Whether a member of this name was added (or implied as a parent directory)."""
        return name.strip("/") in self._names

    def finish(self) -> bytes:
        """The archive's bytes, trailer included; no member can be added afterwards."""
        if not self._finished:
            self._emit(TRAILER, 0, 0, b"", (0, 0), 1)
            self._finished = True
        return b"".join(self._out)
