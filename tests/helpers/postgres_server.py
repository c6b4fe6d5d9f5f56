"""A real PostgreSQL server for the tests: a fresh cluster in a temporary folder, listening
on a free loopback port, started with Debian's binaries and stopped at the end.

initdb refuses to run as root, so as root the cluster is created and run as the
``postgres`` system user (created by Debian's package).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time


def pg_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


class PostgresServer:
    def __init__(self) -> None:
        self.bin = pg_bin()
        if self.bin is None:
            raise RuntimeError("PostgreSQL is not installed (Debian package 'postgresql'; `make test` installs it)")
        self.dir = tempfile.mkdtemp(prefix="assay-pg-")
        self.data = os.path.join(self.dir, "data")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            os.chmod(self.dir, 0o777)
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, timeout=120)

    @property
    def url(self) -> str:
        return f"postgresql://assay@127.0.0.1:{self.port}/assay"

    def start(self) -> PostgresServer:
        self._run(f"{self.bin}/initdb", "-D", self.data, "-U", "assay", "--auth=trust", "-E", "UTF8")
        self._run(f"{self.bin}/pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w", "-o",
                  f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off", "start")
        deadline = time.time() + 30
        while True:
            try:
                self._run(f"{self.bin}/createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "assay", "assay")
                return self
            except subprocess.CalledProcessError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        try:
            self._run(f"{self.bin}/pg_ctl", "-D", self.data, "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
