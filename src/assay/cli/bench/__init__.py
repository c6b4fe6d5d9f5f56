"""``assay bench ...``: model benchmarks, one module per kind — ``perf`` (serving performance),
``quality`` (quality on tasks), ``embed`` (embedding models) — plus ``leaderboard`` and ``cost``;
the kind modules never import each other. This group mounts their commands and holds the three
that read stored runs of every kind (``list``, ``show``, ``compare``), handing each run to its
kind's module."""

from __future__ import annotations

import typer

from assay.cli.bench import cost, embed, leaderboard, perf, quality
from assay.cli.common import STORE_OPT, open_store, out, print_json, safe, text_arg
from assay.errors import AssayError

app = typer.Typer(no_args_is_help=True, help="Benchmark models: serving performance, cost, quality on tasks, "
                  "embedding models.")
app.command("quality")(quality.quality_cmd)
app.command("embed")(embed.embed_cmd)
app.command("leaderboard")(leaderboard.leaderboard_cmd)
app.command("perf")(perf.perf_cmd)
app.command("cost")(cost.cost_cmd)

_JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of tables.")
# each kind whose stored runs `bench list` and `bench show` read: (its list table, its show), in the
# order `bench list` prints the tables; STORED_KINDS is the order the runs are read (and --json lists them)
VIEWS = {"quality": (quality.quality_list_table, quality.show_quality),
         "embed": (embed.embed_list_table, embed.show_embed),
         "perf": (perf.perf_list_table, perf.show_perf)}
STORED_KINDS = ("perf", "quality", "embed")


@app.command("list")
def stored_list_cmd(
    kind: str = typer.Option("all", "--kind", help="perf, quality, embed or all."),
    model: str | None = typer.Option(None, "--model", help="Only runs of this model."),
    track: str | None = typer.Option(None, "--track", help="Only the scheduled repeats of this track."),
    limit: int = typer.Option(30, "--limit", help="At most this many runs of each kind, newest first."),
    as_json: bool = _JSON_OPT,
    store: str | None = STORE_OPT,
) -> None:
    """List the stored benchmark runs (serving performance, quality, embedding), newest first."""
    if kind != "all" and kind not in STORED_KINDS:
        raise AssayError(f"--kind must be {', '.join(STORED_KINDS)} or all, not {kind!r}")
    st = open_store(store)
    kinds = STORED_KINDS if kind == "all" else (kind,)
    model, track = text_arg(model), text_arg(track)
    found = {k: st.list_benchmarks(kind=k, model=model, track=track, limit=limit, details=False) for k in kinds}
    if as_json:
        print_json([{"kind": k, **{f: r.get(f) for f in ("ref", "id", "name", "model", "task", "created_at", "track",
                                                          "metrics")}}
                    for k in kinds for r in found[k]])
        return
    if not any(found.values()):
        what = "benchmark" if kind == "all" else kind
        out.print(f"no {what} runs in {safe(st.display_url)}" + (" match" if model or track else ""), highlight=False)
        return
    for k, (table, _) in VIEWS.items():
        if found.get(k):
            out.print(table(found[k], st.display_url))


@app.command("show")
def stored_show_cmd(
    ref: str = typer.Argument("latest", help="Run ref, ref prefix, name (its latest run) or 'latest'."),
    as_json: bool = _JSON_OPT,
    store: str | None = STORE_OPT,
) -> None:
    """Show one stored benchmark run of any kind.

    A perf run's percentiles with 95% intervals, throughput, failures and validity per point; a
    quality run's index and per-task scores; an embedding run's main scores."""
    rec = open_store(store).get_benchmark(text_arg(ref))
    if rec.get("kind") not in VIEWS:
        raise AssayError(f"benchmark {rec.get('ref')} is a {rec.get('kind')} result; bench show reads "
                         f"{', '.join(STORED_KINDS[:-1])} and {STORED_KINDS[-1]} runs")
    VIEWS[rec["kind"]][1](rec, as_json)


@app.command("compare")
def stored_compare_cmd(
    ref_a: str = typer.Argument(..., help="Run A, the baseline (ref, prefix, name or 'latest')."),
    ref_b: str = typer.Argument(..., help="Run B, compared with A."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    resamples: int = typer.Option(1000, "--resamples", help="Bootstrap resamples of each run."),
    as_json: bool = _JSON_OPT,
    store: str | None = STORE_OPT,
) -> None:
    """Compare two stored benchmark runs of one kind, with intervals and verdicts.

    Perf runs point by point (B − A, B / A, 95% bootstrap intervals, verdicts); quality runs item by
    item (McNemar's exact test, paired bootstrap); embedding runs task by task on the same units
    (paired bootstrap)."""
    ref_a, ref_b = text_arg(ref_a), text_arg(ref_b)
    kind_a = open_store(store).get_benchmark(ref_a).get("kind")
    if kind_a == "quality":
        quality.compare_quality_cmd(ref_a, ref_b, seed=seed, as_json=as_json, store=store)
        return
    if resamples < 100:
        raise AssayError("--resamples must be at least 100")
    if kind_a == "embed":
        embed.compare_embed_cmd(ref_a, ref_b, seed=seed, resamples=resamples, as_json=as_json, store=store)
        return
    perf.compare_perf_cmd(ref_a, ref_b, seed=seed, resamples=resamples, as_json=as_json, store=store)


app.command("track")(perf.track_cmd)

__all__ = ["app"]
