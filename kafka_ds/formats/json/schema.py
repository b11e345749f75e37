"""JSON Schema (a draft-07 subset) as a Spark/Arrow type, and per-record checks against it.

Supported: ``object`` with ``properties`` -> struct (other properties ignored, all fields
nullable; ``required`` is not enforced, as Spark's from_json does not), ``object`` with only
an ``additionalProperties`` schema -> map<string,T>, ``array``/``items`` -> array,
``string`` (``format: date-time`` -> timestamp, ``format: date`` -> date), ``integer`` ->
bigint, ``number`` -> double, ``boolean``; ``["null", T]`` and ``oneOf``/``anyOf`` of
``{"type": "null"}`` and one schema -> T; ``$ref`` within the document (``#/...``; those to
other subjects are made so by :mod:`.references`). Other
unions, recursive ``$ref`` and untyped schemas are rejected with the path they sit at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, timezone

import pyarrow as pa


class JsonSchemaError(ValueError):
    pass


class Mismatch(ValueError):
    """A record that does not match the reader schema."""


@dataclass(frozen=True)
class Node:
    #: struct, map, array, string, timestamp, date, bigint, double, boolean
    kind: str
    #: struct: ((name, Node), ...); array/map: (Node,)
    children: tuple = ()
    #: the JSON null is a value here (a null row stays a good row)
    nullable: bool = False

    @property
    def spark_type(self) -> str:
        if self.kind == "struct":
            fields = ",".join(
                f"{name if name.isidentifier() else f'`{name}`'}:{child.spark_type}"
                for name, child in self.children
            )
            return f"struct<{fields}>"
        if self.kind == "array":
            return f"array<{self.children[0].spark_type}>"
        if self.kind == "map":
            return f"map<string,{self.children[0].spark_type}>"
        return self.kind

    @property
    def arrow_type(self) -> pa.DataType:
        return _arrow_type(self, read=False)

    @property
    def read_type(self) -> pa.DataType:
        """What pyarrow's JSON reader is asked for: dates as strings (cast afterwards)."""
        return _arrow_type(self, read=True)

    @property
    def has_map(self) -> bool:
        return self.kind == "map" or any(
            (c[1] if isinstance(c, tuple) else c).has_map for c in self.children
        )


