"""`assay bench perf` (and `bench embed --store off`) as a user runs them, against a scripted
loopback server (tests/helpers/perf_server.py): a run in which nothing completed, run notes in the
human output, tracks named and extended, `--store off` (issue 28, items 2 and 4)."""

from __future__ import annotations

import json
import os
import subprocess

from tests.helpers.cli import run_assay
from tests.helpers.perf_server import PerfServer


def assay(*args: str, store: str | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ASSAY_STORE"}
    p = run_assay([*args] + (["--store", store] if store else []), env=env, cwd=cwd)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def perf_args(url: str, *more: str) -> list[str]:
    return ["bench", "perf", "--endpoint", url, "--model", "scripted", "-n", "2", "--warmup", "0",
            "--input-tokens", "20", "--output-tokens", "3", "-q", *more]


def listed(store: str) -> list[dict]:
    p = assay("bench", "list", "--json", store=store)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_a_run_where_no_request_completed_exits_3_and_is_not_stored(tmp_path):
    store = str(tmp_path / "s.db")
    with PerfServer(lambda i, stream, body: {"status": 500}) as srv:
        p = assay(*perf_args(srv.url, "--out", str(tmp_path / "out")), store=store)
    assert p.returncode == 3, (p.stdout, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no request completed" in lines[0] and "http 500: 2" in lines[0]
    assert "not stored" in lines[0]
    assert listed(store) == []
    assert (tmp_path / "out" / "requests.jsonl").exists()      # what happened is kept for a look


def test_run_notes_are_shown_in_the_human_output(tmp_path):
    with PerfServer() as srv:
        p = assay(*perf_args(srv.url, "--no-stream"), store=str(tmp_path / "s.db"))
    assert p.returncode == 0, p.stderr
    assert "note: not streamed: TTFT, ITL and TPOT cannot be observed" in " ".join(p.stdout.split())


def test_a_named_run_is_a_track_that_later_runs_extend(tmp_path):
    store = str(tmp_path / "s.db")
    with PerfServer() as srv:
        for _ in range(2):
            p = assay(*perf_args(srv.url, "--name", "nightly"), store=store)
            assert p.returncode == 0, p.stderr
        p = assay(*perf_args(srv.url, "--track", "serving", "--repeat", "2", "--every", "0.1s"), store=store)
        assert p.returncode == 0, p.stderr
        p = assay(*perf_args(srv.url, "--track", "serving"), store=store)
        assert p.returncode == 0, p.stderr
    tr = assay("bench", "track", "nightly", "--json", store=store)
    assert tr.returncode == 0, tr.stderr
    assert len(json.loads(tr.stdout)["runs"]) == 2
    tr = assay("bench", "track", "serving", "--json", store=store)
    assert tr.returncode == 0, tr.stderr
    agg = json.loads(tr.stdout)
    assert len(agg["runs"]) == 3 and agg["points"][0]["repeats"] == 3
    assert {r["track"] for r in listed(store) if r["name"] != "nightly"} == {"serving"}
    human = assay("bench", "track", "serving", store=store)
    assert human.returncode == 0 and "3 run(s)" in human.stdout


def test_store_off_runs_prints_and_stores_nothing(tmp_path):
    with PerfServer() as srv:
        p = assay(*perf_args(srv.url), "--store", "off", cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "perf run" in p.stdout and "stored as" not in p.stderr and "ASSAY_STORE" not in p.stderr
    assert not (tmp_path / ".assay").exists()


def test_embed_store_off_runs_prints_and_stores_nothing(tmp_path):
    p = assay("bench", "embed", "--model", "embedded", "--tasks", "sts", "-q", "--store", "off", cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "embedding run" in p.stdout and "stored as" not in p.stderr and "ASSAY_STORE" not in p.stderr
    assert not (tmp_path / ".assay" / "assay.db").exists()


def test_the_time_limit_stores_what_was_measured_and_exits_3(tmp_path):
    store = str(tmp_path / "s.db")
    with PerfServer(lambda i, stream, body: {"stall": 0.4}) as srv:
        p = assay(*perf_args(srv.url, "-n", "60", "--max-time", "4s", "--stall-timeout", "5"), store=store)
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert "time limit (--max-time 4s)" in p.stderr.splitlines()[-1]
    assert "note: the run reached its time limit" in " ".join(p.stdout.split())
    assert len(listed(store)) == 1


def test_show_says_too_few_for_a_point_of_one_request(tmp_path):
    store = str(tmp_path / "s.db")
    with PerfServer() as srv:
        p = assay(*perf_args(srv.url, "-n", "1"), store=store)
    assert p.returncode == 0, p.stderr
    shown = assay("bench", "show", store=store)
    assert shown.returncode == 0 and "(too few)" in shown.stdout
