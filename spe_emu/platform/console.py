"""Host input for the board's console device, offered at deterministic points of virtual time.

The console device (the board's ``console``, e.g. the PL011) takes bytes through
``feed(data)`` when ``rx_space()`` says it has room. The machine polls the host every
1 ms of virtual time (:func:`poll_ticks`) while input is attached (a clock event), and when the PE
waits in WFI. From a pipe or a file the poll reads exactly the room there is (blocking until
that many bytes or end of file), so the same input gives the same run; from a terminal it
reads what has been typed (interactive input is timing-dependent by nature).
"""

from __future__ import annotations

import os
import select
import stat
from typing import BinaryIO

POLLS_PER_SECOND = 1000
"""Input polls per second of virtual time."""


def poll_ticks(hz: int) -> int:
    """Counter ticks between input polls at a counter of ``hz`` Hz (1 ms)."""
    return max(1, hz // POLLS_PER_SECOND)


def usable_input(stream: BinaryIO | None) -> BinaryIO | None:
    """``stream`` if it is a terminal, a pipe or a regular file (stdin worth reading), else
    None (closed, /dev/null or another character device)."""
    if stream is None:
        return None
    try:
        fd = stream.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError, AttributeError):
        return None
    if os.isatty(fd) or stat.S_ISFIFO(mode) or stat.S_ISREG(mode):
        return stream
    return None


class ConsoleInput:
    """Reads host input for the console device.

    Args:
        stream: a binary file object with a file descriptor.
    """

    def __init__(self, stream: BinaryIO):
        self.fd = stream.fileno()
        self.interactive = os.isatty(self.fd)
        self.eof = False

    def read(self, room: int, patience: float = 0.0) -> bytes:
        """Up to ``room`` bytes: from a terminal what is waiting now, or within ``patience``
        seconds (maybe nothing); from a pipe or file exactly ``room`` bytes unless the input
        ends first (then :attr:`eof` is set)."""
        if self.eof or room <= 0:
            return b""
        if self.interactive:
            ready, _, _ = select.select([self.fd], [], [], patience)
            if not ready:
                return b""
            data = os.read(self.fd, room)
            self.eof = not data
            return data
        out = bytearray()
        while len(out) < room:
            chunk = os.read(self.fd, room - len(out))
            if not chunk:
                self.eof = True
                break
            out += chunk
        return bytes(out)
