"""A static AArch64 Linux program as the EL0 guest of the firmware: the host side of
``execve`` and of the Linux system calls (docs/design.md "Linux user mode").

The firmware stays the EL1 software: it boots, programs and services SPE, takes every EL0
exception and interrupt. In Linux mode (config flag ``SPE_FW_FLAG_LINUX``) it asks the host to
build the process (semihosting operation ``SPE_LINUX_EXEC``, 0x100) before it enters EL0, and
forwards each ``SVC #0`` from EL0 to the host (``SPE_LINUX_SYSCALL``, 0x101) with its trap
frame; :class:`LinuxProcess` answers both. The system-call ABI is Linux's for AArch64: number
in x8, arguments in x0-x5, result (or -errno) in x0, the asm-generic numbers
(``include/uapi/asm-generic/unistd.h``).

Determinism: time is the virtual counter (100 MHz, instructions retired plus ticks slept),
``CLOCK_REALTIME`` counts from the epoch at power-on; getrandom and AT_RANDOM come from the
run's seed; file times read as 0 and inode numbers are derived from the path; directories are
listed in name order. What the program reads from stdin and from shared files is its input.
"""

from __future__ import annotations

import errno as E
import hashlib
import os
import random
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..cpu.exceptions import ABORT_ISS, EC, ESR
from ..errors import GuestError
from ..platform.loader import PF_R, PF_W, PF_X
from .elf import LinuxProgram
from .memory import (PAGE, PROT_EXEC, PROT_MASK, PROT_READ, PROT_WRITE, VA_LIMIT,
                     AddressSpace, OutOfMemory, page_down, page_up)

MASK64 = (1 << 64) - 1
SEMIHOST_SPE_LINUX_EXEC = 0x100
SEMIHOST_SPE_LINUX_SYSCALL = 0x101
SEMIHOST_SPE_LINUX_FAULT = 0x102
LINUX_ACTION_TLBI = 0x1
LINUX_ACTION_EXIT = 0x2
STACK_TOP = 0x7F_FFFF_0000
"""Top of the initial stack (bytes; the 39-bit user space ends at 0x80_0000_0000)."""
STACK_SIZE = 8 << 20
"""Bytes of stack mapped at exec (RLIMIT_STACK's usual soft limit; it does not grow)."""
MMAP_TOP = 0x7F_0000_0000
"""mmap without an address hint places mappings top-down from here."""
CNTFRQ_HZ = 100_000_000
NS_PER_TICK = 1_000_000_000 // CNTFRQ_HZ
PID = 1000
"""The process's pid and tid (getppid answers 1)."""
GUEST_UID = GUEST_GID = 0
"""The ids the process and its files have (getuid ..., AT_UID ..., struct stat): fixed, so
which host user runs spe-emu never reaches the guest (same program, options and seed:
byte-identical output)."""
MAX_IO = 1 << 24
"""Largest single read/write moved between guest memory and the host (bytes; longer calls
return a short count, as Linux may)."""
UTS = ("Linux", "spe-emu", "6.1.0", "#1 SMP spe-emu", "aarch64", "(none)")
"""struct new_utsname: sysname, nodename, release, version, machine, domainname."""

# auxiliary vector types (include/uapi/linux/auxvec.h)
AT_NULL, AT_PHDR, AT_PHENT, AT_PHNUM, AT_PAGESZ, AT_BASE, AT_FLAGS, AT_ENTRY = 0, 3, 4, 5, 6, 7, 8, 9
AT_UID, AT_EUID, AT_GID, AT_EGID, AT_PLATFORM, AT_HWCAP, AT_CLKTCK = 11, 12, 13, 14, 15, 16, 17
AT_SECURE, AT_RANDOM, AT_HWCAP2, AT_EXECFN, AT_MINSIGSTKSZ = 23, 25, 26, 31, 51
CLK_TCK = 100
MINSIGSTKSZ = 5120
"""AT_MINSIGSTKSZ: the signal frame size Linux reports on arm64 without SVE (bytes)."""

# open flags: AArch64 Linux values (asm-generic/fcntl.h, arm64's O_DIRECTORY & co)
O_ACCMODE, O_CREAT, O_EXCL, O_NOCTTY, O_TRUNC, O_APPEND, O_NONBLOCK = 3, 0o100, 0o200, 0o400, \
    0o1000, 0o2000, 0o4000
O_DIRECTORY, O_NOFOLLOW, O_CLOEXEC = 0o40000, 0o100000, 0o2000000
AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW, AT_REMOVEDIR, AT_EMPTY_PATH = 0x100, 0x200, 0x1000
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS = 0x1, 0x2, 0x10, 0x20
MAP_FIXED_NOREPLACE = 0x100000
PROT_BTI, PROT_MTE = 0x10, 0x20
MREMAP_MAYMOVE, MREMAP_FIXED = 1, 2
TCGETS, TIOCGWINSZ = 0x5401, 0x5413
F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC = 0, 1, 2, 3, 4, 1030
SIG_DFL, SIG_IGN = 0, 1
SIGILL, SIGTRAP, SIGBUS, SIGSEGV = 4, 5, 7, 11
SIGNAL_NAMES = {4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 11: "SIGSEGV"}
FSC_ALIGNMENT = 0b100001
"""ISS FSC of an Alignment fault (Arm ARM D19.2, ISS encoding for a Data Abort)."""
SIGKILL, SIGSTOP = 9, 19
IGNORED_BY_DEFAULT = {17, 18, 23, 28}  # SIGCHLD, SIGCONT, SIGURG, SIGWINCH
RLIM_INFINITY = MASK64
RLIMITS = {3: (STACK_SIZE, RLIM_INFINITY), 7: (1024, 1024)}  # RLIMIT_STACK, RLIMIT_NOFILE
FUTEX_WAIT, FUTEX_WAKE, FUTEX_WAIT_BITSET, FUTEX_WAKE_BITSET, FUTEX_CMD = 0, 1, 9, 10, 0x7F
STAT = struct.Struct("<QQIIIIQQqiiqqQqQqQII")
"""struct stat of asm-generic (AArch64): dev, ino, mode, nlink, uid, gid, rdev, pad, size,
blksize, pad, blocks, atime, atime_nsec, mtime, mtime_nsec, ctime, ctime_nsec, 2 x unused."""
DEV_SHARE, DEV_STDIO = 0x801, 0x1A
TERMIOS = struct.Struct("<IIIIB19s")
"""struct termios (asm-generic): iflag, oflag, cflag, lflag, line, c_cc[19]."""
TERMIOS_DEFAULT = TERMIOS.pack(0x500, 0x5, 0xBF, 0x8A3B, 0,
                               bytes([3, 28, 127, 21, 4, 0, 1, 0, 17, 19, 26, 0, 18, 15, 23,
                                      22, 0, 0, 0]))
