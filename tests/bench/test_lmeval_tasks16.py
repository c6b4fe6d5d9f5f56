"""lm-evaluation-harness's own task files, unchanged, for the 16 common tasks of issue 30: an oracle model scores
1.0 on every main metric and an always-wrong one 0.0 (perplexity: the exact value of the scripted
log-likelihoods), and the oracle run's ``--output-lm-eval`` results carry lm-eval's metric names.

lm-eval's task folders come from its published wheel (``scripts/fetch_lmeval_tasks.py``, which ``make test``
runs; never copied into this repository) under ``.cache/lm_eval_tasks/lm_eval/tasks``. Each task is run through a
YAML of a few lines written here that ``include:``s lm-eval's file and adds ``dataset_kwargs.data_files`` naming
the data written for the project in ``tests/data/lmeval16/<task>/`` (the includes are allowed by
``$ASSAY_TASK_INCLUDE``). The tasks' ``!function`` hooks run with ``trust_task_code``; ``.cache/lm_eval_tasks`` is
on ``sys.path`` for these tests only, so ifeval's ``from lm_eval.tasks.ifeval import ...`` finds lm-eval's files
without importing the harness (``lm_eval`` and ``lm_eval.tasks`` are namespace folders there)."""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.models.base import Generation, loglik_generation

ROOT = Path(__file__).resolve().parents[2]
FETCHED = ROOT / ".cache" / "lm_eval_tasks"
LM_TASKS = FETCHED / "lm_eval" / "tasks"
DATA = ROOT / "tests" / "data" / "lmeval16"
STANDIN = ROOT / "tests" / "helpers" / "lmeval_standin"     # a stand-in for `evaluate` (mbpp's utils.py imports it)
GOOD, BAD = -0.5, -1.0e4         # exp(BAD) is 0.0 in floating point: mc2's probability mass is exactly 1 or 0
LAMBADA_WRONG = -3.0             # the wrong model's log-likelihood of lambada's last word
FEWSHOT_SPLITS = {"gsm8k": "train", "mmlu_anatomy": "dev"}    # the files that hold only few-shot examples


def _docs(task: str) -> list[dict]:
    """The docs a task scores (its data files but the few-shot split's)."""
    return [json.loads(x) for f in sorted((DATA / task).glob("*.jsonl")) if f.stem != FEWSHOT_SPLITS.get(task)
            for x in f.read_text().splitlines()]


def _gsm_number(doc: dict) -> str:
    return doc["answer"].split("####")[-1].strip()


HELLASWAG_CLEAN = {"pumps air into the back tyre [step] and rides down the lane.":
                   "pumps air into the back tyre and rides down the lane."}    # what hellaswag's process_docs makes


def _hellaswag_clean(text: str) -> str:
    return HELLASWAG_CLEAN.get(text, text)


def _wino_parts(doc: dict) -> tuple[str, str]:
    i = doc["sentence"].index("_")
    return doc["sentence"][:i], doc["sentence"][i + 1:].strip()


def _func_name(doc: dict) -> str:
    return doc["test_list"][0].split("assert ")[1].split("(")[0].strip()


IFEVAL = {   # key: (a response that follows every instruction, one that follows none, even loosely)
    9101: ("hello sam\ni hope your week is going well. could i borrow your ladder this weekend to clean the "
           "gutters? i will bring it back on sunday evening.\nthank you so much",
           "Hello, Sam! Could I borrow your ladder, please?"),
    9102: ("* It adds gentle exercise to the day.\n* It saves money on fuel and parking.\n* It gives quiet time "
           "to think before work.\nIs there anything else I can help with?",
           "Walking is healthy and cheap."),
    9103: ("<<Rain Before Dusk>>\nThe lantern glows beside the garden gate while the autumn rain keeps falling "
           "softly. Each puddle holds a piece of the grey sky, and the leaves drift down to float like small "
           "boats across the quiet path tonight.",
           "Autumn rain falls."),
    9104: ("\"LIGHT BENDS WHEN IT PASSES FROM WATER INTO AIR. SO THE PART OF THE SPOON UNDER THE WATER SEEMS TO "
           "SIT IN A DIFFERENT PLACE FROM THE PART ABOVE IT.\"",
           "light bends in water."),
}


