"""One profiling run: load the firmware and a guest (or a bare-metal image), configure the SPE
driver through the firmware's config block, run, and collect the outputs.

Outputs in the run's directory: ``spe.trace`` (raw SPE records, written by the guest-side
driver through semihosting) and ``summary.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from unicorn import UC_ERR_NOMEM, UcError

from . import native
from .arch.cpu_features import CpuFeatures
from .arch.smccc import pe_mpidr
from .cpu.a64 import X_REGS
from .cpu.machine import Machine, MachineConfig, RunResult
from .errors import (ConfigError, DebuggerKill, EmulatorError, GuestError, GuestRunaway,
                     RunInterrupted)
from .platform.inputs import read_input
from .platform.board import MAX_PES, VIRT, BoardSpec
from .devices.generic_timer import MAX_COUNTER_HZ
from .devices.psci import psci_conduit
from .platform.boot import BootImage, load_kernel
from .platform.dtb import build_dtb
from .platform.loader import PF_R, PF_W, PF_X, Image, Segment, load_elf
from .spe.config import SpeConfig
from .spe.registers import spe_registers

FIRMWARE_CONFIG_SYMBOL = "spe_fw_config"
FIRMWARE_MAGIC = 0x5350455F46570001
GUEST_REGION = (0x4800_0000, 0x5000_0000)
BUFFER_BASE = 0x4400_0000
MAX_BUFFER = 64 << 20
TRACE_NAME = "spe.trace"


BARE_METAL_MAX_INSNS = 2_000_000_000
"""The instruction budget of a bare-metal image or firmware guest when none is given: such a
guest that never exits (an exception loop, a missed exit call) ends with
:class:`~spe_emu.errors.GuestRunaway` instead of running on. A kernel on ``--machine virt``
and a Linux program have none, as qemu-system-aarch64 and qemu-aarch64."""


def default_firmware() -> Path:
    """The prebuilt firmware shipped with the package."""
    return Path(__file__).resolve().parent / "images" / "spe_fw.elf"


@dataclass
class RunOptions:
    """User-facing options of ``spe-emu run`` (units: operations, bytes, instructions)."""

    interval: int = 4096
    random: bool = False
    seed: int = 0
    filters: tuple[str, ...] = ()
    min_latency: int | None = None
    timestamps: bool = True
    context: bool = False
    physical: bool = False
    el0: bool = True
    el1: bool = True
    profiling: bool = True
    buffer_size: int = 64 << 10
    boot_el: int = 1
    firmware: bool = True
    firmware_path: Path | None = None
    max_insns: int | None = None
    """Instruction budget (a longer run raises GuestRunaway); None: the default of the kind of
    run, :data:`BARE_METAL_MAX_INSNS` for a bare-metal image or firmware guest, none for a
    kernel on a board or a Linux program."""
    mode: str = "fast"
    outdir: Path = Path("spe-out")
    spe: SpeConfig = field(default_factory=SpeConfig)
    ground_truth: bool = False
    attach: Callable[[Machine], None] | None = None
    """Called with the machine before its first instruction (``run --gdb``: the GDB stub)."""
    cpu: CpuFeatures = field(default_factory=CpuFeatures)

    def validate(self) -> None:
        t = spe_registers(self.spe)
        # INTERVAL:Zeros(8) operations at most: the field's bits in place (§4.3.12)
        interval_max = t["PMSIRR_EL1"].field("INTERVAL").mask
        if self.interval < 256 or self.interval % 256 or self.interval > interval_max:
            raise ConfigError(f"--interval {self.interval}: must be a multiple of 256 between "
                              f"256 and {interval_max} (PMSIRR_EL1.INTERVAL is in "
                              f"units of 256 operations)")
        for f in self.filters:
            if f not in ("load", "store", "branch"):
                raise ConfigError(f"--filter {f!r}: use load, store and/or branch")
        minlat_max = t["PMSLATFR_EL1"].field("MINLAT").mask   # (§4.3.13)
        if self.min_latency is not None and not 0 < self.min_latency <= minlat_max:
            raise ConfigError(f"--min-latency {self.min_latency}: must be 1..{minlat_max} cycles")
        if self.spe.seed not in (SpeConfig().seed, self.seed):
            raise ConfigError(f"seed given twice ({self.seed} and SpeConfig.seed "
                              f"{self.spe.seed}): give it as RunOptions.seed (--seed)")
        if self.buffer_size < 4096 or self.buffer_size % 4096 or self.buffer_size > MAX_BUFFER:
            raise ConfigError(f"--buffer-size {self.buffer_size}: must be a multiple of 4096 "
                              f"up to {MAX_BUFFER}")
        if self.max_insns is not None and self.max_insns <= 0:
            raise ConfigError(f"--max-insns {self.max_insns}: must be positive")
        if self.boot_el not in (1, 2, 3):
            raise ConfigError(f"--boot-el {self.boot_el}: must be 1, 2 or 3")
        if self.firmware and self.boot_el != 1:
            raise ConfigError("--boot-el applies to bare-metal images: use it with "
                              "--no-firmware")

    def register_values(self) -> dict[str, int]:
        """PMSCR_EL1, PMSIRR_EL1, PMSFCR_EL1, PMSEVFR_EL1, PMSLATFR_EL1 for the driver."""
        t = spe_registers(self.spe)
        pmscr = t["PMSCR_EL1"].make(E0SPE=int(self.el0), E1SPE=int(self.el1),
                                    TS=int(self.timestamps), CX=int(self.context),
                                    PA=int(self.physical))
        pmsirr = t["PMSIRR_EL1"].make(INTERVAL=self.interval >> 8, RND=int(self.random))
        fcr = {}
        if self.filters:
            fcr.update(FT=1, LD=int("load" in self.filters), ST=int("store" in self.filters),
                       B=int("branch" in self.filters))
        if self.min_latency is not None:
            fcr["FL"] = 1
        pmsfcr = t["PMSFCR_EL1"].make(**fcr)
        pmslatfr = t["PMSLATFR_EL1"].make(MINLAT=self.min_latency or 0)
        return {"PMSCR_EL1": pmscr, "PMSIRR_EL1": pmsirr, "PMSFCR_EL1": pmsfcr,
                "PMSEVFR_EL1": 0, "PMSLATFR_EL1": pmslatfr}


BOARDS: dict[str, BoardSpec] = {VIRT.name: VIRT}
"""Boards ``--machine`` accepts."""
MAX_DTB_FILE = 2 << 20
"""Largest ``--dtb`` file accepted (bytes; Linux's limit for a DTB at boot)."""


@dataclass
class KernelOptions:
    """A ``--machine`` run: software built for the board boots as on qemu-system-aarch64
    (``-kernel``, ``-initrd``, ``-append``, ``-dtb``, ``-m``).

    Attributes:
        board: the board name (``virt``).
        kernel: an arm64 Linux Image (gzip or not), a raw binary or an ELF.
        initrd: an initial RAM disk (``/chosen/linux,initrd-*``).
        append: the kernel command line (``/chosen/bootargs``).
        dtb: a device tree blob to use instead of the generated one.
        ram_size: bytes of RAM at the board's RAM base.
        dumpdtb: write the generated DTB here and do not run.
        trace: also write ``spe.trace``: a host-side copy of every record the SPU writes
            into the guest's Profiling Buffer, in write order (the guest's driver owns the
            buffer; what it does with the records is not seen).
        counter_hz: the system counter's frequency (Hz, CNTFRQ_EL0) instead of the board's
            (``BoardSpec.counter_hz``, IMPLEMENTATION DEFINED before Armv8.6).
        semihosting_userspace: HLT #0xF000 at EL0 is a semihosting call too (as QEMU's
            ``-semihosting-config enable=on,userspace=on``; default off: it UNDEFs, as in
            QEMU); its files land in the output directory (docs/linux.md, the perf.data
            channel).
        smp: the number of PEs (1..8, ``-smp``): the DTB lists each, PE 0 boots and PSCI
            CPU_ON starts the others (:mod:`spe_emu.cpu.smp`).
        smp_quantum: the scheduler's time slice (instructions) with several PEs.
    """

    board: str = "virt"
    kernel: Path | None = None
    initrd: Path | None = None
    append: str = ""
    dtb: Path | None = None
    ram_size: int = VIRT.ram_size
    dumpdtb: Path | None = None
    trace: bool = False
    semihosting_userspace: bool = False
    counter_hz: int | None = None
    smp: int = 1
    smp_quantum: int = MachineConfig.smp_quantum

    def board_spec(self) -> BoardSpec:
        """The board (``--counter-hz`` applied), checked against the options: a RAM size
        the board's memory map cannot hold is refused.

        Raises:
            ConfigError: an unknown board, a bad ``-m`` or ``--counter-hz``."""
        try:
            board = BOARDS[self.board]
        except KeyError:
            raise ConfigError(f"--machine {self.board!r}: known boards are "
                              f"{', '.join(sorted(BOARDS))}") from None
        if not 0 < self.ram_size <= board.ram_max:
            raise ConfigError(f"-m {ram_size_text(self.ram_size)}: the {board.name} board "
                              f"has at most {ram_size_text(board.ram_max)} of RAM (from "
                              f"{board.ram_base:#x})")
        if not 1 <= self.smp <= MAX_PES:
            raise ConfigError(f"--smp {self.smp}: must be 1..{MAX_PES}")
        if self.smp > 1:
            board = board.with_pes(self.smp)
        if self.counter_hz is None:
            return board
        if not 0 < self.counter_hz <= MAX_COUNTER_HZ:   # (CNTFRQ_EL0.ClockFreq)
            raise ConfigError(f"--counter-hz {self.counter_hz}: must be 1..{MAX_COUNTER_HZ}")
        return replace(board, counter_hz=self.counter_hz)


def board_dtb(kopts: KernelOptions, opts: "RunOptions",
              initrd: tuple[int, int] | None = None) -> bytes:
    """The device tree blob of a ``--machine`` run: ``--dtb``'s file, or generated from the
    board description (:func:`spe_emu.platform.dtb.build_dtb`) with the PSCI conduit of
    ``opts.boot_el`` (:func:`spe_emu.devices.psci.psci_conduit`) and the SPE node when the
    SPU is present (PMSVer != 0, not the raw run loop).

    Raises:
        ConfigError: a ``--dtb`` that is missing, unreadable, not a regular file
            (:mod:`spe_emu.platform.inputs`) or larger than :data:`MAX_DTB_FILE`; a bad
            board option.
    """
    if kopts.dtb is not None:   # (a regular file, /dev/zero or a named pipe refused)
        return read_input(kopts.dtb, MAX_DTB_FILE, "a device tree blob", "--dtb", ConfigError)
    board = kopts.board_spec()
    return build_dtb(board, ram_size=kopts.ram_size, bootargs=kopts.append,
                     initrd=initrd, psci_method=psci_conduit(opts.boot_el),
                     cpu_mpidrs=tuple(pe_mpidr(n) for n in range(kopts.smp)),
                     spe=opts.spe.pmsver != 0 and opts.mode != "raw",
                     pmu=any(d.kind == "pmuv3" for d in board.devices)
                     and native.has_own_pmu())


def ram_size_text(size: int) -> str:
    """``size`` bytes as ``-m`` takes it: ``<n>G`` when a whole number of GiB, else ``<n>M``
    (bytes when not a whole number of MiB)."""
    if size % (1 << 30) == 0:
        return f"{size >> 30}G"
    return f"{size >> 20}M" if size % (1 << 20) == 0 else f"{size}B"


def new_machine(mcfg: MachineConfig, ram_option: str | None = None) -> Machine:
    """``Machine(mcfg)``, with what Unicorn refuses while it is set up as one line: the host
    unable to provide the memory (UC_ERR_NOMEM: the guest's RAM, the translated-code buffer)
    a :class:`ConfigError` naming the RAM size (as ``ram_option``, e.g. ``-m``, when the user
    chose it), any other Unicorn error an :class:`EmulatorError`."""
    try:
        return Machine(mcfg)
    except UcError as exc:
        if exc.errno == UC_ERR_NOMEM:
            size = ram_size_text(mcfg.ram_size)
            what = f"{ram_option} {size}" if ram_option else f"guest RAM of {size}"
            raise ConfigError(f"{what}: the host cannot provide the memory for the machine "
                              f"(Unicorn: {exc})") from None
        raise EmulatorError(f"emulator error: setting up the machine: {exc}") from exc


KERNEL_TCG_BUFFER_MB = 256
"""Unicorn's translated-code buffer for ``--machine`` boots (MiB): an operating system's
code (Debian's arm64 kernel: about 20 MiB of text) does not fit the 4 MiB a bundled guest
needs, and a full buffer flushes every translation (a Linux boot then spends three quarters
of its time translating again). Only the pages translations are written to use memory."""


def prepare_kernel_machine(kopts: KernelOptions, opts: "RunOptions",
                           console: Callable[[bytes], None] | None = None,
                           stdin=None) -> tuple[Machine, BootImage]:
    """A ``--machine`` machine with ``kopts.kernel`` (and initrd, DTB) placed as
    qemu-system-aarch64 places them and the PE reset at the entry point, at
    ``opts.boot_el``, with x0 = the DTB's address for a Linux-protocol boot (x1-x3 = 0);
    and the placement.

    Raises:
        ImageError: a missing or malformed kernel; ConfigError: something does not fit.
    """
    if kopts.kernel is None:
        raise ConfigError("--machine needs --kernel IMAGE")
    if opts.mode == "raw":
        raise ConfigError("--mode raw sees a device's interrupt only at its next stop: "
                          "use --mode fast or reference with --machine")
    board = kopts.board_spec()
    if kopts.smp > 1 and (opts.attach is not None or opts.ground_truth):
        raise ConfigError(f"--smp {kopts.smp}: " + ("--gdb debugs one PE" if opts.attach
                                                   is not None else "--ground-truth counts "
                                                   "one PE's instructions") + ": use --smp 1")
    boot = load_kernel(kopts.kernel, board, kopts.ram_size, kopts.initrd)
    if boot.dtb_addr is not None:
        boot = boot.with_dtb(board_dtb(kopts, opts, boot.initrd))
    mcfg = MachineConfig(ram_base=board.ram_base, ram_size=kopts.ram_size,
                         tcg_buffer_mb=KERNEL_TCG_BUFFER_MB,
                         boot_el=opts.boot_el, mode=opts.mode,
                         spe=opts.spe.with_(seed=opts.seed), outdir=Path(opts.outdir),
                         max_insns=opts.max_insns, console=console, board=board,
                         psci=psci_conduit(opts.boot_el), stdin=stdin,
                         allow_el0_semihosting=kopts.semihosting_userspace, cpu=opts.cpu,
                         smp=kopts.smp, smp_quantum=kopts.smp_quantum)
    machine = new_machine(mcfg, "-m")
    for addr, data in boot.segments:
        machine.uc.mem_write(addr, data)
    # The kernel's code, for the control-instruction scan (ERET, PSB CSYNC) and
    # for naming PCs: an ELF's own segments, else the loaded file as one executable segment.
    if boot.format == "elf":
        machine.images.append(load_elf(kopts.kernel))
    else:
        addr, data = boot.segments[0]
        # A Linux Image runs at its own virtual addresses: the control-instruction hooks
        # follow it (Machine._follow_code_mapping), the SP-writer hooks could not (thousands,
        # and every hook slows Unicorn's translation); Linux keeps SCTLR_ELx.SA set and its
        # SP aligned, so SP alignment faults of such a kernel are not checked (docs/model.md).
        machine.scan_sp_writers = not boot.format.startswith("image")
        machine.images.append(Image(Path(kopts.kernel), boot.entry, [
            Segment(addr, addr, data, len(data), PF_R | PF_W | PF_X)]))
    machine.reset(boot.entry)
    machine.uc.reg_write(X_REGS[0], boot.x0)
    return machine, boot


@dataclass
class Session:
    """The result of :func:`run_image`."""

    result: RunResult
    outdir: Path
    trace_path: Path
    summary: dict
    machine: Machine | None = None
    """The machine after its run (registers, memory); None for ``--dumpdtb``."""


FLAG_SPE_ENABLE, FLAG_LINUX = 1 << 0, 1 << 1
"""``spe_fw_config.flags`` bits (firmware/config.h SPE_FW_FLAG_*)."""


def config_block(opts: RunOptions, entry: int, flags: int = 0) -> bytes:
    """The firmware's ``spe_fw_config`` block (firmware/config.h: ten u64) for a guest
    entering EL0 at ``entry``: the SPE register values of ``opts``, the Profiling Buffer, and
    ``flags`` (``FLAG_*``) plus :data:`FLAG_SPE_ENABLE` when ``opts.profiling``."""
    r = opts.register_values()
    values = [FIRMWARE_MAGIC, entry, r["PMSCR_EL1"], r["PMSIRR_EL1"], r["PMSFCR_EL1"],
              r["PMSEVFR_EL1"], r["PMSLATFR_EL1"], BUFFER_BASE, opts.buffer_size,
              flags | (FLAG_SPE_ENABLE if opts.profiling else 0)]
    return struct.pack("<10Q", *values)


def prepare_machine(image_path: Path, opts: RunOptions,
                    console: Callable[[bytes], None] | None = None,
                    firmware_console: Callable[[bytes], None] | None = None) -> Machine:
    """A machine with ``image_path`` loaded and reset, ready to run: under the firmware (its
    config block filled in from ``opts``), or booted directly at ``opts.boot_el``.

    Raises:
        ImageError: bad image; ConfigError: bad option or an image outside the guest region.
    """
    opts.validate()
    guest = load_elf(image_path)
    mcfg = MachineConfig(boot_el=opts.boot_el, mode=opts.mode,
                         spe=opts.spe.with_(seed=opts.seed), outdir=Path(opts.outdir),
                         max_insns=(BARE_METAL_MAX_INSNS if opts.max_insns is None
                                    else opts.max_insns), console=console,
                         firmware_console=firmware_console, cpu=opts.cpu)
    machine = new_machine(mcfg)
    if opts.firmware:
        if not GUEST_REGION[0] <= guest.entry < GUEST_REGION[1]:
            raise ConfigError(f"{image_path}: entry {guest.entry:#x} is outside the guest "
                              f"region {GUEST_REGION[0]:#x}-{GUEST_REGION[1]:#x}; bare-metal "
                              f"images need --no-firmware")
        spans = sorted((seg.paddr, seg.paddr + seg.memsz) for seg in guest.segments)
        for (lo, hi), nxt in zip(spans, spans[1:] + [None]):
            if not GUEST_REGION[0] <= lo <= hi <= GUEST_REGION[1]:
                raise ConfigError(f"{image_path}: segment {lo:#x}-{hi:#x} is outside the guest "
                                  f"region {GUEST_REGION[0]:#x}-{GUEST_REGION[1]:#x}")
            if nxt is not None and nxt[0] < hi:
                raise ConfigError(f"{image_path}: segments {lo:#x}-{hi:#x} and "
                                  f"{nxt[0]:#x}-{nxt[1]:#x} overlap")
        firmware = load_elf(opts.firmware_path or default_firmware())
        machine.load(firmware)
        # (its semihosting console lines are its own: firmware_console, not the guest's)
        machine.firmware_span = (min(seg.vaddr for seg in firmware.segments),
                                 max(seg.vaddr + seg.memsz for seg in firmware.segments))
        machine.load(guest)
        machine.uc.mem_write(firmware.symbol(FIRMWARE_CONFIG_SYMBOL),
                             config_block(opts, guest.entry))
        machine.reset(firmware.entry)
    else:
        machine.load(guest)
        machine.reset(guest.entry)
    return machine


SUMMARY_NAME = "summary.json"


MAX_OUTDIR_ENTRIES = 10_000
"""Most files and directories an existing output directory may hold (each run copies them)."""
MAX_OUTDIR_BYTES = 8 << 30
"""Most bytes of files an existing output directory may hold (each run copies them)."""
OWN_DIRECTORY = "give a directory of its own, e.g. -o spe-out"


def check_outdir(outdir: Path, *stale: str) -> None:
    """Refuse an output directory :func:`staged_outdir` cannot replace safely, in bounded
    time, before anything is made: ``.``, ``..``, a file system root or mount point, the home
    directory, or one that holds the current directory (none can be renamed safely, and the
    run's directory, made next to it, may land inside it); one whose files a run's copy would
    not keep as they are (an entry of another owner or group than the run's files get, a named
    pipe, device or socket) or could not make quickly (more than :data:`MAX_OUTDIR_ENTRIES`
    entries or :data:`MAX_OUTDIR_BYTES` bytes, not counting the ``stale`` names at its top).
    The scan stops at the first entry refused.

    Raises:
        ConfigError: naming the directory and why (one line)."""
    final = Path(outdir)
    where = f"output directory {final}"
    try:
        real = final.resolve()
        home = os.path.expanduser("~")   # (unchanged when there is none)
        if (final.name in ("", "..") or real == real.parent or os.path.ismount(real)
                or (os.path.isabs(home) and real == Path(home).resolve())):
            raise ConfigError(f"{where}: a run replaces its output directory as a whole, "
                              f"which a file system root, a mount point, the home directory, "
                              f"'.' or '..' cannot be: {OWN_DIRECTORY}")
        cwd = Path.cwd().resolve()
        if real == cwd or real in cwd.parents:
            raise ConfigError(f"{where}: holds the current directory, which the run "
                              f"would replace as a whole: {OWN_DIRECTORY}")
        if not final.is_dir():
            return
        # (who owns what the run makes: its user, and its group or the setgid parent's)
        parent = os.stat(real.parent)
        owner = (os.geteuid(), parent.st_gid if parent.st_mode & stat.S_ISGID
                 else os.getegid())
        entries = size = 0
        pending = [(os.fspath(real), True)]
        here = os.stat(real)
        if (here.st_uid, here.st_gid) != owner:
            raise ConfigError(f"{where}: owned by {here.st_uid}:{here.st_gid}, not by the "
                              f"run's user and group ({owner[0]}:{owner[1]}), which its copy "
                              f"would get: {OWN_DIRECTORY}")
        while pending:
            directory, top = pending.pop()
            with os.scandir(directory) as listing:
                for entry in listing:
                    if top and entry.name in stale:
                        continue
                    entries += 1
                    st = entry.stat(follow_symlinks=False)
                    if (st.st_uid, st.st_gid) != owner:
                        raise ConfigError(
                            f"{where}: {entry.path} is owned by {st.st_uid}:{st.st_gid}, not "
                            f"by the run's user and group ({owner[0]}:{owner[1]}), which its "
                            f"copy would get: {OWN_DIRECTORY}")
                    if stat.S_ISDIR(st.st_mode):
                        pending.append((entry.path, False))
                    elif stat.S_ISREG(st.st_mode):
                        size += st.st_size
                    elif not stat.S_ISLNK(st.st_mode):
                        raise ConfigError(f"{where}: {entry.path} is not a file, directory "
                                          f"or symbolic link a run can copy: "
                                          f"{OWN_DIRECTORY}")
                    if entries > MAX_OUTDIR_ENTRIES or size > MAX_OUTDIR_BYTES:
                        raise ConfigError(
                            f"{where}: more than "
                            + (f"{MAX_OUTDIR_ENTRIES} files and directories"
                               if entries > MAX_OUTDIR_ENTRIES else f"{MAX_OUTDIR_BYTES} bytes")
                            + f" in it, which each run would copy (not an spe-emu output "
                              f"directory?): {OWN_DIRECTORY}")
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None


@contextmanager
def staged_outdir(outdir: Path, *stale: str):
    """The output directory of one run, written in a fresh sibling and renamed into place.

    Yields a new directory next to ``outdir`` (``.<name>.<random>.run``) holding a copy of
    ``outdir``'s files but the ``stale`` names (the previous run's outputs; so a guest's input
    files there stay readable). When the block leaves (any way) with ``summary.json`` written
    in it, the previous ``outdir`` is renamed aside, the new one renamed to ``outdir`` and the
    previous one removed; without summary.json (the run never started: a bad image, a bad
    option) the new directory is removed and ``outdir`` is left as it was, byte for byte.
    A directory that cannot be replaced so, or copied in bounded time, is refused first
    (:func:`check_outdir`).

    Raises:
        ConfigError: ``outdir`` is not a directory, is refused by :func:`check_outdir`, or
            the host refused to make, copy or rename (naming the directory and the host's
            reason)."""
    final = Path(outdir)
    try:
        if final.exists() and not final.is_dir():
            raise NotADirectoryError(20, "not a directory")
    except OSError as exc:
        raise ConfigError(f"output directory {final}: {exc.strerror or exc}") from None
    check_outdir(final, *stale)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".run",
                                      dir=final.parent))
        try:
            if final.is_dir():
                shutil.copytree(final, stage, symlinks=True, dirs_exist_ok=True,
                                ignore=lambda d, names: [n for n in names if n in stale]
                                if Path(d) == final else [])
        except OSError:
            shutil.rmtree(stage, ignore_errors=True)
            raise
    except OSError as exc:
        raise ConfigError(f"output directory {final}: {exc.strerror or exc}") from None
    try:
        yield stage
    finally:
        if not (stage / SUMMARY_NAME).exists():
            shutil.rmtree(stage, ignore_errors=True)
        else:
            old = None
            try:
                if final.is_dir():
                    old = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".old",
                                                dir=final.parent))
                    os.replace(final, old / "d")
                os.replace(stage, final)
            except OSError as exc:
                raise ConfigError(f"output directory {final}: {exc.strerror or exc}") from None
            finally:
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)


