"""Writes with ``valueFormat=json``: the JSON Schema of a Spark type (registered when the
subject has none that fits) and the check that a Spark type fits a subject's schema.

A column fits when every one of its fields is a property of the schema with a type its
values can be written as (extra schema properties are fine: they are simply absent), the
rule a JSON Schema validator applies to the records written.
"""

from __future__ import annotations

import json

_INTEGERS = ("byte", "short", "int", "long", "bigint", "tinyint", "smallint", "integer")
_NUMBERS = ("float", "double", "decimal")


def _type_name(data_type) -> str:
    return data_type.typeName()


def _schema_of(data_type, nullable: bool) -> dict:
    from pyspark.sql.types import ArrayType, MapType, StructType

    name = _type_name(data_type)
    node: dict[str, object]
    if isinstance(data_type, StructType):
        node = {
            "type": "object",
            "properties": {f.name: _schema_of(f.dataType, f.nullable) for f in data_type.fields},
        }
    elif isinstance(data_type, ArrayType):
        node = {"type": "array", "items": _schema_of(data_type.elementType, data_type.containsNull)}
    elif isinstance(data_type, MapType):
        if _type_name(data_type.keyType) != "string":
            raise ValueError(f"a map key must be a string in JSON, not {name}")
        node = {
            "type": "object",
            "additionalProperties": _schema_of(data_type.valueType, data_type.valueContainsNull),
        }
    elif name in _INTEGERS:
        node = {"type": "integer"}
    elif name in _NUMBERS:
        node = {"type": "number"}
    elif name == "string":
        node = {"type": "string"}
    elif name == "boolean":
        node = {"type": "boolean"}
    elif name in ("timestamp", "timestamp_ntz"):
        node = {"type": "string", "format": "date-time"}
    elif name == "date":
        node = {"type": "string", "format": "date"}
    else:
        raise ValueError(
            f"Spark type {data_type.simpleString()} has no JSON Schema mapping "
            "here (binary, interval and variant columns: cast them first)"
        )
    if nullable:
        node = {"oneOf": [{"type": "null"}, node]}
    return node


def json_schema_for(spark_type) -> str:
    """The JSON Schema (draft-07) text of ``spark_type`` (a pyspark DataType)."""
    document = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "topLevelRecord",
        **_schema_of(spark_type, False),
    }
    return json.dumps(document, sort_keys=True)


def _misfit(data_type, node, path: str) -> str | None:
    from pyspark.sql.types import ArrayType, MapType, StructType

    where = path or "the column"
    kind = node.kind
    if isinstance(data_type, StructType):
        if kind != "struct":
            return f"{where} is a struct, the schema has {kind}"
        properties = dict(node.children)
        for field in data_type.fields:
            if field.name not in properties:
                return (
                    f"field {path + '.' if path else ''}{field.name} is not a property of "
                    "the schema"
                )
            problem = _misfit(
                field.dataType, properties[field.name], f"{path + '.' if path else ''}{field.name}"
            )
            if problem:
                return problem
        return None
    if isinstance(data_type, ArrayType):
        if kind != "array":
            return f"{where} is an array, the schema has {kind}"
        return _misfit(data_type.elementType, node.children[0], where + "[]")
    if isinstance(data_type, MapType):
        if kind != "map":
            return f"{where} is a map, the schema has {kind}"
        return _misfit(data_type.valueType, node.children[0], where + "[*]")
    name = _type_name(data_type)
    accepted = {
        "bigint": _INTEGERS,
        "double": _INTEGERS + _NUMBERS,
        "string": ("string",),
        "boolean": ("boolean",),
        "timestamp": ("timestamp", "timestamp_ntz"),
        "date": ("date",),
    }.get(kind, ())
    if name not in accepted:
        return f"{where} is {data_type.simpleString()}, the schema has {kind}"
    return None


def json_schema_misfit(spark_type, schema_text: str) -> str | None:
    """The first field of ``spark_type`` that does not fit the JSON Schema, or None."""
    from .schema import compile_schema

    return _misfit(spark_type, compile_schema(schema_text), "")
