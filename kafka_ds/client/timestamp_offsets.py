"""Offsets by timestamp that do not depend on the broker's ListOffsets answer.

Kafka answers ListOffsets by timestamp with the first offset whose record timestamp is at
or after it. Brokers that do not index timestamps answer something else (the librdkafka
mock -1, Tansu 0.6 always 0), and a read planned from that answer silently starts or ends
at the wrong offset. Two things here:

* :func:`check_answer` proves one ListOffsets answer with at most three small Fetches: the
  batch holding the answered offset has a record at or after the timestamp at that offset
  and none before it, and the batch before that has none (its max timestamp is earlier).
* :func:`search_offset` finds the offset itself by a binary search over record batches,
  O(log n) Fetches per partition. Each probe asks for a few bytes, so a broker returns the
  one batch around the offset (Kafka returns at least one whole batch; the mock never more
  than one; Tansu honours the request's max_bytes), and only its v2 header is read: base
  offset, last offset delta and max timestamp.

Both work on batch max timestamps, as Kafka's time index does. When batches' max
timestamps are not non-decreasing (producers with skewed clocks), the search still
returns a boundary (the batch before the answer has only earlier records), not
necessarily the first record at or after the timestamp in the whole partition.

Each partition is reached through ``fetch_batch(offset, max_bytes) -> bytes`` (the Fetch
response's ``records``), so the search is tested on crafted batch sequences. Both take an
empty ``records`` to mean nothing at or after the offset; :func:`partition_fetcher` asks
again when a broker answers an offset below the partition's end with no records.
"""

from __future__ import annotations

import functools
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import KafkaProtocolError
from ..protocol.errors import error_for_code

log = logging.getLogger(__name__)

# baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32,
# attributes int16, lastOffsetDelta int32, firstTimestamp int64, maxTimestamp int64
_HEADER = struct.Struct(">qiibIhiqq")
# Every format has its magic byte at 16: after baseOffset and length, the v2 leader epoch
# or the v0/v1 message crc.
_PREFIX = struct.Struct(">qiib")
_LEGACY_V1_TS = struct.Struct(">q")  # v1: timestamp after crc, magic and attributes
#: Bytes asked for when only a batch header is needed: more than a v2 header (61), and
#: above Tansu's request max_bytes = 1 answer (no partition at all).
HEADER_BYTES = 128

FetchBatch = Callable[[int, int], bytes]


@dataclass(frozen=True)
class BatchHeader:
    base: int
    last: int
    max_timestamp: int
    size: int  # bytes of the whole batch, log overhead included


def first_header(records: bytes) -> BatchHeader | None:
    """The header of the first batch in a Fetch's ``records`` (None: no batch there)."""
    if not records or len(records) < _PREFIX.size:
        return None
    base, length, _epoch_or_crc, magic = _PREFIX.unpack_from(records, 0)
    if magic >= 2:
        if len(records) < _HEADER.size:
            return None
        (base, length, _epoch, _magic, _crc, _attrs, last_delta, _first_ts, max_ts) = (
            _HEADER.unpack_from(records, 0)
        )
        return BatchHeader(base, base + last_delta, max_ts, length + 12)
    # v0 has no timestamps (-1: never at or after a timestamp); a v1 message (or a
    # compressed wrapper, whose offset is its last inner offset) carries one.
    ts = -1
    if magic == 1 and len(records) >= 18 + 8:
        (ts,) = _LEGACY_V1_TS.unpack_from(records, 18)
    return BatchHeader(base, base, ts, length + 12)


def _header_at(fetch_batch: FetchBatch, offset: int) -> BatchHeader | None:
    return first_header(fetch_batch(offset, HEADER_BYTES))


