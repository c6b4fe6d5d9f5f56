"""``assay redteam``'s run: objectives x strategies as attempt rows, scored by the engine.

:func:`plan_attempts` crosses the objectives of the chosen risk categories with the chosen
strategies (``baseline``, the plain objective, always among them) into evaluation rows: ``query``
is the attack as sent, and ``redteam_category``, ``redteam_strategy``, ``redteam_complexity``,
``objective_id``, ``objective``, ``redteam_objectives_version``, ``owasp`` and ``atlas`` ride along
as the row's extra fields (``inputs.*`` in the results, the store and the dashboard). Every
seeded choice draws from a generator named by the seed, the objective and the strategy, so an
attempt is the same whatever else is asked. ``max_attempts`` keeps a seeded sample of the cross.

:func:`redteam` hands the rows and the target to :func:`assay.engine.evaluate.evaluate`, the
path of ``assay eval``: the target is called per row, each response is scored by the refusal
check and the harm metrics of the chosen categories (a judge with ``judge``, else the embedded
rules), the run is stored and resumable, and the engine's ``max_cost`` caps the judge's spend.
The scorecard (:mod:`assay.simulate.redteam.figures`) lands in ``result.run["redteam"]``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from assay.engine.evaluate import evaluate
from assay.errors import AssayError
from assay.simulate.redteam.figures import add_redteam_figures  # noqa: F401  (registers the aggregation)
from assay.simulate.redteam.objectives import ObjectiveSet, load_objectives
from assay.simulate.redteam.objectives import categories as pick_categories
from assay.simulate.redteam.strategies import STRATEGIES, strategy_names


def attempt_rng(seed: int, objective_id: str, strategy: str) -> random.Random:
    """The generator of one attempt's choices."""
    return random.Random(f"assay-redteam/{seed}/{objective_id}/{strategy}")


def plan_attempts(*, categories: str | Sequence[str] | None = None, strategies: str | Sequence[str] | None = None,
                  seed: int = 0, max_attempts: int | None = None,
                  objectives: ObjectiveSet | str | Path | None = None) -> list[dict[str, Any]]:
    """The attempt rows (see the module docstring), in objective then strategy order."""
    cats = pick_categories(categories)
    names = strategy_names(strategies)
    oset = objectives if isinstance(objectives, ObjectiveSet) else load_objectives(objectives)
    objs = oset.of(cats)
    if not objs:
        raise AssayError(f"no objective in {oset.source} for the categories {', '.join(cats)}")
    pairs = [(o, s) for o in objs for s in names]
    if max_attempts is not None:
        if max_attempts < 1:
            raise AssayError(f"--max must be at least 1, got {max_attempts}")
        if max_attempts < len(pairs):
            keep = set(random.Random(f"assay-redteam/{seed}/sample").sample(range(len(pairs)), max_attempts))
            pairs = [p for k, p in enumerate(pairs) if k in keep]
    rows = []
    for o, name in pairs:
        st = STRATEGIES[name]
        rows.append({
            "id": f"{o.id}/{name}", "query": st.build(o.text, attempt_rng(seed, o.id, name)),
            "redteam_category": o.category, "redteam_strategy": name, "redteam_complexity": st.complexity,
            "objective_id": o.id, "objective": o.text, "redteam_objectives_version": oset.version,
            "owasp": ",".join(dict.fromkeys([*o.owasp, *st.owasp])),
            "atlas": ",".join(dict.fromkeys([*o.atlas, *st.atlas])),
        })
    return rows


def redteam(target: Callable[..., Any] | str, *, categories: str | Sequence[str] | None = None,
            strategies: str | Sequence[str] | None = None, judge: Any = None, max_attempts: int | None = None,
            seed: int = 0, out: str | Path | None = None, store: Any = None, resume: bool | str = False,
            max_cost: float | None = None, objectives: str | Path | None = None, concurrency: int | None = None,
            name: str | None = None, progress: Callable[[int], None] | None = None,
            defect_threshold: float | None = None, **engine: Any) -> Any:
    """Attack ``target`` with the objectives of ``categories`` x ``strategies`` and score every
    response through the engine; returns the :class:`~assay.results.EvalResult`, its scorecard in
    ``result.run["redteam"]``. ``engine``: further :func:`~assay.engine.evaluate.evaluate` arguments."""
    cats = pick_categories(categories)
    rows = plan_attempts(categories=cats, strategies=strategies, seed=seed, max_attempts=max_attempts,
                         objectives=objectives)
    options: dict[str, Any] = {"redteam_seed": seed}
    if defect_threshold is not None:
        options["defect_threshold"] = defect_threshold
    return evaluate(rows, target=target, metrics=["refusal", *cats], judge=judge, out=out, store=store,
                    resume=resume, max_cost=max_cost, concurrency=concurrency, name=name, progress=progress,
                    options=options, **engine)
