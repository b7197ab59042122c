"""Debian 12's stock arm64 kernel on the virt board (issue 14, docs/linux.md).

The guest (kernel, arm_spe_pmu.ko, initramfs variants) is built by
``scripts/build_linux_guest.py`` from Debian's arm64 packages into
``~/.cache/spe_emu/linux/guest`` (``$SPE_EMU_LINUX_GUEST`` names another directory). Nothing
is downloaded by the default suite:

* the pieces of the build script that need no download are tested always;
* the QEMU reference boot runs when the guest is cached and qemu-system-aarch64 is installed
  (about 2 s);
* one boot of the kernel on spe-emu with the stock command line (about 20-80 s, see
  docs/linux.md) runs when the guest is cached: the SPE driver probes, ``caps/*`` match
  PMSIDR_EL1/PMBIDR_EL1 of the board's SpeConfig, power-off gives exit status 0;
* ``perf.cpio.gz`` on spe-emu with the stock command line (about 40-90 s) when the guest is
  cached: perf record of arm_spe_0 in the guest, perf report/script there and on the host;
* the boots with board options changed run only with ``SPE_EMU_LINUX=1``.

With ``SPE_EMU_LINUX=1`` or ``SPE_EMU_LINUX_BUILD=1`` (CI: .ci/run) the guest is built first
when it is not cached (needs apt with Debian's arm64 archive and the network; skipped
without).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("build_linux_guest",
                                               ROOT / "scripts" / "build_linux_guest.py")
blg = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = blg          # dataclasses look their module up there
_spec.loader.exec_module(blg)

OPT_IN = os.environ.get("SPE_EMU_LINUX") == "1"
BUILD = OPT_IN or os.environ.get("SPE_EMU_LINUX_BUILD") == "1"
"""Build the guest when it is not cached (CI sets SPE_EMU_LINUX_BUILD=1: .ci/run)."""
GUEST = Path(os.environ.get("SPE_EMU_LINUX_GUEST") or blg.default_cache() / "guest")
QEMU = shutil.which("qemu-system-aarch64")
APPEND = "console=ttyAMA0"
MARK = blg.MARK


def _cached() -> bool:
    return all((GUEST / n).is_file() for n in ("vmlinuz", "probe.cpio.gz", "manifest.json"))


@pytest.fixture(scope="module")
def guest() -> Path:
    """The guest directory, built first under SPE_EMU_LINUX=1 or SPE_EMU_LINUX_BUILD=1 when
    it is not cached (a failed build -- no network, no apt -- skips)."""
    if not _cached() and BUILD:
        try:
            blg.build(blg.default_cache(), GUEST, blg.DEFAULT_WORKLOAD, log=lambda _: None)
        except (blg.BuildError, OSError) as exc:
            pytest.skip(f"cannot build the Linux guest: {exc}")
    if not _cached():
        pytest.skip(f"no Linux guest in {GUEST} (python scripts/build_linux_guest.py)")
    return GUEST


# -- the build script's own pieces (no download) ---------------------------------------------
def test_init_scripts():
    probe = blg.init_script("probe", ["arm_spe_pmu.ko"], "true")
    assert probe.startswith("#!/bin/busybox sh\n")
    assert "insmod /lib/modules/arm_spe_pmu.ko" in probe
    assert "/sys/bus/event_source/devices/arm_spe_0" in probe
    assert probe.rstrip().endswith("poweroff -f")
    assert "perf record" not in probe
    perf = blg.init_script("perf", ["arm_spe_pmu.ko"], "sha256sum /bin/busybox")
    assert (f"perf record -e {blg.SPE_EVENT} -c 4096 -o /tmp/perf.data -- "
            f"sha256sum /bin/busybox") in perf
    assert "perf report --stdio" in perf and "perf script" in perf
    assert blg.SPE_EVENT == ("arm_spe_0/ts_enable=1,pa_enable=1,load_filter=1,"
                             "store_filter=1,branch_filter=1/")
    with pytest.raises(blg.BuildError):
        blg.init_script("other", [], "true")


def test_library_package_filter():
    assert blg.LIBRARY_PACKAGE.match("libc6") and blg.LIBRARY_PACKAGE.match("zlib1g")
    assert not blg.LIBRARY_PACKAGE.match("perl") and not blg.LIBRARY_PACKAGE.match("python3")
    assert blg.KERNEL_PACKAGE.match("linux-image-6.1.0-56-arm64").group(1) == "56"
    assert not blg.KERNEL_PACKAGE.match("linux-image-6.1.0-56-cloud-arm64")


# -- the cached guest ------------------------------------------------------------------------
def test_cached_guest_contents(guest, tmp_path):
    manifest = json.loads((guest / "manifest.json").read_text())
    assert manifest["modules"] == ["arm_spe_pmu.ko"]       # no depends= in 6.1
    ko = guest / "arm_spe_pmu.ko"
    info = blg.modinfo(ko)
    assert info["name"] == "arm_spe_pmu" and info["depends"] == ""
    assert info["vermagic"].startswith(manifest["kernel_release"] + " ")
    if shutil.which("cpio"):
        import gzip
        (tmp_path / "p.cpio").write_bytes(gzip.decompress((guest / "probe.cpio.gz")
                                                          .read_bytes()))
        names = subprocess.run(["cpio", "-it", "--quiet", "-F", "p.cpio"], cwd=tmp_path,
                               capture_output=True, text=True, check=True).stdout.split()
        assert {"init", "bin/busybox", "dev/console", "lib/modules/arm_spe_pmu.ko"} <= set(names)


def _probe_ok(console: str) -> None:
    assert f"{MARK} /init reached" in console
    assert f"{MARK} insmod arm_spe_pmu.ko ok" in console
    assert f"{MARK} power off" in console


@pytest.mark.skipif(QEMU is None, reason="qemu-system-aarch64 not installed")
def test_qemu_boots_probe(guest):
    """The reference: QEMU 7.2 boots the same files to /init and powers off; its CPU has no
    SPE (PMSVer = 0), so the driver does not probe."""
    done = subprocess.run([QEMU, "-M", "virt,gic-version=3", "-cpu", "max,pauth=off",
                           "-m", "1G", "-nographic", "-nic", "none",
                           "-kernel", guest / "vmlinuz", "-initrd", guest / "probe.cpio.gz",
                           "-append", APPEND], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:]
    _probe_ok(done.stdout)
    assert f"{MARK} no arm_spe_0 PMU" in done.stdout
    assert "reboot: Power down" in done.stdout


@pytest.mark.skipif(QEMU is None, reason="qemu-system-aarch64 not installed")
def test_timing_init_overlay_replaces_init(guest, tmp_path):
    """scripts/bench.py's linux-perf row appends build_linux_guest.init_overlay to an
    initramfs: booted on QEMU, the appended /init runs instead of the image's own, and each
    phase prints /proc/uptime's columns around its second run, then the exit status."""
    init = blg.timing_init([], [("ok", "true"), ("bad", "false")])
    overlay = blg.init_overlay(init)
    members = gzip.decompress(overlay).split(b"070701")[1:]   # newc magic per member
    assert [m[104:m.index(b"\0", 104)] for m in members] == [b"init", b"TRAILER!!!"]
    initrd = tmp_path / "timing.cpio.gz"
    initrd.write_bytes((guest / "probe.cpio.gz").read_bytes() + overlay)
    done = subprocess.run([QEMU, "-M", "virt,gic-version=3", "-cpu", "max,pauth=off",
                           "-m", "1G", "-nographic", "-nic", "none",
                           "-kernel", guest / "vmlinuz", "-initrd", initrd,
                           "-append", APPEND], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "insmod" not in done.stdout          # not the image's own /init
    times = {}
    for key, status in (("ok", 0), ("bad", 1)):
        assert f"{blg.TIMING} {key} start" in done.stdout
        m = re.search(rf"^{blg.TIMING} {key} done (\d+) (\d+) (\d+) (\d+) (\d+)\r?$",
                      done.stdout, re.M)
        assert m, done.stdout[-2000:]
        u0, i0, u1, i1, rc = map(int, m.groups())
        assert rc == status and u0 <= u1 and i0 <= i1 and i1 - i0 <= u1 - u0
        times[key] = u0
    assert times["ok"] <= times["bad"]
    assert "reboot: Power down" in done.stdout


INTERVAL_OPS = {0: 256, 2: 512, 3: 768, 4: 1024, 5: 1536, 6: 2048, 7: 3072, 8: 4096}
"""PMSIDR_EL1.Interval -> the recommended minimum interval (operations), Arm ARM D19.12."""
COUNT_SIZE_BITS = {0b0010: 12, 0b0011: 16}
"""PMSIDR_EL1.CountSize -> counter width (bits)."""


def _boot_on_spe_emu(guest: Path, out: Path, append: str,
                     *options: str) -> tuple[str, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "spe_emu.tools.cli", "run", "--machine",
                           "virt", "-m", "1G", "--kernel", guest / "vmlinuz",
                           "--initrd", guest / "probe.cpio.gz", "--append", append,
                           "--max-insns", "4000000000", "-o", out, *options],
                          capture_output=True, text=True, env=env, timeout=3600,
                          stdin=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    console = (out / "console.log").read_text(errors="replace")
    assert done.returncode == 0, (done.stderr[-2000:], console[-2000:])
    assert done.stdout == console          # the console on stdout as it is written
    _probe_ok(console)
    assert "reboot: Power down" in console
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["exit_via"], summary["exit_status"]) == ("psci-system-off", 0)
    print(f"spe-emu: {summary['instructions']} instructions, {wall:.1f} s")
    return console, summary


