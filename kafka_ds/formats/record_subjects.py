"""Several record types in one topic, one subject per type, for Protobuf and JSON Schema
(``valueSubjects``/``keySubjects`` with ``protobuf``/``json``; Avro's: ``avro/subjects.py``).

Avro reads the listed subjects as one union and its resolution picks each record's member.
Protobuf and JSON Schema have no union, so :class:`SubjectsCodec` routes each record to
the listed subject of its **type**: the full name of the record's message (Protobuf: the
writer file's package and the message its frame's message indexes pick) or the writer
schema's ``title`` (JSON Schema). That is the name Confluent's RecordNameStrategy and
TopicRecordNameStrategy name the subject after, and the one its deserializers look the
subject up by. The schema id alone would not do: ids are global, so one Protobuf file
holding two messages, registered under each message's subject, has one id for both.

Each listed subject is read with its latest version (the reader schema) by that format's
own codec, which resolves the record's writer schema (its schema id) to it as for one
subject; the rows are grouped by member, each group decoded at once, and the member
columns placed in a ``struct<member0, member1, ...>`` (others null). A record of a type not
listed is a bad record naming its type, never dropped.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from ..errors import ConfigurationError
from ..registry.schema import RegisteredSchema
from . import DecodedColumn
from .avro.subjects import SeveralSubjectsEncoder, listed_subjects
from .framing import split_frames

__all__ = ["SubjectsCodec", "SeveralSubjectsEncoder", "subject_types", "member_type_names"]


def _protobuf_names(file_desc) -> list[str]:
    """Every message's full name of a file, nested ones too, top-level first in order."""
    out, queue = [], list(file_desc.message_types_by_name.values())
    while queue:
        desc = queue.pop(0)
        out.append(desc.full_name)
        queue += list(desc.nested_types)
    return out


def _protobuf_type(subject: str, schema, client, option: str) -> str:
    """The message a Protobuf subject holds: the one the subject is named after
    (``<full name>`` or ``<topic>-<full name>``), else the file's first message (the one
    the single-subject read takes)."""
    from .protobuf.schema import ProtobufSchemaError, build_pool

    try:
        _, file_desc = build_pool(schema, client, "kafka_ds_subject.proto")
    except ProtobufSchemaError as exc:
        raise ConfigurationError(
            f"Option '{option}': subject '{subject}' version {schema.version} is not a usable "
            f"Protobuf schema: {exc}"
        ) from exc
    names = _protobuf_names(file_desc)
    named = [n for n in names if subject == n or subject.endswith("-" + n)]
    if named:
        return max(named, key=len)
    if not names:
        raise ConfigurationError(
            f"Option '{option}': subject '{subject}' version {schema.version} defines no "
            "message: each subject listed must hold one record type"
        )
    return names[0]


def _json_type(subject: str, schema, option: str) -> str:
    """A JSON Schema subject's type: its ``title``."""
    try:
        document = json.loads(schema.schema_str)
    except ValueError as exc:
        raise ConfigurationError(
            f"Option '{option}': subject '{subject}' version {schema.version} is not JSON: {exc}"
        ) from exc
    title = document.get("title") if isinstance(document, dict) else None
    if not isinstance(title, str) or not title:
        raise ConfigurationError(
            f"Option '{option}': subject '{subject}' version {schema.version} is a JSON "
            "Schema without a 'title'. Records are matched to their subject by their schema's "
            "title (the record name Confluent's RecordNameStrategy names subjects by): give "
            "the schema a title, or read the subject alone with "
            f"'{option[:-1]}'"
        )
    return title


def subject_types(client, spec) -> list[tuple[str, str, RegisteredSchema]]:
    """``(subject, type name, latest RegisteredSchema)`` of every subject ``spec.subjects``
    lists (Protobuf schemas as serialized descriptors); at least two, types distinct."""
    from .codecs import SCHEMA_TYPES

    option = spec.option("Subjects")
    protobuf = spec.format == "protobuf"

    def type_name(subject, schema):
        return (
            _protobuf_type(subject, schema, client, option)
            if protobuf
            else _json_type(subject, schema, option)
        )

    out = listed_subjects(
        client, spec, SCHEMA_TYPES[spec.format], type_name, fmt="serialized" if protobuf else None
    )
    if len(out) < 2:
        raise ConfigurationError(
            f"Option '{option}' names one subject ({out[0][0]}): use "
            f"'{spec.option('Subject')}' for one type"
        )
    return out


