"""Failover on Apache Kafka's three-node cluster (``kafka3``: KRaft, replication factor 3,
``min.insync.replicas=2``), with Spark in this process:

* the leader of a partition SIGKILLed and restarted during an idempotent ``acks=all``
  batch write, during a batch read, and under a stream with an exactly-once Kafka sink
  and group commits;
* a rolling restart of all three nodes (a controlled shutdown, a SIGKILL, a controlled
  shutdown; each restarted and back in sync before the next) under a running
  exactly-once stream;
* the controlled shutdown of a partition's leader during an exactly-once batch write,
  which finishes while that node is still down.

Each compares what an independent client reads back (confluent-kafka's consumer,
``read_committed`` where transactions write) with what was written: nothing lost, nothing
duplicated; the streams' consumer groups end at the end of the data.

The failure has to hit work in flight, so the batch work is paced from inside its Spark
task, from outside kafka_ds (``paced_format``: a subclass of the ``pykafka`` format whose
writer hands kafka_ds its rows 100 at a time, 50 ms apart, and whose tasks wait at chosen
rows or ranges for a flag file the test writes once a node is down or back); the streams
are paced by ``maxOffsetsPerTrigger``, and their progress with a node down is proven on
records produced after the kill. Every wait is bounded. The ``cluster`` fixture restarts
whatever a test left down and waits until every partition (the internal topics' too) has
three in-sync replicas again.

The module's tests run on one pytest-xdist worker (tests/conftest.py ONE_WORKER_MODULES):
they kill and restart nodes of the one ``kafka3`` cluster.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest
from chispa import assert_df_equality

from tests.integration.test_transactions import wait_stable
from tests.support.brokers import consume_confluent, produce_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)

pytestmark = [pytest.mark.heavy, pytest.mark.timeout(400)]

# Budgets of the work under test: long enough to ride out a node's fencing
# (broker.session.timeout.ms, 4 s here) and a restart on a loaded machine, short enough
# that a client which never finds the new leader fails the test instead of hanging it.
DELIVERY_TIMEOUT_MS = "90000"


# --- helpers -------------------------------------------------------------------------


def wait_for(condition, timeout, what, interval=0.1, job=None, detail=None):
    """Until ``condition()``; raises after ``timeout`` s (with ``detail()`` in the
    message), or at once if ``job`` (a :class:`Background` Spark job) ended first."""
    deadline = time.monotonic() + timeout
    while True:
        if job is not None and not job.is_alive():
            job.result(0)
            raise AssertionError(f"the Spark job ended before {what}")
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}"
                + (f": {detail()}" if detail else "")
            )
        time.sleep(interval)


def touch(path):
    with open(path, "w") as f:
        f.write("1")


def end_offsets(bootstrap, topic, partitions):
    """High watermarks, as an independent client (confluent-kafka) sees them; -1 for a
    partition whose leader does not answer now."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafka_ds-failover-hw",
            "log_level": 0,
            "socket.timeout.ms": 3000,
        }
    )
    try:
        ends = {}
        for p in range(partitions):
            try:
                ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=3)[1]
            except KafkaException:
                ends[p] = -1
        return ends
    finally:
        consumer.close()


def read_committed(bootstrap, topic, expected):
    """What confluent-kafka's ``read_committed`` consumer reads of the whole topic, once
    every partition's last stable offset is its high watermark (``wait_stable``). A
    commit returns once the transaction coordinator has logged it; its markers reach the
    partitions after that, later still when that coordinator or a leader has just moved,
    and until they do a ``read_committed`` consumer is at its end (EOF) before the
    transaction's records. CI once read 0 of partition 0's 2,000 committed records that
    way, right after a controlled shutdown moved the coordinator."""
    wait_stable(bootstrap, topic, timeout=60)
    return consume_confluent(
        bootstrap, topic, expected=expected, timeout=60, **{"isolation.level": "read_committed"}
    )


