"""``spe-emu run PROGRAM [ARGS...]`` for a static Linux program: the firmware boots, starts SPE
and runs the program at EL0; the host answers its exec and system calls
(:mod:`spe_emu.linux.process`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..cpu.machine import Machine, MachineConfig, RunResult
from ..errors import ConfigError, GuestError, ImageError
from ..platform.loader import load_elf
from ..session import (FIRMWARE_CONFIG_SYMBOL, FLAG_LINUX, GUEST_REGION, TRACE_NAME,
                       RunOptions, config_block, default_firmware, new_machine,
                       result_summary, run_recorded, staged_run, write_summary)
from .elf import load_linux_program
from .hwcap import hwcaps
from .memory import L2_SHIFT, VA_LIMIT, AddressSpace
from .process import (SEMIHOST_SPE_LINUX_EXEC, SEMIHOST_SPE_LINUX_FAULT,
                      SEMIHOST_SPE_LINUX_SYSCALL, LinuxOptions, LinuxProcess)

LINUX_RAM_SIZE = 1 << 30
"""RAM of a Linux run (bytes, at 0x4000_0000): the firmware's 128 MiB, then 896 MiB of pages
for the process and its page tables."""
SLOT = 1 << L2_SHIFT


@dataclass
class LinuxSession:
    """What :func:`run_program` produced."""

    result: RunResult
    process: LinuxProcess
    outdir: Path
    trace_path: Path
    summary: dict
    machine: Machine | None = None
    """The machine after its run (registers, memory)."""


def _slots(lo: int, hi: int) -> tuple[int, int]:
    return lo & ~(SLOT - 1), (hi + SLOT - 1) & ~(SLOT - 1)


@staged_run
def run_program(program_path: Path, lopts: LinuxOptions, opts: RunOptions,
                firmware_console: Callable[[bytes], None] | None = None) -> LinuxSession:
    """Run a static AArch64 Linux program under the firmware with profiling as ``opts`` says;
    ``spe.trace`` and ``summary.json`` (with a ``linux`` section: system calls made, those
    answered -ENOSYS, peak memory) go to ``opts.outdir``.

    Raises:
        ImageError: not a static AArch64 Linux executable; ConfigError: a bad option;
        GuestRunaway / GuestError: the run did not end normally.
    """
    opts.validate()
    if not opts.firmware:
        raise ConfigError("a Linux program runs under the firmware: drop --no-firmware")
    if lopts.share is not None and not lopts.share.is_dir():
        raise ConfigError(f"--share {lopts.share}: not a directory")
    program = load_linux_program(program_path, VA_LIMIT)
    outdir = Path(opts.outdir)
    trace_path = outdir / TRACE_NAME
    console = bytearray()

    def fw_console(data: bytes) -> None:
        console.extend(data)
        if firmware_console is not None:
            firmware_console(data)

    mcfg = MachineConfig(ram_size=LINUX_RAM_SIZE, mode=opts.mode,
                         spe=opts.spe.with_(seed=opts.seed), outdir=outdir,
                         max_insns=opts.max_insns, console=fw_console, cpu=opts.cpu)
    machine = new_machine(mcfg)
    firmware = load_elf(opts.firmware_path or default_firmware())
    machine.load(firmware)
    machine.uc.mem_write(firmware.symbol(FIRMWARE_CONFIG_SYMBOL),
                         config_block(opts, program.entry, FLAG_LINUX))
    machine.images.append(program.image())
    reserved = [_slots(lo, lo + size) for dev in mcfg.board.devices
                for lo, size in dev.all_regions if size]
    reserved.append((mcfg.ram_base, GUEST_REGION[1]))  # the firmware's RAM and the guest region
    space = AddressSpace(machine.uc.mem_read, machine.uc.mem_write,
                         pool=(GUEST_REGION[0], mcfg.ram_base + mcfg.ram_size),
                         reserved=tuple(reserved))
    for seg in program.segments:
        if not space.usable(seg.vaddr & ~0xFFF, seg.end):
            raise ImageError(f"{program_path}: PT_LOAD {seg.vaddr:#x}-{seg.end:#x} overlaps the "
                             f"firmware's memory or a device (a bare-metal image? run it with "
                             f"--no-firmware)")
    process = LinuxProcess(program, lopts, space, machine.semihost.read_guest,
                           machine.semihost.write_guest, machine.clock.ticks, machine.sleep,
                           hwcaps(machine.fast.cpr), private=(GUEST_REGION,),
                           log=machine.guest_errors.append)
    machine.semihost.register_operation(SEMIHOST_SPE_LINUX_EXEC, process.exec_call)
    machine.semihost.register_operation(SEMIHOST_SPE_LINUX_SYSCALL, process.syscall_call)
    machine.semihost.register_operation(SEMIHOST_SPE_LINUX_FAULT, process.fault_call)
    machine.reset(firmware.entry)

    def summarise(result: RunResult, error: GuestError | None = None) -> dict:
        summary = {
            "program": str(program_path),
            "linux": process.summary(),
            "mode": opts.mode,
            "options": {"interval": opts.interval, "random": opts.random, "seed": opts.seed,
                        "filters": list(opts.filters), "min_latency": opts.min_latency,
                        "buffer_size": opts.buffer_size, "profiling": opts.profiling},
            **result_summary(result, error, killed=process.killed_by is not None),
            "firmware_console": bytes(console).decode("utf-8", "replace"),
            "trace_bytes": trace_path.stat().st_size if trace_path.exists() else 0,
        }
        write_summary(outdir, summary)
        return summary

    try:
        result = run_recorded(machine, opts, outdir, on_error=summarise)
    finally:
        process.close_all()
    return LinuxSession(result, process, outdir, trace_path, summarise(result), machine)
