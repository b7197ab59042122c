"""The ``spe-emu`` command line: ``run``, ``decode``, ``report``, ``perf-data``.

Exit statuses (README, "Exit statuses"): the guest's own status when it exits; otherwise one
line ``spe-emu: error: ...`` on stderr and :data:`EXIT_ERROR` (125: spe-emu could not do what
was asked: usage, an input file, an option, the output directory), :data:`EXIT_RUNAWAY` (124:
the guest did not exit within --max-insns) or :data:`EXIT_EMULATION` (126: the run stopped on
an error of the guest the emulator cannot continue from, or on a failure of the emulator itself:
summary.json's ``exit_reason`` tells which) or :data:`EXIT_STRICT` (123: under
``--strict``, the guest broke an SPE programming rule). The numbers follow env(1)/timeout(1).
SIGINT or SIGTERM stops a run at its next block boundary, with what it collected written
(``exit_reason`` "interrupted"), and exits with 128 + the signal's number (130, 143), as a
shell reports a process the signal ended; a second one ends spe-emu at once.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import click

from ..arch.cores import CORES, core_preset
from ..arch.cpu_features import CpuFeatures
from ..platform.board import MAX_PES
from ..errors import (DriverRuleBroken, EmulatorError, GuestError, GuestRunaway,
                      RunInterrupted, SpeEmuError, signal_name)
from ..spe.config import (CHOICES, EXTERNAL_ABORT_CHOICES, FEATURES, MODEL_PARAMETERS,
                          SpeConfig)
# (the machine -- spe_emu.session, Unicorn -- is imported by the commands that run one:
# decode, report and perf-data start without it)


EXIT_STRICT = 123
EXIT_RUNAWAY = 124
EXIT_ERROR = 125
EXIT_EMULATION = 126


def _fail(message: str, status: int = EXIT_ERROR) -> None:
    click.echo(f"spe-emu: error: {message}", err=True)
    sys.exit(status)


def _fail_with(exc: SpeEmuError) -> None:
    """One line for a library error, with the status its kind has."""
    status = (128 + exc.signum if isinstance(exc, RunInterrupted) else
              EXIT_RUNAWAY if isinstance(exc, GuestRunaway) else
              EXIT_STRICT if isinstance(exc, DriverRuleBroken) else
              EXIT_EMULATION if isinstance(exc, (GuestError, EmulatorError)) else EXIT_ERROR)
    _fail(str(exc), status)


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # (click >= 8.2)


class _Group(click.Group):
    """Click's own usage errors (unknown option, missing argument) exit with EXIT_ERROR too."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except _NO_ARGS_IS_HELP as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
            sys.exit(0)
        except click.ClickException as exc:
            exc.show()
            sys.exit(EXIT_ERROR)
        except click.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(EXIT_ERROR)


INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM)
INTERRUPT_REPEAT_S = 0.1
"""Seconds between the watcher's stop requests until the run has stopped (the run loop may
overwrite the stop point as it plans its own)."""
INTERRUPT_GRACE_S = 1.0
"""Seconds the run has to stop after the first signal before the main thread is interrupted
where it is: it is then waiting for the host (a guest's read of stdin, GDB's connection),
which a stop of the engine does not reach."""


