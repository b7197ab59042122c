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

import child

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


KERNEL_612 = "linux-image-6.12-arm64"
KERNEL_612_16K = "linux-image-6.12-arm64-16k"
"""Debian 12's 6.12 kernels (metapackages: the build follows them to the newest image)."""


def _cached(directory: Path) -> bool:
    return all((directory / n).is_file()
               for n in ("vmlinuz", "probe.cpio.gz", "perf.cpio.gz", "manifest.json"))


def _need_guest(directory: Path, package: str | None) -> Path:
    """``directory`` holding the guest of kernel ``package`` (None: the default 6.1 kernel),
    built first under SPE_EMU_LINUX=1 or SPE_EMU_LINUX_BUILD=1 when it is not cached (a
    failed build -- no network, no apt -- skips)."""
    if not _cached(directory) and BUILD:
        try:
            blg.build(blg.default_cache(), directory, blg.DEFAULT_WORKLOAD,
                      log=lambda _: None, kernel_package=package)
        except (blg.BuildError, OSError) as exc:
            pytest.skip(f"cannot build the Linux guest ({package or 'default'}): {exc}")
    if not _cached(directory):
        pytest.skip(f"no Linux guest in {directory} (python scripts/build_linux_guest.py"
                    + (f" --kernel-package {package})" if package else ")"))
    return directory


@pytest.fixture(scope="module")
def guest() -> Path:
    """Debian 12's 6.1 guest (scripts/build_linux_guest.py's default kernel)."""
    return _need_guest(GUEST, None)


@pytest.fixture(scope="module")
def guest_612() -> Path:
    """Debian 12's 6.12 kernel with 4 KiB pages."""
    return _need_guest(blg.guest_dir(blg.default_cache(), KERNEL_612), KERNEL_612)


@pytest.fixture(scope="module")
def guest_612_16k() -> Path:
    """Debian 12's 6.12 kernel with 16 KiB pages."""
    return _need_guest(blg.guest_dir(blg.default_cache(), KERNEL_612_16K), KERNEL_612_16K)


IMAGE_PAGE_SIZE = {1: 4 << 10, 2: 16 << 10, 3: 64 << 10}
"""The arm64 Image header's flags bits 2:1 (Linux Documentation/arch/arm64/booting.rst): the
kernel's page size."""


def image_page_size(vmlinuz: Path) -> int:
    """The page size the kernel Image (gzip-compressed) was built for, from its header (the
    64-bit flags at offset 0x18)."""
    header = gzip.decompress(vmlinuz.read_bytes())[:0x40]
    return IMAGE_PAGE_SIZE[int.from_bytes(header[0x18:0x20], "little") >> 1 & 3]


# -- the build script's own pieces (no download) ---------------------------------------------
def test_init_scripts():
    probe = blg.init_script("probe", ["arm_spe_pmu.ko"], "true")
    assert probe.startswith("#!/bin/busybox sh\n")
    assert "insmod /lib/modules/arm_spe_pmu.ko" in probe
    assert "/sys/bus/event_source/devices/arm_spe_0" in probe
    assert probe.rstrip().endswith("poweroff -f")
    assert "perf record" not in probe
    perf = blg.init_script("perf", ["arm_spe_pmu.ko"], "sha256sum /bin/busybox")
    assert ('perf record -e "$event" -c 4096 -o /tmp/perf.data -- '
            'sha256sum /bin/busybox') in perf
    assert f'event="${{spe_event:-{blg.SPE_EVENT}}}"' in perf   # (spe_event=EVENT: the cmdline)
    assert "ls $d/format" in probe
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
                     *options: str, initrd: str = "probe.cpio.gz") -> tuple[str, dict]:
    env = child.env()
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "spe_emu.tools.cli", "run", "--machine",
                           "virt", "-m", "1G", "--kernel", guest / "vmlinuz",
                           "--initrd", guest / initrd, "--append", append,
                           "--max-insns", "20000000000", "-o", out, *options],
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


