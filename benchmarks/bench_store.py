"""What the store costs an evaluation, and how fast the dashboard answers on a 100,000-row run.

    python benchmarks/bench_store.py [--rows 100000] [--repeat 5] [--runs 3] [--keep DIR]
    python benchmarks/bench_store.py --writes-only [--rows 100000] [--batch 4096] [--repeat 5]

1. Writes ``--rows`` deterministic RAG rows (query, response, ground truth, two context
   documents, a row id) and a variant of them in which every tenth response changed.
2. Evaluates each with three metric outputs (``f1_score``, ``exact_match`` and a code metric
   ``bench_judge`` that returns a 1-5 score with a one-sentence reason, like a judge) twice,
   side by side: with ``store=False`` and with the run saved into a SQLite store, ``--runs``
   times each, alternating (the best of each is kept: on a shared machine the other load only
   ever adds time). Prints both wall times and what the store adds, and the CPU seconds of
   each (this process and its metric workers: steadier than wall time on a loaded machine,
   and on a machine whose cores the scoring keeps busy what the store adds), and the CPU
   seconds of the store's own writes (the writer thread's time in ``Store.write_rows`` and
   ``finish_run``), the steadiest figure of the three. The saved runs are
   ``baseline`` and ``candidate`` (the last ones).
3. Times the first search of a run (nothing cached) for a rare word, a common word and a
   word of the reasons, side by side: through the full-text index (what the dashboard and the
   API do) and through the substring scan (``LIKE``) the store used before version 6.
4. Times every dashboard page and API call on those runs through FastAPI's TestClient
   (in process, no network), in milliseconds: the first call (nothing cached by the app:
   searches, histograms and comparisons of finished runs are kept in memory once computed),
   then the median and the worst of ``--repeat`` more calls, and prints a table.

``--writes-only``: just the CPU seconds of the store writing ``--rows`` scored rows in writes
of ``--batch`` rows (no scoring), best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

import assay  # noqa: E402
from assay.metrics.base import Score, metric  # noqa: E402

WORDS = ("apple river stone cloud paper garden signal copper window valley engine lantern orbit "
         "harbor meadow pencil violet summit thunder canyon marble falcon velvet island").split()


@metric("bench_judge", threshold=3, scale="1-5")
def bench_judge(query: str, response: str) -> Score:
    """A stand-in for a judge: a 1-5 score from the response's length and a reason."""
    s = 1 + (len(response) * 7 + len(query)) % 5
    why = "the response covers the request" if s >= 3 else "the response misses part of the request"
    return Score(value=s, reason=f"{why}; it mentions {response.split()[0]} and {len(response.split())} words")


def make_rows(n: int, variant: bool = False) -> list[dict]:
    rows = []
    for i in range(n):
        w = [WORDS[(i * k + k) % len(WORDS)] for k in range(1, 13)]
        truth = " ".join(w[:8])
        resp = " ".join(w[2:10]) if i % 3 else truth
        if variant and i % 10 == 0:
            resp = " ".join(reversed(w[4:12]))
        rows.append({
            "id": f"row-{i:06d}",
            "query": f"question {i}: what links {w[0]} and {w[1]}?",
            "response": resp,
            "ground_truth": truth,
            "contexts": [{"content": " ".join(w[:6]), "doc_uri": f"doc://{i % 997}"},
                         {"content": " ".join(w[6:]), "doc_uri": f"doc://{(i * 7) % 997}"}],
        })
    return rows


METRICS = ["f1_score", "exact_match", "bench_judge"]


CPU: list[tuple[str, float]] = []   # (what, CPU seconds) of every evaluation, in order
WRITER: list[float] = []            # CPU seconds of the store's writes (thread time), per saved run


