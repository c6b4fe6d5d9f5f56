"""Hostile text through every command that prints data (issue 13, item 3), as real processes.

The corpus is ``tests/fixtures/hostile/``: ``strings.json`` names each hostile string (Rich markup such as
``[/b]`` and ``[link=…]``, an OSC title change, CSI and C1 sequences, bidi overrides, NUL, DEL, quotes) with
the text a reader should see once it is printed; ``rows_a.jsonl`` / ``rows_b.jsonl`` carry them in row ids,
queries and answers (b scores worse, so ``compare`` lists every row); ``quoted.csv`` has them in quoted CSV
cells with raw escape bytes; ``dup_header.csv`` and ``latin1.jsonl`` are bad input; ``utf16.jsonl`` (with a BOM) is read. File names,
run names and model names made of the same strings are made here.

Every command must: exit with the expected code, print no traceback, write nothing a terminal would act on
(ESC, C1, other C0 controls but newline and tab, DEL, bidi overrides; output that is valid UTF-8), and still
show the data, escaped, as text.
"""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assay.bench.kinds import store_benchmark
from tests.helpers.leaderboard_data import build_board_store
from tests.helpers.perfdata import make_run

HOSTILE = Path(__file__).resolve().parent / "fixtures" / "hostile"
STRINGS: dict[str, dict[str, str]] = json.loads((HOSTILE / "strings.json").read_text(encoding="utf-8"))
T = {k: v["text"] for k, v in STRINGS.items()}

# what no output may hold: C0 controls but newline and tab, DEL, C1 controls, bidi embeddings/overrides/isolates
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

# names (no NUL: it cannot be in a command line) and what a reader sees of them
NAME_A = T["markup_close_bold"] + T["osc_title"] + T["c1_csi"] + " A"
SEEN_A = "[/bold]c1 A"
NAME_B = "[link=https://evil.example]B[/link]" + T["bidi_override"] + T["csi_clear"]
SEEN_B = "[link=https://evil.example]B[/link]abcdcba"
MODEL = T["markup_close"] + T["osc_title"] + "[link=https://evil.example]m[/link]" + T["bidi_isolate"] + T["c1_csi"]
SEEN_MODEL = "[/b][link=https://evil.example]m[/link]isolatedc1"
# a file name (no "/" in it) with markup, an OSC sequence and a byte that is not UTF-8 (shown as \xff)
FILE_NAME = "[b]" + T["osc_title"] + os.fsdecode(b"\xff") + "[red].jsonl"
SEEN_FILE = "[b]\\xff[red].jsonl"


