"""``assay redteam``'s run: objectives x strategies as attempt rows, scored by the engine.

:func:`plan_attempts` crosses the objectives of the chosen risk categories with the chosen
strategies (``baseline``, the plain objective, always among them) into evaluation rows: ``query``
is the attack as sent, and ``redteam_category``, ``redteam_strategy``, ``redteam_complexity``,
``objective_id``, ``objective``, ``redteam_objectives_version``, ``owasp`` and ``atlas`` ride along
as the row's extra fields (``inputs.*`` in the results, the store and the dashboard). A
model-driven attempt (``rephrase``, ``translate``: one per language, ``redteam_language`` on the
row; ``crescendo``) is planned with the objective as its ``query``; the attacker's message
replaces it when the attempt is run (:mod:`assay.simulate.redteam.attacker`). Every
seeded choice draws from a generator named by the seed, the objective and the strategy, so an
attempt is the same whatever else is asked. ``max_attempts`` keeps a seeded sample of the cross.

:func:`redteam` hands the rows and the target to :func:`assay.engine.evaluate.evaluate`, the
path of ``assay eval``: the target is called per row, each response is scored by the refusal
check and the harm metrics of the chosen categories (a judge with ``judge``, else the embedded
rules), the run is stored and resumable, and the engine's ``max_cost`` caps the judge's and the attacker's spend, every session's of a resumed run
(a run stopped by it is ``interrupted``, resumable).
The scorecard (:mod:`assay.simulate.redteam.figures`) lands in ``result.run["redteam"]``.
With model-driven attempts the target is wrapped in
:class:`~assay.simulate.redteam.attacker.AttackTarget`, which asks the attacker model (``attacker``)
for each attempt's message(s) inside the engine's call, so a resumed run does not redo a finished
attempt.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from assay.engine.evaluate import evaluate
from assay.errors import AssayError
from assay.simulate.redteam.attacker import DEFAULT_MAX_TURNS, DEFAULT_REFUSALS, AttackTarget
from assay.simulate.redteam.figures import (
    DEFAULT_DEFECT_THRESHOLD,
    add_redteam_figures,  # noqa: F401  (registers the aggregation)
)
from assay.simulate.redteam.objectives import Objective, ObjectiveSet, load_objectives
from assay.simulate.redteam.objectives import categories as pick_categories
from assay.simulate.redteam.owasp import preset_ids, tagged
from assay.simulate.redteam.strategies import MODEL_DRIVEN, STRATEGIES, strategy_names

DEFAULT_LANGUAGES = ("French", "Swahili", "Bengali")


def pick_languages(spec: str | Sequence[str] | None) -> list[str]:
    """The languages of ``translate`` (comma-separated or a list; None: :data:`DEFAULT_LANGUAGES`)."""
    if spec is None:
        return list(DEFAULT_LANGUAGES)
    raw = [x.strip() for x in (spec.split(",") if isinstance(spec, str) else spec) if x and x.strip()]
    if not raw:
        raise AssayError("--languages: name at least one language (e.g. French,Swahili)")
    bad = [x for x in raw if len(x) > 40 or "/" in x]
    if bad:
        raise AssayError(f"--languages: {bad[0]!r} is not a language name")
    return list(dict.fromkeys(raw))


def attempt_rng(seed: int, objective_id: str, strategy: str) -> random.Random:
    """The generator of one attempt's choices."""
    return random.Random(f"assay-redteam/{seed}/{objective_id}/{strategy}")


def _selection(cats: list[str], strategies: str | Sequence[str] | None, attacker: bool, oset: ObjectiveSet,
               preset: str | None) -> tuple[list[Objective], list[str]]:
    """The objectives and strategy names asked for, by name or by a preset's OWASP tags."""
    ids = preset_ids(preset)
    if ids is None:
        return oset.of(cats), strategy_names(strategies, attacker=attacker)
    if strategies is not None:
        raise AssayError(f"--preset {preset} chooses the strategies by their OWASP tags: leave out --strategies")
    names = ["baseline", *(n for n, s in STRATEGIES.items()
                           if n != "baseline" and tagged(s.owasp, ids) and (attacker or not s.model))]
    return [o for o in oset.of(cats) if tagged(o.owasp, ids)], names


