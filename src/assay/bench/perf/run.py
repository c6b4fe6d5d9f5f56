"""The serving-performance load generator behind ``assay bench perf``.

Modes (one run measures one or more *points*):

- ``sequential``: one request at a time, the seed's default (800 input / 200 output tokens);
- ``concurrency``: a closed loop per level — N workers, each sends its next request as soon as
  its last answer ended;
- ``rate``: an open loop per rate — send times drawn up front from a gamma distribution
  (shape = burstiness, mean gap = 1/rate; burstiness 1 is a Poisson process), each request
  sent at its time whatever the earlier ones are doing, and its latency measured from the
  scheduled time as well as the actual one (no coordinated omission).

- ``replay``: one open-loop point at a trace's own arrival times and lengths (:mod:`.replay`);
- ``sessions``: multi-turn conversations, closed loop or started at a rate (:mod:`.sessions`).

A sweep with ``stop_at_saturation`` measures growing rates until the rule of :mod:`.saturation`
says the knee is passed; ``max_error_rate`` stops any run at a point that failed too much.
``prefix_groups`` runs each point twice, with and without shared prefixes (:mod:`.prefix`);
``server_metrics`` scrapes the server's Prometheus page throughout (:mod:`.telemetry`); ``lora``
names an adapter per request (:mod:`.lora`).

Warm-up requests go first at every point and are left out (one that does not complete ends the
warm-up). A point ends after ``requests`` requests or ``duration`` seconds, or early, once
:data:`~assay.bench.perf.measure.STOP_AFTER_FAILURES` requests have failed and none has completed
(a server that stalls every request is not waited on 50 times). A whole run is bounded by
``max_time`` (``--max-time``; default :func:`run_time_limit`): when it is reached the requests in
flight are cancelled, no further point starts, and the summary says so (``stopped``). The exchanges are stamped by :mod:`assay.bench.perf.stream`,
measured by :mod:`assay.bench.perf.measure` after the point, and the point's client figures
(schedule lag, turnaround, event-loop lag, CPU) feed its validity verdict.
"""

from __future__ import annotations

import asyncio
import math
import os
import resource
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import orjson

from assay.bench.cost import benchmark_cost, estimated_cost
from assay.bench.perf import measure as M
from assay.bench.perf.lora import assign as assign_lora
from assay.bench.perf.lora import fingerprint as lora_fingerprint
from assay.bench.perf.lora import parse_mix as parse_lora_mix
from assay.bench.perf.lora import per_adapter
from assay.bench.perf.prefix import fingerprint as prefix_fingerprint
from assay.bench.perf.prefix import prefix_block, usage_hit_rate
from assay.bench.perf.replay import read_trace, replay_block, trace_prompts, trace_rate
from assay.bench.perf.saturation import knee, knee_message, next_rate, saturated, stopping_rates, too_many_errors
from assay.bench.perf.sessions import SessionPlan, Turns, drive, per_session, per_turn, ttft_slope
from assay.bench.perf.sessions import fingerprint as session_fingerprint
from assay.bench.perf.stored import SCHEMA
from assay.bench.perf.stream import Exchange, StreamClient
from assay.bench.perf.telemetry import Scraper, point_summary
from assay.bench.perf.workload import Counter, build_prompts, bundled_counter, server_counter
from assay.errors import AssayError
from assay.models.http import LeanHTTP
from assay.models.spec import parse_model_spec

DEFAULT_REQUESTS = 50
DEFAULT_MAX_TIME = 3600.0           # s: a whole run's default bound (longer when --duration asks more)


