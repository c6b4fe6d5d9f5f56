"""``assay eval --mlflow URI``: the run is read back from a real MLflow file store with MLflow's
own client (params, metrics, artifacts, tags); a URI that cannot be used stops the command
before anything is evaluated, with one line and exit 2."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mlflow", reason="--mlflow needs assay[mlflow] (mlflow-skinny)")

from assay.store import open_store  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"
ROWS = [
    {"id": "a", "query": "Capital of France?", "response": "Paris is the capital.", "ground_truth": "Paris is the capital."},
    {"id": "b", "query": "Capital of Germany?", "response": "It is Munich.", "ground_truth": "Berlin is the capital."},
    {"id": "c", "query": "Capital of Italy?", "response": "Rome is the capital.", "ground_truth": "Rome is the capital."},
]


def assay_eval(tmp_path: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]), **extra_env}
    env.pop("MLFLOW_ALLOW_FILE_STORE", None)      # the command itself must allow the store it was given
    return subprocess.run([sys.executable, "-m", "assay.cli", "eval", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    p = tmp_path / "capitals.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return p


def test_a_run_logged_to_a_file_store_opens_with_mlflows_client(tmp_path, data, monkeypatch):
    store = tmp_path / "assay.db"
    uri = f"file:{tmp_path / 'mlruns'}"
    p = assay_eval(tmp_path, str(data), "-m", "f1_score,bleu", "-t", "f1_score=0.6", "--name", "capitals",
                   "--store", str(store), "--mlflow", uri, "-q")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert "logged to MLflow" in p.stdout

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("capitals")
    assert exp is not None
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"

    saved = open_store(str(store)).get_run("capitals")
    summary = saved["summary"]
    params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
    assert params["metrics"] == "f1_score,bleu"
    assert params["threshold.f1_score"] == "0.6"
    assert params["data.fingerprint"] == saved["data_fingerprint"] and len(saved["data_fingerprint"]) == 64
    assert params["data.format"] == "jsonl" and params["judge"] == "none"
    assert tags["assay.run_id"] == saved["id"] and run.info.run_name == saved["id"]

    aggregates = saved["aggregates"]
    assert metrics["f1_score.mean"] == pytest.approx(aggregates["f1_score"]["mean"])
    assert metrics["f1_score.pass_rate"] == pytest.approx(2 / 3)
    assert metrics["f1_score.failed"] == 1 and metrics["f1_score.evaluated"] == 3
    assert metrics["f1_score.ci95_low"] <= metrics["f1_score.mean"] <= metrics["f1_score.ci95_high"]
    assert metrics["bleu.mean"] == pytest.approx(aggregates["bleu"]["mean"])
    assert metrics["rows_evaluated"] == 3 and metrics["rows_errored"] == 0
    assert summary["rows_evaluated"] == 3

    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert names == {"summary.json", "rows.jsonl", "rows_table.json"}
    got = Path(client.download_artifacts(run.info.run_id, "rows.jsonl", str(tmp_path / "dl")))
    rows = [json.loads(line) for line in got.read_text().splitlines()]
    assert [r["inputs.id"] for r in rows] == ["a", "b", "c"]
    assert [r["outputs.f1_score.f1_score_passed"] for r in rows] == [True, False, True]
    got = Path(client.download_artifacts(run.info.run_id, "summary.json", str(tmp_path / "dl")))
    assert json.loads(got.read_text())["metrics"]["f1_score"]["mean"] == pytest.approx(aggregates["f1_score"]["mean"])
    table = json.loads(Path(client.download_artifacts(run.info.run_id, "rows_table.json", str(tmp_path / "dl")))
                       .read_text())
    assert "outputs.f1_score.f1_score" in table["columns"] and len(table["data"]) == 3

    # a second run goes to the same experiment
    p = assay_eval(tmp_path, str(data), "-m", "f1_score", "--name", "capitals", "--store", str(store),
                   "--mlflow", uri, "-q")
    assert p.returncode == 0, p.stderr
    assert len(client.search_runs([exp.experiment_id])) == 2


def test_without_a_name_or_store_the_run_goes_to_the_assay_experiment(tmp_path, data, monkeypatch):
    uri = str(tmp_path / "plain-folder")            # a folder is a file store too
    p = assay_eval(tmp_path, str(data), "-m", "f1_score", "--mlflow", uri, "-q", ASSAY_STORE="off")
    assert p.returncode == 0, p.stderr
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("assay").experiment_id])
    assert len(run.data.params["data.fingerprint"]) == 64        # computed from the file itself
    assert "assay.run_id" not in run.data.tags
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"summary.json", "rows.jsonl",
                                                                        "rows_table.json"}


@pytest.mark.parametrize("uri,says", [
    ("http://127.0.0.1:9", "cannot connect to 127.0.0.1:9"),
    ("sqlite:///{tmp}/mlflow.db", "full mlflow package"),
    ("", "needs a tracking URI"),
])
def test_an_unusable_uri_stops_before_the_run(tmp_path, data, uri, says):
    store = tmp_path / "assay.db"
    if "sqlite" in uri and importlib.util.find_spec("alembic") is not None:
        pytest.skip("the full mlflow package (alembic) is installed: a database URI works here")
    p = assay_eval(tmp_path, str(data), "-m", "f1_score", "--store", str(store),
                   "--mlflow", uri.format(tmp=tmp_path), "-q")
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], p.stderr
    assert not store.exists() or open_store(str(store)).list_runs() == []   # nothing was evaluated


def test_judge_params_and_usage_are_logged(tmp_path, data, fake, monkeypatch):
    uri = f"file:{tmp_path / 'mlruns'}"
    p = assay_eval(tmp_path, str(data), "-m", "coherence", "--judge", f"{fake.base_url}#fake-judge",
                   "--name", "judged", "--mlflow", uri, "-q", ASSAY_CACHE="off")
    assert p.returncode == 0, p.stderr
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("judged").experiment_id])
    assert "fake-judge" in run.data.params["judge"] and run.data.params["judge_source"] == "given"
    assert float(run.data.params["threshold.coherence"]) == 3
    assert run.data.metrics["judge.calls"] == len(ROWS) == len(fake.chat_requests)
    assert run.data.metrics["judge.prompt_tokens"] == 100 * len(ROWS)      # the fake's usage per call
    assert run.data.metrics["coherence.mean"] == 4.0


def test_a_deleted_experiment_is_refused_before_the_run(tmp_path, data, monkeypatch):
    uri = f"file:{tmp_path / 'mlruns'}"
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    client.delete_experiment(client.create_experiment("gone"))
    store = tmp_path / "assay.db"
    p = assay_eval(tmp_path, str(data), "-m", "f1_score", "--name", "gone", "--store", str(store),
                   "--mlflow", uri, "-q")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "experiment 'gone' is deleted" in p.stderr
    assert open_store(str(store)).list_runs() == []
