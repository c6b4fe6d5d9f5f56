"""`assay simulate ...` as a user runs it: outputs, and one clear line with exit 2 on bad input."""

import json

import pytest

from tests.helpers.cli import run_assay

APP = '''
def chat(query, history=None, contexts=None):
    return {"response": "I will not help with that.", "contexts": [{"content": "policy", "doc_uri": "kb://p"}]}
'''


def run(tmp_path, *args):
    p = run_assay(args, cwd=tmp_path)
    assert "Traceback" not in p.stderr, p.stderr
    return p


@pytest.fixture
def app_dir(tmp_path):
    (tmp_path / "my_app.py").write_text(APP)
    return tmp_path


def test_adversarial_then_eval_reads_the_set(app_dir):
    p = run(app_dir, "simulate", "adversarial", "--target", "my_app:chat", "--scenario", "adv_qa",
            "--max", "4", "--seed", "3", "--out", "attacks.jsonl")
    assert p.returncode == 0, p.stderr
    assert "4 conversation(s) written to attacks.jsonl" in p.stdout
    rows = [json.loads(x) for x in (app_dir / "attacks.jsonl").read_text().splitlines()]
    assert [r["category"] for r in rows] == ["hate_unfairness", "sexual", "violence", "self_harm"]
    assert all(r["seed"] == 3 and r["template_version"] == "1" for r in rows)
    p = run(app_dir, "eval", "attacks.jsonl", "--metrics", "token_count", "--quiet")
    assert p.returncode == 0, p.stderr
    assert "4 read, 4 evaluated" in p.stdout


def test_jailbreak_writes_the_paired_folder(app_dir):
    p = run(app_dir, "simulate", "jailbreak", "--target", "my_app:chat", "--scenario", "adv_qa", "--max", "2",
            "--out", "jb")
    assert p.returncode == 0, p.stderr
    assert "next: assay eval jb --metrics safety" in p.stdout
    base = (app_dir / "jb" / "baseline.jsonl").read_text().splitlines()
    jail = (app_dir / "jb" / "jailbreak.jsonl").read_text().splitlines()
    assert len(base) == len(jail) == 2
    assert json.loads(base[0])["pair_id"] == json.loads(jail[0])["pair_id"]


@pytest.mark.parametrize("args,expect", [
    (["adversarial", "--target", "my_app:chat", "--scenario", "adv_nope", "--out", "a.jsonl"], "unknown scenario 'adv_nope'"),
    (["adversarial", "--target", "my_app:chat", "--category", "gore", "--out", "a.jsonl"], "unknown category 'gore'"),
    (["adversarial", "--target", "nomodule:chat", "--out", "a.jsonl"], "cannot import 'nomodule'"),
    (["adversarial", "--target", "my_app", "--out", "a.jsonl"], "must look like module:function"),
    (["adversarial", "--target", "my_app:chat", "--max", "0", "--out", "a.jsonl"], "--max must be at least 1"),
    (["jailbreak", "--target", "my_app:chat", "--kind", "both", "--out", "jb"], "--kind 'both'"),
    (["jailbreak", "--target", "my_app:chat", "--scenario", "adv_qa", "--out", "jb.jsonl"], "writes a folder"),
    (["users", "--target", "my_app:chat", "--out", "c.jsonl"], "give --goals FILE, or --text FILE and/or --tasks FILE"),
    (["users", "--target", "my_app:chat", "--tasks", "missing.txt", "--out", "c.jsonl"], "--tasks missing.txt: no such file"),
    (["adversarial", "--target", "my_app:chat", "--attacker", "bogus:x", "--scenario", "adv_conversation",
      "--out", "a.jsonl"], "unknown simulator 'bogus:x'"),
])
def test_bad_input_is_one_line_and_exit_2(app_dir, args, expect):
    p = run(app_dir, "simulate", *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert expect in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_users_with_an_empty_task_file(app_dir):
    (app_dir / "tasks.txt").write_text("# nothing here\n\n")
    p = run(app_dir, "simulate", "users", "--target", "my_app:chat", "--tasks", "tasks.txt", "--out", "c.jsonl")
    assert p.returncode == 2 and "no task in the file" in p.stderr
