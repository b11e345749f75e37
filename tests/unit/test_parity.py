"""Drop-in parity with Spark's own Kafka source (issue 14), case by case: the cases decided
without a broker (range splitting, timestamps, option checks and their messages).

Expected values come from Spark's code and its test suites (KafkaOffsetRangeCalculatorSuite,
KafkaSourceProvider's messages, KafkaMicroBatchStream's AvailableNow checks). The cases on
the brokers: tests/integration/test_parity.py; in Spark: tests/spark/test_parity.py.
"""

import pyarrow as pa
import pytest

from kafka_ds.errors import ConfigurationError, CorruptRecordError
from kafka_ds.options import parse_read_options
from kafka_ds.protocol.records import decode_records
from kafka_ds.protocol.records_encode import encode_record_batch
from kafka_ds.read.planner import split_ranges
from kafka_ds.read.ranges import OffsetRange
from kafka_ds.read.record_timestamps import MAX_MS, check_timestamps, raw_timestamp
from kafka_ds.source import KafkaDataSource
from kafka_ds.stream import InvalidOptionsStreamReader

# --- 1. minPartitions: Spark's KafkaOffsetRangeCalculator, round half up -------------

CALCULATOR_SUITE = [
    # (minPartitions, ranges, expected) from KafkaOffsetRangeCalculatorSuite
    (
        6,
        [("t1", 0, 10), ("t2", 0, 10), ("t3", 0, 1)],  # SPARK-28489: never drop offsets
        [
            ("t1", 0, 3),
            ("t1", 3, 6),
            ("t1", 6, 10),
            ("t2", 0, 3),
            ("t2", 3, 6),
            ("t2", 6, 10),
            ("t3", 0, 1),
        ],
    ),
    (
        4,
        [("t1", 1, 5), ("t2", 1, 21), ("t3", 1, 1)],  # empty ranges ignored
        [("t1", 1, 5), ("t2", 1, 7), ("t2", 7, 14), ("t2", 14, 21)],
    ),
    (3, [("t1", 1, 11)], [("t1", 1, 4), ("t1", 4, 7), ("t1", 7, 11)]),
    (
        9,
        [("t1", 0, 10000), ("t2", 0, 15000), ("t3", 0, 20000)],  # SPARK-36576
        [
            ("t1", 0, 5000),
            ("t1", 5000, 10000),
            ("t2", 0, 5000),
            ("t2", 5000, 10000),
            ("t2", 10000, 15000),
            ("t3", 0, 5000),
            ("t3", 5000, 10000),
            ("t3", 10000, 15000),
            ("t3", 15000, 20000),
        ],
    ),
    # 4 of 24 records with 3 partitions is exactly 0.5: rounded up to 1, so t1 stays whole
    # and t2 gets the 2 partitions left.
    (3, [("t1", 1, 5), ("t2", 1, 21)], [("t1", 1, 5), ("t2", 1, 11), ("t2", 11, 21)]),
    # 10 of 20 with 5 left is exactly 2.5: rounded up to 3 (Python's round() gives 2).
    (
        6,
        [("t1", 0, 1), ("t2", 0, 10), ("t3", 0, 10)],
        [
            ("t1", 0, 1),
            ("t2", 0, 3),
            ("t2", 3, 6),
            ("t2", 6, 10),
            ("t3", 0, 3),
            ("t3", 3, 6),
            ("t3", 6, 10),
        ],
    ),
]


@pytest.mark.parametrize("min_partitions,ranges,expected", CALCULATOR_SUITE)
def test_split_matches_sparks_calculator_suite(min_partitions, ranges, expected):
    got = split_ranges([OffsetRange(t, 1, a, b) for t, a, b in ranges], min_partitions)
    assert [(r.topic, r.start, r.end) for r in got] == expected


# --- 3. malformed record timestamps (SPARK-56243) ----------------------------------------

NANOS = 1_700_000_000_000_000_000  # a producer that wrote nanoseconds


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_timestamp_overflow_is_found_column_wise_with_its_raw_value(compression):
    raw = encode_record_batch(
        keys=None,
        values=pa.array([b"a", b"b", b"c"]),
        timestamps_ms=pa.array([1, NANOS, MAX_MS], pa.int64()),
        base_offset=40,
        compression=compression,
    )
    batch = decode_records(raw, topic="t", partition=2, fetch_offset=40).batch
    with pytest.raises(CorruptRecordError) as info:
        check_timestamps(batch, raw, "t", 2)
    message = str(info.value)
    for part in ("'t'", "partition 2", "offset 41", f"raw value {NANOS}", "TimestampType"):
        assert part in message
    assert raw_timestamp(raw, 42) == MAX_MS
    ok = encode_record_batch(
        keys=None,
        values=pa.array([b"a", b"b"]),
        timestamps_ms=pa.array([-MAX_MS, MAX_MS], pa.int64()),
    )
    check_timestamps(decode_records(ok, topic="t", partition=0, fetch_offset=0).batch, ok, "t", 0)


