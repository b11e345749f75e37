"""Transactions on both brokers without Spark: the client (kafka_ds/client/transactions.py),
the exactly-once sink's commit of fenced transactions and its transaction log, and
read_committed against a scripted broker's aborted-transactions list. The sink in Spark
drivers of its own: tests/spark/test_transactions.py.

Exactly-once is judged on the raw log (``txlog.verdict``): a transactional batch
counts only when its producer's next marker in that partition is a COMMIT.
"""

import dataclasses
import os
import re
import subprocess
import sys
import time

import pytest

from kafka_ds.client import KafkaClient
from kafka_ds.client.transactions import (
    TransactionError,
    TransactionHandle,
    end_transaction,
    init_transactional_producer,
)
from tests.support import waiting
from tests.support.brokers import consume_confluent
from tests.support.txlog import nothing_open, produce_in_transaction, verdict, verdict_when
from tests.unit.test_transactions import eos_options

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 22, 24, 26
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS = 14, 16, 51


def end_in_other_process(bootstrap, handle, commit):
    code = (
        "import sys; from kafka_ds.client import KafkaClient;"
        "from kafka_ds.client.transactions import TransactionHandle, end_transaction;"
        "c = KafkaClient(sys.argv[1]);"
        "end_transaction(c, TransactionHandle(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])),"
        " sys.argv[5] == 'commit'); c.close()"
    )
    subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            bootstrap,
            handle.transactional_id,
            str(handle.producer_id),
            str(handle.producer_epoch),
            "commit" if commit else "abort",
        ],
        check=True,
        timeout=120,
    )


def wait_stable(bootstrap, topic, timeout=60.0):
    """Until every partition's last stable offset is its high watermark. A transaction's
    commit or abort returns once the coordinator has logged it; the markers reach the
    partitions after that (seconds after, on a loaded machine), and until then the last
    stable offset stays below them. A read planned in between stops short of what a
    reader that starts later sees (a fresh machine's run once read 9 records fewer than
    confluent-kafka did, the markers of its last transactions still on their way)."""
    from kafka_ds.client.reads import LATEST, READ_COMMITTED, READ_UNCOMMITTED, list_offsets

    def stable():
        with KafkaClient(bootstrap) as client:
            ends = {(topic, p): LATEST for p in client.topic_partitions(topic, refresh=True)}

            def end_offsets(isolation_level):
                answer = list_offsets(client, ends, isolation_level)
                return {tp: offset for tp, (offset, _ts) in answer.items()}

            high_watermarks = end_offsets(READ_UNCOMMITTED)
            last_stable = end_offsets(READ_COMMITTED)
        return True if high_watermarks == last_stable else None

    waiting.wait_until(
        f"the last stable offsets of {topic} at its high watermarks", stable, timeout
    )


def read_committed_both(bootstrap, topic):
    """(kafka_ds, confluent-kafka) read_committed reads of the whole topic, each as
    [(partition, offset, value)] in log order, once no transaction is in flight in it
    (``wait_stable``). kafka_ds plans the batch read as Spark's driver would (its ends are
    the last stable offsets) and reads without Spark."""
    from kafka_ds.read.ranges import read_range
    from kafka_ds.source import KafkaDataSource

    wait_stable(bootstrap, topic)
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "kafka.isolation.level": "read_committed",
    }
    reader = KafkaDataSource(options).reader(None)
    ours = []
    for rng in reader.partitions():
        for batch in read_range(reader.opts, rng):
            ours += zip(
                batch.column("partition").to_pylist(),
                batch.column("offset").to_pylist(),
                batch.column("value").to_pylist(),
                strict=True,
            )
    theirs = [
        (m.partition, m.offset, m.value)
        for m in consume_confluent(
            bootstrap, topic, timeout=60, **{"isolation.level": "read_committed"}
        )
    ]
    return sorted(ours), sorted(theirs)


