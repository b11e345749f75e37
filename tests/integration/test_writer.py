"""The write path on both brokers without Spark: ``write_batches`` and ``TaskWriter`` as an
executor's task runs them -- errors in the data naming topic, partition and row, batching,
linger, acks, sticky null keys, retries, idempotence and faults, and what the brokers do
with resent idempotent batches. ``df.write`` and ``writeStream`` in Spark:
tests/spark/test_writer.py.

Faults a broker cannot be made to show on demand go through ``faultproxy.FaultProxy``
(real sockets, between the writer and the broker) or the mock cluster's error
injection.
"""

import collections
import struct
import threading
import time
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest

from kafka_ds.client import KafkaClient
from kafka_ds.errors import ConfigurationError, ProduceError
from kafka_ds.options import parse_write_options
from kafka_ds.protocol import messages as m
from kafka_ds.protocol.records_encode import encode_record_batch
from kafka_ds.write.messages import KafkaCommitMessage
from kafka_ds.write.plan import ColumnPlan
from kafka_ds.write.task import TaskWriter, write_batches
from tests.support.brokers import consume_confluent
from tests.support.faultproxy import FaultProxy

PRODUCE = 0


def quirk(request, broker, names, reason):
    """Strict xfail for the named brokers only (tests/README.md documents each)."""
    if broker.name in names:
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"{broker.name}: {reason}"))


# --- the record batches in the log, read raw --------------------------------------------


def batch_headers(bootstrap, topic, partition):
    """(size in bytes, attributes, record count) of every record batch of a partition,
    read raw with Fetch (one batch per answer on the mock, so loop)."""
    client = KafkaClient(bootstrap)
    try:
        out, offset = [], 0
        while True:
            part = client.fetch(topic, partition, offset, max_bytes=8 << 20, max_wait_ms=50)
            data = part["records"] or b""
            pos = 0
            got = False
            while pos + 61 <= len(data):
                base_offset, length = struct.unpack_from(">qi", data, pos)
                if pos + 12 + length > len(data):
                    break
                attributes = struct.unpack_from(">h", data, pos + 21)[0]
                count = struct.unpack_from(">i", data, pos + 57)[0]
                if base_offset >= offset:
                    out.append((12 + length, attributes, count))
                    offset = base_offset + count
                    got = True
                pos += 12 + length
            if not got:
                return out
    finally:
        client.close()


# --- errors in the data, naming topic / partition / row ------------------------------------


def test_missing_topic_on_a_broker_that_does_not_create_it():
    """A broker without auto.create.topics.enable answers UNKNOWN_TOPIC_OR_PARTITION even
    when creation is allowed (neither test broker can be set so: a fake one)."""
    from kafka_ds.write.topics import check_topic_exists
    from tests.support.fakebroker import serve_cluster

    fake = serve_cluster({"other": 1}, {})
    try:
        opts = parse_write_options({"kafka.bootstrap.servers": fake.address, "topic": "absent"})
        with pytest.raises(
            ConfigurationError,
            match=r"Topic 'absent' does not exist.*did not "
            r"create it.*auto.create.topics.enable",
        ):
            check_topic_exists(opts)
    finally:
        fake.close()


def arrow_rows(n, value_size=20, **extra):
    columns = {"value": pa.array([b"%08d" % i + b"." * (value_size - 8) for i in range(n)])}
    columns.update(extra)
    return pa.table(columns)


def plan_of(table):
    return ColumnPlan(**{name: i for i, name in enumerate(table.column_names)})


def test_unknown_topic_in_column_and_partition_out_of_range(broker, new_topic):
    topic = new_topic(partitions=2)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "kafka.allow.auto.create.topics": "false",
        }
    )
    table = arrow_rows(10, topic=pa.array([topic] * 9 + ["nowhere-topic"]))
    with pytest.raises(ConfigurationError, match=r"Topic 'nowhere-topic' does not exist"):
        write_batches(opts, plan_of(table), table.to_batches(), task=3)
    table = arrow_rows(
        10,
        topic=pa.array([topic] * 10),
        partition=pa.array([0, 1, None, 1, 0, 2, 0, 0, 0, 0], pa.int32()),
    )
    with pytest.raises(
        ConfigurationError,
        match=rf"Column 'partition' is 2 at row 5 of Spark "
        rf"partition 3's input, but topic '{topic}' has "
        r"partitions 0..1",
    ):
        write_batches(opts, plan_of(table), table.to_batches(), task=3)
    table = arrow_rows(3, topic=pa.array([topic] * 3), partition=pa.array([0, -1, 0], pa.int32()))
    with pytest.raises(ConfigurationError, match=r"Column 'partition' is -1 at row 1"):
        write_batches(opts, plan_of(table), table.to_batches(), task=3)


