"""spark.readStream.format("pykafka") end to end, on Apache Kafka.

* a query in its own driver process is SIGKILLed mid-stream while records are being
  produced, restarted from its checkpoint, and the file sink then holds every
  record exactly once; its consumer group was never ahead of the checkpoint;
* Trigger.AvailableNow with maxOffsetsPerTrigger=5 over 15 records runs 3 batches,
  and an independent admin client sees the group's offsets after every batch;
* partitions added to a topic, and topics matching a pattern, are picked up;
* startingOffsets=group, startingOffsets=latest, Trigger.Once.

The reader's offset planning and data-loss checks, called directly (no Spark):
tests/integration/test_stream.py. Data is produced with ``batch.num.messages=1``: Tansu's
ListOffsets LATEST is wrong after a multi-record batch (tests/README.md, Tansu deviation 1).
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from chispa import assert_df_equality

from kafka_ds.read.stream_offsets import from_offset_dict
from kafka_ds.stream import commit_query_progress
from tests.integration.test_stream import COLUMNS, ONE_PER_BATCH, group_offsets, numbered, produce
from tests.support import PROJECT_ROOT
from tests.support.spark_support import spark  # noqa: F401  (fixture)

SCHEMA = "key binary, value binary, topic string, partition int, offset long"


# --- helpers ------------------------------------------------------------------------


def wait_for(condition, timeout=20.0, interval=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def wait_group(broker, group, expected, timeout=60.0):
    """Wait until the group's offsets equal ``expected`` ({(topic, partition): offset})."""
    seen = {}

    def check():
        seen["now"] = group_offsets(broker, group, list(expected))
        return seen["now"] == expected

    try:
        wait_for(check, timeout, what=f"group {group} at {expected}")
    except AssertionError:
        raise AssertionError(
            f"group {group} is at {seen.get('now')}, expected {expected}"
        ) from None


def stream(spark, broker, **options):
    reader = spark.readStream.format("pykafka").option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    )
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def run_available_now(spark, df, checkpoint, timeout=120):
    """Run ``df`` to completion with Trigger.AvailableNow (restartable from ``checkpoint``);
    returns the query and a DataFrame of the rows this run read."""
    rows = []

    def collect(batch, _batch_id):
        rows.extend(tuple(r) for r in batch.select(*COLUMNS).collect())

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(timeout), "AvailableNow query did not finish"
    assert query.exception() is None, query.exception()
    return query, rows_df(spark, rows)


def rows_df(spark, rows):
    return spark.createDataFrame(rows, SCHEMA)


def assert_same_rows(actual, expected):
    order = ["topic", "partition", "offset"]
    assert_df_equality(
        actual.select(*COLUMNS).orderBy(order), expected.orderBy(order), ignore_nullable=True
    )


def data_batches(query):
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def checkpoint_offsets(checkpoint, batch_id):
    """End offsets Spark logged for ``batch_id`` (last line of offsets/<id>)."""
    with open(os.path.join(checkpoint, "offsets", str(batch_id))) as f:
        return json.loads(f.read().strip().splitlines()[-1])


def checkpoint_batches(checkpoint, log):
    folder = os.path.join(checkpoint, log)
    if not os.path.isdir(folder):
        return []
    return sorted(int(n) for n in os.listdir(folder) if n.isdigit())


# --- kill the driver, restart from the checkpoint --------------------------------------


class Producer(threading.Thread):
    """Produces small records round-robin over the partitions until stopped."""

    def __init__(self, broker, topic, partitions, per_round=6, pause=0.1):
        super().__init__(daemon=True)
        from confluent_kafka import Producer as CProducer

        self.topic, self.partitions = topic, partitions
        self.per_round, self.pause = per_round, pause
        self.producer = CProducer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "acks": "all",
                "log_level": 3,
                **ONE_PER_BATCH,
            }
        )
        self.rows, self.errors = [], []
        self.halt = threading.Event()

    def run(self):
        i = 0
        while not self.halt.is_set():
            for _ in range(self.per_round):
                key, value = f"k{i}".encode(), f"v{i}".encode()

                def done(err, msg, key=key, value=value):
                    if err is not None:
                        self.errors.append(err)
                    else:
                        self.rows.append((key, value, self.topic, msg.partition(), msg.offset()))

                self.producer.produce(
                    self.topic,
                    key=key,
                    value=value,
                    partition=i % self.partitions,
                    on_delivery=done,
                )
                i += 1
            self.producer.poll(0)
            time.sleep(self.pause)
        assert self.producer.flush(30) == 0

    def stop(self):
        self.halt.set()
        self.join(60)
        assert not self.is_alive() and not self.errors, self.errors
        return self.rows