def _assert_driver_probed(console: str) -> None:
    from spe_emu.spe.config import SpeConfig
    from spe_emu.spe.registers import spe_registers

    regs = spe_registers(SpeConfig())
    pmsidr, pmbidr = regs["PMSIDR_EL1"], regs["PMBIDR_EL1"]
    sidr, bidr = pmsidr.reset, pmbidr.reset
    # the driver's feature bits (drivers/perf/arm_spe_pmu.c SPE_PMU_FEAT_*): FILT_EVT,
    # FILT_TYP, FILT_LAT, ARCH_INST, LDS, ERND
    features = sum(pmsidr.get(sidr, name) << bit for bit, name in
                   enumerate(("FE", "FT", "FL", "ArchInst", "LDS", "ERnd")))
    assert (f"arm_spe_pmu spe: probed for CPUs 0 [max_record_sz "
            f"{1 << pmsidr.get(sidr, 'MaxSize')}, align {1 << pmbidr.get(bidr, 'Align')}, "
            f"features {features:#x}]" in console)
    assert "profiling buffer inaccessible" not in console
    caps = dict(line.split(" caps/", 1)[1].split(" = ") for line in console.splitlines()
                if line.startswith(f"{MARK} caps/"))
    assert caps == {
        "arch_inst": str(pmsidr.get(sidr, "ArchInst")),
        "count_size": str(COUNT_SIZE_BITS[pmsidr.get(sidr, "CountSize")]),
        "ernd": str(pmsidr.get(sidr, "ERnd")),
        "min_interval": str(INTERVAL_OPS[pmsidr.get(sidr, "Interval")])}


