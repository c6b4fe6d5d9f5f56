"""Rows per second and peak memory per process: one judge metric over N rows, the local engine
beside the Ray engine on a local Ray cluster, against a fake judge endpoint at zero latency.

The endpoint is ``bench_judge_throughput.py``'s loopback server (a separate process, answering
every call at once with a score). Each engine runs in a fresh process of its own:

* ``local``: ``assay.evaluate(FILE, metrics="coherence", judge=..., concurrency=C)``;
* ``ray``: the same with ``engine="ray"`` on a Ray cluster started by that process with
  ``--cpus`` CPUs (one scoring actor per CPU), the judge's limits held by the cluster limiter
  (``assay.scale.limiter``, block leases unless ``--no-blocks``).

For each it prints rows/s, the endpoint's request count (every row one call: the call cache is
off), and the peak resident memory (VmHWM) of every process of the run: the driver, each
scoring actor, the limiter actor (Ray's own daemons are left out), with the limiter's lease and
actor-call counts. The runs are alternated ``--repeat`` times and the best of each is kept.

    PYTHONPATH=src python benchmarks/bench_ray_scale.py                    # 1,000,000 rows
    PYTHONPATH=src python benchmarks/bench_ray_scale.py --rows 100000 --repeat 3
    PYTHONPATH=src python benchmarks/bench_ray_scale.py --rows 20000 --engines ray --no-blocks
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


# -- in the engine's own process (--child) -----------------------------------------------------------
def _descendants(root: int) -> list[int]:
    """Every process under ``root`` (from /proc: the Ray cluster this process started)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / TICK
    except (OSError, ValueError, IndexError):
        return 0.0


