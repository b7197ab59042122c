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
    def __init__(self):
        super().__init__()
        self.cells, self.svgs, self.imgs, self.ids, self._cell = [], 0, [], set(), None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "svg":
            self.svgs += 1
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        if tag == "td":
            self._cell = ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag == "td":
            self.cells.append(self._cell)
            self._cell = None


def _expected_rows(out, image):
    data = json.loads(invoke("report", out / "spe.trace", "--image", image, "--json").stdout)
    return data, [(f["name"], str(f["samples"])) for f in data["functions"]]


def test_plots_and_html_page(sort_g, tmp_path):
    image, out = sort_g
    page = tmp_path / "report.html"
    result = invoke("report", out / "spe.trace", "--image", image, "--plot", tmp_path / "plots",
                    "--html", page)
    assert result.exit_code == 0, result.output
    for name in ("latency", "timeline", "data_heatmap"):
        assert (tmp_path / "plots" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (tmp_path / "plots" / f"{name}.svg").read_text()
    text = page.read_text()
    assert "src='http" not in text and 'src="http' not in text   # self-contained
    parser = _Page()
    parser.feed(text)
    data, rows = _expected_rows(out, image)
    for name, samples in rows[:5]:
        i = parser.cells.index(name)
        assert parser.cells[i + 1] == samples
    assert parser.svgs == 3 and parser.imgs[0].startswith("data:image/png;base64,")
    assert {"summary", "sampling-error", "plot-latency"} <= parser.ids
    assert f"{data['total_records']} records" in text
    # the same input gives the same bytes
    again = tmp_path / "again.html"
    invoke("report", out / "spe.trace", "--image", image, "--html", again)
    assert again.read_bytes() == page.read_bytes()


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
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    _, rows = _expected_rows(out, image)
    for name, samples in rows[:3]:
        assert re.search(rf"<td>{re.escape(name)}</td><td>{samples}</td>", dom), name
    assert dom.count("<svg") >= 3