@contextmanager
def _interruptible():
    """While the block runs, the first SIGINT or SIGTERM stops the run in progress at its next
    block boundary (:func:`spe_emu.cpu.runloop.interrupt_running`, from a watcher thread woken
    through ``signal.set_wakeup_fd``: the main thread may be in Unicorn, running no Python, for
    as long as the guest needs no hook), which then raises RunInterrupted with what it
    collected written. When the main thread has not stopped after INTERRUPT_GRACE_S, it is
    waiting for the host: the watcher signals it again and the handler raises RunInterrupted
    there (the wait fails with it; a run the wait is part of still writes what it collected).
    A second signal from outside ends spe-emu at once: one line on stderr, then the signal's
    default action (the process dies of it; no summary). Not in a thread other than the main
    one (signals are the main thread's), and not for a signal the process was started
    ignoring (``nohup``: it stays ignored, as Python leaves it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from ..cpu.runloop import interrupt_running

    seen = []
    escalate = threading.Event()   # (set by the watcher before it signals the main thread)

    def handler(signum, _frame):
        if escalate.is_set():
            escalate.clear()
            raise RunInterrupted(signum, "while waiting for the host")
        seen.append(signum)
        if len(seen) > 1:
            os.write(2, f"spe-emu: error: interrupted by {signal_name(signum)} again: "
                        f"ended at once\n".encode())
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    done = threading.Event()
    main_ident = threading.main_thread().ident

    def watch():
        signum, first = 0, 0.0
        while not done.is_set():
            if select.select([read_end], [], [], INTERRUPT_REPEAT_S)[0]:
                data = os.read(read_end, 16)
                if data and not signum:
                    signum, first = data[0], time.monotonic()
            if signum:
                interrupt_running(signum)
                if first and time.monotonic() - first > INTERRUPT_GRACE_S and not done.is_set():
                    first = 0.0
                    escalate.set()
                    signal.pthread_kill(main_ident, signum)

    previous = {s: signal.signal(s, handler) for s in INTERRUPT_SIGNALS
                if signal.getsignal(s) is not signal.SIG_IGN}
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="spe-emu signal watcher", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        try:
            with suppress(BlockingIOError):   # (a full pipe wakes it anyway)
                os.write(write_end, b"\0")   # (wakes the watcher's select now: no signal)
            watcher.join()
        finally:
            signal.set_wakeup_fd(previous_fd)
            for s, h in previous.items():
                signal.signal(s, h)
            os.close(read_end)
            os.close(write_end)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("spe_emu")
    except PackageNotFoundError:  # (run from a checkout that is not installed)
        return "unknown (not installed)"


MAX_TRACE_BYTES = 1 << 30
"""Largest trace file ``decode`` and ``report`` read (bytes)."""


def _read_trace(trace: Path) -> bytes:
    """A trace file's bytes: a regular file of at most MAX_TRACE_BYTES (one-line error)."""
    from ..platform.inputs import read_input
    try:
        return read_input(trace, MAX_TRACE_BYTES, "a trace")
    except SpeEmuError as exc:
        _fail_with(exc)


def _check_inputs(*named: tuple[str, Path | None]) -> None:
    """The input files given to options, ``(option, path)``, checked before anything is
    read (spe_emu.platform.inputs: a missing file, or one that is not a regular file such as a named
    pipe or /dev/zero, is one line naming the option)."""
    from ..platform.inputs import check_inputs
    try:
        check_inputs(*named)
    except SpeEmuError as exc:
        _fail_with(exc)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the installed distribution's version (looked up only when asked: it
    costs 25 ms of every run's start otherwise)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"spe-emu {_version()}")
        ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version and exit.")
def main() -> None:
    """Run AArch64 programs with the Arm Statistical Profiling Extension and read the trace."""


@main.command()
@click.argument("image", type=click.Path(), required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--share", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="Linux program: the directory its files live in, also its / and working "
                   "directory (default: no files).")
@click.option("-E", "--env", "env_set", multiple=True, metavar="NAME=VALUE",
              help="Linux program: set an environment variable (repeatable).")
@click.option("-U", "--unset-env", "env_unset", multiple=True, metavar="NAME",
              help="Linux program: remove a variable from the environment (repeatable).")
@click.option("--clear-env", is_flag=True,
              help="Linux program: start from an empty environment (not spe-emu's).")
@click.option("--machine", "machine", default=None, metavar="BOARD",
              help="Boot software built for this board (virt), as qemu-system-aarch64 -M.")
@click.option("--kernel", type=click.Path(path_type=Path), default=None,
              help="With --machine: Linux Image (gzip or not), raw binary or ELF to boot.")
@click.option("--initrd", type=click.Path(path_type=Path), default=None,
              help="With --machine: initial RAM disk.")
@click.option("--append", default="", help="With --machine: kernel command line.")
@click.option("--dtb", type=click.Path(path_type=Path), default=None,
              help="With --machine: use this device tree blob instead of the generated one.")
@click.option("-m", "memory", default=None, metavar="SIZE",
              help="With --machine: RAM size (MiB, or with a K/M/G suffix; default 256M).")
@click.option("--dumpdtb", type=click.Path(path_type=Path), default=None,
              help="With --machine: write the generated device tree blob here and exit.")
@click.option("--counter-hz", "counter_hz", type=click.IntRange(min=1), default=None,
              metavar="HZ",
              help="With --machine: the system counter's frequency (CNTFRQ_EL0; one tick per "
                   "instruction, so also the PE's instructions per second of guest time; "
                   "default the board's: 1 GHz, Armv8.6's).")
