"""Option parsing and range planning: pure functions, no broker."""

import logging
import pickle

import pytest

from kafka_ds.client import KafkaClient
from kafka_ds.client.config import ClientConfig, ProducerConfig
from kafka_ds.client.connection import parse_bootstrap
from kafka_ds.errors import ConfigurationError
from kafka_ds.options import ReadOptions, parse_read_options, parse_write_options
from kafka_ds.options.core import (
    BATCH,
    INT32_MAX,
    READ,
    STREAM,
    WRITE,
    Choice,
    boolean,
    duration_ms,
    integer,
    parse_duration_ms,
)
from kafka_ds.options.registry import FORBIDDEN, OPTIONS, default_of
from kafka_ds.options.tables import main, options_markdown, options_section, security_section
from kafka_ds.read.planner import split_ranges
from kafka_ds.read.ranges import OffsetRange

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def opts(**kw):
    return {**BS, **{k.replace("__", "."): v for k, v in kw.items()}}


def test_defaults_batch():
    o = parse_read_options(opts(subscribe="a,b"), streaming=False)
    assert o.subscription.topics == ("a", "b")
    assert o.starting.kind == "earliest" and o.ending.kind == "latest"
    assert o.fail_on_data_loss is True and o.include_headers is False


def test_defaults_streaming_start_latest():
    o = parse_read_options(opts(subscribe="a"), streaming=True)
    assert o.starting.kind == "latest"


