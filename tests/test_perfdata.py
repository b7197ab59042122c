"""perf.data writer: the file's layout, and Debian's perf reading it (skipped without perf).

The perf checks run perf on the perf.data of a real run of guests/sort.elf and compare what
perf synthesises from the trace with spe-emu's own decode of the same trace: one perf
"instructions" sample per SPE record (``--itrace=i1i``), the same PCs and data addresses in
the same order, the same per-function counts as ``spe-emu report``.
"""

import re
import shlex
import shutil
import struct
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from spe_emu.errors import ImageError
from spe_emu.session import default_firmware
from spe_emu.spe.packets import OP_CLASS_LDST, iter_records
from spe_emu.tools import perfdata as PD
from spe_emu.tools.cli import main
from spe_emu.tools.report import build_report

ROOT = Path(__file__).resolve().parent.parent
SORT = ROOT / "guests" / "sort.elf"
PERF = shutil.which("perf")
OBJCOPY = shutil.which("aarch64-linux-gnu-objcopy")
needs_perf = pytest.mark.skipif(PERF is None, reason="perf (Debian linux-perf) not installed")


def perf(*args: str) -> str:
    """stdout of ``perf ARGS`` (stderr carries perf's warnings about the host kernel)."""
    out = subprocess.run([PERF, *args], capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                              "PERF_PAGER": "cat", "LC_ALL": "C"})
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def sort_run(tmp_path_factory):
    """A real run of sort.elf with ``--perf-data`` through the CLI."""
    out = tmp_path_factory.mktemp("sortrun")
    res = CliRunner().invoke(main, ["run", str(SORT), "-o", str(out), "--perf-data"])
    assert res.exit_code == 0, res.output
    assert f"perf.data: {out / 'perf.data'}" in res.output
    return out


def _sections(blob: bytes):
    (magic, size, attr_size, attrs_off, attrs_size, data_off, data_size, _et, _ets,
     *words) = PD._FILE_HEADER.unpack_from(blob)
    return magic, size, attr_size, (attrs_off, attrs_size), (data_off, data_size), words


def _records(blob: bytes):
    _m, _s, _a, _attrs, (off, size), _w = _sections(blob)
    pos, end = off, off + size
    while pos < end:
        rtype, misc, rsize = PD._EVENT_HEADER.unpack_from(blob, pos)
        body = blob[pos + 8:pos + rsize]
        if rtype == PD.PERF_RECORD_AUXTRACE:
            n = PD._AUXTRACE.unpack_from(body)[0]
            yield rtype, misc, body, blob[pos + rsize:pos + rsize + n]
            pos += rsize + n
        else:
            yield rtype, misc, body, b""
            pos += rsize


def test_layout(sort_run):
    blob = (sort_run / "perf.data").read_bytes()
    trace = (sort_run / "spe.trace").read_bytes()
    magic, size, attr_size, (attrs_off, attrs_size), (data_off, data_size), words = \
        _sections(blob)
    assert (magic, size, attr_size, attrs_off, attrs_size) == (b"PERFILE2", 104, 144, 104, 144)
    attr = PD._ATTR.unpack_from(blob, attrs_off)
    assert attr[0] == PD.ARM_SPE_PMU_TYPE and attr[1] == 128
    assert attr[4] == PD.SAMPLE_TYPE and attr[6] & PD.ATTR_FLAG_SAMPLE_ID_ALL
    ids_off, ids_size = PD._SECTION.unpack_from(blob, attrs_off + 128)
    assert struct.unpack_from("<Q", blob, ids_off)[0] == PD.SAMPLE_ID and ids_size == 8
    assert words[0] == sum(1 << b for b in (PD.HEADER_ARCH, PD.HEADER_NRCPUS, PD.HEADER_CPUID,
                                            PD.HEADER_EVENT_DESC, PD.HEADER_PMU_MAPPINGS,
                                            PD.HEADER_CPU_TOPOLOGY, PD.HEADER_NUMA_TOPOLOGY))
    recs = list(_records(blob))
    types = [r[0] for r in recs]
    assert types[:3] == [PD.PERF_RECORD_TIME_CONV, PD.PERF_RECORD_AUXTRACE_INFO,
                         PD.PERF_RECORD_COMM]
    info = recs[1][2]
    assert struct.unpack_from("<IIQ", info) == (PD.PERF_AUXTRACE_ARM_SPE, 0,
                                                PD.ARM_SPE_PMU_TYPE)
    assert recs[2][2][8:13] == b"sort\0"
    # guest (2 segments) and firmware (2 segments) mapped at their link addresses
    maps = [PD._MMAP2_INODE.unpack_from(r[2]) for r in recs if r[0] == PD.PERF_RECORD_MMAP2]
    assert [(m[2], m[4], m[9]) for m in maps] == [
        (0x4800_0000, 0x1000, PD.PROT_READ | PD.PROT_EXEC),
        (0x4800_1000, 0x2000, PD.PROT_READ | PD.PROT_WRITE),
        (0x4000_0000, 0x1000, PD.PROT_READ | PD.PROT_EXEC),
        (0x4000_3000, 0x4000, PD.PROT_READ | PD.PROT_WRITE)]
    (aux,) = [r[3] for r in recs if r[0] == PD.PERF_RECORD_AUXTRACE]
    assert aux == trace + bytes(-len(trace) % 8)
    assert PD.perf_data_bytes(trace, [SORT, default_firmware()], comm="sort",
                              sample_period=4096) == blob   # deterministic


