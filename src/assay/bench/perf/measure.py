"""From stamped exchanges to figures: one request's timings and tokens, one point's statistics,
and the verdict on the instrument (see docs/bench.md for every name).

Per request (:func:`measure`): TTFT = first event carrying content or reasoning − send;
TTFAT = first event carrying answer content − send (differs when a model thinks first);
E2E = last such event − send; ITL = every gap between consecutive token-carrying events;
TPOT = (E2E − TTFT) / (output tokens − 1); GTPS = output tokens / E2E; TTPS = (input + output
tokens) / E2E. A non-streamed answer has no observable TTFT: it is ``None`` and said so.

Per point (:func:`summarize`): mean, P50, P90, P95, P99, min, max of each figure over the
requests that completed, with the standard error of the mean and 95% intervals (see
:func:`distribution`: too few values give no interval, not one of zero width); failures by
cause, left out of the percentiles; throughputs over the point's duration; goodput and SLO
attainment; the validity verdict (:func:`verdict`: failures above :data:`MAX_FAILURE_RATE` make a
point not valid).

Token counts (:func:`finish`): a server's usage is taken only when it is a plausible count (not
negative, not far beyond what was asked and received); otherwise the request falls back to the
tokenizer's count and says why. A request's *input* tokens are its prompt's count by the run's
tokenizer, streamed or not (a server's own count, which includes its chat template and is often
missing from streams, is kept beside it as ``usage``).
"""

from __future__ import annotations

import math
from collections import Counter as Tally
from typing import Any

import numpy as np
import orjson

from assay.bench.perf.figures import PER_REQUEST
from assay.bench.perf.stream import Exchange, decode
from assay.stats import confidence_interval, quantile_intervals

QS = (50, 90, 95, 99)

# The instrument's error budget: a point is invalid when the client's own delays reach this
# share of the median TTFT (or this many seconds, whichever is larger).
LAG_SHARE, LAG_FLOOR = 0.05, 0.010
CPU_SATURATED = 0.90
CONCURRENCY_SHORTFALL = 0.05    # closed loop: share of the time a worker sat between requests
# Failures: a point where more than this share of the requests sent failed is not valid (the ones
# that fail are seldom a random share: often the slow ones, so the rest's figures are biased).
MAX_FAILURE_RATE = 0.05
# A point stops sending once this many requests have failed and none has completed.
STOP_AFTER_FAILURES = 3
# Intervals: fewer values than this give "too few", not an interval; below T_INTERVAL_BELOW the
# mean's interval is Student's t (mean ± t(0.975, n-1)·s/√n), above it the bootstrap.
MIN_INTERVAL_N = 3
T_INTERVAL_BELOW = 30
# A server's usage count above this many times what it could be (plus a margin) is not a count.
USAGE_SLACK, USAGE_MARGIN = 2, 16


