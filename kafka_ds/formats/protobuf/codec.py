"""Confluent-framed Protobuf values decoded into Arrow (and encoded back).

A framed record is: magic byte 0, the 4-byte writer schema id, the message indexes (which
message of the writer's file, see ``schema.encode_message_indexes``), then the
serialized message. The record is parsed with the WRITER's message class and mapped to the
reader's Spark type by field name (``arrow.py``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from google.protobuf import message_factory
from google.protobuf.message import DecodeError

from kafka_ds.formats.framing import frame_header, split_frames
from kafka_ds.formats.protobuf.arrow import fill_message
from kafka_ds.formats.protobuf.columns import NeedsRuntime, build_message_decoder
from kafka_ds.formats.protobuf.encode import build_message_encoder
from kafka_ds.formats.protobuf.schema import (
    ProtobufSchemaError,
    build_pool,
    encode_message_indexes,
    indexes_of,
    message_types,
    read_message_indexes,
)
from kafka_ds.formats.protobuf.writers import Writer, WriterTypes
from kafka_ds.registry.schema import RegisteredSchema

from .. import DecodedColumn

_READER_FILE = "kafka_ds_reader.proto"


class ProtobufCodec:
    def __init__(
        self,
        reader_schema: RegisteredSchema,
        *,
        framed: bool,
        lookup=None,
        schema_id: int | None = None,
        message_name: str | None = None,
    ):
        self.reader_schema = reader_schema
        self.framed = framed
        self.lookup = lookup
        self.schema_id = schema_id if schema_id is not None else reader_schema.schema_id
        self.message_name = message_name
        self._reset()
        self._reader()  # a bad reader schema fails here, on the driver

    def _reset(self):
        self._reader_desc = None
        self._reader_class = None
        self._writers: WriterTypes | None = None  # made with the reader, when first asked
        self._encoders = {}  # Arrow type of the written column -> FlatMessageEncoder / None

    def __getstate__(self):
        state = self.__dict__.copy()
        for name in ("_reader_desc", "_reader_class", "_writers", "_encoders"):
            del state[name]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._reset()

    # -- schemas ------------------------------------------------------------------------------

    def _reader(self):
        if self._reader_desc is None:
            _, file_desc = build_pool(self.reader_schema, self.lookup, _READER_FILE)
            if self.message_name:
                name = self.message_name
                package = file_desc.package
                full = (
                    name if not package or name.startswith(package + ".") else f"{package}.{name}"
                )
                try:
                    desc = file_desc.pool.FindMessageTypeByName(full)
                except KeyError:
                    raise ProtobufSchemaError(
                        f"message {name!r} is not in the reader schema"
                    ) from None
            else:
                if not file_desc.message_types_by_name:
                    raise ProtobufSchemaError("the reader schema defines no message")
                desc = next(iter(file_desc.message_types_by_name.values()))
            self._spark_type, self._arrow_type = message_types(desc)
            self._reader_desc = desc
            self._reader_class = message_factory.GetMessageClass(desc)
        return self._reader_desc

    @property
    def spark_type(self) -> str:
        self._reader()
        return self._spark_type

    @property
    def arrow_type(self) -> pa.DataType:
        self._reader()
        return self._arrow_type

    def _writer(self, schema_id: int, indexes: tuple) -> Writer:
        if self._writers is None:
            self._writers = WriterTypes(
                self.reader_schema, self.lookup, self._reader(), self._column_decoder
            )
        return self._writers.get(schema_id, indexes)

    def _column_decoder(self, writer_desc, reader_desc):
        """The column-wise decoder of the pair (None: the general path, the runtime
        parses each record)."""
        return build_message_decoder(writer_desc, reader_desc, self.arrow_type)

    # -- decode -------------------------------------------------------------------------------

    def decode(self, values: pa.Array) -> DecodedColumn:
        frames = split_frames(values, self.framed)
        copied: list = []

        def data() -> bytes:
            # the runtime parses bytes: one copy of the buffer, made only when a group
            # takes the runtime or a row has other message indexes than [0]
            if not copied:
                copied.append(frames.data.tobytes())
            return copied[0]

        n = len(values)
        bad_rows, reasons, bad_ids = [], [], []

        def bad(row, reason, schema_id=-1):
            bad_rows.append(row)
            reasons.append(reason)
            bad_ids.append(schema_id)

        for row, reason in zip(frames.bad_rows.tolist(), frames.reasons, strict=True):
            bad(row, reason)
        ok_rows = np.flatnonzero(frames.readable)
        starts = frames.starts
        groups = {}  # (schema id, indexes) -> [rows]
        if self.framed and len(ok_rows):
            code, paths, after, errors = read_message_indexes(
                frames.data, starts[ok_rows], frames.ends[ok_rows], data
            )
            starts = starts.copy()
            starts[ok_rows] = after
            ids = frames.schema_ids[ok_rows]
            for i, reason in errors.items():
                bad(int(ok_rows[i]), f"invalid message indexes: {reason}", int(ids[i]))
            for c in np.unique(code[code >= 0]).tolist():
                for schema_id in np.unique(ids[code == c]).tolist():
                    groups[(schema_id, paths[c])] = ok_rows[
                        (code == c) & (ids == schema_id)
                    ].tolist()
        elif len(ok_rows):
            groups[(-1, ())] = ok_rows.tolist()

        ends = frames.ends
        pieces: list[pa.Array] = []
        piece_rows: list[np.ndarray] = []
        for (schema_id, indexes), rows in groups.items():
            writer = self._writer(schema_id, indexes)
            if writer.error is not None:
                for row in rows:
                    bad(row, writer.error, schema_id)
                continue
            rows.sort()  # a group may mix rows found at once and rows read one by one
            if writer.columns is not None and self._decode_columns(
                writer.columns, frames.data, starts, ends, rows, schema_id, pieces, piece_rows, bad
            ):
                continue
            parse = writer.parse
            buffer = data()
            row_starts = starts[rows].tolist()
            row_ends = ends[rows].tolist()
            try:  # all good: one comprehension; else row by row, naming the bad ones
                messages = [parse(buffer[s:e]) for s, e in zip(row_starts, row_ends, strict=True)]
                good = rows
            except (DecodeError, RecursionError):
                messages, good = [], []
                for row, s, e in zip(rows, row_starts, row_ends, strict=True):
                    try:
                        messages.append(parse(buffer[s:e]))
                        good.append(row)
                    except DecodeError as exc:
                        bad(
                            row,
                            f"invalid Protobuf payload (truncated or corrupt): {exc}",
                            schema_id,
                        )
                    except RecursionError:
                        bad(row, "invalid Protobuf payload: nested too deeply", schema_id)
            if good:
                try:
                    pieces.append(writer.build(messages))
                    piece_rows.append(good)
                except Exception:  # e.g. a Timestamp beyond int64 microseconds
                    self._build_row_by_row(
                        writer, messages, good, schema_id, pieces, piece_rows, bad
                    )
        array = self._assemble(n, pieces, piece_rows)
        order = np.argsort(np.asarray(bad_rows, dtype=np.int64), kind="stable")
        return DecodedColumn(
            array=array,
            bad_rows=np.asarray(bad_rows, dtype=np.int64)[order],
            reasons=[reasons[i] for i in order.tolist()],
            schema_ids=np.asarray(bad_ids, dtype=np.int32)[order],
        )

    @staticmethod
    def _decode_columns(decoder, data, starts, ends, rows, schema_id, pieces, piece_rows, bad):
        """Decode a group's rows column-wise; False when they need the runtime."""
        rows = np.asarray(rows, dtype=np.int64)
        try:
            array, is_bad, why = decoder.decode(data, starts[rows], ends[rows])
        except NeedsRuntime:
            return False
        for row, reason in zip(rows[is_bad].tolist(), why[is_bad].tolist(), strict=True):
            bad(row, reason, schema_id)
        if not is_bad.all():
            pieces.append(array.filter(pa.array(~is_bad)) if is_bad.any() else array)
            piece_rows.append(rows[~is_bad].tolist())
        return True

    @staticmethod
    def _build_row_by_row(writer, messages, rows, schema_id, pieces, piece_rows, bad):
        """The slow path when a group's columns cannot be built: find the rows at fault."""
        built, good = [], []
        for row, message in zip(rows, messages, strict=True):
            try:
                built.append(writer.build([message]))
                good.append(row)
            except Exception as exc:
                bad(row, f"cannot be converted to the reader type: {exc}", schema_id)
        if good:
            pieces.append(pa.concat_arrays(built))
            piece_rows.append(good)

    def _assemble(self, n, pieces, piece_rows):
        """Place each writer group's rows at their positions; the rest are null."""
        arrow_type = self.arrow_type
        if len(pieces) == 1 and len(piece_rows[0]) == n:
            return pieces[0]
        positions = np.full(n, -1, dtype=np.int64)
        at = 0
        for rows in piece_rows:
            positions[np.asarray(rows, dtype=np.int64)] = np.arange(at, at + len(rows))
            at += len(rows)
        combined = (
            pa.concat_arrays(pieces + [pa.nulls(1, arrow_type)])
            if pieces
            else pa.nulls(1, arrow_type)
        )
        positions[positions < 0] = at  # the trailing null
        return combined.take(pa.array(positions))

    # -- encode -------------------------------------------------------------------------------

    def _column_encoder(self, arrow_type):
        """The column-wise encoder of ``arrow_type`` columns (None: the general path, a
        message object per row)."""
        if arrow_type not in self._encoders:
            self._encoders[arrow_type] = build_message_encoder(self._reader(), arrow_type)
        return self._encoders[arrow_type]

    def encode(self, array: pa.Array) -> pa.BinaryArray:
        desc = self._reader()
        if self.framed:
            if self.schema_id is None:
                raise ValueError("framed Protobuf encoding needs the schema id to write")
            prefix = frame_header(self.schema_id) + encode_message_indexes(indexes_of(desc))
        else:
            prefix = b""
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        encoder = self._column_encoder(array.type)
        if encoder is not None:
            return encoder.encode(array, prefix)
        message_class = self._reader_class
        assert message_class is not None  # self._reader() made it
        out: list[bytes | None] = []
        for row, value in enumerate(array.to_pylist()):
            if value is None:
                out.append(None)
                continue
            message = message_class()
            try:
                fill_message(message, value)
            except (ValueError, TypeError, OverflowError) as exc:
                raise ValueError(f"row {row}: cannot encode as {desc.full_name}: {exc}") from exc
            out.append(prefix + message.SerializeToString())
        return pa.array(out, pa.binary())
