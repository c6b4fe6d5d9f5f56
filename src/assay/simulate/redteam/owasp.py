"""Presets of ``assay redteam``: a named selection of objectives and strategies.

``owasp-llm-top10`` takes every objective and every strategy tagged with an id of the OWASP Top 10
for LLM Applications (2025) (the packaged ones carry ``LLM01:2025``, prompt injection, and one
``LLM09:2025``, misinformation), ``baseline`` kept as the control, and the scorecard adds the
attack success rate grouped by OWASP id (``run["redteam"]["owasp"]``), listing the ids no attempt
exercised as not covered: a harm-category red team does not test supply chain, poisoning or
unbounded consumption, and says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from assay.errors import AssayError

# The OWASP Top 10 for LLM Applications, 2025 edition: id -> title.
OWASP_LLM_TOP10 = {
    "LLM01:2025": "Prompt Injection",
    "LLM02:2025": "Sensitive Information Disclosure",
    "LLM03:2025": "Supply Chain",
    "LLM04:2025": "Data and Model Poisoning",
    "LLM05:2025": "Improper Output Handling",
    "LLM06:2025": "Excessive Agency",
    "LLM07:2025": "System Prompt Leakage",
    "LLM08:2025": "Vector and Embedding Weaknesses",
    "LLM09:2025": "Misinformation",
    "LLM10:2025": "Unbounded Consumption",
}
PRESETS = {"owasp-llm-top10": tuple(OWASP_LLM_TOP10)}

__all__ = ["OWASP_LLM_TOP10", "PRESETS", "preset_ids", "tagged"]


def preset_ids(name: str | None) -> tuple[str, ...] | None:
    """The OWASP ids a preset selects by (None: no preset); an unknown name is an AssayError."""
    if name is None:
        return None
    key = name.strip().lower()
    if key not in PRESETS:
        raise AssayError(f"--preset: unknown preset {name!r}; choose from: {', '.join(PRESETS)}")
    return PRESETS[key]


def tagged(tags: Sequence[str], ids: Sequence[str]) -> bool:
    """True when any of ``tags`` is one of ``ids``."""
    return any(t in ids for t in tags)
