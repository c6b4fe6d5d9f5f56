"""Charts as inline SVG, drawn on the server: score histograms, trends, deltas with intervals.

Every text that goes into a chart (run names, output names, numbers) is escaped here; the
result is :class:`markupsafe.Markup` so templates insert it as is. No script, no external
resource: the same SVG works in the dashboard and in a report opened offline.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

INK = "#1f2933"
MUTED = "#7b8794"
GRID = "#e4e7eb"
BAR = "#3b6fd8"
GOOD = "#2f9e5b"
BAD = "#d64545"


def number(x: float) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    if abs(x) >= 1000 or float(x).is_integer():
        return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:g}"
    return f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def svg_root(width: int, height: int, body: list[str], label: str) -> Markup:
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
                  f'width="{width}" height="{height}" role="img" aria-label="{escape(label)}">'
                  + "".join(body) + "</svg>")


def histogram(hist: dict[str, Any] | None, *, label: str = "", width: int = 300, height: int = 110) -> Markup:
    """Bars of a score distribution (:func:`assay.store.queries.histograms`)."""
    if not hist or not hist.get("bars"):
        return Markup('<p class="muted">no scores</p>')
    bars = hist["bars"]
    top = max(b["count"] for b in bars) or 1
    pad_l, pad_b, pad_t = 4, 18, 6
    plot_w, plot_h = width - 2 * pad_l, height - pad_b - pad_t
    n = len(bars)
    slot = plot_w / n
    gap = 1 if hist["kind"] == "bins" else max(1.0, slot * 0.2)
    body = [f'<line x1="{pad_l}" y1="{pad_t + plot_h}" x2="{pad_l + plot_w}" y2="{pad_t + plot_h}" stroke="{GRID}"/>']
    for i, b in enumerate(bars):
        h = plot_h * b["count"] / top
        x = pad_l + i * slot + gap / 2
        what = number(b["lo"]) if hist["kind"] == "values" else f"{number(b['lo'])}–{number(b['hi'])}"
        body.append(f'<rect x="{x:.1f}" y="{pad_t + plot_h - h:.1f}" width="{max(1.0, slot - gap):.1f}" '
                    f'height="{max(h, 0.5 if b["count"] else 0):.1f}" fill="{BAR}">'
                    f'<title>{escape(what)}: {b["count"]:,} rows</title></rect>')
        if hist["kind"] == "values" and (n <= 12 or i in (0, n - 1)):
            body.append(f'<text x="{x + (slot - gap) / 2:.1f}" y="{height - 5}" font-size="10" fill="{MUTED}" '
                        f'text-anchor="middle">{escape(number(b["lo"]))}</text>')
    if hist["kind"] == "bins":
        body.append(f'<text x="{pad_l}" y="{height - 5}" font-size="10" fill="{MUTED}">{escape(number(bars[0]["lo"]))}</text>')
        body.append(f'<text x="{pad_l + plot_w}" y="{height - 5}" font-size="10" fill="{MUTED}" '
                    f'text-anchor="end">{escape(number(bars[-1]["hi"]))}</text>')
    return svg_root(width, height, body, f"distribution of {label}")


def band_range(lows: Sequence[float], highs: Sequence[float]) -> tuple[float, float]:
    """The y range of values drawn with their interval bands: the lowest low to the highest high,
    8% of air each side (a flat line gets ±0.5)."""
    lo, hi = min(lows), max(highs)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    span = hi - lo
    return lo - span * 0.08, hi + span * 0.08


def y_grid(lo: float, hi: float, y: Any, left: float, plot_w: float, unit: str = "") -> list[str]:
    """Five horizontal grid lines from ``lo`` to ``hi``, each labelled at the left (``y``: value -> pixel)."""
    out = []
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{left + plot_w}" y2="{y(v):.1f}" stroke="{GRID}"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 3:.1f}" font-size="10" fill="{MUTED}" '
                   f'text-anchor="end">{escape(number(v))}{escape(unit)}</text>')
    return out


def trend(points: Sequence[dict[str, Any]], *, label: str = "", width: int = 760, height: int = 260) -> Markup:
    """An output's mean per run over time, with its 95% interval as a band."""
    pts = [p for p in points if p.get("mean") is not None]
    if not pts:
        return Markup('<p class="muted">no completed run has this metric output</p>')
    pad_l, pad_r, pad_t, pad_b = 48, 16, 12, 42
    pw, ph = width - pad_l - pad_r, height - pad_t - pad_b
    lows = [p["ci95_low"] if p.get("ci95_low") is not None else p["mean"] for p in pts]
    highs = [p["ci95_high"] if p.get("ci95_high") is not None else p["mean"] for p in pts]
    lo, hi = band_range(lows, highs)
    n = len(pts)

    def x(i: int) -> float:
        return pad_l + (pw / 2 if n == 1 else pw * i / (n - 1))

    def y(v: float) -> float:
        return pad_t + ph * (1 - (v - lo) / (hi - lo))

    body = y_grid(lo, hi, y, pad_l, pw)
    band = [f"{x(i):.1f},{y(h):.1f}" for i, h in enumerate(highs)] + \
           [f"{x(i):.1f},{y(lw):.1f}" for i, lw in reversed(list(enumerate(lows)))]
    body.append(f'<polygon points="{" ".join(band)}" fill="{BAR}" fill-opacity="0.15" stroke="none"/>')
    line = " ".join(f"{x(i):.1f},{y(p['mean']):.1f}" for i, p in enumerate(pts))
    body.append(f'<polyline points="{line}" fill="none" stroke="{BAR}" stroke-width="2"/>')
    for i, p in enumerate(pts):
        when = dt.datetime.fromtimestamp(p["created_at"]).strftime("%Y-%m-%d %H:%M")
        tip = f"{p.get('name') or p['id']} ({when}): mean {number(p['mean'])}"
        body.append(f'<circle cx="{x(i):.1f}" cy="{y(p["mean"]):.1f}" r="4" fill="{BAR}">'
                    f'<title>{escape(tip)}</title></circle>')
    step = max(1, math.ceil(n / 6))
    for i in range(0, n, step):
        day = dt.datetime.fromtimestamp(pts[i]["created_at"]).strftime("%m-%d %H:%M")
        body.append(f'<text x="{x(i):.1f}" y="{pad_t + ph + 16}" font-size="10" fill="{MUTED}" '
                    f'text-anchor="middle">{escape(day)}</text>')
    return svg_root(width, height, body, f"trend of {label}")


