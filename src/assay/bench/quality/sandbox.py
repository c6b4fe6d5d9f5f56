"""Running generated code in isolation, one process per sample, for pass@k scoring.

Each ``Sandbox.run`` starts a small launcher (Python, stdlib only) that prepares the isolation and then
executes the sample with the interpreter in isolated mode (``-I``). What the launcher does depends on what the
machine offers, chosen once per ``Sandbox`` and reported in ``isolation``:

- ``unshare`` (running as root): the launcher runs as PID 1 of new mount, PID, network, IPC and UTS namespaces
  (util-linux ``unshare``). It builds a new root on a tmpfs holding read-only bind mounts of ``/usr``, ``/etc``,
  the interpreter's installation and a few device nodes, a fresh ``/proc`` and a fresh size-limited tmpfs
  ``/tmp`` (the only writable place), ``chroot``s into it and runs the sample as a fresh unprivileged uid with
  no-new-privileges set. Everything else of the host (``/root``, ``/home``, ``/work``, the host's ``/tmp``) is
  simply absent; the network namespace has only a loopback that is down. When the sample exits, PID 1 exits and
  the kernel kills whatever the sample left behind.
- ``unshare-user`` (not root, user namespaces allowed): the same, inside a new user namespace; the sample keeps
  the caller's uid and every capability is dropped before it starts.
- ``bwrap`` (bubblewrap installed; chosen first when not root): bubblewrap builds the same view (its own
  loopback is up, but it is the namespace's, not the host's); the launcher inside it adds the resource limits
  and, when running as root, switches to a fresh uid as above.
- ``rlimits``: no namespace tool works. Only resource limits, a fresh temporary directory as the working
  directory and (when running as root) a fresh unprivileged uid. The sample can read world-readable host files
  and use the network; the result says so.

Resource limits always apply: CPU time (``RLIMIT_CPU``), address space (``RLIMIT_AS``), process count
(``RLIMIT_NPROC``, counted per uid, hence the fresh uid per run), file size (``RLIMIT_FSIZE``), no core files.
The wall-clock timeout is enforced from outside with SIGKILL to the whole process group, and, with a PID
namespace, to its PID 1, which takes every process of the namespace down with it; a sample cannot outlive it by
replacing signal handlers or by starting a new session.

The memory limit holds for the whole sample where the machine lets it (``limit``, on the sandbox and on each
result): as root with a writable cgroup (v2 with the memory controller, else v1's memory and pids controllers),
each run gets a cgroup of its own under assay's, made before and removed after it: the limit over every process
of the sample, with its shared memory, memfds and tmpfs files, no swap, a process count; the sample's process
joins it before it starts, and a kill by the cgroup's OOM killer is ``memory``. In an IPC namespace of its own the
launcher also sets the namespace's SysV limits (``shmmax``/``shmall`` at the memory limit, 64 segments, 16 message
queues). Otherwise (``rlimit``) the limit is per process only.

Passing means the program ran to its end: the sample's interpreter runs :data:`HARNESS`, which executes the
program as ``__main__`` and only after its last statement writes a per-run secret (read from a pipe and that pipe
closed before the program starts) on a second pipe the launcher reads. Any exit before the end, whatever its
status, leaves no secret there and is ``failed``.

:meth:`Sandbox.judge` runs a program for a verdict: a ``killed`` (a signal from outside that none of our limits
explains — a crash such as SIGSEGV or SIGABRT is the program's own failure — or a
sandbox that had not started the program when the wall limit passed) or ``error`` run is run once more; a second
one is returned with ``attempts`` 2 for the caller to count apart (``SandboxResult.judged`` is False).
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from assay.errors import AssayError

KEEP = 4096          # bytes kept of stdout and of stderr (head and tail when longer)
ISOLATIONS = ("auto", "bwrap", "unshare", "rlimits")
NS_FLAGS = ["--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child"]


class SandboxError(AssayError):
    """The requested isolation cannot be had on this machine, or a limit is invalid."""


VERDICTS = ("passed", "failed", "timeout", "memory")   # verdicts on the program; killed and error are not
# Signals a program raises by its own fault: it failed (were they "killed", a sample could leave pass@k by
# crashing). Only a signal from outside (SIGKILL, SIGTERM, ...) none of our limits explains is "killed".
CRASHES = frozenset({signal.SIGSEGV, signal.SIGABRT, signal.SIGFPE, signal.SIGBUS, signal.SIGILL, signal.SIGSYS,
                     signal.SIGTRAP})


@dataclass
class SandboxResult:
    """The outcome of one program: ``status`` is passed, failed (a crash by its own fault included: SIGSEGV,
    SIGABRT, ...), timeout, memory (verdicts on the program), killed (a signal from outside that none of our
    limits explains, or the sandbox could not start it in time) or error
    (the sandbox failed). ``attempts``: 2 when :meth:`Sandbox.judge` ran it again; ``retried``: why."""

    status: str
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    isolation: str
    reason: str
    limit: str = "rlimit"      # what bounded the sample's memory: "cgroup" (all its processes) or "rlimit" (each)
    attempts: int = 1
    retried: str = ""

    @property
    def judged(self) -> bool:
        """Whether the outcome is a verdict on the program (pass@k counts only these)."""
        return self.status in VERDICTS


# Run as the sample's own uid: SIGKILL to every process that uid owns (kill(-1) skips the caller and reports
# nothing useful), again until /proc shows none alive (a fork bomb refills between rounds), for at most a
# couple of seconds.
KILL_ALL = """
import os, time
def alive():
    me, uid = str(os.getpid()), os.getuid()
    for p in os.listdir("/proc"):
        if p.isdigit() and p != me:
            try:
                if os.stat("/proc/" + p).st_uid == uid:
                    with open("/proc/%s/stat" % p) as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            return True
            except (OSError, IndexError):
                pass
    return False