@dataclass
class PerfConfig:
    endpoint: str                       # http(s)://host:port/v1, azure:DEPLOYMENT or openai:MODEL
    model: str | None = None
    api: str = "chat"                   # chat | completions
    stream: bool = True
    concurrency: list[int] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    requests: int | None = None
    duration: float | None = None
    input_tokens: int = 800
    output_tokens: int = 200
    warmup: int = 2
    shared_prefix: int = 0
    burstiness: float = 1.0
    seed: int = 0
    timeout: float = 600.0
    stall_timeout: float = 60.0
    slo: dict[str, float] | None = None
    ignore_eos: bool = True
    name: str | None = None
    max_prompts: int = 2_000            # duration-bound closed loops: prompts prepared per point
    sweep: int = 0                      # rates of a sweep (0: no sweep)
    sweep_concurrency: int = 32         # the sweep's saturating closed-loop point
    max_time: float | None = None       # s, the whole run (None: run_time_limit)
    replay: str | None = None           # a trace to replay (replay.read_trace), open loop at its times
    speed: float = 1.0                  # replay: arrival times x 1/speed
    sessions: int = 0                   # multi-turn sessions (0: none; sessions.py)
    turns: int = 1
    think_time: float = 0.0             # s between a turn's answer and the session's next turn
    stop_at_saturation: bool = False    # a sweep of growing rates that stops at the knee (saturation.py)
    max_error_rate: float | None = None  # stop once a point fails more than this share of its requests
    lora: list[str] = field(default_factory=list)   # adapters named as each request's model (lora.py)
    lora_mix: str = "uniform"
    prefix_groups: int = 0              # >0: that many shared prefixes, each point measured with and without
    server_metrics: str | None = None   # a Prometheus page to scrape during the run (telemetry.py)
    metrics_interval: float = 1.0       # s between scrapes

    @property
    def mode(self) -> str:
        if self.replay:
            return "replay"
        if self.sessions:
            return "sessions"
        if self.sweep:
            return "sweep"
        if self.rates:
            return "rate"
        if self.concurrency and self.concurrency != [1]:
            return "concurrency"
        return "sequential"

    def check(self) -> None:
        if self.api not in ("chat", "completions"):
            raise AssayError(f"--api must be chat or completions, got {self.api!r}")
        if self.concurrency and (self.rates or self.sweep):
            raise AssayError("give --concurrency or --rate, not both")
        if self.sweep < 0 or self.sweep_concurrency < 2:
            raise AssayError("a sweep needs at least 1 rate and a saturating concurrency of at least 2")
        if any(c < 1 for c in self.concurrency):
            raise AssayError("--concurrency levels must be at least 1")
        if any(not (r > 0 and math.isfinite(r)) for r in self.rates):
            raise AssayError("--rate values must be positive numbers of requests per second")
        if self.requests is not None and self.requests < 1:
            raise AssayError("--requests must be at least 1")
        if self.duration is not None and self.duration <= 0:
            raise AssayError("--duration must be positive")
        if self.output_tokens < 1:
            raise AssayError("--output-tokens must be at least 1")
        if self.burstiness <= 0:
            raise AssayError("--burstiness must be positive (1 = Poisson arrivals)")
        if self.warmup < 0:
            raise AssayError("--warmup must be 0 or more")
        self._check_workload()
        if self.max_time is not None and not (self.max_time > 0 and math.isfinite(self.max_time)):
            raise AssayError("--max-time must be a positive duration")

    def _check_workload(self) -> None:
        """The options of the production-shaped workloads (replay, sessions ...)."""
        if self.replay and (self.concurrency or self.rates or self.sweep):
            raise AssayError("--replay sends at the trace's own times: give it without --concurrency or --rate")
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise AssayError(f"--speed must be a positive number, got {self.speed!r}")
        if self.sessions < 0 or self.turns < 1 or not (self.think_time >= 0 and math.isfinite(self.think_time)):
            raise AssayError("--sessions must be 0 or more, --turns at least 1 and --think-time 0 or more")
        if self.sessions and (self.concurrency or self.sweep or self.replay):
            raise AssayError("--sessions runs its sessions at once (closed loop) or starts them at --rate "
                             "(open loop): give it without --concurrency, --rate sweep or --replay")
        if self.server_metrics and not self.server_metrics.lower().startswith(("http://", "https://")):
            raise AssayError(f"--server-metrics must be an http(s) URL of a Prometheus page, got {self.server_metrics!r}")
        if not (self.metrics_interval > 0 and math.isfinite(self.metrics_interval)):
            raise AssayError("--metrics-interval must be a positive duration")
        if self.prefix_groups and (self.prefix_groups < 0 or not self.shared_prefix or self.replay or self.sessions):
            raise AssayError("--prefix-groups needs --shared-prefix N (and neither --replay nor --sessions)")
        if self.lora:
            parse_lora_mix(self.lora, self.lora_mix)
        if self.stop_at_saturation and not self.sweep:
            raise AssayError("--stop-at-saturation needs --rate sweep")
        if self.max_error_rate is not None and not 0 <= self.max_error_rate < 1:
            raise AssayError(f"--max-error-rate must be a share from 0 to 1 (0.05 = 5%), got {self.max_error_rate!r}")
        if self.sessions and self.api != "chat":
            raise AssayError("--sessions carries the conversation as chat messages: it needs --api chat")


@dataclass
class PerfRun:
    summary: dict[str, Any]
    samples: dict[int, dict[str, np.ndarray]]      # point index -> name -> values
    requests: list[dict[str, Any]]


