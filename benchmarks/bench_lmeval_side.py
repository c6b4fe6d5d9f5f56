"""lm-evaluation-harness 0.4.x and ``assay bench quality`` side by side: per task and group, each metric.

Both tools run the same task folder against the same OpenAI-compatible endpoint: the embedded Gemma 3 270M
GGUF behind llama-cpp-python's server on loopback (``--logits_all True``), behind the tokenizer proxy of
``bench_quality_conformance.py`` (lm-eval's ``local-completions`` with ``tokenizer_backend=remote``, no hub
download; the proxy also clears the server's prompt cache before each scored request, for both tools). The
folder is written by this script into a temporary directory, with data written for the project (small JSONL
files read through ``dataset_path: json`` + ``dataset_kwargs: {data_files: ...}``; nothing from the hub):

- ``side_mc_facts``, ``side_mc_science``  multiple_choice (``acc``, ``acc_norm``), in the group ``side_mc``
  (``aggregate_metric_list``: ``acc`` weighted by size, ``acc_norm`` unweighted);
- ``side_arith``                           generate_until with GSM8K's ``strict-match`` / ``flexible-extract``
  filters (``exact_match``);
- ``side_rolling``                         loglikelihood_rolling (``word_perplexity``, ``byte_perplexity``,
  ``bits_per_byte``), with documents longer than ``--max-length`` tokens so that both tools score them over
  lm-eval's rolling windows.

lm-eval runs ``lm_eval run --model local-completions --include_path DIR --tasks ... --log_samples
--output_path ...`` (its ``max_length`` model argument set to ``--max-length``), assay runs ``assay bench
quality --task-dir DIR --tasks ... --api completions --max-length N --output-lm-eval ...``: both write lm-eval's
results JSON and per-task samples JSONL, and this script compares them key by key: every ``metric,filter``
figure of every task and group (to ``--tol`` relative), then each sample's metric values, so a differing
figure comes with the documents behind it. Wall time of each side is printed too.

The lm-eval venv is the one ``bench_quality_conformance.py --setup`` makes (``benchmarks/.venvs/lm-eval``,
``lm-eval[api]==0.4.13`` from PyPI); ``--setup`` here makes the same.

    .venv/bin/python benchmarks/bench_lmeval_side.py --setup
    .venv/bin/python benchmarks/bench_lmeval_side.py [--limit 4] [--max-length 64] [--shots 1]

Exit status 0 when every figure agrees; 1 when one differs (each printed) or a step failed (one line).
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_quality_conformance as conf  # noqa: E402  (the server, the tokenizer proxy, the lm-eval venv)

ROOT = HERE.parent

# ----------------------------------------------------------------------------- the data (written for assay)

FACTS = [("The largest planet of the solar system is", ["Jupiter", "Mars", "Venus", "Mercury"], 0),
         ("Water boils at sea level at a temperature of", ["50 degrees", "100 degrees", "150 degrees", "0 degrees"], 1),
         ("The capital city of France is", ["Berlin", "Madrid", "Paris", "Rome"], 2),
         ("A week has this many days:", ["five", "six", "ten", "seven"], 3),
         ("The opposite of hot is", ["cold", "warm", "loud", "tall"], 0),
         ("Bees make", ["milk", "honey", "silk", "wool"], 1)]
SCIENCE = [("Which part of the plant takes in water from the soil?", ["leaf", "flower", "root", "seed"], 2),
           ("What force pulls objects toward the ground?", ["gravity", "magnetism", "friction", "wind"], 0),
           ("Which organ pumps blood through the body?", ["lung", "heart", "liver", "skin"], 1),
           ("What do we call frozen water?", ["steam", "ice", "fog", "dew"], 1),
           ("Which gas do animals breathe in to live?", ["helium", "oxygen", "neon", "argon"], 1)]
ARITH = [("Sam has 4 pens and gets 3 more. How many pens does he have?", "4 + 3 = 7\n#### 7"),
         ("A box holds 6 eggs. How many eggs are in 2 boxes?", "6 * 2 = 12\n#### 12"),
         ("Ana read 10 pages and then 5 pages. How many pages did she read?", "10 + 5 = 15\n#### 15"),
         ("There were 9 birds and 4 flew away. How many birds are left?", "9 - 4 = 5\n#### 5"),
         ("Each bag has 3 apples. How many apples are in 5 bags?", "3 * 5 = 15\n#### 15")]
ROLLING = [
    "The river runs through the old town, past the mill and the market square, and on to the sea.",
    "On Mondays the bakery opens at six. The first customers are usually the builders from the site across "
    "the road, who buy bread rolls and coffee. By eight the schoolchildren arrive for pastries, and by ten the "
    "shelves are half empty. The baker, who has worked there for thirty years, says that the secret of good "
    "bread is patience: the dough must rest, the oven must be hot, and nobody should open the door too soon.",
    "Lighthouses were built to warn ships of rocks and shallow water. Each one has its own pattern of flashes, "
    "so that sailors can tell them apart at night. Today most are automatic, but some still have keepers who "
    "climb the stairs every evening, clean the lenses, and write the weather in a book that nobody reads.",
    "Snow fell all night.",
]

MC_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
fewshot_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{label}}}}"
doc_to_choice: "{{{{choices}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

GROUP_YAML = """group: side_mc
task:
  - side_mc_facts
  - side_mc_science
