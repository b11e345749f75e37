"""Writes: the Avro schema spark-avro writes for a Spark type (:func:`spark_to_avro`, for
an auto-registered subject) and whether a Spark type can be written with a given Avro
schema (:func:`spark_type_misfit`, the writer's planning check). Spark types as the tuples
of ``types.py``.
"""

from __future__ import annotations

from .types import (
    AvroSchemaError,
    logical,
    parse_schema,
    parse_spark_type,
    simple_string,
    union_parts,
)


def _min_bytes_for_precision(precision: int) -> int:
    size = 1
    while (1 << (8 * size - 1)) < 10**precision:
        size += 1
    return size


def spark_to_avro(
    spark_type, nullable: bool = False, record_name: str = "topLevelRecord", namespace: str = ""
):
    """The Avro schema (JSON-able) spark-avro writes for a Spark type: a struct is a record
    named ``record_name`` in ``namespace``, nested records are named after their field in
    the parent's full name as namespace, decimals are ``fixed`` of the minimal size. A
    nullable type becomes ``["null", T]`` and record fields of that type get ``"default":
    null`` (so registry compatibility checks accept added fields)."""
    t = spark_type if isinstance(spark_type, tuple) else parse_spark_type(spark_type)
    schema = _to_avro(t, record_name, namespace)
    return ["null", schema] if nullable and t != "void" else schema


def _to_avro(t, record_name, namespace):
    if isinstance(t, str):
        simple = {
            "void": "null",
            "boolean": "boolean",
            "tinyint": "int",
            "smallint": "int",
            "int": "int",
            "bigint": "long",
            "float": "float",
            "double": "double",
            "string": "string",
            "binary": "bytes",
        }
        if t in simple:
            return simple[t]
        logical_types = {
            "date": ("int", "date"),
            "timestamp": ("long", "timestamp-micros"),
            "timestamp_ntz": ("long", "local-timestamp-micros"),
        }
        base, lt = logical_types[t]
        return {"type": base, "logicalType": lt}
    kind = t[0]
    if kind == "decimal":
        name = f"{namespace}.{record_name}.fixed" if namespace else f"{record_name}.fixed"
        return {
            "type": "fixed",
            "name": name,
            "size": _min_bytes_for_precision(t[1]),
            "logicalType": "decimal",
            "precision": t[1],
            "scale": t[2],
        }
    if kind == "array":
        items = _to_avro(t[1], record_name, namespace)
        return {"type": "array", "items": ["null", items] if t[2] and t[1] != "void" else items}
    if kind == "map":
        if t[1] != "string":
            raise AvroSchemaError(f"Avro map keys are strings; cannot write {simple_string(t)}")
        values = _to_avro(t[2], record_name, namespace)
        return {"type": "map", "values": ["null", values] if t[3] and t[2] != "void" else values}
    child_space = f"{namespace}.{record_name}" if namespace else record_name
    fields = []
    for name, ft, nullable in t[1]:
        field_schema = _to_avro(ft, name, child_space)
        if nullable and ft != "void":
            fields.append({"name": name, "type": ["null", field_schema], "default": None})
        else:
            fields.append({"name": name, "type": field_schema})
    record = {"type": "record", "name": record_name, "fields": fields}
    if namespace:
        record["namespace"] = namespace
    return record


# Which Spark types each Avro type accepts on write (spark-avro's AvroSerializer pairs).
_WRITABLE = {
    "boolean": {"boolean"},
    "int": {"int", "smallint", "tinyint"},
    "long": {"bigint"},
    "float": {"float"},
    "double": {"double"},
    "string": {"string"},
    "enum": {"string"},
    "bytes": {"binary"},
    "fixed": {"binary"},
    "null": {"void"},
}


def spark_type_misfit(spark_type, avro_schema, path: str = "") -> str | None:
    """None when a value of ``spark_type`` (tuple, type string or pyspark DataType) can be
    written with ``avro_schema`` (JSON text, loaded JSON or a RegisteredSchema), else a
    sentence naming the first field that does not fit (for the writer's planning error)."""
    t = spark_type if isinstance(spark_type, tuple) else parse_spark_type(spark_type)
    node = parse_schema(getattr(avro_schema, "schema_str", avro_schema))
    return _misfit(t, node, path or "value", ())


def _misfit(t, node, path, stack):
    where = f"{path}: Spark {simple_string(t)} does not fit Avro"
    kind = node["type"]
    if kind == "union":
        branches, _has_null = union_parts(node)
        if len(branches) == 1:
            return _misfit(t, branches[0], path, stack)
        if any(_misfit(t, b, path, stack) is None for b in branches):
            return None
        if isinstance(t, tuple) and t[0] == "struct" and len(t[1]) == len(branches):
            for (name, ft, _), b in zip(t[1], branches, strict=True):
                problem = _misfit(ft, b, f"{path}.{name}", stack)
                if problem:
                    return problem
            return None
        return f"{where} union {_describe(node)}"
    lt = logical(node)
    if lt == "decimal":
        ok = (
            isinstance(t, tuple)
            and t[0] == "decimal"
            and (t[1], t[2]) == (node.get("precision"), node.get("scale", 0))
        )
        return None if ok else f"{where} {_describe(node)}"
    if lt in (
        "date",
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
    ):
        wanted = {"date": "date"}.get(
            lt, "timestamp_ntz" if lt.startswith("local") else "timestamp"
        )
        accepted = {wanted, "bigint"} if kind == "long" else {wanted, "int"}
        return None if t in accepted else f"{where} {_describe(node)}"
    if kind in _WRITABLE:
        return None if isinstance(t, str) and t in _WRITABLE[kind] else f"{where} {_describe(node)}"
    if not isinstance(t, tuple):
        return f"{where} {_describe(node)}"
    if kind == "array" and t[0] == "array":
        return _misfit(t[1], node["items"], f"{path}[]", stack)
    if kind == "map" and t[0] == "map":
        if t[1] != "string":
            return f"{path}: Avro map keys are strings, Spark has {simple_string(t[1])}"
        return _misfit(t[2], node["values"], f"{path}{{}}", stack)
    if kind == "record" and t[0] == "struct":
        if node["name"] in stack:
            return f"{path}: Avro record {node['name']} is recursive"
        spark_fields = {name: ft for name, ft, _ in t[1]}
        avro_names = {f["name"] for f in node["fields"]}
        for name in spark_fields:
            if name not in avro_names:
                return f"{path}.{name}: no field {name!r} in Avro record {node['name']}"
        for f in node["fields"]:
            if f["name"] not in spark_fields:
                if "default" in f:
                    continue
                return f"{path}.{f['name']}: Avro field has no default and Spark has no such field"
            problem = _misfit(
                spark_fields[f["name"]], f["type"], f"{path}.{f['name']}", stack + (node["name"],)
            )
            if problem:
                return problem
        return None
    return f"{where} {_describe(node)}"


def _describe(node) -> str:
    if node["type"] == "union":
        return "[" + ", ".join(_describe(b) for b in node["branches"]) + "]"
    lt = logical(node)
    name = node.get("name")
    return f"{node['type']}" + (f" {name}" if name else "") + (f" ({lt})" if lt else "")
