"""Option parsing and range planning: pure functions, no broker."""
import pytest

from kafka_ds.options import (
    OPTIONS, options_markdown, parse_duration_ms, parse_read_options,
)
from kafka_ds.protocol.errors import ConfigurationError
from kafka_ds.reader import OffsetRange, split_ranges

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
    o = parse_read_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubScribe": "t",
                            "INCLUDEHEADERS": "TRUE", "failondataloss": "false"}, streaming=False)
    assert o.include_headers and not o.fail_on_data_loss and o.subscription.topics == ("t",)


@pytest.mark.parametrize("options, fragment", [
    ({"subscribe": "t"}, "kafka.bootstrap.servers"),
    ({**BS}, "One of the following options must be specified for Kafka source"),
    ({**BS, "subscribe": "t", "assign": '{"t":[0]}'}, "got subscribe, assign"),
    ({**BS, "subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe'"),
    ({**BS, "subscribePattern": "("}, "Option 'subscribePattern' is not a valid regex"),
    ({**BS, "assign": "[1,2]"}, "No topicpartitions to assign as specified value for option 'assign'"),
    ({**BS, "assign": "{bad json"}, "Option 'assign' is not valid JSON"),
    ({**BS, "subscribe": "t", "startingOffsets": "latest"}, "cannot be 'latest' for a batch"),
    ({**BS, "subscribe": "t", "endingOffsets": "earliest"}, "cannot be 'earliest'"),
    ({**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, "can't be latest for batch queries on Kafka"),
    ({**BS, "subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, "can't be earliest for batch queries on Kafka"),
    ({**BS, "subscribe": "t", "startingOffsets": "middle"}, "Option 'startingOffsets' must be"),
    ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
    ({**BS, "subscribe": "t", "kafka.key.deserializer": "x"}, "kafka.key.deserializer"),
    ({**BS, "subscribe": "t", "kafka.value.deserializer": "x"}, "kafka.value.deserializer"),
    ({**BS, "subscribe": "t", "kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit"),
    ({**BS, "subscribe": "t", "kafka.interceptor.classes": "x"}, "kafka.interceptor.classes"),
    ({**BS, "subscribe": "t", "minPartitions": "0"}, "Option 'minPartitions' must be at least 1"),
    ({**BS, "subscribe": "t", "maxRecordsPerPartition": "x"}, "Option 'maxRecordsPerPartition' must be an integer"),
    ({**BS, "subscribe": "t", "includeHeaders": "yes"}, "Option 'includeHeaders' must be 'true' or 'false'"),
    ({**BS, "subscribe": "t", "startingOffsetsByTimestampStrategy": "x"}, "startingOffsetsByTimestampStrategy"),
    ({**BS, "subscribe": "t", "kafka.isolation.level": "x"}, "kafka.isolation.level"),
    ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "5"}, "streaming queries only"),
    ({**BS, "assign": '{"t":[0,1]}', "startingOffsets": '{"t":{"0":5}}'}, "every assigned partition"),
    ({**BS, "subscribe": "t", "startingTimestamp": "-5"}, "Option 'startingTimestamp'"),
    ({"kafka.bootstrap.servers": "nohost", "subscribe": "t"}, "is not host:port"),
])
def test_bad_batch_options_name_the_option(options, fragment):
    with pytest.raises(ConfigurationError) as info:
        parse_read_options(options, streaming=False)
    assert fragment in str(info.value)


def test_streaming_rejects_ending_offsets():
    with pytest.raises(ConfigurationError, match="endingOffsets.*batch queries only"):
        parse_read_options(opts(subscribe="t", endingOffsets="latest"), streaming=True)


def test_timestamp_precedence():
    o = parse_read_options(opts(subscribe="t", startingOffsets="earliest",
                                startingOffsetsByTimestamp='{"t":{"0":5}}',
                                startingTimestamp="7"), streaming=False)
    assert o.starting.kind == "global_timestamp" and o.starting.timestamp == 7
    o = parse_read_options(opts(subscribe="t", startingOffsets="earliest",
                                startingOffsetsByTimestamp='{"t":{"0":5}}'), streaming=False)
    assert o.starting.kind == "timestamp" and o.starting.as_dict() == {("t", 0): 5}


def test_specific_offsets_sorted():
    o = parse_read_options(opts(subscribe="t,u", startingOffsets='{"u":{"1":3},"t":{"0":-2}}'),
                           streaming=False)
    assert o.starting.offsets == ((("t", 0), -2), (("u", 1), 3))


def test_duration():
    assert parse_duration_ms({"x": "15m"}, "x", 0) == 900000
    assert parse_duration_ms({"x": "250ms"}, "x", 0) == 250
    assert parse_duration_ms({"x": "2s"}, "x", 0) == 2000
    assert parse_duration_ms({}, "x", 42) == 42
    with pytest.raises(ConfigurationError, match="'x'"):
        parse_duration_ms({"x": "soon"}, "x", 0)


def test_readme_option_table_matches_code():
    import pathlib
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    assert options_markdown() in readme, "regenerate with python -m kafka_ds.options"
    assert len(OPTIONS) == len({o[0] for o in OPTIONS})


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