def _assert_driver_probed(console: str, features_given: tuple[str, ...] = ()) -> None:
    """The driver's probe line and caps/* match the board's PMSIDR_EL1/PMBIDR_EL1 (SpeConfig
    with ``--spe-feature`` ``features_given``); 6.12's line names the SPE version
    (SPEv1.<PMSVer - 1>) and has FEAT_SPEv1p2's inverted event filter (INV_FILT_EVT)."""
    from spe_emu.spe.config import SpeConfig
    from spe_emu.spe.registers import spe_registers

    spe = SpeConfig().with_features(features_given)
    regs = spe_registers(spe)
    pmsidr, pmbidr = regs["PMSIDR_EL1"], regs["PMBIDR_EL1"]
    sidr, bidr = pmsidr.reset, pmbidr.reset
    # the driver's feature bits (drivers/perf/arm_spe_pmu.c SPE_PMU_FEAT_*): FILT_EVT,
    # FILT_TYP, FILT_LAT, ARCH_INST, LDS, ERND; 6.12: INV_FILT_EVT (PMSVer >= 3)
    features = sum(pmsidr.get(sidr, name) << bit for bit, name in
                   enumerate(("FE", "FT", "FL", "ArchInst", "LDS", "ERnd")))
    v612 = re.search(r"arm_spe_pmu spe: probed SPEv1\.(\d) for", console)
    if v612:
        assert int(v612.group(1)) == spe.pmsver - 1
        features |= (spe.pmsver >= 3) << 6
    version = f"SPEv1.{spe.pmsver - 1} " if v612 else ""
    assert (f"arm_spe_pmu spe: probed {version}for CPUs 0 [max_record_sz "
            f"{1 << pmsidr.get(sidr, 'MaxSize')}, align {1 << pmbidr.get(bidr, 'Align')}, "
            f"features {features:#x}]" in console), console[-3000:]
    assert "profiling buffer inaccessible" not in console
    formats = [line.split(" = ", 1)[1].split() for line in console.splitlines()
               if line.startswith(f"{MARK} format = ")]
    if formats:   # (a guest built before the probe listed them prints none)
        assert ("inv_event_filter" in formats[0]) == bool(v612 and spe.pmsver >= 3)
        assert {"event_filter", "load_filter", "ts_enable"} <= set(formats[0])
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


MAX_PYTHON_PER_MILLION = 100
"""What a 6.12 boot (probe initramfs) may cost in Python calls per million instructions:
returns of emu_start plus calls into Python from inside it (hooks' fallbacks, Unicorn's
Python hooks: MMIO of the Python devices, the PL011 above all). Measured: about 32 (2026-11;
with a Python hook on every instruction, as the SIMD&FP trap check once was, it would be
about 1,000,000). docs/linux.md "Debian 12's 6.12 kernels"."""


def test_spe_emu_boots_612_natively(guest_612, tmp_path):
    """Debian 12's 6.12 kernel (4 KiB pages) boots in this process with the stock command
    line, its arm_spe_pmu probes, and Python is called at most MAX_PYTHON_PER_MILLION times
    per million instructions: the SIMD&FP access traps the kernel takes (it leaves
    CPACR_EL1.FPEN trapping) are taken by QEMU and the native INTR hook, not by a hook on
    every instruction."""
    import unicorn.unicorn_py3.unicorn as uc_module

    from spe_emu.session import KernelOptions, RunOptions, run_kernel
    assert image_page_size(guest_612 / "vmlinuz") == 4 << 10
    emu_start = uc_module.Uc.emu_start.__code__
    calls = {"starts": 0, "entries": 0}

    def profile(frame, event, _arg):
        if event == "call":
            if frame.f_code is emu_start:
                calls["starts"] += 1
            elif frame.f_back is not None and frame.f_back.f_code is emu_start:
                calls["entries"] += 1
    kopts = KernelOptions(board="virt", kernel=guest_612 / "vmlinuz",
                          initrd=guest_612 / "probe.cpio.gz", append=APPEND)
    kopts.ram_size = 1 << 30
    console = bytearray()
    sys.setprofile(profile)
    try:
        session = run_kernel(kopts, RunOptions(firmware=False, outdir=tmp_path / "out"),
                             console=console.extend)
    finally:
        sys.setprofile(None)
    text = console.decode(errors="replace")
    _probe_ok(text)
    _assert_driver_probed(text)
    insns = session.result.instructions
    per_million = (calls["starts"] + calls["entries"]) * 1e6 / insns
    print(f"6.12: {insns} instructions, {calls}, {per_million:.1f} Python calls per million")
    assert calls["starts"] > 10 and per_million <= MAX_PYTHON_PER_MILLION