@dataclass
class Case:
    """One lm-eval task: its file, how the scripted models find a doc in a request (``key``), which
    continuation is right (``right``, log-likelihood tasks; exactly as lm-eval sends it, the delimiter included) or what to answer (``answer(doc, ok)``), and the main
    metrics with lm-eval's names (``metric: lm-eval name``). ``values`` overrides the oracle / wrong value of a
    metric whose right value is not 1.0 / 0.0 (perplexity)."""

    task: str
    yaml: str
    key: Callable[[dict], str]
    metrics: dict[str, str]
    right: Callable[[dict, str, str], bool] | None = None
    answer: Callable[[dict, bool], str] | None = None
    values: dict[str, tuple[float, float]] = field(default_factory=dict)
    one_continuation: bool = False      # output_type loglikelihood: the score is the gold continuation's alone
    needs: tuple[str, ...] = ()         # what the task's own code imports (the dev extra installs them)


def _arc(yaml: str, task: str) -> Case:
    return Case(task, yaml, lambda d: d["question"], {"acc": "acc,none", "acc_norm": "acc_norm,none"},
                right=lambda d, c, x: x == " " + d["choices"]["text"][d["choices"]["label"].index(d["answerKey"])])


def _tqa(task: str, which: str) -> Case:
    def right(d: dict, c: str, x: str) -> bool:
        t = d[f"{which}_targets"]
        return any(lab == 1 and x == " " + ch for ch, lab in zip(t["choices"], t["labels"]))
    return Case(task, f"truthfulqa/{task}.yaml", lambda d: d["question"], {"acc": "acc,none"}, right=right,
                needs=("datasets", "numpy", "sacrebleu", "rouge_score") if which == "mc2" else ())


def _gsm(doc: dict, ok: bool, cot: bool) -> str:
    n = _gsm_number(doc) if ok else str(int(_gsm_number(doc)) + 1)
    return f"Working through it step by step gives {n}. The answer is {n}." if cot else \
        f"Working through it step by step gives {n}.\n#### {n}"


def _code(doc: dict, ok: bool) -> str:
    if "canonical_solution" in doc:
        return doc["canonical_solution"] if ok else "    return None\n"
    return (doc["code"] if ok else f"def {_func_name(doc)}(*args):\n    return None") + "\n[DONE]"


def _bbh(doc: dict, ok: bool) -> str:
    value = doc["target"] if ok else {"True": "False", "False": "True"}[doc["target"]]
    return f"Evaluating the brackets first and then not, and, or in turn, the answer is {value}."


