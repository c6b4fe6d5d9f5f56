"""Charts of serving-performance runs as inline SVG, in the style of :mod:`assay.ui.charts`:
latency CDFs (several series: TTFT and E2E, the points of a run, or run A against run B) and a
metric against the load (concurrency or request rate) with a marker per point.

Every text drawn (model names, labels, numbers) is escaped here; no script, no external
resource. :func:`perf_charts` is what ``assay bench perf --out DIR`` writes next to
``summary.json``, and what the dashboard's benchmark page shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from markupsafe import Markup, escape

from assay.bench.perf.summary import PerfPoint, PerfSummary
from assay.ui.charts import BAR, GRID, INK, MUTED, number, svg_root

PALETTE = (BAR, "#e07b24", "#2f9e5b", "#8e5cc4", "#d64545", "#1f9eb0", "#b7791f", "#52606d")
MARKERS = ("circle", "square", "triangle", "diamond")
CDF_POINTS = 300        # points drawn per CDF curve
MAX_CDF_SERIES = 8
CHAR_W = 6.4            # rough width of one 11px character, for laying out the legend
# The page's font in the dashboard; the same family when a chart is opened as a file.
FONT = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"


def _chart(width: int, height: int, body: list[str], label: str) -> Markup:
    return svg_root(width, height, [f'<g font-family="{FONT}">', *body, "</g>"], label)


def svg_text(x: float, y: float, s: str, *, size: int = 10, fill: str = MUTED, anchor: str = "start",
             weight: str | None = None, cls: str | None = None) -> str:
    """One escaped ``<text>`` element."""
    w = f' font-weight="{weight}"' if weight else ""
    c = f' class="{cls}"' if cls else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{fill}" text-anchor="{anchor}"{w}{c}>'
            f"{escape(s)}</text>")


def _frame(title: str, labels: Sequence[str], styles: Sequence[dict[str, Any]], width: int, height: int,
           pad_l: float, pad_r: float, pad_b: float) -> tuple[list[str], float, float, float]:
    """A chart's title and legend, and the plot area below them: ``(body, top, plot width, plot height)``."""
    head = 20 if title else 4
    legend, leg_h = _legend(labels, styles, pad_l, head, width - pad_l - pad_r)
    body = ([svg_text(4, 14, title, size=12, fill=INK, weight="600")] if title else []) + legend
    pad_t = head + leg_h + 6
    return body, pad_t, width - pad_l - pad_r, height - pad_t - pad_b


def _legend(labels: Sequence[str], styles: Sequence[dict[str, Any]], x0: float, y0: float,
            width: float) -> tuple[list[str], float]:
    """Legend entries laid out left to right, wrapping; returns the SVG and the height used."""
    body: list[str] = []
    x, y = x0, y0 + 10
    for label, st in zip(labels, styles):
        text = label[:48]
        w = 28 + CHAR_W * len(text) + 14
        if x + w > x0 + width and x > x0:
            x, y = x0, y + 16
        dash = ' stroke-dasharray="5,3"' if st.get("dash") else ""
        body.append(f'<line x1="{x:.1f}" y1="{y - 3:.1f}" x2="{x + 20:.1f}" y2="{y - 3:.1f}" stroke="{st["color"]}" '
                    f'stroke-width="2"{dash}/>')
        if st.get("marker"):
            body.append(_marker(st["marker"], x + 10, y - 3, st["color"], ""))
        body.append(svg_text(x + 26, y, text, size=11, fill=INK))
        x += w
    return body, (y - y0) + 8


def _marker(kind: str, cx: float, cy: float, color: str, tip: str) -> str:
    title = f"<title>{escape(tip)}</title>" if tip else ""
    if kind == "square":
        return f'<rect x="{cx - 3.5:.1f}" y="{cy - 3.5:.1f}" width="7" height="7" fill="{color}">{title}</rect>'
    if kind == "triangle":
        pts = f"{cx:.1f},{cy - 4.5:.1f} {cx + 4.5:.1f},{cy + 3.5:.1f} {cx - 4.5:.1f},{cy + 3.5:.1f}"
        return f'<polygon points="{pts}" fill="{color}">{title}</polygon>'
    if kind == "diamond":
        pts = f"{cx:.1f},{cy - 5:.1f} {cx + 5:.1f},{cy:.1f} {cx:.1f},{cy + 5:.1f} {cx - 5:.1f},{cy:.1f}"
        return f'<polygon points="{pts}" fill="{color}">{title}</polygon>'
    return f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{color}">{title}</circle>'