def measure(ex: Exchange, *, stream: bool, scheduled: float | None = None) -> dict[str, Any]:  # noqa: C901
    """One request's record (times relative to its send, in seconds)."""
    rec: dict[str, Any] = {"scheduled": scheduled, "sent": ex.sent, "status": "ok", "http_status": None,
                           "error": None, "ttft": None, "ttfat": None, "e2e": None, "itl": [], "chunks": 0,
                           "text": "", "usage": None}
    try:
        d = decode(ex)
    except ValueError as exc:
        rec.update(status="bad answer", error=str(exc)[:300])
        return rec
    rec["http_status"] = d.status or None
    if ex.error and not (ex.error == "stream cut" and d.ended):
        rec.update(status=ex.error, error=ex.detail[:300] or None)
        if d.status and d.status >= 400:
            rec["status"] = f"http {d.status}"
        elif ex.error == "stream cut" and not d.status:
            rec["status"] = "connection closed"
        if ex.error not in ("stream cut", "stall", "timeout") or not d.events:
            return rec
    elif d.status >= 400 or d.status == 0:
        rec.update(status=f"http {d.status}" if d.status else "bad answer",
                   error=d.body[:300].decode("utf-8", "replace") or None)
        return rec
    times: list[float] = []
    first_answer: float | None = None
    text: list[str] = []
    for t, data in d.events:
        if data == b"[DONE]":
            continue
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            rec.update(status="bad answer", error=f"an event is not JSON: {data[:120]!r}")
            return rec
        if not isinstance(obj, dict):
            continue
        if obj.get("error"):
            rec.update(status="error event", error=str(obj["error"])[:300])
            return rec
        if isinstance(obj.get("usage"), dict):
            rec["usage"] = obj["usage"]
        for ch in obj.get("choices") or ():
            if not isinstance(ch, dict):
                continue
            part = ch.get("delta") if stream else ch.get("message")
            part = part if isinstance(part, dict) else {}
            content = part.get("content") or ch.get("text") or ""
            reasoning = part.get("reasoning_content") or part.get("reasoning") or ""
            if not isinstance(content, str):
                content = ""
            if not isinstance(reasoning, str):
                reasoning = ""
            if content or reasoning:
                times.append(t)
                text.append(reasoning + content)
                if content and first_answer is None:
                    first_answer = t
    rec["text"] = "".join(text)
    rec["chunks"] = len(times)
    if ex.error:       # a stream that stalled or was cut after some tokens: kept for the record only
        return rec
    if not times:
        rec.update(status="empty answer", error="no content in the answer")
        return rec
    s = ex.sent
    rec["e2e"] = times[-1] - s
    if stream:
        rec["ttft"] = times[0] - s
        rec["ttfat"] = first_answer - s if first_answer is not None else None
        rec["itl"] = [b - a for a, b in zip(times, times[1:])]
    return rec