CASES = [
    _arc("arc/arc_easy.yaml", "arc_easy"),
    _arc("arc/arc_challenge.yaml", "arc_challenge"),
    Case("mmlu_anatomy", "mmlu/default/mmlu_anatomy.yaml", lambda d: d["question"], {"acc": "acc,none"},
         right=lambda d, c, x: x == " " + "ABCD"[d["answer"]]),
    Case("gsm8k", "gsm8k/gsm8k.yaml", lambda d: d["question"],
         {"exact_match,strict-match": "exact_match,strict-match",
          "exact_match,flexible-extract": "exact_match,flexible-extract"},
         answer=lambda d, ok: _gsm(d, ok, cot=False)),
    Case("gsm8k_cot", "gsm8k/gsm8k-cot.yaml", lambda d: d["question"],
         {"exact_match,strict-match": "exact_match,strict-match",
          "exact_match,flexible-extract": "exact_match,flexible-extract"},
         answer=lambda d, ok: _gsm(d, ok, cot=True)),
    _tqa("truthfulqa_mc1", "mc1"),
    _tqa("truthfulqa_mc2", "mc2"),
    Case("piqa", "piqa/piqa.yaml", lambda d: d["goal"], {"acc": "acc,none", "acc_norm": "acc_norm,none"},
         right=lambda d, c, x: x == " " + [d["sol1"], d["sol2"]][d["label"]]),
    Case("boolq", "super_glue/boolq/default.yaml", lambda d: d["question"], {"acc": "acc,none"},
         right=lambda d, c, x: x == " " + ["no", "yes"][d["label"]]),
    Case("humaneval", "humaneval/humaneval.yaml", lambda d: f"def {d['entry_point']}(", {"pass@1": "pass@1,create_test"},
         answer=_code),
    Case("bbh_cot_fewshot_boolean_expressions", "bbh/cot_fewshot/boolean_expressions.yaml",
         lambda d: f"Q: {d['input']}\n", {"exact_match,get-answer": "exact_match,get-answer"}, answer=_bbh),
    Case("lambada_openai", "lambada/lambada_openai.yaml", lambda d: d["text"].rsplit(" ", 1)[0],
         {"perplexity": "perplexity,none", "acc": "acc,none"},
         right=lambda d, c, x: x == " " + d["text"].rsplit(" ", 1)[1],
         values={"perplexity": (math.exp(-GOOD), math.exp(-LAMBADA_WRONG))}, one_continuation=True),
    Case("mbpp", "mbpp/mbpp.yaml", lambda d: d["text"], {"pass@1": "pass_at_1,none"}, answer=_code),
    Case("ifeval", "ifeval/ifeval.yaml", lambda d: d["prompt"],
         {f"{m},none": f"{m},none" for m in ("prompt_level_strict_acc", "inst_level_strict_acc", "prompt_level_loose_acc",
                                   "inst_level_loose_acc")},
         answer=lambda d, ok: IFEVAL[d["key"]][0 if ok else 1], needs=("langdetect", "immutabledict", "nltk")),
    Case("winogrande", "winogrande/default.yaml", lambda d: _wino_parts(d)[1], {"acc": "acc,none"},
         right=lambda d, c, x: c == _wino_parts(d)[0] + d[f"option{d['answer']}"] and x == " " + _wino_parts(d)[1]),
    Case("hellaswag", "hellaswag/hellaswag.yaml", lambda d: d["ctx_a"], {"acc": "acc,none", "acc_norm": "acc_norm,none"},
         right=lambda d, c, x: x == " " + _hellaswag_clean(d["endings"][int(d["label"])]), needs=("datasets",)),
]


class Knower:
    """An in-process model that knows the data: it finds the doc a request is about (the doc whose ``key``
    occurs last in the request, after any few-shot examples) and gives the right continuation log-likelihood
    ``GOOD`` and every other ``BAD`` (``wrong``: the other way round), or generates the case's right (wrong)
    answer. A request it cannot place fails the test."""

    def __init__(self, case: Case, docs: list[dict], *, wrong: bool):
        self.case, self.docs, self.wrong, self.name = case, docs, wrong, "wrong" if wrong else "oracle"

    def _doc(self, text: str) -> dict:
        where = [(text.rfind(self.case.key(d)), i) for i, d in enumerate(self.docs)]
        pos, i = max(where)
        assert pos >= 0, f"{self.case.task}: no doc of the data in the request {text[-300:]!r}"
        return self.docs[i]

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        assert self.case.right is not None, f"{self.case.task} is not a log-likelihood task"
        doc = self._doc(context + "".join(continuations))
        good = [self.case.right(doc, context, x) for x in continuations]
        if self.wrong:
            if self.case.one_continuation:      # lambada: the gold word, unlikely and not greedy
                return loglik_generation([LAMBADA_WRONG], [False], model=self.name)
            good = [not g for g in good]
        return loglik_generation([GOOD if g else BAD for g in good], [g for g in good], model=self.name)

    def _answer(self, prompt: str) -> str:
        assert self.case.answer is not None, f"{self.case.task} is not a generation task"
        return self.case.answer(self._doc(prompt), not self.wrong)

    async def complete(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.0,
                       stop: Sequence[str] = (), seed: int | None = None, **_: Any) -> Generation:
        return Generation(text=self._answer(prompt), model=self.name)

    async def generate(self, messages: list[dict], **_: Any) -> Generation:
        return Generation(text=self._answer(str(messages[-1]["content"])), model=self.name)


