"""Avro schemas and Spark types, as spark-avro's SchemaConverters map them: an Avro schema
as a Spark type here (reads), a Spark type as an Avro schema in ``spark.py`` (writes).

Avro schemas are first *parsed* (:func:`parse_schema`) into plain dicts where every type is
``{"type": ...}``, unions are ``{"type": "union", "branches": [...]}`` and a reference to
a named type is replaced by that type's own dict (so a recursive schema becomes a cyclic
structure; the mappings detect the cycle and say so).

Spark types are handled as small tuples (:func:`parse_spark_type` reads a ``simpleString``
/ DDL type string or a pyspark ``DataType``, duck-typed through ``jsonValue()`` so pyspark
is never imported here): a primitive is its simpleString (``"int"``, ``"bigint"``, ...),
``("decimal", p, s)``, ``("array", element, contains_null)``, ``("map", key, value,
value_contains_null)`` and ``("struct", ((name, type, nullable), ...))``.
"""

from __future__ import annotations

import json
import re

import pyarrow as pa

PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
NAMED = frozenset(("record", "error", "enum", "fixed"))


class AvroSchemaError(ValueError):
    """An Avro schema that is invalid or cannot be a Spark type."""


# --- parsing -------------------------------------------------------------------------


def parse_schema(schema, names: dict | None = None) -> dict:
    """Parse an Avro schema (JSON text or already-loaded JSON) into the normalized form.
    ``names`` (full name -> node) holds named types defined earlier (schema references);
    the schema's own named types are added to it."""
    return _parse(load_json(schema), "", {} if names is None else names)


def load_json(schema):
    """JSON text (or a bare type name) to loaded JSON; loaded JSON is returned as is."""
    if isinstance(schema, (str, bytes)):
        text = schema.decode() if isinstance(schema, bytes) else schema
        try:
            return json.loads(text)
        except ValueError:
            return text.strip()  # a bare type name such as  string  is a valid schema
    return schema


def _full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _parse(schema, namespace: str, names: dict) -> dict:
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return {"type": schema}
        full = _full_name(schema, namespace)
        for candidate in (full, schema):
            if candidate in names:
                return names[candidate]
        raise AvroSchemaError(f"unknown Avro type name {schema!r}")
    if isinstance(schema, list):
        branches = [_parse(b, namespace, names) for b in schema]
        seen = set()
        for b in branches:
            key = b.get("name") if b["type"] in NAMED else b["type"]
            if key in seen:
                raise AvroSchemaError(f"Avro union has two branches of type {key!r}")
            if b["type"] == "union":
                raise AvroSchemaError("Avro unions cannot contain unions")
            seen.add(key)
        return {"type": "union", "branches": branches}
    if not isinstance(schema, dict) or "type" not in schema:
        raise AvroSchemaError(f"not an Avro schema: {schema!r}")
    kind = schema["type"]
    if isinstance(kind, (dict, list)) or (
        isinstance(kind, str)
        and kind not in PRIMITIVES
        and kind not in NAMED
        and kind not in ("array", "map")
    ):
        return _parse(kind, namespace, names)  # {"type": {...}} or {"type": "SomeName"}
    node = {k: v for k, v in schema.items() if k not in ("fields", "items", "values")}
    if kind in NAMED:
        if "name" not in schema:
            raise AvroSchemaError(f"Avro {kind} without a name")
        space = schema.get("namespace", namespace)
        full = _full_name(schema["name"], space)
        node["name"] = full
        node["aliases"] = [
            _full_name(a, full.rpartition(".")[0]) for a in schema.get("aliases", ())
        ]
        names[full] = node  # registered before the fields: they may refer back to it
        child_space = full.rpartition(".")[0]
        if kind in ("record", "error"):
            node["type"] = "record"
            node["fields"] = [
                {
                    **{k: v for k, v in f.items() if k != "type"},
                    "type": _parse(f["type"], child_space, names),
                }
                for f in schema.get("fields", ())
            ]
        elif kind == "enum":
            node["symbols"] = list(schema.get("symbols", ()))
        elif kind == "fixed" and not isinstance(schema.get("size"), int):
            raise AvroSchemaError(f"Avro fixed {full} without an int size")
    elif kind == "array":
        node["items"] = _parse(schema["items"], namespace, names)
    elif kind == "map":
        node["values"] = _parse(schema["values"], namespace, names)
    return node


