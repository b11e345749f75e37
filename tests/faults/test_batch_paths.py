"""Spark's batch read and batch write through the node faults the soak gives its streams
(issue 45, docs/reliability.md "Faults by path"): a rolling restart of all three nodes, a
controlled shutdown of a leader, a SIGKILL of the active controller, a node's log
directory filled up, one node cut off from the clients while its peers still see it.

Three Apache Kafka nodes of the module's own (RF 3, ``min.insync.replicas=2``; the last
node's log directory a tmpfs, so that it can fill up), reached by the clients through the
fault proxy (so one node can be cut off from them). While the fault runs, two threads of
one Spark session keep working back to back: one reads a topic of known records
(``spark.read.format("pykafka")``, every record once is checked for each read), one
writes numbered rows (``df.write.format("pykafka")``, idempotent ``acks=all``; after
the fault every row of every write is checked once, as confluent-kafka reads them). Each
test checks that both paths had a job running while the fault was in effect.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from tests.faults.test_driver_steps import make_whole, new_topic
from tests.support.brokers import consume_confluent
from tests.support.faultproxy import FaultProxy
from tests.support.node_faults import (
    active_controller,
    fill_log_dir,
    free_log_dir,
    small_disk_cluster,
    stop_small_disk_cluster,
)
from tests.support.spark_support import spark  # noqa: F401  (fixture)

pytestmark = [pytest.mark.node_faults, pytest.mark.timeout(600)]

SOURCE_RECORDS = 30_000
ROWS_PER_WRITE = 20_000
PARTITIONS = 3
OPTIONS = {"kafka.request.timeout.ms": "5000"}  # a dead node's request fails over sooner


@pytest.fixture(scope="module")
def cluster():
    cluster = small_disk_cluster(256, name="kafka3-batch")
    yield cluster
    stop_small_disk_cluster(cluster)


@pytest.fixture
def whole(cluster):
    make_whole(cluster)
    yield cluster
    make_whole(cluster)


class Fault:
    """What a fault did: the windows (monotonic start, end) in which it was in effect."""

    def __init__(self):
        self.windows: list[tuple[float, float]] = []

    def during(self, apply: Callable[[], object], undo: Callable[[], object], seconds=0.0):
        started = time.monotonic()
        apply()
        time.sleep(seconds)
        self.windows.append((started, time.monotonic()))
        undo()


def rolling_restart(cluster, proxy, fault: Fault, topic):
    for node in cluster.nodes:
        fault.during(
            lambda n=node: cluster.shutdown(n.node_id, timeout=120),
            lambda n=node: cluster.restart(n.node_id, timeout=120),
        )
        make_whole(cluster)


def controlled_shutdown(cluster, proxy, fault: Fault, topic):
    leader = cluster.leader(topic, 0)
    fault.during(
        lambda: cluster.shutdown(leader, timeout=120),
        lambda: cluster.restart(leader, timeout=120),
        seconds=10,
    )


def controller_kill(cluster, proxy, fault: Fault, topic):
    controller = active_controller(cluster)
    assert controller is not None, "no active controller in the nodes' quorum-state files"
    fault.during(
        lambda: cluster.kill(controller),
        lambda: cluster.restart(controller, timeout=120),
        seconds=5,
    )


def log_dir_full(cluster, proxy, fault: Fault, topic):
    filled: dict = {}
    fault.during(
        lambda: filled.update(fill_log_dir(cluster)),
        lambda: free_log_dir(cluster, filled),
        seconds=5,
    )
    assert filled["node_exited"], f"node 3 still ran with its log dir full: {filled}"
    return filled


def node_cut_off(cluster, proxy, fault: Fault, topic):
    leader = cluster.node(cluster.leader(topic, 0))
    upstream = ("127.0.0.1", leader.port)
    fault.during(lambda: proxy.isolate(upstream), lambda: proxy.rejoin(upstream), seconds=20)


FAULTS = [rolling_restart, controlled_shutdown, controller_kill, log_dir_full, node_cut_off]


class Jobs(threading.Thread):
    """``job(i)`` back to back in its own thread until ``stop`` is set; ``windows``: each
    job's (start, end), ``errors`` the exceptions, ``results`` what each returned."""

    def __init__(self, spark, job):
        super().__init__(daemon=True)
        self.spark, self.job = spark, job
        self.stop = threading.Event()
        self.windows: list[tuple[float, float]] = []
        self.results: list = []
        self.errors: list[BaseException] = []

    def run(self):
        # The JVM's active session is per thread: without it this thread's df.write does
        # not find "pykafka" (registered on the session).
        self.spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(
            self.spark._jsparkSession
        )
        i = 0
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                self.results.append(self.job(i))
            except BaseException as exc:  # noqa: BLE001 -- handed to the test thread
                self.errors.append(exc)
                return
            finally:
                self.windows.append((started, time.monotonic()))
            i += 1


