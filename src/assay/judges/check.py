"""Measuring a judge: how well its scores separate labelled good answers from bad ones.

The input is one :class:`Scored` item per labelled row a judge scored: the group it belongs to
(a question), its kind and its score. Kinds:

* ``good`` — an answer the label calls good (label 1);
* ``bad`` — an answer of the same group the label calls bad (label 0);
* ``swap`` — the group's *good* answer with another group's context (for groundedness) or
  another group's question (for relevance): the control that a scorer reading only the answer
  fails. Label 0.

:func:`measure` reports, with a 95% interval from resampling the groups (percentile
bootstrap):

* ``auc`` — ROC AUC of good against bad (the probability that a good answer outscores a bad
  one, ties counting one half);
* ``agreement`` — the share of good and bad answers on the right side of the threshold;
* ``swap`` — AUC of good against swap (the *context-swap* control for groundedness, the
  question swap for relevance, the ground-truth swap for similarity);
* ``length_matched`` — AUC of good against bad over the groups whose two answers differ by at
  most ``max_word_gap`` words (two), beside the AUC that answer length alone reaches on those
  same groups (near 0.5 by construction) and over all groups (``length_only``);
* ``errors`` — items the judge did not score.

A scorer that reads length passes ``auc`` and fails ``length_matched``; one that reads only the
answer fails ``swap``. Nothing here calls a judge: :mod:`assay.engine.judge_check` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["KINDS", "MAX_WORD_GAP", "Scored", "auc_interval", "fit_logistic", "fmt_auc", "measure", "roc_auc", "words"]

KINDS = ("good", "bad", "swap")
MAX_WORD_GAP = 2
RESAMPLES = 2000


def words(text: str | None) -> int:
    return len((text or "").split())


@dataclass
class Scored:
    """One labelled row and what the judge made of it (``score`` None: not scored)."""

    group: str
    kind: str
    score: float | None
    passed: bool | None = None
    words: int = 0
    error: str | None = None

    @property
    def label(self) -> int:
        return 1 if self.kind == "good" else 0


def roc_auc(pos: Sequence[float], neg: Sequence[float]) -> float | None:
    """P(a positive outscores a negative), ties counting one half (the Mann-Whitney U statistic
    over ``n_pos·n_neg``); None when either side is empty."""
    p = np.asarray(pos, dtype=float)
    n = np.asarray(neg, dtype=float)
    if p.size == 0 or n.size == 0:
        return None
    both = np.concatenate([p, n])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(both.size, dtype=float)
    sorted_ = both[order]
    # average ranks of ties (1-based)
    starts = np.flatnonzero(np.r_[True, sorted_[1:] != sorted_[:-1]])
    ends = np.r_[starts[1:], both.size]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2.0
    r_pos = ranks[: p.size].sum()
    return float((r_pos - p.size * (p.size + 1) / 2.0) / (p.size * n.size))


def auc_interval(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], *, resamples: int = RESAMPLES,
                 seed: int = 0) -> tuple[float | None, float | None]:
    """A 95% percentile-bootstrap interval of the AUC, resampling groups: ``pairs`` holds each
    group's (positive scores, negative scores)."""
    k = len(pairs)
    if k < 2:
        return None, None
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        idx = rng.integers(0, k, size=k)
        pos = [s for i in idx for s in pairs[i][0]]
        neg = [s for i in idx for s in pairs[i][1]]
        a = roc_auc(pos, neg)
        if a is not None:
            draws.append(a)
    if not draws:
        return None, None
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def _by_group(items: Iterable[Scored]) -> dict[str, dict[str, list[Scored]]]:
    groups: dict[str, dict[str, list[Scored]]] = {}
    for it in items:
        groups.setdefault(it.group, {}).setdefault(it.kind, []).append(it)
    return groups


