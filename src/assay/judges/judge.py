"""The judge declaration: one :class:`Judge` per LLM-judged metric, as data.

A judge is a prompt template, the scale it answers on, a default threshold and the record
fields it reads; :func:`assay.metrics.judged.register_judge` turns one declaration into a
registered metric (so a new judge metric is a template file and one ``Judge(...)``). The
asking itself is in :mod:`assay.judges.ask`, the prompts in :mod:`assay.judges.prompt`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assay.judges.parse import Scale
from assay.judges.prompt import Prompt, load_prompt, render

DEFAULT_MAX_TOKENS = 600
AZURE_AND_DATABRICKS = ("azure", "databricks")



@dataclass(frozen=True)
class Judge:
    """A judge as data.

    ``template``: a file name under ``prompts/`` (without ``.txt``) or, for custom judges, a
    :class:`Prompt`. ``scale``: what the judge answers on (``"1-5"``, ``"yes/no"``, ``"0-7"``);
    ``reports``: the metric's scale when it differs (a share of yes answers reports ``"0-1"``).
    ``threshold``: the metric's default threshold, else 3 on 1–5, 0.5 on yes/no (so that a
    ``yes`` = 1.0 passes and a probability-scored P(yes) passes above one half), else the middle
    of the scale. ``requires``: the record fields it needs (a tuple inside: one of them is
    enough); ``optional``: fields it reads when present. The rest are the metric's registry
    attributes (:class:`assay.metrics.base.Metric`): ``kind``, ``family``, ``auto``,
    ``auto_unless``, ``auto_requires``, ``outputs``, the defect settings of safety metrics, and
    ``description`` (its first paragraph is what ``assay metrics`` shows).
    """

    name: str
    template: str | Prompt
    scale: str = "1-5"
    threshold: float | None = None
    higher_is_better: bool = True
    max_tokens: int = DEFAULT_MAX_TOKENS
    requires: tuple[Any, ...] = ()
    optional: tuple[str, ...] = ()
    reports: str | None = None
    kind: str = "judge"
    family: tuple[str, ...] = AZURE_AND_DATABRICKS
    auto: bool = False
    auto_unless: tuple[str, ...] = ()
    auto_requires: tuple[Any, ...] = ()   # a field, or a tuple of which one is enough
    outputs: tuple[str, ...] = ()
    description: str = ""
    defect_threshold: float | None = None
    defect_levels: tuple[float, ...] = ()
    defect_below: bool = False

    @property
    def scale_obj(self) -> Scale:
        return Scale.of(self.scale)

    @property
    def metric_scale(self) -> str:
        """The scale the metric reports on, as shown by ``assay metrics``."""
        return self.reports if self.reports is not None else self.scale

    @property
    def default_threshold(self) -> float | None:
        if self.threshold is not None:
            return self.threshold
        return default_threshold(Scale.of(self.metric_scale))

    @property
    def fields(self) -> tuple[str, ...]:
        """Every record field the judge reads, required first, in declaration order."""
        out = [r for r in self.requires if isinstance(r, str)]
        out += [f for f in self.optional if f not in out]
        return tuple(out)

    @property
    def prompt(self) -> Prompt:
        return prompt_of(self.template)

    def messages(self, values: Mapping[str, Any], template: str | Prompt | None = None) -> list[dict[str, str]]:
        """The chat messages asking this judge about ``values`` (with ``template`` instead of its
        own, for judges with variants)."""
        return render(prompt_of(template) if template is not None else self.prompt, values, self.scale_obj)


def prompt_of(template: str | Prompt) -> Prompt:
    return template if isinstance(template, Prompt) else load_prompt(template)


def default_threshold(scale: Scale) -> float:
    if scale.kind == "yesno":
        return 0.5
    if scale.kind == "int" and (scale.lo, scale.hi) == (1, 5):
        return 3.0
    return (float(scale.lo) + float(scale.hi)) / 2


__all__ = ["DEFAULT_MAX_TOKENS", "Judge", "default_threshold", "prompt_of"]
