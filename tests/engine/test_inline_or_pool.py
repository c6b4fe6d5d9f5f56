"""With the default number of workers, a run scores its first chunk inline and starts worker
processes only when its synchronous metrics cost enough a row to be worth sending away; the
scores are the same either way. A number of workers given is always used."""

from __future__ import annotations

import multiprocessing as mp

import pytest

import assay
import assay.engine.run as run

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="worker processes need fork")

ROWS = [{"id": str(i), "response": f"the answer is {i % 13} " * (1 + i % 5), "ground_truth": f"the answer is {i % 7}"}
        for i in range(run.CHUNK * 3 + 40)]


@pytest.fixture
def pools(monkeypatch):
    started = []
    real = run.make_pool

    def counted(n, *args, **kwargs):
        started.append(n)
        return real(n, *args, **kwargs)

    monkeypatch.setattr(run, "make_pool", counted)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    return started


def evaluate(**kw):
    return assay.evaluate(ROWS, metrics="f1_score,bleu", store=False, **kw)


def test_cheap_metrics_are_scored_inline(pools, monkeypatch):
    inline = evaluate(workers=1)
    assert pools == []
    monkeypatch.setattr(run, "INLINE_BELOW_S", 1e9)     # every metric counts as cheap
    default = evaluate()
    assert pools == []
    assert default.rows == inline.rows and default.metrics == inline.metrics


def test_costly_metrics_go_to_worker_processes(pools, monkeypatch):
    inline = evaluate(workers=1)
    monkeypatch.setattr(run, "INLINE_BELOW_S", 0.0)     # every metric counts as costly
    default = evaluate()
    assert pools == [2]
    assert default.rows == inline.rows and default.metrics == inline.metrics


def test_workers_given_are_used_whatever_the_cost(pools, monkeypatch):
    monkeypatch.setattr(run, "INLINE_BELOW_S", 1e9)
    inline = evaluate(workers=1)
    pooled = evaluate(workers=2)
    assert pools == [2]
    assert pooled.rows == inline.rows


def test_a_small_first_chunk_does_not_decide(pools, monkeypatch):
    monkeypatch.setattr(run, "INLINE_BELOW_S", 0.0)
    monkeypatch.setattr(run, "MEASURE_ROWS", run.CHUNK + 1)   # no chunk is big enough to measure
    res = evaluate()
    assert pools == [] and len(res.rows) == len(ROWS)


def test_records_packed_for_the_workers_come_back_equal():
    import pickle

    from assay.engine.run import PackedRecords
    from assay.records import Record

    records = [
        Record(id="1", query="q", response="r", ground_truth="g"),
        Record(response="", contexts=[{"content": "a doc", "doc_uri": "u"}], usage={"input_tokens": 3}, turn=0,
               conversation_id="c", extra={"note": [1, 2]}),
        Record(history=[{"role": "user", "content": "hi"}], tool_calls=[{"name": "f", "arguments": {"x": 1}}]),
        Record(),
    ]
    records[0].response = "changed after validation"
    packed = PackedRecords.pack(records)
    assert packed is not None
    back = pickle.loads(pickle.dumps(packed)).unpack()
    assert back == records
    for a, b in zip(back, records):
        assert type(a) is Record and a.__dict__ == b.__dict__ and list(a.__dict__) == list(b.__dict__)
        assert a.model_fields_set == b.model_fields_set
        assert a.model_dump() == b.model_dump() and a.model_dump(exclude_unset=True) == b.model_dump(exclude_unset=True)


def test_records_not_in_the_usual_form_are_sent_as_they_are():
    from assay.engine.run import PackedRecords
    from assay.records import Record

    class MyRecord(Record):
        pass

    assert PackedRecords.pack([Record(response="r"), MyRecord(response="r")]) is None
    odd = Record(response="r")
    object.__setattr__(odd, "__dict__", dict(reversed(list(odd.__dict__.items()))))
    assert PackedRecords.pack([odd]) is None
