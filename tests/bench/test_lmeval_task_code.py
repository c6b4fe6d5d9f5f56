"""Task code (``!function`` hooks in lm-evaluation-harness task YAML), run only with ``--trust-task-code``:
without the flag nothing is imported and the load stops with one line naming the file, the hook and the flag; with
it the hooks run as the harness runs them (process_docs, process_results, doc_to_*, custom filters, metrics,
aggregations, few-shot samples) and the run records the sha256 of every code file it imported. The tasks, their
code and their data are written here for the project."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from assay.bench.quality.tasks import TaskError, load_tasks
from tests.helpers.lmeval_models import ScriptedLM

SRC = Path(__file__).resolve().parents[2] / "src"

# ---------------------------------------------------------------- a probability-mass task (truthfulqa_mc2-like)
MASS_YAML = """task: mass_demo
output_type: multiple_choice
dataset_kwargs:
  data_files:
    test: claims.jsonl
test_split: test
doc_to_text: "Claim: {{claim}}\\nVerdict:"
doc_to_target: 0
doc_to_choice: "{{options}}"
process_results: !function scoring_demo.true_mass
metric_list:
  - metric: mass
    aggregation: mean
    higher_is_better: true
"""

# the module writes a file when it is imported: without --trust-task-code that must never happen
MASS_CODE = '''
import math
from pathlib import Path

Path(__file__).with_name("IMPORTED").write_text("imported")


def true_mass(doc, results):
    lls = [ll for ll, _ in results]
    p = [math.exp(ll) for ll in lls]
    true = sum(x for x, lab in zip(p, doc["labels"]) if lab == 1)
    return {"mass": true / sum(p)}
'''

CLAIMS = [
    {"claim": "water boils at sea level near 100 C", "options": ["true", "false", "unknowable"], "labels": [1, 0, 0]},
    {"claim": "the moon is made of cheese", "options": ["false", "true", "partly"], "labels": [1, 0, 0]},
    {"claim": "owls are nocturnal birds", "options": ["mostly true", "never", "only in winter"], "labels": [1, 0, 0]},
]


def _mass_task(tmp_path: Path) -> Path:
    (tmp_path / "claims.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CLAIMS))
    (tmp_path / "scoring_demo.py").write_text(MASS_CODE)
    path = tmp_path / "mass.yaml"
    path.write_text(MASS_YAML)
    return path


def _mass_gold(context: str) -> str | None:
    for c in CLAIMS:
        if c["claim"] in context:
            return " " + c["options"][0]
    return None


def _run(path: Path, model: ScriptedLM, **kw) -> dict:
    cfg = QualityConfig(model=model, tasks=str(path), **kw)
    store = str(path.parent / f"store-{len(model.requests)}-{len(model.prompts)}.db")
    return asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=store)).summary


def test_without_the_flag_nothing_is_imported_and_one_line_names_file_hook_and_flag(tmp_path: Path) -> None:
    path = _mass_task(tmp_path)
    with pytest.raises(TaskError) as got:
        load_tasks(str(path))
    msg = str(got.value)
    assert "\n" not in msg
    assert str(path) in msg and "line 10" in msg and "!function scoring_demo.true_mass" in msg
    assert "scoring_demo.py" in msg and "--trust-task-code" in msg
    assert not (tmp_path / "IMPORTED").exists()


def test_the_cli_refuses_without_the_flag_and_imports_nothing(tmp_path: Path) -> None:
    path = _mass_task(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "assay", "bench", "quality", "--model", "python:os:getcwd",
                        "--tasks", str(path), "--quiet"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env=env)
    assert r.returncode != 0
    assert "--trust-task-code" in r.stderr and "scoring_demo.py" in r.stderr
    assert not (tmp_path / "IMPORTED").exists()


def test_trusted_process_results_scores_oracle_one_and_wrong_zero_and_records_hashes(tmp_path: Path) -> None:
    path = _mass_task(tmp_path)
    right = _run(path, ScriptedLM(_mass_gold), trust_task_code=True)
    task = right["tasks"]["mass_demo"]
    assert task["metrics"]["mass"]["mean"] == pytest.approx(1.0, abs=1e-6)
    assert task["metrics"]["mass"]["stderr"] is not None      # a mean: lm-eval's stderr
    sha = hashlib.sha256((tmp_path / "scoring_demo.py").read_bytes()).hexdigest()
    assert task["code_files"] == {str(tmp_path / "scoring_demo.py"): sha}
    assert right["trust_task_code"] is True and right["config"]["trust_task_code"] is True
    assert (tmp_path / "IMPORTED").exists()
    wrong = _run(path, ScriptedLM(_mass_gold, wrong=True), trust_task_code=True)
    assert wrong["tasks"]["mass_demo"]["metrics"]["mass"]["mean"] == pytest.approx(0.0, abs=1e-6)


def test_the_task_hash_follows_the_code(tmp_path: Path) -> None:
    path = _mass_task(tmp_path)
    (before,) = load_tasks(str(path), trust_code=True)
    (tmp_path / "scoring_demo.py").write_text(MASS_CODE + "\n# changed\n")
    (after,) = load_tasks(str(path), trust_code=True)
    assert before.task_hash != after.task_hash
    assert before.code_files != after.code_files


# ---------------------------------------------------------------- an instruction-following task (ifeval-like)
RULES_YAML = """task: rules_demo
output_type: generate_until
dataset_kwargs:
  data_files:
    test: asks.jsonl
