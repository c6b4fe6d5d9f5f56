"""The sandbox for generated code, run for real: every hostile program is stopped and recorded with its reason."""

from __future__ import annotations

import os
import shutil
import socket
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from assay.bench.quality import sandbox as sandbox_module
from assay.bench.quality.sandbox import Sandbox, SandboxError, SandboxResult

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def box() -> Sandbox:
    return Sandbox(timeout_s=5.0, memory_mb=512, max_procs=16, max_file_mb=4)


@pytest.fixture(scope="module")
def ns_box(box) -> Sandbox:
    """The namespace sandbox; the tests that need it skip (saying why) where the machine has no namespaces."""
    if box.isolation.startswith("rlimits"):
        pytest.skip("no namespace isolation on this machine (isolation=rlimits)")
    return box


def run(box: Sandbox, code: str) -> SandboxResult:
    return box.run(textwrap.dedent(code))


def processes_of(uid: int) -> list[int]:
    """Live processes (zombies aside: dead, waiting for a parent to reap them) owned by ``uid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    with open(f"/proc/{entry}/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(int(entry))
            except (OSError, IndexError):
                pass
    return found


SWALLOWING_BOMB = """
import os, time
print(os.getuid(), flush=True)
while True:
    try:
        if os.fork() == 0:
            os.setsid()
    except OSError:
        time.sleep(0.001)
