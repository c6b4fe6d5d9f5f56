"""lm-evaluation-harness 0.4.x and ``assay bench quality`` on lm-eval's own files for its 16 most used tasks, item by item.

The tasks: arc_easy, arc_challenge, mmlu_anatomy, gsm8k, gsm8k_cot, truthfulqa_mc1, truthfulqa_mc2, piqa, boolq,
humaneval, bbh_cot_fewshot_boolean_expressions, lambada_openai, mbpp, ifeval, winogrande, hellaswag. Their task
files are read from the lm-eval package installed in the benchmark's venv (``benchmarks/.venvs/lm-eval``,
``--setup``), unchanged: for each task this script writes a YAML of a few lines that includes lm-eval's file by
its absolute path and adds the documented ``data_files`` block (``dataset_path: json``, ``dataset_name: null``,
one file per split) naming the data written for the project in ``tests/data/lmeval16/<task>/<split>.jsonl``
(see its README). lm-eval reads that folder with ``--include_path`` (which takes precedence over its built-in
tasks of the same names), assay with ``--task-dir``, ``$ASSAY_TASK_INCLUDE`` naming lm-eval's ``tasks`` folder
and ``--trust-task-code``: both tools run the same task files, the same hooks (``utils.py``,
``preprocess_winogrande.py``, ...), the same data. What the hooks import (``lm_eval`` itself for ifeval,
``datasets``, ``evaluate``, ``sacrebleu``, ``langdetect``, ...) assay's side finds in lm-eval's venv, whose
site-packages folder is searched after assay's own environment (which is left as it is). lm-eval reads every split
a task names when it builds it (arc_easy's ``train`` and ``validation`` too, at 0 shots); a named split without a
file of its own is given the evaluation split's file (printed per task).

The model, the server and the requests are those of ``bench_lmeval_side.py``: the embedded Gemma 3 270M GGUF
behind llama-cpp-python's server (``--logits_all True``), the tokenizer proxy of ``bench_quality_conformance.py``
(which also clears the server's prompt cache before each scored request, for both tools), lm-eval's
``local-completions`` with ``tokenizer_backend=remote``, the same ``--seed``. The server is started through
``tests/helpers/llama_server_fast.py`` (the same server the tests start; its per-token sort of the whole vocabulary done by numpy, same
numbers; ``--plain-server`` starts it as ``python -m llama_cpp.server``).

Both tools write lm-eval's results JSON and samples JSONL; this script compares, per task and item:

- ``prompt``      every request's context (and continuation, for log-likelihood requests);
- ``logliks``     each choice's log-likelihood (to ``--tol``, as ``bench_lmeval_side.py``);
- ``answer``      the raw generation(s);
- ``extraction``  each filter's filtered response;
- ``score``       each metric's per-item value;

then every ``metric,filter`` figure and its stderr. A table per task puts the lm-eval and assay figures side by
side with the count of items compared and of items that differ (and why); ``--json`` writes everything.

Two things lm-eval needs that an offline machine lacks, said where they apply:

- humaneval's and mbpp's ``utils.py`` call ``evaluate.load("code_eval")``, which fetches the metric's script from
  the hub. ``evaluate.load`` reads a local folder of that name first, so lm-eval runs in a folder with a
  ``code_eval/code_eval.py`` written for this benchmark from the metric's documented behaviour (each candidate
  followed by its test program in a fresh Python process, 3 s timeout; pass@k by the unbiased estimator). Its
  pass@1 on lm-eval's side is therefore this stand-in's; prompts, generations and extraction are lm-eval's.
- ifeval's ``instructions_util.py`` asks NLTK for ``punkt_tab`` at import (no network: NLTK logs that it cannot
  download it and goes on); the data uses only instructions whose checks need no NLTK data.

    .venv/bin/python benchmarks/bench_lmeval_tasks16.py --setup       # lm-eval 0.4.13 + the hooks' modules
    .venv/bin/python benchmarks/bench_lmeval_tasks16.py --limit 2 [--tasks arc_easy,winogrande] [--json F]

Exit status 0 when no item and no figure differs; 1 when one does (each printed) or a step failed (one line).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_lmeval_side as side  # noqa: E402  (the two runs, their output, figure comparison)
import bench_quality_conformance as conf  # noqa: E402  (the server, the tokenizer proxy, the lm-eval venv)

ROOT = HERE.parent
DATA = ROOT / "tests" / "data" / "lmeval16"

# Each task: its file under lm-eval's ``lm_eval/tasks`` folder.
TASKS = {
    "arc_easy": "arc/arc_easy.yaml",
    "arc_challenge": "arc/arc_challenge.yaml",
    "mmlu_anatomy": "mmlu/default/mmlu_anatomy.yaml",
    "gsm8k": "gsm8k/gsm8k.yaml",
    "gsm8k_cot": "gsm8k/gsm8k-cot.yaml",
    "truthfulqa_mc1": "truthfulqa/truthfulqa_mc1.yaml",
    "truthfulqa_mc2": "truthfulqa/truthfulqa_mc2.yaml",
    "piqa": "piqa/piqa.yaml",
    "boolq": "super_glue/boolq/default.yaml",
    "humaneval": "humaneval/humaneval.yaml",
    "bbh_cot_fewshot_boolean_expressions": "bbh/cot_fewshot/boolean_expressions.yaml",
    "lambada_openai": "lambada/lambada_openai.yaml",
    "mbpp": "mbpp/mbpp.yaml",
    "ifeval": "ifeval/ifeval.yaml",
    "winogrande": "winogrande/default.yaml",
    "hellaswag": "hellaswag/hellaswag.yaml",
}
# What the tasks' hooks import beyond lm-eval's own dependencies (ifeval: langdetect, immutabledict, nltk;
# truthfulqa: sacrebleu, rouge_score; hellaswag, mbpp: datasets).
HOOK_MODULES = ["langdetect", "immutabledict", "nltk", "sacrebleu", "rouge_score", "datasets"]

CODE_EVAL = '''"""A stand-in for the hub's ``code_eval`` metric (offline), written for assay's benchmark: each candidate
program followed by its test program, in a fresh Python process with a timeout; pass@k by the unbiased estimator."""
import os
import subprocess
import sys

import datasets
import evaluate
import numpy as np


def passes(program, timeout):
    try:
        r = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0


def estimate(n, c, k):
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


class CodeEval(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="pass@k (local stand-in)", citation="", inputs_description="",
                                   features=datasets.Features({"predictions": datasets.Sequence(datasets.Value("string")),
                                                               "references": datasets.Value("string")}))

    def _compute(self, predictions, references, k=[1, 10, 100], num_workers=4, timeout=3.0):
        if os.getenv("HF_ALLOW_CODE_EVAL", "0") != "1":
            raise ValueError("set HF_ALLOW_CODE_EVAL=1 to run generated code")
        results, counts = {}, []
        for tid, (cands, test) in enumerate(zip(predictions, references)):
            ok = [passes(c + "\\n" + test, timeout) for c in cands]
            results[tid] = [(j, {"task_id": tid, "passed": p, "completion_id": j}) for j, p in enumerate(ok)]
            counts.append((len(ok), sum(ok)))
        pass_at_k = {f"pass@{kk}": float(np.mean([estimate(n, c, kk) for n, c in counts]))
                     for kk in k if all(n >= kk for n, _ in counts)}
        return pass_at_k, results
'''


# ----------------------------------------------------------------------------- set-up and the task folder


def setup() -> None:
    """lm-eval's venv (``bench_quality_conformance.setup``) plus the modules its tasks' hooks import."""
    conf.setup()
    pip = conf.VENV / "bin" / "pip"
    print(f"setup: {pip.relative_to(ROOT)} install {' '.join(HOOK_MODULES)}", flush=True)
    r = subprocess.run([str(pip), "install", "-q", "--disable-pip-version-check", *HOOK_MODULES],
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise conf.StepFailed(f"setup: pip install {' '.join(HOOK_MODULES)} failed: {r.stderr.strip()[-300:]}")


def lm_eval_site() -> Path:
    """The site-packages folder of the benchmark's lm-eval venv."""
    found = sorted(glob.glob(str(conf.VENV / "lib" / "python3*" / "site-packages" / "lm_eval" / "tasks")))
    if not found:
        raise conf.StepFailed(f"lm-eval: no lm_eval/tasks under {conf.VENV.relative_to(ROOT)}; run with --setup")
    return Path(found[-1]).parent.parent