@click.option("--smp", "smp", type=click.IntRange(1, MAX_PES), default=None, metavar="N",
              help=f"With --machine: the number of PEs (1..{MAX_PES}), as "
                   f"qemu-system-aarch64 -smp; each has its own SPU, timers and GIC "
                   f"redistributor; PSCI CPU_ON starts PEs 1..N-1 (default 1).")
@click.option("--semihosting-userspace", "semihosting_userspace", is_flag=True,
              help="With --machine: HLT #0xF000 at EL0 is a semihosting call too (QEMU: "
                   "-semihosting-config enable=on,userspace=on); its files land in the "
                   "output directory.")
@click.option("--interval", default=4096, show_default=True,
              help="Sampling interval in operations (multiple of 256).")
@click.option("--seed", default=0, show_default=True, help="Seed of the interval randomiser.")
@click.option("--random/--no-random", default=False, help="PMSIRR_EL1.RND: randomise intervals.")
@click.option("--filter", "filters", default="", help="Record only: load,store,branch.")
@click.option("--min-latency", type=int, default=None, help="PMSLATFR_EL1.MINLAT (cycles).")
@click.option("--timestamps/--no-timestamps", default=True, help="PMSCR_EL1.TS.")
@click.option("--context/--no-context", default=False, help="PMSCR_EL1.CX.")
@click.option("--pa/--no-pa", default=False, help="PMSCR_EL1.PA (physical addresses).")
@click.option("--exclude-kernel", is_flag=True, help="Clear PMSCR_EL1.E1SPE (EL0 only).")
@click.option("--no-profiling", is_flag=True,
              help="Tell the firmware not to enable SPE (the SPU is still present).")
@click.option("--buffer-size", default=64 << 10, show_default=True,
              help="Profiling Buffer size in bytes (multiple of 4096).")
@click.option("--boot-el", type=int, default=1, show_default=True,
              help="EL a bare-metal image starts at (with --no-firmware).")
@click.option("--no-firmware", is_flag=True, help="Boot IMAGE directly as a bare-metal program.")
@click.option("--firmware", "firmware_path", type=click.Path(path_type=Path), default=None,
              help="Use another firmware image.")
@click.option("--max-insns", type=click.IntRange(min=1), default=None,
              help="Stop with an error after this many instructions (default: 2000000000 "
                   "for a bare-metal image or firmware guest; none with --machine or for a "
                   "Linux program, as QEMU).")
@click.option("--mode", type=click.Choice(["fast", "reference", "raw"]), default="fast",
              show_default=True,
              help="Run loop: reference = per-instruction oracle (slow); raw = no SPE model, "
                   "a speed baseline that also skips the SIMD&FP traps, alignment faults "
                   "(SCTLR_ELx.A, Device memory), SP alignment and Illegal Execution state "
                   "checks (docs/model.md \"Exception classes\").")
@click.option("-o", "--out", "outdir", type=click.Path(path_type=Path), default=Path("spe-out"),
              show_default=True, help="Output directory (trace, summary.json, guest files).")
@click.option("--perf-data", "perf_data", is_flag=True,
              help="Also write perf.data (for perf report/script) into the output directory.")
@click.option("--ground-truth", "ground_truth", is_flag=True,
              help="Also count every executed instruction per PC (ground_truth.json).")
@click.option("--spe-feature", "spe_features", multiple=True, metavar="NAME=VALUE",
              help="Set an SPE ID-register choice (repeatable; docs/model.md): "
                   + "; ".join(f"{f.name} ({f.register}, default "
                               f"{getattr(SpeConfig(), f.attr)}): {f.doc}" for f in FEATURES)
                   + ".")
@click.option("--spe-external-abort", "spe_external_abort",
              type=click.Choice(EXTERNAL_ABORT_CHOICES), default=None,
              help="What an External abort on a Profiling Buffer write does (Arm ARM D17.8.4; "
                   "docs/model.md): report = a management event with PMBSR_EL1.EA "
                   "(default below FEAT_SPEv1p3), ignore (default from FEAT_SPEv1p3), serror "
                   "= a physical SError exception, fault = an abort on a translation table "
                   "walk is an MMU fault event.")