def test_record_larger_than_max_request_size(broker, new_topic):
    topic = new_topic(partitions=3)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "topic": topic,
            "kafka.max.request.size": "5000",
        }
    )
    values = [b"small"] * 20
    values[13] = b"x" * 6000
    table = pa.table({"value": pa.array(values), "partition": pa.array([2] * 20, pa.int32())})
    batches = [table.slice(0, 10).to_batches()[0], table.slice(10).to_batches()[0]]
    with pytest.raises(
        ConfigurationError,
        match=rf"record at row 13 of Spark partition 0's input for topic '{topic}' "
        r"partition 2 is about 60\d\d bytes, more than "
        r"'kafka.max.request.size' \(5000\)",
    ):
        write_batches(opts, plan_of(table), batches, task=0)


def test_negative_timestamp_and_null_header_key_are_rejected(broker, new_topic):
    topic = new_topic()
    opts = parse_write_options(
        {"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic}
    )
    table = arrow_rows(3, timestamp=pa.array([0, -5, None], pa.timestamp("ms")))
    with pytest.raises(ConfigurationError, match=r"before 1970-01-01 at row 1"):
        write_batches(opts, plan_of(table), table.to_batches(), task=0)
    header_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    table = arrow_rows(
        3,
        headers=pa.array(
            [[], None, [{"key": "a", "value": b""}, {"key": None, "value": b"v"}]], header_type
        ),
    )
    with pytest.raises(ConfigurationError, match=r"null key.*at row 2"):
        write_batches(opts, plan_of(table), table.to_batches(), task=0)


# --- batching, acks, commit messages ------------------------------------------------------


@pytest.mark.smoke
def test_batch_size_linger_and_commit_message(broker, new_topic):
    topic = new_topic(partitions=2)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "topic": topic,
            "kafka.batch.size": "4000",
            "kafka.linger.ms": "60000",
        }
    )
    table = arrow_rows(2000, partition=pa.array([i % 2 for i in range(2000)], pa.int32()))
    # 40 Arrow batches of 50 rows: with linger, rows wait for the next Arrow batch until a
    # partition has ~4000 bytes, so batches are built across Arrow batches.
    message = write_batches(opts, plan_of(table), table.to_batches(max_chunksize=50), task=5)
    assert isinstance(message, KafkaCommitMessage)
    assert message.task == 5 and message.records == 2000
    for partition in (0, 1):
        sizes = batch_headers(broker.bootstrap_servers, topic, partition)
        assert sum(count for _s, _a, count in sizes) == 1000
        assert all(size <= 4000 for size, _a, _c in sizes)
        assert max(count for _s, _a, count in sizes) > 100  # far more than 25 rows per batch
        assert len(sizes) < 12
    assert sorted(message.partitions) == [(topic, 0, 1000, 0, 999), (topic, 1, 1000, 0, 999)]

    # without linger every Arrow batch is sent at once: 25 rows per partition per batch
    topic2 = new_topic(partitions=2)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "topic": topic2,
            "kafka.batch.size": "4000",
            "kafka.linger.ms": "0",
        }
    )
    write_batches(opts, plan_of(table), table.to_batches(max_chunksize=50), task=5)
    assert {c for _s, _a, c in batch_headers(broker.bootstrap_servers, topic2, 0)} == {25}