def cached_tokens(usage: object) -> int | None:
    """The cached prompt tokens a server's usage reports (OpenAI's ``prompt_tokens_details.cached_tokens``), or None."""
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    n = details.get("cached_tokens") if isinstance(details, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None


def finish(rec: dict[str, Any], *, prompt_tokens: int, model_count: int | None, bundled_count: int | None,
           asked_output: int | None = None, prompt_source: str | None = None) -> None:
    """Settle a completed request's token counts and the figures that need them.

    ``output_tokens`` keeps the three counts: ``usage`` (the server's, when plausible), ``client``
    (a tokenizer on the text: the server's own when ``model_count`` is given, else the bundled one)
    and ``chunks``; ``used`` is the server's usage, else the model tokenizer's count, else the chunk
    count. ``input_tokens.used`` is the prompt's count (``prompt_source`` says by which tokenizer),
    the same streamed or not; the server's count is ``input_tokens.usage``. A usage value that is
    not a plausible count is left out and said why (``usage_rejected``); ``input_tokens.cached`` is
    the prompt's part the server says it found cached (:func:`cached_tokens`, at most its prompt count).
    """
    usage = rec.pop("usage", None) or {}
    chunks = rec["chunks"]
    seen = max(asked_output or 0, chunks, model_count or 0, bundled_count or 0)
    u_out, out_why = _usage_count(usage.get("completion_tokens"), "completion_tokens",
                                  USAGE_SLACK * seen + USAGE_MARGIN)
    u_in, in_why = _usage_count(usage.get("prompt_tokens"), "prompt_tokens",
                                USAGE_SLACK * 2 * prompt_tokens + 4096)
    if u_out is not None:
        used, source = u_out, "server"
    elif model_count is not None:
        used, source = model_count, "model tokenizer"
    else:
        used, source = chunks, "chunks"
    client = model_count if model_count is not None else bundled_count
    rec["output_tokens"] = {"used": used, "from": source, "usage": u_out, "client": client,
                            "client_is_model": model_count is not None, "chunks": chunks, "usage_rejected": out_why}
    cached = cached_tokens(usage)
    rec["input_tokens"] = {"used": prompt_tokens, "from": f"prompt ({prompt_source})" if prompt_source else "prompt",
                           "usage": u_in, "prompt": prompt_tokens, "usage_rejected": in_why,
                           "cached": cached if cached is not None and u_in is not None and cached <= u_in else None}
    rec["disagree"] = _disagree(u_out, model_count, chunks)
    if rec["status"] != "ok":
        return
    e2e, ttft = rec["e2e"], rec["ttft"]
    out_n, in_n = used, prompt_tokens
    rec["tpot"] = (e2e - ttft) / (out_n - 1) if ttft is not None and out_n > 1 else None
    rec["gtps"] = out_n / e2e if e2e > 0 else None
    rec["ttps"] = (in_n + out_n) / e2e if e2e > 0 else None
    sched = rec.get("scheduled")
    if sched is not None:
        rec["ttft_sched"] = rec["sent"] + ttft - sched if ttft is not None else None
        rec["e2e_sched"] = rec["sent"] + e2e - sched


def _usage_count(v: Any, name: str, ceiling: int) -> tuple[int | None, str | None]:
    """A server's usage count if it is one (an integer from 0 to ``ceiling``), else ``(None, why)``."""
    if v is None:
        return None, None
    if isinstance(v, bool) or not isinstance(v, int):
        return None, f"server usage {name} {str(v)[:40]!r} is not an integer"
    if v < 0:
        return None, f"server usage {name} {v} is negative"
    if v > ceiling:
        return None, f"server usage {name} {v} is more than {ceiling:,}, beyond what this request could hold"
    return v, None


def _disagree(usage: int | None, model: int | None, chunks: int) -> str | None:
    """Why the output counts do not agree, or None. Re-tokenising a text may differ from the
    generated ids by a token or two (merges across chunk boundaries), hence the tolerance."""
    tol = lambda a: max(2, round(0.02 * a))  # noqa: E731
    if usage is not None and model is not None and abs(usage - model) > tol(usage):
        return f"server usage {usage} vs model tokenizer {model}"
    ref = usage if usage is not None else model
    if ref is not None and chunks > ref + tol(ref):
        return f"{chunks} token chunks but {ref} tokens"
    return None


def distribution(v: np.ndarray, *, groups: np.ndarray | None = None, seed: int = 0) -> dict[str, Any] | None:
    """A figure's count, mean, standard error, percentiles and extremes, with 95% intervals.

    The mean's interval: none ("too few") below :data:`MIN_INTERVAL_N` values (or groups), Student's
    t below :data:`T_INTERVAL_BELOW`, the bootstrap above (grouped values: a cluster bootstrap, whose
    spread is their standard error). A percentile's interval is given only where ``n`` values can
    hold a distribution-free 95% interval of it at all (:func:`min_n_for_percentile`: 6 values for
    P50, 29 for P90, 59 for P95, 299 for P99); elsewhere it is ``None``, "too few"."""
    v = np.asarray(v, dtype=np.float64)
    n = len(v)
    if n == 0:
        return None
    pct = np.percentile(v, QS)
    lo, hi, how, se = _mean_interval(v, groups, seed)
    d: dict[str, Any] = {"n": int(n), "mean": float(v.mean()), "se": se}
    d.update({f"p{q}": float(x) for q, x in zip(QS, pct)})
    d.update(min=float(v.min()), max=float(v.max()))
    few_groups = groups is not None and len(np.unique(groups)) < MIN_INTERVAL_N
    ok_q = [q for q in QS if n >= min_n_for_percentile(q) and not few_groups]
    qci, qhow = quantile_intervals(v, ok_q, groups=groups, seed=seed) if ok_q and n > 1 else (np.empty((0, 2)), "")
    got = {q: [float(a), float(b)] for q, (a, b) in zip(ok_q, qci)}
    d["ci"] = {"mean": None if lo is None else [lo, hi], **{f"p{q}": got.get(q) for q in QS}}
    too_few = [f"p{q}" for q in QS if q not in got]
    pmeth = qhow or "too few"
    if too_few and got:
        pmeth += f"; too few values for an interval of {', '.join(too_few)}"
    d["ci_method"] = {"mean": how, "percentiles": pmeth,
                      **{f"p{q}": f"too few (an interval of P{q} needs {min_n_for_percentile(q)} values)"
                         for q in QS if q not in got}}
    return d


def min_n_for_percentile(q: float) -> int:
    """The fewest values whose smallest and largest bound the ``q`` percentile with 95% confidence:
    ``1 - p**n - (1-p)**n >= 0.95`` with ``p = q/100``."""
    p = q / 100
    n = 2
    while 1 - p ** n - (1 - p) ** n < 0.95:
        n += 1
    return n


def t_interval(v: np.ndarray) -> tuple[float, float, float]:
    """Student's t 95% interval of the mean of ``v`` (at least 2 values) and its standard error."""
    from scipy.stats import t as student_t

    n = len(v)
    m, se = float(v.mean()), float(v.std(ddof=1)) / math.sqrt(n)
    half = float(student_t.ppf(0.975, n - 1)) * se
    return m - half, m + half, se


def _mean_interval(v: np.ndarray, groups: np.ndarray | None, seed: int
                   ) -> tuple[float | None, float | None, str, float | None]:
    n = len(v)
    if groups is not None:
        g = len(np.unique(groups))
        if g < MIN_INTERVAL_N:
            return None, None, f"too few (values from {g} request(s); an interval needs {MIN_INTERVAL_N})", None
        return _group_mean_ci(v, groups, seed)
    se = float(v.std(ddof=1)) / math.sqrt(n) if n > 1 else None
    if n < MIN_INTERVAL_N:
        return None, None, f"too few (n={n}; an interval needs {MIN_INTERVAL_N})", se
    if n < T_INTERVAL_BELOW:
        lo, hi, se = t_interval(v)
        return lo, hi, f"t (n={n})", se
    lo, hi, how = confidence_interval(v, seed=seed)
    return lo, hi, how, se


def _group_mean_ci(v: np.ndarray, groups: np.ndarray, seed: int) -> tuple[float, float, str, float]:
    """Interval of the pooled mean when values come in groups: resample groups (sums and sizes);
    the spread of the resampled means is the standard error."""
    _, inv = np.unique(groups, return_inverse=True)
    sums = np.bincount(inv, weights=v)
    sizes = np.bincount(inv).astype(np.float64)
    g = len(sums)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, g, size=(1000, g))
    means = sums[pick].sum(axis=1) / sizes[pick].sum(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi), "cluster bootstrap", float(means.std(ddof=1))