def crc_errors_confluent(bootstrap, topic, seconds=15.0):
    """{(partition, offset)} of batches librdkafka (check.crcs=true) reports as failing
    their CRC while reading the whole topic."""
    from confluent_kafka import Consumer, KafkaError

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-crc",
            "auto.offset.reset": "earliest",
            "check.crcs": True,
            "enable.partition.eof": True,
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    bad, deadline = set(), time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if (
                msg is not None
                and msg.error() is not None
                and msg.error().code() == KafkaError._BAD_MSG
            ):
                bad.add((msg.partition(), msg.offset()))
    finally:
        consumer.close()
    return bad


@pytest.fixture
def kafka_topic(kafka_broker):
    """Factory for tests that need Tansu (the mock does not fence): ``kafka_topic(prefix,
    partitions) -> name``; the topics are deleted after the test."""
    made = []

    def make(prefix, partitions=1):
        name = kafka_broker.unique_topic(prefix)
        kafka_broker.create_topic(name, partitions)
        made.append(name)
        return name

    yield make
    for name in made:
        kafka_broker.delete_topic(name)


@pytest.mark.smoke
@pytest.mark.heavy
@pytest.mark.only_brokers("kafka", "kafka_older", "tansu")  # not the mock: the suite's time
def test_commit_and_abort_from_another_process(broker, new_topic):
    topic = new_topic(partitions=2)
    bs = broker.bootstrap_servers
    committed = produce_in_transaction(bs, topic, f"{topic}-a", {0: [b"c0", b"c1"], 1: [b"c2"]})
    aborted = produce_in_transaction(bs, topic, f"{topic}-b", {0: [b"a0"], 1: [b"a1", b"a2"]})
    end_in_other_process(bs, committed, commit=True)
    end_in_other_process(bs, aborted, commit=False)
    result = verdict_when(bs, topic, nothing_open)
    assert sorted(result.committed) == [b"c0", b"c1", b"c2"]
    assert sorted(result.aborted) == [b"a0", b"a1", b"a2"]
    assert result.open == []
    if broker.name == "mock":
        # Mock deviation 11: its COMMIT/ABORT markers carry CRC 0. kafka_ds refuses the
        # first one it meets, naming it; librdkafka refuses the same batches when it
        # checks CRCs (check.crcs=true, off by default).
        from kafka_ds.errors import CorruptRecordError

        with pytest.raises(CorruptRecordError, match="CRC32C mismatch") as info:
            read_committed_both(bs, topic)
        where = re.search(r"partition (\d+) at offset (\d+)", str(info.value)).groups()
        assert tuple(map(int, where)) in crc_errors_confluent(bs, topic)
        return
    # kafka_ds and an independent read_committed consumer read the same records: the
    # committed ones, and the aborted ones too, since neither broker sends the Fetch
    # aborted-transactions list a consumer needs to drop them (tests/README.md).
    ours, theirs = read_committed_both(bs, topic)
    assert ours == theirs
    assert {b"c0", b"c1", b"c2"} <= {value for _p, _o, value in ours}


def test_commit_again_is_harmless(broker, new_topic):
    topic = new_topic()
    bs = broker.bootstrap_servers
    handle = produce_in_transaction(bs, topic, f"{topic}-x", {0: [b"v"]})
    with KafkaClient(bs) as client:
        end_transaction(client, handle, commit=True)
        end_transaction(client, handle, commit=True)  # a driver re-committing on restart
    assert verdict_when(bs, topic, nothing_open).committed == [b"v"]


def test_new_epoch_fences_and_aborts_open_transaction(kafka_broker, kafka_topic):
    # Only Tansu fences (the librdkafka mock keeps the old transaction open).
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic("fence", 1)
    first = produce_in_transaction(bs, topic, f"{topic}-t", {0: [b"old"]})
    with KafkaClient(bs) as client:
        second = init_transactional_producer(client, f"{topic}-t", 60000)
        assert second.producer_id == first.producer_id
        assert second.producer_epoch > first.producer_epoch
        with pytest.raises(TransactionError) as info:
            end_transaction(client, first, commit=True, timeout_ms=5000)
        # Kafka answers PRODUCER_FENCED / INVALID_PRODUCER_EPOCH; Tansu 0.6.0 closes the
        # connection instead (every retry too), so the error comes at the deadline.
        assert info.value.fenced or info.value.code == -1
    result = verdict_when(bs, topic, nothing_open)
    assert result.committed == [] and result.open == []
    assert result.aborted == [b"old"]


