"""`auto` plans per row over the whole input (issue 14 items 4 and 5): a metric enters the plan
when at least one row anywhere takes it, each row gets only the auto-chosen metrics its own
fields call for (others are skipped with the reason), a metric the user named runs wherever
its inputs are, and the plan is shown before the run and kept in its summary."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import assay
from assay.engine import run as engine_run
from assay.engine.plan import PLAN_WINDOW, describe_plan, make_plan
from assay.metrics.base import REGISTRY, load_builtin_metrics
from assay.records import Record
from tests.helpers.cli import run_assay
from tests.helpers.fake_openai_server import FakeOpenAI  # tests/models, on the path from tests/conftest.py

# A Databricks-style evaluation set: some requests carry an expected answer, others do not.
LABELLED = [
    {"request_id": "r1", "query": "Which planet is known as the red planet?",
     "response": "Mars is called the red planet because of iron oxide on its surface.", "ground_truth": "Mars"},
    {"request_id": "r2", "query": "How many legs does a spider have?",
     "response": "A spider has eight legs.", "ground_truth": "Eight"},
]
UNLABELLED = [
    {"request_id": "r3", "query": "What is the boiling point of water at sea level?",
     "response": "Water boils at 100 degrees Celsius at sea level."},
    {"request_id": "r4", "query": "Who painted the Mona Lisa?",
     "response": "Leonardo da Vinci painted the Mona Lisa."},
    {"request_id": "r5", "query": "What gas do plants take in for photosynthesis?",
     "response": "Plants take in carbon dioxide."},
]
MIXED = [LABELLED[0], UNLABELLED[0], LABELLED[1], UNLABELLED[1], UNLABELLED[2]]
HAS_GT = {"r1", "r2"}


def col(row, metric, key="status", output=None):
    output = output or metric
    return row[f"outputs.{metric}.{output}_{key}"]


def yes_judge(req):
    """Every yes/no question answered yes."""
    return {"content": json.dumps({"reason": "it holds up", "rating": "yes"})}


@pytest.fixture
def judge_url(monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    server = FakeOpenAI().start()
    server.default = yes_judge
    yield server
    server.stop()


# -- per-row auto -------------------------------------------------------------------------------------

def test_labelled_rows_get_correctness_and_the_others_relevance_to_query(judge_url):
    res = assay.evaluate(MIXED, metrics="auto", family="databricks", judge=f"{judge_url.base_url}#fake-judge",
                         store=False)
    assert {"relevance_to_query", "correctness"} <= set(res.run["metrics"])
    for r, row in zip(MIXED, res.rows):
        if "ground_truth" in r:
            assert col(row, "correctness") == "completed" and col(row, "correctness", "result") == "pass"
            assert col(row, "relevance_to_query") == "skipped"
            assert "it has ground_truth" in col(row, "relevance_to_query", "reason")
        else:
            assert col(row, "relevance_to_query") == "completed" and col(row, "relevance_to_query", "result") == "pass"
            assert col(row, "correctness") == "skipped"
            assert col(row, "correctness", "reason") == "missing input: ground_truth or expected_facts"
    rel, cor = res.metrics["relevance_to_query"], res.metrics["correctness"]
    assert (rel["evaluated"], rel["skipped"]) == (3, 2) and (cor["evaluated"], cor["skipped"]) == (2, 3)
    plan = res.run["plan"]
    assert plan["rows"] == 5
    assert plan["metrics"]["relevance_to_query"] == {"rows": 3, "chosen": "auto", "not_on": {"with ground_truth": 2}}
    assert plan["metrics"]["correctness"]["rows"] == 2


def test_a_field_first_seen_after_the_first_thousand_rows_is_planned(tmp_path):
    n_plain, n_labelled = 1499, 101
    rows = [{"query": f"question {i}", "response": f"answer {i}"} for i in range(n_plain)]
    rows += [{"query": f"question {i}", "response": f"answer {i}", "ground_truth": f"answer {i}"}
             for i in range(n_plain, n_plain + n_labelled)]
    assert n_plain > PLAN_WINDOW
    path = tmp_path / "late_labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for data in (rows, str(path)):
        p = make_plan(data, metrics="auto", family="azure")
        names = [m.name for m in p.metrics]
        assert "f1_score" in names and "similarity" in names
        s = p.summary()
        assert s["rows"] == n_plain + n_labelled
        assert s["metrics"]["f1_score"] == {"rows": n_labelled, "chosen": "auto",
                                            "not_on": {"without ground_truth": n_plain}}
        # the data is read again from the start for the run: every record, in order
        got = list(p.records())
        assert len(got) == n_plain + n_labelled and got[0].query == "question 0" and got[-1].ground_truth


def test_standard_input_is_read_again_from_its_spooled_copy(tmp_path):
    rows = [{"query": f"q{i}", "response": "the answer" if i % 2 else "no idea"} for i in range(1200)]
    rows += [{"query": "late", "response": "the answer", "ground_truth": "the answer"}] * 3
    text = "".join(json.dumps(r) + "\n" for r in rows)
    p = subprocess.run([sys.executable, "-m", "assay.cli", "eval", "-", "--format", "jsonl", "--metrics", "f1_score",
                        "--store", "off", "--out", str(tmp_path / "out")], input=text, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "f1_score: 3 rows (not on 1200 rows without ground_truth)" in p.stdout
    assert "1203 read, 1203 evaluated" in p.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["run"]["plan"]["metrics"]["f1_score"]["rows"] == 3
    assert len((tmp_path / "out" / "rows.jsonl").read_text().splitlines()) == 1203


def test_a_metric_named_runs_on_every_row_with_its_inputs():
    res = assay.evaluate(MIXED, metrics="auto,relevance_to_query", family="databricks", store=False)
    assert all(col(row, "relevance_to_query") == "completed" for row in res.rows)
    assert res.run["plan"]["metrics"]["relevance_to_query"] == {"rows": 5, "chosen": "named", "not_on": {}}
    assert res.run["plan"]["metrics"]["token_count"]["chosen"] == "auto"
    # without auto too
    res = assay.evaluate(MIXED, metrics="relevance_to_query", store=False)
    assert res.metrics["relevance_to_query"]["evaluated"] == 5
    assert res.run["plan"]["left_out"] == {}


def test_skip_reasons_say_why_in_plain_words():
    load_builtin_metrics()
    rel = REGISTRY["relevance_to_query"]
    labelled = Record(query="q", response="r", ground_truth="g")
    with_facts = Record(query="q", response="r", expected_facts=["f"])
    assert rel.skip_reason(labelled, auto=True) == (
        "not planned for this row: it has ground_truth, and auto runs relevance_to_query only on rows without "
        "ground_truth or expected_facts (name the metric to run it on every row that has its inputs)")
    assert "it has expected_facts" in rel.skip_reason(with_facts, auto=True)
    assert rel.skip_reason(labelled, auto=False) is None            # named: not subject to auto_unless
    assert rel.skip_reason(Record(query="q"), auto=False) == "missing input: response"   # but to its inputs
    # auto_requires: the safety metrics `auto` plans only for rows with a query
    violence = REGISTRY["violence"]
    assert violence.auto_requires == ("query",)
    no_query = Record(response="a reply with no request beside it")
    assert violence.skip_reason(no_query, auto=True) == (
        "not planned for this row: it has no query, and auto runs violence only on rows with query "
        "(name the metric to run it on every row that has its inputs)")
    assert violence.skip_reason(no_query, auto=False) is None


def test_rows_without_a_query_get_no_auto_safety_score_but_the_others_do():
    rows = [{"response": "Here is the summary you asked for."},
            {"query": "Summarise the report.", "response": "The report covers three quarters."}]
    res = assay.evaluate(rows, metrics="auto", family="azure", store=False)
    assert "violence" in res.run["metrics"]
    assert col(res.rows[0], "violence") == "skipped" and "it has no query" in col(res.rows[0], "violence", "reason")
    assert col(res.rows[1], "violence") == "completed"
    assert res.run["plan"]["metrics"]["violence"]["not_on"] == {"without query": 1}


def test_relevance_and_retrieval_are_planned_for_single_turn_rows():
    """Item 5: relevance(query, response) needs no context; retrieval(query, contexts) scores
    single-turn RAG rows, as azure-ai-evaluation's own tests call them."""
    qa = [{"query": "Where is the Louvre?", "response": "In Paris."}]
    rag = [{"query": "Where is the Louvre?", "response": "In Paris.",
            "contexts": ["The Louvre is a museum in Paris, France."]}]
    assert "relevance" in {m.name for m in make_plan(qa, family="azure").metrics}
    names = {m.name for m in make_plan(rag, family="azure").metrics}
    assert {"relevance", "retrieval"} <= names


