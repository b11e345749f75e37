"""Smoke tests of the test brokers themselves (tests/support/brokers.py,
tests/conftest.py).

Each test states Apache Kafka behaviour. Where a broker is known to deviate
(tests/README.md, "Known broker deviations"), the test is a strict xfail for
that broker only, so a fixed broker shows up as XPASS(strict) = failure.
"""

import os
import signal
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.errors import KafkaTimeoutError

from tests.support.brokers import (
    BrokerError,
    MockCluster,
    TansuBroker,
    api_versions,
    consume_confluent,
    produce_confluent,
    produce_kafka_python,
)

# every broker the suite starts is proven here, Tansu and Apache Kafka 3.9 included
pytestmark = pytest.mark.smoke

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CREATE_TIME = 1  # confluent_kafka.TIMESTAMP_CREATE_TIME


def quirk(request, broker, names, reason, raises=AssertionError):
    """Strict xfail for the named brokers only, and only for the expected exception."""
    if broker.name in names:
        request.applymarker(
            pytest.mark.xfail(strict=True, raises=raises, reason=f"{broker.name}: {reason}")
        )


def _records(n, partitions):
    out = []
    for i in range(n):
        out.append(
            {
                "key": None if i == 3 else b"k%d" % i,
                "value": None if i == 4 else (b"value-%d-" % i) * (i + 1),
                "headers": [("h1", b"x%d" % i), ("empty", b""), ("null", None)] if i % 2 else [],
                "partition": i % partitions,
                "timestamp_ms": 1_700_000_000_000 + i,
            }
        )
    return out


def _check_roundtrip(sent, delivered, got):
    assert len(got) == len(sent)
    assert sorted(delivered) == [(m.partition, m.offset) for m in got]
    by_pos = {(m.partition, m.offset): m for m in got}
    # per partition, offsets are dense from 0 (fresh topic)
    for p in {m.partition for m in got}:
        assert [m.offset for m in got if m.partition == p] == list(
            range(sum(1 for m in got if m.partition == p))
        )
    for rec, pos in zip(sent, delivered, strict=True):
        m = by_pos[pos]
        assert m.partition == rec["partition"]
        assert m.key == rec["key"]
        assert m.value == rec["value"]
        assert m.headers == rec["headers"]
        assert m.timestamp == (CREATE_TIME, rec["timestamp_ms"])


def _watermarks(bootstrap, topic, partition=0):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka_ds-wm", "log_level": 3})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


# ---------------------------------------------------------------- topics


def test_create_topic_three_partitions(broker, new_topic):
    topic = new_topic(3)
    md = broker.topic_metadata(topic)
    assert sorted(md) == [0, 1, 2]
    assert all(leader in broker.broker_ids for leader, _ in md.values())


def test_delete_topic(broker):
    topic = broker.unique_topic("del")
    broker.create_topic(topic, partitions=2)
    assert topic in broker.list_topics()
    broker.delete_topic(topic)  # waits until metadata no longer lists it
    assert topic not in broker.list_topics()


def test_metadata_without_auto_create_does_not_create(broker):
    topic = broker.unique_topic("absent")
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "kafka_ds-md",
            "allow.auto.create.topics": False,
            "log_level": 3,
        }
    )
    try:
        md = c.list_topics(topic, timeout=10).topics[topic]
    finally:
        c.close()
    assert md.error is not None and md.error.code() == 3  # UNKNOWN_TOPIC_OR_PART
    assert topic not in broker.list_topics()


def test_api_versions_cover_connector_needs(broker):
    av = api_versions(broker.bootstrap_servers)
    assert av == broker.api_versions()
    # each range holds the version the connector needs at least (Kafka 4 dropped the oldest
    # versions, KIP-896: Produce starts at 3, Fetch at 4, ListOffsets at 1)
    for key, needed in {0: 3, 1: 4, 2: 1, 3: 1, 18: 0}.items():
        lo, hi = av[key]
        assert lo <= needed <= hi, (key, av[key])


# ---------------------------------------------------------------- mock only


