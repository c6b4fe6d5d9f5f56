"""A run's caps (issue 16, item 3): ``max_errors`` and ``max_cost`` stop a run cleanly, with
what it has saved, the run left ``interrupted`` with the reason, and a resume with a raised cap
goes on; the errored rows, with their reasons, are the dead-letter ``errors.jsonl``."""

from __future__ import annotations

import json

import pytest

import assay
from assay.engine import run as engine_run
from assay.engine.budget import ERRORS_FILE, Budget, check_caps, dead_letter
from assay.errors import AssayError, BudgetExceeded, RunIncomplete
from assay.scores import Score
from assay.store import Store

ROWS = [{"query": f"question {i}", "ground_truth": f"answer {i}"} for i in range(40)]
JUDGED = [{"query": r["query"], "response": r["ground_truth"]} for r in ROWS]
PRICE = {"judge_price": "1000,1000"}     # 100 prompt + 10 completion tokens a call: $0.11 a call


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    monkeypatch.setattr(engine_run, "CHUNK", 4)
    for k in ("ASSAY_JUDGE", "ASSAY_JUDGE_PRICE", "ASSAY_TARGET_PRICE"):
        monkeypatch.delenv(k, raising=False)


def odd_fails(query: str) -> str:
    """A target that raises on every odd row."""
    n = int(query.split()[1])
    if n % 2:
        raise ValueError(f"no answer for row {n}")
    return f"answer {n}"


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_max_errors_stops_the_run_keeps_its_rows_and_a_raised_cap_resumes_it(tmp_path):
    st = Store(str(tmp_path / "s.db"))
    out = tmp_path / "out"
    with pytest.raises(BudgetExceeded) as ei:
        assay.evaluate(ROWS, target=odd_fails, metrics="f1_score", store=st, name="capped", out=out, max_errors=5)
    exc = ei.value
    assert isinstance(exc, RunIncomplete) and exc.exit_code == 3 and exc.cap == "max_errors"
    assert "6 rows errored, reaching --max-errors 5" in str(exc) and "--resume" in str(exc)
    run = st.get_run("capped")
    assert run["status"] == "interrupted" and "--max-errors 5" in run["error"]
    # two errored rows a chunk of 4: the third chunk reaches 5, and the rest is never scored
    assert run["rows_done"] == 12 == exc.rows_done and st.count_rows(run["id"]) == 12
    assert len(read_jsonl(out / "rows.jsonl")) == 12
    letters = read_jsonl(out / ERRORS_FILE)
    assert [x["row"] for x in letters] == [1, 3, 5, 7, 9, 11]
    assert all(x["kind"] == "row" and x["target_error"] for x in letters)
    assert letters[0]["errors"][0]["metric"] == "f1_score"
    assert "no answer for row 1" in letters[0]["errors"][0]["reason"]
    assert letters[0]["inputs"] == {"inputs.id": "1", "inputs.query": "question 1", "inputs.ground_truth": "answer 1"}

    # the same cap again: the run has 6 errored rows already, so it stops before scoring any
    with pytest.raises(BudgetExceeded):
        assay.evaluate(ROWS, target=odd_fails, metrics="f1_score", store=st, name="capped", resume=True,
                       max_errors=5)
    assert st.get_run(run["id"])["rows_done"] == 12

    res = assay.evaluate(ROWS, target=odd_fails, metrics="f1_score", store=st, name="capped", out=out,
                         resume=True, max_errors=100)
    assert res.run["run_id"] == run["id"] and res.run["resumed_rows"] == 12
    assert res.run["rows_errored"] == 20 and st.get_run(run["id"])["status"] == "completed"
    assert [x["row"] for x in read_jsonl(out / ERRORS_FILE)] == list(range(1, 40, 2))   # replayed ones too


def test_a_cap_reached_on_the_last_chunk_does_not_stop_a_finished_run(tmp_path):
    res = assay.evaluate(ROWS, target=odd_fails, metrics="f1_score", store=False, max_errors=20)
    assert res.run["rows_errored"] == 20 and res.run["rows_evaluated"] == 40


