"""Arm semihosting host side for AArch64 guests (``HLT #0xF000``, operation in W0, parameter in
X1, result in X0).

Reference: Arm *Semihosting for AArch32 and AArch64* (version 3.0): the "Semihosting
operations" chapter (one section per ``SYS_*`` call) and the ``:semihosting-features``
extension mechanism. In AArch64 every field of a parameter block is a 64-bit little-endian
word.

Behaviour that is fixed here so runs are reproducible:

* The console is ``:tt`` (and ``SYS_WRITEC`` / ``SYS_WRITE0``); stdin is always empty. What
  spe_emu's own firmware prints itself, with SYS_WRITEC / SYS_WRITE0 (the caller sets
  :attr:`Semihosting.caller_is_firmware` from the calling PC), goes to the firmware's console
  instead (:attr:`Semihosting.firmware_output`, the ``firmware_console`` callback): it is never
  the guest's output. (The firmware relays the guest's own writes with SYS_WRITE, which stay
  the guest's.)
* Files live inside ``outdir`` only: a name that is absolute, contains ``..`` components that
  leave ``outdir``, or resolves outside it through a symlink is refused (``-1``, errno EACCES,
  logged). Files are always opened in binary mode.
* Time is virtual: ``clock()`` returns centiseconds of virtual time (the machine derives them
  from retired instructions at the board's counter frequency). ``SYS_CLOCK`` returns that
  value, ``SYS_ELAPSED`` reports it as ticks of :data:`TICK_HZ` = 100 Hz (``SYS_TICKFREQ``), and
  ``SYS_TIME`` always returns 0. No host time reaches the guest.
* ``SYS_HEAPINFO`` returns four zero words (the program picks its own heap and stack).
* errno values are the host's ``errno`` numbers (EACCES, ENOENT, EBADF, EINVAL, ...), which
  are the Linux numbers on the hosts spe_emu runs on.

Guest mistakes (bad handles, refused paths, unknown operations) return -1 (or the documented
error value) and are logged; they never raise. Host-side failures the caller must see (the
output directory cannot be created, a host write to a file fails) raise
:class:`~spe_emu.errors.SemihostingError`. The exits raise :class:`SemihostExit`.
"""

from __future__ import annotations

import errno as _errno
import os
import pathlib
from dataclasses import dataclass
from typing import BinaryIO, Callable

from ..errors import SemihostingError
from ..sysreg import MASK64

RETURN_ERROR = MASK64
"""-1 as the 64-bit X0 value."""
TICK_HZ = 100
"""SYS_ELAPSED tick frequency: one tick per centisecond of ``clock()``."""
CHUNK = 1 << 20
"""Largest block moved between guest memory and a host file in one step."""

# Operation numbers (semihosting spec, "Semihosting operations")
SYS_OPEN = 0x01
SYS_CLOSE = 0x02
SYS_WRITEC = 0x03
SYS_WRITE0 = 0x04
SYS_WRITE = 0x05
SYS_READ = 0x06
SYS_ISTTY = 0x09
SYS_SEEK = 0x0A
SYS_FLEN = 0x0C
SYS_CLOCK = 0x10
SYS_TIME = 0x11
SYS_ERRNO = 0x13
SYS_GET_CMDLINE = 0x15
SYS_HEAPINFO = 0x16
SYS_EXIT = 0x18
SYS_EXIT_EXTENDED = 0x20
SYS_ELAPSED = 0x30
SYS_TICKFREQ = 0x31

ADP_STOPPED_APPLICATION_EXIT = 0x20026
"""``ADP_Stopped_ApplicationExit``: the only exit reason whose subcode is an exit status."""

OPEN_MODES = ("rb", "rb", "r+b", "r+b", "wb", "wb", "w+b", "w+b", "ab", "ab", "a+b", "a+b")
"""SYS_OPEN mode numbers 0..11 (ISO C fopen modes r, rb, r+, r+b, w, wb, w+, w+b, a, ab, a+,
a+b), all opened in binary mode on the host."""

FEATURES_FILE = ":semihosting-features"
FEATURES_DATA = b"SHFB" + bytes([0b0000_0001])
"""Magic and feature byte 0: bit 0 SH_EXT_EXIT_EXTENDED (SYS_EXIT_EXTENDED is supported);
bit 1 SH_EXT_STDOUT_STDERR is not set (``:tt`` in mode a also goes to the console)."""

