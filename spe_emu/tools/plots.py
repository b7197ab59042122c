"""Plots and the HTML page of ``spe-emu report`` (matplotlib, Agg backend: no display).

:func:`write_plots` writes, for a :class:`spe_emu.tools.report.Report`, PNG and SVG files of
the load/store latency histograms per function, the samples over virtual time (Timestamp
packets, ticks) and a heat map of the sampled data addresses; :func:`write_html` writes one
self-contained HTML page (the plots inline as SVG, the tables as HTML).
"""

from __future__ import annotations

import html
import io
import os
from pathlib import Path
from typing import Union

from ..errors import ConfigError
from .report import (
    PAGE, ReportLine, ReportTable, describe_model, level_key, report_parts, summary_line,
)

PLOTS = ("latency", "timeline", "data_heatmap")
MAX_FUNCS = 6          # latency histograms drawn (the most sampled functions)
TIMELINE_FUNCS = 8     # functions the timeline colours apart (the rest: "other")
MAX_REGIONS = 12       # address bands of the heat map (the most sampled)
BAND_BINS = 16         # heat map bins per address band
OTHER = "other"
PLOT_TITLES = {"latency": "Load/store latency by the level that served it",
               "timeline": "Samples over virtual time, by function",
               "data_heatmap": "Data addresses, by data object"}


def _legend(ax, series, colours, title: str, **where) -> None:
    """A legend of ``(label, values)`` series drawn in ``colours``: each label with its
    samples (handles made here: a label starting with "_", as ``_start``, stays)."""
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=c, label=f"{name} ({len(v)})")
                       for (name, v), c in zip(series, colours)],
              title=f"{title} (samples)", fontsize=7, title_fontsize=7, **where)


def _no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", transform=ax.transAxes)
    ax.set_axis_off()


def _latency_figure(report, Figure):
    """Per function (the most sampled with loads/stores), a histogram of the total latency
    stacked by the level that served each access (Report.latency_levels: report.served_by,
    the rule of the report's loads-by-level table, in report.level_key order), one colour
    per level on every panel, and a legend."""
    names = [n for n, _, _ in report.hot_functions if report.latencies.get(n)][:MAX_FUNCS]
    fig = Figure(figsize=(8, 2.4 * max(1, len(names))))
    if not names:
        _no_data(fig.subplots(), "no load/store latency in the trace")
        return fig
    per = {n: report.latency_levels.get(n) or {"load/store": report.latencies[n]}
           for n in names}
    levels = sorted({lv for d in per.values() for lv in d}, key=level_key)
    colour = {lv: f"C{i % 10}" for i, lv in enumerate(levels)}
    axes = fig.subplots(len(names), 1, squeeze=False)[:, 0]
    for ax, name in zip(axes, names):
        series = sorted(per[name].items(), key=lambda kv: level_key(kv[0]))
        lo = min(min(v) for _, v in series)
        hi = max(max(v) for _, v in series)
        # (one bin per cycle while that stays readable)
        bins = range(lo, hi + 2) if hi - lo < 80 else 60
        colours = [colour[lv] for lv, _ in series]
        ax.hist([v for _, v in series], bins=bins, stacked=True, color=colours)
        ax.set_title(f"{name}: load/store total latency by the level that served it",
                     fontsize=9)
        ax.set_xlabel("total latency, TOT (cycles)")
        ax.set_ylabel("samples")
        _legend(ax, series, colours, "served by", loc="upper right")
    fig.tight_layout()
    return fig


