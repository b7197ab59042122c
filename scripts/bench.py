#!/usr/bin/env python3
"""Benchmark spe_emu against raw Unicorn, in one process and one run.

For every guest (guests/*.elf, or the ones named with --guest) it measures

* ``raw``: Unicorn with no SPE model attached (``RunOptions(mode="raw")``; PMSVer reads 0 and
  the firmware runs the guest without profiling),
* ``spe``: the product's run loop with SPE enabled at each interval (1024, 4096, 65536), with
  the speed option ``SpeConfig(model_feed="sampled")`` (the model sees the sampled
  operations only), whose targets these rows keep,
* ``spe-disabled``: the product's run loop with profiling disabled (``profiling=False``) and
  the sampled model (with the default ``every`` the model is fed while profiling is off too,
  at about the ``spe-every`` row's cost),
* ``spe-every``: SPE enabled at interval 4096 with the default ``model_feed="every"`` (every
  data access and branch feeds the micro-architecture model through the native memory and
  block hooks; docs/model.md "Events and latency model"), with issue 26's target: at most
  1.3x the ``spe@4096`` row's time; with ``--sampled-anchor PYTHON`` also at most 1.3x the
  time of the sampled mode of the tree issue 26 measured as "today's" (commit 7ff7996,
  installed by scripts/make-bench-anchor.sh), run by scripts/bench_anchor.py in that
  interpreter as one more call of each repeat (its own in-process timing, after a warm-up),
* ``reference``: the per-instruction Python oracle (interval 4096, run once: it is slow),

and prints a table of MIPS, ratio to raw, per-sample cost and peak RSS, then one PASS/FAIL line
per target. Each run is one ``run_image`` call timed with ``time.perf_counter()`` (machine set-up,
image loading and the trace file included, the same for every mode). Before the counted runs
every guest/mode pair gets one warm-up run that is not counted; the counted runs of a guest are
interleaved across modes: each repeat runs every mode once, back to back (raw, spe-disabled,
then the spe intervals; in reverse order on every other repeat), and medians over the repeats
are reported. Comparisons between modes are made within a repeat: the host's speed changes
between repeats (on a shared machine it switches by up to 1.6x within seconds), and the median
of two modes' times taken separately can fall on either side of such a switch.

Definitions:
    MIPS            instructions / median seconds. The count of the same guest's
                    spe-disabled run is used for raw mode too (same firmware and guest path,
                    apart from one firmware console line).
    ratio_to_raw    median over the repeats of that repeat's MIPS / its raw MIPS (the same
                    guest), i.e. of (t_raw / t) * (instructions / raw instructions).
    per_sample_us   median over the repeats of (t_spe - t_spe_disabled), / samples * 1e6 (spe
                    rows only).
    peak_rss_mb     the process's peak RSS during that mode's runs (max over its runs), in MiB:
                    the high-water mark is reset (/proc/self/clear_refs, "5") after a
                    gc.collect() before every run and VmHWM read after it. Where that is not
                    available, ru_maxrss (the process-lifetime maximum) is reported instead and
                    the output says so.

Memory check: one guest (--memory-guest, default the selected guest with the most
instructions) is also run with a 4 KiB buffer at interval 256 (many records, many PMBIRQs)
and with the default buffer at interval 65536 (few records); the target is that the first run's
RSS growth over its starting RSS exceeds the second's by at most --rss-tolerance-mb. A control
run (the first configuration with --min-latency 4095, so the same samples are taken but every
record is filtered out) tells growth that follows records from growth that follows samples.

Timer interrupts (guest ``virt-timer``): examples/virt-timer built with the Debian cross
compiler (aarch64-linux-gnu-gcc) into the run's temporary directory with -DTICKS=--timer-ticks
and -DPERIOD_US=--timer-period-us, then run on the virt board by spe_emu (in this process,
``run_kernel`` with the options of ``spe-emu run --machine virt --kernel IMAGE``) and by
qemu-system-aarch64 (``-M virt,gic-version=3 -cpu max -nographic -kernel IMAGE``, a
subprocess), one warm-up each, then each repeat runs both back to back (the order reversed on
every other repeat). Both must print "timer interrupts: TICKS". One row:

    irqs_per_s      TICKS / median seconds, per emulator. spe_emu's time is the run_kernel
                    call (machine set-up and image loading included, as in the rows above);
                    QEMU's is the subprocess's wall time (process start-up included: about
                    0.05 s, so TICKS should make a QEMU run last a second or more).
    ratio_to_qemu   median over the repeats of that repeat's spe_emu rate / its QEMU rate.

QEMU's generic timer follows host time unless it counts instructions: by default QEMU runs with
``-icount shift=0,sleep=off`` (virtual time from instructions; a PE waiting in WFI jumps to the
next timer deadline), the model spe_emu's virtual clock follows, so both rates measure the
emulator's cost per interrupt. With ``--qemu-clock host`` QEMU's counter follows host time and
its rate cannot exceed 1e6 / PERIOD_US interrupts per second, however fast QEMU is. The row is
skipped, with the reason printed, when the cross compiler is missing, and its QEMU half when
qemu-system-aarch64 is; it has no target (it never makes --check fail).

Exceptions (guest ``exceptions``): examples/exceptions built three times with the Debian cross
compiler: with -DSVC_ROUNDS=--svc-rounds (EL0 SVC -> EL1 -> ERET round trips), with
-DIRQ_ROUNDS=--irq-rounds (SGIs generated through ICC_SGI1R_EL1, each taken, acknowledged with
ICC_IAR1_EL1, ended with ICC_EOIR1_EL1 and returned from) and with neither (the baseline: boot,
console, power-off). Each repeat runs the three on spe_emu (``run_kernel`` in this process) and
on qemu-system-aarch64 (``-M virt,gic-version=3 -cpu max``, a subprocess; no -icount: nothing
here waits for time), back to back. One row:

    svc_us, irq_us  per side, median over the repeats of (t_run - t_baseline) / rounds: the
                    cost of one round trip in microseconds.
    ratio_to_qemu   spe_emu's cost / QEMU's (median of the per-repeat ratios).

Targets (issue 13): svc_us <= 2 and irq_us <= 5 on spe_emu. The row is skipped (SKIP) without
the cross compiler; its QEMU half without QEMU.

Linux user mode (guest ``linux-user``): examples/linux-user/bench.c built with
``aarch64-linux-gnu-gcc -static -O2`` and run with the argument --linux-n (200,000 numbers
sorted, hashed and formatted with glibc) on six sides:

    qemu          qemu-aarch64 PROGRAM N (a subprocess)
    qemu-plugin   qemu-aarch64 -cpu cortex-a57 -plugin cache_plugin.so,out=plugin.json PROGRAM
                  N with an empty environment: the project's own cache and TLB model
                  (tests/model_check/cache_plugin.c, built with the host cc -shared -fPIC -O2
                  -fvisibility=hidden as tests/test_model_crosscheck.py does) run on every data
                  access, QEMU's nearest to spe-emu's default model feed
    raw           spe-emu, ``RunOptions(mode="raw")``: no SPE model attached
    off           spe-emu, profiling off (the default model feed, ``every``)
    spe           spe-emu, profiling on at interval 4096, the default ``model_feed="every"``
    sampled       spe-emu, as spe with ``SpeConfig(model_feed="sampled")``
    anchor        with --sampled-anchor: the sampled mode of commit 7ff7996, timed by
                  scripts/bench_anchor.py in that interpreter (as sampled, in its process)

(spe-emu: ``spe_emu.linux.run.run_program`` in this process, stdout to a file); all must print
the same checksum line. One warm-up each, then every repeat runs all of them back to back
(order reversed on every other repeat). One row:

    qemu_s, qemu_plugin_s, raw_s, spe_off_s, spe_s, spe_sampled_s
                               median wall seconds (process start-up included for QEMU,
                               machine set-up for spe-emu).
    speed_vs_qemu_off/_spe     median over the repeats of t_qemu / t_spe-emu: spe-emu's speed
                               as a fraction of qemu-aarch64's (1.0 = as fast).
    every_vs_sampled           median over the repeats of t_spe / t_sampled: what feeding the
                               model every access costs over feeding it the samples only.
    every_vs_qemu_plugin       median of t_spe / t_qemu-plugin: spe-emu with its model fed
                               every access against qemu-aarch64 running a cache model on
                               every access.
    every_vs_raw               median of t_spe / t_raw (reported, no target).
    anchor_sampled_s,          with --sampled-anchor: the anchor's median seconds and the
    every_vs_anchor            median of t_spe / t_anchor.

Targets (issue 26): every_vs_sampled <= 1.3, every_vs_qemu_plugin <= 1.5 and every_vs_anchor
<= 1.3 (SKIP where not measured). The row is skipped with its reason without the cross
compiler; its QEMU sides without qemu-aarch64, and the plugin side without a host C compiler.

Trace decoding (guest ``decoder``): a trace of --decode-mib MiB (default 18): the whole trace
of sort at interval 256 (run in this process) repeated, and the same bytes wrapped into a
perf.data (spe_emu.tools.perfdata). Every repeat runs, as
subprocesses with stdout to /dev/null, back to back: ``spe-emu decode TRACE``, ``spe-emu
report TRACE --image guests/sort.elf`` and ``perf report -D -i perf.data`` (Debian's
linux-perf). One row:

    decode_s, report_s, perf_s     median wall seconds (process start-up included).
    decode_vs_perf, report_vs_perf median over the repeats of t_perf / t_spe-emu (1.0 = as
                                   fast as perf; above 1 faster).

Target: decode and report at least as fast as ``perf report -D`` on the same machine (issue
17); skipped with its reason when perf is not installed.

Linux boot (guest ``linux-boot``): Debian 12's stock arm64 kernels and the ``probe``
initramfs that scripts/build_linux_guest.py cached, one kernel per BOOT_KERNELS entry (key
``kernel``): ``6.1`` (the default build: ``$SPE_EMU_LINUX_GUEST``, default
~/.cache/spe_emu/linux/guest), ``6.12`` and ``6.12-16k`` (``--kernel-package
linux-image-6.12-arm64`` and ``linux-image-6.12-arm64-16k``: build_linux_guest.guest_dir, in
``$SPE_EMU_LINUX_CACHE``, default ~/.cache/spe_emu/linux, then guest-PACKAGE). Command line
``console=ttyAMA0``, booted to PSCI SYSTEM_OFF by ``spe-emu run --machine virt -m 1G`` (with a
generous --max-insns, a hang guard: --machine has no budget by default) and by
``qemu-system-aarch64 -M virt,gic-version=3 -m 1G -nographic -nic none``, both as subprocesses,
in two configurations per kernel: PAuth hidden on both (``--cpu-feature pauth=off`` / ``-cpu
max,pauth=off``) and each CPU's default (``-cpu max``). spe-emu's run must show the SPE
driver's probe line (BOOT_PROBED: 6.1's "probed for CPUs", 6.12's "probed SPEv1.0 for CPUs"),
both must print "reboot: Power down" and exit with status 0. --boot-repeats (default 1, no
warm-up) repeats, each booting both sides back to back. Rows (one per kernel and
configuration):

    spe_emu_wall_s, qemu_wall_s    median wall seconds (process start-up included)
    spe_emu_cpu_s, qemu_cpu_s      median CPU seconds, user + system (getrusage of children)
    wall_ratio, cpu_ratio          median over the repeats of spe-emu's / QEMU's

The 6.1 kernel (BOOT_SMP_KERNEL) is also booted on four PEs (config ``smp4-pauth-hidden``:
``--smp 4`` against QEMU's ``-smp 4 -accel tcg,thread=single``, the single-threaded
round-robin TCG spe-emu's scheduler follows), PAuth hidden on both.

Target (issue 27; issue 14's was 2x on 6.1): wall_ratio <= 1.5 with PAuth hidden, one target
per kernel; issue 28: wall_ratio <= 2 for the four-PE boot. A kernel whose guest is not built
has its rows skipped with the command that builds it (and QEMU's half without QEMU);
--no-linux-boot leaves the rows out.

perf record in the Linux guest (guest ``linux-perf``), two parts, both on the 6.1 guest's
files unless said otherwise and PAuth hidden on both sides (PERF_CONFIG, the boot row's first
configuration):

1. Phases: the guest's ``perf.cpio.gz`` with a timing ``/init`` appended
(build_linux_guest.timing_init and init_overlay), booted as above on spe-emu and on QEMU.
The guest runs each phase twice and times the second run: the workload alone, then for each
event of PERF_EVENTS ``perf record -e EVENT -c N -o /tmp/perf.data -- true`` (perf's own cost)
and ``... -- WORKLOAD``; QEMU has no SPE, so its row is the software event's. --boot-repeats
boots of each side. Rows (one per side and event), medians:

    *_host_s          host wall seconds between the console lines around the timed run
    *_guest_ms        the guest's /proc/uptime difference (spe-emu: one tick per instruction
                      or WFI-skipped tick at 1 GHz)
    *_busy_ms         the same less /proc/uptime's idle column (spe-emu: instructions / 1e6)
    record_ratio_*, true_ratio_*   perf record of the workload, of ``true``, / the workload
    added_ratio_host  (record - true) / the workload, host wall: what recording adds

Target (issue 14): record_ratio_host <= 3 for arm_spe_0 at -c 4096.

2. The perf variant end to end (mode ``perf-variant``, one row per VARIANT_KERNELS entry: 6.1
and 6.12, 4 KiB pages): ``perf.cpio.gz`` as built, with its own ``/init`` (insmod, the
workload alone, ``perf record -- true`` twice, ``perf record`` of the workload, ``perf
report`` twice, ``perf script``, ``semihost-put perf.data``), booted to power-off on spe-emu
(arm_spe_0, the /init's default event; ``--semihosting-userspace``) and on QEMU running the
same /init with ``spe_event=task-clock`` on its command line (``-semihosting-config
enable=on,userspace=on,target=native``), --boot-repeats boots of each side, back to back.
Each boot must record its event (perf record exit 0), run perf script, send perf.data and
power off with status 0. Columns as the boot rows' (wall and CPU seconds, paired ratios),
plus ``*_init_s``: host seconds to the /init's first console line.

Target (issue 27): wall_ratio <= 3 (spe-emu arm_spe_0 against QEMU task-clock), one per
kernel; a kernel without its guest is skipped with its build command. --no-linux-perf leaves
both parts out.

Targets (SPE enabled at interval 4096): at least 0.6x raw MIPS and at least 25x reference MIPS
on every guest, per-sample cost at most 15 us; profiling disabled at least 0.9x raw; peak RSS
does not grow with records written.

Usage:
    python scripts/bench.py                              # every guest and virt-timer, 7 repeats
    python scripts/bench.py --guest sort --guest interp --repeats 5 --json bench.json
    python scripts/bench.py --guest virt-timer --repeats 3   # the timer row alone
    python scripts/bench.py --guest exceptions --repeats 3   # the exceptions row alone
    python scripts/bench.py --no-reference --check       # exit 1 if a target fails
    python scripts/bench.py --guest linux-boot           # the Linux boot rows alone
    python scripts/bench.py --guest linux-perf           # the perf record rows and the perf
                                                         # variant end to end alone

Exit status: 0 (the benchmark is a report) unless --check is given and a target failed (1);
2 on a usage error or a run that fails (bad image, guest error, non-zero guest exit status).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if (ROOT / "spe_emu" / "__init__.py").exists() and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # benchmark the checkout this script belongs to

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from spe_emu.errors import GuestRunaway, SpeEmuError  # noqa: E402
from spe_emu.spe.config import SpeConfig  # noqa: E402
from spe_emu.session import (TRACE_NAME, KernelOptions, RunOptions, run_image,  # noqa: E402
                             run_kernel)

GUESTS_DIR = ROOT / "guests"
DEFAULT_INTERVALS = (1024, 4096, 65536)
TARGET_INTERVAL = 4096
REFERENCE_INTERVAL = 4096
MIN_RATIO_SPE = 0.6
MIN_SPEEDUP_OVER_REFERENCE = 25.0
MAX_PER_SAMPLE_US = 15.0
MIN_RATIO_DISABLED = 0.9
MAX_EVERY_OVER_SAMPLED = 1.3   # issue 26: the default model feed's time over the sampled one
ANCHOR_COMMIT = "7ff7996"      # issue 26's "today": the tree its sampled-mode numbers are of
ANCHOR_SCRIPT = ROOT / "scripts" / "bench_anchor.py"
MAX_EVERY_OVER_QEMU_PLUGIN = 1.5   # issue 26: ... over qemu-aarch64 with the cache plugin
MEMORY_MANY = dict(buffer_size=4096, interval=256)
MEMORY_FEW = dict(interval=65536)
MEMORY_CONTROL = dict(buffer_size=4096, interval=256, min_latency=4095)
JSON_KEYS = ("guest", "mode", "interval", "mips", "ratio_to_raw", "per_sample_us",
             "peak_rss_mb", "every_vs_anchor")
TIMER_GUEST = "virt-timer"
TIMER_SOURCES = ROOT / "examples" / "virt-timer"
TIMER_TICKS = 50_000
TIMER_PERIOD_US = 100
CROSS_GCC = "aarch64-linux-gnu-gcc"
CROSS_CFLAGS = ("-O2", "-ffreestanding", "-nostdlib", "-mgeneral-regs-only", "-T", "link.ld",
                "-Wl,--no-warn-rwx-segments")  # as examples/virt-timer/README.md
QEMU = "qemu-system-aarch64"
QEMU_ARGS = ("-M", "virt,gic-version=3", "-cpu", "max", "-nographic")
QEMU_CLOCKS = {"icount": ("-icount", "shift=0,sleep=off"), "host": ()}
EXC_GUEST = "exceptions"
EXC_SOURCES = ROOT / "examples" / "exceptions"
EXC_SVC_ROUNDS = 200_000
EXC_IRQ_ROUNDS = 20_000
MAX_SVC_US = 2.0
MAX_IRQ_US = 5.0
EXC_JSON_KEYS = ("guest", "mode", "svc_rounds", "irq_rounds", "spe_emu_svc_us",
                 "qemu_svc_us", "spe_emu_irq_us", "qemu_irq_us", "skipped")
PMU_GUEST = "pmu"
PMU_LOOP = 20_000_000   # iterations of the PMU row's loop (4 instructions, a load each)
MAX_PMU_IDLE_RATIO = 1.03
"""Issue 30: counting costs nothing measurable while no counter is enabled: the run with the
PMU idle against the same run on a board without it."""
PMU_JSON_KEYS = ("guest", "mode", "loop", "no_pmu_s", "idle_s", "counting_s", "skipped")
LINUX_GUEST = "linux-user"
LINUX_SOURCE = ROOT / "examples" / "linux-user" / "bench.c"
LINUX_N = 200_000
LINUX_INTERVAL = 4096
QEMU_USER = "qemu-aarch64"
CACHE_PLUGIN_SOURCE = ROOT / "tests" / "model_check" / "cache_plugin.c"
CACHE_PLUGIN_CFLAGS = ("-shared", "-fPIC", "-O2", "-fvisibility=hidden")
QEMU_PLUGIN_CPU = "cortex-a57"  # (as tests/test_model_crosscheck.py: no SVE)
LINUX_SIDES = ("raw", "off", "spe", "sampled", "qemu", "qemu-plugin", "anchor")
"""The Linux user-mode row's sides, in the order of the even repeats."""
LINUX_JSON_KEYS = ("guest", "mode", "n", "instructions", "qemu_s", "qemu_plugin_s", "raw_s",
                   "spe_off_s", "spe_s", "spe_sampled_s", "speed_vs_qemu_off",
                   "speed_vs_qemu_spe", "every_vs_sampled", "every_vs_qemu_plugin",
                   "every_vs_raw", "anchor_sampled_s", "every_vs_anchor", "skipped")