def deltas(rows: Sequence[dict[str, Any]], *, width: int = 420) -> Markup:
    """A forest plot: per output, the difference against the baseline and its 95% interval.

    ``rows``: ``[{label, delta, ci95_low, ci95_high, better}]`` (``better`` True, False or None)."""
    rows = [r for r in rows if r.get("delta") is not None]
    if not rows:
        return Markup("")
    row_h, pad_l, pad_r, pad_t = 22, 150, 20, 8
    height = pad_t * 2 + row_h * len(rows) + 14
    ext = max(max(abs(r["ci95_low"]), abs(r["ci95_high"]), abs(r["delta"])) for r in rows) or 1.0
    pw = width - pad_l - pad_r

    def x(v: float) -> float:
        return pad_l + pw * (v + ext) / (2 * ext)

    body = [f'<line x1="{x(0):.1f}" y1="{pad_t}" x2="{x(0):.1f}" y2="{height - 14}" stroke="{MUTED}" '
            f'stroke-dasharray="3,3"/>',
            f'<text x="{pad_l}" y="{height - 2}" font-size="10" fill="{MUTED}">{escape(number(-ext))}</text>',
            f'<text x="{x(0):.1f}" y="{height - 2}" font-size="10" fill="{MUTED}" text-anchor="middle">0</text>',
            f'<text x="{pad_l + pw}" y="{height - 2}" font-size="10" fill="{MUTED}" text-anchor="end">+{escape(number(ext))}</text>']
    for i, r in enumerate(rows):
        cy = pad_t + row_h * i + row_h / 2
        color = GOOD if r.get("better") is True else BAD if r.get("better") is False else MUTED
        body.append(f'<text x="{pad_l - 8}" y="{cy + 4:.1f}" font-size="11" fill="{INK}" '
                    f'text-anchor="end">{escape(str(r["label"])[:24])}</text>')
        body.append(f'<line x1="{x(r["ci95_low"]):.1f}" y1="{cy:.1f}" x2="{x(r["ci95_high"]):.1f}" y2="{cy:.1f}" '
                    f'stroke="{color}" stroke-width="2"/>')
        tip = f"{r['label']}: {r['delta']:+.4g} [{r['ci95_low']:+.4g}, {r['ci95_high']:+.4g}]"
        body.append(f'<circle cx="{x(r["delta"]):.1f}" cy="{cy:.1f}" r="4" fill="{color}">'
                    f'<title>{escape(tip)}</title></circle>')
    return svg_root(width, height, body, "differences against the baseline with 95% intervals")


