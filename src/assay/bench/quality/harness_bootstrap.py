"""lm-evaluation-harness's bootstrap standard error, draw for draw, for the aggregations it bootstraps
(``perplexity``: lambada's).

The harness resamples in chunks of 1,000 (100 chunks for its default 100,000 draws): chunk ``i`` draws with
``random.Random(i)``, each resample being ``choices(values, k=n)``, i.e. ``values[floor(random() * n)]`` n times,
and the standard error is the sample standard deviation of the statistic over every resample. Python's
``random.Random(i)`` and numpy's legacy ``RandomState([i])`` are the same Mersenne Twister seeded the same way
(``init_by_array`` with the key ``[i]``) and make doubles the same way (53 bits from two 32-bit words), so the
draws are reproduced here with numpy, a block of resamples at a time, and the figure is the harness's to the last
few bits of rounding (sums are added in another order)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["HARNESS_BOOTSTRAP_ITERS", "BOOTSTRAPPED", "harness_bootstrap_stderr"]

HARNESS_BOOTSTRAP_ITERS = 100_000       # lm-eval's default bootstrap_iters
_CHUNK = 1000
_BLOCK_VALUES = 1 << 21                 # draws held at once (16 MiB of doubles)


def _perplexity_rows(draws: np.ndarray) -> np.ndarray:
    return np.exp(-draws.sum(axis=1) / draws.shape[1])


# the harness's aggregations that it bootstraps and that assay computes, as a statistic of each row of resamples
BOOTSTRAPPED: dict[str, Callable[[np.ndarray], np.ndarray]] = {"perplexity": _perplexity_rows}


def harness_bootstrap_stderr(aggregation: str, values: Sequence[float],
                             iters: int = HARNESS_BOOTSTRAP_ITERS) -> float | None:
    """The harness's standard error of ``aggregation`` over the per-document ``values`` (None when it
    bootstraps no such aggregation, or there are fewer than two values: the harness writes "N/A" for a task of
    one item)."""
    stat = BOOTSTRAPPED.get(aggregation)
    if stat is None or len(values) < 2:
        return None
    xs = np.asarray([float(v) for v in values], dtype=np.float64)
    n = len(xs)
    chunk = min(_CHUNK, iters)
    rows_per_block = max(1, _BLOCK_VALUES // n)
    out = []
    for i in range(iters // chunk):
        rs = np.random.RandomState([i])          # the legacy generator: the same draws as random.Random(i)
        left = chunk
        while left:
            rows = min(rows_per_block, left)
            idx = (rs.random_sample(rows * n) * float(n)).astype(np.intp)    # floor: the draws are >= 0
            out.append(stat(xs[idx].reshape(rows, n)))
            left -= rows
    res = np.concatenate(out)
    if len(res) < 2:
        return None
    return float(np.std(res, ddof=1))
