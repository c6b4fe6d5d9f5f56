"""`assay judge check` keeps its result in the store; `assay judge list` / `show` print what is
kept; `assay show` and the dashboard show the latest check of the judge a run used, and who
scored each column. The command (run in process: tests.helpers.cli) against the scripted fake
endpoint; the dashboard through its TestClient over the same store."""

from __future__ import annotations

import json
import os
import re
from importlib import resources
from urllib.parse import quote

import pytest

from tests.helpers.cli import run_assay

NEEDS = "needs a judge: --judge openai:MODEL | http://HOST/v1#MODEL | local:/path.gguf"
SAVED = re.compile(r"judge check ([0-9a-f]{12}) saved in ")
ROWS = [{"query": "Who designed the bridge?", "context": "Marta Lind designed the bridge in 1968.",
         "response": "Marta Lind designed it in 1968.", "ground_truth": "Marta Lind designed it."},
        {"query": "When does the museum open?", "context": "The museum opens at 10:00 every day but Monday.",
         "response": "It opens at 8:00 on weekdays only.", "ground_truth": "At 10:00, not on Mondays."}]


def assay(*args, cwd, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("ASSAY_JUDGE", "ASSAY_JUDGE_PRICE")}
    e.update(ASSAY_CACHE="off", **env)
    p = run_assay(args, cwd=cwd, env=e)
    assert "Traceback" not in p.stderr, p.stderr
    assert "\x1b" not in p.stdout and "\x1b" not in p.stderr
    return p


def answer_only_judge(fake):
    """5 for an answer the shipped groundedness set calls good, whatever the context: AUC 1.0, but
    the context-swap control at 0.5 (chance), so the verdict is 'fails a control'."""
    cal = resources.files("assay.judges").joinpath("calibration", "groundedness.jsonl").read_text()
    good = {json.loads(x)["good"] for x in cal.splitlines() if x.strip()} | {ROWS[0]["response"]}

    def judge(req):
        text = req["body"]["messages"][-1]["content"]
        m = re.search(r"<response>\n(.*?)\n</response>", text, re.S)
        return {"content": json.dumps({"reason": "r", "score": 5 if m and m.group(1) in good else 1})}

    fake.default = judge


def data_file(tmp_path):
    f = tmp_path / "rag.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return f


