"""Simulating users and attacks against an application, to build evaluation sets.

* :func:`simulate_adversarial` — attack templates (scenarios x harm categories) played
  against the target by an attacker model;
* :func:`simulate_jailbreak` — the same attacks with and without a jailbreak (direct: a
  prefix in the first turn; indirect: an instruction hidden in a context document), written
  as paired sets; :func:`jailbreak_defect_rate` (a run-level aggregation of the safety
  metrics, :mod:`assay.metrics.safety.jailbreak`) compares them after evaluation;
* :func:`simulate_users` — ordinary multi-turn conversations from a text and/or tasks.

Every simulator is seeded and writes Azure conversation JSONL that ``assay eval`` reads.
"""

from assay.simulate.adversarial import plan_attacks, simulate_adversarial, simulate_adversarial_async
from assay.simulate.conversation import SimulationResult
from assay.simulate.jailbreak import (
                                      add_jailbreak_figures,
                                      attach_jailbreak_defect_rate,
                                      format_jailbreak,
                                      jailbreak_defect_rate,
                                      jailbreak_figures,
                                      simulate_jailbreak,
                                      simulate_jailbreak_async,
)
from assay.simulate.templates import HARM_CATEGORIES, SCENARIOS, load_attack_set, load_jailbreak_set
from assay.simulate.users import simulate_users, simulate_users_async

__all__ = [
    "HARM_CATEGORIES", "SCENARIOS", "SimulationResult", "add_jailbreak_figures", "attach_jailbreak_defect_rate",
    "format_jailbreak", "jailbreak_defect_rate", "jailbreak_figures",
    "load_attack_set", "load_jailbreak_set", "plan_attacks", "simulate_adversarial", "simulate_adversarial_async",
    "simulate_jailbreak", "simulate_jailbreak_async", "simulate_users", "simulate_users_async",
]
