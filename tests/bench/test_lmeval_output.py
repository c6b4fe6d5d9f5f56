"""``--output-lm-eval DIR``: the run written as lm-evaluation-harness 0.4 writes its own, ``DIR/<model>/results_<date>.json``
(``results``, ``groups``, ``configs``, ``versions``, ``n-shot``, ``higher_is_better``, ``n-samples``) and
``samples_<task>_<date>.jsonl`` (one line per doc and filter, with the requests' arguments, the responses, the
hashes and each metric's value)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from pathlib import Path

import pytest

from assay.bench.quality.run import QualityConfig, run_quality
from assay.bench.quality.subject import Subject
from tests.bench.test_lmeval_groups import SIZES, _folder, _model
from tests.bench.test_lmeval_perplexity import LAMBADA, _last
from tests.bench.test_lmeval_perplexity import _write as write_pages
from tests.helpers.lmeval_models import ScriptedLM


def _one(folder: Path, pattern: str) -> Path:
    found = sorted(folder.glob(pattern))
    assert len(found) == 1, found
    return found[0]


def test_results_and_samples_as_lm_eval_writes_them(tmp_path: Path) -> None:
    root = _folder(tmp_path)
    model = _model()
    out = tmp_path / "lm"
    cfg = QualityConfig(model=model, tasks="tiny_weighted", task_dirs=[str(root)], limit=4)
    asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None, lm_eval_out=out))
    folder = out / "scripted-lm"
    res = json.loads(_one(folder, "results_*.json").read_text())
    for key in ("results", "groups", "group_subtasks", "configs", "versions", "n-shot", "higher_is_better",
                "n-samples"):
        assert key in res, key
    assert res["results"]["tiny_alpha"] == {"alias": "tiny_alpha", "acc,none": 0.5,
                                            "acc_stderr,none": pytest.approx(0.5)}
    assert res["results"]["tiny_beta"]["acc,none"] == 1.0
    # gamma: 4 of its 5 items (--limit 4), one right
    assert res["results"]["tiny_gamma"]["acc,none"] == 0.25
    assert res["n-samples"]["tiny_gamma"] == {"original": 5, "effective": 4}
    g = res["groups"]["tiny_weighted"]
    assert g["acc,none"] == pytest.approx((1 + 3 + 1) / (2 + 3 + 4))
    assert res["results"]["tiny_weighted"] == g
    assert res["group_subtasks"]["tiny_weighted"] == ["tiny_alpha", "tiny_beta", "tiny_gamma"]
    assert res["configs"]["tiny_alpha"]["task"] == "tiny_alpha"
    assert res["configs"]["tiny_alpha"]["output_type"] == "multiple_choice"     # the include merged
    assert res["n-shot"]["tiny_alpha"] == 0
    assert res["higher_is_better"]["tiny_alpha"] == {"acc": True}

    lines = [json.loads(x) for x in _one(folder, "samples_tiny_alpha_*.jsonl").read_text().splitlines()]
    assert len(lines) == SIZES["alpha"][0]
    first = lines[0]
    ctx = "Q: alpha question 0\nA:"
    assert first["doc_id"] == 0 and first["doc"]["q"] == "alpha question 0" and first["target"] == "0"
    assert first["arguments"] == {"gen_args_0": {"arg_0": ctx, "arg_1": " yes"},
                                  "gen_args_1": {"arg_0": ctx, "arg_1": " no"}}
    assert first["resps"] == [[[-0.5, True]], [[-20.0, False]]]
    assert first["filtered_resps"] == [[-0.5, True], [-20.0, False]]
    assert first["filter"] == "none" and first["metrics"] == ["acc"] and first["acc"] == 1.0
    assert first["prompt_hash"] == hashlib.sha256(ctx.encode()).hexdigest()
    assert first["target_hash"] == hashlib.sha256(b"0").hexdigest()
    doc_json = json.dumps(first["doc"], indent=2, ensure_ascii=False)
    assert first["doc_hash"] == hashlib.sha256(doc_json.encode()).hexdigest()
    assert lines[1]["acc"] == 0.0


def test_perplexity_values_are_written_as_lm_eval_keeps_them(tmp_path: Path) -> None:
    path = write_pages(tmp_path, LAMBADA)
    model = ScriptedLM(_last)
    out = tmp_path / "lm"
    cfg = QualityConfig(model=model, tasks=str(path))
    asyncio.run(run_quality(cfg, subject=Subject(model, cache=None), store=None, lm_eval_out=out))
    folder = out / "scripted-lm"
    res = json.loads(_one(folder, "results_*.json").read_text())
    r = res["results"]["tiny_lambada"]
    assert r["perplexity,none"] == pytest.approx(math.exp(0.5))
    assert r["perplexity_stderr,none"] == pytest.approx(0.0, abs=1e-12)  # the harness's bootstrap; every loglik -0.5
    assert res["higher_is_better"]["tiny_lambada"] == {"perplexity": False, "acc": True}
    line = json.loads(_one(folder, "samples_tiny_lambada_*.jsonl").read_text().splitlines()[0])
    assert line["perplexity"] == -0.5 and line["acc"] == 1.0         # the item's loglik, as lm-eval logs it
    assert line["arguments"]["gen_args_0"]["arg_1"].startswith(" ")