TIMER_JSON_KEYS = ("guest", "mode", "ticks", "period_us", "qemu_clock", "spe_emu_irqs_per_s",
                   "qemu_irqs_per_s", "ratio_to_qemu", "skipped")


BOOT_GUEST = "linux-boot"
BOOT_APPEND = "console=ttyAMA0"
BOOT_MEMORY = "1G"
BOOT_MAX_INSNS = 4_000_000_000
BOOT_TIMEOUT = 3600
BOOT_CONFIGS = (("pauth-hidden", ("--cpu-feature", "pauth=off"), "max,pauth=off", ()),
                ("default", (), "max", ()))
"""(name, spe-emu options, QEMU -cpu, more QEMU options) of the boot row's configurations
on every kernel."""
BOOT_SMP = 4
BOOT_SMP_CONFIG = (f"smp{BOOT_SMP}-pauth-hidden",
                   ("--cpu-feature", "pauth=off", "--smp", str(BOOT_SMP)), "max,pauth=off",
                   ("-smp", str(BOOT_SMP), "-accel", "tcg,thread=single"))
"""The several-PE configuration (issue 28), booted on BOOT_SMP_KERNEL only: QEMU's
single-threaded round-robin TCG, the model spe-emu's scheduler follows."""
BOOT_SMP_KERNEL = "6.1"
MAX_SMP_BOOT_RATIO = 2.0   # issue 28
BOOT_QEMU_ARGS = ("-M", "virt,gic-version=3", "-m", BOOT_MEMORY, "-nographic", "-nic", "none")
BOOT_KERNELS = (("6.1", None), ("6.12", "linux-image-6.12-arm64"),
                ("6.12-16k", "linux-image-6.12-arm64-16k"))
"""(kernel key, build_linux_guest.py --kernel-package; None: its default, Debian 12's 6.1) of
the boot rows' guests."""
BOOT_DONE = "reboot: Power down"
BOOT_PROBED = re.compile(r"arm_spe_pmu spe: probed (?:SPEv\d+\.\d+ )?for CPUs")
"""The SPE driver's probe line: "probed for CPUs" (6.1), "probed SPEv1.0 for CPUs" (6.12)."""
MAX_BOOT_RATIO = 1.5   # issue 27 (issue 14's was 2.0, on 6.1)
BOOT_JSON_KEYS = ("guest", "mode", "kernel", "config", "instructions", "spe_emu_wall_s",
                  "spe_emu_cpu_s", "qemu_wall_s", "qemu_cpu_s", "wall_ratio", "cpu_ratio",
                  "skipped")

PERF_GUEST = "linux-perf"
PERF_EVENTS = (("arm_spe_0", None, 4096), ("task-clock", "task-clock", 1_000_000))
"""(name, perf event (None: build_linux_guest.SPE_EVENT), -c period) the linux-perf row
records with: SPE at the issue's interval, and a software event (a sample per ms of task
time) that QEMU, which has no SPE, records too."""
PERF_CONFIG = BOOT_CONFIGS[0]
"""The linux-perf row's board configuration on both sides (PAuth hidden)."""
PERF_MAX_INSNS = 20_000_000_000
MAX_PERF_RATIO = 3.0
PERF_JSON_KEYS = ("guest", "mode", "side", "event", "workload_host_s", "workload_guest_ms",
                  "workload_busy_ms", "true_host_s", "true_guest_ms", "true_busy_ms",
                  "record_host_s", "record_guest_ms", "record_busy_ms", "record_ratio_host",
                  "record_ratio_guest", "record_ratio_busy", "true_ratio_host",
                  "true_ratio_guest", "true_ratio_busy", "added_ratio_host", "skipped")
VARIANT_KERNELS = ("6.1", "6.12")
"""The kernels (BOOT_KERNELS keys) whose perf variant the linux-perf row boots end to end."""
VARIANT_QEMU_EVENT = "task-clock"
"""The event QEMU's boot of the perf variant records (``spe_event=`` on its command line)."""
VARIANT_SEMIHOSTING = ("-semihosting-config", "enable=on,userspace=on,target=native")
"""QEMU's options for the variant's ``semihost-put perf.data`` (spe-emu:
``--semihosting-userspace``): perf.data lands in the working directory on both sides."""
MAX_VARIANT_RATIO = 3.0   # issue 27
VARIANT_JSON_KEYS = ("guest", "mode", "kernel", "spe_emu_event", "qemu_event", "instructions",
                     "spe_emu_wall_s", "spe_emu_cpu_s", "spe_emu_init_s", "qemu_wall_s",
                     "qemu_cpu_s", "qemu_init_s", "wall_ratio", "cpu_ratio", "skipped")

DECODER_GUEST = "decoder"
DECODE_MIB = 18
DECODE_INTERVAL = 256
DECODE_SOURCES = ("sort",)   # one guest: report --image checks the image matches
PERF = "perf"
DECODER_JSON_KEYS = ("guest", "mode", "trace_bytes", "decode_s", "report_s", "perf_s",
                     "decode_vs_perf", "report_vs_perf", "skipped")


class BenchError(Exception):
    """A run failed or an argument is wrong: one line, exit status 2."""


# ------------------------------------------------------------------------ peak RSS --------

class RssMeter:
    """Per-run peak RSS (MiB): reset VmHWM through /proc/self/clear_refs, read it back."""

    def __init__(self) -> None:
        self.per_run = self._probe()
        self.note = ("peak RSS: VmHWM per run (high-water mark reset through "
                     "/proc/self/clear_refs before each run)" if self.per_run else
                     "peak RSS: /proc/self/clear_refs or VmHWM unavailable, so the values are "
                     "ru_maxrss, the process-lifetime maximum (NOT per run; they only grow)")

    @staticmethod
    def _vm(name: str) -> float | None:
        try:
            text = Path("/proc/self/status").read_text()
        except OSError:
            return None
        m = re.search(rf"^{name}:\s+(\d+)\s+kB", text, re.M)
        return int(m.group(1)) / 1024 if m else None

    def _probe(self) -> bool:
        if self._vm("VmHWM") is None:
            return False
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            return False
        return True

    def reset(self) -> float:
        """Collect garbage (a finished Machine holds reference cycles), reset the high-water
        mark; returns the RSS the run starts from."""
        gc.collect()
        if self.per_run:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return self._vm("VmRSS") or 0.0
        return self.peak()

    def peak(self) -> float:
        if self.per_run:
            value = self._vm("VmHWM")
            if value is not None:
                return value
        import resource
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return maxrss / (1 << 20) if sys.platform == "darwin" else maxrss / 1024


# ------------------------------------------------------------------------ runs ------------

@dataclass
class Mode:
    key: str                    # row identity, e.g. "spe@4096"
    mode: str                   # raw | spe | spe-disabled | reference
    interval: int | None        # None where no sampling interval applies
    options: dict

    def run_options(self, outdir: Path, **extra) -> RunOptions:
        return RunOptions(outdir=outdir, **self.options, **extra)


@dataclass
class Measurement:
    seconds: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    instructions: int = 0
    samples: int = 0
    partial: bool = False       # reference measured over a prefix (--reference-insns)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def modes_for(intervals: list[int], reference: bool) -> list[Mode]:
    out = [Mode("raw", "raw", None, dict(mode="raw"))]
    out += [Mode(f"spe@{n}", "spe", n, dict(mode="fast", interval=n,
                                             spe=SpeConfig(model_feed="sampled")))
            for n in intervals]
    out.append(Mode("spe-disabled", "spe-disabled", None,
                    dict(mode="fast", profiling=False, spe=SpeConfig(model_feed="sampled"))))
    out.append(Mode(f"spe-every@{TARGET_INTERVAL}", "spe-every", TARGET_INTERVAL,
                    dict(mode="fast", interval=TARGET_INTERVAL,
                         spe=SpeConfig(model_feed="every"))))
    if reference:
        out.append(Mode("reference", "reference", REFERENCE_INTERVAL,
                        dict(mode="reference", interval=REFERENCE_INTERVAL)))
    return out


