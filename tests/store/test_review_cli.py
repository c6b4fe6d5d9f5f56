"""`assay review create / list / agreement` and `assay judge check --data review:NAME`, in process."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from assay.cli.main import app
from assay.errors import AssayError
from assay.store import Store
from assay.store.review import ReviewLog
from tests.helpers.review_runs import judge_passes, make_run, rule_passes


def invoke(*args):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def reviewed(tmp_path):
    path = str(tmp_path / "r.db")
    st = Store(path)
    rid = make_run(st, n=30)
    st.close()
    return path, rid


def test_create_list_and_agreement(reviewed):
    path, rid = reviewed
    res = invoke("review", "create", "q", "--run", rid, "--metric", "groundedness", "--sample", "12",
                 "--from", "disagreements", "--against", "exact", "--store", path)
    assert res.exit_code == 0, res.output
    assert "review queue q: 12 disagreements rows" in res.output
    st = Store(path)
    log = ReviewLog(st)
    idxs = log.queue("q")["idxs"]
    assert all(judge_passes(i) != rule_passes(i) for i in idxs)
    for i in idxs:     # ann labels as the rule says, bob the same except on two rows
        truth = "pass" if rule_passes(i) else "fail"
        log.label("q", i, "ann", truth)
        log.label("q", i, "bob", truth if i not in idxs[:2] else ("fail" if truth == "pass" else "pass"))
    st.close()
    res = invoke("review", "list", "--json", "--store", path)
    (q,) = json.loads(res.output)
    assert q["name"] == "q" and q["labels"] == 24
    res = invoke("review", "agreement", "q", "--json", "--store", path)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    assert rep["reviewers"] == ["ann", "bob"] and rep["labelled_rows"] == 12
    # 10 of 12 agree; every row is a disagreement of judge and rule, and ann follows the rule:
    # the judge disagrees with ann on every row: kappa -1 (p_o = 0, p_e = 1/2 when both split evenly)
    assert rep["between_reviewers"]["cohen_kappa"]["value"] > 0.5
    assert rep["judge_vs_each"]["ann"]["value"] < 0
    res = invoke("review", "agreement", "q", "--store", path)
    assert "judge vs ann" in res.output and "cohen_kappa" in res.output


def test_bad_queue_requests_are_one_line_errors(reviewed):
    path, rid = reviewed
    res = invoke("review", "create", "q", "--run", rid, "--metric", "groundedness", "--from", "sideways",
                 "--store", path)
    assert res.exit_code != 0 and isinstance(res.exception, AssayError) and "--from 'sideways'" in str(res.exception)
    res = invoke("review", "agreement", "nope", "--store", path)
    assert isinstance(res.exception, AssayError) and "no review queue 'nope'" in str(res.exception)


def test_judge_check_measures_a_judge_on_the_labelled_rows(reviewed, fake, monkeypatch):
    monkeypatch.setenv("ASSAY_CACHE", "off")      # two judges on one endpoint: no cached answers
    path, rid = reviewed
    st = Store(path)
    log = ReviewLog(st)
    q = log.create("g", rid, "groundedness", sample=30)
    for i in q["idxs"][:20]:
        log.label("g", i, "ann", "pass" if i % 2 == 0 else "fail")    # people: even items are grounded
    st.close()

    def even_judge(req):       # a judge that agrees with the people
        text = req["body"]["messages"][-1]["content"]
        n = int(re.search(r"item (\d+) is a thing", text).group(1))
        return {"content": json.dumps({"reason": "r", "score": 5 if n % 2 == 0 else 1})}

    fake.default = even_judge
    res = invoke("judge", "check", "--judge", f"{fake.base_url}#fake-judge", "--data", "review:g", "--json",
                 "--store", path)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    g = rep["metrics"]["groundedness"]
    # 20 labelled rows and the swap control of the 10 good ones (their context swapped with another row's)
    # each labelled row is its own group (no good/bad pair on one question): the figure is the
    # agreement with the people at the metric's threshold, on the 20 labelled rows
    assert g["source"] == "review:g" and g["cases"] == 30 and g["agreement"] == 1.0 and g["agreement_n"] == 20
    assert g["swap"]["groups"] == 10
    fake.default = {"content": json.dumps({"reason": "r", "score": 5})}    # a judge that passes everything
    res = invoke("judge", "check", "--judge", f"{fake.base_url}#fake-judge", "--data", "review:g", "--json",
                 "--store", path, "--no-save")
    assert json.loads(res.output)["metrics"]["groundedness"]["agreement"] == 0.5
    res = invoke("judge", "check", "--judge", f"{fake.base_url}#fake-judge", "--data", "review:none", "--store", path)
    assert isinstance(res.exception, AssayError) and "no review queue 'none'" in str(res.exception)