def test_buffer_memory_bounds_what_lingers(broker, new_topic):
    """With a long linger and many partitions, rows waiting in the partition buffers stay
    under kafka.buffer.memory: past it the fullest buffers are sent at once (whole)."""
    topic = new_topic(partitions=12)
    limit = 20_000
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "topic": topic,
            "kafka.linger.ms": "60000",
            "kafka.buffer.memory": str(limit),
        }
    )
    table = arrow_rows(
        3000, value_size=40, partition=pa.array([i % 12 for i in range(3000)], pa.int32())
    )
    writer = TaskWriter(opts, plan_of(table), task=0)
    try:
        waiting = []
        for batch in table.to_batches(max_chunksize=200):  # ~11 KB of rows each
            writer.write_batch(batch)
            waiting.append(writer.batches.buffered_bytes)
            assert writer.batches.buffered_bytes == sum(
                b.bytes for b in writer.batches.buffers.values()
            )
        assert max(waiting) <= limit
        sent_early = writer.producer.stats.requests
        assert sent_early > 0, "rows went out before the end of the task"
        message = writer.finish()
    finally:
        writer.close()
    assert message.records == 3000
    for partition in range(12):
        assert (
            sum(c for _s, _a, c in batch_headers(broker.bootstrap_servers, topic, partition)) == 250
        )


def test_incompressible_batches_stay_within_max_request_size(broker, new_topic):
    """Random bytes grow a little in a codec: a batch filled up to the limit before
    compression is split rather than sent too large. Records of ~25 KB, 4 to a 100 KB
    batch; around the size where 4 just fit, the codec's framing tips some over."""
    limit = 100_000
    rnd = np.random.default_rng(4)
    halved = 0
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        topic = new_topic()
        opts = parse_write_options(
            {
                "kafka.bootstrap.servers": broker.bootstrap_servers,
                "topic": topic,
                "kafka.compression.type": codec,
                "kafka.batch.size": str(limit),
                "kafka.max.request.size": str(limit),
            }
        )
        sent = []
        for value_size in range(24_948, 24_972, 4):
            values = [rnd.bytes(value_size) for _ in range(8)]
            write_batches(
                opts, ColumnPlan(value=0), pa.table({"value": values}).to_batches(), task=0
            )
            sent += values
        batches = batch_headers(broker.bootstrap_servers, topic, 0)
        assert all(size <= limit for size, _a, _c in batches), (codec, batches)
        halved += sum(1 for _s, _a, count in batches if count < 4)
        got = [m.value for m in consume_confluent(broker.bootstrap_servers, topic, timeout=30)]
        assert got == sent
    assert halved > 0


@pytest.mark.parametrize("acks", ["0", "1"])
def test_acks_0_and_1(broker, new_topic, acks):
    topic = new_topic(partitions=3)
    opts = parse_write_options(
        {"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": topic, "kafka.acks": acks}
    )
    assert not opts.idempotent
    table = arrow_rows(3000, key=pa.array([b"k%d" % (i % 7) for i in range(3000)]))
    message = write_batches(opts, plan_of(table), table.to_batches(max_chunksize=1000), task=0)
    assert message.records == 3000
    offsets_known = {first >= 0 for _t, _p, _n, first, _last in message.partitions}
    assert offsets_known == ({False} if acks == "0" else {True})
    # With acks=0 nothing says when the broker has appended the records: a reader that
    # comes too early sees end-of-partition before all of them. Look again until then.
    deadline = time.monotonic() + 30
    while True:
        msgs = consume_confluent(broker.bootstrap_servers, topic, timeout=30)
        if len(msgs) >= 3000 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(m.value for m in msgs) == sorted(table.column("value").to_pylist())


def test_null_keys_are_sticky(broker, new_topic):
    topic = new_topic(partitions=4)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "topic": topic,
            "kafka.batch.size": "2000",
        }
    )
    table = arrow_rows(1000, value_size=40)
    write_batches(opts, plan_of(table), table.to_batches(max_chunksize=300), task=0)
    msgs = consume_confluent(broker.bootstrap_servers, topic, timeout=30)
    partition_of = {int(m.value[:8]): m.partition for m in msgs}
    sequence = [partition_of[i] for i in range(1000)]
    runs = [1]
    for a, b in pairwise(sequence):
        if a == b:
            runs[-1] += 1
        else:
            runs.append(1)
    # ~48 bytes a record, a new partition after ~2000 bytes: runs of ~40 records
    assert len(set(sequence)) == 4
    assert all(35 <= r <= 45 for r in runs[:-1]), runs
    # and each partition's records are in input order
    for p in range(4):
        ids = [int(m.value[:8]) for m in msgs if m.partition == p]
        assert ids == sorted(ids)


