"""A stored run made for the review tests: a judged metric (``groundedness``) and a rule
(``exact``), with known verdicts on every row.

Row ``i`` (of ``n``): the judge passes it when ``i % 3 != 0``; the rule passes it when ``i`` is
even (so the two disagree on a known set of rows); rows with ``i % 5 == 0`` are flaky (their
repeats disagreed); the judge's 1-5 score is ``1 + i % 5``.
"""

from __future__ import annotations

from typing import Any

from assay.scores import Score
from assay.store import Store, StoredRow

JUDGE_SPEC = "http://127.0.0.1:1/v1#scripted-judge"


def judge_passes(i: int) -> bool:
    return i % 3 != 0


def rule_passes(i: int) -> bool:
    return i % 2 == 0


def is_flaky(i: int) -> bool:
    return i % 5 == 0


def row(i: int) -> dict[str, Any]:
    return {"inputs.query": f"what is item {i}?", "inputs.response": f"item {i} is a thing",
            "inputs.context": [{"content": f"context {i}: item {i} is a thing"}, {"content": "another passage"}]}


def make_run(store: Store, n: int = 30, name: str = "reviewed") -> str:
    """Write the run (completed) and return its id."""
    config = {"layout": [["groundedness", ["groundedness"]], ["exact", ["exact"]]]}
    rid = store.start_run(name=name, source="t", fingerprint=None, config=config, config_hash="h",
                          metrics=["groundedness", "exact"], judge=JUDGE_SPEC)
    batch = []
    for i in range(n):
        j, r = judge_passes(i), rule_passes(i)
        props = {"scorer": "judge", "verdict": "flaky" if is_flaky(i) else ("stable_pass" if j else "stable_fail")}
        scores = {"groundedness": {"groundedness": Score(value=1 + i % 5, score=float(1 + i % 5), passed=j,
                                                         result="pass" if j else "fail",
                                                         reason=f"judge reason {i}", threshold=3.0, properties=props)},
                  "exact": {"exact": Score(value=float(r), score=float(r), passed=r, result="pass" if r else "fail",
                                           threshold=0.5)}}
        batch.append(StoredRow(i, f"row-{i}", None, False, row(i), scores))
    store.write_rows(rid, batch)
    store.finish_run(rid, "completed")
    return rid
