"""The ``spe-emu`` command line: run / decode / report output, and one-line errors (status 125, 124 for
the instruction budget)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import child

from spe_emu.native import GT_EVENTS
from spe_emu.platform.loader import load_elf
from spe_emu.spe.packets import iter_records
from spe_emu.tools.cli import main
from spe_emu.tools.decode import summarize

ROOT = Path(__file__).resolve().parents[1]
SORT = ROOT / "guests" / "sort.elf"
EXPECTED = json.loads((ROOT / "guests" / "expected.json").read_text())
ENV = {"COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"}

TABLE_ROW = re.compile(r"^[│|]\s*(.+?)\s*[│|]\s*(-?\d+|None)\s*[│|]\s*$")
LINE = re.compile(r"^\.  ([0-9a-f]{8}): ")


def invoke(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], env=ENV)


def _table(stdout: str) -> dict[str, str]:
    rows = {}
    for line in stdout.splitlines():
        m = TABLE_ROW.match(line.strip())
        if m:
            rows[m[1]] = m[2]
    return rows


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-run")
    result = invoke("run", SORT, "--buffer-size", "4096", "--interval", "1024", "-o", out)
    return result, out


# ---------------------------------------------------------------------------- run ----------

def test_run_exits_zero_and_prints_guest_console(cli_run):
    result, out = cli_run
    assert result.exit_code == 0, (result.output, result.stderr)
    assert f"checksum: {EXPECTED['sort']}" in result.stdout.splitlines()
    assert (out / "spe.trace").is_file() and (out / "summary.json").is_file()
    assert "error" not in result.stderr


def test_run_summary_table_matches_summary_json(cli_run):
    result, out = cli_run
    summary = json.loads((out / "summary.json").read_text())
    rows = _table(result.stdout)
    wanted = {
        "instructions retired": summary["instructions"],
        "sample population": summary["population"],
        "samples taken": summary["samples"],
        "records written": summary["records_written"],
        "records filtered out": summary["filtered_out"],
        "buffer-full interrupts handled": summary["irqs_taken"],
        "trace bytes": summary["trace_bytes"],
        "guest exit status": summary["exit_status"],
    }
    for name, value in wanted.items():
        assert name in rows, f"row {name!r} missing from:\n{result.stdout}"
        assert rows[name] == str(value), name
    trace = (out / "spe.trace").read_bytes()
    assert summary["trace_bytes"] == summary["bytes_written"] == len(trace)
    assert summary["exit_status"] == 0
    assert summary["irqs_taken"] >= 2  # a 4 KiB buffer at interval 1024 fills several times
    assert summary["records_written"] == len(list(iter_records(trace))) > 0
    assert summary["population"] <= summary["instructions"]
    assert summary["options"]["interval"] == 1024
    assert summary["options"]["buffer_size"] == 4096
    # the firmware's own account agrees
    # (in summary.json: the firmware's lines are never the guest's stdout, issue 29 item 6)
    exit_line = f"spe_fw: exit status=0 pmbirq={summary['irqs_taken']} bytes={len(trace)}"
    assert summary["firmware_console"].splitlines()[-1] == exit_line
    assert "spe_fw" not in result.stdout + result.stderr
    assert "sort: 8192 values" in result.stdout


# ---------------------------------------------------------------------------- decode -------

def test_decode_prints_every_packet(cli_run):
    _, out = cli_run
    trace = (out / "spe.trace").read_bytes()
    result = invoke("decode", out / "spe.trace")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f". ... ARM SPE data: size {len(trace):#x} bytes"
    offsets, raw, texts = [], b"", []
    for line in lines[1:]:
        m = LINE.match(line)
        assert m, line
        offsets.append(int(m[1], 16))
        raw += bytes.fromhex(line[13:61])
        texts.append(line[62:])
    # one line per packet, offsets increasing and contiguous, covering every byte
    assert offsets[0] == 0
    assert all(b > a for a, b in zip(offsets, offsets[1:]))
    assert raw == trace
    s = summarize(trace)
    assert s["padding_bytes"] == 0
    assert len(lines) - 1 == s["packets"]
    assert "Bad packet!" not in result.stdout
    assert sum(t.startswith("TS ") for t in texts) == s["records"]
    assert sum(t.startswith("PC 0x") for t in texts) == s["records"]


def test_decode_missing_trace_is_an_error(tmp_path):
    result = invoke("decode", tmp_path / "nope.trace")
    _assert_one_line_error(result, "nope.trace: no such file")


# ---------------------------------------------------------------------------- report -------

def test_report_hot_functions_are_guest_symbols(cli_run):
    _, out = cli_run
    trace = (out / "spe.trace").read_bytes()
    records = list(iter_records(trace))
    result = invoke("report", out / "spe.trace", "--image", SORT, "--top", "50")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"SPE report from {SORT}: {len(records)} records, 0 bad packets"
    start = next(i for i, line in enumerate(lines) if "Hot functions" in line)
    assert "Hot PCs" in result.stdout and "Operation mix" in result.stdout
    data = json.loads(invoke("report", out / "spe.trace", "--image", SORT, "--json").stdout)
    assert data["total_records"] == len(records)
    functions = {f["name"]: f["samples"] for f in data["functions"]}
    assert lines[start + 4].split("│")[1].strip() == max(functions, key=functions.get)
    assert functions, result.stdout
    symbols = load_elf(SORT).symbols
    for name in functions:
        # EL1 samples of the firmware are outside the guest image: [unknown]
        assert name in symbols or name == "[unknown]", name
    el1 = sum(1 for r in records if r.el == 1)
    assert functions.get("[unknown]", 0) == el1
    assert sum(functions.values()) == len(records)
    hottest = max(functions, key=functions.get)
    assert hottest.startswith("quick_sort")  # sort.elf spends its time in quick_sort


# ---------------------------------------------------------------------------- errors -------

def _assert_one_line_error(result, fragment: str, status: int = 125):
    assert result.exit_code == status, (result.exit_code, result.output, result.exception)
    err = result.stderr.strip("\n").splitlines()
    assert len(err) == 1, result.stderr
    assert err[0].startswith("spe-emu: error: "), err[0]
    assert fragment in err[0], err[0]
    assert "Traceback" not in result.output


def _error_cases(tmp: Path):
    text = tmp / "notes.txt"
    text.write_text("this is not an ELF image\n" * 10)
    out = tmp / "out"
    return {
        "missing": (["run", tmp / "missing.elf", "-o", out], "no such file"),
        "text": (["run", text, "-o", out], "not an ELF file"),
        "x86": (["run", "/bin/true", "-o", out], "not an AArch64 ELF"),
        "interval": (["run", SORT, "--interval", "1000", "-o", out], "--interval 1000"),
        "filter": (["run", SORT, "--filter", "bogus", "-o", out], "--filter 'bogus'"),
        "runaway": (["run", SORT, "--max-insns", "1000", "-o", out], "1000 instructions"),
        "boot-el": (["run", SORT, "--boot-el", "2", "-o", out], "--no-firmware"),
        "report-image": (["report", text, "--image", text], str(text)),
    }


@pytest.mark.parametrize("case", ["missing", "text", "x86", "interval", "filter", "runaway",
                                  "boot-el", "report-image"])
def test_errors_are_one_line_with_status_125(tmp_path, case):
    args, fragment = _error_cases(tmp_path)[case]
    if case == "x86":
        head = Path("/bin/true").read_bytes()[:20] if Path("/bin/true").exists() else b""
        if head[:4] != b"\x7fELF" or head[18:20] != b"\x3e\x00":
            pytest.skip("/bin/true is not an x86-64 ELF here")
    result = invoke(*args)
    _assert_one_line_error(result, fragment, 124 if case == "runaway" else 125)


def test_boot_el_out_of_range_is_refused(tmp_path):
    result = invoke("run", SORT, "--boot-el", "4", "--no-firmware", "-o", tmp_path)
    _assert_one_line_error(result, "--boot-el 4")


def test_output_path_that_is_a_file_is_a_one_line_error(tmp_path):
    target = tmp_path / "a-file"
    target.write_text("x")
    result = invoke("run", SORT, "-o", target)
    _assert_one_line_error(result, str(target))


def test_error_from_a_real_process(tmp_path):
    """The installed entry point behaves the same outside CliRunner."""
    env = child.env()
    proc = subprocess.run([sys.executable, "-m", "spe_emu.tools.cli", "run",
                           str(tmp_path / "missing.elf"), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert proc.returncode == 125
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("spe-emu: error: "), proc.stderr
    assert "missing.elf" in lines[0]


# ---------------------------------------------------------------------------- robustness ---

def test_version():
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.startswith("spe-emu ")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc")
def test_output_directory_files_cannot_be_made_in_is_one_line(tmp_path):
    _assert_one_line_error(invoke("run", SORT, "-o", "/proc/self"), "/proc/self")


@pytest.mark.parametrize("command", [["run", "/dev/zero"], ["decode", "/dev/zero"],
                                     ["report", "/dev/zero", "--image", SORT],
                                     ["report", "/dev/null", "--image", "/dev/zero"]])
def test_devices_are_refused_before_reading(tmp_path, command):
    # (/dev/zero read to the end never ends)
    _assert_one_line_error(invoke(*command, "-o", tmp_path) if command[0] == "run"
                           else invoke(*command), "/dev/")


def _with_u64(data: bytes, offset: int, value: int) -> bytes:
    return data[:offset] + value.to_bytes(8, "little") + data[offset + 8:]


def _huge_offsets(tmp: Path) -> dict[str, Path]:
    raw = Path(SORT).read_bytes()
    phoff = int.from_bytes(raw[0x20:0x28], "little")
    shoff = int.from_bytes(raw[0x28:0x30], "little")
    shentsize = int.from_bytes(raw[0x3A:0x3C], "little")
    files = {"e_phoff": _with_u64(raw, 0x20, 1 << 63),
             "e_shoff": _with_u64(raw, 0x28, (1 << 64) - 1),
             "p_offset": _with_u64(raw, phoff + 8, (1 << 63) + 0x1000),
             "sh_offset": _with_u64(raw, shoff + shentsize + 0x18, 1 << 63)}
    out = {}
    for name, data in files.items():
        out[name] = tmp / f"{name}.elf"
        out[name].write_bytes(data)
    return out


@pytest.mark.parametrize("field", ["e_phoff", "e_shoff", "p_offset", "sh_offset"])
def test_elf_offsets_beyond_2_63_are_one_line_errors_in_run_and_report(tmp_path, field):
    bad = _huge_offsets(tmp_path)[field]
    trace = tmp_path / "t.trace"
    trace.write_bytes(b"")
    _assert_one_line_error(invoke("run", bad, "-o", tmp_path / "o"), str(bad))
    _assert_one_line_error(invoke("report", trace, "--image", bad), str(bad))


@pytest.mark.parametrize("paddr,message", [(0x4000_0000, "outside the guest region"),
                                           (None, "overlap")])
def test_guest_segments_must_stay_in_the_guest_region(tmp_path, paddr, message):
    # a guest segment at 0x4000_0000 would overwrite the firmware; overlapping ones each other
    raw = Path(SORT).read_bytes()
    phoff = int.from_bytes(raw[0x20:0x28], "little")
    phent = int.from_bytes(raw[0x36:0x38], "little")
    loads = [phoff + i * phent for i in range(int.from_bytes(raw[0x38:0x3A], "little"))
             if int.from_bytes(raw[phoff + i * phent:phoff + i * phent + 4], "little") == 1]
    first, second = loads[0], loads[1]
    target = paddr if paddr is not None else int.from_bytes(raw[first + 0x18:first + 0x20],
                                                            "little")
    bad = tmp_path / "bad.elf"
    bad.write_bytes(_with_u64(raw, second + 0x18, target))  # the second PT_LOAD's p_paddr
    _assert_one_line_error(invoke("run", bad, "-o", tmp_path / "o"), message)


def test_usage_errors_exit_125_not_2():
    result = invoke("run", "--no-such-option")
    assert result.exit_code == 125


def test_ground_truth_with_machine_virt(tmp_path):
    # a raw binary: PSCI SYSTEM_OFF (function ID 0x84000008, SMCCC) by HVC, the conduit of a
    # kernel booted at EL1 -- three instructions, each executed once
    kernel = tmp_path / "off.bin"
    kernel.write_bytes(b"".join(i.to_bytes(4, "little") for i in (
        0x52800100,    # movz w0, #0x8
        0x72B08000,    # movk w0, #0x8400, lsl #16
        0xD4000002)))  # hvc  #0
    (tmp_path / "out").mkdir()
    result = invoke("run", "--machine", "virt", "--kernel", kernel, "-o", tmp_path / "out",
                    "--ground-truth")
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "out" / "ground_truth.json").read_text())
    # (a raw binary is placed 0x80000 bytes into RAM, at 0x4000_0000 on virt, as QEMU does)
    assert data == {"instructions": 3,
                    "pcs": {"0x40080000": 1, "0x40080004": 1, "0x40080008": 1},
                    # (what the model gave each load/store and branch: there are none)
                    "events": {"names": list(GT_EVENTS), "pcs": {}}}
