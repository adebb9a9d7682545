"""Throwaway Redis and PostgreSQL servers of a test's own, on free ports, that the test may stop
and start at will — the shared servers on 5432 and 6379 serve other test runs and are never
stopped. Used by the fault-matrix tests and by bench/soak.py.

PostgreSQL's `initdb` refuses to run as root (CI runs as root): the cluster then belongs to the
``postgres`` system user and its commands run through ``runuser``.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait(condition: Callable[[], object], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


class ThrowawayRedis:
    """``redis-server`` in the foreground, no persistence: a restart comes back empty, as a
    Redis without AOF does after a crash."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> "ThrowawayRedis":
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait(lambda: _answers(self.port), timeout=10, what=f"redis-server on {self.port}")
        return self

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.process = None
        _wait(lambda: not _answers(self.port), timeout=10, what="redis-server to stop")


class ThrowawayPostgres:
    """A PostgreSQL cluster in a temporary directory, trust auth, user ``postgres``."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.as_root = os.geteuid() == 0
        self.directory = Path(tempfile.mkdtemp(prefix="throwaway-pg-"))
        self.data = self.directory / "data"
        if self.as_root:
            shutil.chown(self.directory, user="postgres", group="postgres")

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        return subprocess.run(
            [*prefix, *command], check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )

    def init(self) -> "ThrowawayPostgres":
        self._run(
            str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "-N"
        )
        return self

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.directory / "server.log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        _wait(lambda: not _answers(self.port), timeout=10, what="PostgreSQL to stop")

    def create_database(self, name: str) -> None:
        self._run(
            str(PG_BIN / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            name,
        )

    def destroy(self) -> None:
        self._run(
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop", check=False
        )
        shutil.rmtree(self.directory, ignore_errors=True)
