"""Drop-in parity with Spark's own Kafka source (issue 14), case by case.

Expected values come from Spark's code and its test suites (KafkaOffsetRangeCalculatorSuite,
KafkaSourceProvider's messages, KafkaMicroBatchStream's AvailableNow checks). Streaming
cases drive ``KafkaStreamReader`` the way Spark's engine does (initialOffset, latestOffset,
partitions), against the real brokers, without a Spark query each.
"""
import json

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from kafka_ds.options import parse_read_options
from kafka_ds.errors import ConfigurationError, CorruptRecordError, DataLossError, KafkaError
from kafka_ds.protocol.records import decode_records
from kafka_ds.protocol.records_encode import encode_record_batch
from kafka_ds.read.ranges import OffsetRange, read_range
from kafka_ds.read.planner import split_ranges
from kafka_ds.read.record_timestamps import MAX_MS, check_timestamps, raw_timestamp
from kafka_ds.source import KafkaDataSource
from kafka_ds.stream import InvalidOptionsStreamReader, KafkaStreamReader
from kafka_ds.read.stream_offsets import from_offset_dict
from tests.support.brokers import produce_confluent
from tests.support.spark_support import spark  # noqa: F401  (fixture)

ONE_PER_BATCH = {"batch.num.messages": 1}   # Tansu's ListOffsets (tests/README.md)


def produce(broker, topic, partition, count, start=0, **extra):
    records = [{"value": f"{partition}-{i}".encode(), **extra} for i in range(start, start + count)]
    return produce_confluent(broker.bootstrap_servers, topic, records, partition=partition,
                             **ONE_PER_BATCH)


def options(broker, **extra):
    return {"kafka.bootstrap.servers": broker.bootstrap_servers, **extra}


# Topics are deleted under these readers. Kafka (and the mock) answers ListOffsets for a
# vanished partition with UNKNOWN_TOPIC_OR_PARTITION and the reader refreshes its metadata;
# Tansu answers offset 0, so on Tansu the tests look the partitions up every trigger
# (by default they are reused for kafka.metadata.max.age.ms; docs/reliability.md).
TANSU_FRESH_METADATA = {"kafka.metadata.max.age.ms": "0"}


def stream_reader(broker, **extra):
    if broker.name == "tansu":
        extra = {**TANSU_FRESH_METADATA, **extra}
    opts = options(broker, **extra)
    return KafkaStreamReader(parse_read_options(opts, streaming=True), opts)


def sizes(partitions):
    return [(p.topic, p.partition, p.start, p.end) for p in partitions]


# --- 1. minPartitions: Spark's KafkaOffsetRangeCalculator, round half up -------------

CALCULATOR_SUITE = [
    # (minPartitions, ranges, expected) from KafkaOffsetRangeCalculatorSuite
    (6, [("t1", 0, 10), ("t2", 0, 10), ("t3", 0, 1)],   # SPARK-28489: never drop offsets
     [("t1", 0, 3), ("t1", 3, 6), ("t1", 6, 10), ("t2", 0, 3), ("t2", 3, 6), ("t2", 6, 10),
      ("t3", 0, 1)]),
    (4, [("t1", 1, 5), ("t2", 1, 21), ("t3", 1, 1)],    # empty ranges ignored
     [("t1", 1, 5), ("t2", 1, 7), ("t2", 7, 14), ("t2", 14, 21)]),
    (3, [("t1", 1, 11)], [("t1", 1, 4), ("t1", 4, 7), ("t1", 7, 11)]),
    (9, [("t1", 0, 10000), ("t2", 0, 15000), ("t3", 0, 20000)],   # SPARK-36576
     [("t1", 0, 5000), ("t1", 5000, 10000), ("t2", 0, 5000), ("t2", 5000, 10000),
      ("t2", 10000, 15000), ("t3", 0, 5000), ("t3", 5000, 10000), ("t3", 10000, 15000),
      ("t3", 15000, 20000)]),
    # 4 of 24 records with 3 partitions is exactly 0.5: rounded up to 1, so t1 stays whole
    # and t2 gets the 2 partitions left.
    (3, [("t1", 1, 5), ("t2", 1, 21)], [("t1", 1, 5), ("t2", 1, 11), ("t2", 11, 21)]),
    # 10 of 20 with 5 left is exactly 2.5: rounded up to 3 (Python's round() gives 2).
    (6, [("t1", 0, 1), ("t2", 0, 10), ("t3", 0, 10)],
     [("t1", 0, 1), ("t2", 0, 3), ("t2", 3, 6), ("t2", 6, 10), ("t3", 0, 3), ("t3", 3, 6),
      ("t3", 6, 10)]),
]