def test_spe_emu_boots_probe_stock_command_line(guest, tmp_path):
    """The stock command line: KASLR is on (RNDR seeds it), yet the kernel stays mapped at
    EL0 because the board presents ID_AA64PFR0_EL1.CSV3 and FEAT_E0PD (CpuFeatures), so the
    driver probes."""
    console, _ = _boot_on_spe_emu(guest, tmp_path / "out", APPEND)
    assert "CPU features: detected: E0PD" in console
    assert "page table isolation forced ON" not in console
    _assert_driver_probed(console)


@pytest.mark.skipif(not OPT_IN, reason="minutes long: set SPE_EMU_LINUX=1")
def test_spe_emu_without_csv3_and_e0pd_the_driver_refuses(guest, tmp_path):
    """With the CPU features off (Unicorn's CPU as it is) KASLR forces KPTI on and the
    driver refuses the profiling buffer."""
    console, _ = _boot_on_spe_emu(guest, tmp_path / "out", APPEND, "--cpu-feature",
                                  "csv3=off", "--cpu-feature", "e0pd=off")
    assert "kernel page table isolation forced ON by KASLR" in console
    assert 'profiling buffer inaccessible. Try passing "kpti=off"' in console


@pytest.mark.skipif(not OPT_IN, reason="minutes long: set SPE_EMU_LINUX=1")
def test_spe_emu_boots_with_pauth_hidden(guest, tmp_path):
    """--cpu-feature pauth=off: the kernel finds no address authentication (and leaves
    SCTLR_EL1.EnIA clear); the driver still probes."""
    console, _ = _boot_on_spe_emu(guest, tmp_path / "out", APPEND, "--cpu-feature",
                                  "pauth=off")
    assert "Address authentication" not in console
    assert "Generic authentication" not in console
    _assert_driver_probed(console)