def _time_scale(top: float) -> tuple[float, str]:
    """Seconds shown in ms below 2 s, else in s."""
    return (1000.0, "ms") if top < 2 else (1.0, "s")


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round ticks (1, 2, 2.5, 5 × a power of ten apart) between ``lo`` and ``hi`` on a linear axis."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    return [start + k * step for k in range(int((hi - start) / step + 1e-9) + 1)]


def latency_cdf(series: Sequence[tuple[str, Any]], *, title: str = "", unit: str = "s",
                styles: Sequence[Mapping[str, Any]] | None = None, width: int = 640, height: int = 300) -> Markup:
    """Empirical CDFs of latencies: ``series`` = ``[(label, values), ...]`` (seconds, or any
    ``unit``). The x axis ends at the largest 99.9th percentile (said under the chart when a
    tail is cut); dotted lines mark 50% and 99%. ``styles``: per series ``{color, dash}``."""
    data = []
    for label, values in series[:MAX_CDF_SERIES]:
        v = np.asarray(values if values is not None else [], dtype=np.float64)
        v = np.sort(v[np.isfinite(v)])
        if len(v):
            data.append((str(label), v))
    if not data:
        return Markup('<p class="muted">no samples to draw</p>')
    sty = [dict(s) for s in (styles or [])][: len(data)]
    sty += [{"color": PALETTE[i % len(PALETTE)]} for i in range(len(sty), len(data))]
    top = max(float(np.percentile(v, 99.9)) for _, v in data)
    cut = any(v[-1] > top for _, v in data)
    lo = 0.0
    if top <= lo:
        top = lo + 1.0
    scale, shown_unit = _time_scale(top) if unit == "s" else (1.0, unit)
    pad_l, pad_b = 46, 40
    body, pad_t, pw, ph = _frame(title, [lb for lb, _ in data], sty, width, height, pad_l, 16, pad_b)

    def x(t: float) -> float:
        return pad_l + pw * (min(t, top) - lo) / (top - lo)

    def y(p: float) -> float:
        return pad_t + ph * (1 - p)

    for p in (0, 0.25, 0.5, 0.75, 1):
        body.append(f'<line x1="{pad_l}" y1="{y(p):.1f}" x2="{pad_l + pw}" y2="{y(p):.1f}" stroke="{GRID}"/>')
        body.append(svg_text(pad_l - 6, y(p) + 3, f"{p:.0%}", anchor="end"))
    for p, name in ((0.5, "p50"), (0.99, "p99")):
        body.append(f'<line x1="{pad_l}" y1="{y(p):.1f}" x2="{pad_l + pw}" y2="{y(p):.1f}" stroke="{MUTED}" '
                    f'stroke-dasharray="2,3"/>')
        body.append(svg_text(pad_l + pw - 2, y(p) - 3, name, anchor="end"))
    for t in nice_ticks(lo * scale, top * scale):
        xt = x(t / scale)
        body.append(f'<line x1="{xt:.1f}" y1="{pad_t + ph}" x2="{xt:.1f}" y2="{pad_t + ph + 4}" stroke="{MUTED}"/>')
        body.append(svg_text(xt, pad_t + ph + 15, number(t), anchor="middle"))
    body.append(f'<line x1="{pad_l}" y1="{pad_t + ph}" x2="{pad_l + pw}" y2="{pad_t + ph}" stroke="{MUTED}"/>')
    axis = f"latency ({shown_unit})" + (" · axis cut at the 99.9th percentile" if cut else "")
    body.append(svg_text(pad_l + pw / 2, height - 6, axis, anchor="middle"))
    for (label, v), st in zip(data, sty):
        n = len(v)
        at = np.unique(np.linspace(0, n - 1, min(n, CDF_POINTS)).round().astype(np.int64))
        xs, ps = v[at], (at + 1) / n
        pts = [f"{x(float(v[0])):.1f},{y(0):.1f}"] + [f"{x(float(a)):.1f},{y(float(p)):.1f}" for a, p in zip(xs, ps)]
        dash = ' stroke-dasharray="5,3"' if st.get("dash") else ""
        tip = (f"{label}: n={n}, p50 {number(float(np.percentile(v, 50)) * scale)} {shown_unit}, "
               f"p99 {number(float(np.percentile(v, 99)) * scale)} {shown_unit}")
        body.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{st["color"]}" stroke-width="2"{dash}>'
                    f"<title>{escape(tip)}</title></polyline>")
    return _chart(width, height, body, f"latency distribution: {title}" if title else "latency distribution")


