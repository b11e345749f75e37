"""Where users run it besides ``local[n]``: Spark Connect (the server's ``remote("local[2]")``
mode) and a ``local-cluster`` master (two executor JVMs), each running the smoke set
(tests/support/smoke_job.py) with the test venv's Python, which has the package installed."""

import sys

import pytest

from tests.spark.test_wheel import clean_env, run_smoke

pytestmark = pytest.mark.heavy


def assert_mistyped_option_reaches_the_user(seen):
    """A mistyped option name: the strict read fails naming the closest option, and the
    default read's warning is in the session's Python worker logs."""
    mistyped = seen["mistyped_option"]
    assert "Option 'startingoffset' is not a pykafka option; did you mean 'startingOffsets'?" in (
        mistyped["strict_error"] or ""
    ), mistyped
    assert mistyped["worker_log_warnings"], mistyped
    assert all("did you mean 'startingOffsets'" in m for m in mistyped["worker_log_warnings"])


def _env():
    env = clean_env()
    env["PYSPARK_PYTHON"] = sys.executable  # executors' Python: has kafka_ds installed
    return env


@pytest.mark.spark
@pytest.mark.timeout(1200)
def test_smoke_set_over_spark_connect(kafka_broker, tmp_path):
    pytest.importorskip("grpc", reason="Spark Connect needs the test extras (grpcio)")
    topic = kafka_broker.unique_topic("connect")
    kafka_broker.create_topic(topic, partitions=3)
    try:
        seen = run_smoke(
            sys.executable,
            kafka_broker.bootstrap_servers,
            topic,
            "--remote",
            "local[2]",
            cwd=tmp_path,
            env=_env(),
        )
    finally:
        kafka_broker.delete_topic(topic)
    assert_mistyped_option_reaches_the_user(seen)
    print("connect", seen["seconds"])


@pytest.mark.spark
@pytest.mark.timeout(1200)
def test_smoke_set_on_a_local_cluster_with_two_executor_jvms(kafka_broker, tmp_path):
    topic = kafka_broker.unique_topic("cluster")
    kafka_broker.create_topic(topic, partitions=3)
    try:
        seen = run_smoke(
            sys.executable,
            kafka_broker.bootstrap_servers,
            topic,
            "--master",
            "local-cluster[2,1,1024]",
            "--count-executor-jvms",
            "--conf",
            "spark.executor.memory=1024m",
            cwd=tmp_path,
            env=_env(),
        )
    finally:
        kafka_broker.delete_topic(topic)
    assert seen["executor_jvms"] == 2, seen
    assert_mistyped_option_reaches_the_user(seen)
    print("local-cluster", seen["seconds"])