GROUND_TRUTH_NAME = "ground_truth.json"


def staged_run(run):
    """Decorate a run function whose ``opts`` (a :class:`RunOptions`) is its argument
    ``opts`` (keyword or positional): it runs with ``opts.outdir`` a fresh staging directory
    (:func:`staged_outdir`; the previous run's spe.trace, ground_truth.json and summary.json
    not copied) renamed to ``opts.outdir`` when the run leaves, however it ends, with a
    summary.json; the returned session's ``outdir`` and ``trace_path`` name the final place."""
    import functools
    import inspect
    signature = inspect.signature(run)

    @functools.wraps(run)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        opts = bound.arguments["opts"]
        final = Path(opts.outdir)
        with staged_outdir(final, TRACE_NAME, GROUND_TRUTH_NAME, SUMMARY_NAME) as stage:
            bound.arguments["opts"] = replace(opts, outdir=stage)
            session = run(*bound.args, **bound.kwargs)
        return replace(session, outdir=final, trace_path=final / session.trace_path.name)
    return wrapper


def write_ground_truth(machine: Machine, outdir: Path, enabled: bool) -> Path | None:
    """With ``enabled``: write ``ground_truth.json`` into ``outdir`` --
    ``{"instructions": total executed, "pcs": {"0x<pc>": executions}, "events": {"names":
    [...], "pcs": {"0x<pc>": [counts]}}}`` (every executed instruction, counted per block by
    the native hook: :meth:`Machine.ground_truth`; what the model gave each execution, with
    model_feed "every": :meth:`Machine.ground_truth_events`, names ``native.GT_EVENTS``) -- and
    return its path; else remove a stale one and return None."""
    path = Path(outdir) / GROUND_TRUTH_NAME
    if not enabled:
        path.unlink(missing_ok=True)
        return None
    counts = machine.ground_truth()
    events = machine.ground_truth_events()
    path.write_text(json.dumps({"instructions": sum(counts.values()),
                                "pcs": {f"{pc:#x}": n for pc, n in counts.items()},
                                "events": {"names": list(native.GT_EVENTS),
                                           "pcs": {f"{pc:#x}": list(n)
                                                   for pc, n in events.items()}}}) + "\n")
    return path