def test_keys_are_case_insensitive():
    o = parse_read_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "SubScribe": "t",
            "INCLUDEHEADERS": "TRUE",
            "failondataloss": "false",
        },
        streaming=False,
    )
    assert o.include_headers and not o.fail_on_data_loss and o.subscription.topics == ("t",)


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"subscribe": "t"}, "kafka.bootstrap.servers"),
        ({**BS}, "One of the following options must be specified for Kafka source"),
        ({**BS, "subscribe": "t", "assign": '{"t":[0]}'}, "got subscribe, assign"),
        (
            {**BS, "subscribe": " , "},
            "No topics to subscribe to as specified value for option 'subscribe'",
        ),
        ({**BS, "subscribePattern": "("}, "Option 'subscribePattern' is not a valid regex"),
        (
            {**BS, "assign": "[1,2]"},
            "No topicpartitions to assign as specified value for option 'assign'",
        ),
        ({**BS, "assign": "{bad json"}, "Option 'assign' is not valid JSON"),
        ({**BS, "subscribe": "t", "startingOffsets": "latest"}, "cannot be 'latest' for a batch"),
        ({**BS, "subscribe": "t", "endingOffsets": "earliest"}, "cannot be 'earliest'"),
        (
            {**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'},
            "can't be latest for batch queries on Kafka",
        ),
        (
            {**BS, "subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'},
            "can't be earliest for batch queries on Kafka",
        ),
        ({**BS, "subscribe": "t", "startingOffsets": "middle"}, "Option 'startingOffsets' must be"),
        ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({**BS, "subscribe": "t", "kafka.key.deserializer": "x"}, "kafka.key.deserializer"),
        ({**BS, "subscribe": "t", "kafka.value.deserializer": "x"}, "kafka.value.deserializer"),
        ({**BS, "subscribe": "t", "kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
        ({**BS, "subscribe": "t", "kafka.interceptor.classes": "x"}, "kafka.interceptor.classes"),
        (
            {**BS, "subscribe": "t", "minPartitions": "0"},
            "Option 'minPartitions' must be at least 1",
        ),
        (
            {**BS, "subscribe": "t", "maxRecordsPerPartition": "x"},
            "Option 'maxRecordsPerPartition' must be an integer",
        ),
        (
            {**BS, "subscribe": "t", "includeHeaders": "yes"},
            "Option 'includeHeaders' must be 'true' or 'false'",
        ),
        (
            {**BS, "subscribe": "t", "startingOffsetsByTimestampStrategy": "x"},
            "startingOffsetsByTimestampStrategy",
        ),
        ({**BS, "subscribe": "t", "kafka.isolation.level": "x"}, "kafka.isolation.level"),
        (
            {**BS, "subscribe": "t", "kafka.request.timeout.ms": "30s"},
            "Option 'kafka.request.timeout.ms' must be an integer, got '30s'",
        ),
        (
            {**BS, "assign": '{"t":[0,1]}', "startingOffsets": '{"t":{"0":5}}'},
            "every assigned partition",
        ),
        ({**BS, "subscribe": "t", "startingTimestamp": "-5"}, "Option 'startingTimestamp'"),
        ({"kafka.bootstrap.servers": "nohost", "subscribe": "t"}, "is not host:port"),
    ],
)
def test_bad_batch_options_name_the_option(options, fragment):
    with pytest.raises(ConfigurationError) as info:
        parse_read_options(options, streaming=False)
    assert fragment in str(info.value)


def test_streaming_rejects_ending_offsets():
    with pytest.raises(ConfigurationError, match="endingOffsets.*batch queries only"):
        parse_read_options(opts(subscribe="t", endingOffsets="latest"), streaming=True)


def test_timestamp_precedence():
    o = parse_read_options(
        opts(
            subscribe="t",
            startingOffsets="earliest",
            startingOffsetsByTimestamp='{"t":{"0":5}}',
            startingTimestamp="7",
        ),
        streaming=False,
    )
    assert o.starting.kind == "global_timestamp" and o.starting.timestamp == 7
    o = parse_read_options(
        opts(subscribe="t", startingOffsets="earliest", startingOffsetsByTimestamp='{"t":{"0":5}}'),
        streaming=False,
    )
    assert o.starting.kind == "timestamp" and o.starting.as_dict() == {("t", 0): 5}


def test_specific_offsets_sorted():
    o = parse_read_options(
        opts(subscribe="t,u", startingOffsets='{"u":{"1":3},"t":{"0":-2}}'), streaming=False
    )
    assert o.starting.offsets == ((("t", 0), -2), (("u", 1), 3))


def test_duration():
    assert parse_duration_ms({"x": "15m"}, "x", 0) == 900000
    assert parse_duration_ms({"x": "250ms"}, "x", 0) == 250
    assert parse_duration_ms({"x": "2s"}, "x", 0) == 2000
    assert parse_duration_ms({}, "x", 42) == 42
    with pytest.raises(ConfigurationError, match="'x'"):
        parse_duration_ms({"x": "soon"}, "x", 0)


# --- the declarations: one per option, driving parsing, checks and the README ------------


def parse_for(modes, options):
    """Parse ``options`` as the first query kind in ``modes`` (write, batch or streaming)."""
    options = {**BS, "subscribe": "t", **options} if WRITE not in modes else {**BS, **options}
    if WRITE in modes:
        return parse_write_options(options)
    return parse_read_options(options, streaming=BATCH not in modes)


TYPED = [
    o for o in OPTIONS if o.parse in (integer, boolean, duration_ms) or isinstance(o.parse, Choice)
]


def test_declarations_are_unique_and_typed():
    assert len(OPTIONS) == len({o.name.lower() for o in OPTIONS})
    fields = [o.field for o in OPTIONS if o.field]
    assert len(fields) == len(set(fields))
    # every kafka.* option the connector reads (it fills a field) has a typed parser, or
    # is free text by nature (client id, group id)
    kafka = [o for o in OPTIONS if o.name.startswith("kafka.") and o.field]
    assert {o.name for o in kafka if o not in TYPED} == {"kafka.client.id", "kafka.group.id"}
    assert len(TYPED) >= 25


@pytest.mark.parametrize("option", TYPED, ids=[o.name for o in TYPED])
def test_every_typed_option_rejects_an_ill_typed_value_naming_itself(option):
    with pytest.raises(ConfigurationError) as info:
        parse_for(
            option.applies, {option.name: "30s" if option.parse is not duration_ms else "soon"}
        )
    message = str(info.value)
    assert f"Option '{option.name}' must be " in message
    if option.name.startswith("kafka."):
        assert f'.option("{option.name}", "' in message  # ... and how to write it


BOUNDED = [o for o in OPTIONS if o.minimum is not None or o.maximum is not None]


@pytest.mark.parametrize("option", BOUNDED, ids=[o.name for o in BOUNDED])
def test_bounds(option):
    if option.minimum is not None:
        with pytest.raises(
            ConfigurationError,
            match=rf"'{option.name}' must be at least "
            rf"{option.minimum}, got {option.minimum - 1}",
        ):
            parse_for(option.applies, {option.name: str(option.minimum - 1)})
    if option.maximum is not None:
        with pytest.raises(ConfigurationError, match=rf"'{option.name}' must be at most"):
            parse_for(option.applies, {option.name: str(option.maximum + 1)})
    edge = option.minimum if option.minimum is not None else option.maximum
    extra = {"kafka.enable.idempotence": "false"} if WRITE in option.applies else {}
    if option.name == "kafka.delivery.timeout.ms":  # >= linger + request timeout
        extra.update({"kafka.request.timeout.ms": "1", "kafka.linger.ms": "0"})
    parse_for(option.applies, {option.name: str(edge), **extra})  # the bound itself is fine
    if option.name.startswith("kafka.") and option.parse is integer:
        assert option.maximum == INT32_MAX


def test_defaults_are_stated_once_in_the_client_settings():
    read = parse_read_options({**BS, "subscribe": "t"}, streaming=False)
    write = parse_write_options(BS)
    assert read.client == ClientConfig()
    # A write's metadata and InitProducerId calls retry within the write's budget, and an
    # error at its end names the option that sets it.
    assert write.client == ClientConfig(
        default_api_timeout_ms=ProducerConfig().delivery_timeout_ms,
        api_timeout_option="kafka.delivery.timeout.ms",
    )
    assert write.producer == ProducerConfig()
    # the option objects' own defaults are the declared ones
    assert read == ReadOptions(
        read.bootstrap_servers, read.subscription, read.starting, read.ending
    )
    assert ClientConfig().client_id == "kafka-ds" == default_of("kafka.client.id")
    assert default_of("kafka.retries", READ) == ClientConfig().retries
    assert default_of("kafka.retries", frozenset({WRITE})) == ProducerConfig().retries
    assert default_of("kafka.acks", frozenset({WRITE})) == ProducerConfig().acks


def test_kafka_settings_reach_the_client_settings_built_on_the_driver():
    options = {
        "kafka.request.timeout.ms": "1234",
        "kafka.client.id": "me",
        "kafka.retries": "2",
        "kafka.retry.backoff.ms": "7",
        "kafka.metadata.max.age.ms": "60000",
        "kafka.socket.connection.setup.timeout.ms": "999",
    }
    read = parse_for(frozenset({STREAM}), options)
    assert read.client == ClientConfig(
        client_id="me",
        request_timeout_ms=1234,
        retries=2,
        retry_backoff_ms=7,
        metadata_max_age_ms=60000,
        connect_timeout_ms=999,
    )
    write = parse_write_options({**BS, **options})
    # A write's metadata calls retry within the write's budget: kafka.retries and
    # kafka.delivery.timeout.ms (kafka_ds/client/retry.py).
    assert write.client == ClientConfig(
        client_id="me",
        request_timeout_ms=1234,
        retries=2,
        retry_backoff_ms=7,
        metadata_max_age_ms=60000,
        connect_timeout_ms=999,
        default_api_timeout_ms=120000,
        api_timeout_option="kafka.delivery.timeout.ms",
    )
    assert (
        write.producer.request_timeout_ms,
        write.producer.retries,
        write.producer.retry_backoff_ms,
    ) == (1234, 2, 7)
    # What executors get is a pickled copy of the driver's objects, used as is.
    for opts in (read, write):
        copy = pickle.loads(pickle.dumps(opts))
        assert copy == opts and copy.client == opts.client
        with pytest.raises(AttributeError):
            copy.client.request_timeout_ms = 1  # frozen
    from kafka_ds.client import make_client

    client = make_client(pickle.loads(pickle.dumps(read)))
    assert client.config == read.client and client.bootstrap == [("127.0.0.1", 9092)]
    from kafka_ds.write.plan import ColumnPlan
    from kafka_ds.write.task import TaskWriter

    task = TaskWriter(
        pickle.loads(pickle.dumps(write)), ColumnPlan(names=("value",), value=0), task=0
    )
    try:
        assert task.client.config == write.client and task.producer.config == write.producer
    finally:
        task.close()
    from kafka_ds.stream import KafkaStreamReader

    assert KafkaStreamReader(read, {}).client_timeout_s() == 1.234


@pytest.mark.parametrize("forbidden", FORBIDDEN, ids=[f.name for f in FORBIDDEN])
def test_settings_spark_rejects_are_rejected(forbidden, caplog):
    for modes in (frozenset({BATCH}), frozenset({STREAM}), frozenset({WRITE})):
        if modes & forbidden.applies:
            # Spark's words name the setting without the "kafka." prefix; ours add the option.
            short = forbidden.name[len("kafka.") :]
            with pytest.raises(
                ConfigurationError,
                match=rf"Kafka option '{short}' is not "
                rf"supported.*\(option "
                rf"'{forbidden.name}'\): \w",
            ):
                parse_for(modes, {forbidden.name: "x"})
        else:  # a consumer setting on a write (or the reverse) is only unused
            with caplog.at_level(logging.WARNING, logger="kafka_ds.options"):
                parse_for(modes, {forbidden.name: "x"})
            assert forbidden.name in caplog.text


def test_unused_kafka_settings_are_accepted_and_named_in_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="kafka_ds.options"):
        o = parse_for(
            frozenset({BATCH}),
            {"kafka.session.timeout.ms": "x", "kafka.fetch.min.bytes": "1", "kafka.acks": "1"},
        )
    assert o.client == ClientConfig()
    [record] = [r for r in caplog.records if "does not use" in r.getMessage()]
    assert "kafka.acks, kafka.fetch.min.bytes, kafka.session.timeout.ms" in record.getMessage()


def test_options_of_other_queries_are_ignored_with_a_warning_like_spark(caplog):
    with caplog.at_level(logging.WARNING, logger="kafka_ds.options"):
        o = parse_for(
            frozenset({BATCH}),
            {"maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "x", "maxTriggerDelay": "1m"},
        )
    assert o.max_offsets_per_trigger is None
    for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        assert f"{name} option ignored in batch queries" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kafka_ds.options"):
        o = parse_for(frozenset({STREAM}), {"kafka.group.id": "g", "groupIdPrefix": "p"})
    assert o.group_id == "g"
    assert "groupIdPrefix will be ignored as option kafka.group.id has been set" in caplog.text


@pytest.mark.parametrize(
    "servers, parsed",
    [
        ("h:1", [("h", 1)]),
        (" a:9092 , b.example:19092,", [("a", 9092), ("b.example", 19092)]),
        ("[::1]:9092,[fe80::1%eth0]:1", [("::1", 9092), ("fe80::1%eth0", 1)]),
    ],
)
def test_bootstrap_one_parser(servers, parsed):
    assert parse_bootstrap(servers) == parsed
    assert KafkaClient(servers).bootstrap == parsed
    assert (
        parse_read_options(
            {"kafka.bootstrap.servers": servers, "subscribe": "t"}, streaming=None
        ).bootstrap_servers
        == servers.strip()
    )


@pytest.mark.parametrize(
    "servers", ["h", "h:", ":9092", "h:x", "h:0", "h:65536", "[::1:9092", "a:1,b"]
)
def test_bad_bootstrap_fails_the_same_on_driver_and_client(servers):
    with pytest.raises(ConfigurationError, match="'kafka.bootstrap.servers': .* is not host:port"):
        parse_write_options({"kafka.bootstrap.servers": servers})
    with pytest.raises(ConfigurationError, match="is not host:port"):
        KafkaClient(servers)
    with pytest.raises(ConfigurationError, match="'kafka.bootstrap.servers' must be set"):
        KafkaClient(" , ")


def test_option_tables_are_generated_from_the_declarations(capsys):
    """The docs' option page holds the tables made from the declarations (regenerating a
    stale one: tests/unit/test_docs.py), and python -m kafka_ds.options prints them."""
    import pathlib

    page = (pathlib.Path(__file__).parents[2] / "docs" / "options.md").read_text()
    assert options_section() in page, "regenerate with python docs/generate.py"
    assert options_markdown() in options_section()
    for option in OPTIONS:
        assert f"| `{option.name}` |" in page
    for forbidden in FORBIDDEN:
        assert f"| `{forbidden.name}` |" in page
    assert main([]) == 0
    printed = capsys.readouterr().out
    assert options_section() in printed and security_section() in printed


# --- splitting, as Spark's KafkaOffsetRangeCalculator does ------------------------------


def R(t, p, a, b):
    return OffsetRange(t, p, a, b)


def covered(ranges):
    out = {}
    for r in ranges:
        out.setdefault((r.topic, r.partition), []).append((r.start, r.end))
    return {k: sorted(v) for k, v in out.items()}


def test_split_default_one_per_partition_and_drops_empty():
    ranges = [R("t", 0, 0, 10), R("t", 1, 5, 5), R("t", 2, 3, 4)]
    assert split_ranges(ranges) == [R("t", 0, 0, 10), R("t", 2, 3, 4)]


def test_split_min_partitions_proportional():
    ranges = [R("t", 0, 0, 100), R("t", 1, 0, 10)]
    out = split_ranges(ranges, min_partitions=5)
    # Spark: the small range stays whole, the big one gets the remaining 4 parts.
    assert covered(out) == {("t", 0): [(0, 25), (25, 50), (50, 75), (75, 100)], ("t", 1): [(0, 10)]}


def test_split_min_partitions_already_enough():
    ranges = [R("t", 0, 0, 100), R("t", 1, 0, 10)]
    assert split_ranges(ranges, min_partitions=2) == ranges


def test_split_even_with_remainder():
    out = split_ranges([R("t", 0, 0, 10)], min_partitions=3)
    assert [(r.start, r.end) for r in out] == [(0, 3), (3, 6), (6, 10)]


def test_split_max_records():
    out = split_ranges([R("t", 0, 0, 10), R("t", 1, 0, 3)], None, 4)
    assert covered(out) == {("t", 0): [(0, 3), (3, 6), (6, 10)], ("t", 1): [(0, 3)]}
    assert all(r.size <= 4 for r in out)