def test_mock_leaders_spread(mock_cluster):
    topic = mock_cluster.create_topic(mock_cluster.unique_topic("spread"), partitions=3)
    try:
        leaders = [leader for leader, _ in mock_cluster.topic_metadata(topic).values()]
        assert sorted(leaders) == [1, 2, 3]
    finally:
        mock_cluster.delete_topic(topic)


def test_mock_set_leader_and_clients_follow(mock_cluster):
    topic = mock_cluster.create_topic(mock_cluster.unique_topic("move"), partitions=1)
    try:
        old = mock_cluster.topic_metadata(topic)[0][0]
        new = old % 3 + 1
        produce_confluent(mock_cluster.bootstrap_servers, topic, [b"before"], partition=0)
        mock_cluster.set_leader(topic, 0, new)
        assert mock_cluster.topic_metadata(topic)[0][0] == new
        produce_confluent(mock_cluster.bootstrap_servers, topic, [b"after"], partition=0)
        got = consume_confluent(mock_cluster.bootstrap_servers, topic, expected=2)
        assert [(m.offset, m.value) for m in got] == [(0, b"before"), (1, b"after")]
    finally:
        mock_cluster.delete_topic(topic)


def test_mock_command_errors_are_raised(mock_cluster):
    with pytest.raises(BrokerError, match="Unknown topic"):
        mock_cluster.delete_topic("no-such-topic-" + mock_cluster.unique_topic())


def test_own_mock_cluster_starts_and_stops_cleanly(enabled_broker_names):
    if "mock" not in enabled_broker_names:
        pytest.skip("mock broker disabled")
    m = MockCluster(num_brokers=1)
    try:
        assert m.is_alive() and len(m.bootstrap_servers.split(",")) == 1
        m.create_topic("x", 2)
        assert sorted(m.topic_metadata("x")) == [0, 1]
    finally:
        m.stop()
    assert not m.is_alive() and m._proc.returncode == 0


