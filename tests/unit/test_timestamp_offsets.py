"""The Fetch-based offset-by-timestamp search and the check of ListOffsets' answer, on
crafted record-batch sequences (kafka_ds/client/timestamp_offsets.py)."""

import math
import random

import pyarrow as pa
import pytest

from kafka_ds.client.timestamp_offsets import (
    EMPTY_ANSWER_ATTEMPTS,
    EMPTY_ANSWER_WAITS_MS,
    check_answer,
    first_header,
    partition_fetcher,
    search_offset,
)
from kafka_ds.errors import KafkaProtocolError
from kafka_ds.protocol.records_encode import encode_record_batch

BASE_TS = 1_700_000_000_000


class Log:
    """A partition as a list of v2 batches. ``one_batch``: every Fetch answers one batch (the
    mock); otherwise batches up to max_bytes, at least one (Kafka, Tansu's request limit)."""

    def __init__(self, batch_timestamps, one_batch=False, start=0):
        self.batches, self.fetches = [], 0
        offset = start
        for timestamps in batch_timestamps:
            data = encode_record_batch(
                keys=None,
                values=[b"v" * 20] * len(timestamps),
                timestamps_ms=pa.array(timestamps, pa.int64()),
                base_offset=offset,
            )
            self.batches.append((offset, offset + len(timestamps) - 1, data))
            offset += len(timestamps)
        self.start, self.end, self.one_batch = start, offset, one_batch
        self.records = [
            (start + i, ts) for i, ts in enumerate(t for batch in batch_timestamps for t in batch)
        ]

    def fetch(self, offset, max_bytes):
        self.fetches += 1
        out = b""
        for _base, last, data in self.batches:
            if last < offset:
                continue
            if out and (self.one_batch or len(out) + len(data) > max_bytes):
                break
            out += data
        return out

    def scan(self, timestamp):
        """Kafka's answer: the first record at or after the timestamp."""
        return next((o for o, ts in self.records if ts >= timestamp), -1)


def monotonic_batches(sizes, step=1000):
    ts, batches = BASE_TS, []
    for size in sizes:
        batches.append([ts + i * step for i in range(size)])
        ts += size * step
    return batches


@pytest.mark.parametrize("one_batch", [False, True], ids=["kafka", "one-batch"])
@pytest.mark.parametrize("sizes", [[1] * 40, [3, 1, 5, 2, 7, 1, 1, 4], [10], []])
def test_search_matches_a_scan_on_monotonic_timestamps(sizes, one_batch):
    log = Log(monotonic_batches(sizes), one_batch=one_batch)
    for timestamp in range(BASE_TS - 1500, BASE_TS + (log.end + 2) * 1000, 250):
        assert search_offset(log.fetch, timestamp, log.start, log.end) == log.scan(timestamp)
        answer = log.scan(timestamp)
        assert check_answer(log.fetch, timestamp, answer, log.start, log.end)


def test_search_costs_a_logarithmic_number_of_fetches():
    log = Log(monotonic_batches([1] * 1000), one_batch=True)
    for k in (0, 1, 499, 500, 998, 999):
        log.fetches = 0
        assert search_offset(log.fetch, BASE_TS + k * 1000, 0, log.end) == k
        assert log.fetches <= math.ceil(math.log2(1000)) + 2


def test_search_after_the_log_start_and_ties_within_a_batch():
    # Equal timestamps: the first record of the run; the log starts at offset 100.
    log = Log(
        [[BASE_TS, BASE_TS + 5, BASE_TS + 5, BASE_TS + 5], [BASE_TS + 5, BASE_TS + 9]], start=100
    )
    assert search_offset(log.fetch, BASE_TS + 5, 100, log.end) == 101
    assert search_offset(log.fetch, BASE_TS + 6, 100, log.end) == 105
    assert search_offset(log.fetch, BASE_TS + 10, 100, log.end) == -1
    # Inside a batch whose first records are before the log start: never below earliest.
    assert search_offset(log.fetch, BASE_TS, 102, log.end) == 102


def test_search_on_non_monotonic_timestamps_returns_a_boundary():
    rng = random.Random(7)
    batches = [
        [BASE_TS + rng.randrange(0, 100_000) for _ in range(rng.randrange(1, 5))] for _ in range(60)
    ]
    log = Log(batches, one_batch=True)
    maxima = {base: max(ts) for (base, _last, _d), ts in zip(log.batches, batches, strict=True)}
    bases = [base for base, _l, _d in log.batches]
    for timestamp in range(BASE_TS - 1, BASE_TS + 100_001, 3_333):
        offset = search_offset(log.fetch, timestamp, 0, log.end)
        if offset < 0:
            # Only claimed when the probed path found no batch: the last one is earlier.
            assert maxima[bases[-1]] < timestamp
            continue
        base = max(b for b in bases if b <= offset)
        record_ts = dict(log.records)
        assert record_ts[offset] >= timestamp
        assert all(record_ts[o] < timestamp for o in range(base, offset))
        before = [b for b in bases if b < base]
        assert not before or maxima[before[-1]] < timestamp
        assert check_answer(log.fetch, timestamp, offset, 0, log.end)


@pytest.mark.parametrize("answer", [-1, 0, 7, 12, 30])
def test_check_rejects_wrong_answers(answer):
    log = Log(monotonic_batches([3, 3, 3, 3, 3, 3]))
    timestamp = BASE_TS + 8 * 1000  # record 8, the middle of the batch at 6
    assert log.scan(timestamp) == 8
    assert not check_answer(log.fetch, timestamp, answer, 0, log.end)
    assert check_answer(log.fetch, timestamp, 8, 0, log.end)


