"""The ``assay`` command starts without loading what it does not need (issue 17, item 2).

Each check runs Python in a fresh subprocess and reads ``sys.modules``, so an eager import added
anywhere on the way (``assay/__init__``, ``cli/main``, a command module, the models package, the
metric registry) fails here. No wall time is asserted: ``benchmarks/bench_cli_start.py`` measures it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
# what no command should pay for before it needs it
HEAVY = ("numpy", "pandas", "pyarrow", "sqlalchemy", "pydantic", "jinja2", "orjson", "asyncio", "assay.engine",
         "assay.store", "assay.metrics", "assay.models", "assay.formats", "assay.results", "assay.judges",
         "assay.scale", "assay.ui")


def loaded_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; the modules it left loaded."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    probe = code + "\nimport json, sys\nprint('\\nMODULES=' + json.dumps(sorted(sys.modules)))\n"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.rsplit("MODULES=", 1)[1])


def heavy_in(modules: list[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted({h for h in heavy for m in modules if m == h or m.startswith(h + ".")})


def test_importing_the_cli_loads_nothing_heavy():
    assert heavy_in(loaded_after("import assay.cli.main")) == []


def test_assay_help_loads_no_command_module():
    mods = loaded_after("from assay.cli.main import run\nassert run(['--help']) == 0")
    assert heavy_in(mods) == []
    assert [m for m in mods if m.startswith("assay.cli.")] == ["assay.cli.common", "assay.cli.main"]


def test_import_assay_is_light_and_its_names_load_on_first_use():
    assert heavy_in(loaded_after("import assay")) == []
    mods = loaded_after("import assay\nassert callable(assay.evaluate) and assay.Record and assay.scale\n"
                        "from assay import evaluate, metric, REGISTRY, load\n"
                        "assert set(assay.__all__) <= set(dir(assay))")
    assert "assay.engine.evaluate" in mods and "assay.scale" in mods
    with pytest.raises(AttributeError):
        import assay

        assay.no_such_name  # noqa: B018


def test_a_command_loads_only_its_own_module():
    mods = loaded_after("from assay.cli.main import run\nassert run(['judge', '--help']) == 0")
    assert "assay.cli.judge" in mods
    assert not {"assay.cli.eval", "assay.cli.bench", "assay.cli.store", "assay.cli.simulate"} & set(mods)


def test_the_help_lines_listed_are_the_commands_own():
    """``assay --help`` lists COMMANDS' help lines without importing the modules; they must say
    what the commands' own docstrings say, and every command of those modules must be listed."""
    import typer

    from assay.cli import main

    names = [n for n, _, _ in main.COMMANDS]
    assert len(names) == len(set(names))
    for name, _module, help_line in main.COMMANDS:
        real = main.load_command(name)
        assert real.name == name and (real.short_help or real.help) == help_line, name
    for module in {m for n, m, _ in main.COMMANDS if n not in main.GROUPS}:
        group = typer.main.get_group(__import__(module, fromlist=["app"]).app)
        assert set(group.commands) <= set(names), module


def test_the_top_level_help_lists_every_command():
    from typer.testing import CliRunner

    from assay.cli.main import COMMANDS, app

    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for name, _, help_line in COMMANDS:
        assert f" {name} " in r.output and help_line[:40] in r.output, name


def test_an_unknown_command_is_a_usage_error_with_a_suggestion():
    from assay.cli.main import run

    code = subprocess.run([sys.executable, "-c", "import sys; from assay.cli.main import run; "
                           "sys.exit(run(['evl', 'x.jsonl']))"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    assert code.returncode == 2 and "No such command" in code.stderr and "'eval'" in code.stderr, code.stderr
    assert "Traceback" not in code.stderr
    assert run(["eval", "--help"]) == 0


def test_classic_metrics_load_only_the_module_that_registers_them():
    mods = loaded_after("from assay.metrics.base import resolve\n"
                        "assert [m.name for m in resolve(['f1_score', 'bleu', 'rouge'])][:3] == ['f1_score', 'bleu', 'rouge1']")
    assert "assay.metrics.text.lexical" in mods
    assert not {"assay.metrics.quality", "assay.metrics.safety.harms", "assay.metrics.safety.rules",
                "assay.metrics.agent", "assay.judges"} & set(mods)


def test_a_metric_of_a_later_module_and_an_unknown_name_still_resolve():
    mods = loaded_after("from assay.metrics.base import resolve, REGISTRY, UnknownMetricError\n"
                        "assert resolve(['violence'])[0].name == 'violence'\n"
                        "try:\n    resolve(['no_such_metric'])\nexcept UnknownMetricError as e:\n"
                        "    assert 'no_such_metric' in str(e)\nelse:\n    raise SystemExit('no error')\n")
    assert "assay.metrics.safety.harms" in mods


def test_the_run_summary_aggregations_do_not_compile_the_safety_rules():
    mods = loaded_after("from assay.metrics.aggregations import load_run_aggregations\nload_run_aggregations()")
    assert "assay.metrics.safety.jailbreak" in mods and "assay.metrics.safety.rules" not in mods


def test_one_model_module_does_not_load_every_backend():
    mods = loaded_after("import assay.models.limited\nimport assay.models as m\n"
                        "assert m.resolve and m.LimitedModel and 'resolve' in dir(m)")
    assert "assay.models.roles" in mods
    assert not {"assay.models.local", "assay.models.local_embedder", "assay.models.embedded_embedder"} & set(mods)


def test_the_ray_engine_registers_itself_when_a_run_names_it():
    out = loaded_after("from assay.engine.evaluate import ENGINES, engine_scorer\n"
                       "from assay.errors import AssayError\n"
                       "assert 'ray' not in ENGINES\n"
                       "try:\n    engine_scorer('ray')\nexcept AssayError as e:\n"
                       "    assert 'unknown engine' not in str(e), e\n"
                       "assert 'ray' in ENGINES\n"
                       "try:\n    engine_scorer('spark')\nexcept AssayError as e:\n"
                       "    assert 'local, ray' in str(e), e\n")
    assert "assay.scale" in out


def test_the_pytest_plugin_loads_nothing_heavy():
    """The plugin is loaded by every pytest session where assay is installed."""
    light = tuple(h for h in HEAVY if h != "orjson")        # orjson (one compiled module) writes the cases
    assert heavy_in(loaded_after("import assay.testing.plugin"), light) == []


def test_a_one_row_eval_runs_from_the_lazy_cli(tmp_path):
    row = {"response": "Water boils at 100 degrees.", "ground_truth": "100 degrees Celsius."}
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(row) + "\n")
    proc = subprocess.run([sys.executable, "-m", "assay.cli", "eval", str(data), "--metrics", "f1_score",
                           "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / "out"), "-q"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "f1_score" in json.dumps(summary) and "saved in" in proc.stdout
