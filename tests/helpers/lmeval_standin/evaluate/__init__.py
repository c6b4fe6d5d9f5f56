"""A stand-in for Hugging Face ``evaluate``, on ``sys.path`` only in tests that import lm-evaluation-harness's
MBPP task code (tests/bench/test_lmeval_tasks16.py).

lm-eval's ``mbpp/utils.py`` (which also holds the task's few-shot samples) runs ``evaluate.load("code_eval")``
and one ``compute`` on import, which needs the hub (the metric's script is downloaded) and ``HF_ALLOW_CODE_EVAL``.
assay never scores with that metric: it runs each program in its own sandbox. This stand-in lets the module import
offline and records every ``compute`` call in :data:`CALLS`, so a test can check that the import-time self-check
was the only one (no score came from here). ``compute`` gives no result."""

from __future__ import annotations

from typing import Any

CALLS: list[dict[str, Any]] = []


class _CodeEval:
    def compute(self, **kwargs: Any) -> tuple[dict, dict]:
        CALLS.append(kwargs)
        return {}, {}


def load(name: str, *args: Any, **kwargs: Any) -> _CodeEval:
    if name != "code_eval":
        raise ValueError(f"the test stand-in for evaluate has only code_eval, not {name!r}")
    return _CodeEval()