def run_recorded(machine: Machine, opts: RunOptions, outdir: Path,
                 progress: Callable[[int], None] | None = None,
                 on_error: Callable[[RunResult, GuestError], object] | None = None):
    """Run ``machine`` to its end (:meth:`Machine.run`) counting every executed instruction
    when ``opts.ground_truth`` says so, then write (or remove a stale) ``ground_truth.json``
    (:func:`write_ground_truth`). Returns the run's result; raises what the run raises (a
    GuestError or RunInterrupted with the stopped machine as its ``machine`` attribute, after
    ``on_error`` had what the run collected: the caller's summary.json of a stopped run). Any other
    exception of the run (but DebuggerKill) is a failure of the emulator: ``on_error`` has
    what was collected and an :class:`EmulatorError` naming it is raised."""
    if opts.ground_truth:
        machine.enable_ground_truth()
    if opts.attach is not None:
        opts.attach(machine)
    try:
        result = machine.run(progress=progress)
    except (GuestError, RunInterrupted) as exc:
        exc.machine = machine  # (what spe_emu.api reports of a stopped run)
        if on_error is not None:
            on_error(machine.result(), exc)
        raise
    except DebuggerKill:
        raise
    except Exception as exc:  # (a failure of the emulator: recorded, then typed)
        err = EmulatorError(f"emulator error: {type(exc).__name__}: {exc}")
        err.machine = machine
        if on_error is not None:
            try:
                on_error(machine.result(), err)
            except Exception:  # (what could be collected is written; the error is named)
                pass
        raise err from exc
    write_ground_truth(machine, outdir, opts.ground_truth)
    return result


