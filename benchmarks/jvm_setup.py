"""What bench_jvm.py sets up before it measures: Spark's own Kafka connector (fetched from
Maven Central, or given with ``--jars``/``--packages``) and the pyspark release it runs in,
the session's settings, the broker, and the checks that the connector and spark-avro load.
Nothing here is timed."""

from __future__ import annotations

import os
import re
import sys
import time

import harness

NO_CONNECTOR = """\
bench_jvm.py compares pykafka with Spark's own format("kafka"), whose jars are not part of
pyspark. Without --jars/--packages it fetches them from Maven Central (needs `mvn`); or give
them with one of:

  --jars spark-sql-kafka-0-10_2.13-<v>.jar,spark-token-provider-kafka-0-10_2.13-<v>.jar,kafka-clients-<k>.jar,commons-pool2-<p>.jar[,spark-avro_2.13-<v>.jar]
  --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<v>[,org.apache.spark:spark-avro_2.13:<v>]

(<v> = your Spark version; --packages needs a machine that reaches Maven Central).
"""


class NoConnector(Exception):
    """Spark's connector cannot be had or loaded; the message says what to do."""


# --- the connector -------------------------------------------------------------------------


def maven_connector():
    """Spark's connector from Maven Central (tests/support/spark_connector.py) and the Python
    of a pyspark of its release."""
    from tests.support import spark_connector

    connector = spark_connector.resolve()
    return connector, spark_connector.spark_python(connector["version"])


def take_connector(args, argv: list[str], script: str):
    """Set ``args.jars`` to the connector's jars: those this script was re-run with, or, when
    neither ``--jars`` nor ``--packages`` gives them, those fetched from Maven Central (the
    connector returned; else None). A connector runs in a Spark of its own release: when
    that pyspark is not this Python's, ``script`` runs again in it with ``argv`` (this
    process is replaced)."""
    if args.fetched_jars:
        args.jars = args.fetched_jars
    if args.jars or args.packages:
        return None
    try:
        connector, python = maven_connector()
    except Exception as exc:  # noqa: BLE001 -- no mvn, no network: say what to do
        raise NoConnector(f"{exc}"[:3000] + "\n\n" + NO_CONNECTOR) from exc
    args.jars = ",".join(connector["jars"] + ([] if args.no_avro else [connector["avro_jar"]]))
    if python != sys.executable:
        from tests.support.spark_connector import child_environment

        harness.log(
            f"Spark's connector {connector['version']} from Maven Central; running in "
            f"pyspark {connector['version']} ({python})"
        )
        os.execve(
            python,
            [
                python,
                script,
                *argv,
                "--fetched-jars",
                args.jars,
                # the Python this run began with: it has matplotlib, the connector's venv not
                "--drawing-python",
                sys.executable,
            ],
            child_environment(),
        )
    return connector


def kafka_clients_version(args):
    """From the jar's name (``--jars``, also when fetched from Maven Central) or the
    coordinates (``--packages``)."""
    found = re.search(r"kafka-clients-([0-9][^/,]*?)\.jar", args.jars or "")
    if found:
        return found.group(1)
    return "as resolved from " + args.packages if args.packages else "?"


def session_conf(args) -> dict:
    """The Spark session's settings: the connector's jars or packages, filter pushdown for
    pykafka's ``pushFilters``, and every ``--conf KEY=VALUE``."""
    conf = {"spark.jars": args.jars} if args.jars else {"spark.jars.packages": args.packages}
    conf["spark.sql.python.filterPushdown.enabled"] = "true"
    for setting in args.conf:
        key, _, value = setting.partition("=")
        conf[key] = value
    return conf


def check_connector(spark, broker) -> None:
    """Raise NoConnector unless ``format("kafka")`` loads with the session's jars."""
    try:
        _ = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
            .option("subscribe", "none")
            .load()
            .schema
        )
    except Exception as exc:  # noqa: BLE001
        raise NoConnector(
            f'Spark\'s format("kafka") is not usable with these jars: {exc}'[:1500]
            + "\n\n"
            + NO_CONNECTOR
        ) from exc


def avro_usable(spark) -> bool:
    """Whether spark-avro's ``to_avro`` is on the classpath (else the Avro write is skipped)."""
    try:
        from pyspark.sql.avro.functions import to_avro

        spark.range(1).select(to_avro("id")).collect()
    except Exception as exc:  # noqa: BLE001
        harness.log(f"no spark-avro on the classpath, the Avro write is skipped ({exc!r:.200})")
        return False
    return True


# --- the broker ------------------------------------------------------------------------------


def start_broker(tansu):
    if tansu:
        from tests.support.brokers import TansuBroker

        return TansuBroker()
    from tests.support.apache_kafka import (
        BENCHMARK_JVM_OPTIONS,
        BENCHMARK_SETTINGS,
        KafkaCluster,
    )

    return KafkaCluster(
        1,
        settings=BENCHMARK_SETTINGS,
        jvm_options=BENCHMARK_JVM_OPTIONS,
        heap="1g",
        name="kafka-bench",
    )


def broker_label(broker):
    if broker.name == "tansu":
        return "Tansu (memory storage)"
    return (
        f"Apache Kafka {broker.version} (one KRaft node, "
        f"{' '.join(broker.jvm_options[:2])}, -Xmx{broker.heap})"
    )


def wait_led(broker, topic, timeout=60.0):
    """Until every partition's leader answers a Fetch without an error: Apache Kafka lists a
    new topic's leaders in Metadata a moment before the leader has loaded the partition, and
    a Produce in that moment fails (NOT_LEADER_OR_FOLLOWER), which fill_topic does not
    retry."""
    from kafka_ds.client import KafkaClient

    deadline = time.monotonic() + timeout
    while True:
        client = KafkaClient(broker.bootstrap_servers)
        try:
            errors = [
                client.fetch(topic, p, 0, max_bytes=1024, max_wait_ms=1, min_bytes=0).get(
                    "error_code"
                )
                for p in client.topic_partitions(topic)
            ]
            if errors and not any(errors):
                return
            last = errors
        except Exception as exc:  # noqa: BLE001 -- not led yet
            last = exc
        finally:
            client.close()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: partitions not led after {timeout} s: {last!r}")
        time.sleep(0.2)
