"""Review queues and labels in the store, on SQLite and PostgreSQL (one PostgreSQL store serves
every test, so queue names carry the run id)."""

from __future__ import annotations

import pytest

from assay.errors import AssayError
from assay.store.review import JUDGE, ReviewLog
from tests.helpers.review_runs import is_flaky, judge_passes, make_run, rule_passes


def test_random_queue_is_seeded_and_stored(store):
    rid = make_run(store)
    log = ReviewLog(store)
    q = log.create(f"{rid}-q1", rid, "groundedness", sample=10, seed=7)
    assert q["run_id"] == rid and q["metric"] == q["output"] == "groundedness" and q["scale"] == "pass_fail"
    assert len(q["idxs"]) == 10 == len(set(q["idxs"])) and all(0 <= i < 30 for i in q["idxs"])
    again = log.create(f"{rid}-q2", "reviewed", "groundedness.groundedness", sample=10, seed=7)
    assert again["idxs"] == q["idxs"]                                    # same seed, same rows
    assert log.create(f"{rid}-q3", rid, "groundedness", sample=10, seed=8)["idxs"] != q["idxs"]
    assert [x["name"] for x in log.queues() if x["run_id"] == rid] == [f"{rid}-q3", f"{rid}-q2", f"{rid}-q1"]
    with pytest.raises(AssayError, match="already exists"):
        log.create(f"{rid}-q1", rid, "groundedness")


def test_disagreement_and_flaky_queues_pick_only_such_rows(store):
    rid = make_run(store)
    log = ReviewLog(store)
    d = log.create(f"{rid}-d", rid, "groundedness", sample=100, source="disagreements", against="exact")
    assert d["idxs"] == [i for i in range(30) if judge_passes(i) != rule_passes(i)] and d["against"] == "exact.exact"
    f = log.create(f"{rid}-f", rid, "groundedness", sample=100, source="flaky")
    assert f["idxs"] == [i for i in range(30) if is_flaky(i)]
    with pytest.raises(AssayError, match="needs --against"):
        log.create(f"{rid}-x", rid, "groundedness", source="disagreements")
    with pytest.raises(AssayError, match="no metric output 'nope'"):
        log.create(f"{rid}-x", rid, "nope")


def test_labels_one_per_reviewer_and_row_replaced_on_relabel(store):
    rid = make_run(store)
    log = ReviewLog(store)
    q = log.create(f"{rid}-q", rid, "groundedness", sample=5)
    a, b = q["idxs"][:2]
    log.label(f"{rid}-q", a, "ann", "p", note="fine", at=100.0)
    log.label(f"{rid}-q", a, "bob", "fail")
    log.label(f"{rid}-q", a, "ann", "fail", note="changed my mind", at=200.0)
    log.label(f"{rid}-q", b, "ann", "pass")
    got = log.labels(f"{rid}-q")
    assert [(x["idx"], x["reviewer"], x["value"]) for x in got] == sorted(
        [(a, "ann", "fail"), (a, "bob", "fail"), (b, "ann", "pass")])
    ann = next(x for x in got if x["idx"] == a and x["reviewer"] == "ann")
    assert ann["note"] == "changed my mind" and ann["at"] == 200.0 and ann["row_id"] == f"row-{a}"
    assert next(x for x in log.queues() if x["run_id"] == rid)["labels"] == 3
    with pytest.raises(AssayError, match="not pass or fail"):
        log.label(f"{rid}-q", a, "ann", "3")
    with pytest.raises(AssayError, match="not in the queue"):
        log.label(f"{rid}-q", 999, "ann", "pass")
    with pytest.raises(AssayError, match="reviewer"):
        log.label(f"{rid}-q", a, " ", "pass")


def test_one_to_five_scale_and_units_with_the_judge(store):
    rid = make_run(store, n=10)
    log = ReviewLog(store)
    q = log.create(f"{rid}-s", rid, "groundedness", sample=10, scale="1-5")
    log.label(f"{rid}-s", 0, "ann", 1)
    log.label(f"{rid}-s", 0, "bob", "2")
    log.label(f"{rid}-s", 3, "bob", 4)
    with pytest.raises(AssayError, match="1 to 5"):
        log.label(f"{rid}-s", 1, "ann", "pass")
    raters, units, idxs = log.units(f"{rid}-s", with_judge=True)
    # the judge's score of row i is 1 + i % 5
    assert raters == [JUDGE, "ann", "bob"] and idxs == [0, 3]
    assert units == [[1, 1, 2], [4, None, 4]]
    assert q["idxs"] == list(range(10))


def test_items_show_the_row_the_scorer_and_the_labels(store):
    rid = make_run(store, n=6)
    log = ReviewLog(store)
    log.create(f"{rid}-q", rid, "groundedness", sample=6)
    log.label(f"{rid}-q", 3, "ann", "pass")
    items = log.items(f"{rid}-q")
    it = items[3]
    assert it["idx"] == 3 and it["inputs"]["inputs.query"] == "what is item 3?"
    assert it["judge"]["scorer"] == "judge" and it["judge"]["label"] == "fail" and it["judge"]["reason"] == "judge reason 3"
    assert [lb["reviewer"] for lb in it["labels"]] == ["ann"]


def test_deleting_the_run_deletes_its_queues_and_labels(store):
    rid = make_run(store, n=4)
    log = ReviewLog(store)
    log.create(f"{rid}-q", rid, "groundedness", sample=4)
    log.label(f"{rid}-q", 1, "ann", "pass")
    store.delete_run(rid)
    assert [x for x in log.queues() if x["run_id"] == rid] == []