@pytest.mark.parametrize("min_partitions,ranges,expected", CALCULATOR_SUITE)
def test_split_matches_sparks_calculator_suite(min_partitions, ranges, expected):
    got = split_ranges([OffsetRange(t, 1, a, b) for t, a, b in ranges], min_partitions)
    assert [(r.topic, r.start, r.end) for r in got] == expected


def test_min_partitions_batch_and_stream_like_spark(spark, broker, new_topic):
    topic = new_topic(partitions=3)
    for partition, count in ((0, 10), (1, 10), (2, 1)):
        produce(broker, topic, partition, count)
    df = (spark.read.format("pykafka").options(**options(broker, subscribe=topic,
                                                         minPartitions="6")).load())
    assert df.rdd.getNumPartitions() == 7          # Spark: 3 + 3 + 1 (Python's round(): 5)
    assert df.count() == 21
    reader = stream_reader(broker, subscribe=topic, startingOffsets="earliest", minPartitions="6")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    got = sizes(reader.partitions(start, end))
    assert [(p, b - a) for _t, p, a, b in got] == [(0, 3), (0, 3), (0, 4), (1, 3), (1, 3),
                                                   (1, 4), (2, 1)]
    reader.stop()


# --- 2. late binding: offsets resolved when each scan runs -------------------------------

def test_every_action_reads_up_to_the_latest_offsets_of_its_time(spark, broker, new_topic):
    topic = new_topic(partitions=2)
    produce(broker, topic, 0, 3)                    # partition 1 stays empty at planning
    def reader():   # DataFrameReader.option() changes the reader: a new one each time
        return spark.read.format("pykafka").options(**options(broker, subscribe=topic))

    df = reader().load()
    pinned = reader().option("endingOffsets", json.dumps({topic: {"0": 2, "1": -1}})).load()
    assert df.count() == 3
    assert pinned.count() == 2
    produce(broker, topic, 0, 2, start=3)
    produce(broker, topic, 1, 4)
    assert df.count() == 9                          # the same DataFrame, a new execution
    assert sorted(r.offset for r in df.filter(f"partition = 1").collect()) == [0, 1, 2, 3]
    assert pinned.count() == 6                      # 2 (explicit end) + 4 ("-1": latest)
    with_min = reader().option("minPartitions", "3").load()
    assert with_min.count() == 9
    produce(broker, topic, 0, 1, start=5)
    assert with_min.count() == 10


# --- 3. malformed record timestamps (SPARK-56243) ----------------------------------------

NANOS = 1_700_000_000_000_000_000        # a producer that wrote nanoseconds


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_timestamp_overflow_is_found_column_wise_with_its_raw_value(compression):
    raw = encode_record_batch(keys=None, values=pa.array([b"a", b"b", b"c"]),
                              timestamps_ms=pa.array([1, NANOS, MAX_MS], pa.int64()),
                              base_offset=40, compression=compression)
    batch = decode_records(raw, topic="t", partition=2, fetch_offset=40).batch
    with pytest.raises(CorruptRecordError) as info:
        check_timestamps(batch, raw, "t", 2)
    message = str(info.value)
    for part in ("'t'", "partition 2", "offset 41", f"raw value {NANOS}", "TimestampType"):
        assert part in message
    assert raw_timestamp(raw, 42) == MAX_MS
    ok = encode_record_batch(keys=None, values=pa.array([b"a", b"b"]),
                             timestamps_ms=pa.array([-MAX_MS, MAX_MS], pa.int64()))
    check_timestamps(decode_records(ok, topic="t", partition=0, fetch_offset=0).batch, ok, "t", 0)


def test_malformed_timestamp_fails_the_read(broker, new_topic):
    topic = new_topic()
    produce_confluent(broker.bootstrap_servers, topic,
                      [{"value": b"ok", "timestamp_ms": 1_700_000_000_000},
                       {"value": b"bad", "timestamp_ms": NANOS}], partition=0, **ONE_PER_BATCH)
    opts = parse_read_options(options(broker, subscribe=topic), streaming=False)
    with pytest.raises(CorruptRecordError, match=rf"{topic}.*partition 0 at offset 1: raw value {NANOS}"):
        list(read_range(opts, OffsetRange(topic, 0, 0, 2)))
    assert sum(b.num_rows for b in read_range(opts, OffsetRange(topic, 0, 0, 1))) == 1


