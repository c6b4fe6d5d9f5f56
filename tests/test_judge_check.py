"""`assay judge check` as a user runs it (in process: tests.helpers.cli): the shipped calibration sets, the
user's own labelled rows, a judge on an endpoint (the scripted fake), bad input."""

from __future__ import annotations

import json
import os
import re
from importlib import resources

from tests.helpers.cli import run_assay

NEEDS = "needs a judge: --judge openai:MODEL | http://HOST/v1#MODEL | local:/path.gguf"


def run(*args, cwd=None, **env):
    e = {k: v for k, v in os.environ.items() if k != "ASSAY_JUDGE"}
    e.update(ASSAY_CACHE="off", **env)
    p = run_assay(["judge", "check", *args], cwd=cwd, env=e)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_the_embedded_scorers_on_the_shipped_sets(tmp_path):
    p = run("--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["judge"] == "embedded scorers (no judge model)" and rep["split"] == "held"
    m = rep["metrics"]
    for name in ("groundedness", "relevance", "similarity"):
        assert m[name]["auc"]["auc"] >= 0.8 and m[name]["swap"]["auc"] >= 0.75, name
        assert m[name]["length_matched"]["groups"] == m[name]["auc"]["groups"]     # every pair within two words
        assert m[name]["errors"] == 0 and m[name]["cases"] == 3 * m[name]["auc"]["groups"]
    assert m["correctness"] == {"metric": "correctness", "scorer": None, "skipped": NEEDS,
                                "source": "assay/judges/calibration/similarity.jsonl"}
    table = run("--metrics", "groundedness,groundedness_pro", cwd=tmp_path)
    assert table.returncode == 0 and "separates" in table.stdout and "context swap" in table.stdout
    assert f"groundedness_pro: {NEEDS}" in table.stdout


def test_your_own_labelled_rows(tmp_path):
    rows = [
        {"group": "a", "query": "Who designed it?", "context": "Marta Lind designed the bridge in 1968.",
         "response": "Marta Lind designed it in 1968.", "label": 1},
        {"group": "a", "query": "Who designed it?", "context": "Marta Lind designed the bridge in 1968.",
         "response": "Johan Berg designed it in 1971.", "label": "bad"},
        {"group": "b", "query": "When does it open?", "context": "The museum opens at 10:00 every day but Monday.",
         "response": "The museum opens at 10:00 every day but Monday.", "label": True},
        {"group": "b", "query": "When does it open?", "context": "The museum opens at 10:00 every day but Monday.",
         "response": "It opens at 8:00 on weekdays only.", "label": 0},
    ]
    f = tmp_path / "mine.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    p = run("--data", str(f), "--metrics", "groundedness", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    g = json.loads(p.stdout)["metrics"]["groundedness"]
    assert (g["source"], g["cases"], g["auc"]["auc"], g["agreement"]) == (str(f), 6, 1.0, 1.0)
    assert g["swap"]["groups"] == 2                         # the good answers with the other group's context
    # the same rows as pairs, in CSV
    c = tmp_path / "pairs.csv"
    c.write_text('group,query,context,good,bad\n'
                 'a,Who designed it?,Marta Lind designed the bridge in 1968.,Marta Lind designed it.,Johan Berg did.\n')
    p = run("--data", str(c), "--metrics", "databricks_groundedness", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["metrics"]["databricks_groundedness"]["auc"]["auc"] == 1.0


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"query": "q", "context": "c", "response": "r", "label": 1}\n'
                 '{"query": "q", "context": "c", "response": "r", "label": "maybe"}\n')
    p = run("--data", str(f), "--metrics", "groundedness", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "bad.jsonl" in p.stderr and "row 2" in p.stderr and "'label'" in p.stderr and "maybe" in p.stderr
    g = tmp_path / "nolabel.jsonl"
    g.write_text('{"query": "q", "context": "c", "response": "r"}\n')
    p = run("--data", str(g), "--metrics", "groundedness", cwd=tmp_path)
    assert p.returncode == 2 and "needs a 'label' column" in p.stderr
    for args, expect in ((["--data", str(f)], "--data needs --metrics"), (["--metrics", "f1_score"], "not a judge metric"),
                         (["--metrics", "coherence"], "no calibration set ships for coherence"),
                         (["--split", "middle"], "--split must be"), (["--metrics", "nope"], "nope")):
        p = run(*args, cwd=tmp_path)
        assert p.returncode == 2 and expect in p.stderr and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)


def test_a_judge_that_reads_only_the_answer_is_caught_by_the_swap_control(fake, tmp_path):
    cal = resources.files("assay.judges").joinpath("calibration", "groundedness.jsonl").read_text()
    good = {json.loads(x)["good"] for x in cal.splitlines() if x.strip()}

    def answer_only(req):       # 5 for an answer it has seen labelled good, whatever the context
        text = req["body"]["messages"][-1]["content"]
        m = re.search(r"<response>\n(.*?)\n</response>", text, re.S)
        return {"content": json.dumps({"reason": "r", "score": 5 if m and m.group(1) in good else 1})}

    fake.default = answer_only
    p = run("--judge", f"{fake.base_url}#fake-judge", "--metrics", "groundedness", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    g = rep["metrics"]["groundedness"]
    assert rep["judge"] == f"{fake.base_url}#fake-judge" and rep["split"] == "all"
    assert g["auc"]["auc"] == 1.0 and g["swap"]["auc"] == 0.5 and g["cases"] == 120
    # 120 cases (the swap control reuses their calls) + 60 for the 30 context-words pairs
    assert g["usage"]["calls"] == 180 and g["usage"]["cost_usd"] is None
    p = run("--judge", f"{fake.base_url}#fake-judge", "--metrics", "groundedness", cwd=tmp_path)
    assert "fails a control" in p.stdout and "180 calls, cost unknown" in p.stdout


def test_a_judge_whose_every_answer_is_unreadable_cannot_be_measured(fake, tmp_path):
    fake.default = {"content": "I would rather not say."}
    p = run("--judge", f"{fake.base_url}#fake-judge", "--metrics", "databricks_groundedness", cwd=tmp_path)
    assert p.returncode == 3 and "every judgment errored" in p.stderr
    assert "could not be read after one re-ask" in p.stdout          # the reason, listed under the table
