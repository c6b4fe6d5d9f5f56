"""Trade-off charts of the leaderboard as inline SVG: the quality index against the cost,
latency or throughput index, one labelled point per model, the Pareto frontier drawn as a line
through the points no other model beats on both axes.

In the style of :mod:`assay.ui.bench_charts` (its palette and font); every text drawn (model
names above all) is escaped here; no script, no external resource. The same SVG is shown on the
dashboard's leaderboard page and written by ``assay bench leaderboard --plot NAME -o FILE.svg``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from markupsafe import Markup, escape

from assay.bench.board import TRADEOFFS, Leaderboard
from assay.ui.bench_charts import FONT, PALETTE, nice_ticks, svg_text
from assay.ui.charts import GOOD, GRID, INK, MUTED, number

DOMINATED = PALETTE[0]
FRONT = GOOD
LABEL_CHARS = 28          # a model name is cut to this many characters on the chart (the tooltip has it all)
CHAR_W = 5.6              # rough width of one 10px character
LOG_SPAN = 10.0           # a log x axis when the largest x is at least this many times the smallest

AXES = {   # column -> (axis title, factor from the stored unit to the shown one)
    "quality_index": ("quality index (0–100, higher is better)", 100.0),
    "cost_index": ("cost index (USD per 1M tokens, 3:1 input:output blend; lower is better)", 1.0),
    "latency_index": ("latency index (mean TTFT, ms; lower is better)", 1000.0),
    "throughput_index": ("throughput index (mean GTPS, tokens/s per request; higher is better)", 1.0),
}
TITLES = {"quality-cost": "Quality against cost", "quality-latency": "Quality against latency",
          "quality-throughput": "Quality against throughput"}


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2, 5 × powers of ten between ``lo`` and ``hi`` (only the powers when there are many)."""
    out = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10.0 ** e
            if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9):
                out.append(v)
    if len(out) > 8:
        out = [v for v in out if math.isclose(10 ** round(math.log10(v)), v)]
    return out