def overlaps(jobs: list[tuple[float, float]], fault_windows) -> int:
    return sum(1 for s, e in jobs for fs, fe in fault_windows if s < fe and e > fs)


@pytest.mark.parametrize("fault_kind", FAULTS, ids=[f.__name__ for f in FAULTS])
def test_batch_read_and_write_through_the_fault(spark, whole, fault_kind):  # noqa: F811
    cluster = whole
    if fault_kind is log_dir_full and not cluster.small_disk:
        pytest.skip(f"no tmpfs for node 3's log dir (mount refused: {cluster.small_disk_refused})")
    source = new_topic(cluster, "batch-src", PARTITIONS, records=SOURCE_RECORDS)
    sink = new_topic(cluster, "batch-sink", PARTITIONS)
    from pyspark.sql import functions as F

    with FaultProxy(cluster.bootstrap_servers) as proxy:
        servers = {"kafka.bootstrap.servers": proxy.bootstrap_servers, **OPTIONS}

        def read(_i):
            row = (
                spark.read.format("pykafka")
                .options(**servers)
                .option("subscribe", source)
                .load()
                .agg(F.count("*").alias("n"), F.countDistinct("value").alias("distinct"))
                .first()
            )
            return (row["n"], row["distinct"])

        def write(i):
            (
                spark.range(ROWS_PER_WRITE)
                .selectExpr(f"CONCAT('{i}:', CAST(id AS STRING)) AS value")
                .write.format("pykafka")
                .options(**servers)
                .option("topic", sink)
                .mode("append")
                .save()
            )
            return i

        readers, writers = Jobs(spark, read), Jobs(spark, write)
        readers.start()
        writers.start()
        fault = Fault()
        try:
            time.sleep(2)  # both paths under way
            outcome = fault_kind(cluster, proxy, fault, source)
            make_whole(cluster)
        finally:
            readers.stop.set()
            writers.stop.set()
            readers.join(300)
            writers.join(300)
    assert not readers.errors and not writers.errors, (readers.errors, writers.errors)
    assert overlaps(readers.windows, fault.windows), (readers.windows, fault.windows)
    assert overlaps(writers.windows, fault.windows), (writers.windows, fault.windows)
    assert set(readers.results) == {(SOURCE_RECORDS, SOURCE_RECORDS)}, readers.results
    writes = len(writers.results)
    values = Counter(
        m.value
        for m in consume_confluent(
            cluster.bootstrap_servers, sink, expected=writes * ROWS_PER_WRITE, timeout=120
        )
    )
    expected = {f"{i}:{n}".encode() for i in range(writes) for n in range(ROWS_PER_WRITE)}
    assert set(values) == expected, f"{len(expected - set(values))} rows lost"
    assert set(values.values()) == {1}, "a row written twice"
    print(
        f"{fault_kind.__name__}: {len(readers.results)} reads and {writes} writes, "
        f"{overlaps(readers.windows, fault.windows)} and "
        f"{overlaps(writers.windows, fault.windows)} of them while the fault was in effect "
        f"({', '.join(f'{e - s:.0f} s' for s, e in fault.windows)})"
        + (f"; {outcome}" if outcome else "")
    )
