"""``assay redteam``: attack objectives per risk category, crossed with attack strategies, sent to
the app and scored through the engine with the refusal check and the safety metrics.

* :mod:`.objectives` — the packaged, versioned objectives (``objectives.json``);
* :mod:`.converters` — deterministic converters (base64, rot13, caesar, atbash, leetspeak, ...),
  each a pure function, the reversible ones with their decoders;
* :mod:`.strategies` — how an objective is put to the target (an encoding with a note saying how
  to read it, or a lure around it), with complexity and OWASP / MITRE ATLAS ids;
* :mod:`.refusal` — the refusal check, measured on labelled sets, registered as the metric
  ``refusal``;
* :mod:`.figures` — the scorecard (ASR and refusal rate per strategy x category, Wilson
  intervals), a run-level aggregation;
* :mod:`.owasp` — presets (``owasp-llm-top10``) and the OWASP LLM Top 10 (2025) ids;
* :mod:`.run` — :func:`plan_attempts` and :func:`redteam`.

Importing the package registers the ``refusal`` metric and the ``redteam`` aggregation.
"""

from assay.metrics.safety.refusal import is_refusal, measure
from assay.simulate.redteam.figures import NOT_MEASURED, format_owasp, format_rate, format_redteam, redteam_figures
from assay.simulate.redteam.objectives import Objective, ObjectiveSet, load_objectives
from assay.simulate.redteam.run import plan_attempts, redteam
from assay.simulate.redteam.strategies import STRATEGIES, Strategy, strategy_names

__all__ = ["NOT_MEASURED", "STRATEGIES", "Objective", "ObjectiveSet", "Strategy", "format_owasp", "format_rate", "format_redteam", "is_refusal",
           "load_objectives", "measure", "plan_attempts", "redteam", "redteam_figures", "strategy_names"]