EXIT_REASONS = ("exit", "killed", "psci-system-off", "psci-system-reset", "psci-cpu-off",
                "max-insns", "guest-error", "emulator-error", "interrupted")
"""How a run ended (summary.json's ``exit_reason``, :attr:`spe_emu.Result.exit_reason`): the
guest exited (semihosting SYS_EXIT, a Linux program's exit/exit_group); a Linux program died
of a signal (status 128 + the signal); a PSCI call of a board's guest; the run reached
``--max-insns``; the run stopped on an error of the guest the emulator cannot continue from;
the run stopped on a failure of the emulator itself (:class:`~spe_emu.errors.EmulatorError`);
the run was stopped from outside (:class:`~spe_emu.errors.RunInterrupted`: SIGINT or SIGTERM
to ``spe-emu run``)."""


def exit_reason(result: RunResult,
                error: GuestError | EmulatorError | RunInterrupted | None = None,
                killed: bool = False) -> str:
    """The :data:`EXIT_REASONS` name of how the run of ``result`` ended."""
    if isinstance(error, EmulatorError):
        return "emulator-error"
    if isinstance(error, RunInterrupted):
        return "interrupted"
    if error is not None:
        return "max-insns" if isinstance(error, GuestRunaway) else "guest-error"
    if killed:
        return "killed"
    return "exit" if result.exit_via in (None, "semihosting") else result.exit_via