@pytest.fixture
def lm_eval_tasks(monkeypatch: pytest.MonkeyPatch) -> Path:
    """lm-eval's fetched task folders, allowed as includes and importable (``lm_eval.tasks.ifeval``) for the
    test only; ``LOCAL_RANK=1`` keeps ifeval's ``instructions_util`` from calling ``nltk.download`` on import
    (lm-eval downloads NLTK's punkt only on rank 0; the ifeval data here needs none); mbpp's ``import evaluate``
    gets the stand-in of ``tests/helpers/lmeval_standin`` (its ``code_eval`` needs the hub)."""
    if not (FETCHED / ".fetched.json").is_file() or not LM_TASKS.is_dir():
        pytest.fail(f"lm-evaluation-harness's task files are not in {LM_TASKS}: run `python "
                    f"scripts/fetch_lmeval_tasks.py` (make test runs it)", pytrace=False)
    monkeypatch.setenv("ASSAY_TASK_INCLUDE", str(LM_TASKS))
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.syspath_prepend(str(FETCHED))
    monkeypatch.syspath_prepend(str(STANDIN))
    _forget()
    yield LM_TASKS
    _forget()


def _forget() -> None:
    """Drop the modules these tests import from lm-eval's folders and the stand-in, so no other test sees them."""
    for name in [m for m in sys.modules if m.split(".")[0] in ("lm_eval", "evaluate")]:
        del sys.modules[name]


def _wrapper(tmp_path: Path, case: Case) -> Path:
    import importlib.util

    missing = [m for m in case.needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"lm-eval's {case.task} code imports {', '.join(missing)}, not installed here: pip install -e "
                    f"'.[dev]' (the dev extra has them)", pytrace=False)
    lm_file = LM_TASKS / case.yaml
    assert lm_file.is_file(), f"{lm_file} is not in lm-eval {FETCHED}"
    files = {f.stem: str(f) for f in sorted((DATA / case.task).glob("*.jsonl"))}
    path = tmp_path / f"{case.task}.yaml"
    path.write_text(json.dumps({"include": str(lm_file), "dataset_kwargs": {"data_files": files}}))
    return path


def _run(tmp_path: Path, case: Case, *, wrong: bool, lm_eval_out: Path | None = None) -> dict:
    model = Knower(case, _docs(case.task), wrong=wrong)
    cfg = QualityConfig(model=model, tasks=str(_wrapper(tmp_path, case)), trust_task_code=True)
    run = asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None, lm_eval_out=lm_eval_out))
    return run.summary["tasks"][case.task]


@pytest.mark.parametrize("case", CASES, ids=[c.task for c in CASES])
def test_oracle_scores_one_and_lm_eval_names_its_metrics(case: Case, tmp_path: Path, lm_eval_tasks: Path) -> None:
    out = tmp_path / "lm"
    s = _run(tmp_path, case, wrong=False, lm_eval_out=out)
    n = len(_docs(case.task))
    assert s["items"] == n and s["errors"] == 0, s
    for metric, lm_name in case.metrics.items():
        m = s["metrics"][metric]
        assert m["evaluated"] == n, (metric, m)
        assert m["mean"] == pytest.approx(case.values.get(metric, (1.0, 0.0))[0], rel=1e-12), (metric, m)
        assert m["lm_eval"] == lm_name, (metric, m)
    if case.task == "mbpp":       # the stand-in's code_eval ran once, in utils.py's import-time check, never to score
        import evaluate

        assert [c["references"] for c in evaluate.CALLS] == [["assert add(2, 3)==5"]]
    (res_file,) = (out / "oracle").glob("results_*.json")
    res = json.loads(res_file.read_text())["results"][case.task]
    for metric, lm_name in case.metrics.items():
        assert res[lm_name] == pytest.approx(case.values.get(metric, (1.0, 0.0))[0], rel=1e-12), (lm_name, res)
    _check_samples(case, out, n)


