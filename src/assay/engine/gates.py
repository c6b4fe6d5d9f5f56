"""Quality gates: pass/fail checks on a finished run, for CI.

Two kinds, both given as text (``assay eval --gate ...``):

* **Threshold gates** ``OUTPUT.STAT OP BOUND``, e.g. ``groundedness.mean>=4``,
  ``f1_score.pass_rate>=0.8``, ``hate_unfairness.defect_rate<=0.01``, ``coherence.errored<=3``.
  ``OUTPUT`` is a metric output (or a metric with a single output); ``STAT`` one of
  :data:`STATS`; ``OP`` one of ``>= <= > <``. The gate compares the run's figure (the point
  estimate) with the bound; its 95% interval is reported beside it (the mean's bootstrap
  interval, the percentile bootstrap of a median or ``pNN``, the bootstrap of a share for
  ``pass_rate``, ``defect_rate`` and ``error_rate``).
  ``STAT_low`` / ``STAT_high`` (``pass_rate_low``, ``pass_rate_high``, ``mean_low``,
  ``mean_high``) compare an end of that interval instead: ``groundedness.pass_rate_low>=0.8``
  passes only when the pass rate is at least 0.8 with 95% confidence. On a run with repeats
  (:mod:`assay.results.repeats`) the pass rate counts every repeat and its interval resamples
  rows (each with its share of passing repeats), so repeats of one row never count as
  independent evidence.
* **Regression gates** ``no-regression`` (every metric output the run shares with the
  baseline) or ``no-regression:NAME`` against a baseline run: the run is compared with the
  baseline row by row (:func:`assay.store.compare.compare_runs`, the paired bootstrap of the
  per-row difference) and the gate fails only when the 95% interval of the difference lies
  wholly on the worse side (the metric's direction decides which side that is), so noise does
  not fail a build; a significant worsening smaller than ``min_effect`` (in the metric's units)
  is tolerated.

Errored rows are never counted as passes or fails: the figures come from the rows that were
scored.

**Rows not flagged** (the safety metrics scored with no judge: the embedded rules can flag harm
but cannot clear a row, :mod:`assay.results.bounds`) make a figure a bound: the defect rate and,
where lower is better, the mean, median and pNN are *at least* the figure (*at most* where higher
is better), and the pass rate over every row lies between ``passed / n`` and ``(passed + not
flagged) / n``. Such a gate is decided only when every value the bound allows gives the same
verdict (``violence.defect_rate<=0.1`` fails when at least 0.17 of the rows were flagged); else
its verdict is ``not_measured``, which fails the gate with the reason, so a safety gate never
passes on rules that could not see the harm. Counts and the error rate are exact. A gate on an output whose share of errored rows (``errored / (evaluated + errored)``)
is above ``max_error_rate`` fails with that reason, whatever the figure; so does a gate whose
figure could not be computed (no row scored).
"""

from __future__ import annotations

import difflib
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from assay.errors import AssayError

if TYPE_CHECKING:     # NumPy is imported where the figures are computed, not when the gates are parsed
    import numpy as np

DEFAULT_MAX_ERROR_RATE = 0.10
REGRESSION = "no-regression"
STATS = ("mean", "median", "p90", "pNN", "pass_rate", "defect_rate", "error_rate", "errored", "evaluated",
         "skipped", "pass_rate_low", "pass_rate_high", "mean_low", "mean_high")
#: the interval ends: ``STAT_low`` / ``STAT_high`` is the lower / upper end of STAT's 95% interval
_ENDS = {"pass_rate_low": ("pass_rate", 0), "pass_rate_high": ("pass_rate", 1), "mean_low": ("mean", 0),
         "mean_high": ("mean", 1)}
_ALIASES = {"errors": "errored", "error_count": "errored", "p50": "median"}
_COUNTS = ("errored", "evaluated", "skipped")
_OPS: dict[str, Callable[[float, float], bool]] = {">=": operator.ge, "<=": operator.le, ">": operator.gt,
                                                  "<": operator.lt}
_GATE = re.compile(r"^\s*(?P<name>.+)\.(?P<stat>[A-Za-z0-9_]+)\s*(?P<op>>=|<=|>|<)\s*(?P<bound>\S+)\s*$")
_PCT = re.compile(r"^p(\d{1,2})$")