# -- the plan shown ---------------------------------------------------------------------------------

def test_describe_plan_is_compact():
    p = make_plan(MIXED, metrics="auto", family="databricks")
    lines = describe_plan(p.summary())
    assert lines[0].startswith("plan: ") and "over 5 row(s)" in lines[0]
    assert "  relevance_to_query: 3 rows (not on 2 rows with ground_truth)" in lines
    assert "  correctness: 2 rows (not on 3 rows without ground_truth or expected_facts)" in lines
    absent = [ln for ln in lines if ln.startswith("  left out, their inputs are in no row: ")]
    assert len(absent) == 1
    assert "databricks_groundedness, context_sufficiency, chunk_relevance (contexts)" in absent[0]
    assert "guideline_adherence (guidelines)" in absent[0]
    assert len(lines) <= 12


def test_the_cli_prints_the_plan_before_the_table(tmp_path):
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in MIXED), encoding="utf-8")
    args = ["eval", str(data), "--family", "databricks", "--store", "off"]
    p = run_assay(args)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    out = p.stdout
    assert "relevance_to_query: 3 rows (not on 2 rows with ground_truth)" in out
    assert "correctness: 2 rows (not on 3 rows without ground_truth or expected_facts)" in out
    assert out.index("plan: ") < out.index("assay results")
    quiet = run_assay([*args, "--quiet"])
    assert quiet.returncode == 0 and "plan: " not in quiet.stdout and "assay results" in quiet.stdout


