"""Column-wise conversions of what pyarrow's JSON reader read (:attr:`types.Node.raw`) into the
Spark types (:attr:`types.Node.arrow_type`): base64 decoded with numpy, scaled bytes laid into
Arrow's decimal128 buffers, integer-coded times cast. No Python object per value.

Every function returns ``(array, bad)``: ``bad`` is a :class:`Bad` of the rows (of the array
given) whose value could not be converted, with one reason each; those rows are null.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .types import Node

_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_INVALID = 255
_LUT = np.full(256, _INVALID, dtype=np.uint8)
_LUT[np.frombuffer(_ALPHABET, np.uint8)] = np.arange(64, dtype=np.uint8)
_LUT[ord("=")] = 0
_PAD = ord("=")


class Bad:
    """Rows that failed, and why: a boolean mask and one reason per failing row."""

    def __init__(self, n: int):
        self.mask = np.zeros(n, dtype=bool)
        self.reasons: dict[int, str] = {}

    def add(self, rows_mask: np.ndarray, reason: str) -> None:
        new = rows_mask & ~self.mask
        for row in np.flatnonzero(new).tolist():
            self.reasons[row] = reason
        self.mask |= new

    def merge(self, other: Bad, row_of=None) -> None:
        """``other``'s rows (mapped through ``row_of``, an index array) into this one."""
        for row, reason in other.reasons.items():
            target = int(row_of[row]) if row_of is not None else row
            if not self.mask[target]:
                self.mask[target] = True
                self.reasons[target] = reason

    def __bool__(self) -> bool:
        return bool(self.reasons)


def _valid(array: pa.Array) -> np.ndarray:
    return np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _validity_buffer(valid: np.ndarray):
    return pa.array(valid, pa.bool_()).buffers()[1]


def _binary_parts(array: pa.Array):
    """(offsets, data) of a string/binary array, offsets relative to ``data``."""
    buffers = array.buffers()
    n = len(array)
    offsets = np.frombuffer(buffers[1], dtype=np.int32)[array.offset : array.offset + n + 1]
    data = (
        np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, "u1")
    )
    return offsets.astype(np.int64), data


def _within(counts: np.ndarray) -> np.ndarray:
    """0..count-1 for each count, concatenated."""
    total = int(counts.sum())
    starts = np.cumsum(counts) - counts
    return np.arange(total, dtype=np.int64) - np.repeat(starts, counts)


