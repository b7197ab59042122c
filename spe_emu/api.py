"""The Python API: :func:`run` one program with SPE and get a :class:`Result` back.

The same runs as ``spe-emu run`` (README, "Python API"): a static AArch64 Linux program (as
qemu-aarch64 runs it), a guest linked for the firmware's guest region, a bare-metal image
(``firmware=False``) or software for a board (``machine="virt"``, ``kernel=...``). Nothing
is printed: the guest's output is in :attr:`Result.console` (and :attr:`Result.stderr`).

Errors (:mod:`spe_emu.errors`): :class:`~spe_emu.errors.ConfigError` for a bad option,
:class:`~spe_emu.errors.ImageError` for a missing or malformed program; a run the guest
stops (the instruction budget, an error of the guest the emulator cannot continue from) is
not raised but returned, with :attr:`Result.exit_reason` ``"max-insns"`` or
``"guest-error"`` and the error in :attr:`Result.error` (:meth:`Result.check` raises it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from .cpu.a64 import X_REGS
from .cpu.exceptions import PSTATE
from .cpu.machine import Machine, RunResult
from .errors import ConfigError, GuestError
from .session import EXIT_REASONS, exit_reason
from .spe.config import SpeConfig
from .spe.packets import Record, iter_records

__all__ = ["run", "Result", "EXIT_REASONS", "COUNTS"]

PathLike = Union[str, os.PathLike]

COUNTS = ("instructions", "population", "samples", "records_written", "bytes_written",
          "filtered_out", "management_events", "irqs_taken", "exceptions_taken")
"""Keys of :attr:`Result.counts` (instructions; SPE sample population and samples in
operations; records; bytes; management events; interrupts and exceptions taken)."""


@dataclass
class Result:
    """One run (:func:`run`).

    Attributes:
        status: the guest's exit status (0-255; a Linux program killed by signal n: 128 + n;
            PSCI SYSTEM_OFF: 0); None when the guest did not exit (``max-insns``,
            ``guest-error``).
        exit_reason: one of :data:`EXIT_REASONS`.
        error: the :class:`~spe_emu.errors.GuestError` (or GuestRunaway) that stopped the run,
            else None.
        counts: :data:`COUNTS` -> int.
        console: bytes the guest printed: a Linux program's stdout, a firmware guest's or
            bare-metal image's semihosting console, a board's PL011 output.
        stderr: a Linux program's stderr (bytes; empty otherwise).
        firmware_console: what spe_emu's firmware printed itself (its ``spe_fw:`` banner,
            exit and fatal lines; bytes), never part of ``console``.
        registers: the PE's registers when the run ended, name -> int: ``X0``..``X30``,
            ``SP`` (the current stack pointer), ``PC``, ``PSTATE`` (SPSR layout, Arm ARM
            C5.2.18), ``EL`` (PSTATE.EL), and the SPE state ``PMBSR_EL1``, ``PMBPTR_EL1``,
            ``PMSICR_EL1``. Under the firmware (a Linux program or a guest for the guest
            region) the PE is in the firmware's exit path at EL1 then, not in the program.
        trace: the raw SPE trace the run produced (bytes of whole records, Arm SPE §5;
            empty without profiling): as the firmware's driver handed it over, or for a
            board every record the SPU wrote into the guest's Profiling Buffer, in write
            order (a host-side copy; the guest's driver owns the buffer).
        summary: what ``summary.json`` holds (dict; for a stopped run too, with
            ``exit_reason`` and ``error``).
        guest_errors: the guest errors the machine logged (one line each).
        ground_truth: with ``ground_truth=True``: executions per PC ``{pc: count}``, else None.
        ground_truth_events: with ``ground_truth=True`` and model_feed "every": what the model
            gave every execution of each instruction, ``{pc: {name: count}}``
            (``spe_emu.native.GT_EVENTS``), else None; :meth:`report` compares SPE's event
            rates with it.
        outdir: the output directory kept (None when :func:`run` used a temporary one).
    """

    status: Optional[int]
    exit_reason: str
    error: Optional[GuestError]
    counts: dict[str, int]
    console: bytes
    stderr: bytes
    registers: dict[str, int]
    trace: bytes
    summary: dict
    guest_errors: list[str] = field(default_factory=list)
    firmware_console: bytes = b""
    ground_truth: Optional[dict[int, int]] = None
    ground_truth_events: Optional[dict[int, dict[str, int]]] = None
    outdir: Optional[Path] = None
    image: Optional[Path] = None
    _machine: Optional[Machine] = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        return (f"Result(status={self.status!r}, exit_reason={self.exit_reason!r}, "
                f"instructions={self.counts['instructions']}, samples={self.samples}, "
                f"trace_bytes={len(self.trace)})")

    @cached_property
    def records(self) -> list[Record]:
        """The trace's records, decoded on first use by the reference decoder
        (:func:`spe_emu.spe.packets.iter_records`: Record objects with their packets)."""
        return list(iter_records(self.trace))

    @property
    def samples(self) -> int:
        """Samples the SPU took (``counts["samples"]``; operations sampled, written or not)."""
        return self.counts["samples"]

    def report(self, image: Optional[PathLike] = None):
        """The trace's profile (:func:`spe_emu.tools.report.build_report`: hot functions,
        PCs, latency, operation mix ...) against ``image`` (default: the program run; a
        board's kernel only when it is an ELF). Raises ImageError for a bad image."""
        from .tools.report import build_report
        rep = build_report(self.trace, image if image is not None else self.image,
                           ground_truth=self.ground_truth,
                           ground_truth_events=self.ground_truth_events)
        rep.model_config = self.summary.get("model_config")   # (stated first)
        return rep

    def read_memory(self, address: int, size: int) -> bytes:
        """``size`` bytes of guest physical memory at ``address`` as the run left it.

        Raises:
            ConfigError: the range is not in the machine's RAM or device-free memory."""
        from unicorn import UcError
        if self._machine is None:
            raise ConfigError("read_memory: this result has no machine")
        try:
            return bytes(self._machine.uc.mem_read(address, size))
        except UcError as exc:
            raise ConfigError(f"read_memory({address:#x}, {size}): {exc}") from None

    def check(self) -> "Result":
        """Raise :attr:`error` when the guest stopped the run; returns self otherwise."""
        if self.error is not None:
            raise self.error
        return self


def _registers(machine: Machine, rr: RunResult) -> dict[str, int]:
    from unicorn.arm64_const import UC_ARM64_REG_PC, UC_ARM64_REG_PSTATE, UC_ARM64_REG_SP
    uc = machine.uc
    regs = {f"X{i}": uc.reg_read(rid) for i, rid in enumerate(X_REGS)}
    regs["SP"] = uc.reg_read(UC_ARM64_REG_SP)
    regs["PC"] = uc.reg_read(UC_ARM64_REG_PC)
    regs["PSTATE"] = uc.reg_read(UC_ARM64_REG_PSTATE)
    regs["EL"] = PSTATE.get(regs["PSTATE"], "EL")
    regs.update(PMBSR_EL1=rr.pmbsr, PMBPTR_EL1=rr.pmbptr, PMSICR_EL1=rr.pmsicr)
    return regs


def run(program: Optional[PathLike] = None, args: Sequence[str] = (), *,
        interval: int = 4096, random: bool = False, seed: int = 0,
        filters: Sequence[str] = (), min_latency: Optional[int] = None,
        timestamps: bool = True, context: bool = False, physical: bool = False,
        exclude_kernel: bool = False, profiling: bool = True, buffer_size: int = 64 << 10,
        spe_features: Union[Mapping[str, int], Sequence[str]] = (),
        spe_external_abort: Optional[str] = None,
        spe_model: Union[Mapping[str, object], Sequence[str]] = (), core: Optional[str] = None,
        firmware: bool = True, boot_el: int = 1, firmware_path: Optional[PathLike] = None,
        share: Optional[PathLike] = None, env: Optional[Mapping[str, str]] = None,
        stdin: bytes = b"",
        machine: Optional[str] = None, kernel: Optional[PathLike] = None,
        initrd: Optional[PathLike] = None, append: str = "", dtb: Optional[PathLike] = None,
        ram_size: Optional[int] = None,
        max_insns: Optional[int] = None, mode: str = "fast", ground_truth: bool = False,
        outdir: Optional[PathLike] = None) -> Result:
    """Run one program with SPE and return what it did (the options of ``spe-emu run``).

    What runs:
        program: a static AArch64 Linux program (``args`` are its argv[1:]; its files are
            those under ``share``, its environment ``env`` (default: none), its stdin the
            bytes ``stdin``), a guest linked for the firmware's guest region, or with
            ``firmware=False`` a bare-metal ELF booted at ``boot_el`` (1, 2 or 3).
        machine, kernel, initrd, append, dtb, ram_size (bytes): instead of ``program``,
            boot ``kernel`` on the board ``machine`` ("virt") as qemu-system-aarch64 does;
            SPE is then the guest's to program (the SPE options below do not apply).

    SPE (the firmware's driver programs it; the Arm SPE registers they set in brackets):
        interval: operations between samples, a multiple of 256 (PMSIRR_EL1.INTERVAL);
        random: PMSIRR_EL1.RND; seed: the interval randomiser's seed (also AT_RANDOM and
        getrandom of a Linux program); filters: any of "load", "store", "branch"
        (PMSFCR_EL1); min_latency: cycles (PMSLATFR_EL1.MINLAT); timestamps, context,
        physical: PMSCR_EL1.TS, CX, PA; exclude_kernel: clear PMSCR_EL1.E1SPE; profiling:
        False leaves SPE disabled; buffer_size: Profiling Buffer bytes (multiple of 4096);
        spe_features: SPE ID-register choices (``{"name": value}`` or ``"NAME=VALUE"``
        strings, as ``--spe-feature``); spe_external_abort: as ``--spe-external-abort``;
        spe_model: the micro-architecture model's parameters (as ``--spe-model``: model_feed,
        cache geometry, latencies ...); core: a core preset (``--core``, e.g.
        "neoverse-n1": MIDR_EL1, SPU ID fields, model geometry; spe_features and spe_model
        override its values).

    The run:
        max_insns: instruction budget (a longer run ends with exit_reason "max-insns");
            None: 2,000,000,000 for a bare-metal image or firmware guest, none for a Linux
            program or a kernel (as QEMU);
        mode: "fast", "reference" (per-instruction oracle) or "raw" (no SPE model; a speed
            baseline without the SIMD&FP trap, alignment, SP alignment and Illegal Execution
            state checks: docs/model.md "Exception classes");
        ground_truth: also count every executed instruction per PC;
        outdir: where ``spe.trace``, ``summary.json`` and the guest's files go (kept);
            None: a temporary directory, removed before returning (the trace, summary and
            console are in the Result).

    Returns:
        :class:`Result`.

    Raises:
        ConfigError: a bad option value or combination, an unusable output directory.
        ImageError: a missing or malformed program, kernel or image.
    """
    from .arch.cores import core_preset
    from .arch.cpu_features import CpuFeatures
    from .session import (KernelOptions, RunOptions, TRACE_NAME, run_image, run_kernel)
    from .tools.report import load_ground_truth, load_ground_truth_events

    if (program is None) == (kernel is None and machine is None):
        raise ConfigError("give either a program or machine= and kernel=")
    given = locals()
    if program is None:
        _refuse(given, _DRIVER_OPTIONS, "with machine= the guest's own driver programs SPE "
                "(and has no firmware, files or environment of spe_emu's)")
    elif not firmware:
        _refuse(given, _FIRMWARE_DRIVER_OPTIONS, "with firmware=False the image programs SPE "
                "itself (the firmware's driver, which these configure, is not loaded)")
    if isinstance(spe_features, Mapping):
        spe_features = [f"{k}={v}" for k, v in spe_features.items()]
    if isinstance(spe_model, Mapping):
        spe_model = [f"{k}={v}" for k, v in spe_model.items()]
    spe, cpu = SpeConfig(external_abort=spe_external_abort), CpuFeatures()
    if core is not None:
        spe, cpu = core_preset(core).apply(spe, cpu)
    spe = spe.with_features(list(spe_features)).with_model(list(spe_model))
    tmp = None
    if outdir is None:
        tmp = Path(tempfile.mkdtemp(prefix="spe-emu-"))
        out = tmp
    else:
        out = Path(outdir)
    opts = RunOptions(interval=interval, random=random, seed=seed, filters=tuple(filters),
                      min_latency=min_latency, timestamps=timestamps, context=context,
                      physical=physical, el1=not exclude_kernel, profiling=profiling,
                      buffer_size=buffer_size, boot_el=boot_el, firmware=firmware,
                      firmware_path=Path(firmware_path) if firmware_path else None,
                      max_insns=max_insns, mode=mode, outdir=out, spe=spe, cpu=cpu,
                      ground_truth=ground_truth)
    console = bytearray()
    stderr = b""
    session = error = None
    killed = False
    image: Optional[Path] = None
    try:
        if program is None:
            kopts = KernelOptions(board=machine or "virt", kernel=Path(kernel),
                                  initrd=Path(initrd) if initrd else None, append=append,
                                  dtb=Path(dtb) if dtb else None, trace=True)
            if ram_size is not None:
                kopts.ram_size = ram_size
            kopts.board_spec()
            opts.firmware = False
            opts.validate()
            image = Path(kernel)
            try:
                session = run_kernel(kopts, opts, console=console.extend)
            except GuestError as exc:
                error = exc
        else:
            from .linux.elf import is_linux_program
            from .session import GUEST_REGION
            image = Path(program)
            if firmware and is_linux_program(image, GUEST_REGION):
                session, error, stdout, stderr, killed = _run_linux(
                    image, args, share, env, stdin, seed, opts)
                console.extend(stdout)
            else:
                if args or share is not None or env or stdin:
                    raise ConfigError(f"{program}: args, share, env and stdin apply to Linux "
                                      f"programs")
                try:
                    session = run_image(image, opts, console=console.extend)
                except GuestError as exc:
                    error = exc
        m = session.machine if session is not None else getattr(error, "machine", None)
        if m is None:
            raise ConfigError("the run ended before its machine was made")  # (not reached)
        rr = session.result if session is not None else m.result()
        trace_path = out / TRACE_NAME
        trace = trace_path.read_bytes() if trace_path.exists() else b""
        summary = session.summary if session is not None else _read_summary(out)
        gt_path = out / "ground_truth.json"
        exact = load_ground_truth(gt_path) if ground_truth and gt_path.exists() else None
        events = (load_ground_truth_events(gt_path) or None) if exact is not None else None
        return Result(
            status=None if error is not None else rr.exit_status,
            exit_reason=exit_reason(rr, error, killed), error=error,
            counts={k: getattr(rr, k) for k in COUNTS}, console=bytes(console),
            stderr=stderr, registers=_registers(m, rr), trace=trace, summary=summary,
            guest_errors=list(rr.guest_errors), ground_truth=exact,
            firmware_console=(rr.firmware_console
                              or str(summary.get("firmware_console", "")).encode()),
            ground_truth_events=events,
            outdir=None if tmp is not None else out, image=image, _machine=m)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _refuse(given: Mapping[str, object], names: Sequence[str], why: str) -> None:
    """Raise ConfigError naming the keywords among ``names`` that :func:`run` was given with
    a value other than their default (``given``: run's locals), and ``why`` they do not
    apply."""
    import inspect
    defaults = {name: p.default for name, p in inspect.signature(run).parameters.items()}
    ignored = [name for name in names if given[name] != defaults[name]]
    if ignored:
        raise ConfigError(f"{', '.join(ignored)}: {why}: leave "
                          f"{'it' if len(ignored) == 1 else 'them'} out")


_FIRMWARE_DRIVER_OPTIONS = ("interval", "random", "filters", "min_latency", "timestamps",
                            "context", "physical", "exclude_kernel", "profiling",
                            "buffer_size", "firmware_path")
"""Keywords of :func:`run` that configure the firmware's SPE driver: a ConfigError with
``firmware=False`` (nothing would apply them)."""

_DRIVER_OPTIONS = ("args",) + _FIRMWARE_DRIVER_OPTIONS + ("firmware", "share", "env", "stdin")
"""Keywords of :func:`run` for the firmware's SPE driver and for Linux programs: a
ConfigError with ``machine=``."""


def _read_summary(outdir: Path) -> dict:
    """summary.json of a run the guest stopped (the session writes it before raising)."""
    import json
    try:
        return json.loads((outdir / "summary.json").read_text())
    except (OSError, ValueError):
        return {}


def _run_linux(program: Path, args, share, env, stdin: bytes, seed: int, opts):
    """A Linux program with its stdio on temporary files: (session or None, error or None,
    stdout bytes, stderr bytes, killed by a signal)."""
    from .linux.process import LinuxOptions
    from .linux.run import run_program
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout, \
            tempfile.TemporaryFile() as ferr:
        fin.write(bytes(stdin))
        fin.flush()
        fin.seek(0)
        lopts = LinuxOptions(argv=[str(program), *map(str, args)],
                             env=[f"{k}={v}" for k, v in (env or {}).items()],
                             share=Path(share) if share is not None else None,
                             stdin_fd=fin.fileno() if stdin else None,
                             stdout_fd=fout.fileno(), stderr_fd=ferr.fileno(), seed=seed)
        session = error = None
        try:
            session = run_program(program, lopts, opts)
        except GuestError as exc:
            error = exc
        fout.seek(0)
        ferr.seek(0)
        stdout, stderr = fout.read(), ferr.read()
    killed = session is not None and session.process.killed_by is not None
    return session, error, stdout, stderr, killed
