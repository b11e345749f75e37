"""One Spark task's read: the offsets ``[start, end)`` of one topic-partition, fetched
from its leader one Fetch ahead (``fetch_pipeline.py``) and decoded into Arrow record
batches in exactly the schema of Spark's Kafka source."""

from __future__ import annotations

import logging
import struct
import time
from dataclasses import dataclass

from ..client import EARLIEST, KafkaClient, make_client
from ..columns import arrow_schema
from ..errors import DataLossError, KafkaError
from ..options import ReadOptions
from ..protocol.errors import OffsetOutOfRange, UnknownTopicId, UnknownTopicOrPartition

log = logging.getLogger(__name__)

_BASE_OFFSET = struct.Struct(">q")

#: the largest Fetch size a task grows to when one record batch does not fit
MAX_FETCH_BYTES_GROWTH = 256 << 20


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def data_loss(opts: ReadOptions, message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost because it is no longer available in "
            "Kafka (aged out, or the topic was deleted). If you want the query to continue "
            "with what is left, set the option 'failOnDataLoss' to 'false'."
        )
    log.warning("%s; continuing because failOnDataLoss=false", message)


class _PartitionColumns:
    """The ``topic`` and ``partition`` columns of one task's batches: built once, as long
    as the longest batch so far, and sliced (zero-copy) for every batch."""

    def __init__(self, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self.rows = 0
        self.columns: tuple = ()  # (topic, partition) arrays of self.rows rows

    def __call__(self, rows: int):
        if rows > self.rows:
            self.rows = max(rows, 2 * self.rows)
            self.columns = self._build(self.rows)
        topic_column, partition_column = self.columns
        if rows == self.rows:
            return topic_column, partition_column
        return topic_column.slice(0, rows), partition_column.slice(0, rows)

    def _build(self, rows: int):
        """Built from numpy buffers: pa.repeat/pa.scalar would import pandas (pyarrow's
        lookup of pandas types), most of a fresh worker's first read."""
        import numpy as np
        import pyarrow as pa

        from ..protocol.records_arrays import int_array

        name = self.topic.encode("utf-8")
        if len(name) * rows >= 1 << 31:  # beyond int32 offsets: Arrow's own repeat
            topic = pa.repeat(self.topic, rows).cast(pa.string())
        else:
            offsets = np.arange(0, len(name) * (rows + 1), len(name), dtype=np.int32)
            topic = pa.Array.from_buffers(
                pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(name * rows)]
            )
        return topic, int_array(np.full(rows, self.partition, dtype=np.int32), pa.int32())


