"""Windows and alerts: each metric output's aggregate per time window, and the alert rules on them.

:func:`windows` groups a metric's scored traces by the window their trace started in (aligned:
a 5m window starts on a multiple of 5 minutes since the epoch) and aggregates each output as a run
does (:class:`assay.engine.aggregate.Accumulator`: mean, pass rate, defect rate, the 95% bootstrap
interval of :mod:`assay.stats`).

:func:`evaluate_alerts` applies the rules of the config (the gate grammar of
:mod:`assay.engine.gates`) to the closed windows in order, as a state per rule and output:

- a threshold rule (``groundedness.mean>=4``) **fires** when the figure's 95% interval lies wholly
  on the wrong side of the bound (for a mean, Student's t interval, :func:`mean_interval`: the
  percentile bootstrap of a window of a few traces is too narrow and fired on noise) and **clears** only when it lies wholly on the right side again
  (an interval across the bound changes nothing: no flapping on noise);
- ``no-regression`` fires when the window's mean is significantly worse than the previous window's
  (the bootstrap interval of the difference, :func:`assay.stats.bootstrap_diff`, wholly on the
  worse side), or than the named ``baseline`` run's; the interval's level is corrected for the
  number of windows a day (:func:`regression_level`: 95% for daily windows, 99.9% for 15m ones),
  so an unchanged app does not fire on noise once in 40 windows; while it fires, the window before the
  drop stays the reference, and it clears when a window is no longer significantly worse than it.

A window with fewer than ``min_traces`` scored traces decides nothing. Each firing and clearing is
recorded once (:meth:`assay.store.monitor.MonitorLog.add_alert`: when, the figure, its interval,
the trace ids behind it) and sent to the sinks: a log line and a webhook (a JSON POST with a
bounded timeout; a failure is logged, never raised).
"""

from __future__ import annotations

import json
import math
import operator
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from assay.engine.gates import Gate, check_gates, resolve_baseline
from assay.monitor.config import MetricConfig, MonitorConfig
from assay.scores import Score
from assay.store.monitor import CLEARED, FIRING, MonitorLog

OPS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le, ">": operator.gt,
                                                 "<": operator.lt}
MAX_TRACE_IDS = 1000
DAY = 86_400.0
MAX_LEVEL = 0.999