@click.option("--gdb", "gdb_port", type=click.IntRange(0, 65535), default=None,
              metavar="PORT",
              help="Wait for GDB (target remote :PORT) on 127.0.0.1 before the first "
                   "instruction; 0 = any free port (printed). Not with --mode reference or "
                   "--ground-truth.")
@click.option("--gdb-stop-on-exception", "gdb_stop_on_exception", is_flag=True,
              help="With --gdb: stop at every exception the PE takes (also: monitor "
                   "stop-on-exception on|off).")
@click.option("--spe-option", "spe_options", multiple=True, metavar="NAME=VALUE",
              help="Set a CONSTRAINED UNPREDICTABLE or IMPLEMENTATION DEFINED choice of the "
                   "SPU (repeatable; docs/model.md): "
                   + "; ".join(f"{name}: {doc}" for name, doc in CHOICES.items()) + ".")
@click.option("--spe-model", "spe_model", multiple=True, metavar="NAME=VALUE",
              help="Set a parameter of the micro-architecture model behind record events and "
                   "latencies (repeatable; docs/model.md 'Events and latency model'): "
                   + "; ".join(f"{name}: {doc}" for name, doc in MODEL_PARAMETERS.items())
                   + ".")
@click.option("--strict", is_flag=True,
              help="Stop the run when the guest breaks an SPE programming rule (the "
                   "driver-bug reporter, docs/model.md 'Driver rules'): exit status 123.")
@click.option("--core", "core", default=None, metavar="NAME",
              help="A core preset (docs/model.md 'Core presets'): its MIDR_EL1, SPU ID fields "
                   "and model geometry and latencies, each from a public source; "
                   "--spe-feature and --spe-model override them. One of: "
                   + ", ".join(CORES) + ".")
@click.option("--cpu-feature", "cpu_features", multiple=True, metavar="NAME=on|off",
              help="A CPU feature choice of the board (repeatable; docs/linux.md): csv3 "
                   "(ID_AA64PFR0_EL1.CSV3 = 1, default on), e0pd (FEAT_E0PD: "
                   "ID_AA64MMFR2_EL1.E0PD = 1 and TCR_EL1.E0PDn, default on), pauth (FEAT_PAuth "
                   "of Unicorn's CPU; off hides it, like QEMU's -cpu max,pauth=off; default on).")
def run(image, args, share, env_set, env_unset, clear_env, machine, kernel, initrd, append,
        dtb, memory, dumpdtb, semihosting_userspace, interval, seed, random, filters,
        min_latency, timestamps, context, pa, exclude_kernel, no_profiling, buffer_size, boot_el, no_firmware,
        firmware_path, max_insns, mode, outdir, perf_data, ground_truth,
        spe_features, spe_external_abort, gdb_port, gdb_stop_on_exception, spe_options,
        spe_model, strict, core, cpu_features, counter_hz, smp) -> None:
    """Run IMAGE with SPE enabled and write the trace plus a JSON summary into the output
    directory. IMAGE is a static AArch64 Linux program (run like qemu-aarch64: spe-emu run
    [OPTIONS] PROGRAM [-- ARGS...]; its stdin, stdout, stderr and exit status are the
    command's), or a guest linked for the firmware's guest region; or, with --machine virt
    --kernel FILE, boot software built for QEMU's virt board (console on stdout and
    console.log). With --gdb PORT, GDB debugs the run (README "Debugging with GDB")."""
    stub = None
    if gdb_port is not None:
        from .gdbstub import GdbStub
        if mode == "reference" or ground_truth:
            _fail("--gdb stops the run with the native counter: not with --mode reference "
                  "or --ground-truth")
        stub = GdbStub(gdb_port, gdb_stop_on_exception)
    elif gdb_stop_on_exception:
        _fail("--gdb-stop-on-exception needs --gdb PORT")
    try:
        with _interruptible():
            _run(image, args, share, env_set, env_unset, clear_env, machine, kernel, initrd,
                 append, dtb, memory, dumpdtb, semihosting_userspace, interval, seed, random,
                 filters, min_latency, timestamps, context, pa, exclude_kernel, no_profiling,
                 buffer_size, boot_el, no_firmware, firmware_path, max_insns, mode, outdir,
                 perf_data, ground_truth, spe_features, spe_external_abort,
                 stub.attach if stub is not None else None, spe_options, strict,
                 cpu_features, spe_model, counter_hz, core, smp)
    except RunInterrupted as exc:   # (outside the run: its outputs' writing, GDB's connection)
        _fail_with(exc)
    except OSError as exc:   # (--gdb: the port cannot be bound, the connection failed)
        if stub is None:
            raise
        _fail(f"--gdb {gdb_port}: {exc.strerror or exc}")
    finally:
        if stub is not None:
            stub.finish()