def test_spe_emu_boots_612_16k_probe(guest_612_16k, tmp_path):
    """Debian 12's 6.12 kernel with 16 KiB pages boots (the board presents
    ID_AA64MMFR0_EL1.TGran16) and its arm_spe_pmu probes."""
    assert image_page_size(guest_612_16k / "vmlinuz") == 16 << 10
    console, _ = _boot_on_spe_emu(guest_612_16k, tmp_path / "out", APPEND)
    assert "CPU features: detected: E0PD" in console
    _assert_driver_probed(console)


NOT_TAKEN = 1 << 6
"""E[6], Not taken (FEAT_SPEv1p1): set in the record of a conditional branch that was not
taken; filterable by PMSEVFR_EL1/PMSNEVFR_EL1 (E[4], TLB access, is RES0 there)."""
OPEN_CONFIG = 1 | 0b111 << 32
"""spe-open's config: ts_enable (config:0), branch_filter, load_filter, store_filter
(config:32-34) as the 6.12 driver's format/ says."""


def _open_records(guest: Path, out: Path, config3: int) -> list:
    """The records the SPU wrote while spe-open (the ``open`` initramfs) ran its loop with
    ``config3`` (inv_event_filter) on 6.12 with ``--spe-feature PMSVer=3``."""
    from spe_emu.spe.packets import iter_records
    console, summary = _boot_on_spe_emu(
        guest, out, f"{APPEND} spe_config={OPEN_CONFIG} spe_config3={config3}",
        "--spe-feature", "PMSVer=3", "--perf-data", initrd="open.cpio.gz")
    _assert_driver_probed(console, ("PMSVer=3",))
    assert f"{MARK} spe-open exit 0" in console, console[-2000:]
    records = list(iter_records((out / "spe.trace").read_bytes()))
    assert len(records) == summary["records_written"] > 100
    return records


def test_spe_emu_612_inv_event_filter(guest_612, tmp_path):
    """6.12 with ``--spe-feature PMSVer=3`` (FEAT_SPEv1p2): the driver probes SPEv1.2 and
    offers inv_event_filter (config3); an event opened with inv_event_filter = E[6] (Not
    taken) programs PMSNEVFR_EL1 and PMSFCR_EL1.FnE, and no record the SPU writes then has
    E[6], where the same loop without it gives many. (Debian 12's perf 6.1 has no config3:
    spe-open, build_linux_guest.open_tool, opens the event.)"""
    if not (guest_612 / "open.cpio.gz").is_file():
        pytest.skip(f"{guest_612} predates open.cpio.gz: rebuild it")
    plain = _open_records(guest_612, tmp_path / "plain", 0)
    filtered = _open_records(guest_612, tmp_path / "filtered", NOT_TAKEN)
    assert sum(bool(r.events & NOT_TAKEN) for r in plain) > 0.1 * len(plain)
    assert not any(r.events & NOT_TAKEN for r in filtered)
    assert sum(r.branch_target is not None for r in filtered) > 0.1 * len(filtered)


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


@pytest.fixture(params=["6.1", "6.12"])
def perf_guest(request) -> Path:
    """The guests whose perf variant is recorded: Debian 12's 6.1 and 6.12 (4 KiB)."""
    return request.getfixturevalue("guest" if request.param == "6.1" else "guest_612")