# --- 4. AvailableNow: an uncommitted batch re-runs with its recorded offsets -------------

def test_available_now_reruns_the_uncommitted_batch_after_a_new_partition(broker):
    stem = broker.unique_topic("an")
    first, later = f"{stem}-a", f"{stem}-b"
    broker.create_topic(first, 1)
    try:
        produce(broker, first, 0, 3)
        run1 = stream_reader(broker, subscribePattern=f"{stem}-.*", startingOffsets="earliest")
        run1.prepareForTriggerAvailableNow()
        start = run1.initialOffset()
        end = run1.latestOffset(start, ReadAllAvailable())
        assert sizes(run1.partitions(start, end)) == [(first, 0, 0, 3)]
        run1.stop()                                 # the batch failed; not in the commit log
        broker.create_topic(later, 1)
        produce(broker, later, 0, 2)
        run2 = stream_reader(broker, subscribePattern=f"{stem}-.*", startingOffsets="earliest")
        run2.prepareForTriggerAvailableNow()
        # Spark re-runs batch 0 from its offset log without asking latestOffset first; its
        # start comes from initialOffset() again and now names the new topic too.
        restart = run2.initialOffset()
        assert set(from_offset_dict(restart)) == {(first, 0), (later, 0)}
        assert sizes(run2.partitions(restart, end)) == [(first, 0, 0, 3)]
        end2 = run2.latestOffset(end, ReadAllAvailable())
        assert sizes(run2.partitions(end, end2)) == [(later, 0, 0, 2)]
        assert run2.latestOffset(end2, ReadAllAvailable()) == end2
        run2.stop()
    finally:
        broker.delete_topic(later)
        broker.delete_topic(first)


def test_available_now_query_recovers_after_a_failed_batch(spark, broker, tmp_path):
    # The whole SPARK-53560 story through Spark: batch 0 fails, a new topic matching the
    # pattern appears, the restarted query re-runs batch 0 and then reads the new topic.
    stem = broker.unique_topic("crash")
    first, later = f"{stem}-a", f"{stem}-b"
    broker.create_topic(first, 1)
    seen, fail = [], [True]

    def sink(batch, _batch_id):
        if fail[0]:
            raise RuntimeError("sink down")
        seen.extend((r.topic, r.offset) for r in batch.select("topic", "offset").collect())

    def run():
        df = (spark.readStream.format("pykafka")
              .options(**options(broker, subscribePattern=f"{stem}-.*",
                                 startingOffsets="earliest")).load())
        query = (df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path))
                 .trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(120), "AvailableNow query did not finish"
        except AssertionError:
            raise
        except Exception:   # noqa: BLE001 - the failed run; query.exception() has it
            pass
        return query

    try:
        produce(broker, first, 0, 3)
        assert run().exception() is not None
        broker.create_topic(later, 1)
        produce(broker, later, 0, 2)
        fail[0] = False
        query = run()
        assert query.exception() is None, query.exception()
        assert sorted(seen) == [(first, 0), (first, 1), (first, 2), (later, 0), (later, 1)]
    finally:
        broker.delete_topic(later)
        broker.delete_topic(first)


# --- 5. no partitions left: keep the previous offsets (SPARK-41375) -----------------------

def test_deleting_the_only_topic_keeps_the_previous_offsets(broker, new_topic):
    topic = new_topic()
    produce(broker, topic, 0, 2)
    reader = stream_reader(broker, subscribe=topic, startingOffsets="earliest")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {topic: {"0": 2}}
    broker.delete_topic(topic)
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    assert reader.reportLatestOffset() is None
    reader.stop()


# --- 6. inconsistent offset JSON, rejected before any broker is asked ---------------------

INCONSISTENT = [
    ({"startingOffsets": '{"t":{"0":1,"1":1}}', "endingOffsets": '{"t":{"0":5}}'},
     "The specified start offset and end offset should have the same topic-partitions"),
    ({"startingOffsets": '{"t":{"0":7}}', "endingOffsets": '{"t":{"0":5}}'},
     "The specified start offset 7 is greater than the end offset 5 for topic t partition 0"),
    ({"startingOffsets": '{"t":"earliest"}', "endingOffsets": '{"u":"latest"}'},
     "should have the same topic-partitions"),
    ({"startingOffsetsByTimestamp": '{"t":{"0":9}}', "endingOffsetsByTimestamp": '{"t":{"0":5}}'},
     "The specified start timestamp 9 is greater than the end timestamp 5"),
]


