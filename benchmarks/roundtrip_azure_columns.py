"""Do azure-ai-evaluation's ``evaluate()`` and assay's Azure-layout export name the same columns?

    python benchmarks/roundtrip_azure_columns.py [--keep] [--no-fixture]

1. Makes (once) ``.bench/azure-venv`` with azure-ai-evaluation and the offline NLTK data, the
   same way ``benchmarks/conformance_azure.py`` does (its code is reused, not copied).
2. Serves a scripted OpenAI-compatible judge on a loopback port (this file, ``--serve PORT``):
   a chat completion answers ``{"score": 4, "reason": ...}`` (azure's evaluators and assay's
   1-5 judges read it), or ``{"rating": "yes", ...}`` / ``{"intents": [...]}`` when the prompt
   asks for those keys (assay's yes/no judges, its retrieval intent split).
3. Writes two small JSONL files in Azure's shapes: single-turn RAG rows (``query``,
   ``response``, ``context``, ``ground_truth``) and agent rows (``query`` and ``response`` as
   message lists with ``tool_call`` / ``tool_result`` parts, ``tool_definitions``,
   ``ground_truth``).
4. Runs azure-ai-evaluation's ``evaluate()`` on them in the azure venv with every evaluator
   that can run offline: F1Score, Bleu, Gleu, Meteor, Rouge (each type); Groundedness,
   Relevance, Coherence, Fluency, Similarity, Retrieval on the RAG rows; IntentResolution,
   TaskAdherence, ToolCallAccuracy, ResponseCompleteness on the agent rows -- the judged ones
   pointed at the loopback judge. Each evaluator is named as assay names the metric.
5. Runs ``assay eval FILE --metrics ... --judge http://127.0.0.1:PORT/v1#fake-judge`` and
   ``assay export last -o out.json --layout azure`` on the same files (the agent file only
   when this assay reads it and has the agent metrics).
6. Compares, per metric, the row columns ``outputs.<metric>.*`` and the top-level
   ``metrics`` keys ``<metric>.*``, prints a table (metric, azure columns, assay columns,
   same?), and writes azure's column names per evaluator to ``tests/fixtures/azure_columns.json``
   with azure-ai-evaluation's version (``--no-fixture`` leaves it alone).

Exit status 1 when a metric both have is named differently.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conformance_azure import AZURE_VENV, NLTK_DATA, OFFLINE_NLTK, ensure_azure_venv, ensure_nltk_data, venv_python
from loopback import start_own_server

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "azure_columns.json"
MODEL = "fake-judge"
#: the judge's answers: a 1-5 score (azure's evaluators, assay's 1-5 judges); a yes/no rating (assay's
#: yes/no judges, whose prompts ask for ``"rating"``); an intent list (assay's retrieval, ``"intents"``);
#: the top of the scale for a judge whose prompt names a smaller one (assay's 0-1 judges)
JUDGE_ANSWER = {"score": 4, "reason": "The answer is supported and addresses the request."}
RATING_ANSWER = {"rating": "yes", "reason": "The documents hold what the request needs."}
INTENTS_ANSWER = {"intents": ["the request as asked"]}


def judge_answer(request_body: bytes) -> dict:
    """The answer to one chat completion request, by what its prompt asks for."""
    text = request_body.decode("utf-8", "replace")
    if '\\"intents\\"' in text:
        return INTENTS_ANSWER
    if '\\"rating\\"' in text:
        return RATING_ANSWER
    top = re.search(r"(?:an integer|a number) from -?[0-9.]+ to ([0-9.]+)", text)  # assay's 0-1 judges
    if top and float(top.group(1)) < JUDGE_ANSWER["score"]:
        return {**JUDGE_ANSWER, "score": float(top.group(1))}
    return JUDGE_ANSWER


CLASSIC = ["f1_score", "bleu", "gleu", "meteor", "rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL"]
RAG_JUDGES = ["groundedness", "relevance", "coherence", "fluency", "similarity", "retrieval"]
AGENT_JUDGES = ["intent_resolution", "task_adherence", "tool_call_accuracy", "response_completeness"]

# -- the rows ----------------------------------------------------------------------------------------

RAG_ROWS = [
    {"query": "How long is the warranty on the trail backpack?",
     "response": "The trail backpack comes with a two-year limited warranty.",
     "context": "Every backpack in the trail line carries a limited warranty of two years from purchase.",
     "ground_truth": "Two years, limited warranty."},
    {"query": "Which stove runs on butane?",
     "response": "The compact stove burns butane canisters; the base camp stove needs propane.",
     "context": "Compact stove: fuel butane, weight 300 g. Base camp stove: fuel propane, two burners.",
     "ground_truth": "The compact stove."},
    {"query": "Can I return a tent after thirty days?",
     "response": "Returns are accepted within 60 days if the tent is unused.",
     "context": "Unused items may be returned within 60 days of delivery for a full refund.",
     "ground_truth": "Yes, unused tents can be returned within 60 days."},
]

_WEATHER_TOOL = {"name": "get_forecast", "description": "Forecast for a city on a date.",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                                 "date": {"type": "string"}},
                                "required": ["city"]}}
_ORDER_TOOL = {"name": "lookup_order", "description": "Status of an order by its number.",
               "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}},
                              "required": ["order_id"]}}


def _agent_row(system: str, user: str, call_id: str, tool: str, args: dict, result: dict, answer: str,
               truth: str) -> dict:
    t = "2025-03-01T10:00:00Z"
    return {
        "query": [{"role": "system", "content": system},
                  {"createdAt": t, "role": "user", "content": [{"type": "text", "text": user}]}],
        "response": [
            {"createdAt": t, "run_id": "run-1", "role": "assistant",
             "content": [{"type": "tool_call", "tool_call_id": call_id, "name": tool, "arguments": args}]},
            {"createdAt": t, "run_id": "run-1", "tool_call_id": call_id, "role": "tool",
             "content": [{"type": "tool_result", "tool_result": result}]},
            {"createdAt": t, "run_id": "run-1", "role": "assistant", "content": [{"type": "text", "text": answer}]},
        ],
        "tool_definitions": [_WEATHER_TOOL, _ORDER_TOOL],
        "ground_truth": truth,
    }


AGENT_ROWS = [
    _agent_row("You are a travel helper. Answer briefly and always give temperatures in Celsius.",
               "Will it rain in Lisbon tomorrow?", "call_a1", "get_forecast",
               {"city": "Lisbon", "date": "tomorrow"}, {"rain_mm": 4, "high_c": 17},
               "Yes, about 4 mm of rain is expected in Lisbon tomorrow, with a high of 17 °C.",
               "Light rain, around 4 mm; high 17 °C."),
    _agent_row("You are a shop assistant. Only discuss orders the customer names.",
               "Where is my order 7731?", "call_b1", "lookup_order", {"order_id": "7731"},
               {"status": "shipped", "eta": "Thursday"},
               "Order 7731 has shipped and should arrive on Thursday.",
               "It shipped; arrival expected Thursday."),
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


# -- the loopback judge (a separate process) ----------------------------------------------------------

def serve(port: int, latency: float) -> None:
    def completion(content: dict) -> bytes:
        return json.dumps({
            "id": "chatcmpl-roundtrip", "object": "chat.completion", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(content)}}],
            "usage": {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320},
        }).encode()

    models = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, body: bytes, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802
            self._send(models if self.path.rstrip("/").endswith("/models") else b"{}")

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if latency:
                time.sleep(latency)
            if self.path.split("?")[0].endswith("/chat/completions"):
                self._send(completion(judge_answer(body)))
            else:
                self._send(b'{"error": {"message": "not served here"}}', 404)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("ready", flush=True)
    server.serve_forever()


# -- the azure side (runs inside the azure venv) --------------------------------------------------------

AZURE_RUNNER = OFFLINE_NLTK + textwrap.dedent(r'''
    import json, logging, os, sys, warnings
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    base_url, rag_path, agent_path, out_dir, have_wordnet = sys.argv[1:6]
    if have_wordnet != "1":
        from nltk.corpus import wordnet
        wordnet.synsets = lambda *a, **k: []
    import azure.ai.evaluation as ae
    from importlib.metadata import version

    cfg = ae.OpenAIModelConfiguration(type="openai", api_key="unused", base_url=base_url, model="fake-judge")
    rag = {"f1_score": ae.F1ScoreEvaluator(), "bleu": ae.BleuScoreEvaluator(), "gleu": ae.GleuScoreEvaluator(),
           "meteor": ae.MeteorScoreEvaluator()}
    for t in ["rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL"]:
        rag[t] = ae.RougeScoreEvaluator(rouge_type=ae.RougeType(t))
    rag.update(groundedness=ae.GroundednessEvaluator(cfg), relevance=ae.RelevanceEvaluator(cfg),
               coherence=ae.CoherenceEvaluator(cfg), fluency=ae.FluencyEvaluator(cfg),
               similarity=ae.SimilarityEvaluator(cfg), retrieval=ae.RetrievalEvaluator(cfg))
    agent = {"intent_resolution": ae.IntentResolutionEvaluator(cfg), "task_adherence": ae.TaskAdherenceEvaluator(cfg),
             "tool_call_accuracy": ae.ToolCallAccuracyEvaluator(cfg),
             "response_completeness": ae.ResponseCompletenessEvaluator(cfg)}
    classes = {name: type(ev).__name__ for name, ev in {**rag, **agent}.items()}
    out = {"version": version("azure-ai-evaluation"), "classes": classes, "runs": {}}
    for label, path, evaluators in (("rag", rag_path, rag), ("agent", agent_path, agent)):
        res = ae.evaluate(data=path, evaluators=evaluators, output_path=os.path.join(out_dir, label + ".json"))
        out["runs"][label] = {"rows": res["rows"], "metrics": res["metrics"]}
    out["download_calls"] = sorted(set(download_calls))
    with open(os.path.join(out_dir, "azure_result.json"), "w") as fh:
        json.dump(out, fh, default=str)
''')


def run_azure(base_url: str, rag: Path, agent: Path, tmp: Path, have_wordnet: bool) -> dict:
    runner = tmp / "azure_runner.py"
    runner.write_text(AZURE_RUNNER)
    env = dict(os.environ, NLTK_DATA=str(NLTK_DATA), PYTHONWARNINGS="ignore", PF_LOGGING_LEVEL="CRITICAL")
    r = subprocess.run([str(venv_python()), str(runner), base_url, str(rag), str(agent), str(tmp),
                        "1" if have_wordnet else "0"], env=env, capture_output=True, text=True, cwd=tmp)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-2000:] + r.stderr[-4000:])
        raise SystemExit("the azure-ai-evaluation subprocess failed")
    return json.loads((tmp / "azure_result.json").read_text())


def columns_of(result: dict, metric: str) -> tuple[list[str], list[str]]:
    """``outputs.<metric>.*`` row columns (over every row) and ``<metric>.*`` aggregate keys."""
    prefix = f"outputs.{metric}."
    cols = sorted({k[len(prefix):] for row in result.get("rows") or [] for k in row if k.startswith(prefix)})
    aggs = sorted(k[len(metric) + 1:] for k in (result.get("metrics") or {}) if k.startswith(metric + "."))
    return cols, aggs


# -- the assay side -----------------------------------------------------------------------------------

def assay_cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "assay", *args], env=env, capture_output=True, text=True)


def run_assay(base_url: str, path: Path, metrics: list[str], tmp: Path, label: str) -> tuple[dict | None, str]:
    """``assay eval`` then ``assay export --layout azure``: the exported document, or None and why."""
    sys.path.insert(0, str(ROOT / "src"))
    from assay.metrics.base import REGISTRY, load_builtin_metrics

    load_builtin_metrics()
    have = [m for m in metrics if m in REGISTRY]
    if not have:
        return None, "assay has none of these metrics yet"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
               ASSAY_CACHE="off", NO_COLOR="1", COLUMNS="200")
    env.pop("ASSAY_JUDGE", None)
    store = tmp / f"store-{label}.db"
    r = assay_cli("eval", str(path), "--metrics", ",".join(have), "--judge", f"{base_url}#{MODEL}",
                  "--store", str(store), "--name", f"roundtrip-{label}", "--quiet", env=env)
    if r.returncode != 0:
        lines = (r.stderr.strip() or r.stdout.strip()).splitlines()
        return None, f"assay eval failed: {lines[-1] if lines else r.returncode}"
    dst = tmp / f"assay-{label}.json"
    r = assay_cli("export", f"roundtrip-{label}", "-o", str(dst), "--layout", "azure", "--store", str(store), env=env)
    if r.returncode != 0:
        lines = (r.stderr.strip() or r.stdout.strip()).splitlines()
        return None, f"assay export failed: {lines[-1] if lines else r.returncode}"
    return json.loads(dst.read_text()), ""


# -- comparison ---------------------------------------------------------------------------------------

def _fmt(names: list[str] | None) -> str:
    return "-" if names is None else (", ".join(names) or "(none)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--latency", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--keep", action="store_true", help="keep the data, azure and assay files (printed path)")
    ap.add_argument("--no-fixture", action="store_true", help=f"do not rewrite {FIXTURE.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.serve, args.latency)
        return 0

    version = ensure_azure_venv()
    have_wordnet = bool(ensure_nltk_data()["wordnet"])
    tmp = Path(tempfile.mkdtemp(prefix="assay-roundtrip-"))
    rag = write_jsonl(tmp / "rag.jsonl", RAG_ROWS)
    agent = write_jsonl(tmp / "agent.jsonl", AGENT_ROWS)
    proc, root = start_own_server(__file__, args.latency)
    base_url = f"{root}/v1"
    try:
        print(f"azure-ai-evaluation {version} in {AZURE_VENV}; loopback judge {base_url} ({MODEL})", flush=True)
        t0 = time.perf_counter()
        azure = run_azure(base_url, rag, agent, tmp, have_wordnet)
        print(f"azure evaluate(): {time.perf_counter() - t0:.1f} s; nltk.download stubbed offline "
              f"(asked for: {', '.join(azure['download_calls']) or 'nothing'})")
        os.environ["ASSAY_WORDNET_DIR"] = str(NLTK_DATA / "corpora" / "wordnet") if have_wordnet else "none"
        ours = {}
        notes = {}
        for label, path, metrics in (("rag", rag, CLASSIC + RAG_JUDGES), ("agent", agent, AGENT_JUDGES)):
            ours[label], notes[label] = run_assay(base_url, path, metrics, tmp, label)
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    fixture = {"azure_ai_evaluation": version,
               "made_by": "benchmarks/roundtrip_azure_columns.py",
               "judge_answer": JUDGE_ANSWER,
               "note": "rows: the outputs.<metric>.* column names; metrics: the <metric>.* aggregate keys",
               "metrics": {}}
    rows = []
    differ = False
    for label, metrics in (("rag", CLASSIC + RAG_JUDGES), ("agent", AGENT_JUDGES)):
        run = azure["runs"][label]
        for m in metrics:
            a_cols, a_aggs = columns_of(run, m)
            fixture["metrics"][m] = {"evaluator": azure["classes"][m], "rows": a_cols, "metrics": a_aggs}
            o = ours[label]
            o_cols, o_aggs = columns_of(o, m) if o is not None else (None, None)
            if o is not None and not o_cols:
                o_cols = o_aggs = None  # assay does not have it
            if o_cols is None:
                failed = o is None and not notes[label].startswith("assay has none")
                same = notes[label] if failed else "assay lacks it"
                differ |= failed
            else:
                ok = a_cols == o_cols and a_aggs == o_aggs
                differ |= not ok
                same = "yes" if ok else "NO"
            rows.append((m, a_cols, a_aggs, o_cols, o_aggs, same))

    print(f"\n{'metric':22s} {'same?':16s} azure columns (outputs.<metric>.*) | aggregates (<metric>.*)")
    for m, a_cols, a_aggs, o_cols, o_aggs, same in rows:
        print(f"{m:22s} {same:16s} azure: {_fmt(a_cols)} | {_fmt(a_aggs)}")
        if same not in ("yes",) and o_cols is not None:
            print(f"{'':39s} assay: {_fmt(o_cols)} | {_fmt(o_aggs)}")
    both = [r for r in rows if r[3] is not None]
    print(f"\n{len(both)} metrics both have; {sum(r[5] == 'yes' for r in both)} with the same column names; "
          f"{len(rows) - len(both)} only in azure-ai-evaluation ({', '.join(r[0] for r in rows if r[3] is None)})")
    if not args.no_fixture:
        FIXTURE.write_text(json.dumps(fixture, indent=2) + "\n")
        print(f"wrote {FIXTURE.relative_to(ROOT)}")
    if args.keep:
        print(f"files kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nresult:", "same column names for every metric both have" if not differ else "COLUMN NAMES DIFFER")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