def _auc(groups: dict[str, dict[str, list[Scored]]], pos_kind: str, neg_kind: str,
         key: Any = None, resamples: int = RESAMPLES) -> dict[str, Any]:
    """AUC of ``pos_kind`` against ``neg_kind`` over the groups that have both, with its interval."""
    def val(it: Scored) -> float:
        return float(key(it)) if key is not None else float(it.score)  # type: ignore[arg-type]

    pairs = []
    for g in groups.values():
        pos = [val(i) for i in g.get(pos_kind, []) if i.score is not None]
        neg = [val(i) for i in g.get(neg_kind, []) if i.score is not None]
        if pos and neg:
            pairs.append((pos, neg))
    a = roc_auc([s for p, _ in pairs for s in p], [s for _, n in pairs for s in n])
    lo, hi = auc_interval(pairs, resamples=resamples) if a is not None else (None, None)
    return {"auc": a, "ci95_low": lo, "ci95_high": hi, "groups": len(pairs)}


def measure(items: Sequence[Scored], *, max_word_gap: int = MAX_WORD_GAP,
            resamples: int = RESAMPLES) -> dict[str, Any]:
    """The fidelity figures of a judge over ``items`` (see the module docstring)."""
    groups = _by_group(items)
    scored = [i for i in items if i.score is not None]
    errors = [i for i in items if i.score is None]
    main = _auc(groups, "good", "bad", resamples=resamples)
    judged = [i for i in scored if i.kind in ("good", "bad") and i.passed is not None]
    agreement = (sum(1 for i in judged if i.passed == (i.label == 1)) / len(judged)) if judged else None
    matched = {gid: g for gid, g in groups.items()
               if g.get("good") and g.get("bad")
               and abs(g["good"][0].words - g["bad"][0].words) <= max_word_gap}
    shorter = lambda it: -it.words  # noqa: E731  (answer length alone: the shorter answer "wins")
    out: dict[str, Any] = {
        "items": len(items), "errors": len(errors),
        "auc": main,
        "agreement": agreement, "agreement_n": len(judged),
        "swap": _auc(groups, "good", "swap", resamples=resamples),
        "length_matched": {**_auc(matched, "good", "bad", resamples=resamples),
                           "length_only_auc": _auc(matched, "good", "bad", key=shorter, resamples=0)["auc"]},
        "length_only": _auc(groups, "good", "bad", key=shorter, resamples=0)["auc"],
    }
    if errors:
        reasons: dict[str, int] = {}
        for i in errors:
            r = (i.error or "not scored")[:120]
            reasons[r] = reasons.get(r, 0) + 1
        out["error_reasons"] = reasons
    return out


def fmt_auc(block: dict[str, Any] | None) -> str:
    """``0.950 [0.93–0.97]`` (or ``—``)."""
    if not block or block.get("auc") is None:
        return "—"
    a = block["auc"]
    if block.get("ci95_low") is None or (isinstance(a, float) and math.isnan(a)):
        return f"{a:.3f}"
    return f"{a:.3f} [{block['ci95_low']:.2f}–{block['ci95_high']:.2f}]"


def fit_logistic(x: Sequence[float], y: Sequence[int], *, l2: float = 1e-3, iterations: int = 100) -> tuple[float, float]:
    """``(a, b)`` of ``P(y=1) = 1 / (1 + exp(-(a·x + b)))`` by Newton's method on the
    log-likelihood with a small ridge penalty on ``a`` (so that separable data gives a finite,
    steep slope instead of diverging). ``x`` is standardised while fitting."""
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if xs.size < 2 or ys.min() == ys.max():
        raise ValueError("a logistic fit needs both labels")
    mu, sd = float(xs.mean()), float(xs.std()) or 1.0
    z = (xs - mu) / sd
    X = np.column_stack([z, np.ones_like(z)])
    w = np.zeros(2)
    penalty = np.diag([l2 * xs.size, 0.0])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        grad = X.T @ (p - ys) + penalty @ w
        hess = X.T @ (X * (p * (1 - p))[:, None]) + penalty + 1e-9 * np.eye(2)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    a = w[0] / sd
    b = w[1] - w[0] * mu / sd
    return float(a), float(b)