def metric_vs_load(loads: Sequence[float], series: Sequence[tuple[str, Sequence[float | None]]], *,
                   title: str = "", xlabel: str = "concurrency", ylabel: str = "", width: int = 640,
                   height: int = 300) -> Markup:
    """Lines of one or more metrics against the load, a marker at every measured point.
    ``loads``: the x values (a log scale when they span a factor of 4 or more); ``series``:
    ``[(label, [value per load or None]), ...]`` in the unit ``ylabel`` names."""
    xs = [float(v) for v in loads]
    values = [(str(lb), [None if v is None or not math.isfinite(v) else float(v) for v in vals])
              for lb, vals in series]
    values = [(lb, vals) for lb, vals in values if any(v is not None for v in vals)]
    if not xs or not values:
        return Markup('<p class="muted">nothing to draw</p>')
    log = min(xs) > 0 and max(xs) / min(xs) >= 4
    fx = (lambda v: math.log(v)) if log else (lambda v: v)
    x_lo, x_hi = fx(min(xs)), fx(max(xs))
    y_hi = max(v for _, vals in values for v in vals if v is not None)
    y_hi = y_hi * 1.1 if y_hi > 0 else 1.0
    sty = [{"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[i % len(MARKERS)]} for i in range(len(values))]
    pad_l, pad_b = 56, 40
    body, pad_t, pw, ph = _frame(title, [lb for lb, _ in values], sty, width, height, pad_l, 20, pad_b)

    def x(v: float) -> float:
        if x_hi == x_lo:
            return pad_l + pw / 2
        return pad_l + 10 + (pw - 20) * (fx(v) - x_lo) / (x_hi - x_lo)

    def y(v: float) -> float:
        return pad_t + ph * (1 - v / y_hi)

    for t in nice_ticks(0, y_hi, 4):
        body.append(f'<line x1="{pad_l}" y1="{y(t):.1f}" x2="{pad_l + pw}" y2="{y(t):.1f}" stroke="{GRID}"/>')
        body.append(svg_text(pad_l - 6, y(t) + 3, number(t), anchor="end"))
    body.append(f'<line x1="{pad_l}" y1="{pad_t + ph}" x2="{pad_l + pw}" y2="{pad_t + ph}" stroke="{MUTED}"/>')
    for v in sorted(set(xs)):
        body.append(f'<line x1="{x(v):.1f}" y1="{pad_t + ph}" x2="{x(v):.1f}" y2="{pad_t + ph + 4}" stroke="{MUTED}"/>')
        body.append(svg_text(x(v), pad_t + ph + 15, number(v), anchor="middle"))
    body.append(svg_text(pad_l + pw / 2, height - 6, xlabel + (" (log scale)" if log else ""), anchor="middle"))
    if ylabel:
        body.append(f'<text x="12" y="{pad_t + ph / 2:.1f}" font-size="10" fill="{MUTED}" text-anchor="middle" '
                    f'transform="rotate(-90 12 {pad_t + ph / 2:.1f})">{escape(ylabel)}</text>')
    for (label, vals), st in zip(values, sty):
        pts = sorted((lx, v) for lx, v in zip(xs, vals) if v is not None)
        if len(pts) > 1:
            line = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in pts)
            body.append(f'<polyline points="{line}" fill="none" stroke="{st["color"]}" stroke-width="2"/>')
        for a, b in pts:
            body.append(_marker(st["marker"], x(a), y(b), st["color"],
                                f"{label} at {xlabel} {number(a)}: {number(b)}{' ' + ylabel if ylabel else ''}"))
    return _chart(width, height, body, title or "metric against load")


# -- a whole run ---------------------------------------------------------------------------------
def _sorted_points(summary: PerfSummary) -> list[tuple[int, PerfPoint]]:
    pts = list(enumerate(summary.points))

    def load(p: PerfPoint) -> float:
        v = p.concurrency if p.concurrency is not None else p.rate
        return float(v) if v is not None else 1.0

    return sorted(pts, key=lambda ip: load(ip[1]))


def _short(p: PerfPoint) -> str:
    if p.concurrency is not None:
        return f"c={p.concurrency:g}" if isinstance(p.concurrency, float) else f"c={p.concurrency}"
    if p.rate is not None:
        return f"{float(p.rate):g} req/s"
    return "sequential"


def _dist(p: PerfPoint, metric: str, stat: str, scale: float = 1.0) -> float | None:
    v = p.metric(metric).stat(stat)
    return float(v) * scale if v is not None else None


def perf_charts(summary: PerfSummary | Mapping[str, Any],
                samples: Mapping[int, Mapping[str, Any]] | None = None) -> dict[str, str]:
    """The charts of one perf run (docs/bench.md summary, samples per point index), as
    ``{file name: SVG text}``:

    - ``latency_cdf.svg`` (with samples): TTFT and E2E of a one-point run, else TTFT per point;
    - ``e2e_cdf.svg`` (with samples, two points or more): E2E per point;
    - ``ttft_vs_load.svg``, ``itl_vs_load.svg``, ``throughput_vs_load.svg`` (two points or
      more): TTFT p50 and p99, ITL p50 and p99, output and total tokens per second, against
      the concurrency or the request rate.
    """
    samples = samples or {}
    summary = PerfSummary.load(summary)
    model = str(summary.model or "")
    about = f" · {model}" if model else ""
    pts = _sorted_points(summary)
    out: dict[str, Markup] = {}
    have = [(i, p) for i, p in pts if (samples.get(i) or {}).get("ttft") is not None]
    if len(pts) == 1 and have:
        i, _ = have[0]
        s = samples[i]
        series = [(f"{m.upper()}", s[m]) for m in ("ttft", "e2e") if s.get(m) is not None]
        out["latency_cdf.svg"] = latency_cdf(series, title=f"TTFT and E2E{about}")
    elif have:
        picked = have if len(have) <= MAX_CDF_SERIES else [have[round(k * (len(have) - 1) / (MAX_CDF_SERIES - 1))]
                                                           for k in range(MAX_CDF_SERIES)]
        out["latency_cdf.svg"] = latency_cdf([(f"TTFT {_short(p)}", samples[i]["ttft"]) for i, p in picked],
                                             title=f"TTFT per point{about}")
        e2e = [(f"E2E {_short(p)}", samples[i]["e2e"]) for i, p in picked if samples[i].get("e2e") is not None]
        if e2e:
            out["e2e_cdf.svg"] = latency_cdf(e2e, title=f"E2E per point{about}")
    if len(pts) >= 2:
        rate = all(p.concurrency is None and p.rate is not None for _, p in pts)
        xlabel = "request rate (req/s)" if rate else "concurrency"
        loads = [float(p.rate if rate else (p.concurrency or 1)) for _, p in pts]
        top = max([_dist(p, m, "p99") or 0.0 for _, p in pts for m in ("ttft", "ttft_sched")] or [0.0])
        scale, u = _time_scale(top)
        ttft = [(f"TTFT {s}", [_dist(p, "ttft", s, scale) for _, p in pts]) for s in ("p50", "p99")]
        if any(_dist(p, "ttft_sched", "p99") is not None for _, p in pts):
            ttft.append(("TTFT p99 from the scheduled send", [_dist(p, "ttft_sched", "p99", scale) for _, p in pts]))
        out["ttft_vs_load.svg"] = metric_vs_load(loads, ttft, title=f"TTFT against load{about}", xlabel=xlabel,
                                                 ylabel=u)
        scale, u = _time_scale(max([_dist(p, "itl", "p99") or 0.0 for _, p in pts] or [0.0]))
        out["itl_vs_load.svg"] = metric_vs_load(
            loads, [(f"ITL {s}", [_dist(p, "itl", s, scale) for _, p in pts]) for s in ("p50", "p99")],
            title=f"ITL against load{about}", xlabel=xlabel, ylabel=u)
        out["throughput_vs_load.svg"] = metric_vs_load(
            loads, [("output tokens/s", [p.output_throughput for _, p in pts]),
                    ("input + output tokens/s", [p.total_token_throughput for _, p in pts])],
            title=f"Throughput against load{about}", xlabel=xlabel, ylabel="tokens/s")
    return {k: str(v) for k, v in out.items()}
