"""`assay bench leaderboard` over a store written through the real APIs (leaderboard_data.py:
quality runs by `run_quality`, perf runs by `store_benchmark(st, "perf", ...)`, embed results in the stored
shape of the embed runner) and a price table of our own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from assay.bench.board import MISSING, Leaderboard, build_leaderboard, format_value, pareto_front
from assay.errors import AssayError
from tests.helpers.cli import run_assay
from tests.helpers.leaderboard_data import build_board_store

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def board_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    info = build_board_store(tmp_path_factory.mktemp("board"))
    yield info
    info["store"].close()
    sys.path.remove(info["syspath"])


@pytest.fixture(scope="module")
def board(board_store: dict[str, Any]) -> Leaderboard:
    return build_leaderboard(board_store["store"], table=board_store["table"])


def _row(board: Leaderboard, model: str) -> Any:
    hits = [r for r in board.rows if r.model == model]
    assert len(hits) == 1, [r.model for r in board.rows]
    return hits[0]


def _point(summary: dict[str, Any], concurrency: int) -> dict[str, Any]:
    return next(p for p in summary["points"] if p["concurrency"] == concurrency)


# -- the board ------------------------------------------------------------------------------------
def test_one_row_per_model_with_the_stored_figures(board: Leaderboard, board_store: dict[str, Any]) -> None:
    n = board_store["names"]
    assert sorted(r.model for r in board.rows) == sorted([n["right"], n["half"], n["wrong"], "slowpoke",
                                                          "gpt-4o-mini"])
    right, half = _row(board, n["right"]), _row(board, n["half"])
    # the quality index and per-task scores are what run_quality stored
    for who, row in (("right", right), ("half", half)):
        s = board_store["runs"][who].summary
        assert row.get("quality_index") == s["index"]["value"]
        assert row.get("quality:arithmetic") == s["tasks"]["arithmetic"]["primary_value"]
        assert row.get("quality:science_mc") == s["tasks"]["science_mc"]["primary_value"]
        assert row.refs["quality"] == board_store["runs"][who].ref
    assert right.get("quality_index") == 1.0 and 0 < half.get("quality_index") < 1
    # latency and throughput: the stored indexes of the point at the common workload (c=1, 800→200),
    # from the latest perf run
    ref, s = board_store["perf"]["right"]
    assert right.refs["perf"] == ref
    assert right.get("latency_index") == _point(s, 1)["latency_index"]
    assert right.get("throughput_index") == _point(s, 1)["throughput_index"]
    assert right.workload.startswith("concurrency 1, 800→200 tokens")
    # cost: the 3:1 blend of the price table: (3 × 2 + 8) / 4
    assert right.get("cost_index") == pytest.approx(3.5) and half.get("cost_index") == pytest.approx(0.75)
    # embed main scores
    assert right.get("embed:sts") == 0.81 and right.get("embed:retrieval") == 0.62
    assert right.ci["embed:sts"] == pytest.approx((0.76, 0.86))


def test_missing_figures_are_none_and_shown_as_a_dash(board: Leaderboard, board_store: dict[str, Any]) -> None:
    wrong = _row(board, board_store["names"]["wrong"])
    assert wrong.get("latency_index") is None and wrong.get("throughput_index") is None
    assert wrong.get("cost_index") is None and wrong.cost_source == "unknown"   # not in the price table
    assert wrong.get("quality_index") is None                       # its index is in the other set's column
    assert wrong.get("quality_index@2") == 0.0                       # a real zero stays a zero
    slow = _row(board, "slowpoke")
    assert slow.get("quality_index") is None and "quality" not in slow.refs
    col = board.column("quality_index")
    assert format_value(col, None) == MISSING and format_value(col, 0.0) == "0.0"
    assert format_value(board.column("cost_index"), float("nan")) == MISSING


def test_results_that_are_not_comparable_are_shown_apart_with_the_reason(board: Leaderboard,
                                                                         board_store: dict[str, Any]) -> None:
    n = board_store["names"]
    keys = [c.key for c in board.columns]
    # quality: the task set of `wrong` differs (only arithmetic, and other data) -> its own index column
    assert "quality_index" in keys and "quality_index@2" in keys
    g1 = next(g for g in board.groups if g.key == "quality_index")
    g2 = next(g for g in board.groups if g.key == "quality_index@2")
    assert sorted(g1.models) == sorted([n["right"], n["half"]]) and g2.models == [n["wrong"]]
    note = next(x for x in board.notes if x.startswith("quality index: set 2"))
    assert "only in set 1: science_mc" in note and "the data of task arithmetic differs" in note
    # per task: arithmetic has two definitions (the data hashes differ)
    assert "quality:arithmetic@2" in keys
    assert _row(board, n["wrong"]).get("quality:arithmetic@2") == 0.0
    assert _row(board, n["wrong"]).get("quality:arithmetic") is None
    arith = next(x for x in board.notes if x.startswith("task arithmetic: definition 2"))
    assert "the data differs" in arith and "task definition" not in arith
    # perf: slowpoke was measured at 800→100 tokens: its own latency/throughput columns
    slow = _row(board, "slowpoke")
    assert slow.get("latency_index") is None and slow.get("latency_index@2") is not None
    assert slow.get("throughput_index@2") == _point(board_store["perf"]["slow"][1], 1)["throughput_index"]
    perf_note = next(x for x in board.notes if x.startswith("latency and throughput: workload 2"))
    assert "800→100" in perf_note and "800→200" in perf_note
    # embed: gpt-4o-mini's sts has metric version 2
    mini = _row(board, "gpt-4o-mini")
    assert mini.get("embed:sts") is None and mini.get("embed:sts@2") == 0.77
    assert any("embedding task sts" in x and "the metric version differs (2 vs 1)" in x for x in board.notes)


def test_sort_and_filter(board: Leaderboard, board_store: dict[str, Any]) -> None:
    n = board_store["names"]
    by_q = [r.model for r in board.sorted()]                         # quality index, best first, missing last
    assert by_q[:2] == [n["right"], n["half"]]
    assert set(by_q[2:]) == {n["wrong"], "slowpoke", "gpt-4o-mini"}
    by_cost = [r.model for r in board.sorted("cost_index")]          # cheapest first
    assert by_cost == ["slowpoke", "gpt-4o-mini", n["half"], n["right"], n["wrong"]]
    assert [r.model for r in board.sorted("cost_index", descending=True)][:2] == [n["right"], n["half"]]
    assert board.sorted("cost_index", descending=True)[-1].model == n["wrong"]   # missing stays last
    lat = [r.model for r in board.sorted("latency_index") if r.get("latency_index") is not None]
    assert lat == [n["right"], "gpt-4o-mini", n["half"]]             # speed 2 > 1.5 > 1
    only = board.filtered("GPT")
    assert [r.model for r in only.rows] == ["gpt-4o-mini"]
    with pytest.raises(AssayError, match="no column 'nope'"):
        board.sorted("nope")


def test_runs_all_gives_one_row_per_result_and_kind_limits_the_columns(board_store: dict[str, Any]) -> None:
    every = build_leaderboard(board_store["store"], runs="all", table=board_store["table"])
    assert len(every.rows) == 3 + 5 + 2                              # quality, perf (with the old one), embed
    assert sum(1 for r in every.rows if r.model == board_store["names"]["right"]) == 4
    only_q = build_leaderboard(board_store["store"], kinds="quality", table=board_store["table"])
    kinds = {c.kind for c in only_q.columns}
    assert kinds == {"quality", "cost"} and len(only_q.rows) == 3
    with pytest.raises(AssayError, match="kind must be"):
        build_leaderboard(board_store["store"], kinds="speed")


def test_pareto_front_on_a_hand_made_example() -> None:
    # x: cost (lower is better), y: quality (higher is better)
    pts = [(1.0, 0.5),    # 0: cheapest -> on the front
           (2.0, 0.7),    # 1: on the front
           (3.0, 0.6),    # 2: dominated by 1
           (2.0, 0.7),    # 3: ties 1 exactly -> also on the front
           (2.0, 0.65),   # 4: same cost as 1, worse -> dominated
           (5.0, 0.9),    # 5: best quality -> on the front
           (None, 1.0),   # 6: missing -> never on it
           (6.0, 0.9)]    # 7: same quality as 5, dearer -> dominated
    assert pareto_front(pts, x_better="low") == [0, 1, 3, 5]
    # x: throughput (higher is better)
    assert pareto_front([(10.0, 0.5), (20.0, 0.4), (5.0, 0.5), (20.0, 0.6)], x_better="high") == [3]
    assert pareto_front([]) == []
    with pytest.raises(AssayError):
        pareto_front(pts, x_better="up")


def test_tradeoff_data_marks_the_front_and_says_who_is_left_out(board: Leaderboard,
                                                                board_store: dict[str, Any]) -> None:
    n = board_store["names"]
    qc = board.tradeoff("quality-cost")
    assert {p["model"] for p in qc["points"]} == {n["right"], n["half"]}
    assert all(p["pareto"] for p in qc["points"])                     # dearer but better, cheaper but worse
    left = {x["model"]: x["why"] for x in qc["left_out"]}
    assert "no quality index" in left["slowpoke"] and "no cost index" in left[n["wrong"]]
    assert "another comparability group" in left[n["wrong"]]
    ql = board.tradeoff("quality-latency")
    assert [p["model"] for p in ql["points"] if p["pareto"]] == [n["right"]]   # faster and better
    with pytest.raises(AssayError, match="no chart"):
        board.tradeoff("quality-colour")


# -- the command ----------------------------------------------------------------------------------
def assay(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return run_assay(args, env={**os.environ, "COLUMNS": "250", **(env or {})})


def test_cli_table_json_and_errors(board_store: dict[str, Any], tmp_path: Path) -> None:
    n = board_store["names"]
    p = assay("bench", "leaderboard", "--store", board_store["path"], "--prices", str(board_store["prices"]))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    first = next(i for i, x in enumerate(lines) if n["right"] in x)
    assert n["half"] in lines[first + 1]                             # sorted by the quality index
    assert MISSING in p.stdout and "shown apart (not comparable):\n  - quality index: set 2" in p.stdout
    assert "800→100" in p.stdout
    js = json.loads(assay("bench", "leaderboard", "--store", board_store["path"], "--prices",
                          str(board_store["prices"]), "--json", "--sort", "cost", "--filter", "python:").stdout)
    assert [r["model"] for r in js["rows"]] == [n["half"], n["right"], n["wrong"]]
    assert js["rows"][2]["values"]["cost_index"] is None             # missing is null in JSON, not 0
    assert js["rows"][0]["values"]["cost_index"] == pytest.approx(0.75)
    assert any(c["key"] == "quality_index@2" for c in js["columns"]) and js["notes"]
    bad = assay("bench", "leaderboard", "--store", board_store["path"], "--sort", "speed")
    assert bad.returncode != 0 and "no column 'speed'" in bad.stderr and "Traceback" not in bad.stderr
    bad = assay("bench", "leaderboard", "--store", board_store["path"], "--plot", "quality-cost")
    assert bad.returncode != 0 and "-o FILE.svg" in bad.stderr
    empty = assay("bench", "leaderboard", "--store", str(tmp_path / "empty.db"))
    assert empty.returncode == 0 and "no benchmark results in" in empty.stdout


def test_cli_plot_writes_a_valid_svg_with_one_point_per_model(board_store: dict[str, Any], tmp_path: Path) -> None:
    n = board_store["names"]
    out = tmp_path / "qc.svg"
    p = assay("bench", "leaderboard", "--store", board_store["path"], "--plot", "quality-latency", "-o", str(out),
              env={"ASSAY_PRICES": str(board_store["prices"])})
    assert p.returncode == 0, p.stderr
    root = ElementTree.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    points = root.findall(f".//{SVG}g[@class='point']") + root.findall(f".//{SVG}g[@class='point pareto']")
    # right and half have both a quality index (set 1) and a latency index (workload 1)
    labels = sorted(g.find(f"{SVG}text").text for g in points)
    assert labels == sorted(x if len(x) <= 28 else x[:27] + "…" for x in (n["right"], n["half"]))
    assert len(root.findall(f".//{SVG}g[@class='point pareto']")) == 1
    titles = [t.text for t in root.iter(f"{SVG}text")]
    assert any("latency index (mean TTFT, ms" in (t or "") for t in titles)
    assert any("quality index (0–100" in (t or "") for t in titles)
    assert "left out" in p.stderr and "slowpoke" in p.stderr


def test_the_same_task_scored_in_other_modes_is_flagged(board_store: dict[str, Any], tmp_path: Path) -> None:
    from assay.bench.quality.stored import headline
    from assay.store import open_store

    st = open_store(str(tmp_path / "modes.db"))
    gen = board_store["runs"]["right"].summary                       # pipelines answer by generation
    loglik = {**gen, "model": "scored-by-loglik",
              "tasks": {n: {**t, "modes": ["loglik"]} for n, t in gen["tasks"].items()}}
    for s in (gen, loglik):
        st.add_benchmark(kind="quality", model=s["model"], metrics=headline(s), details=s)
    b = build_leaderboard(st, kinds="quality")
    assert [c.key for c in b.columns if c.kind == "quality"] == ["quality_index", "quality:arithmetic",
                                                                 "quality:science_mc"]     # same tasks: together
    note = next(x for x in b.notes if x.startswith("task science_mc (quality:science_mc)"))
    assert "scored-by-loglik: loglik" in note and "generate" in note
    st.close()
