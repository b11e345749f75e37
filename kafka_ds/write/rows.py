"""The steps that turn one Arrow batch of a write task into records to buffer, each over
whole columns (numpy/pyarrow; no Python object per row): read and check the Kafka
columns (:func:`row_columns`), name each row's topic (:func:`row_topics`), choose its
partition (:func:`assign_partitions`) and check every record fits a request
(:func:`check_record_sizes`).

Errors are ConfigurationErrors that name the column, the row (``describe_rows`` of the
task, given the rows' positions in the task's input) and the fix.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigurationError
from ..protocol.primitives import varint_size
from ..protocol.records_arrays import as_binary_array, binary_lengths, sum_terms, varint_sizes
from ..protocol.records_headers import flatten_headers, header_sizes
from ..protocol.records_layout import V2_HEADER_SIZE
from .partitioner import StickyPartitioner, partitions_for_keys


class TopicState:
    """What a task knows of a topic it writes to: its partition count and the sticky
    partitioner of its null-key rows."""

    __slots__ = ("name", "num_partitions", "sticky")

    def __init__(self, name, num_partitions, batch_size):
        self.name = name
        self.num_partitions = num_partitions
        self.sticky = StickyPartitioner(num_partitions, batch_size)


@dataclass
class RowColumns:
    """One Arrow batch's Kafka fields and every record's estimated size in a batch."""

    values: pa.Array
    keys: pa.Array | None  # None: no key column, or only nulls
    headers: pa.Array | None
    timestamps: np.ndarray  # epoch ms per row
    sizes: np.ndarray  # upper bound of each record's bytes in a record batch


@dataclass
class RowTopics:
    """The topics of one Arrow batch's rows."""

    names: list
    index: np.ndarray | None  # per row, into ``names``; None: every row has names[0]
    states: list  # TopicState per name
    counts: np.ndarray  # partition count per name

    def of_row(self, row: int) -> int:
        return self.index[row] if self.index is not None else 0


def timestamps_ms(col, now_ms: int) -> np.ndarray:
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


def _column_bytes(batch: pa.RecordBatch, plan, name: str, index: int):
    """The Kafka bytes of the key or value column: encoded by its valueFormat/keyFormat
    codec (typed_writes.py), else the binary or string column as it is."""
    if plan.typed is not None and name in plan.typed.codecs:
        return plan.typed.encode(name, batch.column(index))
    return as_binary_array(batch.column(index), name)


def row_columns(
    batch: pa.RecordBatch, plan, first_row: int, batch_limit: int, describe_rows
) -> RowColumns:
    """The Kafka columns of ``batch`` (``plan``: a ColumnPlan), checked, and the sizes."""
    n = batch.num_rows
    now_ms = int(time.time() * 1000)
    values = _column_bytes(batch, plan, "value", plan.value)
    keys = _column_bytes(batch, plan, "key", plan.key) if plan.key >= 0 else None
    if keys is not None and keys.null_count == n:
        keys = None
    headers = batch.column(plan.headers) if plan.headers >= 0 else None
    if headers is not None and isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if plan.timestamp >= 0:
        timestamps = timestamps_ms(batch.column(plan.timestamp), now_ms)
        negative = np.flatnonzero(timestamps < 0)
        if len(negative):
            raise ConfigurationError(
                f"Column 'timestamp' is before 1970-01-01 at "
                f"{describe_rows(first_row + negative[:1])}; Kafka timestamps must be "
                "at or after the epoch (or null for the produce time)"
            )
    else:
        timestamps = np.full(n, now_ms, dtype=np.int64)
    sizes = _record_sizes(keys, values, headers, timestamps, batch_limit, first_row, describe_rows)
    return RowColumns(values, keys, headers, timestamps, sizes)


def _record_sizes(keys, values, headers, timestamps, batch_limit, first_row, describe_rows):
    # Estimated size of every record in a batch: an upper bound, so batches built from
    # it never exceed kafka.batch.size / kafka.max.request.size.
    # (lengths are -1 for nulls, as written: a 1-byte varint and no bytes)
    n = len(values)
    # attributes byte, timestamp delta (a batch may also hold rows of other Arrow
    # batches: allow ~17 minutes more), offset delta (< records in a batch)
    span = int(timestamps.max() - timestamps.min()) + 1_000_000
    terms = [1 + varint_size(span) + varint_size(batch_limit)]
    terms += _length_terms(binary_lengths(values), values.null_count)
    if keys is not None:
        terms += _length_terms(binary_lengths(keys), keys.null_count)
    else:
        terms.append(1)  # a null key: zigzag(-1), one byte
    if headers is not None:
        header_bytes, header_counts = _header_sizes(headers, n, first_row, describe_rows)
        terms += [header_bytes, varint_sizes(header_counts, zigzag=True)]
    else:
        terms.append(1)  # headerCount 0
    body = sum_terms(terms)
    return body + varint_sizes(body, zigzag=True)