class Anchor:
    """Another spe_emu, run by scripts/bench_anchor.py under its own interpreter
    (``--sampled-anchor PYTHON``; scripts/make-bench-anchor.sh installs the one of
    ANCHOR_COMMIT): its sampled mode timed side by side with this checkout's runs, in the
    same repeats, as that process measures its own calls."""

    def __init__(self, python: str, workdir: Path):
        self.python = python
        # (a path as given, from here: the process runs in workdir; a bare name on PATH)
        path = os.path.abspath(python) if os.sep in python else shutil.which(python) or python
        self.errors = workdir / "anchor-stderr"
        try:
            with open(self.errors, "w") as err:
                self.proc = subprocess.Popen([path, str(ANCHOR_SCRIPT)], cwd=workdir,
                                             text=True, stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=err)
        except OSError as exc:
            raise BenchError(f"--sampled-anchor {python}: {exc.strerror}") from None

    def run(self, label: str, **request) -> dict:
        """One run (bench_anchor.py's request keys); its answer. Raises BenchError."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request, default=str) + "\n")
            self.proc.stdin.flush()
            answer = json.loads(self.proc.stdout.readline() or "null")
        except (OSError, ValueError):
            answer = None
        if answer is None:
            try:
                status = self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                status = None
            said = self.errors.read_text(errors="replace").strip().splitlines()
            raise BenchError(f"{label} anchor: {self.python} ended (status {status}"
                             f"{': ' + said[-1] if said else ''}); see "
                             f"scripts/make-bench-anchor.sh")
        if "error" in answer:
            raise BenchError(f"{label} anchor: {answer['error']}")
        if answer["exit_status"] != 0:
            raise BenchError(f"{label} anchor: guest exit status {answer['exit_status']}")
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


class Runner:
    def __init__(self, workdir: Path, rss: RssMeter, log: Console | None,
                 anchor: Anchor | None = None):
        self.workdir = workdir
        self.rss = rss
        self.log = log
        self.anchor = anchor

    def say(self, text: str) -> None:
        if self.log is not None:
            self.log.print(text, highlight=False)

    def once(self, image: Path, opts: RunOptions, label: str, *,
             allow_runaway: bool = False) -> tuple[float, float, float, object]:
        """One timed run_image: (seconds, RSS at start, peak RSS, RunResult or None)."""
        start_rss = self.rss.reset()
        t0 = time.perf_counter()
        try:
            session = run_image(image, opts, console=None)
        except GuestRunaway:
            if not allow_runaway:
                raise BenchError(f"{label}: guest did not exit within {opts.max_insns} "
                                 f"instructions") from None
            seconds = time.perf_counter() - t0
            return seconds, start_rss, self.rss.peak(), None
        except SpeEmuError as exc:
            raise BenchError(f"{label}: {exc}") from None
        seconds = time.perf_counter() - t0
        peak = self.rss.peak()
        result = session.result
        if result.exit_status != 0:
            raise BenchError(f"{label}: guest exit status {result.exit_status} "
                             f"(console: {result.console[-200:]!r})")
        del session
        return seconds, start_rss, peak, result

    def alternate(self, guest: str, runs: dict, repeats: int,
                  show=lambda seconds: f"{seconds:8.3f} s") -> dict[str, list]:
        """``repeats`` rounds of every one of ``runs`` (name -> a callable measuring once),
        back to back, in alternating order (as given on even rounds, reversed on odd ones) so
        that a host that slows down mid-benchmark weighs on all of them alike: per name, the
        values in repeat order (what paired_median pairs). Warm-ups are the caller's;
        ``show`` formats a value for the progress line."""
        out: dict[str, list] = {name: [] for name in runs}
        order = list(runs)
        for r in range(repeats):
            for name in order if r % 2 == 0 else order[::-1]:
                out[name].append(runs[name]())
                self.say(f"[dim]{guest:>14} {name:<13} {r + 1}/{repeats:<6} "
                         f"{show(out[name][-1])}[/dim]")
        return out

    def measure(self, guest: str, image: Path, modes: list[Mode], repeats: int,
                reference_insns: int | None) -> dict[str, Measurement]:
        out = {m.key: Measurement() for m in modes}
        timed = [m for m in modes if m.mode != "reference"]
        outdir = self.workdir / guest
        for m in timed:  # warm-up, not counted
            seconds, *_ = self.once(image, m.run_options(outdir / m.key), f"{guest} {m.key}")
            self.say(f"[dim]{guest:>14} {m.key:<13} warm-up  {seconds:8.3f} s[/dim]")
        # raw and spe-disabled next to each other, the order reversed every other repeat
        order = sorted(timed, key=lambda m: {"raw": 0, "spe-disabled": 1}.get(m.mode, 2))
        calls = {m.key: partial(lambda m: self.once(
            image, m.run_options(outdir / m.key), f"{guest} {m.key}"), m) for m in order}
        if self.anchor is not None and any(m.mode == "spe-every" for m in modes):
            anchor = partial(self.anchor.run, guest, image=image, interval=TARGET_INTERVAL,
                             outdir=outdir / "anchor")
            self.say(f"[dim]{guest:>14} {'anchor':<13} warm-up  {anchor()['seconds']:8.3f} "
                     f"s[/dim]")
            calls["anchor"] = lambda: (anchor()["seconds"], 0.0, 0.0, None)
            out["anchor"] = Measurement()
        runs = self.alternate(guest, calls, repeats, show=lambda run: f"{run[0]:8.3f} s")
        for key, timed_runs in runs.items():
            if key == "anchor":
                out[key].seconds = [run[0] for run in timed_runs]
                continue
            meas = out[key]
            for seconds, _, peak, result in timed_runs:
                meas.seconds.append(seconds)
                meas.rss.append(peak)
                meas.instructions = result.instructions
                meas.samples = result.samples
        for m in modes:
            if m.mode != "reference":
                continue
            extra = {"max_insns": reference_insns} if reference_insns else {}
            seconds, _, peak, result = self.once(image, m.run_options(outdir / m.key, **extra),
                                                 f"{guest} {m.key}",
                                                 allow_runaway=bool(reference_insns))
            meas = out[m.key]
            meas.seconds.append(seconds)
            meas.rss.append(peak)
            if result is None:  # stopped at the --reference-insns budget
                meas.instructions = reference_insns
                meas.partial = True
            else:
                meas.instructions = result.instructions
                meas.samples = result.samples
            self.say(f"[dim]{guest:>14} {m.key:<13} once     {seconds:8.3f} s"
                     f"{' (prefix)' if meas.partial else ''}[/dim]")
        return out


# ------------------------------------------------------------------------ timer row -------

@dataclass
class TimerSetup:
    ticks: int
    period_us: int
    qemu_clock: str             # a key of QEMU_CLOCKS


def cross_build(guest: str, sources: Path, out: Path, flags: list[str]) -> Path | str:
    """The bare-metal example in ``sources`` (start.S, main.c, link.ld) built with CROSS_GCC,
    CROSS_CFLAGS and ``flags`` into ``out``: ``out``, or why it cannot be built here (no
    cross compiler). Raises BenchError when the compiler fails."""
    gcc = shutil.which(CROSS_GCC)
    if gcc is None:
        return f"{CROSS_GCC} not found (Debian: apt-get install gcc-aarch64-linux-gnu)"
    cmd = [gcc, *CROSS_CFLAGS, *flags, "-o", str(out), "start.S", "main.c"]
    proc = subprocess.run(cmd, cwd=sources, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"{guest}: {' '.join(cmd)} failed: {proc.stderr.strip()[-300:]}")
    return out


def build_timer_image(workdir: Path, setup: TimerSetup) -> Path | str:
    """examples/virt-timer built with ``setup``'s TICKS and PERIOD_US into ``workdir``: the
    ELF's path, or why it cannot be built here (no cross compiler)."""
    return cross_build(TIMER_GUEST, TIMER_SOURCES, workdir / f"{TIMER_GUEST}.elf",
                       [f"-DTICKS={setup.ticks}", f"-DPERIOD_US={setup.period_us}"])


def virt_spe_emu(label: str, image: Path, outdir: Path, expect: str) -> float:
    """One run_kernel of ``image`` on the virt board in this process, as ``spe-emu run
    --machine virt --kernel IMAGE`` (machine set-up included): seconds. Raises BenchError
    when spe-emu refuses it, or the guest does not exit with status 0 having printed
    ``expect``."""
    out = bytearray()
    opts = RunOptions(boot_el=1, firmware=False, outdir=outdir)
    gc.collect()
    t0 = time.perf_counter()
    try:
        session = run_kernel(KernelOptions(board="virt", kernel=image), opts, console=out.extend)
    except SpeEmuError as exc:
        raise BenchError(f"{label} spe-emu: {exc}") from None
    seconds = time.perf_counter() - t0
    text = out.decode(errors="replace")
    if session.result.exit_status != 0 or expect not in text:
        raise BenchError(f"{label} spe-emu: exit status {session.result.exit_status}, "
                         f"console {text[-200:]!r}")
    return seconds


def virt_qemu(label: str, cmd: list[str], timeout: float, expect: str) -> float:
    """One QEMU process ``cmd``, start to exit: wall seconds. Raises BenchError when it does
    not exit within ``timeout`` seconds, or not with status 0 having printed ``expect``."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{label} qemu: no exit within {timeout:.0f} s") from None
    seconds = time.perf_counter() - t0
    text = proc.stdout.decode(errors="replace").replace("\r\n", "\n")
    if proc.returncode != 0 or expect not in text:
        raise BenchError(f"{label} qemu: exit status {proc.returncode}, console "
                         f"{text[-200:]!r}, stderr {proc.stderr.decode()[-200:]!r}")
    return seconds


def timer_line(ticks: int) -> str:
    """What the program prints after its last interrupt."""
    return f"timer interrupts: {ticks}\n"


class TimerRunner:
    """Timed runs of the virt-timer image on spe_emu (in this process) and on QEMU."""

    def __init__(self, runner: Runner, image: Path, setup: TimerSetup, qemu: str | None):
        self.runner = runner
        self.image = image
        self.setup = setup
        self.qemu = qemu
        self.qemu_cmd = (None if qemu is None else
                         [qemu, *QEMU_ARGS, *QEMU_CLOCKS[setup.qemu_clock], "-kernel",
                          str(image)])

    def spe_emu(self) -> float:
        """One run_kernel call, as ``spe-emu run --machine virt --kernel IMAGE``: seconds."""
        return virt_spe_emu(TIMER_GUEST, self.image, self.runner.workdir / TIMER_GUEST /
                            "spe-emu", timer_line(self.setup.ticks))

    def qemu_run(self) -> float:
        """One qemu-system-aarch64 process, start to exit: wall seconds."""
        # (generous: with --qemu-clock host the run lasts TICKS periods of host time)
        timeout = 120 + 10 * self.setup.ticks * self.setup.period_us / 1e6
        return virt_qemu(TIMER_GUEST, self.qemu_cmd, timeout, timer_line(self.setup.ticks))

    def measure(self, repeats: int) -> dict[str, list[float]]:
        sides = [("spe-emu", self.spe_emu)]
        if self.qemu is not None:
            sides.append(("qemu", self.qemu_run))
        for name, run in sides:  # warm-up, not counted
            self.runner.say(f"[dim]{TIMER_GUEST:>14} {name:<13} warm-up  {run():8.3f} s[/dim]")
        return self.runner.alternate(TIMER_GUEST, dict(sides), repeats)


def timer_row(setup: TimerSetup, seconds: dict[str, list[float]] | None,
              skipped: str | None) -> dict:
    """The timer row (keys TIMER_JSON_KEYS, plus ``_`` keys for the table). ``seconds``:
    per side, one time per repeat in repeat order; None when the whole row was skipped."""
    seconds = seconds or {}
    spe, qemu = seconds.get("spe-emu"), seconds.get("qemu")
    rate = (lambda t: round(setup.ticks / statistics.median(t), 1) if t else None)
    ratio = (round(paired_median(spe, qemu, lambda a, b: b / a), 4) if spe and qemu else None)
    return {
        "guest": TIMER_GUEST, "mode": "timer-irq", "ticks": setup.ticks,
        "period_us": setup.period_us, "qemu_clock": setup.qemu_clock,
        "spe_emu_irqs_per_s": rate(spe), "qemu_irqs_per_s": rate(qemu),
        "ratio_to_qemu": ratio, "skipped": skipped,
        "_spe_seconds": statistics.median(spe) if spe else None,
        "_qemu_seconds": statistics.median(qemu) if qemu else None,
    }


def measure_timer(runner: Runner, setup: TimerSetup, repeats: int) -> tuple[dict, list[str]]:
    """Build and run the timer row: (row, the QEMU command line or [])."""
    image = build_timer_image(runner.workdir, setup)
    if isinstance(image, str):
        runner.say(f"[yellow]{TIMER_GUEST}: skipped, {image}[/yellow]")
        return timer_row(setup, None, f"not built: {image}"), []
    qemu = shutil.which(QEMU)
    timer = TimerRunner(runner, image, setup, qemu)
    skipped = None if qemu is not None else f"QEMU half not run: {QEMU} not found"
    if skipped:
        runner.say(f"[yellow]{TIMER_GUEST}: {skipped}[/yellow]")
    return timer_row(setup, timer.measure(repeats), skipped), timer.qemu_cmd or []


# ------------------------------------------------------------------------ exceptions -----

def build_exception_images(workdir: Path, svc_rounds: int, irq_rounds: int
                           ) -> dict[str, Path] | str:
    """examples/exceptions built as "svc", "irq" and "base" (no rounds) into ``workdir``, or
    why they cannot be built here."""
    images = {}
    for name, svc, irq in (("svc", svc_rounds, 0), ("irq", 0, irq_rounds), ("base", 0, 0)):
        image = cross_build(EXC_GUEST, EXC_SOURCES, workdir / f"{EXC_GUEST}-{name}.elf",
                            ["-mstrict-align", f"-DSVC_ROUNDS={svc}", f"-DIRQ_ROUNDS={irq}"])
        if isinstance(image, str):
            return image
        images[name] = image
    return images


def exception_side(runner: Runner, name: str, image: Path, qemu: str | None) -> float:
    """One run of ``image`` on spe-emu (``qemu`` None) or QEMU: seconds; checks it printed
    "bye" and exited with status 0."""
    if qemu is None:
        return virt_spe_emu(f"{EXC_GUEST}-{name}", image, runner.workdir / EXC_GUEST / "spe-emu",
                            "bye")
    return virt_qemu(f"{EXC_GUEST}-{name}", [qemu, *QEMU_ARGS, "-kernel", str(image)], 300,
                     "bye")


def measure_exceptions(runner: Runner, svc_rounds: int, irq_rounds: int, repeats: int
                       ) -> dict:
    """The exceptions row (keys EXC_JSON_KEYS, plus ``_`` keys for the table)."""
    row = {"guest": EXC_GUEST, "mode": "exceptions", "svc_rounds": svc_rounds,
           "irq_rounds": irq_rounds, "spe_emu_svc_us": None, "qemu_svc_us": None,
           "spe_emu_irq_us": None, "qemu_irq_us": None, "skipped": None}
    images = build_exception_images(runner.workdir, svc_rounds, irq_rounds)
    if isinstance(images, str):
        runner.say(f"[yellow]{EXC_GUEST}: skipped, {images}[/yellow]")
        row["skipped"] = f"not built: {images}"
        return row
    qemu = shutil.which(QEMU)
    sides = [("spe-emu", None)] + ([("qemu", qemu)] if qemu else [])
    if qemu is None:
        row["skipped"] = f"QEMU half not run: {QEMU} not found"
    for side, q in sides:   # warm-up, not counted
        exception_side(runner, "base", images["base"], q)

    def once(q: str | None) -> dict[str, float]:
        """One round on a side: microseconds per SVC and per IRQ."""
        t = {name: exception_side(runner, name, image, q) for name, image in images.items()}
        return {name: (t[name] - t["base"]) / rounds * 1e6
                for name, rounds in (("svc", svc_rounds), ("irq", irq_rounds))}

    per_round = runner.alternate(EXC_GUEST, {side: partial(once, q) for side, q in sides},
                                 repeats,
                                 show=lambda c: f"svc {c['svc']:7.2f} us, irq {c['irq']:7.2f} us")
    costs = {side: {name: [c[name] for c in per_round[side]] for name in ("svc", "irq")}
             for side in per_round}
    for side, _ in sides:
        key = side.replace("-", "_")
        row[f"{key}_svc_us"] = round(statistics.median(costs[side]["svc"]), 3)
        row[f"{key}_irq_us"] = round(statistics.median(costs[side]["irq"]), 3)
    if "qemu" in costs:
        for name in ("svc", "irq"):
            row[f"_{name}_ratio"] = paired_median(costs["spe-emu"][name], costs["qemu"][name],
                                                  lambda a, b: a / b)
    return row


def exception_targets(row: dict | None) -> list[Target]:
    """The issue-13 targets on the exceptions row."""
    if row is None:
        return []
    out = []
    for name, limit, what in (("svc", MAX_SVC_US, "EL0 SVC -> EL1 -> ERET round trip"),
                              ("irq", MAX_IRQ_US, "IRQ taken, acknowledged, ended, returned")):
        value = row[f"spe_emu_{name}_us"]
        if value is None:
            out.append(Target(f"{what} <= {limit} us", "SKIP", row["skipped"] or "not run"))
        else:
            out.append(Target(f"{what} <= {limit} us", "PASS" if value <= limit else "FAIL",
                              f"{value:.2f} us (QEMU {fmt(row['qemu_' + name + '_us'], '.2f')}"
                              f" us)"))
    return out


def print_exceptions(console: Console, row: dict, repeats: int) -> None:
    print_row_table(console, f"exceptions, virt board (median of {repeats})",
                    ("guest", "kind", "rounds", "spe-emu us", "QEMU us", "spe-emu / QEMU"),
                    [(row["guest"], kind, f"{row[kind + '_rounds']:,}",
                      fmt(row[f"spe_emu_{kind}_us"], ".2f"), fmt(row[f"qemu_{kind}_us"], ".2f"),
                      fmt(row.get(f"_{kind}_ratio"), ".2f")) for kind in ("svc", "irq")],
                    row, left=2)
    console.print(f"  examples/exceptions; cost = (run - baseline run) / rounds; QEMU: "
                  f"{QEMU} {' '.join(QEMU_ARGS)} -kernel IMAGE", highlight=False)


# ------------------------------------------------------------------------ the PMU ------

def pmu_program(counting: bool) -> str:
    """The PMU row's bare-metal loop (EL1, MMU off): PMU_LOOP iterations of a load, an add
    and the loop's two; with ``counting`` the cycle counter and four event counters
    (INST_RETIRED, MEM_ACCESS, L1D_CACHE_REFILL, BR_RETIRED) count it."""
    enable = """
    mov x9, #0x08
    msr pmevtyper0_el0, x9
    mov x9, #0x13
    msr pmevtyper1_el0, x9
    mov x9, #0x03
    msr pmevtyper2_el0, x9
    mov x9, #0x21
    msr pmevtyper3_el0, x9
    mov x9, #0xf
    orr x9, x9, #0x80000000
    msr pmcntenset_el0, x9
    mov x9, #0x47
    msr pmcr_el0, x9
    isb
