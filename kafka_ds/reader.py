"""Read planning (driver) and range reading (executors), shared by batch and streaming.

The driver turns options into offset ranges; each Spark task fetches one range
``[start, end)`` from the partition leader in bounded chunks and yields Arrow
record batches in exactly the schema Spark's Kafka source has.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceReader, InputPartition

from .client import EARLIEST, LATEST, KafkaClient, make_client
from .client.timestamp_offsets import check_answer, partition_fetcher, search_offset
from .columns import arrow_schema, spark_ddl  # noqa: F401  (arrow_schema: re-exported)
from .options import OffsetSpec, ReadOptions
from .worker_process import freeze_long_lived_objects
from .protocol.errors import (
    ConfigurationError,
    DataLossError,
    KafkaError,
    OffsetOutOfRange,
    UnknownTopicId,
    UnknownTopicOrPartition,
)

log = logging.getLogger(__name__)

MAX_FETCH_BYTES_GROWTH = 256 << 20

# The schema is defined once, in kafka_ds/columns.py.
SPARK_SCHEMA = spark_ddl(False)
SPARK_SCHEMA_WITH_HEADERS = spark_ddl(True)


def spark_schema(include_headers: bool) -> str:
    return spark_ddl(include_headers)


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task: read ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int
    # Batch reads: Spark plans a Python source once per DataFrame, but Spark's Kafka
    # source resolves "earliest"/"latest" when each scan runs. A piece whose end came
    # from "latest" (or whose start came from "earliest") is re-resolved by its task.
    late_start: bool = False
    late_end: bool = False


# --- planning (driver) ----------------------------------------------------------------

class OffsetPlanner:
    """Resolves subscriptions and offset specs into concrete offsets via the cluster.
    One planner serves one planning step (a batch read's plan, a micro-batch's offsets,
    a task's rebinding)."""

    def __init__(self, opts: ReadOptions, client: KafkaClient):
        self.opts = opts
        self.client = client
        # (isolation level, topic, partition) -> the Fetch answer that checked ListOffsets:
        # one Fetch per leader serves a step's earliest and latest checks alike.
        self._fetched: dict[tuple[int, str, int], tuple[int, int, int]] = {}

    def _with_retries(self, operation, what, topics=None):
        """Driver-side calls retry under the client's policy, within
        ``kafka.default.api.timeout.ms``."""
        return self.client.retrying(operation, what, topics=topics)

    def topic_partitions(self, max_age_ms: float = 0) -> list[tuple[str, int]]:
        """The subscribed partitions. One Metadata request at most: for
        ``subscribePattern`` (every call, as Spark lists topics every trigger) all
        topics, for ``subscribe`` the subscribed ones unless the cached metadata is
        younger than ``max_age_ms`` (streaming: ``kafka.metadata.max.age.ms``)."""
        sub = self.opts.subscription
        if sub.kind == "assign":
            return list(sub.assignment)
        if sub.kind == "subscribe":
            topics = list(sub.topics)
        else:
            # match_topics fetched every topic's metadata: the cache below is fresh.
            topics = self._with_retries(lambda: self.client.match_topics(sub.pattern),
                                        "Metadata")
            max_age_ms = max(max_age_ms, 1000)
        found = self._with_retries(
            lambda: self.client.partitions_of_topics(topics, max_age_ms), "Metadata",
            topics=topics)
        for topic in topics:
            if topic not in found:
                # Spark's source reads nothing from a subscribed topic that does not exist.
                log.warning("subscribed topic %r does not exist", topic)
        return sorted((topic, p) for topic, partitions in found.items() for p in partitions)

    def list_offsets(self, requests: dict, isolation=None) -> dict:
        if not requests:
            return {}
        level = 1 if (self.opts.read_committed if isolation is None else isolation) else 0
        # KafkaClient.list_offsets retries under the same policy itself. Partitions of a
        # topic deleted meanwhile are left out (the caller reports them).
        found = self.client.list_offsets(requests, isolation_level=level, missing_ok=True)
        if self.opts.latest_via_fetch:
            ends = {tp: wanted for tp, wanted in requests.items()
                    if wanted in (EARLIEST, LATEST) and tp in found}
            for tp, offset in self._check_with_fetch(
                    {tp: found[tp][0] for tp in ends}, ends, level).items():
                found[tp] = (offset, found[tp][1])
        return found

    def _check_with_fetch(self, listed: dict, wanted: dict, level: int) -> dict:
        """Check ListOffsets' earliest and latest answers against one Fetch per leader for
        all partitions: its high watermark (or last stable offset) for latest, its log start
        offset for earliest. On Apache Kafka both agree (the Fetch, at the high watermark,
        carries no records). Tansu answers both from its batches' modification times
        (latest: the newest batch's base offset + 1; earliest: the oldest-written batch's
        base offset, which concurrent producers can make a later batch's), so without the
        check a read would silently start after, or stop before, records it should read.
        Latest takes the larger answer and earliest the smaller: a batch read's range is
        fixed here, at planning."""
        if not listed:
            return {}
        unchecked = {tp: offset for tp, offset in listed.items()
                     if (level, *tp) not in self._fetched}
        if unchecked:
            # KafkaClient.fetch_watermarks retries under the client's policy itself.
            marks = self.client.fetch_watermarks(unchecked, isolation_level=level)
            self._fetched.update(((level, *tp), mark) for tp, mark in marks.items())
        result = {}
        for tp, offset in listed.items():
            high_watermark, last_stable, log_start = self._fetched[(level, *tp)]
            if wanted[tp] == EARLIEST:
                checked = min(offset, log_start) if log_start >= 0 else offset
            else:
                end = last_stable if level and last_stable >= 0 else high_watermark
                checked = max(offset, end)
            if checked != offset:
                log.debug("%s-%d: ListOffsets said %s=%d, Fetch says %d", tp[0], tp[1],
                          "earliest" if wanted[tp] == EARLIEST else "latest", offset, checked)
            result[tp] = checked
        return result

    def offsets_for_times(self, wanted: dict) -> dict:
        """{(topic, partition): timestamp} -> {(t, p): (offset, -1)}: the first offset at or
        after each timestamp (-1: none), by ``timestampOffsetsVia``: ListOffsets trusted
        (``listOffsets``), checked with a small Fetch and searched when wrong (``auto``), or
        searched only (``fetch``; kafka_ds/client/timestamp_offsets.py)."""
        via = self.opts.timestamp_offsets_via
        if not wanted:
            return {}
        listed = {} if via == "fetch" else self.list_offsets(wanted)
        if via == "listOffsets":
            return listed
        tps = [tp for tp in wanted if via == "fetch" or tp in listed]
        earliest, latest = self.earliest(tps), self.latest(tps)
        level = 1 if self.opts.read_committed else 0
        result = {}
        for tp in tps:
            if tp not in earliest or tp not in latest:
                continue   # deleted meanwhile: the caller reports it
            fetch_batch = partition_fetcher(self.client, tp[0], tp[1], level)
            answer = listed[tp][0] if tp in listed else None
            if answer is not None and check_answer(fetch_batch, wanted[tp], answer,
                                                   earliest[tp], latest[tp]):
                result[tp] = (answer, -1)
                continue
            offset = search_offset(fetch_batch, wanted[tp], earliest[tp], latest[tp])
            if answer is not None:
                log.info("%s-%d: ListOffsets answered %d for timestamp %d; the Fetch search "
                         "found %d", tp[0], tp[1], answer, wanted[tp], offset)
            result[tp] = (offset, -1)
        return result

    def _offsets_at(self, markers: dict) -> dict:
        """{(topic, partition): offset} for ``{(topic, partition): EARLIEST or LATEST}``."""
        return {tp: off for tp, (off, _ts) in self.list_offsets(markers).items()}

    def earliest(self, partitions) -> dict:
        """{(topic, partition): earliest offset} of ``partitions``."""
        return self._offsets_at({tp: EARLIEST for tp in partitions})

    def latest(self, partitions) -> dict:
        """{(topic, partition): latest offset} of ``partitions`` (the high watermark; the
        last stable offset with read_committed)."""
        return self._offsets_at({tp: LATEST for tp in partitions})

    def specific(self, spec: OffsetSpec, tps: list[tuple[str, int]], *,
                 keep_latest: bool = False) -> dict:
        """{(topic, partition): offset} for specific offsets (-2 earliest, -1 latest), which
        must name every partition of ``tps``.  ``keep_latest``: -1 stays the LATEST marker
        (a stream pins it when it plans its first batch)."""
        given = spec.for_partitions(tps)     # topic-level values expanded (SPARK-58774)
        missing = [tp for tp in tps if tp not in given]
        extra = [tp for tp in given if tp not in set(tps)]
        if missing or extra:
            details = []
            if missing:
                details.append(f"partitions without an offset: {missing}")
            if extra:
                details.append(f"partitions that are not subscribed: {extra}")
            where = "start" if spec.option.lower().startswith("starting") else "end"
            raise ConfigurationError(
                f"Partitions specified for Kafka {where} offsets don't match what are "
                f"assigned: option '{spec.option}' gives specific offsets, so it must name "
                f"every subscribed partition exactly; {'; '.join(details)}. Use -2 for "
                'earliest and -1 for latest, or "earliest"/"latest" for a whole topic.')
        markers = {tp: off for tp, off in given.items()
                   if off == EARLIEST or (off == LATEST and not keep_latest)}
        resolved = self._offsets_at(markers)
        return {tp: resolved.get(tp, given[tp]) for tp in tps}

    def resolve(self, spec: OffsetSpec, tps: list[tuple[str, int]], *, start: bool) -> dict:
        """{(topic, partition): offset} for ``spec`` over ``tps``."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "specific":
            return self.specific(spec, tps)
        if spec.kind in ("timestamp", "global_timestamp"):
            if spec.kind == "timestamp":
                wanted = spec.as_dict()
                missing = [tp for tp in tps if tp not in wanted]
                if missing:
                    raise ConfigurationError(
                        f"Option '{spec.option}' must give a timestamp for every subscribed "
                        f"partition; missing {missing}")
            else:
                wanted = {tp: spec.timestamp for tp in tps}
            found = self.offsets_for_times({tp: wanted[tp] for tp in tps})
            tps = [tp for tp in tps if tp in found]   # a deleted topic's are left out
            result = {}
            unmatched = [tp for tp in tps if found[tp][0] < 0]
            latest = {}
            if unmatched and (not start or self.opts.timestamp_strategy == "latest"):
                latest = self.latest(unmatched)
            for tp in tps:
                offset = found[tp][0]
                if offset < 0:
                    if start and self.opts.timestamp_strategy == "error":
                        raise DataLossError(
                            f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} "
                            f"and timestamp {wanted[tp]}: no offset of {tp[0]}-{tp[1]} has a "
                            f"timestamp at or after it (option '{spec.option}'). Set "
                            "'startingOffsetsByTimestampStrategy' to 'latest' to start at the "
                            "latest offset instead.")
                    offset = latest[tp]
                result[tp] = offset
            return result
        raise ConfigurationError(f"Option '{spec.option}'={spec.kind} is not valid here")

    def batch_ranges(self, keep=None) -> list[OffsetRange]:
        """One unsplit range per subscribed partition (empty ones included); only of the
        partitions ``keep(topic, partition)`` is true of, when given (pushed filters)."""
        subscribed = self.topic_partitions()
        tps = [tp for tp in subscribed if keep is None or keep(*tp)]
        if not tps:
            return []
        # Specific offsets must name every subscribed partition: checked on all of them.
        starts = self.resolve(self.opts.starting, subscribed if self.opts.starting.kind
                              == "specific" else tps, start=True)
        ends = self.resolve(self.opts.ending, subscribed if self.opts.ending.kind
                            == "specific" else tps, start=False)
        ranges = []
        gone = [tp for tp in tps if tp not in starts or tp not in ends]
        if gone:
            _data_loss(self.opts, "Partitions " + ", ".join(f"{t}-{p}" for t, p in gone)
                       + " disappeared while the read was planned (topic deleted?)")
        for topic, partition in tps:
            if (topic, partition) not in starts or (topic, partition) not in ends:
                continue
            begin, finish = starts[(topic, partition)], ends[(topic, partition)]
            if begin > finish:
                raise DataLossError(
                    f"The resolved start offset {begin} is greater than the resolved end offset "
                    f"{finish} for topic {topic} partition {partition}: check options "
                    "'startingOffsets'/'endingOffsets' (or their timestamp forms); the topic "
                    "may also have been truncated.")
            ranges.append(OffsetRange(topic, partition, begin, finish))
        return ranges

    def plan_batch(self) -> list[OffsetRange]:
        return split_ranges(self.batch_ranges(), self.opts.min_partitions,
                            self.opts.max_records_per_partition)


def _divide(rng: OffsetRange, parts: int) -> list[OffsetRange]:
    """Split evenly; the last part takes the rounding remainder (as Spark does)."""
    out = []
    remaining = rng.size
    begin = rng.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        finish = min(begin + this, rng.end)
        if finish > begin:
            out.append(OffsetRange(rng.topic, rng.partition, begin, finish))
        begin = finish
    return out


def split_ranges(ranges, min_partitions=None, max_records=None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: drop empty ranges, cap records per range,
    then split large ranges in proportion to their size until there are at least
    ``min_partitions``."""
    ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records is None:
        return ranges
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _divide(r, math.ceil(r.size / max_records))]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size, total_size, min_parts):
        # Scala's math.round rounds half up (Python's round() would round half to even).
        return max(math.floor(size / total_size * min_parts + 0.5), 1)

    unsplit = [r for r in ranges if part_count(r.size, total, min_partitions) == 1]
    unsplit_ids = {id(r) for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for r in ranges:
        parts = 1 if id(r) in unsplit_ids else part_count(r.size, split_total, split_min)
        out.extend(_divide(r, parts))
    return out


# --- reading (executors) ----------------------------------------------------------------

def _data_loss(opts: ReadOptions, message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost because it is no longer available in "
            "Kafka (aged out, or the topic was deleted). If you want the query to continue "
            "with what is left, set the option 'failOnDataLoss' to 'false'.")
    log.warning("%s; continuing because failOnDataLoss=false", message)


class _PartitionColumns:
    """The ``topic`` and ``partition`` columns of one task's batches: built once, as long
    as the longest batch so far, and sliced (zero-copy) for every batch."""

    def __init__(self, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self.rows = 0
        self.columns = None

    def __call__(self, rows: int):
        import pyarrow as pa

        if rows > self.rows:
            self.rows = max(rows, 2 * self.rows)
            self.columns = (pa.repeat(self.topic, self.rows).cast(pa.string()),
                            pa.repeat(pa.scalar(self.partition, pa.int32()), self.rows))
        topic_column, partition_column = self.columns
        if rows == self.rows:
            return topic_column, partition_column
        return topic_column.slice(0, rows), partition_column.slice(0, rows)


def read_range(opts: ReadOptions, rng, client: KafkaClient | None = None):
    """Yield ``pyarrow.RecordBatch``es of ``rng`` = [start, end) of one topic-partition.

    The next Fetch is under way while an answer is decoded and its batch handed to Spark
    (kafka_ds/fetch_pipeline.py); every decision below is taken on the answer at exactly
    the offset this loop asks for."""
    import threading

    import numpy as np
    import pyarrow as pa

    from .fetch_pipeline import FetchAhead, fetch_partition
    from .protocol.records import decode_records
    from .record_timestamps import check_timestamps

    if not hasattr(rng, "topic"):
        # Spark runs one placeholder InputPartition when a reader plans none.
        return
    schema = arrow_schema(opts.include_headers)
    topic, partition, end = rng.topic, rng.partition, rng.end
    offset = rng.start
    if offset >= end:
        return
    own_client = client is None
    client = client or make_client(opts)
    fetch_bytes = opts.max_partition_fetch_bytes
    level = 1 if opts.read_committed else 0
    stalls = 0
    stopping = threading.Event()
    connection_used = [None]

    def interrupt():
        conn = connection_used[0]
        if conn is not None:
            conn.interrupt()

    fetches = FetchAhead(
        fetch_partition(client, opts, topic, partition, level, stopping, connection_used),
        limit=end, name=f"kafka_ds-fetch {topic}-{partition}", interrupt=interrupt,
        stopping=stopping)
    partition_columns = _PartitionColumns(topic, partition)
    try:
        while offset < end:
            part = _fetch_with_retries(fetches, opts, topic, partition, offset, fetch_bytes)
            if part is None:   # topic/partition gone, failOnDataLoss=false
                return
            code = part["error_code"]
            if code == OffsetOutOfRange.code:
                fetches.quiesce()     # the client is this thread's again
                earliest = client.list_offsets({(topic, partition): EARLIEST})[(topic, partition)][0]
                if offset < earliest:
                    _data_loss(opts, f"Offsets [{offset}, {min(earliest, end)}) of "
                               f"{topic}-{partition} are no longer available (earliest is "
                               f"{earliest})")
                    offset = earliest
                    continue
                _data_loss(opts, f"Offset {offset} of {topic}-{partition} is out of range "
                           f"(earliest {earliest}); the requested range ends at {end}")
                return
            records = part["records"] or b""
            high_watermark = part["high_watermark"]
            last_stable = part.get("last_stable_offset", -1)
            aborted = [(a["producer_id"], a["first_offset"])
                       for a in (part.get("aborted_transactions") or [])]
            part = None
            result = decode_records(
                records, topic=topic, partition=partition, fetch_offset=offset,
                include_headers=opts.include_headers, read_committed=opts.read_committed,
                aborted_transactions=aborted)
            if result.batch is not None and result.batch.num_rows:
                check_timestamps(result.batch, records, topic, partition, end)
            # The decoded columns own copies of the bytes they need: let the response
            # frame (up to the fetch size) go before the batch is handed out, and hold
            # no reference to the batch while the next fetch is received.
            records = None
            batch, next_offset, truncated = result.batch, result.next_offset, result.truncated
            result = None
            if batch is not None and batch.num_rows:
                n = batch.num_rows
                if next_offset > end:
                    # Only the last answer of a range holds records past its end.
                    offsets = batch.column("offset").to_numpy()
                    n = int(np.searchsorted(offsets, end, side="left"))
                if n:
                    if n < batch.num_rows:
                        batch = batch.slice(0, n)
                    added = dict(zip(("topic", "partition"), partition_columns(n)))
                    columns = [added[name] if name in added else batch.column(name)
                               for name in schema.names]
                    batch = pa.RecordBatch.from_arrays(columns, schema=schema)
                    columns = None
                    if opts.typed is not None:    # valueFormat / keyFormat
                        batch = opts.typed.decode_batch(batch, topic, partition)
                    yield batch
            batch = None
            if next_offset > offset:
                offset = next_offset
                stalls = 0
                continue
            # No complete batch came back.
            available = last_stable if opts.read_committed and last_stable >= 0 \
                else high_watermark
            if truncated and fetch_bytes < MAX_FETCH_BYTES_GROWTH:
                # A single batch larger than the fetch size: ask for more.
                fetch_bytes *= 2
                continue
            if offset >= available:
                if opts.read_committed and available < end:
                    # An open transaction holds the last stable offset back: wait for it.
                    stalls += 1
                    if stalls > 60:
                        raise KafkaError(
                            f"{topic}-{partition}: last stable offset stayed at {available} "
                            f"below the planned end {end}; an open transaction did not finish")
                    time.sleep(0.5)
                    continue
                _data_loss(opts, f"{topic}-{partition} ends at offset {available} but the "
                           f"query planned to read up to {end} (records were deleted or the "
                           "partition was truncated)")
                return
            stalls += 1
            if stalls > 5:
                raise KafkaError(
                    f"Fetch of {topic}-{partition} at offset {offset} returned no complete "
                    f"record batch {stalls} times (high watermark {high_watermark}, "
                    f"fetch size {fetch_bytes} bytes)")
            time.sleep(0.05 * stalls)
    finally:
        fetches.close()
        if own_client:
            client.close()
        log.debug("%s-%d [%d, %d): fetched ahead (guessed right/wrong): %d/%d", topic,
                  partition, rng.start, end, fetches.guessed_right, fetches.guessed_wrong)


def _fetch_with_retries(fetches, opts, topic, partition, offset, fetch_bytes):
    """The Fetch answer at ``offset`` (retried within ``kafkaConsumer.pollTimeoutMs`` by
    ``fetch_pipeline.fetch_partition``); None when the partition is gone and
    failOnDataLoss=false."""
    try:
        return fetches.get(offset, fetch_bytes)
    except KafkaError as exc:
        if isinstance(exc, (UnknownTopicOrPartition, UnknownTopicId)):
            _data_loss(opts, f"{topic}-{partition} no longer exists (was the topic deleted?) "
                       f"while reading from offset {offset}: {exc}")
            return None
        raise


class KafkaBatchReader(DataSourceReader):
    """``spark.read.format("pykafka")``: the driver plans offset ranges, each task reads one."""

    def __init__(self, opts):
        self.opts = opts

    def plan(self, planner):
        """``(ranges, partitions whose start is resolved again by the task, ... end ...)``."""
        ranges = planner.batch_ranges()
        tps = [(r.topic, r.partition) for r in ranges]
        return (ranges, late_offsets(self.opts.starting, tps, EARLIEST),
                late_offsets(self.opts.ending, tps, LATEST))

    def partitions(self):
        client = make_client(self.opts)
        try:
            ranges, late_start, late_end = self.plan(OffsetPlanner(self.opts, client))
        finally:
            client.close()
        return plan_late_bound(ranges, late_start, late_end, self.opts.min_partitions,
                               self.opts.max_records_per_partition)

    def read(self, partition):
        freeze_long_lived_objects()
        if not getattr(partition, "late_start", False) and not getattr(partition, "late_end",
                                                                         False):
            yield from read_range(self.opts, partition)
            return
        client = make_client(self.opts)
        try:
            rng = rebind(self.opts, client, partition)
            if rng is not None:
                yield from read_range(self.opts, rng, client)
        finally:
            client.close()


def late_offsets(spec: OffsetSpec, tps, marker: int) -> set:
    """Partitions whose offset ``spec`` gives as ``marker`` (EARLIEST or LATEST), i.e. to be
    resolved again when the scan runs."""
    if spec.kind == ("earliest" if marker == EARLIEST else "latest"):
        return set(tps)
    if spec.kind == "specific":
        return {tp for tp, off in spec.for_partitions(tps).items() if off == marker}
    return set()


def plan_late_bound(ranges, late_start: set, late_end: set, min_partitions, max_records):
    """Split like Spark, then flag the first piece of a partition whose start is "earliest"
    and the last piece of one whose end is "latest". A partition empty now but with a
    "latest" end keeps one (empty) task: records produced before a later action are read."""
    pieces = split_ranges(ranges, min_partitions, max_records)
    first, last = {}, {}
    for i, r in enumerate(pieces):
        tp = (r.topic, r.partition)
        first.setdefault(tp, i)
        last[tp] = i
    out = [KafkaInputPartition(r.topic, r.partition, r.start, r.end,
                               late_start=(r.topic, r.partition) in late_start
                               and first[(r.topic, r.partition)] == i,
                               late_end=(r.topic, r.partition) in late_end
                               and last[(r.topic, r.partition)] == i)
           for i, r in enumerate(pieces)]
    for r in ranges:
        tp = (r.topic, r.partition)
        if tp not in first and tp in late_end:
            out.append(KafkaInputPartition(r.topic, r.partition, r.start, r.end,
                                           late_start=tp in late_start, late_end=True))
    return out


def rebind(opts: ReadOptions, client: KafkaClient, piece):
    """``piece`` with its "earliest" start / "latest" end resolved now (None: nothing to
    read). Runs in the task, so each Spark action reads up to the offsets of its time."""
    tp = (piece.topic, piece.partition)
    planner = OffsetPlanner(opts, client)
    begin, finish = piece.start, piece.end
    try:
        # The planner leaves out partitions of a topic deleted since planning.
        if piece.late_start:
            begin = planner.earliest([tp]).get(tp)
        if piece.late_end and begin is not None:
            finish = planner.latest([tp]).get(tp)
        gone = begin is None or finish is None
        reason = ""
    except (UnknownTopicOrPartition, UnknownTopicId) as exc:
        gone, reason = True, f": {exc}"
    if gone:
        _data_loss(opts, f"{tp[0]}-{tp[1]} no longer exists (was the topic deleted?){reason}")
        return None
    if piece.late_start and not piece.late_end:
        # Later pieces of this partition start at the planned end: never read past it.
        begin = min(begin, piece.end)
    if piece.late_end and not piece.late_start:
        if finish < begin:
            _data_loss(opts, f"{tp[0]}-{tp[1]} now ends at offset {finish}, before the planned "
                       f"start {begin} (records were deleted or the topic re-created)")
            return None
    if finish <= begin:
        return None
    return OffsetRange(piece.topic, piece.partition, begin, finish)
