"""The soak's processes: the /proc table of the driver's session (roles, executor JVMs and
their Python workers), the queries' checkpoints, and the Spark driver child."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from soak_common import HERE, ROOT, log, now

from tests.support import procfs

# --- processes --------------------------------------------------------------------------


def proc_table() -> dict:
    """pid -> (ppid, session id, rss KiB, cmdline) of every process we may read."""
    table = {}
    for pid in procfs.pids():
        try:
            stat = procfs.stat(pid)
            cmd = procfs.cmdline(pid)
            rss = procfs.status_kib(pid).get("VmRSS", 0)
        except (OSError, ValueError, IndexError):
            continue
        table[pid] = (stat.ppid, stat.session, rss, cmd)
    return table


def session_pids(session_id, table=None) -> list[int]:
    table = table or proc_table()
    return [pid for pid, row in table.items() if row[1] == session_id]


def kill_session(session_id: int) -> None:
    for pid in session_pids(session_id):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def executor_pids(session_id) -> list[int]:
    table = proc_table()
    return [
        pid
        for pid in session_pids(session_id, table)
        if "CoarseGrainedExecutorBackend" in table[pid][3]
    ]


def python_under(jvms, session_id) -> list[int]:
    """Python processes of the session descended from one of the JVM pids ``jvms``."""
    table = proc_table()
    out = []
    for pid in session_pids(session_id, table):
        if "python" not in table[pid][3]:
            continue
        parent, seen = table[pid][0], 0
        while parent in table and parent not in jvms and seen < 20:
            parent, seen = table[parent][0], seen + 1
        if parent in jvms:
            out.append(pid)
    return out


def classify(session_id, table) -> dict:
    """pid -> role name for the driver's session, plus this process."""
    pids = set(session_pids(session_id, table))
    roles = {}
    jvm_role = {}
    for pid in pids:
        cmd = table[pid][3]
        if "CoarseGrainedExecutorBackend" in cmd:
            parts = cmd.split()
            eid = parts[parts.index("--executor-id") + 1] if "--executor-id" in parts else "?"
            jvm_role[pid] = roles[pid] = f"executor {eid} JVM"
        elif "org.apache.spark.deploy.SparkSubmit" in cmd:
            jvm_role[pid] = roles[pid] = "driver JVM"
        elif pid == session_id:
            roles[pid] = "driver Python"
    for pid in pids - set(roles):
        if "python" not in table[pid][3]:
            continue
        parent, seen = table[pid][0], 0
        while parent in table and parent not in jvm_role and seen < 20:
            parent, seen = table[parent][0], seen + 1
        owner = jvm_role.get(parent, "driver JVM")
        roles[pid] = owner.replace(" JVM", "") + " Python workers"
    roles[os.getpid()] = "soak process"
    return roles


# --- checkpoints --------------------------------------------------------------------------


def _batch_ids(path):
    if not os.path.isdir(path):
        return []
    return sorted(int(n) for n in os.listdir(path) if n.isdigit())


def checkpoint_state(checkpoint, topic):
    """(last committed batch id, its end offsets per partition {p: o}, batch running?)."""
    commits = _batch_ids(os.path.join(checkpoint, "commits"))
    offsets = _batch_ids(os.path.join(checkpoint, "offsets"))
    last = commits[-1] if commits else -1
    ends = {}
    if last >= 0:
        try:
            with open(os.path.join(checkpoint, "offsets", str(last))) as f:
                lines = f.read().splitlines()
            for line in lines[2:]:
                data = json.loads(line)
                if isinstance(data, dict) and topic in data:
                    ends = {int(p): int(o) for p, o in data[topic].items()}
        except (OSError, ValueError):
            pass
    running = bool(offsets) and offsets[-1] > last
    return last, ends, running


# --- the driver -----------------------------------------------------------------------------


class Driver:
    """The Spark driver child: start, kill, watch, restart."""

    def __init__(self, spec, work):
        self.spec, self.work = spec, work
        self.log_path = os.path.join(work, "driver.log")
        self.proc = None
        self.starts = 0
        self.failures = []  # (t, exit code, FAILED line)
        self.kills = 0
        self._log_pos = 0

    def start(self):
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        env["PYTHONPATH"] = os.pathsep.join(
            [ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        with open(self.log_path, "ab") as out:
            self._log_pos = out.tell()
            self.proc = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "_soak_eos_child.py"), json.dumps(self.spec)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self.starts += 1
        log(f"driver started (pid {self.proc.pid}, start {self.starts})")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is None:
            return
        kill_session(self.proc.pid)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            kill_session(self.proc.pid)
            self.proc.wait(60)
        kill_session(self.proc.pid)  # anything its session started meanwhile
        self.kills += 1

    def output(self) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(self._log_pos)
            return f.read().decode(errors="replace")

    def started(self) -> bool:
        return "STARTED" in self.output()

    def note_exit(self):
        """The driver exited by itself: remember why; kill what its session left."""
        text = self.output()
        lines = text.splitlines()
        failed = (
            [line for line in lines if line.startswith("FAILED")]
            or [line for line in lines if "kafka_ds." in line and "Error" in line]
            or [line for line in lines if "Exception:" in line or "Error:" in line]
        )
        reason = failed[-1] if failed else "\n".join(lines[-15:])
        self.failures.append({"t": now(), "exit": self.proc.returncode, "error": reason[:3000]})
        log(f"driver exited with {self.proc.returncode}: {reason[:600]}")
        kill_session(self.proc.pid)
