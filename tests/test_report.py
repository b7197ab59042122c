"""Report: symbols from a tiny AArch64 ELF built with binutils, disassembly, mixes, errors."""

import re
import shutil
import subprocess
from collections import Counter

import child
import pytest
from rich.console import Console

from spe_emu.errors import ImageError, SpeEmuError
from spe_emu.spe import packets as P
from spe_emu.spe.packets import encode
from spe_emu.tools.report import build_report, render_report

AS = shutil.which("aarch64-linux-gnu-as")
LD = shutil.which("aarch64-linux-gnu-ld")
needs_binutils = pytest.mark.skipif(
    not (AS and LD), reason="aarch64-linux-gnu-as/ld (binutils-aarch64-linux-gnu) not installed")

BASE = 0x4800_0000
SOURCE = """
    .arch armv8.1-a             // LSE for ldadd
    .text
    .global _start
_start:                         // a label without .type: found as a fallback symbol
    mov x0, #1                  // BASE + 0x00
    b work                      // BASE + 0x04
    .type work, %function
work:
    ldr x0, [x1]                // BASE + 0x08
    add x0, x0, #1              // BASE + 0x0c
    str x0, [x1, #8]            // BASE + 0x10
    ldar x2, [x1]               // BASE + 0x14
    ret                         // BASE + 0x18
    .size work, .-work
tail:
    nop                         // BASE + 0x1c

    .section .spe_cold, "ax"    // executable, but no symbol of its own
    stlxr w3, x0, [x1]          // cold + 0x0
    ldadd x0, x2, [x1]          // cold + 0x4
"""


def _assemble(tmp_path_factory, name: str, *as_flags: str):
    """SOURCE assembled (``as_flags``) and linked at BASE: the ELF's path."""
    if not (AS and LD):
        pytest.skip("aarch64-linux-gnu-as/ld not installed")
    d = tmp_path_factory.mktemp(name)
    (d / "t.s").write_text(SOURCE)
    subprocess.run([AS, *as_flags, "-o", str(d / "t.o"), str(d / "t.s")], check=True)
    subprocess.run([LD, f"-Ttext={BASE:#x}", "-e", "_start", "-o", str(d / "t.elf"),
                    str(d / "t.o")], check=True)
    return d / "t.elf"


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    return _assemble(tmp_path_factory, "img")


@pytest.fixture(scope="module")
def cold(image):
    """Address of the label-less executable section .spe_cold."""
    from elftools.elf.elffile import ELFFile

    with open(image, "rb") as fh:
        return ELFFile(fh).get_section_by_name(".spe_cold")["sh_addr"]


def rec(pc, cls, sub, el=0):
    return b"".join(encode(p) for p in [
        P.address_packet(P.ADDR_PC, pc, el=el, ns=1), P.op_type_packet(cls, sub),
        P.counter_packet(P.COUNTER_TOTAL, 4), P.end_packet()])


LD_GP = (P.OP_CLASS_LDST, P.ldst_gp(False))
ST_GP = (P.OP_CLASS_LDST, P.ldst_gp(True))
LDAR = (P.OP_CLASS_LDST, P.ldst_extended(False, ar=True))
OTHER = (P.OP_CLASS_OTHER, P.OTHER_UNCOND)
BRANCH = (P.OP_CLASS_BRANCH, P.branch_subclass(False, False))

STLXR = (P.OP_CLASS_LDST, P.ldst_extended(True, ar=True, excl=True))
LDADD = (P.OP_CLASS_LDST, P.ldst_extended(False, at=True))
SIMD_ST = (P.OP_CLASS_LDST, P.ldst_simd_fp(True))
COND_IND = (P.OP_CLASS_BRANCH, P.branch_subclass(True, True))