MAX_NAME = 4096
"""Longest file name / SYS_WRITE0 string accepted from the guest."""


class SemihostExit(Exception):
    """The guest ended with SYS_EXIT or SYS_EXIT_EXTENDED (a normal end, not an error).

    Attributes:
        status: exit status: the subcode for ``ADP_Stopped_ApplicationExit`` (0x20026),
            interpreted as a signed 64-bit value; 1 for any other reason.
        reason: the ADP_Stopped_* reason code as given.
    """

    def __init__(self, status: int, reason: int):
        super().__init__(f"semihosting exit: status {status}, reason {reason:#x}")
        self.status = status
        self.reason = reason


@dataclass
class _Handle:
    name: str                    # as the guest gave it
    mode: str                    # host mode from OPEN_MODES
    file: BinaryIO | None = None  # None: the console / stdin / in-memory data
    data: bytes | None = None    # in-memory read-only content (":semihosting-features")
    pos: int = 0                 # position in ``data``
    rel: str | None = None       # path relative to outdir, for files_written

    @property
    def readable(self) -> bool:
        return self.mode.startswith("r") or "+" in self.mode

    @property
    def writable(self) -> bool:
        return not self.mode.startswith("r") or "+" in self.mode

    @property
    def is_tty(self) -> bool:
        return self.file is None and self.data is None


