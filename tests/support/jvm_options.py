"""Options for every JVM the suite starts (Spark drivers and executors, Spark Connect servers,
standalone masters and workers, keytool), given through ``JAVA_TOOL_OPTIONS``.

The suite is CPU-bound on a 2-core machine and starts about forty JVMs, each for a short life.
Measured there, a Spark session's start and two small queries cost the driver JVM:

* 16-19 s of CPU with the JVM's defaults;
* 8-10 s with the C1 compiler alone and the serial collector (``BASE``);
* 4.6 s when it also maps Spark's classes from a class-data-sharing archive (AppCDS) made
  by one training run of the same pyspark.

The archive is made once per Spark home and set of jars (in ``~/.cache/kafka_ds-tests``, for
the jars of tests/support/spark_home.py ``stable_jars``), in the background while the first
tests run: JVMs that start before it exists run without it. A new venv at the same path (a
CI run in its usual checkout) finds it made. A JVM whose class
path differs from the training run's (another pyspark release, keytool, Spark's launcher)
does not use it. ``-Xlog:disable`` keeps the JVM's notes about that off stdout, which some
programs parse.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from tests.support.spark_home import cache_root

BASE = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# What the archive holds: the classes a Spark session's start and first queries load. The
# JVM writes the archive when it exits, which pyspark's JVM does when its stdin closes; the
# archive is renamed into place only then, so no JVM ever maps a half-written one.
TRAINING = """
import os, sys
partial, path = sys.argv[1], sys.argv[2]
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
spark.range(1000).selectExpr("sum(id)").collect()
rows = spark.createDataFrame([(i, str(i)) for i in range(100)], "a int, b string")
rows.groupBy("b").count().collect()
jvm = spark.sparkContext._gateway.proc
spark.stop()
jvm.stdin.close()
jvm.wait(timeout=300)
if os.path.exists(partial):
    os.replace(partial, path)
"""


def archive_path() -> str:
    """The archive for this Spark home and its jars. A JVM maps an archive only if its
    class path is the training run's, as text, and every jar on it has the size and time
    it had then; it silently runs without it otherwise. So the key is the home's path and
    its jars' folder (``stable_jars``: the jars of a venv installed again get new times, so
    until that folder every CI run trained a new archive and the JVMs of its first minute
    ran without one). The same checkout path with a new venv finds its archive."""
    import pyspark

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    jars = os.path.realpath(os.path.join(home, "jars"))
    key = hashlib.sha1(f"{home}|{jars}".encode()).hexdigest()[:12]
    return os.path.join(cache_root(), f"spark-classes-{pyspark.__version__}-{key}.jsa")


def install() -> str | None:
    """Set ``JAVA_TOOL_OPTIONS`` for this process and its children (pytest-xdist workers
    inherit it from the controller), unless it is set already. The archive's path, or None."""
    if "JAVA_TOOL_OPTIONS" in os.environ:
        return None
    path = archive_path()
    os.environ["JAVA_TOOL_OPTIONS"] = f"{BASE} -XX:SharedArchiveFile={path} -Xlog:disable"
    return path


def train_in_background(path: str) -> None:
    """Make the archive at ``path`` unless it exists: one Spark session in a child process
    of its own session, so that it finishes even when the test run ends first."""
    if os.path.exists(path):
        return
    partial = f"{path}.{os.getpid()}.partial"
    env = {
        **os.environ,
        "JAVA_TOOL_OPTIONS": f"{BASE} -XX:ArchiveClassesAtExit={partial} -Xlog:disable",
        "PYSPARK_PYTHON": sys.executable,
    }
    # No archive if this fails: the JVMs run without it, as before it existed.
    subprocess.Popen(
        [sys.executable, "-c", TRAINING, partial, path],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
