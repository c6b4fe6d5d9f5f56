"""Task files written to hurt (issue 28, item 3): includes that reach outside the task's folder or into a device,
YAML whose aliases expand without end, and regexes that never finish. Each ends in one ``TaskError`` line that
names the task file and the field, never in a hang, a traceback or the content of a file it should not read.

What could hang or eat memory on the code before the fix runs in a child process with a memory cap and a generous
deadline, so a regression fails the test instead of stopping the suite."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import assay
from assay.bench.embed.tasks import EmbedTaskError, load_embed_tasks
from assay.bench.quality.answers import exact_match
from assay.bench.quality.tasks import TaskError, load_tasks

SRC = str(Path(assay.__file__).resolve().parents[1])
DATA = 'dataset_kwargs: {data_files: {test: d.jsonl}}\ntest_split: test\n'
SECRET = "hunter2-not-for-your-eyes"


def _write_data(folder: Path, rows: list[dict] | None = None) -> None:
    rows = rows or [{"q": "one", "a": "1"}, {"q": "two", "a": "2"}]
    (folder / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _task(folder: Path, body: str, name: str = "t.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    _write_data(folder)
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return path


def _limits() -> None:       # runs in the child: 2 GiB of address space at most
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _child(code: str, cwd: Path, deadline: float = 90.0) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (memory-capped); fail the test if it has not ended by ``deadline``."""
    env = {**os.environ, "PYTHONPATH": SRC}
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=deadline, preexec_fn=_limits)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {deadline:.0f} s (a hang)")


LOAD = """
import sys
from assay.bench.quality.tasks import TaskError, load_tasks
try:
    tasks = load_tasks(sys.argv[1] if len(sys.argv) > 1 else {path!r})
except TaskError as exc:
    print("TASKERROR", exc)
else:
    print("LOADED", [t.unsupported for t in tasks])
"""