def group_offsets(bootstrap, group, topic, partitions):
    """The group's committed offsets ({partition: offset}, partitions without one left
    out) as an independent client sees them: confluent-kafka's consumer, OffsetFetch,
    without joining the group. (Not the AdminClient: librdkafka 2.16 aborts the process,
    ``rd_kafka_enq_once_del_source_return: Assertion `eonce->refcnt > 0' failed``, when
    an AdminClient is destroyed -- as KafkaCluster.restart does -- while a request to
    a killed node is still pending.)"""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "log_level": 0,
            "enable.auto.commit": False,
        }
    )
    try:
        answer = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=5
        )
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in answer if tp.offset >= 0}


def unhealthy(cluster) -> list[str]:
    """Partitions (of every topic, the internal ones included) with fewer than three
    in-sync replicas, or no leader; empty when the cluster is whole."""
    try:
        topics = cluster.list_topics(timeout=5)
    except Exception as exc:  # noqa: BLE001 -- a node still starting
        return [f"metadata: {exc}"]
    return [
        f"{name}-{p}"
        for name, md in topics.items()
        for p, pm in md.partitions.items()
        if pm.leader < 0 or len(pm.isrs) < 3
    ]


def make_whole(cluster, timeout=120.0):
    for node in cluster.nodes:
        if not node.is_alive():
            cluster.restart(node.node_id, timeout=timeout)
    wait_for(
        lambda: not unhealthy(cluster),
        timeout,
        "every partition to have three in-sync replicas",
        interval=0.25,
    )


@pytest.fixture
def cluster(kafka3):
    """``kafka3``, whole before the test and made whole again after it."""
    make_whole(kafka3)
    yield kafka3
    make_whole(kafka3)


def elect_preferred_leader(cluster, topic, partition):
    """Leadership back to the partition's preferred replica (the first of its replica
    list) with Kafka's ElectLeaders, as ``kafka-leader-election.sh`` does: the node that
    led before a failover leads again, so clients meet NOT_LEADER_OR_FOLLOWER from a live
    broker, not just a connection refused by a dead one."""
    from confluent_kafka import ElectionType, KafkaError, TopicPartition

    # (no timeouts: confluent-kafka 2.16's elect_leaders raises TypeError or SystemError
    # for either keyword; the future's result is bounded below)
    future = cluster.admin().elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(topic, partition)]
    )
    for tp, error in future.result(timeout=30).items():
        # ELECTION_NOT_NEEDED: the preferred replica already leads
        code = error.args[0].code() if error is not None else None
        assert code in (None, KafkaError.ELECTION_NOT_NEEDED), (tp, error)


def leader_of(cluster, topic, partition, timeout=30):
    """The partition's leader, once the node asked lists one (a node's metadata may lag
    behind a topic just created or a leader just elected)."""

    def leader():
        metadata = cluster.topic_metadata(topic)
        return metadata[partition][0] if metadata and metadata[partition][0] >= 0 else None

    return wait_for(leader, timeout, f"a leader of {topic}-{partition}")


def preferred_leader(cluster, topic, partition):
    wait_for(lambda: cluster.topic_metadata(topic), 30, f"metadata of {topic}")
    return cluster.topic_metadata(topic)[partition][1][0]