def test_last_stable_offset_after_a_fenced_transaction(request, kafka_broker, kafka_topic):
    """The pattern of a retried write task: x's first attempt is fenced by its retry while
    y is open; z opens after the retry's first batch; all three commit. On Apache Kafka (the
    mock does not fence; Tansu 0.6.0 keeps the last stable offset at b'x-retry', its
    deviation 14)."""
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic("lso", 1)
    y = produce_in_transaction(bs, topic, f"{topic}-y", {0: [b"y"]})
    produce_in_transaction(bs, topic, f"{topic}-x", {0: [b"x-first"]})
    x = produce_in_transaction(bs, topic, f"{topic}-x", {0: [b"x-retry"]})
    z = produce_in_transaction(bs, topic, f"{topic}-z", {0: [b"z"]})
    with KafkaClient(bs) as client:
        for handle in (y, x, z):
            end_transaction(client, handle, commit=True)
        # Kafka answers EndTxn before it writes the markers (PrepareCommit): wait for them
        deadline = time.monotonic() + 15
        while True:
            part = client.fetch(topic, 0, 0, max_bytes=1, max_wait_ms=1, min_bytes=0)
            if part["high_watermark"] >= 8 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    result = verdict_when(bs, topic, nothing_open)
    assert sorted(result.committed) == [b"x-retry", b"y", b"z"] and result.open == []
    assert result.aborted == [b"x-first"]
    assert part["high_watermark"] == 8
    # Every transaction has ended, so the last stable offset is the high watermark.
    x_retry = next(b.base_offset for b in result.batches if b.values == [b"x-retry"])
    assert part["last_stable_offset"] == part["high_watermark"], (
        f"last stable offset {part['last_stable_offset']} (offset of b'x-retry': {x_retry})"
    )


def test_retriable_coordinator_errors_are_retried(mock_cluster, caplog):
    caplog.set_level("INFO", logger="kafka_ds.client.retry")
    bs = mock_cluster.bootstrap_servers
    topic = mock_cluster.unique_topic("retry")
    mock_cluster.create_topic(topic, 1)
    try:
        mock_cluster.push_request_errors(
            INIT_PRODUCER_ID, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
        )
        mock_cluster.push_request_errors(
            ADD_PARTITIONS_TO_TXN, CONCURRENT_TRANSACTIONS, CONCURRENT_TRANSACTIONS
        )
        handle = produce_in_transaction(bs, topic, f"{topic}-t", {0: [b"v1", b"v2"]})
        mock_cluster.push_request_errors(
            END_TXN, CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
        )
        with KafkaClient(bs) as client:
            end_transaction(client, handle, commit=True)
        assert verdict_when(bs, topic, nothing_open).committed == [b"v1", b"v2"]
        retried = [r.getMessage() for r in caplog.records if "; retry " in r.getMessage()]
        assert sum("InitProducerId" in r for r in retried) == 3
        assert sum("AddPartitionsToTxn" in r for r in retried) == 2
        assert sum("EndTxn(commit)" in r for r in retried) == 3
    finally:
        mock_cluster.delete_topic(topic)


def test_fatal_end_txn_error_names_the_transaction(mock_cluster):
    bs = mock_cluster.bootstrap_servers
    with KafkaClient(bs) as client:
        handle = init_transactional_producer(client, "kafka-ds-fatal", 60000)
        mock_cluster.push_request_errors(END_TXN, 47)
        with pytest.raises(TransactionError, match="kafka-ds-fatal") as info:
            end_transaction(
                client,
                TransactionHandle("kafka-ds-fatal", handle.producer_id, handle.producer_epoch),
                commit=True,
            )
        assert info.value.fenced


# --- the driver's commit, after a speculative copy fenced a finished task -----------------


