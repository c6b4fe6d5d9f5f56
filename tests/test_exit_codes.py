"""The exit codes of the ``assay`` command, as a shell or a CI job sees them: real processes,
real signals, real files. 0 finished, 2 bad input or usage (one line, no traceback), 3 the
work could not be done as asked, 130 Ctrl-C, 143 SIGTERM (the run left ``interrupted``)."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import assay
from assay.errors import AssayError
from assay.store import Store

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SRC = Path(__file__).resolve().parents[1] / "src"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "ASSAY_STORE": str(tmp_path / "store.db"), "ASSAY_CACHE": str(tmp_path / "cache.sqlite"),
           "OPENAI_API_KEY": "unused", **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


def assay_cli(tmp_path: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "assay.cli", *args], capture_output=True, text=True,
                       env=_env(tmp_path), cwd=tmp_path, timeout=120, **kw)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


def one_error_line(p: subprocess.CompletedProcess) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr
    return lines[0]


def stored_run(tmp_path: Path, *, name: str = "kept") -> str:
    p = assay_cli(tmp_path, "eval", str(EXAMPLES / "rag_qa.jsonl"), "-m", "f1_score", "-q", "--name", name)
    assert p.returncode == 0, p.stderr
    return Store(str(tmp_path / "store.db")).get_run(name)["id"]


# -- signals ---------------------------------------------------------------------------------------
def _ctrl_c_on() -> None:
    """In the child: Ctrl-C acts as at a terminal even when pytest was started with SIGINT ignored
    (a background job of a script inherits that, and Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.serial   # signals to a child process: run apart
@pytest.mark.parametrize("sig,code,line", [(signal.SIGINT, 130, "interrupted"),
                                           (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_a_signal_stops_eval_with_its_code_and_leaves_the_run_resumable(tmp_path, fake, sig, code, line):
    fake.default = {"content": '{"score": 4, "reason": "fine"}', "delay": 0.05}
    data = tmp_path / "rag.jsonl"
    with open(data, "w") as fh:
        for i in range(400):
            fh.write(json.dumps({"query": f"what is item {i}?", "response": f"item {i} is of kind {i % 7}"}) + "\n")
    args = ["eval", str(data), "--metrics", "coherence", "--judge", f"{fake.base_url}#fake-judge", "-q",
            "--concurrency", "4", "--name", "cut"]
    p = subprocess.Popen([sys.executable, "-m", "assay.cli", *args], env=_env(tmp_path), cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_on)
    try:
        deadline = time.monotonic() + 60
        while len(fake.chat_requests) < 12:      # the run is under way: judge calls are being made
            assert p.poll() is None, p.communicate()
            assert time.monotonic() < deadline, "no judge call in 60 s"
            time.sleep(0.02)
        p.send_signal(sig)
        out, errs = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, (out, errs)
    assert "Traceback" not in errs
    assert errs.strip().splitlines()[-1].startswith(line), errs
    assert "--resume" in errs
    st = Store(str(tmp_path / "store.db"))
    cut = st.get_run("cut")
    assert cut["status"] == "interrupted", cut

    fake.default = {"content": '{"score": 4, "reason": "fine"}'}
    again = assay_cli(tmp_path, *args, "--resume")
    assert again.returncode == 0, again.stderr
    assert f"run {cut['id']} (cut) saved" in again.stdout and "resumed with" in again.stdout
    assert st.get_run(cut["id"])["status"] == "completed" and st.count_rows(cut["id"]) == 400


def _at_the_delete_prompt(tmp_path: Path, rid: str, then) -> tuple[subprocess.Popen, str, str]:
    """``assay delete RID`` with a terminal on stdin; ``then(proc, master)`` once it asks."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([sys.executable, "-m", "assay.cli", "delete", rid], env=_env(tmp_path), cwd=tmp_path,
                             stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_ctrl_c_on)
        asked = b""
        while b"?" not in asked:
            ready, _, _ = select.select([p.stdout], [], [], 60)
            assert ready, f"no prompt in 60 s: {asked!r}"
            chunk = os.read(p.stdout.fileno(), 4096)
            assert chunk, p.communicate()
            asked += chunk
        then(p, master)
        out, errs = p.communicate(timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    return p, (asked + out).decode(), errs.decode()


@pytest.mark.serial   # Ctrl-C at a terminal prompt: run apart
def test_a_declined_prompt_exits_1_and_ctrl_c_at_it_130(tmp_path):
    """``typer.Exit(1)`` (``assay delete`` answered no) exits 1, not 0; Ctrl-C at the prompt 130;
    nothing is deleted either way."""
    rid = stored_run(tmp_path)
    p, out, errs = _at_the_delete_prompt(tmp_path, rid, lambda p, tty: os.write(tty, b"n\n"))
    assert f"delete {rid}" in out
    assert p.returncode == 1, (out, errs)
    assert "Traceback" not in errs
    p, out, errs = _at_the_delete_prompt(tmp_path, rid, lambda p, tty: p.send_signal(signal.SIGINT))
    assert p.returncode == 130, (out, errs)
    assert "Traceback" not in errs and errs.strip().splitlines()[-1] == "interrupted", errs
    assert Store(str(tmp_path / "store.db")).get_run(rid)["id"] == rid


# -- bad input: 2, one line ------------------------------------------------------------------------
@pytest.mark.parametrize("ref", ["", " ", "\t"])
def test_a_blank_run_reference_deletes_nothing(tmp_path, ref):
    rid = stored_run(tmp_path)
    p = assay_cli(tmp_path, "delete", ref, "--yes")
    assert p.returncode == 2
    assert "empty" in one_error_line(p)
    assert "deleted" not in p.stdout
    assert Store(str(tmp_path / "store.db")).get_run(rid)["id"] == rid
    for cmd in (["show", ref], ["export", ref, "-o", "x.jsonl"], ["compare", rid, ref]):
        p = assay_cli(tmp_path, *cmd)
        assert p.returncode == 2 and "empty" in one_error_line(p), cmd


def test_a_blank_reference_is_refused_by_the_store(tmp_path):
    st = Store(str(tmp_path / "s.db"))
    assay.evaluate([{"response": "a", "ground_truth": "a"}], metrics="f1_score", store=st)
    for ref in ("", "  ", None):
        with pytest.raises(AssayError, match="empty"):
            st.get_run(ref)
        with pytest.raises(AssayError, match="empty"):
            st.delete_run(ref)
    assert len(st.list_runs()) == 1


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "-1e309", "1e400"])
def test_non_finite_thresholds_are_refused(tmp_path, value):
    data = str(EXAMPLES / "rag_qa.jsonl")
    p = assay_cli(tmp_path, "eval", data, "-m", "f1_score", "-t", f"f1_score={value}")
    assert p.returncode == 2
    msg = one_error_line(p)
    assert "f1_score" in msg and "finite" in msg, msg
    p = assay_cli(tmp_path, "eval", data, "-m", "f1_score", "--defect-threshold", value)
    assert p.returncode == 2
    assert "defect threshold" in one_error_line(p)
    assert not (tmp_path / "store.db").exists() or Store(str(tmp_path / "store.db")).list_runs() == []


def test_non_finite_thresholds_are_refused_by_the_python_api(tmp_path):
    rows = [{"response": "a b", "ground_truth": "a"}]
    for bad in (float("nan"), float("inf"), float("-inf"), "nan"):
        with pytest.raises(AssayError, match="finite"):
            assay.evaluate(rows, metrics="f1_score", thresholds={"f1_score": bad}, store=False)
        with pytest.raises(AssayError, match="defect threshold"):
            assay.evaluate(rows, metrics="f1_score", options={"defect_threshold": bad}, store=False)
        with pytest.raises(AssayError, match="finite"):
            assay.metric(name="test_exit_codes_nan_threshold", threshold=bad)(lambda response: 1.0)
        with pytest.raises(AssayError, match="finite"):
            assay.judge("test_exit_codes_nan_judge", "Is {{response}} fine?", threshold=bad)
    assert "test_exit_codes_nan_threshold" not in assay.REGISTRY
    assert "test_exit_codes_nan_judge" not in assay.REGISTRY


def test_out_naming_an_existing_file(tmp_path):
    (tmp_path / "results").write_text("keep me")
    p = assay_cli(tmp_path, "eval", str(EXAMPLES / "rag_qa.jsonl"), "-m", "f1_score", "--out", "results")
    assert p.returncode == 2
    msg = one_error_line(p)
    assert "results" in msg and "file" in msg, msg
    assert (tmp_path / "results").read_text() == "keep me"
    # refused before the run starts: nothing is left "running" in the store
    assert not (tmp_path / "store.db").exists() or Store(str(tmp_path / "store.db")).list_runs() == []


def test_usage_errors_exit_2_and_help_0(tmp_path):
    p = assay_cli(tmp_path, "eval", str(EXAMPLES / "rag_qa.jsonl"), "--no-such-option")
    assert p.returncode == 2 and "No such option: --no-such-option" in p.stderr
    p = assay_cli(tmp_path, "ui", "--port", "70000")
    assert p.returncode == 2 and "--port" in p.stderr
    p = subprocess.run([sys.executable, "-m", "assay", "eval", "--help"], capture_output=True, text=True,
                       env=_env(tmp_path), timeout=120)                   # python -m assay works too
    assert p.returncode == 0 and "--threshold" in p.stdout, p.stderr


# -- could not be done: 3 --------------------------------------------------------------------------
def test_ui_on_a_busy_port_exits_3_with_one_line(tmp_path):
    pytest.importorskip("uvicorn", reason="the dashboard needs assay[ui]")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = assay_cli(tmp_path, "ui", "--port", str(port))
    assert p.returncode == 3
    msg = one_error_line(p)
    assert f"127.0.0.1:{port}" in msg and "--port" in msg, msg
    assert "http://" not in p.stdout          # no address announced for a dashboard that is not there
