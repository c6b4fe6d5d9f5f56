"""azure-ai-evaluation's names for assay's results: the rows and ``metrics`` of its ``evaluate()``.

assay's stored rows already use Azure's eight columns per metric output
(``outputs.<metric>.<key>``, ``_score``, ``_passed``, ``_result``, ``_reason``, ``_status``,
``_threshold``, ``_properties``). The Azure layout differs from them in three places, all
checked against azure-ai-evaluation itself (``benchmarks/roundtrip_azure_columns.py`` and
``tests/fixtures/azure_columns.json``):

* ROUGE (``rouge1`` ... ``rougeL``): Azure's RougeScoreEvaluator reports one output, ``rouge``
  (the F1 score), with precision, recall and F1 with their results, pass flags and thresholds
  in ``rouge_properties`` (``rouge_precision``, ``rouge_recall_result`` ...). assay keeps three
  outputs (``rouge1_precision``, ``rouge1_recall``, ``rouge1_f1_score``); the Azure layout
  folds them into Azure's ``rouge`` columns, so no value is lost.
* ``tool_call_accuracy`` has Azure's older alias column ``gpt_tool_call_accuracy`` too.
* ``metrics`` (the aggregates) are computed as Azure computes them from the rows: the mean
  of each numeric column (``<metric>.<key>``, ``<key>_score``) and of each boolean column
  with no missing value (``<key>_passed``: the pass rate), never of ``_threshold`` or
  ``_result``; ``<metric>.binary_aggregate``, the share of all rows whose ``_result`` is
  ``pass`` (rounded to 2 places); and ``<key>_defect_rate`` for safety metrics.

Input columns take Azure's names (``inputs.context``), for runs stored before that too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.results import EvalResult

#: assay's ROUGE metrics: three outputs each, one ``rouge`` output in Azure
ROUGE_METRICS = ("rouge1", "rouge2", "rouge3", "rouge4", "rouge5", "rougeL")
ROUGE_PARTS = ("precision", "recall", "f1_score")
#: metric -> the extra column Azure writes with the same value (a deprecated alias it keeps)
ALIASES = {"tool_call_accuracy": "gpt_tool_call_accuracy"}


def _rouge_columns(metric: str, row: dict[str, Any]) -> dict[str, Any]:
    """Azure's ``outputs.<metric>.rouge*`` columns from assay's three ROUGE outputs."""
    p = f"outputs.{metric}.{metric}_"
    f1 = p + "f1_score"
    props: dict[str, Any] = {}
    for part in ROUGE_PARTS:
        props[f"rouge_{part}"] = row.get(p + part)
    for suffix in ("_result", "_passed", "_threshold"):
        for part in ROUGE_PARTS:
            props[f"rouge_{part}{suffix}"] = row.get(p + part + suffix)
    own = row.get(f1 + "_properties")
    if isinstance(own, dict):
        props.update({k: v for k, v in own.items() if k not in props})
    q = f"outputs.{metric}.rouge"
    return {q: row.get(f1), q + "_score": row.get(f1 + "_score"), q + "_passed": row.get(f1 + "_passed"),
            q + "_result": row.get(f1 + "_result"), q + "_reason": row.get(f1 + "_reason"),
            q + "_status": row.get(f1 + "_status"), q + "_threshold": row.get(f1 + "_threshold"),
            q + "_properties": props}


def azure_row(row: dict[str, Any]) -> dict[str, Any]:
    """One stored row under azure-ai-evaluation's column names (column order kept)."""
    from assay.results import INPUT_NAMES

    out: dict[str, Any] = {}
    for k, v in row.items():
        if k.startswith("inputs."):
            name = k[len("inputs."):]
            azure = "inputs." + INPUT_NAMES.get(name, name)
            out[azure if azure not in row else k] = v
            continue
        parts = k.split(".", 2)
        if len(parts) == 3 and parts[0] == "outputs":
            metric = parts[1]
            if metric in ROUGE_METRICS and parts[2].startswith(metric + "_"):
                if f"outputs.{metric}.rouge" not in out:
                    out.update(_rouge_columns(metric, row))
                continue
            out[k] = v
            alias = ALIASES.get(metric)
            if alias and parts[2] == metric:
                out[f"outputs.{metric}.{alias}"] = v
            continue
        out[k] = v
    return out


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))


def azure_metrics(rows: Iterable[dict[str, Any]], defect_rates: dict[str, float] | None = None) -> dict[str, float]:  # noqa: C901
    """Azure's ``metrics`` from Azure-layout rows (see the module's docstring)."""
    cols: dict[str, dict[str, Any]] = {}   # column -> {"sum", "n", "bools", "missing", "other", "pass", "first"}
    n_rows = 0
    for row in rows:
        n_rows += 1
        for k, v in row.items():
            if not k.startswith("outputs."):
                continue
            c = cols.setdefault(k, {"sum": 0.0, "n": 0, "bools": 0, "missing": n_rows - 1, "other": False,
                                     "pass": 0})
            if v is None or (isinstance(v, float) and math.isnan(v)):
                c["missing"] += 1
            elif isinstance(v, bool):
                c["bools"] += 1
                c["sum"] += v
                c["n"] += 1
            elif _number(v):
                c["sum"] += v
                c["n"] += 1
            else:
                c["other"] = True
                if v == "pass":
                    c["pass"] += 1
        for k, c in cols.items():  # a column this row lacks counts as missing there
            if k not in row:
                c["missing"] += 1
    flat: dict[str, float] = {}
    binary: dict[str, float] = {}
    for k, c in cols.items():
        metric, key = k[len("outputs."):].split(".", 1)
        if key.endswith("_result"):
            binary[f"{metric}.binary_aggregate"] = round(c["pass"] / n_rows, 2) if n_rows else 0.0
            continue
        if key.endswith("_threshold") or c["other"] or not c["n"]:
            continue
        if c["bools"] and (c["bools"] != c["n"] or c["missing"]):
            continue  # a boolean column with gaps (or mixed with numbers) has no mean in pandas
        flat[f"{metric}.{key}"] = c["sum"] / c["n"]
    flat.update(defect_rates or {})
    flat.update(binary)
    return flat


def azure_view(result: EvalResult) -> dict[str, Any]:
    """``{"rows": [...], "metrics": {...}}`` as azure-ai-evaluation's ``evaluate()`` returns them."""
    rows = [azure_row(r) for r in result.iter_rows()]
    defects = {f"{agg['metric']}.{o}_defect_rate": agg["defect_rate"] for o, agg in result.metrics.items()
               if agg.get("defect_rate") is not None}
    return {"rows": rows, "metrics": azure_metrics(rows, defects)}


def azure_rows(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Stored rows, streamed, under azure-ai-evaluation's column names."""
    for r in rows:
        yield azure_row(r)