# --- retries, idempotence, faults ----------------------------------------------------------


def test_fault_proxy_drops_after_the_broker_appended(broker, new_topic):
    """Control experiment: without idempotence, a lost Produce answer duplicates records --
    so the proxy really drops answers to appended batches."""
    topic = new_topic(partitions=3)
    table = arrow_rows(20000, key=pa.array([b"k%d" % i for i in range(20000)]))
    with FaultProxy(broker.bootstrap_servers) as proxy:
        proxy.drop_produce_replies(count=2, skip=1)
        opts = parse_write_options(
            {
                "kafka.bootstrap.servers": proxy.bootstrap_servers,
                "topic": topic,
                "kafka.batch.size": "16384",
                "kafka.enable.idempotence": "false",
            }
        )
        message = write_batches(opts, plan_of(table), table.to_batches(max_chunksize=5000), task=0)
        assert proxy.counters["dropped_produce_replies"] == 2
    assert message.retries > 0
    values = [m.value for m in consume_confluent(broker.bootstrap_servers, topic, timeout=30)]
    assert set(values) == set(table.column("value").to_pylist())
    assert len(values) > 20000


def mock_topic(mock_cluster, partitions):
    name = mock_cluster.unique_topic("w")
    mock_cluster.create_topic(name, partitions=partitions)
    return name


@pytest.fixture
def injected_errors(mock_cluster):
    """``inject(*codes)``: the mock answers the next Produce requests with these errors.
    Whatever a test leaves unused is consumed afterwards (the queue is cluster-wide)."""
    pushed = []

    def inject(*codes):
        pushed.extend(codes)
        mock_cluster.push_request_errors(PRODUCE, *codes)

    yield inject
    if pushed:
        topic = mock_topic(mock_cluster, 1)
        client = KafkaClient(mock_cluster.bootstrap_servers)
        try:
            conn = client.connection(client.leader_for(topic, 0))
            for _ in range(len(pushed) + 1):
                response = conn.request(
                    m.PRODUCE,
                    {
                        "transactional_id": None,
                        "acks": 1,
                        "timeout_ms": 1000,
                        "topic_data": [
                            {
                                "name": topic,
                                "partition_data": [
                                    {
                                        "index": 0,
                                        "records": encode_record_batch(keys=None, values=[b"x"]),
                                    }
                                ],
                            }
                        ],
                    },
                )
                if response["responses"][0]["partition_responses"][0]["error_code"] == 0:
                    break
        finally:
            client.close()


def test_retriable_errors_are_retried(mock_cluster, injected_errors):
    topic = mock_topic(mock_cluster, 3)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": mock_cluster.bootstrap_servers,
            "topic": topic,
            "kafka.retry.backoff.ms": "10",
        }
    )
    table = arrow_rows(3000, key=pa.array([b"k%d" % i for i in range(3000)]))
    # NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS on the first answers
    injected_errors(6, 7, 19, 6)
    message = write_batches(opts, plan_of(table), table.to_batches(max_chunksize=1000), task=0)
    assert message.retries >= 4
    msgs = consume_confluent(mock_cluster.bootstrap_servers, topic, timeout=30)
    assert sorted(m.value for m in msgs) == sorted(table.column("value").to_pylist())


@pytest.mark.parametrize(
    "code,message",
    [
        (
            29,
            r"TOPIC_AUTHORIZATION_FAILED.*topic '{topic}' partition \d, 1000 rows of Spark "
            r"partition 4's input between row 0 and 99\d",
        ),
        (
            10,
            r"MESSAGE_TOO_LARGE.*topic '{topic}' partition 0.*the batch is \d+ bytes with "
            r"\d+ records, more than the broker accepts: the topic's max.message.bytes \(.*"
            r"1048588 by default\); lower 'kafka.batch.size' or raise that limit",
        ),
        (
            18,
            r"RECORD_LIST_TOO_LARGE.*topic '{topic}' partition 0.*the batch is \d+ bytes with "
            r"\d+ records, more than the broker accepts: the topic's segment.bytes",
        ),
        (45, r"OUT_OF_ORDER_SEQUENCE_NUMBER.*topic '{topic}' partition 0"),
    ],
)
def test_fatal_errors_name_topic_partition_and_rows(mock_cluster, injected_errors, code, message):
    topic = mock_topic(mock_cluster, 1)
    opts = parse_write_options(
        {"kafka.bootstrap.servers": mock_cluster.bootstrap_servers, "topic": topic}
    )
    table = arrow_rows(1000)
    injected_errors(code)
    with pytest.raises(ProduceError, match=message.format(topic=topic)) as failure:
        write_batches(opts, plan_of(table), table.to_batches(), task=4)
    assert (failure.value.topic, failure.value.partition) == (topic, 0)