""" if counting else ""
    return enable + f"""
    movz x9, #0x4100, lsl #16
    mov sp, x9
    movz x4, #{PMU_LOOP & 0xFFFF:#x}
    movk x4, #{PMU_LOOP >> 16:#x}, lsl #16
loop:
    ldr x5, [sp]
    add x6, x6, x5
    subs x4, x4, #1
    b.ne loop
    movz x1, #0x0026
    movk x1, #0x2, lsl #16
    sub sp, sp, #16
    stp x1, xzr, [sp]
    mov x1, sp
    mov x0, #0x20
    hlt #0xf000
"""


def pmu_side(runner: Runner, side: str) -> float:
    """One run of the PMU row's loop in-process: ``no-pmu`` on a virt board without the PMU
    device, ``idle`` with it and no counter enabled, ``counting`` with five counters; the
    seconds Machine.run takes."""
    from dataclasses import replace

    from spe_emu.asm import assemble
    from spe_emu.cpu.machine import Machine, MachineConfig
    from spe_emu.platform.board import VIRT
    from spe_emu.platform.loader import Image, Segment
    base = VIRT.ram_base
    code = assemble(pmu_program(side == "counting"), base)
    board = VIRT if side != "no-pmu" else replace(
        VIRT, devices=tuple(d for d in VIRT.devices if d.kind != "pmuv3"))
    m = Machine(MachineConfig(boot_el=1, board=board, outdir=runner.workdir / PMU_GUEST,
                              max_insns=None))
    m.load(Image(path=Path("<pmu>"), entry=base,
                 segments=[Segment(base, base, code, len(code), 0b111)]))
    m.reset(base)
    t0 = time.perf_counter()
    result = m.run()
    seconds = time.perf_counter() - t0
    if result.exit_status != 0:
        raise BenchError(f"{PMU_GUEST} {side}: exit status {result.exit_status}")
    return seconds


def measure_pmu(runner: Runner, repeats: int) -> dict:
    """The PMU row (PMU_JSON_KEYS): median seconds per side, sides alternated."""
    sides = ("no-pmu", "idle", "counting")
    for side in sides:   # warm-up, not counted
        pmu_side(runner, side)
    seconds = runner.alternate(PMU_GUEST, {side: partial(pmu_side, runner, side)
                                           for side in sides}, repeats)
    row = {"guest": PMU_GUEST, "mode": "pmu", "loop": PMU_LOOP, "skipped": None}
    for side in sides:
        row[f"{side.replace('-', '_')}_s"] = round(statistics.median(seconds[side]), 3)
    row["_idle_ratio"] = paired_median(seconds["idle"], seconds["no-pmu"], lambda a, b: a / b)
    row["_counting_ratio"] = paired_median(seconds["counting"], seconds["no-pmu"],
                                           lambda a, b: a / b)
    return row


def pmu_targets(row: dict | None) -> list[Target]:
    """Issue 30's cost target on the PMU row."""
    if row is None:
        return []
    ratio = row["_idle_ratio"]
    return [Target(f"PMU idle / no PMU <= {MAX_PMU_IDLE_RATIO}",
                   "PASS" if ratio <= MAX_PMU_IDLE_RATIO else "FAIL",
                   f"{ratio:.3f} ({row['idle_s']:.3f} s against {row['no_pmu_s']:.3f} s; "
                   f"counting: {row['_counting_ratio']:.2f}x)")]


def print_pmu(console: Console, row: dict, repeats: int) -> None:
    print_row_table(console, f"PMU, virt board (median of {repeats})",
                    ("guest", "instructions", "no PMU s", "PMU idle s", "counting s",
                     "idle / no PMU", "counting / no PMU"),
                    [(row["guest"], f"{4 * row['loop']:,}", fmt(row["no_pmu_s"], ".3f"),
                      fmt(row["idle_s"], ".3f"), fmt(row["counting_s"], ".3f"),
                      fmt(row["_idle_ratio"], ".3f"), fmt(row["_counting_ratio"], ".2f"))],
                    row, left=1)
    console.print("  a load loop at EL1; counting: PMCCNTR_EL0 and INST_RETIRED, MEM_ACCESS, "
                  "L1D_CACHE_REFILL, BR_RETIRED (the model fed every access)", highlight=False)


# ------------------------------------------------------------------------ linux user -----