def test_spe_emu_perf_record(perf_guest, tmp_path):
    """perf.cpio.gz: Linux's arm_spe_pmu driver and perf record arm_spe_0 on the SPU
    (docs/linux.md): perf in the guest decodes the records with the workload's symbols and
    PIDs, perf.data reaches the output directory by semihosting and the host's perf decodes
    it too, record for record."""
    if not (perf_guest / "symfs" / blg.WORKLOAD_TOOL).is_file():
        pytest.skip(f"{perf_guest} predates spe-workload: python scripts/build_linux_guest.py")
    out = tmp_path / "out"
    env = child.env()
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    with subprocess.Popen([sys.executable, "-m", "spe_emu.tools.cli", "run", "--machine",
                           "virt", "-m", "1G", "--kernel", perf_guest / "vmlinuz",
                           "--initrd", perf_guest / "perf.cpio.gz", "--append",
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
                          str(perf_guest / "symfs"), "--sort", "comm,dso,sym"], **host)
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert {e: n for e, n in _perf_events(rep.stdout).items() if e in events} == events
    assert {"fill_array", "sum_array"} <= set(WORKLOAD_ROW.findall(rep.stdout))


SMP_PES = 4


def smp_init(modules: list[str]) -> str:
    """An ``/init`` for the perf initramfs on several PEs: the shared start (the SPE driver
    loaded), the CPUs Linux brought online, then ``perf record -a`` of SPE while one busy
    shell loop per CPU runs pinned to it (busybox taskset), and ``perf report --sort cpu``."""
    lines = blg._probe_lines(modules)
    loop = "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done"
    lines += [
        f"echo \"{MARK} online $(cat /sys/devices/system/cpu/online)\"",
        f"perf record -a -e arm_spe_0// -c 1024 -o /tmp/perf.data -- sh -c '"
        + " ".join(f"taskset -c {n} sh -c \"{loop}\" &" for n in range(SMP_PES))
        + " wait' > /dev/null 2>&1",
        f"echo \"{MARK} perf record exit $?\"",
        "perf report --stdio -i /tmp/perf.data --sort cpu 2>&1 | grep -v '^#' "
        "| grep -v '^$' | head -n 40",
        f"echo '{MARK} perf report done'",
        f"echo '{MARK} power off'", "poweroff -f", ""]
    return "\n".join(lines)


def test_spe_emu_boots_smp_and_perf_records_every_cpu(guest, tmp_path):
    """Debian 12's 6.1 kernel on ``--smp 4``: "SMP: Total of 4 processors activated", every
    CPU online, arm_spe_pmu probes for CPUs 0-3, and ``perf record -a -e arm_spe_0//`` of a
    loop pinned to each CPU has samples from each (``perf report --sort cpu``)."""
    manifest = json.loads((guest / "manifest.json").read_text())
    modules = [Path(m).name for m in manifest.get("modules", ["arm_spe_pmu.ko"])]
    initrd = tmp_path / "smp.cpio.gz"
    initrd.write_bytes((guest / "perf.cpio.gz").read_bytes()
                       + blg.init_overlay(smp_init(modules)))
    out = tmp_path / "out"
    env = child.env()
    done = subprocess.run([sys.executable, "-m", "spe_emu.tools.cli", "run", "--machine",
                           "virt", "-m", "1G", "--smp", str(SMP_PES), "--kernel",
                           guest / "vmlinuz", "--initrd", initrd, "--append", APPEND,
                           "-o", out], capture_output=True, text=True, env=env,
                          timeout=3600, stdin=subprocess.DEVNULL)
    console = (out / "console.log").read_text(errors="replace")
    assert done.returncode == 0, (done.stderr[-2000:], console[-3000:])
    assert f"SMP: Total of {SMP_PES} processors activated" in console
    assert f"{MARK} online 0-{SMP_PES - 1}" in console
    assert re.search(rf"arm_spe_pmu spe: probed (?:SPEv\d\.\d )?for CPUs 0-{SMP_PES - 1}",
                     console), console[-3000:]
    assert f"{MARK} perf record exit 0" in console, console[-3000:]
    report = console.split(f"{MARK} perf record exit 0", 1)[1]
    # (perf report lines: "  49.08%    49.08%  003": children, self, CPU)
    cpus = {int(c) for c in re.findall(r"^\s*[\d.]+%\s+(?:[\d.]+%\s+)?(\d+)\s*$", report,
                                       re.M)}
    assert cpus == set(range(SMP_PES)), report[:3000]
    summary = json.loads((out / "summary.json").read_text())
    assert [p["pe"] for p in summary["per_pe"]] == list(range(SMP_PES))
    assert all(p["records_written"] > 0 for p in summary["per_pe"]), summary["per_pe"]