class _Target:
    """Where requests go and what they carry."""

    def __init__(self, cfg: PerfConfig) -> None:
        ep = cfg.endpoint.strip()
        spec_text = f"{ep.rstrip('/')}#{cfg.model}" if ep.lower().startswith(("http://", "https://")) and cfg.model else ep
        self.spec = parse_model_spec(spec_text, role="benchmark endpoint")
        if self.spec.kind not in ("http", "azure", "openai"):
            raise AssayError(f"--endpoint must be an http(s) URL, azure:DEPLOYMENT or openai:MODEL, got {ep!r}")
        self.backend = self.spec.build()
        self.cfg = cfg
        self.extras_ok = cfg.ignore_eos and self.spec.kind == "http"

    async def prepare(self) -> None:
        self.model = await self.backend.ensure_model()
        url, headers = self.backend.route(self.cfg.api)
        parts = urlsplit(url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.headers = headers
        self.http = LeanHTTP(self.origin, timeout=self.cfg.timeout)   # every request here within --timeout
        base_path = urlsplit(self.backend.base_url).path.rstrip("/")
        self.root = base_path[:-3] if base_path.endswith("/v1") else base_path
        self._head = self.http.head("POST", self.path, {**headers, "Accept": "text/event-stream"
                                                        if self.cfg.stream else "application/json"})

    def payload(self, prompt: str, max_tokens: int | None = None, messages: list[dict[str, str]] | None = None,
                model: str | None = None) -> bytes:
        cfg = self.cfg
        out_n = max_tokens or cfg.output_tokens
        body: dict[str, Any] = {"model": model or self.model}
        if cfg.api == "chat":
            body["messages"] = messages or [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body["max_tokens"] = out_n
        if cfg.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if self.extras_ok:
            body["ignore_eos"] = True           # vLLM, llama.cpp: generate the asked length
            body["min_tokens"] = out_n
        raw = orjson.dumps(body)
        return self._head + str(len(raw)).encode() + b"\r\n\r\n" + raw

    async def counter(self) -> Counter:
        if self.spec.kind == "http":
            auth = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "api-key")}
            got = await server_counter(self.http, self.root, self.model, auth, timeout=self.cfg.timeout)
            if got is not None:
                return got
        return bundled_counter(self.model)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def gamma_schedule(rate: float, burstiness: float, n: int | None, duration: float | None,
                   rng: np.random.Generator) -> np.ndarray:
    """Send times (s from the start) for an open loop: gamma gaps, mean 1/rate, shape = burstiness."""
    limit = n if n is not None else int(rate * (duration or 0) * 1.5 + 50)
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=limit)
    times = np.cumsum(gaps) - gaps[0]       # the first request goes at once
    if n is None and duration is not None:
        times = times[times < duration]
    return times


def run_time_limit(cfg: PerfConfig) -> float:
    """The bound of a whole run in seconds: ``cfg.max_time``, else :data:`DEFAULT_MAX_TIME` (1 h), or
    with ``--duration`` half as long again as the points' durations add up to, plus 10 minutes, when
    that is longer."""
    if cfg.max_time is not None:
        return float(cfg.max_time)
    if cfg.duration is None:
        return DEFAULT_MAX_TIME
    n_points = 2 + cfg.sweep if cfg.sweep else max(1, len(cfg.rates) or len(cfg.concurrency))
    return max(DEFAULT_MAX_TIME, 1.5 * n_points * cfg.duration + 600.0)


def level_label(conc: int | None, rate: float | None) -> str:
    """A load point as ``bench show`` names it: ``concurrency 8`` or ``rate 2 req/s``."""
    return f"rate {rate:g} req/s" if rate is not None else f"concurrency {conc or 1}"


