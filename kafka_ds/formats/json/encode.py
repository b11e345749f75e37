"""The write fast path for flat JSON objects: every row's text built column by column.

A :class:`FlatObjectEncoder` is built once per (JSON Schema root, Arrow type of the
written column) when the root is an object whose properties are all strings, integers,
numbers or booleans and the column holds each with a matching Arrow type (others --
nested objects, arrays, maps, dates, timestamps -- take the general path, ``json.dumps``
per row).

Each property's JSON text is made for all rows at once by Arrow kernels (integers cast to
text, booleans and nulls as constants, strings quoted; the rare string that needs escapes
goes through ``json.dumps``; numbers take Arrow's shortest round-trip text, set in
Python's notation). One ``binary_join_element_wise`` puts the texts and the constant
pieces between them (``{"name":``, ``,"next":``, ``}``) together. The result is byte for byte
``json.dumps(row, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..wire_columns import valid_mask

_INTEGERS = (pa.int8(), pa.int16(), pa.int32(), pa.int64())
_ACCEPTS = {
    "bigint": lambda t: t in _INTEGERS,
    "double": lambda t: t in (pa.float32(), pa.float64()),
    "boolean": lambda t: t == pa.bool_(),
    "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
}
# characters json.dumps escapes with ensure_ascii=False
_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'


class NotJsonCompliant(ValueError):
    """A row holds a value JSON cannot write (``row``: its index)."""

    def __init__(self, row: int, reason: str):
        super().__init__(reason)
        self.row = row


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False)


class FlatObjectEncoder:
    """Encodes struct columns of one Arrow type as flat JSON objects, column-wise."""

    def __init__(self, properties):
        self.properties = properties  # (name, kind, struct child index or None)

    def encode(self, array: pa.Array, prefix: bytes = b"") -> pa.BinaryArray:
        """Every row's JSON text (UTF-8) with ``prefix`` in front; null rows stay null."""
        present = valid_mask(array)
        pieces = []  # constant bytes and text columns, joined row by row at the end
        constant = prefix + b"{"
        for index, (name, kind, child) in enumerate(self.properties):
            constant += (b"," if index else b"") + _dumps(name).encode("utf-8") + b":"
            if child is None:
                constant += b"null"
                continue
            pieces.append(pa.scalar(constant, pa.binary()))
            pieces.append(self._text(array.field(child), kind, present).view(pa.binary()))
            constant = b""
        pieces.append(pa.scalar(constant + b"}", pa.binary()))
        nothing = pa.scalar(None, pa.binary())
        if len(pieces) == 1:  # no property in the column: one text
            return pc.if_else(pa.array(present), pieces[0], nothing)
        joined = pc.binary_join_element_wise(*pieces, pa.scalar(b"", pa.binary()))
        return joined if present.all() else pc.if_else(pa.array(present), joined, nothing)

    @staticmethod
    def _text(column: pa.Array, kind: str, present: np.ndarray) -> pa.Array:
        """The JSON text of every value of one property ("null" for nulls)."""
        if kind == "bigint":
            text = column.cast(pa.string())
        elif kind == "boolean":
            text = pc.if_else(column, "true", "false")
        elif kind == "double":
            values = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
            finite = np.isfinite(values) | ~valid_mask(column) | ~present
            if not finite.all():
                row = int(np.flatnonzero(~finite)[0])
                raise NotJsonCompliant(
                    row, f"Out of range float values are not JSON compliant: {values[row]!r}"
                )
            text = _repr_texts(column.cast(pa.float64()), values, valid_mask(column) & present)
        else:
            text = pc.binary_join_element_wise("", column.cast(pa.string()), "", '"')
            escaped = pc.match_substring_regex(column, _NEEDS_ESCAPE)
            if pc.any(escaped).as_py():
                rows = np.flatnonzero(escaped.to_numpy(zero_copy_only=False))
                replaced = text.to_pylist()
                for row, value in zip(rows.tolist(), column.take(rows).to_pylist(), strict=True):
                    replaced[row] = _dumps(value)
                text = pa.array(replaced, pa.string())
        return text.fill_null("null")


def _repr_texts(column: pa.Array, values: np.ndarray, valid: np.ndarray) -> pa.Array:
    """``float.__repr__`` of every value (null where not ``valid``), column-wise.

    Arrow's cast writes the same shortest round-trip digits as Python, but chooses
    positional or exponent notation by other rules and drops ".0": where both write
    positional (Python: 1e-4 up to 1e16) or both exponent (Python: 1e16 and up; two
    exponent digits or more), Arrow's text plus ".0" where it has neither "." nor "e" is
    Python's; the other values (rare) are written by Python one by one."""
    magnitude = np.abs(values)
    text = column.cast(pa.string())
    exponent = pc.match_substring(text, "e").fill_null(False).to_numpy(zero_copy_only=False)
    positional = (magnitude >= 1e-4) & (magnitude < 1e15)
    same = (positional & ~exponent) | ((magnitude >= 1e16) & exponent) | (values == 0)
    text = pc.if_else(
        pc.match_substring_regex(text, "[.e]"), text, pc.binary_join_element_wise(text, ".0", "")
    )
    other = np.flatnonzero(valid & ~same)
    if other.size:
        texts = text.to_pylist()
        for row in other.tolist():
            texts[row] = float.__repr__(float(values[row]))
        text = pa.array(texts, pa.string())
    return pc.if_else(pa.array(valid), text, pa.scalar(None, pa.string()))


def build_object_encoder(root, arrow_type: pa.DataType) -> FlatObjectEncoder | None:
    """A FlatObjectEncoder of ``arrow_type`` columns for the compiled schema ``root`` (a
    schema.Node), or None when the pair takes the general path."""
    if root.kind != "struct" or not pa.types.is_struct(arrow_type):
        return None
    children = {arrow_type.field(i).name: i for i in range(arrow_type.num_fields)}
    if len(children) != arrow_type.num_fields:
        return None
    properties = []
    for name, node in root.children:
        accepts = _ACCEPTS.get(node.kind)
        if accepts is None:
            return None
        child = children.get(name)
        if child is not None and not accepts(arrow_type.field(child).type):
            return None
        properties.append((name, node.kind, child))
    return FlatObjectEncoder(properties)


__all__ = ["FlatObjectEncoder", "NotJsonCompliant", "build_object_encoder"]
