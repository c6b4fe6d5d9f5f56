"""Custom metrics: a judge from a prompt template, a judge from plain guidelines, a code metric.

**A judge from a template** — :func:`judge`::

    import assay

    assay.judge("politeness", prompt=\"\"\"
    [system]
    Rate how polite the response is. 5: courteous throughout; 3: neutral; 1: rude or dismissive.
    [user]
    The request: {{query}}
    The response: {{response}}
    \"\"\", scale="1-5", threshold=4)

``{{ field }}`` placeholders name record fields; each is rendered as a delimited block
(``<response>...</response>``) whose content the judge is told is data, never instructions.
The output format (JSON with ``reason`` and ``score`` or ``rating``) is appended for the scale,
so the template only says what to judge. ``[system]`` / ``[user]`` sections are optional. The
fields the template names are required (rows without them are skipped with the reason); list
fields that may be absent in ``optional``. A template without placeholders gets a block for
each of ``inputs`` appended.

**A judge from guidelines** — :func:`guidelines_judge`::

    assay.guidelines_judge("house_style", guidelines=["Answer in English.", "Never mention competitors."])
    assay.guidelines_judge("policy", guidelines={"tone": ["Be polite."], "scope": ["Only discuss billing."]})

yes/no; named lists are judged one call each and give one output per name
(``policy/tone``, ``policy/scope``) beside the overall ``policy``.

**A code metric** is a function decorated with :func:`metric` (re-exported here): its
parameters name record fields, those without a default are required, and a parameter named
``ctx`` receives the :class:`~assay.metrics.base.EvalContext` (its ``judge`` included)::

    @metric(threshold=0.5)
    def mentions_source(response: str, contexts: list) -> float:
        return float(any(d.doc_uri and d.doc_uri in response for d in contexts))

Every one of these registers in the same registry as the built-ins (the judges through
:func:`~assay.metrics.judged.register_judge`, as the built-in judges do): name it in
``metrics=[...]`` / ``--metrics``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from assay.judges import Judge, Prompt, parse_prompt
from assay.judges.parse import Scale
from assay.metrics.base import EvalContext, Metric, Score, metric
from assay.metrics.judged import register_judge
from assay.records import CANONICAL_FIELDS

__all__ = ["judge", "guidelines_judge", "metric"]

DEFAULT_FAMILY = ("azure", "databricks")


def _prompt(prompt: str | os.PathLike[str] | Prompt) -> Prompt:
    if isinstance(prompt, Prompt):
        return prompt
    if isinstance(prompt, os.PathLike):
        return parse_prompt(Path(prompt).read_text(encoding="utf-8"))
    return parse_prompt(str(prompt))


def _check_fields(name: str, fields: Sequence[str], what: str) -> None:
    bad = [f for f in fields if f not in CANONICAL_FIELDS]
    if bad:
        raise ValueError(f"custom judge {name!r}: {what} {', '.join(map(repr, bad))} "
                         f"{'is not a record field' if len(bad) == 1 else 'are not record fields'} "
                         f"(fields: {', '.join(CANONICAL_FIELDS)})")


def judge(name: str, prompt: str | os.PathLike[str] | Prompt, *, scale: str = "1-5",
          threshold: float | None = None, inputs: Sequence[str] | None = None,
          optional: Sequence[str] = (), higher_is_better: bool = True, auto: bool = False,
          family: Sequence[str] = DEFAULT_FAMILY, description: str | None = None,
          max_tokens: int = 600) -> Metric:
    """Register an LLM judge from a prompt template (text or a file path) and return its metric.

    ``scale``: ``"1-5"``, ``"0-10"``, ``"0.0-1.0"``, ``"yes/no"``; ``threshold`` defaults to 3 on
    1–5, 0.5 on yes/no, else the middle of the scale; ``inputs``: the record fields the judge
    needs (default: the template's placeholders), ``optional``: fields it reads when present.
    Re-registering a name replaces the earlier judge.
    """
    p = _prompt(prompt)
    sc = Scale.of(scale)   # a bad scale fails here, at definition time
    placeholders = list(p.placeholders)
    req = list(inputs) if inputs is not None else [f for f in placeholders if f not in optional]
    opt = [f for f in optional if f not in req]
    _check_fields(name, req + opt, "input")
    unknown = [f for f in placeholders if f not in req and f not in opt]
    if unknown:
        _check_fields(name, unknown, "placeholder")
        raise ValueError(f"custom judge {name!r}: the template uses {', '.join(unknown)} but inputs are "
                         f"{', '.join(req + opt) or 'empty'}; add them to inputs or optional")
    if not req and not opt:
        raise ValueError(f"custom judge {name!r}: no inputs; name record fields in the template "
                         "({{response}}) or in inputs=[...]")
    if not placeholders:
        p = Prompt(p.system, p.user + "\n\n" + "\n\n".join(f"{{{{{f}}}}}" for f in req + opt))
    return register_judge(Judge(
        name, p, scale=str(scale), reports=str(sc), threshold=threshold, higher_is_better=higher_is_better,
        max_tokens=max_tokens, requires=tuple(req), optional=tuple(opt), kind="custom", auto=auto,
        family=tuple(family), description=description or f"Custom judge {name!r} ({sc})."))


def guidelines_judge(name: str, guidelines: Sequence[str] | Mapping[str, Sequence[str]], *,
                     threshold: float = 0.5, auto: bool = False,
                     family: Sequence[str] = DEFAULT_FAMILY, description: str | None = None) -> Metric:
    """Register a yes/no judge of whether the response follows ``guidelines`` (plain sentences).

    A list: one output ``name``. Named lists: one judgment per name, outputs ``name/<key>`` for
    each and ``name`` (``yes`` only when every set is followed). Reads ``response`` (required)
    and ``query`` (when present).
    """
    from assay.metrics.quality import GUIDELINE_ADHERENCE, assess_guidelines

    if isinstance(guidelines, str):
        guidelines = [guidelines]
    if isinstance(guidelines, Mapping):
        fixed: Any = {str(k): [str(g) for g in v] for k, v in guidelines.items() if v}
        if not fixed:
            raise ValueError(f"guidelines judge {name!r}: every named list is empty")
        outputs = (name, *(f"{name}/{k}" for k in fixed))
    else:
        fixed = [str(g) for g in guidelines if str(g).strip()]
        if not fixed:
            raise ValueError(f"guidelines judge {name!r}: no guidelines given")
        outputs = (name,)

    async def scorer(judge: Judge, ctx: EvalContext | None, values: Mapping[str, Any]) -> Any:
        overall, per = await assess_guidelines(ctx, fixed, values["response"], values.get("query"))
        if not isinstance(fixed, dict):
            return overall
        out = {name: overall}
        for k in fixed:
            out[f"{name}/{k}"] = per.get(k) or (Score.error(overall.reason or "not judged")
                                                if overall.status == "error" else Score.skipped(overall.reason or ""))
        return out

    return register_judge(Judge(
        name, GUIDELINE_ADHERENCE.template, scale="yes/no", threshold=threshold, requires=("response",),
        optional=("query",), kind="custom", auto=auto, family=tuple(family), outputs=outputs,
        description=description or f"Guidelines judge {name!r}: does the response follow the given guidelines?"),
        scorer)
