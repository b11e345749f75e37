"""``valueFormat=debezium-json`` / ``keyFormat=debezium-json``: Debezium's change events as
Kafka Connect's JSON converter writes them, with schemas (``{"schema": ..., "payload": ...}``)
or without (the payload alone), decoded column-wise.

One C++ parse per batch: the values become one newline-delimited text read by
``pyarrow.json.read_json`` with the payload's raw Arrow type as explicit schema (the
``schema`` part of each value is skipped), then :mod:`.convert` turns the raw columns into
Spark's types. Only a batch pyarrow refuses is parsed again record by record, to name the
bad ones.

The value (an envelope) reads as ``struct<op, before, after, source, ts_ms, unavailable>``:
``before``/``after`` the table's row, ``unavailable`` the names of ``after``'s columns that
held Debezium's placeholder for a TOASTed value an update left unchanged (those columns read
as null). With ``debezium.flatten=true`` it reads as the table's columns (``before``'s for a
delete, else ``after``'s) plus ``__op`` and ``__unavailable``. A key reads as its struct.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from .. import DecodedColumn
from ..framing import split_frames
from .convert import Bad, convert, convert_struct
from .types import Node

#: Debezium's default ``unavailable.value.placeholder``
UNAVAILABLE = "__debezium_unavailable_value"
_WRAPPED = np.frombuffer(b'{"schema":', dtype=np.uint8)
_READ_OPTIONS = pa_json.ReadOptions(use_threads=False, block_size=16 << 20)


class DebeziumJsonCodec:
    """Decodes one column of Connect JSON. ``row``: the table's row (a value, an envelope)
    or the key's struct (``envelope=False``); ``source``: the envelope's ``source`` block."""

    format_name = "debezium-json"

    def __init__(
        self,
        row: Node,
        *,
        envelope: bool,
        source: Node | None = None,
        flatten: bool = False,
        drop_tombstones: bool = True,
    ):
        self.row = row
        self.envelope = envelope
        self.source = source
        self.flatten = flatten and envelope
        self.drop_tombstones = drop_tombstones and envelope
        if envelope:
            assert source is not None
            self.payload = Node(
                "struct",
                fields=[
                    ("op", Node("string")),
                    ("before", row),
                    ("after", row),
                    ("source", source),
                    ("ts_ms", Node("int64")),
                ],
            )
        else:
            self.payload = row

    # -- types ---------------------------------------------------------------------------------

    @property
    def arrow_type(self) -> pa.DataType:
        if not self.envelope:
            return self.row.arrow_type
        row_fields = [(name, node.arrow_type) for name, node in self.row.fields]
        unavailable = pa.list_(pa.string())
        if self.flatten:
            return pa.struct(row_fields + [("__op", pa.string()), ("__unavailable", unavailable)])
        return pa.struct(
            [
                ("op", pa.string()),
                ("before", self.row.arrow_type),
                ("after", self.row.arrow_type),
                ("source", self.source.arrow_type),  # type: ignore[union-attr]
                ("ts_ms", pa.int64()),
                ("unavailable", unavailable),
            ]
        )

    @property
    def spark_type(self) -> str:
        if not self.envelope:
            return self.row.spark_type
        row_fields = [f"{name}:{node.spark_type}" for name, node in self.row.fields]
        if self.flatten:
            return (
                "struct<"
                + ",".join(row_fields + ["__op:string", "__unavailable:array<string>"])
                + ">"
            )
        return (
            f"struct<op:string,before:{self.row.spark_type},after:{self.row.spark_type},"
            f"source:{self.source.spark_type},ts_ms:bigint,"  # type: ignore[union-attr]
            "unavailable:array<string>>"
        )

    # -- decode --------------------------------------------------------------------------------

    def decode(self, values: pa.Array) -> DecodedColumn:
        n = len(values)
        frames = split_frames(values, False)
        bad = Bad(n)
        rows = np.flatnonzero(frames.readable)
        empty = rows[frames.ends[rows] == frames.starts[rows]]
        if len(empty):
            mask = np.zeros(n, dtype=bool)
            mask[empty] = True
            bad.add(mask, "empty value (not JSON)")
            rows = np.setdiff1d(rows, empty, assume_unique=True)
        wrapped = _starts_with(frames, rows, _WRAPPED)
        pieces, positions, at = [], np.full(n, -1, dtype=np.int64), 0
        for group, is_wrapped in ((rows[wrapped], True), (rows[~wrapped], False)):
            if not len(group):
                continue
            raw = self._read(values, group, is_wrapped, bad)
            kept = group[~bad.mask[group]]
            if raw is None or not len(kept):
                continue
            pieces.append(raw)
            positions[kept] = np.arange(at, at + len(kept))
            at += len(kept)
        pieces.append(pa.nulls(1, self.payload.raw))
        positions[positions < 0] = at
        raw_all = pa.concat_arrays(pieces).take(pa.array(positions))
        array, conversion = self._convert(raw_all)
        bad.merge(conversion)
        if bad:
            array = array.filter(
                pa.array(~bad.mask, pa.bool_(), mask=bad.mask),
                null_selection_behavior="emit_null",
            )
        ordered = sorted(bad.reasons)
        return DecodedColumn(
            array=array,
            bad_rows=np.asarray(ordered, dtype=np.int64),
            reasons=[bad.reasons[r] for r in ordered],
            schema_ids=np.full(len(ordered), -1, dtype=np.int32),
        )

    def _schema(self, wrapped: bool) -> pa.Schema:
        raw = self.payload.raw
        if wrapped:
            return pa.schema([("payload", raw)])
        return pa.schema(list(raw))

    def _read(self, values, rows: np.ndarray, wrapped: bool, bad: Bad):
        """The raw payloads of ``rows`` (those not bad), one struct array; bad rows named."""
        schema = self._schema(wrapped)
        table = _read_ndjson(_ndjson(values, rows), len(rows), schema)
        if table is None:
            # only when pyarrow refused the batch: find the records it refuses
            for row in rows.tolist():
                if _read_ndjson(_ndjson(values, np.asarray([row])), 1, schema) is None:
                    mask = np.zeros(len(bad.mask), dtype=bool)
                    mask[row] = True
                    bad.add(
                        mask,
                        "not a change event as Kafka Connect's JSON converter writes it "
                        "(invalid JSON, or a field of another type than the envelope's schema)",
                    )
            kept = rows[~bad.mask[rows]]
            if not len(kept):
                return None
            table = _read_ndjson(_ndjson(values, kept), len(kept), schema)
            if table is None:  # each read alone (a value pyarrow's blocks split)
                tables = [
                    _read_ndjson(_ndjson(values, kept[i : i + 1]), 1, schema)
                    for i in range(len(kept))
                ]
                table = pa.concat_tables(tables)
        struct = pa.StructArray.from_arrays(
            [c.combine_chunks() for c in table.columns], fields=list(table.schema)
        )
        if wrapped:
            struct = struct.field(0)  # the payload
        return struct

    def _convert(self, raw: pa.Array):
        if not self.envelope:
            return convert_struct(self.row, raw, "$")
        bad = Bad(len(raw))
        parts = dict(zip(raw.type.names, raw.flatten(), strict=True))
        op, before, after = parts["op"], parts["before"], parts["after"]
        source, ts_ms = parts["source"], parts["ts_ms"]
        before, inner = convert_struct(self.row, before, "before")
        bad.merge(inner)
        after, inner = convert_struct(self.row, after, "after")
        bad.merge(inner)
        after, unavailable = self._unavailable(after)
        source, inner = convert(self.source, source, "source")  # type: ignore[arg-type]
        bad.merge(inner)
        valid = ~np.asarray(raw.is_null().to_numpy(zero_copy_only=False), bool)
        mask = pa.array(~valid, pa.bool_())
        if self.flatten:
            deleted = pc.fill_null(pc.equal(op, "d"), False)
            columns = [
                pc.if_else(deleted, old, new)
                for old, new in zip(before.flatten(), after.flatten(), strict=True)
            ]
            names = [name for name, _ in self.row.fields] + ["__op", "__unavailable"]
            fields = [
                pa.field(name, c.type)
                for name, c in zip(names, columns + [op, unavailable], strict=True)
            ]
            return pa.StructArray.from_arrays(
                columns + [op, unavailable], fields=fields, mask=mask
            ), bad
        children = [op, before, after, source, ts_ms, unavailable]
        return pa.StructArray.from_arrays(children, fields=list(self.arrow_type), mask=mask), bad

    def _unavailable(self, after: pa.StructArray):
        """``after`` with the placeholder of each unchanged TOASTed column made null, and the
        list of those columns' names per row."""
        columns = after.flatten()
        names = [name for name, _ in self.row.fields]
        masks = []
        replaced = []
        for column in columns:
            if column.type in (pa.string(), pa.binary()):
                hit = pc.fill_null(pc.equal(column, pa.scalar(UNAVAILABLE, column.type)), False)
                flags = np.asarray(hit.to_numpy(zero_copy_only=False), bool)
                if flags.any():
                    column = pc.if_else(hit, pa.scalar(None, column.type), column)
            else:
                flags = np.zeros(len(after), dtype=bool)
            masks.append(flags)
            replaced.append(column)
        n = len(after)
        matrix = np.stack(masks, axis=1) if masks else np.zeros((n, 0), dtype=bool)
        counts = matrix.sum(axis=1)
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        which = np.nonzero(matrix)[1]
        listed = pa.ListArray.from_arrays(
            pa.array(offsets), pa.array(names, pa.string()).take(pa.array(which, pa.int64()))
        )
        if not counts.any():
            return after, listed
        mask = pa.array(~np.asarray(after.is_valid().to_numpy(zero_copy_only=False), bool))
        return pa.StructArray.from_arrays(replaced, fields=list(after.type), mask=mask), listed


