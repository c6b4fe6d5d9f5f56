"""Judge metrics: one :class:`~assay.judges.judge.Judge` declaration becomes one registered metric.

:func:`register_judge` is the one way every LLM-judged metric enters the registry: the
built-in quality judges (:mod:`assay.metrics.quality`), the safety judges
(:mod:`assay.metrics.safety.harms`) and the user's own (:func:`assay.judge`,
:func:`assay.guidelines_judge`). The metric reads the judge's ``requires`` and ``optional``
record fields and hands them, by name, to a *scorer* ``(judge, ctx, values) -> Score | {output:
Score}``; the default scorer renders the judge's template and asks the run's judge model
(:func:`~assay.judges.ask.run_judge`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from assay.judges import Judge, run_judge
from assay.metrics.base import REGISTRY, EvalContext, Metric, metric

Scorer = Callable[[Judge, "EvalContext | None", Mapping[str, Any]], Awaitable[Any]]


def register_judge(judge: Judge, scorer: Scorer | None = None) -> Metric:
    """Register ``judge`` as a metric (replacing one of the same name) and return the metric."""
    score = scorer or run_judge
    names = judge.fields
    required = {r for r in judge.requires if isinstance(r, str)}

    async def fn(*args: Any, ctx: EvalContext | None = None) -> Any:
        return await score(judge, ctx, dict(zip(names, args)))

    params = [inspect.Parameter(f, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                **({} if f in required else {"default": None})) for f in names]
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, default=None))
    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    fn.__name__ = fn.__qualname__ = judge.name
    fn.__doc__ = judge.description
    metric(judge.name, kind=judge.kind, higher_is_better=judge.higher_is_better,  # type: ignore[arg-type]
           threshold=judge.default_threshold, scale=judge.metric_scale, auto=judge.auto, family=judge.family,
           requires=judge.requires, auto_unless=judge.auto_unless, auto_requires=judge.auto_requires,
           outputs=judge.outputs, defect_threshold=judge.defect_threshold, defect_levels=judge.defect_levels,
           defect_below=judge.defect_below)(fn)
    return REGISTRY[judge.name]


def judged(judge: Judge) -> Callable[[Scorer], Scorer]:
    """Decorator form of :func:`register_judge` for a judge with its own scorer."""

    def wrap(scorer: Scorer) -> Scorer:
        register_judge(judge, scorer)
        return scorer

    return wrap


__all__ = ["Scorer", "judged", "register_judge"]