"""What TCGETS reports for a terminal: Linux's defaults for a new tty (ICRNL|IXON, OPOST|ONLCR,
B38400|CS8|CREAD|HUPCL, ISIG|ICANON|ECHO|ECHOE|ECHOK|ECHOCTL|ECHOKE|IEXTEN, and the usual
control characters)."""


@dataclass
class LinuxOptions:
    """How the process is started.

    Attributes:
        argv: the arguments (argv[0] is the program name as given).
        env: ``NAME=VALUE`` strings of the environment.
        share: the directory the program's files live in (its ``/`` and working directory);
            None: no files at all.
        stdin_fd, stdout_fd, stderr_fd: host file descriptors behind fds 0, 1 and 2 (None for
            stdin: always at end of file).
        seed: seeds AT_RANDOM and getrandom.
    """

    argv: list[str]
    env: list[str] = field(default_factory=list)
    share: Path | None = None
    stdin_fd: int | None = 0
    stdout_fd: int = 1
    stderr_fd: int = 2
    seed: int = 0


@dataclass
class _File:
    host_fd: int | None           # None: the closed-for-good stdin
    vpath: str                    # path inside the share ("/a/b"), or "<stdin>" ...
    flags: int = 0                # the guest's open flags
    is_dir: bool = False
    owned: bool = True            # the host fd is ours to close
    listing: list | None = None   # getdents64: remaining entries
    refs: list = field(default_factory=lambda: [1])  # shared by dup'ed descriptors


class ExitProcess(Exception):
    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


