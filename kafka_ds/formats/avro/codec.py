"""The Avro codec: Confluent-framed (or plain) Avro values to Arrow, and back.

Decoding groups the rows by writer schema id, resolves each writer schema to the reader
schema once, and decodes each group either column-wise (the fast path,
:mod:`kafka_ds.formats.avro.columns`, for flat records) or record by record with fastavro
(the general path: nested types, enums, decimals, unions of several types, ...). The
groups' results are put back in row order. Bad records become bad rows with a reason.
"""

from __future__ import annotations

import io
import re
import threading

import fastavro
import numpy as np
import pyarrow as pa

from ...registry.errors import RegistryUnavailableError
from .. import DecodedColumn
from ..framing import frame, frame_header, split_frames
from .columns import FlatPlan, ResolutionError, build_plan
from .encode import FlatEncoder, NullInRequiredField, SeveralMembersSet, build_encoder
from .members import member_plan, tag_member, union_plan
from .raw_bytes import is_raw_bytes, with_avro_lengths, without_avro_lengths
from .references import inline_references, referenced_json
from .types import (
    AvroSchemaError,
    avro_to_spark,
    load_json,
    parse_schema,
    simple_string,
    spark_to_arrow,
)
from .values import arrow_converter, avro_converter, strip_logical_types

_PLAIN = object()  # the decoder key of unframed values (writer schema = reader schema)


class _Schema:
    """One registered Avro schema loaded both ways: our parsed node and fastavro's."""

    def __init__(self, registered, lookup):
        if (registered.schema_type or "AVRO").upper() != "AVRO":
            raise AvroSchemaError(
                f"schema {registered.schema_id} is {registered.schema_type}, not AVRO"
            )
        names: dict = {}
        referenced = referenced_json(registered, lookup)
        for ref_json in referenced:
            parse_schema(ref_json, names)
        text = load_json(registered.schema_str)
        self.node = parse_schema(text, names)
        try:
            # self-contained: fastavro loses the named types of a top-level union
            self.fastavro = fastavro.parse_schema(
                strip_logical_types(inline_references(text, referenced))
            )
        except Exception as exc:  # fastavro's SchemaParseException and friends
            raise AvroSchemaError(f"invalid Avro schema: {exc}") from exc


class _GeneralDecoder:
    """Record by record with fastavro, then one pa.array of the reader's Arrow type."""

    def __init__(self, writer: _Schema, reader: _Schema | None, arrow_type):
        self.writer = writer.fastavro
        self.reader = None if reader is None else reader.fastavro
        self.convert = arrow_converter((reader or writer).node)
        self.arrow_type = arrow_type

    def decode(self, data, starts, ends):
        n = len(starts)
        bad = np.zeros(n, bool)
        reasons = np.empty(n, dtype=object)
        values = []
        view = memoryview(data)
        read, convert = fastavro.schemaless_reader, self.convert
        for row, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            stream = io.BytesIO(view[start:end])
            try:
                value = read(stream, self.writer, self.reader, return_named_type=True)
                if stream.tell() != end - start:
                    raise _Trailing(end - start - stream.tell())
                values.append(convert(value) if convert else value)
            except Exception as exc:  # any fastavro failure is this record's problem
                bad[row] = True
                reasons[row] = _reason(exc)
                values.append(None)
        try:
            array = pa.array(values, type=self.arrow_type)
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            array = self._array_row_by_row(values, bad, reasons)
        return array, bad, reasons

    def _array_row_by_row(self, values, bad, reasons):
        """Find the values Arrow refuses (out of range, ...) and make them bad rows."""
        for row, value in enumerate(values):
            if value is None:
                continue
            try:
                pa.array([value], type=self.arrow_type)
            except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
                bad[row] = True
                reasons[row] = f"value does not fit {self.arrow_type}: {exc}"
                values[row] = None
        return pa.array(values, type=self.arrow_type)


class _Trailing(Exception):
    pass