def test_transaction_fenced_after_its_task_finished_fails_the_commit_with_nothing_visible(
    kafka_broker, kafka_topic
):
    """The window the speculation test cannot time: a speculative copy that opens its
    transaction (fencing the original's) after the original finished, and is then killed.
    The driver's commit must fail before any EndTxn, and its abort leave nothing open."""
    from kafka_ds.write.exactly_once import abort_all, commit_all, transactional_id
    from kafka_ds.write.messages import KafkaCommitMessage

    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic("late-fence", 2)
    prefix = f"{topic}-w"
    originals = [
        produce_in_transaction(
            bs,
            topic,
            transactional_id(prefix, task),
            {task: [f"task{task}-{i}".encode() for i in range(3)]},
        )
        for task in (0, 1)
    ]
    messages = [
        KafkaCommitMessage(
            task=task,
            records=3,
            bytes=0,
            partitions=[(topic, task, 3, -1, -1)],
            transactional_id=h.transactional_id,
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
        )
        for task, h in enumerate(originals)
    ]
    copy = produce_in_transaction(bs, topic, transactional_id(prefix, 1), {1: [b"copy"]})
    assert copy.producer_epoch > originals[1].producer_epoch
    opts = eos_options(bs)
    started = time.monotonic()
    with pytest.raises(TransactionError, match="nothing was committed") as info:
        commit_all(opts, messages)
    assert info.value.fenced
    assert transactional_id(prefix, 1) in str(info.value)
    assert "speculative" in str(info.value)
    result = verdict(bs, topic)
    assert result.committed == []
    assert sorted(result.open) == sorted([b"task0-0", b"task0-1", b"task0-2", b"copy"])
    abort_all(opts, prefix, messages)
    result = verdict_when(bs, topic, nothing_open)
    assert result.committed == [] and result.open == []
    assert b"copy" in result.aborted and b"task0-0" in result.aborted
    # No request waited for a deadline (Tansu closes the connection on a fenced EndTxn).
    assert time.monotonic() - started < 20


def test_a_task_beginning_after_the_abort_writes_nothing(broker, new_topic, caplog):
    """The driver's abort() marks the write aborted before it fences: a task whose
    InitProducerId comes after the fence (nothing fences it) finds the marker and fails
    before its first record; a task that began before the fence is fenced by it (Tansu;
    the mock does not fence: deviation 10); another write with the same prefix is not
    taken for the aborted one."""
    import pyarrow as pa

    from kafka_ds.write.exactly_once import (
        abort_all,
        abort_marker,
        check_not_aborted,
        mark_aborted,
        transactional_id,
    )
    from kafka_ds.write.plan import ColumnPlan
    from kafka_ds.write.task import TaskWriter, write_batches

    bs = broker.bootstrap_servers
    topic = new_topic(partitions=2)
    opts = eos_options(bs, topic=topic)
    prefix, plan = f"{topic}-w", ColumnPlan(value=0)
    marker = abort_marker(opts, prefix)
    assert marker[0].startswith(prefix + "-aborted-") and marker[1] == topic
    assert marker != abort_marker(opts, prefix)

    def rows(name):
        return pa.table({"value": pa.array([f"{name}-{i}".encode() for i in range(50)])})

    early = TaskWriter(opts, plan, 0, transactional_id(prefix, 0), marker)
    abort_all(opts, prefix, [None, None], marker)
    assert "could not" not in caplog.text
    with pytest.raises(TransactionError, match="the write was aborted") as info:
        write_batches(opts, plan, rows("late").to_batches(), 1, transactional_id(prefix, 1), marker)
    assert marker[0] in str(info.value)
    if broker.name == "kafka":
        with pytest.raises(Exception, match="PRODUCER_FENCED|fenced"):
            for batch in rows("early").to_batches():
                early.write_batch(batch)
            early.finish()
    early.close()
    result = verdict(bs, topic)
    assert not any(v.startswith(b"late") for v in result.committed + result.aborted + result.open)
    if broker.name == "kafka":
        assert result.open == [] and result.committed == []
    # The same prefix in a later write, with a marker of its own, writes.
    message = write_batches(
        opts,
        plan,
        rows("next").to_batches(),
        1,
        transactional_id(prefix, 1),
        abort_marker(opts, prefix),
    )
    assert message.records == 50 and message.producer_id >= 0
    # A write with a topic column marks on a topic the cluster has.
    column_marker = abort_marker(dataclasses.replace(opts, topic=None), prefix)
    with KafkaClient(bs) as client:
        assert column_marker[1] in client.list_topics()
        check_not_aborted(client, column_marker, "t-0")
        assert mark_aborted(client, column_marker)
        with pytest.raises(TransactionError, match="the write was aborted"):
            check_not_aborted(client, column_marker, "t-0")