async def run_perf(cfg: PerfConfig, *, progress: Callable[[str, int, int | None], None] | None = None) -> PerfRun:  # noqa: C901
    """Run every point of ``cfg``; ``progress(stage, done, total)`` is called as work advances (the
    stage names the load point: ``"concurrency 8 (2/5): requests"``)."""
    cfg.check()
    if cfg.requests is None and cfg.duration is None:
        cfg.requests = DEFAULT_REQUESTS
    max_time = run_time_limit(cfg)
    run_deadline = time.monotonic() + max_time
    target = _Target(cfg)
    await target.prepare()
    counter = await target.counter()
    levels: list[tuple[int | None, float | None]]
    trace = read_trace(cfg.replay) if cfg.replay else None
    if trace is not None:
        levels = [(None, trace_rate(trace.requests, cfg.speed))]
        if cfg.max_time is None:        # a long trace is given its own length, and half as long again
            max_time = max(max_time, 1.5 * trace.requests[-1].at / cfg.speed + 600.0)
            run_deadline = time.monotonic() + max_time
    elif cfg.sessions:
        levels = [(None, r) for r in cfg.rates] or [(cfg.sessions, None)]
    elif cfg.sweep and cfg.stop_at_saturation:     # one at a time, then growing rates to the knee
        levels = [(1, None)]
    elif cfg.sweep:        # one at a time, then flat out, then rates in between (found as it goes)
        levels = [(1, None), (cfg.sweep_concurrency, None)]
    elif cfg.rates:
        levels = [(None, r) for r in cfg.rates]
    else:
        levels = [(c, None) for c in (cfg.concurrency or [1])]
    planned = (1 if cfg.stop_at_saturation else 2) + cfg.sweep if cfg.sweep else len(levels)
    per_point = cfg.requests if cfg.requests is not None else _duration_prompts(cfg, levels)
    if trace is not None:
        per_point = len(trace.requests)
    elif cfg.sessions:
        per_point = cfg.sessions * cfg.turns
    need = cfg.warmup + per_point
    client = StreamClient(target.origin, timeout=cfg.timeout, stall_timeout=cfg.stall_timeout)
    run_t0 = time.monotonic()
    scraper = Scraper(cfg.server_metrics, cfg.metrics_interval) if cfg.server_metrics else None
    if scraper is not None:
        scraper.start()
    run_id = secrets.token_hex(6)      # 12 hex digits, the length of every ref (store.new_ref)
    points: list[dict[str, Any]] = []
    samples: dict[int, dict[str, np.ndarray]] = {}
    all_requests: list[dict[str, Any]] = []
    notes: list[str] = []
    stopped: dict[str, Any] | None = None
    stop_rule: dict[str, Any] | None = None
    refined = 0                         # points spent narrowing the knee down (saturation.next_rate)
    try:
        p_idx = 0
        while p_idx < len(levels):
            conc, rate = levels[p_idx]
            where = f"{level_label(conc, rate)} ({p_idx + 1}/{max(planned, len(levels))})"
            if time.monotonic() >= run_deadline:
                stopped = _time_limit(max_time, where, p_idx, len(levels), notes)
                break
            done_prompts = [0]

            def tick(k: int, done_prompts: list[int] = done_prompts, where: str = where) -> None:
                done_prompts[0] += k
                if progress:
                    progress(f"{where}: prompts", done_prompts[0], need)

            schedule = outputs = None
            if trace is not None:
                prompts = await build_prompts(counter, cfg.warmup, cfg.input_tokens, seed=cfg.seed * 1_000_003 + p_idx,
                                              progress=tick) if cfg.warmup else []
                prompts += await trace_prompts(counter, trace.requests, seed=cfg.seed, progress=tick)
                schedule = np.array([r.at for r in trace.requests]) / cfg.speed
                outputs = [r.output_tokens for r in trace.requests]
            else:
                prompts = await build_prompts(counter, need, cfg.input_tokens, shared_prefix=cfg.shared_prefix,
                                              seed=cfg.seed * 1_000_003 + p_idx, progress=tick,
                                              groups=max(1, cfg.prefix_groups))
            if not all(p.exact for p in prompts):
                off = sum(1 for p in prompts if not p.exact)
                notes.append(f"point {p_idx}: {off} prompt(s) could not be made exactly "
                             f"{'their trace length' if trace is not None else cfg.input_tokens} tokens long")
            await _warm_up(client, target, cfg, prompts[:cfg.warmup], first=p_idx == 0, notes=notes)
            timed = prompts[cfg.warmup:]
            plan = session_plan(cfg, rate) if cfg.sessions else None
            without = None
            if cfg.prefix_groups:       # the same point with nothing shared first, for the side by side
                without = await _unshared(client, target, cfg, counter, len(timed), conc, rate, p_idx, progress,
                                          where, run_deadline)
            s0 = time.monotonic()          # the point's server figures: from a scrape just before it
            if scraper is not None:
                await scraper.scrape()
            w0 = time.monotonic()
            pt = await _point(client, target, cfg, timed, None if plan else conc, None if plan else rate, progress,
                              label=f"{where}: requests", run_deadline=run_deadline, schedule=schedule,
                              outputs=outputs, plan=plan,
                              models=assign_lora(cfg.lora, cfg.lora_mix, len(timed), cfg.seed + p_idx) if cfg.lora else None)
            records = pt.records
            w1 = time.monotonic()
            if scraper is not None:
                await scraper.scrape()
            await _count_outputs(counter, records, cfg.output_tokens)
            for r in records:
                r["point"] = p_idx
            early = None
            if pt.gave_up:
                early = (f"stopped after the first {len(records)} requests all failed "
                         f"({_causes(records)}); the other {len(timed) - len(records)} were not sent")
                notes.append(f"{level_label(conc, rate)}: {early}")
            point, smp = M.summarize(records, duration=pt.duration, concurrency=conc if rate is None else None,
                                     rate=rate, slo=cfg.slo, client=pt.client, seed=cfg.seed, stopped=early)
            point["window_s"] = [w0 - run_t0, w1 - run_t0]
            if scraper is not None:
                point["server"] = point_summary(scraper.samples, s0, time.monotonic())
            if cfg.lora:
                point["lora"] = per_adapter(records)
            if without is not None:
                point["prefix"] = prefix_block(shared=cfg.shared_prefix, groups=cfg.prefix_groups,
                                               tokens=cfg.input_tokens, n_warmup=cfg.warmup, n_timed=len(timed),
                                               without=without, point=point, usage=usage_hit_rate(records))
            if trace is not None:
                point["replay"] = replay_block(trace, cfg.speed, timed, records, point)
            if plan is not None:
                point["sessions"] = {"sessions": plan.sessions, "turns": plan.turns, "think_time": plan.think,
                                     "loop": "closed" if plan.starts is None else "open",
                                     "per_turn": per_turn(records, plan.turns), "ttft_vs_context": ttft_slope(records),
                                     "per_session": per_session(records, plan.turns)}
            points.append(point)
            samples[p_idx] = smp
            all_requests.extend(records)
            if pt.out_of_time:
                stopped = _time_limit(max_time, where, p_idx, len(levels), notes)
                break
            stop_rule = _stop_rule(cfg, points, stop_rule)
            if stop_rule is not None:
                nxt = next_rate(points, refined) if stop_rule["reason"] == "saturation" else None
                if nxt is None:         # stopped (the error rule, or the knee narrowed down)
                    notes.append(stop_rule["message"] + ("; " + knee_message(stop_rule["knee"])
                                                         if stop_rule["reason"] == "saturation" else ""))
                    break
                del levels[p_idx + 1:]          # the coarse rates left are not measured
                levels.append((None, nxt))
                refined += 1
            if cfg.sweep and cfg.stop_at_saturation and p_idx == 0:
                levels += [(None, r) for r in stopping_rates(points[0]["request_throughput"], cfg.sweep)]
            elif cfg.sweep and p_idx == 1:
                levels += _sweep_rates(cfg, points, notes)
            p_idx += 1
    finally:
        if scraper is not None:
            await scraper.stop()
        await client.aclose()
        await target.http.aclose()
        await target.backend.aclose()
    summary = {
        "schema": SCHEMA, "id": run_id, "name": cfg.name, "created_at": time.time(),
        "endpoint": target.backend.name if target.spec.kind != "http" else target.backend.base_url,
        "model": target.model or cfg.model, "api": cfg.api, "stream": cfg.stream, "mode": cfg.mode,
        "settings": {"input_tokens": cfg.input_tokens, "output_tokens": cfg.output_tokens,
                     "requests": per_point if trace is not None or cfg.sessions else cfg.requests,
                     "duration": cfg.duration, "warmup": cfg.warmup, "shared_prefix": cfg.shared_prefix,
                     "burstiness": cfg.burstiness, "seed": cfg.seed, "timeout": cfg.timeout,
                     "stall_timeout": cfg.stall_timeout, "slo": cfg.slo, "ignore_eos": target.extras_ok,
                     "concurrency": cfg.concurrency or None, "rates": cfg.rates or None,
                     "sweep": {"rates": cfg.sweep, "concurrency": cfg.sweep_concurrency,
                               "stop_at_saturation": cfg.stop_at_saturation} if cfg.sweep else None,
                     "max_error_rate": cfg.max_error_rate,
                     "max_time": max_time,
                     "prefix_groups": cfg.prefix_groups or None,
                     "lora": {"adapters": cfg.lora, "mix": cfg.lora_mix} if cfg.lora else None,
                     "workload": trace.fingerprint(cfg.speed) if trace is not None else
                     prefix_fingerprint(cfg.shared_prefix, cfg.prefix_groups) if cfg.prefix_groups else
                     session_fingerprint(cfg.turns, cfg.think_time, bool(cfg.rates)) if cfg.sessions else
                     lora_fingerprint(cfg.lora, cfg.lora_mix) if cfg.lora else None,
                     "sessions": {"sessions": cfg.sessions, "turns": cfg.turns, "think_time": cfg.think_time}
                     if cfg.sessions else None,
                     "replay": {"trace": trace.source, "layout": trace.layout, "sha256": trace.sha256,
                                "requests": len(trace.requests), "speed": cfg.speed}
                     if trace is not None else None},
        "tokenizer": {"source": counter.source, "model_tokens": counter.model_tokens},
        "clock": client.clock,
        "client": {"python": sys.version.split()[0], "cpus": os.cpu_count()},
        "notes": notes, "track": None, "repeat": None, "cost": None,
        **({"stopped": stopped} if stopped is not None else {}),
        "stop_rule": stop_rule,
        "telemetry": scraper.stored(run_t0) if scraper is not None else None,
        "points": points,
    }
    if not cfg.stream:
        notes.append("not streamed: TTFT, ITL and TPOT cannot be observed, only end-to-end latency")
    priced = benchmark_cost({"kind": "perf", "model": summary["model"], "details": summary})
    summary["cost"] = {"price_per_1m": priced["price_per_1m"], "source": priced["price_source"],
                       "estimated_cost_per_1m": estimated_cost(priced["price_per_1m"]),
                       "input_tokens": priced["input_tokens"], "output_tokens": priced["output_tokens"],
                       "usd": priced["cost_usd"]}
    return PerfRun(summary, samples, [_public(r) for r in all_requests])