def member_type_names(type_names) -> tuple[str, ...]:
    """``valueMemberNames=type``: each type's short name, or its full name with ``_`` for
    dots where two share one (as for Avro)."""
    short = [name.rpartition(".")[2] for name in type_names]
    return tuple(
        s if short.count(s) == 1 else name.replace(".", "_")
        for s, name in zip(short, type_names, strict=True)
    )


class SubjectsCodec:
    """Decodes a column of records of several types into ``struct<member0, ...>``, one
    member per listed subject, each group of rows decoded by its subject's codec.

    ``codecs``: one codec per subject (the reader is the subject's latest version);
    ``type_names``: each subject's type (Protobuf message full name / JSON Schema title);
    ``lookup``: the registry, to find the type of a writer schema id."""

    def __init__(
        self,
        fmt: str,
        subjects,
        type_names,
        codecs,
        lookup,
        names=None,
        option: str = "valueSubjects",
    ):
        self.format = fmt
        self.option = option
        self.subjects = tuple(subjects)
        self.type_names = tuple(type_names)
        self.codecs = list(codecs)
        self.lookup = lookup
        self.names = tuple(names) if names else tuple(f"member{i}" for i in range(len(self.codecs)))
        self._types: dict = {}

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_types"] = {}
        return state

    @property
    def spark_type(self) -> str:
        return (
            "struct<"
            + ",".join(
                f"{name}:{codec.spark_type}"
                for name, codec in zip(self.names, self.codecs, strict=True)
            )
            + ">"
        )

    @property
    def arrow_type(self) -> pa.StructType:
        return pa.struct(
            [
                pa.field(name, codec.arrow_type)
                for name, codec in zip(self.names, self.codecs, strict=True)
            ]
        )

    def renamed(self, names) -> SubjectsCodec:
        return SubjectsCodec(
            self.format,
            self.subjects,
            self.type_names,
            self.codecs,
            self.lookup,
            names,
            self.option,
        )

    # -- which type a record is -------------------------------------------------------------

    def _type_of(self, schema_id: int, indexes: tuple):
        """``(type name, None)`` or ``(None, why not)`` of a writer schema id (Protobuf: and
        message indexes), cached per codec."""
        key = (schema_id, indexes)
        if key not in self._types:
            self._types[key] = self._find_type(schema_id, indexes)
        return self._types[key]

    def _find_type(self, schema_id, indexes):
        from ..registry.errors import RegistryUnavailableError

        try:
            if self.format == "protobuf":
                from .protobuf.schema import ProtobufSchemaError, build_pool, message_at

                schema = self.lookup.schema_by_id(schema_id, fmt="serialized")
                if schema.schema_type != "PROTOBUF":
                    return None, f"schema id {schema_id} is {schema.schema_type}, not PROTOBUF"
                try:
                    _, file_desc = build_pool(schema, self.lookup, f"schema_{schema_id}.proto")
                    return message_at(file_desc, indexes).full_name, None
                except ProtobufSchemaError as exc:
                    return None, f"writer schema id {schema_id}: {exc}"
            schema = self.lookup.schema_by_id(schema_id)
            if schema.schema_type != "JSON":
                return None, f"schema id {schema_id} is {schema.schema_type}, not JSON"
            document = json.loads(schema.schema_str)
            title = document.get("title") if isinstance(document, dict) else None
            if not isinstance(title, str) or not title:
                return None, (
                    f"the writer schema (id {schema_id}) has no title, so its type "
                    f"is none of the types read ({', '.join(self.type_names)})"
                )
            return title, None
        except RegistryUnavailableError:
            raise  # the registry, not the record: the task fails, nothing cached
        except Exception as exc:  # the registry said no
            return None, f"unknown schema id {schema_id}: {exc}"

    def _index_paths(self, frames, rows, bad):
        """``(code per row of rows, paths)``: each row's Protobuf message indexes as an index
        into ``paths`` (tuples), -1 where they do not read (the row is then in ``bad``)."""
        from .protobuf.schema import read_message_indexes

        code, paths, _after, errors = read_message_indexes(
            frames.data, frames.starts[rows], frames.ends[rows], frames.data.tobytes
        )
        for i, reason in errors.items():
            bad[int(rows[i])] = (
                f"invalid message indexes: {reason}",
                int(frames.schema_ids[rows[i]]),
            )
        return code, paths

    # -- decode -------------------------------------------------------------------------------

    def decode(self, values: pa.Array) -> DecodedColumn:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        frames = split_frames(values, True)
        n = len(values)
        bad = {}  # row -> (reason, schema id)
        for row, reason in zip(frames.bad_rows.tolist(), frames.reasons, strict=True):
            bad[row] = (reason, -1)
        member = np.full(n, -1, np.int64)
        rows = np.flatnonzero(frames.readable)
        ids = frames.schema_ids[rows]
        if self.format == "protobuf":
            code, paths = self._index_paths(frames, rows, bad)
            groups = []
            for c in np.unique(code[code >= 0]).tolist():
                for schema_id in np.unique(ids[code == c]).tolist():
                    groups.append(((schema_id, paths[c]), rows[(code == c) & (ids == schema_id)]))
        else:
            groups = [
                ((schema_id, ()), rows[ids == schema_id]) for schema_id in np.unique(ids).tolist()
            ]
        by_name = {name: k for k, name in enumerate(self.type_names)}
        for (schema_id, index_path), group in groups:
            name, error = self._type_of(schema_id, index_path)
            k = by_name.get(name) if error is None else None
            if k is None:
                if error is None:
                    error = (
                        f"its type {name} (schema id {schema_id}) is none of the types "
                        f"read ({', '.join(self.type_names)}), the types of the "
                        f"subjects '{self.option}' lists"
                    )
                for row in group.tolist():
                    bad[row] = (error, schema_id)
                continue
            member[group] = k
        children = []
        for k, codec in enumerate(self.codecs):
            taken = np.flatnonzero(member == k)
            arrow_type = codec.arrow_type
            if not taken.size:
                children.append(pa.nulls(n, arrow_type))
                continue
            whole = taken.size == n  # every row of the batch is of this type
            result = codec.decode(values if whole else values.take(pa.array(taken)))
            array = result.array
            if isinstance(array, pa.ChunkedArray):
                array = array.combine_chunks()
            if result.bad_rows is not None and len(result.bad_rows):
                local = np.asarray(result.bad_rows, np.int64)
                sub_ids = (
                    np.asarray(result.schema_ids, np.int32)
                    if result.schema_ids is not None
                    else np.full(len(local), -1)
                )
                for row, reason, schema_id in zip(
                    taken[local].tolist(), result.reasons, sub_ids.tolist(), strict=True
                ):
                    bad[row] = (reason, schema_id)
                member[taken[local]] = -1
            if whole:
                children.append(array)
                continue
            position = np.full(n, -1, np.int64)
            position[taken] = np.arange(taken.size)
            children.append(array.take(pa.array(position, mask=position < 0)))
        bad_rows = np.asarray(sorted(bad), np.int64)
        member[bad_rows] = -1
        struct = pa.StructArray.from_arrays(
            children, fields=list(self.arrow_type), mask=pa.array(member < 0)
        )
        return DecodedColumn(
            array=struct,
            bad_rows=bad_rows,
            reasons=[bad[r][0] for r in bad_rows.tolist()],
            schema_ids=np.asarray([bad[r][1] for r in bad_rows.tolist()], np.int32),
        )

    def encode(self, array):
        raise ValueError(
            "a column read with several subjects is written through "
            "SeveralSubjectsEncoder (write/typed_writes.py)"
        )


def subjects_codec(spec, client) -> SubjectsCodec:
    """The read codec of ``spec`` (format protobuf or json, ``spec.subjects`` set)."""
    listed = subject_types(client, spec)
    codecs = [
        member_codec(spec, schema, name, client, lookup=client) for _subject, name, schema in listed
    ]
    return SubjectsCodec(
        spec.format,
        [s for s, _, _ in listed],
        [n for _, n, _ in listed],
        codecs,
        client,
        option=spec.option("Subjects"),
    )


def member_codec(spec, schema, type_name, client, *, lookup):
    """One subject's codec (reader and writer: its latest version, framed with its id)."""
    if spec.format == "protobuf":
        from .protobuf.codec import ProtobufCodec

        return ProtobufCodec(
            schema, framed=True, lookup=lookup, schema_id=schema.schema_id, message_name=type_name
        )
    from .json.codec import JsonCodec
    from .json.references import self_contained

    return JsonCodec(
        self_contained(schema, client), framed=True, lookup=lookup, schema_id=schema.schema_id
    )