def cpu_now() -> float:
    """CPU seconds (user + system) of this process and its finished children (metric workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed_eval(rows: list[dict], store, name: str | None, index: bool = True) -> float:
    """Seconds to evaluate ``rows``; ``index=False``: the store writes no full-text index.
    Its CPU seconds (this process and its metric workers) go to :data:`CPU`."""
    from assay.store import Store

    real = Store.has_text_index
    real_write, real_finish = Store.write_rows, Store.finish_run
    writer = [0.0]

    def timed(fn):
        def call(self, *a, **k):
            t = time.thread_time()
            try:
                return fn(self, *a, **k)
            finally:
                writer[0] += time.thread_time() - t
        return call

    if not index:
        Store.has_text_index = lambda self: False   # type: ignore[method-assign]
    Store.write_rows, Store.finish_run = timed(real_write), timed(real_finish)   # type: ignore[method-assign]
    try:
        c0 = cpu_now()
        t0 = time.perf_counter()
        assay.evaluate(rows, metrics=METRICS, store=store, name=name)
        wall = time.perf_counter() - t0
        CPU.append(("off" if store is False else "bare" if not index else "on", cpu_now() - c0))
        if store is not False:
            WRITER.append(writer[0])
        return wall
    finally:
        Store.has_text_index = real   # type: ignore[method-assign]
        Store.write_rows, Store.finish_run = real_write, real_finish   # type: ignore[method-assign]


def bench_pages(store_path: str, repeat: int, rows: int) -> list[tuple[str, float, float, float, int]]:
    from fastapi.testclient import TestClient

    from assay.store import Store
    from assay.ui.server import create_app

    st = Store(store_path)
    base = st.get_run("baseline")["id"]
    cand = st.get_run("candidate")["id"]
    client = TestClient(create_app(st), base_url="http://127.0.0.1")
    pages = [
        ("runs list", "/"),
        ("runs list, filtered", "/?name=base&status=completed"),
        ("run page", f"/runs/{base}"),
        ("run page, sorted by score (desc)", f"/runs/{base}?sort=bench_judge&dir=desc"),
        ("run page, sorted by score (asc), page 1000", f"/runs/{base}?sort=f1_score&dir=asc&page={max(1, rows // 100)}"),
        ("run page, filter f1_score=fail", f"/runs/{base}?fo=f1_score&fr=fail"),
        ("run page, filter + sort", f"/runs/{base}?fo=exact_match&fr=pass&sort=bench_judge&dir=asc"),
        ("run page, search (rare word)", f"/runs/{base}?q=question%20{rows - 1}%3A"),
        ("run page, search (common word)", f"/runs/{base}?q=falcon"),
        ("run page, search in reasons", f"/runs/{base}?q=misses%20part"),
        ("row page", f"/runs/{base}/rows/{rows * 54 // 100}"),
        ("compare page", f"/compare?runs={base}&runs={cand}"),
        ("trend page", "/trend?output=f1_score"),
        ("API runs", "/api/runs"),
        ("API run", f"/api/runs/{base}"),
        ("API rows, sorted", f"/api/runs/{base}/rows?sort=f1_score&dir=desc&page=7"),
        ("API rows, filter + search", f"/api/runs/{base}/rows?fo=bench_judge&fr=fail&q=falcon"),
        ("API histograms", f"/api/runs/{base}/histograms"),
        ("API row", f"/api/runs/{base}/rows/{rows - 1}"),
        ("API compare", f"/api/compare?runs={base}&runs={cand}"),
        ("API worse rows", f"/api/compare/worse?base={base}&other={cand}&output=f1_score"),
        ("API trend", "/api/trend?output=bench_judge"),
    ]
    out = []
    for label, url in pages:
        t0 = time.perf_counter()
        r = client.get(url)
        first = (time.perf_counter() - t0) * 1000
        assert r.status_code == 200, (url, r.status_code, r.text[:300])
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
        out.append((label, first, statistics.median(times), max(times), len(r.content)))
    st.close()
    return out


SEARCHES = [("rare word (one row)", "question 99999:"), ("common word (a third of the rows)", "falcon"),
            ("words of the reasons", "misses part")]


def bench_search(store_path: str, rows: int) -> list[tuple[str, float, float, int, int]]:
    """First search (caches cleared) of run ``baseline``: full-text index vs the LIKE scan."""
    from assay.store import Store
    from assay.store import queries as Q
    from assay.store import search as T

    st = Store(store_path)
    run = st.get_run("baseline")
    out = []
    real = T.find
    for label, text in SEARCHES:
        text = text.replace("99999", str(rows - 1))
        timing = []
        for use_index in (True, False):
            Q._SEARCH_CACHE.clear()
            T.find = real if use_index else (lambda *a, **k: None)   # type: ignore[assignment]
            try:
                t0 = time.perf_counter()
                got = Q.query_rows(st, run, Q.RowQuery(search=text))
                timing.append(((time.perf_counter() - t0) * 1000, got["total"]))
            finally:
                T.find = real
        out.append((label, timing[0][0], timing[1][0], timing[0][1], timing[1][1]))
    st.close()
    return out


def bench_writes(n: int, batch: int, repeat: int) -> list[float]:
    """CPU seconds of ``Store.write_rows`` (and ``finish_run``) writing ``n`` scored rows of
    :func:`make_rows` in batches of ``batch`` rows to a new SQLite store, ``repeat`` times: the
    store's own cost, without the scoring (the steadiest figure on a shared machine). The
    engine's sink hands the writer 4,096 rows at a time (512, one chunk, before 2026-11-24)."""
    from assay.results import StoredRow
    from assay.store import Store

    rows = make_rows(n)
    stored = []
    for i, r in enumerate(rows):
        inputs = {k: v for k, v in r.items() if k != "id"}
        judged = bench_judge(inputs["query"], inputs["response"])
        stored.append(StoredRow(i, r["id"], None, False, inputs, {
            "f1_score": {"f1_score": Score(0.5, 0.5, True, "pass", None, "completed", 0.5, {})},
            "exact_match": {"exact_match": Score(1.0, 1.0, True, "pass", None, "completed", 0.5, {})},
            "bench_judge": {"bench_judge": Score(judged.value, float(judged.value), judged.value >= 3,
                                                 "pass" if judged.value >= 3 else "fail", judged.reason,
                                                 "completed", 3, {})}}))
    layout = {"layout": [[m, [m]] for m in METRICS]}
    out = []
    for _ in range(repeat):
        tmp = Path(tempfile.mkdtemp(prefix="assay-bench-writes-"))
        st = Store(str(tmp / "w.db"))
        rid = st.start_run(name="writes", source=None, fingerprint=None, config=layout, config_hash="-",
                           metrics=METRICS, judge=None)
        t0 = time.process_time()
        for lo in range(0, n, batch):
            st.write_rows(rid, stored[lo:lo + batch])
        st.finish_run(rid, "completed", aggregates={m: {} for m in METRICS})
        out.append(time.process_time() - t0)
        st.close()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> None:  # noqa: C901
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3, help="Evaluations of each data set with the store off and on "
                                                         "(alternating; the best of each is kept).")
    ap.add_argument("--keep", help="Keep the store in this folder (and reuse it when its runs are there).")
    ap.add_argument("--no-index-too", action="store_true",
                    help="Also evaluate with the store on but no full-text index (what the index costs).")
    ap.add_argument("--pages-only", action="store_true", help="Only time the pages (needs --keep with a store).")
    ap.add_argument("--writes-only", action="store_true",
                    help="Only time the store's writes of --rows rows (CPU seconds, best of --repeat).")
    ap.add_argument("--batch", type=int, default=4096, help="Rows per store write with --writes-only.")
    args = ap.parse_args()
    if args.writes_only:
        got = bench_writes(args.rows, args.batch, args.repeat)
        print(f"Store.write_rows of {args.rows:,} rows in writes of {args.batch:,}: CPU "
              f"{', '.join(f'{x:.3f}' for x in got)} s, best {min(got):.3f} s "
              f"({1e6 * min(got) / args.rows:.1f} us a row)")
        return

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="assay-bench-store-"))
    tmp.mkdir(parents=True, exist_ok=True)
    db = str(tmp / "store.db")
    if not args.pages_only:
        if os.path.exists(db):
            os.remove(db)
        print(f"{args.rows:,} rows x {len(METRICS)} metric outputs; store: {db}; cores: {os.cpu_count()}")
        results = []
        cpus: list[tuple[float, float]] = []
        for label, variant, name in (("data A", False, "baseline"), ("data B", True, "candidate")):
            rows = make_rows(args.rows, variant)
            offs, ons, bare = [], [], []
            for k in range(max(1, args.runs)):
                offs.append(timed_eval(rows, False, None))
                if args.no_index_too:
                    bare.append(timed_eval(rows, db + ".bare", None, index=False))
                    for f in Path(db).parent.glob(Path(db).name + ".bare*"):
                        f.unlink()
                if k < args.runs - 1:
                    ons.append(timed_eval(rows, db + f".{k}", name))   # a store of its own, as the first
                    for f in Path(db).parent.glob(Path(db).name + f".{k}*"):
                        f.unlink()
                else:
                    ons.append(timed_eval(rows, db, name))
            off, on = min(offs), min(ons)
            cpu_off = min(c for w, c in CPU if w == "off")
            cpu_on = min(c for w, c in CPU if w == "on")
            cpus.append((cpu_off, cpu_on))
            CPU.clear()
            results.append((label, off, on, min(bare) if bare else None))
            print(f"    off: {', '.join(f'{x:.2f}' for x in offs)} s; on: {', '.join(f'{x:.2f}' for x in ons)} s"
                  + (f"; on without the index: {', '.join(f'{x:.2f}' for x in bare)} s" if bare else ""), flush=True)
            print(f"  {label}: store off {off:.2f} s, store on {on:.2f} s, "
                  f"store adds {100 * (on - off) / off:+.1f}%; CPU (all processes, best): off {cpu_off:.2f} s, "
                  f"on {cpu_on:.2f} s, the store adds {cpu_on - cpu_off:+.2f} s "
                  f"({100 * (cpu_on - cpu_off) / cpu_off:+.1f}%)", flush=True)
        off_t = sum(r[1] for r in results)
        on_t = sum(r[2] for r in results)
        extra = args.no_index_too
        print(f"\n| evaluation of {args.rows:,} rows | store off | store on | the store adds |"
              + (" store on, no search index | it adds |" if extra else ""))
        print("| --- | --- | --- | --- |" + (" --- | --- |" if extra else ""))
        for label, off, on, nb in results + [("both", off_t, on_t, sum(r[3] for r in results) if extra else None)]:
            print(f"| {label} | {off:.2f} s | {on:.2f} s | {100 * (on - off) / off:+.1f}% |"
                  + (f" {nb:.2f} s | {100 * (nb - off) / off:+.1f}% |" if extra else ""))
        c_off, c_on = sum(c[0] for c in cpus), sum(c[1] for c in cpus)
        print(f"\nthe store's writes (Store.write_rows and finish_run, CPU of the thread running them), "
              f"per saved run: {', '.join(f'{x:.2f}' for x in WRITER)} s, best {min(WRITER):.2f} s = "
              f"{100 * min(WRITER) / (c_off / len(cpus)):.1f}% of a run's CPU with the store off")
        print(f"\nCPU seconds, both data sets (the best of each; on a loaded machine the steadier figure): "
              f"store off {c_off:.2f} s, store on {c_on:.2f} s, the store adds {100 * (c_on - c_off) / c_off:+.1f}%")
        print(f"\nstore file: {os.path.getsize(db) / 2**20:.0f} MiB (+ WAL)")

    found = bench_search(db, args.rows)
    print(f"\n| first search ({args.rows:,}-row run, nothing cached) | full-text index ms | LIKE scan ms "
          "| matches (index / scan) |")
    print("| --- | --- | --- | --- |")
    for label, fts, like, n_fts, n_like in found:
        print(f"| {label} | {fts:.1f} | {like:.1f} | {n_fts:,} / {n_like:,} |")

    pages = bench_pages(db, args.repeat, args.rows)
    print(f"\n| page or API call ({args.rows:,}-row run) | first call ms | then: median ms | worst ms | bytes |")
    print("| --- | --- | --- | --- | --- |")
    for label, first, med, worst, size in pages:
        flag = lambda v: f"{v:.1f}" + ("" if v < 300 else " (over 300)")  # noqa: E731
        print(f"| {label} | {flag(first)} | {med:.1f} | {flag(worst)} | {size:,} |")
    if not args.keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