TRACE = (rec(BASE + 0x08, *LD_GP) * 4 + rec(BASE + 0x10, *ST_GP) * 2 + rec(BASE + 0x14, *LDAR)
         + rec(BASE + 0x00, *OTHER, el=1) + rec(BASE + 0x04, *BRANCH)
         + rec(BASE + 0x1C, *OTHER) + rec(0x5000_0000, P.OP_CLASS_OTHER, P.OTHER_COND)
         + b"\x20\x20\x00" + encode(P.end_packet()) + rec(BASE, *OTHER)[:5])


def cold_trace(cold):
    """Records at .spe_cold: symbols of .text must not claim them."""
    return (rec(cold, *STLXR) * 2 + rec(cold + 4, *LDADD) + rec(0x5000_0004, *SIMD_ST)
            + rec(0x5000_0008, *COND_IND)
            + rec(0x5000_000C, P.OP_CLASS_BRANCH, P.branch_subclass(True, False)))


@needs_binutils
def test_report_symbols_disassembly_and_mixes(image):
    r = build_report(TRACE, image)
    assert r.total_records == 12           # the End after the bad byte is an empty record
    # the bad 0x20 0x20, then the cut-off tail b0 08 00 00 48: 0xb0 and 0x48 (each cut off)
    assert r.bad_packets == 3
    pct = lambda n: 100.0 * n / 12
    assert r.hot_functions == [("work", 7, pct(7)), ("_start", 2, pct(2)),
                               ("[unknown]", 1, pct(1)), ("tail", 1, pct(1))]
    assert r.hot_pcs == [
        (BASE + 0x08, "work+0x0", "ldr x0, [x1]", 4, pct(4)),
        (BASE + 0x10, "work+0x8", "str x0, [x1, #8]", 2, pct(2)),
        (BASE + 0x00, "_start+0x0", "mov x0, #1", 1, pct(1)),
        (BASE + 0x04, "_start+0x4", f"b #{BASE + 8:#x}", 1, pct(1)),
        (BASE + 0x14, "work+0xc", "ldar x2, [x1]", 1, pct(1)),
        (BASE + 0x1C, "tail+0x0", "nop", 1, pct(1)),
        (0x5000_0000, "[unknown]", "", 1, pct(1)),
    ]
    # a hierarchy: every level adds up to its parent, the top level to 100 %
    assert [(d, k, n) for d, k, n, _ in r.op_mix] == [
        (0, "load/store", 7), (1, "load", 5), (2, "load gp", 4), (2, "load extended", 1),
        (1, "store", 2), (2, "store gp", 2), (0, "branch", 1), (1, "direct unconditional", 1),
        (0, "other", 3), (1, "other instruction", 2), (1, "conditional select", 1),
        (0, "no operation type", 1)]
    assert sum(p for d, _, _, p in r.op_mix if d == 0) == pytest.approx(100.0)
    assert r.el_mix == {"EL0": 10, "EL1": 1, "no-pc": 1}
    assert r.image_path == str(image)


@needs_binutils
def test_report_fine_op_kinds_and_label_less_section(image, cold):
    assert cold > BASE + 0x1C
    r = build_report(cold_trace(cold), image)
    assert r.total_records == 6
    assert r.hot_pcs[:2] == [
        (cold, "[unknown]", "stlxr w3, x0, [x1]", 2, 100 * 2 / 6),
        (cold + 4, "[unknown]", "ldadd x0, x2, [x1]", 1, 100 * 1 / 6),
    ]
    assert r.hot_functions == [("[unknown]", 6, 100.0)]
    assert [(d, k, n) for d, k, n, _ in r.op_mix] == [
        (0, "load/store", 4), (1, "load", 1), (2, "load extended", 1), (1, "store", 3),
        (2, "store simd-fp", 1), (2, "store extended", 2), (0, "branch", 2),
        (1, "direct conditional", 1), (1, "indirect", 1)]


