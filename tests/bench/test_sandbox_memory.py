"""The sandbox's memory limit holds for the whole sample, not per process: forked children, SysV
shared memory and memfds over the limit are killed or refused, and each result says which limit was
in force. Small limits (96 MB) keep the machine unstressed."""

from __future__ import annotations

import os
import textwrap

import pytest

from assay.bench.quality.sandbox import Sandbox

LIMIT_MB = 96

FORKED_CHILDREN = """
import os, time
r, w = os.pipe()
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        data = b"x" * (40 << 20)          # 40 MB each, well under the per-process limit
        os.write(w, b"1")
        time.sleep(1)
        os._exit(0)
    kids.append(pid)
os.close(w)
got = b""
while True:
    chunk = os.read(r, 16)
    if not chunk:
        break
    got += chunk
for pid in kids:
    os.waitpid(pid, 0)
print("children that held 40 MB:", len(got))
"""

SYSV_SHM = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
held = 0
for _ in range(4):
    sid = libc.shmget(0, 40 << 20, 0o1600)            # IPC_PRIVATE, IPC_CREAT | 0600
    if sid < 0:
        e = ctypes.get_errno()
        raise OSError(e, "shmget: " + os.strerror(e))
    addr = libc.shmat(sid, None, 0)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        e = ctypes.get_errno()
        raise OSError(e, "shmat: " + os.strerror(e))
    ctypes.memset(addr, 1, 40 << 20)
    libc.shmdt(addr)                                   # detached: the segment lives on, the RSS drops
    held += 40
print("shared memory held:", held, "MB")
"""

MEMFDS = """
import os
fds = []
for i in range(12):
    fd = os.memfd_create("m%d" % i)
    for _ in range(15):                                # 15 MB each, under the file size limit
        os.write(fd, b"x" * (1 << 20))
    fds.append(fd)
print("memfds held:", 15 * len(fds), "MB")
"""


@pytest.fixture(scope="module")
def box() -> Sandbox:
    return Sandbox(timeout_s=10.0, memory_mb=LIMIT_MB, max_procs=16, max_file_mb=16)


@pytest.fixture(scope="module")
def cg_box(box) -> Sandbox:
    if box.limit != "cgroup":
        pytest.skip(f"no writable cgroup with a memory controller here ({box.limit_detail})")
    return box


def test_the_limit_in_force_is_said(box):
    r = box.run("print('hi')")
    assert r.status == "passed" and r.limit == box.limit
    assert box.limit in ("cgroup", "rlimit") and box.limit_detail
    assert ("cgroup v" in box.limit_detail) == (box.limit == "cgroup")
    v1 = "/sys/fs/cgroup/memory"
    if os.geteuid() == 0 and os.access(v1, os.W_OK) and os.path.exists(f"{v1}/memory.limit_in_bytes"):
        # this project's machines: root with v1's memory controller mounted writable
        assert box.limit == "cgroup", box.limit_detail


def test_forked_children_over_the_limit_are_killed(cg_box):
    r = cg_box.run(FORKED_CHILDREN)
    assert r.status == "memory", r
    assert r.limit == "cgroup"
    assert r.reason == f"memory limit of {LIMIT_MB} MB for the whole sample exceeded (cgroup): killed by the OOM killer"
    assert "children that held 40 MB: 4" not in r.stdout


def test_sysv_shared_memory_over_the_limit_is_refused(ns_or_cg):
    r = ns_or_cg.run(SYSV_SHM)
    assert r.status in ("failed", "memory"), r
    assert "shared memory held" not in r.stdout
    if r.status == "failed":
        assert r.reason.startswith(("OSError: [Errno 28] shmget", "OSError: [Errno 22] shmget")), r.reason


@pytest.fixture(scope="module")
def ns_or_cg(box) -> Sandbox:
    """SysV shared memory is bounded by the IPC namespace's own limits or by the cgroup."""
    if box.limit != "cgroup" and not box.isolation.startswith("unshare"):
        pytest.skip("neither a cgroup nor an IPC namespace of our own here")
    return box


