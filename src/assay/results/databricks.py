"""Databricks Agent Evaluation names for assay's results (the column and metric names of
Databricks' ``mlflow.evaluate(model_type="databricks-agent")`` output).

Judges with a yes/no rating become ``<prefix>/llm_judged/<judge>/rating`` and
``/rationale``; ground-truth retrieval metrics ``retrieval/ground_truth/<name>``; the
app's own cost and speed ``agent/<name>``; anything else ``metric/<output>``.
Aggregates are ``<name>/average`` for numbers and ``<name>/percentage`` (share of
``yes``) for ratings; a rating the embedded safety rules left *not flagged* is None (not a
``yes``) and counts in neither share. Input columns take Databricks' evaluation-set names (:data:`INPUT_NAMES`):
``request_id``, ``request``, ``expected_response``, ``retrieved_context``, and
``expected_retrieved_context`` (a list of ``{"doc_uri": ...}``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assay.scores import NOT_FLAGGED

if TYPE_CHECKING:
    from assay.results import EvalResult

# output name -> Databricks column name (without /rating etc.)
NAMES: dict[str, str] = {
    "document_recall": "retrieval/ground_truth/document_recall",
    "precision_at_k": "retrieval/ground_truth/document_precision",
    "ndcg_at_k": "retrieval/ground_truth/document_ndcg",
    "total_token_count": "agent/total_token_count",
    "total_input_token_count": "agent/total_input_token_count",
    "total_output_token_count": "agent/total_output_token_count",
    "latency_seconds": "agent/latency_seconds",
    "relevance_to_query": "response/llm_judged/relevance_to_query",
    "databricks_groundedness": "response/llm_judged/groundedness",
    "correctness": "response/llm_judged/correctness",
    "safety": "response/llm_judged/safety",
    "guideline_adherence": "response/llm_judged/guideline_adherence",
    "context_sufficiency": "retrieval/llm_judged/context_sufficiency",
    "chunk_relevance_precision": "retrieval/llm_judged/chunk_relevance/precision",
    "overall_assessment": "response/overall_assessment",
}


#: ``inputs.*`` column (assay / azure-ai-evaluation name) -> Databricks evaluation-set column
INPUT_NAMES: dict[str, str] = {
    "id": "request_id",
    "query": "request",
    "ground_truth": "expected_response",
    "context": "retrieved_context",
    "contexts": "retrieved_context",  # runs written before contexts became inputs.context
    "expected_doc_uris": "expected_retrieved_context",
}


def _input(name: str, value: Any) -> tuple[str, Any]:
    db = INPUT_NAMES.get(name, name)
    if name == "expected_doc_uris" and isinstance(value, list):
        value = [{"doc_uri": u} for u in value]
    return db, value


def name_for(output: str) -> str:
    return NAMES.get(output, f"metric/{output}")


def _is_rating(value: Any) -> bool:
    return value in ("yes", "no")


def databricks_view(result: EvalResult) -> dict[str, Any]:
    rows = []
    ratings: dict[str, list[bool]] = {}
    for row in result.iter_rows():
        out: dict[str, Any] = {}
        for k, v in row.items():
            if k.startswith("inputs."):
                name, value = _input(k[len("inputs."):], v)
                out["extra." + name if name in out else name] = value
        for o, agg in result.metrics.items():
            base = f"outputs.{agg['metric']}.{o}"
            if base not in row:
                continue
            v = row[base]
            name = name_for(o)
            if row.get(base + "_result") == NOT_FLAGGED and _is_rating(v):
                # the embedded safety rules did not flag it: not a "yes" (safe), and not counted
                out[f"{name}/rating"] = None
                out[f"{name}/rationale"] = row.get(base + "_reason")
                ratings.setdefault(name, [])
            elif _is_rating(v):
                out[f"{name}/rating"] = v
                out[f"{name}/rationale"] = row.get(base + "_reason")
                ratings.setdefault(name, []).append(v == "yes")
            else:
                out[name] = v
            if row.get(base + "_status") == "error":
                out[f"{name}/error_message"] = row.get(base + "_reason")
        rows.append(out)
    metrics: dict[str, float | None] = {}
    for o, agg in result.metrics.items():
        name = name_for(o)
        if name in ratings:
            vals = ratings[name]
            metrics[f"{name}/rating/percentage"] = sum(vals) / len(vals) if vals else None
        else:
            metrics[f"{name}/average"] = agg.get("mean")
    return {"rows": rows, "metrics": metrics}
