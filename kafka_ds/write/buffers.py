"""A write task's per-partition buffers and their record batches.

Rows arrive per Arrow batch with their topic and partition; one stable sort by
(topic, partition) cuts them into zero-copy slices per partition, which wait until
about ``kafka.batch.size`` bytes (or ``kafka.linger.ms``), are encoded into
RecordBatch v2 column-wise and handed to the
:class:`~kafka_ds.client.producer.Producer`.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from ..client.producer import Producer
from ..client.transactions import Transaction
from ..errors import ConfigurationError
from ..options import WriteOptions
from ..protocol.compression import codec_id
from ..protocol.records_encode import encode_record_batch_buffer
from ..protocol.records_layout import V2_HEADER_SIZE
from .rows import RowColumns, RowTopics


class PartitionBuffer:
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


def _chunked(arrays, length_of, typ):
    """Arrow slices (or chunked arrays) as one chunked array, not copied: the encoder's
    take reads the chunks where they are. ``None`` entries (column absent) become nulls."""
    if all(a is None for a in arrays):
        return None
    if len(arrays) == 1:
        return arrays[0]
    chunks = []
    for i, a in enumerate(arrays):
        if a is None:
            chunks.append(pa.nulls(length_of[i], typ))
        elif isinstance(a, pa.ChunkedArray):
            chunks.extend(a.chunks)
        else:
            chunks.append(a)
    return pa.chunked_array(chunks, typ)


def buffer_type(arrays):
    for a in arrays:
        if a is not None:
            return a.type
    return pa.null()


class RecordBatcher:
    """Buffers a task's rows per (topic, partition) and sends them as record batches of at
    most ``batch_limit`` bytes; in ``transaction`` when given. Not thread-safe."""

    def __init__(
        self, opts: WriteOptions, producer: Producer, transaction: Transaction | None, describe_rows
    ):
        self.opts = opts
        self.producer = producer
        self.transaction = transaction
        self.describe_rows = describe_rows
        self.codec = codec_id(opts.compression)
        # A batch must fit the batch size and a request (with the request's own overhead).
        self.batch_limit = max(min(opts.batch_size, opts.max_request_size), V2_HEADER_SIZE + 1)
        self.buffers: dict[tuple[str, int], PartitionBuffer] = {}
        self.buffered_bytes = 0  # sum of the buffers' estimated bytes

    def add(
        self, rows: RowColumns, topics: RowTopics, partitions: np.ndarray, first_row: int
    ) -> None:
        """Buffer one Arrow batch's rows (``first_row``: the first one's position in the
        task's input)."""
        n = len(partitions)
        # One stable sort by (topic, partition) keeps every partition's rows in input order.
        if topics.index is not None:
            base = np.zeros(len(topics.states) + 1, dtype=np.int64)
            np.cumsum(topics.counts, out=base[1:])
            group = base[topics.index] + partitions
        else:
            group = partitions.astype(np.int64)
        # numpy's stable sort of 16-bit integers is a radix sort
        narrow = np.uint16 if len(group) and int(group.max()) < 1 << 16 else np.int64
        order = np.argsort(group.astype(narrow, copy=False), kind="stable")
        sorted_group = group[order]
        cuts = np.flatnonzero(sorted_group[1:] != sorted_group[:-1]) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [n]))
        take = pa.array(order)
        values_s = rows.values.take(take)
        keys_s = rows.keys.take(take) if rows.keys is not None else None
        headers_s = rows.headers.take(take) if rows.headers is not None else None
        timestamps_s = rows.timestamps[order]
        rows_s = order + first_row
        sizes_s = rows.sizes[order]
        topic_of_group = topics.index[order[starts]] if topics.index is not None else None
        for g, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            topic = (
                topics.names[topic_of_group[g]] if topic_of_group is not None else topics.names[0]
            )
            partition = int(partitions[order[start]])
            length = end - start
            buffer = self.buffers.get((topic, partition))
            if buffer is None:
                buffer = self.buffers[(topic, partition)] = PartitionBuffer()
            before = buffer.bytes
            buffer.add(
                keys_s.slice(start, length) if keys_s is not None else None,
                values_s.slice(start, length),
                headers_s.slice(start, length) if headers_s is not None else None,
                timestamps_s[start:end],
                rows_s[start:end],
                sizes_s[start:end],
            )
            self.buffered_bytes += buffer.bytes - before

    def emit(self, final: bool) -> None:
        """Send the buffers that are full or have lingered long enough (``final``: all)."""
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
            self._send_buffer(key, keep_tail=not due)
        if self.buffered_bytes > self.opts.buffer_memory:
            # Too much waiting (many partitions): the fullest buffers go now, whole.
            for key in sorted(self.buffers, key=lambda k: self.buffers[k].bytes, reverse=True):
                self._send_buffer(key, keep_tail=False)
                if self.buffered_bytes <= self.opts.buffer_memory // 2:
                    break

    def _send_buffer(self, key, keep_tail: bool) -> None:
        buffer = self.buffers.pop(key)
        self.buffered_bytes -= buffer.bytes
        self._encode_and_send(key, buffer, keep_tail)

    def _encode_and_send(self, key, buffer: PartitionBuffer, keep_tail: bool) -> None:
        topic, partition = key
        lengths = [len(v) for v in buffer.values]
        values = _chunked(buffer.values, lengths, pa.binary())
        keys = _chunked(buffer.keys, lengths, pa.binary())
        headers = _chunked(buffer.headers, lengths, buffer_type(buffer.headers))
        timestamps = (
            buffer.timestamps[0] if len(lengths) == 1 else np.concatenate(buffer.timestamps)
        )
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
            if (
                keep_tail
                and end == n
                and cumulative[n] - cumulative[start] + V2_HEADER_SIZE < self.batch_limit
            ):
                # Not full and still allowed to linger: keep for the next Arrow batch.
                tail = PartitionBuffer()
                tail.since = buffer.since
                tail.add(
                    keys.slice(start) if keys is not None else None,
                    values.slice(start),
                    headers.slice(start) if headers is not None else None,
                    timestamps[start:],
                    rows[start:],
                    sizes[start:],
                )
                self.buffers[key] = tail
                self.buffered_bytes += tail.bytes
                return
            count = end - start
            producer_id, epoch, sequence = self.producer.batch_identity(topic, partition, count)
            while True:
                data = encode_record_batch_buffer(
                    keys=keys.slice(start, count) if keys is not None else None,
                    values=values.slice(start, count),
                    headers=headers.slice(start, count) if headers is not None else None,
                    timestamps_ms=timestamps[start : start + count],
                    compression=self.codec,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    base_sequence=sequence,
                    is_transactional=self.transaction is not None,
                )
                if len(data) <= self.opts.max_request_size:
                    break
                # Incompressible data can come out of a codec a little larger than it went
                # in: halve the batch rather than send an oversized request.
                if count == 1:
                    raise ConfigurationError(
                        f"The record at {self.describe_rows(rows[start : start + 1])} for topic "
                        f"'{topic}' partition {partition} is {len(data)} bytes as a "
                        f"{self.opts.compression} record batch, more than "
                        f"'kafka.max.request.size' ({self.opts.max_request_size})"
                    )
                count //= 2
            end = start + count
            self.producer.send(
                topic,
                partition,
                data,
                count,
                base_sequence=sequence,
                rows=rows[start:end],
                describe_rows=self.describe_rows,
            )
            start = end


__all__ = ["PartitionBuffer", "RecordBatcher", "buffer_type"]