def _utc(ns: int, fmt: str) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime(fmt)


def time_series(points: Sequence[dict[str, Any]], *, label: str = "", marks: Sequence[dict[str, Any]] = (),
                unit: str = "", width: int = 760, height: int = 220) -> Markup:
    """Values over time (the monitor's windows): ``points`` are ``{t0, t1, y, lo, hi, href, tip}``
    (a window from ``t0`` to ``t1`` ns, its value and 95% interval, drawn as a band; ``href``: the
    page a point opens), ``marks`` ``{t, state, tip}``: an alert firing (red) or clearing (green)
    at a window's start, as a vertical line. Times are UTC; the x axis is to scale."""
    pts = [p for p in points if p.get("y") is not None and math.isfinite(p["y"])]
    if not pts:
        return Markup('<p class="muted">no value in this period</p>')
    pad_l, pad_r, pad_t, pad_b = 56, 16, 12, 36
    pw, ph = width - pad_l - pad_r, height - pad_t - pad_b
    lows = [p["lo"] if p.get("lo") is not None else p["y"] for p in pts]
    highs = [p["hi"] if p.get("hi") is not None else p["y"] for p in pts]
    lo, hi = band_range(lows, highs)
    t_lo = min(p["t0"] for p in pts)
    t_hi = max(p["t1"] for p in pts)
    t_span = max(1, t_hi - t_lo)

    def x(t: float) -> float:
        return pad_l + pw * (t - t_lo) / t_span

    def y(v: float) -> float:
        return pad_t + ph * (1 - (v - lo) / (hi - lo))

    body = y_grid(lo, hi, y, pad_l, pw, unit)
    mid = [(p["t0"] + p["t1"]) / 2 for p in pts]
    if any(p.get("lo") is not None for p in pts):
        band = [f"{x(t):.1f},{y(h):.1f}" for t, h in zip(mid, highs)] + \
               [f"{x(t):.1f},{y(lw):.1f}" for t, lw in reversed(list(zip(mid, lows)))]
        body.append(f'<polygon class="band" points="{" ".join(band)}" fill="{BAR}" fill-opacity="0.15" stroke="none"/>')
    line = " ".join(f"{x(t):.1f},{y(p['y']):.1f}" for t, p in zip(mid, pts))
    body.append(f'<polyline points="{line}" fill="none" stroke="{BAR}" stroke-width="2"/>')
    for m in marks:
        if not t_lo <= m["t"] <= t_hi:
            continue
        color = BAD if m.get("state") == "firing" else GOOD
        body.append(f'<line class="mark {escape(m.get("state") or "")}" x1="{x(m["t"]):.1f}" y1="{pad_t}" '
                    f'x2="{x(m["t"]):.1f}" y2="{pad_t + ph}" stroke="{color}" stroke-width="2" '
                    f'stroke-dasharray="4,3"><title>{escape(m.get("tip") or "")}</title></line>')
    for t, p in zip(mid, pts):
        dot = (f'<circle cx="{x(t):.1f}" cy="{y(p["y"]):.1f}" r="4" fill="{BAR}">'
               f'<title>{escape(p.get("tip") or number(p["y"]))}</title></circle>')
        body.append(f'<a href="{escape(p["href"])}">{dot}</a>' if p.get("href") else dot)
    same_day = _utc(t_lo, "%Y-%m-%d") == _utc(t_hi, "%Y-%m-%d")
    for k in range(5):
        t = t_lo + t_span * k / 4
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        body.append(f'<text x="{x(t):.1f}" y="{pad_t + ph + 16}" font-size="10" fill="{MUTED}" '
                    f'text-anchor="{anchor}">{escape(_utc(int(t), "%H:%M:%S" if same_day else "%m-%d %H:%M"))}</text>')
    body.append(f'<text x="{pad_l + pw}" y="{height - 4}" font-size="10" fill="{MUTED}" text-anchor="end">'
                f'{escape(_utc(t_hi, "%Y-%m-%d"))} UTC</text>')
    return svg_root(width, height, body, f"{label} over time")