def _reason(exc) -> str:
    if isinstance(exc, _Trailing):
        return f"trailing bytes: the record ends {exc.args[0]} bytes before its payload"
    if isinstance(exc, (EOFError, IndexError, StopIteration)) and "union" not in str(exc):
        detail = re.sub(r" from <[^>]*>", "", str(exc)) or "no more bytes"
        return f"truncated: {type(exc).__name__}: {detail}"
    if type(exc).__name__ == "SchemaResolutionError":
        return f"cannot be resolved to the reader schema: {exc}"
    return f"not valid Avro: {type(exc).__name__}: {exc}"


def _min_size_is_zero(node, seen) -> bool:
    kind = node["type"]
    if kind == "null" or (kind == "fixed" and node["size"] == 0):
        return True
    if kind == "record":
        if id(node) in seen:
            return False  # a recursive record always needs a byte somewhere
        return all(_min_size_is_zero(f["type"], seen | {id(node)}) for f in node["fields"])
    return False  # everything else takes at least one byte


def _zero_byte_array_items(node, seen=frozenset()) -> str | None:
    """Describes the first array in ``node`` whose items can take zero bytes, else None."""
    if id(node) in seen:
        return None
    seen = seen | {id(node)}
    kind = node["type"]
    if kind == "array":
        if _min_size_is_zero(node["items"], frozenset()):
            return node["items"].get("name") or node["items"]["type"]
        children = [node["items"]]
    elif kind == "map":
        children = [node["values"]]
    elif kind == "record":
        children = [f["type"] for f in node["fields"]]
    elif kind == "union":
        children = node["branches"]
    else:
        return None
    for child in children:
        found = _zero_byte_array_items(child, seen)
        if found:
            return found
    return None


class _Failed:
    """A decoder for a schema id whose every record fails the same way."""

    def __init__(self, reason):
        self.reason = reason


class _RawBytes:
    """The per-row decoder of framed records whose writer schema is a top-level ``bytes``
    (a decimal on it, or a reader the column plans do not take): their payload is the bytes
    alone, as Confluent's serializers write them (:mod:`kafka_ds.formats.avro.raw_bytes`).
    Avro's length is put back in front, column-wise, and ``decoder`` reads the rows as
    Avro. (A column plan reads such payloads raw itself: ``FlatPlan.raw_bytes``.)"""

    def __init__(self, decoder):
        self.decoder = decoder

    def decode(self, data, starts, ends):
        return self.decoder.decode(*with_avro_lengths(data, starts, ends))


