"""spe-emu report on real runs: source lines from DWARF (sort.c built with -g), annotate,
terminal width, --json, --top, --image checks, plots and the HTML page (parsed always;
rendered by a headless chromium where one is installed)."""

import html.parser
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from spe_emu.session import RunOptions, run_image
from spe_emu.spe.packets import iter_records
from spe_emu.tools.cli import main

ROOT = Path(__file__).resolve().parents[1]
SORT = ROOT / "guests" / "sort.elf"
MATMUL = ROOT / "guests" / "matmul.elf"
CC = shutil.which("aarch64-linux-gnu-gcc")


def invoke(*args, columns=200):
    return CliRunner().invoke(main, [str(a) for a in args],
                              env={"COLUMNS": str(columns), "TERM": "dumb", "NO_COLOR": "1"})


@pytest.fixture(scope="module")
def sort_g(tmp_path_factory):
    """sort.elf rebuilt with -g (DWARF line tables kept), run once: (image, out dir)."""
    if CC is None:
        pytest.skip("aarch64-linux-gnu-gcc not installed")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import build_images as b
        try:
            b.check_toolchain(CC)
        except b.BuildError as exc:
            pytest.skip(str(exc))
        d = tmp_path_factory.mktemp("sortg")
        cmd = [a for a in b.guest_command(CC, b.GUESTS["sort"], d / "sort.elf")
               if a != "-Wl,--strip-debug" and not a.startswith("-ffile-prefix-map")]
        cmd = ["-g" if a == "-g0" else a for a in cmd]
        subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    run_image(d / "sort.elf", RunOptions(outdir=d / "out", interval=1024, ground_truth=True,
                                         physical=True))
    return d / "sort.elf", d / "out"


