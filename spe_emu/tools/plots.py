"""Plots and the HTML page of ``spe-emu report`` (matplotlib, Agg backend: no display).

:func:`write_plots` writes, for a :class:`spe_emu.tools.report.Report`, PNG and SVG files of
the load/store latency histograms per function, the samples over virtual time (Timestamp
packets, ticks) and a heat map of the sampled data addresses; :func:`write_html` writes one
self-contained HTML page (the plots inline as SVG, the tables as HTML).
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path
from typing import Union

from ..errors import ConfigError
from .report import RATE_TITLES, format_rate

PLOTS = ("latency", "timeline", "data_heatmap")
MAX_FUNCS = 6          # latency histograms drawn (the most sampled functions)


def _figures(report) -> dict:
    """``{name: matplotlib Figure}`` for :data:`PLOTS` (a plot with no data says so)."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "spe-emu"      # (same input, same SVG ids)
    from matplotlib.figure import Figure

    figs = {}
    # latency histograms per function
    names = [n for n, _, _ in report.hot_functions if report.latencies.get(n)][:MAX_FUNCS]
    fig = Figure(figsize=(8, 2.2 * max(1, len(names))))
    if names:
        axes = fig.subplots(len(names), 1, squeeze=False)[:, 0]
        for ax, name in zip(axes, names):
            ax.hist(report.latencies[name], bins=40, color="tab:blue")
            ax.set_title(f"{name}: load/store total latency", fontsize=9)
            ax.set_xlabel("cycles (TOT)")
            ax.set_ylabel("samples")
    else:
        fig.text(0.5, 0.5, "no load/store latency in the trace", ha="center")
    fig.tight_layout()
    figs["latency"] = fig

    # samples over virtual time, per function (top 5 + other)
    fig = Figure(figsize=(8, 3))
    ax = fig.subplots()
    if report.timeline:
        top = [n for n, _, _ in report.hot_functions[:5]]
        times = [t for t, _ in report.timeline]
        bins = min(60, max(5, len(times) // 10))
        ax.hist(times, bins=bins, color="tab:orange")
        ax.set_xlabel("virtual time (timestamp ticks)")
        ax.set_ylabel("samples")
        ax.set_title(f"Samples over time ({len(times)} timestamped records; "
                     f"hottest: {', '.join(top[:3])})", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no Timestamp packets in the trace", ha="center",
                transform=ax.transAxes)
    fig.tight_layout()
    figs["timeline"] = fig

    # heat map of data addresses: 2-D histogram of (sample index, address)
    fig = Figure(figsize=(8, 3.5))
    ax = fig.subplots()
    vas = report.data_vas
    if vas:
        lo = min(vas)
        ax.hist2d(range(len(vas)), [v - lo for v in vas], bins=(50, 50), cmap="viridis",
                  rasterized=True)
        ax.set_xlabel("sample (in trace order)")
        ax.set_ylabel(f"data VA - {lo:#x} (bytes)")
        ax.set_title(f"Data addresses ({len(vas)} samples)", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no data addresses in the trace", ha="center",
                transform=ax.transAxes)
    fig.tight_layout()
    figs["data_heatmap"] = fig
    return figs


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


def _table(title: str, header: list[str], rows: list[list]) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<h2>{html.escape(title)}</h2><table><tr>{h}</tr>{body}</table>"


def html_page(report, top: int = 20) -> str:
    """The report as one self-contained HTML page (inline SVG plots; no external files)."""
    f = lambda v: "-" if v is None else f"{v:.1f}"

    def rate(s: dict, name: str) -> str:   # (with its 95% confidence interval)
        return format_rate(s, name, inline=True)
    from .report import describe_model
    model = describe_model(getattr(report, "model_config", None))
    parts = [f"<h1>SPE report</h1><p id='summary'>{report.total_records} records from "
             f"{html.escape(str(report.image_path or 'no image'))}, {report.bad_packets} "
             f"bad packets</p>"
             + (f"<p id='model'>{html.escape(model)}</p>" if model else "")]
    rows = []
    for name, count, pct in report.hot_functions[:top]:
        s = report.functions[name]
        tot = s["latency"].get("TOT", {})
        rows.append([name, count, f"{pct:.2f}", f(tot.get("mean")), f(tot.get("p99")),
                     rate(s, "l1d_refill"), rate(s, "tlb_refill"), rate(s, "mispredict")])
    parts.append(_table("Hot functions (event rates with their 95% confidence intervals)",
                        ["Function", "Samples", "%", "TOT mean", "TOT p99", "L1D miss%",
                         "TLB miss%", "Mispred%"], rows))
    if report.lines:
        parts.append(_table("Hot source lines", ["Line", "Function", "Samples", "%"],
                            [[ln, fn, s["samples"], f"{s['percent']:.2f}"]
                             for ln, fn, s in report.lines[:top]]))
    parts.append(_table("Hot PCs", ["PC", "Location", "Instruction", "Samples", "%"],
                        [[f"{pc:#x}", w, d, c, f"{p:.2f}"]
                         for pc, w, d, c, p in report.hot_pcs[:top]]))
    parts.append(_table("Operation mix", ["Kind", "Samples", "%"],
                        [["\u00a0\u00a0" * d + k, c, f"{p:.2f}"]
                         for d, k, c, p in report.op_mix]))
    if report.cache_lines:
        parts.append(_table("Hot cache lines", ["Line VA", "Samples", "Loads", "Stores",
                                                "Offsets", "Functions"],
                            [[f"{a:#x}", c, lo, st, o, ", ".join(fs)]
                             for a, c, lo, st, o, fs, _ in report.cache_lines[:top]]))
    gt = report.ground_truth
    if gt and gt.get("functions"):
        parts.append(_table("Sampled against exact", ["Function", "SPE %", "Exact %", "Error"],
                            [[n, f"{e:.2f}", f"{x:.2f}", f"{d:+.2f}"]
                             for n, e, x, d in gt["functions"][:top]]))
        parts.append(f"<p id='sampling-error'>Sampling error: {gt['error_functions']:.2f} "
                     f"points over functions, {gt['error_pcs']:.2f} over PCs</p>")
    et = report.event_truth
    if et and et["rates"]:
        parts.append(_table("Event rates, SPE's estimate against the model's exact rate",
                            ["Function", "Event", "SPE %", "95% interval", "Exact %", "In"],
                            [[fn, RATE_TITLES[ev], f"{est:.1f}", f"{lo:.1f}-{hi:.1f}",
                              f"{ex:.1f}",
                              "yes" if inside else "no"]
                             for fn, ev, est, lo, hi, ex, inside in et["rates"][:4 * top]]))
    figs = _figures(report)
    for name, fig in figs.items():
        parts.append(f"<h2>{name}</h2><div class='plot' id='plot-{name}'>{_svg(fig)}</div>")
    # (a PNG data URI too: viewers that do not render inline SVG still show the latency plot)
    buf = io.BytesIO()
    figs["latency"].savefig(buf, format="png", dpi=60, metadata={"Software": None})
    parts.append(f"<img alt='latency' src='data:image/png;base64,"
                 f"{base64.b64encode(buf.getvalue()).decode()}'>")
    style = ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>SPE report</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n")


def write_html(report, path: Union[str, os.PathLike], top: int = 20) -> Path:
    """Write :func:`html_page` to ``path``. Raises ConfigError when it cannot be written."""
    path = Path(path)
    try:
        path.write_text(html_page(report, top))
    except OSError as exc:
        raise ConfigError(f"--html {path}: {exc.strerror or exc}") from None
    return path