end = time.monotonic() + 2
while time.monotonic() < end:
    try:
        os.kill(-1, 9)
    except OSError:
        pass
    if not alive():
        break
"""

# The launcher: argv[1] is a JSON config, the program arrives on stdin, the outcome leaves as one JSON line
# on the status file descriptor. Runs before the sample, as whoever started the sandbox (root or not).
LAUNCHER = r'''
import ctypes, json, os, resource, signal, sys
cfg = json.loads(sys.argv[1])
KILL_ALL = cfg["kill_all"]
status_fd = cfg["status_fd"]
libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)

def report(**kw):
    os.write(status_fd, (json.dumps(kw) + "\n").encode())

def mount(src, dst, fstype, flags, data=None):
    if libc.mount(src.encode() if src else None, dst.encode(), fstype.encode() if fstype else None,
                  flags, data.encode() if data else None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "mount %s on %s: %s" % (src or fstype, dst, os.strerror(e)))

def bind_ro(src, dst):
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    mount(src, dst, None, MS_BIND | MS_REC)
    keep = 0
    st = os.statvfs(dst).f_flag
    for bit, flag in ((os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC)):
        if st & bit:
            keep |= flag
    mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | keep)

def build_root(program):
    new = "/tmp"                      # our own mount namespace: this tmpfs hides nothing of the host's /tmp
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("sandbox", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
    for top in ("usr", "bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        src = "/" + top
        if os.path.islink(src):
            os.symlink(os.readlink(src), new + src)
        elif os.path.isdir(src):
            bind_ro(src, new + src)
    bind_ro("/etc", new + "/etc")
    for prefix in cfg["prefixes"]:
        if not prefix.startswith(("/usr/", "/etc/")):
            bind_ro(prefix, new + prefix)
    os.makedirs(new + "/dev")
    mount("dev", new + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k")
    for node in ("null", "zero", "full", "random", "urandom"):
        bind_ro("/dev/" + node, new + "/dev/" + node)
    os.symlink("/proc/self/fd", new + "/dev/fd")
    os.makedirs(new + "/proc")
    if cfg["mount_proc"]:
        mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(new + "/tmp")
    opts = "mode=700,size=%dm,nr_inodes=4096" % cfg["tmp_mb"]
    if cfg["uid"] is not None:
        opts += ",uid=%d,gid=%d" % (cfg["uid"], cfg["gid"])
    mount("work", new + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts)
    with open(new + "/tmp/main.py", "wb") as f:
        f.write(program)
    if cfg["uid"] is not None:
        os.chown(new + "/tmp/main.py", cfg["uid"], cfg["gid"])
    mount(None, new, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chroot(new)
    os.chdir("/tmp")

def drop_caps():
    # user namespace without a second uid to switch to: lock root out of capabilities, then drop them all
    PR_SET_SECUREBITS, PR_CAPBSET_DROP = 28, 24
    libc.prctl(PR_SET_SECUREBITS, 0x2f, 0, 0, 0)   # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED... locked
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    data = (Data * 2)()
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")

def start_child(workdir):
    joined = None
    # The end-of-program marker: a secret the sample's process gets only through a pipe, which the harness empties
    # and closes before the program starts (nothing of it in argv, the environment or a file), and writes on a
    # second pipe once the program's last statement has run. An exit of any kind before that leaves it empty.
    secret = os.urandom(24).hex().encode()
    secret_r, secret_w = os.pipe()
    os.write(secret_w, secret)
    os.close(secret_w)
    mark_r, mark_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(secret_r)
        os.close(mark_w)
        return pid, secret, mark_r
    try:
        os.close(mark_r)
        if cfg["cgroup_fds"]:
            # into the run's cgroup before anything is allocated; the descriptors go before the sample starts
            try:
                for fd in cfg["cgroup_fds"]:
                    os.write(fd, b"0")
                joined = "joined"
            except OSError as e:
                joined = "not joined: %s" % e
            for fd in cfg["cgroup_fds"]:
                os.close(fd)
        lim = cfg["limits"]
        for name, value in lim.items():
            soft, hard = value if isinstance(value, list) else (value, value)
            resource.setrlimit(getattr(resource, name), (soft, hard))
        if cfg["uid"] is not None:
            for cap in range(64):                    # the bounding set too: nothing to regain, ever
                libc.prctl(24, cap, 0, 0, 0)         # PR_CAPBSET_DROP
            os.setgroups([])
            os.setresgid(cfg["gid"], cfg["gid"], cfg["gid"])
            os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])
        elif cfg["drop_caps"]:
            drop_caps()
        libc.prctl(38, 1, 0, 0, 0)                   # PR_SET_NO_NEW_PRIVS
        os.umask(0o077)
        os.chdir(workdir)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.set_inheritable(status_fd, False)     # closed by exec, still there to report a failed exec
        os.set_inheritable(secret_r, True)
        os.set_inheritable(mark_w, True)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        report(started=True, cgroup=joined)
        os.execve(cfg["python"], [cfg["python"], "-I", "-c", cfg["harness"], os.path.join(workdir, "main.py"),
                                  str(secret_r), str(mark_w)], cfg["env"])
    except BaseException as e:
        try:
            report(error="sandbox setup: %s" % e)
        finally:
            os._exit(127)

def ran_to_its_end(secret, mark_r):
    # the secret alone (once, or once per forked process that also ran to the end): anything else spoils it
    os.set_blocking(mark_r, False)
    try:
        got = os.read(mark_r, 4096)
    except OSError:
        got = b""
    os.close(mark_r)
    return bool(got) and got == secret * (len(got) // len(secret))

def kill_uid():
    # every process of the sample's uid (no PID namespace to do it for us)
    if cfg["uid"] is None:
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(cfg["uid"], cfg["uid"], cfg["uid"])
            exec(KILL_ALL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)

def limit_ipc():
    # our own IPC namespace: its SysV shared memory and message queues bounded (the cgroup counts the pages too)
    for name, value in cfg["ipc"].items():
        try:
            with open("/proc/sys/kernel/" + name, "w") as f:
                f.write(str(value))
        except OSError:
            pass

try:
    program = sys.stdin.buffer.read()
    if cfg["mode"] == "ns":
        limit_ipc()
        build_root(program)
        workdir = "/tmp"
    else:
        workdir = cfg["workdir"]
        if cfg["mode"] == "rlimits":
            with open(os.path.join(workdir, "main.py"), "wb") as f:
                f.write(program)
            if cfg["uid"] is not None:
                os.chown(os.path.join(workdir, "main.py"), cfg["uid"], cfg["gid"])
        else:                                         # bwrap: /tmp is its tmpfs, only ours
            with open(os.path.join(workdir, "main.py"), "wb") as f:
                f.write(program)
            if cfg["uid"] is not None:
                os.chown(workdir, cfg["uid"], cfg["gid"])
                os.chown(os.path.join(workdir, "main.py"), cfg["uid"], cfg["gid"])
    child, secret, mark_r = start_child(workdir)
except BaseException as e:
    report(error="sandbox setup: %s" % e)
    sys.exit(127)
while True:
    pid, st, ru = os.wait4(-1, 0)
    if pid == child:
        break
cpu = ru.ru_utime + ru.ru_stime
completed = ran_to_its_end(secret, mark_r)
if os.WIFSIGNALED(st):
    report(signal=os.WTERMSIG(st), cpu=cpu, completed=completed)
else:
    report(rc=os.WEXITSTATUS(st), cpu=cpu, completed=completed)
if cfg["mode"] == "rlimits":
    kill_uid()
'''

# The sample's interpreter runs this (``python -I -c HARNESS main.py SECRET_FD MARK_FD``): it takes the run's
# secret from its pipe and closes that pipe before the program starts, runs the program as ``__main__``, every
# statement to the last, then writes the secret on the mark pipe. An exit before the end (os._exit, SystemExit
# from sys.exit or unittest.main, an excepthook or atexit handler that exits 0, exec of another program) never
# writes it, and the launcher takes only the secret alone: anything else on the mark pipe spoils it.
# Exceptions are reported as Python would, without this frame.
HARNESS = r"""
import sys
def _harness():
    import os, types
    path, secret_fd, mark_fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    secret = os.read(secret_fd, 64)
    os.close(secret_fd)
    sys.argv[:] = [path]
    main = types.ModuleType("__main__")
    main.__file__ = path
    sys.modules["__main__"] = main
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec")
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:
        sys.excepthook(type(e), e, e.__traceback__.tb_next)
        sys.exit(1)
    os.write(mark_fd, secret)