def _length_terms(lengths, null_count):
    """[bytes, bytes of the zigzag varint length] of a key or value column."""
    return [np.maximum(lengths, 0) if null_count else lengths, varint_sizes(lengths, zigzag=True)]


def _header_sizes(headers, n, first_row, describe_rows):
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
            f"{describe_rows(np.array([first_row + row]))}: header keys must be "
            "strings; filter the nulls out of the array"
        )
    return np.diff(header_sizes(hkeys, hvalues, record_offsets).record_offsets), counts


def row_topics(batch, plan, topic_option, first_row, describe_rows):
    """(topic names, per-row index into them or None when every row has the same)."""
    if topic_option is not None:
        return [topic_option], None
    col = batch.column(plan.topic)
    if col.null_count:
        row = int(np.flatnonzero(np.asarray(col.is_null()))[0])
        raise ConfigurationError(
            f"Column 'topic' is null at {describe_rows(np.array([first_row + row]))}: "
            "every row needs a topic; fill the column or set the 'topic' option"
        )
    encoded = pc.dictionary_encode(col)
    names = encoded.dictionary.to_pylist()
    if len(names) == 1:
        return names, None
    return names, np.asarray(encoded.indices, dtype=np.int64)


def assign_partitions(
    batch, plan, rows: RowColumns, topics: RowTopics, first_row, describe_rows
) -> np.ndarray:
    """Each row's partition: the ``partition`` column, else murmur2 of the key, else the
    topic's sticky partitioner (null keys)."""
    n = batch.num_rows
    keys = rows.keys
    rows_partitions = topics.counts[topics.index] if topics.index is not None else topics.counts[0]
    partitions = np.full(n, -1, dtype=np.int32)
    if plan.partition >= 0:
        col = batch.column(plan.partition)
        given = np.asarray(col.fill_null(-1), dtype=np.int32)
        explicit = given >= 0
        if col.null_count < n:
            bad = np.flatnonzero(
                explicit & (given >= rows_partitions) | (~explicit & ~np.asarray(col.is_null()))
            )
            if len(bad):
                row = int(bad[0])
                topic = topics.names[topics.of_row(row)]
                count = topics.counts[topics.of_row(row)]
                raise ConfigurationError(
                    f"Column 'partition' is {int(given[row])} at "
                    f"{describe_rows(np.array([first_row + row]))}, but topic "
                    f"'{topic}' has partitions 0..{count - 1}: fix the partition column, "
                    "or set it to null to let the partitioner choose"
                )
        partitions = np.where(explicit, given, -1).astype(np.int32)
    need = partitions < 0
    if need.any():
        if keys is not None:
            keyed = need & ~np.asarray(keys.is_null()) if keys.null_count else need
            if keyed.all():
                partitions = partitions_for_keys(keys, rows_partitions)
            elif keyed.any():
                where = np.flatnonzero(keyed)
                per_row = rows_partitions[where] if topics.index is not None else rows_partitions
                partitions[where] = partitions_for_keys(keys.take(pa.array(where)), per_row)
            need = need & ~keyed
        if need.any():
            for t, state in enumerate(topics.states):
                chosen = np.flatnonzero(
                    need if topics.index is None else need & (topics.index == t)
                )
                if len(chosen):
                    partitions[chosen] = state.sticky.assign(rows.sizes[chosen])
    return partitions


def check_record_sizes(
    rows: RowColumns, topics: RowTopics, partitions, max_request_size, first_row, describe_rows
) -> None:
    """A record that cannot fit a request even alone fails the write, naming it."""
    too_big = np.flatnonzero(rows.sizes + V2_HEADER_SIZE > max_request_size)
    if len(too_big):
        row = int(too_big[0])
        topic = topics.names[topics.of_row(row)]
        raise ConfigurationError(
            f"The record at {describe_rows(np.array([first_row + row]))} for topic "
            f"'{topic}' partition {int(partitions[row])} is about "
            f"{int(rows.sizes[row]) + V2_HEADER_SIZE} bytes, more than 'kafka.max.request.size' "
            f"({max_request_size}): raise that option (and the topic's "
            "max.message.bytes) or write a smaller record"
        )


__all__ = [
    "RowColumns",
    "RowTopics",
    "TopicState",
    "assign_partitions",
    "check_record_sizes",
    "row_columns",
    "row_topics",
    "timestamps_ms",
]
