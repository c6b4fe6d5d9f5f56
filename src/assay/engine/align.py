"""``assay judge align``: a judge aligned with the people who labelled a review queue, kept only
when it measurably agrees with them better.

The queue's labelled rows (:class:`~assay.store.review.ReviewRows`, each with the reviewers'
consensus) are split with a fixed seed into *examples* and *held-out* rows. The judge scores every
row; the example rows it got wrong become worked examples (the row's fields as tagged blocks, and
the people's verdict) appended to the judge's system message, as many as fit in a budget of
characters. The aligned judge then scores the held-out rows again, and the change of Cohen's kappa
between judge and people on them is measured with a paired bootstrap interval
(:func:`assay.results.agreement.paired_difference`). The aligned judge is kept only when that
interval's lower end is above zero; it is written as a YAML file that ``--judge`` accepts wherever
a judge spec is (:func:`load_aligned`, :class:`AlignedModel`): the base judge's spec and the
examples.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import AssayError

KIND = "assay.aligned_judge/1"
HEADER = ("Worked examples follow: rows that people labelled, with their verdict. They are data, "
          "like the blocks you will judge; use them to calibrate where the line between pass and fail lies.")
DEFAULT_BUDGET = 6000          # characters of examples added to the prompt


def example_text(row: Mapping[str, Any], fields: Sequence[str]) -> str:
    """One worked example: the row's fields as tagged blocks and the people's verdict."""
    from assay.judges.prompt import block
    from assay.records import Record

    rec = Record(**{k: v for k, v in row.items() if k not in ("label", "id")})
    parts = [block(f, getattr(rec, f)) for f in fields if getattr(rec, f, None) not in (None, "", [])]
    verdict = "pass" if row["label"] == 1 else "fail"
    return "<example>\n" + "\n".join(parts) + f"\nThe people's verdict: {verdict}\n</example>"


def examples_within(rows: Sequence[Mapping[str, Any]], fields: Sequence[str], budget: int) -> list[str]:
    """The examples of ``rows``, in order, as long as their text stays within ``budget`` characters."""
    out: list[str] = []
    used = len(HEADER)
    for r in rows:
        text = example_text(r, fields)
        if used + len(text) + 2 > budget:
            continue
        out.append(text)
        used += len(text) + 2
    return out


def with_examples(messages: Sequence[Mapping[str, Any]], examples: Sequence[str]) -> list[dict[str, Any]]:
    """``messages`` with the examples at the end of the system message (one is added first if none)."""
    extra = HEADER + "\n\n" + "\n\n".join(examples)
    msgs = [dict(m) for m in messages]
    for m in msgs:
        if m.get("role") == "system" and isinstance(m.get("content"), str):
            m["content"] = m["content"] + "\n\n" + extra
            return msgs
    return [{"role": "system", "content": extra}] + msgs


class AlignedModel:
    """A judge model that asks its base model with the worked examples in every prompt; every other
    attribute is the base model's. Its ``name`` says it is aligned, and by which file."""

    def __init__(self, base: Any, examples: Sequence[str], source: str):
        self.base = base
        self.examples = list(examples)
        self.source = source
        self.name = f"{base.name} aligned:{source}"

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.base, attr)

    async def generate(self, messages: Any, *args: Any, **kw: Any) -> Any:
        return await self.base.generate(with_examples(messages, self.examples), *args, **kw)

    async def distribution(self, messages: Any, *args: Any, **kw: Any) -> Any:
        return await self.base.distribution(with_examples(messages, self.examples), *args, **kw)


def is_aligned_file(spec: Any) -> bool:
    return isinstance(spec, (str, Path)) and str(spec).lower().endswith((".yaml", ".yml")) and Path(spec).is_file()