# --- 6. inconsistent offset JSON, rejected before any broker is asked ---------------------

INCONSISTENT = [
    (
        {"startingOffsets": '{"t":{"0":1,"1":1}}', "endingOffsets": '{"t":{"0":5}}'},
        "The specified start offset and end offset should have the same topic-partitions",
    ),
    (
        {"startingOffsets": '{"t":{"0":7}}', "endingOffsets": '{"t":{"0":5}}'},
        "The specified start offset 7 is greater than the end offset 5 for topic t partition 0",
    ),
    (
        {"startingOffsets": '{"t":"earliest"}', "endingOffsets": '{"u":"latest"}'},
        "should have the same topic-partitions",
    ),
    (
        {
            "startingOffsetsByTimestamp": '{"t":{"0":9}}',
            "endingOffsetsByTimestamp": '{"t":{"0":5}}',
        },
        "The specified start timestamp 9 is greater than the end timestamp 5",
    ),
]


@pytest.mark.parametrize("offsets,message", INCONSISTENT)
def test_inconsistent_offsets_are_rejected_like_spark(offsets, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_read_options(
            {"kafka.bootstrap.servers": "h:1", "subscribe": "t", **offsets}, streaming=False
        )


def test_consistent_offsets_pass():
    for start, end in (
        ('{"t":{"0":-2,"1":3}}', '{"t":{"0":5,"1":-1}}'),
        ('{"t":"earliest"}', '{"t":{"0":5,"1":-1}}'),
        ('{"t":{"0":5}}', '{"t":{"0":5}}'),
    ):
        parse_read_options(
            {
                "kafka.bootstrap.servers": "h:1",
                "subscribe": "t",
                "startingOffsets": start,
                "endingOffsets": end,
            },
            streaming=False,
        )


# --- 9. option errors of streams reach the user ---------------------------------------------


def test_stream_reader_with_bad_options_raises_on_first_call():
    source = KafkaDataSource(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "endingOffsets": "latest"}
    )
    reader = source.streamReader(None)
    assert isinstance(reader, InvalidOptionsStreamReader)
    reader.stop()  # the runner's finally must not fail
    with pytest.raises(ConfigurationError, match="ending offset not valid in streaming queries"):
        reader.initialOffset()


# --- 10. Spark's key words in our messages ---------------------------------------------------

SPARK_WORDS = [
    ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries"),
    ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries"),
    (
        {"startingOffsets": '{"t":{"0":-1}}'},
        "startingOffsets for t-0 can't be latest for batch queries",
    ),
    (
        {"startingOffsets": '{"t":"latest"}'},
        "startingOffsets for topic t can't be latest for batch",
    ),
    (
        {"endingOffsets": '{"t":{"0":-2}}'},
        "ending offset for t-0 can't be earliest for batch queries",
    ),
    ({"kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported"),
    ({"kafka.key.deserializer": "x"}, "Kafka option 'key.deserializer' is not supported"),
    ({"kafka.enable.auto.commit": "false"}, "Kafka option 'enable.auto.commit' is not supported"),
    ({"subscribe": None}, "One of the following options must be specified for Kafka source"),
    (
        {"assign": '{"t":[0]}'},
        "Only one of the following options can be specified for Kafka source",
    ),
    ({"subscribe": " "}, "No topics to subscribe to as specified value for option 'subscribe'"),
]


@pytest.mark.parametrize("extra,words", SPARK_WORDS, ids=[w for _e, w in SPARK_WORDS])
def test_batch_messages_keep_sparks_key_words(extra, words):
    opts = {"kafka.bootstrap.servers": "h:1", "subscribe": "t", **extra}
    opts = {k: v for k, v in opts.items() if v is not None}
    with pytest.raises(ConfigurationError, match=words):
        parse_read_options(opts, streaming=False)


def test_stream_messages_keep_sparks_key_words():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    for extra, words in (
        ({"endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
        (
            {"endingOffsetsByTimestamp": '{"t":{"0":1}}'},
            "ending timestamp not valid in streaming queries",
        ),
        (
            {"minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "2"},
            r"The value of minOffsetPerTrigger\(9\) is higher than the "
            r"maxOffsetsPerTrigger\(2\)",
        ),
        (
            {"subscribePattern": "x", "subscribe": None},
            "Only one of the following options can be specified",
        ),
    ):
        opts = {k: v for k, v in {**base, **extra}.items() if v is not None}
        if "subscribePattern" in extra:
            opts["subscribe"] = "t"
        with pytest.raises(ConfigurationError, match=words):
            parse_read_options(opts, streaming=True)