def test_a_record_the_broker_refuses_as_too_large_fails_the_write(mock_cluster, injected_errors):
    """Neither test broker enforces a message size (Tansu 0.6 ignores max.message.bytes,
    the mock has none: both took 20 MiB records), so the mock's injected MESSAGE_TOO_LARGE
    stands in for the broker's limit: the write fails, naming topic, partition, the
    record's size and the limit, and reports no success."""
    topic = mock_topic(mock_cluster, 1)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": mock_cluster.bootstrap_servers,
            "topic": topic,
            "kafka.max.request.size": str(4 << 20),
        }
    )
    table = pa.table({"value": pa.array([b"x" * (2 << 20)])})
    injected_errors(10)
    with pytest.raises(
        ProduceError,
        match=rf"MESSAGE_TOO_LARGE.*topic '{topic}' partition 0.*"
        r"the record is 20972\d\d bytes as a record batch, "
        r"more than the broker accepts: the topic's "
        r"max.message.bytes",
    ) as failure:
        write_batches(opts, plan_of(table), table.to_batches(), task=0)
    assert (failure.value.topic, failure.value.partition) == (topic, 0)


def test_delivery_timeout_bounds_retries(mock_cluster, injected_errors):
    topic = mock_topic(mock_cluster, 1)
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": mock_cluster.bootstrap_servers,
            "topic": topic,
            "kafka.retry.backoff.ms": "50",
            "kafka.request.timeout.ms": "500",
            "kafka.delivery.timeout.ms": "700",
        }
    )
    injected_errors(*([6] * 40))
    started = time.monotonic()
    with pytest.raises(
        ProduceError,
        match=r"not acknowledged within "
        r"'kafka.delivery.timeout.ms' \(700 ms",
    ):
        write_batches(opts, plan_of(arrow_rows(10)), arrow_rows(10).to_batches(), task=0)
    assert time.monotonic() - started < 5


def test_leader_moves_and_broker_restarts_during_a_write(mock_cluster):
    topic = mock_topic(mock_cluster, 3)
    # linger 0: each write_batch sends its rows, so the events below happen mid-write
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": mock_cluster.bootstrap_servers,
            "topic": topic,
            "kafka.retry.backoff.ms": "20",
            "kafka.linger.ms": "0",
        }
    )
    table = arrow_rows(9000, key=pa.array([b"k%d" % i for i in range(9000)]))
    batches = table.to_batches(max_chunksize=3000)
    task = TaskWriter(opts, plan_of(table), task=0)
    try:
        task.write_batch(batches[0])
        task.producer.flush()
        leaders = {p: mock_cluster.topic_metadata(topic)[p][0] for p in range(3)}
        for p, leader in leaders.items():  # every partition to another broker
            mock_cluster.set_leader(topic, p, leader % 3 + 1)
        task.write_batch(batches[1])
        task.producer.flush()
        assert task.producer.stats.errors.get("NOT_LEADER_OR_FOLLOWER", 0) >= 1
        # a broker goes away mid-write and comes back a little later
        down = mock_cluster.topic_metadata(topic)[0][0]
        mock_cluster.broker_down(down)
        threading.Timer(1.0, mock_cluster.broker_up, args=(down,)).start()
        task.write_batch(batches[2])
        message = task.finish()
    finally:
        task.close()
    assert message.records == 9000
    msgs = consume_confluent(mock_cluster.bootstrap_servers, topic, timeout=30)
    assert sorted(m.value for m in msgs) == sorted(table.column("value").to_pylist())
    assert sorted(message.partitions) == [
        (topic, p, n, 0, n - 1)
        for p, n in sorted(collections.Counter(m.partition for m in msgs).items())
    ]


# --- what the brokers do with idempotent batches (pins tests/README.md deviations) -----------


