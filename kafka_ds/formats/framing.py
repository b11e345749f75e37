"""Confluent wire framing, column-wise: ``0x00 | schema id (4 bytes, big-endian) | payload``.

Shared by the Avro, Protobuf and JSON codecs. Everything works on the offsets and data
buffers of a ``pa.BinaryArray`` with numpy; nothing is done per record in Python except
naming the bad rows.

* :func:`split_frames` tells, for every row, whether it is null, readable or bad, its schema
  id, and where its payload starts and ends in the data buffer (:class:`Frames`). A codec
  whose payload has a further prefix (Protobuf's message indexes) advances
  ``Frames.starts`` for its rows before decoding. With ``framed=False`` (plain values, as
  Spark's ``from_avro`` reads them) every non-null row is readable and its payload is all
  of it.
* :func:`frame` prefixes every non-null payload with the magic byte and a schema id;
  :func:`frame_header` is that header alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

MAGIC_BYTE = 0
HEADER_SIZE = 5
#: registry ids are Java ints: a header's 4 bytes above this name no schema
MAX_SCHEMA_ID = (1 << 31) - 1


@dataclass
class Frames:
    #: uint8 view of the input's whole data buffer; ``starts``/``ends`` index into it
    data: np.ndarray
    #: bool per row: the input value is null (a tombstone), not a bad row
    nulls: np.ndarray
    #: bool per row: a payload to decode (non-null; when framed, a valid 5-byte header)
    readable: np.ndarray
    #: int32 per row: the frame's schema id, -1 where not readable or not framed
    schema_ids: np.ndarray
    #: int64 per row: payload start in ``data`` (after the 5-byte header when readable)
    starts: np.ndarray
    #: int64 per row: payload end (exclusive) in ``data``
    ends: np.ndarray
    #: int64: rows that are non-null but not readable
    bad_rows: np.ndarray
    #: one reason per bad row ("not framed: ..." or "unknown schema id ...")
    reasons: list


def binary_buffers(values: pa.Array):
    """``(nulls bool[n], offsets int64[n+1], data uint8)`` of a binary/string array, zero
    copy where possible (the offsets are widened to int64 so positions never overflow)."""
    if pa.types.is_binary(values.type) or pa.types.is_string(values.type):
        offset_type = np.int32
    elif pa.types.is_large_binary(values.type) or pa.types.is_large_string(values.type):
        offset_type = np.int64
    else:
        raise TypeError(f"expected a binary array, got {values.type}")
    n = len(values)
    _validity, offsets_buf, data_buf = values.buffers()
    if offsets_buf is None:  # an empty array may come without buffers
        offsets = np.zeros(n + 1, dtype=np.int64)
    else:
        offsets = np.frombuffer(offsets_buf, dtype=offset_type)[
            values.offset : values.offset + n + 1
        ].astype(np.int64)
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    if values.null_count:
        nulls = values.is_null().to_numpy(zero_copy_only=False)
    else:
        nulls = np.zeros(n, dtype=bool)
    return nulls, offsets, data


def slice_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64 positions of all bytes of the slices ``[starts[i], starts[i] + lengths[i])``,
    slice after slice: the gather index that concatenates variable-length slices."""
    lengths = lengths.astype(np.int64, copy=False)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    begin_in_out = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=begin_in_out[1:])
    return np.arange(total, dtype=np.int64) + np.repeat(starts - begin_in_out, lengths)


def split_frames(values: pa.Array, framed: bool = True) -> Frames:
    """Find the Confluent frame of every row of ``values`` (a binary array); with
    ``framed=False`` the rows are plain payloads and only nulls are told apart."""
    if pa.types.is_null(values.type):  # an all-null column arrives untyped
        values = values.cast(pa.binary())
    nulls, offsets, data = binary_buffers(values)
    n = len(values)
    starts = offsets[:-1].copy()
    ends = offsets[1:].copy()
    schema_ids = np.full(n, -1, dtype=np.int32)
    if not framed:
        return Frames(data, nulls, ~nulls, schema_ids, starts, ends, np.zeros(0, np.int64), [])
    lengths = ends - starts
    long_enough = lengths >= HEADER_SIZE
    # Reads below are clipped, then masked by long_enough, so short rows read nothing real.
    first = data.take(starts, mode="clip") if data.size else np.zeros(n, np.uint8)
    readable = ~nulls & long_enough & (first == MAGIC_BYTE)
    rows = np.flatnonzero(readable)
    too_large = np.zeros(n, dtype=bool)
    if rows.size:
        header = data[starts[rows, None] + np.arange(1, HEADER_SIZE)]  # (k, 4) bytes
        ids = header.copy().view(">u4").reshape(-1).astype(np.int64)
        too_large[rows[ids > MAX_SCHEMA_ID]] = True
        keep = ids <= MAX_SCHEMA_ID
        rows = rows[keep]
        schema_ids[rows] = ids[keep]
        starts[rows] += HEADER_SIZE
        readable &= ~too_large
    bad_rows = np.flatnonzero(~nulls & ~readable)
    reasons = []
    if bad_rows.size:
        for row, length, byte in zip(
            bad_rows.tolist(), lengths[bad_rows].tolist(), first[bad_rows].tolist(), strict=True
        ):
            if length < HEADER_SIZE:
                reasons.append(
                    f"not framed: {length} bytes, shorter than the 5-byte Confluent header"
                )
            elif byte != MAGIC_BYTE:
                reasons.append(f"not framed: magic byte {byte} (expected 0)")
            else:
                at = int(starts[row])
                schema_id = int.from_bytes(data[at + 1 : at + HEADER_SIZE].tobytes(), "big")
                reasons.append(f"unknown schema id {schema_id} (registry ids are at most 2^31-1)")
    return Frames(data, nulls, readable, schema_ids, starts, ends, bad_rows, reasons)


def frame_header(schema_id: int) -> bytes:
    """The 5 bytes in front of a payload written with registry schema ``schema_id``."""
    if not 0 <= schema_id <= MAX_SCHEMA_ID:
        raise ValueError(f"schema id {schema_id} is not a registry id (0 to 2^31-1)")
    return bytes([MAGIC_BYTE]) + int(schema_id).to_bytes(4, "big")


def frame(schema_id: int, payloads: pa.Array) -> pa.BinaryArray:
    """``payloads`` (binary) with the 5-byte header in front of every non-null value;
    null rows stay null."""
    header = np.frombuffer(frame_header(schema_id), dtype=np.uint8)
    nulls, offsets, data = binary_buffers(payloads)
    n = len(payloads)
    lengths = np.where(nulls, 0, np.diff(offsets))  # a null slot may still span bytes
    header_sizes = np.where(nulls, 0, HEADER_SIZE)
    new_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths + header_sizes, out=new_offsets[1:])
    total = int(new_offsets[-1])
    if total >= (1 << 31):
        raise ValueError(f"framed payloads total {total} bytes, more than a binary array holds")
    out = np.empty(total, dtype=np.uint8)
    rows = np.flatnonzero(~nulls)
    out[new_offsets[rows, None] + np.arange(HEADER_SIZE)] = header
    payload_starts = new_offsets[:-1] + header_sizes
    out[slice_positions(payload_starts, lengths)] = data[slice_positions(offsets[:-1], lengths)]
    validity = None
    if nulls.any():
        validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [validity, pa.py_buffer(new_offsets.astype(np.int32)), pa.py_buffer(out)],
        null_count=int(nulls.sum()),
    )
