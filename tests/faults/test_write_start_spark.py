"""The write-start kill end to end (issue 45): ``df.write.format("pykafka")`` whose
driver-side topic check (``writer()``, in Spark's planning worker) has its Metadata
answered by a node that is SIGKILLed before the answer arrives. The job goes on and writes
every row once; the tasks then write with that node still down.

Apache Kafka's three nodes behind the fault proxy, as in ``test_driver_steps.py`` (the
driver's steps without Spark); this is the one that goes through Spark's glue.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.faults.test_driver_steps import METADATA, KilledAtAnswer, make_whole, new_topic
from tests.support.brokers import consume_confluent
from tests.support.faultproxy import FaultProxy
from tests.support.spark_support import spark  # noqa: F401  (fixture)

pytestmark = [pytest.mark.node_faults, pytest.mark.timeout(300)]

ROWS = 20_000


@pytest.fixture
def cluster(kafka3):
    make_whole(kafka3)
    yield kafka3
    make_whole(kafka3)


def test_spark_write_goes_on_when_the_node_answering_its_topic_check_is_killed(
    spark,  # noqa: F811
    cluster,
):
    topic = new_topic(cluster, "spark-start")
    df = spark.range(ROWS).selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")
    with FaultProxy(cluster.bootstrap_servers) as proxy:

        def write():
            # The JVM's active session is per thread: without it df.write in this thread
            # does not find "pykafka" (registered on the session).
            spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
            started = time.monotonic()
            (
                df.write.format("pykafka")
                .option("kafka.bootstrap.servers", proxy.bootstrap_servers)
                .option("topic", topic)
                .option("kafka.request.timeout.ms", "5000")
                .option("kafka.delivery.timeout.ms", "90000")
                .mode("append")
                .save()
            )
            return time.monotonic() - started

        run = KilledAtAnswer(cluster, proxy, METADATA, write)
        seconds = run.result()
        assert run.node_down_throughout
    keys = Counter(
        m.key
        for m in consume_confluent(cluster.bootstrap_servers, topic, expected=ROWS, timeout=60)
    )
    assert len(keys) == ROWS and set(keys.values()) == {1}, "every row exactly once"
    print(f"the write ended {run.after_kill:.1f} s after the kill ({seconds:.1f} s in all)")
