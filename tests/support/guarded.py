"""A server started under the guard child (``mock_cluster_child.py guard``), as Apache
Kafka's nodes, Apicurio Registry, Kafka Connect and PostgreSQL are: the guard starts the
command in a session of its own, appends its output to a log file, prints ``pid N`` and
stops the server (SIGTERM, SIGKILL after ``grace`` seconds) when the owning test process
is gone, so a killed pytest leaves no server behind.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.brokers import CHILD_SCRIPT

#: what a JVM of the suite must not inherit: Spark's class archive and flags
#: (``JAVA_TOOL_OPTIONS`` is Java 17's, a Java 21+ server refuses it), a class path, the
#: launch scripts' option variables
JVM_ENV_DROPPED = (
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "JAVA_OPTS",
    "KAFKA_OPTS",
)


def jvm_environment() -> dict:
    """This process's environment without :data:`JVM_ENV_DROPPED`."""
    return {key: value for key, value in os.environ.items() if key not in JVM_ENV_DROPPED}


def start_guarded(
    command: list[str],
    log_path: str,
    owner_pid: int,
    grace_s: int,
    *,
    env: dict | None = None,
    cwd: str | None = None,
) -> tuple[subprocess.Popen, int | None]:
    """Start ``command`` under the guard; returns the guard and the server's pid (None
    when the guard did not start it: its log says why)."""
    guard = subprocess.Popen(
        [
            sys.executable,
            CHILD_SCRIPT,
            "guard",
            log_path,
            "--owner",
            str(owner_pid),
            "--grace",
            str(grace_s),
            "--",
            *command,
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        close_fds=True,
        start_new_session=True,
    )
    assert guard.stdout is not None  # stdout=PIPE
    first = guard.stdout.readline().decode().split()  # "pid N" (nothing if the guard died)
    guard.stdout.close()
    return guard, int(first[1]) if first[:1] == ["pid"] else None