def test_max_cost_stops_the_judge_spending_and_counts_every_session(fake, tmp_path):
    fake.default = {"content": '{"score": 4, "reason": "ok"}'}
    st = Store(str(tmp_path / "s.db"))
    judge = f"{fake.base_url}#m"
    data = JUDGED
    with pytest.raises(BudgetExceeded, match=r"reaching --max-cost \$1 \(max_cost\)") as ei:
        assay.evaluate(data, metrics="coherence", judge=judge, concurrency=2, store=st, name="paid",
                       options=PRICE, max_cost=1.0)
    assert ei.value.cap == "max_cost" and "higher --max-cost" in str(ei.value)
    run = st.get_run("paid")
    done = run["rows_done"]
    assert run["status"] == "interrupted" and "--max-cost" in run["error"]
    assert 0 < done < len(data) and done % 4 == 0
    asked = len(fake.chat_requests)
    assert asked < len(data)                     # it stopped asking the judge, not only writing
    assert asked * 0.11 >= 1.0                   # ... once the calls it paid for reached $1
    spent = (st.sessions(run["id"])[-1]["usage"] or {}).get("cost_usd")
    assert 1.0 <= spent <= asked * 0.11 + 1e-9   # a request cancelled in flight may not have been counted

    # resumed with the same cap: the earlier session's spending counts, so nothing more is asked
    with pytest.raises(BudgetExceeded):
        assay.evaluate(data, metrics="coherence", judge=judge, concurrency=2, store=st, name="paid",
                       options=PRICE, max_cost=1.0, resume=True)
    assert len(fake.chat_requests) == asked

    res = assay.evaluate(data, metrics="coherence", judge=judge, concurrency=2, store=st, name="paid",
                         options=PRICE, max_cost=100.0, resume=True)
    assert res.run["resumed_rows"] == done and res.metrics["coherence"]["evaluated"] == len(data)
    assert st.get_run(run["id"])["status"] == "completed"


def test_max_cost_needs_the_judges_price(fake, tmp_path):
    with pytest.raises(AssayError, match="needs the judge's price") as ei:
        assay.evaluate(JUDGED[:3], metrics="coherence", judge=f"{fake.base_url}#m", store=False, max_cost=1)
    assert not isinstance(ei.value, RunIncomplete) and ei.value.exit_code == 2
    assert fake.chat_requests == []


def test_the_targets_tokens_count_at_its_price(monkeypatch):
    monkeypatch.setenv("ASSAY_TARGET_PRICE", "1000,0")

    def paid(query: str) -> dict:
        return {"response": "an answer", "usage": {"input_tokens": 500, "output_tokens": 5}}   # $0.50 a row

    with pytest.raises(BudgetExceeded, match="reaching --max-cost") as ei:
        assay.evaluate(ROWS, target=paid, metrics="f1_score", store=False, max_cost=3)
    assert ei.value.rows_done == 8            # $2 after one chunk, $4 after two: the third is not waited for


@pytest.mark.parametrize("cost, errors, what", [(0, None, "max_cost"), (-1, None, "max_cost"),
                                                (float("nan"), None, "max_cost"), ("x", None, "max_cost"),
                                                (True, None, "max_cost"), (None, 0, "max_errors"),
                                                (None, "2.5", "max_errors"), (None, True, "max_errors")])
def test_bad_caps_are_refused_naming_the_option(cost, errors, what):
    with pytest.raises(AssayError, match=what):
        check_caps(cost, errors)
    with pytest.raises(AssayError, match=what):
        assay.evaluate(ROWS[:2], metrics="f1_score", store=False, max_cost=cost, max_errors=errors)


def test_budget_and_dead_letter_units():
    assert check_caps("2.5", "3") == (2.5, 3)
    b = Budget(1.0, judge_usage=lambda: {"cost_usd": 0.4}, prior_cost=0.5)
    assert b.over(0) is None
    b.prior_cost = 0.6
    assert b.over(0).cap == "max_cost"
    assert Budget(None, 2).over(1) is None and Budget(None, 2).over(2).cap == "max_errors"
    ok = {"m": {"m": Score(1.0, 1.0, True, "pass", "fine", "ok")}}
    bad = {"m": {"m": Score(None, None, None, "unknown", "judge refused", "error")}}
    assert dead_letter(0, {"inputs.query": "q"}, ok) is None
    letter = dead_letter(3, {"inputs.query": "q"}, {**ok, "n": bad["m"]}, row_id="r3")
    assert letter["row"] == 3 and letter["row_id"] == "r3"
    assert letter["errors"] == [{"metric": "n", "output": "m", "reason": "judge refused"}]


def test_the_caps_hold_on_ray_too(tmp_path):
    """The caps are checked in the driver's ChunkRunner as each chunk comes back, so the Ray
    engine stops the same way, at the same row."""
    import sys

    ray = pytest.importorskip("ray", reason="needs ray (pip install 'assay[ray]')")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])   # the target travels by value
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        st = Store(str(tmp_path / "s.db"))
        with pytest.raises(BudgetExceeded, match="--max-errors 5") as ei:
            assay.evaluate(ROWS, target=odd_fails, metrics="f1_score", store=st, name="ray-capped",
                           out=tmp_path / "out", max_errors=5, engine="ray")
        run = st.get_run("ray-capped")
        assert run["status"] == "interrupted" and run["rows_done"] == 12 == ei.value.rows_done
        assert [x["row"] for x in read_jsonl(tmp_path / "out" / ERRORS_FILE)] == [1, 3, 5, 7, 9, 11]
        res = assay.evaluate(ROWS, target=odd_fails, metrics="f1_score", store=st, name="ray-capped",
                             resume=True, max_errors=50, engine="ray")
        assert res.run["rows_evaluated"] == 40 and res.run["rows_errored"] == 20
    finally:
        ray.shutdown()