def _peak_kib(pid: int) -> tuple[str, int, float] | None:
    """``(process title, VmHWM in KiB, CPU seconds)`` of ``pid``, None once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            title = fh.read().split(b"\0")[0].decode(errors="replace")
        with open(f"/proc/{pid}/status") as fh:
            for ln in fh:
                if ln.startswith("VmHWM:"):
                    return title, int(ln.split()[1]), cpu_seconds(pid)
    except OSError:
        return None
    return None


class PeakWatch(threading.Thread):
    """Samples the peak memory of the Ray actors under this process every ``every`` seconds (an
    actor's VmHWM only grows, so the last sample before it ends is its peak)."""

    def __init__(self, every: float = 0.5):
        super().__init__(daemon=True)
        self.every, self.stop = every, threading.Event()
        self.peaks: dict[int, tuple[str, int, float]] = {}
        self.base: dict[int, float] = {}     # CPU seconds when the first chunk was done

    def mark(self) -> None:
        self.sample()
        self.base = {pid: cpu for pid, (_, _, cpu) in self.peaks.items()}

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        for pid in _descendants(os.getpid()):
            got = _peak_kib(pid)
            if got is not None and ("ray::ChunkWorker" in got[0] or "ray::LimitActor" in got[0]):
                self.peaks[pid] = got

    def actors(self) -> list[dict[str, object]]:
        named = []
        for pid, (title, kib, cpu) in sorted(self.peaks.items()):
            kind = "limiter" if "LimitActor" in title else "scoring actor"
            named.append({"process": kind, "pid": pid, "peak_mib": round(kib / 1024, 1), "cpu_s": round(cpu, 2),
                          "cpu_after_first_s": round(cpu - self.base.get(pid, 0.0), 2)})
        return named


def child(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(SRC))
    os.environ["ASSAY_CACHE"] = "off"            # every row is one call to the endpoint
    if args.no_blocks:
        os.environ["ASSAY_LIMITER_BLOCKS"] = "0"
    import assay

    kw: dict[str, object] = {}
    watch = None
    limiter: dict[str, object] = {}
    if args.child == "ray":
        import ray

        from assay.scale import ray_engine

        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
        kw = {"engine": "ray"}
        close = ray_engine.RayScorer.close

        def close_with_counts(self: ray_engine.RayScorer) -> None:   # the limiter's counts, before it goes
            if self.limits is not None:
                limiter.update(ray.get(self.limits.snapshot.remote()))
            if watch is not None:
                watch.sample()
            close(self)

        ray_engine.RayScorer.close = close_with_counts   # type: ignore[method-assign]
        watch = PeakWatch()
        watch.start()
    done = [0]
    last = [time.perf_counter()]
    first: list[float] = []      # when the first chunk was done: the rate after it leaves start-up out

    def progress(n: int) -> None:
        if not first:
            first.extend((time.perf_counter(), float(n), cpu_seconds(os.getpid())))
            if watch is not None:
                watch.mark()
        done[0] += n
        if time.perf_counter() - last[0] >= 10:
            last[0] = time.perf_counter()
            print(f"    {args.child}: {done[0]:,} rows", file=sys.stderr, flush=True)

    cpu0 = cpu_seconds(os.getpid())
    t0 = time.perf_counter()
    res = assay.evaluate(args.file, metrics="coherence", judge=f"{args.base}#fake-judge",
                         concurrency=args.concurrency, store=False, progress=progress, **kw)
    wall = time.perf_counter() - t0
    if watch is not None:
        watch.stop.set()
    m = res.metrics["coherence"]
    steady = (done[0] - first[1]) / max(1e-9, t0 + wall - first[0]) if first and done[0] > first[1] else 0.0
    out = {"engine": args.child, "rows": res.run["rows_read"], "evaluated": m["evaluated"], "wall_s": wall,
           "steady_rows_per_s": round(steady),
           "driver_peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           "driver_cpu_s": round(cpu_seconds(os.getpid()) - cpu0, 2),
           "driver_cpu_after_first_s": round(cpu_seconds(os.getpid()) - first[2], 2) if first else 0.0,
           "rows_after_first": done[0] - int(first[1]) if first else 0,
           "actors": watch.actors() if watch is not None else [], "limiter": limiter}
    print("RESULT " + json.dumps(out), flush=True)


# -- the driver of the benchmark -----------------------------------------------------------------------
def run_engine(engine: str, a: argparse.Namespace, base: str, path: Path) -> dict[str, object]:
    cmd = [sys.executable, __file__, "--child", engine, "--file", str(path), "--base", base,
           "--concurrency", str(a.concurrency), "--cpus", str(a.cpus)]
    if a.no_blocks:
        cmd.append("--no-blocks")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env, timeout=a.timeout)
    got = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not got:
        raise SystemExit(f"the {engine} run failed (exit {out.returncode}); its output is above")
    return json.loads(got[-1][7:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--concurrency", type=int, default=64, help="judge calls in flight (for the whole cluster)")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray cluster: one scoring actor each")
    ap.add_argument("--engines", default="local,ray")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each engine, alternated; the best is kept")
    ap.add_argument("--no-blocks", action="store_true", help="the cluster limiter one lease per call")
    ap.add_argument("--timeout", type=float, default=7200.0, help="seconds for one engine's run")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--base", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    sys.path.insert(0, str(HERE))
    from bench_judge_throughput import endpoint_calls, eval_rows, start_server

    engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    proc, root = start_server(0.0)
    tmp = tempfile.TemporaryDirectory()
    try:
        path = Path(tmp.name) / "rows.jsonl"
        eval_rows(path, a.rows)
        print(f"{a.rows:,} rows x coherence, concurrency {a.concurrency}, fake endpoint at zero latency; "
              f"Ray: {a.cpus} CPUs, block leases {'off' if a.no_blocks else 'on'}; "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        best: dict[str, dict[str, object]] = {}
        for rep in range(a.repeat):
            for engine in engines:
                print(f"  run {rep + 1}/{a.repeat}: {engine} engine ...", flush=True)
                before, cpu = endpoint_calls(root), cpu_seconds(proc.pid)
                r = run_engine(engine, a, f"{root}/v1", path)
                r["endpoint_calls"] = endpoint_calls(root) - before
                r["endpoint_cpu_s"] = round(cpu_seconds(proc.pid) - cpu, 2)
                r["rows_per_s"] = round(r["rows"] / r["wall_s"])   # type: ignore[operator]
                print(f"    {r['rows_per_s']:,} rows/s ({r['wall_s']:.1f} s)", flush=True)
                if engine not in best or r["rows_per_s"] > best[engine]["rows_per_s"]:   # type: ignore[operator]
                    best[engine] = r
        print()
        print(f"{'engine':<8} {'rows/s':>9} {'after 1st chunk':>16} {'wall s':>8} {'calls':>10}  "
              f"peak RSS per process (MiB)")
        for engine, r in best.items():
            procs = [f"driver {r['driver_peak_mib']}"] + [f"{p['process']} {p['peak_mib']}"
                                                           for p in r["actors"]]   # type: ignore[union-attr]
            print(f"{engine:<8} {r['rows_per_s']:>9,} {r['steady_rows_per_s']:>16,} {r['wall_s']:>8.1f} "
                  f"{r['endpoint_calls']:>10,}  " + ", ".join(procs))
        print("\nCPU per row (µs) after the first chunk (start-up left out): where each engine's time goes")
        for engine, r in best.items():
            n = float(max(1, r["rows_after_first"]))   # type: ignore[call-overload]
            acts = r["actors"]     # type: ignore[assignment]
            scoring = sum(p["cpu_after_first_s"] for p in acts if p["process"] == "scoring actor")  # type: ignore
            lim_cpu = sum(p["cpu_after_first_s"] for p in acts if p["process"] == "limiter")        # type: ignore
            parts = [f"driver {1e6 * r['driver_cpu_after_first_s'] / n:.0f}"]            # type: ignore[operator]
            if acts:
                parts += [f"scoring actors {1e6 * scoring / n:.0f} (all together)", f"limiter {1e6 * lim_cpu / n:.0f}"]
            parts.append(f"endpoint {1e6 * r['endpoint_cpu_s'] / float(r['rows']):.0f} (whole run)")  # type: ignore
            print(f"  {engine:<6} " + ", ".join(parts))
        if "local" in best and "ray" in best:
            print(f"ray / local: {best['ray']['rows_per_s'] / best['local']['rows_per_s']:.2f}x")   # type: ignore
        lim = best.get("ray", {}).get("limiter") or {}
        if lim:
            print(f"limiter: {lim.get('granted', 0):,} leases in {lim.get('actor_calls', 0):,} actor calls, "
                  f"peak {lim.get('peak_in_flight', 0)} in flight")   # type: ignore[union-attr]
        print(json.dumps(best))
    finally:
        proc.terminate()
        proc.wait()
        tmp.cleanup()


if __name__ == "__main__":
    main()