@pytest.mark.parametrize("offsets,message", INCONSISTENT)
def test_inconsistent_offsets_are_rejected_like_spark(offsets, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", **offsets},
                           streaming=False)


def test_consistent_offsets_pass():
    for start, end in (('{"t":{"0":-2,"1":3}}', '{"t":{"0":5,"1":-1}}'),
                       ('{"t":"earliest"}', '{"t":{"0":5,"1":-1}}'),
                       ('{"t":{"0":5}}', '{"t":{"0":5}}')):
        parse_read_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                            "startingOffsets": start, "endingOffsets": end}, streaming=False)


def test_inconsistent_offsets_fail_even_for_a_missing_topic(spark, broker):
    missing = broker.unique_topic("missing")
    df = (spark.read.format("pykafka")
          .options(**options(broker, subscribe=missing, startingOffsets=json.dumps({missing: {"0": 9}}),
                             endingOffsets=json.dumps({missing: {"0": 3}}))))
    with pytest.raises(Exception, match="start offset 9 is greater than the end offset 3"):
        df.load().collect()


# --- 7. topic-level offsets (SPARK-58774) --------------------------------------------------

def test_topic_level_offsets_in_a_batch_read(spark, broker, new_topic):
    whole, part = new_topic(partitions=2), new_topic()
    produce(broker, whole, 0, 3)
    produce(broker, whole, 1, 2)
    produce(broker, part, 0, 5)
    df = (spark.read.format("pykafka")
          .options(**options(broker, subscribe=f"{whole},{part}",
                             startingOffsets=json.dumps({whole: "earliest", part: {"0": 1}}),
                             endingOffsets=json.dumps({whole: "latest", part: {"0": 4}})))
          .load())
    got = sorted((r.topic == whole, r.partition, r.offset) for r in df.collect())
    assert got == ([(False, 0, o) for o in (1, 2, 3)]
                   + [(True, 0, o) for o in range(3)] + [(True, 1, o) for o in range(2)])


def test_topic_level_latest_for_a_topic_matched_later(broker):
    stem = broker.unique_topic("tl")
    first, tail, whole = f"{stem}-a", f"{stem}-tail", f"{stem}-whole"
    broker.create_topic(first, 1)
    try:
        produce(broker, first, 0, 2)
        reader = stream_reader(broker, subscribePattern=f"{stem}-.*",
                               startingOffsets=json.dumps({first: "earliest", tail: "latest"}))
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        assert sizes(reader.partitions(start, end)) == [(first, 0, 0, 2)]
        for topic in (tail, whole):                 # both appear later, with 3 records each
            broker.create_topic(topic, 1)
            produce(broker, topic, 0, 3)
        end2 = reader.latestOffset(end, ReadAllAvailable())
        # "latest" for the tail topic: its old records are skipped; the other one from earliest.
        assert sizes(reader.partitions(end, end2)) == [(whole, 0, 0, 3)]
        produce(broker, tail, 0, 1, start=3)
        end3 = reader.latestOffset(end2, ReadAllAvailable())
        assert sizes(reader.partitions(end2, end3)) == [(tail, 0, 3, 4)]
        reader.stop()
    finally:
        for topic in (first, tail, whole):
            broker.delete_topic(topic)


# --- 8. AvailableNow end checks ------------------------------------------------------------

def _available_now_run(broker, topic):
    reader = stream_reader(broker, subscribe=topic, startingOffsets="earliest",
                           maxOffsetsPerTrigger="1")
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(1))
    assert sum(p.end - p.start for p in reader.partitions(start, end)) == 1
    return reader, end


def test_available_now_fails_when_planned_partitions_are_lost(broker):
    topic = broker.unique_topic("lost")
    broker.create_topic(topic, 2)                   # partition 1 never holds data
    try:
        produce(broker, topic, 0, 3)
        reader, end = _available_now_run(broker, topic)
        broker.delete_topic(topic)
        broker.create_topic(topic, 1)               # partition 1 is gone, 0 went back
        nxt = reader.latestOffset(end, ReadMaxRows(1))
        with pytest.raises(DataLossError, match=rf"have been lost during running query with "
                                                rf"Trigger.AvailableNow: {topic}-1\."):
            reader.partitions(end, nxt)
        reader.stop()
    finally:
        broker.delete_topic(topic)