class LinuxProcess:
    """The host side of one Linux process (the semihosting operations 0x100 and 0x101).

    Args:
        program: the loaded ELF (:func:`spe_emu.linux.elf.load_linux_program`).
        opts: arguments, environment, shared directory, stdio, seed.
        space: the address space, attached to the firmware's tables at exec.
        guest_read, guest_write: EL1 virtual memory (the firmware's trap frame and blocks).
        ticks: the virtual counter now (100 MHz ticks).
        sleep: advance virtual time by so many ticks (nanosleep).
        hwcap: ``(AT_HWCAP, AT_HWCAP2)``.
        private: physical ranges whose EL0 identity map is removed at exec (the pool).
        log: receives one line per guest-visible failure (exec).
    """

    def __init__(self, program: LinuxProgram, opts: LinuxOptions, space: AddressSpace,
                 guest_read: Callable[[int, int], bytes],
                 guest_write: Callable[[int, bytes], None], ticks: Callable[[], int],
                 sleep: Callable[[int], None], hwcap: tuple[int, int],
                 private: tuple[tuple[int, int], ...] = (),
                 log: Callable[[str], None] | None = None):
        self.program = program
        self.opts = opts
        self.mem = space
        self._gread, self._gwrite = guest_read, guest_write
        self._ticks, self._sleep = ticks, sleep
        self.hwcap = hwcap
        self._private = private
        self._log = log
        self._rng = random.Random(opts.seed ^ 0x4C494E5558)  # "LINUX"
        self.root = opts.share.resolve() if opts.share is not None else None
        self.brk_start = self.brk = 0
        self.mmap_next = MMAP_TOP
        self.exit_status: int | None = None
        self.syscalls: dict[str, int] = {}
        self.unsupported: dict[str, int] = {}
        self.signal_actions: dict[int, bytes] = {}
        self.signal_mask = 0
        self.killed_by: int | None = None
        self.fault: dict | None = None
        self.files: dict[int, _File] = {}
        for fd, host in ((0, opts.stdin_fd), (1, opts.stdout_fd), (2, opts.stderr_fd)):
            self.files[fd] = _File(host, f"<fd {fd}>", flags=O_ACCMODE & (0 if fd == 0 else 1),
                                   owned=False)
        self._table = self._syscall_table()

    # ------------------------------------------------------------------ exec ---------------
    def exec_call(self, param: int) -> int:
        """Semihosting ``SPE_LINUX_EXEC``: the block at ``param`` is [pt_l1, entry, sp]
        (u64 each); pt_l1 is the physical address of the firmware's level 1 table (its
        identity map). Maps the program and the stack, writes entry and sp; returns 0 (or
        -1 with the reason in the guest-error log)."""
        try:
            return self._exec(param)
        except (OutOfMemory, GuestError) as exc:
            if self._log is not None:
                self._log(f"linux: exec failed: {exc}")
            return MASK64  # -1: the firmware reports a fatal error

    def _exec(self, param: int) -> int:
        l1 = int.from_bytes(self._gread(param, 8), "little")
        self.mem.attach(l1, self._private)
        prot_of: dict[int, int] = {}
        for seg in self.program.segments:
            prot = ((PROT_READ if seg.flags & PF_R else 0)
                    | (PROT_WRITE if seg.flags & PF_W else 0)
                    | (PROT_EXEC if seg.flags & PF_X else 0))
            for va in range(page_down(seg.vaddr), page_up(seg.end), PAGE):
                prot_of[va] = prot_of.get(va, 0) | prot
        for va, prot in sorted(prot_of.items()):
            self.mem.map(va, va + PAGE, prot)
        for seg in self.program.segments:
            self.mem.write(seg.vaddr, seg.data, force=True)
        self.brk_start = self.brk = page_up(max(seg.end for seg in self.program.segments))
        self.mem.map(STACK_TOP - STACK_SIZE, STACK_TOP, PROT_READ | PROT_WRITE)
        sp = self._initial_stack()
        self._gwrite(param + 8, struct.pack("<QQ", self.program.entry, sp))
        self.mem.tlb_dirty = False  # (the firmware invalidates after exec anyway)
        return 0

    def _initial_stack(self) -> int:
        """argc, argv[], NULL, envp[], NULL, auxv pairs, AT_NULL at SP (16-byte aligned); the
        strings, AT_RANDOM's 16 bytes and the platform string above (the Linux layout)."""
        top = STACK_TOP
        blob = bytearray()

        def put(data: bytes) -> int:
            blob[:0] = data
            return top - len(blob)

        enc = os.fsencode
        execfn = put(enc(self.opts.argv[0]) + b"\0")
        put(b"\0" * 8)  # (guard below the top, as Linux leaves one pointer's room)
        env_ptrs = [put(enc(s) + b"\0") for s in reversed(self.opts.env)][::-1]
        arg_ptrs = [put(enc(s) + b"\0") for s in reversed(self.opts.argv)][::-1]
        platform = put(b"aarch64\0")
        rand = put(self._rng.randbytes(16))
        auxv = [(AT_HWCAP, self.hwcap[0]), (AT_PAGESZ, PAGE), (AT_CLKTCK, CLK_TCK),
                (AT_PHDR, self.program.phdr), (AT_PHENT, self.program.phent),
                (AT_PHNUM, self.program.phnum), (AT_BASE, 0), (AT_FLAGS, 0),
                (AT_ENTRY, self.program.entry), (AT_UID, GUEST_UID), (AT_EUID, GUEST_UID),
                (AT_GID, GUEST_GID), (AT_EGID, GUEST_GID), (AT_SECURE, 0),
                (AT_RANDOM, rand), (AT_HWCAP2, self.hwcap[1]), (AT_EXECFN, execfn),
                (AT_PLATFORM, platform), (AT_MINSIGSTKSZ, MINSIGSTKSZ), (AT_NULL, 0)]
        words = [len(arg_ptrs), *arg_ptrs, 0, *env_ptrs, 0]
        for pair in auxv:
            words += pair
        vector = struct.pack(f"<{len(words)}Q", *words)
        sp = (top - len(blob) - len(vector)) & ~0xF
        if sp < STACK_TOP - STACK_SIZE + PAGE:
            raise GuestError("arguments and environment do not fit the stack")
        self.mem.write(top - len(blob), bytes(blob))
        self.mem.write(sp, vector)
        return sp

    # ------------------------------------------------------------------ syscalls -----------
    def syscall_call(self, frame: int) -> int:
        """Semihosting ``SPE_LINUX_SYSCALL``: perform the system call of the trap frame at
        ``frame`` (x0..x30 as u64), write x0, return the LINUX_ACTION_* mask."""
        regs = struct.unpack("<9Q", self._gread(frame, 72))
        nr = regs[8]
        entry = self._table.get(nr)
        action = 0
        if entry is None:
            name = SYSCALL_NAMES.get(nr, f"syscall_{nr}")
            self.unsupported[name] = self.unsupported.get(name, 0) + 1
            result = -E.ENOSYS
        else:
            name, handler = entry
            self.syscalls[name] = self.syscalls.get(name, 0) + 1
            try:
                result = handler(*regs[:6])
            except ExitProcess as done:
                self.exit_status = done.status & 0xFF
                result, action = self.exit_status, LINUX_ACTION_EXIT
            except GuestError:
                result = -E.EFAULT
            except OutOfMemory:
                result = -E.ENOMEM
            except OSError as exc:
                result = -(exc.errno or E.EIO)
        if self.mem.tlb_dirty:
            self.mem.tlb_dirty = False
            action |= LINUX_ACTION_TLBI
        self._gwrite(frame, struct.pack("<Q", result & MASK64))
        return action

    def fault_call(self, param: int) -> int:
        """Semihosting ``SPE_LINUX_FAULT``: the block at ``param`` is [ESR_EL1, FAR_EL1,
        ELR_EL1] of an exception from EL0 the firmware does not handle; returns the signal
        Linux's arm64 fault handling sends for it (the process dies of it): an Alignment
        fault, a PC or SP alignment fault or an SError -> SIGBUS, other Instruction/Data
        Aborts -> SIGSEGV, BRK and watchpoints -> SIGTRAP, everything else (undefined
        instructions, trapped system registers) -> SIGILL."""
        esr, far, elr = struct.unpack("<3Q", self._gread(param, 24))
        ec = ESR.get(esr, "EC")
        if ec in (EC.IABORT_LOWER, EC.DABORT_LOWER):
            fsc = ABORT_ISS.get(ESR.get(esr, "ISS"), "FSC")
            sig = SIGBUS if fsc == FSC_ALIGNMENT else SIGSEGV
        elif ec in (EC.PC_ALIGN, EC.SP_ALIGN, EC.SERROR):
            sig = SIGBUS
        elif ec in (EC.BRK64, EC.WATCHPOINT_LOWER):
            sig = SIGTRAP
        else:
            sig = SIGILL
        self.killed_by = sig
        self.fault = {"esr": esr, "far": far, "elr": elr, "signal": SIGNAL_NAMES[sig]}
        return sig

    def _syscall_table(self) -> dict[int, tuple[str, Callable]]:
        table = {}
        for nr, name in SYSCALL_NAMES.items():
            handler = getattr(self, f"sys_{name}", None)
            if handler is not None:
                table[nr] = (name, handler)
        return table

    def close_all(self) -> None:
        """Close the host files the process opened (idempotent)."""
        for f in list(self.files.values()):
            self._drop(f)
        self.files.clear()

    def summary(self) -> dict:
        """What summary.json reports about the process."""
        return {"argv": list(self.opts.argv), "exit_status": self.exit_status,
                "killed_by_signal": self.killed_by, "fault": self.fault,
                "syscalls": dict(sorted(self.syscalls.items())),
                "unsupported_syscalls": dict(sorted(self.unsupported.items())),
                "peak_memory_bytes": self.mem.peak_pages * PAGE}

    # -- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _s64(v: int) -> int:
        return v - (1 << 64) if v & (1 << 63) else v

    @staticmethod
    def _s32(v: int) -> int:
        v &= 0xFFFF_FFFF
        return v - (1 << 32) if v & (1 << 31) else v

    def _file(self, fd: int) -> _File:
        f = self.files.get(self._s32(fd))
        if f is None or f.host_fd is None:
            raise OSError(E.EBADF, "bad fd")
        return f

    def _new_fd(self, f: _File, lowest: int = 0) -> int:
        fd = lowest
        while fd in self.files:
            fd += 1
        if fd >= RLIMITS[7][0]:
            raise OSError(E.EMFILE, "too many open files")
        self.files[fd] = f
        return fd

    def _drop(self, f: _File) -> None:
        f.refs[0] -= 1
        if f.refs[0] == 0 and f.owned and f.host_fd is not None:
            os.close(f.host_fd)

    def _vpath(self, dirfd: int, path: bytes) -> str:
        """The normalised path inside the share for ``path`` relative to ``dirfd``."""
        if not path:
            raise OSError(E.ENOENT, "empty path")
        text = os.fsdecode(path)
        if text.startswith("/"):
            base = "/"
        elif self._s32(dirfd) == AT_FDCWD:
            base = "/"
        else:
            f = self._file(dirfd)
            if not f.is_dir:
                raise OSError(E.ENOTDIR, "not a directory")
            base = f.vpath
        parts: list[str] = []
        for part in (base + "/" + text).split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if parts:
                    parts.pop()
            else:
                parts.append(part)
        return "/" + "/".join(parts)

    def _host(self, vpath: str) -> Path:
        """The host path of ``vpath``; EACCES when it would leave the share (a symlink out of
        it), ENOENT without a share."""
        if self.root is None:
            raise OSError(E.ENOENT, "no shared directory")
        target = (self.root / vpath.lstrip("/")).resolve(strict=False)
        if target != self.root and not target.is_relative_to(self.root):
            raise OSError(E.EACCES, "outside the shared directory")
        return target

    def _path(self, dirfd: int, ptr: int) -> tuple[str, Path]:
        v = self._vpath(dirfd, self.mem.read_cstr(ptr))
        return v, self._host(v)

    def _stat_bytes(self, st: os.stat_result, vpath: str, stdio: bool = False) -> bytes:
        ino = int.from_bytes(hashlib.sha256(vpath.encode()).digest()[:4], "little") | 1
        blocks = (st.st_size + 511) // 512 if stat.S_ISREG(st.st_mode) else 0
        return STAT.pack(DEV_STDIO if stdio else DEV_SHARE, ino, st.st_mode,
                         1 if stdio else st.st_nlink, GUEST_UID, GUEST_GID,
                         st.st_rdev if stdio else 0, 0, st.st_size if not stdio else 0,
                         PAGE, 0, blocks, 0, 0, 0, 0, 0, 0, 0, 0)

    # -- files ------------------------------------------------------------------------------
    def sys_read(self, fd, buf, count, *_):
        f = self._file(fd)
        if f.is_dir:
            return -E.EISDIR
        count = min(count, MAX_IO)
        if count == 0:
            return 0
        if not self.mem.accessible(buf, count, PROT_WRITE):
            return -E.EFAULT  # (before reading: no input is lost)
        data = os.read(f.host_fd, count)
        self.mem.write(buf, data)
        return len(data)

    def sys_pread64(self, fd, buf, count, offset, *_):
        f = self._file(fd)
        if f.is_dir:
            return -E.EISDIR
        data = os.pread(f.host_fd, min(count, MAX_IO), self._s64(offset))
        self.mem.write(buf, data)
        return len(data)

    def sys_write(self, fd, buf, count, *_):
        f = self._file(fd)
        data = self.mem.read(buf, min(count, MAX_IO))
        return self._write_all(f, data)

    def _write_all(self, f: _File, data: bytes) -> int:
        if f.flags & O_ACCMODE == 0 and f.owned:
            return -E.EBADF
        view = memoryview(data)
        while view:
            n = os.write(f.host_fd, view)
            view = view[n:]
        return len(data)

    def sys_pwrite64(self, fd, buf, count, offset, *_):
        f = self._file(fd)
        return os.pwrite(f.host_fd, self.mem.read(buf, min(count, MAX_IO)), self._s64(offset))

    def _iovecs(self, iov, iovcnt):
        if iovcnt > 1024:
            raise OSError(E.EINVAL, "iovcnt")
        raw = self.mem.read(iov, 16 * iovcnt)
        return [struct.unpack_from("<QQ", raw, 16 * i) for i in range(iovcnt)]

    def sys_writev(self, fd, iov, iovcnt, *_):
        f = self._file(fd)
        data = b"".join(self.mem.read(base, min(n, MAX_IO))
                        for base, n in self._iovecs(iov, iovcnt))
        return self._write_all(f, data)

    def sys_readv(self, fd, iov, iovcnt, *_):
        f = self._file(fd)
        total = 0
        for base, n in self._iovecs(iov, iovcnt):
            if n == 0:
                continue
            data = os.read(f.host_fd, min(n, MAX_IO))
            self.mem.write(base, data)
            total += len(data)
            if len(data) < n:
                break
        return total

    def sys_openat(self, dirfd, path, flags, mode, *_):
        vpath, host = self._path(dirfd, path)
        hflags = {0: os.O_RDONLY, 1: os.O_WRONLY, 2: os.O_RDWR}.get(flags & O_ACCMODE)
        if hflags is None:
            return -E.EINVAL
        for bit, hbit in ((O_CREAT, os.O_CREAT), (O_EXCL, os.O_EXCL), (O_TRUNC, os.O_TRUNC),
                          (O_APPEND, os.O_APPEND), (O_DIRECTORY, os.O_DIRECTORY),
                          (O_NOFOLLOW, os.O_NOFOLLOW)):
            if flags & bit:
                hflags |= hbit
        host_fd = os.open(host, hflags | os.O_CLOEXEC | os.O_NOCTTY, mode & 0o7777)
        is_dir = stat.S_ISDIR(os.fstat(host_fd).st_mode)
        try:
            return self._new_fd(_File(host_fd, vpath, flags, is_dir))
        except OSError:
            os.close(host_fd)
            raise

    def sys_close(self, fd, *_):
        f = self.files.pop(self._s32(fd), None)
        if f is None:
            return -E.EBADF
        self._drop(f)
        return 0

    def sys_dup(self, fd, *_):
        f = self._file(fd)
        f.refs[0] += 1
        return self._new_fd(f)

    def sys_dup3(self, fd, newfd, flags, *_):
        f = self._file(fd)
        newfd = self._s32(newfd)
        if newfd == self._s32(fd) or newfd < 0 or newfd >= RLIMITS[7][0]:
            return -E.EINVAL
        if newfd in self.files:
            self._drop(self.files.pop(newfd))
        f.refs[0] += 1
        self.files[newfd] = f
        return newfd

    def sys_fcntl(self, fd, cmd, arg, *_):
        f = self._file(fd)
        if cmd in (F_DUPFD, F_DUPFD_CLOEXEC):
            f.refs[0] += 1
            return self._new_fd(f, self._s32(arg))
        if cmd in (F_GETFD, F_SETFD, F_SETFL):
            return 0
        if cmd == F_GETFL:
            return f.flags & ~O_CLOEXEC
        return -E.EINVAL

    def sys_lseek(self, fd, offset, whence, *_):
        f = self._file(fd)
        if f.is_dir:
            if self._s64(offset) == 0 and whence == 0:
                f.listing = None
                return 0
            return -E.EINVAL
        return os.lseek(f.host_fd, self._s64(offset), whence)

    def sys_fstat(self, fd, buf, *_):
        f = self._file(fd)
        self.mem.write(buf, self._stat_bytes(os.fstat(f.host_fd), f.vpath, not f.owned))
        return 0

    def sys_newfstatat(self, dirfd, path, buf, flags, *_):
        if flags & AT_EMPTY_PATH and not self.mem.read_cstr(path):
            return self.sys_fstat(dirfd, buf)
        vpath, host = self._path(dirfd, path)
        st = os.stat(host, follow_symlinks=not flags & AT_SYMLINK_NOFOLLOW)
        self.mem.write(buf, self._stat_bytes(st, vpath))
        return 0

    def sys_faccessat(self, dirfd, path, mode, *_):
        _v, host = self._path(dirfd, path)
        os.stat(host)
        return 0 if os.access(host, mode & 7) else -E.EACCES

    def sys_faccessat2(self, dirfd, path, mode, flags, *_):
        return self.sys_faccessat(dirfd, path, mode)

    def sys_getdents64(self, fd, buf, count, *_):
        f = self._file(fd)
        if not f.is_dir:
            return -E.ENOTDIR
        if f.listing is None:
            host = self._host(f.vpath)
            names = sorted(os.listdir(host))
            entries = [(".", stat.S_IFDIR), ("..", stat.S_IFDIR)]
            for name in names:
                try:
                    mode = os.lstat(host / name).st_mode
                except OSError:
                    continue
                entries.append((name, stat.S_IFMT(mode)))
            f.listing = entries
        out = bytearray()
        while f.listing:
            name, fmt = f.listing[0]
            raw = os.fsencode(name) + b"\0"
            reclen = (19 + len(raw) + 7) & ~7
            if len(out) + reclen > count:
                break
            dtype = {stat.S_IFDIR: 4, stat.S_IFREG: 8, stat.S_IFLNK: 10, stat.S_IFCHR: 2,
                     stat.S_IFBLK: 6, stat.S_IFIFO: 1, stat.S_IFSOCK: 12}.get(fmt, 0)
            ino = int.from_bytes(hashlib.sha256((f.vpath + "/" + name).encode()).digest()[:4],
                                 "little") | 1
            rec = struct.pack("<QqHB", ino, len(out) + reclen, reclen, dtype) + raw
            out += rec.ljust(reclen, b"\0")
            f.listing.pop(0)
        if not out and f.listing:
            return -E.EINVAL
        self.mem.write(buf, bytes(out))
        return len(out)

    def sys_readlinkat(self, dirfd, path, buf, size, *_):
        raw = self.mem.read_cstr(path)
        if raw == b"/proc/self/exe":  # (absolute, as Linux gives it; static glibc checks)
            target = os.fsencode(os.path.abspath(self.program.path))
        else:
            vpath = self._vpath(dirfd, raw)
            if self.root is None:
                return -E.ENOENT
            host = self.root / vpath.lstrip("/")
            self._host(str(Path(vpath).parent))
            target = os.fsencode(os.readlink(host))
        data = target[:size]
        self.mem.write(buf, data)
        return len(data)

    def sys_getcwd(self, buf, size, *_):
        if size < 2:
            return -E.ERANGE
        self.mem.write(buf, b"/\0")
        return 2

    def sys_chdir(self, path, *_):
        return -E.EACCES

    def sys_mkdirat(self, dirfd, path, mode, *_):
        _v, host = self._path(dirfd, path)
        os.mkdir(host, mode & 0o7777)
        return 0

    def sys_unlinkat(self, dirfd, path, flags, *_):
        _v, host = self._path(dirfd, path)
        if host == self.root:
            return -E.EBUSY
        if flags & AT_REMOVEDIR:
            os.rmdir(host)
        else:
            os.unlink(host)
        return 0

    def sys_renameat2(self, olddir, oldpath, newdir, newpath, flags, *_):
        if flags:
            return -E.EINVAL
        _a, src = self._path(olddir, oldpath)
        _b, dst = self._path(newdir, newpath)
        os.rename(src, dst)
        return 0

    def sys_renameat(self, olddir, oldpath, newdir, newpath, *_):
        return self.sys_renameat2(olddir, oldpath, newdir, newpath, 0)

    def sys_ftruncate(self, fd, length, *_):
        os.ftruncate(self._file(fd).host_fd, self._s64(length))
        return 0

    def sys_fchmod(self, fd, mode, *_):
        f = self._file(fd)
        if f.owned:
            os.fchmod(f.host_fd, mode & 0o7777)
        return 0

    def sys_fchmodat(self, dirfd, path, mode, *_):
        _v, host = self._path(dirfd, path)
        os.chmod(host, mode & 0o7777)
        return 0

    def sys_fchown(self, *_):
        return 0  # ownership stays the host user's

    sys_fchownat = sys_fchown

    def sys_utimensat(self, *_):
        return 0  # file times read as 0 (deterministic), setting them is accepted

    def sys_fsync(self, fd, *_):
        self._file(fd)
        return 0

    sys_fdatasync = sys_fsync

    def sys_umask(self, mask, *_):
        return 0o022

    def sys_ioctl(self, fd, request, arg, *_):
        f = self._file(fd)
        tty = not f.owned and os.isatty(f.host_fd)
        request &= 0xFFFF_FFFF
        if request == TCGETS:
            if not tty:
                return -E.ENOTTY
            self.mem.write(arg, TERMIOS_DEFAULT)
            return 0
        if request == TIOCGWINSZ:
            if not tty:
                return -E.ENOTTY
            size = os.get_terminal_size(f.host_fd)
            self.mem.write(arg, struct.pack("<HHHH", size.lines, size.columns, 0, 0))
            return 0
        return -E.ENOTTY if not tty else -E.EINVAL

    # -- memory -----------------------------------------------------------------------------
    def sys_brk(self, addr, *_):
        if addr < self.brk_start:
            return self.brk
        new_end, old_end = page_up(addr), page_up(self.brk)
        if new_end > old_end:
            if not (self.mem.usable(old_end, new_end) and self.mem.is_free(old_end, new_end)):
                return self.brk
            try:
                self.mem.map(old_end, new_end, PROT_READ | PROT_WRITE)
            except OutOfMemory:
                self.mem.unmap(old_end, new_end)
                return self.brk
        elif new_end < old_end:
            self.mem.unmap(new_end, old_end)
        self.brk = addr
        return addr

    def _place(self, size: int) -> int:
        addr = self.mmap_next - size
        if addr < self.brk + (1 << 30):
            raise OutOfMemory("address space exhausted")
        self.mmap_next = addr
        return addr

    def sys_mmap(self, addr, length, prot, flags, fd, offset):
        if length == 0 or prot & ~(PROT_MASK | PROT_BTI | PROT_MTE):
            return -E.EINVAL
        size = page_up(length)
        if size > VA_LIMIT or offset & (PAGE - 1):
            return -E.EINVAL
        anon = bool(flags & MAP_ANONYMOUS)
        if flags & (MAP_SHARED | MAP_PRIVATE) == 0:
            return -E.EINVAL
        source = None
        if not anon:
            f = self._file(fd)
            if f.is_dir or not f.owned:
                return -E.ENODEV
            if flags & MAP_SHARED and prot & PROT_WRITE:
                return -E.ENODEV  # shared writable file mappings are not modelled
            source = f
        if flags & (MAP_FIXED | MAP_FIXED_NOREPLACE):
            if addr & (PAGE - 1) or not self.mem.usable(addr, addr + size):
                return -E.EINVAL
            if flags & MAP_FIXED_NOREPLACE and not flags & MAP_FIXED \
                    and not self.mem.is_free(addr, addr + size):
                return -E.EEXIST
        elif (addr and not addr & (PAGE - 1) and self.mem.usable(addr, addr + size)
              and self.mem.is_free(addr, addr + size)):
            pass
        else:
            addr = self._place(size)
        self.mem.map(addr, addr + size, prot & PROT_MASK)
        if source is not None:
            data = os.pread(source.host_fd, min(length, MAX_IO * 16), offset)
            self.mem.write(addr, data, force=True)
        return addr

    def sys_munmap(self, addr, length, *_):
        if addr & (PAGE - 1) or length == 0:
            return -E.EINVAL
        self.mem.unmap(addr, min(addr + page_up(length), VA_LIMIT))
        return 0

    def sys_mprotect(self, addr, length, prot, *_):
        if addr & (PAGE - 1) or prot & ~(PROT_MASK | PROT_BTI | PROT_MTE):
            return -E.EINVAL
        return 0 if self.mem.protect(addr, addr + page_up(length), prot & PROT_MASK) \
            else -E.ENOMEM

    def sys_madvise(self, *_):
        return 0

    def sys_mremap(self, old, old_size, new_size, flags, new_addr, *_):
        if old & (PAGE - 1) or new_size == 0 or flags & ~(MREMAP_MAYMOVE | MREMAP_FIXED):
            return -E.EINVAL
        old_size, new_size = page_up(old_size), page_up(new_size)
        if not self.mem.is_mapped(old, old + old_size):
            return -E.EFAULT
        if flags & MREMAP_FIXED:
            return -E.EINVAL  # not modelled
        if new_size <= old_size:
            self.mem.unmap(old + new_size, old + old_size)
            return old
        prot = self.mem.prot_at(old + old_size - PAGE)
        tail = (old + old_size, old + new_size)
        if self.mem.usable(*tail) and self.mem.is_free(*tail):
            self.mem.map(*tail, prot)
            return old
        if not flags & MREMAP_MAYMOVE:
            return -E.ENOMEM
        new = self._place(new_size)
        self.mem.move(old, new, old_size)
        self.mem.map(new + old_size, new + new_size, prot)
        return new

    # -- process ----------------------------------------------------------------------------
    def sys_exit(self, status, *_):
        raise ExitProcess(status)

    sys_exit_group = sys_exit

    def sys_set_tid_address(self, *_):
        return PID

    def sys_set_robust_list(self, *_):
        return 0

    def sys_getpid(self, *_):
        return PID

    sys_gettid = sys_getpid

    def sys_getppid(self, *_):
        return 1

    def sys_getuid(self, *_):
        return GUEST_UID

    sys_geteuid = sys_getuid

    def sys_getgid(self, *_):
        return GUEST_GID

    sys_getegid = sys_getgid

    def sys_uname(self, buf, *_):
        self.mem.write(buf, b"".join(s.encode().ljust(65, b"\0") for s in UTS))
        return 0

    def sys_getrandom(self, buf, count, flags, *_):
        count = min(count, MAX_IO)
        self.mem.write(buf, self._rng.randbytes(count))
        return count

    def sys_prlimit64(self, pid, resource, new, old, *_):
        if resource > 15:
            return -E.EINVAL
        if old:
            self.mem.write(old, struct.pack("<QQ", *RLIMITS.get(resource,
                                                                 (RLIM_INFINITY,) * 2)))
        return 0

    def sys_getrlimit(self, resource, old, *_):
        return self.sys_prlimit64(0, resource, 0, old)

    def sys_sched_getaffinity(self, pid, size, mask, *_):
        if size < 8:
            return -E.EINVAL
        self.mem.write(mask, struct.pack("<Q", 1))
        return 8

    def sys_sched_yield(self, *_):
        return 0

    def sys_futex(self, uaddr, op, val, *_):
        cmd = op & FUTEX_CMD
        if cmd in (FUTEX_WAKE, FUTEX_WAKE_BITSET):
            return 0
        if cmd in (FUTEX_WAIT, FUTEX_WAIT_BITSET):
            current = int.from_bytes(self.mem.read(uaddr, 4), "little")
            # one thread: nobody could ever wake it
            return -E.EAGAIN if current != val & 0xFFFF_FFFF else -E.ETIMEDOUT
        return -E.ENOSYS

    def sys_rt_sigaction(self, sig, act, oact, sigsetsize, *_):
        if not 1 <= sig <= 64 or sigsetsize != 8:
            return -E.EINVAL
        if act and sig in (SIGKILL, SIGSTOP):
            return -E.EINVAL
        if oact:
            self.mem.write(oact, self.signal_actions.get(sig, bytes(32)))
        if act:
            self.signal_actions[sig] = self.mem.read(act, 32)
        return 0

    def sys_rt_sigprocmask(self, how, new, old, sigsetsize, *_):
        if sigsetsize != 8 or how > 2:
            return -E.EINVAL
        if old:
            self.mem.write(old, struct.pack("<Q", self.signal_mask))
        if new:
            (mask,) = struct.unpack("<Q", self.mem.read(new, 8))
            mask &= ~((1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1)))
            self.signal_mask = (self.signal_mask | mask, self.signal_mask & ~mask, mask)[how]
        return 0

    def sys_sigaltstack(self, new, old, *_):
        if old:
            self.mem.write(old, struct.pack("<QiiQ", 0, 2, 0, 0))  # SS_DISABLE
        return 0

    def _signal_self(self, sig: int) -> int:
        if sig == 0:
            return 0
        if not 1 <= sig <= 64:
            return -E.EINVAL
        handler = int.from_bytes(self.signal_actions.get(sig, bytes(32))[:8], "little")
        if handler == SIG_IGN or (handler == SIG_DFL and sig in IGNORED_BY_DEFAULT):
            return 0
        # no signal delivery: a signal the program sends itself ends it as its default
        # action would (status 128 + signal, as a shell reports it)
        self.killed_by = sig
        raise ExitProcess(128 + sig)

    def sys_kill(self, pid, sig, *_):
        if self._s32(pid) not in (PID, 0, -1):
            return -E.ESRCH
        return self._signal_self(sig)

    def sys_tkill(self, tid, sig, *_):
        return self._signal_self(sig) if tid == PID else -E.ESRCH

    def sys_tgkill(self, tgid, tid, sig, *_):
        return self._signal_self(sig) if tid == PID else -E.ESRCH

    # -- time -------------------------------------------------------------------------------
    def _now_ns(self) -> int:
        return self._ticks() * NS_PER_TICK

    def sys_clock_gettime(self, clock, tp, *_):
        if clock > 11:
            return -E.EINVAL
        ns = self._now_ns()
        self.mem.write(tp, struct.pack("<qq", ns // 10**9, ns % 10**9))
        return 0

    def sys_clock_getres(self, clock, res, *_):
        if res:
            self.mem.write(res, struct.pack("<qq", 0, NS_PER_TICK))
        return 0

    def sys_gettimeofday(self, tv, tz, *_):
        ns = self._now_ns()
        if tv:
            self.mem.write(tv, struct.pack("<qq", ns // 10**9, ns % 10**9 // 1000))
        if tz:
            self.mem.write(tz, bytes(8))
        return 0

    def _sleep_ts(self, req: int, absolute: bool = False) -> int:
        sec, nsec = struct.unpack("<qq", self.mem.read(req, 16))
        if sec < 0 or not 0 <= nsec < 10**9:
            return -E.EINVAL
        ns = sec * 10**9 + nsec
        if absolute:
            ns -= self._now_ns()
        if ns > 0:
            self._sleep(-(-ns // NS_PER_TICK))
        return 0

    def sys_nanosleep(self, req, rem, *_):
        return self._sleep_ts(req)

    def sys_clock_nanosleep(self, clock, flags, req, rem, *_):
        return self._sleep_ts(req, absolute=bool(flags & 1))

    def sys_times(self, buf, *_):
        ticks = self._ticks() * CLK_TCK // CNTFRQ_HZ
        if buf:
            self.mem.write(buf, struct.pack("<qqqq", ticks, 0, 0, 0))
        return ticks

    def sys_sysinfo(self, buf, *_):
        """struct sysinfo: uptime (virtual seconds), no load, RAM = the process's page pool
        (mem_unit 1), no swap, one process."""
        total, free = self.mem.pool_bytes()
        self.mem.write(buf, struct.pack("<q3Q6QHHxxxxQQI", self._now_ns() // 10**9, 0, 0, 0,
                                        total, free, 0, 0, 0, 0, 1, 0, 0, 0, 1).ljust(112,
                                                                                     b"\0"))
        return 0

    def sys_getrusage(self, who, buf, *_):
        self.mem.write(buf, bytes(144))
        return 0


SYSCALL_NAMES = {
    17: "getcwd", 23: "dup", 24: "dup3", 25: "fcntl", 29: "ioctl", 34: "mkdirat",
    35: "unlinkat", 38: "renameat", 43: "statfs", 44: "fstatfs", 46: "ftruncate",
    48: "faccessat", 49: "chdir", 52: "fchmod", 53: "fchmodat", 54: "fchownat", 55: "fchown",
    56: "openat", 57: "close", 59: "pipe2", 61: "getdents64", 62: "lseek", 63: "read",
    64: "write", 65: "readv", 66: "writev", 67: "pread64", 68: "pwrite64", 71: "sendfile",
    72: "pselect6", 73: "ppoll", 78: "readlinkat", 79: "newfstatat", 80: "fstat", 82: "fsync",
    83: "fdatasync", 88: "utimensat", 93: "exit", 94: "exit_group", 96: "set_tid_address",
    98: "futex", 99: "set_robust_list", 101: "nanosleep", 113: "clock_gettime",
    114: "clock_getres", 115: "clock_nanosleep", 122: "sched_setaffinity",
    123: "sched_getaffinity", 124: "sched_yield", 129: "kill", 130: "tkill", 131: "tgkill",
    132: "sigaltstack", 134: "rt_sigaction", 135: "rt_sigprocmask", 139: "rt_sigreturn",
    153: "times", 160: "uname", 163: "getrlimit", 165: "getrusage", 166: "umask", 167: "prctl",
    169: "gettimeofday", 172: "getpid", 173: "getppid", 174: "getuid", 175: "geteuid",
    176: "getgid", 177: "getegid", 178: "gettid", 179: "sysinfo", 198: "socket", 214: "brk",
    215: "munmap", 216: "mremap", 220: "clone", 221: "execve", 222: "mmap", 226: "mprotect",
    233: "madvise", 260: "wait4", 261: "prlimit64", 276: "renameat2", 278: "getrandom",
    279: "memfd_create", 291: "statx", 293: "rseq", 435: "clone3", 439: "faccessat2",
}
"""asm-generic system call numbers (AArch64) -> names; those with a ``sys_<name>`` method are
answered, the others return -ENOSYS and are listed in the summary."""