def host_cc() -> str | None:
    """The host C compiler (``$CC``, else cc, else gcc), as tests/test_model_crosscheck.py
    finds it."""
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def build_cache_plugin(workdir: Path) -> Path | str:
    """tests/model_check/cache_plugin.c built with the host C compiler into ``workdir``: the
    shared object's path, or why it cannot be built here."""
    cc = host_cc()
    if cc is None:
        return "no host C compiler (cc, gcc or $CC)"
    out = workdir / "cache_plugin.so"
    proc = subprocess.run([cc, *CACHE_PLUGIN_CFLAGS, "-o", str(out), str(CACHE_PLUGIN_SOURCE)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return f"{CACHE_PLUGIN_SOURCE.name} not built: {proc.stderr.strip()[-200:]}"
    return out


def qemu_plugin_cmd(qemu: str, plugin: Path, program: Path, n: int) -> list[str]:
    """qemu-aarch64 running ``program n`` with the cache plugin, its counts to plugin.json
    next to the plugin (tests/test_model_crosscheck.py's plugin_counts)."""
    counts = plugin.parent / "plugin.json"
    return [qemu, "-cpu", QEMU_PLUGIN_CPU, "-plugin", f"{plugin},out={counts}", str(program),
            str(n)]


def linux_side(runner: Runner, program: Path, n: int, side: str,
               plugin: Path | None = None) -> tuple[float, bytes, int]:
    """One run of the Linux benchmark program on ``side`` (one of LINUX_SIDES; qemu-plugin
    needs ``plugin``, the built cache plugin): (seconds, stdout, instructions or 0)."""
    args = [str(n)]
    if side in ("qemu", "qemu-plugin"):
        qemu = shutil.which(QEMU_USER) or QEMU_USER
        if side == "qemu":
            cmd, env = [qemu, str(program), *args], None
        else:
            assert plugin is not None
            cmd, env = qemu_plugin_cmd(qemu, plugin, program, n), {}
            (plugin.parent / "plugin.json").unlink(missing_ok=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, env=env,
                              timeout=600)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise BenchError(f"{LINUX_GUEST} {side}: exit status {proc.returncode} "
                             f"(stderr {proc.stderr.decode(errors='replace')[-200:]!r})")
        if side == "qemu-plugin" and not (plugin.parent / "plugin.json").exists():
            raise BenchError(f"{LINUX_GUEST} {side}: the plugin wrote no counts")
        return seconds, proc.stdout, 0
    if side == "anchor":
        out = runner.workdir / LINUX_GUEST / "anchor-stdout"
        out.parent.mkdir(parents=True, exist_ok=True)
        answer = runner.anchor.run(LINUX_GUEST, program=program, args=args,
                                   interval=LINUX_INTERVAL, stdout=out,
                                   outdir=runner.workdir / LINUX_GUEST / side)
        return answer["seconds"], out.read_bytes(), answer["instructions"]
    from spe_emu.linux.process import LinuxOptions
    from spe_emu.linux.run import run_program
    out = runner.workdir / LINUX_GUEST / "stdout"
    out.parent.mkdir(parents=True, exist_ok=True)
    extra = {"raw": dict(mode="raw"), "off": dict(profiling=False),
             "spe": {}, "sampled": dict(spe=SpeConfig(model_feed="sampled"))}[side]
    opts = RunOptions(interval=LINUX_INTERVAL, outdir=runner.workdir / LINUX_GUEST / side,
                      **extra)
    gc.collect()
    with open(out, "wb") as f:
        lopts = LinuxOptions(argv=[program.name, *args], stdin_fd=None, stdout_fd=f.fileno())
        t0 = time.perf_counter()
        try:
            session = run_program(program, lopts, opts)
        except SpeEmuError as exc:
            raise BenchError(f"{LINUX_GUEST} spe-emu {side}: {exc}") from None
        seconds = time.perf_counter() - t0
    if session.result.exit_status != 0:
        raise BenchError(f"{LINUX_GUEST} spe-emu {side}: exit status "
                         f"{session.result.exit_status}")
    return seconds, out.read_bytes(), session.result.instructions


def measure_linux(runner: Runner, n: int, repeats: int) -> dict:
    """The Linux user-mode row (keys LINUX_JSON_KEYS, plus ``_`` keys for the table)."""
    row = {key: None for key in LINUX_JSON_KEYS}
    row.update(guest=LINUX_GUEST, mode="linux-user", n=n)
    gcc = shutil.which(CROSS_GCC)
    if gcc is None:
        row["skipped"] = f"not built: {CROSS_GCC} not found"
        runner.say(f"[yellow]{LINUX_GUEST}: skipped, {row['skipped']}[/yellow]")
        return row
    program = runner.workdir / "linux-bench"
    proc = subprocess.run([gcc, "-static", "-O2", "-o", str(program), str(LINUX_SOURCE)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        row["skipped"] = f"not built: {proc.stderr.strip()[-200:]}"
        return row
    sides, skipped = list(LINUX_SIDES), []
    if runner.anchor is None:
        sides.remove("anchor")
    plugin = None
    if shutil.which(QEMU_USER) is None:
        sides = [s for s in sides if s not in ("qemu", "qemu-plugin")]
        skipped.append(f"QEMU sides not run: {QEMU_USER} not found")
    else:
        plugin = build_cache_plugin(runner.workdir)
        if isinstance(plugin, str):
            sides.remove("qemu-plugin")
            skipped.append(f"qemu-plugin side not run: {plugin}")
            plugin = None
        else:
            row["_plugin_cmd"] = qemu_plugin_cmd(QEMU_USER, plugin, program, n)
    row["skipped"] = "; ".join(skipped) or None
    if skipped:
        runner.say(f"[yellow]{LINUX_GUEST}: {row['skipped']}[/yellow]")
    outputs = {}
    for side in sides:  # warm-up, not counted
        _, outputs[side], insns = linux_side(runner, program, n, side, plugin)
        if side == "spe":
            row["instructions"] = insns or None
    if len(set(outputs.values())) != 1:
        raise BenchError(f"{LINUX_GUEST}: the outputs differ: {outputs}")
    times = runner.alternate(LINUX_GUEST,
                             {side: partial(lambda s: linux_side(runner, program, n, s,
                                                                 plugin)[0], side)
                              for side in sides}, repeats,
                             show=lambda seconds: f"{seconds:7.3f} s")
    for side, key in (("qemu", "qemu_s"), ("qemu-plugin", "qemu_plugin_s"), ("raw", "raw_s"),
                      ("off", "spe_off_s"), ("spe", "spe_s"), ("sampled", "spe_sampled_s"),
                      ("anchor", "anchor_sampled_s")):
        if side in times:
            row[key] = round(statistics.median(times[side]), 4)
    if "qemu" in times:
        for side, key in (("off", "speed_vs_qemu_off"), ("spe", "speed_vs_qemu_spe")):
            row[key] = round(paired_median(times["qemu"], times[side], lambda q, t: q / t), 4)
    for side, key in (("sampled", "every_vs_sampled"), ("qemu-plugin", "every_vs_qemu_plugin"),
                      ("raw", "every_vs_raw"), ("anchor", "every_vs_anchor")):
        if side in times:
            row[key] = round(paired_median(times["spe"], times[side], lambda e, t: e / t), 4)
    return row


def linux_targets(row: dict | None) -> list[Target]:
    """Issue 26's targets on the Linux user-mode row: the default model feed (every) at most
    MAX_EVERY_OVER_SAMPLED times the sampled feed's time and MAX_EVERY_OVER_QEMU_PLUGIN times
    qemu-aarch64's with the cache plugin."""
    if row is None:
        return []
    out = []
    for key, other, label, limit, name in (
            ("every_vs_sampled", "spe_sampled_s", "sampled", MAX_EVERY_OVER_SAMPLED,
             "the sampled mode's time"),
            ("every_vs_qemu_plugin", "qemu_plugin_s", f"{QEMU_USER} + plugin",
             MAX_EVERY_OVER_QEMU_PLUGIN, f"{QEMU_USER} + the cache plugin"),
            ("every_vs_anchor", "anchor_sampled_s", f"sampled at {ANCHOR_COMMIT}",
             MAX_EVERY_OVER_SAMPLED, f"the sampled mode of issue 26's day ({ANCHOR_COMMIT})")):
        title = f"Linux user mode: model_feed every <= {limit:g}x {name}"
        value = row[key]
        if value is None:
            reason = "no --sampled-anchor" if key == "every_vs_anchor" else None
            out.append(Target(title, "SKIP", reason or row["skipped"] or "not run"))
            continue
        out.append(Target(title, "PASS" if value <= limit else "FAIL",
                          f"{value:.2f}x (every {row['spe_s']:.3f} s, {label} "
                          f"{row[other]:.3f} s)"))
    return out


def print_linux(console: Console, row: dict, repeats: int) -> None:
    every = 1.0 if row["spe_s"] is not None else None   # (the every side over itself)
    lines = (   # side, median seconds, speed vs QEMU, t_every / t_side
        (QEMU_USER, row["qemu_s"], None, None),
        (f"{QEMU_USER} + cache plugin", row["qemu_plugin_s"], None,
         row["every_vs_qemu_plugin"]),
        ("spe-emu raw", row["raw_s"], None, row["every_vs_raw"]),
        ("spe-emu profiling off", row["spe_off_s"], row["speed_vs_qemu_off"], None),
        (f"spe-emu {LINUX_INTERVAL}, every (default)", row["spe_s"], row["speed_vs_qemu_spe"],
         every),
        (f"spe-emu {LINUX_INTERVAL}, sampled", row["spe_sampled_s"], None,
         row["every_vs_sampled"]),
        (f"spe-emu {LINUX_INTERVAL}, sampled, at {ANCHOR_COMMIT}", row["anchor_sampled_s"],
         None, row["every_vs_anchor"]),
    )
    print_row_table(console, f"Linux user mode, static program (median of {repeats})",
                    ("side", "median s", "speed vs QEMU", "every / side"),
                    [(name, fmt(seconds, ".3f"), fmt(speed, ".3f"), fmt(ratio, ".3f"))
                     for name, seconds, speed, ratio in lines], row)
    console.print(f"  examples/linux-user/bench.c (gcc -static -O2), argument {row['n']}, "
                  f"{fmt(row['instructions'], ',')} instructions (spe-emu {LINUX_INTERVAL})",
                  highlight=False)
    console.print("  speed = t_qemu / t_spe-emu, every / side = t_every / t_side, each per "
                  "repeat (run back to back), median over the repeats", highlight=False)
    console.print(f"  every vs raw: {fmt(row['every_vs_raw'], '.2f')}x (no target)",
                  highlight=False)
    if row.get("_plugin_cmd"):
        console.print(f"  plugin: {' '.join(map(str, row['_plugin_cmd']))} (empty environment)",
                      highlight=False, soft_wrap=True)


# ------------------------------------------------------------------------ linux boot -----

def boot_guest_dir() -> Path:
    """Where scripts/build_linux_guest.py put the guest (``$SPE_EMU_LINUX_GUEST``, else
    ``$SPE_EMU_LINUX_CACHE``/guest, else ~/.cache/spe_emu/linux/guest)."""
    if os.environ.get("SPE_EMU_LINUX_GUEST"):
        return Path(os.environ["SPE_EMU_LINUX_GUEST"])
    cache = os.environ.get("SPE_EMU_LINUX_CACHE")
    return (Path(cache) if cache else Path.home() / ".cache" / "spe_emu" / "linux") / "guest"


def kernel_guest_dir(kernel: str) -> Path:
    """The guest directory of a BOOT_KERNELS key: the default (6.1) guest's is
    :func:`boot_guest_dir`; the others' build_linux_guest.guest_dir(default_cache(), PACKAGE)
    (``$SPE_EMU_LINUX_CACHE``, else ~/.cache/spe_emu/linux, then guest-PACKAGE)."""
    package = dict(BOOT_KERNELS)[kernel]
    if package is None:
        return boot_guest_dir()
    blg = _build_script()
    return blg.guest_dir(blg.default_cache(), package)


def build_command(kernel: str) -> str:
    """The command that builds a BOOT_KERNELS key's guest (for a skip's reason)."""
    package = dict(BOOT_KERNELS)[kernel]
    return ("python scripts/build_linux_guest.py"
            + ("" if package is None else f" --kernel-package {package}"))


def missing_guest(kernel: str, files: tuple[str, ...]) -> str | None:
    """Why a kernel's guest cannot be booted (None: every one of ``files`` is there)."""
    guest = kernel_guest_dir(kernel)
    if all((guest / n).is_file() for n in files):
        return None
    return f"no Linux {kernel} guest in {guest} ({build_command(kernel)})"


def _children_cpu() -> float:
    """User + system seconds of the waited-for children so far."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def timed_child(cmd: list[str], timeout: float, **kw) -> tuple[float, float, str, int]:
    """Run ``cmd`` to its exit: (wall seconds, CPU seconds (user + system of the child and
    its children), stdout, exit status). Raises BenchError on a timeout."""
    c0, t0 = _children_cpu(), time.perf_counter()
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{BOOT_GUEST}: {cmd[0]} did not exit within {timeout:.0f} s") from None
    wall, used = time.perf_counter() - t0, _children_cpu() - c0
    return wall, used, proc.stdout.decode(errors="replace"), proc.returncode


def boot_side(runner: Runner, guest: Path, kernel: str, config: tuple, side: str) -> dict:
    """One boot of ``guest``'s vmlinuz + probe.cpio.gz to PSCI SYSTEM_OFF on ``side``
    ("spe-emu": ``spe-emu run --machine virt`` as a subprocess; "qemu"): wall and CPU
    seconds, guest instructions (spe-emu). Raises BenchError unless the guest powered off
    with exit status 0 (and, on spe-emu, the SPE driver probed: BOOT_PROBED)."""
    name, options, qemu_cpu, qemu_more = config
    files = ["--kernel", str(guest / "vmlinuz"), "--initrd", str(guest / "probe.cpio.gz"),
             "--append", BOOT_APPEND]
    if side == "qemu":
        cmd = [QEMU, *BOOT_QEMU_ARGS, "-cpu", qemu_cpu, *qemu_more, *files[:4], "-append",
               BOOT_APPEND]
        wall, cpu, out, status = timed_child(cmd, BOOT_TIMEOUT)
        insns = None
    else:
        outdir = runner.workdir / BOOT_GUEST / f"{kernel}-{name}"
        # (--max-insns: --machine has no budget by default; this one only guards a hang)
        cmd = [sys.executable, "-m", "spe_emu.tools.cli", "run", "--machine", "virt", "-m",
               BOOT_MEMORY, *files, "--max-insns", str(BOOT_MAX_INSNS), "-o", str(outdir),
               *options]
        wall, cpu, out, status = timed_child(cmd, BOOT_TIMEOUT, cwd=ROOT,
                                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        summary = outdir / "summary.json"
        insns = json.loads(summary.read_text())["instructions"] if summary.exists() else None
    if (status != 0 or BOOT_DONE not in out
            or (side == "spe-emu" and not BOOT_PROBED.search(out))):
        raise BenchError(f"{BOOT_GUEST} {kernel} {name} {side}: exit status {status}, console "
                         f"{out[-300:]!r}")
    return {"wall": wall, "cpu": cpu, "instructions": insns}


def boot_configs(kernel: str) -> tuple:
    """The configurations (BOOT_CONFIGS entries) ``kernel``'s boot rows measure."""
    return BOOT_CONFIGS + ((BOOT_SMP_CONFIG,) if kernel == BOOT_SMP_KERNEL else ())


def measure_boot(runner: Runner, repeats: int) -> list[dict]:
    """The Linux boot rows (keys BOOT_JSON_KEYS), one per BOOT_KERNELS and BOOT_CONFIGS
    entry: each cached Debian guest (scripts/build_linux_guest.py) booted to power-off on
    spe-emu and on qemu-system-aarch64 with the same kernel, initramfs and command line;
    medians over ``repeats`` (each repeat boots both sides back to back; no warm-up: a boot
    is long). A kernel's rows are skipped, with the reason (the command that builds the
    guest), when its guest is not built; QEMU's half without QEMU."""
    rows = [{"guest": BOOT_GUEST, "mode": "linux-boot", "kernel": kernel, "config": c[0],
             "instructions": None, "spe_emu_wall_s": None, "spe_emu_cpu_s": None,
             "qemu_wall_s": None, "qemu_cpu_s": None, "wall_ratio": None, "cpu_ratio": None,
             "skipped": None}
            for kernel, _ in BOOT_KERNELS for c in boot_configs(kernel)]
    configs = {c[0]: c for c in (*BOOT_CONFIGS, BOOT_SMP_CONFIG)}
    sides = ["spe-emu"] + (["qemu"] if shutil.which(QEMU) else [])
    for row in rows:
        kernel, config = row["kernel"], configs[row["config"]]
        why = missing_guest(kernel, ("vmlinuz", "probe.cpio.gz"))
        if why:
            row["skipped"] = why
            if config is BOOT_CONFIGS[0]:
                runner.say(f"[yellow]{BOOT_GUEST} {kernel}: skipped, {why}[/yellow]")
            continue
        guest = kernel_guest_dir(kernel)
        if "qemu" not in sides:
            row["skipped"] = f"QEMU half not run: {QEMU} not found"
        runs: dict[str, list[dict]] = {side: [] for side in sides}
        for i in range(repeats):
            for side in (sides if i % 2 == 0 else sides[::-1]):
                r = boot_side(runner, guest, kernel, config, side)
                runs[side].append(r)
                runner.say(f"{BOOT_GUEST} {kernel} {config[0]} {side}: {r['wall']:.1f} s "
                           f"wall, {r['cpu']:.1f} s CPU")
        spe = runs["spe-emu"]
        row["instructions"] = spe[0]["instructions"]
        row["spe_emu_wall_s"] = round(statistics.median(r["wall"] for r in spe), 2)
        row["spe_emu_cpu_s"] = round(statistics.median(r["cpu"] for r in spe), 2)
        if "qemu" in runs:
            q = runs["qemu"]
            row["qemu_wall_s"] = round(statistics.median(r["wall"] for r in q), 2)
            row["qemu_cpu_s"] = round(statistics.median(r["cpu"] for r in q), 2)
            row["wall_ratio"] = round(paired_median([r["wall"] for r in spe],
                                                    [r["wall"] for r in q],
                                                    lambda a, b: a / b), 2)
            row["cpu_ratio"] = round(paired_median([r["cpu"] for r in spe],
                                                   [r["cpu"] for r in q],
                                                   lambda a, b: a / b), 2)
    return rows


def wall_ratio_target(name: str, row: dict, limit: float, more: str = "") -> Target:
    """A Target on a row's ``wall_ratio`` (spe-emu's wall time / QEMU's) <= ``limit``: SKIP
    with the row's reason when it was not measured; the detail names both times, the CPU
    ratio and ``more``."""
    if row["wall_ratio"] is None:
        return Target(name, "SKIP", row["skipped"] or "not run")
    return Target(name, "PASS" if row["wall_ratio"] <= limit else "FAIL",
                  f"{row['wall_ratio']:.2f}x ({row['spe_emu_wall_s']} s against "
                  f"{row['qemu_wall_s']} s; CPU {row['cpu_ratio']}x{more})")


def boot_targets(rows: list[dict] | None) -> list[Target]:
    """Issue 27 (issue 14's 2x on 6.1 before): booting each kernel of BOOT_KERNELS to
    power-off with PAuth hidden on both sides takes spe-emu at most MAX_BOOT_RATIO times
    QEMU's wall time; one target per kernel. Issue 28: BOOT_SMP_KERNEL on BOOT_SMP PEs at
    most MAX_SMP_BOOT_RATIO times QEMU's on as many vCPUs (single-threaded TCG)."""
    if rows is None:
        return []
    out = []
    for kernel, _ in BOOT_KERNELS:
        row = next(r for r in rows if r["kernel"] == kernel and r["config"] == "pauth-hidden")
        out.append(wall_ratio_target(f"Linux {kernel} boot to power-off <= {MAX_BOOT_RATIO:g}x "
                                     f"QEMU wall time (PAuth hidden)", row, MAX_BOOT_RATIO))
    row = next(r for r in rows if r["config"] == BOOT_SMP_CONFIG[0])
    out.append(wall_ratio_target(
        f"Linux {BOOT_SMP_KERNEL} boot on --smp {BOOT_SMP} to power-off <= "
        f"{MAX_SMP_BOOT_RATIO:g}x QEMU -smp {BOOT_SMP} -accel tcg,thread=single wall time "
        f"(PAuth hidden)", row, MAX_SMP_BOOT_RATIO))
    return out


def print_boot(console: Console, rows: list[dict], repeats: int) -> None:
    print_row_table(console, f"Linux boot to power-off, virt board (median of {repeats})",
                    ("kernel", "config", "instructions", "spe-emu wall s", "spe-emu CPU s",
                     "QEMU wall s", "QEMU CPU s", "wall ratio", "CPU ratio"),
                    [(r["kernel"], r["config"], fmt(r["instructions"], ","),
                      fmt(r["spe_emu_wall_s"], ".1f"), fmt(r["spe_emu_cpu_s"], ".1f"),
                      fmt(r["qemu_wall_s"], ".2f"), fmt(r["qemu_cpu_s"], ".2f"),
                      fmt(r["wall_ratio"], ".2f"), fmt(r["cpu_ratio"], ".2f")) for r in rows],
                    {"skipped": None}, left=2)
    for kernel, _ in BOOT_KERNELS:
        why = next((r["skipped"] for r in rows if r["kernel"] == kernel and r["skipped"]), None)
        if why:
            console.print(f"  [yellow]{BOOT_GUEST} {kernel}: {why}[/yellow]", highlight=False)
    console.print(f"  {', '.join(f'{k} {kernel_guest_dir(k)}' for k, _ in BOOT_KERNELS)}: "
                  f"vmlinuz, probe.cpio.gz, --append {BOOT_APPEND!r}; "
                  f"spe-emu run --machine virt -m {BOOT_MEMORY} [--cpu-feature pauth=off] "
                  f"[--smp {BOOT_SMP}]; {QEMU} {' '.join(BOOT_QEMU_ARGS)} -cpu max[,pauth=off] "
                  f"[{' '.join(BOOT_SMP_CONFIG[3])}]", highlight=False)


# ------------------------------------------------------------------------ linux perf -----

def _build_script():
    """scripts/build_linux_guest.py as a module (the guest-side half of the linux-perf row)."""
    import importlib.util
    name = "build_linux_guest"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module   # (its dataclasses look their module up there)
        spec.loader.exec_module(module)
    return sys.modules[name]


def perf_phases(workload: str) -> list[tuple[str, str]]:
    """The linux-perf row's timed commands, (key, busybox sh command): the workload alone,
    then per recording event (PERF_EVENTS) ``perf record`` of ``true`` (perf's own cost)
    and of the workload."""
    blg = _build_script()
    out = [("workload", workload)]
    for name, event, period in PERF_EVENTS:
        record = f"perf record -e {event or blg.SPE_EVENT} -c {period} -o /tmp/perf.data --"
        out += [(f"{name}:true", f"{record} true"), (f"{name}:record", f"{record} {workload}")]
    return out


def streamed_child(cmd: list[str], timeout: float, prefix: str,
                   **kw) -> tuple[float, dict[str, tuple[float, str]], str, int]:
    """Run ``cmd`` to its exit, reading its output (stdout and stderr) as it comes: (wall
    seconds, {line key: (host seconds since the start, the line)} of the lines starting with
    ``prefix`` (the key is the line up to its 4th word), the last 2,000 characters of output,
    exit status). Raises BenchError on a timeout."""
    marks: dict[str, tuple[float, str]] = {}
    tail = ""
    t0 = time.perf_counter()
    with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, **kw) as proc:
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            for raw in proc.stdout:
                line = raw.decode(errors="replace").rstrip()
                tail = (tail + line + "\n")[-2000:]
                if line.startswith(prefix):
                    marks[" ".join(line.split()[:4])] = (time.perf_counter() - t0, line)
            status = proc.wait()
        finally:
            timed_out = not timer.is_alive()
            timer.cancel()
    if timed_out:
        raise BenchError(f"{PERF_GUEST}: {cmd[0]} did not exit within {timeout:.0f} s")
    return time.perf_counter() - t0, marks, tail, status


def perf_side(runner: Runner, guest: Path, initrd: Path, side: str) -> dict[str, dict]:
    """One boot of ``guest``'s vmlinuz with ``initrd`` (perf.cpio.gz with the timing
    /init) on ``side`` ("spe-emu" or "qemu"): {phase key: {"host_s", "guest_ms", "busy_ms",
    "status"}} of the phases the console reported. Raises BenchError unless the guest
    powered off with exit status 0."""
    blg = _build_script()
    files = ["--kernel", str(guest / "vmlinuz"), "--initrd", str(initrd)]
    if side == "qemu":
        cmd = [QEMU, *BOOT_QEMU_ARGS, "-cpu", PERF_CONFIG[2], *files, "-append", BOOT_APPEND]
        kw = {}
    else:
        cmd = [sys.executable, "-m", "spe_emu.tools.cli", "run", "--machine", "virt", "-m",
               BOOT_MEMORY, *files, "--append", BOOT_APPEND, "--max-insns",
               str(PERF_MAX_INSNS), "-o", str(runner.workdir / PERF_GUEST / side),
               *PERF_CONFIG[1]]
        kw = dict(cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    _, marks, tail, status = streamed_child(cmd, BOOT_TIMEOUT, blg.TIMING, **kw)
    if status != 0 or BOOT_DONE not in tail:
        raise BenchError(f"{PERF_GUEST} {side}: exit status {status}, console {tail[-300:]!r}")
    phases = {}
    for key, _ in perf_phases(""):
        start, done = marks.get(f"{blg.TIMING} {key} start"), marks.get(f"{blg.TIMING} {key} done")
        if start is None or done is None:
            continue
        u0, i0, u1, i1, rc = (int(w) for w in done[1].split()[4:9])
        phases[key] = {"host_s": done[0] - start[0], "guest_ms": u1 - u0,
                       "busy_ms": (u1 - u0) - (i1 - i0), "status": rc}
    return phases


def measure_perf(runner: Runner, repeats: int) -> list[dict]:
    """The linux-perf rows (keys PERF_JSON_KEYS), one per side and recording event: the cached
    Debian guest's perf.cpio.gz with a timing ``/init`` appended (build_linux_guest
    .timing_init: each phase of :func:`perf_phases` run twice, the second timed), booted on
    spe-emu and on QEMU (which has no SPE: its rows are the software event's); medians over
    ``repeats`` boots of each side. Skipped, with the reason, without the guest (or QEMU's
    rows without QEMU)."""
    blg = _build_script()
    guest = boot_guest_dir()
    sides = ["spe-emu"] + (["qemu"] if shutil.which(QEMU) else [])
    rows = [{"guest": PERF_GUEST, "mode": "linux-perf", "side": side, "event": name,
             **{k: None for k in PERF_JSON_KEYS[4:]}}
            for side in ("spe-emu", "qemu") for name, event, _ in PERF_EVENTS
            if side == "spe-emu" or event]
    missing = [n for n in ("vmlinuz", "perf.cpio.gz", "manifest.json")
               if not (guest / n).is_file()]
    if missing:
        for row in rows:
            row["skipped"] = f"no Linux guest in {guest} (python scripts/build_linux_guest.py)"
        runner.say(f"[yellow]{PERF_GUEST}: skipped, {rows[0]['skipped']}[/yellow]")
        return rows
    manifest = json.loads((guest / "manifest.json").read_text())
    initrd = runner.workdir / f"{PERF_GUEST}.cpio.gz"
    init = blg.timing_init(manifest["modules"], perf_phases(manifest["workload"]))
    initrd.write_bytes((guest / "perf.cpio.gz").read_bytes() + blg.init_overlay(init))
    runs: dict[str, list[dict]] = {side: [] for side in sides}
    for i in range(repeats):
        for side in (sides if i % 2 == 0 else sides[::-1]):
            runs[side].append(perf_side(runner, guest, initrd, side))
            runner.say(f"{PERF_GUEST} {side}: " + ", ".join(
                f"{k} {v['host_s']:.1f} s" for k, v in runs[side][-1].items()))
    for row in rows:
        if row["side"] not in runs:
            row["skipped"] = f"not run: {QEMU} not found"
            continue
        boots = runs[row["side"]]
        def median(key: str, field: str):
            values = [b[key][field] for b in boots if key in b and b[key]["status"] == 0]
            return statistics.median(values) if len(values) == len(boots) else None
        name = row["event"]
        for out, key in (("workload", "workload"), ("true", f"{name}:true"),
                         ("record", f"{name}:record")):
            host = median(key, "host_s")
            row[f"{out}_host_s"] = None if host is None else round(host, 2)
            row[f"{out}_guest_ms"] = median(key, "guest_ms")
            row[f"{out}_busy_ms"] = median(key, "busy_ms")
        if row["record_host_s"] is None:
            row["skipped"] = f"perf record {name} failed in the guest"
            continue
        for unit in ("host_s", "guest_ms", "busy_ms"):
            whole = row[f"workload_{unit}"]
            row[f"record_ratio_{unit.split('_')[0]}"] = round(row[f"record_{unit}"] / whole, 2)
            row[f"true_ratio_{unit.split('_')[0]}"] = round(row[f"true_{unit}"] / whole, 2)
        row["added_ratio_host"] = round((row["record_host_s"] - row["true_host_s"])
                                        / row["workload_host_s"], 2)
    return rows


def perf_targets(rows: list[dict] | None) -> list[Target]:
    """Issue 14: ``perf record`` (arm_spe_0, -c 4096) of a workload of about 100 M
    instructions completes within MAX_PERF_RATIO times the workload alone (host wall time;
    the detail gives the guest-time ratio and perf's own floor, ``perf record -- true``)."""
    if rows is None:
        return []
    row = next(r for r in rows if r["side"] == "spe-emu" and r["event"] == "arm_spe_0")
    name = f"perf record of the workload <= {MAX_PERF_RATIO:g}x the workload alone"
    if row["record_ratio_host"] is None:
        return [Target(name, "SKIP", row["skipped"] or "not run")]
    floors = ", ".join(f"{r['side']} {r['event']} {r['true_ratio_host']:.1f}x"
                       for r in rows if r["true_ratio_host"] is not None)
    return [Target(name, "PASS" if row["record_ratio_host"] <= MAX_PERF_RATIO else "FAIL",
                   f"{row['record_ratio_host']:.2f}x host wall ({row['record_host_s']} s "
                   f"against {row['workload_host_s']} s), {row['record_ratio_guest']:.2f}x "
                   f"guest time; perf record -- true alone (floor): {floors}; recording "
                   f"adds {row['added_ratio_host']:.2f}x the workload's time")]


def print_perf(console: Console, rows: list[dict], repeats: int) -> None:
    print_row_table(console, f"perf record in the Linux guest (median of {repeats})",
                    ("side", "event", "workload s / ms", "record -- true s / ms",
                     "record s / ms", "record / workload", "true / workload"),
                    [(r["side"], r["event"],
                      f"{fmt(r['workload_host_s'], '.2f')} / {fmt(r['workload_guest_ms'], 'd')}",
                      f"{fmt(r['true_host_s'], '.2f')} / {fmt(r['true_guest_ms'], 'd')}",
                      f"{fmt(r['record_host_s'], '.2f')} / {fmt(r['record_guest_ms'], 'd')}",
                      f"{fmt(r['record_ratio_host'], '.1f')}x / "
                      f"{fmt(r['record_ratio_guest'], '.1f')}x",
                      f"{fmt(r['true_ratio_host'], '.1f')}x / "
                      f"{fmt(r['true_ratio_guest'], '.1f')}x") for r in rows], rows[0], left=2)
    console.print("  host wall s / guest ms (/proc/uptime); busy guest ms (less the idle "
                  "column) in the JSON. The second of two runs of each command; "
                  f"spe-emu {' '.join(PERF_CONFIG[1])}, QEMU -cpu {PERF_CONFIG[2]} (no SPE: "
                  "task-clock only)", highlight=False)


def variant_side(runner: Runner, guest: Path, kernel: str, side: str) -> dict:
    """One boot of ``guest``'s perf variant as built (vmlinuz + perf.cpio.gz and its own
    ``/init``: insmod, the workload, ``perf record`` of ``true`` twice and of the workload,
    ``perf report`` twice, ``perf script``, ``semihost-put perf.data``) to power-off on
    ``side``: spe-emu records arm_spe_0 (the /init's default event), QEMU
    VARIANT_QEMU_EVENT (``spe_event=`` on its command line); PAuth hidden on both
    (PERF_CONFIG). Returns wall and CPU seconds, the host seconds to ``/init`` and the guest
    instructions (spe-emu). Raises BenchError unless the guest recorded the expected event
    (perf record exit 0), ran perf script, sent perf.data and powered off with status 0."""
    blg = _build_script()
    where = runner.workdir / PERF_GUEST / f"variant-{kernel}-{side}"
    where.mkdir(parents=True, exist_ok=True)
    files = ["--kernel", str(guest / "vmlinuz"), "--initrd", str(guest / "perf.cpio.gz")]
    if side == "qemu":
        event = VARIANT_QEMU_EVENT
        cmd = [QEMU, *BOOT_QEMU_ARGS, "-cpu", PERF_CONFIG[2], *VARIANT_SEMIHOSTING, *files,
               "-append", f"{BOOT_APPEND} spe_event={event}"]
        kw = dict(cwd=where)
    else:
        event = blg.SPE_EVENT
        cmd = [sys.executable, "-m", "spe_emu.tools.cli", "run", "--machine", "virt", "-m",
               BOOT_MEMORY, *files, "--append", BOOT_APPEND, "--semihosting-userspace",
               "--max-insns", str(PERF_MAX_INSNS), "-o", str(where), *PERF_CONFIG[1]]
        kw = dict(cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    c0 = _children_cpu()
    wall, marks, tail, status = streamed_child(cmd, BOOT_TIMEOUT, blg.MARK, **kw)
    cpu = _children_cpu() - c0
    mark = lambda key: marks.get(f"{blg.MARK} {key}", (None, ""))   # noqa: E731
    shown = mark(f"event {event}")[1]
    ok = (status == 0 and BOOT_DONE in tail and shown == f"{blg.MARK} event {event}"
          and " exit 0 took " in mark("perf record exit")[1]
          and mark("perf script done")[0] is not None and mark("perf.data sent")[0] is not None)
    if not ok:
        raise BenchError(f"{PERF_GUEST} perf variant {kernel} {side}: exit status {status}, "
                         f"marks {sorted(marks)}, console {tail[-300:]!r}")
    summary = where / "summary.json"
    insns = (json.loads(summary.read_text())["instructions"]
             if side == "spe-emu" and summary.exists() else None)
    return {"wall": wall, "cpu": cpu, "init": mark("/init reached")[0], "instructions": insns}


def measure_variant(runner: Runner, repeats: int) -> list[dict]:
    """The perf variant end to end (keys VARIANT_JSON_KEYS), one row per VARIANT_KERNELS
    entry: :func:`variant_side` on spe-emu (arm_spe_0) and on QEMU (VARIANT_QEMU_EVENT, the
    same /init), medians over ``repeats`` (both sides back to back, alternating). Skipped,
    with the reason, without the guest (or QEMU's half without QEMU)."""
    sides = ["spe-emu"] + (["qemu"] if shutil.which(QEMU) else [])
    rows = []
    for kernel in VARIANT_KERNELS:
        row = {k: None for k in VARIANT_JSON_KEYS}
        row.update(guest=PERF_GUEST, mode="perf-variant", kernel=kernel,
                   spe_emu_event=PERF_EVENTS[0][0], qemu_event=VARIANT_QEMU_EVENT)
        rows.append(row)
        why = missing_guest(kernel, ("vmlinuz", "perf.cpio.gz"))
        if why:
            row["skipped"] = why
            runner.say(f"[yellow]{PERF_GUEST} perf variant {kernel}: skipped, {why}[/yellow]")
            continue
        if "qemu" not in sides:
            row["skipped"] = f"QEMU half not run: {QEMU} not found"
        guest = kernel_guest_dir(kernel)
        runs: dict[str, list[dict]] = {side: [] for side in sides}
        for i in range(repeats):
            for side in (sides if i % 2 == 0 else sides[::-1]):
                r = variant_side(runner, guest, kernel, side)
                runs[side].append(r)
                runner.say(f"{PERF_GUEST} perf variant {kernel} {side}: {r['wall']:.1f} s "
                           f"wall, {r['cpu']:.1f} s CPU, /init at {r['init']:.1f} s")
        for side, prefix in (("spe-emu", "spe_emu"), ("qemu", "qemu")):
            if side not in runs:
                continue
            for key in ("wall", "cpu", "init"):
                row[f"{prefix}_{key}_s"] = round(statistics.median(r[key] for r in runs[side]),
                                                 2)
        row["instructions"] = runs["spe-emu"][0]["instructions"]
        if "qemu" in runs:
            for key in ("wall", "cpu"):
                row[f"{key}_ratio"] = round(paired_median(
                    [r[key] for r in runs["spe-emu"]], [r[key] for r in runs["qemu"]],
                    lambda a, b: a / b), 2)
    return rows


def variant_targets(rows: list[dict] | None) -> list[Target]:
    """Issue 27: the perf variant (insmod, perf record of the workload, perf report, perf
    script) end to end on spe-emu with arm_spe_0 within MAX_VARIANT_RATIO times QEMU's wall
    time running the same /init with VARIANT_QEMU_EVENT; one target per VARIANT_KERNELS
    entry."""
    if rows is None:
        return []
    out = []
    for row in rows:
        name = (f"Linux {row['kernel']} perf variant end to end <= {MAX_VARIANT_RATIO:g}x QEMU "
                f"({row['qemu_event']})")
        after = ("" if row["wall_ratio"] is None else
                 f"; after /init: {row['spe_emu_wall_s'] - row['spe_emu_init_s']:.2f} s against "
                 f"{row['qemu_wall_s'] - row['qemu_init_s']:.2f} s")
        out.append(wall_ratio_target(name, row, MAX_VARIANT_RATIO, after))
    return out


def print_variant(console: Console, rows: list[dict], repeats: int) -> None:
    print_row_table(console, f"perf variant end to end, boot to power-off (median of {repeats})",
                    ("kernel", "instructions", "spe-emu wall s", "spe-emu CPU s",
                     "spe-emu /init s", "QEMU wall s", "QEMU CPU s", "QEMU /init s",
                     "wall ratio", "CPU ratio"),
                    [(r["kernel"], fmt(r["instructions"], ","), fmt(r["spe_emu_wall_s"], ".1f"),
                      fmt(r["spe_emu_cpu_s"], ".1f"), fmt(r["spe_emu_init_s"], ".1f"),
                      fmt(r["qemu_wall_s"], ".2f"), fmt(r["qemu_cpu_s"], ".2f"),
                      fmt(r["qemu_init_s"], ".2f"), fmt(r["wall_ratio"], ".2f"),
                      fmt(r["cpu_ratio"], ".2f")) for r in rows], {"skipped": None})
    for r in rows:
        if r["skipped"]:
            console.print(f"  [yellow]{PERF_GUEST} perf variant {r['kernel']}: "
                          f"{r['skipped']}[/yellow]", highlight=False)
    console.print(f"  GUEST/perf.cpio.gz as built (its /init); spe-emu {' '.join(PERF_CONFIG[1])}"
                  f" --semihosting-userspace, event arm_spe_0 (the /init's default); QEMU -cpu "
                  f"{PERF_CONFIG[2]} {' '.join(VARIANT_SEMIHOSTING)}, --append '{BOOT_APPEND} "
                  f"spe_event={VARIANT_QEMU_EVENT}'; /init s: host seconds to the /init's "
                  "first line", highlight=False)


# ------------------------------------------------------------------------ decoder --------

def decoder_trace(runner: Runner, mib: int) -> tuple[Path, Path]:
    """(trace of about ``mib`` MiB of whole records, the same bytes as a perf.data)."""
    from spe_emu.tools.perfdata import perf_data_bytes
    parts = []
    for name in DECODE_SOURCES:
        out = runner.workdir / DECODER_GUEST / name
        try:
            run_image(GUESTS_DIR / f"{name}.elf",
                      RunOptions(interval=DECODE_INTERVAL, outdir=out), console=None)
        except SpeEmuError as exc:
            raise BenchError(f"{DECODER_GUEST}: {name}: {exc}") from None
        parts.append((out / TRACE_NAME).read_bytes())
    unit = b"".join(parts)
    trace = unit * max(1, (mib << 20) // len(unit))
    path = runner.workdir / DECODER_GUEST / "big.trace"
    path.write_bytes(trace)
    perf_data = path.with_suffix(".data")
    perf_data.write_bytes(perf_data_bytes(trace, []))
    return path, perf_data


def measure_decoder(runner: Runner, mib: int, repeats: int) -> dict:
    """The decoder row (keys DECODER_JSON_KEYS, plus ``_`` keys for the table)."""
    trace, perf_data = decoder_trace(runner, mib)
    row = {"guest": DECODER_GUEST, "mode": "decode", "trace_bytes": trace.stat().st_size,
           "decode_s": None, "report_s": None, "perf_s": None, "decode_vs_perf": None,
           "report_vs_perf": None, "skipped": None}
    cli = [sys.executable, "-m", "spe_emu.tools.cli"]
    sides = {"decode": [*cli, "decode", str(trace)],
             "report": [*cli, "report", str(trace), "--image", str(GUESTS_DIR / "sort.elf")]}
    perf = shutil.which(PERF)
    if perf is None:
        row["skipped"] = f"perf half not run: {PERF} not found (Debian: linux-perf)"
        runner.say(f"[yellow]{DECODER_GUEST}: {row['skipped']}[/yellow]")
    else:
        sides["perf"] = [perf, "report", "-D", "-i", str(perf_data)]
    row["_cmds"] = sides
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT)}

    def once(cmd: list[str]) -> float:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              cwd=ROOT, env=env, timeout=600)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise BenchError(f"{DECODER_GUEST}: {' '.join(cmd)}: exit status "
                             f"{proc.returncode}: {proc.stderr.decode(errors='replace')[-300:]}")
        return seconds

    for name, cmd in sides.items():
        once(cmd)                                            # warm-up (page cache, build)
    times = runner.alternate(DECODER_GUEST, {name: partial(once, cmd)
                                             for name, cmd in sides.items()}, repeats)
    for name in sides:
        row[f"{name}_s"] = round(statistics.median(times[name]), 4)
    if "perf" in times:
        for name in ("decode", "report"):
            row[f"{name}_vs_perf"] = round(paired_median(times[name], times["perf"],
                                                         lambda a, b: b / a), 4)
    return row


def decoder_targets(row: dict | None) -> list[Target]:
    """Issue 17: spe-emu decode and report at least as fast as perf report -D."""
    if row is None:
        return []
    out = []
    for name in ("decode", "report"):
        what = f"spe-emu {name} at least as fast as perf report -D"
        ratio = row[f"{name}_vs_perf"]
        if ratio is None:
            out.append(Target(what, "SKIP", row["skipped"] or "not run"))
        else:
            out.append(Target(what, "PASS" if ratio >= 1.0 else "FAIL",
                              f"{row[name + '_s']:.2f} s vs {row['perf_s']:.2f} s "
                              f"({ratio:.2f}x) on {row['trace_bytes'] / 2**20:.1f} MiB"))
    return out


def print_decoder(console: Console, row: dict, repeats: int) -> None:
    print_row_table(console, f"trace decoding (median of {repeats})",
                    ("guest", "trace MiB", "decode s", "report s", "perf -D s", "perf / decode",
                     "perf / report"),
                    [(row["guest"], f"{row['trace_bytes'] / 2**20:.1f}",
                      fmt(row["decode_s"], ".3f"), fmt(row["report_s"], ".3f"),
                      fmt(row["perf_s"], ".3f"), fmt(row["decode_vs_perf"], ".2f"),
                      fmt(row["report_vs_perf"], ".2f"))], row)
    for name, cmd in row["_cmds"].items():
        console.print(f"  {name}: {' '.join(cmd)} > /dev/null", highlight=False,
                      soft_wrap=True)


# ------------------------------------------------------------------------ report ----------

def paired_median(a: list[float], b: list[float], combine) -> float:
    """Median over the repeats r of ``combine(a[r], b[r])`` (both lists in repeat order, one
    value per repeat)."""
    return statistics.median(combine(x, y) for x, y in zip(a, b, strict=True))


def rows_for(guest: str, modes: list[Mode], meas: dict[str, Measurement]) -> list[dict]:
    disabled = meas["spe-disabled"]
    raw = meas["raw"]
    raw_insns = disabled.instructions  # raw mode counts nothing; same path as spe-disabled
    raw_mips = raw_insns / raw.median / 1e6
    rows = []
    for m in modes:
        x = meas[m.key]
        insns = raw_insns if m.mode == "raw" else x.instructions
        mips = insns / x.median / 1e6
        if m.mode == "reference":  # (run once, after the others)
            ratio = mips / raw_mips
        else:
            ratio = paired_median(raw.seconds, x.seconds, lambda a, b: a / b) * insns / raw_insns
        per_sample = None
        if m.mode == "spe" and x.samples:
            per_sample = (paired_median(x.seconds, disabled.seconds, lambda a, b: a - b)
                          / x.samples * 1e6)
        every_vs_anchor = None
        if m.mode == "spe-every" and "anchor" in meas:
            every_vs_anchor = round(paired_median(x.seconds, meas["anchor"].seconds,
                                                  lambda e, a: e / a), 4)
        rows.append({
            "guest": guest, "mode": m.mode, "interval": m.interval,
            "mips": round(mips, 4),
            "ratio_to_raw": round(ratio, 4),
            "per_sample_us": None if per_sample is None else round(per_sample, 3),
            "peak_rss_mb": round(max(x.rss), 1),
            "every_vs_anchor": every_vs_anchor,
            # not in the JSON:
            "_seconds": x.median, "_instructions": insns, "_samples": x.samples,
            "_partial": x.partial,
        })
    return rows


@dataclass
class Target:
    name: str
    status: str  # PASS | FAIL | SKIP
    detail: str


def check_targets(rows: list[dict], guests: list[str], memory: dict | None,
                  tolerance: float, reference_run: bool, per_run_rss: bool) -> list[Target]:
    by = {(r["guest"], r["mode"], r["interval"]): r for r in rows}

    def per_guest(mode: str, interval, value, ok, fmt) -> tuple[str, str]:
        if not guests:
            return "SKIP", "no SPE guest selected"
        parts, status = [], "PASS"
        for g in guests:
            row = by.get((g, mode, interval))
            v = value(g, row) if row is not None else None
            if v is None:
                return "SKIP", f"not measured for {g}"
            parts.append(f"{g} {fmt(v)}")
            if not ok(v):
                status = "FAIL"
        return status, ", ".join(parts)

    targets = []
    spe = ("spe", TARGET_INTERVAL)
    s, d = per_guest(*spe, lambda g, r: r["ratio_to_raw"], lambda v: v >= MIN_RATIO_SPE,
                     lambda v: f"{v:.3f}x")
    targets.append(Target(f"SPE enabled, interval {TARGET_INTERVAL}: >= {MIN_RATIO_SPE}x raw "
                          f"MIPS on every guest", s, d))

    def over_ref(g, r):
        ref = by.get((g, "reference", REFERENCE_INTERVAL))
        return None if ref is None else r["mips"] / ref["mips"]
    if reference_run:
        s, d = per_guest(*spe, over_ref, lambda v: v >= MIN_SPEEDUP_OVER_REFERENCE,
                         lambda v: f"{v:.0f}x")
    else:
        s, d = "SKIP", "--no-reference"
    targets.append(Target(f"SPE enabled, interval {TARGET_INTERVAL}: >= "
                          f"{MIN_SPEEDUP_OVER_REFERENCE:g}x reference MIPS", s, d))
    s, d = per_guest(*spe, lambda g, r: r["per_sample_us"], lambda v: v <= MAX_PER_SAMPLE_US,
                     lambda v: f"{v:.1f} us")
    targets.append(Target(f"SPE enabled, interval {TARGET_INTERVAL}: per-sample cost <= "
                          f"{MAX_PER_SAMPLE_US:g} us", s, d))
    s, d = per_guest("spe-disabled", None, lambda g, r: r["ratio_to_raw"],
                     lambda v: v >= MIN_RATIO_DISABLED, lambda v: f"{v:.3f}x")
    targets.append(Target(f"profiling disabled: >= {MIN_RATIO_DISABLED}x raw MIPS", s, d))

    def every_over_sampled(g, r):   # (time ratio, from the paired ratios to raw)
        sampled = by.get((g, "spe", TARGET_INTERVAL))
        return (None if sampled is None or not r["ratio_to_raw"]
                else sampled["ratio_to_raw"] / r["ratio_to_raw"])
    s, d = per_guest("spe-every", TARGET_INTERVAL, every_over_sampled,
                     lambda v: v <= MAX_EVERY_OVER_SAMPLED, lambda v: f"{v:.2f}x")
    targets.append(Target(f"model_feed every (the default), interval {TARGET_INTERVAL}: <= "
                          f"{MAX_EVERY_OVER_SAMPLED:g}x the sampled mode's time", s, d))
    if not guests or any(r["every_vs_anchor"] is not None for r in rows):
        s, d = per_guest("spe-every", TARGET_INTERVAL, lambda g, r: r["every_vs_anchor"],
                         lambda v: v <= MAX_EVERY_OVER_SAMPLED, lambda v: f"{v:.2f}x")
    else:
        s, d = "SKIP", "no --sampled-anchor"
    targets.append(Target(f"model_feed every (the default), interval {TARGET_INTERVAL}: <= "
                          f"{MAX_EVERY_OVER_SAMPLED:g}x the sampled mode of issue 26's day "
                          f"({ANCHOR_COMMIT})", s, d))

    name = "memory: peak RSS does not grow with records written"
    if memory is None:
        targets.append(Target(name, "SKIP", "--no-memory-check" if guests else
                              "no SPE guest selected"))
    else:
        many, few = memory["many"], memory["few"]
        extra = many["growth_mb"] - few["growth_mb"]
        detail = (f"{memory['guest']}: {many['records']} records -> +{many['growth_mb']:.1f} MiB,"
                  f" {few['records']} records -> +{few['growth_mb']:.1f} MiB "
                  f"(difference {extra:+.1f} MiB, tolerance {tolerance:g} MiB)")
        if not per_run_rss:
            targets.append(Target(name, "SKIP", detail + "; per-run peak RSS unavailable"))
        else:
            if extra > tolerance:
                control = memory["control"]
                if abs(many["growth_mb"] - control["growth_mb"]) <= tolerance:
                    detail += (f"; the no-records control ({control['samples']} samples, "
                               f"{control['records']} records) grows as much, so records "
                               f"stream out and the growth follows samples "
                               f"({per_sample_kib(memory):.2f} KiB per sample)")
                else:
                    detail += (f"; the no-records control grows "
                               f"+{control['growth_mb']:.1f} MiB, so the growth follows "
                               f"records")
            targets.append(Target(name, "PASS" if extra <= tolerance else "FAIL", detail))
    return targets


def per_sample_kib(memory: dict) -> float:
    """RSS growth per sample (KiB) between the few-records run and the no-records control."""
    few, control = memory["few"], memory["control"]
    return 1024 * (control["growth_mb"] - few["growth_mb"]) / max(1, control["samples"] -
                                                                   few["samples"])


def num(value: float) -> str:
    """Three decimals, or three significant digits for small values (reference mode)."""
    return f"{value:.3f}" if value >= 0.1 else f"{value:.3g}"


def fmt(value, spec: str, none: str = "-") -> str:
    return none if value is None else format(value, spec)


def print_row_table(console: Console, title: str, columns: tuple[str, ...],
                    cells: list[tuple[str, ...]], row: dict, left: int = 1) -> None:
    """One side-by-side row's table (``title``; the first ``left`` columns left-justified,
    the others right; one line per ``cells`` entry), then why part of ``row`` was skipped,
    if it was."""
    table = Table(title=title, title_justify="left")
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i < left else "right")
    for line in cells:
        table.add_row(*line)
    console.print(table)
    if row["skipped"]:
        console.print(f"  [yellow]{row['guest']}: {row['skipped']}[/yellow]", highlight=False)


def print_report(console: Console, rows: list[dict], memory: dict | None,
                 targets: list[Target], rss: RssMeter, repeats: int,
                 timer: dict | None = None, qemu_cmd: list[str] | None = None,
                 exceptions: dict | None = None, linux: dict | None = None) -> None:
    if linux is not None:
        print_linux(console, linux, repeats)
        console.print()
    if exceptions is not None:
        print_exceptions(console, exceptions, repeats)
        console.print()
    if rows:
        print_rows(console, rows, memory, rss, repeats)
        if timer is not None:
            console.print()
    if timer is not None:
        print_timer(console, timer, qemu_cmd or [], repeats)
    console.print()
    colour = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow"}
    for t in targets:
        console.print(f"[{colour[t.status]}]{t.status}[/] {t.name}: {t.detail}", highlight=False)


def print_timer(console: Console, row: dict, qemu_cmd: list[str], repeats: int) -> None:
    print_row_table(console, f"timer interrupts, virt board (median of {repeats})",
                    ("guest", "interrupts", "spe-emu s", "spe-emu irq/s", "QEMU s", "QEMU irq/s",
                     "spe-emu / QEMU"),
                    [(row["guest"], f"{row['ticks']:,}", fmt(row["_spe_seconds"], ".3f"),
                      fmt(row["spe_emu_irqs_per_s"], ",.0f"), fmt(row["_qemu_seconds"], ".3f"),
                      fmt(row["qemu_irqs_per_s"], ",.0f"), fmt(row["ratio_to_qemu"], ".3f"))],
                    row)
    console.print(f"  examples/virt-timer built with -DTICKS={row['ticks']} "
                  f"-DPERIOD_US={row['period_us']}", highlight=False)
    console.print("  spe-emu: run_kernel in this process (machine set-up included); QEMU: "
                  "wall time of the process (start-up included)", highlight=False)
    if qemu_cmd:
        console.print(f"  QEMU: {' '.join(qemu_cmd)}", highlight=False, soft_wrap=True)
        if row["qemu_clock"] == "host":
            console.print(f"  QEMU's counter follows host time: at most "
                          f"{1e6 / row['period_us']:,.0f} interrupts/s however fast it "
                          f"runs", highlight=False)
    console.print("  spe-emu / QEMU compares the two within each repeat (run back to back), "
                  "then takes the median over the repeats", highlight=False)


def print_rows(console: Console, rows: list[dict], memory: dict | None, rss: RssMeter,
               repeats: int) -> None:
    table = Table(title=f"spe_emu benchmark (median of {repeats}; reference run once)",
                  title_justify="left")
    for name, justify in (("guest", "left"), ("mode", "left"), ("interval", "right"),
                          ("instructions", "right"), ("median s", "right"), ("MIPS", "right"),
                          ("ratio to raw", "right"), ("samples", "right"),
                          ("per-sample us", "right"), ("peak RSS MB", "right")):
        table.add_column(name, justify=justify)
    last = None
    for r in rows:
        if last is not None and r["guest"] != last:
            table.add_section()
        last = r["guest"]
        table.add_row(r["guest"], r["mode"] + (" (prefix)" if r["_partial"] else ""),
                      fmt(r["interval"], "d"), f"{r['_instructions']:,}",
                      f"{r['_seconds']:.3f}", num(r["mips"]), num(r["ratio_to_raw"]),
                      "-" if r["mode"] in ("raw", "spe-disabled") else f"{r['_samples']:,}",
                      fmt(r["per_sample_us"], ".1f"), f"{r['peak_rss_mb']:.1f}")
    console.print(table)
    if memory is not None:
        mt = Table(title=f"memory check ({memory['guest']}, mode fast, one run each)",
                   title_justify="left")
        for name in ("run", "samples", "records", "PMBIRQs", "trace bytes", "start RSS MB",
                     "peak RSS MB", "growth MB"):
            mt.add_column(name, justify="left" if name == "run" else "right")
        for key, label in (("many", "buffer 4096, interval 256 (many records)"),
                           ("few", "default buffer, interval 65536 (few records)"),
                           ("control", "buffer 4096, interval 256, min-latency 4095 "
                                       "(same samples, no records)")):
            m = memory[key]
            mt.add_row(label, f"{m['samples']:,}", f"{m['records']:,}", f"{m['irqs']:,}",
                       f"{m['trace_bytes']:,}", f"{m['start_mb']:.1f}", f"{m['peak_mb']:.1f}",
                       f"{m['growth_mb']:+.1f}")
        console.print(mt)
        many, control = memory["many"], memory["control"]
        console.print(f"  records vs no records at the same sample count: "
                      f"{many['growth_mb'] - control['growth_mb']:+.1f} MiB "
                      f"({many['records']:,} vs {control['records']:,} records, "
                      f"{many['samples']:,} vs {control['samples']:,} samples); RSS growth per "
                      f"sample {per_sample_kib(memory):.2f} KiB", highlight=False)
    console.print(f"  {rss.note}", highlight=False)
    console.print("  raw MIPS use the spe-disabled run's instruction count (raw mode does not "
                  "count instructions)", highlight=False)
    console.print("  ratio to raw and per-sample us compare the modes within each repeat (run "
                  "back to back), then take the median over the repeats", highlight=False)


# ------------------------------------------------------------------------ main ------------

def memory_check(runner: Runner, guest: str, image: Path) -> dict:
    out = {"guest": guest}
    base = Mode("memory", "spe", None, dict(mode="fast"))
    for key, opts in (("few", MEMORY_FEW), ("many", MEMORY_MANY), ("control", MEMORY_CONTROL)):
        outdir = runner.workdir / guest / f"memory-{key}"
        seconds, start, peak, result = runner.once(image, base.run_options(outdir, **opts),
                                                   f"{guest} memory {key}")
        trace = outdir / TRACE_NAME
        out[key] = {"seconds": seconds, "start_mb": start, "peak_mb": peak,
                    "growth_mb": peak - start, "samples": result.samples,
                    "records": result.records_written, "irqs": result.irqs_taken,
                    "trace_bytes": trace.stat().st_size if trace.exists() else 0}
        runner.say(f"[dim]{guest:>14} memory {key:<7}       {seconds:8.3f} s[/dim]")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--guest", action="append", metavar="NAME",
                   help=f"guest to run (guests/NAME.elf, {TIMER_GUEST} for the timer "
                        f"interrupt row, {EXC_GUEST} for the exceptions row); repeatable; "
                        f"default: every guest, {TIMER_GUEST} and {EXC_GUEST}")
    p.add_argument("--interval", action="append", type=int, metavar="N",
                   help=f"SPE interval for the spe rows; repeatable; default: "
                        f"{' '.join(map(str, DEFAULT_INTERVALS))}")
    p.add_argument("--repeats", type=int, default=7, metavar="N",
                   help="counted runs per guest and mode, median reported (default 7: the "
                        "paired medians need a few repeats to outvote a change of host speed)")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the per-instruction reference mode (the slowest part)")
    p.add_argument("--reference-insns", type=int, metavar="N",
                   help="time the reference mode over its first N instructions only "
                        "(default: the whole run)")
    p.add_argument("--memory-guest", metavar="NAME",
                   help="guest for the memory check (default: the selected guest with the "
                        "most instructions)")
    p.add_argument("--no-memory-check", action="store_true", help="skip the memory check")
    p.add_argument("--rss-tolerance-mb", type=float, default=4.0, metavar="MB",
                   help="allowed extra RSS growth of the many-records run (default 4)")
    p.add_argument("--no-timer", action="store_true",
                   help=f"skip the {TIMER_GUEST} row (when no --guest names it)")
    p.add_argument("--timer-ticks", type=int, default=TIMER_TICKS, metavar="N",
                   help=f"timer interrupts the {TIMER_GUEST} row takes (default {TIMER_TICKS})")
    p.add_argument("--timer-period-us", type=int, default=TIMER_PERIOD_US, metavar="US",
                   help=f"its timer period, microseconds of counter time (default "
                        f"{TIMER_PERIOD_US})")
    p.add_argument("--qemu-clock", choices=tuple(QEMU_CLOCKS), default="icount",
                   help="QEMU's virtual time: icount (-icount shift=0,sleep=off: from "
                        "instructions, WFI jumps to the next deadline, as spe_emu) or host "
                        "(QEMU's default: host time, which bounds the rate by the period); "
                        "default icount")
    p.add_argument("--svc-rounds", type=int, default=EXC_SVC_ROUNDS, metavar="N",
                   help=f"SVC round trips of the {EXC_GUEST} row (default {EXC_SVC_ROUNDS})")
    p.add_argument("--irq-rounds", type=int, default=EXC_IRQ_ROUNDS, metavar="N",
                   help=f"interrupts of the {EXC_GUEST} row (default {EXC_IRQ_ROUNDS})")
    p.add_argument("--no-pmu", action="store_true",
                   help=f"skip the {PMU_GUEST} row (when no --guest names it)")
    p.add_argument("--no-exceptions", action="store_true",
                   help=f"skip the {EXC_GUEST} row (when no --guest names it)")
    p.add_argument("--sampled-anchor", metavar="PYTHON",
                   help=f"an interpreter with spe_emu as of {ANCHOR_COMMIT} (issue 26's "
                        f"'today's sampled mode'; scripts/make-bench-anchor.sh installs it): "
                        f"its sampled mode is timed next to the spe-every rows and the Linux "
                        f"row, for a target of its own")
    p.add_argument("--no-linux", action="store_true",
                   help=f"leave out the {LINUX_GUEST} row (run by default)")
    p.add_argument("--linux-n", type=int, default=LINUX_N, metavar="N",
                   help=f"argument of examples/linux-user/bench.c (default {LINUX_N})")
    p.add_argument("--no-linux-boot", action="store_true",
                   help=f"skip the {BOOT_GUEST} rows (Linux boot of each kernel against "
                        "QEMU; minutes)")
    p.add_argument("--boot-repeats", type=int, default=1, metavar="N",
                   help=f"repeats of the {BOOT_GUEST} and {PERF_GUEST} rows (default 1: a boot "
                        "takes minutes)")
    p.add_argument("--no-linux-perf", action="store_true",
                   help=f"skip the {PERF_GUEST} rows (perf record in the Linux guest against "
                        "the workload alone, and the perf variant end to end against QEMU; "
                        "minutes)")
    p.add_argument("--no-decoder", action="store_true",
                   help=f"skip the {DECODER_GUEST} row (when no --guest names it)")
    p.add_argument("--decode-mib", type=int, default=DECODE_MIB, metavar="MIB",
                   help=f"trace size of the {DECODER_GUEST} row (default {DECODE_MIB})")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the rows as JSON")
    p.add_argument("--check", action="store_true", help="exit 1 if a target fails")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.boot_repeats < 1:
        p.error("--repeats and --boot-repeats must be at least 1")
    if args.reference_insns is not None and args.reference_insns < 1:
        p.error("--reference-insns must be positive")
    if args.svc_rounds < 1 or args.irq_rounds < 1:
        p.error("--svc-rounds and --irq-rounds must be positive")
    if args.timer_ticks < 1 or args.timer_period_us < 1:
        p.error("--timer-ticks and --timer-period-us must be positive")
    if args.no_timer and TIMER_GUEST in (args.guest or ()):
        p.error(f"--no-timer with --guest {TIMER_GUEST}")
    return args


def resolve_guests(names: list[str] | None) -> dict[str, Path]:
    """The SPE guests named (every one when ``names`` is None); TIMER_GUEST is not one."""
    available = {p.stem: p for p in sorted(GUESTS_DIR.glob("*.elf"))}
    if not names:
        if not available:
            raise BenchError(f"no guests in {GUESTS_DIR}")
        return available
    out = {}
    for name in names:
        if name in (TIMER_GUEST, EXC_GUEST, LINUX_GUEST, DECODER_GUEST, BOOT_GUEST,
                    PERF_GUEST, PMU_GUEST):
            continue
        stem = Path(name).stem if name.endswith(".elf") else name
        if stem not in available:
            raise BenchError(f"--guest {name}: no guests/{stem}.elf (available: "
                             f"{', '.join(available)})")
        out[stem] = available[stem]
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    width = None if sys.stdout.isatty() else 160
    console = Console(width=width)
    log = None if args.quiet else Console(stderr=True)
    from spe_emu import native
    if not native.unicorn_patches():   # (README "Quick start": a checkout not built in place)
        Console(stderr=True).print("bench: warning: spe_emu runs on the unicorn binding's own "
                                   "library, without patches/unicorn: these are not the "
                                   "product's numbers (pip install -e . builds them here)")
    try:
        guests = resolve_guests(args.guest)
        intervals = list(dict.fromkeys(args.interval or DEFAULT_INTERVALS))
        for n in intervals:
            RunOptions(interval=n).validate()
        if args.memory_guest is not None and args.memory_guest not in guests:
            resolve_guests([args.memory_guest])  # raises if it does not exist at all
        modes = modes_for(intervals, reference=not args.no_reference)
        def wanted(guest: str, skipped: bool) -> bool:
            # named with --guest, or (no --guest) not turned off by its --no-* option
            return guest in (args.guest or ()) or (not args.guest and not skipped)

        timer_setup = None
        if wanted(TIMER_GUEST, args.no_timer):
            timer_setup = TimerSetup(args.timer_ticks, args.timer_period_us, args.qemu_clock)
        exc_wanted = wanted(EXC_GUEST, args.no_exceptions)
        exceptions = None
        pmu_wanted = wanted(PMU_GUEST, args.no_pmu)
        pmu = None
        linux_wanted = wanted(LINUX_GUEST, args.no_linux)
        linux = None
        decoder_wanted = wanted(DECODER_GUEST, args.no_decoder)
        decoder = None
        boot_wanted = wanted(BOOT_GUEST, args.no_linux_boot)
        boot = None
        perf_wanted = wanted(PERF_GUEST, args.no_linux_perf)
        perf = variant = None
        rss = RssMeter()
        rows: list[dict] = []
        memory = None
        timer, qemu_cmd = None, []
        with tempfile.TemporaryDirectory(prefix="spe-bench-") as tmp:
            anchor = None if args.sampled_anchor is None else Anchor(args.sampled_anchor,
                                                                     Path(tmp))
            runner = Runner(Path(tmp), rss, log, anchor)
            for guest, image in guests.items():
                meas = runner.measure(guest, image, modes, args.repeats, args.reference_insns)
                rows += rows_for(guest, modes, meas)
            if not args.no_memory_check and (rows or args.memory_guest):
                name = args.memory_guest or max(
                    (r for r in rows if r["mode"] == "spe-disabled"),
                    key=lambda r: r["_instructions"])["guest"]
                image = guests.get(name) or resolve_guests([name])[name]
                memory = memory_check(runner, name, image)
            if timer_setup is not None:
                timer, qemu_cmd = measure_timer(runner, timer_setup, args.repeats)
            if linux_wanted:
                linux = measure_linux(runner, args.linux_n, args.repeats)
            if exc_wanted:
                exceptions = measure_exceptions(runner, args.svc_rounds, args.irq_rounds,
                                                args.repeats)
            if pmu_wanted:
                pmu = measure_pmu(runner, args.repeats)
            if decoder_wanted:
                decoder = measure_decoder(runner, args.decode_mib, args.repeats)
            if boot_wanted:
                boot = measure_boot(runner, args.boot_repeats)
            if perf_wanted:
                perf = measure_perf(runner, args.boot_repeats)
                variant = measure_variant(runner, args.boot_repeats)
            if anchor is not None:
                anchor.close()
    except (BenchError, SpeEmuError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    targets = check_targets(rows, list(guests), memory, args.rss_tolerance_mb,
                            reference_run=not args.no_reference, per_run_rss=rss.per_run)
    targets += exception_targets(exceptions)
    targets += pmu_targets(pmu)
    targets += linux_targets(linux)
    targets += decoder_targets(decoder)
    targets += boot_targets(boot)
    targets += perf_targets(perf)
    targets += variant_targets(variant)
    if perf is not None:
        print_perf(console, perf, args.boot_repeats)
        console.print()
    if variant is not None:
        print_variant(console, variant, args.boot_repeats)
        console.print()
    if boot is not None:
        print_boot(console, boot, args.boot_repeats)
        console.print()
    if decoder is not None:
        print_decoder(console, decoder, args.repeats)
        console.print()
    if pmu is not None:
        print_pmu(console, pmu, args.repeats)
        console.print()
    print_report(console, rows, memory, targets, rss, args.repeats, timer, qemu_cmd,
                 exceptions, linux)
    if args.json is not None:
        data = [{k: r[k] for k in JSON_KEYS} for r in rows]
        if timer is not None:
            data.append({k: timer[k] for k in TIMER_JSON_KEYS})
        if exceptions is not None:
            data.append({k: exceptions[k] for k in EXC_JSON_KEYS})
        if pmu is not None:
            data.append({k: pmu[k] for k in PMU_JSON_KEYS})
        if linux is not None:
            data.append({k: linux[k] for k in LINUX_JSON_KEYS})
        if decoder is not None:
            data.append({k: decoder[k] for k in DECODER_JSON_KEYS})
        for row in boot or ():
            data.append({k: row[k] for k in BOOT_JSON_KEYS})
        for row in perf or ():
            data.append({k: row[k] for k in PERF_JSON_KEYS})
        for row in variant or ():
            data.append({k: row[k] for k in VARIANT_JSON_KEYS})
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    if args.check and any(t.status == "FAIL" for t in targets):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