def test_available_now_fails_when_offsets_go_back(broker):
    topic = broker.unique_topic("back")
    broker.create_topic(topic, 2)
    try:
        produce(broker, topic, 0, 3)
        reader, end = _available_now_run(broker, topic)
        broker.delete_topic(topic)
        broker.create_topic(topic, 2)               # same partitions, all empty again
        nxt = reader.latestOffset(end, ReadMaxRows(1))
        with pytest.raises(DataLossError, match=rf"available offset which is less than end "
                                                rf"offset .*Trigger.AvailableNow: {topic}-0\."):
            reader.partitions(end, nxt)
        reader.stop()
    finally:
        broker.delete_topic(topic)


# --- 9. option errors of streams reach the user ---------------------------------------------

def test_stream_reader_with_bad_options_raises_on_first_call():
    source = KafkaDataSource({"kafka.bootstrap.servers": "h:1", "subscribe": "t",
                              "endingOffsets": "latest"})
    reader = source.streamReader(None)
    assert isinstance(reader, InvalidOptionsStreamReader)
    reader.stop()                                   # the runner's finally must not fail
    with pytest.raises(ConfigurationError, match="ending offset not valid in streaming queries"):
        reader.initialOffset()


def test_batch_only_option_on_a_stream_fails_with_its_message(spark, mock_cluster, tmp_path):
    df = (spark.readStream.format("pykafka")
          .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
          .option("subscribe", "x").option("endingOffsets", "latest").load())
    query = (df.writeStream.format("noop").option("checkpointLocation", str(tmp_path))
             .trigger(availableNow=True).start())
    with pytest.raises(Exception) as info:
        query.awaitTermination(120)
    text = str(info.value)
    assert "ending offset not valid in streaming queries" in text
    assert "UnboundLocalError" not in text


def test_update_output_mode_is_refused_by_spark_for_the_sink(spark, mock_cluster, tmp_path):
    # Pins an API limit listed in README's deviations: Spark refuses it before Python runs.
    counts = (spark.readStream.format("rate").load().groupBy("value").count()
              .selectExpr("cast(value as string) as key", "cast(count as string) as value"))
    query = (counts.writeStream.format("pykafka")
             .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers)
             .option("topic", "never").outputMode("update")
             .option("checkpointLocation", str(tmp_path)).start())
    with pytest.raises(Exception, match="pykafka does not support Update mode"):
        query.awaitTermination(120)


# --- 10. Spark's key words in our messages ---------------------------------------------------

SPARK_WORDS = [
    ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries"),
    ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries"),
    ({"startingOffsets": '{"t":{"0":-1}}'}, "startingOffsets for t-0 can't be latest for batch queries"),
    ({"startingOffsets": '{"t":"latest"}'}, "startingOffsets for topic t can't be latest for batch"),
    ({"endingOffsets": '{"t":{"0":-2}}'}, "ending offset for t-0 can't be earliest for batch queries"),
    ({"kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported"),
    ({"kafka.key.deserializer": "x"}, "Kafka option 'key.deserializer' is not supported"),
    ({"kafka.enable.auto.commit": "false"}, "Kafka option 'enable.auto.commit' is not supported"),
    ({"subscribe": None}, "One of the following options must be specified for Kafka source"),
    ({"assign": '{"t":[0]}'}, "Only one of the following options can be specified for Kafka source"),
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
    for extra, words in (({"endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
                         ({"endingOffsetsByTimestamp": '{"t":{"0":1}}'},
                          "ending timestamp not valid in streaming queries"),
                         ({"minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "2"},
                          r"The value of minOffsetPerTrigger\(9\) is higher than the "
                          r"maxOffsetsPerTrigger\(2\)"),
                         ({"subscribePattern": "x", "subscribe": None},
                          "Only one of the following options can be specified")):
        opts = {k: v for k, v in {**base, **extra}.items() if v is not None}
        if "subscribePattern" in extra:
            opts["subscribe"] = "t"
        with pytest.raises(ConfigurationError, match=words):
            parse_read_options(opts, streaming=True)


def test_specific_offsets_not_matching_assigned_partitions_use_sparks_words(broker, new_topic):
    topic = new_topic(partitions=2)
    opts = parse_read_options(options(broker, subscribe=topic,
                                      startingOffsets=json.dumps({topic: {"0": 0}})),
                              streaming=False)
    from kafka_ds.reader import KafkaBatchReader
    with pytest.raises(KafkaError, match="Partitions specified for Kafka start offsets don't "
                                         "match what are assigned"):
        KafkaBatchReader(opts).partitions()