def paced_format(
    spark, gates_dir, *, write_stops=(), read_stops=(), read_stops_after=(), step=100, sleep_s=0.0
):
    """Registers and returns a format: ``pykafka`` whose tasks are paced from outside
    kafka_ds, so that a node fails while they are in flight (kafka_ds runs unchanged).

    * writes: a task's Arrow batches go to kafka_ds's writer in slices of ``step`` rows,
      ``sleep_s`` apart; at the slice starting at row r of ``write_stops = {r: (mark,
      wait)}`` the task writes the flag file ``mark`` (if any), then waits for the flag
      file ``wait`` (if any) in ``gates_dir``;
    * reads: the task of the range starting at offset o stops at ``read_stops[o]`` before
      it reads, at ``read_stops_after[o]`` after its first Arrow batch.

    A flag waited for more than 240 s fails the task. The classes are made here, so
    cloudpickle ships them to Spark's Python workers by value."""
    from pyspark.sql.datasource import DataSourceReader

    from kafka_ds.source import KafkaDataSource
    from kafka_ds.writer import KafkaDataSourceWriter

    name = f"pykafka_paced_{uuid.uuid4().hex[:8]}"
    write_stops, read_stops = dict(write_stops), dict(read_stops)
    read_stops_after = dict(read_stops_after)

    def stop(mark, wait):
        import os
        import time

        if mark:
            with open(os.path.join(gates_dir, mark), "w") as f:
                f.write("1")
        if wait:
            deadline = time.monotonic() + 240
            while not os.path.exists(os.path.join(gates_dir, wait)):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gave up waiting for the flag {wait!r}")
                time.sleep(0.05)

    def paced(batches):
        import time

        row = 0
        for batch in batches:
            for first in range(0, batch.num_rows, step):
                if row in write_stops:
                    stop(*write_stops[row])
                yield batch.slice(first, step)
                row += min(step, batch.num_rows - first)
                if sleep_s:
                    time.sleep(sleep_s)

    class PacedWriter(KafkaDataSourceWriter):
        def write(self, iterator):
            return super().write(paced(iterator))

    class PacedReader(DataSourceReader):
        def __init__(self, inner):
            self.inner = inner

        def partitions(self):
            return self.inner.partitions()

        def read(self, partition):
            start = getattr(partition, "start", None)
            if start in read_stops:
                stop(*read_stops[start])
            for i, batch in enumerate(self.inner.read(partition)):
                yield batch
                if i == 0 and start in read_stops_after:
                    stop(*read_stops_after[start])

    class PacedSource(KafkaDataSource):
        @classmethod
        def name(cls):
            return name

        def writer(self, schema, overwrite):
            return PacedWriter(*self._write_plan(schema))

        def reader(self, schema):
            return PacedReader(super().reader(schema))

    spark.dataSource.register(PacedSource)
    return name


class Background(threading.Thread):
    """Runs ``work()`` (a Spark action of ``spark``) in a thread; ``result()`` joins it
    (bounded) and re-raises what it raised."""

    def __init__(self, spark, work):
        super().__init__(daemon=True)
        self.spark = spark
        self.work = work
        self.value = self.error = None

    def run(self):
        try:
            # The JVM's active session is per thread: without it, df.write in this thread
            # looks for "pykafka" in a session where it is not registered
            # (DATA_SOURCE_NOT_FOUND).
            jvm = self.spark._jvm
            jvm.org.apache.spark.sql.SparkSession.setActiveSession(self.spark._jsparkSession)
            self.value = self.work()
        except BaseException as exc:  # noqa: BLE001 -- handed to the test thread
            self.error = exc

    def result(self, timeout):
        self.join(timeout)
        assert not self.is_alive(), f"the Spark job did not end within {timeout} s"
        if self.error is not None:
            raise self.error
        return self.value