def raw_produce(conn, topic, batch):
    response = conn.request(
        m.PRODUCE,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    part = response["responses"][0]["partition_responses"][0]
    return part["error_code"], part["base_offset"]


@pytest.fixture
def idempotent_batches(broker, new_topic):
    """(connection to the leader, topic, producer id, epoch, batch(sequence) -> bytes)."""
    topic = new_topic()
    client = KafkaClient(broker.bootstrap_servers)
    producer_id, epoch = client.init_producer_id()

    def batch(sequence, count=3):
        return encode_record_batch(
            keys=None,
            values=[b"r%d" % i for i in range(count)],
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
        )

    yield client.connection(client.leader_for(topic, 0)), topic, batch
    client.close()


def test_resent_idempotent_batch_is_not_appended_again(broker, idempotent_batches, request):
    quirk(
        request,
        broker,
        ["mock"],
        "sequence numbers are only checked for transactional "
        "producers (tests/README.md, mock deviation 8)",
    )
    conn, topic, batch = idempotent_batches
    assert raw_produce(conn, topic, batch(0)) == (0, 0)
    raw_produce(conn, topic, batch(0))  # a retry of the same batch
    assert raw_produce(conn, topic, batch(3)) == (0, 3)  # appended right after the first
    assert raw_produce(conn, topic, batch(10))[0] == 45  # a gap: OUT_OF_ORDER_SEQUENCE


@pytest.mark.parametrize(
    "broker_name, refusal",
    [
        # Apache Kafka refuses sequence 0 after 0-2 as out of order
        ("kafka", r"OUT_OF_ORDER_SEQUENCE_NUMBER"),
        # Tansu answers DUPLICATE_SEQUENCE_NUMBER: a duplicate of records the producer never sent
        (
            "tansu",
            r"DUPLICATE_SEQUENCE_NUMBER \(46\) to the first attempt of 2 records .*never sent "
            r"before",
        ),
    ],
)
def test_duplicate_answer_to_a_first_attempt_fails_instead_of_counting_records(
    _brokers, broker_name, refusal
):
    """DUPLICATE_SEQUENCE_NUMBER means "written before" only for a batch sent before. Two
    producers sharing one producer id (the mock does not check sequences, mock deviation 8):
    the broker refuses the second one's first batch. The write must fail, not count those
    records as written."""
    from kafka_ds.client.producer import Producer

    kafka_broker = _brokers.get(broker_name)
    topic = kafka_broker.unique_topic("dup")
    kafka_broker.create_topic(topic, partitions=1)
    client = KafkaClient(kafka_broker.bootstrap_servers)
    try:
        first, second = Producer(client), Producer(client)
        first.start()
        # The same producer id and epoch, with sequences of its own starting at 0.
        second.use_transaction(first.producer_id, first.producer_epoch)

        def send(producer, values):
            producer_id, epoch, sequence = producer.batch_identity(topic, 0, len(values))
            producer.send(
                topic,
                0,
                encode_record_batch(
                    keys=None,
                    values=values,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    base_sequence=sequence,
                ),
                len(values),
                base_sequence=sequence,
            )
            producer.flush()

        send(first, [b"a", b"b", b"c"])
        with pytest.raises(ProduceError, match=refusal):
            send(second, [b"x", b"y"])
        assert second.results() == {}
        assert client.fetch_watermarks({(topic, 0): 0})[(topic, 0)][0] == 3
    finally:
        client.close()
        kafka_broker.delete_topic(topic)


def test_resent_idempotent_batch_is_answered_with_its_offset(broker, idempotent_batches, request):
    """Kafka answers a duplicate of one of the last 5 batches with NONE and the offset the
    batch got the first time; kafka_ds also accepts DUPLICATE_SEQUENCE_NUMBER (46)."""
    quirk(request, broker, ["mock"], "appends the batch again (tests/README.md, mock deviation 8)")
    quirk(
        request,
        broker,
        ["tansu"],
        "answers DUPLICATE_SEQUENCE_NUMBER with base offset -1 "
        "(tests/README.md, Tansu deviation 12)",
    )
    conn, topic, batch = idempotent_batches
    assert raw_produce(conn, topic, batch(0)) == (0, 0)
    assert raw_produce(conn, topic, batch(0)) == (0, 0)
