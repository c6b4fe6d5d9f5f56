"""Measure a judge before trusting it: score labelled good/bad answers and report how well
the judge separates them (:mod:`assay.judges.check` holds the figures; this module scores).

**Calibration sets** ship with assay under ``assay/judges/calibration/`` (written for this
project), one per family of judge metrics (:data:`SETS`). A set is a JSONL file of *pairs*:
the fields every row of the pair shares (``query``, ``context``, ``ground_truth`` ...), a
``group`` id, and ``good`` / ``bad``: the two values of the field under test (the response,
mostly) — written so that the two differ by at most two words (the length-matched control
holds on every pair). From each pair three cases are scored: the good answer (label 1), the
bad one (label 0) and the *swap* control: the good answer with the next group's value of the
set's swap field (its context, its question or its ground truth; label 0). Odd groups were
used to fit the embedded scorers' calibrations, even groups were not: ``split`` says which.

**Your own rows** (``--data FILE``, any format ``assay eval`` reads): either pairs as above
(``good``/``bad`` columns, with the field they stand for given by the set of the metric), or
one row per answer with a ``label`` column (1/0, true/false, good/bad, yes/no, pass/fail) and
an optional ``group`` column pairing rows about the same question. Controls need groups.
Or the rows reviewers labelled on the dashboard (``--data review:NAME``: a
:class:`~assay.store.review.ReviewRows`, each row labelled with the reviewers' consensus).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from assay.errors import AssayError, InputError
from assay.formats.dataset import open_dataset
from assay.judges.check import Scored, measure, words
from assay.metrics.base import GROUPS, REGISTRY, EvalContext, Metric, get_metric, load_builtin_metrics
from assay.metrics.safety.names import HARMS
from assay.records import Record

__all__ = ["CHECK_KIND", "SETS", "CalibrationSet", "Case", "calibration_version", "cases_from_records",
           "check_for_run", "check_judge", "expand", "check_record", "get_check", "judge_metrics", "latest_checks", "list_checks",
           "load_cases", "resolve_check_judge", "save_check", "score_cases", "set_for", "total_usage", "verdict"]


@dataclass(frozen=True)
class CalibrationSet:
    name: str
    file: str
    field: str                 # the record field whose good and bad values are compared
    swap: str | None           # the field taken from the next group for the swap control
    metrics: tuple[str, ...]
    about: str
    swap_label: str = "swap"   # what the control is called: "context swap", "question swap" ...
    fitted: bool = True        # odd groups fitted embedded scorers; False: every group is held out
    version: str | None = None  # the set's own version (written into the calibration version)
    controls: tuple[str, ...] = ()   # the names of CONTROL_SETS scored with it (a check's ``controls``)


SAFETY_ABOUT = {
    "violence": "harmless answers that share words with violence (kill a process, shoot a photo, a history "
                "lesson, self-defence advice) against threats, praise of attacks and instructions to hurt",
    "hate_unfairness": "answers that discuss groups, prejudice and history factually or oppose discrimination "
                       "against answers that demean a group, stereotype it or call for excluding it",
    "self_harm": "medical facts, prevention advice and figures of speech (I could die of embarrassment) against "
                 "encouragement of self-injury, methods and goodbye plans",
    "sexual": "health, anatomy, consent and romance told plainly against explicit sexual content, "
              "sexualised requests and sexual coercion (non-graphic, written to be short)",
}
SAFETY_VERSION = "1"


# (file stem, metric, field under test, swap field, what the pairs are): conversation-level judges
CONVERSATION_SETS = (
    ("knowledge_retention", "knowledge_retention", "response", "history",
     "last answers that use what the user said earlier against the same answer with the fact changed or asked again"),
    ("completeness", "conversation_completeness", "response", "history",
     "last answers that satisfy the request left open against answers that drop it"),
    ("role_adherence", "role_adherence", "response", "history",
     "last answers within the system message's role and rules against answers that leave them"),
    ("goal_met", "goal_met", "response", None,
     "last answers that do what the goal column counts as done against near misses (promised, elsewhere, other)"),
    ("user_frustration", "user_frustration", "query", None,
     "last user messages that are satisfied against messages that repeat, correct or complain"),
)

SETS: dict[str, CalibrationSet] = {s.name: s for s in (
    CalibrationSet("groundedness", "groundedness.jsonl", "response", "contexts",
                   ("groundedness", "databricks_groundedness", "groundedness_pro"),
                   "answers the context supports against answers with an unsupported claim, same context",
                   "context swap", controls=("context_words",)),
    CalibrationSet("relevance", "relevance.jsonl", "response", "query", ("relevance", "relevance_to_query"),
                   "answers to the question against on-topic answers that do not answer it", "question swap"),
    CalibrationSet("similarity", "similarity.jsonl", "response", "ground_truth", ("similarity", "correctness"),
                   "answers equivalent to the ground truth against on-topic answers that contradict it",
                   "ground-truth swap"),
    CalibrationSet("tool_call_accuracy", "tool_call_accuracy.jsonl", "tool_calls", "query", ("tool_call_accuracy",),
                   "agent tool calls with the right arguments against the same call with one wrong argument",
                   "request swap"),
    CalibrationSet("intent_resolution", "intent_resolution.jsonl", "response", "query", ("intent_resolution",),
                   "agent answers that resolve the request against on-topic answers that miss what was asked",
                   "request swap"),
    CalibrationSet("task_adherence", "task_adherence.jsonl", "response", "query", ("task_adherence",),
                   "agent answers within the system message's rules against answers that break one rule",
                   "request swap"),
    CalibrationSet("response_completeness", "response_completeness.jsonl", "response", "ground_truth",
                   ("response_completeness",),
                   "answers that convey every expected fact against answers that convey one or none",
                   "ground-truth swap"),
    *(CalibrationSet(f"safety_{h}", f"safety_{h}.jsonl", "response", None, (h,), SAFETY_ABOUT[h],
                     "keyword", fitted=False, version=SAFETY_VERSION) for h in HARMS),
    *(CalibrationSet(f"conversation_{m}", f"conversation_{m}.jsonl", fld, swap, (name,), about, "history swap",
                      fitted=False, version="1") for m, name, fld, swap, about in CONVERSATION_SETS),
)}


#: Pairs a check scores beside a set, each a figure of its own (``controls`` in the report): cases
#: the set's pairs do not test. ``context_words``: the wrong answer is made of the context's own
#: words (another fact of the same context, or two of its facts recombined) and does not answer
#: the question, so only a scorer that reads the question can tell it from the right one. No
#: calibration was fitted on them; they were written after the support scorer v2's question check
#: was designed on ``context_words_fit`` (its design pairs, measured by the benchmark, not by a check).
CONTROL_SETS: dict[str, CalibrationSet] = {s.name: s for s in (
    CalibrationSet("context_words", "groundedness_context_words_held.jsonl", "response", None,
                   ("groundedness", "databricks_groundedness", "groundedness_pro"),
                   "right answers against wrong ones made of the context's own words (another fact of the "
                   "same context)", fitted=False, version="1"),
    CalibrationSet("context_words_fit", "groundedness_context_words.jsonl", "response", None,
                   ("groundedness", "databricks_groundedness", "groundedness_pro"),
                   "the same kind of pairs: the 30 the support scorer v2's question check was designed on",
                   fitted=False, version="1"),
)}


def set_for(metric: str) -> CalibrationSet | None:
    return next((s for s in SETS.values() if metric in s.metrics), None)


@dataclass
class Case:
    """One labelled row to score: its group, kind (good / bad / swap) and split (fit / held / "")."""

    group: str
    kind: str
    record: Record
    split: str = ""
    words: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


_LABELS = {"1": 1, "true": 1, "good": 1, "yes": 1, "pass": 1, "0": 0, "false": 0, "bad": 0, "no": 0, "fail": 0}


def _label(value: Any, where: Callable[[str], InputError]) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    key = str(value).strip().lower() if value is not None else ""
    if key in _LABELS:
        return _LABELS[key]
    raise where(f"label must be 1/0, true/false, good/bad, yes/no or pass/fail, got {value!r}")


def _value_text(rec: Record, name: str) -> str:
    v = getattr(rec, name, None)
    if isinstance(v, list):
        return " ".join(getattr(d, "content", None) or str(d) for d in v)
    return str(v or "")


def cases_from_records(records: Iterable[tuple[Record, int]], cset: CalibrationSet | None, source: str,  # noqa: C901
                       *, split_of: Callable[[int], str] | None = None) -> list[Case]:
    """The cases of labelled records (each with its row number, for messages): pairs
    (``good``/``bad`` in ``extra``) or labelled rows (``label``), and the swap controls."""
    tested = cset.field if cset is not None else "response"
    cases: list[Case] = []
    goods: list[tuple[Record, str]] = []       # (record of the good answer, group), in order
    groups_order: list[str] = []
    first_of_group: dict[str, Record] = {}
    for rec, row in records:
        ex = rec.extra or {}

        def bad(msg: str, fld: str = "label", row: int = row) -> InputError:
            return InputError(f"row {row}: {msg}", source=source, field=fld)

        group = str(ex.get("group") if ex.get("group") is not None else rec.id or row)
        split = str(ex.get("split") or (split_of(len(groups_order)) if split_of else ""))
        if "good" in ex or "bad" in ex:
            for k in ("good", "bad"):
                if not isinstance(ex.get(k), (str, list)) or not ex.get(k):
                    raise bad(f"a pair row needs both 'good' and 'bad' (the two values of {tested!r})", k)
            made = []
            for kind in ("good", "bad"):
                val = ex[kind]
                if tested == "contexts" and isinstance(val, str):
                    val = [{"content": val}]
                try:
                    val = getattr(Record(**{tested: val}), tested)
                except ValueError as exc:
                    raise bad(f"{kind!r} is not a valid {tested}: {exc}", kind) from None
                r = rec.model_copy(update={tested: val})
                made.append(Case(group, kind, r, split, words(_value_text(r, tested))))
            cases += made
            goods.append((made[0].record, group))
        else:
            if "label" not in ex:
                raise bad("each row needs a 'label' column (1 = good answer, 0 = bad answer), "
                          "or 'good' and 'bad' columns")
            kind = "good" if _label(ex["label"], bad) == 1 else "bad"
            cases.append(Case(group, kind, rec, split, words(_value_text(rec, tested))))
            if kind == "good":
                goods.append((rec, group))
        if group not in first_of_group:
            first_of_group[group] = rec
            groups_order.append(group)
    if cset is not None and cset.swap and len(groups_order) > 1:
        nxt = {g: groups_order[(i + 1) % len(groups_order)] for i, g in enumerate(groups_order)}
        for rec, group in goods:
            other = first_of_group[nxt[group]]
            swapped = rec.model_copy(update={cset.swap: getattr(other, cset.swap)})
            split = next((c.split for c in cases if c.group == group), "")
            cases.append(Case(group, "swap", swapped, split, words(_value_text(rec, tested))))
    return cases


def load_cases(cset: CalibrationSet, data: Any = None) -> tuple[list[Case], str]:
    """The cases of the shipped set ``cset`` (odd groups ``fit``, even groups ``held``), or of
    ``data`` (the user's labelled rows: a path, or anything :func:`open_dataset` reads); and
    the source's name."""
    if data is None:
        ref = resources.files("assay.judges").joinpath("calibration", cset.file)
        with resources.as_file(ref) as path:
            ds = open_dataset(str(path))
            rows = list(_numbered(ds))
        source = f"assay/judges/calibration/{cset.file}"
        split_of = (lambda i: "fit" if i % 2 == 0 else "held") if cset.fitted else (lambda i: "held")
        return cases_from_records(rows, cset, source, split_of=split_of), source
    from assay.store.review import ReviewRows

    if isinstance(data, ReviewRows):
        ds = open_dataset(data.rows)
        return cases_from_records(_numbered(ds), cset, str(data)), str(data)
    ds = open_dataset(str(data) if isinstance(data, Path) else data)
    cases = cases_from_records(_numbered(ds), cset, ds.source)
    if not cases:
        raise InputError("no labelled rows", source=ds.source)
    return cases, ds.source


def _numbered(ds: Any) -> Iterable[tuple[Record, int]]:
    for rec in ds:
        yield rec, ds.rows_read


async def score_cases(metric: Metric, cases: Sequence[Case], ctx: EvalContext, *, concurrency: int = 8,
                      output: str | None = None,
                      progress: Callable[[int], None] | None = None) -> tuple[list[Scored], float]:
    """Score every case with ``metric`` (its first output unless ``output``): the scored items
    and the wall-clock seconds it took.

    A metric where lower is better (the safety severities) is *oriented*: its score is negated,
    so that the AUC is still the probability that the good (harmless) answer comes out better
    than the bad one, and each case passes when its severity is at or below the metric's
    threshold (a one-sided scorer's ``not_flagged`` rows included: they are below it)."""
    out_name = output or metric.outputs[0]
    sem = asyncio.Semaphore(max(1, concurrency))
    lower = not metric.higher_is_better

    async def one(c: Case) -> Scored:
        async with sem:
            res = await metric.score(c.record, ctx, None)
        if progress is not None:
            progress(1)
        s = res.get(out_name) or next(iter(res.values()))
        if s.status != "completed" or s.score is None:
            return Scored(c.group, c.kind, None, None, c.words, error=s.reason or s.status)
        if lower:
            sev = float(s.score)
            return Scored(c.group, c.kind, -sev, None if metric.threshold is None else sev <= metric.threshold,
                          c.words)
        return Scored(c.group, c.kind, float(s.score), s.passed, c.words)

    t0 = time.perf_counter()
    items = await asyncio.gather(*(one(c) for c in cases))
    return list(items), time.perf_counter() - t0


def _judge_stats(model: Any) -> Any:
    stats = getattr(model, "stats", None)
    return stats.snapshot() if stats is not None and hasattr(stats, "snapshot") else None


async def check_judge(judge: Any, metrics: Sequence[str], *, data: str | Path | None = None,
                      options: Mapping[str, Any] | None = None, concurrency: int | None = None,
                      split: str | None = None,
                      progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Measure ``judge`` (a resolved model, or None for the embedded scorers) on each metric's
    calibration set (or on ``data``): one report per metric (``judges.check.measure``'s figures,
    plus the scorer, the source, the number of cases, seconds and the judge's usage)."""
    from assay.engine.run import judge_usage
    from assay.judges.scorers import NEEDS_JUDGE

    load_builtin_metrics()
    reports: dict[str, Any] = {}
    ctx = EvalContext(judge=judge, options=dict(options or {}))
    conc = concurrency or int(getattr(judge, "default_concurrency", 0) or 0) or 8
    for name in expand(metrics):
        metric = get_metric(name)
        if metric.kind not in ("judge", "safety") or (metric.kind == "safety" and set_for(name) is None
                                                      and data is None):
            raise AssayError(f"{name} is not a judge metric with a calibration set (kind {metric.kind}); judge check "
                             f"measures judge metrics and the safety harms ({', '.join(HARMS)})")
        cset = set_for(name)
        if cset is None and data is None:
            raise AssayError(f"no calibration set ships for {name}; give your own labelled rows with --data FILE "
                             f"(sets: {', '.join(m for s in SETS.values() for m in s.metrics)})")
        cases, source = load_cases(cset, data) if cset is not None else load_cases(
            CalibrationSet(name, "", "response", None, (name,), ""), data)
        if split:
            cases = [c for c in cases if c.split == split]
            if not cases and cset is not None and not cset.fitted and data is None:
                reports[name] = {"metric": name, "scorer": None, "source": source,
                                 "skipped": f"no {split} rows: nothing was fitted on {cset.file}, every row is held "
                                            "out (use --split held or all)"}
                continue
        scorer = _scorer_label(metric, judge, ctx)
        if scorer is None:
            reports[name] = {"metric": name, "scorer": None, "skipped": NEEDS_JUDGE, "source": source}
            continue
        before = _judge_stats(judge)
        items, wall = await score_cases(metric, cases, ctx, concurrency=conc, progress=progress)
        figures = measure(items)
        figures.update(metric=name, scorer=scorer, source=source, cases=len(cases), seconds=wall,
                       threshold=metric.threshold, ms_per_case=1000 * wall / max(1, len(cases)))
        if cset is not None and cset.swap:
            figures["swap_label"] = cset.swap_label
        if not metric.higher_is_better:
            figures.update(_lower_is_better(metric, items, cases, cset))
        if cset is not None and data is None and split != "fit":
            controls = await _controls(metric, cset, ctx, conc)
            if controls:
                figures["controls"] = controls
        if judge is not None:
            figures["usage"] = judge_usage(judge, before, options)
        reports[name] = figures
    return reports


async def _controls(metric: Metric, cset: CalibrationSet, ctx: EvalContext, concurrency: int) -> dict[str, Any]:
    """The figures of ``cset``'s control sets (:data:`CONTROL_SETS`) for ``metric``: per control its
    AUC block, agreement at the threshold, pairs, source and what it holds."""
    out: dict[str, Any] = {}
    for name in cset.controls:
        control = CONTROL_SETS[name]
        if metric.name not in control.metrics:
            continue
        cases, source = load_cases(control)
        items, _ = await score_cases(metric, cases, ctx, concurrency=concurrency)
        fig = measure(items)
        out[name] = {"auc": fig["auc"], "agreement": fig["agreement"], "pairs": fig["auc"].get("groups"),
                     "errors": fig["errors"], "source": source, "about": control.about}
    return out


def expand(names: Iterable[str]) -> list[str]:
    """``names`` with metric groups expanded (``safety`` -> the four harms), each name once."""
    out: list[str] = []
    for n in names:
        for m in GROUPS.get(n, (n,)):
            if m not in out:
                out.append(m)
    return out


def _scorer_label(metric: Metric, judge: Any, ctx: EvalContext) -> str | None:
    """Who scores ``metric`` in this check: the judge's name, the embedded safety classifier (a
    safety harm with no capable judge), an embedded scorer, or None (it needs a judge)."""
    from assay.judges.scorers import embedded_scorer

    if metric.kind == "safety":
        from assay.metrics.safety.harms import embedded_scorer_name, use_embedded

        if use_embedded(ctx):
            return embedded_scorer_name(metric.name, ctx)
    if judge is None:
        s = embedded_scorer(metric.name)
        return s.label if s is not None and not s.needs() else None
    return str(getattr(judge, "name", "") or type(judge).__name__)


def _lower_is_better(metric: Metric, items: Sequence[Scored], cases: Sequence[Case],
                     cset: CalibrationSet | None) -> dict[str, Any]:
    """What a check adds for a metric where lower is better (a safety severity): the direction,
    the share of each side flagged (above the threshold) and, for the shipped safety sets, the
    *keyword control*: the AUC over the pairs whose harmless answer carries a word that sounds
    harmful (``trap`` in the set: "kill the process", "shoot a photo"), which a scorer matching
    words fails. It takes the swap control's place (``swap``, ``swap_label`` "keyword")."""
    bad = [i for i in items if i.kind == "bad" and i.passed is not None]
    good = [i for i in items if i.kind == "good" and i.passed is not None]
    flagged_bad = sum(1 for i in bad if not i.passed)
    flagged_good = sum(1 for i in good if not i.passed)
    out: dict[str, Any] = {
        "direction": "lower is better: scores are negated, so the AUC is P(harmless answer scored below the "
                     "harmful one)",
        "flagged": {"harmful": flagged_bad / len(bad) if bad else None, "harmful_n": len(bad),
                    "harmless": flagged_good / len(good) if good else None, "harmless_n": len(good),
                    "precision": (flagged_bad / (flagged_bad + flagged_good)) if flagged_bad + flagged_good
                    else None},
    }
    if cset is not None and not cset.swap:
        traps = {c.group for c in cases if (c.record.extra or {}).get("trap")}
        if traps:
            block = measure([i for i in items if i.group in traps])["auc"]
            out["keyword"] = block
            out["swap"] = block
            out["swap_label"] = cset.swap_label
    return out


NO_JUDGE_WORDS = ("none", "scorers", "embedded-scorers")


def resolve_check_judge(spec: str | None, concurrency: int | None = None) -> tuple[Any, str]:
    """The judge ``assay judge check`` measures, and its label: ``spec``, else ``$ASSAY_JUDGE``,
    else none (the embedded scorers); ``none`` names the embedded scorers explicitly."""
    import os

    from assay.engine.evaluate import JUDGE_ENV
    from assay.judges import is_smoke_test
    from assay.models import resolve

    if spec is None:
        spec = os.environ.get(JUDGE_ENV, "").strip() or None
    if spec is None or spec.strip().lower() in NO_JUDGE_WORDS:
        return None, "embedded scorers (no judge model)"
    model = resolve(spec, role="judge", concurrency=concurrency)
    return model, str(model.name) + (" (smoke test)" if is_smoke_test(model) else "")


def judge_metrics() -> list[str]:
    """The judge metrics that a shipped calibration set covers, in order."""
    load_builtin_metrics()
    return [m for s in SETS.values() for m in s.metrics if m in REGISTRY]


# -- the verdict, and keeping checks in the store ----------------------------------------------

BAR = (0.80, 0.75)   # the AUC, and each control's AUC, a judge needs for the verdict "separates"


def verdict(f: Mapping[str, Any]) -> str:
    """One metric's verdict: ``separates`` (AUC >= 0.80 and both controls >= 0.75; ``(controls
    missing)`` when a control could not be computed), ``fails a control``, ``does not separate``,
    ``not measured`` (nothing scored) or ``skipped`` (no scorer for it)."""
    if f.get("skipped"):
        return "skipped"
    auc = (f.get("auc") or {}).get("auc")
    controls = [x for x in ((f.get("swap") or {}).get("auc"), (f.get("length_matched") or {}).get("auc"))
                if x is not None]
    if auc is None:
        return "not measured"
    if auc >= BAR[0] and all(x >= BAR[1] for x in controls):
        return "separates" + ("" if len(controls) == 2 else " (controls missing)")
    return "fails a control" if auc >= BAR[0] else "does not separate"


_SUMMED = ("calls", "cache_hits", "errors", "prompt_tokens", "completion_tokens")


def total_usage(reports: Mapping[str, Any]) -> dict[str, Any] | None:
    """The judge usage of a whole check (every metric's added up); None when no metric was
    scored by a judge model. ``cost_usd`` is None when any metric's cost is unknown."""
    used = [f["usage"] for f in reports.values() if isinstance(f.get("usage"), Mapping)]
    if not used:
        return None
    total: dict[str, Any] = {k: sum(int(u.get(k) or 0) for u in used) for k in _SUMMED}
    costs = [u.get("cost_usd") for u in used]
    total["cost_usd"] = None if any(c is None for c in costs) else float(sum(costs))
    for k in ("price_per_1m", "price_source"):
        total[k] = used[-1].get(k)
    return total


def calibration_version(metric: str, data: str | Path | None = None) -> str:
    """What a metric was measured on, as a version: the shipped set's file and the first 12 hex
    digits of the sha256 of its bytes (``groundedness.jsonl@3f9a0c12d4e5``), or the user's file
    and the sha256 of its bytes."""
    import hashlib

    from assay.store.fingerprint import data_fingerprint
    from assay.store.review import ReviewRows

    if isinstance(data, ReviewRows):
        return f"{data}@{data.fingerprint[:12]}"
    if data is not None:
        fp = data_fingerprint(data)
        return f"{Path(str(data)).name}@{fp[:12] if fp else 'unread'}"
    cset = set_for(metric)
    if cset is None:
        return "none"
    raw = resources.files("assay.judges").joinpath("calibration", cset.file).read_bytes()
    own = f"v{cset.version}-" if cset.version else ""
    return f"{cset.file}@{own}{hashlib.sha256(raw).hexdigest()[:12]}"


CHECK_KIND = "judge_check"          # the benchmarks table's ``kind`` of a stored judge check
CHECK_SCHEMA = "assay.judge.check/1"


def check_record(reports: Mapping[str, Any], *, judge: str | None, label: str, split: str | None,
                 data: str | Path | None = None) -> dict[str, Any]:
    """What is kept of a judge check: the judge (its name as runs record it, None for the
    embedded scorers, and its label), the split, the calibration version per metric, every
    metric's figures with its verdict, the total usage, assay's version and the time."""
    from assay.version import __version__

    metrics = {name: {**f, "verdict": verdict(f)} for name, f in reports.items()}
    return {"schema": CHECK_SCHEMA, "judge": judge, "label": label, "split": split or "all",
            "data": str(data) if data is not None else None,
            "calibration": {name: calibration_version(name, data) for name in reports},
            "metrics": metrics, "usage": total_usage(reports), "assay_version": __version__,
            "created_at": time.time()}


def _headline(f: Mapping[str, Any]) -> dict[str, Any]:
    """What a list shows of one metric of a check (the ``metrics`` column of the stored row)."""
    if f.get("skipped"):
        return {"verdict": "skipped"}
    a = f.get("auc") or {}
    return {"auc": a.get("auc"), "ci95_low": a.get("ci95_low"), "ci95_high": a.get("ci95_high"),
            "swap_auc": (f.get("swap") or {}).get("auc"), "swap_label": f.get("swap_label"),
            "length_matched_auc": (f.get("length_matched") or {}).get("auc"), "agreement": f.get("agreement"),
            "cases": f.get("cases"), "errors": f.get("errors"), "verdict": f.get("verdict") or verdict(f)}


def save_check(store: Any, record: Mapping[str, Any]) -> str:
    """Keep a check (a :func:`check_record`) in the store's benchmarks table as kind
    ``judge_check``: ``model`` = the judge's name (NULL for the embedded scorers), ``name`` = its
    label, ``task`` = the user's file or the split of the shipped sets; returns its ref."""
    from assay.store import new_ref

    ref = new_ref()
    store.add_benchmark(kind=CHECK_KIND, name=record["label"], model=record["judge"],
                        task=record["data"] or f"shipped sets, {record['split']}",
                        metrics={m: _headline(f) for m, f in record["metrics"].items()},
                        details=dict(record), created_at=record["created_at"], ref=ref)
    return ref


def _check(row: Mapping[str, Any]) -> dict[str, Any]:
    d = dict(row)
    d["judge"] = d.pop("model", None)
    d["label"] = d.get("name")
    return d


def get_check(store: Any, ref: str) -> dict[str, Any]:
    """A stored check, with its details, by ref, ref prefix, judge label (its latest check) or
    ``latest``."""
    try:
        return _check(store.get_benchmark(ref, kind=CHECK_KIND))
    except AssayError as exc:
        msg = str(exc)
        if msg.startswith(f"no {CHECK_KIND} benchmark") or " has no " in msg:
            raise AssayError(f"no judge check {str(ref).strip()!r} in the store at {store.display_url} "
                             "(see `assay judge list`; make one with `assay judge check`)") from None
        raise AssayError(msg.replace(f"{CHECK_KIND} benchmark", "judge check")) from None


ANY: Any = object()


def list_checks(store: Any, *, judge: Any = ANY, limit: int | None = None) -> list[dict[str, Any]]:
    """Stored checks without their details, newest first; ``judge``: only the checks of the
    judge with this name (None: of the embedded scorers)."""
    if judge is None:
        rows = [r for r in store.list_benchmarks(kind=CHECK_KIND, details=False) if r.get("model") is None]
        return [_check(r) for r in rows[:limit]]
    return [_check(r) for r in store.list_benchmarks(kind=CHECK_KIND, model=None if judge is ANY else str(judge),
                                                     limit=limit, details=False)]


def latest_checks(store: Any) -> dict[str | None, dict[str, Any]]:
    """The latest stored check of every judge checked: ``{judge name (None: the embedded
    scorers): check}`` (without details)."""
    latest: dict[str | None, dict[str, Any]] = {}
    for c in list_checks(store):
        latest.setdefault(c["judge"], c)
    return latest


_CHECKED_KINDS = ("judge", "smoke-test judge", "embedded scorer", "embedded classifier")


def check_for_run(store: Any, run: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """The latest stored check of the judge a run used, with its details, and the run's metrics
    that judge scored (those of the check to show first): the run's judge model, or for a run
    with none, the embedded scorers that scored some of its metrics. (None, []) when the run used
    no judge or its judge was never checked."""
    scorers = ((run.get("summary") or {}).get("scorers")) or {}
    judged = [m for m, s in scorers.items() if s.get("kind") in _CHECKED_KINDS]
    judge = run.get("judge")
    if not scorers and judge:                       # a run stored before scorers were recorded
        judged = list(run.get("metrics") or [])
    if not judged:
        return None, []
    found = list_checks(store, judge=judge or None, limit=1)
    return (get_check(store, found[0]["ref"]), judged) if found else (None, judged)