@dataclass
class Window:
    """One window of a metric: ``[start_ns, end_ns)``, the traces scored in it, each output's
    aggregate and values; ``closed`` once its end has passed."""

    start_ns: int
    end_ns: int
    trace_ids: list[str] = field(default_factory=list)
    aggregates: dict[str, dict[str, Any]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    closed: bool = True


class _WindowResult:
    """A window as the gates read a run's result."""

    def __init__(self, metric: str, win: Window):
        self.metric, self.win = metric, win
        self.metrics, self.run = win.aggregates, {}

    def iter_rows(self) -> Any:
        for output, v in self.win.values.items():
            for x in v:
                yield {f"outputs.{self.metric}.{output}_score": float(x)}


def windows(log: MonitorLog, mc: MetricConfig, since_ns: int, until_ns: int, now_ns: int | None = None) -> list[Window]:
    """The windows of ``mc`` that hold scored traces started in ``[since_ns, until_ns)`` (the
    first window starts on the boundary at or before ``since_ns``), earliest first."""
    import numpy as np

    from assay.engine.run import accumulators
    from assay.metrics.base import REGISTRY, load_builtin_metrics

    load_builtin_metrics()
    metric = REGISTRY[mc.name]
    w = max(1, int(mc.window_s * 1e9))
    first = since_ns // w * w
    now_ns = time.time_ns() if now_ns is None else now_ns
    groups: dict[int, list[dict[str, Any]]] = {}
    for row in log.scores(mc.name, first, until_ns):
        if row["start_ns"] is not None:
            groups.setdefault(row["start_ns"] // w * w, []).append(row)
    out = []
    for start, rows in sorted(groups.items()):
        accs = accumulators([metric], mc.options)
        for row in rows:
            for rec in row["scores"]:
                for output, d in rec.items():
                    if (mc.name, output) in accs:
                        accs[(mc.name, output)].add(Score(**d))
        win = Window(start, start + w, [r["trace_id"] for r in rows], closed=start + w <= now_ns)
        for (_, output), acc in accs.items():
            win.aggregates[output] = acc.result()
            win.values[output] = np.frombuffer(acc.values, dtype=np.float64).copy()
        out.append(win)
    return out


def _side(op: str, bound: float, figure: float | None, lo: float | None, hi: float | None) -> str | None:
    """``"wrong"`` / ``"right"`` when the whole interval is on that side of the bound; None across it."""
    if figure is None or (isinstance(figure, float) and math.isnan(figure)):
        return None
    lo = figure if lo is None else lo
    hi = figure if hi is None else hi
    ok = OPS[op]
    if ok(lo, bound) and ok(hi, bound):
        return "right"
    if not ok(lo, bound) and not ok(hi, bound):
        return "wrong"
    return None


@dataclass
class Reading:
    """A rule on one output in one window: the figure, its interval, which side it lies on."""

    output: str
    figure: float | None
    lo: float | None
    hi: float | None
    bound: str
    side: str | None
    n: int
    note: str = ""


def mean_interval(v: Any, level: float = 0.95) -> tuple[float, float] | None:
    """Student's t interval of the mean of ``v`` (``mean ± t(n-1) · s / sqrt(n)``), right at
    small n, where the percentile bootstrap is too narrow (6 values: it covers far less than 95%).
    None for fewer than two values."""
    import numpy as np
    from scipy.stats import t as student_t

    x = np.asarray(v, dtype=np.float64)
    n = len(x)
    if n < 2:
        return None
    m = float(x.mean())
    half = float(student_t.ppf(0.5 + level / 2, n - 1)) * float(x.std(ddof=1)) / math.sqrt(n)
    return m - half, m + half


def read_threshold(g: Gate, mc: MetricConfig, win: Window) -> list[Reading]:
    res = check_gates([g], _WindowResult(mc.name, win))
    out = []
    for r in res:
        vals = win.values.get(r.output, ())
        n = len(vals)
        lo, hi = r.ci95_low, r.ci95_high
        if g.stat == "mean" and n >= 2:          # the t interval, not the bootstrap's: right at small n
            lo, hi = mean_interval(vals) or (lo, hi)
        side = _side(g.op or ">=", float(g.bound or 0), r.figure, lo, hi) if n >= mc.min_traces else None
        note = "" if n >= mc.min_traces else f"fewer than {mc.min_traces} traces"
        out.append(Reading(r.output, r.figure, lo, hi, r.bound, side, n, note))
    return out


def regression_level(window_s: float) -> float:
    """The confidence level of ``no-regression``'s interval for windows of ``window_s`` seconds:
    the rule is decided on every window, so at 95% an unchanged app would fire about once in 40
    windows (twice a day with 15m windows). The level spreads a 5% chance of a false alert over a
    day's windows (``1 - 0.05 / windows a day``), at least 95% and at most 99.9%."""
    per_day = max(1.0, DAY / max(window_s, 1e-9))
    return min(MAX_LEVEL, max(0.95, 1 - 0.05 / per_day))


def read_regression(output: str, mc: MetricConfig, win: Window, ref: Any, hib: bool) -> Reading:
    from assay.stats import BOOTSTRAP_RESAMPLES, bootstrap_diff

    cur = win.values.get(output)
    n = 0 if cur is None else len(cur)
    worse = "lower" if hib else "higher"
    bound = f"not significantly {worse}"
    if ref is None or len(ref) < mc.min_traces or n < mc.min_traces:
        return Reading(output, None, None, None, bound, None, n, f"fewer than {mc.min_traces} traces to compare")
    level = regression_level(mc.window_s)
    tail = (1 - level) / 2                    # resamples enough for ~20 draws beyond each end
    d = bootstrap_diff(ref, cur, level=level, resamples=max(BOOTSTRAP_RESAMPLES, math.ceil(20 / tail)))
    wrong = d["diff_high"] < 0 if hib else d["diff_low"] > 0
    return Reading(output, d["diff"], d["diff_low"], d["diff_high"], bound, "wrong" if wrong else "right", n,
                   f"{d['a']:.4g} → {d['b']:.4g}")


@dataclass
class RuleState:
    metric: str
    rule: str
    output: str
    state: str = CLEARED
    since: int | None = None
    ref: Any = None          # no-regression: the reference values while it fires
    readings: list[tuple[Window, Reading]] = field(default_factory=list)


class AlertChecker:
    """The rules of a config over a store; ``say``: the log sink (a line)."""

    def __init__(self, store: Any, cfg: MonitorConfig, *, say: Callable[[str], None] | None = None,
                 record: bool = True):
        self.store, self.cfg = store, cfg
        self.log = MonitorLog(store)
        self.say = say or (lambda line: None)
        self.record = record
        self._baselines: dict[str, dict[str, Any]] = {}

    def check(self, since_ns: int, until_ns: int | None = None, now_ns: int | None = None) -> dict[str, Any]:
        """Every metric's windows and every rule's state over ``[since_ns, until_ns)``; new
        firings and clearings are recorded and sent to the sinks. Returns ``{"metrics": {name:
        {"window", "windows": [...], "rules": [...]}}, "firing": [...], "events": [...]}``."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        until_ns = now_ns if until_ns is None else until_ns
        report: dict[str, Any] = {"metrics": {}, "firing": [], "events": []}
        seen = {(a["metric"], a["rule"], a["output"], a["window_start_ns"], a["state"])
                for a in self.log.alerts(since_ns=since_ns - int(max(m.window_s for m in self.cfg.metrics.values()) * 1e9))}
        for mc in self.cfg.metrics.values():
            wins = windows(self.log, mc, since_ns, until_ns, now_ns)
            states = self._states(mc, [w for w in wins if w.closed])
            for st in states:
                for ev in self._transitions(mc, st):
                    key = (ev["metric"], ev["rule"], ev["output"], ev["window_start_ns"], ev["state"])
                    if key not in seen:
                        seen.add(key)
                        report["events"].append(ev)
                        if self.record:
                            self.log.add_alert(ev)
                        self.send(ev)
                if st.state == FIRING:
                    report["firing"].append({"metric": st.metric, "rule": st.rule, "output": st.output,
                                             "since_ns": st.since})
            report["metrics"][mc.name] = {"window": mc.window, "sample": mc.sample,
                                          "windows": [_win_dict(w) for w in wins],
                                          "rules": [_state_dict(s) for s in states]}
        return report

    def _states(self, mc: MetricConfig, wins: list[Window]) -> list[RuleState]:
        from assay.metrics.base import REGISTRY

        metric = REGISTRY[mc.name]
        out: list[RuleState] = []
        for g in mc.alerts:
            outputs = [g.name] if g.name in metric.outputs else list(metric.outputs) if g.kind == "regression" else [None]
            for output in outputs:
                out.append(self._run_rule(mc, g, output, wins, metric.higher_is_better))
        return out

    def _run_rule(self, mc: MetricConfig, g: Gate, output: str | None, wins: list[Window], hib: bool) -> RuleState:
        st = RuleState(mc.name, g.text, output or "")
        first = wins[0].start_ns if wins else None
        prev: Window | None = None
        for win in wins:
            if g.kind == "threshold":
                readings = read_threshold(g, mc, win)
                reading = readings[0]
                st.output = reading.output
                if first is not None and st.since is None and not st.readings:
                    self._resume(st, first, mc)
            else:
                if not st.readings and first is not None:
                    self._resume(st, first, mc)
                ref = self._reference(mc, st, prev, win, output or "")
                reading = read_regression(output or "", mc, win, ref, hib)
            st.readings.append((win, reading))
            if reading.side == "wrong" and st.state != FIRING:
                st.state, st.since = FIRING, win.start_ns
                if g.kind == "regression" and not mc.baseline and prev is not None:
                    st.ref = prev.values.get(output or "")
            elif reading.side == "right" and st.state == FIRING:
                st.state, st.since, st.ref = CLEARED, win.start_ns, None
            prev = win
        if not wins:
            last = self.log.last_alert(mc.name, g.text, output or (g.name or ""))
            if last is not None and last["state"] == FIRING:
                st.state, st.since = FIRING, last["window_start_ns"]
        return st

    def _resume(self, st: RuleState, first: int, mc: MetricConfig) -> None:
        """The state a rule was in before the first window looked at (its latest recorded event)."""
        last = self.log.last_alert(mc.name, st.rule, st.output, before_ns=first)
        if last is not None and last["state"] == FIRING:
            st.state, st.since = FIRING, last["window_start_ns"]
            w = int(mc.window_s * 1e9)
            before = windows(self.log, mc, last["window_start_ns"] - w, last["window_start_ns"])
            if before and before[-1].start_ns == last["window_start_ns"] - w:
                st.ref = before[-1].values.get(st.output)

    def _reference(self, mc: MetricConfig, st: RuleState, prev: Window | None, win: Window, output: str) -> Any:
        """What a window is compared with: the baseline run's scores, else, while the rule fires, the
        window before the drop, else the window just before (none when it holds no scores)."""
        if mc.baseline:
            return self._baseline(mc.baseline).get(f"score:{output}")
        if st.state == FIRING and st.ref is not None:
            return st.ref
        return prev.values.get(output) if prev is not None and prev.end_ns == win.start_ns else None

    def _baseline(self, ref: str) -> dict[str, Any]:
        if ref not in self._baselines:
            run = resolve_baseline(self.store, ref)
            self._baselines[ref] = self.store.columns(run["id"])
        return self._baselines[ref]

    def _transitions(self, mc: MetricConfig, st: RuleState) -> list[dict[str, Any]]:
        out, state = [], None
        for win, r in st.readings:
            new = FIRING if r.side == "wrong" else CLEARED if r.side == "right" else None
            if new is None:
                continue
            if state is None:
                state = self._before(mc, st, win)
            if new != state:
                state = new
                out.append({"metric": mc.name, "rule": st.rule, "output": r.output, "state": new,
                            "window_start_ns": win.start_ns, "window_end_ns": win.end_ns, "at": time.time(),
                            "figure": r.figure, "ci_low": r.lo, "ci_high": r.hi, "bound": r.bound, "n": r.n,
                            "reason": r.note, "trace_ids": win.trace_ids[:MAX_TRACE_IDS]})
        return out

    def _before(self, mc: MetricConfig, st: RuleState, win: Window) -> str:
        last = self.log.last_alert(mc.name, st.rule, st.output, before_ns=win.start_ns)
        return FIRING if last is not None and last["state"] == FIRING else CLEARED

    def send(self, ev: Mapping[str, Any]) -> None:
        """The event to the sinks: the log line, the webhook."""
        if self.cfg.log:
            self.say(event_line(ev))
        hook = self.cfg.webhook
        if hook is None:
            return
        body = json.dumps({"source": "assay monitor", **ev}, default=str).encode()
        req = urllib.request.Request(hook.url, data=body, method="POST",
                                     headers={"Content-Type": "application/json", "User-Agent": "assay-monitor"})
        try:
            with urllib.request.urlopen(req, timeout=hook.timeout) as r:
                r.read()
        except (urllib.error.URLError, OSError, ValueError) as e:
            self.say(f"assay monitor: the webhook {hook.url} failed: {getattr(e, 'reason', None) or e}")


def _fmt(x: Any) -> str:
    return "—" if x is None else f"{x:.4g}"


def when(ns: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def event_line(ev: Mapping[str, Any]) -> str:
    """One log line for a firing or clearing."""
    verb = "ALERT firing" if ev["state"] == FIRING else "alert cleared"
    return (f"assay monitor: {verb}: {ev['metric']}: {ev['rule']} ({ev['output']}) in the window from "
            f"{when(ev['window_start_ns'])}: {_fmt(ev['figure'])} (95% interval {_fmt(ev['ci_low'])} to "
            f"{_fmt(ev['ci_high'])}; {ev['bound']}) over {ev['n']} traces")


def _win_dict(w: Window) -> dict[str, Any]:
    return {"start_ns": w.start_ns, "end_ns": w.end_ns, "closed": w.closed, "traces": len(w.trace_ids),
            "outputs": {o: {k: a.get(k) for k in ("mean", "ci95_low", "ci95_high", "pass_rate", "defect_rate",
                                                  "evaluated", "errored")} for o, a in w.aggregates.items()}}


def _state_dict(s: RuleState) -> dict[str, Any]:
    last = s.readings[-1][1] if s.readings else None
    return {"rule": s.rule, "output": s.output, "state": s.state, "since_ns": s.since,
            "last": None if last is None else {"figure": last.figure, "ci_low": last.lo, "ci_high": last.hi,
                                               "bound": last.bound, "side": last.side, "n": last.n, "note": last.note}}