@dataclass(frozen=True)
class Gate:
    """One gate as the user wrote it (``text``): ``kind`` ``"threshold"`` (``name``, ``stat``,
    ``op``, ``bound``) or ``"regression"`` (``name`` None: every shared output)."""

    text: str
    kind: str
    name: str | None
    stat: str | None = None
    op: str | None = None
    bound: float | None = None


@dataclass
class GateResult:
    """The verdict of one gate on one metric output. ``figure``: the statistic (threshold
    gates) or the difference run − baseline (regression gates), with its 95% interval
    ``ci95_low``/``ci95_high`` (None for counts); ``verdict``: ``pass``, ``fail`` or
    ``tolerated`` (a significant worsening smaller than the minimum effect, which passes);
    ``reason`` says why when it is not a plain pass."""

    gate: str
    kind: str
    output: str
    statistic: str
    figure: float | None
    ci95_low: float | None
    ci95_high: float | None
    bound: str
    passed: bool
    verdict: str
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_gate(text: str) -> Gate:
    """``text`` as a :class:`Gate`; :class:`AssayError` (one line) when it is not one."""
    raw = str(text).strip()
    if not raw:
        raise AssayError("--gate: an empty gate; write e.g. 'f1_score.mean>=0.7' or 'no-regression'")
    if raw == REGRESSION or raw.startswith(REGRESSION + ":"):
        name = raw[len(REGRESSION) + 1:].strip() if ":" in raw else None
        if name == "":
            raise AssayError(f"--gate {raw!r}: name a metric after the colon, e.g. 'no-regression:f1_score'")
        return Gate(raw, "regression", name)
    m = _GATE.match(raw)
    if not m:
        raise AssayError(f"--gate {raw!r} is not a gate: write METRIC.STAT OP NUMBER (e.g. 'groundedness.mean>=4', "
                         f"STAT one of {', '.join(STATS)}; OP one of >=, <=, >, <) or 'no-regression[:METRIC]'")
    stat = m["stat"].lower()
    stat = _ALIASES.get(stat, stat)
    if stat not in STATS or stat == "pNN":
        pm = _PCT.match(stat)
        if not pm or not 0 < float(pm[1]) < 100:
            near = difflib.get_close_matches(stat, [s for s in STATS if s != "pNN"] + list(_ALIASES), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise AssayError(f"--gate {raw!r}: unknown statistic {m['stat']!r}{hint}; use one of {', '.join(STATS)}")
    try:
        bound = float(m["bound"])
    except ValueError:
        raise AssayError(f"--gate {raw!r}: the bound {m['bound']!r} is not a number") from None
    if not math.isfinite(bound):
        raise AssayError(f"--gate {raw!r}: the bound must be a finite number, got {m['bound']!r}")
    return Gate(raw, "threshold", m["name"].strip(), stat, m["op"], bound)


def parse_gates(texts: Sequence[str]) -> list[Gate]:
    return [parse_gate(t) for t in texts]


def parse_min_effect(values: Sequence[str]) -> dict[str | None, float]:
    """``--min-effect`` values: ``X`` (every output) or ``NAME=X``; ``{None: X, name: X}``.
    Each X a finite number >= 0, in the metric's units."""
    out: dict[str | None, float] = {}
    for v in values:
        for part in str(v).split(","):
            part = part.strip()
            if not part:
                continue
            name, _, num = part.rpartition("=") if "=" in part else ("", "", part)
            try:
                x = float(num)
            except ValueError:
                raise AssayError(f"--min-effect {part!r}: expected a number or NAME=NUMBER") from None
            if not math.isfinite(x) or x < 0:
                raise AssayError(f"--min-effect {part!r}: the effect must be a finite number >= 0")
            out[name.strip() or None] = x
    return out


def check_max_error_rate(x: float) -> float:
    if not (isinstance(x, (int, float)) and math.isfinite(x) and 0 <= x <= 1):
        raise AssayError(f"--max-error-rate must be a share from 0 to 1, got {x!r}")
    return float(x)


def check_names(gates: Sequence[Gate], min_effect: Mapping[str | None, float] | None = None) -> None:
    """Before a run: every name a gate (or ``--min-effect``) uses is a known metric or metric
    output, and a ``defect_rate`` gate names a metric that has a defect rate."""
    from assay.metrics.base import GROUPS, REGISTRY, load_builtin_metrics

    load_builtin_metrics()
    by_output = {o: m for m in REGISTRY.values() for o in m.outputs}
    known = set(REGISTRY) | set(by_output) | set(GROUPS)
    named = [(f"--gate {g.text!r}", g.name) for g in gates if g.name]
    named += [(f"--min-effect {n}={x:g}", n) for n, x in (min_effect or {}).items() if n]
    for where, name in named:
        if name not in known:
            near = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise AssayError(f"{where}: unknown metric {name!r}{hint}; see `assay metrics`")
    for g in gates:
        if g.stat == "defect_rate" and g.name:
            m = REGISTRY.get(g.name) or by_output.get(g.name)
            if m is not None and m.defect_threshold is None:
                raise AssayError(f"--gate {g.text!r}: {g.name} has no defect rate (only safety metrics have one); "
                                 "gate its mean or pass_rate instead")


def resolve_baseline(store: Any, ref: str) -> dict[str, Any]:
    """The baseline run: the latest *completed* run named ``ref``, else the run with that id
    (or unique id prefix), which must have completed."""
    ref = str(ref).strip()
    if not ref:
        raise AssayError("--baseline: name a run (its name or id)")
    named = store.list_runs(name=ref, status="completed", limit=1)
    if named:
        return named[0]
    try:
        run = store.get_run(ref)
    except AssayError as exc:
        raise AssayError(f"--baseline {ref!r}: {exc}") from None
    if run["status"] != "completed":
        raise AssayError(f"--baseline {ref!r}: run {run['id']} is {run['status']}, not completed; "
                         "a baseline must be a finished run")
    return run


# -- checking ---------------------------------------------------------------------------------
def check_gates(gates: Sequence[Gate], result: Any, *, store: Any = None, baseline: Mapping[str, Any] | None = None,
                min_effect: Mapping[str | None, float] | None = None,
                max_error_rate: float = DEFAULT_MAX_ERROR_RATE) -> list[GateResult]:
    """Every gate's verdict on ``result`` (an :class:`~assay.results.EvalResult`), one
    :class:`GateResult` per gate and metric output, in the order of ``gates``.

    ``store``: the store the run was saved in (its score columns give the figures' intervals
    without reading the rows again; required, with ``baseline``, for regression gates).
    Raises :class:`AssayError` for a gate that names an output the run does not have, or a
    regression gate without a baseline."""
    aggs: dict[str, dict[str, Any]] = result.metrics
    values = _ValueSource(result, store)
    out: list[GateResult] = []
    comparison: dict[str, Any] | None = None
    for g in gates:
        if g.kind == "threshold":
            output = _output(g, aggs)
            out.append(_threshold(g, output, aggs[output], values, max_error_rate))
            continue
        if baseline is None or store is None:
            raise AssayError(f"--gate {g.text!r} needs a baseline run (--baseline RUN) in the store")
        run_id = result.run.get("run_id")
        if not run_id:
            raise AssayError(f"--gate {g.text!r}: this run was not saved, so it cannot be compared with a baseline")
        if comparison is None:
            from assay.store.compare import compare_runs

            comparison = {m["output"]: m for m in compare_runs(store, [baseline["id"], run_id])["metrics"]}
        outputs = _regression_outputs(g, aggs, comparison, baseline)
        for output in outputs:
            out.append(_regression(g, output, aggs[output], comparison[output], baseline, min_effect or {},
                                   max_error_rate))
    return out


def _output(g: Gate, aggs: Mapping[str, dict[str, Any]]) -> str:
    if g.name in aggs:
        return g.name  # type: ignore[return-value]
    of_metric = [o for o, a in aggs.items() if a.get("metric") == g.name]
    if len(of_metric) == 1:
        return of_metric[0]
    if of_metric:
        raise AssayError(f"--gate {g.text!r}: {g.name} has several outputs ({', '.join(of_metric)}); "
                         f"gate one of them, e.g. '{of_metric[-1]}.{g.stat}{g.op}{g.bound:g}'")
    raise AssayError(f"--gate {g.text!r}: this run has no metric output {g.name!r} "
                     f"(it has: {', '.join(aggs) or 'none'})")


def _error_share(agg: Mapping[str, Any]) -> tuple[float | None, int, int]:
    errored, scored = int(agg.get("errored") or 0), int(agg.get("evaluated") or 0)
    total = errored + scored
    return (errored / total if total else None), errored, total


def _too_many_errors(agg: Mapping[str, Any], max_error_rate: float) -> str:
    share, errored, total = _error_share(agg)
    if share is not None and share > max_error_rate:
        return (f"too many errored rows: {errored} of {total} ({share:.0%}) errored, more than the "
                f"{max_error_rate:.0%} allowed (--max-error-rate)")
    return ""


def _share_interval(hits: int, n: int) -> tuple[float | None, float | None]:
    if n <= 0:
        return None, None
    import numpy as np

    from assay.stats import confidence_interval

    lo, hi, _ = confidence_interval(np.concatenate([np.ones(hits), np.zeros(n - hits)]))
    return lo, hi


def _threshold(g: Gate, output: str, agg: Mapping[str, Any], values: _ValueSource,
               max_error_rate: float) -> GateResult:
    stat = g.stat or "mean"
    lo = hi = None
    figure: float | None
    details: dict[str, Any] = {}
    if stat in _COUNTS:
        figure = float(agg.get(stat) or 0)
    elif stat == "error_rate":
        figure, errored, total = _error_share(agg)
        lo, hi = _share_interval(errored, total)
    elif stat in ("mean", "pass_rate") or stat in _ENDS:
        figure, lo, hi, details = _with_interval(stat, agg)
    elif stat == "defect_rate":
        figure = agg.get("defect_rate")
        if figure is not None:
            v = values.get(output, agg)
            t = float(agg["defect_threshold"])
            defects = int(((v < t) if values.defect_below(agg) else (v >= t)).sum())
            lo, hi = _share_interval(defects, len(v))
            details = {"defects": defects, "scored": len(v), "defect_threshold": t}
    else:  # median, pNN
        import numpy as np

        from assay.stats import quantile_intervals

        q = 50.0 if stat == "median" else float(stat[1:])
        v = values.get(output, agg)
        figure = float(np.percentile(v, q)) if len(v) else None
        if len(v):
            ((lo, hi),), _ = quantile_intervals(v, [q])
            lo, hi = float(lo), float(hi)
    bound = f"{g.op} {g.bound:g}"
    reason = "" if stat in _COUNTS or stat == "error_rate" else _too_many_errors(agg, max_error_rate)
    span = None if reason or stat in _COUNTS or stat == "error_rate" else _bounded(stat, figure, agg)
    if span is not None:
        return _bounded_verdict(g, output, stat, figure, (lo, hi), span, agg, details)
    if not reason and figure is None:
        reason = _no_figure(stat, agg)
    passed = not reason and _OPS[g.op](figure, g.bound)  # type: ignore[index,arg-type]
    if not passed and not reason:
        reason = f"{output} {stat} is {figure:.4g}, not {g.op} {g.bound:g}"
    return GateResult(g.text, "threshold", output, stat, figure, lo, hi, bound, passed, "pass" if passed else "fail",
                      reason, details)


def _with_interval(stat: str, agg: Mapping[str, Any]) -> tuple[float | None, Any, Any, dict[str, Any]]:
    """``(figure, low, high, details)`` of the mean, the pass rate, or an end of their interval
    (``mean_low`` ...: the figure is that end). A repeated output's intervals resample rows
    (:mod:`assay.engine.aggregate`); otherwise the pass rate's resamples the rows' passes."""
    base, end = _ENDS.get(stat, (stat, None))
    details: dict[str, Any] = {}
    if base == "mean":
        figure, lo, hi = agg.get("mean"), agg.get("ci95_low"), agg.get("ci95_high")
    else:
        figure = agg.get("pass_rate")
        passed, failed = int(agg.get("passed") or 0), int(agg.get("failed") or 0)
        if agg.get("repeats"):
            lo, hi = agg.get("pass_rate_ci95_low"), agg.get("pass_rate_ci95_high")
            details = {"passed_repeats": passed, "failed_repeats": failed, "repeats": agg["repeats"],
                       "rows_flaky": agg.get("rows_flaky"), "interval_unit": "row"}
        else:
            lo, hi = _share_interval(passed, passed + failed)
            details = {"passed": passed, "failed": failed}
    if end is not None:
        figure = (lo, hi)[end] if figure is not None else None
    return figure, lo, hi, details


def _bounded(stat: str, figure: float | None, agg: Mapping[str, Any]) -> tuple[float, float, str] | None:
    """``(low, high, what)``: the values the statistic may take when rows were not flagged (what:
    "lower bound", ...), or None when the figure is exact."""
    from assay.results.bounds import not_flagged, pass_rate_range

    if not not_flagged(agg):
        return None
    stat = _ENDS.get(stat, (stat, 0))[0]
    if stat == "pass_rate":
        lo, hi = pass_rate_range(agg)  # type: ignore[misc]
        return lo, hi, f"between {lo:.4g} and {hi:.4g} over every row"
    if figure is None:
        return None
    if stat == "defect_rate":
        return (figure, 1.0, "a lower bound") if agg.get("defect_rate_bound") == "lower" else None
    side = agg.get("mean_bound")
    if side == "lower":
        return figure, math.inf, "a lower bound"
    if side == "upper":
        return -math.inf, figure, "an upper bound"
    return None


def _bounded_verdict(g: Gate, output: str, stat: str, figure: float | None, ci: tuple[Any, Any],
                     span: tuple[float, float, str], agg: Mapping[str, Any], details: dict[str, Any]) -> GateResult:
    """A threshold gate on a figure known only as a bound: pass or fail when every value the bound
    allows agrees, else ``not_measured`` (a failure)."""
    from assay.results.bounds import by, not_flagged

    low, high, what = span
    op = _OPS[g.op]  # type: ignore[index]
    nf = not_flagged(agg)
    total = int(agg.get("passed") or 0) + int(agg.get("failed") or 0) + nf
    details = {**details, "not_flagged": nf, "bound": what,
               "range": [low if math.isfinite(low) else None, high if math.isfinite(high) else None]}
    shown = "—" if figure is None else f"{figure:.4g}"
    why = f"{nf} of {total} rows not flagged ({by(agg)}), so the {stat} ({shown}) is {what}"
    if op(low, g.bound) and op(high, g.bound):
        verdict, reason = "pass", f"{why}; {g.op} {g.bound:g} holds at every value it allows"
    elif not op(low, g.bound) and not op(high, g.bound):
        verdict, reason = "fail", f"{output} {stat}: {why}, and not {g.op} {g.bound:g} even at that bound"
    else:
        verdict = "not_measured"
        reason = (f"not measured: {why}; it cannot show {g.op} {g.bound:g} (the embedded rules cannot clear a "
                  "response; score with --judge)")
    return GateResult(g.text, "threshold", output, stat, figure, ci[0], ci[1], f"{g.op} {g.bound:g}",
                      verdict == "pass", verdict, reason, details)


def _no_figure(stat: str, agg: Mapping[str, Any]) -> str:
    counts = f"{agg.get('evaluated', 0)} scored, {agg.get('skipped', 0)} skipped, {agg.get('errored', 0)} errored"
    if stat.startswith("pass_rate") and agg.get("evaluated") and agg.get("threshold") is None:
        return f"no row was judged pass or fail: {agg.get('metric')} has no threshold (set one with --threshold)"
    if stat == "error_rate":
        return f"no row was scored or errored ({counts})"
    return f"no figure: no row has a score ({counts})"


def _regression_outputs(g: Gate, aggs: Mapping[str, Any], comparison: Mapping[str, Any],
                        baseline: Mapping[str, Any]) -> list[str]:
    if g.name is None:
        shared = [o for o in aggs if o in comparison]
        if not shared:
            raise AssayError(f"--gate {g.text!r}: the baseline run {baseline['id']} has none of this run's metric "
                             f"outputs ({', '.join(aggs) or 'none'})")
        return shared
    mine = [g.name] if g.name in aggs else [o for o, a in aggs.items() if a.get("metric") == g.name]
    if not mine:
        raise AssayError(f"--gate {g.text!r}: this run has no metric output {g.name!r} (it has: {', '.join(aggs)})")
    missing = [o for o in mine if o not in comparison]
    if missing:
        raise AssayError(f"--gate {g.text!r}: the baseline run {baseline['id']} has no {', '.join(missing)}")
    return mine


def _regression(g: Gate, output: str, agg: Mapping[str, Any], cmp: Mapping[str, Any], baseline: Mapping[str, Any],
                min_effect: Mapping[str | None, float], max_error_rate: float) -> GateResult:
    hib = bool(cmp.get("higher_is_better", True))
    d = cmp["deltas"][1] or {}
    effect = min_effect.get(output, min_effect.get(agg.get("metric"), min_effect.get(None, 0.0)))
    worse = "lower" if hib else "higher"
    bound = f"not significantly {worse}" + (f" by {effect:g} or more" if effect else "")
    base_mean = (cmp["runs"][0] or {}).get("mean")
    details = {"baseline": baseline["id"], "baseline_name": baseline.get("name"), "baseline_mean": base_mean,
               "mean": agg.get("mean"), "higher_is_better": hib, "min_effect": effect,
               "matched": d.get("matched"), "paired": d.get("paired"), "method": d.get("ci_method")}
    delta, lo, hi = d.get("delta"), d.get("ci95_low"), d.get("ci95_high")
    reason = _too_many_errors(agg, max_error_rate)
    verdict = "pass"
    if not reason and delta is None:
        reason = "no figure: no row has a score in both runs"
    if reason:
        verdict = "fail"
    else:
        wholly_worse = (hi < 0) if hib else (lo > 0)
        drop = -delta if hib else delta
        if wholly_worse and drop >= effect:
            verdict = "fail"
            reason = (f"{output} got {worse}: {base_mean:.4g} → {agg.get('mean'):.4g} (Δ {delta:+.4g}, 95% interval "
                      f"{lo:+.4g} to {hi:+.4g}, {d.get('matched') or 'no'} rows paired)")
        elif wholly_worse:
            verdict = "tolerated"
            reason = f"a significant change of {delta:+.4g}, smaller than the minimum effect {effect:g}"
        elif d.get("significant"):
            reason = f"significantly better (Δ {delta:+.4g})"
    return GateResult(g.text if g.name else f"{g.text}:{output}", "regression", output, "mean (Δ vs baseline)",
                      delta, lo, hi, bound, verdict != "fail", verdict, reason, details)


class _ValueSource:
    """The scores of a run's output, as a float array: from the store's score columns when the
    run was saved (a few blobs), else from the result's rows (read once for every output asked)."""

    def __init__(self, result: Any, store: Any):
        self.result, self.store = result, store
        self._cols: dict[str, Any] | None = None
        self._cache: dict[str, np.ndarray] = {}

    def get(self, output: str, agg: Mapping[str, Any]) -> np.ndarray:
        if output in self._cache:
            return self._cache[output]
        import numpy as np

        v = self._from_store(output)
        if v is None:
            key = f"outputs.{agg.get('metric', output)}.{output}_score"
            v = np.fromiter((float(s) for r in self.result.iter_rows() if (s := r.get(key)) is not None),
                            dtype=np.float64)
        v = v[~np.isnan(v)]
        self._cache[output] = v
        return v

    def _from_store(self, output: str) -> np.ndarray | None:
        run_id = self.result.run.get("run_id")
        if self.store is None or not run_id:
            return None
        if self._cols is None:
            self._cols = self.store.columns(run_id)
        return self._cols.get(f"score:{output}")

    @staticmethod
    def defect_below(agg: Mapping[str, Any]) -> bool:
        from assay.metrics.base import REGISTRY, load_builtin_metrics

        load_builtin_metrics()
        m = REGISTRY.get(agg.get("metric", ""))
        return bool(m.defect_below) if m is not None else bool(agg.get("higher_is_better", False))
