"""Reading the files a user names: one rule for every input file.

Every file spe_emu reads because a user named it -- an image (``IMAGE``, ``--firmware``,
``--image``), a kernel, initrd or device tree (``--kernel``, ``--initrd``, ``--dtb``), a
trace (``TRACE``), a ground-truth file (``--ground-truth``), the source files an image's line
table names -- is read through :func:`open_input` or :func:`read_input` (``--share`` names a
directory, the Linux program's own, and is not read here):

* It must be a regular file. Anything else is refused before a byte is read: a named pipe
  blocks until something writes to it and a device such as ``/dev/zero`` never ends (reading
  either hung the command until it was killed), a directory or socket is no file to read. The
  path is checked with stat(2), opened with ``O_NONBLOCK`` (opening a named pipe does not wait
  for a writer) and checked again on the open descriptor (the path may have changed between).
* :func:`read_input` reads at most the limit its caller gives for that kind of file (the size
  checked before reading, and no more than the limit + 1 bytes read).

A refusal is one line, ``OPTION PATH: problem`` (``PATH: problem`` when the caller names no
option), raised as the caller's :class:`~spe_emu.errors.SpeEmuError` class
(:class:`~spe_emu.errors.ImageError` unless told); ``spe-emu`` exits with status 125 (README,
"Exit statuses").
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO, Union

from ..errors import ImageError, SpeEmuError

PathLike = Union[str, "os.PathLike[str]"]

NOT_REGULAR = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISDIR, "a directory"))
"""What a path that is not a regular file is, for the message."""


def input_name(path: PathLike, option: str | None = None) -> str:
    """How a message names the input: ``OPTION PATH``, or ``PATH`` without an option."""
    return f"{option} {os.fspath(path)}" if option else os.fspath(path)


def _refuse_mode(mode: int, name: str, error: type[SpeEmuError]) -> None:
    if not stat.S_ISREG(mode):
        kind = next((what for test, what in NOT_REGULAR if test(mode)), "not a file")
        raise error(f"{name}: not a regular file ({kind})")


def check_input(path: PathLike, option: str | None = None,
                error: type[SpeEmuError] = ImageError) -> os.stat_result:
    """The stat(2) of an input file that exists and is a regular file, without opening it.

    Raises:
        ``error``: missing, not reachable, or not a regular file (naming ``option``)."""
    name = input_name(path, option)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{name}: no such file") from None
    except OSError as exc:
        raise error(f"{name}: cannot read: {exc.strerror or exc}") from None
    _refuse_mode(st.st_mode, name, error)
    return st


def open_input(path: PathLike, option: str | None = None,
               error: type[SpeEmuError] = ImageError) -> BinaryIO:
    """An input file opened for reading (binary), refused unless it is a regular file; the
    open never waits (``O_NONBLOCK``) and the open file is checked again.

    Raises:
        ``error``: missing, unreadable, or not a regular file (naming ``option``)."""
    check_input(path, option, error)
    name = input_name(path, option)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{name}: no such file") from None
    except OSError as exc:
        raise error(f"{name}: cannot read: {exc.strerror or exc}") from None
    try:
        _refuse_mode(os.fstat(fd).st_mode, name, error)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: PathLike, limit: int, what: str = "an input file",
               option: str | None = None, error: type[SpeEmuError] = ImageError) -> bytes:
    """The bytes of an input file (:func:`open_input`) of at most ``limit`` bytes: a larger
    one is refused before it is read (``what`` names the kind of file in the message).

    Raises:
        ``error``: missing, unreadable, not a regular file, or larger than ``limit``."""
    name = input_name(path, option)
    with open_input(path, option, error) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise error(f"{name}: {size} bytes ({what} may have at most {limit})")
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise error(f"{name}: cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise error(f"{name}: more than {limit} bytes ({what} may have at most {limit})")
    return data


def check_inputs(*named: tuple[str, PathLike | None],
                 error: type[SpeEmuError] = ImageError) -> None:
    """:func:`check_input` for each given ``(option, path)`` (None paths skipped): what a
    command runs first, so a refusal names the option the path was given to."""
    for option, path in named:
        if path is not None:
            check_input(Path(path), option, error)