def paced_write(spark, bootstrap, topic, rows, source, **options):
    """``rows`` rows (value ``row-<i>``, partition ``i % 2``) written by one Spark task
    with the format ``source`` (:func:`paced_format`); returns a :class:`Background`
    running the write."""
    df = spark.range(0, rows, 1, 1).selectExpr(
        "cast(concat('row-', cast(id as string)) as binary) as value",
        "cast(id % 2 as int) as partition",
    )
    writer = (
        df.write.format(source)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.acks", "all")
        .option("kafka.enable.idempotence", "true")
        .option("kafka.linger.ms", "0")
        .option("kafka.delivery.timeout.ms", DELIVERY_TIMEOUT_MS)
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    job = Background(spark, lambda: writer.mode("append").save())
    job.start()
    return job


def assert_partitions_hold(messages, rows):
    """Partition p holds ``row-<i>`` for every i = p (mod 2), once each, in write order."""
    for p in (0, 1):
        got = [m.value for m in messages if m.partition == p]
        expected = [f"row-{i}".encode() for i in range(p, rows, 2)]
        if got != expected:
            lost = sorted(set(expected) - set(got))
            duplicated = sorted({v for v in got if got.count(v) > 1})
            raise AssertionError(
                f"partition {p}: {len(got)} records, expected {len(expected)}; lost "
                f"{len(lost)} {lost[:5]}, duplicated {len(duplicated)} {duplicated[:5]}, "
                f"in write order: {sorted(got) == expected}"
            )


# --- 1. the leader SIGKILLed and restarted during the work ----------------------------


def test_leader_killed_and_restarted_during_an_idempotent_write(spark, cluster, tmp_path):
    bs = cluster.bootstrap_servers
    topic = cluster.create_topic(cluster.unique_topic("fo-write"), partitions=2)
    victim = leader_of(cluster, topic, 0)
    rows = 4000
    gates = str(tmp_path)
    # rows go out 100 at a time, 50 ms apart; the kill comes once records are in, while
    # rows 1000..2999 keep going out; at row 3000 the write waits for the restart
    source = paced_format(
        spark,
        gates,
        sleep_s=0.05,
        write_stops={1000: ("writing", None), 3000: ("waiting", "restarted")},
    )
    job = paced_write(spark, bs, topic, rows, source)
    wait_for(
        lambda: os.path.exists(os.path.join(gates, "writing")), 180, "the write to start", job=job
    )
    wait_for(lambda: end_offsets(bs, topic, 2)[0] > 0, 60, "records in partition 0")
    cluster.kill(victim)
    killed_at = time.monotonic()
    # Kafka fences the dead node (broker.session.timeout.ms) and elects a new leader;
    # the write's retries meanwhile reach it. (kafka_ds's producer sends from the task's
    # thread, between Arrow batches: while the task waits at row 3000 for the restart,
    # batches backing off wait too, so "all of rows 0..2999 acknowledged before the
    # restart" is not something to wait for.)
    wait_for(
        lambda: os.path.exists(os.path.join(gates, "waiting")),
        180,
        "the write to reach row 3000",
        job=job,
    )
    wait_for(
        lambda: leader_of(cluster, topic, 0) != victim, 60, f"a new leader of {topic}-0", job=job
    )
    down_s = time.monotonic() - killed_at
    cluster.restart(victim)
    cluster.wait_in_sync(topic, 2, 3)
    # leadership back to the restarted node while the write finishes (if it was the
    # preferred replica): the old leader's successor answers NOT_LEADER_OR_FOLLOWER
    if preferred_leader(cluster, topic, 0) == victim:
        elect_preferred_leader(cluster, topic, 0)
    touch(os.path.join(gates, "restarted"))
    job.result(240)
    messages = consume_confluent(bs, topic, expected=rows + 1, timeout=60)
    assert_partitions_hold(messages, rows)
    print(f"write: node {victim} down {down_s:.1f} s; {len(messages)} records")


def test_leader_killed_and_restarted_during_a_batch_read(spark, cluster, tmp_path):
    bs = cluster.bootstrap_servers
    topic = cluster.create_topic(cluster.unique_topic("fo-read"), partitions=1)
    rows, per_task = 3000, 500
    # ~1 KB records in batches of 10; reads of at most 1 KB per Fetch (one batch each,
    # KIP-74), so a task fetches its range batch by batch, after its gate too
    produce_confluent(
        bs,
        topic,
        [{"key": f"k{i}", "value": f"{i:05d}".ljust(1000, "x")} for i in range(rows)],
        **{"batch.num.messages": 10, "linger.ms": 20},
    )
    expected = consume_confluent(bs, topic, expected=rows, timeout=60)
    assert len(expected) == rows
    victim = leader_of(cluster, topic, 0)
    gates = str(tmp_path)
    # Spark task k reads offsets [500k, 500k+500); with two cores tasks 0 and 1 run
    # first: task 0 stops after its first Fetch, task 1 before it reads, both until the
    # kill; tasks 3.. wait for the restart before they read
    source = paced_format(
        spark,
        gates,
        read_stops_after={0: ("reading", "killed")},
        read_stops={
            500: (None, "killed"),
            1000: (None, "killed"),
            1500: ("at-1500", "restarted"),
            2000: (None, "restarted"),
            2500: (None, "restarted"),
        },
    )
    df = (
        spark.read.format(source)
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", topic)
        .option("maxRecordsPerPartition", str(per_task))
        .option("kafka.max.partition.fetch.bytes", "1024")
        .option("kafka.fetch.max.bytes", "1024")
        .load()
        .select("key", "value", "partition", "offset")
    )
    job = Background(spark, df.collect)
    job.start()
    wait_for(
        lambda: os.path.exists(os.path.join(gates, "reading")), 180, "the read to start", job=job
    )
    cluster.kill(victim)
    touch(os.path.join(gates, "killed"))
    killed_at = time.monotonic()
    # tasks 0..2 read on from the new leader; task 3 starting says they are done
    wait_for(
        lambda: os.path.exists(os.path.join(gates, "at-1500")),
        180,
        "offsets 0..1499 read with the old leader down",
        job=job,
    )
    assert leader_of(cluster, topic, 0) != victim
    down_s = time.monotonic() - killed_at
    cluster.restart(victim)
    cluster.wait_in_sync(topic, 1, 3)
    if preferred_leader(cluster, topic, 0) == victim:
        elect_preferred_leader(cluster, topic, 0)
    touch(os.path.join(gates, "restarted"))
    got = job.result(240)
    schema = "key binary, value binary, partition int, offset long"
    assert_df_equality(
        spark.createDataFrame([tuple(r) for r in got], schema).orderBy("offset"),
        spark.createDataFrame(
            [(m.key, m.value, m.partition, m.offset) for m in expected], schema
        ).orderBy("offset"),
        ignore_nullable=True,
    )
    print(f"read: node {victim} down {down_s:.1f} s; {len(got)} records")


# --- streams: an exactly-once sink and group commits ---------------------------------


class Stream:
    """``source`` -> pykafka sink ``sink`` (exactly-once), committing its progress to the
    group ``group``: a query of this process's Spark session."""

    def __init__(self, spark, cluster, tmp_path, partitions=2, max_offsets=200):
        self.cluster = cluster
        self.bs = cluster.bootstrap_servers
        self.partitions = partitions
        self.source = cluster.create_topic(cluster.unique_topic("fo-src"), partitions)
        self.sink = cluster.create_topic(cluster.unique_topic("fo-sink"), partitions)
        self.group = f"fo-{uuid.uuid4().hex[:8]}"
        self.produced = []
        self.query = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", self.bs)
            .option("subscribe", self.source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(max_offsets))
            .option("kafka.group.id", self.group)
            .load()
            .selectExpr("key", "value")
            .writeStream.format("pykafka")
            .option("kafka.bootstrap.servers", self.bs)
            .option("topic", self.sink)
            .option("deliveryGuarantee", "exactly-once")
            .option("kafka.delivery.timeout.ms", DELIVERY_TIMEOUT_MS)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    def produce(self, count):
        start = len(self.produced)
        records = [{"key": f"k{i}", "value": f"v{i}"} for i in range(start, start + count)]
        produce_confluent(self.bs, self.source, records, **{"enable.idempotence": True})
        self.produced.extend(records)

    def committed(self, timeout=60) -> int:
        """Records the group's committed offsets cover (0 while it has none), as an
        independent client sees them once the group's coordinator answers."""
        seen = []

        def answered():
            self.check()
            try:
                offsets = group_offsets(self.bs, self.group, self.source, self.partitions)
            except Exception:  # noqa: BLE001 -- the group's coordinator is moving
                return False
            seen.append(sum(offsets.values()))
            return True

        wait_for(answered, timeout, f"the offsets of group {self.group}", interval=0.25)
        return seen[-1]

    def wait_committed(self, at_least, timeout, what):
        wait_for(
            lambda: self.committed() >= at_least,
            timeout,
            f"the group to commit {at_least} records ({what})",
            interval=0.25,
            detail=lambda: f"it has {self.committed()}",
        )

    def check(self):
        error = self.query.exception()
        assert error is None, f"the query failed: {error}"
        assert self.query.isActive, "the query stopped"

    def finish(self, timeout=180):
        """Wait until the group is at the source's end, stop, and compare."""
        expected = end_offsets(self.bs, self.source, self.partitions)
        assert sum(expected.values()) == len(self.produced), expected
        seen = {}

        def at_end():
            self.check()
            try:
                seen["now"] = group_offsets(self.bs, self.group, self.source, self.partitions)
            except Exception:  # noqa: BLE001 -- the group's coordinator is moving
                return False
            return seen["now"] == expected

        try:
            wait_for(at_end, timeout, "the group at the end of the source", interval=0.25)
        finally:
            self.query.stop()
        # the group is exactly at the end of the data, never past it
        assert seen["now"] == expected
        got = read_committed(self.bs, self.sink, expected=len(self.produced) + 1)
        pairs = sorted((m.key, m.value) for m in got)
        want = sorted((r["key"].encode(), r["value"].encode()) for r in self.produced)
        if pairs != want:
            lost = sorted(set(want) - set(pairs))
            duplicated = sorted({p for p in pairs if pairs.count(p) > 1})
            raise AssertionError(
                f"the sink holds {len(pairs)} committed records, expected "
                f"{len(want)}: lost {len(lost)} {lost[:5]}, duplicated "
                f"{len(duplicated)} {duplicated[:5]}"
            )

    def stop(self):
        if self.query.isActive:
            self.query.stop()


@pytest.fixture
def streams():
    made = []
    yield made
    for stream in made:
        stream.stop()


def test_leader_killed_and_restarted_under_an_exactly_once_stream(
    spark, cluster, tmp_path, streams
):
    stream = Stream(spark, cluster, tmp_path)
    streams.append(stream)
    stream.produce(2000)
    victim = leader_of(cluster, stream.sink, 0)
    # killed while the 2,000 records go through in micro-batches of 200
    stream.wait_committed(400, 180, "before the kill")
    cluster.kill(victim)
    killed_at = time.monotonic()
    # Records produced after the kill are read, written and committed with the sink's
    # (and maybe the source's, the coordinators') old leader dead
    stream.produce(600)
    stream.wait_committed(2000 + 200, 120, f"node {victim} down")
    assert not cluster.node(victim).is_alive()
    down_s = time.monotonic() - killed_at
    cluster.restart(victim)
    cluster.wait_in_sync(stream.sink, 2, 3)
    if preferred_leader(cluster, stream.sink, 0) == victim:
        elect_preferred_leader(cluster, stream.sink, 0)
    stream.produce(600)
    stream.finish()
    print(f"stream: node {victim} down {down_s:.1f} s")


# --- 2. a rolling restart under a running stream --------------------------------------


def test_rolling_restart_of_all_three_nodes_under_an_exactly_once_stream(
    spark, cluster, tmp_path, streams
):
    stream = Stream(spark, cluster, tmp_path, max_offsets=150)
    streams.append(stream)
    stream.produce(600)
    stream.wait_committed(300, 180, "before the first restart")
    timings = []
    for node, how in ((1, "shutdown"), (2, "kill"), (3, "shutdown")):
        started = time.monotonic()
        if how == "kill":
            cluster.kill(node)
        else:
            cluster.shutdown(node)
        # records produced, read and committed while the node is down
        stream.produce(300)
        stream.wait_committed(len(stream.produced) - 150, 120, f"node {node} down ({how})")
        cluster.restart(node)
        wait_for(lambda: not unhealthy(cluster), 120, f"node {node} back in sync", interval=0.25)
        timings.append(f"node {node} ({how}) {time.monotonic() - started:.1f} s")
    stream.produce(300)
    stream.finish()
    print("rolling restart: " + ", ".join(timings))


# --- 3. a controlled shutdown during the work -----------------------------------------


def test_controlled_shutdown_of_the_leader_during_an_exactly_once_write(spark, cluster, tmp_path):
    bs = cluster.bootstrap_servers
    topic = cluster.create_topic(cluster.unique_topic("fo-shutdown"), partitions=2)
    victim = leader_of(cluster, topic, 0)
    rows = 4000
    gates = str(tmp_path)
    # rows 1000..1999 go out during the shutdown; rows 2000.. once the node is gone
    source = paced_format(
        spark, gates, sleep_s=0.05, write_stops={1000: ("writing", None), 2000: (None, "down")}
    )
    job = paced_write(spark, bs, topic, rows, source, deliveryGuarantee="exactly-once")
    wait_for(
        lambda: os.path.exists(os.path.join(gates, "writing")), 180, "the write to start", job=job
    )
    cluster.shutdown(victim)  # Kafka's controlled shutdown: leaders move away first
    touch(os.path.join(gates, "down"))
    # the work goes on: the write ends, committed, with the node still down
    job.result(240)
    assert not cluster.node(victim).is_alive()
    messages = read_committed(bs, topic, expected=rows + 1)
    assert_partitions_hold(messages, rows)
