"""`assay judge align` with a deliberately mis-tuned scripted judge: the examples from the
reviewers' labels reach its prompt within the budget, the held-out agreement is measured with an
interval, the aligned judge is kept (and a run and a judge check can name its file) only when
the interval excludes no change."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from typer.testing import CliRunner

import assay
from assay.cli.main import app
from assay.errors import AssayError
from assay.store import Store
from assay.store.review import ReviewLog
from tests.helpers.review_runs import make_run, row

MARK = "The people's verdict"


def item(req) -> int:
    text = req["body"]["messages"][-1]["content"]
    return int(re.search(r"<response>\n?item (\d+) is a thing", text).group(1))


def learner(req):
    """Mis-tuned: fails every third item whatever it says; with worked examples in its system
    message it judges as the people do (even items pass)."""
    system = req["body"]["messages"][0]["content"]
    n = item(req)
    ok = n % 2 == 0 if MARK in system else n % 3 != 0
    return {"content": json.dumps({"reason": "r", "score": 5 if ok else 1})}


def stubborn(req):
    """Mis-tuned and deaf to examples."""
    return {"content": json.dumps({"reason": "r", "score": 5 if item(req) % 3 != 0 else 1})}


@pytest.fixture
def labelled(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")
    monkeypatch.chdir(tmp_path)
    path = str(tmp_path / "a.db")
    st = Store(path)
    rid = make_run(st, n=40)
    log = ReviewLog(st)
    for i in log.create("people", rid, "groundedness", sample=40)["idxs"]:
        log.label("people", i, "ann", "pass" if i % 2 == 0 else "fail")
    st.close()
    return path


def invoke(*args):
    return CliRunner().invoke(app, list(args))


def test_an_aligned_judge_is_kept_when_held_out_agreement_rises(labelled, fake, tmp_path):
    fake.default = learner
    spec = f"{fake.base_url}#fake-judge"
    res = invoke("judge", "align", "--judge", spec, "--data", "review:people", "--budget", "3000", "--json",
                 "--store", labelled, "--out", str(tmp_path / "aligned.yaml"))
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["kept"] and rep["held_out"] == 20 and rep["kappa_after"] == 1.0 and rep["kappa_before"] < 0.5
    assert rep["change"]["ci_low"] > 0
    doc = yaml.safe_load((tmp_path / "aligned.yaml").read_text())
    assert doc["judge"] == spec and doc["metric"] == "groundedness" and doc["examples"]
    assert sum(len(e) for e in doc["examples"]) <= 3000                       # within the budget
    assert all(MARK in e and "<response>" in e for e in doc["examples"])
    # a judge check names the file ...
    res = invoke("judge", "check", "--judge", str(tmp_path / "aligned.yaml"), "--data", "review:people", "--json",
                 "--store", labelled, "--no-save")
    assert json.loads(res.output)["metrics"]["groundedness"]["agreement"] == 1.0
    # ... and so does a run: every judge call carries the examples
    fake.requests.clear()
    rows = [{k.removeprefix("inputs."): v for k, v in row(i).items()} for i in (1, 6)]
    for r in rows:
        r["contexts"] = r.pop("context")
    res2 = assay.evaluate(rows, metrics="groundedness", judge=str(tmp_path / "aligned.yaml"), store=False)
    # unaligned it would pass item 1 and fail item 6; aligned it judges them as the people do
    assert [r["outputs.groundedness.groundedness_result"] for r in res2.rows] == ["fail", "pass"]
    assert fake.chat_requests and all(MARK in q["body"]["messages"][0]["content"] for q in fake.chat_requests)
    assert "aligned:aligned.yaml" in str(res2.run.get("judge"))


def test_a_judge_deaf_to_examples_is_not_kept(labelled, fake, tmp_path):
    fake.default = stubborn
    res = invoke("judge", "align", "--judge", f"{fake.base_url}#fake-judge", "--data", "review:people", "--json",
                 "--store", labelled, "--out", str(tmp_path / "aligned.yaml"))
    assert res.exit_code == 1
    rep = json.loads(res.output)
    assert not rep["kept"] and rep["file"] is None and rep["kappa_after"] == rep["kappa_before"]
    assert not (tmp_path / "aligned.yaml").exists()


def test_no_example_fits_a_tiny_budget(labelled, fake, tmp_path):
    fake.default = learner
    res = invoke("judge", "align", "--judge", f"{fake.base_url}#fake-judge", "--data", "review:people",
                 "--budget", "100", "--store", labelled)
    assert isinstance(res.exception, AssayError) and "no example fits in 100 characters" in str(res.exception)