def _starts_with(frames, rows: np.ndarray, prefix: np.ndarray) -> np.ndarray:
    """For each of ``rows``: does its value start with ``prefix``."""
    long_enough = frames.ends[rows] - frames.starts[rows] >= len(prefix)
    result = np.zeros(len(rows), dtype=bool)
    candidates = np.flatnonzero(long_enough)
    if len(candidates):
        starts = frames.starts[rows[candidates]]
        heads = frames.data[starts[:, None] + np.arange(len(prefix))]
        result[candidates] = (heads == prefix).all(axis=1)
    return result


def _ndjson(values: pa.Array, rows: np.ndarray) -> pa.Buffer:
    """The values of ``rows`` joined by newlines, one text: one C++ join."""
    chosen = values.take(pa.array(rows, pa.int64())) if len(rows) != len(values) else values
    if chosen.type != pa.binary():
        chosen = chosen.cast(pa.binary())
    one_list = pa.ListArray.from_arrays(pa.array([0, len(chosen)], pa.int32()), chosen)
    return pc.binary_join(one_list, b"\n")[0].as_buffer()


def _read_ndjson(text: pa.Buffer, rows: int, schema: pa.Schema):
    parse = pa_json.ParseOptions(
        explicit_schema=schema, unexpected_field_behavior="ignore", newlines_in_values=False
    )
    try:
        table = pa_json.read_json(
            pa.BufferReader(text), read_options=_READ_OPTIONS, parse_options=parse
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != rows:  # a value held a raw newline, or was not one object
        return None
    return table