def _records_of(fetch_batch: FetchBatch, header: BatchHeader) -> list[tuple[int, int]]:
    """(offset, timestamp ms) of every record of the batch ``header`` describes."""
    from ..protocol.records import decode_records  # (pyarrow: only when searching)

    size = header.size
    for _ in range(8):
        records = fetch_batch(header.base, size)
        result = decode_records(
            records, topic="", partition=0, fetch_offset=header.base, include_headers=False
        )
        if result.batch is not None and result.batch.num_rows:
            offsets = result.batch.column("offset").to_pylist()
            micros = result.batch.column("timestamp").cast("int64").to_pylist()
            return [
                (o, us // 1000)
                for o, us in zip(offsets, micros, strict=True)
                if header.base <= o <= header.last
            ]
        if not result.truncated:
            return []
        size *= 2
    return []


def _first_in_batch(fetch_batch: FetchBatch, header: BatchHeader, timestamp: int) -> int:
    for offset, ts in _records_of(fetch_batch, header):
        if ts >= timestamp:
            return offset
    # Only the header's max timestamp reached it (a control batch, or a broker's
    # inconsistent batch): the next batch starts the records at or after it.
    return header.last + 1


def search_offset(fetch_batch: FetchBatch, timestamp: int, earliest: int, latest: int) -> int:
    """The first offset in ``[earliest, latest)`` whose batch's max timestamp is at or after
    ``timestamp``, and inside that batch the first record at or after it; -1 when no batch
    qualifies (Kafka's answer for a timestamp after every record)."""
    lo, hi = earliest, latest
    found: BatchHeader | None = None
    while lo < hi:
        mid = (lo + hi) // 2
        header = _header_at(fetch_batch, mid)
        if header is None or header.base >= hi:
            # Nothing from mid on (before hi): the answer, if any, is before mid.
            hi = mid
            continue
        if header.max_timestamp >= timestamp:
            found, hi = header, min(hi, max(header.base, lo))
        else:
            lo = header.last + 1
    if found is None:
        return -1
    offset = max(_first_in_batch(fetch_batch, found, timestamp), earliest)
    return offset if offset < latest else -1


def check_answer(
    fetch_batch: FetchBatch, timestamp: int, answer: int, earliest: int, latest: int
) -> bool:
    """Whether ListOffsets' ``answer`` for ``timestamp`` is Kafka's: the record at
    ``answer`` is the batch's first at or after it, and the batch before has none (or
    ``answer`` is -1 and the last batch has none)."""
    if latest <= earliest:
        return answer < 0
    if answer < 0:
        last = _header_at(fetch_batch, latest - 1)
        return last is None or last.max_timestamp < timestamp
    if not earliest <= answer < latest:
        return False
    header = _header_at(fetch_batch, answer)
    if (
        header is None
        or not header.base <= answer <= header.last
        or header.max_timestamp < timestamp
    ):
        return False
    if _first_in_batch(fetch_batch, header, timestamp) != answer:
        return False
    if header.base <= earliest:
        return True
    before = _header_at(fetch_batch, header.base - 1)
    return before is None or before.max_timestamp < timestamp


#: The longest wait (``max_wait_ms``) of each Fetch of one offset while the answers come back
#: without records below the partition's end; after the last the lookup fails (see
#: :func:`partition_fetcher`). Kafka answers a ``min_bytes=0`` Fetch at once whatever the wait.
EMPTY_ANSWER_WAITS_MS = (1, 10, 100, 500, 500)
EMPTY_ANSWER_ATTEMPTS = len(EMPTY_ANSWER_WAITS_MS)


def partition_fetcher(client, topic: str, partition: int, isolation_level: int) -> FetchBatch:
    """``fetch_batch`` over one partition's leader: a Fetch answered at once (min_bytes 0;
    max_wait_ms 1, as Tansu answers a 0 ms wait with no partition).

    An answer without records for an offset below the partition's end (the high watermark,
    or the last stable offset with read_committed, from the same answer) is asked again:
    Kafka always sends at least one batch there, but Tansu 0.6.0 answers with no records
    (error 0, right high watermark) when finding the offset takes longer than the Fetch's
    wait: now and then on small partitions, and often on large ones (tests/README.md,
    Tansu deviation 16). Taken as it is, that empty answer reads as "nothing from this
    offset on": the search then ends one batch late (its answer was the batch after the
    one asked for) or finds nothing, and a check can fail. So each new attempt waits longer
    (``EMPTY_ANSWER_WAITS_MS``; Tansu answers as soon as it has found the records, so a
    longer wait costs nothing below the end), and after the last one the lookup fails,
    naming the partition and offset: an offset taken from such an answer would silently
    start or end the read at the wrong record."""

    def fetch_batch(offset: int, max_bytes: int) -> bytes:
        def attempt(wait_ms):
            part = client.fetch(
                topic,
                partition,
                offset,
                max_bytes=max_bytes,
                max_wait_ms=wait_ms,
                min_bytes=0,
                isolation_level=isolation_level,
            )
            if part["error_code"]:
                raise error_for_code(part["error_code"])(
                    f"Fetch {topic}-{partition} at offset {offset}"
                )
            return part

        records = b""
        for tries, wait_ms in enumerate(EMPTY_ANSWER_WAITS_MS, 1):
            part = client.retrying(
                functools.partial(attempt, wait_ms),
                f"Fetch {topic}-{partition} at offset {offset}",
                topics=[topic],
            )
            records = bytes(part["records"] or b"")
            end = part.get("high_watermark", -1)
            stable = part.get("last_stable_offset", -1)
            if isolation_level and stable is not None and stable >= 0:
                end = stable
            if records or end is None or offset >= end:
                return records
            log.debug(
                "Fetch %s-%d at offset %d (end %d) answered no records (%d of %d)",
                topic,
                partition,
                offset,
                end,
                tries,
                EMPTY_ANSWER_ATTEMPTS,
            )
        raise KafkaProtocolError(
            f"Fetch {topic}-{partition} at offset {offset} was answered with no records "
            f"{EMPTY_ANSWER_ATTEMPTS} times, below the partition's end ({end}): the broker "
            "holds records there but does not return them, so no offset can be found by "
            "timestamp. Retry the query, or set timestampOffsetsVia=listOffsets to trust the "
            "broker's ListOffsets answer."
        )

    return fetch_batch
