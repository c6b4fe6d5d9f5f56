"""assay: evaluate generative-AI applications and benchmark models.

The public API; everything else is implementation::

    import assay
    result = assay.evaluate(data="data.jsonl", metrics="auto")
    result.metrics, result.rows, result.to_pandas()

The names below are loaded on first use (PEP 562 ``__getattr__``), so ``import assay`` and the
``assay`` command start without the engine, numpy or pandas; ``assay.evaluate`` and
``from assay import evaluate`` work as before.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from assay.version import __version__

# public name -> (module, attribute in it; None: the module itself)
_PUBLIC: dict[str, tuple[str, str | None]] = {
    "evaluate": ("assay.engine.evaluate", "evaluate"),
    "evaluate_async": ("assay.engine.evaluate", "evaluate_async"),
    "EvalResult": ("assay.results", "EvalResult"),
    "AssayError": ("assay.errors", "AssayError"),
    "InputError": ("assay.errors", "InputError"),
    "load": ("assay.formats", "open_dataset"),
    "metric": ("assay.metrics.base", "metric"),
    "judge": ("assay.metrics.custom", "judge"),
    "guidelines_judge": ("assay.metrics.custom", "guidelines_judge"),
    "Metric": ("assay.metrics.base", "Metric"),
    "Score": ("assay.metrics.base", "Score"),
    "EvalContext": ("assay.metrics.base", "EvalContext"),
    "REGISTRY": ("assay.metrics.base", "REGISTRY"),
    "Record": ("assay.records", "Record"),
    "Message": ("assay.records", "Message"),
    "Document": ("assay.records", "Document"),
    "Usage": ("assay.records", "Usage"),
    "scale": ("assay.scale", None),
}

__all__ = [
    "evaluate", "evaluate_async", "EvalResult", "AssayError", "InputError", "load",
    "metric", "judge", "guidelines_judge", "Metric", "Score", "EvalContext", "REGISTRY", "Record", "Message",
    "Document", "Usage", "scale", "__version__",
]

if TYPE_CHECKING:   # what type checkers and IDEs see; at run time __getattr__ loads these on first use
    from assay import scale
    from assay.engine.evaluate import evaluate, evaluate_async
    from assay.errors import AssayError, InputError
    from assay.formats import open_dataset as load
    from assay.metrics.base import REGISTRY, EvalContext, Metric, Score, metric
    from assay.metrics.custom import guidelines_judge, judge
    from assay.records import Document, Message, Record, Usage
    from assay.results import EvalResult


def __getattr__(name: str) -> Any:
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'assay' has no attribute {name!r}") from None
    loaded = import_module(module)
    value = loaded if attr is None else getattr(loaded, attr)
    globals()[name] = value          # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