def logical(node: dict) -> str | None:
    """The node's logical type when it is one spark-avro knows for its underlying type."""
    lt = node.get("logicalType")
    kind = node["type"]
    if lt == "date" and kind == "int":
        return lt
    if (
        lt
        in (
            "timestamp-millis",
            "timestamp-micros",
            "local-timestamp-millis",
            "local-timestamp-micros",
        )
        and kind == "long"
    ):
        return lt
    if lt == "decimal" and kind in ("bytes", "fixed"):
        return lt
    if lt == "uuid" and kind == "string":
        return lt
    return None


def union_parts(node: dict):
    """``(non-null branches, has null branch)`` of a union node."""
    branches = [b for b in node["branches"] if b["type"] != "null"]
    return branches, len(branches) < len(node["branches"])


# --- Avro -> Spark -------------------------------------------------------------------


def avro_to_spark(node: dict, _stack=()):
    """``(spark type tuple, nullable)`` for a parsed Avro node."""
    kind = node["type"]
    lt = logical(node)
    if lt == "date":
        return "date", False
    if lt in ("timestamp-millis", "timestamp-micros"):
        return "timestamp", False
    if lt in ("local-timestamp-millis", "local-timestamp-micros"):
        return "timestamp_ntz", False
    if lt == "decimal":
        precision = node.get("precision")
        scale = node.get("scale", 0)
        if not isinstance(precision, int) or not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise AvroSchemaError(
                f"Avro decimal precision {precision} scale {scale} is not a "
                "Spark decimal (precision 1..38, 0 <= scale <= precision)"
            )
        return ("decimal", precision, scale), False
    simple = {
        "null": "void",
        "boolean": "boolean",
        "int": "int",
        "long": "bigint",
        "float": "float",
        "double": "double",
        "bytes": "binary",
        "string": "string",
        "enum": "string",
        "fixed": "binary",
    }
    if kind in simple:
        return simple[kind], kind == "null"
    if kind == "record":
        if node["name"] in _stack:
            raise AvroSchemaError(
                f"Avro record {node['name']} is recursive "
                f"({' -> '.join(_stack + (node['name'],))}); a recursive "
                "schema cannot be a Spark type"
            )
        stack = _stack + (node["name"],)
        return (
            "struct",
            tuple((f["name"],) + avro_to_spark(f["type"], stack) for f in node["fields"]),
        ), False
    if kind == "array":
        element, contains_null = avro_to_spark(node["items"], _stack)
        return ("array", element, contains_null), False
    if kind == "map":
        value, value_null = avro_to_spark(node["values"], _stack)
        return ("map", "string", value, value_null), False
    if kind == "union":
        branches, has_null = union_parts(node)
        if not branches:
            return "void", True
        if len(branches) == 1:
            return avro_to_spark(branches[0], _stack)[0], has_null
        plain = {b["type"] for b in branches if logical(b) is None}
        if len(plain) == len(branches) and plain == {"int", "long"}:
            return "bigint", has_null
        if len(plain) == len(branches) and plain == {"float", "double"}:
            return "double", has_null
        # spark-avro: a struct with one nullable field per non-null branch
        return (
            "struct",
            tuple(
                (f"member{i}", avro_to_spark(b, _stack)[0], True) for i, b in enumerate(branches)
            ),
        ), has_null
    raise AvroSchemaError(f"unsupported Avro type {kind!r}")


def simple_string(t) -> str:
    """Spark's ``simpleString`` of a spark type tuple."""
    if isinstance(t, str):
        return t
    kind = t[0]
    if kind == "decimal":
        return f"decimal({t[1]},{t[2]})"
    if kind == "array":
        return f"array<{simple_string(t[1])}>"
    if kind == "map":
        return f"map<{simple_string(t[1])},{simple_string(t[2])}>"
    return "struct<" + ",".join(f"{name}:{simple_string(ft)}" for name, ft, _ in t[1]) + ">"