aggregate_metric_list:
  - metric: acc
    aggregation: mean
    weight_by_size: true
  - metric: acc_norm
    aggregation: mean
    weight_by_size: false
metadata:
  version: 1.0
"""

ARITH_YAML = r"""task: side_arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
fewshot_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\nAnswer:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["Question:", "\n\n"]
  do_sample: false
  temperature: 0.0
  max_gen_toks: 32
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
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\$", "(?s).*#### ", "\\.$"]
metadata:
  version: 1.0
"""

ROLLING_YAML = """task: side_rolling
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
  - metric: byte_perplexity
  - metric: bits_per_byte
metadata:
  version: 1.0
"""

TASKS = ["side_mc", "side_arith", "side_rolling"]


def write_tasks(d: Path) -> None:
    """The task folder (YAML + JSONL), data paths absolute so that lm-eval reads them from any folder."""
    d.mkdir(parents=True)

    def jsonl(name: str, rows: list[dict]) -> Path:
        p = d / f"{name}.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return p

    for name, rows in (("side_mc_facts", FACTS), ("side_mc_science", SCIENCE)):
        data = jsonl(name, [{"question": q, "choices": c, "label": k} for q, c, k in rows])
        (d / f"{name}.yaml").write_text(MC_YAML.format(name=name, data=data))
    (d / "side_mc.yaml").write_text(GROUP_YAML)
    data = jsonl("side_arith", [{"question": q, "answer": a} for q, a in ARITH])
    (d / "side_arith.yaml").write_text(ARITH_YAML.format(data=data))
    data = jsonl("side_rolling", [{"text": t} for t in ROLLING])
    (d / "side_rolling.yaml").write_text(ROLLING_YAML.format(data=data))


# ----------------------------------------------------------------------------- the two runs


class BosStrip:
    """A pass-through in front of the tokenizer proxy, for lm-eval only: lm-eval's first rolling window is its
    prefix token (the start token, from ``tokenizer_info``) and the document, decoded to text because the server
    takes text; llama-cpp-python adds its own start token to a text prompt, so the model would see two. This
    drops the start token's text from the front of a ``/completions`` prompt, so the server sees what lm-eval
    means (one start token, then the document). Everything else passes through unchanged."""

    def __init__(self, upstream: str, bos_text: str) -> None:
        import http.server
        import threading
        import urllib.request

        me = self
        self.upstream, self.bos_text, self.stripped = upstream, bos_text, 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self.pass_on(None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/").endswith("/completions"):
                    req = json.loads(body)
                    prompt = req.get("prompt")
                    if isinstance(prompt, str) and me.bos_text and prompt.startswith(me.bos_text):
                        req["prompt"] = prompt[len(me.bos_text):]
                        me.stripped += 1
                        body = json.dumps(req).encode()
                self.pass_on(body)

            def pass_on(self, body: bytes | None) -> None:
                req = urllib.request.Request(me.upstream + self.path, data=body,
                                             method="POST" if body is not None else "GET",
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=900) as r:
                        status, data = r.status, r.read()
                except urllib.error.HTTPError as e:
                    status, data = e.code, e.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()



def offline_env(work: Path) -> dict[str, str]:
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HOME": str(work / "hf-home"), "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)
    return env


def run_lm_eval(tasks_dir: Path, proxy_port: int, work: Path, a: argparse.Namespace, *,
                tasks: list[str] = TASKS, extra: tuple[str, ...] = (),
                env_extra: dict[str, str] | None = None) -> tuple[Path, float]:
    """``lm_eval run`` on ``tasks`` of the folder (``extra``: more of its arguments, ``env_extra``: more
    environment); its output folder, seconds."""
    if not conf.lm_eval_bin().exists():
        raise conf.StepFailed(f"lm-eval: {conf.lm_eval_bin().relative_to(ROOT)} is missing; run with --setup first")
    out = work / "lm-eval-out"
    base = f"http://127.0.0.1:{proxy_port}/v1/completions"
    cmd = [str(conf.lm_eval_bin()), "run", "--model", "local-completions",
           "--model_args", f"model={conf.ALIAS},base_url={base},tokenizer_backend=remote,tokenized_requests=False,"
                           f"num_concurrent=1,max_retries=1,max_length={a.max_length}",
           "--include_path", str(tasks_dir), "--tasks", *tasks, "--seed", str(a.seed),
           "--log_samples", "--output_path", str(out), *extra]
    if a.shots is not None:
        cmd += ["--num_fewshot", str(a.shots)]
    if a.limit is not None:
        cmd += ["--limit", str(a.limit)]
    took = conf.run_logged(cmd, env={**offline_env(work), **(env_extra or {})}, cwd=work, log=work / "lm-eval.log",
                           what="lm-eval")
    return out, took


def run_assay(tasks_dir: Path, server: str, work: Path, a: argparse.Namespace, *, tasks: list[str] = TASKS,
              extra: tuple[str, ...] = (), env_extra: dict[str, str] | None = None,
              path_after: tuple[str, ...] = (), cwd: Path = ROOT) -> tuple[Path, float]:
    """``assay bench quality`` on ``tasks`` of the folder (``extra``: more of its arguments, ``env_extra``: more
    environment, ``path_after``: folders of modules searched after assay's own environment, ``cwd``: where it
    runs); its ``--output-lm-eval`` folder, seconds."""
    out = work / "assay-out"
    cmd = [sys.executable, "-c", f"import sys; sys.path.extend({list(path_after)!r}); "
                                 "from assay.cli.main import main; sys.exit(main())",
           "bench", "quality", "--model", f"{server}/v1#{conf.ALIAS}", "--task-dir", str(tasks_dir),
           "--tasks", ",".join(tasks), "--api", "completions", "--seed", str(a.seed),
           "--max-length", str(a.max_length), "--output-lm-eval", str(out), "--concurrency", "1", "--quiet", *extra]
    if a.shots is not None:
        cmd += ["--shots", str(a.shots)]
    if a.limit is not None:
        cmd += ["--limit", str(a.limit)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "ASSAY_STORE": str(work / "assay.db"),
           "ASSAY_CACHE": "off", **(env_extra or {})}   # every call made, as lm-eval makes them (its cache is off too)
    took = conf.run_logged(cmd, env=env, cwd=cwd, log=work / "assay.log", what="assay: 'assay bench quality'")
    return out, took


def read_output(out: Path) -> tuple[dict, dict[str, dict[int, list[dict]]]]:
    """lm-eval-format output: (results, {task: {doc_id: [sample rows, one per filter]}})."""
    files = sorted(glob.glob(str(out / "**" / "results_*.json"), recursive=True))
    if not files:
        raise conf.StepFailed(f"no results_*.json under {out}")
    results = json.loads(Path(files[-1]).read_text())["results"]
    samples: dict[str, dict[int, list[dict]]] = {}
    for f in sorted(glob.glob(str(out / "**" / "samples_*.jsonl"), recursive=True)):
        task = Path(f).name[len("samples_"):].rsplit("_", 1)[0]
        for line in Path(f).read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                samples.setdefault(task, {}).setdefault(int(row["doc_id"]), []).append(row)
    return results, samples


# ----------------------------------------------------------------------------- the comparison


def close(x: object, y: object, tol: float) -> bool:
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        return math.isclose(float(x), float(y), rel_tol=tol, abs_tol=tol)
    return x == y


def sample_value(rows: list[dict], key: str) -> object:
    metric, _, filt = key.partition(",")
    for r in rows:
        if r.get("filter", "none") == (filt or "none") and metric in r:
            return r[metric]
    return None


def compare(lm: tuple, az: tuple, tol: float) -> list[str]:
    """Per task and group, each figure side by side; the documents behind a differing figure."""
    (lres, lsam), (ares, asam) = lm, az
    differ: list[str] = []
    print(f"\n{'task / group':<18} {'metric,filter':<32} {'lm-eval':>12} {'assay':>12}  agree")
    for name in sorted(set(lres) | set(ares)):
        L, A = lres.get(name, {}), ares.get(name, {})
        keys = sorted(k for k in set(L) | set(A) if k != "alias" and "," in k)
        for k in keys:
            lv, av = L.get(k), A.get(k)
            ok = close(lv, av, tol)
            show = [f"{v:>12.6g}" if isinstance(v, (int, float)) else f"{str(v):>12}" for v in (lv, av)]
            print(f"{name:<18} {k:<32} {show[0]} {show[1]}  {'yes' if ok else 'NO'}")
            if not ok:
                differ.append(f"{name} {k}: lm-eval {lv} assay {av}")
                for doc in sorted(set(lsam.get(name, {})) | set(asam.get(name, {}))):
                    x = sample_value(lsam.get(name, {}).get(doc, []), k)
                    y = sample_value(asam.get(name, {}).get(doc, []), k)
                    if not close(x, y, tol):
                        differ.append(f"  doc {doc}: lm-eval {json.dumps(x)[:120]} assay {json.dumps(y)[:120]}")
    return differ


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setup", action="store_true", help="make the lm-eval venv first")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--shots", type=int, default=None)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--max-length", type=int, default=64,
                   help="lm-eval's max_length (and assay's --max-length): small, so the long documents roll")
    p.add_argument("--tol", type=float, default=1e-4, help="relative tolerance of a figure")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    a = p.parse_args(argv)
    try:
        if a.setup:
            conf.setup()
        gguf = conf.Path(os.environ.get("ASSAY_GGUF", str(Path.home() / ".cache/assay/models/gemma-3-270m-q4_k_m.gguf")))
        if not gguf.exists():
            raise conf.StepFailed(f"model: {gguf} is missing (scripts/install_local_backend.sh and `assay models pull`)")
        work = Path(tempfile.mkdtemp(prefix="lmeval-side-"))
        tasks_dir = work / "tasks"
        write_tasks(tasks_dir)
        server = conf.LlamaServer(gguf, work / "server.log")
        proxy = conf.TokenizerProxy(gguf, server.base)
        strip = BosStrip(f"http://127.0.0.1:{proxy.port}", proxy.info["bos_token"])
        try:
            lm_out, lm_s = run_lm_eval(tasks_dir, strip.port, work, a)
            az_out, az_s = run_assay(tasks_dir, f"http://127.0.0.1:{proxy.port}", work, a)
        finally:
            strip.stop()
            proxy.stop()
            server.stop()
        print(f"lm-eval prompts that began with the start token's text {proxy.info['bos_token']!r}: {strip.stripped}")
        differ = compare(read_output(lm_out), read_output(az_out), a.tol)
        print(f"\nwall time: lm-eval {lm_s:.1f} s, assay {az_s:.1f} s (same server, same proxy; "
              f"limit {a.limit}, shots {a.shots}, max_length {a.max_length}, seed {a.seed})")
        print("differing figures: " + ("none" if not differ else str(sum(not d.startswith(' ') for d in differ))))
        for d in differ:
            print(d)
        if a.keep:
            print(f"work folder: {work}")
        return 1 if differ else 0
    except conf.StepFailed as e:
        print(f"bench_lmeval_side: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