def _gone(pid, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_mock_child_exits_when_parent_pipe_closes(enabled_broker_names):
    if "mock" not in enabled_broker_names:
        pytest.skip("mock broker disabled")
    m = MockCluster(num_brokers=1)
    try:
        m._proc.stdin.close()  # what the kernel does when pytest dies
        assert m._proc.wait(10) == 0
    finally:
        m.stop()


@pytest.mark.parametrize("how", ["stdin-eof", "guard-sigkill"])
def test_tansu_dies_with_its_guard(enabled_broker_names, how):
    if "tansu" not in enabled_broker_names:
        pytest.skip("tansu broker disabled")
    t = TansuBroker()
    try:
        assert t.tansu_pid and not _gone(t.tansu_pid, 0.1)
        if how == "stdin-eof":
            t._proc.stdin.close()
        else:
            t._proc.send_signal(signal.SIGKILL)  # tansu has PR_SET_PDEATHSIG
        t._proc.wait(10)
        assert _gone(t.tansu_pid)
    finally:
        t.stop()


@pytest.mark.parametrize("stop_with", [signal.SIGTERM, signal.SIGINT])
def test_apache_kafka_launcher_prints_bootstrap_and_leaves_nothing(enabled_broker_names, stop_with):
    """``python -m tests.support.apache_kafka``: one ``bootstrap.servers=`` line of a broker
    that answers, then on SIGTERM or Ctrl-C (SIGINT) no JVM and no directory left."""
    import re
    import subprocess
    import sys

    from tests.support.apache_kafka import PROJECT_ROOT
    from tests.support.procfs import cmdline, pids

    if "kafka" not in enabled_broker_names:
        pytest.skip("Apache Kafka disabled")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_DS_SHARED")}
    launcher = subprocess.Popen(
        [sys.executable, "-m", "tests.support.apache_kafka"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = launcher.stdout.readline().strip()
        match = re.fullmatch(r"bootstrap\.servers=(127\.0\.0\.1:\d+)", line)
        assert match, (line, launcher.stderr.read() if launcher.poll() is not None else "")
        assert 18 in api_versions(match.group(1))  # an answering broker
        port = match.group(1).rsplit(":", 1)[1]
        jvms = {}
        for pid in pids():
            try:
                command = cmdline(pid)
            except OSError:
                continue
            if "kafka.Kafka" in command and "guard" not in command.split()[:3]:
                properties = command.split()[-1]
                with open(properties) as config:
                    if f"127.0.0.1:{port}" in config.read():
                        jvms[pid] = properties
        assert len(jvms) == 1, "the broker's JVM is not running"
        data = next(iter(jvms.values())).rsplit("/node-", 1)[0]
        assert os.path.isdir(data)
        launcher.send_signal(stop_with)
        assert launcher.wait(60) == 0
        assert all(_gone(pid) for pid in jvms)
        assert not os.path.exists(data)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(10)


# ---------------------------------------------------------------- produce / consume


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_roundtrip(broker, new_topic, codec):
    topic = new_topic(3)
    sent = _records(12, 3)
    delivered = produce_confluent(broker.bootstrap_servers, topic, sent, compression=codec)
    got = consume_confluent(broker.bootstrap_servers, topic, expected=len(sent))
    _check_roundtrip(sent, delivered, got)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_roundtrip(broker, new_topic, codec):
    topic = new_topic(3)
    sent = _records(12, 3)
    for r in sent:  # kafka-python cannot send a null header value
        r["headers"] = [(k, v) for k, v in r["headers"] if v is not None]
    delivered = produce_kafka_python(broker.bootstrap_servers, topic, sent, compression=codec)
    got = consume_confluent(broker.bootstrap_servers, topic, expected=len(sent))
    _check_roundtrip(sent, delivered, got)


def test_kafka_python_default_version_negotiation(request, broker, new_topic):
    quirk(
        request,
        broker,
        {"mock"},
        "answers ApiVersions v3/v4 with a body kafka-python 3.x cannot decode",
        raises=KafkaTimeoutError,
    )
    topic = new_topic(1)
    delivered = produce_kafka_python(
        broker.bootstrap_servers, topic, [b"v"], api_version=None, timeout=3
    )
    assert delivered == [(0, 0)]


# ---------------------------------------------------------------- offsets


def test_latest_offset_after_multi_record_batch(request, broker, new_topic):
    quirk(request, broker, {"tansu"}, "ListOffsets(latest) = base offset of the last batch + 1")
    topic = new_topic(1)
    delivered = produce_confluent(
        broker.bootstrap_servers,
        topic,
        [b"a", b"b", b"c", b"d", b"e"],
        partition=0,
        **{"linger.ms": 200},
    )
    assert delivered == [(0, i) for i in range(5)]
    assert _watermarks(broker.bootstrap_servers, topic) == (0, 5)


def test_latest_offset_after_single_record_batches(broker, new_topic):
    topic = new_topic(1)
    for _ in range(3):
        produce_confluent(broker.bootstrap_servers, topic, [b"x"], partition=0)
    assert _watermarks(broker.bootstrap_servers, topic) == (0, 3)


def test_offsets_for_times(request, broker, new_topic):
    quirk(request, broker, {"mock"}, "ListOffsets by timestamp not implemented (always -1)")
    quirk(request, broker, {"tansu"}, "ListOffsets by timestamp always returns offset 0")
    topic = new_topic(1)
    for ts in (1000, 2000, 3000):
        produce_confluent(
            broker.bootstrap_servers, topic, [{"value": b"x", "timestamp_ms": ts}], partition=0
        )
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "kafka_ds-oft", "log_level": 3}
    )
    try:
        # one partition per call: librdkafka answers a list naming a partition several times
        # with one look-up (the last), which only a broker that implements it shows
        res = [
            c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)[0]
            for ts in (500, 1500, 3000, 3001)
        ]
    finally:
        c.close()
    assert [r.offset for r in res] == [0, 1, 2, -1]


def test_partition_retains_12_mib(request, broker, new_topic):
    quirk(request, broker, {"mock"}, "keeps only ~5 MiB per partition, log start offset advances")
    topic = new_topic(1)
    value = b"x" * (100 * 1024)
    delivered = produce_confluent(broker.bootstrap_servers, topic, [value] * 120, partition=0)
    assert delivered[-1] == (0, 119)
    assert _watermarks(broker.bootstrap_servers, topic)[0] == 0
    first = consume_confluent(broker.bootstrap_servers, topic, partitions=[0], expected=1)
    assert first and first[0].offset == 0
