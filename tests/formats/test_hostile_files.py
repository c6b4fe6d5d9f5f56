"""Hostile input files: a mapping to a column no row has, CSV quotes never closed and rows
with too few cells, streams (a FIFO, standard input, /dev/fd/N) that can be read only once,
and text that is not UTF-8. Each ends in one line naming the file, the line (or the byte
offset) and the problem, or, with skip, in the rows that can be read."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import assay
from assay.errors import InputError
from assay.formats import open_dataset
from assay.store import Store

TIMEOUT = 50  # seconds a real process gets: a hang (a stream read twice) fails the test


def cli(*args, cwd=None, input=None, env=None, **kw):
    p = subprocess.run([sys.executable, "-m", "assay.cli", *args], capture_output=True, cwd=cwd, input=input,
                       env=env, timeout=TIMEOUT, **kw)
    out, err = p.stdout.decode(), p.stderr.decode()
    assert "Traceback" not in err, err
    return p.returncode, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def first_error(path, **kw) -> InputError:
    with pytest.raises(InputError) as ei:
        list(open_dataset(path, **kw))
    assert "\n" not in str(ei.value)
    return ei.value


def write(tmp_path, name, data) -> Path:
    p = tmp_path / name
    (p.write_bytes if isinstance(data, bytes) else p.write_text)(data)
    return p


ROWS = [{"query": f"q{i}", "response": f"answer {i}", "ground_truth": f"answer {i % 3}"} for i in range(6)]
JSONL = "".join(json.dumps(r) + "\n" for r in ROWS)


# --------------------------------------------------------------------------- --map

def test_map_to_a_column_no_row_has_exits_2_naming_the_column_and_the_file(tmp_path):
    f = write(tmp_path, "m.jsonl", JSONL)  # has `response`, no `response_v3`
    for spec in ("response=response_v3", "response=${data.response_v3}"):
        rc, out, err = cli("eval", str(f), "-m", "f1_score", "--map", spec, "-q")
        line = one_error_line(err)
        assert rc == 2, (rc, out, err)
        assert str(f) in line and "'response_v3'" in line and "no row has" in line, line
        assert "the first 6 rows" in line and "ground_truth, query, response" in line
        assert "assay results" not in out  # nothing was scored


def test_map_check_covers_nested_paths_rows_that_lack_the_column_and_targets():
    rows = [{"item": {"question": "q"}, "out": "a"}, {"out": "b"}]
    # a column (or nested path) that some row has is fine, even if others lack it
    res = assay.evaluate(rows, metrics="token_count", mapping={"query": "${data.item.question}",
                                                               "response": "out"}, store=False)
    assert res.run["rows_evaluated"] == 2
    with pytest.raises(InputError) as ei:
        assay.evaluate(rows, metrics="token_count", mapping={"query": "item.prompt", "response": "out"},
                       store=False)
    assert ei.value.source == "<list>" and ei.value.field == "query" and "'item.prompt'" in str(ei.value)
    # ${target.x} names the target's output: with a target it is not looked for in the data
    res = assay.evaluate([{"query": "hi"}], target=lambda query: "echo " + query, metrics="token_count",
                         mapping={"response": "${target.response}"}, store=False)
    assert res.rows[0]["inputs.response"] == "echo hi"
    with pytest.raises(InputError, match="'response'"):
        assay.evaluate([{"query": "hi"}], metrics="token_count", mapping={"response": "${target.response}"},
                       store=False)


# --------------------------------------------------------------------------- CSV

def test_csv_unterminated_quote_names_its_line_and_skip_keeps_the_rows_after_it(tmp_path):
    p = write(tmp_path, "u.csv", 'query,response,ground_truth\n"q,b,b\nq2,r2,r2\nq3,r3,r3\nq4,r4,r4\n')
    e = first_error(p)
    assert (e.source, e.line) == (str(p), 2)
    assert "unterminated quote" in str(e) and "line 5" in str(e)
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q2", "q3", "q4"]
    assert ds.rows_read == 4 and [b.line for b in ds.bad_rows] == [2]

    rc, out, err = cli("eval", str(p), "-m", "f1_score", "-q")
    assert rc == 2 and f"{p}, line 2: unterminated quote" in one_error_line(err)
    rc, out, err = cli("eval", str(p), "-m", "f1_score", "-q", "--on-bad-row", "skip")
    assert rc == 0, err
    assert "4 read, 3 evaluated, 1 skipped" in out and "line 2: unterminated quote" in out


def test_csv_quote_closed_by_a_later_rows_quote_is_an_error_not_a_merged_row(tmp_path):
    p = write(tmp_path, "u.csv", 'query,response\n"q,b\nq2,r2\nq3,"r3"\nq4,r4\n')
    e = first_error(p)
    assert e.line == 2 and "malformed CSV on line 4, in the row that starts on this line" in str(e)
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q4"] and [b.line for b in ds.bad_rows] == [2]
    p = write(tmp_path, "after.csv", 'query,response\n"ab"c,d\ne,f\n')  # text after a closing quote
    assert first_error(p).line == 2
    assert [r.query for r in open_dataset(p, on_bad_row="skip")] == ["e"]


def test_csv_row_with_too_few_cells_is_an_error_like_too_many(tmp_path):
    p = write(tmp_path, "few.csv", "query,response,ground_truth\nq1,r1\nq2,r2,g2\nq3,r3,g3,x\n  \n\nq5,r5,g5\n")
    e = first_error(p)
    assert str(e) == f"{p}, line 2: the row has 2 cells but the header has 3 columns"
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q2", "q5"]  # blank and whitespace-only lines are not rows
    assert [(b.line, b.detail) for b in ds.bad_rows] == [
        (2, "the row has 2 cells but the header has 3 columns"),
        (4, "the row has 4 cells but the header has 3 columns")]
    rc, _, err = cli("eval", str(p), "-m", "f1_score", "-q")
    assert rc == 2 and one_error_line(err) == f"error: {p}, line 2: the row has 2 cells but the header has 3 columns"


def test_csv_multiline_cells_and_old_mac_line_ends_still_read(tmp_path):
    p = write(tmp_path, "ok.csv", b'query,response\r\n"two\r\nlines",r1\r\nq2,"a\rb"\r\n')
    assert [(r.query, r.response) for r in open_dataset(p)] == [("two\r\nlines", "r1"), ("q2", "a\rb")]
    p = write(tmp_path, "mac.csv", b"query,response\rq1,r1\rq2,r2\r")
    assert [r.query for r in open_dataset(p)] == ["q1", "q2"]


# --------------------------------------------------------------------------- encodings

def test_invalid_utf8_names_the_encoding_and_the_byte_offset(tmp_path):
    good = b'{"query": "q%d", "response": "a", "ground_truth": "a"}\n'
    bad = b'{"query": "q2", "response": "caf\xe9", "ground_truth": "a"}\n'   # Latin-1 e-acute
    p = write(tmp_path, "bad.jsonl", good % 1 + bad + good % 3)
    e = first_error(p)
    at = len(good % 1) + bad.index(b"\xe9")
    assert e.line == 2 and f"not valid UTF-8 at byte offset {at} (byte 0xe9" in str(e), str(e)
    ds = open_dataset(p, on_bad_row="skip")
    assert [r.query for r in ds] == ["q1", "q3"] and [b.line for b in ds.bad_rows] == [2]
    rc, _, err = cli("eval", str(p), "-m", "f1_score", "-q")
    assert rc == 2 and f"line 2: not valid UTF-8 at byte offset {at}" in one_error_line(err)
    assert "surrogates" not in err

    raw = b"query,response\nq1,r1\nq2,caf\xe9\nq3,r3\n"
    c = write(tmp_path, "bad.csv", raw)
    e, at = first_error(c), raw.index(b"\xe9")
    assert e.line == 3 and f"not valid UTF-8 at byte offset {at} " in str(e), str(e)
    assert [r.query for r in open_dataset(c, on_bad_row="skip")] == ["q1", "q3"]

    raw = b'[\n {"query": "q1"},\n {"query": "\xff"}\n]\n'
    e = first_error(write(tmp_path, "bad.json", raw))
    at = raw.index(b"\xff")
    assert e.line == 3 and f"not valid UTF-8 at byte offset {at} (byte 0xff: invalid start byte)" in str(e), str(e)


@pytest.mark.parametrize("codec,bom", [("utf-16-le", True), ("utf-16-be", True), ("utf-32-le", True),
                                       ("utf-32-be", True), ("utf-16-le", False), ("utf-16-be", False)])
def test_utf16_and_utf32_files_are_read(tmp_path, codec, bom):
    def enc(text):
        return (("\ufeff" + text) if bom else text).encode(codec)

    rows = [{"query": "ça va?", "response": "très bien 😀", "ground_truth": "bien"}, {"query": "q2"}]
    jl = write(tmp_path, "d.jsonl", enc("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows)))
    js = write(tmp_path, "d.json", enc(json.dumps(rows, ensure_ascii=False, indent=1)))
    cs = write(tmp_path, "d.csv", enc('query,response\r\nça va?,"très\r\nbien 😀"\r\nq2,\r\n'))
    for p in (jl, js, cs):
        recs = list(open_dataset(p))
        assert [r.query for r in recs] == ["ça va?", "q2"], p
        assert recs[0].response.replace("\r\n", " ") == "très bien 😀"


def test_invalid_utf16_names_the_encoding_the_byte_offset_and_the_line(tmp_path):
    text = '{"query": "q1"}\n{"query": "q2"}\n'.encode("utf-16-le")
    at = 2 + len(text)                                     # after the BOM and two good lines
    p = write(tmp_path, "bad16.jsonl", b"\xff\xfe" + text + b"\x00\xd8" + '"}\n'.encode("utf-16-le"))  # a lone surrogate
    e = first_error(p)
    assert e.line == 3 and f"not valid UTF-16 (little-endian) at byte offset {at}" in str(e), str(e)
    rc, _, err = cli("eval", str(p), "-m", "token_count", "-q")
    assert rc == 2 and "UTF-16" in one_error_line(err) and f"byte offset {at}" in err


# --------------------------------------------------------------------------- streams

def _run_id(out: str) -> str:
    return re.search(r"^run ([0-9a-f]+)", out, re.M).group(1)


def test_a_fifo_is_read_once_and_fingerprinted_while_read(tmp_path):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    spool_dir = tmp_path / "tmp"
    spool_dir.mkdir()
    store = tmp_path / "s.db"
    env = {**os.environ, "TMPDIR": str(spool_dir)}
    proc = subprocess.Popen([sys.executable, "-m", "assay.cli", "eval", str(fifo), "-m", "f1_score",
                             "--store", str(store), "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env)
    try:
        with open(fifo, "w") as w:  # blocks until assay opens the FIFO; then the only writer, once
            w.write(JSONL)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode()
    assert "6 read, 6 evaluated" in out.decode()
    run = Store(str(store)).get_run(_run_id(out.decode()))
    assert run["data_fingerprint"] == hashlib.sha256(b"\0" + JSONL.encode()).hexdigest()
    assert list(spool_dir.iterdir()) == []  # the stream's copy is gone


def test_stdin_dash_and_dev_stdin_with_format(tmp_path):
    store = str(tmp_path / "s.db")
    fps = []
    for arg in ("-", "/dev/stdin"):
        rc, out, err = cli("eval", arg, "--format", "jsonl", "-m", "f1_score", "--store", store,
                           input=JSONL.encode())
        assert rc == 0, err
        assert "6 read, 6 evaluated" in out
        fps.append(Store(store).get_run(_run_id(out))["data_fingerprint"])
    assert fps[0] == fps[1] == hashlib.sha256(b"\0" + JSONL.encode()).hexdigest()
    csv_text = "query,response,ground_truth\nq1,a,a\nq2,b,c\n"
    rc, out, err = cli("eval", "-", "--format", "csv", "-m", "f1_score", "--store", store, input=csv_text.encode())
    assert rc == 0 and "2 read, 2 evaluated" in out, err
    rc, out, err = cli("eval", "/dev/stdin", "-m", "f1_score", "--store", store, input=JSONL.encode())
    assert rc == 2 and "--format" in one_error_line(err) and "/dev/stdin" in err
    rc, out, err = cli("eval", "-", "--format", "yaml", "-m", "f1_score", input=b"")
    assert rc == 2 and "unknown format 'yaml'" in one_error_line(err)
    rc, out, err = cli("eval", "-", "--format", "jsonl", "-m", "f1_score", input=b"")
    assert rc == 2 and one_error_line(err) == "error: <stdin>: the stream is empty: no rows"


def test_dev_fd_as_from_process_substitution(tmp_path):
    r, w = os.pipe()
    os.write(w, JSONL.encode())  # fits the pipe's buffer
    os.close(w)
    try:
        rc, out, err = cli("eval", f"/dev/fd/{r}", "--format", "jsonl", "-m", "f1_score", pass_fds=(r,))
    finally:
        os.close(r)
    assert rc == 0, err
    assert "6 read, 6 evaluated" in out


RESUME_SCRIPT = textwrap.dedent('''
    import json, os, sys, threading
    import assay
    from assay.engine import run as engine_run
    from assay.store import Store

    fifo, db = sys.argv[1], sys.argv[2]
    data = open(sys.argv[3], "rb").read()
    engine_run.CHUNK = 8
    boom = {"at": 43}

    @assay.metric(name="explodes_once", kind="custom")
    def explodes_once(response: str) -> float:
        if boom["at"] is not None and response == f"answer {boom['at']}":
            boom["at"] = None
            raise KeyboardInterrupt
        return float(len(response))

    def feed():
        with open(fifo, "wb") as w:
            w.write(data)

    st = Store(db)
    t = threading.Thread(target=feed); t.start()
    try:
        assay.evaluate(fifo, metrics="explodes_once", store=st, name="cut", workers=1)
    except KeyboardInterrupt:
        pass
    t.join()
    cut = st.get_run("cut")
    t = threading.Thread(target=feed); t.start()
    res = assay.evaluate(fifo, metrics="explodes_once", store=st, name="cut", resume=True, workers=1)
    t.join()
    print(json.dumps({"cut": [cut["status"], cut["rows_done"], cut["id"]], "run_id": res.run["run_id"],
                      "resumed_rows": res.run["resumed_rows"], "rows": len(res.rows),
                      "status": st.get_run(cut["id"])["status"]}))
''')


def test_a_run_over_a_fifo_resumes_over_the_same_bytes(tmp_path):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    data = tmp_path / "data"
    data.write_text("".join(json.dumps({"query": f"q{i}", "response": f"answer {i}"}) + "\n" for i in range(100)))
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    p = subprocess.run([sys.executable, str(script), str(fifo), str(tmp_path / "s.db"), str(data)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    status, done, cut_id = got["cut"]
    assert status == "interrupted" and 0 < done <= 40
    assert got["run_id"] == cut_id and got["resumed_rows"] == done
    assert got["rows"] == 100 and got["status"] == "completed"


def test_format_option_rules(tmp_path):
    p = write(tmp_path, "rows.txt", JSONL)
    assert len(list(open_dataset(p, format="ndjson"))) == 6
    with pytest.raises(InputError, match=r"unsupported file type '\.txt'.*--format"):
        open_dataset(p)
    with pytest.raises(InputError, match="folder"):
        open_dataset(tmp_path, format="jsonl")
    with pytest.raises(InputError, match="rows in memory"):
        open_dataset(ROWS, format="jsonl")


def test_a_stream_is_never_read_twice_in_process(tmp_path):
    fifo = tmp_path / "rows.csv"
    os.mkfifo(fifo)
    ds = open_dataset(fifo)
    assert ds.stream is not None and ds.stream.sha256 is None
    text = "query,response\nq1,r1\nq2,r2\n"
    t = threading.Thread(target=lambda: fifo.write_text(text))
    t.start()
    first = [r.query for r in ds]
    t.join()
    assert first == [r.query for r in ds] == ["q1", "q2"]  # the second pass reads the copy
    assert ds.stream.sha256 == hashlib.sha256(b"\0" + text.encode()).hexdigest()