def test_put_tool_elf(tmp_path):
    """The perf.data channel's guest side: a static AArch64 ELF executable whose one
    PT_LOAD segment holds the code and leaves room for the parameter block and buffer."""
    from elftools.elf.elffile import ELFFile
    from spe_emu.cpu import a64

    data = blg.put_tool()
    (tmp_path / "put").write_bytes(data)
    with (tmp_path / "put").open("rb") as f:
        elf = ELFFile(f)
        assert (elf["e_type"], elf["e_machine"]) == ("ET_EXEC", "EM_AARCH64")
        (seg,) = list(elf.iter_segments())
        assert seg["p_type"] == "PT_LOAD" and seg["p_vaddr"] == blg.PUT_BASE
        assert seg["p_memsz"] >= seg["p_filesz"] + blg.PUT_BUFFER
        code = data[elf["e_entry"] - blg.PUT_BASE:]
    words = [int.from_bytes(code[i:i + 4], "little") for i in range(0, len(code) - 24, 4)]
    hlt = [w for w in words if a64.decode(w).exception == "hlt"]
    assert len(hlt) == 3 and all(a64.decode(w).imm16 == 0xF000 for w in hlt)
    assert "semihost-put perf.data < /tmp/perf.data" in blg.init_script(
        "perf", ["arm_spe_pmu.ko"], "true")


def test_workload_tool(tmp_path):
    """The default perf workload: its functions in .symtab (what perf names samples by), its
    code read and execute only and its array in a read and write segment of its own (as a
    linker lays out a program: a store to a page mapped executable takes Unicorn's slow path),
    and, under qemu-aarch64 when installed, a run that exits 0."""
    from elftools.elf.elffile import ELFFile

    path = tmp_path / "spe-workload"
    path.write_bytes(blg.workload_tool())
    path.chmod(0o755)
    with path.open("rb") as f:
        elf = ELFFile(f)
        syms = {s.name: (s["st_value"], s["st_size"], s["st_info"]["type"])
                for s in elf.get_section_by_name(".symtab").iter_symbols() if s.name}
        text = elf.get_section_by_name(".text")
        assert syms["_start"][0] == elf["e_entry"] == text["sh_addr"]
        code, data = elf.iter_segments()
    assert (code["p_flags"], code["p_vaddr"]) == (blg.PF_RX, blg.PUT_BASE)
    assert code["p_filesz"] == code["p_memsz"] >= text["sh_offset"] + text["sh_size"]
    assert (data["p_flags"], data["p_filesz"], data["p_memsz"]) == (blg.PF_RW, 0,
                                                                  8 * blg.WORKLOAD_WORDS)
    assert data["p_vaddr"] % 0x1000 == 0 and data["p_vaddr"] >= blg.PUT_BASE + code["p_memsz"]
    assert set(syms) == {"_start", "fill_array", "sum_array", "branchy"}
    assert all(size > 0 and kind == "STT_FUNC" for _, size, kind in syms.values())
    qemu_user = shutil.which("qemu-aarch64")
    if qemu_user:
        assert subprocess.run([qemu_user, str(path), "3"], timeout=60).returncode == 0


PERF = shutil.which("perf")
SAMPLES_RE = re.compile(
    r"^# Samples: \S+\s+of event '([\w-]+)'\n# Event count \(approx\.\): (\d+)", re.M)
WORKLOAD_ROW = re.compile(
    r"^\s*[\d.]+%\s+[\d.]+%\s+spe-workload\s+spe-workload\s+\[\.\]\s+(\w+)", re.M)


def _perf_events(report: str) -> dict[str, int]:
    """perf report's "# Samples: N of event 'E'" headers (N may be rounded: 4K) with the
    exact count on the next line: event -> count."""
    return {event: int(n) for event, n in SAMPLES_RE.findall(report)}


def _between(console: str, start: str, end: str) -> str:
    return console.split(f"{MARK} {start}", 1)[1].split(f"{MARK} {end}", 1)[0]


