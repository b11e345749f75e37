"""``df.write.format("pykafka")`` and ``df.writeStream.format("pykafka")``.

Driver side: :func:`plan_columns` checks the DataFrame's columns (names and types, as
Spark's Kafka sink does) and the options; the writer object is then pickled to the
tasks.

Task side (:class:`TaskWriter`), per Arrow batch and without a Python object per row:
the topic of every row (option or column), its partition (the ``partition`` column,
else murmur2 of the key, else sticky for null keys), one stable sort by
(topic, partition) and zero-copy slices per partition, buffered until about
``kafka.batch.size`` bytes (or ``kafka.linger.ms``), then encoded into RecordBatch v2
column-wise and handed to the :class:`~kafka_ds.client.producer.Producer`. ``write``
returns only after every batch is acknowledged, with the per-partition counts and
offset ranges in its commit message.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)

from .client import KafkaClient
from .client.producer import Producer
from .client.transactions import Transaction
from .columns import sink_column, spark_type_name
from .compat import DataSourceStreamArrowWriter
from .options import WriteOptions
from .partitioner import StickyPartitioner, partitions_for_keys
from .protocol.compression import codec_id
from .protocol.errors import BrokerError, ConfigurationError, UnknownTopicOrPartition
from .protocol.records import V2_HEADER_SIZE, encode_record_batch
from .protocol.records_arrays import as_binary_array, binary_lengths, zigzag_varint_sizes
from .protocol.records_encode import flatten_headers, header_sizes

log = logging.getLogger(__name__)

# --- the columns (driver) ------------------------------------------------------------------

@dataclass(frozen=True)
class ColumnPlan:
    """Where each Kafka field is in the written rows (column positions; -1 = absent)."""

    value: int
    key: int = -1
    topic: int = -1
    partition: int = -1
    headers: int = -1
    timestamp: int = -1
    names: tuple = ()


def plan_columns(schema, opts: WriteOptions) -> ColumnPlan:
    """Check the written DataFrame's schema; a ConfigurationError names column and fix.

    Column names match case-insensitively (as in Spark's Kafka sink); other columns
    are ignored.  Which columns are read, with which types: ``kafka_ds.columns``.
    """
    found = {}
    for index, fld in enumerate(schema.fields):
        column = sink_column(fld.name)
        if column is not None:
            if column.name in found:
                raise ConfigurationError(
                    f"The DataFrame has two '{column.name}' columns (names match "
                    "case-insensitively): keep one")
            found[column.name] = (index, fld)
    have = ", ".join(f.name for f in schema.fields) or "none"
    if "value" not in found:
        raise ConfigurationError(
            "The DataFrame written to Kafka needs a 'value' column (binary or string); its "
            f"columns are: {have}. Example: df.selectExpr('to_json(struct(*)) AS value')")
    index_of = {}
    for name, (index, fld) in found.items():
        if name == "topic" and opts.topic is not None:
            continue      # the option names the topic; the column is ignored
        column = sink_column(name)
        if spark_type_name(fld.dataType) not in column.sink_types:
            raise ConfigurationError(
                f"Column '{fld.name}' must be {' or '.join(column.sink_types)} to be written to "
                f"Kafka, but it is {fld.dataType.simpleString()}: {column.sink_fix}.")
        index_of[name] = index
    if opts.topic is None and "topic" not in found:
        raise ConfigurationError(
            "No topic to write to: set the option 'topic' (.option(\"topic\", \"name\")) or "
            f"add a string 'topic' column; the DataFrame's columns are: {have}")
    return ColumnPlan(names=tuple(f.name for f in schema.fields), **index_of)


def check_topic_exists(opts: WriteOptions) -> None:
    """Fail on the driver, before any task runs, when the 'topic' option names a topic the
    cluster does not have (and, with ``kafka.allow.auto.create.topics``, does not create)."""
    if opts.topic is None:
        return
    client = KafkaClient(opts.bootstrap_servers, opts.client)
    try:
        _partition_count(client, opts.topic, opts.bootstrap_servers,
                         opts.allow_auto_create_topics)
    finally:
        client.close()


def _partition_count(client: KafkaClient, topic: str, bootstrap: str,
                     allow_auto_create: bool = True) -> int:
    """Partitions of ``topic``; a clear error when it does not exist (and was not created).

    ``allow_auto_create`` (``kafka.allow.auto.create.topics``, default true, as the Java
    producer) asks for metadata with AllowAutoTopicCreation, so brokers with
    auto.create.topics.enable create a missing topic as they do for Spark's
    ``format("kafka")`` sink; such a topic shows up after LEADER_NOT_AVAILABLE answers."""
    deadline = time.monotonic() + (10.0 if allow_auto_create else 1.0)
    attempt = 0
    while True:
        def lookup(refresh=attempt > 0):
            # Connection failures (a broker restarting) retry under the client's policy;
            # an unknown topic comes back here: it gets only the short grace below.
            try:
                return client.topic_partitions(
                    topic, refresh=refresh, allow_auto_topic_creation=allow_auto_create)
            except UnknownTopicOrPartition as exc:
                return exc

        try:
            partitions = client.retrying(lookup, f"Metadata of topic '{topic}'")
            if isinstance(partitions, BrokerError):
                raise partitions
            if partitions:
                return len(partitions)
        except BrokerError as exc:
            if not isinstance(exc, UnknownTopicOrPartition) and not exc.retriable:
                raise ConfigurationError(
                    f"Cannot write to topic '{topic}': {exc}") from exc
            unknown = isinstance(exc, UnknownTopicOrPartition)
            if time.monotonic() >= deadline or (unknown and attempt >= 3):
                if unknown:
                    break
                raise
        attempt += 1
        time.sleep(min(0.1 * attempt, 1.0))
    if allow_auto_create:
        how = ("The cluster did not create it on request (as for Spark's format('kafka') "
               "sink, a missing topic is created only by brokers with "
               "auto.create.topics.enable=true): create it first (e.g. kafka-topics.sh "
               "--create), or fix the 'topic' option / topic column.")
    else:
        how = ("The pykafka sink does not create topics with "
               "'kafka.allow.auto.create.topics'=false: create it first (e.g. kafka-topics.sh "
               "--create), or fix the 'topic' option / topic column.")
    raise ConfigurationError(
        f"Topic '{topic}' does not exist on the cluster at kafka.bootstrap.servers={bootstrap}. "
        + how)


# --- commit messages -----------------------------------------------------------------------

@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one write task delivered.

    ``partitions``: ``(topic, partition, records, first_offset, last_offset)`` per
    partition written; offsets are -1 when unknown (``acks=0``, or every batch was
    acknowledged as a duplicate of an earlier attempt). Other tasks may have written to
    the same partition in between, so ``records`` can be less than the range's length.
    """

    task: int
    records: int
    bytes: int
    partitions: list = field(default_factory=list)
    retries: int = 0
    seconds: float = 0.0
    # deliveryGuarantee=exactly-once: the task's open transaction, for the driver to end
    # (producer_id -1: no transaction). ``skipped``: a replayed micro-batch already committed.
    transactional_id: str | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    skipped: bool = False


@dataclass
class WriteSummary:
    """All tasks' commit messages folded per (topic, partition)."""

    records: int = 0
    bytes: int = 0
    tasks: int = 0
    failed_tasks: int = 0
    retries: int = 0
    partitions: dict = field(default_factory=dict)   # (topic, partition) -> [records, first, last]

    @classmethod
    def of(cls, messages) -> "WriteSummary":
        summary = cls()
        for message in messages:
            if message is None:
                summary.failed_tasks += 1
                continue
            summary.tasks += 1
            summary.records += message.records
            summary.bytes += message.bytes
            summary.retries += message.retries
            for topic, partition, records, first, last in message.partitions:
                entry = summary.partitions.setdefault((topic, partition), [0, -1, -1])
                entry[0] += records
                if first >= 0 and (entry[1] < 0 or first < entry[1]):
                    entry[1] = first
                if last > entry[2]:
                    entry[2] = last
        return summary

    def describe(self) -> str:
        parts = []
        for (topic, partition), (records, first, last) in sorted(self.partitions.items()):
            offsets = f" offsets {first}-{last}" if first >= 0 else ""
            parts.append(f"{topic}-{partition}: {records}{offsets}")
        text = (f"{self.records} records ({self.bytes} bytes in record batches) from "
                f"{self.tasks} tasks")
        if self.failed_tasks:
            text += f", {self.failed_tasks} tasks failed"
        if self.retries:
            text += f", {self.retries} retried batches"
        return text + (": " + ", ".join(parts) if parts else "")


# --- the task side ---------------------------------------------------------------------

def _spark_partition_id() -> int:
    try:
        from pyspark import TaskContext
        context = TaskContext.get()
        return context.partitionId() if context is not None else -1
    except Exception:   # not in a Spark task (tests, tools)
        return -1


def _timestamps_ms(col, now_ms: int) -> np.ndarray:
    """Epoch milliseconds (floor, as Spark's Kafka sink) of a timestamp column; nulls -> now."""
    unit = col.type.unit
    raw = col.cast(pa.int64())
    values = np.asarray(raw.fill_null(0), dtype=np.int64)
    if unit == "s":
        ms = values * 1000
    elif unit == "ms":
        ms = values.copy()
    elif unit == "us":
        ms = values // 1000
    else:
        ms = values // 1_000_000
    if raw.null_count:
        ms[np.asarray(raw.is_null())] = now_ms
    return ms


class _TopicState:
    __slots__ = ("name", "num_partitions", "sticky")

    def __init__(self, name, num_partitions, batch_size):
        self.name = name
        self.num_partitions = num_partitions
        self.sticky = StickyPartitioner(num_partitions, batch_size)


class _Buffer:
    """Rows of one partition waiting to be encoded (Arrow slices of several input batches)."""

    __slots__ = ("keys", "values", "headers", "timestamps", "rows", "sizes", "bytes", "since")

    def __init__(self):
        self.keys, self.values, self.headers = [], [], []
        self.timestamps, self.rows, self.sizes = [], [], []
        self.bytes = 0
        self.since = time.monotonic()

    def add(self, keys, values, headers, timestamps, rows, sizes):
        self.keys.append(keys)
        self.values.append(values)
        self.headers.append(headers)
        self.timestamps.append(timestamps)
        self.rows.append(rows)
        self.sizes.append(sizes)
        self.bytes += int(sizes.sum())


def _concat(arrays, length_of, typ):
    """Concatenate Arrow slices; ``None`` entries (column absent) become nulls."""
    if all(a is None for a in arrays):
        return None
    if len(arrays) == 1:
        return arrays[0]
    filled = [a if a is not None else pa.nulls(length_of[i], typ) for i, a in enumerate(arrays)]
    return pa.concat_arrays(filled)


class TaskWriter:
    """Writes one task's Arrow batches; not thread-safe. ``close()`` when done."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan, task: int | None = None,
                 transactional_id: str | None = None):
        self.opts = opts
        self.plan = plan
        self.task = _spark_partition_id() if task is None else task
        # Both settings objects were built on the driver (kafka_ds.options).
        self.client = KafkaClient(opts.bootstrap_servers, opts.client)
        producer_config = opts.producer
        if transactional_id is not None:
            producer_config = dataclasses.replace(producer_config,
                                                  transactional_id=transactional_id)
        self.producer = Producer(self.client, producer_config)
        self.transaction: Transaction | None = None
        if transactional_id is not None:
            # Begun at once, rows or not: the new epoch fences an earlier attempt of this
            # task and aborts what it left open.
            self.transaction = Transaction(self.client, transactional_id,
                                           opts.transaction_timeout_ms,
                                           timeout_ms=opts.delivery_timeout_ms)
            self.transaction.begin()
            self.producer.use_transaction(self.transaction.producer_id,
                                          self.transaction.producer_epoch)
        self.codec = codec_id(opts.compression)
        # A batch must fit the batch size and a request (with the request's own overhead).
        self.batch_limit = max(min(opts.batch_size, opts.max_request_size), V2_HEADER_SIZE + 1)
        self.topics: dict[str, _TopicState] = {}
        self.buffers: dict[tuple[str, int], _Buffer] = {}
        self.rows_seen = 0
        self.started = time.monotonic()

    # --- context for errors ---

    def describe_rows(self, rows: np.ndarray) -> str:
        where = f"Spark partition {self.task}" if self.task >= 0 else "this write task"
        if len(rows) == 1:
            return f"row {int(rows[0])} of {where}'s input"
        return (f"{len(rows)} rows of {where}'s input between row {int(rows.min())} and "
                f"{int(rows.max())}")

    def _topic(self, name: str) -> _TopicState:
        state = self.topics.get(name)
        if state is None:
            count = _partition_count(self.client, name, self.opts.bootstrap_servers,
                                     self.opts.allow_auto_create_topics)
            state = self.topics[name] = _TopicState(name, count, self.opts.batch_size)
        return state

    # --- per Arrow batch ---

    def write_batch(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        plan = self.plan
        first_row = self.rows_seen
        self.rows_seen += n
        now_ms = int(time.time() * 1000)
        values = as_binary_array(batch.column(plan.value), "value")
        keys = as_binary_array(batch.column(plan.key), "key") if plan.key >= 0 else None
        if keys is not None and keys.null_count == n:
            keys = None
        headers = batch.column(plan.headers) if plan.headers >= 0 else None
        if headers is not None and isinstance(headers, pa.ChunkedArray):
            headers = headers.combine_chunks()
        if plan.timestamp >= 0:
            timestamps = _timestamps_ms(batch.column(plan.timestamp), now_ms)
            negative = np.flatnonzero(timestamps < 0)
            if len(negative):
                raise ConfigurationError(
                    f"Column 'timestamp' is before 1970-01-01 at "
                    f"{self.describe_rows(first_row + negative[:1])}; Kafka timestamps must be "
                    "at or after the epoch (or null for the produce time)")
        else:
            timestamps = np.full(n, now_ms, dtype=np.int64)

        # Estimated size of every record in a batch: an upper bound, so batches built from
        # it never exceed kafka.batch.size / kafka.max.request.size.
        # (lengths are -1 for nulls, as written: a 1-byte varint and no bytes)
        key_len = binary_lengths(keys) if keys is not None else np.full(n, -1, dtype=np.int64)
        value_len = binary_lengths(values)
        header_bytes, header_counts = self._header_sizes(headers, n, first_row)
        # attributes byte, timestamp delta (a batch may also hold rows of other Arrow
        # batches: allow ~17 minutes more), offset delta (< records in a batch)
        span = int(timestamps.max() - timestamps.min()) + 1_000_000
        fixed = 1 + int(zigzag_varint_sizes(np.array([span, self.batch_limit])).sum())
        body = (fixed + np.maximum(key_len, 0) + zigzag_varint_sizes(key_len)
                + np.maximum(value_len, 0) + zigzag_varint_sizes(value_len)
                + header_bytes + zigzag_varint_sizes(header_counts))
        sizes = body + zigzag_varint_sizes(body)
        too_big = np.flatnonzero(sizes + V2_HEADER_SIZE > self.opts.max_request_size)

        topic_names, topic_index = self._topics_of(batch, n, first_row)
        states = [self._topic(t) for t in topic_names]
        counts = np.array([s.num_partitions for s in states], dtype=np.int64)
        rows_partitions = counts[topic_index] if topic_index is not None else counts[0]

        partitions = np.full(n, -1, dtype=np.int32)
        if plan.partition >= 0:
            col = batch.column(plan.partition)
            given = np.asarray(col.fill_null(-1), dtype=np.int32)
            explicit = given >= 0
            if col.null_count < n:
                bad = np.flatnonzero(explicit & (given >= rows_partitions)
                                     | (~explicit & ~np.asarray(col.is_null())))
                if len(bad):
                    row = int(bad[0])
                    topic = topic_names[topic_index[row] if topic_index is not None else 0]
                    count = counts[topic_index[row] if topic_index is not None else 0]
                    raise ConfigurationError(
                        f"Column 'partition' is {int(given[row])} at "
                        f"{self.describe_rows(np.array([first_row + row]))}, but topic "
                        f"'{topic}' has partitions 0..{count - 1}: fix the partition column, "
                        "or set it to null to let the partitioner choose")
            partitions = np.where(explicit, given, -1).astype(np.int32)
        need = partitions < 0
        if need.any():
            if keys is not None:
                keyed = need & ~np.asarray(keys.is_null()) if keys.null_count else need
                if keyed.all():
                    partitions = partitions_for_keys(keys, rows_partitions)
                elif keyed.any():
                    where = np.flatnonzero(keyed)
                    per_row = rows_partitions[where] if topic_index is not None else rows_partitions
                    partitions[where] = partitions_for_keys(keys.take(pa.array(where)), per_row)
                need = need & ~keyed
            if need.any():
                for t, state in enumerate(states):
                    rows = np.flatnonzero(need if topic_index is None else need & (topic_index == t))
                    if len(rows):
                        partitions[rows] = state.sticky.assign(sizes[rows])

        if len(too_big):
            row = int(too_big[0])
            topic = topic_names[topic_index[row] if topic_index is not None else 0]
            raise ConfigurationError(
                f"The record at {self.describe_rows(np.array([first_row + row]))} for topic "
                f"'{topic}' partition {int(partitions[row])} is about "
                f"{int(sizes[row]) + V2_HEADER_SIZE} bytes, more than 'kafka.max.request.size' "
                f"({self.opts.max_request_size}): raise that option (and the topic's "
                "max.message.bytes) or write a smaller record")

        # One stable sort by (topic, partition) keeps every partition's rows in input order.
        if topic_index is not None:
            base = np.zeros(len(states) + 1, dtype=np.int64)
            np.cumsum(counts, out=base[1:])
            group = base[topic_index] + partitions
        else:
            group = partitions.astype(np.int64)
        order = np.argsort(group, kind="stable")
        sorted_group = group[order]
        cuts = np.flatnonzero(sorted_group[1:] != sorted_group[:-1]) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [n]))
        take = pa.array(order)
        values_s = values.take(take)
        keys_s = keys.take(take) if keys is not None else None
        headers_s = headers.take(take) if headers is not None else None
        timestamps_s = timestamps[order]
        rows_s = order + first_row
        sizes_s = sizes[order]
        topic_of_group = topic_index[order[starts]] if topic_index is not None else None
        for g, (start, end) in enumerate(zip(starts.tolist(), ends.tolist())):
            topic = topic_names[topic_of_group[g]] if topic_of_group is not None else topic_names[0]
            partition = int(partitions[order[start]])
            length = end - start
            buffer = self.buffers.get((topic, partition))
            if buffer is None:
                buffer = self.buffers[(topic, partition)] = _Buffer()
            buffer.add(keys_s.slice(start, length) if keys_s is not None else None,
                       values_s.slice(start, length),
                       headers_s.slice(start, length) if headers_s is not None else None,
                       timestamps_s[start:end], rows_s[start:end], sizes_s[start:end])
        self._emit(final=False)

    def _topics_of(self, batch, n, first_row):
        """(topic names, per-row index into them or None when every row has the same)."""
        if self.opts.topic is not None:
            return [self.opts.topic], None
        col = batch.column(self.plan.topic)
        if col.null_count:
            row = int(np.flatnonzero(np.asarray(col.is_null()))[0])
            raise ConfigurationError(
                f"Column 'topic' is null at {self.describe_rows(np.array([first_row + row]))}: "
                "every row needs a topic; fill the column or set the 'topic' option")
        encoded = pc.dictionary_encode(col)
        names = encoded.dictionary.to_pylist()
        if len(names) == 1:
            return names, None
        return names, np.asarray(encoded.indices, dtype=np.int64)

    def _header_sizes(self, headers, n, first_row):
        """(encoded header bytes per record, header count per record)."""
        if headers is None:
            return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        record_offsets, flat = flatten_headers(headers)
        counts = np.diff(record_offsets)
        if len(flat) == 0:
            return np.zeros(n, dtype=np.int64), counts
        hkeys = as_binary_array(flat.field("key"), "header key")
        hvalues = as_binary_array(flat.field("value"), "header value")
        if hkeys.null_count or flat.null_count:
            bad = np.flatnonzero(np.asarray(hkeys.is_null()) | np.asarray(flat.is_null()))[0]
            row = int(np.searchsorted(record_offsets, bad, side="right") - 1)
            raise ConfigurationError(
                f"Column 'headers' has a header with a null key (or a null header) at "
                f"{self.describe_rows(np.array([first_row + row]))}: header keys must be "
                "strings; filter the nulls out of the array")
        return np.diff(header_sizes(hkeys, hvalues, record_offsets).record_offsets), counts

    # --- batching ---

    def _emit(self, final: bool) -> None:
        now = time.monotonic()
        linger = self.opts.linger_ms / 1000.0
        if self.transaction is not None:
            # Every buffered row goes out in this transaction: one AddPartitionsToTxn for
            # the partitions new to it, before their first batch.
            self.transaction.add_partitions(self.buffers)
        for key in list(self.buffers):
            buffer = self.buffers[key]
            due = final or now - buffer.since >= linger
            if not due and buffer.bytes + V2_HEADER_SIZE < self.batch_limit:
                continue
            del self.buffers[key]
            self._encode_and_send(key, buffer, keep_tail=not due)

    def _encode_and_send(self, key, buffer: _Buffer, keep_tail: bool) -> None:
        topic, partition = key
        lengths = [len(v) for v in buffer.values]
        values = _concat(buffer.values, lengths, pa.binary())
        keys = _concat(buffer.keys, lengths, pa.binary())
        headers = _concat(buffer.headers, lengths, buffer_type(buffer.headers))
        timestamps = buffer.timestamps[0] if len(lengths) == 1 else np.concatenate(buffer.timestamps)
        rows = buffer.rows[0] if len(lengths) == 1 else np.concatenate(buffer.rows)
        sizes = buffer.sizes[0] if len(lengths) == 1 else np.concatenate(buffer.sizes)
        n = len(values)
        cumulative = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=cumulative[1:])
        room = self.batch_limit - V2_HEADER_SIZE
        start = 0
        while start < n:
            # Greedy: as many records as fit, at least one.
            end = int(np.searchsorted(cumulative, cumulative[start] + room, side="right")) - 1
            end = min(max(end, start + 1), n)
            if keep_tail and end == n and cumulative[n] - cumulative[start] + V2_HEADER_SIZE \
                    < self.batch_limit:
                # Not full and still allowed to linger: keep for the next Arrow batch.
                tail = _Buffer()
                tail.since = buffer.since
                tail.add(keys.slice(start) if keys is not None else None, values.slice(start),
                         headers.slice(start) if headers is not None else None,
                         timestamps[start:], rows[start:], sizes[start:])
                self.buffers[key] = tail
                return
            count = end - start
            producer_id, epoch, sequence = self.producer.batch_identity(topic, partition, count)
            while True:
                data = encode_record_batch(
                    keys=keys.slice(start, count) if keys is not None else None,
                    values=values.slice(start, count),
                    headers=headers.slice(start, count) if headers is not None else None,
                    timestamps_ms=timestamps[start:start + count], compression=self.codec,
                    producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                    is_transactional=self.transaction is not None)
                if len(data) <= self.opts.max_request_size:
                    break
                # Incompressible data can come out of a codec a little larger than it went
                # in: halve the batch rather than send an oversized request.
                if count == 1:
                    raise ConfigurationError(
                        f"The record at {self.describe_rows(rows[start:start + 1])} for topic "
                        f"'{topic}' partition {partition} is {len(data)} bytes as a "
                        f"{self.opts.compression} record batch, more than "
                        f"'kafka.max.request.size' ({self.opts.max_request_size})")
                count //= 2
            end = start + count
            self.producer.send(topic, partition, data, count, base_sequence=sequence,
                               rows=rows[start:end], describe_rows=self.describe_rows)
            start = end

    # --- end of the task ---

    def finish(self) -> KafkaCommitMessage:
        self._emit(final=True)
        self.producer.flush()
        partitions = []
        records = 0
        for (topic, partition), result in sorted(self.producer.results().items()):
            partitions.append((topic, partition, result.records, result.first_offset,
                               result.last_offset))
            records += result.records
        stats = self.producer.stats
        message = KafkaCommitMessage(task=self.task, records=records, bytes=stats.bytes_sent,
                                     partitions=partitions, retries=stats.retries,
                                     seconds=round(time.monotonic() - self.started, 3))
        if self.transaction is not None:
            message.transactional_id = self.transaction.transactional_id
            if self.transaction.partitions:   # an empty transaction has nothing to end
                message.producer_id = self.transaction.producer_id
                message.producer_epoch = self.transaction.producer_epoch
        return message

    def close(self) -> None:
        self.client.close()


def buffer_type(arrays):
    for a in arrays:
        if a is not None:
            return a.type
    return pa.null()


def write_batches(opts: WriteOptions, plan: ColumnPlan, batches, task: int | None = None,
                  transactional_id: str | None = None):
    """Write an iterator of Arrow batches; the commit message once all are acknowledged."""
    writer = TaskWriter(opts, plan, task, transactional_id)
    try:
        for batch in batches:
            writer.write_batch(batch)
        return writer.finish()
    finally:
        writer.close()


# --- Spark glue ----------------------------------------------------------------------------

class _TaskWrites:
    """What the batch and the streaming writer share: the options, the column plan, and
    a task's write of its Arrow batches."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan):
        self.opts = opts
        self.plan = plan
        self.summary: WriteSummary | None = None
        self.prefix: str | None = None        # exactly-once: transactional id prefix
        self.committed_through = -1           # streaming exactly-once: replays to skip

    def write(self, iterator) -> KafkaCommitMessage:
        if self.prefix is None:
            return write_batches(self.opts, self.plan, iterator)
        from .exactly_once import current_batch_id, transactional_id
        task = _spark_partition_id()
        batch_id = current_batch_id()
        if batch_id is not None and batch_id <= self.committed_through:
            # A micro-batch Spark replays whose transactions were committed before a crash.
            log.info("micro-batch %d is already committed: task %d writes nothing",
                     batch_id, task)
            return KafkaCommitMessage(task=task, records=0, bytes=0, skipped=True)
        return write_batches(self.opts, self.plan, iterator, task,
                             transactional_id(self.prefix, task))


class KafkaDataSourceWriter(_TaskWrites, DataSourceArrowWriter):
    """Batch writes: one :class:`TaskWriter` per task."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan):
        super().__init__(opts, plan)
        if opts.exactly_once:
            from .exactly_once import batch_prefix
            self.prefix = batch_prefix(opts)

    def commit(self, messages) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .exactly_once import commit_all
            commit_all(self.opts, messages)
        log.info("pykafka write committed: %s", self.summary.describe())

    def abort(self, messages) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .exactly_once import abort_all
            abort_all(self.opts, self.prefix, messages)
            log.warning("pykafka write failed; its transactions were aborted: %s",
                        self.summary.describe())
            return
        # Kafka has no rollback: what the successful tasks wrote stays in the topics.
        log.warning("pykafka write failed; records already acknowledged stay in Kafka: %s",
                    self.summary.describe())


class KafkaStreamWriter(_TaskWrites, DataSourceStreamArrowWriter or DataSourceStreamWriter):
    """Streaming sink: every micro-batch is written like a batch write (at least once:
    a micro-batch Spark re-runs after a failure is written again)."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan):
        super().__init__(opts, plan)
        if opts.exactly_once:
            # Driver side, at query (re)start: finish what a crashed run was committing.
            from .exactly_once import TransactionLog, require_checkpoint, stream_prefix
            self.prefix = stream_prefix(opts)
            self.committed_through = TransactionLog(require_checkpoint(opts)).recover(opts)

    def commit(self, messages, batchId) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .exactly_once import TransactionLog, commit_all
            txn_log = TransactionLog(self.opts.checkpoint_location)
            # Recorded durably after the open-transactions check and before the first
            # EndTxn: a restart re-commits exactly these.
            if commit_all(self.opts, messages,
                          before_first_commit=lambda handles: txn_log.record(batchId, handles)):
                txn_log.mark_committed(batchId)
            elif any(msg is not None and msg.skipped for msg in messages):
                log.info("pykafka micro-batch %s was committed before a restart", batchId)
        log.info("pykafka micro-batch %s committed: %s", batchId, self.summary.describe())

    def abort(self, messages, batchId) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .exactly_once import abort_all
            abort_all(self.opts, self.prefix, messages)
            log.warning("pykafka micro-batch %s failed; its transactions were aborted: %s",
                        batchId, self.summary.describe())
            return
        log.warning("pykafka micro-batch %s failed; records already acknowledged stay in "
                    "Kafka: %s", batchId, self.summary.describe())