def _check_samples(case: Case, out: Path, n: int) -> None:
    """lm-eval's samples file: a line per doc and filter, naming the doc's metrics in the order its
    ``process_results`` gives them (ifeval's per-instruction lists included) and holding each one's value."""
    (f,) = (out / "oracle").glob(f"samples_{case.task}_*.jsonl")
    lines = [json.loads(x) for x in f.read_text().splitlines()]
    names = [lm.split(",") for lm in case.metrics.values()]
    assert len(lines) == n * len({filt for _, filt in names})
    for line in lines:
        want = [metric for metric, filt in names if filt == line["filter"]]
        assert line["metrics"] == want, line["metrics"]
        for metric in want:
            v = line[metric]
            assert (v == GOOD if metric == "perplexity" else all(v) if isinstance(v, list) else v == 1), (metric, v)


@pytest.mark.parametrize("case", CASES, ids=[c.task for c in CASES])
def test_wrong_model_scores_zero(case: Case, tmp_path: Path, lm_eval_tasks: Path) -> None:
    s = _run(tmp_path, case, wrong=True)
    n = len(_docs(case.task))
    assert s["items"] == n and s["errors"] == 0, s
    for metric in case.metrics:
        m = s["metrics"][metric]
        assert m["evaluated"] == n, (metric, m)
        assert m["mean"] == pytest.approx(case.values.get(metric, (1.0, 0.0))[1], rel=1e-12), (metric, m)


class EvenOdds(Knower):
    """Every choice equally likely: lm-eval's mc2 is then the share of true answers among a doc's choices (the
    probability mass on them), where ``acc`` (the first choice wins the tie, and it is true) would be 1."""

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        return loglik_generation([-1.0] * len(continuations), [False] * len(continuations), model=self.name)


def test_truthfulqa_mc2_is_lm_evals_probability_mass_on_the_true_answers(tmp_path: Path, lm_eval_tasks: Path) -> None:
    case = next(c for c in CASES if c.task == "truthfulqa_mc2")
    docs = _docs(case.task)
    model = EvenOdds(case, docs, wrong=False)
    cfg = QualityConfig(model=model, tasks=str(_wrapper(tmp_path, case)), trust_task_code=True)
    s = asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None)).summary["tasks"][case.task]
    shares = [sum(d["mc2_targets"]["labels"]) / len(d["mc2_targets"]["labels"]) for d in docs]
    assert s["metrics"]["acc"]["mean"] == pytest.approx(sum(shares) / len(shares), rel=1e-12)
    assert s["metrics"]["acc"]["mean"] < 0.5


def test_make_test_fetches_lm_evals_task_files_before_the_suite(tmp_path: Path) -> None:
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "-C", str(ROOT), "test", f"VENV={tmp_path / 'venv'}"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "scripts/fetch_lmeval_tasks.py" in out.stdout
    assert out.stdout.index("scripts/fetch_lmeval_tasks.py") < out.stdout.index("-m pytest")


class Panel:
    """Several :class:`Knower` in one model, for one run of several tasks: each request goes to the one whose
    data it is about (the doc key that occurs last in it)."""

    def __init__(self, knowers: list[Knower]):
        self.knowers, self.name = knowers, "oracle"

    def _pick(self, text: str) -> Knower:
        return max(self.knowers, key=lambda k: max(text.rfind(k.case.key(d)) for d in k.docs))

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        return await self._pick(context + "".join(continuations)).loglikelihood(context, continuations)

    async def complete(self, prompt: str, **kw: Any) -> Generation:
        return await self._pick(prompt).complete(prompt, **kw)

    async def generate(self, messages: list[dict], **kw: Any) -> Generation:
        return await self._pick(str(messages[-1]["content"])).generate(messages, **kw)


