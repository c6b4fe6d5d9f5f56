"""Cost: the one price table, users' own tables and their errors, the estimated cost and cost
index, the judge's prices, and what stored evaluation and benchmark runs cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.bench.cost import (
    benchmark_cost,
    cost_index,
    estimated_cost,
    eval_run_cost,
    judge_model_name,
    price_rows,
    price_usage,
    stored_costs,
    tokens_cost,
)
from assay.bench.perf.stored import benchmark_tokens
from assay.errors import AssayError
from assay.models import LimitedModel, Limiter, OpenAICompat, build_judge
from assay.models.price_table import BUILTIN_FILE, active_table, builtin_table, load_table, save_table
from assay.models.pricing import OPENAI_PRICES, PRICES_AS_OF, judge_price, lookup_price
from assay.store.store import Store


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# -- the shipped table ------------------------------------------------------------------------------

def test_the_shipped_table_is_a_versioned_data_file():
    doc = json.loads(BUILTIN_FILE.read_text())
    assert doc["schema"] == "assay.prices/1" and doc["version"] and doc["as_of"] == PRICES_AS_OF
    for r in doc["prices"]:
        assert set(r) == {"model", "deployment", "input", "output", "currency", "source"}
        assert r["currency"] == "USD" and r["source"] and r["input"] >= 0 and r["output"] >= 0
    t = builtin_table()
    assert t.builtin and t.label == f"price table ({PRICES_AS_OF})"
    assert len(t.rows) == len(doc["prices"]) == len(OPENAI_PRICES)
    assert OPENAI_PRICES["gpt-4o-mini"] == (0.15, 0.60) and OPENAI_PRICES["gpt-4"] == (30.0, 60.0)


def test_lookup_is_unchanged_for_the_judge(monkeypatch):
    monkeypatch.delenv("ASSAY_PRICES", raising=False)
    assert lookup_price("gpt-4o-mini") == (0.15, 0.60)
    assert lookup_price("openai/GPT-4o-mini") == (0.15, 0.60)
    assert lookup_price("gpt-4o-2024-08-06") == (2.50, 10.00)
    assert lookup_price("gpt-4o-audio-preview") is None and lookup_price("") is None
    assert lookup_price("gpt-4o", "batch") is None          # the shipped table has standard rows only


def test_judge_prices_come_from_the_table_in_force(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("ASSAY_PRICES", raising=False)
    monkeypatch.delenv("ASSAY_JUDGE_PRICE", raising=False)
    j = build_judge("openai:gpt-4o-mini", cache=None)
    assert judge_price(j) == ((0.15, 0.60), "price table (2025-08)")
    own = write(tmp_path, "mine.yaml", "version: 7\nas_of: 2025-10\nprices:\n"
                                       "  - {model: gpt-4o-mini, input: 0.1, output: 0.4}\n")
    monkeypatch.setenv("ASSAY_PRICES", str(own))
    assert judge_price(j) == ((0.1, 0.4), f"price table {own} (2025-10, v7)")
    monkeypatch.setenv("ASSAY_JUDGE_PRICE", "1,2")            # the judge's own overrides still win
    assert judge_price(j) == ((1.0, 2.0), "$ASSAY_JUDGE_PRICE")
    monkeypatch.delenv("ASSAY_JUDGE_PRICE")
    # a user table replaces the shipped one: a model it does not list is unknown, not 0
    assert judge_price(build_judge("openai:gpt-4o", cache=None)) == (None, "unknown")
    # a self-hosted endpoint stays unknown whatever the table says
    h = LimitedModel(OpenAICompat.endpoint("http://127.0.0.1:9/v1", "gpt-4o-mini"), Limiter(concurrency=1))
    assert judge_price(h) == (None, "unknown")
    monkeypatch.setenv("ASSAY_PRICES", str(tmp_path / "missing.csv"))
    with pytest.raises(AssayError, match="missing.csv: cannot read"):
        judge_price(j)


# -- users' tables ----------------------------------------------------------------------------------

YAML = """\
version: 2
as_of: 2025-09-01
prices:
  - {model: gpt-4o-mini, deployment: Global-Standard, input: 0.15, output: 0.60, source: "Azure, equals OpenAI list"}
  - model: gpt-4o-mini
    input: 0.15
    output: 0.6
  - model: Qwen2.5-7B
    deployment: self-hosted
    input: "$0.05"
    output: 0.10
    notes: our GPUs, amortised