def result_summary(result: RunResult,
                   error: GuestError | EmulatorError | RunInterrupted | None = None,
                   killed: bool = False) -> dict:
    """The run's part of summary.json: the :class:`RunResult` fields but the console (the
    firmware's console as text, ``firmware_console``), ``exit_reason`` named
    (:func:`exit_reason`; the semihosting ADP_Stopped_* code, if any,
    in ``semihosting_exit_reason``) and, for a run that stopped (the guest, the emulator, an
    interruption), ``error`` (one line)."""
    out = {k: v for k, v in asdict(result).items() if k != "console"}
    out["firmware_console"] = result.firmware_console.decode("utf-8", "replace")
    out["semihosting_exit_reason"] = out.pop("exit_reason")
    out["exit_reason"] = exit_reason(result, error, killed)
    if error is not None:
        out["error"] = str(error)
    return out


def write_summary(outdir: Path, summary: dict) -> None:
    """``summary.json`` in ``outdir``: ``summary`` as indented JSON, with
    ``unicorn_patches``: the patches/unicorn of the libunicorn the run ran on (``[]``: the
    unicorn binding's own library; :func:`spe_emu.native.unicorn_patches`)."""
    from . import native
    summary = {**summary, "unicorn_patches": native.unicorn_patches()}
    (Path(outdir) / SUMMARY_NAME).write_text(json.dumps(summary, indent=2) + "\n")