_harness()
"""

_probe_cache: dict[tuple, bool] = {}


def _probe(cmd: list[str]) -> bool:
    key = tuple(cmd)
    if key not in _probe_cache:
        try:
            ok = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, timeout=20).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        _probe_cache[key] = ok
    return _probe_cache[key]


def _unshare_works(user: bool) -> bool:
    exe = shutil.which("unshare")
    if not exe:
        return False
    flags = (["--user", "--map-root-user"] if user else []) + NS_FLAGS
    return _probe([exe, *flags, "--", sys.executable, "-I", "-S", "-c", "pass"])


def _bwrap_flags(root: bool) -> list[str]:
    # as root bwrap keeps every capability and no user namespace is needed: the launcher inside switches to a
    # fresh uid itself; otherwise bwrap's user namespace, where the caller's uid has no capabilities
    if root:
        return ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    return ["--unshare-all"]


def _bwrap_works(root: bool) -> bool:
    exe = shutil.which("bwrap")
    return bool(exe) and _probe([exe, *_bwrap_flags(root), "--die-with-parent", "--ro-bind", "/", "/", "true"])


def _python() -> tuple[str, list[str]]:
    """The interpreter to run samples with (the real one, not a venv's link) and the folders it needs."""
    exe = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    prefixes = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)})
    return exe, [p for p in prefixes if p not in ("/", "/usr")]