class Semihosting:
    """The semihosting host for one run.

    Args:
        outdir: directory the guest's files live in; created if missing.
        read_mem: ``read_mem(vaddr, n) -> bytes``, guest-virtual; exceptions propagate.
        write_mem: ``write_mem(vaddr, data)``, guest-virtual; exceptions propagate.
        console: called with every chunk written to the console.
        clock: virtual time in centiseconds since the start of the run (the machine derives
            it from retired instructions, never host time); None means a clock stopped at 0.
        cmdline: what SYS_GET_CMDLINE returns.
        log: receives one line per guest error (``"semihosting: ..."``).

    Raises:
        SemihostingError: ``outdir`` cannot be created.
    """

    def __init__(self, outdir: pathlib.Path, read_mem: Callable[[int, int], bytes],
                 write_mem: Callable[[int, bytes], None],
                 console: Callable[[bytes], None] | None = None,
                 clock: Callable[[], int] | None = None, cmdline: str = "",
                 log: Callable[[str], None] | None = None,
                 firmware_console: Callable[[bytes], None] | None = None):
        try:
            pathlib.Path(outdir).mkdir(parents=True, exist_ok=True)
            self._outdir = pathlib.Path(outdir).resolve(strict=True)
        except OSError as exc:
            raise SemihostingError(f"cannot create semihosting output directory {outdir}: "
                                   f"{exc.strerror or exc}") from exc
        self._read_mem = read_mem
        self._write_mem = write_mem
        self._console = console
        self._clock = clock
        self._cmdline = cmdline
        self._log = log
        self._console_out = bytearray()
        self._firmware_console = firmware_console
        self._firmware_out = bytearray()
        self.caller_is_firmware = False
        """Set by the machine before each call: the calling instruction is spe_emu's
        firmware's, whose console writes are not the guest's (:attr:`firmware_output`)."""
        self._handles: dict[int, _Handle] = {}
        self._next_handle = 1
        self._errno = 0
        self.files_written: dict[str, int] = {}
        """Path relative to ``outdir`` (POSIX form) -> bytes the guest wrote to it."""
        self._ops: dict[int, Callable[[int], int]] = {
            SYS_OPEN: self._sys_open, SYS_CLOSE: self._sys_close, SYS_WRITEC: self._sys_writec,
            SYS_WRITE0: self._sys_write0, SYS_WRITE: self._sys_write, SYS_READ: self._sys_read,
            SYS_ISTTY: self._sys_istty, SYS_SEEK: self._sys_seek, SYS_FLEN: self._sys_flen,
            SYS_CLOCK: self._sys_clock, SYS_TIME: self._sys_time, SYS_ERRNO: self._sys_errno,
            SYS_GET_CMDLINE: self._sys_get_cmdline, SYS_HEAPINFO: self._sys_heapinfo,
            SYS_EXIT: self._sys_exit, SYS_EXIT_EXTENDED: self._sys_exit,
            SYS_ELAPSED: self._sys_elapsed, SYS_TICKFREQ: self._sys_tickfreq,
        }

    # ---- public ----------------------------------------------------------------------------

    @property
    def outdir(self) -> pathlib.Path:
        """The resolved output directory."""
        return self._outdir

    @property
    def console_output(self) -> bytes:
        """Everything the guest wrote to the console so far."""
        return bytes(self._console_out)

    @property
    def firmware_output(self) -> bytes:
        """Everything spe_emu's firmware wrote to the console so far
        (:attr:`caller_is_firmware`)."""
        return bytes(self._firmware_out)

    def call(self, op: int, param: int) -> int:
        """Perform semihosting operation ``op`` (W0) with parameter ``param`` (X1).

        Returns the value for X0 as an unsigned 64-bit integer (-1 is ``2**64 - 1``).
        Raises :class:`SemihostExit` for SYS_EXIT / SYS_EXIT_EXTENDED, and
        :class:`SemihostingError` for host-side failures.
        """
        handler = self._ops.get(op & 0xFFFF_FFFF)
        if handler is None:
            self._guest_error(f"unsupported operation {op:#x} (param {param:#x})")
            return RETURN_ERROR
        return handler(param & MASK64) & MASK64

    USER_OPERATIONS = range(0x100, 0x200)
    """Operation numbers the specification reserves for user applications."""

    def register_operation(self, op: int, handler: Callable[[int], int]) -> None:
        """Answer operation ``op`` (one of :data:`USER_OPERATIONS`) with ``handler(param)``,
        whose result goes to X0 (unsigned 64-bit).

        Raises:
            ValueError: ``op`` is not reserved for user applications.
        """
        if op not in self.USER_OPERATIONS:
            raise ValueError(f"semihosting operation {op:#x} is not one of 0x100-0x1FF")
        self._ops[op] = handler

    def read_guest(self, va: int, n: int) -> bytes:
        """``n`` bytes of guest memory at ``va`` in the current translation regime."""
        return self._read_mem(va, n)

    def write_guest(self, va: int, data: bytes) -> None:
        """Store ``data`` at guest ``va`` in the current translation regime."""
        self._write_mem(va, data)

    def close_all(self) -> None:
        """Close every open host file (idempotent)."""
        for handle in self._handles.values():
            if handle.file is not None:
                handle.file.close()
        self._handles.clear()

    # ---- helpers ---------------------------------------------------------------------------

    def _args(self, param: int, n: int) -> list[int]:
        raw = self._read_mem(param, 8 * n)
        return [int.from_bytes(raw[8 * i:8 * i + 8], "little") for i in range(n)]

    def _fail(self, err: int, message: str | None = None) -> int:
        self._errno = err
        if message:
            self._guest_error(message)
        return RETURN_ERROR

    def _guest_error(self, message: str) -> None:
        if self._log is not None:
            self._log(f"semihosting: {message}")

    def _to_console(self, data: bytes, own: bool = False) -> None:
        """``data`` to the console; ``own``: written by SYS_WRITEC/SYS_WRITE0, which the
        firmware prints its own lines with (it relays the guest's writes with SYS_WRITE):
        from the firmware, they go to its console."""
        if not data:
            return
        if own and self.caller_is_firmware:
            self._firmware_out += data
            if self._firmware_console is not None:
                self._firmware_console(data)
            return
        self._console_out += data
        if self._console is not None:
            self._console(data)

    def _handle(self, number: int, op: str) -> _Handle | None:
        handle = self._handles.get(number)
        if handle is None:
            self._fail(_errno.EBADF, f"{op}: bad handle {number}")
        return handle

    def _resolve(self, name: str) -> pathlib.Path | None:
        """The host path for a guest file name, or None if it would leave ``outdir``."""
        if not name or "\0" in name or os.path.isabs(name) or name.startswith("\\"):
            return None
        target = (self._outdir / name).resolve(strict=False)
        if target == self._outdir or not target.is_relative_to(self._outdir):
            return None
        return target

    # ---- operations ------------------------------------------------------------------------

    def _sys_open(self, param: int) -> int:
        """SYS_OPEN [name, mode, length] -> handle or -1."""
        name_ptr, mode, length = self._args(param, 3)
        if mode >= len(OPEN_MODES):
            return self._fail(_errno.EINVAL, f"SYS_OPEN: bad mode {mode}")
        if length > MAX_NAME:
            return self._fail(_errno.ENAMETOOLONG, f"SYS_OPEN: name length {length} too long")
        name = self._read_mem(name_ptr, length).decode("utf-8", "surrogateescape")
        host_mode = OPEN_MODES[mode]
        if name == ":tt":
            # modes r* are stdin, w* stdout, a* stderr: one console, never both directions
            return self._new_handle(_Handle(name, host_mode[0]))
        if name == FEATURES_FILE:
            if host_mode != "rb":
                return self._fail(_errno.EACCES, f"SYS_OPEN: {name} is read-only")
            return self._new_handle(_Handle(name, host_mode, data=FEATURES_DATA))
        target = self._resolve(name)
        if target is None:
            return self._fail(_errno.EACCES, f"SYS_OPEN: refused {name!r}: files must stay "
                                             f"inside {self._outdir}")
        try:
            file = open(target, host_mode)  # noqa: SIM115 - kept open across calls
        except OSError as exc:
            return self._fail(exc.errno or _errno.EIO, f"SYS_OPEN: {name!r} mode "
                                                      f"{host_mode!r}: {exc.strerror}")
        rel = target.relative_to(self._outdir).as_posix()
        if not host_mode.startswith("r"):
            self.files_written.setdefault(rel, 0)
        return self._new_handle(_Handle(name, host_mode, file=file, rel=rel))

    def _new_handle(self, handle: _Handle) -> int:
        number = self._next_handle
        self._next_handle += 1
        self._handles[number] = handle
        return number

    def _sys_close(self, param: int) -> int:
        """SYS_CLOSE [handle] -> 0 or -1."""
        (number,) = self._args(param, 1)
        handle = self._handle(number, "SYS_CLOSE")
        if handle is None:
            return RETURN_ERROR
        del self._handles[number]
        if handle.file is not None:
            try:
                handle.file.close()
            except OSError as exc:
                raise SemihostingError(f"closing {handle.rel}: {exc.strerror}") from exc
        return 0

    def _sys_writec(self, param: int) -> int:
        """SYS_WRITEC: the byte at ``param`` to the console."""
        self._to_console(self._read_mem(param, 1), own=True)
        return 0

    def _sys_write0(self, param: int) -> int:
        """SYS_WRITE0: the NUL-terminated string at ``param`` to the console."""
        out = bytearray()
        addr = param
        while len(out) < MAX_NAME * 16:
            # read up to the next 256-byte boundary so a string ending just before unmapped
            # memory never makes us read past it
            n = 256 - (addr & 0xFF)
            chunk = self._read_mem(addr, n)
            end = chunk.find(b"\0")
            if end >= 0:
                out += chunk[:end]
                break
            out += chunk
            addr += n
        else:
            self._guest_error(f"SYS_WRITE0: string at {param:#x} not terminated within "
                              f"{MAX_NAME * 16} bytes; truncated")
        self._to_console(bytes(out), own=True)
        return 0

    def _sys_write(self, param: int) -> int:
        """SYS_WRITE [handle, buf, len] -> number of bytes NOT written (0 on success)."""
        number, buf, length = self._args(param, 3)
        handle = self._handle(number, "SYS_WRITE")
        if handle is None:
            return length
        if not handle.writable:
            self._fail(_errno.EBADF, f"SYS_WRITE: handle {number} ({handle.name!r}) is not "
                                     f"open for writing")
            return length
        done = 0
        while done < length:
            n = min(CHUNK, length - done)
            data = self._read_mem(buf + done, n)
            if handle.file is None:
                self._to_console(data)
            else:
                try:
                    handle.file.write(data)
                except OSError as exc:
                    raise SemihostingError(f"writing {handle.rel} in "
                                           f"{self._outdir}: {exc.strerror}") from exc
                self.files_written[handle.rel] = self.files_written.get(handle.rel, 0) + n
            done += n
        return 0

    def _sys_read(self, param: int) -> int:
        """SYS_READ [handle, buf, len] -> number of bytes NOT read (len at end of file)."""
        number, buf, length = self._args(param, 3)
        handle = self._handle(number, "SYS_READ")
        if handle is None:
            return RETURN_ERROR
        if not handle.readable:
            return self._fail(_errno.EBADF, f"SYS_READ: handle {number} ({handle.name!r}) is "
                                            f"not open for reading")
        if handle.is_tty:
            return length  # stdin is always empty
        done = 0
        while done < length:
            n = min(CHUNK, length - done)
            if handle.data is not None:
                data = handle.data[handle.pos:handle.pos + n]
                handle.pos += len(data)
            else:
                try:
                    data = handle.file.read(n)
                except OSError as exc:
                    raise SemihostingError(f"reading {handle.rel}: {exc.strerror}") from exc
            if data:
                self._write_mem(buf + done, data)
            done += len(data)
            if len(data) < n:
                break
        return length - done

    def _sys_istty(self, param: int) -> int:
        """SYS_ISTTY [handle] -> 1 for the console, 0 for a file, -1 for a bad handle."""
        (number,) = self._args(param, 1)
        handle = self._handle(number, "SYS_ISTTY")
        if handle is None:
            return RETURN_ERROR
        return 1 if handle.is_tty else 0

    def _sys_seek(self, param: int) -> int:
        """SYS_SEEK [handle, position] -> 0 or -1 (absolute position from the start)."""
        number, position = self._args(param, 2)
        handle = self._handle(number, "SYS_SEEK")
        if handle is None:
            return RETURN_ERROR
        if position >> 63:
            return self._fail(_errno.EINVAL, f"SYS_SEEK: negative position {position:#x}")
        if handle.data is not None:
            handle.pos = position
            return 0
        if handle.file is None:
            return self._fail(_errno.ESPIPE, f"SYS_SEEK: handle {number} is the console")
        try:
            handle.file.seek(position)
        except OSError as exc:
            return self._fail(exc.errno or _errno.EINVAL, f"SYS_SEEK: {exc.strerror}")
        return 0

    def _sys_flen(self, param: int) -> int:
        """SYS_FLEN [handle] -> length in bytes, 0 for the console, -1 for a bad handle."""
        (number,) = self._args(param, 1)
        handle = self._handle(number, "SYS_FLEN")
        if handle is None:
            return RETURN_ERROR
        if handle.data is not None:
            return len(handle.data)
        if handle.file is None:
            return 0
        handle.file.flush()
        return os.fstat(handle.file.fileno()).st_size

    def _centiseconds(self) -> int:
        return int(self._clock()) if self._clock is not None else 0

    def _sys_clock(self, param: int) -> int:
        """SYS_CLOCK -> centiseconds of virtual time, ``clock()``."""
        return self._centiseconds()

    def _sys_time(self, param: int) -> int:
        """SYS_TIME -> 0: no wall-clock time reaches the guest (deterministic runs)."""
        return 0

    def _sys_errno(self, param: int) -> int:
        """SYS_ERRNO -> errno of the last failed call."""
        return self._errno

    def _sys_get_cmdline(self, param: int) -> int:
        """SYS_GET_CMDLINE [buf, size]: the command line, NUL-terminated; the size word is
        updated to the string length. -1 if it does not fit."""
        buf, size = self._args(param, 2)
        data = self._cmdline.encode() + b"\0"
        if len(data) > size:
            return self._fail(_errno.ENOSPC, f"SYS_GET_CMDLINE: buffer of {size} bytes is too "
                                             f"small for {len(data)}")
        self._write_mem(buf, data)
        self._write_mem(param + 8, (len(data) - 1).to_bytes(8, "little"))
        return 0

    def _sys_heapinfo(self, param: int) -> int:
        """SYS_HEAPINFO [block pointer]: writes four zero words (heap base/limit, stack
        base/limit unknown: the program decides)."""
        (block,) = self._args(param, 1)
        self._write_mem(block, bytes(32))
        return 0

    def _sys_exit(self, param: int) -> int:
        """SYS_EXIT / SYS_EXIT_EXTENDED [reason, subcode]: raises :class:`SemihostExit`."""
        reason, subcode = self._args(param, 2)
        if reason == ADP_STOPPED_APPLICATION_EXIT:
            status = subcode - (1 << 64) if subcode >> 63 else subcode
        else:
            status = 1
        raise SemihostExit(status, reason)

    def _sys_elapsed(self, param: int) -> int:
        """SYS_ELAPSED [block]: writes the tick count (:data:`TICK_HZ`) as one 64-bit word;
        returns 0."""
        ticks = self._centiseconds() * TICK_HZ // 100
        self._write_mem(param, (ticks & MASK64).to_bytes(8, "little"))
        return 0

    def _sys_tickfreq(self, param: int) -> int:
        """SYS_TICKFREQ -> :data:`TICK_HZ`."""
        return TICK_HZ
