"""`assay runs / show / compare / export / delete` as a user runs them."""

from __future__ import annotations

import json
import os

import pandas as pd

from tests.helpers.cli import run_assay


def run(*args, store):
    env = {**os.environ, "ASSAY_STORE": str(store)}
    p = run_assay(args, env=env)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def _data(path, shift):
    with open(path, "w") as fh:
        for i in range(20):
            fh.write(json.dumps({"id": str(i), "query": f"q{i}", "ground_truth": "cat dog fish bird",
                                 "response": "cat dog fish bird" if i % 4 else ("cat x y z" if shift else "cat dog fish bird")}) + "\n")
    return str(path)


def test_history_compare_export_delete(tmp_path):
    store = tmp_path / "runs.db"
    a = _data(tmp_path / "a.jsonl", shift=False)
    b = _data(tmp_path / "b.jsonl", shift=True)
    assert run("eval", a, "-m", "f1_score", "--name", "baseline", store=store).returncode == 0
    p = run("eval", b, "-m", "f1_score", "--name", "new-retriever", store=store)
    assert p.returncode == 0 and "(new-retriever) saved in" in p.stdout

    p = run("runs", store=store)
    assert p.returncode == 0
    assert "baseline" in p.stdout and "new-retriever" in p.stdout and "completed" in p.stdout

    p = run("show", "baseline", store=store)
    assert p.returncode == 0 and "f1_score" in p.stdout and "20 read, 20 evaluated" in p.stdout

    p = run("compare", "baseline", "new-retriever", store=store)
    assert p.returncode == 0, p.stderr
    # 5 of 20 rows fall from 1.0 to 0.25: delta -0.1875, significant
    assert "-0.188*" in p.stdout
    assert "rows worse in new-retriever" in p.stdout and "0.250 fail" in p.stdout

    p = run("export", "new-retriever", "-o", str(tmp_path / "x.parquet"), store=store)
    assert p.returncode == 0
    df = pd.read_parquet(tmp_path / "x.parquet")
    assert len(df) == 20 and df["outputs.f1_score.f1_score"].min() == 0.25
    p = run("export", "new-retriever", "-o", str(tmp_path / "x.json"), store=store)
    assert json.loads((tmp_path / "x.json").read_text())["metrics"]["f1_score.f1_score"] == 0.8125

    p = run("delete", "baseline", store=store)
    assert p.returncode == 2 and "--yes" in p.stderr
    assert run("delete", "baseline", "--yes", store=store).returncode == 0
    p = run("show", "baseline", store=store)
    assert p.returncode == 2 and "no run 'baseline'" in p.stderr


def test_unknown_run_and_store_off_are_clear_errors(tmp_path):
    p = run("compare", "x", "y", store=tmp_path / "empty.db")
    assert p.returncode == 2 and "no run 'x'" in p.stderr
    p = run("runs", store="off")
    assert p.returncode == 2 and "turned off" in p.stderr


def test_compare_counts_fewer_tokens_as_better(tmp_path):
    """Token counts are lower-is-better: a run whose answers were cut short is better, not worse (issue 14, item 3)."""
    store = tmp_path / "runs.db"
    long_answer = "The capital of France is Paris, a city on the Seine with many museums and cafes. " * 3
    for name, answer in (("long", long_answer), ("short", "Paris.")):
        with open(tmp_path / f"{name}.jsonl", "w") as fh:
            for i in range(12):
                fh.write(json.dumps({"id": str(i), "query": f"What is the capital of France? ({i})",
                                     "response": answer}) + "\n")
        p = run("eval", str(tmp_path / f"{name}.jsonl"), "-m", "token_count", "--name", name, store=store)
        assert p.returncode == 0, p.stderr

    p = run("compare", "long", "short", "--format", "json", store=store)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    by_output = {m["output"]: m for m in doc["metrics"]}
    for output in ("total_token_count", "total_output_token_count"):
        assert by_output[output]["higher_is_better"] is False
        d = by_output[output]["deltas"][1]
        assert d["delta"] < 0 and d["significant"] and d["better"] is True
    worse = next(iter(doc["worse_rows"].values()))
    assert worse["total_token_count"] == [] and worse["total_output_token_count"] == []

    p = run("compare", "long", "short", store=store)
    assert p.returncode == 0, p.stderr
    assert "rows worse in short" not in p.stdout
    assert "total_token_count ↓" in p.stdout