@needs_binutils
def test_render_report_tables(image):
    console = Console(record=True, width=120, color_system=None)
    render_report(build_report(TRACE, image), console, top=3)
    text = console.export_text()
    assert text.startswith(f"SPE report from {image}: 12 records, 3 bad packets\n")
    assert "Hot functions (top 3;" in text and "Hot PCs (top 3;" in text
    assert "[unknown]" in text                      # printed literally, not eaten as markup
    assert "ldr x0, [x1]" in text and "work+0x0" in text
    assert "ldar" not in text                       # 5th hottest PC: cut by top=3
    assert "│    load extended      │      1 │ 8.33│" in text
    assert "│EL0   │     10 │83.33│" in text


def test_report_without_image_and_empty_trace():
    r = build_report(rec(BASE, *LD_GP), None)
    assert r.hot_functions == [("[unknown]", 1, 100.0)]
    assert r.hot_pcs == [(BASE, "[unknown]", "", 1, 100.0)]
    empty = build_report(b"", None)
    assert (empty.total_records, empty.hot_functions, empty.op_mix) == (0, [], [])


def test_bad_images_raise_image_error_naming_the_file(tmp_path):
    junk = tmp_path / "junk.elf"
    junk.write_bytes(b"this is not an ELF file")
    # (the validation and messages of run's loader, spe_emu.platform.loader.load_elf)
    with pytest.raises(ImageError, match=f"^{re.escape(str(junk))}: not an ELF file"):
        build_report(b"", junk)
    missing = tmp_path / "missing.elf"
    with pytest.raises(ImageError, match=f"^{re.escape(str(missing))}: no such file"):
        build_report(b"", missing)
    assert issubclass(ImageError, SpeEmuError)


def test_non_aarch64_elf_is_refused(tmp_path):
    # a minimal 64-bit little-endian ELF header for x86-64 (e_machine 62), no sections
    hdr = bytearray(64)
    hdr[0:4] = b"\x7fELF"
    hdr[4], hdr[5], hdr[6] = 2, 1, 1                 # ELFCLASS64, ELFDATA2LSB, EV_CURRENT
    hdr[16:18] = (2).to_bytes(2, "little")           # ET_EXEC
    hdr[18:20] = (62).to_bytes(2, "little")          # EM_X86_64
    hdr[20:24] = (1).to_bytes(4, "little")
    hdr[52:54] = (64).to_bytes(2, "little")          # e_ehsize
    hdr[54:56] = (56).to_bytes(2, "little")          # e_phentsize
    hdr[58:60] = (64).to_bytes(2, "little")          # e_shentsize
    path = tmp_path / "x86.elf"
    path.write_bytes(bytes(hdr))
    with pytest.raises(ImageError, match=f"^{re.escape(str(path))}: not an AArch64 ELF "):
        build_report(b"", path)