def test_perf_data_command_and_errors(sort_run, tmp_path):
    out = tmp_path / "p.data"
    res = CliRunner().invoke(main, ["perf-data", str(sort_run / "spe.trace"), "--image",
                                    str(SORT), "--comm", "qs", "-o", str(out)])
    assert res.exit_code == 0, res.output
    recs = list(_records(out.read_bytes()))
    assert [r[2][8:11] for r in recs if r[0] == PD.PERF_RECORD_COMM] == [b"qs\0"]
    res = CliRunner().invoke(main, ["perf-data", str(sort_run / "spe.trace"), "--image",
                                    str(tmp_path / "missing.elf"), "-o", str(out)])
    assert res.exit_code == 125
    # (the input is checked before it is read: one line naming the option, spe_emu.platform.inputs)
    assert res.output == f"spe-emu: error: --image {tmp_path / 'missing.elf'}: no such file\n"
    (tmp_path / "x86").write_bytes(b"\x7fELF" + bytes(60))
    with pytest.raises(ImageError):
        PD.perf_data_bytes(b"", [tmp_path / "x86"])


@needs_perf
def test_perf_report_counts_match_spe_emu_report(sort_run):
    data = str(sort_run / "perf.data")
    text = perf("report", "-i", data, "--stdio", "-q", "--itrace=i1i", "--sort", "comm,sym",
                "-F", "sample,comm,sym")
    got = Counter()
    for line in text.splitlines():
        m = re.match(r"\s*(\d+)\s+(\S+)\s+\[\.\]\s+(\S+)", line)
        if m:
            assert m.group(2) == "sort"
            got[m.group(3)] += int(m.group(1))
    rep = build_report((sort_run / "spe.trace").read_bytes(), SORT)
    assert dict(got) == {name: n for name, n, _pct in rep.hot_functions}
    assert got["quick_sort.constprop.0"] > 200


@needs_perf
def test_perf_script_lists_the_decoded_samples(sort_run):
    data = str(sort_run / "perf.data")
    text = perf("script", "-i", data, "--itrace=i1i", "-F", "comm,tid,time,ip,addr")
    got = [line.split() for line in text.splitlines() if line.strip()]
    recs = list(iter_records((sort_run / "spe.trace").read_bytes()))
    assert len(got) == len(recs) > 250
    for fields, rec in zip(got, recs):
        comm, tid, time, addr, ip = fields
        assert (comm, int(tid)) == ("sort", PD.GUEST_PID)
        assert int(ip, 16) == rec.pc
        assert int(addr, 16) == (rec.data_va or 0)
        # perf time = the record's SPE timestamp in ns, printed as seconds.microseconds
        assert time == f"{rec.timestamp // 1_000_000_000}.{rec.timestamp // 1000 % 1_000_000:06d}:"


@needs_perf
def test_perf_mem_mode_names_code_and_data(sort_run):
    text = perf("report", "-i", str(sort_run / "perf.data"), "--mem-mode", "--stdio", "-q",
                "--sort", "sym,symbol_daddr,dso_daddr")
    rows = [line for line in text.splitlines() if "quick_sort.constprop.0" in line]
    # the sorted array, a data symbol of the guest image
    assert any("[.] values+0x" in r and r.split()[-3] == "sort.elf" for r in rows), rows


@needs_perf
@pytest.mark.skipif(OBJCOPY is None, reason="aarch64-linux-gnu-objcopy not installed")
def test_build_id_is_written_and_checked_by_perf(sort_run, tmp_path):
    note = tmp_path / "note"
    bid = bytes(range(1, 21))
    note.write_bytes(struct.pack("<III", 4, len(bid), PD.NT_GNU_BUILD_ID) + b"GNU\0" + bid)
    img = tmp_path / "sortb.elf"
    subprocess.run([OBJCOPY, "--add-section", f".note.gnu.build-id={note}", str(SORT),
                    str(img)], check=True, capture_output=True)
    data = tmp_path / "b.data"
    PD.write_perf_data(data, (sort_run / "spe.trace").read_bytes(), [img])
    assert perf("buildid-list", "-i", str(data)).split() == [bid.hex(), str(img)]
    report = ["report", "-i", str(data), "--stdio", "-q", "--itrace=i1i", "--sort", "sym"]
    assert "quick_sort.constprop.0" in perf(*report)
    # the same path with another build id: perf refuses the file's symbols
    note.write_bytes(struct.pack("<III", 4, len(bid), PD.NT_GNU_BUILD_ID) + b"GNU\0"
                     + bytes(20))
    img.unlink()
    subprocess.run([OBJCOPY, "--add-section", f".note.gnu.build-id={note}", str(SORT),
                    str(img)], check=True, capture_output=True)
    assert "quick_sort" not in perf(*report)