def plan_attempts(*, categories: str | Sequence[str] | None = None, strategies: str | Sequence[str] | None = None,
                  seed: int = 0, max_attempts: int | None = None,
                  objectives: ObjectiveSet | str | Path | None = None, attacker: bool = False,
                  languages: str | Sequence[str] | None = None, preset: str | None = None) -> list[dict[str, Any]]:
    """The attempt rows (see the module docstring), in objective then strategy order.
    ``attacker``: an attacker model is given (the model-driven strategies are allowed);
    ``preset``: ``owasp-llm-top10`` picks the objectives and strategies by their OWASP tags
    (:mod:`assay.simulate.redteam.owasp`)."""
    cats = pick_categories(categories)
    langs = pick_languages(languages)
    oset = objectives if isinstance(objectives, ObjectiveSet) else load_objectives(objectives)
    objs, names = _selection(cats, strategies, attacker, oset, preset)
    if not objs:
        raise AssayError(f"no objective in {oset.source} for the categories {', '.join(cats)}"
                         + (f" tagged for --preset {preset}" if preset else ""))
    pairs = [(o, (s, lang)) for o in objs for s in names for lang in (langs if s == "translate" else [None])]
    if max_attempts is not None:
        if max_attempts < 1:
            raise AssayError(f"--max must be at least 1, got {max_attempts}")
        if max_attempts < len(pairs):
            keep = set(random.Random(f"assay-redteam/{seed}/sample").sample(range(len(pairs)), max_attempts))
            pairs = [p for k, p in enumerate(pairs) if k in keep]
    rows = []
    for o, (name, lang) in pairs:
        st = STRATEGIES[name]
        extra = {"redteam_language": lang} if lang else {}
        rows.append({
            "id": f"{o.id}/{name}" + (f"/{lang}" if lang else ""), "query": st.build(o.text, attempt_rng(seed, o.id, name)),
            "redteam_category": o.category, "redteam_strategy": name, "redteam_complexity": st.complexity,
            "objective_id": o.id, "objective": o.text, "redteam_objectives_version": oset.version,
            "owasp": ",".join(dict.fromkeys([*o.owasp, *st.owasp])),
            "atlas": ",".join(dict.fromkeys([*o.atlas, *st.atlas])), **extra,
        })
    return rows


def redteam(target: Callable[..., Any] | str, *, categories: str | Sequence[str] | None = None,
            strategies: str | Sequence[str] | None = None, judge: Any = None, max_attempts: int | None = None,
            seed: int = 0, out: str | Path | None = None, store: Any = None, resume: bool | str = False,
            max_cost: float | None = None, objectives: str | Path | None = None, concurrency: int | None = None,
            name: str | None = None, progress: Callable[[int], None] | None = None,
            defect_threshold: float | None = None, attacker: Any = None,
            languages: str | Sequence[str] | None = None, max_turns: int = DEFAULT_MAX_TURNS,
            refusals: int = DEFAULT_REFUSALS, preset: str | None = None, **engine: Any) -> Any:
    """Attack ``target`` with the objectives of ``categories`` x ``strategies`` and score every
    response through the engine; returns the :class:`~assay.results.EvalResult`, its scorecard in
    ``result.run["redteam"]``. ``attacker``: the model (a spec, as a judge's, or a ChatModel) that
    writes the model-driven attacks; ``languages``: ``translate``'s; ``max_turns`` / ``refusals``:
    a crescendo's turns at most and the refusals in a row that end it; ``preset``: a named
    selection (``owasp-llm-top10``: the scorecard is grouped by OWASP id too). ``engine``: further
    :func:`~assay.engine.evaluate.evaluate` arguments."""
    cats = pick_categories(categories)
    rows = plan_attempts(categories=cats, strategies=strategies, seed=seed, max_attempts=max_attempts,
                         objectives=objectives, attacker=attacker is not None, languages=languages, preset=preset)
    options: dict[str, Any] = {"redteam_seed": seed}
    if preset is not None:
        options["redteam_preset"] = preset.strip().lower()
    if defect_threshold is not None:
        options["defect_threshold"] = defect_threshold
    spend = None
    if any(r["redteam_strategy"] in MODEL_DRIVEN for r in rows):
        target, judge = _attack_target(target, attacker, judge, cats, options, seed=seed, max_turns=max_turns,
                                       refusals=refusals, max_cost=max_cost, concurrency=concurrency)
        spend = target
    return evaluate(rows, target=target, metrics=["refusal", *cats], judge=judge, out=out, store=store,
                    resume=resume, max_cost=max_cost, concurrency=concurrency, name=name, progress=progress,
                    options=options, other_spend=spend, **engine)


def _attack_target(target: Any, attacker: Any, judge: Any, cats: list[str], options: dict[str, Any], *,
                   seed: int, max_turns: int, refusals: int, max_cost: float | None,
                   concurrency: int | None) -> tuple[AttackTarget, Any]:
    """The target behind the attacker, and the judge resolved once for the crescendo's stops
    and the engine's scores (so that both count against ``max_cost``)."""
    from assay.engine.evaluate import resolve_judge
    from assay.metrics.base import get_metric
    from assay.models import resolve

    judge_model, _ = resolve_judge(judge, [get_metric(c) for c in cats], concurrency)
    attacker_model = resolve(attacker, role="simulator", concurrency=concurrency)
    threshold = float(options.get("defect_threshold", DEFAULT_DEFECT_THRESHOLD))
    wrapped = AttackTarget(target, attacker_model, judge_model, seed=seed, max_turns=max_turns, refusals=refusals,
                           max_cost=max_cost, judge_options=options, threshold=threshold)
    options.update(redteam_attacker=str(getattr(attacker_model, "name", attacker)), redteam_max_turns=max_turns,
                   redteam_refusals=refusals)
    return wrapped, judge_model