@pytest.mark.waits
def test_abort_fences_through_an_outage_longer_than_the_request_timeout(
    kafka_broker, kafka_topic, caplog
):
    """abort()'s fence (InitProducerId) is retried within kafka.delivery.timeout.ms, as
    EndTxn is: a coordinator unreachable for longer than kafka.request.timeout.ms does not
    leave a failed task's transaction open. (Tansu: the mock does not fence.)"""
    import threading

    from kafka_ds.write.exactly_once import abort_all, transactional_id
    from tests.support.faultproxy import FaultProxy

    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic("fence-outage", 1)
    prefix = f"{topic}-w"
    produce_in_transaction(bs, topic, transactional_id(prefix, 0), {0: [b"failed-task"]})
    with FaultProxy(bs) as proxy:
        opts = eos_options(
            proxy.bootstrap_servers,
            topic=topic,
            **{"kafka.request.timeout.ms": "1000", "kafka.delivery.timeout.ms": "20000"},
        )
        proxy.down()
        threading.Timer(3.0, proxy.up).start()
        started = time.monotonic()
        abort_all(opts, prefix, [None])  # the task failed: no commit message
        waited = time.monotonic() - started
    result = verdict_when(bs, topic, nothing_open)
    assert result.open == [] and result.aborted == [b"failed-task"]
    assert "could not fence" not in caplog.text
    assert waited > 2.5  # it did wait out the outage


# --- read_committed against a scripted broker that sends an aborted-transactions list ------


def _aborted_list_cluster(log_bytes, aborted, end):
    """One partition of topic "txn" holding ``log_bytes`` (offsets [0, end)); Fetch answers
    everything from offset 0 with ``aborted`` as the aborted-transactions list."""
    from kafka_ds.protocol import messages as m
    from kafka_ds.protocol.schema import decode_request, encode_response
    from tests.support.fakebroker import serve_cluster

    seen = []

    def answer(version, correlation_id, body):
        return encode_response(
            m.FETCH,
            version,
            correlation_id,
            {
                "throttle_time_ms": 0,
                "error_code": 0,
                "session_id": 0,
                "responses": [
                    {
                        "topic": "txn",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "error_code": 0,
                                "high_watermark": end,
                                "last_stable_offset": end,
                                "log_start_offset": 0,
                                "aborted_transactions": [
                                    {"producer_id": pid, "first_offset": first}
                                    for pid, first in aborted
                                ],
                                "preferred_read_replica": -1,
                                "records": log_bytes
                                if body["topics"][0]["partitions"][0]["fetch_offset"] < end
                                else b"",
                            }
                        ],
                    }
                ],
            },
        )

    def fetch(version, correlation_id, frame, conn):
        _header, body = decode_request(m.FETCH, frame)
        seen.append(body["isolation_level"])
        conn.sendall(answer(version, correlation_id, body))

    broker = serve_cluster({"txn": 1}, {1: fetch})
    return broker, seen, answer