@staged_run
def run_image(image_path: Path, opts: RunOptions,
              console: Callable[[bytes], None] | None = None,
              progress: Callable[[int], None] | None = None,
              firmware_console: Callable[[bytes], None] | None = None) -> Session:
    """Run ``image_path`` (a guest under the firmware, or a bare-metal image) and write the
    trace and ``summary.json`` into ``opts.outdir``. ``console`` receives the guest's console
    bytes, ``firmware_console`` the firmware's own lines (``spe_fw: ...``; also in
    ``RunResult.firmware_console`` and summary.json's ``firmware_console``).

    Raises:
        ImageError: bad image; ConfigError: bad option; GuestRunaway / GuestError.
    """
    opts.validate()
    outdir = Path(opts.outdir)
    trace_path = outdir / TRACE_NAME
    machine = prepare_machine(image_path, opts, console, firmware_console)

    def summarise(result: RunResult, error: GuestError | None = None) -> dict:
        summary = {
            "image": str(image_path),
            "firmware": opts.firmware,
            "mode": opts.mode,
            # (the driver's options only where the firmware's driver applied them)
            "options": ({"interval": opts.interval, "random": opts.random, "seed": opts.seed,
                         "filters": list(opts.filters), "min_latency": opts.min_latency,
                         "buffer_size": opts.buffer_size, "boot_el": opts.boot_el}
                        if opts.firmware else {"seed": opts.seed, "boot_el": opts.boot_el}),
            **result_summary(result, error),
            "trace_bytes": trace_path.stat().st_size if trace_path.exists() else 0,
        }
        write_summary(outdir, summary)
        return summary

    result = run_recorded(machine, opts, outdir, progress, on_error=summarise)
    return Session(result, outdir, trace_path, summarise(result), machine)