def run_perf_guest(guest: Path, tmp_path: Path, init: list[str], files: dict[str, Path],
                   options: tuple[str, ...] = ()) -> str:
    """Boot the 6.1 guest with the ``perf`` initramfs and, over it, an archive of ``init``
    (the /init lines, then a power-off) and ``files`` (path in the guest -> host file);
    the console log (the run must succeed)."""
    from spe_emu.tools.cpio import Newc
    init = init + [f"echo '{MARK} power off'", "poweroff -f", ""]
    archive = Newc()
    archive.file("init", "\n".join(init).encode(), mode=0o755)
    for name, path in files.items():
        archive.file(name, path.read_bytes(), mode=0o755)
    initrd = tmp_path / "extra.cpio.gz"
    initrd.write_bytes((guest / "perf.cpio.gz").read_bytes()
                       + gzip.compress(archive.finish(), 6, mtime=0))
    out = tmp_path / "out"
    env = child.env()
    done = subprocess.run([sys.executable, "-m", "spe_emu.tools.cli", "run", "--machine",
                           "virt", "-m", "1G", *options, "--kernel", guest / "vmlinuz",
                           "--initrd", initrd, "--append", APPEND, "-o", out],
                          capture_output=True, text=True, env=env, timeout=3600,
                          stdin=subprocess.DEVNULL)
    console = (out / "console.log").read_text(errors="replace")
    assert done.returncode == 0, (done.stderr[-2000:], console[-3000:])
    return console


