"""The Confluent wire frame (magic byte 0, 4-byte big-endian schema id), split column-wise.

Private to the Protobuf and JSON codecs for now: framing.py (written in parallel for Avro)
is the shared home, and ``split_frames`` should move onto it when the branches merge.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

#: magic byte 0 + 4-byte schema id
HEADER_SIZE = 5

#: Frames.status values (NOT_FRAMED: also a header with an id above 2^31-1)
OK = 0
NULL = 1
NOT_FRAMED = 2

_MAX_SCHEMA_ID = (1 << 31) - 1


@dataclass
class Frames:
    #: int8 per row: OK, NULL (tombstone) or NOT_FRAMED
    status: np.ndarray
    #: int64 per row: the writer schema id, -1 where not framed or not read framed
    schema_ids: np.ndarray
    #: int64 per row: where the payload (after the 5-byte header) starts / ends in ``data``
    starts: np.ndarray
    ends: np.ndarray
    #: the value bytes of the whole array (one copy), sliced per row by the codecs
    data: bytes

    def reason(self, row: int) -> str:
        start, end = int(self.starts[row]), int(self.ends[row])
        if end - start < HEADER_SIZE:
            return f"not framed: {end - start} bytes, shorter than the 5-byte Confluent header"
        if self.data[start] != 0:
            return f"not framed: magic byte {self.data[start]} (expected 0)"
        schema_id = int.from_bytes(self.data[start + 1:start + HEADER_SIZE], "big")
        return f"unknown schema id {schema_id} (registry ids are at most 2^31-1)"


def _binary_buffers(values: pa.Array):
    """Offsets (int64, length n+1) and the data buffer of a binary array."""
    if pa.types.is_large_binary(values.type):
        offset_type = np.int64
    elif pa.types.is_binary(values.type):
        offset_type = np.int32
    else:
        raise TypeError(f"expected a binary array, got {values.type}")
    n = len(values)
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type, count=n + 1,
                            offset=values.offset * np.dtype(offset_type).itemsize)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None \
        else np.zeros(0, np.uint8)
    return offsets.astype(np.int64), data


def split_frames(values: pa.Array, *, framed: bool) -> Frames:
    """Classify every row and locate its payload, without a Python step per row."""
    if pa.types.is_null(values.type):
        values = values.cast(pa.binary())
    offsets, data = _binary_buffers(values)
    n = len(values)
    starts = offsets[:-1].copy()
    ends = offsets[1:].copy()
    status = np.zeros(n, dtype=np.int8)
    schema_ids = np.full(n, -1, dtype=np.int64)
    if values.null_count:
        status[values.is_null().to_numpy(zero_copy_only=False)] = NULL
    if framed:
        candidates = (status == OK) & (ends - starts >= HEADER_SIZE)
        rows = np.flatnonzero(candidates)
        header_at = starts[rows]
        magic_ok = data[header_at] == 0
        status[(status == OK) & ~candidates] = NOT_FRAMED
        status[rows[~magic_ok]] = NOT_FRAMED
        rows, header_at = rows[magic_ok], header_at[magic_ok]
        ids = np.zeros(len(rows), dtype=np.int64)
        for k in range(1, HEADER_SIZE):
            ids = (ids << 8) | data[header_at + k].astype(np.int64)
        # registry ids are Java ints: 4 bytes above 2^31-1 name no schema
        too_large = ids > _MAX_SCHEMA_ID
        status[rows[too_large]] = NOT_FRAMED
        rows, ids = rows[~too_large], ids[~too_large]
        schema_ids[rows] = ids
        starts[rows] += HEADER_SIZE
    # the bytes of the data buffer that the array covers, once
    return Frames(status, schema_ids, starts, ends, data.tobytes())


def frame_header(schema_id: int) -> bytes:
    if not 0 <= schema_id < 1 << 32:
        raise ValueError(f"schema id {schema_id} does not fit the 4-byte Confluent header")
    return b"\x00" + schema_id.to_bytes(4, "big")