def test_source_lines_latency_events_and_json(sort_g):
    image, out = sort_g
    result = invoke("report", out / "spe.trace", "--image", image, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    records = list(iter_records((out / "spe.trace").read_bytes()))
    assert data["total_records"] == len(records)
    funcs = {f["name"]: f for f in data["functions"]}
    qs = funcs["quick_sort.constprop.0"] if "quick_sort.constprop.0" in funcs else \
        funcs[next(n for n in funcs if n.startswith("quick_sort"))]
    assert sum(f["samples"] for f in data["functions"]) == sum(r.pc is not None
                                                               for r in records)
    assert max(funcs, key=lambda n: funcs[n]["samples"]) == qs["name"]
    tot = sorted(r.latency_total for r in records if r.op_class == 1
                 and r.latency_total is not None)
    assert max(f["latency"].get("TOT", {}).get("max", 0) for f in data["functions"]) == tot[-1]
    assert qs["latency"]["TOT"]["p50"] <= qs["latency"]["TOT"]["p99"] <= qs["latency"]["TOT"]["max"]
    assert set(qs["rates"]) >= {"l1d_refill", "tlb_refill", "mispredict"}
    # source lines of sort.c from the DWARF line table, adding up to at most the samples
    lines = data["lines"]
    assert lines and all(re.search(r"\.[chS]:\d+$", ln["line"]) for ln in lines)
    assert any(ln["line"].startswith("guests/src/sort.c:")
               and ln["function"].startswith("quick_sort") for ln in lines)
    assert any("crt0.S:" in ln["line"] for ln in lines)   # (gas gives no directory)
    assert sum(ln["samples"] for ln in lines) <= len(records)
    # PA packets (--pa): hottest physical pages
    assert data["pages"] and sum(p["samples"] for p in data["pages"]) <= len(records)
    # op mix: the top level adds up to 100 %
    assert sum(r["percent"] for r in data["op_mix"] if r["depth"] == 0) == pytest.approx(100)
    # ground truth found next to the trace
    gt = data["ground_truth"]
    assert gt["instructions"] == 1_159_795 and gt["samples"] > 0
    assert sum(e for _, e, _, _ in gt["functions"]) == pytest.approx(100)
    assert sum(x for _, _, x, _ in gt["functions"]) == pytest.approx(100)
    assert 0 <= gt["error_functions"] <= gt["error_pcs"] <= 100


def test_annotate_interleaves_source_and_disassembly(sort_g):
    image, out = sort_g
    result = invoke("report", out / "spe.trace", "--image", image, "--annotate", "main")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith("Annotate main [0x")
    assert re.search(r"sort\.c:\d+  \S", text)                  # a source line with its text
    assert re.search(r"0x480[0-9a-f]{5}: (ldr|str|bl|mov|add)", text)
    total = int(re.match(r"Annotate main \[.*\): (\d+) samples", text)[1])
    counted = sum(int(m[1]) for m in re.finditer(r"^\s*[\d.]+\s+(\d+)\s+0x", text, re.M))
    assert counted == total > 0
    bad = invoke("report", out / "spe.trace", "--image", image, "--annotate", "nosuch")
    assert bad.exit_code == 125 and "no function 'nosuch'" in bad.stderr


def test_tables_fit_80_columns_and_keep_offsets(sort_g):
    image, out = sort_g
    result = invoke("report", out / "spe.trace", "--image", image, columns=80)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    locations = re.findall(r"│(\S*\+0x[0-9a-f]+) *│", result.stdout)
    assert locations and all(re.search(r"\+0x[0-9a-f]+$", loc) for loc in locations)
    assert any("…" in loc for loc in locations)          # quick_sort.constprop.0 shortened
    # the PCs table leaves its latency and miss columns out, and says so
    assert ("Hot PCs (top 10; loads/stores: latency in cycles, mean ±95% CI; miss % of "
            "accesses, 95% CI under each rate) [TOT mean, p50, p90, p99, L1D miss%, LLC "
            "miss% left out to fit 80 columns]") in " ".join(result.stdout.split())
    assert "Sampling error (" in result.stdout


def test_top_must_be_positive(sort_g):
    _, out = sort_g
    for bad in ("0", "-5", "x"):
        result = invoke("report", out / "spe.trace", "--top", bad)
        assert result.exit_code == 125, result.output
        assert "--top" in result.output


def test_without_image_addresses_only(sort_g):
    _, out = sort_g
    result = invoke("report", out / "spe.trace", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [f["name"] for f in data["functions"]] == ["[unknown]"]
    assert data["pcs"][0]["pc"].startswith("0x48") and data["lines"] == []


def test_wrong_image_is_one_line_error(sort_g):
    _, out = sort_g
    result = invoke("report", out / "spe.trace", "--image", MATMUL)
    assert result.exit_code == 125
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and "not the image of this trace" in err[0] and str(MATMUL) in err[0]
    fw = ROOT / "spe_emu" / "images"
    other = next(iter(sorted(fw.glob("*.elf"))), None)
    if other is not None:   # the firmware: no sampled guest PC inside its text
        result = invoke("report", out / "spe.trace", "--image", other)
        assert result.exit_code == 125 and "not the image of this trace" in result.stderr


class _Page(html.parser.HTMLParser):
    """The page's tables (by id: headers and rows of cells), paragraphs by id, plot divs
    (per plot: its <svg> and <img> elements and the text of its SVG) and every <img>."""

    def __init__(self):
        super().__init__()
        self.cells, self.svgs, self.imgs, self.ids = [], 0, [], set()
        self.tables, self.paragraphs, self.plots = {}, {}, {}
        self._cell = self._table = self._row = self._para = self._plot = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "table":
            self._table = self.tables.setdefault(a.get("id"), {"headers": [], "rows": []})
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "p" and "id" in a:
            self._para = a["id"]
            self.paragraphs[self._para] = ""
        elif tag == "div" and a.get("id", "").startswith("plot-"):
            self._plot = self.plots.setdefault(a["id"][5:], {"svg": 0, "img": 0, "text": []})
        if tag == "svg":
            self.svgs += 1
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if self._plot is not None and tag in ("svg", "img"):
            self._plot[tag] += 1

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        elif self._para is not None:
            self.paragraphs[self._para] += data
        elif self._plot is not None and data.strip():
            self._plot["text"].append(data.strip())

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            if tag == "td":
                self.cells.append(self._cell)
            if self._row is not None:
                self._row.append((tag, self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if all(kind == "th" for kind, _ in self._row):
                self._table["headers"] = [c for _, c in self._row]
            else:
                self._table["rows"].append([c for _, c in self._row])
            self._row = None
        elif tag == "table":
            self._table = None
        elif tag == "p":
            self._para = None
        elif tag == "div":
            self._plot = None


def _expected_rows(out, image):
    data = json.loads(invoke("report", out / "spe.trace", "--image", image, "--json").stdout)
    return data, [(f["name"], str(f["samples"])) for f in data["functions"]]


TOP = 10   # (spe-emu report's default --top)


def _check_page(parser, data, text_report, records):
    """The HTML page has every table of the text report, filled as the report's JSON and
    text say, each plot once, with its legend and axes."""
    tables = parser.tables
    expected = {"hot-functions": data["functions"], "events": data["functions"],
                "lines": data["lines"], "pcs": data["pcs"], "op-mix": data["op_mix"],
                "el-mix": data["el_mix"], "data-objects": data["data_objects"],
                "data-addresses": data["data_addresses"], "cache-lines": data["cache_lines"],
                "pages": data["pages"], "load-levels": data["load_levels"],
                "truth-functions": data["ground_truth"]["functions"],
                "truth-op-classes": data["ground_truth"]["op_classes"]}
    if data["event_truth"] and data["event_truth"]["rates"]:
        expected["event-truth"] = data["event_truth"]["rates"][:4 * TOP]
    assert set(tables) == set(expected)
    for key, rows in expected.items():
        n = (len(rows) if key in ("op-mix", "el-mix", "event-truth", "load-levels")
             else min(TOP, len(rows)))
        assert n and len(tables[key]["rows"]) == n, key
        assert all(len(r) == len(tables[key]["headers"]) for r in tables[key]["rows"]), key
    # (each table's title and headers are the text report's)
    for key in expected:
        for header in tables[key]["headers"]:
            assert header in text_report, (key, header)
    assert tables["events"]["headers"] == ["Function", "ISSUE mean", "XLAT mean", "L1D miss%",
                                           "LLC miss%", "TLB miss%", "Mispred%", "Data source"]
    assert tables["hot-functions"]["headers"] == ["Function", "Samples", "%", "Ld/St",
                                                  "TOT mean", "p50", "p90", "p99"]
    for f, row, ev in zip(data["functions"], tables["hot-functions"]["rows"],
                          tables["events"]["rows"]):
        assert row[:4] == [f["name"], str(f["samples"]), f"{f['percent']:.2f}",
                           str(f["loads"] + f["stores"])]
        tot = f["latency"].get("TOT")
        if tot:
            assert row[4] == f"{tot['mean']:.1f} ±{tot['ci95']:.1f}"
            assert row[5:] == [f"{tot[f'p{q}']:.0f}" for q in (50, 90, 99)]
        assert ev[0] == f["name"]
        for cell, rate in zip(ev[3:7], ("l1d_refill", "llc_miss", "tlb_refill", "mispredict")):
            if rate in f["rates"]:
                lo, hi = f["rates_ci95"][rate]
                assert cell == f"{f['rates'][rate]:.1f} ({lo:.1f}-{hi:.1f})", (f["name"], rate)
            else:
                assert cell == "-"
    def access(s):   # TOT mean ±CI, p50/p90/p99, L1D and LLC miss% (interval inline)
        tot = s["latency"].get("TOT")
        cells = ([f"{tot['mean']:.1f} ±{tot['ci95']:.1f}"]
                 + [f"{tot[f'p{q}']:.0f}" for q in (50, 90, 99)] if tot else ["-"] * 4)
        for rate in ("l1d_refill", "llc_miss"):
            lo, hi = s["rates_ci95"].get(rate, (0, 0))
            cells.append(f"{s['rates'][rate]:.1f} ({lo:.1f}-{hi:.1f})"
                         if rate in s["rates"] else "-")
        return cells
    assert tables["pcs"]["headers"][5:] == tables["lines"]["headers"][4:10] == [
        "TOT mean", "p50", "p90", "p99", "L1D miss%", "LLC miss%"]
    for pc, row in zip(data["pcs"], tables["pcs"]["rows"]):
        assert row[:4] == [pc["pc"], pc["location"], pc["instruction"], str(pc["samples"])]
        assert pc["instruction"]                                  # (the disassembly)
        assert row[5:] == (access(pc) if pc["loads"] + pc["stores"] else [""] * 6), pc
    assert any(pc["loads"] for pc in data["pcs"][:TOP])
    for ln, row in zip(data["lines"], tables["lines"]["rows"]):
        assert row[2:10] == [str(ln["samples"]), f"{ln['percent']:.2f}", *access(ln)], ln
    for da, row in zip(data["data_addresses"], tables["data-addresses"]["rows"]):
        assert row[:3] == [da["va"], da["symbol"] or "-", str(da["samples"])]
    assert any(row[1].startswith("values+0x") for row in tables["data-addresses"]["rows"])
    assert tables["data-objects"]["rows"][0][0] == data["data_objects"][0]["object"]
    assert [r[0] for r in tables["el-mix"]["rows"]] == list(data["el_mix"])
    assert [r[0].strip() for r in tables["op-mix"]["rows"]] == [r["kind"]
                                                                 for r in data["op_mix"]]
    assert tables["op-mix"]["rows"][1][0] == "  load"             # (its depth kept)
    assert [r[0] for r in tables["lines"]["rows"]] == [ln["line"] for ln in data["lines"][:TOP]]
    assert tables["cache-lines"]["rows"][0][0] == data["cache_lines"][0]["line"]
    assert tables["pages"]["rows"][0][0] == data["pages"][0]["pa"]
    # the summary, model and sampling-error lines are the text report's
    assert parser.paragraphs["summary"] == text_report.splitlines()[0]
    assert parser.paragraphs["model"].startswith("Model: feed ")
    assert parser.paragraphs["model"][:60] in text_report
    assert parser.paragraphs["sampling-error"].startswith("Sampling error (")

    # each plot once, as inline SVG; no other image (a second latency PNG repeated)
    assert set(parser.plots) == {"latency", "timeline", "data_heatmap"}
    assert all(p == {**p, "svg": 1, "img": 0} for p in parser.plots.values())
    assert parser.svgs == 3 and parser.imgs == []
    # latency: split by the level that served each load (no Data Source packets here: by
    # the L1D refill / LLC miss events), its legend counts the samples, axes in cycles
    lat = parser.plots["latency"]["text"]
    assert "total latency, TOT (cycles)" in lat and "samples" in lat
    assert "served by (samples)" in lat
    hits = sum(1 for r in records if r.op_class == 1 and not r.op_subclass & 1
               and r.latency_total is not None and not r.events >> 3 & 1)
    legend = [re.fullmatch(r"L1D hit \((\d+)\)", t) for t in lat]
    assert hits and sum(int(m[1]) for m in legend if m) == hits
    # the loads-by-level table splits the loads by the same rule: no Data Source packets,
    # so the level is from the events (and the title says so)
    level = {}
    for r in records:
        if r.op_class == 1 and not r.op_subclass & 1 and r.latency_total is not None:
            name = ("LLC miss" if r.events >> 9 & 1 else
                    "L1D miss, LLC hit" if r.events >> 3 & 1 else "L1D hit")
            level.setdefault(name, []).append(r.latency_total)
    assert {row[0]: int(row[1]) for row in tables["load-levels"]["rows"]} == {
        k: len(v) for k, v in level.items()}
    assert tables["load-levels"]["rows"][0][:2] == ["L1D hit", str(hits)]
    assert ("level from events: no Data Source packets, PMSIDR_EL1.LDS = 0"
            in " ".join(text_report.split()))   # (the title wrapped to its table)
    assert any(re.fullmatch(r"store \(\d+\)", t) for t in lat)
    # timeline: every function its own entry in the legend, with its samples (every record
    # here has a timestamp)
    tl = parser.plots["timeline"]["text"]
    assert "function (samples)" in tl and "virtual time (Timestamp packet, ticks)" in tl
    for f in data["functions"]:
        assert f"{f['name']} ({f['samples']})" in tl, f["name"]
    # heat map: the data objects' bands named by their data symbols, axes with units
    hm = parser.plots["data_heatmap"]["text"]
    assert any(re.fullmatch(r"values 0x[0-9a-f]+ \(64 KiB\)", t) for t in hm), hm
    assert any("sample number" in t for t in hm) and "samples per bin" in hm
    assert not any(t.startswith("data VA -") for t in hm)


def test_plots_and_html_page(sort_g, tmp_path):
    image, out = sort_g
    page = tmp_path / "report.html"
    result = invoke("report", out / "spe.trace", "--image", image, "--plot", tmp_path / "plots",
                    "--html", page)
    assert result.exit_code == 0, result.output
    for name in ("latency", "timeline", "data_heatmap"):
        assert (tmp_path / "plots" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (tmp_path / "plots" / f"{name}.svg").read_text()
    assert "served by (samples)" in (tmp_path / "plots" / "latency.svg").read_text()
    text = page.read_text()
    assert "src='http" not in text and 'src="http' not in text   # self-contained
    parser = _Page()
    parser.feed(text)
    data, rows = _expected_rows(out, image)
    for name, samples in rows[:5]:
        i = parser.cells.index(name)
        assert parser.cells[i + 1] == samples
    assert {"summary", "sampling-error", "plot-latency"} <= parser.ids
    assert f"{data['total_records']} records" in text
    text_report = invoke("report", out / "spe.trace", "--image", image).stdout
    _check_page(parser, data, text_report,
                list(iter_records((out / "spe.trace").read_bytes())))
    # the same input gives the same bytes
    again = tmp_path / "again.html"
    invoke("report", out / "spe.trace", "--image", image, "--html", again)
    assert again.read_bytes() == page.read_bytes()


def test_latency_split_by_data_source_names():
    """With Data Source packets (PMSIDR_EL1.LDS = 1) the latency histograms are split by
    the level's name (L1D, sys-cache, ...), and the events table names the sources."""
    import spe_emu
    from spe_emu.tools.plots import html_page

    rep = spe_emu.run(str(SORT), spe_features={"LDS": 1}).report()
    parser = _Page()
    parser.feed(html_page(rep, top=5))
    lat = parser.plots["latency"]["text"]
    loads = {}
    for levels in rep.latency_levels.values():
        for level, values in levels.items():
            loads[level] = loads.get(level, 0) + len(values)
    assert set(loads) >= {"L1D", "store"} and "L1D hit" not in loads
    shown = {}
    for t in lat:
        m = re.fullmatch(r"(.+) \((\d+)\)", t)
        if m and m[1] in loads:
            shown[m[1]] = shown.get(m[1], 0) + int(m[2])
    assert shown == loads
    assert re.fullmatch(r"L1D:\d+( [\w-]+:\d+)*",
                        parser.tables["events"]["rows"][0][-1])


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
def test_html_page_in_headless_chromium(sort_g, tmp_path):
    image, out = sort_g
    page = tmp_path / "report.html"
    assert invoke("report", out / "spe.trace", "--image", image, "--html", page).exit_code == 0
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}"]
    shot = tmp_path / "shot.png"
    subprocess.run(base + [f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # (the page rendered: not one colour from top to bottom)
    import matplotlib.image
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[0] >= 1000 and pixels[..., :3].std() > 0.05
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    data, rows = _expected_rows(out, image)
    for name, samples in rows[:3]:
        assert re.search(rf"<td>{re.escape(name)}</td><td>{samples}</td>", dom), name
    # every table filled and each plot once, as the browser built the page
    parser = _Page()
    parser.feed(dom)
    text_report = invoke("report", out / "spe.trace", "--image", image).stdout
    _check_page(parser, data, text_report, list(iter_records((out / "spe.trace").read_bytes())))


def test_html_page_of_odd_traces(tmp_path):
    """An empty trace, and mutated ones (64-bit timestamps, addresses and data sources),
    give a page with each plot once."""
    import random

    from spe_emu.tools.plots import html_page
    from spe_emu.tools.report import build_report

    run_image(SORT, RunOptions(outdir=tmp_path / "out", interval=1024))
    trace = (tmp_path / "out" / "spe.trace").read_bytes()[:20000]
    rnd = random.Random(29)
    for i in range(4):
        b = bytearray(trace)
        for _ in range(200 * i):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        parser = _Page()
        parser.feed(html_page(build_report(bytes(b) if i else b"", None)))
        assert parser.svgs == 3 and set(parser.plots) == {"latency", "timeline",
                                                          "data_heatmap"}
        assert "hot-functions" in parser.tables and "op-mix" in parser.tables
