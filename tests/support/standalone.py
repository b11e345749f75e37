"""A Spark standalone cluster on this machine whose workers have different hosts.

Spark never starts a speculative copy of a task on a host where an attempt of it is
running (TaskSetManager's ``hasAttemptOnHost``), and every executor of a ``local-cluster``
master has the same host, so speculation needs a real cluster: one master on 127.0.0.1
and one one-core worker per loopback address 127.0.0.2, 127.0.0.3, ... (Linux answers
on all of 127/8). Processes come from the pip pyspark's ``bin/spark-class``.
"""

from __future__ import annotations

import os
import signal
import subprocess

from tests.support import waiting
from tests.support.brokers import free_ports


def spark_home() -> str:
    """The suite's Spark home (tests/support/spark_home.py), else the pip pyspark's folder."""
    import pyspark

    return os.environ.get("SPARK_HOME") or os.path.dirname(os.path.abspath(pyspark.__file__))


class StandaloneCluster:
    def __init__(
        self, workdir: str, workers: int = 2, worker_memory: str = "1g", start_timeout: float = 90.0
    ):
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.port, self.ui_port, *self.worker_ui_ports = free_ports(2 + workers)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.hosts = [f"127.0.0.{2 + i}" for i in range(workers)]
        self._procs: list[subprocess.Popen] = []
        properties = os.path.join(workdir, "cluster.properties")
        with open(properties, "w") as f:
            f.write("spark.master.rest.enabled false\n")
        try:
            self._start(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(self.ui_port),
                    "--properties-file",
                    properties,
                ],
            )
            for i, host in enumerate(self.hosts):
                self._start(
                    f"worker{i}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        host,
                        "--cores",
                        "1",
                        "--memory",
                        worker_memory,
                        "--webui-port",
                        str(self.worker_ui_ports[i]),
                        "--work-dir",
                        os.path.join(workdir, f"work{i}"),
                        "--properties-file",
                        properties,
                        self.url,
                    ],
                )
            self._wait(workers, start_timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, args: list[str]) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": spark_home(),
            "SPARK_NO_DAEMONIZE": "1",
            "SPARK_LOG_DIR": self.workdir,
        }
        log = open(os.path.join(self.workdir, f"{name}.log"), "wb")
        self._procs.append(
            subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        )
        log.close()

    def _wait(self, workers: int, timeout: float) -> None:
        """Until the master's ``/json/`` page counts ``workers`` alive workers. Any other
        answer (refused, an HTTP error, the UI's HTML page before its JSON one) is "not
        ready yet"."""
        url = f"http://127.0.0.1:{self.ui_port}/json/"
        alive = None

        def alive_workers():
            nonlocal alive
            status = waiting.get_json(url)
            alive = status.get("aliveworkers") if isinstance(status, dict) else None
            return True if alive == workers else None

        def died():
            for proc in self._procs:
                if proc.poll() is not None:
                    return "a Spark cluster process exited"  # its log follows below
            return None

        try:
            waiting.wait_until(
                f"{workers} Spark workers registered with the master ({url})",
                alive_workers,
                timeout,
                interval=0.5,
                died=died,
            )
        except waiting.NotReady as exc:
            raise RuntimeError(f"{exc} (alive: {alive})\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for name in sorted(os.listdir(self.workdir)):
            if name.endswith(".log"):
                with open(os.path.join(self.workdir, name), errors="replace") as f:
                    out.append(f"== {name}\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(out)

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in self._procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=20)
        self._procs.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