def load_aligned(path: str | Path) -> dict[str, Any]:
    """An aligned judge file: its base ``judge`` spec, ``metric`` and ``examples`` (checked)."""
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise AssayError(f"{p}: cannot read the aligned judge: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise AssayError(f"{p}: not an aligned judge file (kind: {KIND}, written by `assay judge align`)")
    if not isinstance(doc.get("judge"), str) or not doc["judge"].strip():
        raise AssayError(f"{p}: field 'judge' (the base judge's spec) is missing")
    ex = doc.get("examples")
    if not isinstance(ex, list) or not ex or not all(isinstance(e, str) for e in ex):
        raise AssayError(f"{p}: field 'examples' must be a non-empty list of texts")
    return doc


def resolve_aligned(path: str | Path, **kw: Any) -> AlignedModel:
    """The aligned judge of file ``path``: its base judge resolved (``kw``: ``models.resolve``'s)."""
    from assay.models import resolve

    doc = load_aligned(path)
    return AlignedModel(resolve(doc["judge"], role="judge", **kw), doc["examples"], Path(path).name)


@dataclass
class AlignResult:
    kept: bool
    examples: list[str]
    disagreements: int
    held_out: int
    kappa_before: float
    kappa_after: float
    change: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return None if x != x else round(x, 4)

        return {"kept": self.kept, "examples": len(self.examples), "disagreements_in_examples": self.disagreements,
                "held_out": self.held_out, "kappa_before": num(self.kappa_before), "kappa_after": num(self.kappa_after),
                "change": self.change}


def split_rows(rows: Sequence[dict[str, Any]], holdout: float, seed: int) -> tuple[list[dict], list[dict]]:
    """(example rows, held-out rows): a seeded shuffle, ``holdout`` of it held out (at least 2 each)."""
    order = list(rows)
    random.Random(seed).shuffle(order)
    n_held = min(max(2, round(len(order) * holdout)), len(order) - 2)
    if len(order) < 4 or n_held < 2:
        raise AssayError(f"aligning needs at least 4 labelled rows the reviewers agree on, got {len(order)}")
    return order[n_held:], order[:n_held]


async def _verdicts(metric: Any, rows: Sequence[dict[str, Any]], model: Any, concurrency: int,
                    options: Mapping[str, Any] | None) -> list[str | None]:
    """The judge's pass/fail of each row on the metric's first output (None: no verdict)."""
    import asyncio

    from assay.metrics.base import EvalContext
    from assay.records import Record

    ctx = EvalContext(judge=model, options=dict(options or {}))
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(r: Mapping[str, Any]) -> str | None:
        rec = Record(**{k: v for k, v in r.items() if k not in ("label", "id")})
        async with sem:
            res = await metric.score(rec, ctx, None)
        s = res.get(metric.outputs[0]) or next(iter(res.values()))
        return None if s.status != "completed" or s.passed is None else ("pass" if s.passed else "fail")

    return list(await asyncio.gather(*(one(r) for r in rows)))


async def align(base: Any, metric_name: str, rows: Sequence[dict[str, Any]], *, budget: int = DEFAULT_BUDGET,
                holdout: float = 0.5, seed: int = 0, concurrency: int = 8, source: str = "aligned",
                options: Mapping[str, Any] | None = None) -> AlignResult:
    """Align ``base`` (a resolved judge model) on ``rows`` (record fields and ``label`` 1/0)."""
    from assay.metrics.base import get_metric, load_builtin_metrics
    from assay.results.agreement import cohen_kappa, paired_difference

    load_builtin_metrics()
    metric = get_metric(metric_name)
    if metric.kind != "judge":
        raise AssayError(f"{metric_name} is not a judge metric (kind {metric.kind}): only a judge can be aligned")
    train, held = split_rows(rows, holdout, seed)
    people = lambda rs: ["pass" if r["label"] == 1 else "fail" for r in rs]   # noqa: E731
    said = await _verdicts(metric, train, base, concurrency, options)
    wrong = [r for r, v, h in zip(train, said, people(train), strict=True) if v is not None and v != h]
    fields = [f for r in metric.requires for f in (r if isinstance(r, tuple) else (r,))] + list(metric.optional)
    examples = examples_within(wrong, fields, budget)
    if not examples:
        why = "the judge agreed with every example row" if not wrong else f"no example fits in {budget} characters"
        raise AssayError(f"nothing to align on: {why}")
    aligned = AlignedModel(base, examples, source)
    before = await _verdicts(metric, held, base, concurrency, options)
    after = await _verdicts(metric, held, aligned, concurrency, options)
    human = people(held)
    u_before = [[h, v] for h, v in zip(human, before, strict=True)]
    u_after = [[h, v] for h, v in zip(human, after, strict=True)]
    change = paired_difference(u_before, u_after, "cohen_kappa", seed=seed)
    kept = change.low == change.low and change.low > 0
    return AlignResult(kept, examples, len(wrong), len(held), cohen_kappa(u_before), cohen_kappa(u_after),
                       change.as_dict())


def write_aligned(path: str | Path, *, judge: str, metric: str, queue: str, budget: int, result: AlignResult) -> None:
    """Write the aligned judge file (what ``--judge FILE`` reads, and how it was measured)."""
    import yaml

    doc = {"kind": KIND, "judge": judge, "metric": metric, "queue": queue, "budget_chars": budget,
           "held_out": result.as_dict(), "examples": result.examples}
    Path(path).write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
