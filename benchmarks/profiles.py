"""Where a benchmark case's time goes: py-spy on Spark's Python workers, JFR on the Spark JVM,
and the CPU seconds of every process (``bench_jvm.py --profile DIR``).

For a case, :class:`Profiler` records

* in a run with nothing attached: the wall time and the CPU seconds of the broker, the Spark
  JVM and its Python workers (``cpu_use.Timed``);
* in a second run: ``py-spy record --subprocesses`` of the ``pyspark.daemon`` that forks the
  ``pyspark.worker`` processes (the reads' and writes' Python tasks), raw stacks in
  ``DIR/<case>.pyspy.<pid>.txt``, without idle samples (CPU, not waiting), and a Java Flight
  Recording of the Spark JVM (``jcmd <pid> JFR.start settings=default``: a stack every 20 ms
  per running thread; ``settings=profile`` tripled the connector's time), ``DIR/<case>.jfr``;

and :func:`summary` turns them into the frames that take the most samples: by leaf
function (self time), and by the first frame of kafka_ds, pyspark, Arrow or Spark's
connector below the entry point (where a sample's time goes, inclusive). py-spy comes from
PyPI (``pip install py-spy``); ``jcmd`` and ``jfr`` ship with the JDK.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import cpu_use
from harness import processes

# Frames worth naming for inclusive time (a sample counts once for each it passes).
PYTHON_MARKS = ("kafka_ds/", "pyspark/", "pyarrow/")
JAVA_MARKS = (
    "org.apache.spark.sql.kafka010.",
    "org.apache.kafka.",
    "org.apache.spark.sql.execution.python.",
    "org.apache.spark.api.python.",
    "org.apache.arrow.",
    "org.apache.spark.sql.execution.arrow.",
    "org.apache.spark.sql.catalyst.expressions.",
    "org.apache.spark.storage.",
)


#: more places to look for py-spy: bench_jvm.py runs in the connector's venv, py-spy is in
#: the project's (``--drawing-python``'s directory)
TOOL_DIRS: list[str] = []


def _tool(name: str) -> str | None:
    for folder in [os.path.dirname(sys.executable), *TOOL_DIRS]:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    return shutil.which(name)


class Profiler:
    def __init__(self, out_dir: str, broker, spark):
        self.out_dir = out_dir
        self.broker = broker
        self.spark = spark
        self.jvm = spark.sparkContext._gateway.proc.pid
        self.py_spy = _tool("py-spy")
        self.jcmd = _tool("jcmd")
        os.makedirs(out_dir, exist_ok=True)
        self.cases: dict[str, dict] = {}

    def _worker_daemons(self) -> list[int]:
        """The pyspark.daemon processes the Spark JVM started for ``pyspark.worker``."""
        from tests.support.procfs import cmdline

        out = []
        for pid, proc in processes().items():
            if proc.ppid == self.jvm:
                try:
                    text = cmdline(pid)
                except OSError:
                    continue
                if "pyspark.daemon" in text and text.rstrip().endswith("pyspark.worker"):
                    out.append(pid)
        return out

    def _cpu(self, fn) -> cpu_use.Timed:
        """``fn()`` with the CPU seconds of the Spark JVM, its Python workers and the broker."""
        with cpu_use.Timed(self.broker, self.spark) as timed:
            fn()
        return timed

    def run(self, name: str, fn, rows: int):
        """Run ``fn()`` twice: for the CPU seconds of every process with nothing attached,
        then with every recorder on (they slow it down); keep the figures under ``name``."""
        time.sleep(2.0)  # the previous case's recorders write their files and exit
        clean = self._cpu(fn)
        slug = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
        spies = []
        if self.py_spy:
            for pid in self._worker_daemons():
                path = os.path.join(self.out_dir, f"{slug}.pyspy.{pid}.txt")
                spies.append(
                    (
                        path,
                        subprocess.Popen(
                            [self.py_spy, "record", "-p", str(pid), "--subprocesses", "-r", "100"]
                            + ["-f", "raw", "-o", path, "--nonblocking"],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        ),
                    )
                )
            time.sleep(1.0)  # py-spy attaches
        jfr = os.path.join(self.out_dir, f"{slug}.jfr")
        if self.jcmd:
            subprocess.run(
                [self.jcmd, str(self.jvm), "JFR.start", f"name={slug}", "settings=default"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        recorded = self._cpu(fn)
        if self.jcmd:
            subprocess.run(
                [self.jcmd, str(self.jvm), "JFR.stop", f"name={slug}", f"filename={jfr}"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        for _path, spy in spies:
            spy.send_signal(signal.SIGINT)
        for _path, spy in spies:
            spy.wait(timeout=60)
        self.cases[name] = {
            "seconds": clean.seconds,
            "recorded_seconds": recorded.seconds,
            "rows": rows,
            "cpu_ns_per_row": clean.per_row_ns(rows),
            "pyspy": [path for path, _ in spies if os.path.exists(path)],
            "jfr": jfr if os.path.exists(jfr) else None,
        }


# --- summaries -----------------------------------------------------------------------------------


def _short(frame: str) -> str:
    """``func (path/to/file.py:12)`` -> ``func (file.py)``."""
    match = re.match(r"(.*?) \((.*?)(?::\d+)?\)$", frame)
    if not match:
        return frame
    return f"{match.group(1)} ({os.path.basename(match.group(2))})"


def pyspy_tops(paths, top: int = 12) -> tuple[int, list, list]:
    """Samples, the leaf functions with the most samples, and the inclusive count of the
    kafka_ds/pyspark/pyarrow functions."""
    total = 0
    leaf: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    for path in paths:
        with open(path) as f:
            for line in f:
                stack, _, count = line.rstrip().rpartition(" ")
                if not count.isdigit():
                    continue
                n = int(count)
                frames = stack.split(";")
                total += n
                leaf[_short(frames[-1])] += n
                for frame in {_short(f) for f in frames if any(m in f for m in PYTHON_MARKS)}:
                    inclusive[frame] += n
    return total, leaf.most_common(top), inclusive.most_common(top)


def jfr_tops(path: str, top: int = 12) -> tuple[int, list, list]:
    """Execution samples of the recording: leaf methods, and inclusive Spark/Arrow/Kafka
    methods (``jfr print --events jdk.ExecutionSample``)."""
    jfr = _tool("jfr")
    text = subprocess.run(
        [jfr, "print", "--events", "jdk.ExecutionSample", "--stack-depth", "64", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    total = 0
    leaf: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    for event in text.split("jdk.ExecutionSample")[1:]:
        frames = re.findall(r"^\s+([\w$.<>]+)\(.*?\)\s+line:", event, re.M)
        if not frames:
            continue
        total += 1
        leaf[frames[0]] += 1
        for frame in {f for f in frames if f.startswith(JAVA_MARKS)}:
            inclusive[frame] += 1
    return total, leaf.most_common(top), inclusive.most_common(top)


def _share(rows, total) -> str:
    return "; ".join(f"{name} {100 * n / total:.0f}%" for name, n in rows) if total else "--"


def summary(profiler: Profiler) -> str:
    out = []
    for name, case in profiler.cases.items():
        cpu = case["cpu_ns_per_row"]
        out.append(
            f"#### {name}\n\n{case['rows'] / case['seconds']:,.0f} rows/s "
            f"({case['seconds']:.2f} s; {case['recorded_seconds']:.2f} s under the recorders); "
            "CPU ns/row: "
            + ", ".join(f"{what} {ns:,.0f}" for what, ns in cpu.items())
            + f", all {sum(cpu.values()):,.0f}.\n"
        )
        if case["pyspy"]:
            total, leaf, inclusive = pyspy_tops(case["pyspy"])
            out.append(
                f"- Python workers, {total:,} py-spy samples (CPU), leaf: {_share(leaf, total)}"
            )
            out.append(f"- Python workers, inclusive: {_share(inclusive, total)}")
        if case["jfr"]:
            total, leaf, inclusive = jfr_tops(case["jfr"])
            out.append(f"- Spark JVM, {total:,} JFR samples, leaf: {_share(leaf, total)}")
            out.append(f"- Spark JVM, inclusive: {_share(inclusive, total)}")
        out.append("")
    return "\n".join(out)
