"""Avro schema resolution for the fake registry's compatibility checks: can a reader of one
schema read data written with another (the Avro spec's "Schema Resolution")?

``incompatibilities(reader, writer, reader_named=None, writer_named=None)`` returns the
reasons it cannot (an empty list: it can). Schemas are parsed JSON (or JSON text); the
``*_named`` dicts give named types defined elsewhere (a registry's schema references), by
full name. Logical types resolve as their underlying types.
"""

from __future__ import annotations

import json

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# writer type -> reader types that read it (the spec's promotions)
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


class AvroSchemaError(ValueError):
    """Not a valid Avro schema (the registry's 42201)."""


def _full_name(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def parse(schema, named: dict | None = None) -> tuple:
    """(root type, {full name: definition}); named types are replaced by their full name."""
    if isinstance(schema, (str, bytes)) and not _is_bare_name(schema):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise AvroSchemaError(f"not JSON: {exc}") from None
    table = dict(named or {})
    root = _collect(schema, None, table)
    return root, table


def _is_bare_name(text) -> bool:
    return isinstance(text, str) and (
        text in PRIMITIVES or text.replace(".", "").replace("_", "").isalnum()
    )


def _collect(node, namespace, table):
    if isinstance(node, str):
        if node in PRIMITIVES:
            return node
        full = _full_name(node, namespace)
        for candidate in (full, node):
            if candidate in table:
                return candidate
        raise AvroSchemaError(f"unknown type '{node}'")
    if isinstance(node, list):
        return ("union", [_collect(branch, namespace, table) for branch in node])
    if not isinstance(node, dict) or "type" not in node:
        raise AvroSchemaError(f"not a schema: {json.dumps(node)[:100]}")
    kind = node["type"]
    if kind in ("record", "error", "enum", "fixed"):
        if not isinstance(node.get("name"), str):
            raise AvroSchemaError(f"a {kind} needs a name")
        inner_namespace = node.get("namespace", namespace)
        full = _full_name(node["name"], inner_namespace)
        inner_namespace = full.rpartition(".")[0] or None
        aliases = {_full_name(a, inner_namespace) for a in node.get("aliases", ())}
        definition = {
            "kind": kind if kind != "error" else "record",
            "name": full,
            "aliases": aliases,
        }
        table[full] = definition  # before the fields: a record may refer to itself
        if kind == "enum":
            definition["symbols"] = list(node.get("symbols", ()))
            definition["default"] = node.get("default")
        elif kind == "fixed":
            if not isinstance(node.get("size"), int):
                raise AvroSchemaError(f"fixed '{full}' needs an int size")
            definition["size"] = node["size"]
        else:
            if not isinstance(node.get("fields"), list):
                raise AvroSchemaError(f"record '{full}' needs a list of fields")
            definition["fields"] = [
                {
                    "name": field["name"],
                    "type": _collect(field["type"], inner_namespace, table),
                    "has_default": "default" in field,
                    "aliases": set(field.get("aliases", ())),
                }
                for field in node["fields"]
            ]
        return full
    if kind == "array":
        return ("array", _collect(node.get("items"), namespace, table))
    if kind == "map":
        return ("map", _collect(node.get("values"), namespace, table))
    return _collect(kind, namespace, table)  # {"type": "int", "logicalType": ...}


def incompatibilities(reader, writer, reader_named=None, writer_named=None) -> list[str]:
    """Why a reader of ``reader`` cannot read data written with ``writer`` (empty: it can)."""
    reader_root, reader_table = parse(reader, reader_named)
    writer_root, writer_table = parse(writer, writer_named)
    problems: list[str] = []
    _check(reader_root, writer_root, reader_table, writer_table, "", problems, set())
    return problems


def _describe(node) -> str:
    if isinstance(node, tuple):
        return node[0]
    return node


def _check(reader, writer, rtable, wtable, path, problems, seen) -> bool:
    rdef = rtable.get(reader) if isinstance(reader, str) else None
    wdef = wtable.get(writer) if isinstance(writer, str) else None
    if isinstance(writer, tuple) and writer[0] == "union":
        ok = True
        for index, branch in enumerate(writer[1]):
            if not _readable_by(reader, branch, rtable, wtable, seen):
                problems.append(
                    f"MISSING_UNION_BRANCH at '{path or '/'}': the writer's union "
                    f"branch {index} ({_describe(branch)}) has no match in the "
                    f"reader's {_describe(reader)}"
                )
                ok = False
        return ok
    if isinstance(reader, tuple) and reader[0] == "union":
        if any(_readable_by(branch, writer, rtable, wtable, seen) for branch in reader[1]):
            return True
        problems.append(
            f"MISSING_UNION_BRANCH at '{path or '/'}': the reader's union has no "
            f"branch for the writer's {_describe(writer)}"
        )
        return False
    if rdef is None and wdef is None:
        if isinstance(reader, tuple) and isinstance(writer, tuple) and reader[0] == writer[0]:
            return _check(
                reader[1],
                writer[1],
                rtable,
                wtable,
                f"{path}/{'items' if reader[0] == 'array' else 'values'}",
                problems,
                seen,
            )
        if reader == writer or (isinstance(writer, str) and reader in PROMOTIONS.get(writer, ())):
            return True
    elif rdef is not None and wdef is not None and rdef["kind"] == wdef["kind"]:
        return _check_named(rdef, wdef, rtable, wtable, path, problems, seen)
    problems.append(
        f"TYPE_MISMATCH at '{path or '/'}': the reader's {_describe(reader)} "
        f"cannot read the writer's {_describe(writer)}"
    )
    return False


def _readable_by(reader, writer, rtable, wtable, seen) -> bool:
    return _check(reader, writer, rtable, wtable, "", [], set(seen))


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def _check_named(rdef, wdef, rtable, wtable, path, problems, seen) -> bool:
    if (
        _short(rdef["name"]) != _short(wdef["name"])
        and wdef["name"] not in rdef["aliases"]
        and _short(wdef["name"]) not in {_short(a) for a in rdef["aliases"]}
    ):
        problems.append(
            f"NAME_MISMATCH at '{path or '/'}': the reader's {rdef['name']} is "
            f"not the writer's {wdef['name']}"
        )
        return False
    if (rdef["name"], wdef["name"]) in seen:
        return True  # recursion: checked further up
    seen = seen | {(rdef["name"], wdef["name"])}
    kind = rdef["kind"]
    if kind == "fixed":
        if rdef["size"] != wdef["size"]:
            problems.append(
                f"FIXED_SIZE_MISMATCH at '{path or '/'}': {rdef['size']} != {wdef['size']}"
            )
            return False
        return True
    if kind == "enum":
        missing = [s for s in wdef["symbols"] if s not in rdef["symbols"]]
        if missing and rdef["default"] is None:
            problems.append(
                f"MISSING_ENUM_SYMBOLS at '{path or '/'}': the reader's "
                f"{rdef['name']} lacks {missing} and has no default"
            )
            return False
        return True
    ok = True
    writer_fields = {field["name"]: field for field in wdef["fields"]}
    for index, field in enumerate(rdef["fields"]):
        names = [field["name"], *field["aliases"]]
        match = next((writer_fields[n] for n in names if n in writer_fields), None)
        field_path = f"{path}/fields/{index}"
        if match is None:
            if not field["has_default"]:
                problems.append(
                    f"READER_FIELD_MISSING_DEFAULT_VALUE at '{field_path}': the "
                    f"field '{field['name']}' has no default value and is missing "
                    f"from the writer's {wdef['name']}"
                )
                ok = False
        elif not _check(
            field["type"], match["type"], rtable, wtable, f"{field_path}/type", problems, seen
        ):
            ok = False
    return ok
