"""A top-level Avro ``bytes`` value as Confluent's serializers frame it: the raw bytes.

After the 5-byte header, Confluent's serializers write a value whose schema is ``bytes``
(a logical type on it, decimal, included) as the bytes alone, **without** Avro's length
in front, and their deserializers read every record whose writer schema is ``bytes`` so:
Java's ``KafkaAvroSerializer``/``KafkaAvroDeserializer``, librdkafka's libserdes, and
confluent-kafka's ``AvroSerializer``/``AvroDeserializer``. Every other schema (a union with
a ``bytes`` branch, a record of ``bytes`` fields, ``fixed``, ``string``) is plain Avro binary
after the header, and so are unframed values (no registry, as Spark's ``from_avro`` reads
and ``to_avro`` writes them).

The column-wise paths read and write such values raw themselves (``FlatPlan.raw_bytes``:
the value is the rest of the payload; ``FlatEncoder.raw_bytes``: no length written). The
per-row paths (a decimal on the bytes, a reader schema the column plans do not take) keep
fastavro and convert at the edge, column-wise (numpy over the offsets and the data buffer,
nothing per record in Python): reading, :func:`with_avro_lengths` puts the length back in
front of every payload, so the rows resolve to the reader schema by the usual rules;
writing, :func:`without_avro_lengths` cuts the length fastavro wrote off again.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...protocol.records_arrays import peek_uvarints, varint_sizes
from ..framing import binary_buffers, slice_positions


def is_raw_bytes(node: dict) -> bool:
    """True when a parsed schema is a top-level ``bytes`` (with or without a logical
    type): Confluent's serializers write its values raw, without Avro's length."""
    return node["type"] == "bytes"


def with_avro_lengths(data: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """``(data, starts, ends)`` of the payloads ``data[starts:ends]`` each written as an
    Avro ``bytes`` value: its length (a zigzag varint), then the payload. A new buffer."""
    n = len(starts)
    lengths = (ends - starts).astype(np.int64)
    sizes = np.broadcast_to(varint_sizes(lengths, zigzag=True), (n,)).astype(np.int64)
    new_starts = np.zeros(n, np.int64)
    np.cumsum((sizes + lengths)[:-1], out=new_starts[1:])
    total = int(sizes.sum() + lengths.sum())
    out = np.empty(total, np.uint8)
    zigzag = lengths.astype(np.uint64) << np.uint64(1)  # lengths are never negative
    for k in range(int(sizes.max()) if n else 0):
        rows = np.flatnonzero(sizes > k)
        group = (zigzag[rows] >> np.uint64(7 * k)) & np.uint64(0x7F)
        group |= (sizes[rows] > k + 1).astype(np.uint64) << np.uint64(7)  # more bytes follow
        out[new_starts[rows] + k] = group
    value_starts = new_starts + sizes
    out[slice_positions(value_starts, lengths)] = data[slice_positions(starts, lengths)]
    return out, new_starts, value_starts + lengths


def without_avro_lengths(payloads: pa.Array) -> pa.BinaryArray:
    """Avro ``bytes`` values (each its length, then the bytes) as the bytes alone; null rows
    stay null."""
    nulls, offsets, data = binary_buffers(payloads)
    n = len(payloads)
    starts = offsets[:-1]
    rows = np.flatnonzero(~nulls)
    value_starts = starts.copy()
    lengths = np.zeros(n, np.int64)
    if rows.size:
        length, size = peek_uvarints(data, starts[rows])
        value_starts[rows] += size
        lengths[rows] = (length >> np.uint64(1)).astype(np.int64)  # zigzag of a length >= 0
        if np.any(value_starts[rows] + lengths[rows] != offsets[rows + 1]):
            raise ValueError("not one Avro bytes value per row")  # our own encoders' output
    new_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    if new_offsets[-1] >= (1 << 31):
        raise ValueError(
            f"values total {int(new_offsets[-1])} bytes, more than a binary array holds"
        )
    body = data[slice_positions(value_starts, lengths)]
    validity = None if not nulls.any() else pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(),
        n,
        [validity, pa.py_buffer(new_offsets.astype(np.int32)), pa.py_buffer(body)],
        null_count=int(nulls.sum()),
    )


__all__ = ["is_raw_bytes", "with_avro_lengths", "without_avro_lengths"]