_ARROW_PRIMITIVES = {
    "void": pa.null(),
    "boolean": pa.bool_(),
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


def spark_to_arrow(t) -> pa.DataType:
    """The Arrow type Spark's Arrow conversion uses for a spark type tuple."""
    if isinstance(t, str):
        return _ARROW_PRIMITIVES[t]
    kind = t[0]
    if kind == "decimal":
        return pa.decimal128(t[1], t[2])
    if kind == "array":
        return pa.list_(pa.field("element", spark_to_arrow(t[1]), nullable=True))
    if kind == "map":
        return pa.map_(spark_to_arrow(t[1]), spark_to_arrow(t[2]))
    return pa.struct([pa.field(name, spark_to_arrow(ft), nullable=True) for name, ft, _ in t[1]])


# --- Spark type strings --------------------------------------------------------------

_ALIASES = {
    "integer": "int",
    "long": "bigint",
    "short": "smallint",
    "byte": "tinyint",
    "bool": "boolean",
    "real": "float",
    "timestamp_ltz": "timestamp",
    "null": "void",
}
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


def parse_spark_type(spark_type):
    """A spark type tuple from a ``simpleString``/DDL type string or a pyspark DataType."""
    if hasattr(spark_type, "jsonValue"):
        return _from_json_value(spark_type.jsonValue())
    if not isinstance(spark_type, str):
        raise TypeError(f"expected a Spark type or its simpleString, got {spark_type!r}")
    tokens = _TOKEN.findall(spark_type)
    if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", spark_type):
        raise ValueError(f"cannot parse Spark type {spark_type!r}")
    result, pos = _parse_type(tokens, 0, spark_type)
    if pos != len(tokens):
        raise ValueError(f"cannot parse Spark type {spark_type!r}: unexpected {tokens[pos]!r}")
    return result


def _expect(tokens, pos, token, text):
    if pos >= len(tokens) or tokens[pos] != token:
        raise ValueError(f"cannot parse Spark type {text!r}: expected {token!r}")
    return pos + 1


def _parse_type(tokens, pos, text):
    if pos >= len(tokens):
        raise ValueError(f"cannot parse Spark type {text!r}: it ends early")
    word = tokens[pos].lower()
    pos += 1
    if word == "struct":
        pos = _expect(tokens, pos, "<", text)
        fields = []
        while tokens[pos] != ">":
            name = tokens[pos]
            name = name[1:-1].replace("``", "`") if name.startswith("`") else name
            pos = _expect(tokens, pos + 1, ":", text)
            ft, pos = _parse_type(tokens, pos, text)
            fields.append((name, ft, True))
            if tokens[pos] == ",":
                pos += 1
        return ("struct", tuple(fields)), pos + 1
    if word == "array":
        pos = _expect(tokens, pos, "<", text)
        element, pos = _parse_type(tokens, pos, text)
        return ("array", element, True), _expect(tokens, pos, ">", text)
    if word == "map":
        pos = _expect(tokens, pos, "<", text)
        key, pos = _parse_type(tokens, pos, text)
        pos = _expect(tokens, pos, ",", text)
        value, pos = _parse_type(tokens, pos, text)
        return ("map", key, value, True), _expect(tokens, pos, ">", text)
    if word in ("decimal", "dec", "numeric"):
        precision, scale = 10, 0
        if pos < len(tokens) and tokens[pos] == "(":
            precision = int(tokens[pos + 1])
            pos += 2
            if tokens[pos] == ",":
                scale = int(tokens[pos + 1])
                pos += 2
            pos = _expect(tokens, pos, ")", text)
        return ("decimal", precision, scale), pos
    word = _ALIASES.get(word, word)
    if word not in _ARROW_PRIMITIVES:
        raise ValueError(f"cannot parse Spark type {text!r}: unknown type {word!r}")
    return word, pos


def _from_json_value(value):
    if isinstance(value, str):
        if value.startswith("decimal"):
            return parse_spark_type(value)
        return _ALIASES.get(value, value)
    kind = value["type"]
    if kind == "struct":
        return (
            "struct",
            tuple(
                (f["name"], _from_json_value(f["type"]), bool(f["nullable"]))
                for f in value["fields"]
            ),
        )
    if kind == "array":
        return ("array", _from_json_value(value["elementType"]), bool(value["containsNull"]))
    if kind == "map":
        return (
            "map",
            _from_json_value(value["keyType"]),
            _from_json_value(value["valueType"]),
            bool(value["valueContainsNull"]),
        )
    raise ValueError(f"unsupported Spark type {value!r}")
