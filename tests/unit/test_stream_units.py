"""Streaming offset bookkeeping that needs no broker."""

import json

from kafka_ds.read.stream_offsets import from_offset_dict, rate_limit, to_offset_dict


def test_offset_dict_keys_sorted_and_stable():
    offsets = {("b", 10): 5, ("b", 2): 7, ("a", 0): 1}
    d = to_offset_dict(offsets)
    assert json.dumps(d) == '{"a": {"0": 1}, "b": {"10": 5, "2": 7}}'
    assert json.dumps(d) == json.dumps(d, sort_keys=True)
    assert from_offset_dict(json.loads(json.dumps(d))) == offsets


def test_rate_limit_proportional_to_backlog():
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 90, ("t", 1): 10}
    assert rate_limit(10, start, end, {}) == {("t", 0): 9, ("t", 1): 1}


def test_rate_limit_small_partition_not_starved_and_never_past_end():
    start = {("t", 0): 0, ("t", 1): 0}
    end = {("t", 0): 1000, ("t", 1): 1}
    out = rate_limit(5, start, end, {})
    assert out[("t", 1)] == 1 and out[("t", 0)] == 4
    assert rate_limit(10**9, start, end, {}) == end


def test_rate_limit_new_partition_starts_at_earliest():
    start = {("t", 0): 5}
    end = {("t", 0): 15, ("t", 1): 30}
    out = rate_limit(10, start, end, {("t", 1): 20})
    assert out == {("t", 0): 10, ("t", 1): 25}


def test_rate_limit_nothing_new():
    start = {("t", 0): 5}
    assert rate_limit(10, start, {("t", 0): 5}, {}) == {("t", 0): 5}


def test_reader_pickles_without_its_connections_and_commit_thread():
    # Spark pickles the reader for the executors' read(); sockets, locks and the
    # commit thread stay behind.
    import pickle

    from kafka_ds.options import parse_read_options
    from kafka_ds.read.group_commits import GroupCommitter
    from kafka_ds.stream import KafkaStreamReader

    raw = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", "kafka.group.id": "g"}
    reader = KafkaStreamReader(parse_read_options(raw, streaming=True), raw)
    reader._committer = GroupCommitter(reader.opts, reader.group_id)
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._committer is None and copy._client is None and copy.group_id == "g"
    assert reader._committer is not None


def test_group_id_only_when_asked_for():
    from kafka_ds.options import parse_read_options
    from kafka_ds.stream import KafkaStreamReader

    def group(**extra):
        raw = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", **extra}
        return KafkaStreamReader(parse_read_options(raw, streaming=True), raw).group_id

    assert group() is None
    assert group(**{"kafka.group.id": "mine"}) == "mine"
    assert group(groupIdPrefix="app").startswith("app-")


# --- tasks of a micro-batch (smallBatchRecords) -------------------------------------------


def _plan(sizes, **options):
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.ranges import OffsetRange
    from kafka_ds.stream import plan_tasks

    raw = {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "subscribe": "t",
        **{k: str(v) for k, v in options.items()},
    }
    ranges = [OffsetRange("t", p, 100, 100 + n) for p, n in enumerate(sizes)]
    return plan_tasks(ranges, parse_read_options(raw, streaming=True))


def _spans(task):
    return [(p.topic, p.partition, p.start, p.end) for p in task.ranges]


def test_small_batch_is_one_task_reading_its_ranges_in_order():
    from kafka_ds.stream import KafkaInputRanges

    tasks = _plan([3000, 5000, 2000])  # 10,000 records: the default limit
    assert len(tasks) == 1 and isinstance(tasks[0], KafkaInputRanges)
    assert _spans(tasks[0]) == [("t", 0, 100, 3100), ("t", 1, 100, 5100), ("t", 2, 100, 2100)]


def test_batch_above_the_limit_or_of_one_range_keeps_one_task_per_range():
    from kafka_ds.reader import KafkaInputPartition

    tasks = _plan([3000, 5000, 2001])
    assert [(p.partition, p.start, p.end) for p in tasks] == [
        (0, 100, 3100),
        (1, 100, 5100),
        (2, 100, 2101),
    ]
    assert all(type(p) is KafkaInputPartition for p in tasks)
    single = _plan([7])
    assert [type(p) for p in single] == [KafkaInputPartition]
    assert _plan([]) == []


def test_small_batch_records_is_an_option_and_zero_or_a_spread_turns_it_off():
    from kafka_ds.stream import KafkaInputRanges

    assert isinstance(_plan([40, 60], smallBatchRecords=100)[0], KafkaInputRanges)
    assert len(_plan([40, 61], smallBatchRecords=100)) == 2
    assert len(_plan([1, 1], smallBatchRecords=0)) == 2
    assert len(_plan([1, 1], minPartitions=1)) == 2
    assert len(_plan([1, 1], maxRecordsPerPartition=10)) == 2


def test_combined_task_pickles_with_its_ranges():
    import pickle

    task = _plan([1, 2, 3])[0]
    copy = pickle.loads(pickle.dumps(task))
    assert (
        _spans(copy) == _spans(task) == [("t", 0, 100, 101), ("t", 1, 100, 102), ("t", 2, 100, 103)]
    )


def test_first_batch_of_a_latest_start_plans_one_empty_task():
    # Its records are resolved only now ("latest" markers -1 as the start): nothing to read,
    # but one task, so Spark starts the read's Python worker before records arrive. Any
    # other batch without records plans none.
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.ranges import read_range
    from kafka_ds.stream import KafkaStreamReader

    raw = {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"}
    reader = KafkaStreamReader(parse_read_options(raw, streaming=True), raw)
    tasks = reader.partitions({"t": {"0": -1, "1": -1}}, {"t": {"0": 5, "1": 0}})
    assert len(tasks) == 1 and not hasattr(tasks[0], "topic")
    assert list(reader.read(tasks[0])) == []  # reads nothing, opens no socket
    assert list(read_range(reader.opts, tasks[0])) == []
    assert reader.partitions({"t": {"0": 5, "1": 0}}, {"t": {"0": 5, "1": 0}}) == []
    planned = reader.partitions({"t": {"0": -1, "1": 0}}, {"t": {"0": 5, "1": 3}})
    assert [(p.topic, p.partition, p.start, p.end) for p in planned] == [("t", 1, 0, 3)]