def _load_in_child(path: Path) -> str:
    proc = _child(LOAD.format(path=str(path)), path.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


# --------------------------------------------------------------------------------------------- include
@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.yaml"
    secret.parent.mkdir()
    secret.write_text(f"secret_key: {SECRET}\nanother_line_of_it: {SECRET}\n")
    return secret


# line 6 of the task file is the include
BASE = "task: t\n" + DATA + 'doc_to_text: "{{q}}"\ndoc_to_target: "{{a}}"\n'


@pytest.mark.parametrize("how", ["absolute", "dotdot", "symlink"])
def test_an_include_outside_the_task_folder_is_refused(tmp_path: Path, outside: Path, how: str):
    folder = tmp_path / "tasks"
    folder.mkdir()
    if how == "absolute":
        inc = str(outside)
    elif how == "dotdot":
        inc = "../outside/secret.yaml"
    else:
        (folder / "link.yaml").symlink_to(outside)
        inc = "link.yaml"
    path = _task(folder, f"{BASE}include: {inc}\n")
    with pytest.raises(TaskError) as exc:
        load_tasks(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}, line 6, field 'include': ")
    assert "outside the task's folder" in msg and "\n" not in msg
    assert SECRET not in msg and "secret_key" not in msg


def test_an_include_of_a_device_or_a_pipe_is_refused_without_reading_it(tmp_path: Path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    os.mkfifo(folder / "pipe.yaml")               # opening it would wait for a writer forever
    path = _task(folder, f"{BASE}include: pipe.yaml\n")
    out = _load_in_child(path)
    assert out.startswith(f"TASKERROR {path}, line 6, field 'include': ") and "not a regular file" in out, out
    path.write_text(f"{BASE}include: /dev/zero\n")
    out = _load_in_child(path)
    assert out.startswith(f"TASKERROR {path}, line 6, field 'include': "), out


def test_a_task_path_that_is_a_device_is_refused(tmp_path: Path):
    proc = _child(LOAD.format(path="/dev/zero"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("TASKERROR /dev/zero: not a regular file"), proc.stdout


def test_an_include_over_the_size_cap_is_refused(tmp_path: Path, monkeypatch):
    import assay.bench.quality.tasks as tasks_module

    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "big.yaml").write_text("description: '" + "x" * 5000 + "'\n")
    path = _task(folder, f"{BASE}include: big.yaml\n")
    monkeypatch.setattr(tasks_module, "MAX_TASK_FILE_BYTES", 4096)
    with pytest.raises(TaskError) as exc:
        load_tasks(path)
    assert str(exc.value).startswith(f"{path}, line 6, field 'include': ")
    assert "larger than 4096 bytes" in str(exc.value)


def test_includes_inside_the_folder_and_a_named_folder_still_work(tmp_path: Path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "_template_yaml").write_text('doc_to_text: "Q: {{q}}"\ndescription: "shared\\n"\n')
    folder = tmp_path / "tasks"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "base.yaml").write_text('doc_to_target: "{{a}}"\n')
    path = _task(folder, "task: t\n" + DATA + "include: sub/base.yaml\ndoc_to_text: '{{q}}?'\n")
    (t,) = load_tasks(path)
    assert t.context(0) == "one?" and t.target_text(t.docs[0]) == "1"
    # lm-eval's ../ template: refused by default, read when its folder is named
    path.write_text("task: t\n" + DATA + "include: ../shared/_template_yaml\ndoc_to_target: '{{a}}'\n")
    with pytest.raises(TaskError, match="outside the task's folder"):
        load_tasks(path)
    (t,) = load_tasks(path, include_dirs=[shared])
    assert t.context(1) == "shared\nQ: two"
    monkeypatch.setenv("ASSAY_TASK_INCLUDE", str(shared))
    (t,) = load_tasks(folder)
    assert t.context(0) == "shared\nQ: one"


def test_unsupported_keys_are_named_never_their_values(tmp_path: Path):
    long_key = "k" * 500
    path = _task(tmp_path / "tasks", f"""\
        task: t
        {DATA.splitlines()[0]}
        test_split: test
        doc_to_text: "{{{{q}}}}"
        doc_to_target: "{{{{a}}}}"
        mystery: "{SECRET}"
        process_docs: "{SECRET}"
        "weird\\x1b[31mkey": 1
        {long_key}: 2
        123: 3
        """)
    (t,) = load_tasks(path)
    text = " | ".join(t.unsupported)
    assert SECRET not in text and "\x1b" not in text
    assert "mystery (ignored)" in t.unsupported
    assert any(u.startswith("process_docs") for u in t.unsupported)
    assert all(len(u) < 200 for u in t.unsupported), t.unsupported


# --------------------------------------------------------------------------------------------- YAML aliases
LAUGHS = """\
task: lol
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""

MERGES = """\
task: merge
a: &a {k0: 0, k1: 1, k2: 2, k3: 3, k4: 4, k5: 5, k6: 6, k7: 7}
b: &b {<<: [*a, *a, *a, *a, *a, *a, *a, *a]}
c: &c {<<: [*b, *b, *b, *b, *b, *b, *b, *b]}
d: &d {<<: [*c, *c, *c, *c, *c, *c, *c, *c]}
e: &e {<<: [*d, *d, *d, *d, *d, *d, *d, *d]}
f: &f {<<: [*e, *e, *e, *e, *e, *e, *e, *e]}
g: &g {<<: [*f, *f, *f, *f, *f, *f, *f, *f]}
h: &h {<<: [*g, *g, *g, *g, *g, *g, *g, *g]}
i: &i {<<: [*h, *h, *h, *h, *h, *h, *h, *h]}
"""


@pytest.mark.parametrize("text", [LAUGHS, MERGES], ids=["billion-laughs", "merge-keys"])
def test_yaml_aliases_that_expand_without_end_are_refused(tmp_path: Path, text: str):
    assert len(text.encode()) < 1100
    path = tmp_path / "lol.yaml"
    _write_data(tmp_path)
    path.write_text(text + DATA + "doc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n")
    out = _load_in_child(path)
    assert out.startswith(f"TASKERROR {path}: ") and "aliases" in out, out


def test_a_self_referencing_alias_and_deep_nesting_are_one_line(tmp_path: Path):
    _write_data(tmp_path)
    path = tmp_path / "loop.yaml"
    path.write_text("task: loop\nmetadata: &m [1, *m]\n" + DATA + "doc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n")
    with pytest.raises(TaskError) as exc:
        load_tasks(path)
    assert str(exc.value).startswith(f"{path}, line 2: ") and "refers to itself" in str(exc.value)
    path.write_text("task: deep\nmetadata: " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(TaskError) as exc:
        load_tasks(path)
    assert str(exc.value).startswith(f"{path}") and "nested" in str(exc.value)


def test_ordinary_anchors_still_load(tmp_path: Path):
    _write_data(tmp_path)
    path = tmp_path / "ok.yaml"
    path.write_text("task: ok\n" + DATA + "doc_to_text: &t '{{q}}'\ndoc_to_target: '{{a}}'\n"
                    "fewshot_config: {doc_to_text: *t}\ngeneration_kwargs: &g {until: [\"\\n\"]}\n"
                    "metadata: {copy: *g}\n")
    (t,) = load_tasks(path)
    assert t.context(0) == "one" and t.generation_kwargs["until"] == ["\n"]


# --------------------------------------------------------------------------------------------- regexes
SLOW = r"(a|aa)+$"        # exponential backtracking on "aaaa...a!"
SLOW_TEXT = "a" * 64 + "!"


def test_a_regex_replace_that_never_finishes_is_stopped(tmp_path: Path):
    _write_data(tmp_path, [{"q": SLOW_TEXT, "a": "1"}])
    path = tmp_path / "t.yaml"
    path.write_text("task: t\n" + DATA + f"doc_to_text: \"{{{{q | regex_replace('{SLOW}', '')}}}}\"\n"
                    "doc_to_target: '{{a}}'\n")
    out = _load_in_child(path)
    assert out.startswith(f"TASKERROR {path}, line 4, field 'doc_to_text': "), out
    assert "regex" in out and "did not finish" in out and SLOW in out


def test_a_filter_regex_that_never_finishes_is_stopped_naming_the_task_and_filter(tmp_path: Path):
    _write_data(tmp_path)
    path = tmp_path / "t.yaml"
    path.write_text("task: t\n" + DATA + "doc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n"
                    "filter_list:\n  - name: slow-match\n    filter:\n"
                    f"      - function: regex\n        regex_pattern: '{SLOW}'\n      - function: take_first\n")
    code = f"""
    from assay.bench.quality.tasks import load_tasks
    from assay.errors import AssayError
    (t,) = load_tasks({str(path)!r})
    try:
        t.filters[0].apply({SLOW_TEXT!r})
    except AssayError as exc:
        print("ERROR", exc)
    print("fine:", t.filters[0].apply("aaa"))
    """
    proc = _child(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, second = proc.stdout.strip().splitlines()
    assert first.startswith(f"ERROR {path}, line 6, field 'filter_list': "), first
    assert "slow-match" in first and "did not finish" in first
    assert second == "fine: a"


def test_a_regex_to_ignore_that_never_finishes_is_stopped(tmp_path: Path):
    _write_data(tmp_path)
    path = tmp_path / "t.yaml"
    path.write_text("task: t\n" + DATA + "doc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n"
                    f"metric_list:\n  - metric: exact_match\n    regexes_to_ignore: ['{SLOW}']\n")
    code = f"""
    from assay.bench.quality.answers import exact_match
    from assay.bench.quality.tasks import load_tasks
    from assay.errors import AssayError
    (t,) = load_tasks({str(path)!r})
    m = t.metrics[0]
    try:
        exact_match({SLOW_TEXT!r}, "1", regexes_to_ignore=m["regexes_to_ignore"])
    except AssayError as exc:
        print("ERROR", exc)
    """
    proc = _child(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.strip()
    assert out.startswith(f"ERROR {path}, line 6, field 'metric_list': ") and "regexes_to_ignore" in out, out


def test_ordinary_regexes_give_the_same_answers():
    assert exact_match("$1,234.", "1234", regexes_to_ignore=[",", "\\$", "(?s).*#### ", "\\.$"]) == 1.0


# --------------------------------------------------------------------------------------------- data files
def test_a_data_file_that_is_a_pipe_is_refused_without_reading_it(tmp_path: Path):
    os.mkfifo(tmp_path / "d.jsonl")             # opening it would wait for a writer forever
    path = tmp_path / "t.yaml"
    path.write_text("task: t\n" + DATA + "doc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n")
    out = _load_in_child(path)
    assert out.startswith("TASKERROR ") and "d.jsonl" in out and "not a regular file" in out, out


# --------------------------------------------------------------------------------------------- embed task.yaml
def test_an_embedding_task_yaml_with_aliases_is_refused(tmp_path: Path):
    folder = tmp_path / "sts"
    folder.mkdir()
    (folder / "test.jsonl").write_text("".join(json.dumps({"sentence1": f"a {i}", "sentence2": f"b {i}",
                                                           "score": i}) + "\n" for i in range(4)))
    # every level of the laughs inside known keys; str() of the name would never end
    levels = [line.split(": ", 1)[1] for line in LAUGHS.splitlines()[1:]]
    body = "type: sts\ndescription:\n" + "".join(f"  - {v}\n" for v in levels[:-1]) + f"name: {levels[-1]}\n"
    assert "*h" in body and len(body) < 1100
    (folder / "task.yaml").write_text(body)
    code = f"""
    from assay.bench.embed.tasks import EmbedTaskError, load_embed_tasks
    try:
        load_embed_tasks({str(folder)!r})
    except EmbedTaskError as exc:
        print("ERROR", exc)
    """
    proc = _child(code, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.strip()
    assert out.startswith(f"ERROR {folder / 'task.yaml'}") and "alias" in out, out
    (folder / "task.yaml").write_text("type: sts\ndescription: " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(EmbedTaskError, match="nested more than 20 levels"):
        load_embed_tasks(str(folder))