def _timeline_figure(report, Figure):
    """Samples over virtual time, stacked by function (one colour each, legend)."""
    fig = Figure(figsize=(8, 3.2))
    ax = fig.subplots()
    if not report.timeline:
        _no_data(ax, "no Timestamp packets in the trace")
        return fig
    shown = [n for n, _, _ in report.hot_functions[:TIMELINE_FUNCS]]
    index = {n: i for i, n in enumerate(shown)}
    times: list[list[float]] = [[] for _ in range(len(shown) + 1)]
    for t, pc in report.timeline:   # (as floats: a 64-bit count is no C long)
        times[index.get(report.pc_functions.get(pc), len(shown))].append(float(t))
    series = [(n, v) for n, v in zip([*shown, OTHER], times) if v]
    first, last = float(report.timeline[0][0]), float(report.timeline[-1][0])
    colours = [f"C{index[n] % 10}" if n in index else "0.6" for n, _ in series]
    ax.hist([v for _, v in series], bins=min(60, max(5, len(report.timeline) // 10)),
            range=(first, last if last > first else first + 1), stacked=True, color=colours)
    ax.set_xlabel("virtual time (Timestamp packet, ticks)")
    ax.set_ylabel("samples per bin")
    ax.set_title(f"Samples over time by function ({len(report.timeline)} timestamped "
                 f"records)", fontsize=9)
    _legend(ax, series, colours, "function", loc="upper left", bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0)
    fig.tight_layout()
    return fig


def _size_text(n: int) -> str:
    return f"{n >> 10} KiB" if n >= 1024 and not n % 1024 else f"{n} B"


def _regions(report, np):
    """The address bands of the heat map: per sampled data address its band (-1: left
    out) and position in it (0..1), and the bands ``(start, end, label)`` by address: the
    data objects with samples (Report.data_object_spans), else the 4 KiB page; the
    MAX_REGIONS most sampled."""
    vas = np.array(report.data_vas, dtype=np.uint64)
    spans = report.data_object_spans
    # per address: the start and end of its object, or of its page
    start = vas & ~np.uint64(PAGE - 1)
    end = start + np.uint64(PAGE)
    is_object = np.zeros(len(vas), dtype=bool)
    if spans:
        starts = np.array([s for s, _, _ in spans], dtype=np.uint64)
        ends = np.array([s + n for s, n, _ in spans], dtype=np.uint64)
        i = np.maximum(np.searchsorted(starts, vas, side="right").astype(np.int64) - 1, 0)
        is_object = (vas >= starts[i]) & (vas < ends[i])
        start = np.where(is_object, starts[i], start)
        end = np.where(is_object, ends[i], end)
    names = {s: name for s, _, name in spans}
    uniq, inv, counts = np.unique(np.stack([start, end, is_object.astype(np.uint64)], axis=1),
                                  axis=0, return_inverse=True, return_counts=True)
    keep = sorted(np.argsort(-counts, kind="stable")[:MAX_REGIONS].tolist(),
                  key=lambda k: int(uniq[k][0]))
    bands = []
    band_of = np.full(len(uniq), -1, dtype=np.int64)
    for b, k in enumerate(keep):
        lo, hi, obj = (int(v) for v in uniq[k])
        what = names[lo] if obj else "page"
        bands.append((lo, hi, f"{what} {lo:#x} ({_size_text((hi - lo) % (1 << 64))})"))
        band_of[k] = b
    band = band_of[inv.reshape(-1)]
    pos = (vas.astype(np.float64) - start.astype(np.float64)) / (end - start).astype(np.float64)
    return band, pos, bands


def _heatmap_figure(report, Figure):
    """Sampled data addresses over the samples (trace order): one band per data object
    (or 4 KiB page outside every object), labelled with the data symbol and its range."""
    import numpy as np

    fig = Figure(figsize=(8, 3.8))
    ax = fig.subplots()
    if not report.data_vas:
        _no_data(ax, "no data addresses in the trace")
        return fig
    band, pos, bands = _regions(report, np)
    shown = band >= 0
    x = np.arange(len(band))[shown]
    y = band[shown] + np.clip(pos[shown], 0, 0.999)
    *_, image = ax.hist2d(x, y, bins=(min(50, max(1, len(band))), BAND_BINS * len(bands)),
                          range=((0, len(band)), (0, len(bands))), cmap="viridis", cmin=1,
                          rasterized=True)
    fig.colorbar(image, ax=ax, label="samples per bin", pad=0.02)
    for b in range(1, len(bands)):
        ax.axhline(b, color="0.3", linewidth=0.6)
    ax.set_yticks([b + 0.5 for b in range(len(bands))],
                  [label for _, _, label in bands], fontsize=7)
    ax.set_ylim(0, len(bands))
    ax.set_xlabel("samples with a data address, in trace order (sample number)")
    ax.set_ylabel("data VA: a band per data object\nor page (low to high address)",
                  fontsize=8)
    left = int((~shown).sum())
    ax.set_title(f"Data addresses ({len(band)} samples"
                 + (f"; {left} in other regions not shown" if left else "") + ")", fontsize=9)
    fig.tight_layout()
    return fig


def _figures(report) -> dict:
    """``{name: matplotlib Figure}`` for :data:`PLOTS` (a plot with no data says so)."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "spe-emu"      # (same input, same SVG ids)
    matplotlib.rcParams["svg.fonttype"] = "none"         # (text as text: searchable)
    from matplotlib.figure import Figure

    return {"latency": _latency_figure(report, Figure),
            "timeline": _timeline_figure(report, Figure),
            "data_heatmap": _heatmap_figure(report, Figure)}


def write_plots(report, outdir: Union[str, os.PathLike]) -> list[Path]:
    """Write ``<name>.png`` and ``<name>.svg`` for every plot of :data:`PLOTS` into
    ``outdir`` (created); the paths written. Raises ConfigError when it cannot be written."""
    out = Path(outdir)
    paths = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, fig in _figures(report).items():
            for ext in ("png", "svg"):
                path = out / f"{name}.{ext}"
                # (no date in the SVG/PNG metadata: same trace, same bytes)
                fig.savefig(path, format=ext, dpi=100,
                            metadata={"Date": None} if ext == "svg" else {"Software": None})
                paths.append(path)
    except OSError as exc:
        raise ConfigError(f"--plot {out}: {exc.strerror or exc}") from None
    return paths


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _html_table(t: ReportTable) -> str:
    """A :class:`~spe_emu.tools.report.ReportTable` as an HTML table (``id`` its key), its
    names whole (a list of names joined by commas)."""
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h, _, _ in t.columns)
    body = "".join("<tr>" + "".join(
        f"<td>{e(', '.join(v) if isinstance(v, list) else str(v))}</td>" for v in row)
        + "</tr>" for row in t.rows)
    return (f"<h2>{e(t.title)}</h2><table id='{t.key}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def _html_style(tables) -> str:
    """The page's CSS: numbers right-aligned, every text column (Report column not
    right-aligned) left-aligned, the operation mix's indentation kept."""
    rules = [f"#{t.key} {cell}:nth-child({i + 1})" for t in tables
             for i, (_, right, _) in enumerate(t.columns) if not right for cell in ("td", "th")]
    return ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;"
            "margin-bottom:.5em}td,th{border:1px solid #ccc;padding:2px 6px;"
            "text-align:right;vertical-align:top}th{background:#eee}"
            + (",".join(rules) + "{text-align:left}" if rules else "")
            + "#op-mix td:first-child{white-space:pre}.plot svg{max-width:100%;height:auto}")