def test_spe_emu_perf_record(guest, tmp_path):
    """perf.cpio.gz: Linux's arm_spe_pmu driver and perf record arm_spe_0 on the SPU
    (docs/linux.md): perf in the guest decodes the records with the workload's symbols and
    PIDs, perf.data reaches the output directory by semihosting and the host's perf decodes
    it too, record for record."""
    if not (guest / "symfs" / blg.WORKLOAD_TOOL).is_file():
        pytest.skip(f"{guest} predates spe-workload: python scripts/build_linux_guest.py")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    with subprocess.Popen([sys.executable, "-m", "spe_emu.tools.cli", "run", "--machine",
                           "virt", "-m", "1G", "--kernel", guest / "vmlinuz",
                           "--initrd", guest / "perf.cpio.gz", "--append",
                           APPEND, "--semihosting-userspace",
                           "--max-insns", "20000000000", "-o", out],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                          stdin=subprocess.DEVNULL) as proc:
        for line in proc.stdout:       # (host wall time of each line /init prints)
            text = line.decode(errors="replace")
            if text.startswith(MARK):
                # (a start line is keyed by its text, its end line "... took N ms" by the
                # text up to "took")
                key = text.split(" took ")[0].strip() + (" took" if " took " in text else "")
                marks.setdefault(key, time.monotonic() - t0)
        stderr = proc.stderr.read().decode(errors="replace")
    console = (out / "console.log").read_text(errors="replace")
    assert proc.returncode == 0, (stderr[-2000:], console[-3000:])
    assert f"{MARK} perf record exit 0" in console
    assert "Bad packet" not in console and "decode" not in console.lower()
    summary = json.loads((out / "summary.json").read_text())
    # The SPU sampled about one operation in 4096 of the workload (about 100 M instructions,
    # at EL0) and of the kernel's work for it (perf profiles EL1 too).
    assert 0.9 * 100e6 / 4096 < summary["samples"] < 3 * 100e6 / 4096
    assert summary["records_written"] > 0.25 * 100e6 / 4096   # loads, stores and branches
    assert summary["driver_rules"] == []

    report = _between(console, "perf record exit 0", "perf report done")
    assert {"fill_array", "sum_array"} <= set(WORKLOAD_ROW.findall(report)), report[:3000]
    pids = _between(console, "perf report done", "perf report pid done")
    # (every event's header: the report by pid is short enough to be printed whole)
    events = _perf_events(pids)
    # loads and stores: 2 of the about 21.6 instructions per word of the three loops
    assert events["memory"] > 0.15 * 100e6 / 4096, pids
    assert events["l1d-access"] == events["memory"] and events["branch-miss"] > 0
    assert re.search(r"^\s*[\d.]+%\s+[\d.]+%\s+\d+:spe-workload\s*$", pids, re.M), pids
    assert f"{MARK} perf.data sent" in console

    alone = int(re.search(rf"{MARK} workload alone took (\d+) ms", console).group(1))
    null = int(re.search(rf"{MARK} perf record of true took (\d+) ms", console).group(1))
    perf = int(re.search(rf"{MARK} perf record exit 0 took (\d+) ms", console).group(1))
    host_alone = marks[f"{MARK} workload alone took"] - marks[f"{MARK} workload alone"]
    host_null = marks[f"{MARK} perf record of true took"] - marks[f"{MARK} perf record of true"]
    host_perf = marks[f"{MARK} perf record exit 0 took"] - marks[f"{MARK} perf record"]
    print(f"guest time: workload {alone} ms, perf record of true {null} ms, of the workload "
          f"{perf} ms; host wall: {host_alone:.1f} s, {host_null:.1f} s, {host_perf:.1f} s; "
          f"{summary['samples']} samples, {summary['records_written']} records")

    if PERF is None:
        return
    host = dict(capture_output=True, text=True, timeout=300,
                env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PERF_PAGER": "cat",
                     "LC_ALL": "C"})
    data = str(out / "perf.data")
    dump = subprocess.run([PERF, "report", "-D", "-i", data], **host)
    assert dump.returncode == 0, dump.stderr[-2000:]
    assert "Bad packet" not in dump.stdout
    # the records reached perf.data (a record ends with one Timestamp packet, 0x71): all the
    # SPU wrote in the boot but those of the two `perf record -- true` runs (a few dozen)
    records = len(re.findall(r"^\.\s+[0-9a-f]+:\s+71 ", dump.stdout, re.M))
    assert 0.98 * summary["records_written"] <= records <= summary["records_written"]
    rep = subprocess.run([PERF, "report", "-i", data, "--stdio", "--symfs",
                          str(guest / "symfs"), "--sort", "comm,dso,sym"], **host)
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert {e: n for e, n in _perf_events(rep.stdout).items() if e in events} == events
    assert {"fill_array", "sum_array"} <= set(WORKLOAD_ROW.findall(rep.stdout))