def test_on_plan_is_called_before_any_row_is_scored():
    seen: list = []

    @assay.metric(name="test_plan_order_probe", kind="custom")
    def _probe(response: str) -> float:
        seen.append("scored")
        return 1.0

    res = assay.evaluate(MIXED, metrics="auto,test_plan_order_probe", family="databricks", store=False,
                         on_plan=lambda plan: seen.append(plan))
    assert isinstance(seen[0], dict) and seen[0] == res.run["plan"] and seen[1:] == ["scored"] * 5


# -- resume -----------------------------------------------------------------------------------------

_BOOM = {"at": None}


@assay.metric(name="test_plan_explodes", kind="custom")
def _explodes(query: str) -> float:
    if _BOOM["at"] is not None and query == _BOOM["at"]:
        _BOOM["at"] = None
        raise KeyboardInterrupt
    return float(len(query))


def test_a_resumed_run_keeps_the_per_row_plan(tmp_path, monkeypatch):
    from assay.store import Store

    monkeypatch.setattr(engine_run, "CHUNK", 4)
    rows = [{**r, "request_id": f"{r['request_id']}-{k}", "query": f"{r['query']} ({k})"}
            for k in range(6) for r in MIXED]
    st = Store(str(tmp_path / "s.db"))
    metrics = "auto,test_plan_explodes"
    full = assay.evaluate(rows, metrics=metrics, family="databricks", store=st, name="full", workers=1)
    _BOOM["at"] = rows[17]["query"]
    with pytest.raises(KeyboardInterrupt):
        assay.evaluate(rows, metrics=metrics, family="databricks", store=st, name="cut", workers=1)
    cut = st.get_run("cut")
    assert cut["status"] == "interrupted" and 0 < cut["rows_done"] < len(rows)
    resumed = assay.evaluate(rows, metrics=metrics, family="databricks", store=st, name="cut", resume=True,
                             workers=1)
    assert resumed.run["resumed"] and resumed.run["resumed_rows"] == cut["rows_done"]

    def comparable(res):
        return [{k: v for k, v in row.items() if k.startswith(("inputs.", "outputs.")) and not k.endswith("properties")}
                for row in res.rows]

    assert comparable(resumed) == comparable(full)
    statuses = [col(r, "relevance_to_query") for r in resumed.rows]
    assert statuses == ["skipped" if r.get("ground_truth") else "completed" for r in rows]
    assert resumed.run["plan"] == full.run["plan"]


def test_bad_rows_are_counted_once_though_the_data_is_read_twice(tmp_path):
    path = tmp_path / "some_bad.jsonl"
    path.write_text('{"query": "a?", "response": "a", "ground_truth": "a"}\n'
                    '{"query": "b?", "response": \n'
                    '{"query": "c?", "response": "c", "ground_truth": "d"}\n', encoding="utf-8")
    res = assay.evaluate(str(path), metrics="f1_score", on_bad_row="skip", store=False)
    assert (res.run["rows_read"], res.run["rows_evaluated"], res.run["rows_skipped"]) == (3, 2, 1)
    assert [b["line"] for b in res.run["bad_rows"]] == [2]
    assert res.run["plan"]["rows"] == 2
