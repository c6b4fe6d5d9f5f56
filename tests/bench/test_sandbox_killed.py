"""A sample killed from outside (a signal it did not die of by a limit of ours, or a sandbox that could
not start it in time) is told apart from a failed one: status "killed", one retry, and never scored."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from assay.bench.quality.sandbox import Sandbox


@pytest.fixture(scope="module")
def box() -> Sandbox:
    return Sandbox(timeout_s=5.0, memory_mb=256, max_procs=16)


def _kill_first_run(box: Sandbox, done: threading.Event, killed: list[int]) -> None:
    """What an overloaded host does to one sample: SIGKILL to the processes of the first run's cgroup."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not done.is_set():
        for path in box.cgroup_children():
            try:
                with open(os.path.join(path, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except OSError:
                continue
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            if pids:
                return
        time.sleep(0.01)


def test_a_sample_killed_from_outside_is_run_again_and_judged(box):
    if box.limit != "cgroup":
        pytest.skip(f"finding the sample's processes from outside needs its cgroup ({box.limit_detail})")
    done, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_first_run, args=(box, done, killed))
    killer.start()
    try:
        r = box.judge("import time\ntime.sleep(1.0)\nprint('done')\n")
    finally:
        done.set()
        killer.join()
    assert killed, "the first run was never seen"
    assert (r.status, r.stdout, r.attempts) == ("passed", "done\n", 2)
    assert r.retried == "killed: killed by SIGKILL"
    assert r.judged


def test_killed_twice_is_returned_as_killed_and_not_judged(box):
    r = box.judge("import os, signal\nprint('x', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert (r.status, r.reason, r.attempts) == ("killed", "killed by SIGKILL", 2)
    assert r.retried == "killed: killed by SIGKILL"
    assert not r.judged


def test_verdicts_are_not_run_again(box):
    for program, status in (("print(1)", "passed"), ("assert False", "failed"), ("bytearray(20 * 2**30)", "memory")):
        r = box.judge(program)
        assert (r.status, r.attempts, r.retried) == (status, 1, ""), program
        assert r.judged


def test_a_sandbox_that_cannot_start_the_program_in_time_is_killed_not_a_timeout():
    # 5 ms of wall time: the namespaces and the interpreter cannot be ready, the program never ran
    r = Sandbox(timeout_s=0.005).run("print('never')")
    assert r.status == "killed" and not r.judged
    assert r.reason == "the sandbox had not started the program when the 0.005 s wall limit passed (an overloaded machine?)"
    started = Sandbox(timeout_s=1.0).run("while True:\n    pass\n")
    assert (started.status, started.reason) == ("timeout", "timeout after 1 s wall") and started.judged
