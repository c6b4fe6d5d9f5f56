"""A run's start loads neither NumPy nor the model limiters: the aggregates and the gates import
NumPy when they compute their figures (at the end of a run), and the run looks up the circuit
breaker's exception only when an exception is raised. Each check reads ``sys.modules`` in a fresh
interpreter; no time is measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")


def loaded_after(code: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    probe = code + "\nimport json, sys\nprint('\\nMODULES=' + json.dumps(sorted(sys.modules)))\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.rsplit("MODULES=", 1)[1]))


def test_the_engine_and_the_gates_parser_load_no_numpy():
    mods = loaded_after("import assay.engine.evaluate, assay.engine.run, assay.engine.aggregate\n"
                        "from assay.engine.gates import parse_gates\n"
                        "parse_gates(['f1_score.mean>=0.5', 'bleu.p90>=0.1'])\n"
                        "from assay.engine.run import accumulators\n"
                        "from assay.metrics.base import resolve\n"
                        "accumulators(resolve(['f1_score', 'bleu']), {})")
    assert "numpy" not in mods and "assay.models.limiter" not in mods and "assay.models.limited" not in mods \
        and "assay.stats" not in mods


def test_the_figures_still_load_it_when_computed():
    mods = loaded_after("from assay.engine.aggregate import Accumulator\n"
                        "from assay.scores import Score\n"
                        "a = Accumulator(metric='m', output='m')\n"
                        "a.add(Score(value=1.0, score=1.0)); a.add(Score(value=0.0, score=0.0))\n"
                        "r = a.result()\n"
                        "assert r['mean'] == 0.5 and r['median'] == 0.5 and r['ci95_low'] is not None, r")
    assert "numpy" in mods


def test_a_classic_run_without_a_store_loads_no_limiters(tmp_path):
    mods = loaded_after("from assay.engine.evaluate import evaluate\n"
                        "r = evaluate([{'response': 'a b', 'ground_truth': 'a'}], metrics='f1_score', store=False)\n"
                        "assert r.metrics['f1_score']['mean'] is not None")
    assert "assay.models.limiter" not in mods and "assay.models.limited" not in mods


def test_the_circuit_breaker_still_stops_a_run():
    from assay.engine.run import circuit_open
    from assay.models.limiter import CircuitOpen

    assert circuit_open() is CircuitOpen