def _duration_text(s: float) -> str:
    return f"{s / 3600:g}h" if s >= 3600 and s % 3600 == 0 else f"{s / 60:g}m" if s >= 60 and s % 60 == 0 else f"{s:g}s"


def _time_limit(max_time: float, where: str, p_idx: int, n_levels: int, notes: list[str]) -> dict[str, Any]:
    msg = (f"the run reached its time limit (--max-time {_duration_text(max_time)}) at {where}: "
           f"{p_idx} of {n_levels} point(s) measured in full; the requests then in flight were cancelled")
    notes.append(msg)
    return {"reason": "time limit", "message": msg, "max_time": max_time}


def _causes(records: list[dict[str, Any]]) -> str:
    tally: dict[str, int] = {}
    for r in records:
        if r["status"] != "ok":
            tally[r["status"]] = tally.get(r["status"], 0) + 1
    return ", ".join(f"{k}: {v}" for k, v in sorted(tally.items()))


def no_completed_message(summary: dict[str, Any]) -> str | None:
    """The one line for a run in which no request completed (it is no benchmark), else None."""
    pts = summary.get("points") or []
    if any((p.get("requests") or {}).get("ok") for p in pts):
        return None
    tally: dict[str, int] = {}
    for p in pts:
        for k, v in ((p.get("requests") or {}).get("failures") or {}).items():
            tally[k] = tally.get(k, 0) + int(v or 0)
    causes = ", ".join(f"{k}: {v}" for k, v in sorted(tally.items()) if v) or "no request was sent"
    stopped = (summary.get("stopped") or {}).get("message")
    return f"no request completed at {summary.get('endpoint')} ({causes})" + (f": {stopped}" if stopped else "")