def test_memfds_over_the_limit_are_killed(cg_box):
    r = cg_box.run(MEMFDS)
    assert r.status == "memory", r
    assert "memfds held" not in r.stdout


def test_within_the_limit_children_and_shared_memory_pass(box):
    r = box.run(textwrap.dedent("""
        import os
        pids = []
        for _ in range(2):
            pid = os.fork()
            if pid == 0:
                data = b"x" * (10 << 20)
                os._exit(0)
            pids.append(pid)
        for pid in pids:
            assert os.waitpid(pid, 0)[1] == 0
        fd = os.memfd_create("small")
        os.write(fd, b"y" * (8 << 20))
        print("fine")
    """))
    assert (r.status, r.stdout) == ("passed", "fine\n"), r


def test_no_cgroup_is_left_behind(cg_box):
    before = set(cg_box.cgroup_children())
    for program in ("print(1)", FORKED_CHILDREN, "while True: pass"):
        Sandbox(timeout_s=1.5, memory_mb=LIMIT_MB, max_procs=16).run(program)
    assert set(cg_box.cgroup_children()) <= before


def test_rlimits_fallback_says_rlimit_or_cgroup_and_still_limits_children(tmp_path):
    box = Sandbox(timeout_s=10.0, memory_mb=LIMIT_MB, max_procs=16, isolation="rlimits")
    r = box.run(FORKED_CHILDREN)
    assert r.limit == box.limit
    if box.limit == "cgroup":
        assert r.status == "memory"


@pytest.mark.skipif(os.geteuid() != 0, reason="the fallback runs a sample as a fresh uid only as root")
def test_the_fallback_leaves_no_shared_memory_or_files_behind(tmp_path):
    import uuid

    token = uuid.uuid4().hex[:8]
    box = Sandbox(timeout_s=5.0, memory_mb=LIMIT_MB, max_procs=16, isolation="rlimits")
    r = box.run(textwrap.dedent(f"""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.shmget(0, 1 << 20, 0o1600) >= 0
        for folder in ("/dev/shm", "/tmp"):
            with open(os.path.join(folder, "assay-leftover-{token}"), "wb") as f:
                f.write(b"x" * (1 << 20))
        print(os.getuid())
    """))
    assert r.status == "passed", r
    uid = int(r.stdout)
    with open("/proc/sysvipc/shm") as f:
        owners = [line.split()[7] for line in f.readlines()[1:]]
    assert str(uid) not in owners
    assert not any(os.path.exists(f"{d}/assay-leftover-{token}") for d in ("/dev/shm", "/tmp"))


def test_cgroup_v2_is_found_where_the_memory_controller_can_be_given_to_children(tmp_path):
    """The v2 discovery on a stand-in tree (this project's machines have v1's memory controller): the run
    cgroups go under our own cgroup, seen through a mount whose root may be a cgroup namespace's."""
    from assay.bench.quality import sandbox as sb

    ours = tmp_path / "system.slice" / "assay.scope"
    ours.mkdir(parents=True)
    (ours / "cgroup.controllers").write_text("cpu io memory pids\n")
    (ours / "cgroup.subtree_control").write_text("\n")
    mounts = [("/", str(tmp_path), "cgroup2", ["rw"])]
    parents, where = sb._find_v2(mounts, {"": "/system.slice/assay.scope"})
    assert parents == {"memory": str(ours), "pids": str(ours)} and where == f"cgroup v2 under {ours}"
    assert (ours / "cgroup.subtree_control").read_text() == "+memory +pids"
    # inside a cgroup namespace rooted at /system.slice the same folder is found
    assert sb._find_v2([("/system.slice", str(tmp_path / "system.slice"), "cgroup2", [])],
                       {"": "/system.slice/assay.scope"})[0]["memory"] == str(ours)
    # no memory controller there, or our cgroup outside the mount's view: none
    (ours / "cgroup.controllers").write_text("cpu io pids\n")
    assert sb._find_v2(mounts, {"": "/system.slice/assay.scope"}) is None
    assert sb._find_v2([("/other", str(tmp_path), "cgroup2", [])], {"": "/system.slice/assay.scope"}) is None
