"""A mistyped option must not pass silently: what a user sees in Spark. The warning in
Spark's Python worker logs (``spark.tvf.python_worker_logs()``) and on the console of a
local-mode driver, and the strict error as the exception of ``load()``. The names and
values checked without Spark: tests/unit/test_unknown_options.py.
"""

import os
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from kafka_ds.options.names import STRICT_ENV
from tests.support.spark_support import spark  # noqa: F401  (fixture)
from tests.unit.test_unknown_options import _no_strict_env  # noqa: F401  (autouse fixture)

# --- what the user sees, in real Spark sessions -----------------------------------------


def _worker_log_warnings(spark):
    return [
        r.msg
        for r in spark.tvf.python_worker_logs().where("logger = 'kafka_ds.options'").collect()
        if "is not a pykafka option" in r.msg
    ]


@pytest.fixture
def worker_logs(spark):
    """Spark's Python worker logging (pyspark >= 4.1): a function returning the warnings
    about unknown names logged since the test began (the logs are the session's, unordered)."""
    if not hasattr(spark.tvf, "python_worker_logs"):
        pytest.skip("python_worker_logs needs pyspark >= 4.1")
    spark.conf.set("spark.sql.pyspark.worker.logging.enabled", "true")
    before = Counter(_worker_log_warnings(spark))
    yield lambda: sorted((Counter(_worker_log_warnings(spark)) - before).elements())
    spark.conf.unset("spark.sql.pyspark.worker.logging.enabled")


def test_batch_read_warns_once_in_the_python_worker_logs_and_strict_fails_load(
    spark, broker, new_topic, worker_logs
):
    from pyspark.errors import AnalysisException

    topic = new_topic()
    (
        spark.createDataFrame([("a",), ("b",)], "value string")
        .write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .option("deliveryGuarante", "at-least-once")
        .mode("append")
        .save()
    )
    reader = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("failOnDataLos", "false")
    )
    assert reader.load().count() == 2
    seen = worker_logs()
    # one warning per query: the write's, and the read's from load() (not again at planning)
    assert [m.split("?")[0] for m in seen] == [
        "Option 'deliveryguarante' is not a pykafka option; did you mean 'deliveryGuarantee'",
        "Option 'failondatalos' is not a pykafka option; did you mean 'failOnDataLoss'",
    ]
    with pytest.raises(
        AnalysisException,
        match="(?s)ConfigurationError: Option 'failondatalos' is not a pykafka option",
    ):
        reader.option("strictOptions", "true").load()


def test_stream_start_with_a_typo_warns_and_strict_fails_at_load(
    spark, broker, new_topic, worker_logs, tmp_path
):
    from pyspark.errors import AnalysisException

    topic = new_topic()
    reader = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffset", "earliest")
    )
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    [message] = worker_logs()
    assert message.startswith(
        "Option 'startingoffset' is not a pykafka option; did you mean 'startingOffsets'?"
    )
    with pytest.raises(
        AnalysisException,
        match="(?s)ConfigurationError: Option 'startingoffset' is not a pykafka option",
    ):
        reader.option("strictOptions", "true").load()


def test_local_mode_console_shows_the_warning(tmp_path):
    """Without worker logging, the planning worker's warning goes to the driver's stderr
    (no broker needed: load() checks the names)."""
    script = tmp_path / "typo.py"
    # tests.support is found through the project root's path entry (the editable install)
    script.write_text(
        textwrap.dedent("""
        from tests.support.spark_support import make_spark
        spark = make_spark("typo")
        (spark.read.format("pykafka").option("kafka.bootstrap.servers", "127.0.0.1:9")
         .option("subscribe", "t").option("startingOffset", "earliest").load())
        print("loaded", flush=True)
    """)
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop(STRICT_ENV, None)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=180, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loaded" in done.stdout
    assert (
        "Option 'startingoffset' is not a pykafka option; did you mean 'startingOffsets'? "
        "It is ignored"
    ) in done.stderr
