"""PostgreSQL from Debian's packages, with ``wal_level=logical``, for the change-data tests.

The suite's source of real change events (tests/support/debezium.py reads them with Debezium's
PostgreSQL connector). Nothing is downloaded here: the server is Debian's ``postgresql``
package (``.ci/run`` installs it with apt when ``initdb`` is missing). Each run makes a new
cluster with ``initdb`` in a temporary folder and starts ``postgres`` on a free 127.0.0.1
port, with no Unix socket, trusted local connections and durability turned off (a test
database lives for one run).

PostgreSQL refuses to run as root: when the suite runs as root (CI here does) the server
runs as the ``postgres`` user the Debian package creates (``KAFKA_DS_POSTGRES_USER`` names
another), switched to with ``setpriv``, and the cluster's folder is given to that user.

The server runs under ``mock_cluster_child.py guard --owner PID`` as the brokers do: the
guard stops it (SIGTERM, PostgreSQL's smart shutdown, then SIGKILL) when its owner exits.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support import procfs
from tests.support.apache_kafka import _pid_alive
from tests.support.brokers import HOST, BrokerError, _log_tail, free_ports
from tests.support.guarded import start_guarded

USER_OVERRIDE = "KAFKA_DS_POSTGRES_USER"
DATABASE = "postgres"
SUPERUSER = "postgres"

# Settings of a test server: logical decoding for Debezium, small memory, no durability
SETTINGS = {
    "listen_addresses": HOST,
    "unix_socket_directories": "",  # TCP only: no socket file in a shared folder
    "wal_level": "logical",  # Debezium's pgoutput replication slots
    "max_wal_senders": "8",
    "max_replication_slots": "8",
    "max_connections": "40",
    "shared_buffers": "32MB",
    "fsync": "off",  # a test cluster lives for one run
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "log_min_messages": "warning",
}


class PostgresStartError(BrokerError):
    """PostgreSQL could not be found or started (the message says what to do)."""


def bin_dir() -> Path:
    """The folder of ``initdb`` and ``postgres``: on PATH, else the newest
    ``/usr/lib/postgresql/N/bin`` (Debian's layout: the package puts only wrappers on PATH)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda path: int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(os.path.realpath(initdb)).parent
    raise PostgresStartError(
        "PostgreSQL's server is not installed (no initdb on PATH or under "
        "/usr/lib/postgresql): apt-get install -y postgresql"
    )


def _run_as() -> list[str]:
    """The command prefix that runs the server as a user other than root (none otherwise)."""
    if os.geteuid() != 0:
        return []
    name = os.environ.get(USER_OVERRIDE) or "postgres"
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise PostgresStartError(
            f"PostgreSQL refuses to run as root and there is no user {name!r} to run it as: "
            f"install Debian's postgresql package (it creates 'postgres') or set "
            f"{USER_OVERRIDE} to an existing user"
        ) from None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise PostgresStartError("running PostgreSQL as root's stand-in needs setpriv (util-linux)")
    return [
        setpriv,
        f"--reuid={entry.pw_uid}",
        f"--regid={entry.pw_gid}",
        "--init-groups",
        "--reset-env",
        "--",
    ]


class Postgres:
    """One PostgreSQL server on 127.0.0.1. ``dsn`` is a libpq connection string (psycopg's
    ``connect`` takes it); ``port`` is what Debezium's ``database.port`` takes."""

    def __init__(self, *, owner_pid: int | None = None, start_timeout: float = 60.0):
        self.owner_pid = owner_pid or os.getpid()
        self.directory = tempfile.mkdtemp(prefix="kafka_ds-postgres-")
        self.data = os.path.join(self.directory, "data")
        self.log_path = os.path.join(self.directory, "server.log")
        (self.port,) = free_ports(1)
        self.pid: int | None = None
        self.owned = True
        self._guard: subprocess.Popen | None = None
        try:
            self._start(start_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def dsn(self) -> str:
        return f"host={HOST} port={self.port} user={SUPERUSER} dbname={DATABASE}"

    def _start(self, timeout: float) -> None:
        started = time.monotonic()
        binaries = bin_dir()
        prefix = _run_as()
        if prefix:  # the server's user owns its folder
            entry = pwd.getpwnam(os.environ.get(USER_OVERRIDE) or "postgres")
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        init = subprocess.run(
            [
                *prefix,
                str(binaries / "initdb"),
                "-D",
                self.data,
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if init.returncode != 0:
            raise PostgresStartError(f"initdb failed:\n{init.stdout[-2000:]}{init.stderr[-2000:]}")
        settings = {**SETTINGS, "port": str(self.port)}
        command = [
            *prefix,
            str(binaries / "postgres"),
            "-D",
            self.data,
            *(f"--{key}={value}" for key, value in settings.items()),
        ]
        self._guard, pid = start_guarded(
            command, self.log_path, self.owner_pid, 10, cwd=self.directory
        )
        if pid is None:
            raise PostgresStartError("the guard did not start PostgreSQL")
        self.pid = pid  # setpriv execs the server: same process
        self._wait_ready(binaries, timeout)
        self.start_seconds = time.monotonic() - started

    def _wait_ready(self, binaries: Path, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not _pid_alive(self.pid):
                raise PostgresStartError(f"PostgreSQL exited during start-up:\n{self.log_tail()}")
            ready = subprocess.run(
                [str(binaries / "pg_isready"), "-q", "-h", HOST, "-p", str(self.port)],
                capture_output=True,
                timeout=30,
            )
            if ready.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise PostgresStartError(
                    f"PostgreSQL not ready after {timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def is_alive(self) -> bool:
        return _pid_alive(self.pid)

    def rss_bytes(self) -> int:
        """Resident memory of the server's processes (the postmaster and its children)."""
        if self.pid is None:
            return 0
        total = 0
        for pid in [self.pid, *_children(self.pid)]:
            with contextlib.suppress(OSError, ValueError):
                total += procfs.rss_bytes(pid)
        return total

    def log_tail(self, lines: int = 40) -> str:
        return _log_tail(self.log_path, lines)

    def stop(self) -> None:
        if not self.owned:
            return
        if self.pid and _pid_alive(self.pid):
            os.kill(self.pid, signal.SIGINT)  # fast shutdown: sessions ended, no checkpoint wait
        deadline = time.monotonic() + 20
        while self.pid and _pid_alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.pid and _pid_alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)
        if self._guard is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._guard.wait(10)
            self._guard = None
        if not os.environ.get("KAFKA_DS_KEEP_BROKER_LOGS"):
            shutil.rmtree(self.directory, ignore_errors=True)

    def state(self) -> dict:
        return {
            "directory": self.directory,
            "pid": self.pid,
            "port": self.port,
            "start_seconds": round(self.start_seconds, 1),
        }

    @classmethod
    def attach(cls, state: dict) -> Postgres:
        """A handle on a server another process started (that one stops it)."""
        server = cls.__new__(cls)
        server.owner_pid = 0
        server.directory = state["directory"]
        server.data = os.path.join(server.directory, "data")
        server.log_path = os.path.join(server.directory, "server.log")
        server.port = state["port"]
        server.pid = state["pid"]
        server.start_seconds = state["start_seconds"]
        server.owned = False
        server._guard = None
        return server


def _children(pid: int | None) -> list[int]:
    if pid is None:
        return []
    with contextlib.suppress(OSError):
        tasks = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [int(child) for child in tasks]
    return []
