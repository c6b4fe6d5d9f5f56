"""A run whose plan is not asked for before scoring (no ``on_plan``, ``make_plan(upfront=False)``)
reads its data once: the plan's counts are taken as the rows are scored, and come out the same
as with the planning pass."""

from __future__ import annotations

import json

import pytest

from assay.engine.evaluate import evaluate
from assay.engine.plan import PLAN_WINDOW, make_plan, record_shape
from assay.errors import InputError
from assay.formats.dataset import Dataset
from assay.records import CANONICAL_FIELDS, Record


def mixed_rows(n: int) -> list[dict]:
    """Rows of several shapes: some without ground truth, some with contexts, empty texts and lists."""
    rows = []
    for i in range(n):
        row = {"id": str(i), "query": f"question {i}", "response": f"the answer is {i % 7}"}
        if i % 3:
            row["ground_truth"] = f"the answer is {i % 5}"
        if i % 4 == 0:
            row["contexts"] = [f"document {i}"]
        if i % 11 == 0:
            row["response"] = ""
        if i % 13 == 0:
            row["contexts"] = []
        if i % 17 == 0:
            row["note"] = "an extra column"
        rows.append(row)
    return rows


def consume(p, start: int = 0) -> int:
    return sum(1 for _ in p.records(start))


@pytest.mark.parametrize("start", [0, 5, PLAN_WINDOW + 10])
def test_counts_taken_while_scoring_equal_the_planning_pass(start):
    rows = mixed_rows(3 * PLAN_WINDOW + 17)
    before = make_plan(rows, metrics="f1_score,bleu", upfront=True)
    after = make_plan(rows, metrics="f1_score,bleu", upfront=False)
    assert before.counted and not after.counted
    assert after.rows == PLAN_WINDOW        # only the head is counted so far
    assert consume(after, start) == len(rows) - start
    assert after.counted
    assert after.summary() == before.summary()
    assert after.shapes == before.shapes and list(after.shapes) == list(before.shapes)
    assert after.present == before.present
    assert [r.id for r in after.head] == [r.id for r in before.head]


def test_the_data_is_read_once_without_the_planning_pass(monkeypatch):
    reads = []
    real = Dataset.__iter__

    def counted(self):
        reads.append(1)
        return real(self)

    monkeypatch.setattr(Dataset, "__iter__", counted)
    rows = mixed_rows(PLAN_WINDOW + 50)
    p = make_plan(rows, metrics="f1_score", upfront=False)
    assert [r.id for r in p.records()] == [r["id"] for r in rows]
    assert len(reads) == 1
    reads.clear()
    p = make_plan(rows, metrics="f1_score", upfront=True)
    assert [r.id for r in p.records()] == [r["id"] for r in rows]
    assert len(reads) == 2


def test_auto_and_short_data_keep_the_planning_pass():
    rows = mixed_rows(PLAN_WINDOW + 5)
    assert make_plan(rows, metrics="auto", upfront=False).counted
    assert make_plan(rows[:PLAN_WINDOW - 1], metrics="f1_score", upfront=False).counted


def test_a_named_input_first_seen_after_the_head_is_found_by_reading_on():
    rows = [{"query": "q", "response": "r"} for _ in range(PLAN_WINDOW + 20)]
    rows[PLAN_WINDOW + 3]["ground_truth"] = "r"
    p = make_plan(rows, metrics="f1_score", upfront=False)
    assert p.counted and p.summary()["metrics"]["f1_score"]["rows"] == 1
    del rows[PLAN_WINDOW + 3]["ground_truth"]
    with pytest.raises(InputError, match=f"looked at all {len(rows)} rows"):
        make_plan(rows, metrics="f1_score", upfront=False)


def test_a_mapped_column_first_seen_after_the_head_is_found_by_reading_on():
    rows = [{"question": "q", "answer": "a", "truth": "a"} for _ in range(PLAN_WINDOW + 20)]
    rows[-1]["ref"] = ["a"]
    mapping = {"query": "question", "response": "answer", "ground_truth": "truth", "expected_facts": "ref"}
    p = make_plan(rows, metrics="f1_score", mapping=mapping, upfront=False)
    assert p.counted and "expected_facts" in p.present
    del rows[-1]["ref"]
    with pytest.raises(InputError, match="names column 'ref', which no row has"):
        make_plan(rows, metrics="f1_score", mapping=mapping, upfront=False)


def test_record_shape_is_the_fields_record_has():
    records = [
        Record(query="q", response="", ground_truth="g", contexts=[], turn=0, conversation_id="c"),
        Record(response="r", contexts=[{"content": "a doc"}], usage={"input_tokens": 3}, extra={"x": 1}),
        Record(history=[{"role": "user", "content": "hi"}], expected_facts=[], tool_calls=[{"name": "f"}]),
        Record(),
    ]
    for r in records:
        assert record_shape(r) == frozenset(f for f in CANONICAL_FIELDS if r.has(f))


def test_evaluate_without_on_plan_reports_the_same_plan_and_rows(tmp_path):
    rows = mixed_rows(PLAN_WINDOW + 300)
    seen = []
    a = evaluate(rows, metrics="f1_score,rougeL", store=False, on_plan=seen.append, out=tmp_path / "a")
    b = evaluate(rows, metrics="f1_score,rougeL", store=False, out=tmp_path / "b")
    assert seen == [a.run["plan"]]
    assert b.run["plan"] == a.run["plan"]
    assert b.run["plan"]["metrics"]["f1_score"]["not_on"]    # rows without ground truth are counted
    assert b.metrics == a.metrics
    assert (tmp_path / "a" / "rows.jsonl").read_bytes() == (tmp_path / "b" / "rows.jsonl").read_bytes()


def test_bad_rows_after_the_head_are_reported_alike(tmp_path):
    lines = [json.dumps(r) for r in mixed_rows(PLAN_WINDOW + 40)]
    lines[PLAN_WINDOW + 7] = "{not json"
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    a = evaluate(str(path), metrics="f1_score", store=False, on_bad_row="skip", on_plan=lambda p: None)
    b = evaluate(str(path), metrics="f1_score", store=False, on_bad_row="skip")
    assert b.run["bad_rows"] == a.run["bad_rows"] and len(b.run["bad_rows"]) == 1
    assert b.run["plan"] == a.run["plan"] and b.run["rows_read"] == a.run["rows_read"]
    with pytest.raises(InputError, match=f"line {PLAN_WINDOW + 8}"):
        evaluate(str(path), metrics="f1_score", store=False)


def test_a_target_and_conversations_across_the_head_count_alike():
    def turns(i: int) -> list[dict]:
        return [m for t in range(3) for m in ({"role": "user", "content": f"q{i} {t}"},
                                             {"role": "assistant", "content": f"a{i} {t}"})]

    # three records a row: the head (PLAN_WINDOW records) ends inside a conversation
    convo = [{"conversation_id": f"c{i}", "messages": turns(i)} for i in range(PLAN_WINDOW // 3 + 40)]
    flat = mixed_rows(PLAN_WINDOW + 30)
    for data, kw in ((convo, {"metrics": "fluency"}), (flat, {"metrics": "f1_score", "target": lambda query: "x"})):
        before = make_plan(data, upfront=True, **kw)
        after = make_plan(data, upfront=False, **kw)
        assert not after.counted
        assert [r.id for r in after.records()] == [r.id for r in before.records()]
        assert after.summary() == before.summary() and after.present == before.present