@needs_perf
def test_perf_c2c_report_reads_the_topology(sort_run):
    """perf c2c report sets its nodes up from HEADER_CPU_TOPOLOGY/HEADER_NUMA_TOPOLOGY (it
    said "Failed setup nodes" without them, issue 29 item 5) and counts the sampled loads
    (at most the records with a data address)."""
    text = perf("c2c", "report", "-i", str(sort_run / "perf.data"), "--stdio")
    assert "Failed setup nodes" not in text
    loads = int(re.search(r"Load Operations\s+:\s+(\d+)", text).group(1))
    recs = list(iter_records((sort_run / "spe.trace").read_bytes()))
    assert 0 < loads <= sum(r.data_va is not None for r in recs)


def _readme_perf_commands() -> list[list[str]]:
    """The perf command lines of README.md's quick start, as written (comments cut)."""
    text = (ROOT / "README.md").read_text().split("\n## Quick start", 1)[1].split("\n## ", 1)[0]
    return [shlex.split(line, comments=True)
            for block in re.findall(r"```sh\n(.*?)```", text, re.S)
            for line in block.splitlines() if line.startswith("perf ")]


def _events(text: str) -> list[tuple[str, int]]:
    """perf report's ``# Samples: N of event 'E'`` headers: (E, N)."""
    return [(e, int(n)) for n, e in re.findall(r"# Samples: (\d+)\s+of event '([^']+)'", text)]


@needs_perf
def test_perf_picks_l1d_miss_first_without_itrace(sort_run):
    """What Debian's perf does with an Arm SPE perf.data (ours or one recorded on Arm
    hardware alike): without --itrace it synthesises every event but "instructions" from
    the records, l1d-miss first, and perf report, perf mem report and perf annotate start
    with it; the README's commands therefore carry --itrace (issue 29 item 5)."""
    data = str(sort_run / "perf.data")
    events = [e for e, _ in _events(perf("report", "-i", data, "--stdio"))]
    assert events[0] == "l1d-miss" and "memory" in events and "instructions" not in events
    assert [e for e, _ in _events(perf("mem", "report", "-i", data, "--stdio"))][0] == \
        "l1d-miss"
    heads = re.findall(r"Disassembly of \S+ for (\S+) \(", perf("annotate", "-i", data,
                                                                "--stdio"))
    assert heads[0] == "l1d-miss"


@needs_perf
def test_readme_perf_commands_show_one_sample_per_record_or_access(sort_run):
    """The README's perf commands, as written (on this run's perf.data): perf report and
    perf script one "instructions" sample per SPE record, perf mem report one "memory"
    sample per load/store, perf annotate the function's instructions samples only, perf c2c
    report the loads and stores, perf report -D the raw packets."""
    commands = _readme_perf_commands()
    assert [c[1] for c in commands] == ["report", "mem", "annotate", "c2c", "script",
                                        "report"]
    recs = list(iter_records((sort_run / "spe.trace").read_bytes()))
    ldst = sum(r.op_class == OP_CLASS_LDST for r in recs)
    per_function = {n: c for n, c, _ in build_report((sort_run / "spe.trace").read_bytes(),
                                                     SORT).hot_functions}
    seen = set()
    for argv in commands:
        assert argv[0] == "perf" and "spe-out/perf.data" in argv, argv
        text = perf(*[str(sort_run / "perf.data") if a == "spe-out/perf.data" else a
                      for a in argv[1:]])
        kind = " ".join(argv[1:3] if argv[1] in ("mem", "c2c") else argv[1:2])
        if kind == "report" and "-D" in argv:
            assert f". ... ARM SPE data: size {(sort_run / 'spe.trace').stat().st_size:#x} " \
                   "bytes" in text
        elif kind == "report":
            assert _events(text) == [("instructions", len(recs))]
        elif kind == "mem report":
            assert _events(text) == [("memory", ldst)] and ldst > 40
        elif kind == "annotate":
            func = argv[-1]
            assert re.findall(r"Disassembly of sort\.elf for (\S+) \((\d+) samples", text) \
                == [("instructions", str(per_function[func]))]
        elif kind == "c2c report":
            count = lambda what: int(re.search(rf"^\s*{what}\s+:\s+(\d+)", text, re.M)[1])
            assert count("Load Operations") + count("Store Operations") == ldst
        elif kind == "script":
            assert len([ln for ln in text.splitlines() if ln.strip()]) == len(recs)
        else:
            raise AssertionError(f"a README perf command this test does not know: {argv}")
        seen.add(kind + ("-D" if "-D" in argv else ""))
    assert len(seen) == len(commands)
