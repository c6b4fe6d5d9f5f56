"""Task loading: lm-evaluation-harness YAML as that project writes it, local data, few-shot prompts, Python tasks,
the shipped samples, and one-line errors."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from assay.bench.quality.answers import FilterPipeline, exact_match
from assay.bench.quality.tasks import Task, TaskError, load_tasks

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tasks"

# lm-evaluation-harness's gsm8k.yaml, as it writes it (a base file included by a local variant).
GSM8K_BASE = r'''tag:
  - math_word_problems
task: gsm8k
dataset_path: gsm8k
dataset_name: main
output_type: generate_until
training_split: train
fewshot_split: train
test_split: test
doc_to_text: "Question: {{question}}\nAnswer:"
doc_to_target: "{{answer}}" #" {{answer.split('### ')[-1].rstrip()}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore:
      - ","
      - "\\$"
      - "(?s).*#### "
      - "\\.$"
generation_kwargs:
  until:
    - "Question:"
    - "</s>"
    - "<|im_end|>"
  do_sample: false
  temperature: 0.0
repeats: 1
num_fewshot: 5
filter_list:
  - name: "strict-match"
    filter:
      - function: "regex"
        regex_pattern: "#### (\\-?[0-9\\.\\,]+)"
      - function: "take_first"
  - name: "flexible-extract"
    filter:
      - function: "regex"
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{2,})|(-?[0-9]+)"
      - function: "take_first"
metadata:
  version: 3.0
'''

GSM8K_LOCAL = '''include: gsm8k.yaml
task: gsm8k_local
process_docs: !function utils.process_docs
dataset_kwargs:
  data_files:
    test: data/test.jsonl
    train: data/train.jsonl
'''

HUMANEVAL = '''task: humaneval
dataset_path: openai/openai_humaneval
unsafe_code: true
output_type: generate_until
test_split: test
doc_to_text: "{{prompt}}"
doc_to_target: "{{test}}\\ncheck({{entry_point}})"
metric_list:
  - metric: !function utils.pass_at_k
    aggregation: mean
    higher_is_better: true
    k: [1]
generation_kwargs:
  until:
    - "\\nclass"
    - "\\ndef"
    - "\\n#"
    - "\\nif"
    - "\\nprint"
  max_gen_toks: 1024
  do_sample: false
repeats: 1
num_fewshot: 0
filter_list:
  - name: "create_test"
    filter:
      - function: "custom"
        filter_fn: !function utils.build_predictions
metadata:
  version: 1.0
'''


def _gsm_doc(i: int) -> dict:
    return {"question": f"What is {i} plus {i}?", "answer": f"{i} + {i} = {2 * i}.\n#### {2 * i}"}


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def gsm8k(tmp_path: Path) -> Path:
    (tmp_path / "gsm8k.yaml").write_text(GSM8K_BASE)
    (tmp_path / "gsm8k_local.yaml").write_text(GSM8K_LOCAL)
    _write_jsonl(tmp_path / "data" / "test.jsonl", [_gsm_doc(i) for i in range(1, 9)])
    _write_jsonl(tmp_path / "data" / "train.jsonl", [_gsm_doc(i) for i in range(100, 107)])
    return tmp_path / "gsm8k_local.yaml"


def test_gsm8k_yaml_with_include_and_function_runs_on_local_files(gsm8k: Path):
    (t,) = load_tasks(gsm8k)
    assert t.name == "gsm8k_local" and t.output_type == "generate_until"
    assert len(t.docs) == 8 and len(t.fewshot_docs) == 7 and t.num_fewshot == 5
    assert t.generation_kwargs["until"] == ["Question:", "</s>", "<|im_end|>"]
    assert t.generation_kwargs["temperature"] == 0.0 and t.generation_kwargs["do_sample"] is False
    assert [f.name for f in t.filters] == ["strict-match", "flexible-extract"]
    assert t.metrics[0]["metric"] == "exact_match" and t.metrics[0]["ignore_case"] is True
    assert t.metrics[0]["regexes_to_ignore"] == [",", "\\$", "(?s).*#### ", "\\.$"]
    assert any("process_docs" in u and "!function utils.process_docs" in u for u in t.unsupported)
    assert [Path(f).name for f in t.data_files] == ["test.jsonl", "train.jsonl"]
    assert len(t.task_hash) == 64 and len(t.data_hash) == 64 and not t.is_code
    # the chain: a model's answer through the filters, scored against the gold text
    answer = "4 + 4 = 8.\n#### 8\n"
    strict = t.filters[0].apply(answer)
    assert strict == "8" and exact_match(strict, t.target_text(t.docs[3]), **{
        k: v for k, v in t.metrics[0].items() if k in ("ignore_case", "ignore_punctuation", "regexes_to_ignore")}) == 1.0


def test_gsm8k_prompts_are_lm_eval_few_shot_with_the_tasks_seed(gsm8k: Path):
    (t,) = load_tasks(gsm8k, shots=2, limit=3)
    rnd = random.Random(1234)
    train = [_gsm_doc(i) for i in range(100, 107)]
    for i in range(3):
        shots = rnd.sample(train, 2)
        expected = "".join(f"Question: {d['question']}\nAnswer: {d['answer']}\n\n" for d in shots)
        expected += f"Question: What is {i + 1} plus {i + 1}?\nAnswer:"
        assert t.context(i) == expected


def test_hand_checked_prompt_with_description_and_delimiters(tmp_path: Path):
    _write_jsonl(tmp_path / "t.jsonl", [{"q": "x", "a": "1"}])
    _write_jsonl(tmp_path / "f.jsonl", [{"q": "y", "a": "2"}, {"q": "z", "a": "3"}])
    (tmp_path / "t.yaml").write_text(textwrap.dedent('''\
        task: tiny
        dataset_kwargs: {data_files: {test: t.jsonl, dev: f.jsonl}}
        test_split: test
        fewshot_split: dev
        num_fewshot: 2
        description: "Answer {{q}}-style questions.\\n"
        doc_to_text: "Q: {{q}}"
        doc_to_target: a
        target_delimiter: " => "
        fewshot_delimiter: "\\n--\\n"
        fewshot_config: {sampler: first_n}
        '''))
    (t,) = load_tasks(tmp_path / "t.yaml")
    assert t.context(0) == "Answer x-style questions.\nQ: y => 2\n--\nQ: z => 3\n--\nQ: x"


def test_few_shot_from_the_test_split_never_includes_the_doc(tmp_path: Path):
    rows = [{"q": f"item {i}", "a": str(i)} for i in range(5)]
    _write_jsonl(tmp_path / "d.jsonl", rows)
    (tmp_path / "t.yaml").write_text("task: same\ndataset_kwargs: {data_files: {test: d.jsonl}}\n"
                                     "test_split: test\nfewshot_split: test\nnum_fewshot: 4\n"
                                     "doc_to_text: 'Q: {{q}}'\ndoc_to_target: a\n")
    (t,) = load_tasks(tmp_path / "t.yaml")
    for i in range(5):
        ctx = t.context(i)
        examples, question = ctx.rsplit("\n\n", 1)[0], ctx.rsplit("\n\n", 1)[1]
        assert question == f"Q: item {i}"
        assert f"Q: item {i} " not in examples
        assert examples.count("Q: ") == 4       # one extra drawn, the doc dropped: still four examples
    # the same prompts whichever item is asked for first (all are built together, in doc order)
    (t2,) = load_tasks(tmp_path / "t.yaml")
    assert [t2.context(i) for i in (4, 0, 2, 1, 3)] == [t.context(i) for i in (4, 0, 2, 1, 3)]
    # another seed, other draws
    (t3,) = load_tasks(tmp_path / "t.yaml", seed=7)
    assert t3.contexts() != t.contexts()


def test_mmlu_style_template_include_first_n_and_choice_letters(tmp_path: Path):
    (tmp_path / "_default_template_yaml").write_text(textwrap.dedent('''\
        dataset_path: hails/mmlu_no_train # a copy of `cais/mmlu` with no auxiliary_train split
        test_split: test
        fewshot_split: dev
        fewshot_config:
          sampler: first_n
        output_type: multiple_choice
        doc_to_text: "{{question.strip()}}\\nA. {{choices[0]}}\\nB. {{choices[1]}}\\nC. {{choices[2]}}\\nD. {{choices[3]}}\\nAnswer:"
        doc_to_choice: ["A", "B", "C", "D"]
        doc_to_target: answer
        metric_list:
          - metric: acc
            aggregation: mean
            higher_is_better: true
        metadata:
          version: 1.0
        dataset_kwargs:
          trust_remote_code: true
        '''))
    (tmp_path / "mmlu_toy.yaml").write_text(textwrap.dedent('''\
        "dataset_name": "toy"
        "description": "The following are multiple choice questions (with answers) about toys.\\n\\n"
        "tag": "mmlu_other_tasks"
        "include": "_default_template_yaml"
        "task": "mmlu_toy"
        "task_alias": "toy"
        "dataset_kwargs":
          "data_files":
            "test": "toy_test.parquet"
            "dev": "toy_dev.parquet"
        '''))
    import pyarrow as pa
    import pyarrow.parquet as pq

    test = [{"question": " Which is round? ", "subject": "toy", "choices": ["box", "ball", "kite", "doll"],
             "answer": 1}]
    dev = [{"question": f"Dev {i}", "subject": "toy", "choices": ["a", "b", "c", "d"], "answer": i % 4}
           for i in range(6)]
    pq.write_table(pa.Table.from_pylist(test), tmp_path / "toy_test.parquet")
    pq.write_table(pa.Table.from_pylist(dev), tmp_path / "toy_dev.parquet")
    (t,) = load_tasks(tmp_path / "mmlu_toy.yaml", shots=2)
    assert t.unsupported == []
    assert t.doc_to_choice(t.docs[0]) == ["A", "B", "C", "D"] and t.gold_index(t.docs[0]) == 1
    assert t.target_text(t.docs[0]) == "B"
    assert t.context(0) == ("The following are multiple choice questions (with answers) about toys.\n\n"
                            "Dev 0\nA. a\nB. b\nC. c\nD. d\nAnswer: A\n\n"
                            "Dev 1\nA. a\nB. b\nC. c\nD. d\nAnswer: B\n\n"
                            "Which is round?\nA. box\nB. ball\nC. kite\nD. doll\nAnswer:")


def test_humaneval_yaml_with_function_metric_is_a_code_task(tmp_path: Path):
    (tmp_path / "humaneval.yaml").write_text(HUMANEVAL + "dataset_kwargs:\n  data_files:\n    test: he.jsonl\n")
    _write_jsonl(tmp_path / "he.jsonl", [{"task_id": "t/0", "prompt": "def f():\n", "entry_point": "f",
                                          "test": "def check(c):\n    assert c() == 1\n",
                                          "canonical_solution": "    return 1\n"}])
    (t,) = load_tasks(tmp_path / "humaneval.yaml")
    assert t.is_code and t.metrics[0]["metric"] == "pass_at_k" and t.metrics[0]["k"] == [1]
    assert t.filters[0].name == "create_test" and t.filters[0].apply("  x") == "  x"
    assert any("build_predictions" in u for u in t.unsupported)
    assert t.generation_kwargs["max_gen_toks"] == 1024
    assert t.context(0) == "def f():\n"
    assert t.target_text(t.docs[0]) == "def check(c):\n    assert c() == 1\n\ncheck(f)"


def test_hub_dataset_offline_names_the_file_to_provide(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    (tmp_path / "gsm8k.yaml").write_text(GSM8K_BASE)
    with pytest.raises(TaskError) as exc:
        load_tasks(tmp_path / "gsm8k.yaml")
    msg = str(exc.value)
    assert "\n" not in msg and "gsm8k.yaml" in msg and "'dataset_path'" in msg
    assert "dataset_kwargs: {data_files: {test: gsm8k_main_test.jsonl, train: gsm8k_main_train.jsonl}}" in msg
    # through an include, the message names the file the user gave
    (tmp_path / "mine.yaml").write_text("include: gsm8k.yaml\ntask: mine\nnum_fewshot: 0\n")
    with pytest.raises(TaskError) as exc:
        load_tasks(tmp_path / "mine.yaml")
    assert str(exc.value).startswith(str(tmp_path / "mine.yaml") + ", field 'dataset_path'")
    assert "{data_files: {test: gsm8k_main_test.jsonl}}" in str(exc.value)


def test_data_formats_give_the_same_docs(tmp_path: Path):
    rows = [{"q": "a", "n": 1}, {"q": "b", "n": 2}]
    _write_jsonl(tmp_path / "d.jsonl", rows)
    (tmp_path / "d.json").write_text(json.dumps({"test": rows, "train": []}))
    (tmp_path / "l.json").write_text(json.dumps(rows))
    (tmp_path / "d.csv").write_text("q,n\na,1\nb,2\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    import gzip

    with gzip.open(tmp_path / "z.jsonl.gz", "wt") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("d.jsonl", "d.json", "l.json", "d.csv", "d.parquet", "z.jsonl.gz"):
        (tmp_path / "t.yaml").write_text(f"task: t\ndataset_kwargs: {{data_files: {name}}}\ntest_split: test\n"
                                         "doc_to_text: '{{q}}'\ndoc_to_target: '{{n}}'\n")
        (t,) = load_tasks(tmp_path / "t.yaml")
        assert t.docs == rows, name
        assert t.target_text(t.docs[1]) == "2"


def test_data_values_are_never_templates_and_templates_are_sandboxed(tmp_path: Path):
    _write_jsonl(tmp_path / "d.jsonl", [{"q": "{{ 7 * 7 }} {% for x in range(3) %}x{% endfor %}", "a": "1"}])
    (tmp_path / "t.yaml").write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\n"
                                     "doc_to_text: 'Q: {{q}}'\ndoc_to_target: a\n")
    (t,) = load_tasks(tmp_path / "t.yaml")
    assert t.context(0) == "Q: {{ 7 * 7 }} {% for x in range(3) %}x{% endfor %}"
    (tmp_path / "t.yaml").write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\n"
                                     "doc_to_text: \"{{ q.__class__.__mro__[1].__subclasses__() }}\"\n"
                                     "doc_to_target: a\n")
    with pytest.raises(TaskError, match="doc_to_text"):
        load_tasks(tmp_path / "t.yaml")


def test_folder_and_comma_lists(tmp_path: Path, gsm8k: Path):
    names = sorted(t.name for t in load_tasks(EXAMPLES))
    assert names == ["arithmetic", "code", "science_mc"]
    both = load_tasks(f"{EXAMPLES / 'science_mc.yaml'},{gsm8k}", limit=2)
    assert [t.name for t in both] == ["science_mc", "gsm8k_local"] and all(len(t.docs) == 2 for t in both)


# ---------------------------------------------------------------------------- errors: one line, file, field
def _one_line_error(path, **kw) -> str:
    with pytest.raises(TaskError) as exc:
        load_tasks(path, **kw)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_bad_yaml_names_file_and_line(tmp_path: Path):
    p = tmp_path / "bad.yaml"
    p.write_text("task: x\ndoc_to_text: 'Q: {{q}}'\ndoc_to_target: [a\nnum_fewshot: 2\n")
    msg = _one_line_error(p)
    assert str(p) in msg and "line 4" in msg and "invalid YAML" in msg


def test_missing_field_names_file_line_and_field(tmp_path: Path):
    _write_jsonl(tmp_path / "d.jsonl", [{"q": "a", "a": "b"}])
    p = tmp_path / "t.yaml"
    p.write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\n"
                 "output_type: multiple_choice\ndoc_to_text: '{{q}}'\ndoc_to_target: a\n")
    msg = _one_line_error(p)
    assert str(p) in msg and "field 'doc_to_choice'" in msg
    p.write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\n"
                 "doc_to_text: '{{question}}'\ndoc_to_target: a\n")
    msg = _one_line_error(p)
    assert str(p) in msg and "line 4" in msg and "field 'doc_to_text'" in msg and "question" in msg
    p.write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\n"
                 "doc_to_text: '{{q}}'\ndoc_to_target: a\noutput_type: loglikelihood_sliding\n")
    assert "field 'output_type'" in _one_line_error(p)


def test_missing_data_file_and_missing_fewshot_split(tmp_path: Path):
    p = tmp_path / "t.yaml"
    p.write_text("task: t\ndataset_kwargs:\n  data_files:\n    test: nowhere.jsonl\ntest_split: test\n"
                 "doc_to_text: '{{q}}'\ndoc_to_target: a\n")
    msg = _one_line_error(p)
    assert "nowhere.jsonl" in msg and "field 'dataset_kwargs.data_files'" in msg and "line 2" in msg
    _write_jsonl(tmp_path / "d.jsonl", [{"q": "a", "a": "b"}])
    p.write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\nfewshot_split: dev\n"
                 "doc_to_text: '{{q}}'\ndoc_to_target: a\n")
    msg = _one_line_error(p, shots=1)
    assert "'dev: FILE'" in msg and "data_files" in msg
    p.write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\nfewshot_split: test\n"
                 "doc_to_text: '{{q}}'\ndoc_to_target: a\n")
    msg = _one_line_error(p, shots=1)
    assert "field 'num_fewshot'" in msg and "has 1 docs" in msg
    (tmp_path / "bad.jsonl").write_text('{"q": "a"}\n{"q": \n')
    p.write_text("task: t\ndataset_kwargs: {data_files: {test: bad.jsonl}}\ntest_split: test\n"
                 "doc_to_text: '{{q}}'\ndoc_to_target: q\n")
    msg = _one_line_error(p)
    assert "bad.jsonl" in msg and "line 2" in msg


def test_process_results_function_is_refused_and_unknown_keys_listed(tmp_path: Path):
    _write_jsonl(tmp_path / "d.jsonl", [{"q": "a", "a": "b"}])
    base = "task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\ndoc_to_text: '{{q}}'\n" \
           "doc_to_target: a\n"
    p = tmp_path / "t.yaml"
    p.write_text(base + "process_results: !function utils.process_results\n")
    msg = _one_line_error(p)
    assert "field 'process_results'" in msg and "!function utils.process_results" in msg and "line 6" in msg
    p.write_text(base + "use_prompt: promptsource:x\nmetric_list:\n  - metric: bleu\n  - metric: exact_match\n")
    (t,) = load_tasks(p)
    assert "use_prompt (ignored)" in t.unsupported and any(u.startswith("metric bleu") for u in t.unsupported)
    p.write_text(base + "metric_list:\n  - metric: bleu\n")
    assert "field 'metric_list'" in _one_line_error(p)
    p.write_text(base + "doc_to_choice: !function utils.choices\noutput_type: multiple_choice\n")
    assert "field 'doc_to_choice'" in _one_line_error(p)


def test_pass_at_k_spellings(tmp_path: Path):
    _write_jsonl(tmp_path / "d.jsonl", [{"p": "def f():\n", "t": "assert f()"}])
    p = tmp_path / "t.yaml"
    p.write_text("task: t\ndataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\ndoc_to_text: p\n"
                 "doc_to_target: t\nmetric_list:\n  - metric: pass@k\n    k: [1, 5]\n  - metric: pass@10\n")
    (t,) = load_tasks(p)
    assert t.is_code and [m["k"] for m in t.metrics] == [[1, 5], [10]]


# ---------------------------------------------------------------------------- Python tasks
def test_decorated_python_task(tmp_path: Path, monkeypatch):
    (tmp_path / "my_quality_tasks.py").write_text(textwrap.dedent('''\
        from assay.bench.quality.tasks import task

        @task(name="capitals", output_type="multiple_choice",
              doc_to_text=lambda d: f"Capital of {d['country']}?",
              doc_to_choice=lambda d: d["options"], doc_to_target="gold", num_fewshot=1,
              fewshot_docs=[{"country": "Peru", "options": ["Lima", "Quito"], "gold": 0}])
        def capitals():
            return [{"country": "France", "options": ["Lyon", "Paris"], "gold": 1},
                    {"country": "Spain", "options": ["Madrid", "Seville"], "gold": 0}]

        @task
        def plain():
            return [{"question": "2+2", "answer": "4"}]

        def undecorated():
            return []
        '''))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (t,) = load_tasks("python:my_quality_tasks:capitals")
    assert t.name == "capitals" and t.source == "python:my_quality_tasks:capitals"
    assert t.context(1) == "Capital of Peru? Lima\n\nCapital of Spain?"
    assert t.gold_index(t.docs[0]) == 1 and t.target_text(t.docs[0]) == "Paris"
    assert len(t.task_hash) == 64 and len(t.data_hash) == 64
    with pytest.raises(TaskError, match="doc_to_text"):
        load_tasks("python:my_quality_tasks:plain")
    with pytest.raises(TaskError, match="not decorated"):
        load_tasks("python:my_quality_tasks:undecorated")
    with pytest.raises(TaskError, match="cannot import"):
        load_tasks("python:no_such_module_here:x")


# ---------------------------------------------------------------------------- the shipped samples
def _sample(name: str, **kw) -> Task:
    (t,) = load_tasks(EXAMPLES / f"{name}.yaml", **kw)
    return t


def test_science_mc_sample():
    t = _sample("science_mc", shots=3)
    assert t.output_type == "multiple_choice" and len(t.docs) == 12 and len(t.fewshot_docs) == 5
    assert [m["metric"] for m in t.metrics] == ["acc", "acc_norm"] and t.unsupported == []
    assert _sample("science_mc").num_fewshot == 0
    assert t.continuations(t.docs[0]) == [" Oxygen", " Carbon dioxide", " Nitrogen", " Helium"]
    for i, doc in enumerate(t.docs):
        assert len(t.doc_to_choice(doc)) == 4 and 0 <= t.gold_index(doc) < 4
        ctx = t.context(i)
        assert ctx.startswith("The following are multiple choice questions about basic science.\n\n")
        assert ctx.count("Question: ") == 4 and ctx.endswith(f"Question: {doc['question']}\nAnswer:")


def test_arithmetic_sample_gold_answers_pass_their_own_filters():
    t = _sample("arithmetic", shots=1)
    assert len(t.docs) == 12 and len(t.fewshot_docs) == 5 and [f.name for f in t.filters] == ["strict-match", "flexible-extract"]
    opts = {k: v for k, v in t.metrics[0].items() if k in ("ignore_case", "ignore_punctuation",
                                                            "regexes_to_ignore")}
    for doc in t.docs + t.fewshot_docs:
        gold = t.target_text(doc)
        assert gold.rsplit("\n", 1)[-1].startswith("#### ")
        for f in t.filters:
            assert exact_match(f.apply(gold), gold, **opts) == 1.0, (doc["id"], f.name)
        assert exact_match("999999", gold, **opts) == 0.0


def _run_program(program: str, tmp_path: Path) -> int:
    path = tmp_path / "prog.py"
    path.write_text(program)
    return subprocess.run([sys.executable, str(path)], capture_output=True, timeout=60, cwd=tmp_path).returncode


def test_code_sample_canonical_solutions_pass_and_broken_bodies_fail(tmp_path: Path):
    t = _sample("code")
    assert t.is_code and len(t.docs) == 12 and t.metrics[0]["k"] == [1]
    assert len({d["entry_point"] for d in t.docs}) == 12
    for i, doc in enumerate(t.docs):
        prompt, target = t.context(i), t.target_text(doc)
        assert prompt == doc["prompt"] and target.endswith(f"check({doc['entry_point']})")
        good = prompt + doc["canonical_solution"] + "\n" + target
        assert t.program(i, doc["canonical_solution"]) == good
        assert _run_program(good, tmp_path) == 0, doc["task_id"]
        broken = prompt + "    return None\n" + "\n" + target
        assert _run_program(broken, tmp_path) != 0, doc["task_id"]
        off_by_one = prompt + doc["canonical_solution"].replace("return ", "return 1 + ", 1) + "\n" + target
        if "return " in doc["canonical_solution"]:
            assert _run_program(off_by_one, tmp_path) != 0, doc["task_id"]


def test_filter_pipeline_default_is_none(tmp_path: Path):
    t = _sample("science_mc")
    assert [f.name for f in t.filters] == ["none"]
    assert isinstance(t.filters[0], FilterPipeline) and t.filters[0].apply(" B ") == " B "
