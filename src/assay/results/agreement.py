"""Agreement between raters who labelled the same rows: reviewers with each other, and a judge
with the reviewers.

Ratings are a table of units (rows) by raters: ``units[i][r]`` is rater ``r``'s label of unit
``i``, or ``None`` where that rater gave none. Labels are any hashable values (``"pass"`` /
``"fail"``, or 1-5); the ordinal level orders them by their natural sort.

- :func:`cohen_kappa`: two raters, the units both labelled. ``(p_o - p_e) / (1 - p_e)``, with
  ``p_e`` from each rater's own label shares (Cohen, 1960).
- :func:`fleiss_kappa`: any number of raters, units with at least two labels; a unit's
  agreement is the share of its agreeing rater pairs, chance from the pooled label shares
  (Fleiss, 1971; a unit may have fewer labels than another).
- :func:`krippendorff_alpha`: any number of raters, missing labels allowed, nominal or ordinal
  (Krippendorff, *Content Analysis*, 2004, ch. 11): ``1 - D_o / D_e`` from the coincidence
  matrix of pairable values, the ordinal distance of two values ``c <= k`` being
  ``(sum of n_g for g from c to k - (n_c + n_k) / 2) ** 2``.

Each is NaN where it is undefined (no pairable units, or chance agreement is already complete:
every label the same). :func:`agreement` adds a 95% percentile bootstrap interval, resampling
units (1,000 resamples, fixed seed; resamples where the statistic is undefined are left out).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

Units = Sequence[Sequence[Hashable | None]]
STATS = ("cohen_kappa", "fleiss_kappa", "alpha_nominal", "alpha_ordinal")


def cohen_kappa(units: Units) -> float:
    """Cohen's kappa of raters 0 and 1 on the units both labelled."""
    pairs = [(u[0], u[1]) for u in units if len(u) >= 2 and u[0] is not None and u[1] is not None]
    n = len(pairs)
    if n == 0:
        return math.nan
    p_o = sum(a == b for a, b in pairs) / n
    ca, cb = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    p_e = sum(ca[c] * cb[c] for c in ca) / (n * n)
    return math.nan if p_e >= 1 else (p_o - p_e) / (1 - p_e)


def fleiss_kappa(units: Units) -> float:
    """Fleiss' kappa over the units with at least two labels."""
    agree, pooled, used = 0.0, Counter(), 0
    for u in units:
        labels = [x for x in u if x is not None]
        m = len(labels)
        if m < 2:
            continue
        counts = Counter(labels)
        agree += sum(c * (c - 1) for c in counts.values()) / (m * (m - 1))
        pooled.update(counts)
        used += 1
    if used == 0:
        return math.nan
    total = sum(pooled.values())
    p_e = sum((c / total) ** 2 for c in pooled.values())
    p_bar = agree / used
    return math.nan if p_e >= 1 else (p_bar - p_e) / (1 - p_e)


def _coincidences(units: Units) -> tuple[list[Hashable], np.ndarray]:
    """The values met and the coincidence matrix ``o[c, k]`` of the pairable units."""
    kept = [[x for x in u if x is not None] for u in units]
    kept = [u for u in kept if len(u) >= 2]
    values = sorted({x for u in kept for x in u}, key=_order_key)
    at = {v: i for i, v in enumerate(values)}
    o = np.zeros((len(values), len(values)))
    for u in kept:
        counts = Counter(at[x] for x in u)
        m = len(u)
        for c, nc in counts.items():
            for k, nk in counts.items():
                o[c, k] += (nc * (nc - 1) if c == k else nc * nk) / (m - 1)
    return values, o


def _order_key(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, str(v))


def _distances(n_c: np.ndarray, level: str) -> np.ndarray:
    k = len(n_c)
    if level == "nominal":
        return 1.0 - np.eye(k)
    if level != "ordinal":
        raise ValueError(f"Krippendorff's alpha: level {level!r} is not nominal or ordinal")
    cum = np.concatenate([[0.0], np.cumsum(n_c)])
    d = np.zeros((k, k))
    for c in range(k):
        for j in range(c + 1, k):
            d[c, j] = d[j, c] = (cum[j + 1] - cum[c] - (n_c[c] + n_c[j]) / 2) ** 2
    return d


def krippendorff_alpha(units: Units, level: str = "nominal") -> float:
    """Krippendorff's alpha (``nominal`` or ``ordinal``), missing labels allowed."""
    _, o = _coincidences(units)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n <= 1:
        return math.nan
    d = _distances(n_c, level)
    expected = float((np.outer(n_c, n_c) * d).sum())
    if expected == 0:
        return math.nan
    return 1.0 - (n - 1) * float((o * d).sum()) / expected


_FUNCS: dict[str, Callable[[Units], float]] = {
    "cohen_kappa": cohen_kappa,
    "fleiss_kappa": fleiss_kappa,
    "alpha_nominal": lambda u: krippendorff_alpha(u, "nominal"),
    "alpha_ordinal": lambda u: krippendorff_alpha(u, "ordinal"),
}


@dataclass(frozen=True)
class Agreement:
    """A statistic, its 95% bootstrap interval (NaN when it cannot be drawn) and the units it used."""

    stat: str
    value: float
    low: float
    high: float
    units: int

    def as_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 4)

        return {"stat": self.stat, "value": num(self.value), "ci_low": num(self.low), "ci_high": num(self.high),
                "units": self.units}


def _interval(stat: str, value: float, n: int, draw: Callable[[np.ndarray], float], resamples: int,
              seed: int) -> Agreement:
    if n < 2 or math.isnan(value):
        return Agreement(stat, value, math.nan, math.nan, n)
    rng = np.random.default_rng(seed)
    draws = [d for d in (draw(rng.integers(0, n, n)) for _ in range(resamples)) if not math.isnan(d)]
    if len(draws) < resamples // 2:    # mostly undefined resamples: no honest interval
        return Agreement(stat, value, math.nan, math.nan, n)
    low, high = np.percentile(draws, [2.5, 97.5])
    return Agreement(stat, value, float(low), float(high), n)


def _func(stat: str) -> Callable[[Units], float]:
    if stat not in _FUNCS:
        raise ValueError(f"unknown agreement statistic {stat!r}: one of {', '.join(STATS)}")
    return _FUNCS[stat]


def agreement(units: Units, stat: str, *, resamples: int = 1000, seed: int = 0) -> Agreement:
    """``stat`` (one of :data:`STATS`) of ``units`` with a percentile bootstrap interval over units."""
    fn = _func(stat)
    units = [list(u) for u in units]
    return _interval(stat, fn(units), len(units), lambda idx: fn([units[i] for i in idx]), resamples, seed)


def paired_difference(before: Units, after: Units, stat: str, *, resamples: int = 1000,
                      seed: int = 0) -> Agreement:
    """``stat(after) - stat(before)`` on the same units (paired), with a bootstrap interval that
    resamples the units once for both: whether a change of rater (a judge re-prompted) moved
    its agreement with the others."""
    if len(before) != len(after):
        raise ValueError("paired agreement: before and after must label the same units")
    fn = _func(stat)

    def draw(idx: np.ndarray) -> float:
        return fn([after[i] for i in idx]) - fn([before[i] for i in idx])

    return _interval(stat, fn(after) - fn(before), len(before), draw, resamples, seed)