@needs_binutils
def test_truncated_images_raise_image_error(image, tmp_path):
    data = image.read_bytes()
    cut = tmp_path / "cut.elf"
    for n in (0, 10, 63, 64, 200, len(data) // 2, len(data) - 1):
        cut.write_bytes(data[:n])
        problem = ("not an ELF file|truncated ELF header|malformed ELF|.* extends past the end"
                   "|.* outside the file|not a valid ELF file")
        with pytest.raises(ImageError, match=f"^{re.escape(str(cut))}: ({problem})"):
            build_report(TRACE, cut)


def test_wilson_intervals():
    # Wilson score intervals at 95% (z = 1.96), textbook values
    from spe_emu.tools.report import _wilson
    for (k, n), (lo, hi) in {(0, 10): (0.0, 27.75), (5, 10): (23.66, 76.34),
                             (10, 10): (72.25, 100.0), (29, 100): (21.01, 38.54)}.items():
        got = _wilson(k, n)
        assert abs(got[0] - lo) < 0.05 and abs(got[1] - hi) < 0.05, (k, n, got)
    assert _wilson(0, 0) == (0.0, 100.0)


def test_html_page_shows_intervals_and_exact_rates():
    # the HTML page carries what the text report does: each rate with its 95% confidence
    # interval, and with ground truth SPE's estimates beside the model's exact rates
    import re
    from pathlib import Path

    import spe_emu
    from spe_emu.tools.plots import html_page
    sort = Path(__file__).resolve().parent.parent / "guests" / "sort.elf"
    page = html_page(spe_emu.run(str(sort), ground_truth=True).report())
    assert re.search(r"<td>quick_sort\.constprop\.0</td><td>[\d.]+</td><td>[\d.]+</td>"
                     r"<td>[\d.]+ \([\d.]+-[\d.]+\)</td><td>[\d.]+ \([\d.]+-[\d.]+\)</td>",
                     page)   # (the events table: ISSUE, XLAT, L1D and LLC miss%)
    assert re.search(r"<td>quick_sort\.constprop\.0</td><td>L1D miss</td><td>[\d.]+</td>"
                     r"<td>[\d.]+-[\d.]+</td><td>[\d.]+</td><td>yes</td>", page)


def test_data_sources_are_named():
    """With PMSIDR_EL1.LDS = 1 the text report names each Data Source value by the encoding
    the model emits (perf's Neoverse names: L1D, L2, sys-cache, DRAM), not its raw code
    (issue 29 item 5)."""
    from pathlib import Path

    import spe_emu
    from spe_emu.spe.packets import data_source_name
    from spe_emu.spe.records import DATA_SOURCE
    assert [data_source_name(v) for v in DATA_SOURCE] == ["L1D", "L2", "sys-cache", "DRAM",
                                                          "peer-core"]
    assert data_source_name(0x3) == "0x3"
    guest = Path(__file__).resolve().parent.parent / "guests" / "pointer_chase.elf"
    result = spe_emu.run(str(guest), spe_features={"LDS": 1})
    console = Console(record=True, width=200, color_system=None)
    render_report(result.report(), console)
    text = console.export_text()
    assert "L1D:" in text and "sys-cache:" in text and ":0x" not in text
    assert "from events" not in text
    # the loads by level: named by their Data Source packets, as many as the records say
    rep = result.report()
    loads = Counter(data_source_name(r.data_source) for r in result.records
                    if r.op_class == P.OP_CLASS_LDST and not r.op_subclass & P.LDST_ST
                    and r.latency_total is not None)
    assert rep.load_levels_from == "data source"
    assert {lv: n for lv, n, _, _ in rep.load_levels} == dict(loads)
    assert ("Loads by the level that served them (level from the Data Source packets;"
            in " ".join(text.split()))   # (the title wrapped to its table)


def test_the_report_states_the_model_first(tmp_path):
    """The text report (and the HTML page) states the model configuration its events and
    latencies come from, from the run's summary.json model_config (issue 29 item 5)."""
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from spe_emu.tools.cli import main
    sort = Path(__file__).resolve().parent.parent / "guests" / "sort.elf"
    out = tmp_path / "out"
    assert CliRunner().invoke(main, ["run", str(sort), "-o", str(out),
                                     "--spe-model", "l1d_ways=8"]).exit_code == 0
    config = json.loads((out / "summary.json").read_text())["model_config"]
    assert config["l1d_ways"] == 8 and config["model_feed"] == "every"
    r = CliRunner().invoke(main, ["report", str(out / "spe.trace"), "--image", str(sort),
                                  "--html", str(tmp_path / "r.html")], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    second = r.stdout.splitlines()[1]
    assert second.startswith("Model: feed every from enable, linger 100,000,000 insns; "
                             "TLB 48 entries (fully assoc.), L1D 32 KiB (8-way), "
                             "LLC 1 MiB (16-way); load latency L1D/L2/LLC/DRAM 4/12/20/120")
    assert "<p id='model'>Model: feed every" in (tmp_path / "r.html").read_text()


def test_report_piped_is_wide_and_says_where_files_went(tmp_path):
    """Piped, spe-emu report is REPORT_PIPE_WIDTH columns wide (names not cut at rich's 80);
    --html and --plot say on stderr where they wrote; no false-sharing claim for a trace
    that cannot show one (issue 29 item 5)."""
    import subprocess
    import sys
    from pathlib import Path
    sort = Path(__file__).resolve().parent.parent / "guests" / "sort.elf"
    out = tmp_path / "out"
    import os
    run = [sys.executable, "-m", "spe_emu.tools.cli"]
    env = child.env({k: v for k, v in os.environ.items() if k != "COLUMNS"})
    subprocess.run([*run, "run", str(sort), "-o", str(out)], check=True, capture_output=True,
                   env=env)
    done = subprocess.run([*run, "report", str(out / "spe.trace"), "--image", str(sort),
                           "--html", str(tmp_path / "r.html")], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert "quick_sort.constprop.0" in done.stdout          # (not shortened in the middle)
    assert max(len(line) for line in done.stdout.splitlines()) > 80
    assert "false sharing" not in done.stdout
    assert done.stderr.strip() == f"spe-emu: wrote HTML page {tmp_path / 'r.html'}"


def test_data_addresses_are_named_by_data_symbol():
    """Hot data addresses carry the data object they lie in (perf mem's symbol_daddr:
    ``values+0x640``, from the image's STT_OBJECT symbols), and the samples are summed per
    data object (issue 29 item 5)."""
    from pathlib import Path

    from elftools.elf.elffile import ELFFile

    import spe_emu
    sort = Path(__file__).resolve().parent.parent / "guests" / "sort.elf"
    with sort.open("rb") as f:
        (values,) = ELFFile(f).get_section_by_name(".symtab").get_symbol_by_name("values")
        start, size = values["st_value"], values["st_size"]
    rep = spe_emu.run(str(sort)).report()
    inside = [a for a, *_ in rep.data_addresses if start <= a < start + size]
    assert inside and all(rep.data_symbols[a] == f"values+{a - start:#x}" for a in inside)
    by_object = dict((name, n) for name, n, _pct in rep.data_objects)
    assert by_object["values"] == sum(start <= va < start + size for va in rep.data_vas)
    assert sum(by_object.values()) == len(rep.data_vas)
    js = rep.to_json()
    assert js["data_objects"][0] == {"object": rep.data_objects[0][0],
                                     "samples": rep.data_objects[0][1],
                                     "percent": rep.data_objects[0][2]}


def mem_rec(pc, cls, sub, tot, events=0, source=None):
    """A load/store record at ``pc`` with its TOT latency, Events and Data Source."""
    packets = [P.address_packet(P.ADDR_PC, pc, el=0, ns=1), P.op_type_packet(cls, sub),
               P.address_packet(P.ADDR_DATA_VA, 0x4900_0000), P.events_packet(events)]
    if source is not None:
        packets.append(P.data_source_packet(source))
    packets += [P.counter_packet(P.COUNTER_TOTAL, tot), P.end_packet()]
    return b"".join(encode(p) for p in packets)


EV = lambda *bits: sum(1 << b for b in bits)
L1D_HIT = EV(P.EV_RETIRED, P.EV_L1D_ACCESS)
LLC_HIT = EV(P.EV_RETIRED, P.EV_L1D_ACCESS, P.EV_L1D_REFILL, P.EV_LLC_ACCESS)
LLC_MISS = LLC_HIT | EV(P.EV_LLC_MISS)
# the ldr at work+0x0: TOT 4, 4 (L1D hits), 8 (L1D miss, LLC hit), 20 (LLC miss); the str
# at work+0x8: TOT 2, 2 (L1D hits); the add between them, an ordinary instruction
ACCESS_TRACE = (mem_rec(BASE + 0x08, *LD_GP, 4, L1D_HIT) * 2
                + mem_rec(BASE + 0x08, *LD_GP, 8, LLC_HIT)
                + mem_rec(BASE + 0x08, *LD_GP, 20, LLC_MISS)
                + mem_rec(BASE + 0x10, *ST_GP, 2, L1D_HIT) * 2 + rec(BASE + 0x0C, *OTHER) * 3)


@pytest.fixture(scope="module")
def image_g(tmp_path_factory):
    """The test image assembled with -g: a DWARF line per instruction of t.s."""
    return _assemble(tmp_path_factory, "img_g", "-g")


@needs_binutils
@pytest.mark.parametrize("engine", ["vectorised", "reference"])
def test_source_lines_and_pcs_carry_latency_percentiles_and_miss_rates(image_g, engine):
    """Per source line and per hot PC (issue 29 item 5): samples, TOT latency mean ±95% CI,
    p50/p90/p99 (cycles) and the L1D and LLC miss rates with their Wilson intervals; blank
    latency and rates for a PC that is no load/store."""
    from spe_emu.tools.report import ReportTable, report_parts
    r = build_report(ACCESS_TRACE, image_g, engine=engine)
    line = lambda n: f"{image_g.parent / 't.s'}:{n}"    # (SOURCE's lines, 1-based)
    ldr, add, st = (SOURCE.splitlines().index(next(s for s in SOURCE.splitlines() if k in s))
                    + 1 for k in ("ldr x0", "add x0", "str x0"))
    parts = {p.key: p for p in report_parts(r, top=3) if isinstance(p, ReportTable)}
    # TOT 4, 4, 8, 20: mean 9.0, half-width 1.96 * sqrt(57.33 / 4) = 7.4; nearest-rank
    # p50 4, p90 20, p99 20; L1D refill 2 of 4 accesses (Wilson 15-85), LLC miss 1 of 2 LLC
    # accesses (9.5-90.5)
    assert parts["lines"].rows == [
        [line(ldr), "work", "4", "44.44", "9.0 ±7.4", "4", "20", "20", "50.0\n15-85",
         "50.0\n9.5-91", "-"],
        [line(add), "work", "3", "33.33", "-", "-", "-", "-", "-", "-", "-"],
        [line(st), "work", "2", "22.22", "2.0 ±0.0", "2", "2", "2", "0.0\n0-66", "0.0\n0-66",
         "-"]]
    assert [h for h, _, _ in parts["lines"].columns] == [
        "Line", "Function", "Samples", "%", "TOT mean", "p50", "p90", "p99", "L1D miss%",
        "LLC miss%", "ISSUE"]
    assert parts["pcs"].rows == [
        [f"{BASE + 0x08:#x}", "work+0x0", "ldr x0, [x1]", "4", "44.44", "9.0 ±7.4", "4", "20",
         "20", "50.0\n15-85", "50.0\n9.5-91"],
        [f"{BASE + 0x0C:#x}", "work+0x4", "add x0, x0, #1", "3", "33.33", "", "", "", "", "",
         ""],
        [f"{BASE + 0x10:#x}", "work+0x8", "str x0, [x1, #8]", "2", "22.22", "2.0 ±0.0", "2",
         "2", "2", "0.0\n0-66", "0.0\n0-66"]]
    # the HTML page's form: each interval inline
    inline = {p.key: p for p in report_parts(r, top=3, inline=True)
              if isinstance(p, ReportTable)}
    assert inline["pcs"].rows[0][-2:] == ["50.0 (15.0-85.0)", "50.0 (9.5-90.5)"]
    js = r.to_json()["pcs"][0]
    assert (js["pc"], js["samples"], js["loads"], js["latency"]["TOT"]["p90"],
            js["rates"]["l1d_refill"]) == (f"{BASE + 0x08:#x}", 4, 4, 20.0, 50.0)


@needs_binutils
def test_line_and_pc_tables_render_within_200_columns(image_g):
    console = Console(record=True, width=200, color_system=None)
    render_report(build_report(ACCESS_TRACE, image_g), console, top=3)
    text = console.export_text()
    assert max(map(len, text.splitlines())) <= 200 and "left out" not in text
    assert re.search(r"│0x48000008 │work\+0x0 +│ldr x0, \[x1\] +│ +4 │44\.44 │9\.0 ±7\.4 │ +4 │"
                     r" +20 │ +20 │ +50\.0 │ +50\.0│\n│ +│ +│ +│ +│ +│ +│ +│ +│ +│ +15-85 │"
                     r" +9\.5-91│", text), text


@needs_binutils
@pytest.mark.parametrize("engine", ["vectorised", "reference"])
def test_loads_by_level_from_events_without_data_source_packets(image, engine):
    """Without Data Source packets (PMSIDR_EL1.LDS = 0) the loads' levels come from their
    Events (L1D refill, LLC miss), the table says so, and the events table's Data source
    column shows that mix marked as derived (issue 29 item 5)."""
    from spe_emu.tools.report import ReportTable, report_parts
    r = build_report(ACCESS_TRACE, image, engine=engine)
    assert r.load_levels_from == "events"
    parts = {p.key: p for p in report_parts(r) if isinstance(p, ReportTable)}
    t = parts["load-levels"]
    assert t.title.startswith("Loads by the level that served them (level from events: no "
                              "Data Source packets, PMSIDR_EL1.LDS = 0;")
    assert [h for h, _, _ in t.columns] == ["Level", "Loads", "% of loads", "TOT mean", "p50",
                                            "p90", "p99"]
    assert t.rows == [["L1D hit", "2", "50.00", "4.0 ±0.0", "4", "4", "4"],
                      ["L1D miss, LLC hit", "1", "25.00", "8.0 ±0.0", "8", "8", "8"],
                      ["LLC miss", "1", "25.00", "20.0 ±0.0", "20", "20", "20"]]
    assert parts["events"].rows[0][0] == "work"
    assert parts["events"].rows[0][-1] == ("from events: L1D hit:2; L1D miss, LLC hit:1; "
                                           "LLC miss:1")
    assert r.to_json()["load_levels"][2] == {
        "level": "LLC miss", "loads": 1, "percent": 25.0,
        "latency": {"mean": 20.0, "ci95": 0.0, "max": 20, "p50": 20.0, "p90": 20.0,
                    "p99": 20.0}}


@needs_binutils
@pytest.mark.parametrize("engine", ["vectorised", "reference"])
def test_loads_by_level_from_data_source_packets(image, engine):
    """With Data Source packets (LDS = 1) their level names the row, whatever the Events
    say; a load without one (here the last) falls back to its Events and the title says
    both."""
    from spe_emu.tools.report import ReportTable, report_parts
    trace = (mem_rec(BASE + 0x08, *LD_GP, 4, L1D_HIT, source=0x0) * 3
             + mem_rec(BASE + 0x08, *LD_GP, 30, LLC_HIT, source=0xB)
             + mem_rec(BASE + 0x08, *LD_GP, 130, LLC_MISS, source=0xE) * 2
             + mem_rec(BASE + 0x08, *LD_GP, 150, LLC_MISS, source=0xE)
             + mem_rec(BASE + 0x10, *ST_GP, 2, L1D_HIT))
    r = build_report(trace, image, engine=engine)
    parts = {p.key: p for p in report_parts(r) if isinstance(p, ReportTable)}
    assert r.load_levels_from == "data source"
    assert "(level from the Data Source packets;" in parts["load-levels"].title
    # DRAM: 130, 130, 150: mean 136.7, half-width 1.96 * 11.55 / sqrt(3) = 13.1
    assert parts["load-levels"].rows == [
        ["L1D", "3", "42.86", "4.0 ±0.0", "4", "4", "4"],
        ["sys-cache", "1", "14.29", "30.0 ±0.0", "30", "30", "30"],
        ["DRAM", "3", "42.86", "136.7 ±13.1", "130", "150", "150"]]
    assert parts["events"].rows[0][-1] == "L1D:3 sys-cache:1 DRAM:3"
    mixed = build_report(trace + mem_rec(BASE + 0x08, *LD_GP, 8, LLC_HIT), image,
                         engine=engine)
    assert mixed.load_levels_from == "both"
    assert [row[:2] for row in mixed.load_levels] == [
        ("L1D", 3), ("sys-cache", 1), ("DRAM", 3), ("L1D miss, LLC hit", 1)]