def _run(image, args, share, env_set, env_unset, clear_env, machine, kernel, initrd, append,
         dtb, memory, dumpdtb, semihosting_userspace, interval, seed, random, filters,
         min_latency, timestamps, context, pa, exclude_kernel, no_profiling, buffer_size,
         boot_el, no_firmware, firmware_path, max_insns, mode, outdir, perf_data, ground_truth,
         spe_features, spe_external_abort, attach, spe_options=(), strict=False,
         cpu_features=(), spe_model=(), counter_hz=None, core=None, smp=None) -> None:
    """``run``'s body; ``attach``: the GDB stub's, or None."""
    from ..linux.elf import is_linux_program
    from ..session import GUEST_REGION, RunOptions, default_firmware, run_image
    program_name = image  # (argv[0] of a Linux program: as given, "./a.out" stays so)
    try:
        spe, cpu = SpeConfig(external_abort=spe_external_abort, strict=strict), CpuFeatures()
        if core is not None:
            spe, cpu = core_preset(core).apply(spe, cpu)
        spe = spe.with_features(spe_features).with_options(spe_options).with_model(spe_model)
        cpu = cpu.with_options(cpu_features)
    except SpeEmuError as exc:
        _fail_with(exc)
    image = Path(image) if image is not None else None
    if machine is not None or kernel is not None:
        if image is not None:
            _fail(f"IMAGE ({image}) and --kernel are exclusive: with --machine, give the "
                  f"program as --kernel")
        _refuse_given(MACHINE_IGNORES, "with --machine the guest's own driver programs SPE "
                      "(and has no firmware, files or environment of spe-emu's)")
        if perf_data and mode == "raw":
            _fail("--perf-data needs a trace: not with --mode raw")
        _run_machine(machine or "virt", kernel, initrd, append, dtb, memory, dumpdtb,
                     boot_el, max_insns, mode, outdir, seed, spe, ground_truth, perf_data,
                     semihosting_userspace, attach, cpu, counter_hz, smp)
        return
    _refuse_given(("counter_hz",), "it sets the counter of the --machine board")
    _refuse_given(("smp",), "spe-emu run of a bare-metal image or a Linux program has one PE")
    if image is None:
        _fail("missing IMAGE (or --machine virt --kernel FILE)")
    if no_firmware:
        _refuse_given(FIRMWARE_DRIVER_OPTIONS, "with --no-firmware the image programs SPE "
                      "itself (the firmware's driver, which these options configure, is not "
                      "loaded)")
    if perf_data and mode == "raw":
        _fail("--perf-data needs a trace: not with --mode raw")
    _check_inputs(("--firmware", firmware_path))
    linux = not no_firmware and is_linux_program(image, GUEST_REGION)
    if not linux and (args or share or env_set or env_unset or clear_env):
        _fail(f"{image}: arguments, --share and the environment options apply to Linux "
              f"programs; this is a guest for the firmware's guest region")
    opts = RunOptions(interval=interval, seed=seed, random=random,
                      filters=tuple(f for f in filters.split(",") if f),
                      min_latency=min_latency, timestamps=timestamps, context=context,
                      physical=pa, el1=not exclude_kernel, profiling=not no_profiling,
                      buffer_size=buffer_size,
                      boot_el=boot_el, firmware=not no_firmware, firmware_path=firmware_path,
                      max_insns=max_insns, mode=mode, outdir=outdir,
                      ground_truth=ground_truth, spe=spe, attach=attach, cpu=cpu)
    if linux:
        _run_linux(image, program_name, args, share, env_set, env_unset, clear_env, opts,
                   perf_data)
        return
    from rich.console import Console  # (rich: about 20 ms; not imported by --machine runs)
    from rich.table import Table
    console = Console(stderr=True)

    def echo(data: bytes) -> None:
        sys.stdout.write(data.decode("utf-8", errors="replace"))
        sys.stdout.flush()

    try:
        with console.status("running...") as status:
            def progress(n: int) -> None:
                status.update(f"running... {n / 1e6:.0f} M instructions")
            session = run_image(image, opts, console=echo, progress=progress)
    except SpeEmuError as exc:
        _fail_with(exc)
    r = session.result
    _say_firmware_failure(session.summary)
    table = Table(title=f"spe-emu run {image}", show_header=False)
    for name, value in [("instructions retired", r.instructions),
                        ("sample population", r.population),
                        ("samples taken", r.samples),
                        ("records written", r.records_written),
                        ("records filtered out", r.filtered_out),
                        ("buffer-full interrupts handled", r.irqs_taken),
                        ("trace bytes", session.summary["trace_bytes"]),
                        ("guest exit status", r.exit_status)]:
        table.add_row(name, str(value))
    Console().print(table)
    # (a bare-metal image hands no trace to the host unless it writes one through
    # semihosting: only a trace file that exists is named)
    trace = (f"trace: {session.trace_path}  " if session.trace_path.exists()
             else "trace: none written  ")
    click.echo(f"{trace}summary: {session.outdir / 'summary.json'}")
    if perf_data:
        images = [image] + ([firmware_path or default_firmware()] if not no_firmware else [])
        click.echo(f"perf.data: {_write_perf_data(session, images, interval)}")
    _exit_with(r.exit_status)