def _env(store: Path | str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env["ASSAY_STORE"] = str(store)
    return env


def check_clean(text: str, what: str) -> None:
    bad = sorted({f"U+{ord(c):04X}" for c in FORBIDDEN.findall(text)})
    assert not bad, f"{what} holds control characters {bad}:\n{text[-3000:]}"


def assay(*args: str, store: Path | str, rc: int = 0, cwd: Path | None = None) -> tuple[str, str]:
    """Run ``python -m assay.cli ARGS``; check its exit code, that there is no traceback and no control
    character in what it printed; its stdout and stderr."""
    p = subprocess.run([sys.executable, "-m", "assay.cli", *args], capture_output=True, env=_env(store), cwd=cwd,
                       stdin=subprocess.DEVNULL, timeout=300)
    out, err = p.stdout.decode("utf-8"), p.stderr.decode("utf-8")        # strict: valid UTF-8 or it fails here
    assert "Traceback" not in out + err, err[-3000:]
    assert p.returncode == rc, f"exit {p.returncode}, expected {rc}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
    check_clean(out, "stdout")
    check_clean(err, "stderr")
    return out, err


def _squash(text: str) -> str:
    return "".join(text.split())


def shows(text: str, output: str) -> bool:
    """Whether ``text`` is in ``output`` as a reader sees it: table cells folded over several lines are
    joined up column by column, and spaces do not count (a fold drops them)."""
    columns: dict[int, list[str]] = {}
    lines = []
    for line in output.splitlines():
        if "│" in line or "┃" in line:
            for i, cell in enumerate(re.split("[│┃]", line)[1:-1]):
                columns.setdefault(i, []).append(cell)
        else:
            lines.append(line)
    seen = [_squash("".join(lines))] + [_squash("".join(c)) for c in columns.values()]
    return any(_squash(text) in s for s in seen)


def in_terminal(*args: str, store: Path | str) -> tuple[int, str]:
    """Run the command with a pseudo-terminal as stdout and stderr (Rich styles its output then)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "assay.cli", *args], stdout=slave, stderr=slave,
                         stdin=subprocess.DEVNULL, env=_env(store))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:                                  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return p.wait(timeout=300), b"".join(chunks).decode("utf-8")


# -- the evaluation commands ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """A store with two runs over the corpus rows, named NAME_A (all right) and NAME_B (worse)."""
    d = tmp_path_factory.mktemp("hostile-runs")
    store = str(d / "assay.db")
    ids = {}
    for name, rows in ((NAME_A, "rows_a.jsonl"), (NAME_B, "rows_b.jsonl")):
        out, _ = assay("eval", str(HOSTILE / rows), "-m", "f1_score,exact_match", "-q", "--name", name, store=store)
        seen = SEEN_A if name == NAME_A else SEEN_B
        assert f"({seen}) saved in" in out
        ids[name] = re.search(r"^run ([0-9a-f]{12}) ", out, re.M).group(1)
    return {"store": store, "dir": str(d), "a": ids[NAME_A], "b": ids[NAME_B]}


def test_runs_lists_hostile_names_as_text(runs):
    out, _ = assay("runs", store=runs["store"])
    assert SEEN_A in out and SEEN_B in out and runs["a"] in out and runs["b"] in out
    out, _ = assay("runs", "--name", NAME_B, store=runs["store"])
    assert SEEN_B in out and runs["b"] in out and runs["a"] not in out


@pytest.mark.parametrize("ref", ["a-name", "b-id"])
def test_show_a_run_with_a_hostile_name(runs, ref):
    which, by = ref.split("-")
    name, seen = (NAME_A, SEEN_A) if which == "a" else (NAME_B, SEEN_B)
    out, _ = assay("show", name if by == "name" else runs[which], store=runs["store"])
    assert f"run {runs[which]} ({seen}): completed" in out
    assert "rows_" in out and "f1_score" in out


def test_compare_lists_hostile_row_ids_and_queries(runs):
    out, _ = assay("compare", NAME_A, NAME_B, "--worst", str(len(T) + 1), store=runs["store"])
    assert SEEN_A in out and SEEN_B in out and f"rows worse in {SEEN_B}" in out
    for key, s in STRINGS.items():
        assert shows(f"{key}={s['shows']}".rstrip("\\"), out), key   # the row id as a reader sees it
        assert shows(f"{key}? {s['shows']}".rstrip("\\"), out), key   # its query


def test_the_terminal_gets_styles_only(runs):
    """With a terminal, Rich styles the output (SGR sequences); nothing from the data becomes an escape
    sequence: no OSC (title, hyperlink), no other CSI, no C1 control."""
    for args, names in ((("compare", NAME_A, NAME_B, "--worst", "30"), (SEEN_A, SEEN_B)), (("show", NAME_A), (SEEN_A,)),
                        (("runs",), (SEEN_A, SEEN_B))):
        rc, text = in_terminal(*args, store=runs["store"])
        assert rc == 0, text[-3000:]
        assert "Traceback" not in text
        assert "\x1b[" in text, "not styled: the pseudo-terminal was not taken for a terminal"
        rest = re.sub(r"\x1b\[[0-9;]*m", "", text)                     # the styles Rich writes
        check_clean(rest.replace("\r", ""), f"assay {args[0]} in a terminal")
        assert all(shows(n, rest) for n in names), rest[-3000:]


def test_export_report_and_delete_name_hostile_paths(runs, tmp_path):
    path = tmp_path / "[b]\x1b]0;T\x07[link=x]e.jsonl"
    out, _ = assay("export", NAME_A, "-o", str(path), store=runs["store"])
    assert "wrote" in out and "[b][link=x]e.jsonl" in out
    assert path.read_text(encoding="utf-8").count("\n") == len(T)
    html = tmp_path / "[bold]\x9b31mreport.html"
    out, _ = assay("report", NAME_B, "-o", str(html), store=runs["store"])
    assert "[bold]report.html" in out and html.exists()
    # not on a terminal, without --yes: one line, exit 2
    _, err = assay("delete", NAME_B, store=runs["store"], rc=2)
    assert "--yes" in err and len(err.strip().splitlines()) == 1


def test_delete_prints_what_it_deleted(tmp_path):
    store = str(tmp_path / "assay.db")
    out, _ = assay("eval", str(HOSTILE / "quoted.csv"), "-m", "f1_score", "-q", "--name", NAME_B, store=store)
    run_id = re.search(r"^run ([0-9a-f]{12}) ", out, re.M).group(1)
    out, _ = assay("delete", NAME_B, "--yes", store=store)
    assert f"deleted run {run_id}" in out
    out, _ = assay("runs", store=store)
    assert run_id not in out


def test_eval_of_quoted_csv_with_raw_escape_bytes(tmp_path):
    out, _ = assay("eval", str(HOSTILE / "quoted.csv"), "-m", "f1_score,exact_match", "-q", store=tmp_path / "s.db")
    assert "7 read, 7 evaluated" in out


def test_a_hostile_file_name_and_run_name(tmp_path):
    data = tmp_path / FILE_NAME
    shutil.copy(HOSTILE / "rows_a.jsonl", data)
    long_name = "[/b]" * 1500 + T["osc_title"]
    store = tmp_path / "s.db"
    out, _ = assay("eval", str(data), "-m", "f1_score", "-q", "--name", long_name, "--out",
                   str(tmp_path / ("out" + T["osc_title"] + os.fsdecode(b"\xfe"))), store=store)
    assert f"{len(T)} read, {len(T)} evaluated" in out and "results written to" in out and "out\\xfe/" in out
    out, _ = assay("runs", store=store)
    assert SEEN_FILE in out
    out, _ = assay("show", long_name, store=store)
    assert "[/b]" * 1500 in out.replace("\n", "") and SEEN_FILE in out


@pytest.mark.parametrize("args,seen", [
    (["-m", "[/x]" + T["osc_title"] + T["c1_csi"]], "unknown metric '[/x]"),
    (["--map", "[/b]" + T["osc_title"] + "=response"], "unknown field '[/b]"),
    (["--name", "n", "--resume-from", "[/bold]" + T["osc_title"]], "no run '[/bold]"),
], ids=["metric", "map", "resume-from"])
def test_bad_input_quoting_hostile_text_is_one_clean_line(tmp_path, args, seen):
    _, err = assay("eval", str(HOSTILE / "rows_a.jsonl"), "-q", *args, store=tmp_path / "s.db", rc=2)
    assert err.startswith("error: ") and seen in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name,seen", [
    ("dup_header.csv", "the header names column '[/b]' twice"),
    ("latin1.jsonl", "latin1.jsonl"),
    (FILE_NAME, SEEN_FILE),                                   # no such file, named as a reader sees it
])
def test_bad_files_are_one_clean_line(tmp_path, name, seen):
    path = HOSTILE / name if (HOSTILE / name).exists() else tmp_path / name
    _, err = assay("eval", str(path), "-m", "f1_score", "-q", store=tmp_path / "s.db", rc=2)
    assert err.startswith("error: ") and seen in err
    assert len(err.strip().splitlines()) == 1


def test_a_utf16_file_is_read_and_its_text_kept(tmp_path):
    out, _ = assay("eval", str(HOSTILE / "utf16.jsonl"), "-m", "f1_score", "-q", "-o", str(tmp_path / "o"),
                   store=tmp_path / "s.db")
    assert "rows: 1 read, 1 evaluated" in out
    assert "caf\u00e9 [/b]" in (tmp_path / "o" / "rows.jsonl").read_text(encoding="utf-8")


def test_metrics_lists_the_registry_cleanly(tmp_path):
    out, _ = assay("metrics", store=tmp_path / "s.db")
    assert "f1_score" in out and "group" in out


def test_simulate_names_a_hostile_output_file(tmp_path):
    (tmp_path / "hostile_app.py").write_text(
        "def chat(query, history=None, contexts=None):\n"
        f"    return {{'response': {T['osc_title'] + T['markup_close'] + T['c1_osc']!r}}}\n", encoding="utf-8")
    out_file = "[b]" + T["osc_title"] + "[link=x]set.jsonl"
    out, _ = assay("simulate", "adversarial", "--target", "hostile_app:chat", "--scenario", "adv_qa", "--max", "2",
                   "--out", out_file, store=tmp_path / "s.db", cwd=tmp_path)
    assert "2 conversation(s) written to [b][link=x]set.jsonl" in out
    out, _ = assay("eval", out_file, "-m", "token_count", "-q", store=tmp_path / "s.db", cwd=tmp_path)
    assert "2 read, 2 evaluated" in out


# -- the benchmark commands ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def benches(tmp_path_factory) -> dict[str, str]:
    """The leaderboard test store with a model named MODEL (quality, perf and embed results), and two
    perf runs of MODEL with hostile names on a hostile track."""
    d = tmp_path_factory.mktemp("hostile-bench")
    info = build_board_store(d, hostile=MODEL)
    st = info["store"]
    refs = {}
    for who, speed in ((NAME_A, 1.0), (NAME_B, 1.5)):
        s, x = make_run(name=who, model=MODEL, levels=(1, 4), n=40, seed=int(speed * 10), speed=speed, track=NAME_A)
        refs[who] = store_benchmark(st, "perf", s, x)
    found = {k: {r["name"]: r["ref"] for r in st.list_benchmarks(kind=k, details=False)} for k in ("quality", "embed")}
    st.close()
    sys.path.remove(info["syspath"])
    return {"store": info["path"], "perf_a": refs[NAME_A], "perf_b": refs[NAME_B], "prices": str(info["prices"]),
            "quality": found["quality"]["hostile"], "embed": found["embed"]["hostile embed"],
            "embed_other": next(r for n, r in found["embed"].items() if n != "hostile embed" and "mini" not in n)}


def test_bench_list_and_show(benches):
    out, _ = assay("bench", "list", store=benches["store"])
    assert shows(SEEN_MODEL, out) and shows(SEEN_A, out) and shows(SEEN_B, out)
    assert benches["perf_a"] in out and benches["quality"] in out and benches["embed"] in out
    for ref in ("perf_a", "quality", "embed"):
        out, _ = assay("bench", "show", benches[ref], store=benches["store"])
        assert f"model {SEEN_MODEL}" in out, ref
    out, _ = assay("bench", "show", benches["perf_b"], store=benches["store"])
    assert f"({SEEN_B})" in out


def test_bench_compare_and_track(benches):
    out, _ = assay("bench", "compare", benches["perf_a"], benches["perf_b"], store=benches["store"])
    assert f"({SEEN_A})" in out and f"({SEEN_B})" in out and SEEN_MODEL in out
    out, _ = assay("bench", "compare", benches["embed_other"], benches["embed"], store=benches["store"])
    assert SEEN_MODEL in out
    out, _ = assay("bench", "track", NAME_A, store=benches["store"])
    assert f"track {SEEN_A}: 2 run(s)" in out and SEEN_MODEL in out
    _, err = assay("bench", "show", NAME_A + "-nope", store=benches["store"], rc=2)
    assert "no benchmark '[/bold]" in err and len(err.strip().splitlines()) == 1


def test_bench_leaderboard_and_cost(benches):
    out, _ = assay("bench", "leaderboard", "--wide", "--prices", benches["prices"], store=benches["store"])
    assert SEEN_MODEL in out
    out, _ = assay("bench", "cost", "--runs", "--prices", benches["prices"], store=benches["store"])
    assert shows(SEEN_MODEL, out) and shows(SEEN_A, out)


def test_json_output_keeps_the_data_exactly_without_raw_controls(benches):
    """--json writes the data as it is, with the characters a terminal acts on as \\u escapes."""
    out, _ = assay("bench", "list", "--json", store=benches["store"])
    assert MODEL in {r["model"] for r in json.loads(out)}
    assert "\\u001b]0;" in out and "\\u009b" in out and "\\u2066" in out
    out, _ = assay("bench", "leaderboard", "--json", store=benches["store"])
    assert MODEL in {r["model"] for r in json.loads(out)["rows"]}


# -- the helper itself ---------------------------------------------------------------------------------

@pytest.mark.parametrize("key", list(STRINGS))
def test_safe_prints_what_a_reader_should_see(key):
    """Each corpus string, printed through Rich inside markup, shows its ``shows`` text and nothing more."""
    from rich.console import Console

    from assay.cli.common import safe

    con = Console(width=400, record=True, file=open(os.devnull, "w"), emoji=False, color_system=None)
    con.print(f"<[bold]{safe(T[key])}[/bold]>", soft_wrap=True, highlight=False)
    shown = con.export_text()
    assert shown == f"<{STRINGS[key]['shows']}>\n", shown


def test_a_progress_stage_named_from_data_is_text(monkeypatch):
    """Stage labels can name a task from the user's files (``embedding TASK``); on a terminal the bar shows
    them as text."""
    import io

    from rich.console import Console

    from assay.cli import common

    buf = io.StringIO()
    monkeypatch.setattr(common, "err", Console(file=buf, force_terminal=True, width=120, emoji=False))
    with common.stage_progress(quiet=False) as update:
        update("embedding " + T["markup_close"] + T["osc_title"], 1, 3)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())            # the bar's own styles and moves
    assert "embedding [/b]" in shown
    check_clean(shown.replace("\r", ""), "the progress bar")


def test_a_usage_error_quoting_the_command_line_is_plain(capsys):
    """An unknown option or command is quoted back by click's message (``main()`` shows it): without its
    control characters (typer's click writes them as \\x escapes)."""
    from assay.cli.main import app

    for args in (["eval", "x.jsonl", "--bo[/b]gus" + T["osc_title"]], ["ev[/b]al" + T["c1_osc"], "x.jsonl"]):
        with pytest.raises(Exception) as info:
            app(args=args, standalone_mode=False)
        info.value.show()
        err = capsys.readouterr().err
        assert "Error:" in err and ("--bo[/b]gus" in err or "ev[/b]al" in err), err
        check_clean(err, "the usage error")
