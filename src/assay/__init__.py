"""assay: evaluate generative-AI applications and benchmark models.

The public API; everything else is implementation::

    import assay
    result = assay.evaluate(data="data.jsonl", metrics="auto")
    result.metrics, result.rows, result.to_pandas()
"""

from assay.version import __version__  # noqa: E402
from assay.engine.evaluate import evaluate, evaluate_async  # noqa: E402
from assay import scale  # noqa: E402  (registers engine="ray"; Ray is imported only when a run asks for it)
from assay.results import EvalResult  # noqa: E402
from assay.errors import AssayError, InputError  # noqa: E402
from assay.formats import open_dataset as load  # noqa: E402
from assay.metrics.base import REGISTRY, EvalContext, Metric, Score, metric  # noqa: E402
from assay.metrics.custom import guidelines_judge, judge  # noqa: E402
from assay.records import Document, Message, Record, Usage  # noqa: E402

__all__ = [
    "evaluate", "evaluate_async", "EvalResult", "AssayError", "InputError", "load",
    "metric", "judge", "guidelines_judge", "Metric", "Score", "EvalContext", "REGISTRY", "Record", "Message",
    "Document", "Usage", "scale",
]