"""

CSV = """\
model,deployment,input,output,currency,source
gpt-4o-mini,global-standard,0.15,0.60,USD,Azure
gpt-4o-mini,,0.15,0.6,,
Qwen2.5-7B,self-hosted,0.05,0.10,usd,
"""

JSON = json.dumps([{"model": "gpt-4o-mini", "deployment": "global-standard", "input": 0.15, "output": 0.6},
                   {"model": "gpt-4o-mini", "input": 0.15, "output": 0.6},
                   {"model": "Qwen2.5-7B", "deployment": "self-hosted", "input": 0.05, "output": 0.1}])


@pytest.mark.parametrize("name,text", [("p.yaml", YAML), ("p.csv", CSV), ("p.json", JSON)])
def test_a_users_table_in_each_format(tmp_path, name, text):
    t = load_table(write(tmp_path, name, text))
    assert not t.builtin and len(t.rows) == 3
    assert t.find("gpt-4o-mini").deployment == "standard"
    assert t.find("GPT-4o-mini", "global-standard").per_1m == (0.15, 0.60)
    assert t.find("qwen2.5-7b").per_1m == (0.05, 0.10)          # its only row
    assert t.find("qwen2.5-7b").model == "Qwen2.5-7B"           # spelled as written
    assert t.find("qwen2.5-7b", "standard") is None and t.find("gpt-4o") is None
    if name == "p.yaml":
        assert (t.version, t.as_of) == ("2", "2025-09-01")


def test_a_table_round_trips_through_save(tmp_path):
    for suffix in (".yaml", ".json", ".csv"):
        p = save_table(builtin_table(), tmp_path / f"copy{suffix}")
        again = load_table(p)
        assert [r.as_dict() for r in again.rows] == [r.as_dict() for r in builtin_table().rows]


def test_a_model_with_several_deployments_and_no_standard_row_needs_the_deployment(tmp_path):
    t = load_table(write(tmp_path, "p.csv", "model,deployment,input,output\nm,global-standard,1,2\nm,batch,0.5,1\n"))
    assert t.find("m") is None and t.find("m", "batch").per_1m == (0.5, 1.0)


@pytest.mark.parametrize("name,text,expect", [
    ("a.yaml", "prices:\n  - model: a\n    input: 1\n    output: 2\n  - model: b\n    input: cheap\n    output: 2\n",
     ["a.yaml: line 6 (row 2): field 'input'", "cheap"]),
    ("b.yaml", "prices:\n  - model: a\n    input: -1\n    output: 2\n", ["b.yaml: line 3 (row 1): field 'input'", "non-negative"]),
    ("c.yaml", "prices:\n  - model: a\n    input: 1\n   output: 2\n", ["c.yaml: line 4", "not valid YAML"]),
    ("d.yaml", "- input: 1\n  output: 2\n", ["d.yaml: line 1 (row 1): field 'model' is missing"]),
    ("e.yaml", "prices:\n  - model: a\n    input: 1\n    output: 2\n    inptu: 3\n",
     ["e.yaml: line 5 (row 1): field 'inptu' is not one of"]),
    ("f.yaml", "{version: 1}\n", ["f.yaml: field 'prices' is missing"]),
    ("g.yaml", "currency: EUR\nprices: []\n", ["g.yaml: field 'currency'", "USD"]),
    ("h.yaml", "prices: []\n", ["h.yaml: the price table has no rows"]),
    ("i.yaml", "prices:\n  - model: a\n    input: true\n    output: 2\n", ["i.yaml: line 3 (row 1): field 'input'"]),
    ("a.json", '{"prices": [\n {"model": "a", "input": 1, "output": 2},\n {"model": "A",\n  "input": 1, "output": 2}\n]}',
     ["a.json: line 3 (row 2): field 'model'", "already priced at line 2 (row 1)"]),
    ("b.json", '{"prices": [\n {"model": "a", "input": 1,\n  "output": "x"}\n]}', ["b.json: line 3 (row 1): field 'output'"]),
    ("c.json", '{"prices": [\n {"model": "a", "input": 1, "output": 2, "currency": "EUR"}]}',
     ["c.json: line 2 (row 1): field 'currency'"]),
    ("d.json", '{"prices": [1, 2', ["d.json: line 1", "not valid JSON"]),
    ("e.json", '{"prices": ["gpt-4o"]}', ["e.json: row 1: expected a mapping"]),
    ("a.csv", "model,input,output\na,1,2\nb,,2\n", ["a.csv: line 3: field 'input' is missing"]),
    ("b.csv", "model,input,output,price\na,1,2,3\n", ["b.csv: line 1: column 'price'"]),
    ("c.csv", "model,input,output\na,1,2,3\n", ["c.csv: line 2: 4 cells"]),
    ("d.csv", "model,input,output\na,1,nan\n", ["d.csv: line 2: field 'output'"]),
    ("e.csv", "", ["e.csv: the price table is empty"]),
    ("p.txt", "model,input,output\n", ["p.txt: a price table is a .yaml, .yml, .json or .csv file"]),
])
def test_bad_tables_fail_with_one_line_naming_file_line_and_field(tmp_path, name, text, expect):
    p = write(tmp_path, name, text)
    with pytest.raises(AssayError) as e:
        load_table(p)
    msg = str(e.value)
    assert "\n" not in msg
    for want in expect:
        assert want in msg, msg


def test_active_table_precedence(monkeypatch, tmp_path):
    a = write(tmp_path, "a.csv", "model,input,output\na,1,2\n")
    b = write(tmp_path, "b.csv", "model,input,output\nb,1,2\n")
    monkeypatch.delenv("ASSAY_PRICES", raising=False)
    assert active_table().builtin
    monkeypatch.setenv("ASSAY_PRICES", str(b))
    assert active_table().rows[0].model == "b"
    assert active_table(a).rows[0].model == "a"                   # named beats $ASSAY_PRICES
    b.write_text("model,input,output\nb,3,4\nb2,1,1\n")            # an edited file is read again
    assert active_table().find("b").per_1m == (3.0, 4.0)


# -- the figures ------------------------------------------------------------------------------------

def test_estimated_cost_and_cost_index():
    assert estimated_cost((0.15, 0.60)) == pytest.approx(0.2625)    # (3 * 0.15 + 0.60) / 4
    assert estimated_cost({"input": 2.5, "output": 10}) == pytest.approx(4.375)
    assert estimated_cost(builtin_table().find("gpt-4")) == pytest.approx(37.5)
    assert cost_index((1, 1)) == estimated_cost((1, 1)) == 1.0
    assert estimated_cost(None) is None and cost_index(None) is None
    assert tokens_cost(1_000_000, 500_000, (0.15, 0.60)) == pytest.approx(0.45)
    assert tokens_cost(100, 10, None) is None and tokens_cost(None, 10, (1, 1)) is None
    u = price_usage("gpt-4o-mini", 2_000_000, 1_000_000, table=builtin_table())
    assert u["cost_usd"] == pytest.approx(0.9) and u["deployment"] == "standard"
    assert u["estimated_cost_per_1m"] == pytest.approx(0.2625) and u["price_source"] == "price table (2025-08)"
    unknown = price_usage("qwen2.5-7b", 10, 10, table=builtin_table())
    assert unknown["cost_usd"] is None and unknown["price_per_1m"] is None and unknown["price_source"] == "unknown"


def test_price_rows_rank_cheapest_first_and_unknown_last():
    rows = price_rows(builtin_table())
    assert rows[0]["model"] == "nova-micro" and rows[0]["rank"] == 1
    assert [r["cost_index"] for r in rows] == sorted(r["cost_index"] for r in rows)
    minis = [r for r in rows if r["model"] in ("o1-mini", "o3-mini", "o4-mini")]
    assert len({r["rank"] for r in minis}) == 1                        # equal indices share a rank
    some = price_rows(builtin_table(), ["gpt-4o", "qwen2.5-7b", "gpt-4o-2024-08-06", "gpt-4o-mini"])
    assert [(r["model"], r["rank"]) for r in some] == [("gpt-4o-mini", 1), ("gpt-4o", 2), ("qwen2.5-7b", None)]
    assert some[-1]["input"] is None and some[-1]["estimated_cost_per_1m"] is None


# -- stored runs ------------------------------------------------------------------------------------

def _store(tmp_path: Path) -> Store:
    return Store(str(tmp_path / "store.db"))


def _eval_run(st: Store, judge: str | None, usage: dict[str, Any] | None, name: str = "r") -> str:
    rid = st.start_run(name=name, source="d.jsonl", fingerprint="f", config={}, config_hash="h",
                       metrics=["groundedness"], judge=judge)
    st.finish_run(rid, "completed", aggregates={}, summary={}, usage=usage)
    return rid


def _usage(tin: int, tout: int, price: tuple[float, float] | None, source: str) -> dict[str, Any]:
    return {"calls": 4, "cache_hits": 0, "errors": 0, "prompt_tokens": tin, "completion_tokens": tout,
            "cost_usd": None if price is None else (tin * price[0] + tout * price[1]) / 1e6,
            "price_per_1m": None if price is None else {"input": price[0], "output": price[1]},
            "price_source": source}


PERF = {"schema": "assay.bench.perf/1", "model": "gpt-4o-mini", "points": [
    {"concurrency": 1, "requests": {"sent": 10, "ok": 9, "failed": 1},
     "tokens": {"input_mean": 800.0, "output_mean": 200.0}},
    {"concurrency": 4, "requests": {"sent": 40, "ok": 40, "failed": 0},
     "tokens": {"input_mean": 800.0, "output_mean": 199.0, "input_total": 32_000, "output_total": 8_000}},
]}


def test_benchmark_tokens_from_totals_or_ok_requests_times_means():
    assert benchmark_tokens(PERF) == (9 * 800 + 32_000, 9 * 200 + 8_000, "point totals and ok requests × mean tokens")
    assert benchmark_tokens({"points": PERF["points"][1:]}) == (32_000, 8_000, "point totals")
    assert benchmark_tokens({"points": PERF["points"][:1]})[2] == "ok requests × mean tokens"
    assert benchmark_tokens({"points": [{"requests": {"ok": 3}, "tokens": {}}]}) == (None, None, "not recorded")
    assert benchmark_tokens(None) == (None, None, "not recorded")


def test_cost_of_stored_evaluation_and_benchmark_runs(tmp_path):
    st = _store(tmp_path)
    table = builtin_table()
    a = _eval_run(st, "openai:gpt-4o-mini", _usage(400_000, 40_000, (0.15, 0.60), "price table (2025-08)"), "a")
    b = _eval_run(st, "stub:local", _usage(1000, 0, (0.0, 0.0), "local model (no per-token charge)"), "b")
    c = _eval_run(st, "http://127.0.0.1:9/v1#qwen", _usage(1000, 100, None, "unknown"), "c")
    d = _eval_run(st, "openai:gpt-4o", _usage(1000, 100, (1.0, 2.0), "option judge_price"), "d")
    e = _eval_run(st, None, None, "e")
    st.add_benchmark(kind="perf", name="p", model="gpt-4o-mini", task="concurrency", details=PERF)
    st.add_benchmark(kind="perf", name="q", model="qwen2.5-7b", task="sequential", details=PERF)
    costs = {c_["name"]: c_ for c_ in stored_costs(st, table)}
    assert costs["a"]["cost_usd"] == pytest.approx((400_000 * 0.15 + 40_000 * 0.60) / 1e6)
    assert costs["a"]["model"] == "gpt-4o-mini" and costs["a"]["id"] == a
    assert costs["b"]["cost_usd"] == 0.0                                    # an in-process judge
    assert costs["c"]["cost_usd"] is None and costs["c"]["price_source"] == "unknown" and costs["c"]["id"] == c
    assert costs["d"]["cost_usd"] == pytest.approx((1000 * 1.0 + 100 * 2.0) / 1e6)   # the run's own price stands
    assert costs["d"]["price_source"] == "option judge_price" and costs["d"]["id"] == d
    assert costs["e"]["cost_usd"] == 0.0 and costs["e"]["price_source"] == "no judge" and costs["e"]["id"] == e
    p = costs["p"]
    assert (p["kind"], p["input_tokens"], p["output_tokens"]) == ("perf", 39_200, 9_800)
    assert p["cost_usd"] == pytest.approx((39_200 * 0.15 + 9_800 * 0.60) / 1e6)
    assert costs["q"]["cost_usd"] is None and costs["q"]["input_tokens"] == 39_200
    assert [r["name"] for r in stored_costs(st, table, models=["GPT-4o-mini"])] == ["p", "a"]
    assert b and len(stored_costs(st, table, limit=1)) == 2                 # one of each kind
    # a user's table reprices what was priced from a table, and prices the self-hosted model
    own = load_table(write(tmp_path, "own.csv", "model,deployment,input,output\ngpt-4o-mini,standard,1,1\n"
                                                "qwen,self-hosted,0.5,0.5\nqwen2.5-7b,self-hosted,0.1,0.1\n"))
    again = {c_["name"]: c_ for c_ in stored_costs(st, own)}
    assert again["a"]["cost_usd"] == pytest.approx(440_000 / 1e6) and again["a"]["recorded_cost_usd"] == \
        pytest.approx(costs["a"]["cost_usd"])
    assert again["c"]["cost_usd"] == pytest.approx(1100 * 0.5 / 1e6)
    assert again["q"]["cost_usd"] == pytest.approx(49_000 * 0.1 / 1e6)
    assert again["d"]["cost_usd"] == costs["d"]["cost_usd"]
    st.close()


def test_a_run_priced_from_a_table_that_no_longer_lists_its_model_keeps_its_recorded_price(tmp_path):
    own = load_table(write(tmp_path, "own.csv", "model,input,output\nx,1,1\n"))
    run = {"id": "r", "judge": "openai:gpt-4o-mini", "usage": _usage(1000, 100, (0.15, 0.6), "price table (2025-08)")}
    c = eval_run_cost(run, own)
    assert c["cost_usd"] == pytest.approx((1000 * 0.15 + 100 * 0.6) / 1e6)
    assert c["price_source"] == "price table (2025-08) (recorded with the run)"
    assert eval_run_cost({"id": "r", "judge": "openai:gpt-4o", "usage": None}, own)["cost_usd"] is None
    assert benchmark_cost({"kind": "perf", "model": "m", "details": {"points": []}}, own)["cost_usd"] is None
    assert judge_model_name("azure:my-dep") == "my-dep" and judge_model_name("http://h/v1#m") == "m"


def test_cost_of_a_real_evaluation_run(tmp_path, fake, monkeypatch):
    from assay import evaluate
    from assay.models import RetryPolicy

    monkeypatch.delenv("ASSAY_JUDGE_PRICE", raising=False)
    st_path = str(tmp_path / "real.db")
    j = LimitedModel(OpenAICompat.endpoint(fake.base_url, "fake-judge"),
                     Limiter(concurrency=2, retry=RetryPolicy(max_attempts=2, base_delay=0.01, max_delay=0.02)))
    rows = [{"query": f"What is {i}?", "response": f"It is {i}.", "context": f"{i} is a number."} for i in range(2)]
    r = evaluate(rows, metrics="groundedness", judge=j, options={"judge_price": "1.0,4.0"}, store=st_path)
    st = Store(st_path)
    (c,) = stored_costs(st, builtin_table())
    u = r.run["judge_usage"]
    assert (c["input_tokens"], c["output_tokens"]) == (u["prompt_tokens"], u["completion_tokens"])
    assert c["cost_usd"] == pytest.approx(u["cost_usd"]) and c["model"] == "fake-judge"
    st.close()


# -- the command ------------------------------------------------------------------------------------

def _cli(*args: str) -> Any:
    from assay.cli.main import app

    return CliRunner().invoke(app, ["bench", "cost", *args])


def test_cli_prints_the_table(monkeypatch):
    monkeypatch.delenv("ASSAY_PRICES", raising=False)
    r = _cli("--model", "gpt-4o-mini", "-m", "qwen2.5-7b")
    assert r.exit_code == 0, r.output
    assert "price table (2025-08)" in r.output and "0.2625" in r.output
    line = next(ln for ln in r.output.splitlines() if "qwen2.5-7b" in ln)
    assert "unknown" in line and " 0 " not in line
    full = _cli()
    assert all(m in full.output for m in OPENAI_PRICES)


def test_cli_json_user_table_and_save(tmp_path):
    own = write(tmp_path, "p.yaml", YAML)
    r = _cli("--prices", str(own), "--json", "--save", str(tmp_path / "copy.csv"))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["table"]["origin"] == str(own) and doc["table"]["version"] == "2"
    assert [p["model"] for p in doc["prices"]] == ["Qwen2.5-7B", "gpt-4o-mini", "gpt-4o-mini"]
    assert doc["prices"][0]["cost_index"] == pytest.approx(0.0625) and doc["prices"][0]["rank"] == 1
    assert load_table(tmp_path / "copy.csv").find("qwen2.5-7b").per_1m == (0.05, 0.10)


def test_cli_runs(tmp_path):
    st = _store(tmp_path)
    _eval_run(st, "openai:gpt-4o-mini", _usage(400_000, 40_000, (0.15, 0.60), "price table (2025-08)"), "a")
    _eval_run(st, "http://127.0.0.1:9/v1#qwen", _usage(1000, 100, None, "unknown"), "c")
    st.add_benchmark(kind="perf", name="p", model="gpt-4o-mini", task="concurrency", details=PERF)
    st.close()
    db = str(tmp_path / "store.db")
    r = _cli("--runs", "--store", db)
    assert r.exit_code == 0, r.output
    assert "400,000" in r.output and "0.084" in r.output and "unknown" in r.output
    assert "(1 of unknown cost not included)" in r.output
    doc = json.loads(_cli("--runs", "--store", db, "--json", "-m", "gpt-4o-mini").stdout)
    assert {c["name"] for c in doc["runs"]} == {"a", "p"}
    assert all(c["cost_usd"] > 0 for c in doc["runs"])


def test_cli_a_bad_table_is_one_line_and_exit_2(tmp_path):
    bad = write(tmp_path, "bad.csv", "model,input,output\ngpt-4o,cheap,1\n")
    p = subprocess.run([sys.executable, "-m", "assay.cli", "bench", "cost", "--prices", str(bad)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [f"error: {bad}: line 2: field 'input': expected a number of USD per "
                                             "1M input tokens, got 'cheap'"]
