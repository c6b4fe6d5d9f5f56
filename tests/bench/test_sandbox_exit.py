"""A sample passes only when its program ran to its end: a completion that exits with status 0
before the tests run (``os._exit(0)``, ``sys.exit(0)``, ``unittest.main()``, an exit-0 excepthook or
atexit handler) is a failure, and the marker that proves the end was reached cannot be forged by
writing to the process's descriptors."""

from __future__ import annotations

import textwrap

import pytest

from assay.bench.quality.sandbox import Sandbox

WRONG = """
def add(a, b):
    return a - b
"""

CHECKS = """

def check(candidate):
    assert candidate(2, 2) == 4, "add is wrong"
    assert candidate(1, 5) == 6

check(add)
"""


@pytest.fixture(scope="module", params=["auto", "rlimits"])
def box(request) -> Sandbox:
    """The machine's best isolation, and the fallback: the marker is the launcher's, the same in both."""
    return Sandbox(timeout_s=5.0, memory_mb=512, max_procs=16, max_file_mb=4, isolation=request.param)


def program(completion: str) -> str:
    """A HumanEval-shaped program: the (wrong) function, what the model added after it, the tests."""
    return textwrap.dedent(WRONG) + textwrap.dedent(completion) + CHECKS


def test_the_wrong_body_alone_fails_and_the_right_one_passes(box):
    r = box.run(program(""))
    assert r.status == "failed" and r.reason == "AssertionError: add is wrong"
    good = box.run(program("").replace("a - b", "a + b"))
    assert good.status == "passed" and good.returncode == 0 and good.reason == ""


@pytest.mark.parametrize("completion, why", [
    ("import os\nos._exit(0)\n", "os._exit(0)"),
    ("import sys\nsys.exit(0)\n", "sys.exit(0)"),
    ("import sys\nsys.exit()\n", "sys.exit()"),
    ("raise SystemExit\n", "raise SystemExit"),
    ("import unittest\nclass T(unittest.TestCase):\n    def test_ok(self):\n        pass\n"
     "if __name__ == '__main__':\n    unittest.main()\n", "unittest.main()"),
    ("import os, sys\nsys.excepthook = lambda *exc: os._exit(0)\n", "an exit-0 sys.excepthook"),
    ("import atexit, os\natexit.register(lambda: os._exit(0))\n", "an exit-0 atexit handler"),
    ("import os\nos.execv('/bin/true', ['true'])\n", "exec of a program that exits 0"),
])
def test_exiting_with_status_0_before_the_checks_is_a_failure(box, completion, why):
    r = box.run(program(completion))
    assert r.status == "failed", (why, r)
    assert r.returncode == 0, (why, r)
    assert r.reason == "exited with status 0 before the end of the program: its checks did not all run", why


def test_unittest_main_with_its_own_passing_tests_after_the_body_fails(box):
    # a plausible model answer: the function, then a test class and unittest.main() — the task's checks never run
    r = box.run(program("""
        import unittest

        class TestAdd(unittest.TestCase):
            def test_zero(self):
                self.assertEqual(add(0, 0), 0)

        unittest.main()
    """))
    assert r.status == "failed" and r.returncode == 0
    assert "Ran 1 test" in r.stderr and "OK" in r.stderr


def test_writing_to_every_descriptor_then_exiting_0_is_not_a_pass(box):
    r = box.run(program("""
        import os
        for fd in range(3, 256):
            for data in (b"ok\\n", b"0" * 32, b'{"rc": 0, "completed": true}\\n'):
                try:
                    os.write(fd, data)
                except OSError:
                    pass
        os._exit(0)
    """))
    assert r.status == "failed" and r.returncode == 0


def test_reading_every_descriptor_then_writing_back_is_not_a_pass(box):
    # whatever the sample reads from its descriptors and echoes back on each of them: no pass without the checks
    r = box.run(program("""
        import os
        got = b""
        for fd in range(3, 256):
            try:
                os.set_blocking(fd, False)
                got += os.read(fd, 4096)
            except OSError:
                pass
        for fd in range(3, 256):
            try:
                os.write(fd, got)
            except OSError:
                pass
        os._exit(0)
    """))
    assert r.status == "failed" and r.returncode == 0


def test_a_program_that_runs_to_its_end_after_catching_its_own_exit_passes(box):
    r = box.run(program("""
        try:
            raise SystemExit(0)
        except SystemExit:
            pass
    """).replace("a - b", "a + b"))
    assert r.status == "passed"


def test_nonzero_exit_keeps_its_code_and_reason(box):
    r = box.run(program("import sys\nsys.exit(3)\n"))
    assert (r.status, r.returncode, r.reason) == ("failed", 3, "exit code 3")


def test_a_forked_process_that_also_runs_to_the_end_still_passes(box):
    # both processes run the checks (and pass them): the secret arrives twice, which is still the end
    r = box.run(program("import os\n_child = os.fork()\n").replace("a - b", "a + b")
                + "if _child:\n    os.waitpid(_child, 0)\n")
    assert r.status == "passed", r