def test_check_on_an_empty_partition():
    log = Log([])
    assert check_answer(log.fetch, BASE_TS, -1, 0, 0)
    assert not check_answer(log.fetch, BASE_TS, 0, 0, 0)  # Tansu's answer


def test_first_header_reads_a_v2_header_from_a_few_bytes():
    data = encode_record_batch(
        keys=None,
        values=[b"x" * 100] * 3,
        base_offset=42,
        timestamps_ms=pa.array([5, 9, 7], pa.int64()),
    )
    header = first_header(data[:64])
    assert (header.base, header.last, header.max_timestamp, header.size) == (42, 44, 9, len(data))
    assert first_header(b"") is None and first_header(data[:20]) is None


class FlakyLeader:
    """A client whose Fetch answers come from ``log``, except that the Fetches at the offsets
    in ``empty`` (offset -> how many times) are first answered with no records, error 0 and
    the right high watermark, as Tansu 0.6.0 now and then does."""

    def __init__(self, log, empty, last_stable=None, lookup_ms=0):
        self.log, self.empty, self.calls, self.waits = log, dict(empty), [], []
        self.last_stable = log.end if last_stable is None else last_stable
        # Tansu answers no records when finding the offset takes longer than the wait.
        self.lookup_ms = lookup_ms

    def fetch(
        self, topic, partition, offset, *, max_bytes, max_wait_ms, min_bytes, isolation_level
    ):
        self.calls.append(offset)
        self.waits.append(max_wait_ms)
        records = self.log.fetch(offset, max_bytes)
        if self.empty.get(offset, 0) > 0:
            self.empty[offset] -= 1
            records = None
        if max_wait_ms < self.lookup_ms:
            records = None
        return {
            "partition_index": partition,
            "error_code": 0,
            "high_watermark": self.log.end,
            "last_stable_offset": self.last_stable,
            "log_start_offset": self.log.start,
            "records": records,
        }

    def retrying(self, operation, what, topics=None):
        return operation()


def test_an_empty_answer_below_the_end_is_asked_again():
    # tests/integration/test_read.py's lz4 partition: 40 one-record batches, a second apart.
    # The search for record 22's timestamp probes 20, 30, 25, 23, 22, 21; an empty answer at
    # 22 (seen on Tansu in a full-suite run) used to end it at 23, one record late.
    log = Log(monotonic_batches([1] * 40), one_batch=True)
    leader = FlakyLeader(log, {22: 1})
    fetch_batch = partition_fetcher(leader, "t", 0, 0)
    assert search_offset(fetch_batch, BASE_TS + 22_000, 0, 40) == 22
    assert leader.calls.count(22) >= 2
    # The check of a right answer does not fail on one either.
    leader = FlakyLeader(log, {22: 1, 21: 1})
    assert check_answer(partition_fetcher(leader, "t", 0, 0), BASE_TS + 22_000, 22, 0, 40)


def test_empty_answers_at_the_end_are_not_asked_again_and_retries_are_bounded():
    log = Log(monotonic_batches([1] * 10), one_batch=True)
    leader = FlakyLeader(log, {})
    assert partition_fetcher(leader, "t", 0, 0)(10, 128) == b""  # at the high watermark
    assert leader.calls == [10]
    # read_committed: nothing is sent at or after the last stable offset.
    leader = FlakyLeader(log, {6: 99}, last_stable=6)
    assert partition_fetcher(leader, "t", 0, 1)(6, 128) == b""
    assert leader.calls == [6]
    # A broker that keeps answering nothing below the end: the lookup fails, naming where.
    leader = FlakyLeader(log, {3: 99})
    with pytest.raises(
        KafkaProtocolError,
        match=r"Fetch t-0 at offset 3 was answered with no "
        r"records 5 times, below the partition's end",
    ):
        partition_fetcher(leader, "t", 0, 0)(3, 128)
    assert leader.calls == [3] * EMPTY_ANSWER_ATTEMPTS
    leader = FlakyLeader(log, {3: EMPTY_ANSWER_ATTEMPTS - 1})
    assert first_header(partition_fetcher(leader, "t", 0, 0)(3, 128)).base == 3


def test_each_new_fetch_of_an_offset_answered_empty_waits_longer():
    """Tansu 0.6 on a 2.5M-record partition: finding an offset takes ~1.3 ms, and a Fetch
    whose wait is shorter is answered with no records. The search still finds the record,
    first asking with the 1 ms wait (what Kafka answers at once), then longer ones."""
    log = Log(monotonic_batches([1] * 40), one_batch=True)
    leader = FlakyLeader(log, {}, lookup_ms=5)
    assert search_offset(partition_fetcher(leader, "t", 0, 0), BASE_TS + 22_000, 0, 40) == 22
    assert leader.waits[:2] == [1, 10] and set(leader.waits) == {1, 10}
    assert list(EMPTY_ANSWER_WAITS_MS) == sorted(EMPTY_ANSWER_WAITS_MS)
    # A broker slower than the longest wait fails the lookup after every wait was tried.
    leader = FlakyLeader(log, {}, lookup_ms=EMPTY_ANSWER_WAITS_MS[-1] + 1)
    with pytest.raises(KafkaProtocolError, match="answered with no records"):
        partition_fetcher(leader, "t", 0, 0)(3, 128)
    assert leader.waits == list(EMPTY_ANSWER_WAITS_MS)