def base64_decode(array: pa.Array, where: str) -> tuple[pa.Array, Bad]:
    """A string array of base64 text -> binary."""
    if array.type != pa.string():
        array = array.cast(pa.string())
    n = len(array)
    bad = Bad(n)
    valid = _valid(array)
    offsets, data = _binary_parts(array)
    lengths = np.diff(offsets)
    bad.add(valid & (lengths % 4 != 0), f"{where}: not base64 (length)")
    good = valid & ~bad.mask
    quads = np.where(good, lengths // 4, 0)
    quad_starts = np.repeat(offsets[:-1], quads) + 4 * _within(quads)
    chars = (
        data[quad_starts[:, None] + np.arange(4)] if len(quad_starts) else np.zeros((0, 4), "u1")
    )
    values = _LUT[chars]
    quad_rows = np.repeat(np.arange(n), quads)
    wrong = (values == _INVALID).any(axis=1)
    if wrong.any():
        rows = np.zeros(n, dtype=bool)
        rows[quad_rows[wrong]] = True
        bad.add(rows, f"{where}: not base64")
    pads = np.zeros(n, dtype=np.int64)
    ends = offsets[1:]
    has = good & (lengths >= 4)
    pads[has] = (data[ends[has] - 1] == _PAD).astype(np.int64) + (
        data[ends[has] - 2] == _PAD
    ).astype(np.int64)
    v = values.astype(np.uint8)
    out = np.empty((len(v), 3), dtype=np.uint8)
    out[:, 0] = (v[:, 0] << 2) | (v[:, 1] >> 4)
    out[:, 1] = ((v[:, 1] & 15) << 4) | (v[:, 2] >> 2)
    out[:, 2] = ((v[:, 2] & 3) << 6) | v[:, 3]
    flat = out.reshape(-1)
    out_lengths = quads * 3 - pads
    if pads.any():
        keep = np.ones(len(flat), dtype=bool)
        row_ends = np.cumsum(quads * 3)
        for p in (1, 2):
            rows = np.flatnonzero(pads >= p)
            keep[row_ends[rows] - p] = False
        flat = flat[keep]
    final_valid = valid & ~bad.mask
    out_lengths = np.where(final_valid, out_lengths, 0)
    if bad:  # drop the bytes of the rows that failed
        keep_rows = np.repeat(final_valid[quads > 0], (quads * 3 - pads)[quads > 0])
        flat = flat[keep_rows]
    new_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(out_lengths, out=new_offsets[1:])
    result = pa.Array.from_buffers(
        pa.binary(),
        n,
        [_validity_buffer(final_valid), pa.py_buffer(new_offsets), pa.py_buffer(flat.tobytes())],
    )
    return result, bad


def unscaled_decimal(
    array: pa.Array, precision: int, scale: int, where: str
) -> tuple[pa.Array, Bad]:
    """Big-endian two's complement bytes (Connect's Decimal) -> decimal128(precision, scale)."""
    n = len(array)
    bad = Bad(n)
    valid = _valid(array)
    offsets, data = _binary_parts(array)
    lengths = np.diff(offsets)
    bad.add(valid & (lengths > 16), f"{where}: more than 16 bytes for decimal({precision},{scale})")
    good = valid & ~bad.mask & (lengths > 0)
    out = np.zeros((n, 16), dtype=np.uint8)
    rows = np.flatnonzero(good)
    negative = rows[data[offsets[rows]] >= 0x80]
    out[negative] = 0xFF
    counts = lengths[rows]
    element_rows = np.repeat(rows, counts)
    j = _within(counts)
    out[element_rows, np.repeat(counts, counts) - 1 - j] = data[
        np.repeat(offsets[rows], counts) + j
    ]
    final_valid = valid & ~bad.mask
    wide = pa.Array.from_buffers(
        pa.decimal128(38, scale), n, [_validity_buffer(final_valid), pa.py_buffer(out.tobytes())]
    )
    if precision == 38:
        return wide, bad
    try:
        return wide.cast(pa.decimal128(precision, scale)), bad
    except pa.ArrowInvalid:
        fits = _fits(wide, precision, scale)
        bad.add(final_valid & ~fits, f"{where}: does not fit decimal({precision},{scale})")
        kept = pa.array(fits, pa.bool_(), mask=~fits)
        return wide.filter(kept, null_selection_behavior="emit_null").cast(
            pa.decimal128(precision, scale)
        ), bad


def _fits(wide: pa.Array, precision: int, scale: int) -> np.ndarray:
    import pyarrow.compute as pc

    limit = pa.scalar(10 ** (precision - scale), pa.decimal128(38, 0)).cast(
        pa.decimal128(38, scale)
    )
    return np.asarray(
        pc.fill_null(pc.less(pc.abs(wide), limit), True).to_numpy(zero_copy_only=False), bool
    )


def variable_decimal(array: pa.StructArray, node: Node, where: str) -> tuple[pa.Array, Bad]:
    """Debezium's ``{scale, value}`` (bytes of the unscaled value) -> decimal128(38, 18)."""
    n = len(array)
    scale_col, value_col = array.flatten()
    if node.encoded:
        unscaled, bad = base64_decode(value_col, where)
    else:  # Avro: the bytes themselves
        unscaled, bad = value_col.cast(pa.binary()), Bad(n)
    target = pa.decimal128(node.precision, node.scale)
    scales = np.asarray(scale_col.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    valid = _valid(array) & _valid(unscaled) & ~bad.mask
    pieces = []
    positions = np.full(n, -1, dtype=np.int64)
    at = 0
    for scale in np.unique(scales[valid]).tolist():
        rows = np.flatnonzero(valid & (scales == scale))
        taken = unscaled.take(pa.array(rows))
        decoded, inner = unscaled_decimal(taken, 38, 0, where)
        if 0 <= scale <= 38:
            as_scaled = pa.Array.from_buffers(
                pa.decimal128(38, scale), len(decoded), decoded.buffers()
            )
            try:
                converted = as_scaled.cast(target)
            except pa.ArrowInvalid:
                converted = None
        else:
            converted = None
        if converted is None:
            mask = np.zeros(n, dtype=bool)
            mask[rows] = True
            bad.add(mask, f"{where}: scale {scale} does not fit decimal(38,{node.scale})")
            continue
        bad.merge(inner, rows)
        pieces.append(converted)
        positions[rows] = np.arange(at, at + len(rows))
        at += len(rows)
    pieces.append(pa.nulls(1, target))
    positions[positions < 0] = at
    positions[bad.mask] = at
    return pa.concat_arrays(pieces).take(pa.array(positions)), bad


def convert(node: Node, array: pa.Array, where: str) -> tuple[pa.Array, Bad]:
    """The raw array of ``node`` -> its Spark type's Arrow array."""
    kind = node.kind
    if not node.encoded and kind in ("bytes", "decimal"):  # Avro: decoded already
        return array, Bad(len(array))
    if kind == "bytes":
        return base64_decode(array, where)
    if kind == "decimal":
        raw, bad = base64_decode(array, where)
        result, inner = unscaled_decimal(raw, node.precision, node.scale, where)
        bad.merge(inner)
        return result, bad
    if kind == "variable_decimal":
        return variable_decimal(array, node, where)
    if kind == "timestamp":
        typed = array.cast(pa.int64()).cast(pa.timestamp(node.unit))
        return typed.cast(pa.timestamp("us"), safe=False), Bad(len(array))
    if kind == "zoned_timestamp":
        return _zoned(array, where)
    if kind == "date":
        return array.cast(pa.int32()).cast(pa.date32()), Bad(len(array))
    if kind == "struct":
        return convert_struct(node, array, where)
    if kind == "array":
        assert node.items is not None
        values, inner = convert(node.items, array.values, where + "[]")
        bad = Bad(len(array))
        if inner:
            offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), np.int64)
            row_of = np.searchsorted(offsets, np.arange(len(array.values)), side="right") - 1
            bad.merge(inner, row_of)
        mask = pa.array(~_valid(array) | bad.mask, pa.bool_())
        return pa.ListArray.from_arrays(array.offsets, values, mask=mask), bad
    return array, Bad(len(array))


def convert_struct(node: Node, array: pa.Array, where: str) -> tuple[pa.Array, Bad]:
    bad = Bad(len(array))
    children = []
    for (name, child), raw in zip(node.fields, array.flatten(), strict=True):
        converted, inner = convert(child, raw, f"{where}.{name}")
        bad.merge(inner)
        children.append(converted)
    mask = pa.array(~_valid(array) | bad.mask, pa.bool_())
    fields = [pa.field(name, c.type) for (name, _), c in zip(node.fields, children, strict=True)]
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask), bad


def _zoned(array: pa.Array, where: str) -> tuple[pa.Array, Bad]:
    target = pa.timestamp("us", tz="UTC")
    try:
        return array.cast(target), Bad(len(array))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    # only when the column holds something else than ISO-8601: find the rows
    bad = Bad(len(array))
    values = []
    for row, text in enumerate(array.to_pylist()):
        try:
            values.append(None if text is None else pa.scalar(text).cast(target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            mask = np.zeros(len(array), dtype=bool)
            mask[row] = True
            bad.add(mask, f"{where}: not an ISO-8601 timestamp: {text[:40]!r}")
            values.append(None)
    return pa.array(values, target), bad