def _reachable_by_others(path: str) -> bool:
    """Whether an unprivileged uid can run ``path`` (every folder on the way searchable by others)."""
    import stat
    path = os.path.realpath(path)
    try:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(path)
        while True:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


def _uid() -> int:
    # a fresh uid per run: RLIMIT_NPROC counts per uid, so concurrent samples never share the budget
    return 1_000_000 + secrets.randbelow(1_000_000_000)


def _count_own_processes() -> int:
    uid, n = os.getuid(), 0
    try:
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.stat(f"/proc/{entry}").st_uid == uid:
                        n += 1
                except OSError:
                    pass
    except OSError:
        return 256
    return n


# ---- the whole sample's memory: a cgroup of its own per run -------------------------------------------------

_cgroup_cache: dict[str, tuple[dict[str, str], int, str]] = {}


def _mountinfo() -> list[tuple[str, str, str, list[str]]]:
    """(root within its hierarchy, mount point, file system type, super options) of each mount."""
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                a, b = left.split(), right.split()
                if len(a) >= 5 and len(b) >= 3:
                    out.append((a[3], a[4], b[0], b[2].split(",")))
    except OSError:
        pass
    return out


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per controller; ``""`` names the v2 (unified) one."""
    paths: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    for controller in parts[1].split(","):
                        paths[controller] = parts[2]
    except OSError:
        pass
    return paths


def _under(mount_root: str, mount_point: str, path: str | None) -> str | None:
    if path is None:
        return None
    if mount_root != "/":
        if path != mount_root and not path.startswith(mount_root + "/"):
            return None                          # our cgroup is outside what this mount shows
        path = path[len(mount_root):]
    return os.path.join(mount_point, path.lstrip("/"))


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _probe_dir(parent: str, limit_file: str) -> bool:
    """Whether a child cgroup can be made under ``parent`` and given a memory limit."""
    probe = os.path.join(parent, f"assay-probe-{os.getpid()}-{secrets.token_hex(3)}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        _write(os.path.join(probe, limit_file), str(64 * 2**20))
        return True
    except OSError:
        return False
    finally:
        try:
            os.rmdir(probe)
        except OSError:
            pass


def _find_v2(mounts, own) -> tuple[dict[str, str], str] | None:
    for root, point, fstype, _ in mounts:
        if fstype != "cgroup2":
            continue
        base = _under(root, point, own.get(""))
        if not base:
            continue
        try:
            with open(os.path.join(base, "cgroup.controllers")) as f:
                controllers = f.read().split()
            if "memory" not in controllers:
                continue
            with open(os.path.join(base, "cgroup.subtree_control")) as f:
                enabled = f.read().split()
            wanted = [c for c in ("memory", "pids") if c in controllers and c not in enabled]
            if wanted:          # fails (EBUSY) in a cgroup that holds processes and is not the root: then no
                _write(os.path.join(base, "cgroup.subtree_control"), " ".join("+" + c for c in wanted))
        except OSError:
            continue
        if _probe_dir(base, "memory.max"):
            return {"memory": base, "pids": base}, f"cgroup v2 under {base}"
    return None


def _find_v1(mounts, own) -> tuple[dict[str, str], str] | None:
    found: dict[str, str] = {}
    for controller, limit_file in (("memory", "memory.limit_in_bytes"), ("pids", "pids.max")):
        for root, point, fstype, options in mounts:
            if fstype == "cgroup" and controller in options:
                base = _under(root, point, own.get(controller))
                if base and _probe_dir(base, limit_file):
                    found[controller] = base
                    break
    if "memory" not in found:
        return None
    return found, f"cgroup v1 under {found['memory']}"


def _find_cgroup() -> tuple[dict[str, str], int, str]:
    """Where each run's cgroup is made: ({controller: parent folder}, version, what it is), or ({}, 0, why
    there is none). Probed once per process."""
    if "found" not in _cgroup_cache:
        mounts, own = _mountinfo(), _own_cgroups()
        if os.geteuid() != 0:
            found: tuple[dict[str, str], int, str] = ({}, 0, "not running as root")
        elif (v2 := _find_v2(mounts, own)) is not None:
            found = (v2[0], 2, v2[1])
        elif (v1 := _find_v1(mounts, own)) is not None:
            found = (v1[0], 1, v1[1])
        else:
            found = ({}, 0, "no writable cgroup with a memory controller")
        _cgroup_cache["found"] = found
    return _cgroup_cache["found"]


class _RunCgroup:
    """One run's cgroup: a memory limit over every process of the sample (its page cache, shared memory,
    memfds and tmpfs files included), no swap, and a process count."""

    def __init__(self, parents: dict[str, str], version: int, memory_mb: int, max_procs: int):
        name = f"assay-sandbox-{os.getpid()}-{secrets.token_hex(6)}"
        self.version, self.dirs = version, []
        limit = str(memory_mb * 2**20)
        try:
            for parent in dict.fromkeys(parents.values()):
                path = os.path.join(parent, name)
                os.mkdir(path)
                self.dirs.append(path)
            self.memory = os.path.join(parents["memory"], name)
            if version == 2:
                _write(os.path.join(self.memory, "memory.max"), limit)
                for file, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if os.path.exists(os.path.join(self.memory, file)):
                        _write(os.path.join(self.memory, file), value)
            else:
                _write(os.path.join(self.memory, "memory.limit_in_bytes"), limit)
                try:
                    _write(os.path.join(self.memory, "memory.memsw.limit_in_bytes"), limit)
                except OSError:
                    pass                          # no swap accounting: nothing to swap to either
            if "pids" in parents:
                pids = os.path.join(parents["pids"], name)
                if os.path.exists(os.path.join(pids, "pids.max")):
                    _write(os.path.join(pids, "pids.max"), str(max_procs + 4))
        except OSError:
            self.remove()
            raise

    def procs_fds(self) -> list[int]:
        """Descriptors of each folder's ``cgroup.procs``: the sample writes "0" to them to join, then closes them."""
        return [os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs]

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            with open(os.path.join(self.memory, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        """Kills whatever is left in it and removes its folders (the kernel hands their charges to the parent)."""
        give_up = time.monotonic() + 3.0
        for path in self.dirs:
            while True:
                if self.version == 2 and os.path.exists(os.path.join(path, "cgroup.kill")):
                    try:
                        _write(os.path.join(path, "cgroup.kill"), "1")
                    except OSError:
                        pass
                try:
                    with open(os.path.join(path, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except (OSError, ValueError):
                                pass
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > give_up:
                        break
                    time.sleep(0.01)
        self.dirs = []


def _remove_leftovers_of(uid: int) -> None:
    """What a sample without namespaces of its own can leave on the host, by its run's uid: SysV shared memory
    segments, and files in the world-writable folders (which would hold memory, or disk, after the run)."""
    import ctypes

    for folder in ("/dev/shm", "/tmp", "/var/tmp"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            try:
                if os.lstat(path).st_uid != uid:
                    continue
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            except OSError:
                pass

    try:
        with open("/proc/sysvipc/shm") as f:
            rows = [line.split() for line in f.readlines()[1:]]
    except OSError:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for row in rows:
        if len(row) > 9 and str(uid) in (row[7], row[9]):
            libc.shmctl(int(row[1]), 0, None)     # IPC_RMID


def _read_now(fd: int) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


def _reports(raw: bytes) -> dict:
    """The status lines, merged: the sample's process reports first (started, cgroup), the launcher last."""
    report: dict = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            report.update(data)
    return report


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


class _Capture:
    """Keeps the head and the tail of a stream, reading it without ever holding more than that."""

    def __init__(self, keep: int = KEEP):
        self.keep, self.head, self.tail, self.total = keep, bytearray(), bytearray(), 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            del self.tail[:-self.keep // 2]

    def text(self) -> str:
        if not self.tail:
            return self.head.decode("utf-8", "replace")
        head = self.head[: self.keep // 2].decode("utf-8", "replace")
        dropped = self.total - self.keep // 2 - len(self.tail)
        return f"{head}\n[... {dropped} bytes left out ...]\n{self.tail.decode('utf-8', 'replace')}"

    def last_line(self) -> str:
        """The last line that is not part of a traceback's frames (those are indented): the
        exception's own line, also when a process killed mid-write left a partial traceback
        after it (a fork bomb's children)."""
        data = self.tail if self.tail else self.head
        for ln in reversed(data.decode("utf-8", "replace").splitlines()):
            if ln.strip() and not ln[0].isspace() and not ln.startswith("Traceback (most recent call last)"):
                return ln.strip()
        return ""


def _reason_from(stderr: _Capture, returncode: int | None) -> str:
    line = stderr.last_line()
    if line and not line.startswith(("File ", "^", "~")):
        return line[:300]
    return f"exit code {returncode}"


class Sandbox:
    """Runs Python programs in isolation with resource limits. ``isolation`` says what is in force."""

    def __init__(self, *, timeout_s: float = 10.0, cpu_s: float | None = None, memory_mb: int = 1024,
                 max_procs: int = 32, max_file_mb: int = 16, isolation: str = "auto"):
        if isolation not in ISOLATIONS:
            raise SandboxError(f"sandbox isolation {isolation!r}: choose one of {', '.join(ISOLATIONS)}"
                               + (" (running generated code without a sandbox is refused)"
                                  if isolation == "none" else ""))
        for name, value in (("timeout_s", timeout_s), ("memory_mb", memory_mb), ("max_procs", max_procs),
                            ("max_file_mb", max_file_mb)):
            if not value or value <= 0:
                raise SandboxError(f"sandbox {name}: must be positive, got {value!r}")
        if cpu_s is not None and cpu_s <= 0:
            raise SandboxError(f"sandbox cpu_s: must be positive, got {cpu_s!r}")
        self.timeout_s = float(timeout_s)
        self.cpu_s = max(1, int(-(-(cpu_s if cpu_s is not None else timeout_s) // 1)))
        self.memory_mb, self.max_procs, self.max_file_mb = int(memory_mb), int(max_procs), int(max_file_mb)
        self.root = os.geteuid() == 0
        self.mode = self._choose(isolation)
        self.python, self.prefixes = _python()
        if self.mode == "rlimits" and self.root and not _reachable_by_others(self.python):
            # the fresh uid cannot reach this interpreter (e.g. under /root): a system one, or refuse
            for candidate in ("/usr/local/bin/python3", "/usr/bin/python3"):
                if os.path.exists(candidate) and _reachable_by_others(candidate):
                    self.python = os.path.realpath(candidate)
                    break
            else:
                raise SandboxError(f"sandbox isolation 'rlimits': {self.python} cannot be run by an "
                                   "unprivileged uid; install python3 under /usr or allow namespaces (unshare)")
        parents, version, why = _find_cgroup()
        self.limit = "cgroup" if parents else "rlimit"
        self.limit_detail = (f"{self.memory_mb} MB over all of a sample's processes, shared memory and memfds, "
                             f"cgroup v{version}" if parents else
                             f"{self.memory_mb} MB of address space per process, RLIMIT_AS; no cgroup: {why}")
        self.isolation = {
            "unshare": "unshare(mount,pid,net,ipc,uts)+chroot+fresh uid+rlimits",
            "unshare-user": "unshare(user,mount,pid,net,ipc,uts)+chroot+no capabilities+rlimits",
            "bwrap": "bwrap(mount,pid,net,ipc,uts)+fresh uid+rlimits" if self.root
            else "bwrap(user,mount,pid,net,ipc,uts)+rlimits",
            "rlimits": "rlimits" + ("+fresh uid" if self.root else ""),
        }[self.mode]

    def _choose(self, wanted: str) -> str:
        if wanted == "rlimits":
            return "rlimits"
        if wanted == "bwrap":
            if not shutil.which("bwrap"):
                raise SandboxError("sandbox isolation 'bwrap': bwrap is not installed (Debian: apt install "
                                   "bubblewrap)")
            if not _bwrap_works(self.root):
                raise SandboxError("sandbox isolation 'bwrap': bwrap is installed but cannot create namespaces "
                                   "here")
            return "bwrap"
        if wanted == "unshare":
            if not shutil.which("unshare"):
                raise SandboxError("sandbox isolation 'unshare': the unshare command (util-linux) is not "
                                   "installed")
            if self.root and _unshare_works(user=False):
                return "unshare"
            if _unshare_works(user=True):
                return "unshare-user"
            raise SandboxError("sandbox isolation 'unshare': unshare cannot create namespaces here (needs root "
                               "or unprivileged user namespaces)")
        # auto: as root our own launcher (fresh uid per run); otherwise bwrap, then user namespaces
        if self.root and _unshare_works(user=False):
            return "unshare"
        if _bwrap_works(self.root):
            return "bwrap"
        if _unshare_works(user=True):
            return "unshare-user"
        return "rlimits"

    # --------------------------------------------------------------------------------------------------

    def _limits(self) -> dict:
        mb = 1024 * 1024
        nproc = self.max_procs
        if self.mode != "unshare" and not self.root:
            nproc += _count_own_processes()     # counted over all of the caller's processes
        return {"RLIMIT_CPU": [self.cpu_s, self.cpu_s + 1], "RLIMIT_AS": self.memory_mb * mb,
                "RLIMIT_NPROC": nproc, "RLIMIT_FSIZE": self.max_file_mb * mb, "RLIMIT_CORE": 0,
                "RLIMIT_NOFILE": 256}

    def judge(self, program: str) -> SandboxResult:
        """Runs ``program`` for a verdict: once more when the first run gave none (killed, or the sandbox
        failed), so a sample the machine killed under load is not scored. A second run without a verdict is
        returned as it is (``attempts`` 2): the caller counts it apart, never as a failure."""
        first = self.run(program)
        if first.judged:
            return first
        again = self.run(program)
        again.attempts, again.retried = 2, f"{first.status}: {first.reason}"
        return again

    def run(self, program: str) -> SandboxResult:
        """Runs ``program`` to completion or to a limit; never raises for anything the program does."""
        python, prefixes = self.python, self.prefixes
        uid = _uid() if self.root and self.mode in ("unshare", "rlimits", "bwrap") else None
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
        status_r, status_w = os.pipe()
        workdir = None
        cfg = {"mode": "ns" if self.mode.startswith("unshare") else self.mode, "status_fd": status_w,
               "uid": uid, "gid": uid, "python": python, "prefixes": prefixes, "limits": self._limits(),
               "tmp_mb": max(2 * self.max_file_mb, 16), "mount_proc": True, "drop_caps": self.mode != "unshare",
               "kill_all": KILL_ALL, "harness": HARNESS, "cgroup_fds": [],
               "ipc": {"shmmax": self.memory_mb * 2**20,
                       "shmall": self.memory_mb * 2**20 // os.sysconf("SC_PAGE_SIZE"), "shmmni": 64, "msgmni": 16}}
        launcher = [sys.executable, "-I", "-S", "-c", LAUNCHER]
        if self.mode == "unshare":
            cmd = [shutil.which("unshare") or "unshare", *NS_FLAGS, "--", *launcher]
        elif self.mode == "unshare-user":
            cmd = [shutil.which("unshare") or "unshare", "--user", "--map-root-user", *NS_FLAGS, "--", *launcher]
        elif self.mode == "bwrap":
            cmd = self._bwrap_cmd(cfg)
        else:
            workdir = tempfile.mkdtemp(prefix="assay-sandbox-")
            if uid is not None:
                os.chown(workdir, uid, uid)
            os.chmod(workdir, 0o700)
            cfg["workdir"] = workdir
            cmd = launcher
        env["HOME"] = env["TMPDIR"] = cfg.get("workdir") or "/tmp"
        cfg["env"] = env
        cgroup, cg_fds = self._cgroup()
        cfg["cgroup_fds"] = cg_fds
        cmd.append(json.dumps(cfg))
        try:
            return self._run(cmd, program, status_r, status_w, uid, cgroup, cg_fds)
        finally:
            os.close(status_r)
            if cgroup is not None:
                cgroup.remove()
            if self.mode == "rlimits" and uid is not None:
                _remove_leftovers_of(uid)
            if workdir:
                shutil.rmtree(workdir, ignore_errors=True)

    def _bwrap_cmd(self, cfg: dict) -> list[str]:
        cmd = [shutil.which("bwrap") or "bwrap", *_bwrap_flags(self.root), "--die-with-parent", "--new-session",
               "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for top in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
            if os.path.islink("/" + top):
                cmd += ["--symlink", os.readlink("/" + top), "/" + top]
            elif os.path.isdir("/" + top):
                cmd += ["--ro-bind", "/" + top, "/" + top]
        for prefix in self.prefixes:
            # the folders above it as plain searchable folders (bwrap would copy a private /root's mode)
            parts = prefix.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                cmd += ["--perms", "0755", "--dir", "/" + "/".join(parts[:i])]
            cmd += ["--ro-bind", prefix, prefix]
        launcher = [self.python, "-I", "-S", "-c", LAUNCHER]   # the venv link may point outside the view
        cmd += ["--proc", "/proc", "--dev", "/dev", "--perms", "0700", "--size", str(cfg["tmp_mb"] * 2**20),
                "--tmpfs", "/tmp", "--chdir", "/tmp",
                "--clearenv", "--", *launcher]
        cfg["workdir"] = "/tmp"
        cfg["drop_caps"] = False
        return cmd

    def _cgroup(self) -> tuple[_RunCgroup | None, list[int]]:
        parents, version, _ = _find_cgroup()
        if not parents:
            return None, []
        try:
            cg = _RunCgroup(parents, version, self.memory_mb, self.max_procs)
        except OSError:
            return None, []                      # this run is bounded per process only, and says so
        try:
            return cg, cg.procs_fds()
        except OSError:
            cg.remove()
            return None, []

    def cgroup_children(self) -> list[str]:
        """The run cgroups of this process that exist now (each run removes its own when it ends)."""
        parents, _, _ = _find_cgroup()
        prefix = f"assay-sandbox-{os.getpid()}-"
        return sorted(os.path.join(p, n) for p in set(parents.values()) for n in os.listdir(p) if n.startswith(prefix))

    def _run(self, cmd, program, status_r, status_w, uid, cgroup, cg_fds) -> SandboxResult:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    pass_fds=(status_w, *cg_fds), start_new_session=True, close_fds=True,
                                    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
        except OSError as e:
            return SandboxResult("error", None, "", "", 0.0, 0.0, self.isolation, f"sandbox start: {e}")
        finally:
            for fd in (status_w, *cg_fds):
                os.close(fd)
        try:
            proc.stdin.write(program.encode("utf-8", "surrogateescape"))
            proc.stdin.close()
        except OSError:
            pass
        out, err = _Capture(), _Capture()
        timed_out = self._pump(proc, out, err, start + self.timeout_s)
        early = b""
        if timed_out:
            early = _read_now(status_r)            # what was reported by the deadline: had the program started?
            self._kill(proc, uid)
            self._pump(proc, out, err, time.monotonic() + 2.0)   # the rest, now that everything is dead
        for stream in (proc.stdout, proc.stderr):
            stream.close()
        try:
            _, wstatus, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(wstatus)
            spent = usage.ru_utime + usage.ru_stime
        except ChildProcessError:                  # reaped already; its time is not known
            proc.wait()
            spent = 0.0
        wall = time.monotonic() - start
        report = _reports(early)
        started_in_time = bool(report.get("started"))
        report.update(_reports(_read_now(status_r)))
        report["started_in_time"] = started_in_time or not timed_out
        cpu = float(report.get("cpu", spent))
        report["oom_kills"] = cgroup.oom_kills() if cgroup is not None else 0
        return self._result(report, timed_out, out, err, wall, cpu)

    def _pump(self, proc, out: _Capture, err: _Capture, deadline: float) -> bool:
        """Reads both pipes until they close (False) or the deadline passes (True)."""
        sel = selectors.DefaultSelector()
        for stream, cap in ((proc.stdout, out), (proc.stderr, err)):
            if not stream.closed:
                os.set_blocking(stream.fileno(), False)
                sel.register(stream, selectors.EVENT_READ, cap)
        try:
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    return True
                for key, _ in sel.select(left):
                    try:
                        data = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    if data:
                        key.data.add(data)
                    else:
                        sel.unregister(key.fileobj)
            return False
        finally:
            sel.close()

    def _kill(self, proc, uid) -> None:
        # os.kill, not Popen.kill: that one may reap the process, and its rusage is wanted afterwards.
        # With a PID namespace, kill its PID 1 (the child of unshare / bwrap) first: the kernel then kills every
        # process of the namespace and PID 1's exit, hence unshare's, completes only once they are all gone,
        # so the run ends with nothing of it left. Killing unshare itself would return before that.
        if self.mode != "rlimits":
            give_up = time.monotonic() + 5.0
            while time.monotonic() < give_up:
                for child in _children(proc.pid):      # each round: a PID 1 forked after the deadline goes too
                    try:
                        os.kill(child, signal.SIGKILL)
                    except OSError:
                        pass
                if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return                             # exited (not reaped: wait4 takes its rusage)
                time.sleep(0.005)
        for kill, target in ((os.killpg, proc.pid), (os.kill, proc.pid)):
            try:
                kill(target, signal.SIGKILL)
            except OSError:
                pass
        if self.mode == "rlimits" and uid is not None:
            # processes that left the group (setsid): everything running as the run's own uid
            code = f"import os\nos.setresuid({uid},{uid},{uid})\n{KILL_ALL}"
            subprocess.run([sys.executable, "-I", "-S", "-c", code], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10, check=False)

    def _signal_outcome(self, sig: int, cpu: float) -> tuple[str, str]:
        """The status and reason of a program that died of signal ``sig``."""
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= self.cpu_s):
            return "timeout", f"CPU time limit of {self.cpu_s} s exceeded ({name})"
        if sig == signal.SIGXFSZ:
            return "failed", f"file size limit of {self.max_file_mb} MB exceeded (SIGXFSZ)"
        if sig in CRASHES:
            return "failed", f"crashed ({name})"
        return "killed", f"killed by {name}"

    def _result(self, report, timed_out, out, err, wall, cpu) -> SandboxResult:
        rc = report.get("rc")
        sig = report.get("signal")
        limit = "cgroup" if report.get("cgroup") == "joined" else "rlimit"
        made = lambda status, reason: SandboxResult(  # noqa: E731
            status, rc if sig is None else -sig, out.text(), err.text(), round(wall, 6), round(cpu, 6),
            self.isolation, reason, limit)
        if timed_out:
            status, why = "timeout", f"timeout after {self.timeout_s:g} s wall"
            if not report.get("started_in_time"):
                status, why = "killed", (f"the sandbox had not started the program when the {self.timeout_s:g} s "
                                         "wall limit passed (an overloaded machine?)")
            return SandboxResult(status, None, out.text(), err.text(), round(wall, 6), round(cpu, 6),
                                 self.isolation, why, limit)
        if "error" in report:
            return made("error", report["error"])
        if report.get("oom_kills"):
            return made("memory", f"memory limit of {self.memory_mb} MB for the whole sample exceeded (cgroup): "
                                  "killed by the OOM killer")
        if sig is not None:
            return made(*self._signal_outcome(sig, cpu))
        if rc is None:
            return made("error", "the sandbox launcher ended without reporting: " + (err.last_line() or "no output"))
        if rc == 0:
            if report.get("completed"):
                return made("passed", "")
            return made("failed", "exited with status 0 before the end of the program: its checks did not all run")
        reason = _reason_from(err, rc)
        if reason.startswith("MemoryError"):
            return made("memory", reason + f" (memory limit {self.memory_mb} MB)")
        return made("failed", reason)