"""


def test_passing_program_gives_its_output(box):
    r = run(box, "import sys\nprint('forty', 2)\nprint('to stderr', file=sys.stderr)\n")
    assert r.status == "passed" and r.returncode == 0 and r.reason == ""
    assert r.stdout == "forty 2\n" and r.stderr == "to stderr\n"
    assert r.isolation == box.isolation and r.wall_s > 0 and r.cpu_s >= 0


def test_assertion_failure_is_recorded_with_its_message(box):
    r = run(box, "def add(a, b):\n    return a - b\nassert add(2, 2) == 4, 'add is wrong'\n")
    assert r.status == "failed" and r.returncode == 1
    assert r.reason == "AssertionError: add is wrong"
    assert "Traceback" in r.stderr


def test_exit_code_without_traceback(box):
    r = run(box, "import sys\nsys.exit(3)\n")
    assert (r.status, r.returncode, r.reason) == ("failed", 3, "exit code 3")


def test_infinite_loop_times_out():
    r = Sandbox(timeout_s=1.5).run("while True:\n    pass\n")
    assert r.status == "timeout" and r.returncode is None
    assert r.reason == "timeout after 1.5 s wall"


def test_replaced_signal_handlers_do_not_outlive_the_timeout():
    r = run(Sandbox(timeout_s=1.5), """
        import signal, time
        for s in (signal.SIGTERM, signal.SIGALRM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
            signal.signal(s, signal.SIG_IGN)
        signal.alarm(1)
        print("handlers replaced", flush=True)
        while True:
            time.sleep(0.01)
    """)
    assert r.status == "timeout" and r.reason == "timeout after 1.5 s wall"
    assert r.stdout == "handlers replaced\n"


def test_cpu_limit_stops_a_busy_program_before_the_wall_timeout():
    r = Sandbox(timeout_s=60, cpu_s=1).run("while True:\n    pass\n")
    assert r.status == "timeout"
    assert r.reason.startswith("CPU time limit of 1 s exceeded")
    assert r.returncode is not None and r.returncode < 0


def test_fork_bomb_is_stopped_and_the_host_is_fine(box):
    r = run(box, """
        import os
        while True:
            os.fork()
    """)
    assert r.status == "failed"
    assert r.reason == "BlockingIOError: [Errno 11] Resource temporarily unavailable"
    after = run(box, "print('still fine')")
    assert after.status == "passed" and after.stdout == "still fine\n"


def test_fork_bomb_that_swallows_errors_is_killed_to_the_last_process(box):
    r = Sandbox(timeout_s=2, max_procs=16).run(SWALLOWING_BOMB)
    assert r.status == "timeout"
    uid = int(r.stdout.split()[0])
    if os.geteuid() == 0:
        assert uid != 0 and processes_of(uid) == []
    assert run(box, "print('ok')").status == "passed"


def test_background_process_does_not_outlive_the_sample(box):
    r = run(box, """
        import os, time
        print(os.getuid(), flush=True)
        if os.fork() == 0:
            os.setsid()
            time.sleep(300)
            os._exit(0)
    """)
    assert r.status == "passed"
    if os.geteuid() == 0:
        assert processes_of(int(r.stdout.split()[0])) == []


def test_huge_allocation_is_a_memory_failure(box):
    r = run(box, "data = bytearray(20 * 2**30)\nprint(len(data))\n")
    assert r.status == "memory" and r.returncode == 1
    assert r.reason.startswith("MemoryError") and "512 MB" in r.reason
    assert r.stdout == ""


def test_file_larger_than_the_limit_is_stopped(box):
    r = run(box, """
        with open("big.bin", "wb") as f:
            for _ in range(64):
                f.write(b"x" * 2**20)
        print("wrote it all")
    """)
    assert r.status == "failed"
    assert r.reason == "OSError: [Errno 27] File too large"
    assert "wrote it all" not in r.stdout


def test_no_network_to_the_host_or_outside(ns_box):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        r = run(ns_box, f"""
            import socket
            socket.create_connection(("127.0.0.1", {port}), timeout=3)
            print("connected")
        """)
        assert r.status == "failed" and "connected" not in r.stdout
        assert r.reason == "OSError: [Errno 101] Network is unreachable"
        with pytest.raises(BlockingIOError):
            server.accept()                      # nobody knocked
    finally:
        server.close()
    r = run(ns_box, """
        import socket
        socket.create_connection(("192.0.2.1", 80), timeout=3)
    """)
    assert r.status == "failed" and r.reason == "OSError: [Errno 101] Network is unreachable"
    r = run(ns_box, "import socket\nprint(socket.gethostbyname('example.com'))\n")
    assert r.status == "failed" and r.reason.startswith("socket.gaierror")


def test_writes_outside_the_temp_dir_fail_and_leave_nothing_on_the_host(ns_box, tmp_path):
    target = tmp_path / "escaped.txt"
    r = run(ns_box, f"open({str(target)!r}, 'w').write('out')\n")
    assert r.status == "failed" and r.reason.startswith("FileNotFoundError")
    assert not target.exists()
    r = run(ns_box, "open('/etc/assay-sandbox-probe', 'w').write('out')\n")
    assert r.status == "failed"
    assert r.reason == "OSError: [Errno 30] Read-only file system: '/etc/assay-sandbox-probe'"
    assert not Path("/etc/assay-sandbox-probe").exists()
    r = run(ns_box, "open('/usr/lib/assay-sandbox-probe', 'w').write('out')\n")
    assert r.status == "failed" and "Read-only file system" in r.reason
    assert not Path("/usr/lib/assay-sandbox-probe").exists()


def test_host_files_cannot_be_read(ns_box, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-top-secret")
    for path in (secret, PROJECT / "pyproject.toml", PROJECT / ".env", Path.home() / ".bashrc",
                 Path("/etc/shadow")):
        r = run(ns_box, f"""
            import os
            p = {str(path)!r}
            print(os.listdir(p) if os.path.isdir(p) and os.listdir(p) else open(p).read())
        """)
        assert r.status == "failed", (path, r)
        assert r.reason.startswith(("FileNotFoundError", "PermissionError")), (path, r.reason)
        assert "hunter2" not in r.stdout
    r = run(ns_box, "import os\nprint(sorted(os.listdir('/')))\n")
    seen = set(eval(r.stdout))
    assert "tmp" in seen and not seen & {"home", "work", "mnt", "srv", "opt", "var", "run"}
    # /root exists only to carry the interpreter's install (when it lives there), nothing else
    r = run(ns_box, "import os\nprint(os.listdir('/root') if os.path.exists('/root') else [])\n")
    assert set(eval(r.stdout)) <= {".pyenv", ".local"}


def test_api_key_in_the_environment_is_not_visible(box, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-do-not-leak-0123456789")
    r = run(box, """
        import os, glob
        print(sorted(os.environ))
        for path in glob.glob("/proc/*/environ"):
            try:
                print(open(path, "rb").read())
            except OSError:
                pass
    """)
    assert r.status == "passed"
    assert "OPENAI_API_KEY" not in r.stdout and "sk-test-do-not-leak" not in r.stdout
    assert eval(r.stdout.splitlines()[0]) == ["HOME", "LANG", "PATH", "PYTHONIOENCODING", "TMPDIR"]


def test_runs_do_not_share_their_temp_dir(box):
    first = run(box, """
        import os
        open("marker.txt", "w").write("first run")
        open(os.path.join(os.environ["HOME"], "home-marker"), "w").write("x")
        print(os.getcwd())
    """)
    second = run(box, "import os\nprint(sorted(os.listdir('.')), sorted(os.listdir(os.environ['HOME'])))\n")
    assert first.status == "passed" and second.status == "passed"
    assert "marker.txt" not in second.stdout and "home-marker" not in second.stdout
    assert "main.py" in second.stdout


def test_output_is_truncated_keeping_head_and_tail(box):
    r = run(box, "print('HEAD')\nprint('x' * 2_000_000)\nprint('TAIL')\n")
    assert r.status == "passed"
    assert r.stdout.startswith("HEAD") and r.stdout.rstrip().endswith("TAIL")
    assert "bytes left out" in r.stdout and len(r.stdout) < 5000


def test_stdin_is_empty(box):
    r = run(box, "input()\n")
    assert r.status == "failed" and r.reason.startswith("EOFError")


def test_runs_from_threads_stay_apart(box):
    programs = [f"print({i} * {i})" for i in range(6)]
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(box.run, programs))
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(6)]
    assert {r.status for r in results} == {"passed"}


def test_isolation_is_reported(box):
    if os.geteuid() == 0 and shutil.which("unshare"):
        assert box.isolation == "unshare(mount,pid,net,ipc,uts)+chroot+fresh uid+rlimits"
    assert "rlimits" in box.isolation


def test_rlimits_fallback_still_limits_and_says_so():
    box = Sandbox(timeout_s=2, isolation="rlimits", max_procs=16)
    assert box.isolation.startswith("rlimits")
    r = box.run("print('plain')")
    assert (r.status, r.stdout, r.isolation) == ("passed", "plain\n", box.isolation)
    r = box.run("import os\nwhile True:\n    os.fork()\n")
    assert r.status == "failed" and r.reason.startswith("BlockingIOError")
    r = box.run("bytearray(20 * 2**30)")
    assert r.status == "memory"
    r = box.run("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: pass\n")
    assert r.status == "timeout"
    r = box.run(SWALLOWING_BOMB)
    assert r.status == "timeout"
    if os.geteuid() == 0:
        assert processes_of(int(r.stdout.split()[0])) == []


def test_bad_settings_are_refused(monkeypatch):
    with pytest.raises(SandboxError, match="without a sandbox is refused"):
        Sandbox(isolation="none")
    with pytest.raises(SandboxError, match="timeout_s"):
        Sandbox(timeout_s=0)
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="unshare command"):
        Sandbox(isolation="unshare")
    with pytest.raises(SandboxError, match="bwrap is not installed"):
        Sandbox(isolation="bwrap")


def assert_contained(box: Sandbox, tmp_path: Path) -> None:
    """The hostile programs, for an isolation other than the default one."""
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-top-secret")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    try:
        r = box.run(f"import socket\nsocket.create_connection(('127.0.0.1', {server.getsockname()[1]}), 3)\n")
        # a loopback of its own may be up (bwrap's) or down (unshare's): either way not the host's
        assert r.status == "failed" and r.reason in (
            "OSError: [Errno 101] Network is unreachable", "ConnectionRefusedError: [Errno 111] Connection refused")
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    r = box.run("import socket\nsocket.create_connection(('192.0.2.1', 80), 3)\n")
    assert r.status == "failed" and r.reason == "OSError: [Errno 101] Network is unreachable"
    r = box.run(f"print(open({str(secret)!r}).read())")
    assert r.status == "failed" and r.reason.startswith("FileNotFoundError") and "hunter2" not in r.stdout
    r = box.run(f"open({str(tmp_path / 'out.txt')!r}, 'w').write('x')")
    assert r.status == "failed" and not (tmp_path / "out.txt").exists()
    r = box.run("import os\nwhile True:\n    os.fork()\n")
    assert r.status == "failed" and r.reason.startswith("BlockingIOError")
    r = box.run("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: pass\n")
    assert r.status == "timeout"
    assert box.run("bytearray(20 * 2**30)").status == "memory"
    r = box.run("import os\nprint(sorted(os.environ))")
    assert r.status == "passed" and "OPENAI_API_KEY" not in r.stdout


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
def test_bwrap_contains_the_hostile_programs(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-do-not-leak")
    box = Sandbox(timeout_s=2, isolation="bwrap", max_procs=16)
    assert box.isolation.startswith("bwrap(")
    assert_contained(box, tmp_path)


# As an unprivileged user the sandbox takes user namespaces (or bwrap): run this file's checks as uid 65534
# with the system interpreter, loading the sandbox module (stdlib only) beside a bare assay.errors.
AS_NOBODY = r'''
import importlib.util, json, sys, types
src = sys.argv[1]
pkg = types.ModuleType("assay"); pkg.__path__ = []; sys.modules["assay"] = pkg
for name, path in (("assay.errors", "/errors.py"), ("assay.sandbox", "/bench/quality/sandbox.py")):
    spec = importlib.util.spec_from_file_location(name, src + path)
    mod = importlib.util.module_from_spec(spec); sys.modules[name] = mod; spec.loader.exec_module(mod)
box = mod.Sandbox(timeout_s=2, max_procs=16)
out = {"isolation": box.isolation}
for key, code in (("pass", "print('hi')"), ("net", "import socket\nsocket.create_connection(('192.0.2.1', 80), 3)"),
                  ("read", "print(open(%r).read())" % sys.argv[2]), ("fork", "import os\nwhile True: os.fork()"),
                  ("loop", "while True: pass"), ("caps", "print(open('/proc/self/status').read())"),
                  ("umount", "import ctypes\nprint(ctypes.CDLL(None).umount2(b'/tmp', 2))")):
    r = box.run(code)
    out[key] = [r.status, r.reason, r.stdout]
print(json.dumps(out))
'''


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not Path("/usr/bin/python3").exists(),
                    reason="needs root (to become uid 65534), setpriv and /usr/bin/python3")
def test_unprivileged_caller_gets_namespaces_too():
    import json
    import subprocess

    readable = PROJECT / "pyproject.toml"          # readable by everyone on the host
    proc = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                           "/usr/bin/python3", "-I", "-c", AS_NOBODY, str(PROJECT / "src" / "assay"), str(readable)],
                          capture_output=True, text=True, timeout=120, cwd="/")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    if out["isolation"].startswith("rlimits"):
        pytest.skip("no user namespaces for unprivileged users here")
    assert out["isolation"].startswith(("unshare(user,", "bwrap(user,"))
    assert out["pass"] == ["passed", "", "hi\n"]
    assert out["net"][:2] == ["failed", "OSError: [Errno 101] Network is unreachable"]
    assert out["read"][0] == "failed" and out["read"][1].startswith("FileNotFoundError")
    assert out["fork"][0] == "failed" and out["fork"][1].startswith("BlockingIOError")
    assert out["loop"][:2] == ["timeout", "timeout after 2 s wall"]
    assert "CapEff:\t0000000000000000" in out["caps"][2]
    assert out["umount"][2] == "-1\n"


def test_a_crash_is_a_failure_and_a_signal_from_outside_is_killed(box):
    """A sample that crashes failed (were it "killed", it would leave pass@k by crashing); a signal
    none of our limits explains is "killed", judged apart."""
    r = run(box, "import os, signal\nprint('before', flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert (r.status, r.returncode, r.reason, r.judged) == ("failed", -11, "crashed (SIGSEGV)", True)
    assert r.stdout == "before\n"
    r = run(box, "import os\nos.abort()\n")
    assert (r.status, r.reason, r.judged) == ("failed", "crashed (SIGABRT)", True)
    r = run(box, "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    assert (r.status, r.reason, r.judged) == ("killed", "killed by SIGTERM", False)


def test_file_size_signal_restored_is_a_failure(box):
    r = run(box, """
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        with open("big.bin", "wb") as f:
            f.write(b"x" * 8 * 2**20)
    """)
    assert r.status == "failed" and r.reason == "file size limit of 4 MB exceeded (SIGXFSZ)"


def test_the_reason_is_the_exception_line_even_when_a_partial_traceback_follows(box):
    """A fork bomb's children can be killed mid-traceback; the reason is still the exception's line."""
    program = ("import sys\n"
               "sys.stderr.write('Traceback (most recent call last):\\n  File \"<p>\", line 3, in <module>\\n'\n"
               "                 '    os.fork()\\nBlockingIOError: [Errno 11] Resource temporarily unavailable\\n'\n"
               "                 'Traceback (most recent call last):\\n  File \"<p>\", line 3, in <module>\\n    os.fork()\\n')\n"
               "sys.exit(1)\n")
    r = box.run(program)
    assert r.status == "failed" and r.reason == "BlockingIOError: [Errno 11] Resource temporarily unavailable"