REPORT_PIPE_WIDTH = 200
"""Columns of ``spe-emu report`` when its output is not a terminal and COLUMNS is not set
(rich's default is then 80)."""

FIRMWARE_FAILURES = ("spe_fw: fatal", "spe_fw: guest exception")
"""The firmware's lines that say why it ended a run (docs/design.md): the CLI repeats them on
stderr; its other lines stay in summary.json's ``firmware_console``."""


def _say_firmware_failure(summary: dict) -> None:
    """Repeat on stderr, as ``spe-emu: LINE``, the firmware's lines that say why it ended the
    run (:data:`FIRMWARE_FAILURES`), if any."""
    for line in summary.get("firmware_console", "").splitlines():
        if line.startswith(FIRMWARE_FAILURES):
            click.echo(f"spe-emu: {line}", err=True)


def _refuse_given(names: tuple[str, ...], why: str) -> None:
    """Fail (one line, EXIT_ERROR) naming the options among ``names`` (``run``'s parameter
    names) given on the command line, as the user spells them (e.g.
    ``--timestamps/--no-timestamps``), and ``why`` they do not apply."""
    ctx = click.get_current_context()
    params = {p.name: p for p in ctx.command.params}
    given = ["/".join([max(params[name].opts, key=len), *params[name].secondary_opts])
             for name in names
             if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT]
    if given:
        _fail(f"{', '.join(given)}: {why}: leave {'it' if len(given) == 1 else 'them'} out")


FIRMWARE_DRIVER_OPTIONS = ("interval", "random", "filters", "min_latency", "timestamps",
                           "context", "pa", "exclude_kernel", "no_profiling", "buffer_size",
                           "firmware_path")
"""``run`` options that configure the bundled firmware's SPE driver: refused with
``--no-firmware`` (issue 16), where nothing would apply them."""

MACHINE_IGNORES = FIRMWARE_DRIVER_OPTIONS + ("no_firmware", "share", "env_set", "env_unset",
                                           "clear_env")
"""``run`` options for the firmware's SPE driver and for Linux programs: refused with
``--machine`` (the guest programs SPE itself)."""


def _run_linux(program, program_name, args, share, env_set, env_unset, clear_env, opts,
               perf_data=False) -> None:
    """``run PROGRAM [-- ARGS]``: the program's stdio is the command's, nothing else is printed
    unless the run fails (the firmware's report and the counts are in summary.json); the
    exit status is the program's."""
    import os

    from ..linux.process import LinuxOptions
    from ..session import default_firmware
    from ..linux.run import run_program
    env = {} if clear_env else dict(os.environ)
    for name in env_unset:
        env.pop(name, None)
    for item in env_set:
        name, eq, value = item.partition("=")
        if not eq or not name:
            _fail(f"-E {item!r}: use NAME=VALUE")
        env[name] = value
    lopts = LinuxOptions(argv=[program_name, *args], env=[f"{k}={v}" for k, v in env.items()],
                         share=share, seed=opts.seed)
    sys.stdout.flush()
    try:
        session = run_program(program, lopts, opts)
    except SpeEmuError as exc:
        _fail_with(exc)
    r = session.result
    fault = session.process.fault
    if fault is not None:  # (qemu-aarch64 says "uncaught target signal")
        click.echo(f"spe-emu: guest killed by {fault['signal']} at PC {fault['elr']:#x} "
                   f"(ESR {fault['esr']:#x}, FAR {fault['far']:#x})", err=True)
    elif session.process.exit_status is None and session.process.killed_by is None:
        _say_firmware_failure(session.summary)   # (the firmware ended the run)
    if perf_data:
        _write_perf_data(session, [program, opts.firmware_path or default_firmware()],
                         opts.interval)
    _exit_with(r.exit_status)