async def _warm_up(client: StreamClient, target: _Target, cfg: PerfConfig, warm: list[Any], *, first: bool,
                   notes: list[str]) -> None:
    """The warm-up requests, left out; the run's first also checks the endpoint answers at all. One
    that does not complete (a stall, a timeout) ends the warm-up: the point's requests will tell."""
    if first and warm:
        ex = await client.request(target.payload(warm[0].text))
        if target.extras_ok and _rejected_extras(ex):
            target.extras_ok = False  # the server refuses ignore_eos / min_tokens: go without
            notes.append("the server refused ignore_eos / min_tokens: answers may end before "
                         f"{cfg.output_tokens} tokens")
            ex = await client.request(target.payload(warm[0].text))
        _check_first(ex, target)
        if not ex.complete:
            return
        warm = warm[1:]
    for pr in warm:
        ex = await client.request(target.payload(pr.text))
        if not ex.complete:
            return


def _sweep_rates(cfg: PerfConfig, points: list[dict[str, Any]], notes: list[str]) -> list[tuple[None, float]]:
    """``cfg.sweep`` rates evenly spaced between the sequential and the saturated throughput."""
    lo, hi = points[0]["request_throughput"], points[1]["request_throughput"]
    if not hi > lo * 1.05:
        notes.append(f"sweep: {hi:.3g} requests/s at concurrency {cfg.sweep_concurrency} is no more than "
                     f"{lo:.3g} one at a time; no rates in between to measure")
        return []
    rates = np.linspace(lo, hi, cfg.sweep + 2)[1:-1]
    return [(None, float(f"{r:.3g}")) for r in rates]


def _duration_prompts(cfg: PerfConfig, levels: list[tuple[int | None, float | None]]) -> int:
    """Prompts to prepare for a duration-bound point: enough for the fastest level we can foresee."""
    if cfg.rates and not cfg.sweep:
        return min(cfg.max_prompts, int(max(cfg.rates) * (cfg.duration or 0) * 1.5) + 50)
    return cfg.max_prompts


def _status(ex: Exchange) -> int:
    head = ex.reads[0][1][:12] if ex.reads else b""
    try:
        return int(head[9:12])
    except ValueError:
        return 0


def _check_first(ex: Exchange, target: _Target) -> None:
    """Stop at once, with the reason, when the endpoint cannot be benchmarked at all."""
    where = f"{target.origin}{target.path.split('?')[0]}"
    if ex.error == "connect error":
        raise AssayError(f"{where}: {ex.detail}")
    status = _status(ex)
    if status in (400, 401, 403, 404, 405, 422):
        body = b"".join(d for _, d in ex.reads)
        text = body.split(b"\r\n\r\n", 1)[-1][:300].decode("utf-8", "replace")
        text = "".join(ch if ch.isprintable() else " " for ch in text)
        raise AssayError(f"{where}: the first request was refused with HTTP {status}: {text}")


def _rejected_extras(ex: Exchange) -> bool:
    """A 400/422 answer naming ignore_eos or min_tokens."""
    if not ex.reads:
        return False
    head = b"".join(d for _, d in ex.reads[:4])
    return _status(ex) in (400, 422) and (b"ignore_eos" in head or b"min_tokens" in head)


@dataclass
class _Measured:
    """One point as run: its records (measured), the client's figures, the duration, and whether it
    gave up (every request failed) or ran out of the run's time."""

    records: list[dict[str, Any]]
    client: dict[str, Any]
    duration: float
    gave_up: bool = False
    out_of_time: bool = False