def _lag(v: list[float] | np.ndarray) -> dict[str, float] | None:
    v = np.asarray(v, dtype=np.float64)
    if len(v) == 0:
        return None
    p50, p99 = np.percentile(v, [50, 99])
    return {"p50": float(p50) * 1e3, "p99": float(p99) * 1e3, "max": float(v.max()) * 1e3}


def summarize(records: list[dict[str, Any]], *, duration: float, concurrency: int | None, rate: float | None,
              slo: dict[str, float] | None, client: dict[str, Any], seed: int = 0,
              stopped: str | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One point's summary (docs/bench.md) and its sample arrays (for the store and comparisons);
    ``stopped``: why the point ended before its requests were all sent (it is then not valid)."""
    ok = [r for r in records if r["status"] == "ok"]
    causes = Tally(r["status"] for r in records if r["status"] != "ok")
    samples: dict[str, np.ndarray] = {}
    metrics: dict[str, Any] = {}
    for name in PER_REQUEST:
        vals = [r.get(name) for r in ok]
        arr = np.array([x for x in vals if x is not None], dtype=np.float64)
        if len(arr):
            samples[name] = arr
            metrics[name] = distribution(arr, seed=seed)
    if "ttfat" in metrics and "ttft" in metrics and np.allclose(samples["ttfat"], samples["ttft"]):
        del metrics["ttfat"], samples["ttfat"]       # no thinking: the same figure twice
    gaps = [r["itl"] for r in ok if r["itl"]]
    if gaps:
        itl = np.concatenate([np.asarray(g, dtype=np.float64) for g in gaps])
        groups = np.repeat(np.arange(len(gaps)), [len(g) for g in gaps])
        samples["itl"] = itl
        metrics["itl"] = distribution(itl, groups=groups, seed=seed)
    out_tokens = sum(r["output_tokens"]["used"] for r in records if "output_tokens" in r and r["status"] == "ok")
    in_tokens = sum(r["input_tokens"]["used"] for r in records if "input_tokens" in r and r["status"] == "ok")
    dur = max(duration, 1e-9)
    disagree = [r for r in records if r.get("disagree")]
    froms = Tally(r["output_tokens"]["from"] for r in ok)
    in_froms = Tally(r["input_tokens"].get("from", "prompt") for r in ok)
    server_in = [r["input_tokens"]["usage"] for r in ok if r["input_tokens"].get("usage") is not None]
    rejected = [r for r in records if "output_tokens" in r and (r["output_tokens"].get("usage_rejected")
                                                                or r["input_tokens"].get("usage_rejected"))]
    why = Tally(w for r in rejected for w in (r["output_tokens"].get("usage_rejected"),
                                              r["input_tokens"].get("usage_rejected")) if w)
    point: dict[str, Any] = {
        "concurrency": concurrency, "rate": rate, "duration_s": duration,
        "requests": {"sent": len(records), "ok": len(ok), "failed": len(records) - len(ok),
                     "failures": dict(sorted(causes.items()))},
        "request_throughput": len(ok) / dur,
        "output_throughput": out_tokens / dur,
        "total_token_throughput": (in_tokens + out_tokens) / dur,
        "metrics": metrics,
        "latency_index": metrics["ttft"]["mean"] if "ttft" in metrics else None,
        "throughput_index": metrics["gtps"]["mean"] if "gtps" in metrics else None,
        "tokens": {"input_total": in_tokens, "output_total": out_tokens,
                   "input_mean": in_tokens / len(ok) if ok else None,
                   "output_mean": out_tokens / len(ok) if ok else None,
                   "usage_from": ", ".join(f"{k} ({v})" for k, v in froms.most_common()) or None,
                   "input_from": ", ".join(k for k, _ in in_froms.most_common()) or None,
                   "input_server_mean": sum(server_in) / len(server_in) if server_in else None,
                   "usage_rejected": len(rejected), "usage_rejected_why": [w for w, _ in why.most_common(5)],
                   "disagreements": len(disagree),
                   "examples": [{"i": r["i"], "why": r["disagree"]} for r in disagree[:5]]},
        "slo": _slo(records, ok, slo, dur) if slo else None,
    }
    if stopped:
        point["stopped"] = stopped
    point["validity"] = verdict(point, client)
    return point, samples


def _slo(records: list[dict[str, Any]], ok: list[dict[str, Any]], slo: dict[str, float], dur: float) -> dict[str, Any]:
    """Attainment = share of all requests sent that completed within every SLO; goodput = those per second.
    ``itl`` is held against each request's mean inter-token gap; ``ttft``, ``tpot``, ``e2e`` as measured."""
    def meets(r: dict[str, Any]) -> bool:
        for k, limit in slo.items():
            if k == "itl":
                v = float(np.mean(r["itl"])) if r["itl"] else None
            else:
                v = r.get(k)
            if v is None or v > limit:
                return False
        return True

    good = sum(1 for r in ok if meets(r))
    return {**slo, "attainment": good / len(records) if records else None, "goodput": good / dur}


def verdict(point: dict[str, Any], client: dict[str, Any]) -> dict[str, Any]:
    """Whether the client, not the server, set the figures (see the module constants)."""
    reasons: list[str] = []
    m = point["metrics"]
    ttft50 = m["ttft"]["p50"] if "ttft" in m else (m["e2e"]["p50"] if "e2e" in m else 0.0)
    budget = max(LAG_FLOOR, LAG_SHARE * ttft50)
    sched = _lag(client.get("schedule_lag") or [])
    turn = _lag(client.get("turnaround") or [])
    loop = _lag(client.get("loop_lag") or [])
    cpu = client.get("cpu_s")
    dur = point["duration_s"]
    if cpu is not None and dur > 0 and cpu / dur >= CPU_SATURATED:
        reasons.append(f"the client used {cpu / dur:.0%} of a CPU core: it, not the server, was the bottleneck")
    if sched and sched["p99"] / 1e3 > budget:
        reasons.append(f"requests left {sched['p99']:.1f} ms after their scheduled time at P99 "
                       f"(budget {budget * 1e3:.1f} ms)")
    if turn and "e2e" in m:
        # a closed loop holds c requests in flight only while no worker is between two requests
        t_mean = float(np.mean(client["turnaround"]))
        lost = t_mean / (m["e2e"]["mean"] + t_mean)
        if lost > CONCURRENCY_SHORTFALL:
            reasons.append(f"the client held {1 - lost:.0%} of the concurrency asked: it took {turn['p50']:.1f} ms "
                           f"(P99 {turn['p99']:.1f} ms) to send each next request")
    if client.get("clock") == "user" and loop and loop["p99"] / 1e3 > budget:
        reasons.append(f"arrival times were stamped by an event loop that lagged {loop['p99']:.1f} ms at P99 "
                       f"(budget {budget * 1e3:.1f} ms)")
    drift = client.get("clock_drift_ms")
    if drift is not None and drift > 1.0:
        reasons.append(f"the system clock stepped {drift:.1f} ms during the run")
    failed, rate, notes = _failures(point["requests"], reasons)
    if point.get("stopped"):
        reasons.append(str(point["stopped"]))
    tokens = client.get("tokens") or 0
    return {"valid": not reasons, "reasons": reasons, "failed": failed, "failure_rate": rate, "notes": notes,
            "clock": client.get("clock"),
            "kernel_stamped": client.get("kernel_share"),
            "schedule_lag_ms": sched, "turnaround_ms": turn, "loop_lag_ms": loop,
            "client_cpu_s": cpu, "cpu_per_token_us": (cpu / tokens * 1e6) if cpu is not None and tokens else None}


def _failures(req: dict[str, Any], reasons: list[str]) -> tuple[int, float | None, list[str]]:
    """The failed requests, their share of those sent, and what the verdict says of them: a reason
    (no request completed, or more than :data:`MAX_FAILURE_RATE` failed) or a note."""
    ok = int(req.get("ok") or 0)
    failed = int(req.get("failed") or 0)
    sent = int(req.get("sent") or ok + failed)
    causes = ", ".join(f"{k} {v}" for k, v in sorted((req.get("failures") or {}).items()) if v)
    rate = failed / sent if sent else None
    notes: list[str] = []
    if ok == 0:
        reasons.append("no request completed" + (f" ({causes})" if causes else ""))
    elif rate is not None and rate > MAX_FAILURE_RATE:
        reasons.append(f"{failed} of {sent} requests failed ({rate:.1%}: {causes}), more than the "
                       f"{MAX_FAILURE_RATE:.0%} a valid point allows; the figures are of the ones that completed")
    elif failed:
        notes.append(f"{failed} of {sent} requests failed ({rate:.1%}: {causes}); their latencies are left out")
    return failed, rate, notes