def test_the_tasks_with_code_hooks_run_together_in_one_run(tmp_path: Path, lm_eval_tasks: Path) -> None:
    """lm-eval's hooked tasks in one run (their modules are all called ``utils``; each task imports its own)."""
    names = ["hellaswag", "winogrande", "ifeval", "truthfulqa_mc2", "mbpp", "humaneval"]
    cases = [c for c in CASES if c.task in names]
    model = Panel([Knower(c, _docs(c.task), wrong=False) for c in cases])
    cfg = QualityConfig(model=model, tasks=",".join(str(_wrapper(tmp_path, c)) for c in cases), trust_task_code=True)
    tasks = asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None)).summary["tasks"]
    assert sorted(tasks) == sorted(names)
    for c in cases:
        for metric in c.metrics:
            assert tasks[c.task]["metrics"][metric]["mean"] == 1.0, (c.task, metric)


def _harness_bootstrap_stderr(lls: list[float], iters: int = 100_000) -> float:
    """lm-evaluation-harness's standard error of ``perplexity`` (its ``bootstrap_stderr`` with the default 100,000
    draws), worked out here in plain Python: chunks of 1,000 resamples, chunk ``i`` drawn by ``random.Random(i)``
    with ``choices(lls, k=n)``, each resample's exp(−mean), and the sample standard deviation of them all."""
    import random
    import statistics

    values = []
    for i in range(iters // 1000):
        rnd = random.Random(i)
        for _ in range(1000):
            draw = rnd.choices(lls, k=len(lls))
            values.append(math.exp(-sum(draw) / len(draw)))
    return statistics.stdev(values)


class SpreadLambada(Knower):
    """lambada's gold word at a different log-likelihood for each doc, so that perplexity's bootstrap spreads."""

    LLS = (-0.5, -1.25, -4.0)

    async def loglikelihood(self, context: str, continuations: Sequence[str]) -> Generation:
        doc = self._doc(context)
        return loglik_generation([self.LLS[self.docs.index(doc)]], [True], model=self.name)


def test_lambada_perplexity_stderr_is_the_harness_bootstrap(tmp_path: Path, lm_eval_tasks: Path) -> None:
    case = next(c for c in CASES if c.task == "lambada_openai")
    model = SpreadLambada(case, _docs(case.task), wrong=False)
    cfg = QualityConfig(model=model, tasks=str(_wrapper(tmp_path, case)))
    out = tmp_path / "lm"
    s = asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None, lm_eval_out=out))
    m = s.summary["tasks"][case.task]["metrics"]["perplexity"]
    want = _harness_bootstrap_stderr(list(SpreadLambada.LLS))
    assert m["mean"] == pytest.approx(math.exp(-sum(SpreadLambada.LLS) / 3), rel=1e-12)
    assert m["stderr"] == pytest.approx(want, rel=1e-9)
    (res_file,) = (out / "oracle").glob("results_*.json")
    res = json.loads(res_file.read_text())
    assert res["results"][case.task]["perplexity_stderr,none"] == pytest.approx(want, rel=1e-9)
    assert res["config"]["bootstrap_iters"] == 100_000

    from assay.cli.bench.quality import render_quality
    from assay.cli.common import out as console

    with console.capture() as cap:      # the table shows it on the perplexity's own scale, as the value
        render_quality(s.summary)
    row = next(line for line in cap.get().splitlines() if "perplexity" in line)
    assert f"{m['mean']:.4g}" in row and f"{want:.4g}" in row, row


def test_one_document_has_no_perplexity_stderr_as_in_lm_eval() -> None:
    # lm-eval writes "N/A" for a metric's stderr when its task has a single item (found by
    # benchmarks/bench_lmeval_tasks16.py --limit 1: assay gave the bootstrap of one value, 4.4e-16)
    from assay.bench.quality.harness_bootstrap import harness_bootstrap_stderr

    assert harness_bootstrap_stderr("perplexity", [-0.5]) is None
    assert harness_bootstrap_stderr("perplexity", [-0.5, -1.5], iters=2000) > 0