def html_page(report, top: int = 20) -> str:
    """The report as one self-contained HTML page: the summary and model lines, every
    table and line of the text report (:func:`~spe_emu.tools.report.report_parts`, rates
    with their 95% confidence interval inline, names whole), then each plot of
    :data:`PLOTS` once, as inline SVG (no external files)."""
    e = html.escape
    model = describe_model(report.model_config)
    parts = [f"<h1>SPE report</h1><p id='summary'>{e(summary_line(report))}</p>"
             + (f"<p id='model'>{e(model)}</p>" if model else "")]
    tables = []
    for part in report_parts(report, top, inline=True):
        if isinstance(part, ReportLine):
            parts.append(f"<p id='{part.key}'>{e(part.text)}</p>")
        else:
            tables.append(part)
            parts.append(_html_table(part))
    for name, fig in _figures(report).items():
        parts.append(f"<h2>{e(PLOT_TITLES[name])}</h2>"
                     f"<div class='plot' id='plot-{name}'>{_svg(fig)}</div>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>SPE report</title>"
            f"<style>{_html_style(tables)}</style></head><body>{''.join(parts)}"
            f"</body></html>\n")


def write_html(report, path: Union[str, os.PathLike], top: int = 20) -> Path:
    """Write :func:`html_page` to ``path``. Raises ConfigError when it cannot be written."""
    path = Path(path)
    try:
        path.write_text(html_page(report, top))
    except OSError as exc:
        raise ConfigError(f"--html {path}: {exc.strerror or exc}") from None
    return path