def test_read_committed_drops_aborted_records_from_the_fetch_list():
    from kafka.protocol.consumer import FetchResponse

    from kafka_ds.options import parse_read_options
    from kafka_ds.read.ranges import OffsetRange, read_range
    from tests.unit.test_records import _txn_log

    log_bytes = b"".join(_txn_log())  # built with aiokafka's batch builder
    aborted = [(1, 0), (1, 11)]
    broker, isolation_levels, answer = _aborted_list_cluster(log_bytes, aborted, 15)
    try:
        # The scripted answer, read by an independent decoder (kafka-python).
        wire = bytes(answer(11, 7, {"topics": [{"partitions": [{"fetch_offset": 0}]}]}))
        theirs = FetchResponse.decode(wire[4:], version=11, header=True)
        part = theirs.responses[0].partitions[0]
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == aborted
        assert (part.high_watermark, part.last_stable_offset) == (15, 15)
        assert bytes(part.records) == log_bytes

        def offsets(level):
            opts = parse_read_options(
                {
                    "kafka.bootstrap.servers": broker.address,
                    "subscribe": "txn",
                    "kafka.isolation.level": level,
                },
                streaming=False,
            )
            return [
                o
                for batch in read_range(opts, OffsetRange("txn", 0, 0, 15))
                for o in batch.column("offset").to_pylist()
            ]

        # aborted: pid 1's records at 0-2 (aborted at 6) and 11-12 (aborted at 13); pid 1's
        # 8-9 were committed at 10; pid 2's 3-4 committed at 7; 5 and 14 not transactional.
        assert offsets("read_committed") == [3, 4, 5, 8, 9, 14]
        assert isolation_levels[-1] == 1
        assert offsets("read_uncommitted") == [0, 1, 2, 3, 4, 5, 8, 9, 11, 12, 14]
        assert isolation_levels[-1] == 0
    finally:
        broker.close()


# --- the driver's pieces, without Spark -------------------------------------------------------


def test_recorded_transactions_are_committed_on_restart(broker, new_topic, tmp_path):
    from kafka_ds.write.exactly_once import TransactionLog

    topic = new_topic(partitions=2)
    bs = broker.bootstrap_servers
    first = produce_in_transaction(bs, topic, f"{topic}-0", {0: [b"a"]})
    second = produce_in_transaction(bs, topic, f"{topic}-1", {1: [b"b", b"c"]})
    opts = eos_options(bs, checkpointLocation=str(tmp_path))
    txn_log = TransactionLog(str(tmp_path))
    assert txn_log.recover(opts) == -1
    txn_log.record(7, [first, second])
    with KafkaClient(bs) as client:  # the crashed driver got through the first EndTxn
        end_transaction(client, first, commit=True)
    assert verdict_when(bs, topic, lambda r: r.open == [b"b", b"c"]).open == [b"b", b"c"]
    restarted = TransactionLog(str(tmp_path))
    assert restarted.recover(opts) == 7
    result = verdict_when(bs, topic, nothing_open)
    assert sorted(result.committed) == [b"a", b"b", b"c"] and result.open == []
    assert sorted(os.listdir(tmp_path / "pykafka-transactions")) == [f"{7:020d}.committed"]
    assert restarted.recover(opts) == 7  # nothing pending any more


def test_a_marker_the_acls_hide_is_skipped_with_a_warning_and_the_task_writes(mock_cluster, caplog):
    """A cluster whose ACLs predate the abort marker (no Describe on the write's groups):
    the task's OffsetFetch is refused, and the task writes as before the marker, warning
    which ACLs close the gap, instead of failing a write that used to work."""
    import uuid

    import pyarrow as pa

    from kafka_ds.write.exactly_once import abort_marker, transactional_id
    from kafka_ds.write.plan import ColumnPlan
    from kafka_ds.write.task import write_batches

    offset_fetch, group_authorization_failed = 9, 30
    topic = f"acl{uuid.uuid4().hex[:8]}"
    mock_cluster.create_topic(topic, partitions=1)
    opts = eos_options(mock_cluster.bootstrap_servers, topic=topic)
    prefix = f"{topic}-w"
    marker = abort_marker(opts, prefix)
    values = pa.table({"value": pa.array([b"a", b"b"])}).to_batches()
    mock_cluster.push_request_errors(offset_fetch, group_authorization_failed)
    message = write_batches(
        opts, ColumnPlan(value=0), values, 0, transactional_id(prefix, 0), marker
    )
    assert message.records == 2
    assert "not allowed to check whether the write was aborted" in caplog.text
    assert "GROUP_AUTHORIZATION_FAILED" in caplog.text or "authorization" in caplog.text.lower()
