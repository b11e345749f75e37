"""fastavro's Python values <-> the Python values pyarrow builds Spark's Arrow types from.

Used by the general (per-record) path of :mod:`kafka_ds.formats.avro.codec`. Converters are
compiled once per schema; ``None`` means "identity" so the common case costs nothing.

* reading (fastavro -> Arrow): unions of several non-null branches become spark-avro's
  ``struct<member0, member1, ...>`` with the taken branch set (fastavro is asked for
  ``return_named_type`` so named branches come as ``(name, value)``; unnamed ones are told
  apart by Python type), maps stay dicts, everything else is already what pyarrow wants.
* writing (Arrow ``to_pylist`` -> fastavro): maps come as ``[(key, value)]``, member
  structs go back to fastavro's ``(branch name, value)`` union notation.
"""

from __future__ import annotations

import datetime
import decimal

from .types import NAMED, avro_to_spark, logical, union_parts

# logical types spark-avro interprets; fastavro is given schemas without the others so it
# returns the underlying values (e.g. time-millis stays an int, uuid a string)
KEPT_LOGICAL = frozenset(
    (
        "date",
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
        "decimal",
    )
)


def strip_logical_types(schema):
    """Loaded Avro JSON without the logical types Spark does not map (for fastavro)."""
    if isinstance(schema, list):
        return [strip_logical_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "logicalType" and value not in KEPT_LOGICAL:
            continue
        if key in ("type", "items", "values"):
            value = strip_logical_types(value)
        elif key == "fields":
            value = [{**f, "type": strip_logical_types(f["type"])} for f in value]
        out[key] = value
    return out


def _is_named(node) -> bool:
    return node["type"] in NAMED


def _branch_name(node) -> str:
    return node["name"] if _is_named(node) else node["type"]


def _python_matcher(node):
    """A predicate telling whether an unnamed fastavro value came from this branch."""
    kind = node["type"]
    lt = logical(node)
    if lt == "decimal":
        return lambda v: isinstance(v, decimal.Decimal)
    if lt in ("timestamp-millis", "timestamp-micros"):
        return lambda v: isinstance(v, datetime.datetime) and v.tzinfo is not None
    if lt in ("local-timestamp-millis", "local-timestamp-micros"):
        return lambda v: isinstance(v, datetime.datetime) and v.tzinfo is None
    if lt == "date":
        return lambda v: isinstance(v, datetime.date) and not isinstance(v, datetime.datetime)
    python_types = {
        "boolean": bool,
        "int": int,
        "long": int,
        "float": float,
        "double": float,
        "string": str,
        "bytes": bytes,
        "array": list,
        "map": dict,
    }
    wanted = python_types[kind]
    if wanted is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    return lambda v: isinstance(v, wanted)


def arrow_converter(node):
    """A function turning fastavro's value of ``node`` into pyarrow's, or None (identity)."""
    kind = node["type"]
    if kind == "record":
        fields = [(f["name"], arrow_converter(f["type"])) for f in node["fields"]]
        if all(conv is None for _, conv in fields):
            return None
        return lambda v: {name: (conv(v[name]) if conv else v[name]) for name, conv in fields}
    if kind == "array":
        conv = arrow_converter(node["items"])
        return None if conv is None else (lambda v: [conv(x) for x in v])
    if kind == "map":
        conv = arrow_converter(node["values"])
        return None if conv is None else (lambda v: {k: conv(x) for k, x in v.items()})
    if logical(node) in ("timestamp-millis", "local-timestamp-millis"):
        # fastavro hands a reader-only field's default over as the raw long (milliseconds)
        return lambda v: v * 1000 if isinstance(v, int) else v
    if kind != "union":
        return None
    branches, _has_null = union_parts(node)
    if len(branches) == 1:
        inner = arrow_converter(branches[0])
        if not _is_named(branches[0]) and inner is None:
            return None

        def single(v, inner=inner):
            if isinstance(v, tuple):
                v = v[1]
            return v if v is None or inner is None else inner(v)

        return single
    spark, _ = avro_to_spark(node)
    if isinstance(spark, str):  # [int, long] -> bigint, [float, double] -> double
        return None
    members = [f"member{i}" for i in range(len(branches))]
    convs = [arrow_converter(b) for b in branches]
    by_name = {}
    for i, b in enumerate(branches):
        if _is_named(b):
            by_name[b["name"]] = i
            by_name[b["name"].rpartition(".")[2]] = by_name.get(b["name"].rpartition(".")[2], i)
    matchers = [(i, _python_matcher(b)) for i, b in enumerate(branches) if not _is_named(b)]

    def member_struct(v):
        if v is None:
            return None
        index = None
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) and v[0] in by_name:
            index, v = by_name[v[0]], v[1]
        else:
            index = next((i for i, matches in matchers if matches(v)), None)
            if index is None:
                raise ValueError(f"value {v!r} matches no branch of the union")
        out = dict.fromkeys(members)
        out[members[index]] = convs[index](v) if convs[index] else v
        return out

    return member_struct


def avro_converter(node):
    """A function turning pyarrow's ``to_pylist`` value into what fastavro writes for
    ``node``, or None (identity)."""
    kind = node["type"]
    if kind == "record":
        fields = [(f["name"], avro_converter(f["type"])) for f in node["fields"]]
        if all(conv is None for _, conv in fields):
            return None
        # only the fields the value has: fastavro writes the others' defaults
        return lambda v: {
            name: (conv(v[name]) if conv else v[name]) for name, conv in fields if name in v
        }
    if kind == "array":
        conv = avro_converter(node["items"])
        return None if conv is None else (lambda v: [conv(x) for x in v])
    if kind == "map":
        conv = avro_converter(node["values"]) or (lambda x: x)
        return lambda v: {k: conv(x) for k, x in (v.items() if isinstance(v, dict) else v)}
    if kind != "union":
        return None
    branches, has_null = union_parts(node)
    if len(branches) == 1:
        inner = avro_converter(branches[0])
        return None if inner is None else (lambda v: None if v is None else inner(v))
    spark, _ = avro_to_spark(node)
    if isinstance(spark, str):
        # a collapsed [int, long] / [float, double]: write the wider branch so nothing is lost
        wide = "long" if spark == "bigint" else "double"
        return lambda v: None if v is None else (wide, v)
    names = [_branch_name(b) for b in branches]
    convs = [avro_converter(b) for b in branches]

    def from_members(v):
        if v is None:
            return None
        taken = [i for i in range(len(names)) if v.get(f"member{i}") is not None]
        if len(taken) > 1:
            raise ValueError(
                ", ".join(f"member{i}" for i in taken)
                + " are all set; a union value has one branch"
            )
        if taken:
            i = taken[0]
            value = v[f"member{i}"]
            return (names[i], convs[i](value) if convs[i] else value)
        if has_null:
            return None
        raise ValueError("every member of a non-nullable union struct is null")

    return from_members
