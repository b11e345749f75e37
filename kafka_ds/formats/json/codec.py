"""Confluent-framed (or plain) JSON values decoded into Arrow, and encoded back.

Decode is one C++ parse per batch: the payloads become one newline-delimited text read by
``pyarrow.json.read_json`` (``ndjson.py``). Records the batch reader cannot take as they
are (a raw newline inside, not starting with ``{``, a schema with maps, which pyarrow's
reader does not convert) and every record of a batch pyarrow refuses are parsed one by
one, which names the bad rows.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from kafka_ds.formats.framing import frame_header, split_frames
from kafka_ds.formats.json.encode import NotJsonCompliant, build_object_encoder
from kafka_ds.formats.json.ndjson import NdjsonReader
from kafka_ds.formats.json.references import self_contained
from kafka_ds.formats.json.schema import (
    Mismatch,
    Node,
    coerce,
    compile_schema,
    parse,
    to_json_value,
)
from kafka_ds.registry.errors import RegistryUnavailableError
from kafka_ds.registry.schema import RegisteredSchema

from .. import DecodedColumn


class JsonCodec:
    def __init__(
        self,
        reader_schema: RegisteredSchema | None,
        *,
        framed: bool,
        lookup=None,
        schema_id: int | None = None,
    ):
        if reader_schema is not None and reader_schema.schema_type.upper() != "JSON":
            raise ValueError(f"the reader schema is {reader_schema.schema_type}, not JSON")
        if reader_schema is not None and reader_schema.references:
            reader_schema = self_contained(reader_schema, lookup)  # $refs to other subjects
        self.reader_schema = reader_schema
        self.framed = framed
        self.lookup = lookup
        self.schema_id = (
            schema_id
            if schema_id is not None
            else (reader_schema.schema_id if reader_schema is not None else None)
        )
        # without a reader schema the value is the JSON text itself (checked to be JSON)
        self.root = (
            compile_schema(reader_schema.schema_str)
            if reader_schema is not None
            else Node("string")
        )
        # the batch path: a struct schema without maps (pyarrow's reader converts no maps)
        self._batch = (
            NdjsonReader(self.root, framed)
            if reader_schema is not None and self.root.kind == "struct" and not self.root.has_map
            else None
        )
        self._writer_errors: dict = {}
        self._encoders: dict = {}  # Arrow type of the written column -> FlatObjectEncoder / None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_writer_errors"] = {}
        state["_encoders"] = {}
        return state

    @property
    def spark_type(self) -> str:
        return self.root.spark_type

    @property
    def arrow_type(self) -> pa.DataType:
        return self.root.arrow_type

    # -- decode -------------------------------------------------------------------------------

    def _writer_error(self, schema_id: int):
        """Why records of this writer schema id cannot be read (None: they can)."""
        if self.lookup is None or schema_id == self.reader_schema_id:
            return None
        if schema_id not in self._writer_errors:
            try:
                schema = self.lookup.schema_by_id(schema_id)
                error = (
                    None
                    if schema.schema_type.upper() == "JSON"
                    else f"schema id {schema_id} is {schema.schema_type}, not JSON"
                )
            except RegistryUnavailableError:
                raise  # the registry, not the record: the task fails, nothing cached
            except Exception as exc:
                error = f"unknown schema id {schema_id}: {exc}"
            self._writer_errors[schema_id] = error
        return self._writer_errors[schema_id]

    @property
    def reader_schema_id(self):
        return self.reader_schema.schema_id if self.reader_schema is not None else None

    def decode(self, values: pa.Array) -> DecodedColumn:
        frames = split_frames(values, self.framed)
        n = len(values)
        bad = {}  # row -> (reason, schema id)
        for row, reason in zip(frames.bad_rows.tolist(), frames.reasons, strict=True):
            bad[row] = (reason, -1)
        ok = frames.readable.copy()
        if self.framed:
            for schema_id in np.unique(frames.schema_ids[ok]).tolist():
                error = self._writer_error(schema_id)
                if error is not None:
                    rows = np.flatnonzero(ok & (frames.schema_ids == schema_id))
                    for row in rows.tolist():
                        bad[row] = (error, schema_id)
                    ok[rows] = False
        batch = self._batch
        batch_rows = batch.candidates(frames, ok) if batch is not None else np.zeros(0, np.int64)
        array_by_row = None
        if batch is not None and len(batch_rows):
            table = batch.read(frames, batch_rows)
            if table is None:  # pyarrow refused the batch: find the bad rows one by one
                batch_rows = np.zeros(0, np.int64)
            else:
                array_by_row = (batch_rows, table)
        single = np.flatnonzero(ok)
        if len(batch_rows):
            single = np.setdiff1d(single, batch_rows, assume_unique=True)
        values_single = self._decode_each(frames, single, bad)
        array = self._assemble(n, array_by_row, single, values_single)
        bad_sorted = sorted(bad)
        return DecodedColumn(
            array=array,
            bad_rows=np.asarray(bad_sorted, dtype=np.int64),
            reasons=[bad[r][0] for r in bad_sorted],
            schema_ids=np.asarray([bad[r][1] for r in bad_sorted], dtype=np.int32),
        )

    def _decode_each(self, frames, rows, bad):
        """Python values (for arrow_type) of the rows; bad rows recorded in ``bad``."""
        data = frames.data.tobytes() if len(rows) else b""
        root = self.root
        values: list = []
        for row in rows.tolist():
            payload = data[frames.starts[row] : frames.ends[row]]
            schema_id = int(frames.schema_ids[row])
            try:
                parsed = parse(payload)
            except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is one
                bad[row] = (f"invalid JSON: {exc}", schema_id)
                values.append(None)
                continue
            if self.reader_schema is None:
                values.append(payload.decode("utf-8"))
                continue
            try:
                if parsed is None and not root.nullable:
                    raise Mismatch("$: null, and the schema does not allow it")
                values.append(coerce(root, parsed))
            except Mismatch as exc:
                bad[row] = (f"does not match the reader schema: {exc}", schema_id)
                values.append(None)
            except RecursionError:
                bad[row] = ("does not match the reader schema: nested too deeply", schema_id)
                values.append(None)
        return values

    def _assemble(self, n, array_by_row, single_rows, single_values):
        arrow_type = self.arrow_type
        pieces, at = [], 0
        positions = np.full(n, -1, dtype=np.int64)
        if array_by_row is not None:
            rows, array = array_by_row
            if len(rows) == n:
                return array
            pieces.append(array)
            positions[rows] = np.arange(len(rows))
            at = len(rows)
        if len(single_rows):
            pieces.append(pa.array(single_values, arrow_type))
            positions[single_rows] = np.arange(at, at + len(single_rows))
            at += len(single_rows)
        pieces.append(pa.nulls(1, arrow_type))
        positions[positions < 0] = at
        return pa.concat_arrays(pieces).take(pa.array(positions))

    # -- encode -------------------------------------------------------------------------------

    def _column_encoder(self, arrow_type):
        """The column-wise encoder of ``arrow_type`` columns (None: the general path,
        ``json.dumps`` per row)."""
        if self.reader_schema is None:
            return None
        if arrow_type not in self._encoders:
            self._encoders[arrow_type] = build_object_encoder(self.root, arrow_type)
        return self._encoders[arrow_type]

    def encode(self, array: pa.Array) -> pa.BinaryArray:
        if self.framed:
            if self.schema_id is None:
                raise ValueError("framed JSON encoding needs the schema id to write")
            prefix = frame_header(self.schema_id)
        else:
            prefix = b""
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        encoder = self._column_encoder(array.type)
        if encoder is not None:
            try:
                return encoder.encode(array, prefix)
            except NotJsonCompliant as exc:
                raise ValueError(f"row {exc.row}: cannot encode as JSON: {exc}") from exc
        root = self.root
        out: list[bytes | None] = []
        for row, value in enumerate(array.to_pylist()):
            if value is None:
                out.append(None)
            elif self.reader_schema is None:
                out.append(
                    prefix + value.encode("utf-8")
                    if isinstance(value, str)
                    else prefix + json.dumps(value).encode("utf-8")
                )
            else:
                try:
                    text = json.dumps(
                        to_json_value(root, value),
                        separators=(",", ":"),
                        ensure_ascii=False,
                        allow_nan=False,
                    )
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"row {row}: cannot encode as JSON: {exc}") from exc
                out.append(prefix + text.encode("utf-8"))
        return pa.array(out, pa.binary())
