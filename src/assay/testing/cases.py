"""One evaluated case, and the assertion over it.

:func:`evaluate_case` scores one row with the metrics named (through :func:`assay.evaluate`, so
a case is planned, judged and scored exactly as a row of ``assay eval`` is) and gives back a
:class:`CaseResult`; :func:`assert_scores` fails with every metric that failed, its score, its
threshold and its reason. A row of an :class:`~assay.testing.evalset.EvalSet` is a
:class:`CaseResult` as well.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assay.errors import AssayError
from assay.scores import SCORE_KEYS, Score
from assay.testing.session import RECORDER, SETTINGS

if TYPE_CHECKING:   # imported where used: the plugin loads this module in every pytest session
    from assay.records import Record

__all__ = ["CaseResult", "assert_scores", "evaluate_case"]

SHOWN_INPUTS = ("query", "response", "ground_truth")   # quoted in a failure message, when present
QUOTE_CHARS = 300
SUFFIXES = ("", "_score", "_passed", "_result", "_reason", "_status", "_threshold", "_properties")


@dataclass
class CaseResult:
    """The scores of one evaluated row.

    ``scores``: ``{metric: {output: Score}}``; ``inputs``: the row's fields (``query``,
    ``response`` ..., and extra columns); ``higher_is_better``: per output, the metric's
    direction; ``index``: the row's position in its data set (0 for a single case).
    """

    id: str | None
    index: int
    inputs: dict[str, Any]
    scores: dict[str, dict[str, Score]]
    higher_is_better: dict[str, bool]

    @classmethod
    def from_row(cls, row: Mapping[str, Any], aggregates: Mapping[str, Mapping[str, Any]],
                 index: int = 0) -> CaseResult:
        """A flat result row (``inputs.*`` and ``outputs.<metric>.<output>*`` columns, as in
        ``rows.jsonl``) with the run's aggregates (which say each output's metric and direction)."""
        scores: dict[str, dict[str, Score]] = {}
        for output, agg in aggregates.items():
            m = agg.get("metric") or output
            base = f"outputs.{m}.{output}"
            if base + "_status" not in row:
                continue
            vals = [row.get(base + s) for s in SUFFIXES]
            s = Score(**dict(zip(SCORE_KEYS, vals)))
            s.properties = s.properties or {}
            scores.setdefault(m, {})[output] = s
        inputs = {k[len("inputs."):]: v for k, v in row.items() if k.startswith("inputs.")}
        return cls(id=inputs.get("id"), index=index, inputs=inputs, scores=scores,
                   higher_is_better={o: bool(a.get("higher_is_better", True)) for o, a in aggregates.items()})

    # -- reading ------------------------------------------------------------------------------
    def score(self, metric: str, output: str | None = None) -> Score:
        """The Score of ``metric`` (its output of the same name, or its only one; or ``output``)."""
        outs = self.scores.get(metric)
        if outs is None:
            raise KeyError(f"metric {metric!r} was not evaluated for this case "
                           f"(evaluated: {', '.join(self.scores) or 'none'})")
        if output is None:
            if metric in outs:
                return outs[metric]
            if len(outs) == 1:
                return next(iter(outs.values()))
            raise KeyError(f"metric {metric!r} has several outputs ({', '.join(outs)}); name one")
        return outs[output]

    def __repr__(self) -> str:
        verdicts = {(m if o == m else f"{m}.{o}"): s.result if s.status == "completed" else s.status
                    for m, outs in self.scores.items() for o, s in outs.items()}
        return f"CaseResult(id={self.id!r}, {verdicts})"

    def __getitem__(self, metric: str) -> Score:
        return self.score(metric)

    @property
    def label(self) -> str:
        return f"case {self.id!r}" if self.id is not None else f"row {self.index + 1}"

    # -- checking -----------------------------------------------------------------------------
    def problems(self, metrics: Iterable[str] | None = None, *, allow_errors: bool = False) -> tuple[list[str], int]:
        """What fails this case: one text per failed or errored output (the metric's reason on
        the next line); and how many outputs gave a pass/fail verdict."""
        names = list(self.scores) if metrics is None else list(metrics)
        found: list[str] = []
        verdicts = 0
        for m in names:
            if m not in self.scores:
                found.append(f"{m}: not evaluated for this case (evaluated: {', '.join(self.scores) or 'none'})")
                continue
            for o, s in self.scores[m].items():
                label = m if o == m else f"{m}.{o}"
                if s.status == "error":
                    if not allow_errors:
                        found.append(f"{label}: error" + _reason(s.reason))
                    continue
                if s.status != "completed" or s.passed is None:
                    continue
                verdicts += 1
                if s.passed is False:
                    found.append(f"{label}: {_figure(s.score, s.value)} {_side(self.higher_is_better.get(o, True))} "
                                 f"threshold {_figure(s.threshold, None)}" + _reason(s.reason))
        return found, verdicts

    @property
    def passed(self) -> bool:
        """True when no output failed or errored and at least one gave a verdict."""
        found, verdicts = self.problems()
        return not found and verdicts > 0

    def explain(self, found: Sequence[str] | None = None) -> str:
        """The failure message: the case, what failed (with reasons), and the row's main inputs."""
        found = self.problems()[0] if found is None else found
        lines = [f"{self.label} failed {len(found)} check(s):"]
        lines += [f"  {p}" for p in found]
        for f in SHOWN_INPUTS:
            v = self.inputs.get(f)
            if isinstance(v, str) and v:
                lines.append(f"  {f}: {_quote(v)}")
        return "\n".join(lines)

    def describe(self) -> str:
        """Every output's score, one line each (for a passing case's report)."""
        lines = []
        for m, outs in self.scores.items():
            for o, s in outs.items():
                label = m if o == m else f"{m}.{o}"
                lines.append(f"{label}: {s.status} {_figure(s.score, s.value)} {s.result}")
        return "\n".join(lines)