_ARROW = {
    "string": pa.string(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "date": pa.date32(),
    "bigint": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
}


def _arrow_type(node: Node, read: bool) -> pa.DataType:
    if node.kind == "struct":
        return pa.struct(
            [pa.field(name, _arrow_type(child, read)) for name, child in node.children]
        )
    if node.kind == "array":
        return pa.list_(_arrow_type(node.children[0], read))
    if node.kind == "map":
        return pa.map_(pa.string(), _arrow_type(node.children[0], read))
    if read and node.kind == "date":
        return pa.string()
    return _ARROW[node.kind]


def _resolve_ref(document, ref: str, where: str):
    if not ref.startswith("#"):
        raise JsonSchemaError(
            f"{where}: $ref {ref!r} points outside the document and "
            "the schema has no reference of that name"
        )
    target = document
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        try:
            target = target[int(part)] if isinstance(target, list) else target[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise JsonSchemaError(f"{where}: $ref {ref!r} not found") from None
    return target


def compile_schema(document) -> Node:
    """The reader schema (parsed JSON) as a Node tree."""
    if isinstance(document, str):
        document = json.loads(document)
    return _compile(document, document, "$", ())


def _compile(document, schema, where: str, refs: tuple) -> Node:
    if schema is True or schema == {}:
        raise JsonSchemaError(f"{where}: a schema without a type is not supported")
    if not isinstance(schema, dict):
        raise JsonSchemaError(f"{where}: not a schema: {schema!r}")
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref in refs:
            raise JsonSchemaError(f"{where}: recursive $ref {ref!r} is not supported")
        return _compile(document, _resolve_ref(document, ref, where), where, refs + (ref,))
    for keyword in ("oneOf", "anyOf"):
        if keyword in schema:
            options = schema[keyword]
            rest = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            if len(rest) != 1:
                raise JsonSchemaError(
                    f"{where}: {keyword} of {len(rest)} non-null schemas is not supported "
                    "(only a nullable single schema)"
                )
            node = _compile(document, rest[0], where, refs)
            return _with_null(node, len(rest) < len(options) or node.nullable)
    if "allOf" in schema:
        if len(schema["allOf"]) != 1:
            raise JsonSchemaError(f"{where}: allOf is not supported")
        return _compile(document, schema["allOf"][0], where, refs)
    kind = schema.get("type")
    if kind is None and "properties" in schema:
        kind = "object"
    nullable = False
    if isinstance(kind, list):
        nullable = "null" in kind
        kinds = [k for k in kind if k != "null"]
        if len(kinds) != 1:
            raise JsonSchemaError(
                f"{where}: type {kind} is not supported (one type, optionally with null)"
            )
        kind = kinds[0]
    if kind == "object":
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if not properties and isinstance(extra, dict) and extra:
            return Node("map", (_compile(document, extra, where + ".*", refs),), nullable)
        if not properties:
            raise JsonSchemaError(
                f"{where}: an object needs properties, or an "
                "additionalProperties schema (read as a map)"
            )
        children = tuple(
            (name, _compile(document, sub, f"{where}.{name}", refs))
            for name, sub in properties.items()
        )
        return Node("struct", children, nullable)
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            raise JsonSchemaError(f"{where}: an array needs one items schema")
        return Node("array", (_compile(document, items, where + "[]", refs),), nullable)
    if kind == "string":
        fmt = schema.get("format") or ""
        return Node({"date-time": "timestamp", "date": "date"}.get(fmt, "string"), (), nullable)
    simple = {"integer": "bigint", "number": "double", "boolean": "boolean"}
    if kind in simple:
        return Node(simple[kind], (), nullable)
    raise JsonSchemaError(f"{where}: type {kind!r} is not supported")


def _with_null(node: Node, nullable: bool) -> Node:
    return Node(node.kind, node.children, nullable)


# -- per-record checks -----------------------------------------------------------------------

_INT64 = (-(1 << 63), (1 << 63) - 1)


def _timestamp(text: str):
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:  # as pyarrow's reader: no offset means UTC
        return parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def _text(value: str, where: str) -> str:
    # JSON's \ud800 escapes decode to lone surrogates, which no UTF-8 column can hold
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Mismatch(
            f"{where}: a string with an unpaired \\uD800-\\uDFFF escape is not valid Unicode"
        ) from None
    return value


def coerce(node: Node, value, where: str = "$"):
    """The value as pa.array takes it for node.arrow_type; Mismatch when it does not fit."""
    if value is None:
        return None
    kind = node.kind
    if kind == "struct":
        if not isinstance(value, dict):
            raise Mismatch(f"{where}: expected an object, got {type(value).__name__}")
        return {
            name: coerce(child, value.get(name), f"{where}.{name}") for name, child in node.children
        }
    if kind in ("array", "map"):
        child = node.children[0]
        if kind == "array" and isinstance(value, list):
            return [coerce(child, item, f"{where}[{i}]") for i, item in enumerate(value)]
        if kind == "map" and isinstance(value, dict):
            return [
                (_text(key, where), coerce(child, item, f"{where}.{key}"))
                for key, item in value.items()
            ]
        raise Mismatch(
            f"{where}: expected {'an array' if kind == 'array' else 'an object'}, "
            f"got {type(value).__name__}"
        )
    if kind == "boolean":
        if isinstance(value, bool):
            return value
    elif kind == "bigint":
        if isinstance(value, int) and not isinstance(value, bool):
            if not _INT64[0] <= value <= _INT64[1]:
                raise Mismatch(f"{where}: {value} does not fit a bigint")
            return value
    elif kind == "double":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif isinstance(value, str):
        if kind == "string":
            return _text(value, where)
        try:
            return _timestamp(value) if kind == "timestamp" else date.fromisoformat(value)
        except ValueError as exc:
            raise Mismatch(f"{where}: {exc}") from None
    raise Mismatch(f"{where}: expected {kind}, got {type(value).__name__} {value!r:.40}")


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        duplicate = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"duplicate key {duplicate!r}")
    return dict(pairs)


def parse(payload: bytes):
    """JSON text -> Python value (ValueError when it is not JSON)."""
    return json.loads(payload, object_pairs_hook=_no_duplicates)


# -- encode ----------------------------------------------------------------------------------


def to_json_value(node: Node, value):
    if value is None:
        return None
    kind = node.kind
    if kind == "struct":
        return {name: to_json_value(child, value.get(name)) for name, child in node.children}
    if kind == "array":
        return [to_json_value(node.children[0], item) for item in value]
    if kind == "map":
        return {key: to_json_value(node.children[0], item) for key, item in value}
    if kind == "timestamp":
        return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    if kind == "date":
        return value.isoformat()
    return value
