"""lm-evaluation-harness's own definitions that a quality run must reproduce to give the same figures: the
perplexity family's per-document values and aggregations, word and byte counts, and how a group's figure and
standard error are pooled from its tasks'.

Per document, a ``loglikelihood_rolling`` task gives ``(loglik, words)`` for ``word_perplexity`` and
``(loglik, bytes)`` for ``byte_perplexity`` and ``bits_per_byte``; a ``loglikelihood`` task gives its target's
loglik for ``perplexity``. The aggregations (the harness's, by name):

- ``perplexity``: exp(−mean(loglik));
- ``weighted_perplexity``: exp(−Σ loglik / Σ weight);
- ``bits_per_byte``: −(Σ loglik / Σ bytes) / ln 2.

The harness gives none of these a standard error except ``perplexity`` (a bootstrap, reproduced draw for draw by
:mod:`assay.bench.quality.harness_bootstrap`). A group weighted by size pools its tasks' standard errors as the harness's
``pooled_sample_stderr`` does: √(Σ (nᵢ − 1)·sᵢ²·nᵢ / (Σ nᵢ − k) / Σ nᵢ) for k tasks of nᵢ items and stderr sᵢ; a
plain mean (``weight_by_size: false``) takes the harness's ``unweighted_mean_stderr``, √(Σ sᵢ²) / k.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["AGGREGATIONS", "DEFAULT_AGGREGATION", "HIGHER_IS_BETTER", "PERPLEXITY_METRICS", "ROLLING_METRICS",
           "DEFAULT_MAX_LENGTH", "aggregate", "count_bytes", "count_words", "pooled_sample_stderr", "rolling_windows",
           "unweighted_mean_stderr", "weighted_mean"]

ROLLING_METRICS = ("word_perplexity", "byte_perplexity", "bits_per_byte")
PERPLEXITY_METRICS = ("perplexity", *ROLLING_METRICS)
_SPACE = re.compile(r"\s+")


def count_words(text: str) -> int:
    """The harness's word count of a document: the pieces of a split on runs of whitespace (so a leading or
    trailing space counts an empty piece, as it does there)."""
    return len(_SPACE.split(text))


def count_bytes(text: str) -> int:
    """The document's length in UTF-8 bytes."""
    return len(text.encode("utf-8"))


def _pairs(items: Sequence[Any]) -> list[tuple[float, float]]:
    out = []
    for x in items:
        if not isinstance(x, (list, tuple)) or len(x) != 2:
            raise ValueError(f"a weighted aggregation needs (loglik, weight) pairs, got {x!r}")
        out.append((float(x[0]), float(x[1])))
    return out


def weighted_mean(items: Sequence[Any]) -> float:
    """Σ loglik / Σ weight over ``(loglik, weight)`` pairs."""
    pairs = _pairs(items)
    total = sum(b for _, b in pairs)
    if total == 0:
        raise ValueError("the weights (words or bytes) add up to 0")
    return sum(a for a, _ in pairs) / total


def _perplexity(items: Sequence[Any]) -> float:
    return math.exp(-sum(float(x) for x in items) / len(items))


def _weighted_perplexity(items: Sequence[Any]) -> float:
    return math.exp(-weighted_mean(items))


def _bits_per_byte(items: Sequence[Any]) -> float:
    return -weighted_mean(items) / math.log(2)


AGGREGATIONS: dict[str, Callable[[Sequence[Any]], float]] = {
    "perplexity": _perplexity, "weighted_perplexity": _weighted_perplexity, "bits_per_byte": _bits_per_byte}
# the aggregation the harness registers for each of its metrics (a task's metric_list may name another)
DEFAULT_AGGREGATION = {"perplexity": "perplexity", "word_perplexity": "weighted_perplexity",
                       "byte_perplexity": "weighted_perplexity", "bits_per_byte": "bits_per_byte"}
HIGHER_IS_BETTER = {"acc": True, "acc_norm": True, "acc_mutual_info": True, "exact_match": True,
                    "perplexity": False, "word_perplexity": False, "byte_perplexity": False,
                    "bits_per_byte": False}


def aggregate(name: str, items: Sequence[Any]) -> float:
    """The harness's aggregation ``name`` over the per-document values ``items``."""
    return AGGREGATIONS[name](items)


def pooled_sample_stderr(stderrs: Sequence[float], sizes: Sequence[int]) -> float:
    """The standard error of a group's size-weighted mean from its tasks' standard errors and sizes, as the harness
    pools them (pooled variance over Σ n − k degrees of freedom, over Σ n)."""
    if len(stderrs) != len(sizes):
        raise ValueError(f"{len(stderrs)} standard errors for {len(sizes)} sizes")
    n = sum(sizes)
    dof = n - len(sizes)
    if dof <= 0:
        raise ValueError("too few items to pool standard errors")
    var = sum((size - 1) * se ** 2 * size for se, size in zip(stderrs, sizes)) / dof
    return math.sqrt(var / n)


def unweighted_mean_stderr(stderrs: Sequence[float]) -> float:
    """The standard error of a group's plain (``weight_by_size: false``) mean of k task figures, as the harness
    gives it: √(Σ sᵢ²) / k (k independent means)."""
    if not stderrs:
        raise ValueError("no standard errors to combine")
    return math.sqrt(sum(float(se) ** 2 for se in stderrs)) / len(stderrs)


# The harness's ``max_length`` for models behind an API (its default: 2048 tokens per request).
DEFAULT_MAX_LENGTH = 2048


def rolling_windows(n_tokens: int, max_length: int = DEFAULT_MAX_LENGTH) -> list[tuple[int, int, int]]:
    """The windows over which the harness scores a ``loglikelihood_rolling`` document of ``n_tokens`` tokens on a
    model of ``max_length`` (its API models keep one token for the generated one and one for the start: each
    window predicts up to ``max_length − 2`` tokens), as ``(start, first_scored, end)`` token indices: the window
    sends tokens ``[start, end)`` and scores ``[first_scored, end)``. The first window scores its tokens after the
    start token alone (``start == first_scored == 0``); each later one scores the next tokens conditioned on the
    tokens before them, as many as fit (``end − start == max_length − 1``). Every token is scored exactly once."""
    span = int(max_length) - 2
    if span < 1:
        raise ValueError(f"max_length must be at least 3, got {max_length!r}")
    if n_tokens <= 0:
        return []
    done = min(span, n_tokens)
    out = [(0, 0, done)]
    while done < n_tokens:
        end = done + min(n_tokens - done, span)
        out.append((end - span - 1, done, end))
        done = end
    return out