def read_range(opts: ReadOptions, rng, client: KafkaClient | None = None):
    """Yield ``pyarrow.RecordBatch``es of ``rng`` = [start, end) of one topic-partition.

    The next Fetch is under way while an answer is decoded and its batch handed to Spark
    (fetch_pipeline.py); every decision below is taken on the answer at exactly
    the offset this loop asks for."""
    import threading

    import numpy as np
    import pyarrow as pa

    from ..protocol.records import decode_records
    from ..protocol.records_arrays import numpy_values
    from .fetch_pipeline import FetchAhead, fetch_partition
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
    # One partition per Fetch: the answer's limit and the partition's are the same. A batch
    # larger than both still comes back whole (KIP-74) from brokers of Fetch v3 and later.
    fetch_bytes = min(opts.max_partition_fetch_bytes, opts.fetch_max_bytes)
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
        limit=end,
        name=f"kafka_ds-fetch {topic}-{partition}",
        interrupt=interrupt,
        stopping=stopping,
    )
    partition_columns = _PartitionColumns(topic, partition)
    try:
        while offset < end:
            part = _fetch_with_retries(fetches, opts, topic, partition, offset, fetch_bytes)
            if part is None:  # topic/partition gone, failOnDataLoss=false
                return
            code = part["error_code"]
            if code == OffsetOutOfRange.code:
                fetches.quiesce()  # the client is this thread's again
                earliest = client.list_offsets({(topic, partition): EARLIEST})[(topic, partition)][
                    0
                ]
                if offset < earliest:
                    data_loss(
                        opts,
                        f"Offsets [{offset}, {min(earliest, end)}) of "
                        f"{topic}-{partition} are no longer available (earliest is "
                        f"{earliest})",
                    )
                    offset = earliest
                    continue
                data_loss(
                    opts,
                    f"Offset {offset} of {topic}-{partition} is out of range "
                    f"(earliest {earliest}); the requested range ends at {end}",
                )
                return
            records = part["records"] or b""
            high_watermark = part["high_watermark"]
            _check_log_start(
                opts, topic, partition, offset, end, records, part.get("log_start_offset", -1)
            )
            last_stable = part.get("last_stable_offset", -1)
            aborted = [
                (a["producer_id"], a["first_offset"])
                for a in (part.get("aborted_transactions") or [])
            ]
            part = None
            result = decode_records(
                records,
                topic=topic,
                partition=partition,
                fetch_offset=offset,
                include_headers=opts.include_headers,
                read_committed=opts.read_committed,
                aborted_transactions=aborted,
            )
            if result.batch is not None and result.batch.num_rows:
                check_timestamps(result.batch, records, topic, partition, end)
            # The decoded columns own copies of the bytes they need: let the response
            # frame (up to the fetch size) go before the batch is handed out, and hold
            # no reference to the batch while the next fetch is received.
            records = None
            batch, next_offset, truncated = result.batch, result.next_offset, result.truncated
            del result
            if batch is not None and batch.num_rows:
                n = batch.num_rows
                if next_offset > end:
                    # Only the last answer of a range holds records past its end.
                    offsets = numpy_values(batch.column("offset"), np.int64)
                    n = int(np.searchsorted(offsets, end, side="left"))
                if n:
                    if n < batch.num_rows:
                        batch = batch.slice(0, n)
                    added = dict(zip(("topic", "partition"), partition_columns(n), strict=True))
                    columns = [
                        added[name] if name in added else batch.column(name)
                        for name in schema.names
                    ]
                    batch = pa.RecordBatch.from_arrays(columns, schema=schema)
                    del columns
                    if opts.typed is not None:  # valueFormat / keyFormat
                        batch = opts.typed.decode_batch(batch, topic, partition)
                    yield batch
            batch = None
            if next_offset > offset:
                offset = next_offset
                stalls = 0
                continue
            # No complete batch came back.
            available = last_stable if opts.read_committed and last_stable >= 0 else high_watermark
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
                            f"below the planned end {end}; an open transaction did not finish"
                        )
                    time.sleep(0.5)
                    continue
                data_loss(
                    opts,
                    f"{topic}-{partition} ends at offset {available} but the "
                    f"query planned to read up to {end} (records were deleted or the "
                    "partition was truncated)",
                )
                return
            stalls += 1
            if stalls > 5:
                raise KafkaError(
                    f"Fetch of {topic}-{partition} at offset {offset} returned no complete "
                    f"record batch {stalls} times (high watermark {high_watermark}, "
                    f"fetch size {fetch_bytes} bytes)"
                )
            time.sleep(0.05 * stalls)
    finally:
        fetches.close()
        if own_client:
            client.close()
        log.debug(
            "%s-%d [%d, %d): fetched ahead (guessed right/wrong): %d/%d",
            topic,
            partition,
            rng.start,
            end,
            fetches.guessed_right,
            fetches.guessed_wrong,
        )


def _check_log_start(opts, topic, partition, offset, end, records, log_start) -> None:
    """Records deleted under the read that the broker skipped without OFFSET_OUT_OF_RANGE:
    the answer starts past ``offset`` and the log now starts past it too (Fetch v5+ says
    where). A gap above the log start is a compacted topic's or a transaction marker's,
    not data loss."""
    if log_start <= offset or len(records) < 12:
        return
    first = _BASE_OFFSET.unpack_from(records, 0)[0]
    if first > offset:
        data_loss(
            opts,
            f"Offsets [{offset}, {min(first, log_start, end)}) of "
            f"{topic}-{partition} are no longer available (the log now starts at "
            f"{log_start})",
        )


def _fetch_with_retries(fetches, opts, topic, partition, offset, fetch_bytes):
    """The Fetch answer at ``offset`` (retried within ``kafkaConsumer.pollTimeoutMs`` by
    ``fetch_pipeline.fetch_partition``); None when the partition is gone and
    failOnDataLoss=false."""
    try:
        return fetches.get(offset, fetch_bytes)
    except KafkaError as exc:
        if isinstance(exc, (UnknownTopicOrPartition, UnknownTopicId)):
            data_loss(
                opts,
                f"{topic}-{partition} no longer exists (was the topic deleted?) "
                f"while reading from offset {offset}: {exc}",
            )
            return None
        raise
