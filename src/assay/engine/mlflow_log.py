"""An evaluation logged as an MLflow run (``assay eval --mlflow URI``).

The run goes to the experiment named by the run's name (``--name``; ``assay`` without one) at
the tracking URI: a file store (``file:./mlruns`` or a folder) or a tracking server
(``http://HOST:5000``). It gets

* params: the metrics, the thresholds (``threshold.<metric>``), the judge and where it came
  from, the data's source, format and fingerprint (sha256, the one the store resumes by), the
  target;
* metrics: each output's aggregates (``<output>.mean``, ``.median``, ``.p90``, ``.pass_rate``,
  ``.defect_rate``, ``.ci95_low`` / ``.ci95_high``, the counts), the row counts, and the
  judge's calls, tokens and cost;
* artifacts: ``summary.json`` (aggregates and run summary, as ``--out`` writes it),
  ``rows.jsonl`` (every row with its scores and reasons) and, for runs of at most
  :data:`TABLE_ROWS` rows, ``rows_table.json``, the same rows as a table MLflow's UI shows;
* tags: ``assay.run_id`` (the run in assay's store), ``assay.store``, ``assay.version``.

Only ``mlflow-skinny`` is needed (``pip install 'assay[mlflow]'``). MLflow 3 refuses a file
store unless ``MLFLOW_ALLOW_FILE_STORE`` is set; a URI that names one is taken as that choice,
so this process sets it (unless it is set already). A database URI (``sqlite:///mlflow.db``)
needs the full ``mlflow`` package, which the message says.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assay.errors import AssayError

__all__ = ["DEFAULT_EXPERIMENT", "MlflowLog", "TABLE_ROWS", "log_to_mlflow", "mlflow_metrics", "mlflow_params"]

DEFAULT_EXPERIMENT = "assay"
TABLE_ROWS = 10_000     # rows_table.json (a table held in memory by MLflow's client) up to this many rows
FILE_STORE_ENV = "MLFLOW_ALLOW_FILE_STORE"
CONNECT_TIMEOUT = 10.0  # seconds for a tracking server to accept a connection
INSTALL = "pip install 'assay[mlflow]' (mlflow-skinny)"

AGG_FIGURES = ("mean", "median", "p90", "pass_rate", "defect_rate", "ci95_low", "ci95_high",
               "conversation_mean", "conversation_defect_rate", "evaluated", "skipped", "errored", "passed", "failed")
RUN_COUNTS = ("rows_read", "rows_evaluated", "rows_skipped", "rows_errored", "target_errors", "duration_s")
JUDGE_FIGURES = ("calls", "cache_hits", "errors", "prompt_tokens", "completion_tokens", "cost_usd")
_KEY_BAD = re.compile(r"[^\w\-. /:]")


def _key(name: str) -> str:
    """``name`` as an MLflow key (letters, digits, ``_ - . / :`` and spaces; 250 characters)."""
    return _KEY_BAD.sub("_", name)[:250]


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def mlflow_params(run: dict[str, Any], fingerprint: str | None, limit: int = 6000) -> dict[str, str]:
    """The run's parameters as MLflow params (values cut at ``limit`` characters)."""
    p: dict[str, Any] = {
        "metrics": ",".join(run.get("metrics") or []),
        "judge": run.get("judge") or "none",
        "judge_source": run.get("judge_source") or "none",
        "data.source": run.get("source"),
        "data.format": run.get("format"),
        "data.fingerprint": fingerprint or "unknown",
        "target": run.get("target") or "none",
        "assay_version": run.get("assay_version"),
    }
    for m, t in (run.get("thresholds") or {}).items():
        p[f"threshold.{m}"] = "none" if t is None else t
    out = {}
    for k, v in p.items():
        if v is None:
            continue
        text = str(v)
        out[_key(k)] = text if len(text) <= limit else text[:limit - 1] + "…"
    return out


def mlflow_metrics(aggregates: dict[str, dict[str, Any]], run: dict[str, Any]) -> dict[str, float]:
    """The aggregates and counts as MLflow metrics (finite numbers only)."""
    out: dict[str, float] = {}

    def put(name: str, v: Any) -> None:
        n = _number(v)
        if n is not None:
            out[_key(name)] = n

    for o, agg in aggregates.items():
        for fig in AGG_FIGURES:
            put(f"{o}.{fig}", agg.get(fig))
        for level, rate in (agg.get("defect_rates") or {}).items():
            put(f"{o}.defect_rate.{level}", rate)
    for c in RUN_COUNTS:
        put(c, run.get(c))
    usage = run.get("judge_usage") or run.get("judge_calls") or {}
    if isinstance(usage, dict):
        for fig in JUDGE_FIGURES:
            put(f"judge.{fig}", usage.get(fig))
    return out


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _is_file_store(uri: str) -> bool:
    return uri.startswith("file:") or "://" not in uri