async def _point(client: StreamClient, target: _Target, cfg: PerfConfig, prompts: list[Any], conc: int | None,  # noqa: C901
                 rate: float | None, progress: Callable[[str, int, int | None], None] | None, *,
                 label: str = "requests", run_deadline: float = math.inf, schedule: np.ndarray | None = None,
                 outputs: list[int] | None = None, plan: SessionPlan | None = None,
                 models: list[str] | None = None) -> _Measured:
    """One point: the records (measured), the client's figures, and the duration. ``schedule``: send
    times (s from the start) of an open loop given up front (a replay); ``outputs``: each request's
    max_tokens (default ``--output-tokens``)."""
    loop = asyncio.get_running_loop()
    payloads = [target.payload(p.text, outputs[i] if outputs else None, model=models[i] if models else None)
                for i, p in enumerate(prompts)]
    n_total = len(payloads)
    results: list[tuple[int, float | None, Exchange]] = []
    turnaround: list[float] = []
    schedule_lag: list[float] = []
    client.loop_lag.clear()
    cpu0 = _cpu()
    t0 = time.monotonic()
    deadline = t0 + cfg.duration if cfg.duration is not None else math.inf
    done = [0]
    tally = {"ok": 0, "failed": 0}
    halt = {"gave_up": False, "out_of_time": False}

    def step(ex: Exchange) -> None:
        done[0] += 1
        tally["ok" if ex.complete else "failed"] += 1
        if not tally["ok"] and tally["failed"] >= M.STOP_AFTER_FAILURES:
            halt["gave_up"] = True
        if progress:
            progress(label, done[0], n_total if cfg.duration is None else None)

    def going() -> bool:
        return not (halt["gave_up"] or halt["out_of_time"]) and time.monotonic() < deadline

    async def limit() -> None:          # the run's time limit: stop sending, cancel what is in flight
        await asyncio.sleep(max(0.0, run_deadline - time.monotonic()))
        halt["out_of_time"] = True
        await client.aclose()

    guard = loop.create_task(limit()) if math.isfinite(run_deadline) else None
    turns: Turns | None = None
    try:
        if plan is not None:
            turns = await _sessions(client, target, cfg, prompts, plan, results, step, going, t0, models)
            schedule_lag.extend(turns.schedule_lag)
        elif rate is None and schedule is None:
            nxt = [0]

            async def worker() -> None:
                last_end: float | None = None
                while nxt[0] < n_total and going():
                    i = nxt[0]
                    nxt[0] += 1
                    ex = await client.request(payloads[i])
                    if last_end is not None:
                        turnaround.append(max(0.0, ex.sent - last_end))
                    last_end = ex.reads[-1][0] if ex.reads and ex.complete else None
                    results.append((i, None, ex))
                    step(ex)

            await asyncio.gather(*(worker() for _ in range(conc or 1)))
        else:
            sched = schedule if schedule is not None else gamma_schedule(
                rate or 1.0, cfg.burstiness, cfg.requests, cfg.duration, np.random.default_rng(cfg.seed))
            sched = sched[:n_total]
            tasks: list[asyncio.Task] = []

            async def one(i: int, at: float) -> None:
                ex = await client.request(payloads[i])
                schedule_lag.append(max(0.0, ex.sent - at))
                results.append((i, at, ex))
                step(ex)

            for i, s in enumerate(sched):
                at = t0 + float(s)
                delay = at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(min(delay, max(0.0, run_deadline - time.monotonic())))
                if not going() or time.monotonic() < at:
                    break
                tasks.append(loop.create_task(one(i, at)))
            await asyncio.gather(*tasks)
    finally:
        if guard is not None:
            guard.cancel()
    end = time.monotonic()
    if progress and cfg.duration is not None:
        progress(label, done[0], done[0])          # a duration-bound point's bar ends with it
    cpu = _cpu() - cpu0
    ok_ends = [ex.reads[-1][0] for _, _, ex in results if ex.reads]
    last = max(ok_ends) if ok_ends else end
    first = min((ex.sent for _, _, ex in results), default=t0)
    records = []
    kernel = user = chunks = 0
    for i, at, ex in sorted(results, key=lambda x: x[0]):
        rec = M.measure(ex, stream=cfg.stream, scheduled=at)
        if halt["out_of_time"] and rec["status"] == "cancelled":
            rec.update(status="run time limit", error="cancelled at the run's time limit (--max-time)")
        rec["i"] = i
        rec["prompt_tokens"] = prompts[i].tokens
        if outputs:
            rec["asked_output"] = outputs[i]
        if models:
            rec["adapter"] = models[i - i % plan.turns] if plan is not None else models[i]
        if turns is not None:
            meta = turns.meta[i]
            rec.update(session=meta["session"], turn=meta["turn"], context_tokens=meta["context"])
            rec["prompt_tokens"] = meta["context"]
        kernel += ex.kernel_stamps
        user += ex.user_stamps
        chunks += rec["chunks"]
        records.append(rec)
    fig = {"clock": client.clock if kernel or not user else "user",
           "kernel_share": kernel / (kernel + user) if kernel + user else None,
           "schedule_lag": schedule_lag, "turnaround": turnaround, "loop_lag": list(client.loop_lag),
           "cpu_s": cpu, "tokens": chunks, "clock_drift_ms": client.stamp_clock_drift_ms()}
    for rec in records:                 # times relative to the point's first send, for the record
        rec["t0"] = first
    gave_up = halt["gave_up"] and not tally["ok"] and not halt["out_of_time"]
    return _Measured(records, fig, max(1e-9, last - first), gave_up,
                     halt["out_of_time"])