def _reason(reason: str | None) -> str:
    return f"\n      reason: {_clip(reason)}" if reason else ""


def _figure(x: Any, fallback: Any) -> str:
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return "nan" if isinstance(x, float) and math.isnan(x) else f"{x:.4g}"
    return repr(fallback) if fallback is not None else "none"


def _side(higher_is_better: bool) -> str:
    return "below" if higher_is_better else "above"


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "…"


def _quote(text: str) -> str:
    return repr(_clip(text))


def assert_scores(case: CaseResult, metrics: str | Sequence[str] | None = None, *,
                  allow_errors: bool = False) -> CaseResult:
    """Fail (``AssertionError``) when any output of ``case`` failed its threshold or errored.

    ``metrics``: check only these (a name, a comma-separated string or a list; each must have been
    evaluated). ``allow_errors``: a metric error (an unreadable judge reply, a timeout) is not a
    failure; by default it is, since the case was not checked. A case where no output gave a
    pass/fail verdict (every metric skipped, or none has a threshold) fails too: it checked
    nothing. The message lists each failure with its score, threshold and the metric's reason.
    Returns ``case``.
    """
    __tracebackhide__ = True
    if not isinstance(case, CaseResult):
        raise TypeError(f"assert_scores takes a CaseResult (from evaluate_case or an EvalSet row), "
                        f"not {type(case).__name__}")
    names = [m.strip() for m in metrics.split(",") if m.strip()] if isinstance(metrics, str) else metrics
    found, verdicts = case.problems(names, allow_errors=allow_errors)
    if found:
        raise AssertionError(case.explain(found))
    if verdicts == 0:
        raise AssertionError(f"{case.label}: no metric gave a pass/fail verdict, so nothing was checked "
                             f"(set thresholds, or check the inputs the metrics need)\n{case.describe()}")
    return case


def evaluate_case(case: Mapping[str, Any] | Record | None = None, /, *, metrics: str | Sequence[str] = "auto",
                  thresholds: Mapping[str, float] | None = None, judge: Any = None, target: Any = None,
                  mapping: Mapping[str, str] | None = None, options: Mapping[str, Any] | None = None,
                  **fields: Any) -> CaseResult:
    """Score one case: ``evaluate_case(query=..., response=..., ground_truth=..., metrics="f1_score")``.

    ``case``: a dict of fields (or a :class:`~assay.records.Record`); keyword ``fields`` add to
    it (``query``, ``response``, ``contexts``, ``ground_truth``, ``id`` ... or columns of your
    own with ``mapping``). ``metrics``, ``thresholds``, ``target``, ``mapping`` and ``options``
    are those of :func:`assay.evaluate`. ``judge``: a spec or model; by default the plugin's
    ``--assay-judge`` (or ``assay_judge`` ini value), else ``$ASSAY_JUDGE``, else the embedded
    default. Inside a pytest session with the plugin, the case is kept and saved with the
    session's cases when a store is set (``--assay-store``).
    """
    from assay.engine.evaluate import evaluate
    from assay.records import Record

    row: dict[str, Any] = {}
    if isinstance(case, Record):
        row.update(case.model_dump(exclude_none=True))
        row.update(row.pop("extra", None) or {})
    elif case is not None:
        if not isinstance(case, Mapping):
            raise AssayError(f"evaluate_case takes a dict of fields or a Record, not {type(case).__name__}")
        row.update(case)
    row.update(fields)
    if not row:
        raise AssayError("evaluate_case needs the case's fields, e.g. query=..., response=...")
    if "id" not in row and RECORDER.current_test:
        row["id"] = RECORDER.current_test
    result = evaluate([row], metrics=metrics, thresholds=thresholds, judge=judge if judge is not None else SETTINGS.judge,
                      target=target, mapping=mapping, options=options, store=False, workers=1)
    rows = result.rows
    if len(rows) != 1:
        raise AssayError(f"this case is a conversation evaluated as {len(rows)} turns; evaluate_case scores one "
                         "row: give the last turn (query, response, history), or use an EvalSet")
    res = CaseResult.from_row(rows[0], result.metrics)
    RECORDER.record(res, result)
    return res