def _probe(uri: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """A tracking server's host must accept a connection: MLflow's client would otherwise retry
    an unreachable one for minutes before saying so."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise AssayError(f"MLflow at {uri}: the port is not a number") from None
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        raise AssayError(f"MLflow at {uri}: cannot connect to {parts.hostname}:{port} "
                         f"({exc.strerror or type(exc).__name__}); is the tracking server running?") from None


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0]


class MlflowLog:
    """A tracking URI and an experiment, opened (and checked) before the run starts."""

    def __init__(self, client: Any, uri: str, experiment: str, experiment_id: str):
        self.client, self.uri, self.experiment, self.experiment_id = client, uri, experiment, experiment_id

    @classmethod
    def open(cls, uri: str, experiment: str | None = None) -> MlflowLog:
        """Connect to ``uri`` and find or create the experiment; :class:`AssayError` with one
        line when MLflow is not installed, the URI is not usable or the experiment was deleted."""
        uri = (uri or "").strip()
        if not uri:
            raise AssayError("--mlflow needs a tracking URI, e.g. file:./mlruns or http://HOST:5000")
        experiment = (experiment or "").strip() or DEFAULT_EXPERIMENT
        try:
            from mlflow import MlflowClient
        except ImportError:
            raise AssayError(f"--mlflow needs MLflow: {INSTALL}") from None
        if _is_file_store(uri):
            os.environ.setdefault(FILE_STORE_ENV, "true")   # naming a file store is choosing it
        _probe(uri)
        try:
            client = MlflowClient(tracking_uri=uri)
            exp = client.get_experiment_by_name(experiment)
            if exp is not None and exp.lifecycle_stage == "deleted":
                raise AssayError(f"MLflow at {uri}: the experiment {experiment!r} is deleted; restore it "
                                 "or choose another --name")
            eid = exp.experiment_id if exp is not None else client.create_experiment(experiment)
        except AssayError:
            raise
        except ImportError as exc:
            raise AssayError(f"MLflow at {uri}: {_first_line(exc)}; with mlflow-skinny, log to a file store "
                             "(file:./mlruns) or a tracking server (http://HOST:5000); a database URI "
                             "needs the full mlflow package") from None
        except Exception as exc:  # MlflowException, connection errors: one line, no traceback
            raise AssayError(f"MLflow at {uri}: {_first_line(exc)}") from None
        return cls(client, uri, experiment, eid)

    def log(self, result: Any, *, data: Any = None, store: Any = None) -> str:
        """Log ``result`` (an :class:`~assay.results.EvalResult`) as a finished MLflow run; its id.
        ``data`` and ``store``: what the run was made from, for the data's fingerprint."""
        from mlflow.entities import Metric, Param, RunTag

        try:
            from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH as limit
        except ImportError:
            limit = 500
        run = result.run
        started = run.get("started_at") or time.time()
        tags = {"assay.run_id": run.get("run_id"), "assay.store": run.get("store"),
                "assay.version": run.get("assay_version"), "mlflow.source.name": "assay eval"}
        try:
            mrun = self.client.create_run(self.experiment_id, start_time=int(started * 1000),
                                          run_name=run.get("run_id") or None,
                                          tags={k: str(v) for k, v in tags.items() if v is not None})
        except Exception as exc:
            raise AssayError(f"MLflow at {self.uri}: cannot start a run: {_first_line(exc)}") from None
        rid = mrun.info.run_id
        try:
            now = int(time.time() * 1000)
            params = [Param(k, v) for k, v in mlflow_params(run, run_fingerprint(run, data, store), limit).items()]
            metrics = [Metric(k, v, now, 0) for k, v in mlflow_metrics(result.metrics, run).items()]
            for batch in _batches(params, 100):
                self.client.log_batch(rid, params=batch)
            for batch in _batches(metrics, 1000):
                self.client.log_batch(rid, metrics=batch)
            self._artifacts(rid, result)
            self.client.log_batch(rid, tags=[RunTag("assay.rows", str(run.get("rows_evaluated", 0)))])
            self.client.set_terminated(rid, "FINISHED")
        except Exception as exc:
            try:
                self.client.set_terminated(rid, "FAILED")
            except Exception:
                pass
            raise AssayError(f"MLflow at {self.uri}: logging run {rid} failed: {_first_line(exc)}") from None
        return rid

    def _artifacts(self, rid: str, result: Any) -> None:
        from assay.results import ROWS_FILE, SUMMARY_FILE

        with tempfile.TemporaryDirectory(prefix="assay-mlflow-") as d:
            summary = Path(d) / SUMMARY_FILE
            result.write_summary(summary)
            self.client.log_artifact(rid, str(summary))
            rows = result.rows_path if result.rows_path is not None and Path(result.rows_path).is_file() \
                else result.to_jsonl(Path(d) / ROWS_FILE)
            self.client.log_artifact(rid, str(rows))
            if (result.run.get("rows_evaluated") or 0) <= TABLE_ROWS:
                self.client.log_table(rid, data=_table(result), artifact_file="rows_table.json")


def _table(result: Any) -> Any:
    """The rows as a DataFrame whose nested values (contexts, properties) are JSON text."""
    import json

    import pandas as pd

    df = pd.DataFrame(list(result.iter_rows()))
    for col in df.columns:
        if df[col].map(lambda v: isinstance(v, (list, dict))).any():
            df[col] = df[col].map(lambda v: v if v is None or not isinstance(v, (list, dict))
                                  else json.dumps(v, ensure_ascii=False))
    return df


def run_fingerprint(run: dict[str, Any], data: Any, store: Any) -> str | None:
    """The data's fingerprint: the one the store keeps for the run, else one of a regular file
    or folder (never of a pipe or stream, which cannot be read twice)."""
    if run.get("run_id"):
        from assay.store import open_store

        try:
            st = open_store(store)
            if st is not None:
                return st.get_run(run["run_id"]).get("data_fingerprint")
        except AssayError:
            pass
    if isinstance(data, (str, Path)) and (Path(data).is_file() or Path(data).is_dir()):
        from assay.store.fingerprint import data_fingerprint

        return data_fingerprint(data)
    return None


def log_to_mlflow(result: Any, uri: str, experiment: str | None = None, *, data: Any = None,
                  store: Any = None) -> str:
    """Log an :class:`~assay.results.EvalResult` to MLflow at ``uri`` under ``experiment``
    (default: the run's name, else ``assay``); the MLflow run's id."""
    return MlflowLog.open(uri, experiment or result.run.get("name")).log(result, data=data, store=store)