def test_a_check_is_kept_listed_shown_and_put_beside_the_runs_that_used_its_judge(fake, tmp_path):
    answer_only_judge(fake)
    judge = f"{fake.base_url}#fake-judge"
    db = str(tmp_path / "s.db")
    p = assay("judge", "check", "--judge", judge, "--metrics", "groundedness", "--store", db, cwd=tmp_path,
              ASSAY_JUDGE_PRICE="1,2")
    assert p.returncode == 0, p.stderr
    ref = SAVED.search(p.stdout).group(1)

    # what was kept: the judge, the figures with intervals and controls, errors, cost, the set's version
    shown = assay("judge", "show", ref, "--json", "--store", db, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    d = json.loads(shown.stdout)
    g = d["metrics"]["groundedness"]
    assert (d["ref"], d["judge"], d["label"], d["split"]) == (ref, judge, judge, "all")
    assert g["auc"]["auc"] == 1.0 and g["auc"]["ci95_low"] is not None and g["swap"]["auc"] == 0.5
    assert g["length_matched"]["groups"] == 40 and g["agreement"] is not None and g["errors"] == 0
    assert g["verdict"] == "fails a control" and g["cases"] == 120
    # 120 cases + 60 calls for the 30 context-words pairs: 18,000 tokens in, 1,800 out at $1 / $2 per 1M
    assert d["usage"]["calls"] == 180 and d["usage"]["cost_usd"] == pytest.approx(0.0216)
    assert re.fullmatch(r"groundedness\.jsonl@[0-9a-f]{12}", d["calibration"]["groundedness"])
    assert d["created_at"] > 0 and d["assay_version"]

    table = assay("judge", "show", ref[:6], "--store", db, cwd=tmp_path)
    assert table.returncode == 0 and f"judge check {ref}" in table.stdout
    assert "fails a control" in table.stdout and "180 calls, $0.0216" in table.stdout
    listed = assay("judge", "list", "--store", db, cwd=tmp_path)
    assert listed.returncode == 0 and ref in listed.stdout and "1.000 [1.00–1.00] fails a control" in listed.stdout
    mine = json.loads(assay("judge", "list", "--judge", judge, "--json", "--store", db, cwd=tmp_path).stdout)
    assert [c["ref"] for c in mine] == [ref]
    assert json.loads(assay("judge", "list", "--judge", "none", "--json", "--store", db, cwd=tmp_path).stdout) == []

    # a run with that judge: `assay show` says who scored each column and how good the judge measured
    ev = assay("eval", str(data_file(tmp_path)), "--judge", judge, "-m", "groundedness,f1_score", "--name", "rag",
               "--store", db, cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr
    show = assay("show", "rag", "--store", db, cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert re.search(r"│ groundedness .*│ http://127\.0\.0\.1:\d+/v1#fake-judge +│", show.stdout)
    assert re.search(r"│ f1_score .*│ formula +│", show.stdout)
    assert f"judge check {ref} of {judge}" in show.stdout
    assert ("groundedness: AUC 1.000 [1.00–1.00], context swap control 0.500 [0.50–0.50], length-matched "
            "1.000 [1.00–1.00], agreement 1.000, 0 errors: fails a control") in show.stdout

    # the dashboard: on the run's page, in the runs list, and the checks' own pages
    from fastapi.testclient import TestClient

    from assay.store import Store
    from assay.ui.server import create_app

    st = Store(db)
    run_id = st.get_run("rag")["id"]
    client = TestClient(create_app(st), base_url="http://127.0.0.1")
    page = client.get(f"/runs/{run_id}").text
    section = page.split('id="judge-check"')[1].split("<h2>Metrics</h2>")[0]
    assert f'href="/judge-checks/{ref}"' in section and "fails a control" in section
    assert "0.500 <span" in section and "(40 pairs)" in section and "180 calls · $0.0216" in section
    assert f"/judge-checks?judge={quote(judge)}" in section              # every check of this judge
    assert f'href="/judge-checks/{ref}"' in client.get(f"/judge-checks?judge={quote(judge)}").text
    runs = client.get("/").text
    assert f'checked <a class="check-link" href="/judge-checks/{ref}">{ref}</a>: AUC groundedness 1.00' in runs
    listing = client.get("/judge-checks").text
    assert f'href="/judge-checks/{ref}"' in listing and "shipped sets, all" in listing
    one = client.get(f"/judge-checks/{ref}")
    assert one.status_code == 200 and d["calibration"]["groundedness"] in one.text
    assert client.get(f"/api/judge-checks/{ref}").json()["details"]["usage"]["calls"] == 180
    assert client.get("/judge-checks/0000nope").status_code == 404
    assert client.get("/api/judge-checks/0000nope").status_code == 404

    # a newer check of the same judge replaces it beside the run; a metric it did not measure is named
    p2 = assay("judge", "check", "--judge", judge, "--metrics", "relevance", "--store", db, cwd=tmp_path)
    ref2 = SAVED.search(p2.stdout).group(1)
    section = client.get(f"/runs/{run_id}").text.split('id="judge-check"')[1].split("<h2>Metrics</h2>")[0]
    assert f"/judge-checks/{ref2}" in section and f"/judge-checks/{ref}" not in section
    assert "not in that check: groundedness" in section
    assert "not in that check: groundedness" in assay("show", "rag", "--store", db, cwd=tmp_path).stdout
    # judge checks cost money too: `assay bench cost --runs` counts them
    costs = json.loads(assay("bench", "cost", "--runs", "--json", "--store", db, cwd=tmp_path).stdout)["runs"]
    kept = {c["id"]: c for c in costs if c["kind"] == "judge check"}
    assert set(kept) == {ref, ref2} and kept[ref]["input_tokens"] == 18_000
    st.close()


def test_a_check_is_not_kept_with_no_save_store_off_or_when_nothing_was_measured(fake, tmp_path):
    answer_only_judge(fake)
    judge = f"{fake.base_url}#fake-judge"
    db = str(tmp_path / "s.db")
    args = ("judge", "check", "--judge", judge, "--metrics", "groundedness")
    p = assay(*args, "--no-save", "--store", db, cwd=tmp_path)
    assert p.returncode == 0 and "fails a control" in p.stdout and not SAVED.search(p.stdout)
    p = assay(*args, "--json", cwd=tmp_path, ASSAY_STORE="off")
    assert p.returncode == 0 and json.loads(p.stdout)["ref"] is None
    # only metrics no scorer can measure (no judge): nothing measured, nothing kept
    p = assay("judge", "check", "--metrics", "groundedness_pro", "--store", db, cwd=tmp_path)
    assert p.returncode == 0 and "skipped" in p.stdout and not SAVED.search(p.stdout)
    fake.default = {"content": "I would rather not say."}        # every judgment unreadable
    p = assay(*args, "--store", db, cwd=tmp_path)
    assert p.returncode == 3 and "the check is not saved" in p.stderr and not SAVED.search(p.stdout)
    empty = assay("judge", "list", "--store", db, cwd=tmp_path)
    assert empty.returncode == 0 and "no judge checks in" in empty.stdout
    missing = assay("judge", "show", "--store", db, cwd=tmp_path)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "no judge check 'latest'" in missing.stderr and "assay judge check" in missing.stderr
    # a bad --store fails before any judge call
    calls = len(fake.chat_requests)
    bad = assay(*args, "--store", "nosuchdriver://x/y", cwd=tmp_path)
    assert bad.returncode == 2 and len(fake.chat_requests) == calls


def test_show_says_who_scored_each_column_and_how_to_check_an_unchecked_judge(fake, tmp_path):
    db = str(tmp_path / "s.db")
    data = data_file(tmp_path)
    ev = assay("eval", str(data), "-m", "groundedness,fluency,f1_score", "--name", "nojudge", "--store", db,
               cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr
    show = assay("show", "nojudge", "--store", db, cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    assert "groundedness: embedded support scorer v2 (no judge model); measured AUC 0.95 [0.93–0.97]" in show.stdout
    assert f"skipped on every row, {NEEDS}: fluency" in show.stdout
    assert "has not been checked" not in show.stdout      # the embedded scorers' figures ship with them
    # once the embedded scorers are checked in this store, that check is shown too
    assert SAVED.search(assay("judge", "check", "--metrics", "groundedness", "--store", db, cwd=tmp_path).stdout)
    assert "of embedded scorers (no judge model)" in assay("show", "nojudge", "--store", db, cwd=tmp_path).stdout

    judge = f"{fake.base_url}#fake-judge"
    ev = assay("eval", str(data), "--judge", judge, "-m", "groundedness", "--name", "judged", "--store", db,
               cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr
    show = assay("show", "judged", "--store", db, cwd=tmp_path)
    assert (f"judge {judge} has not been checked in this store: measure it with `assay judge check --judge "
            f"{judge}`") in show.stdout

    from fastapi.testclient import TestClient

    from assay.store import Store
    from assay.ui.server import create_app

    st = Store(db)
    page = TestClient(create_app(st), base_url="http://127.0.0.1").get(f"/runs/{st.get_run('judged')['id']}").text
    assert 'id="no-check"' in page and f"assay judge check --judge {judge}" in page
    st.close()


def test_hostile_judge_names_are_printed_as_text(fake, tmp_path):
    fake.default = {"content": json.dumps({"reason": "r", "score": 3})}
    judge = f"{fake.base_url}#[/b][link=http://x]<script>alert(1)</script>\x1b]0;owned\x07j"
    db = str(tmp_path / "s.db")
    p = assay("judge", "check", "--judge", judge, "--metrics", "groundedness", "--store", db, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    for args in (("judge", "list"), ("judge", "show")):
        q = assay(*args, "--store", db, cwd=tmp_path)
        assert q.returncode == 0 and "[/b][link=http://x]" in q.stdout and "owned" not in q.stdout, q.stdout

    from fastapi.testclient import TestClient

    from assay.store import Store
    from assay.ui.server import create_app

    st = Store(db)
    client = TestClient(create_app(st), base_url="http://127.0.0.1")
    for url in ("/judge-checks", "/judge-checks/latest"):
        page = client.get(url)
        assert page.status_code == 200 and "<script>" not in page.text and "&lt;script&gt;alert(1)" in page.text
    st.close()