def _write_perf_data(session, images: list[Path], interval: int,
                     comm: str | None = None) -> Path:
    """perf.data of ``session``'s trace in its output directory, naming ``images``' symbols
    (``--perf-data``) and ``comm`` (default: the first image's name); returns its path. A
    failure is the command's one-line error."""
    from .perfdata import PERF_DATA_NAME, write_perf_data
    try:
        trace = session.trace_path.read_bytes() if session.trace_path.exists() else b""
        return write_perf_data(session.outdir / PERF_DATA_NAME, trace, images,
                               sample_period=interval, comm=comm,
                               midr=session.machine.cfg.cpu.midr)
    except (SpeEmuError, OSError) as exc:
        _fail(f"perf.data: {exc}")


def _warn_without_patches() -> None:
    """One stderr line when this process runs on the unicorn binding's own library, without
    patches/unicorn (an install where the build could not run, or the source tree of a
    checkout installed with ``pip install .``): the board then has QEMU's PMU instead of
    spe-emu's PMUv3 and slower paths. summary.json's ``unicorn_patches`` says the same."""
    from .. import native
    if not native.unicorn_patches():
        click.echo("spe-emu: warning: running on the unicorn binding's own library, without "
                   "patches/unicorn (QEMU's PMU, not spe-emu's PMUv3): see README "
                   "\"Installing\"", err=True)


def _run_machine(board, kernel, initrd, append, dtb, memory, dumpdtb, boot_el, max_insns,
                 mode, outdir, seed, spe=None, ground_truth=False, perf_data=False,
                 semihosting_userspace=False, attach=None, cpu=None,
                 counter_hz=None, smp=None) -> None:
    """``run --machine``: the console goes to stdout as the guest writes it; the exit status
    is the guest's (0 after PSCI SYSTEM_OFF). With ``perf_data``: ``spe.trace`` (every
    record the SPU wrote into the guest's Profiling Buffer) and perf.data of it, naming the
    kernel's symbols when it is an ELF."""
    from ..session import KernelOptions, RunOptions, parse_ram_size, run_kernel

    def echo(data: bytes) -> None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()

    try:
        kopts = KernelOptions(board=board, kernel=kernel, initrd=initrd, append=append,
                              dtb=dtb, dumpdtb=dumpdtb, trace=perf_data,
                              semihosting_userspace=semihosting_userspace,
                              counter_hz=counter_hz, smp=smp or 1)
        if memory is not None:
            kopts.ram_size = parse_ram_size(memory)
        kopts.board_spec()  # (an unknown --machine is refused before anything is read)
        _check_inputs(("--kernel", kernel), ("--initrd", initrd), ("--dtb", dtb))
        opts = RunOptions(boot_el=boot_el, firmware=False, max_insns=max_insns, mode=mode,
                          outdir=outdir, seed=seed, spe=spe or SpeConfig(),
                          ground_truth=ground_truth, attach=attach,
                          cpu=cpu or CpuFeatures())
        opts.validate()
        _warn_without_patches()
        session = run_kernel(kopts, opts, console=echo, stdin=sys.stdin.buffer)
    except SpeEmuError as exc:
        _fail_with(exc)
    if dumpdtb is not None:
        return
    if perf_data:
        images = [kernel] if session.summary.get("format") == "elf" else []
        _write_perf_data(session, images, 0, comm=Path(kernel).stem)
    _exit_with(session.result.exit_status)


def _exit_with(status: int | None) -> None:
    """The guest's non-zero exit status as the command's (1 when it does not fit 1..255)."""
    if status:
        sys.exit(status if 0 < status < 256 else 1)


