"""Several record types in one topic, one subject per type (``valueSubjects``).

With Confluent's RecordNameStrategy (subject = the record's full name) or
TopicRecordNameStrategy (``<topic>-<full name>``) a topic holds records of several types and
no subject names them all. ``valueSubjects`` lists the subjects to read (an entry ending in
``*`` is every subject with that prefix, e.g. ``orders-*``), and the column is read with a
union of their latest versions: ``struct<member0, member1, ...>`` in the listed order (a
prefix's subjects sorted by name), as spark-avro reads a union. A record of a type not
listed does not resolve to the union and is a bad record. On write, each row's one set
field picks its subject: encoded with that subject's schema, framed with its id.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from ...errors import ConfigurationError
from ...registry.schema import RegisteredSchema, SchemaReference
from ..wire_columns import in_row_order, set_members
from .types import load_json


def expand_subjects(client, spec) -> list[str]:
    """The subjects ``spec.subjects`` names, prefixes (``orders-*``) expanded, in order,
    each once. A prefix leaves out ``<prefix>key``/``<prefix>value`` (TopicNameStrategy's)."""
    option = spec.option("Subjects")
    out = []
    for entry in spec.subjects:
        if entry.endswith("*"):
            prefix = entry[:-1]
            found = sorted(
                s
                for s in client.subjects()
                if s.startswith(prefix) and s not in (f"{prefix}key", f"{prefix}value")
            )
            if not found:
                raise ConfigurationError(
                    f"Option '{option}': no subject of the registry starts with '{prefix}' "
                    "(TopicRecordNameStrategy registers '<topic>-<record full name>'): check "
                    "the prefix, or list the subjects by name"
                )
            out += [s for s in found if s not in out]
        elif entry not in out:
            out.append(entry)
    return out


def _full_name(schema: RegisteredSchema, subject: str, option: str) -> str:
    text = load_json(schema.schema_str)
    if isinstance(text, dict) and text.get("type") in ("record", "error", "enum", "fixed"):
        name, namespace = text.get("name", ""), text.get("namespace")
        return name if "." in name or not namespace else f"{namespace}.{name}"
    raise ConfigurationError(
        f"Option '{option}': subject '{subject}' version {schema.version} is not a named Avro "
        "type (a record): each subject listed must hold one record type"
    )


def listed_subjects(client, spec, schema_type: str, type_name, fmt=None):
    """``(subject, type name, latest RegisteredSchema)`` of every subject ``spec.subjects``
    lists, each of ``schema_type`` (``fmt``: the registry's schema format, e.g.
    ``serialized``) and of a type no other listed subject holds; ``type_name(subject,
    schema)`` names a subject's type (the format's own rule)."""
    option = spec.option("Subjects")
    out: list[tuple[str, str, RegisteredSchema]] = []
    seen: dict[str, str] = {}
    for subject in expand_subjects(client, spec):
        schema = client.schema_version(subject, "latest", fmt=fmt)
        if schema.schema_type != schema_type:
            raise ConfigurationError(
                f"Option '{option}' reads {spec.format} ('{spec.option('Format')}'), but "
                f"subject '{subject}' holds a {schema.schema_type} schema: remove it from the "
                "list"
            )
        name = type_name(subject, schema)
        if name in seen:
            raise ConfigurationError(
                f"Option '{option}': subjects '{seen[name]}' and '{subject}' both hold type "
                f"{name}; list one of them"
            )
        seen[name] = subject
        out.append((subject, name, schema))
    return out


def subject_schemas(client, spec) -> list[tuple[str, str, RegisteredSchema]]:
    """``(subject, full type name, latest RegisteredSchema)`` of every subject listed."""
    option = spec.option("Subjects")
    return listed_subjects(
        client, spec, "AVRO", lambda subject, schema: _full_name(schema, subject, option)
    )


def union_reader_schema(client, spec) -> RegisteredSchema:
    """The reader schema of ``valueSubjects``: a union referencing each subject's latest
    version (so the codec inlines them as it does any reference)."""
    listed = subject_schemas(client, spec)
    if len(listed) < 2:
        # a one-branch union would read as the record itself: say so rather than surprise
        raise ConfigurationError(
            f"Option '{spec.option('Subjects')}' names one subject ({listed[0][0]}): use "
            f"'{spec.option('Subject')}' for one type"
        )
    references = []
    for subject, name, schema in listed:
        assert schema.version is not None  # a subject's latest schema has its number
        references.append(SchemaReference(name, subject, schema.version))
    return RegisteredSchema(
        "AVRO", json.dumps([name for _, name, _ in listed]), references=tuple(references)
    )


class SeveralSubjectsEncoder:
    """Encodes a struct column of one field per subject: each row's one set field with its
    subject's codec (framed with that subject's schema id). A row with no field or several
    set fails the write, naming the row: it has no one subject."""

    def __init__(self, codecs: list, subjects: list[str], column: str):
        self.codecs = codecs
        self.subjects = subjects
        self.column = column

    def encode(self, array) -> pa.BinaryArray:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        n = len(array)
        present, set_fields, counts = set_members(array, len(self.codecs))
        children = [array.field(i) for i in range(len(self.codecs))]
        wrong = np.flatnonzero(present & (counts != 1))
        if wrong.size:
            row = int(wrong[0])
            raise ValueError(
                f"row {row} of column '{self.column}' has {int(counts[row])} of its fields "
                f"set; with '{self.column}Subjects' exactly one must be, naming the subject "
                f"({', '.join(self.subjects)}) it is written with ({len(wrong)} such rows)"
            )
        groups = []  # (rows, their encoded values)
        for codec, child, rows in zip(self.codecs, children, set_fields, strict=True):
            index = np.flatnonzero(rows)
            if index.size:
                groups.append((index, codec.encode(child.take(pa.array(index)))))
        nulls = np.flatnonzero(~present)
        if nulls.size:
            groups.append((nulls, pa.nulls(nulls.size, pa.binary())))
        return in_row_order(n, groups)
