"""Confluent wire framing, column-wise: ``0x00 | schema id (int32 big-endian) | payload``.

Shared by the Avro, Protobuf and JSON codecs. Everything works on the offsets and data
buffers of a ``pa.BinaryArray`` with numpy; nothing is done per record in Python.

* :func:`split_frames` tells, for every row, whether it is null, framed or bad, its schema
  id, and where its payload starts and ends in the data buffer (:class:`Frames`). A codec
  whose payload has a further prefix (Protobuf's message indexes) advances
  ``Frames.starts`` for its rows before decoding.
* :func:`frame` prefixes every non-null payload with the magic byte and a schema id.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

MAGIC_BYTE = 0
HEADER_SIZE = 5


@dataclass
class Frames:
    #: uint8 view of the input's whole data buffer; ``starts``/``ends`` index into it
    data: np.ndarray
    #: bool per row: the input value is null (a tombstone), not a bad row
    nulls: np.ndarray
    #: bool per row: non-null, at least 5 bytes, magic byte 0
    framed: np.ndarray
    #: int32 per row: the frame's schema id, -1 where not framed
    schema_ids: np.ndarray
    #: int64 per row: payload start in ``data`` (after the 5-byte header when framed)
    starts: np.ndarray
    #: int64 per row: payload end (exclusive) in ``data``
    ends: np.ndarray
    #: int64: rows that are non-null but not framed
    bad_rows: np.ndarray
    #: one "not framed: ..." reason per bad row
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
        offsets = np.frombuffer(offsets_buf, dtype=offset_type)[values.offset:values.offset + n + 1]
        offsets = offsets.astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
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


def split_frames(values: pa.Array) -> Frames:
    """Find the Confluent frame of every row of ``values`` (a binary array)."""
    nulls, offsets, data = binary_buffers(values)
    starts = offsets[:-1].copy()
    ends = offsets[1:].copy()
    lengths = ends - starts
    long_enough = lengths >= HEADER_SIZE
    # Reads below are clipped, then masked by long_enough, so short rows read nothing real.
    first = data.take(starts, mode="clip") if data.size else np.zeros(len(starts), np.uint8)
    framed = ~nulls & long_enough & (first == MAGIC_BYTE)
    schema_ids = np.full(len(starts), -1, dtype=np.int32)
    rows = np.flatnonzero(framed)
    if rows.size:
        header = data[starts[rows, None] + np.arange(1, HEADER_SIZE)]   # (k, 4) bytes
        schema_ids[rows] = header.copy().view(">i4").reshape(-1)
        starts[rows] += HEADER_SIZE
    bad = ~nulls & ~framed
    bad_rows = np.flatnonzero(bad)
    reasons = []
    if bad_rows.size:
        bad_lengths = lengths[bad_rows].tolist()
        bad_first = first[bad_rows].tolist()
        for length, byte in zip(bad_lengths, bad_first):
            if length < HEADER_SIZE:
                reasons.append(f"not framed: {length} bytes, shorter than the 5-byte header")
            else:
                reasons.append(f"not framed: magic byte {byte}, expected 0")
    return Frames(data, nulls, framed, schema_ids, starts, ends, bad_rows, reasons)


def frame(schema_id: int, payloads: pa.Array) -> pa.BinaryArray:
    """``payloads`` (binary) with the 5-byte header in front of every non-null value;
    null rows stay null."""
    if not -(1 << 31) <= schema_id < (1 << 31):
        raise ValueError(f"schema id {schema_id} does not fit in an int32")
    nulls, offsets, data = binary_buffers(payloads)
    n = len(payloads)
    lengths = np.where(nulls, 0, np.diff(offsets))   # a null slot may still span bytes
    header_sizes = np.where(nulls, 0, HEADER_SIZE)
    new_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths + header_sizes, out=new_offsets[1:])
    total = int(new_offsets[-1])
    if total >= (1 << 31):
        raise ValueError(f"framed payloads total {total} bytes, more than a binary array holds")
    out = np.empty(total, dtype=np.uint8)
    header = np.frombuffer(bytes([MAGIC_BYTE]) + int(schema_id).to_bytes(4, "big", signed=True),
                           dtype=np.uint8)
    rows = np.flatnonzero(~nulls)
    out[new_offsets[rows, None] + np.arange(HEADER_SIZE)] = header
    payload_starts = new_offsets[:-1] + header_sizes
    out[slice_positions(payload_starts, lengths)] = data[slice_positions(offsets[:-1], lengths)]
    validity = None
    if nulls.any():
        validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(new_offsets.astype(np.int32)),
                                                  pa.py_buffer(out)], null_count=int(nulls.sum()))