FALSE_SHARING_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
struct { volatile long a; char pad[PAD]; volatile long b; } __attribute__((aligned(64))) s;
static long n;
static void *ta(void *x) { for (long i = 0; i < n; i++) s.a++; return 0; }
static void *tb(void *x) { for (long i = 0; i < n; i++) s.b++; return 0; }
int main(int argc, char **argv) {
    n = atol(argv[1]);
    pthread_t x, y;
    pthread_create(&x, 0, ta, 0);
    pthread_create(&y, 0, tb, 0);
    pthread_join(x, 0);
    pthread_join(y, 0);
    printf("%ld %ld\n", s.a, s.b);
    return 0;
}
"""
C2C_FIELDS = ("Total Shared Cache Lines", "Load HIT Local Peer")


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="gcc-aarch64-linux-gnu is not installed")
def test_perf_c2c_finds_false_sharing(guest, tmp_path):
    """Two threads incrementing adjacent counters in one cache line, on --smp 2 with the
    Neoverse N1 preset: ``perf c2c record`` + ``perf c2c report --stdio`` (Debian perf 6.1)
    finds the counters' cache line shared, with loads served by a peer core (perf 6.1 counts
    Arm SPE's peer-core Data Source as "Load HIT Local Peer", not HITM); with the counters
    padded to separate lines the program has no shared line (the kernel may have some)."""
    init = blg._probe_lines(["arm_spe_pmu.ko"])
    for variant, pad in (("shared", 0), ("padded", 128)):
        exe = tmp_path / f"fs_{variant}"
        (tmp_path / "fs.c").write_text(FALSE_SHARING_C)
        subprocess.run(["aarch64-linux-gnu-gcc", "-O1", "-static", "-pthread", f"-DPAD={pad}",
                        "-o", exe, tmp_path / "fs.c"], check=True)
        init += [f"echo '{MARK} c2c {variant}'",
                 f"perf c2c record -o /tmp/c2c.{variant} -- /usr/bin/fs_{variant} 1000000 "
                 f"> /dev/null 2>&1",
                 f"echo \"{MARK} record exit $?\"",
                 f"perf c2c report -i /tmp/c2c.{variant} --stdio --no-source 2>&1 "
                 f"| grep -E '{'|'.join(C2C_FIELDS)}|^ +[0-9]+ +0x[0-9a-f]+ '"]
    console = run_perf_guest(guest, tmp_path, init, {
        f"usr/bin/fs_{v}": tmp_path / f"fs_{v}" for v in ("shared", "padded")},
        ("--smp", "2", "--core", "neoverse-n1"))
    counts = {}
    for variant in ("shared", "padded"):
        part = console.split(f"{MARK} c2c {variant}", 1)[1].split(MARK + " ", 2)
        assert part[1].startswith("record exit 0"), console[-3000:]
        counts[variant] = {name: int(v) for name, v in re.findall(
            rf"^\s*({'|'.join(C2C_FIELDS)})\s*:\s*(\d+)", part[1], re.M)}
        # (the Shared Data Cache Line Table's rows: index, cache line address ...; the
        # counters' line is the program's, below the kernel's half of the address space)
        counts[variant]["user lines"] = [int(a, 16) for a in re.findall(
            r"^ +\d+ +(0x[0-9a-f]+) ", part[1], re.M) if int(a, 16) < 1 << 48]
    assert counts["shared"]["Total Shared Cache Lines"] >= 1, counts
    assert counts["shared"]["Load HIT Local Peer"] >= 3, counts
    assert len(counts["shared"]["user lines"]) == 1, counts
    assert counts["padded"]["user lines"] == [], counts


STAT_EVENTS = "instructions:u,L1-dcache-load-misses:u,L1-dcache-loads:u"
ALONE_AT = 0x1000_0000
"""Where the qsort program whose count is checked against the ground truth is linked (no
other code of the guest is there: busybox-static sits at 0x400000)."""


def workload_instructions() -> int:
    """The instructions the guest's ``spe-workload`` retires at EL0, by its construction
    (build_linux_guest.workload_tool): per round fill_array 3 + 3 W + 1, sum_array 4 + 4 W + 1,
    branchy 2 + 3.5 W + 1 (W words; bit 1 of half the counts set) and 6 in _start's loop;
    4 before the loop and 4 after it."""
    w, rounds = blg.WORKLOAD_WORDS, blg.WORKLOAD_ROUNDS
    per_round = (3 + 3 * w + 1) + (4 + 4 * w + 1) + (2 + 3 * w + w // 2 + 1) + 6
    return 4 + rounds * per_round + 4


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None,
                    reason="gcc-aarch64-linux-gnu is not installed")
def test_perf_stat_counts_with_the_pmu(guest, tmp_path):
    """The PMUv3 in the Linux guest (issue 30): armv8_pmuv3 probes; ``perf stat`` of the
    guest's spe-workload gives exactly the instructions it retires at EL0 (a store that takes
    a demand-paging fault of its 16 KiB array is not retired, then runs again), of a qsort
    program exactly the instructions the emulator's ground truth counts for it less the
    executions the ground truth marks ``faulted``; of a qsort
    program, an L1D refill rate within the 99% confidence interval of the rate SPE's records
    of the same run give; and ``perf record -e cycles`` samples through the overflow
    interrupt, a sample per period."""
    exe, alone = tmp_path / "sortq", tmp_path / "sortq-alone"
    for path, extra in ((exe, []), (alone, [f"-Wl,-Ttext-segment={ALONE_AT:#x}"])):
        subprocess.run(["aarch64-linux-gnu-gcc", "-O2", "-static", *extra, "-o", path,
                        ROOT / "tests" / "model_check" / "sortq.c"], check=True)
    init = blg._probe_lines(["arm_spe_pmu.ko"]) + [
        "dmesg | grep 'hw perfevents' | sed 's/^/" + MARK + " dmesg: /'",
        f"echo '{MARK} workload'",
        "perf stat -x, -o /tmp/w.csv -e instructions:u -- /usr/bin/spe-workload",
        "cat /tmp/w.csv",
        # (the only code at ALONE_AT: the ground truth's count of its instructions)
        "perf stat -x, -o /tmp/a.csv -e instructions:u -- /usr/bin/sortq-alone > /dev/null",
        "cat /tmp/a.csv",
        f"echo '{MARK} qsort'",
        "perf record -e arm_spe_0/load_filter=1,store_filter=1/u -c 1024 -o /tmp/s.data -- "
        f"perf stat -x, -o /tmp/q.csv -e {STAT_EVENTS} -- /usr/bin/sortq > /dev/null 2>&1",
        "cat /tmp/q.csv",
        # SPE's synthesized samples per command and kind (l1d-miss, memory, ...)
        "perf script -i /tmp/s.data -F comm,event 2>/dev/null | awk '{n[$1 \" \" $2]++} "
        "END {for (k in n) print \"spe\", k, n[k]}'",
        f"echo '{MARK} cycles'",
        "perf record -e cycles:u -c 100000 -o /tmp/c.data -- /usr/bin/sortq > /dev/null 2>&1",
        "perf report -i /tmp/c.data --stdio --sort sym 2>&1 | grep -E '^# Samples|%'"
        " | head -n 8"]
    console = run_perf_guest(guest, tmp_path, init, {"usr/bin/sortq": exe,
                                                     "usr/bin/sortq-alone": alone},
                             ("--ground-truth",))
    assert re.search(r"hw perfevents: enabled with armv8_pmuv3 PMU driver, 7 counters",
                     console), console[-3000:]
    workload = console.split(f"{MARK} workload", 1)[1].split(f"{MARK} qsort", 1)[0]
    insns, alone_insns = [int(v) for v in re.findall(r"^(\d+),,instructions:u,", workload,
                                                      re.M)]
    assert insns == workload_instructions()
    truth = json.loads((tmp_path / "out" / "ground_truth.json").read_text())

    def alone(pcs: dict) -> dict:
        return {int(pc, 16): n for pc, n in pcs.items()
                if ALONE_AT <= int(pc, 16) < ALONE_AT + (1 << 28)}
    faulted = truth["events"]["names"].index("faulted")
    faults = sum(n[faulted] for n in alone(truth["events"]["pcs"]).values())
    assert faults > 0 and alone_insns == sum(alone(truth["pcs"]).values()) - faults
    qsort = console.split(f"{MARK} qsort", 1)[1].split(f"{MARK} cycles", 1)[0]
    counts = {name: int(v) for v, name in re.findall(r"^(\d+),,([\w:-]+),", qsort, re.M)}
    spe = {kind.rstrip(":"): int(n) for kind, n in
           re.findall(r"^spe sortq (\S+) (\d+)$", qsort, re.M)}
    pmu_rate = counts["L1-dcache-load-misses"] / counts["L1-dcache-loads"]
    n = spe["memory"]
    spe_rate = spe["l1d-miss"] / n
    margin = 2.576 * (spe_rate * (1 - spe_rate) / n) ** 0.5
    assert n > 2000 and abs(pmu_rate - spe_rate) <= margin, (pmu_rate, spe_rate, margin, spe)
    cycles = console.split(f"{MARK} cycles", 1)[1]
    (samples,) = [int(v) for v in re.findall(r"^# Samples: (\d+)\s+of event 'cycles:u'",
                                             cycles, re.M)]
    expect = counts["instructions:u"] / 100000
    assert abs(samples - expect) <= 0.05 * expect, (samples, expect)
    assert re.search(r"%.*msort_with_tmp", cycles), cycles