def write_tasks(d: Path, names: list[str], lm_tasks: Path, data: Path) -> dict[str, list[str]]:
    """One YAML per task: lm-eval's file included as it is, plus the data files of each split. lm-eval reads
    every split a task names when it builds the task (its training split too, for few-shot examples, even at 0
    shots); a named split without a file of its own gets the evaluation split's file. Per task, the splits so
    given."""
    import yaml

    from assay.bench.quality.tasks import read_config

    d.mkdir(parents=True)
    borrowed = {}
    for name in names:
        src = lm_tasks / TASKS[name]
        if not src.is_file():
            raise conf.StepFailed(f"lm-eval: task file {src} is missing")
        splits = {Path(f).stem: str(Path(f).resolve()) for f in sorted(glob.glob(str(data / name / "*.jsonl")))}
        cfg = read_config(src, include_dirs=[lm_tasks])
        evaluated = cfg.get("test_split") or cfg.get("validation_split")
        if evaluated not in splits:
            raise conf.StepFailed(f"data: no {evaluated}.jsonl in {data / name}")
        named = [cfg.get(k) for k in ("training_split", "validation_split", "test_split", "fewshot_split")]
        borrowed[name] = [s for s in dict.fromkeys(named) if s and s not in splits]
        splits.update({s: splits[evaluated] for s in borrowed[name]})
        cfg = {"include": str(src), "task": name, "dataset_path": "json", "dataset_name": None,
               "dataset_kwargs": {"data_files": splits}}
        (d / f"{name}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return borrowed


# ----------------------------------------------------------------------------- items in one form


def number(v: object) -> object:
    """A logged value as a number where it is one (lm-eval logs some as text: "-1.5", "True")."""
    if isinstance(v, str):
        if v in ("True", "False"):
            return v == "True"
        try:
            return float(v)
        except ValueError:
            return v
    return v


def same(x: object, y: object, tol: float) -> bool:
    """Equal, numbers to ``tol``, lists and mappings element by element."""
    x, y = number(x), number(y)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(same(a, b, tol) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(same(x[k], y[k], tol) for k in x)
    return side.close(x, y, tol)


def requests(row: dict) -> list[list[object]]:
    """Each request's text arguments: ``[context, continuation]`` (log-likelihood) or ``[context]``."""
    args = row.get("arguments") or {}
    if isinstance(args, dict):
        args = [[v.get(f"arg_{j}") for j in range(len(v))]
                for _, v in sorted(args.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[-1]))]
    return [[a for a in arg if isinstance(a, str)] for arg in args]


def items(rows: list[dict]) -> dict[int, dict]:
    """A task's sample rows (one per doc and filter) as one record per doc."""
    out: dict[int, dict] = {}
    for row in rows:
        it = out.setdefault(int(row["doc_id"]), {"requests": requests(row), "target": row.get("target"),
                                                 "logliks": None, "answer": None, "extracted": {}, "scores": {}})
        filt, resps = row.get("filter", "none"), row.get("resps") or []
        if it["requests"] and len(it["requests"][0]) == 2:          # log-likelihood: [[ll, is_greedy]] a request
            it["logliks"] = [number(r[0][0]) if isinstance(r[0], list) else number(r[0]) for r in resps]
        else:
            it["answer"] = resps
            it["extracted"][filt] = row.get("filtered_resps")
        for m in row.get("metrics") or []:
            if m in row:
                it["scores"][m if filt == "none" else f"{m},{filt}"] = row[m]
    return out


def differences(lm: dict, az: dict, tol: float) -> list[str]:
    """What differs between one item's two records, in the order prompt, logliks, answer, extraction, score."""
    why = []
    if lm["requests"] != az["requests"]:
        k = next((i for i, (x, y) in enumerate(zip(lm["requests"], az["requests"])) if x != y),
                 min(len(lm["requests"]), len(az["requests"])))
        lx = lm["requests"][k] if k < len(lm["requests"]) else [""]
        ax = az["requests"][k] if k < len(az["requests"]) else [""]
        j = next((i for i, (x, y) in enumerate(zip(lx, ax)) if x != y), 0)
        why.append(f"prompt (request {k}, argument {j}) {conf.first_diff(lx[j] if j < len(lx) else '', ax[j] if j < len(ax) else '')}")
    if not same(lm["logliks"], az["logliks"], tol):
        why.append(f"logliks: lm-eval {lm['logliks']} assay {az['logliks']}")
    if not same(lm["answer"], az["answer"], 0.0):
        why.append(f"answer: lm-eval {json.dumps(lm['answer'])[:100]} assay {json.dumps(az['answer'])[:100]}")
    for f in sorted(set(lm["extracted"]) | set(az["extracted"])):
        x, y = lm["extracted"].get(f), az["extracted"].get(f)
        if not same(x, y, tol):
            why.append(f"extraction ({f}): lm-eval {json.dumps(x)[:100]} assay {json.dumps(y)[:100]}")
    for m in sorted(set(lm["scores"]) | set(az["scores"])):
        x, y = lm["scores"].get(m), az["scores"].get(m)
        if not same(x, y, tol):
            why.append(f"score {m}: lm-eval {json.dumps(x)} assay {json.dumps(y)}")
    return why


# ----------------------------------------------------------------------------- the comparison


def compare_task(name: str, lm: tuple, az: tuple, tol: float) -> dict:
    """One task: its figures side by side, its items compared; printed and returned."""
    (lres, lsam), (ares, asam) = lm, az
    L, A = lres.get(name, {}), ares.get(name, {})
    figures = {}
    for k in sorted(k for k in set(L) | set(A) if "," in k):
        figures[k] = {"lm_eval": L.get(k), "assay": A.get(k), "agree": same(L.get(k), A.get(k), tol)}
    li, ai = items(sum(lsam.get(name, {}).values(), [])), items(sum(asam.get(name, {}).values(), []))
    per_item = {}
    for doc in sorted(set(li) | set(ai)):
        if doc not in li or doc not in ai:
            why = [f"only in {'assay' if doc not in li else 'lm-eval'}"]
        else:
            why = differences(li[doc], ai[doc], tol)
        per_item[doc] = {"lm_eval": li.get(doc), "assay": ai.get(doc), "differ": why}
    differ = [d for d, v in per_item.items() if v["differ"]]
    print(f"\n{name}: {len(per_item)} items compared, {len(differ)} differ")
    for k, f in figures.items():
        show = [f"{v:>12.6g}" if isinstance(v, (int, float)) else f"{str(v):>12}" for v in (f["lm_eval"], f["assay"])]
        print(f"  {k:<44} {show[0]} {show[1]}  {'' if f['agree'] else 'DIFFERS'}")
    for d in differ:
        for w in per_item[d]["differ"]:
            print(f"  doc {d}: {w}")
    return {"items_compared": len(per_item), "items_differing": len(differ), "figures": figures, "items": per_item}


def main(argv: list[str] | None = None) -> int:  # noqa: C901
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--setup", action="store_true", help="make the lm-eval venv (and its hooks' modules) first")
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated, of the 16")
    p.add_argument("--data", type=Path, default=DATA, help="the folder of <task>/<split>.jsonl")
    p.add_argument("--limit", type=int, default=2)
    p.add_argument("--shots", type=int, default=None, help="default: each task's own")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--max-length", type=int, default=2048, help="lm-eval's max_length (its default) and assay's")
    p.add_argument("--tol", type=float, default=1e-4, help="relative tolerance of a log-likelihood or figure")
    p.add_argument("--json", type=Path, help="write every figure and item of both tools here")
    p.add_argument("--plain-server", action="store_true", help="python -m llama_cpp.server (slow log-probabilities)")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--lm-eval-out", type=Path, help="compare with this earlier lm-eval output folder (of a kept "
                                                   "work folder) instead of running lm-eval again")
    a = p.parse_args(argv)
    names = [t for t in a.tasks.split(",") if t]
    unknown = [t for t in names if t not in TASKS]
    try:
        if unknown:
            raise conf.StepFailed(f"--tasks: not one of the 16: {', '.join(unknown)}")
        if a.setup:
            setup()
        gguf = Path(os.environ.get("ASSAY_GGUF", str(Path.home() / ".cache/assay/models/gemma-3-270m-q4_k_m.gguf")))
        if not gguf.exists():
            raise conf.StepFailed(f"model: {gguf} is missing (scripts/install_local_backend.sh and `assay models pull`)")
        site = lm_eval_site()
        lm_tasks = site / "lm_eval" / "tasks"
        work = Path(tempfile.mkdtemp(prefix="lmeval16-"))
        borrowed = write_tasks(work / "tasks", names, lm_tasks, a.data)
        for name, splits in borrowed.items():
            if splits:
                print(f"{name}: split(s) {', '.join(splits)} named by the task, given its evaluation split's file")
        (work / "code_eval").mkdir()
        (work / "code_eval" / "code_eval.py").write_text(CODE_EVAL)
        launcher = ("-m", "llama_cpp.server") if a.plain_server else (str(ROOT / "tests" / "helpers" / "llama_server_fast.py"),)
        server = conf.LlamaServer(gguf, work / "server.log", launcher=launcher)
        proxy = conf.TokenizerProxy(gguf, server.base)
        strip = side.BosStrip(f"http://127.0.0.1:{proxy.port}", proxy.info["bos_token"])
        t0 = time.monotonic()
        try:
            if a.lm_eval_out:
                lm_out, lm_s = a.lm_eval_out, float("nan")
            else:
                lm_out, lm_s = side.run_lm_eval(work / "tasks", strip.port, work, a, tasks=names,
                                                extra=("--confirm_run_unsafe_code",),
                                                env_extra={"HF_ALLOW_CODE_EVAL": "1"})
            az_out, az_s = side.run_assay(work / "tasks", f"http://127.0.0.1:{proxy.port}", work, a, tasks=names,
                                          extra=("--trust-task-code",), path_after=(str(site),), cwd=work,
                                          env_extra={"ASSAY_TASK_INCLUDE": str(lm_tasks), "HF_ALLOW_CODE_EVAL": "1",
                                                     **{k: v for k, v in side.offline_env(work).items()
                                                        if k.startswith(("HF_", "TRANS"))}})
        finally:
            strip.stop()
            proxy.stop()
            server.stop()
        lm, az = side.read_output(lm_out), side.read_output(az_out)
        report = {name: compare_task(name, lm, az, a.tol) for name in names}
        bad = {n: r for n, r in report.items() if r["items_differing"] or not all(f["agree"] for f in r["figures"].values())}
        print(f"\n{'task':<38} {'items':>6} {'differ':>7} {'figures differ':>15}")
        for n, r in report.items():
            print(f"{n:<38} {r['items_compared']:>6} {r['items_differing']:>7} "
                  f"{sum(not f['agree'] for f in r['figures'].values()):>15}")
        print(f"\nwall time: lm-eval {lm_s:.1f} s, assay {az_s:.1f} s, all {time.monotonic() - t0:.1f} s (limit {a.limit}, "
              f"shots {a.shots if a.shots is not None else 'per task'}, seed {a.seed}, max_length {a.max_length}; "
              f"lm-eval {conf.LM_EVAL_PIN}, tasks from {lm_tasks})")
        print("tasks with a differing item or figure: " + (", ".join(bad) if bad else "none"))
        if a.json:
            a.json.write_text(json.dumps({"argv": sys.argv, "lm_eval_s": lm_s, "assay_s": az_s, "limit": a.limit,
                                          "seed": a.seed, "tasks": report}, indent=1, default=str))
        if a.keep:
            print(f"work folder: {work}")
        return 1 if bad else 0
    except conf.StepFailed as e:
        print(f"bench_lmeval_tasks16: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