def parse_ram_size(text: str) -> int:
    """``-m`` as qemu-system-aarch64 reads it: a number of MiB, or a number with a K, M, G or
    T suffix (bytes). Returns bytes.

    Raises:
        ConfigError: not a size, or not a positive multiple of 2 MiB (the board's limit is
            :meth:`KernelOptions.board_spec`'s).
    """
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().removesuffix("B")
    try:
        if t and t[-1] in units:
            size = int(float(t[:-1]) * units[t[-1]])
        else:
            size = int(t) << 20
    except ValueError:
        raise ConfigError(f"-m {text!r}: not a size (e.g. 256, 512M, 1G)") from None
    if size <= 0 or size % (2 << 20):
        raise ConfigError(f"-m {text!r}: must be a positive multiple of 2 MiB")
    return size


@staged_run
def run_kernel(kopts: KernelOptions, opts: RunOptions,
               console: Callable[[bytes], None] | None = None,
               progress: Callable[[int], None] | None = None, stdin=None) -> Session:
    """Boot ``kopts.kernel`` on the board and run it until it powers off (PSCI SYSTEM_OFF) or
    exits through semihosting; ``summary.json`` (and the console log, and with
    ``opts.ground_truth`` ``ground_truth.json``) land in ``opts.outdir``. With ``kopts.dumpdtb`` the DTB is written there and nothing runs.

    Raises:
        ImageError: bad kernel; ConfigError: bad option; GuestRunaway / GuestError.
    """
    outdir = Path(opts.outdir)
    if kopts.dumpdtb is not None:
        boot = load_kernel(kopts.kernel, kopts.board_spec(), kopts.ram_size, kopts.initrd) \
            if kopts.kernel is not None else None
        blob = board_dtb(kopts, opts, boot.initrd if boot else None)
        try:
            kopts.dumpdtb.write_bytes(blob)
        except OSError as exc:
            raise ConfigError(f"--dumpdtb {kopts.dumpdtb}: {exc.strerror or exc}") from None
        return Session(None, outdir, outdir / TRACE_NAME, {"dumpdtb": str(kopts.dumpdtb)})
    trace_path = outdir / TRACE_NAME
    machine, boot = prepare_kernel_machine(kopts, opts, console, stdin)
    records = bytearray()
    if kopts.trace:   # (every PE's SPU: their records in write order)
        for pe_machine in machine.smp.machines if machine.smp else (machine,):
            pe_machine.spu.buffer.tap = records.extend

    def summarise(result: RunResult, error: GuestError | None = None) -> dict:
        if kopts.trace:
            trace_path.write_bytes(records)
        summary = {
            "machine": kopts.board,
            "kernel": str(kopts.kernel),
            "format": boot.format,
            "initrd": str(kopts.initrd) if kopts.initrd else None,
            "append": kopts.append,
            "ram_size": kopts.ram_size,
            "mode": opts.mode,
            "boot_el": opts.boot_el,
            **result_summary(result, error),
            **({"trace_bytes": len(records)} if kopts.trace else {}),
        }
        write_summary(outdir, summary)
        return summary

    result = run_recorded(machine, opts, outdir, progress, on_error=summarise)
    return Session(result, outdir, trace_path, summarise(result), machine)