test_split: test
num_fewshot: 1
fewshot_config:
  sampler: first_n
  samples: !function rules_code.shots
process_docs: !function rules_code.add_rules
doc_to_text: !function rules_code.prompt
doc_to_target: 0
generation_kwargs:
  until: ["\\n\\n"]
  max_gen_toks: 32
filter_list:
  - name: trimmed
    filter:
      - function: custom
        filter_fn: !function rules_code.trim_answers
      - function: take_first
process_results: !function rules_code.check
metric_list:
  - metric: prompt_ok
    aggregation: mean
    higher_is_better: true
  - metric: rule_ok
    aggregation: !function rules_code.flat_mean
    higher_is_better: true
"""

RULES_CODE = '''
def add_rules(dataset):
    def one(doc):
        return {"rules": doc["spec"].split("+")}
    return dataset.map(one)


def prompt(doc):
    return "Write: " + doc["word"] + " with " + ", ".join(doc["rules"]) + "\\nAnswer:"


def shots():
    return [{"word": "tree", "rules": ["upper"], "spec": "upper"}]


def trim_answers(resps, docs):
    return [[r.strip() for r in rs] for rs in resps]


def _ok(rule, text, word):
    if rule == "upper":
        return text == text.upper() and word.upper() in text
    if rule == "bang":
        return text.endswith("!")
    return False


def check(doc, results):
    text = results[0]
    oks = [_ok(rule, text, doc["word"]) for rule in doc["rules"]]
    return {"prompt_ok": all(oks), "rule_ok": oks}


def flat_mean(items):
    flat = [x for it in items for x in it]
    return sum(flat) / len(flat)
'''

ASKS = [{"word": "river", "spec": "upper+bang"}, {"word": "stone", "spec": "upper"}, {"word": "cloud", "spec": "bang"}]


def _rules_task(tmp_path: Path) -> Path:
    (tmp_path / "asks.jsonl").write_text("".join(json.dumps(a) + "\n" for a in ASKS))
    (tmp_path / "rules_code.py").write_text(RULES_CODE)
    path = tmp_path / "rules.yaml"
    path.write_text(RULES_YAML)
    return path


def _rules_answer(prompt: str) -> str:
    word = prompt.rsplit("Write: ", 1)[1].split(" ", 1)[0]
    rules = prompt.rsplit(" with ", 1)[1].split("\n", 1)[0].split(", ")
    out = word.upper() if "upper" in rules else word
    return "  " + out + ("!" if "bang" in rules else "") + "  "


def test_trusted_generation_hooks_run_as_the_harness_runs_them(tmp_path: Path) -> None:
    path = _rules_task(tmp_path)
    (t,) = load_tasks(str(path), trust_code=True)
    assert t.docs[0]["rules"] == ["upper", "bang"]                         # process_docs ran
    assert t.context(0) == "Write: tree with upper\nAnswer: 0\n\nWrite: river with upper, bang\nAnswer:"
    model = ScriptedLM(lambda c: None, _rules_answer)
    s = _run(path, model, trust_task_code=True)
    task = s["tasks"]["rules_demo"]
    assert task["outputs"] == ["prompt_ok,trimmed", "rule_ok,trimmed"]
    assert task["metrics"]["prompt_ok,trimmed"]["mean"] == 1.0
    assert task["metrics"]["rule_ok,trimmed"]["mean"] == 1.0
    assert task["metrics"]["rule_ok,trimmed"]["aggregation"].endswith("rules_code.flat_mean")
    assert set(task["code_files"]) == {str(tmp_path / "rules_code.py")}
    wrong = _run(path, ScriptedLM(lambda c: None, lambda p: "nothing"), trust_task_code=True)
    assert wrong["tasks"]["rules_demo"]["metrics"]["prompt_ok,trimmed"]["mean"] == 0.0
    assert wrong["tasks"]["rules_demo"]["metrics"]["rule_ok,trimmed"]["mean"] == 0.0


@pytest.mark.parametrize("hook", ["doc_to_text", "filter_list", "fewshot_config.samples", "metric_list"])
def test_every_hook_is_refused_without_the_flag(tmp_path: Path, hook: str) -> None:
    path = _rules_task(tmp_path)
    (tmp_path / "rules_code.py").write_text("from pathlib import Path\nPath(__file__).with_name('IMPORTED')"
                                            ".write_text('x')\n" + RULES_CODE)
    text = RULES_YAML.replace("process_results: !function rules_code.check\n", "")
    text = text.replace("metric_list:\n  - metric: prompt_ok\n    aggregation: mean\n    higher_is_better: true\n"
                        "  - metric: rule_ok\n", "metric_list:\n  - metric: exact_match\n")
    if hook != "doc_to_text":
        text = text.replace("doc_to_text: !function rules_code.prompt", "doc_to_text: '{{word}}'")
    if hook != "filter_list":
        text = text.replace("      - function: custom\n        filter_fn: !function rules_code.trim_answers\n", "")
    if hook != "fewshot_config.samples":
        text = text.replace("  samples: !function rules_code.shots\n", "")
    if hook != "metric_list":
        text = text.replace("    aggregation: !function rules_code.flat_mean\n", "")
    path.write_text(text)
    with pytest.raises(TaskError) as got:
        load_tasks(str(path))
    assert f"field '{hook}'" in str(got.value) and "--trust-task-code" in str(got.value)
    assert not (tmp_path / "IMPORTED").exists()


def test_process_docs_untrusted_is_listed_with_the_flag_and_not_imported(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text(json.dumps({"q": "a", "a": "b"}) + "\n")
    (tmp_path / "prep_demo.py").write_text("from pathlib import Path\nPath(__file__).with_name('IMPORTED')"
                                           ".write_text('x')\ndef prep(ds):\n    return ds\n")
    p = tmp_path / "t.yaml"
    p.write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\ndoc_to_text: '{{q}}'\n"
                 "doc_to_target: a\nprocess_docs: !function prep_demo.prep\n")
    (t,) = load_tasks(str(p))
    assert any("prep_demo.prep" in u and "--trust-task-code" in u for u in t.unsupported)
    assert not (tmp_path / "IMPORTED").exists() and t.code_files == {}


def test_a_hook_is_imported_from_beside_the_yaml_that_writes_it(tmp_path: Path) -> None:
    # lm-eval looks for module.py in the folder of the YAML holding the tag: an included base file's folder
    base = tmp_path / "base"
    base.mkdir()
    _mass_task(base)
    (base / "scoring_demo.py").write_text(MASS_CODE.replace('"mass": true / sum(p)', '"mass": 0.25'))
    local = tmp_path / "local"
    local.mkdir()
    (local / "claims.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CLAIMS))
    (local / "mass_local.yaml").write_text("include: ../base/mass.yaml\ntask: mass_local\n")
    (t,) = load_tasks(str(local / "mass_local.yaml"), trust_code=True, include_dirs=[tmp_path])
    assert list(t.code_files) == [str(base / "scoring_demo.py")]
    assert t.process_results(CLAIMS[0], [(-1.0, True)] * 3) == {"mass": 0.25}


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "trusted"


def _example_answer(prompt: str) -> str:
    word = prompt.split("'", 2)[1]
    rules = prompt.rsplit("rules: ", 1)[1].split(".\n", 1)[0].split(", ")
    out = word[::-1] if "reverse" in rules else word
    out = out.upper() if "upper" in rules else out
    return f" '{out}{'!' if 'exclaim' in rules else ''}' "


def test_the_shipped_trusted_example_scores_an_oracle_one_and_a_wrong_model_zero(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="--trust-task-code"):
        load_tasks(str(EXAMPLE))
    cfg = QualityConfig(model="x", tasks=str(EXAMPLE), trust_task_code=True)
    right = asyncio.run(run_quality(cfg, subject=Subject(ScriptedLM(lambda c: None, _example_answer), cache=None),
                                    store=str(tmp_path / "a.db"))).summary["tasks"]["word_rules"]
    assert right["metrics"]["all_rules_followed,trimmed"]["mean"] == 1.0
    assert right["metrics"]["rule_followed,trimmed"]["mean"] == 1.0
    assert list(right["code_files"]) == [str(EXAMPLE / "rules.py")]
    wrong = asyncio.run(run_quality(cfg, subject=Subject(ScriptedLM(lambda c: None, lambda p: "no idea"), cache=None),
                                    store=str(tmp_path / "b.db"))).summary["tasks"]["word_rules"]
    assert wrong["metrics"]["all_rules_followed,trimmed"]["mean"] == 0.0
    assert wrong["metrics"]["rule_followed,trimmed"]["mean"] == 0.0


def test_the_stored_run_aggregates_give_the_tasks_own_aggregation(tmp_path: Path) -> None:
    from assay.store import open_store

    path = _rules_task(tmp_path)
    # river: upper+bang followed, stone: upper followed, cloud: bang missed -> rules 3 of 4, prompts 2 of 3
    answers = {"river": "RIVER!", "stone": "STONE", "cloud": "cloud"}
    model = ScriptedLM(lambda c: None, lambda p: answers[p.rsplit("Write: ", 1)[1].split(" ", 1)[0]])
    cfg = QualityConfig(model=model, tasks=str(path), trust_task_code=True)
    run = asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=str(tmp_path / "s.db")))
    metrics = run.summary["tasks"]["rules_demo"]["metrics"]
    assert metrics["rule_ok,trimmed"]["mean"] == pytest.approx(0.75)
    assert metrics["prompt_ok,trimmed"]["mean"] == pytest.approx(2 / 3)
    stored = open_store(str(tmp_path / "s.db")).get_run(run.run_id)["aggregates"]
    assert stored["rule_ok,trimmed"]["mean"] == pytest.approx(0.75)
    assert stored["prompt_ok,trimmed"]["mean"] == pytest.approx(2 / 3)
