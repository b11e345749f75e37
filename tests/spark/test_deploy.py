"""Where users run it besides ``local[n]``: Spark Connect (the server's ``remote("local[2]")``
mode), running the smoke set (tests/support/smoke_job.py) with the test venv's Python, which
has the package installed. A ``local-cluster`` master (two executor JVMs) runs the smoke set
from the installed wheel (tests/spark/test_wheel.py)."""

import sys

import pytest

from tests.spark.test_wheel import assert_mistyped_option_reaches_the_user, clean_env, run_smoke

pytestmark = pytest.mark.heavy


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