class AvroCodec:
    """Avro values of one reader schema: ``decode`` to Arrow, ``encode`` from Arrow."""

    def __init__(self, reader_schema, *, framed: bool, lookup=None, schema_id: int | None = None):
        self.reader_schema = reader_schema
        self.framed = framed
        self.lookup = lookup
        self.schema_id = schema_id
        self._init_caches()
        spark, _nullable = avro_to_spark(self._reader().node)
        self.spark_type = simple_string(spark)
        self.arrow_type = spark_to_arrow(spark)

    def _init_caches(self):
        self._lock = threading.Lock()
        self._schemas = {}  # schema id -> _Schema, or the exception it failed with
        self._decoders = {}  # schema id (or _PLAIN) -> FlatPlan / _GeneralDecoder / _Failed
        self._encoders = {}  # Arrow type of the written column -> FlatEncoder or None
        self._reader_schema = None

    def __getstate__(self):
        state = {
            k: v
            for k, v in self.__dict__.items()
            if k not in ("_lock", "_schemas", "_decoders", "_encoders", "_reader_schema")
        }
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_caches()

    # -- schemas -------------------------------------------------------------------------

    def _reader(self) -> _Schema:
        if self._reader_schema is None:
            self._reader_schema = _Schema(self.reader_schema, self.lookup)
        return self._reader_schema

    @property
    def reader_node(self) -> dict:
        """The reader schema parsed, its references resolved (the node ``types.py`` and
        ``members.py`` read)."""
        return self._reader().node

    def _decoder(self, schema_id):
        decoder = self._decoders.get(schema_id)
        if decoder is None:
            with self._lock:
                decoder = self._decoders.get(schema_id)
                if decoder is None:
                    decoder = self._decoders[schema_id] = self._make_decoder(schema_id)
        return decoder

    def _make_decoder(self, schema_id):
        reader = self._reader()
        if schema_id is _PLAIN:
            writer = reader
        else:
            try:
                # no format: ?format=AVRO is no registry format (Avro's are default/resolved)
                registered = self.lookup.schema_by_id(schema_id) if self.lookup else None
                if registered is None:
                    return _Failed(f"unknown schema id {schema_id}: the codec has no registry")
                writer = _Schema(registered, self.lookup)
            except AvroSchemaError as exc:
                return _Failed(f"schema id {schema_id}: {exc}")
            except RegistryUnavailableError:
                # the registry, not the record: the task fails (Spark retries it) instead of
                # reading good records as bad ones, and nothing is cached
                raise
            except Exception as exc:  # the registry's own error (unknown id, refused)
                return _Failed(f"unknown schema id {schema_id}: {exc}")
        endless = _zero_byte_array_items(writer.node)
        if endless:
            # fastavro would loop once per announced item: a bad block count of 2^62 hangs
            return _Failed(
                f"not decoded: the writer schema has an array of {endless}, items of "
                "zero bytes, so a bad record could announce endless items"
            )
        try:
            decoder = self._column_plan(writer, reader)
        except ResolutionError as exc:
            return _Failed(f"cannot be resolved to the reader schema: {exc}")
        if decoder is None:
            same = writer is reader or writer.fastavro == reader.fastavro
            decoder = tag_member(
                _GeneralDecoder(writer, None if same else reader, self.arrow_type),
                writer.node,
                reader.node,
            )
        if schema_id is not _PLAIN and is_raw_bytes(writer.node):
            # Confluent's top-level bytes: the payload is the value, no Avro length
            return decoder.raw_bytes() if isinstance(decoder, FlatPlan) else _RawBytes(decoder)
        return decoder

    def _column_plan(self, writer, reader):
        """The column-wise decode plan from ``writer`` to ``reader`` (None: the schema
        takes the general path, fastavro per record)."""
        return (
            member_plan(writer.node, reader.node, self.arrow_type)  # one type of several
            or union_plan(writer.node, reader.node, self.arrow_type)  # a union of them
            or build_plan(writer.node, reader.node)
        )

    def _column_encoder(self, arrow_type):
        """The column-wise encoder of ``arrow_type`` columns (None: the general path,
        fastavro per row)."""
        if arrow_type not in self._encoders:
            self._encoders[arrow_type] = build_encoder(self._reader().node, arrow_type)
        return self._encoders[arrow_type]

    # -- decode --------------------------------------------------------------------------

    def decode(self, values) -> DecodedColumn:
        """Decode a binary array of Avro values (Confluent-framed when ``framed``)."""
        n = len(values)
        frames = split_frames(values, self.framed)
        data, starts, ends = frames.data, frames.starts, frames.ends
        if self.framed:
            row_ids = frames.schema_ids
            groups: list[tuple[object, np.ndarray]] = [
                (int(sid), np.flatnonzero(frames.readable & (row_ids == sid)))
                for sid in np.unique(row_ids[frames.readable]).tolist()
            ]
        else:
            groups = [(_PLAIN, np.flatnonzero(frames.readable))]
        bad_parts, reasons = [frames.bad_rows], list(frames.reasons)
        bad_id_parts = [np.full(len(frames.bad_rows), -1, np.int32)]
        parts, part_rows = [], []
        for schema_id, rows in groups:
            if not rows.size:
                continue
            decoder = self._decoder(schema_id)
            id_of_group = -1 if schema_id is _PLAIN else schema_id
            if isinstance(decoder, _Failed):
                bad_parts.append(rows)
                reasons += [decoder.reason] * len(rows)
                bad_id_parts.append(np.full(len(rows), id_of_group, np.int32))
                continue
            array, bad, why = decoder.decode(data, starts[rows], ends[rows])
            parts.append(array)
            part_rows.append(rows)
            if bad.any():
                local = np.flatnonzero(bad)
                bad_parts.append(rows[local])
                reasons += why[local].tolist()
                bad_id_parts.append(np.full(len(local), id_of_group, np.int32))
        array = self._in_row_order(n, parts, part_rows)
        bad_rows = np.concatenate(bad_parts) if bad_parts else np.zeros(0, np.int64)
        bad_ids = np.concatenate(bad_id_parts) if bad_id_parts else np.zeros(0, np.int32)
        order = np.argsort(bad_rows, kind="stable")
        return DecodedColumn(
            array,
            bad_rows[order].astype(np.int64),
            [reasons[i] for i in order.tolist()],
            bad_ids[order],
        )

    def _in_row_order(self, n, parts, part_rows):
        if len(parts) == 1 and len(part_rows[0]) == n:
            return parts[0]  # one schema, no nulls: already in row order
        covered = np.concatenate(part_rows) if part_rows else np.zeros(0, np.int64)
        rest = n - len(covered)
        if rest:
            missing = np.ones(n, bool)
            missing[covered] = False
            part_rows = part_rows + [np.flatnonzero(missing)]
            parts = parts + [pa.nulls(rest, self.arrow_type)]
        if not parts:
            return pa.nulls(0, self.arrow_type)
        position = np.empty(n, np.int64)
        position[np.concatenate(part_rows)] = np.arange(n)
        return pa.concat_arrays(parts).take(pa.array(position))

    # -- encode --------------------------------------------------------------------------

    def encode(self, array) -> pa.BinaryArray:
        """Avro binary of every row of ``array`` (of ``arrow_type``, or anything whose
        ``to_pylist`` fastavro accepts for the reader schema); null rows stay null; framed
        with ``schema_id`` when given (else, when ``framed``, the reader schema's id).
        Flat records whose column types map one to one take the column-wise path
        (:mod:`kafka_ds.formats.avro.encode`), the rest fastavro per row. A framed
        top-level ``bytes`` value is written as Confluent's serializers write it, without
        Avro's length (:mod:`kafka_ds.formats.avro.raw_bytes`)."""
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        schema_id = self.schema_id
        if schema_id is None and self.framed:
            schema_id = self.reader_schema.schema_id
            if schema_id is None:
                raise ValueError("a framed Avro codec needs a schema id to encode with")
        raw = schema_id is not None and is_raw_bytes(self._reader().node)
        encoder = self._column_encoder(array.type)
        if raw and isinstance(encoder, FlatEncoder):
            encoder = encoder.raw_bytes()  # Confluent's top-level bytes: no length
        if encoder is not None:
            try:
                return encoder.encode(array, b"" if schema_id is None else frame_header(schema_id))
            except (NullInRequiredField, SeveralMembersSet) as exc:
                raise ValueError(
                    f"row {exc.row} cannot be written as Avro {self.spark_type}: {exc}"
                ) from exc
        schema = self._reader()
        convert = avro_converter(schema.node)
        write = fastavro.schemaless_writer
        out: list[bytes | None] = []
        for row, value in enumerate(array.to_pylist()):
            if value is None:
                out.append(None)
                continue
            stream = io.BytesIO()
            try:
                write(stream, schema.fastavro, convert(value) if convert else value)
            except Exception as exc:
                raise ValueError(
                    f"row {row} cannot be written as Avro "
                    f"{self.spark_type}: {type(exc).__name__}: {exc}"
                ) from exc
            out.append(stream.getvalue())
        payloads = pa.array(out, type=pa.binary())
        if raw:
            payloads = without_avro_lengths(payloads)
        return payloads if schema_id is None else frame(schema_id, payloads)
