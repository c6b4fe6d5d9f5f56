"""The dashboard: a FastAPI app over the store. Read-only but for the review labels; every page is
server-rendered.

Pages: ``/`` runs (filters: name, status, dates), ``/runs/{id}`` a run (metric cards with
histograms, the rows table with sorting, filters, search and pages), ``/runs/{id}/rows/{idx}``
one row, ``/compare?runs=A&runs=B`` two or more runs, ``/trend?output=O`` an output across
runs, ``/bench`` the stored serving-performance runs, ``/bench/{ref}`` one of them (its tables
and charts), ``/bench/compare?a=A&b=B`` two of them point by point, ``/bench/track?track=T``
the scheduled repeats of one, ``/judge-checks`` the stored judge checks (``assay judge check``)
and ``/judge-checks/{ref}`` one of them, ``/runs/{id}/conversations`` a run's conversations
(:mod:`assay.ui.conversation_pages`); ``/review`` the review queues, where people label rows
(:mod:`assay.ui.review_pages`: the one page with a script and a POST form); a run's page shows the latest check of its judge. The same data as JSON under ``/api/``. Sorting, filtering, searching, paging and the
histograms are computed by the database (:mod:`assay.store.queries`).

Access: with no token the app answers only requests addressed to a loopback host name
(``Host: 127.0.0.1``, ``localhost``, ``[::1]``), which keeps other web pages from reaching it
through DNS rebinding. With a token every request must carry it: ``?token=T`` once (answered
by a redirect that sets an HttpOnly cookie and drops the token from the address), the
cookie, an ``Authorization: Bearer T`` header or an ``X-Assay-Token`` header.

Evaluated text is untrusted: templates autoescape, document links are limited to http(s),
and a Content-Security-Policy that allows no script at all is sent with every page.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from assay.access import LOOPBACK_HOSTS, given_token, host_name, token_matches
from assay.engine import judge_check as JC
from assay.errors import AssayError
from assay.store import Store
from assay.store import queries as Q
from assay.ui import charts
from assay.ui.render import render, stylesheet

COOKIE = "assay_token"
STATUSES = ("completed", "running", "stale", "interrupted", "failed")   # stale: its process is gone
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'none'")
MAX_COLUMNS = 8          # metric outputs shown as columns of the rows table
MAX_PAGE = 1_000_000     # a page number beyond it is refused (400), not handed to the database
MAX_FLAKY = 200          # flaky rows listed on a run's page (every one: `assay show RUN --flaky`)
MAX_LIMIT = 100_000      # the same for a count of runs asked for
MAX_ROW = 2**63 - 1      # a row number beyond a 64-bit integer is no row (404)
WORSE_LIMIT = 25


class NotFound(AssayError):
    pass


def create_app(store: Store, *, token: str | None = None, allowed_hosts: Iterable[str] | None = None) -> FastAPI:  # noqa: C901
    """The dashboard over ``store``. ``token``: required on every request when set.
    ``allowed_hosts``: host names accepted without a token (default: the loopback names)."""
    app = FastAPI(title="assay", docs_url=None, redoc_url=None, openapi_url=None)
    hosts = {h.lower() for h in (allowed_hosts or LOOPBACK_HOSTS)}
    store_label = store.display_url

    def token_ok(request: Request) -> bool:
        given = given_token(request.headers, request.cookies.get(COOKIE), request.headers.get("x-assay-token"),
                            request.query_params.get("token"))
        return token_matches(given, token)  # type: ignore[arg-type]

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Response:
        if token is None:
            if host_name(request.headers.get("host", "")) not in hosts:
                return _plain(400, "this dashboard answers only on a loopback address "
                                   "(start it with --token to serve other hosts)")
        else:
            if not token_ok(request):
                return _plain(401, "a token is needed: open the address printed by `assay ui`, "
                                   "or send the header 'Authorization: Bearer TOKEN'")
            if "token" in request.query_params and request.method == "GET":
                # Set the cookie and take the token out of the address bar and the history.
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                # One leading slash: "//host/x" (or "/\\host/x") in Location would send the
                # browser, token cookie just set, to another site.
                target = "/" + request.url.path.lstrip("/\\") + (("?" + urlencode(rest)) if rest else "")
                resp = RedirectResponse(target, status_code=303)
                resp.set_cookie(COOKIE, token, httponly=True, samesite="strict")
                return _secure(resp)
        return _secure(await call_next(request))

    @app.exception_handler(AssayError)
    async def assay_error(request: Request, exc: AssayError) -> Response:
        return _error(request, 404 if isinstance(exc, NotFound) else 400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_value(request: Request, exc: RequestValidationError) -> Response:
        # A value of the wrong type or out of range in the address: 400 and one line, not 422.
        first = (exc.errors() or [{}])[0]
        where = first.get("loc") or ()
        name = str(where[-1]) if where else "a parameter"
        given = str(first.get("input", ""))
        given = given if len(given) <= 40 else given[:40] + "…"
        return _error(request, 400, f"bad value for {name}: {first.get('msg', 'invalid')} (got {given!r})")

    def _error(request: Request, status: int, message: str) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        return HTMLResponse(render("error.html.j2", title=str(status), status=status, message=message,
                                   store_label=store_label), status_code=status)

    def page(template: str, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(render(template, store_label=store_label, **ctx))

    def get_run(ref: str) -> dict[str, Any]:
        try:
            return store.get_run(ref)
        except AssayError as exc:
            raise NotFound(str(exc)) from None

    # -- static --------------------------------------------------------------------------
    @app.get("/static/app.css")
    def css() -> Response:
        return Response(stylesheet(), media_type="text/css", headers={"Cache-Control": "max-age=3600"})

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    # -- runs ----------------------------------------------------------------------------
    def _runs(name: str | None, status: str | None, since: str | None, until: str | None,
              page_no: int, per_page: int) -> tuple[list[dict[str, Any]], int]:
        return Q.list_runs(store, name=name or None, status=status or None,
                           since=Q.parse_day(since), until=Q.parse_day(until, end=True),
                           limit=per_page, offset=(max(1, page_no) - 1) * per_page)

    @app.get("/", response_class=HTMLResponse)
    def runs_page(request: Request, name: str | None = None, status: str | None = None,
                  since: str | None = None, until: str | None = None,
                  page_no: int = Query(1, alias="page", ge=1, le=MAX_PAGE), per: int = Query(100, ge=1, le=500)) -> Response:
        runs, total = _runs(name, status, since, until, page_no, per)
        checks = {j: {"ref": c["ref"], "figures": _check_line(c)} for j, c in JC.latest_checks(store).items()
                  if j is not None}
        params = dict(request.query_params)
        prev_href = "?" + urlencode({**params, "page": page_no - 1}) if page_no > 1 else None
        next_href = "?" + urlencode({**params, "page": page_no + 1}) if page_no * per < total else None
        return page("runs.html.j2", title="runs", runs=runs, total=total, statuses=STATUSES, checks=checks,
                    f={"name": name, "status": status, "since": since, "until": until},
                    prev_href=prev_href, next_href=next_href)

    @app.get("/api/runs")
    def api_runs(name: str | None = None, status: str | None = None, since: str | None = None,
                 until: str | None = None, page_no: int = Query(1, alias="page", ge=1, le=MAX_PAGE),
                 per_page: int = Query(100, ge=1, le=500)) -> dict[str, Any]:
        runs, total = _runs(name, status, since, until, page_no, per_page)
        return {"total": total, "page": page_no, "per_page": per_page, "runs": runs}

    # -- one run -------------------------------------------------------------------------
    def _row_query(sort: str | None, dir_: str | None, fo: str | None, fr: str | None, q: str | None,
                   page_no: int, per: int) -> Q.RowQuery:
        if dir_ not in (None, "", "asc", "desc"):
            raise AssayError(f"dir must be asc or desc, got {dir_!r}")
        return Q.RowQuery(page=page_no, per_page=per, sort=sort or None, desc=dir_ == "desc",
                          filter_output=fo or None, filter_result=fr or None, search=q)

    @app.get("/runs/{ref}", response_class=HTMLResponse)
    def run_page(request: Request, ref: str, sort: str | None = None, dir: str | None = None,
                 fo: str | None = None, fr: str | None = None, q: str | None = None,
                 page_no: int = Query(1, alias="page", ge=1, le=MAX_PAGE), per: int = Query(50, ge=1, le=500)) -> Response:
        run = get_run(ref)
        outputs = Q.run_outputs(run)
        names = [o["output"] for o in outputs]
        rq = _row_query(sort, dir, fo, fr, q, page_no, per)
        rows = Q.query_rows(store, run, rq)
        hists = Q.run_histograms(store, run)
        svgs = {o: charts.histogram(h, label=o) for o, h in hists.items()}
        shown = names[:MAX_COLUMNS]
        for extra in (rq.sort, rq.filter_output):
            if extra and extra not in shown:
                shown.append(extra)
        params = dict(request.query_params)

        def qs(**changes: Any) -> str:
            p = {**params, **{k: v for k, v in changes.items()}}
            p = {k: v for k, v in p.items() if v not in (None, "")}
            return f"/runs/{run['id']}" + ("?" + urlencode(p) if p else "") + "#rows"

        check, judged = JC.check_for_run(store, run)
        return page("run.html.j2", title=run["name"] or run["id"], run=run, summary=run.get("summary") or {},
                    check=check, judged=judged, outputs=outputs, hists=svgs, page=rows, q=rq, results=Q.RESULTS, shown=shown, qs=qs,
                    flaky=_flaky(run), max_flaky=MAX_FLAKY)

    def _flaky(run: dict[str, Any]) -> list[dict[str, Any]]:
        """The first ``MAX_FLAKY`` flaky rows of a finished run with repeats (none for others)."""
        if int((run.get("summary") or {}).get("repeats") or 1) < 2 or run["status"] != "completed":
            return []
        from itertools import islice

        from assay.results.repeats import iter_flaky

        return list(islice(iter_flaky(store.iter_scored(run["id"])), MAX_FLAKY))

    @app.get("/api/runs/{ref}")
    def api_run(ref: str) -> dict[str, Any]:
        return get_run(ref)

    @app.get("/api/runs/{ref}/rows")
    def api_rows(ref: str, sort: str | None = None, dir: str | None = None, fo: str | None = None,
                 fr: str | None = None, q: str | None = None, page_no: int = Query(1, alias="page", ge=1, le=MAX_PAGE),
                 per_page: int = Query(50, ge=1, le=500)) -> dict[str, Any]:
        run = get_run(ref)
        return Q.query_rows(store, run, _row_query(sort, dir, fo, fr, q, page_no, per_page))

    @app.get("/api/runs/{ref}/histograms")
    def api_histograms(ref: str) -> dict[str, Any]:
        run = get_run(ref)
        return Q.run_histograms(store, run)

    def _row(run: dict[str, Any], idx: int) -> dict[str, Any]:
        if not 0 <= idx <= MAX_ROW:
            raise NotFound(f"run {run['id']} has no row {idx}")
        try:
            return Q.get_row(store, run["id"], idx)
        except AssayError as exc:
            raise NotFound(str(exc)) from None

    @app.get("/runs/{ref}/rows/{idx}", response_class=HTMLResponse)
    def row_page(ref: str, idx: int) -> Response:
        run = get_run(ref)
        row = _row(run, idx)
        return page("row.html.j2", title=f"row {idx} of {run['name'] or run['id']}", run=run, row=row)

    @app.get("/api/runs/{ref}/rows/{idx}")
    def api_row(ref: str, idx: int) -> dict[str, Any]:
        return _row(get_run(ref), idx)

    # -- compare -------------------------------------------------------------------------
    # A comparison of finished runs never changes: kept, keyed by each run's last update.
    cache: OrderedDict[tuple, Any] = OrderedDict()

    def _cached(key: tuple, runs: list[dict[str, Any]], make: Any) -> Any:
        if any(r["status"] == "running" for r in runs):
            return make()
        key = key + tuple((r["id"], r["updated_at"]) for r in runs)
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        value = cache[key] = make()
        while len(cache) > 32:
            cache.popitem(last=False)
        return value

    def _compare(refs: list[str]) -> dict[str, Any]:
        from assay.store.compare import compare_runs

        runs = [get_run(r) for r in refs]
        return _cached(("compare",), runs, lambda: compare_runs(store, [r["id"] for r in runs]))

    def _worse(base: str, other: str, output: str, limit: int) -> list[dict[str, Any]]:
        from assay.store.compare import worse_rows

        runs = [get_run(base), get_run(other)]
        return _cached(("worse", output, limit), runs,
                       lambda: worse_rows(store, runs[0]["id"], runs[1]["id"], output, limit=limit))

    @app.get("/compare", response_class=HTMLResponse)
    def compare_page(request: Request, runs: list[str] = Query(default=[]), output: str | None = None) -> Response:
        if len(runs) < 2:
            choices, _ = Q.list_runs(store, status="completed", limit=50)
            note = "pick at least two runs" if runs else None
            return page("compare.html.j2", title="compare", cmp=None, choices=choices, note=note)
        cmp = _compare(runs)
        outs = [m["output"] for m in cmp["metrics"]]
        if output and output not in outs:
            raise AssayError(f"the baseline run has no metric output {output!r}")
        output = output or (outs[0] if outs else None)
        worse = [(other, _worse(cmp["runs"][0]["id"], other["id"], output, WORSE_LIMIT))
                 for other in cmp["runs"][1:]] if output else []
        forests = []
        for i, other in enumerate(cmp["runs"][1:], start=1):
            rows = [{"label": m["output"], **(m["deltas"][i] or {"delta": None})} for m in cmp["metrics"]]
            forests.append((other["name"] or other["id"], charts.deltas(rows)))
        params = [(k, v) for k, v in request.query_params.multi_items() if k != "output"]

        def qs(**changes: Any) -> str:
            return "/compare?" + urlencode(params + [(k, v) for k, v in changes.items() if v is not None])

        return page("compare.html.j2", title="compare", cmp=cmp, output=output, worse=worse, forests=forests, qs=qs)

    @app.get("/api/compare")
    def api_compare(runs: list[str] = Query(default=[])) -> dict[str, Any]:
        if len(runs) < 2:
            raise AssayError("compare needs at least two runs: ?runs=A&runs=B")
        cmp = _compare(runs)
        keep = ("id", "name", "status", "created_at", "rows_done", "judge", "source")
        return {"runs": [{k: r.get(k) for k in keep} for r in cmp["runs"]], "metrics": cmp["metrics"]}

    @app.get("/api/compare/worse")
    def api_worse(base: str, other: str, output: str, limit: int = Query(50, ge=1, le=1000)) -> list[dict[str, Any]]:
        get_run(base)
        get_run(other)
        return _worse(base, other, output, limit)

    # -- trend ---------------------------------------------------------------------------
    @app.get("/trend", response_class=HTMLResponse)
    def trend_page(output: str | None = None, name: str | None = None) -> Response:
        outputs = Q.known_outputs(store)
        output = output or (outputs[0] if outputs else None)
        points = Q.trend(store, output, name=name or None) if output else []
        chart = charts.trend(points, label=output or "")
        return page("trend.html.j2", title=f"trend {output or ''}", output=output, outputs=outputs,
                    names=Q.run_names(store), name=name or None, points=points, chart=chart)

    @app.get("/api/trend")
    def api_trend(output: str, name: str | None = None) -> dict[str, Any]:
        return {"output": output, "points": Q.trend(store, output, name=name or None)}

    # -- the monitor (assay monitor): its pages live in assay.ui.monitor_pages --------------------
    from assay.ui.monitor_pages import register as register_monitor

    register_monitor(app, store, page, NotFound)

    # -- judge checks ----------------------------------------------------------------------
    def _checks(judge: str | None, limit: int) -> list[dict[str, Any]]:
        which = JC.ANY if not judge else (None if judge.strip().lower() in JC.NO_JUDGE_WORDS else judge)
        return JC.list_checks(store, judge=which, limit=limit)

    def get_check(ref: str) -> dict[str, Any]:
        try:
            return JC.get_check(store, ref)
        except AssayError as exc:
            raise NotFound(str(exc)) from None

    @app.get("/judge-checks", response_class=HTMLResponse)
    def checks_page(judge: str | None = None, limit: int = Query(200, ge=1, le=MAX_LIMIT)) -> Response:
        judges = list(JC.latest_checks(store))
        return page("judge_checks.html.j2", title="judge checks", checks=_checks(judge, limit), judges=judges,
                    f={"judge": judge})

    @app.get("/api/judge-checks")
    def api_checks(judge: str | None = None, limit: int = Query(200, ge=1, le=MAX_LIMIT)) -> dict[str, Any]:
        return {"checks": _checks(judge, limit)}

    @app.get("/judge-checks/{ref}", response_class=HTMLResponse)
    def check_page(ref: str) -> Response:
        c = get_check(ref)
        return page("judge_check.html.j2", title=f"judge check {c['ref']}", check=c, bar=JC.BAR)

    @app.get("/api/judge-checks/{ref}")
    def api_check(ref: str) -> dict[str, Any]:
        return get_check(ref)

    # -- benchmarks ------------------------------------------------------------------------
    # Stored benchmark runs never change: comparisons are kept, keyed by the two row ids.
    bench_cache: OrderedDict[tuple, Any] = OrderedDict()

    def get_perf(ref: str) -> dict[str, Any]:
        from assay.bench.perf.compare import load_perf

        try:
            return load_perf(store, ref)
        except AssayError as exc:
            raise NotFound(str(exc)) from None

    def _bench_list(model: str | None, track: str | None, limit: int) -> list[dict[str, Any]]:
        from assay.bench.perf.compare import describe_points, validity_text

        runs = store.list_benchmarks(kind="perf", model=model or None, track=track or None, limit=limit, details=False)
        return [{**{k: r.get(k) for k in ("ref", "id", "name", "model", "task", "created_at", "track", "metrics")},
                 "points": describe_points(r.get("metrics")), "valid": validity_text(r.get("metrics"))} for r in runs]

    def _bench_compare(a: str, b: str) -> dict[str, Any]:
        from assay.bench.perf.compare import compare_perf

        try:
            ra, rb = store.get_benchmark(a, kind="perf"), store.get_benchmark(b, kind="perf")
        except AssayError as exc:
            raise NotFound(str(exc)) from None
        key = (ra["id"], rb["id"])
        if key not in bench_cache:
            bench_cache[key] = compare_perf(store, ra["ref"], rb["ref"])
            while len(bench_cache) > 16:
                bench_cache.popitem(last=False)
        bench_cache.move_to_end(key)
        return bench_cache[key]

    def _bench_track(track: str, limit: int | None) -> dict[str, Any]:
        from assay.bench.perf.compare import track_aggregate

        try:
            return track_aggregate(store, track, limit=limit)
        except AssayError as exc:
            raise NotFound(str(exc)) from None

    @app.get("/bench", response_class=HTMLResponse)
    def bench_page(model: str | None = None, track: str | None = None,
                   limit: int = Query(200, ge=1, le=2000)) -> Response:
        everything = _bench_list(None, None, 2000)
        runs = _bench_list(model, track, limit) if (model or track) else everything[:limit]
        return page("bench_list.html.j2", title="benchmarks", runs=runs, f={"model": model, "track": track},
                    models=sorted({r["model"] for r in everything if r["model"]}),
                    tracks=sorted({r["track"] for r in everything if r["track"]}))

    @app.get("/api/bench")
    def api_bench(model: str | None = None, track: str | None = None,
                  limit: int = Query(200, ge=1, le=2000)) -> dict[str, Any]:
        return {"runs": _bench_list(model, track, limit)}

    @app.get("/bench/compare", response_class=HTMLResponse)
    def bench_compare_page(a: str | None = None, b: str | None = None) -> Response:
        from assay.bench.perf.figures import LABELS, SHOWN
        from assay.ui.bench_charts import latency_cdf

        if not a or not b:
            return page("bench_compare.html.j2", title="compare benchmarks", cmp=None,
                        choices=_bench_list(None, None, 200), a=a, b=b)
        cmp = _bench_compare(a, b)
        samples = {side: store.benchmark_samples(cmp[side]["id"]) for side in ("a", "b")}
        forests, cdfs = [], []
        for p in cmp["points"]:
            rows = []
            for m, e in p["metrics"].items():
                d = e["stats"]["mean"]
                if d["ratio"] is None or not d["ratio_ci"]:
                    continue
                better = None if d["verdict"] not in ("faster", "slower") else d["verdict"] == "faster"
                rows.append({"label": f"{LABELS.get(m, m)} mean", "delta": 100 * (d["ratio"] - 1),
                             "ci95_low": 100 * (d["ratio_ci"][0] - 1), "ci95_high": 100 * (d["ratio_ci"][1] - 1),
                             "better": better})
            forests.append(charts.deltas(rows))
            sa, sb = samples["a"].get(p["a_index"]) or {}, samples["b"].get(p["b_index"]) or {}
            series, styles = [], []
            for m, dash in (("ttft", False), ("e2e", True)):
                for side, got, color in (("A", sa, charts.BAR), ("B", sb, "#e07b24")):
                    if got.get(m) is not None:
                        series.append((f"{side} {m.upper()}", got[m]))
                        styles.append({"color": color, "dash": dash})
            cdfs.append(latency_cdf(series, styles=styles, title=f"{p['label']}: A against B") if series else None)
        return page("bench_compare.html.j2", title="compare benchmarks", cmp=cmp, forests=forests, cdfs=cdfs,
                    names=LABELS, shown=SHOWN)

    @app.get("/api/bench/compare")
    def api_bench_compare(a: str | None = None, b: str | None = None) -> dict[str, Any]:
        if not a or not b:
            raise AssayError("compare needs two benchmark runs: ?a=A&b=B")
        return _bench_compare(a, b)

    @app.get("/bench/track", response_class=HTMLResponse)
    def bench_track_page(track: str, limit: int | None = Query(None, ge=1, le=MAX_LIMIT)) -> Response:
        from assay.bench.perf.figures import LABELS

        agg = _bench_track(track, limit)
        trends = []
        for p in agg["points"]:
            pts = [{"mean": r["ttft_mean"], "created_at": r["created_at"], "id": r["ref"],
                    "name": f"{r['ref']} (TTFT mean, ms)"} for r in p["series"] if r["ttft_mean"] is not None]
            trends.append(charts.trend([{**q, "mean": q["mean"] * 1000} for q in pts], label=f"TTFT mean at {p['label']}"))
        return page("bench_track.html.j2", title=f"track {track}", agg=agg, trends=trends, names=LABELS)

    @app.get("/api/bench/track")
    def api_bench_track(track: str, limit: int | None = Query(None, ge=1, le=MAX_LIMIT)) -> dict[str, Any]:
        return _bench_track(track, limit)

    # -- the leaderboard (before /bench/{ref}: "leaderboard" is not a ref) ----------------------
    def _leaderboard(kind: str, runs: str, filter_text: str | None) -> Any:
        from assay.bench.board import build_leaderboard

        return build_leaderboard(store, kinds=kind or "all", runs=runs or "latest").filtered(filter_text or None)

    def _board_sort(board: Any, sort: str | None, dir_: str | None) -> tuple[str | None, bool | None]:
        if dir_ not in (None, "", "asc", "desc"):
            raise AssayError(f"dir must be asc or desc, got {dir_!r}")
        if sort and sort != "model":
            board.column(sort)
        return sort or None, None if not dir_ else dir_ == "desc"

    @app.get("/bench/leaderboard", response_class=HTMLResponse)
    def leaderboard_page(request: Request, sort: str | None = None, dir: str | None = None,
                         filter: str | None = None, kind: str = "all", runs: str = "latest") -> Response:
        from assay.bench.board import TRADEOFFS, display_unit, format_value
        from assay.ui.leaderboard_charts import tradeoff_chart

        board = _leaderboard(kind, runs, filter)
        key, desc = _board_sort(board, sort, dir)
        rows = board.sorted(key, descending=desc)
        shown = key or ("quality_index" if any(c.key == "quality_index" for c in board.columns) else None)
        params = {k: v for k, v in request.query_params.items() if k not in ("sort", "dir") and v}

        def sort_href(col: str) -> str:
            col_better = "low" if col == "model" else board.column(col).better
            best_first = "asc" if col_better == "low" else "desc"
            flip = {"asc": "desc", "desc": "asc"}
            now = dir or ("desc" if col != "model" and board.column(col).better == "high" else "asc")
            d = flip[now] if col == shown else best_first
            return "/bench/leaderboard?" + urlencode({**params, "sort": col, "dir": d})

        index_cols = [c for c in board.columns if ":" not in c.key]
        task_cols = [c for c in board.columns if ":" in c.key]
        tradeoffs = {name: board.tradeoff(name) for name in TRADEOFFS}
        svgs = {name: tradeoff_chart(data) for name, data in tradeoffs.items()}
        sort_desc = desc if desc is not None else (shown is not None and shown != "model"
                                                   and board.column(shown).better == "high")
        apart = [n for n in board.notes if " shown apart " in n]
        return page("bench_leaderboard.html.j2", title="leaderboard", board=board, rows=rows, sorted_by=shown,
                    sort_desc=sort_desc, apart=apart,
                    index_cols=index_cols, task_cols=task_cols, svgs=svgs, tradeoffs=tradeoffs, cell=format_value,
                    unit=display_unit, sort_href=sort_href, f={"filter": filter, "kind": kind, "runs": runs})

    @app.get("/api/bench/leaderboard")
    def api_leaderboard(sort: str | None = None, dir: str | None = None, filter: str | None = None,
                        kind: str = "all", runs: str = "latest") -> dict[str, Any]:
        from assay.bench.board import TRADEOFFS

        board = _leaderboard(kind, runs, filter)
        key, desc = _board_sort(board, sort, dir)
        return {**board.as_dict(key, desc), "tradeoffs": {name: board.tradeoff(name) for name in TRADEOFFS}}

    @app.get("/bench/{ref}", response_class=HTMLResponse)
    def bench_run_page(ref: str) -> Response:
        from markupsafe import Markup

        from assay.bench.perf.figures import LABELS, SHOWN
        from assay.bench.perf.summary import PerfSummary
        from assay.ui.bench_charts import perf_charts

        run = get_perf(ref)
        summary = PerfSummary.load(run["summary"])
        svgs = {name: Markup(svg) for name, svg in perf_charts(summary, run["samples"]).items()}
        others = [r for r in _bench_list(None, None, 200) if r["ref"] != run["ref"]]
        return page("bench_run.html.j2", title=run["name"] or run["ref"], run=run, s=summary, svgs=svgs,
                    others=others, names=LABELS, shown=SHOWN)

    @app.get("/api/bench/{ref}")
    def api_bench_run(ref: str) -> dict[str, Any]:
        run = get_perf(ref)
        out = {k: v for k, v in run.items() if k != "samples"}
        out["sample_counts"] = {str(i): {m: len(v) for m, v in per.items()} for i, per in run["samples"].items()}
        return out

    from assay.ui.redteam_pages import add_redteam_routes
    add_redteam_routes(app, store, page=page, get_run=get_run, not_found=NotFound)   # /redteam, /redteam/RUN
    from assay.ui.conversation_pages import add_conversation_routes
    add_conversation_routes(app, store, page=page, get_run=get_run, not_found=NotFound)   # /runs/RUN/conversations
    from assay.ui.review_pages import add_review_routes
    add_review_routes(app, store, page=page, csp=CSP, not_found=NotFound)   # /review, /review/NAME
    return app


def _check_line(check: dict[str, Any]) -> str:
    """``groundedness 0.84, relevance 0.95`` (AUC per metric) of a stored judge check, for the runs list."""
    shown = [f"{m} {h['auc']:.2f}" for m, h in (check.get("metrics") or {}).items() if h.get("auc") is not None]
    return ", ".join(shown[:3]) + (f", +{len(shown) - 3}" if len(shown) > 3 else "")


def _plain(status: int, text: str) -> Response:
    return _secure(Response(text + "\n", status_code=status, media_type="text/plain"))


def _secure(resp: Response) -> Response:
    resp.headers.setdefault("Content-Security-Policy", CSP)
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("Referrer-Policy", "no-referrer")
    resp.headers.setdefault("X-Frame-Options", "DENY")
    resp.headers.setdefault("Cache-Control", "no-store")
    return resp