@pytest.mark.only_brokers("kafka")  # one real broker: each run starts and kills Spark drivers
@pytest.mark.heavy
def test_kill_driver_then_restart_from_checkpoint_exactly_once(spark, broker, new_topic, tmp_path):
    topic = new_topic(partitions=3, prefix="kill")
    group = f"kill-{uuid.uuid4().hex[:8]}"
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")
    options = {
        "kafka.bootstrap.servers": broker.bootstrap_servers,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "20",
        "kafka.group.id": group,
    }
    spec = {"options": options, "sink": sink, "checkpoint": checkpoint, "trigger_ms": 100}
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    log_path = tmp_path / "child.log"
    producer = Producer(broker, topic, 3)
    producer.start()
    with open(log_path, "wb") as log:
        # Own session (process group): the driver is the Python process *and* its JVM
        # and Python workers; all of them are SIGKILLed together.
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.support.stream_child", json.dumps(spec)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            cwd=PROJECT_ROOT,
        )
    try:
        wait_for(
            lambda: len(checkpoint_batches(checkpoint, "commits")) >= 3 or child.poll() is not None,
            timeout=180,
            what="3 committed batches",
        )
        assert child.poll() is None, "streaming child died:\n" + log_path.read_text()[-3000:]
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    committed = checkpoint_batches(checkpoint, "commits")
    planned = checkpoint_batches(checkpoint, "offsets")
    time.sleep(0.5)
    produced = producer.stop()
    tps = [(topic, p) for p in range(3)]

    # The group is never ahead of what Spark finished: at most the last committed batch.
    last_done = from_offset_dict(checkpoint_offsets(checkpoint, committed[-1]))
    in_group = group_offsets(broker, group, tps)
    assert in_group, "the query committed nothing to its consumer group"
    assert all(in_group[tp] <= last_done.get(tp, 0) for tp in in_group), (in_group, last_done)
    assert sum(last_done.values()) < len(produced), "the query was not killed mid-stream"

    # Restart in this process from the same checkpoint and sink; read what is left.
    restart_options = {k: v for k, v in options.items() if k != "maxOffsetsPerTrigger"}
    restart_options.pop("kafka.bootstrap.servers")
    query = (
        stream(spark, broker, **restart_options)
        .writeStream.format("parquet")
        .option("path", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180), "restarted query did not finish"
    assert query.exception() is None, query.exception()

    print(f"killed with batches planned {planned[-1]}, committed {committed[-1]}")
    if planned[-1] > committed[-1]:
        # The batch planned but not finished before the kill is replayed with its range.
        replay = query.recentProgress[0]
        assert replay["batchId"] == planned[-1]
        assert json.loads(replay["sources"][0]["endOffset"]) == checkpoint_offsets(
            checkpoint, planned[-1]
        )
        assert json.loads(replay["sources"][0]["startOffset"]) == checkpoint_offsets(
            checkpoint, committed[-1]
        )

    assert_same_rows(spark.read.parquet(sink), rows_df(spark, produced))
    ends = {}
    for _k, _v, t, p, o in produced:
        ends[(t, p)] = max(ends.get((t, p), 0), o + 1)
    # AvailableNow ends cleanly: the group holds the end of the last batch.
    wait_group(broker, group, ends)


# --- AvailableNow, admission control and group commits -----------------------------------


def test_available_now_three_limited_batches_committed_after_each(
    spark, broker, new_topic, tmp_path
):
    topic = new_topic(partitions=1, prefix="avn")
    rows = produce(broker, topic, numbered("a", 15), partition=0)
    group = f"avn-{uuid.uuid4().hex[:8]}"
    tp = (topic, 0)
    batches = []

    def each_batch(df, batch_id):
        offsets = sorted(r.offset for r in df.select("offset").collect())
        # Before this batch ran, Spark asked for it with the previous batch as start:
        # an independent client sees that batch's end as the group's offset.
        wait_group(broker, group, {tp: offsets[0]})
        batches.append((batch_id, offsets))

    query = (
        stream(
            spark,
            broker,
            subscribe=topic,
            startingOffsets="earliest",
            maxOffsetsPerTrigger=5,
            **{"kafka.group.id": group},
        )
        .writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert batches == [(0, list(range(0, 5))), (1, list(range(5, 10))), (2, list(range(10, 15)))]
    assert [p["numInputRows"] for p in data_batches(query)] == [5, 5, 5]
    wait_group(broker, group, {tp: 15})  # after the clean end: the last batch's end
    assert len(rows) == 15


def test_new_partitions_of_a_topic_are_read_from_earliest(spark, broker, new_topic, tmp_path):
    # Neither test broker implements CreatePartitions (tests/README.md), so the growth
    # from 1 to 3 partitions is made by re-creating the topic while the query is down
    # and writing partition 0 again with the same records at the same offsets: the
    # source sees exactly what a CreatePartitions would leave.
    topic = new_topic(partitions=1, prefix="grow")
    first = produce(broker, topic, numbered("p0-", 5), partition=0)
    checkpoint = tmp_path / "ck"
    df = stream(spark, broker, subscribe=topic, startingOffsets="earliest")
    _q, read = run_available_now(spark, df, checkpoint)
    assert_same_rows(read, rows_df(spark, first))

    broker.delete_topic(topic)
    broker.create_topic(topic, partitions=3)
    assert produce(broker, topic, numbered("p0-", 5), partition=0) == first
    later = produce(broker, topic, numbered("p0-late", 3), partition=0)
    for p in (1, 2):
        later += produce(broker, topic, numbered(f"p{p}-", 4), partition=p)
    query, read = run_available_now(spark, df, checkpoint)
    assert_same_rows(read, rows_df(spark, later))
    assert json.loads(query.lastProgress["sources"][0]["endOffset"]) == {
        topic: {"0": 8, "1": 4, "2": 4}
    }


def test_pattern_picks_up_a_new_topic(spark, broker, tmp_path):
    stem = f"pat{uuid.uuid4().hex[:8]}"
    created = [f"{stem}-a"]
    broker.create_topic(created[0], partitions=2)
    try:
        rows = produce(broker, created[0], numbered("a", 4))
        query = (
            stream(spark, broker, subscribePattern=f"{stem}-.*", startingOffsets="earliest")
            .writeStream.format("memory")
            .queryName(stem)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .start()
        )
        try:
            query.processAllAvailable()
            created.append(f"{stem}-b")
            broker.create_topic(created[1], partitions=1)
            rows += produce(broker, created[1], numbered("b", 3))
            query.processAllAvailable()
            assert_same_rows(spark.table(stem), rows_df(spark, rows))
        finally:
            query.stop()
    finally:
        for topic in created:
            broker.delete_topic(topic, wait=False)


# --- starting offsets ---------------------------------------------------------------------


def test_starting_offsets_group_resumes_where_the_group_left_off(
    spark, broker, new_topic, tmp_path
):
    topic = new_topic(partitions=2, prefix="grp")
    group = f"grp-{uuid.uuid4().hex[:8]}"
    rows = produce(broker, topic, numbered("x", 4, partition=0) + numbered("y", 4, partition=1))
    # First query: only partition 0, so the group has no offset for partition 1.
    first = stream(
        spark,
        broker,
        assign=json.dumps({topic: [0]}),
        startingOffsets="earliest",
        **{"kafka.group.id": group},
    )
    _q, read = run_available_now(spark, first, tmp_path / "ck1")
    assert_same_rows(read, rows_df(spark, rows[:4]))
    wait_group(broker, group, {(topic, 0): 4})

    more = produce(
        broker, topic, numbered("x-later", 3, partition=0) + numbered("y-later", 3, partition=1)
    )
    second = stream(
        spark,
        broker,
        subscribe=topic,
        startingOffsets="group",
        startingOffsetsFallback="earliest",
        **{"kafka.group.id": group},
    )
    _q, read = run_available_now(spark, second, tmp_path / "ck2")
    # Partition 0 resumes at the group's offset 4; partition 1 falls back to earliest.
    assert_same_rows(read, rows_df(spark, more[:3] + rows[4:] + more[3:]))
    wait_group(broker, group, {(topic, 0): 7, (topic, 1): 7})


def test_starting_offsets_latest_reads_only_new_records(spark, mock_cluster, tmp_path):
    broker = mock_cluster
    topic = broker.unique_topic("latest")
    broker.create_topic(topic, partitions=2)
    produce(broker, topic, numbered("old", 6))
    query = (
        stream(spark, broker, subscribe=topic)
        .writeStream.format("memory")
        .queryName(topic.replace("-", "_"))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        # The first batch pins the latest offsets in Spark's offset log and reads nothing.
        wait_for(lambda: query.lastProgress is not None, 60, what="first batch")
        first = query.recentProgress[0]
        assert first["numInputRows"] == 0
        assert json.loads(first["sources"][0]["startOffset"]) is None  # none for batch 0
        pinned = json.loads(first["sources"][0]["endOffset"])[topic]
        assert sum(pinned.values()) == 6
        new = produce(broker, topic, numbered("new", 5))
        query.processAllAvailable()
        assert_same_rows(spark.table(topic.replace("-", "_")), rows_df(spark, new))
    finally:
        query.stop()
        broker.delete_topic(topic, wait=False)


def test_trigger_once_reads_all_and_last_batch_can_be_committed(spark, mock_cluster, tmp_path):
    broker = mock_cluster
    topic = broker.unique_topic("once")
    broker.create_topic(topic, partitions=2)
    group = f"once-{uuid.uuid4().hex[:8]}"
    rows = produce(
        broker, topic, [dict(r, partition=i % 2) for i, r in enumerate(numbered("o", 12))]
    )
    options = {
        "subscribe": topic,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": 3,
        "kafka.group.id": group,
    }
    name = f"once{uuid.uuid4().hex[:8]}"
    query = (
        stream(spark, broker, **options)
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(once=True)
        .start()
    )
    assert query.awaitTermination(120)
    # Trigger.Once ignores maxOffsetsPerTrigger (Spark passes ReadAllAvailable).
    assert_same_rows(spark.table(name), rows_df(spark, rows))
    ends = {(topic, 0): 6, (topic, 1): 6}
    # Spark never looks for data after a Trigger.Once batch, so the reader cannot know it
    # finished: the group may lag, but is never ahead.
    time.sleep(1)
    lagging = group_offsets(broker, group, list(ends))
    assert all(lagging[tp] <= ends[tp] for tp in lagging)
    committed = commit_query_progress(
        query,
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            **{k: str(v) for k, v in options.items()},
        },
    )
    assert committed == {topic: {"0": 6, "1": 6}}
    assert group_offsets(broker, group, list(ends)) == ends
    broker.delete_topic(topic, wait=False)


# --- records deleted under a running query ---------------------------------------------------


def check_records_removed_under_a_running_query(
    spark, bootstrap, topic, tmp_path, fail_on_data_loss, remove, lost_until, earliest, last
):
    """Offsets 0-9 are in ``topic``'s partition 0. The first micro-batch (offsets 0-4) holds
    the query in its sink while ``remove()`` deletes records past the stream's position
    (and may write more); then failOnDataLoss=true must stop the query with a DataLossError
    naming the partition and the offsets lost (``[5, lost_until)``, ``earliest`` left),
    and false must go on from ``earliest`` up to ``last``."""
    from pyspark.errors import StreamingQueryException

    seen, in_batch, removed = [], threading.Event(), threading.Event()

    def sink(df, _batch_id):
        seen.extend(r.offset for r in df.select("offset").collect())
        in_batch.set()
        removed.wait(60)

    reader = spark.readStream.format("pykafka").option("kafka.bootstrap.servers", bootstrap)
    options = {
        "subscribe": topic,
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "5",
        "failOnDataLoss": str(fail_on_data_loss).lower(),
    }
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        assert in_batch.wait(120), "no first micro-batch"
        assert seen == [0, 1, 2, 3, 4]
        remove()
        removed.set()
        if fail_on_data_loss:
            with pytest.raises(StreamingQueryException) as failure:
                query.awaitTermination(120)
            assert re.search(
                rf"DataLossError: Offsets \[5, {lost_until}\) of {topic}-0 are no longer "
                rf"available \(earliest is {earliest}\)",
                str(failure.value),
            ), failure.value
        else:
            wait_for(lambda: seen[-1:] == [last], 120, what=f"offset {last} read")
            assert seen == [0, 1, 2, 3, 4, *range(earliest, last + 1)]
            assert query.exception() is None
    finally:
        removed.set()
        query.stop()


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_records_aged_out_under_a_running_query(spark, mock_cluster, tmp_path, fail_on_data_loss):
    """The mock drops a partition's oldest records past ~5 MiB (tests/integration/
    test_read.py::age_out): 6 MiB more written while the first micro-batch holds, the next
    batch starts at 5, now deleted up to 12 (the WARNING of failOnDataLoss=false is checked
    in tests/integration/test_read.py::test_records_aged_out_between_plan_and_read)."""
    from tests.integration.test_read import age_out

    broker = mock_cluster
    topic = broker.unique_topic("aged")
    broker.create_topic(topic, partitions=1)
    produce(broker, topic, numbered("s", 10), partition=0)

    def remove():
        placed = age_out(broker, topic)
        assert placed[-1] == (0, 15)  # 10-15 written; the mock keeps 12-15

    try:
        check_records_removed_under_a_running_query(
            spark,
            broker.bootstrap_servers,
            topic,
            tmp_path,
            fail_on_data_loss,
            remove,
            lost_until=10,
            earliest=12,
            last=15,
        )
    finally:
        broker.delete_topic(topic, wait=False)