@main.command()
@click.argument("trace", type=click.Path(path_type=Path))
def decode(trace: Path) -> None:
    """Print every packet of TRACE, one per line (perf report -D style)."""
    from .decode import dump_text
    data = _read_trace(trace)
    out = click.get_text_stream("stdout")
    for chunk in dump_text(data):
        out.write(chunk)


@main.command()
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--image", type=click.Path(path_type=Path), default=None,
              help="The ELF the trace was taken from (symbols, source lines, disassembly); "
                   "without it: addresses only.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="Rows per table (>= 1).")
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON instead.")
@click.option("--annotate", "function", default=None, metavar="FUNCTION",
              help="Print FUNCTION's disassembly with source lines and samples (needs --image).")
@click.option("--ground-truth", "ground_truth", type=click.Path(path_type=Path), default=None,
              metavar="FILE", help="Exact counts of spe-emu run --ground-truth (default: "
                                   "ground_truth.json next to TRACE, when present).")
@click.option("--plot", "plot_dir", type=click.Path(path_type=Path), default=None,
              metavar="DIR", help="Also write plots (PNG and SVG) into DIR.")
@click.option("--html", "html_file", type=click.Path(path_type=Path), default=None,
              metavar="FILE", help="Also write a self-contained HTML report page.")
def report(trace: Path, image: Path | None, top: int, as_json: bool, function: str | None,
           ground_truth: Path | None, plot_dir: Path | None, html_file: Path | None) -> None:
    """Where SPE's samples fall (functions, source lines, PCs), their latency, events and data
    addresses, and the operation mix, of TRACE (perf report --mem-mode / annotate / c2c)."""
    import json

    from rich.console import Console

    from .report import (GROUND_TRUTH_NAME, annotate, build_report, load_ground_truth,
                         load_ground_truth_events, render_report)
    data = _read_trace(trace)
    _check_inputs(("--image", image), ("--ground-truth", ground_truth))
    try:
        if function is not None:
            if image is None:
                _fail("--annotate needs --image")
            annotate(data, image, function, Console())
            return
        if ground_truth is None and (trace.parent / GROUND_TRUTH_NAME).exists():
            ground_truth = trace.parent / GROUND_TRUTH_NAME
        exact = load_ground_truth(ground_truth) if ground_truth is not None else None
        events = load_ground_truth_events(ground_truth) if ground_truth is not None else None
        rep = build_report(data, image, ground_truth=exact, check_image=True,
                           ground_truth_events=events)
        summary_path = trace.parent / "summary.json"   # (the run's: the model it used)
        if summary_path.is_file():
            try:
                rep.model_config = json.loads(summary_path.read_text()).get("model_config")
            except (OSError, ValueError):
                rep.model_config = None
        wrote = []
        if plot_dir is not None or html_file is not None:
            from .plots import write_html, write_plots
            if plot_dir is not None:
                paths = write_plots(rep, plot_dir)
                wrote.append(f"{len(paths)} plot files in {plot_dir}")
            if html_file is not None:
                wrote.append(f"HTML page {write_html(rep, html_file, top=top)}")
    except SpeEmuError as exc:
        _fail_with(exc)
    if as_json:
        click.echo(json.dumps(rep.to_json(), indent=1))
    else:
        # (piped, with no COLUMNS: wide enough that names are not shortened at 80 columns)
        wide = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
        render_report(rep, Console(width=REPORT_PIPE_WIDTH if wide else None), top=top)
    for what in wrote:   # (on stderr: the report, or its JSON, stays clean on stdout)
        click.echo(f"spe-emu: wrote {what}", err=True)


@main.command("perf-data")
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--image", "images", type=click.Path(path_type=Path), multiple=True,
              required=True, help="An ELF the trace samples (guest, firmware); repeatable.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=Path("perf.data"),
              show_default=True, help="The perf.data file to write.")
@click.option("--comm", default=None,
              help="Command name perf shows (default: the first image's name).")
def perf_data(trace: Path, images: tuple[Path, ...], output: Path, comm: str | None) -> None:
    """Wrap TRACE into a perf.data file for perf report, perf script and perf report -D."""
    from .perfdata import write_perf_data
    data = _read_trace(trace)
    _check_inputs(*(("--image", path) for path in images))
    try:
        write_perf_data(output, data, images, comm=comm)
    except SpeEmuError as exc:
        _fail_with(exc)
    except OSError as exc:
        _fail(f"cannot write {output}: {exc.strerror}")


if __name__ == "__main__":
    main()