async def _unshared(client: StreamClient, target: _Target, cfg: PerfConfig, counter: Counter, n: int,
                    conc: int | None, rate: float | None, p_idx: int,
                    progress: Callable[[str, int, int | None], None] | None, where: str,
                    run_deadline: float) -> dict[str, Any]:
    """A point's twin with no shared prefix (--prefix-groups): its summary, not kept as a point."""
    prompts = await build_prompts(counter, n, cfg.input_tokens, seed=cfg.seed * 1_000_003 + p_idx + 500_000)
    pt = await _point(client, target, cfg, prompts, conc, rate, progress, label=f"{where}: without shared prefix",
                      run_deadline=run_deadline)
    await _count_outputs(counter, pt.records, cfg.output_tokens)
    summary, _ = M.summarize(pt.records, duration=pt.duration, concurrency=conc if rate is None else None, rate=rate,
                             slo=cfg.slo, client=pt.client, seed=cfg.seed)
    return summary


def _stop_rule(cfg: PerfConfig, points: list[dict[str, Any]], fired: dict[str, Any] | None) -> dict[str, Any] | None:
    """Why the run stops after its last point (saturation.py), or None to go on. ``fired``: the
    saturation evidence already found (the points since narrow the knee down)."""
    cur = points[-1]
    if cfg.max_error_rate is not None:
        got = too_many_errors(cur, cfg.max_error_rate)
        if got is not None:
            return got
    if fired is not None:
        return {**fired, "knee": knee(points)}
    rated = [p for p in points if p.get("rate") is not None]
    if cfg.stop_at_saturation and len(rated) >= 2 and rated[-1] is cur:
        got = saturated(rated[-2], cur)
        if got is not None:
            return {**got, "knee": knee(points)}
    return None


def session_plan(cfg: PerfConfig, rate: float | None) -> SessionPlan:
    """The sessions of a point: all at once (closed loop), or started at ``rate`` per second."""
    starts = None
    if rate is not None:
        starts = [float(x) for x in gamma_schedule(rate, cfg.burstiness, cfg.sessions, None,
                                                   np.random.default_rng(cfg.seed))]
    return SessionPlan(cfg.sessions, cfg.turns, cfg.think_time, starts)


async def _sessions(client: StreamClient, target: _Target, cfg: PerfConfig, prompts: list[Any], plan: SessionPlan,
                    results: list[tuple[int, float | None, Exchange]], step: Callable[[Exchange], None],
                    going: Callable[[], bool], t0: float, models: list[str] | None = None) -> Turns:
    """Drive the sessions of a point (:func:`assay.bench.perf.sessions.drive`)."""

    async def send(messages: list[dict[str, str]], i: int) -> Exchange:
        return await client.request(target.payload("", messages=messages,
                                                   model=models[i - i % plan.turns] if models else None))

    def answer(ex: Exchange) -> tuple[str, int] | None:
        rec = M.measure(ex, stream=cfg.stream)
        if rec["status"] != "ok":
            return None
        n = (rec.get("usage") or {}).get("completion_tokens")
        return rec["text"], int(n) if isinstance(n, int) and n >= 0 else rec["chunks"]

    def record(i: int, at: float | None, ex: Exchange) -> None:
        results.append((i, at, ex))
        step(ex)

    return await drive(plan, [p.text for p in prompts], [p.tokens for p in prompts], send=send, answer=answer,
                       record=record, going=going, t0=t0)


async def _count_outputs(counter: Counter, records: list[dict[str, Any]], asked_output: int | None = None) -> None:
    texts = [r["text"] for r in records]
    model_counts: list[int | None] = [None] * len(records)
    bundled: list[int | None] = [None] * len(records)
    if counter.model_tokens:
        try:
            got = await counter.count(texts)
            model_counts = list(got)
        except Exception:      # the tokenizer went away: the counts stay unknown, said so per request
            pass
    else:
        bundled = list(await counter.count(texts))
    for r, mc, bc in zip(records, model_counts, bundled):
        M.finish(r, prompt_tokens=r["prompt_tokens"], model_count=mc, bundled_count=bc,
                 asked_output=r.get("asked_output", asked_output),
                 prompt_source=counter.source)


def _public(rec: dict[str, Any]) -> dict[str, Any]:
    """A request's line in requests.jsonl (docs/bench.md)."""
    t0 = rec.get("t0", 0.0)
    sched = rec.get("scheduled")
    return {"point": rec["point"], "i": rec["i"],
            "scheduled": sched - t0 if sched is not None else None, "sent": rec["sent"] - t0,
            "ttft": rec.get("ttft"), "ttfat": rec.get("ttfat"), "e2e": rec.get("e2e"),
            "ttft_sched": rec.get("ttft_sched"), "e2e_sched": rec.get("e2e_sched"),
            "tpot": rec.get("tpot"), "itl": rec.get("itl") or [], "chunks": rec.get("chunks"),
            "input_tokens": rec.get("input_tokens"), "output_tokens": rec.get("output_tokens"),
            "disagree": rec.get("disagree"), "status": rec["status"], "http_status": rec.get("http_status"),
            "error": rec.get("error"),
            **{k: rec[k] for k in ("session", "turn", "context_tokens", "asked_output", "adapter") if k in rec}}
