"""What the application spent: token counts and latency (Databricks ``agent/*`` metrics).

Token counts come from the application's own usage (a trace or a target call) when it
reported them; otherwise they are counted locally with the ``o200k_base`` BPE encoding
shipped inside the ``bpe-openai`` package (no download), and ``properties.tokenizer``
says so.

Both are lower-is-better: fewer tokens and fewer seconds for the same answer is the
improvement, and ``assay compare`` counts a rise as "worse".
"""

from __future__ import annotations

from functools import lru_cache

from assay.metrics.base import Score, metric
from assay.records import Usage

LOCAL_ENCODING = "o200k_base"


@lru_cache(maxsize=1)
def _encoding():
    import bpe_openai

    return bpe_openai.get_encoding(LOCAL_ENCODING)


def count_tokens(text: str | None) -> int:
    """Tokens in ``text`` under the local encoding (0 for None or empty)."""
    if not text:
        return 0
    return len(_encoding().encode_ordinary(text))


@metric(auto=True, family=("databricks",), higher_is_better=False, outputs=(
    "total_token_count", "total_input_token_count", "total_output_token_count"))
def token_count(response: str, query: str | None = None, usage: Usage | None = None) -> dict[str, Score]:
    """Input, output and total tokens of the application's answer.

    ``total = input + output``. Input counts only the latest request when counted locally
    (the app's own usage, when reported, includes whatever prompt it actually sent).
    """
    if usage is not None and usage.output_tokens is not None:
        inp = usage.input_tokens or 0
        out = usage.output_tokens
        total = usage.total_tokens if usage.total_tokens is not None else inp + out
        props = {"source": "application usage"}
    else:
        inp, out = count_tokens(query), count_tokens(response)
        total = inp + out
        props = {"source": "local tokenizer", "tokenizer": LOCAL_ENCODING}
    return {
        "total_token_count": Score(value=total, properties=props),
        "total_input_token_count": Score(value=inp, properties=props),
        "total_output_token_count": Score(value=out, properties=props),
    }


@metric(auto=True, family=("databricks",), higher_is_better=False, outputs=("latency_seconds",))
def latency(usage: Usage) -> dict[str, Score]:
    """Seconds the application took to answer (from its trace or the target call)."""
    if usage.latency_ms is None:
        return {"latency_seconds": Score.skipped("the application's usage has no latency")}
    return {"latency_seconds": Score(value=usage.latency_ms / 1000.0)}