def tradeoff_chart(data: Mapping[str, Any], *, title: str | None = None, width: int = 640,
                   height: int = 400) -> Markup:
    """One trade-off chart from :meth:`Leaderboard.tradeoff`'s data: the quality index (y)
    against the chart's other figure (x); the Pareto frontier as a line with its points marked;
    a log x axis when the figures span a factor of 10 or more; with no point, a message."""
    x_key, y_key = data.get("x"), data.get("y")
    pts = [p for p in data.get("points") or [] if _ok(p.get("x")) and _ok(p.get("y"))]
    name = str(data.get("name") or "")
    title = title if title is not None else TITLES.get(name, name)
    if not pts:
        what = AXES.get(str(x_key), (str(x_key), 1))[0].split(" (")[0]
        return Markup(f'<p class="muted chart-empty">{escape(title)}: no model has both a quality index and a '
                      f"{escape(what)} to draw</p>")
    x_title, x_scale = AXES.get(str(x_key), (str(x_key), 1.0))
    y_title, y_scale = AXES.get(str(y_key), (str(y_key), 1.0))
    xs = [float(p["x"]) * x_scale for p in pts]
    ys = [float(p["y"]) * y_scale for p in pts]
    log = min(xs) > 0 and max(xs) / min(xs) >= LOG_SPAN
    if log:
        x_lo, x_hi = min(xs) / 1.5, max(xs) * 1.5
        fx = math.log10
        x_ticks = _log_ticks(x_lo, x_hi)
    else:
        span = (max(xs) - min(xs)) or max(abs(max(xs)), 1.0)
        x_lo, x_hi = max(0.0, min(xs) - 0.1 * span) if min(xs) >= 0 else min(xs) - 0.1 * span, max(xs) + 0.1 * span
        fx = float
        x_ticks = nice_ticks(x_lo, x_hi)
    y_span = (max(ys) - min(ys)) or 10.0
    y_lo = max(0.0, min(ys) - 0.15 * y_span) if min(ys) >= 0 else min(ys) - 0.15 * y_span
    y_hi = max(ys) + 0.15 * y_span          # room above the best point for its label
    bounded = y_scale == 100.0 and min(ys) >= 0 and max(ys) <= 100   # a 0-100 score: no tick past 100
    if y_hi <= y_lo:
        y_hi = y_lo + 1.0
    pad_l, pad_r, pad_t, pad_b = 52, 24, 40, 46
    pw, ph = width - pad_l - pad_r, height - pad_t - pad_b

    def X(v: float) -> float:
        a, b = fx(x_lo), fx(x_hi)
        return pad_l + pw * (fx(v) - a) / (b - a) if b > a else pad_l + pw / 2

    def Y(v: float) -> float:
        return pad_t + ph * (1 - (v - y_lo) / (y_hi - y_lo))

    body = [svg_text(4, 14, title, size=12, fill=INK, weight="600")]
    better = ("↖" if data.get("x_better") == "low" else "↗") + " better"
    body.append(svg_text(width - pad_r, 14, better, size=10, anchor="end"))
    # legend
    body.append(f'<circle cx="{pad_l + 6}" cy="27" r="4" fill="{FRONT}"/>')
    body.append(svg_text(pad_l + 14, 30, "on the Pareto frontier (no model is better on both)", fill=INK))
    lx = pad_l + 14 + CHAR_W * 52
    body.append(f'<circle cx="{lx:.1f}" cy="27" r="4" fill="white" stroke="{DOMINATED}" stroke-width="1.5"/>')
    body.append(svg_text(lx + 8, 30, "dominated", fill=INK))
    # grid and axes
    for t in [t for t in nice_ticks(y_lo, y_hi, 5) if not bounded or t <= 100]:
        body.append(f'<line x1="{pad_l}" y1="{Y(t):.1f}" x2="{pad_l + pw}" y2="{Y(t):.1f}" stroke="{GRID}"/>')
        body.append(svg_text(pad_l - 6, Y(t) + 3, number(t), anchor="end"))
    for t in x_ticks:
        body.append(f'<line x1="{X(t):.1f}" y1="{pad_t}" x2="{X(t):.1f}" y2="{pad_t + ph}" stroke="{GRID}"/>')
        body.append(svg_text(X(t), pad_t + ph + 14, number(t), anchor="middle"))
    body.append(f'<line x1="{pad_l}" y1="{pad_t + ph}" x2="{pad_l + pw}" y2="{pad_t + ph}" stroke="{MUTED}"/>')
    body.append(f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{pad_t + ph}" stroke="{MUTED}"/>')
    body.append(svg_text(pad_l + pw / 2, height - 8, x_title + (" · log scale" if log else ""), anchor="middle",
                      cls="x-title"))
    body.append(f'<text x="12" y="{pad_t + ph / 2:.1f}" font-size="10" fill="{MUTED}" text-anchor="middle" '
                f'class="y-title" transform="rotate(-90 12 {pad_t + ph / 2:.1f})">{escape(y_title)}</text>')
    # the frontier, then the points over it
    front = sorted((x, y) for p, x, y in zip(pts, xs, ys) if p.get("pareto"))
    if len(front) > 1:
        line = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in front)
        body.append(f'<polyline class="pareto-front" points="{line}" fill="none" stroke="{FRONT}" stroke-width="2" '
                    f'stroke-dasharray="6,3"><title>Pareto frontier</title></polyline>')
    x_unit = x_title.split("(", 1)[1].split(";")[0].split(",")[-1].strip() if "(" in x_title else ""
    placed: list[tuple[float, float, float, float]] = []     # label boxes drawn so far: x0, y0, x1, y1
    # frontier points first: their labels get the first choice of place
    for p, x, y in sorted(zip(pts, xs, ys), key=lambda t: (not t[0].get("pareto"), -t[2], t[1])):
        model = str(p.get("model") or "")
        on = bool(p.get("pareto"))
        cx, cy = X(x), Y(y)
        runs = ", ".join(f"{k} {str(ref)[:8]}" for k, ref in (p.get("ref") or {}).items())
        tip = f"{model}: quality {number(y)}, {x_title.split(' (')[0]} {number(x)} {x_unit}".rstrip() + \
              (" · on the Pareto frontier" if on else "") + (f" · runs: {runs}" if runs else "")
        style = f'fill="{FRONT}"' if on else f'fill="white" stroke="{DOMINATED}" stroke-width="1.5"'
        body.append(f'<g class="point{" pareto" if on else ""}">'
                    f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{5 if on else 4}" {style}>'
                    f"<title>{escape(tip)}</title></circle>")
        label = model if len(model) <= LABEL_CHARS else model[: LABEL_CHARS - 1] + "…"
        lw = CHAR_W * len(label)
        right = cx + 8 + lw <= width - 4
        lx = cx + 8 if right else cx - 8
        x0 = lx if right else lx - lw
        ly = _free_y(placed, x0, x0 + lw, cy - 6, pad_t + 8, height - pad_b + 10)
        placed.append((x0, ly - 9, x0 + lw, ly + 2))
        body.append(svg_text(lx, ly, label, fill=INK, anchor="start" if right else "end", cls="label") + "</g>")
    aria = f"{title}: {len(pts)} model(s), {sum(1 for p in pts if p.get('pareto'))} on the Pareto frontier"
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" class="chart tradeoff" viewBox="0 0 {width} {height}" '
                  f'width="{width}" height="{height}" role="img" aria-label="{escape(aria)}">'
                  f'<g font-family="{FONT}">' + "".join(body) + "</g></svg>")


def leaderboard_charts(board: Leaderboard) -> dict[str, Markup]:
    """The three trade-off charts of ``board``: ``{chart name: SVG}`` (a message where a chart has
    no point)."""
    return {name: tradeoff_chart(board.tradeoff(name)) for name in TRADEOFFS}


def svg_file(chart: Markup) -> str:
    """A chart as the text of a standalone ``.svg`` file (an XML declaration before it); a
    chart with no point becomes an SVG that says so."""
    s = str(chart)
    if not s.startswith("<svg"):
        msg = s.split(">", 1)[1].rsplit("<", 1)[0] if ">" in s else s   # already escaped text
        s = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 640 60" width="640" height="60" role="img">'
             f'<text x="8" y="30" font-family="{FONT}" font-size="12" fill="{MUTED}">{msg}</text></svg>')
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + s + "\n"


def _free_y(placed: list[tuple[float, float, float, float]], x0: float, x1: float, y: float, top: float,
            bottom: float) -> float:
    """A baseline near ``y`` where a label spanning ``x0``–``x1`` overlaps no label already placed:
    ``y`` itself, else 12 px steps below and above it in turn (``y`` when none is free)."""
    for k in range(0, 12):
        for cand in ((y + 12 * k, y - 12 * k) if k else (y,)):
            if not top <= cand <= bottom:
                continue
            if all(x1 < a or x0 > c or cand + 2 < b or cand - 9 > d for a, b, c, d in placed):
                return cand
    return y


def _ok(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


__all__ = ["AXES", "TITLES", "leaderboard_charts", "svg_file", "tradeoff_chart"]
