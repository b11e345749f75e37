"""Avro schema references made self-contained, for fastavro.

A registered Avro schema may name types defined in other subjects (its ``references``):
Confluent's "several event types in one topic" is a top-level union
``["com.acme.Order", "com.acme.Payment"]`` referencing one subject per record. fastavro
keeps a parsed schema's table of named types only on dict schemas, so a top-level union of
names parsed with the referenced types loses them and every record fails with
``UnknownType``. :func:`inline_references` writes each referenced definition where its
name is first used (later uses keep the name), as Avro's own rules read a document, so
the schema needs no table at all.
"""

from __future__ import annotations

import dataclasses
import json

from .types import PRIMITIVES, AvroSchemaError, load_json

_NAMED_KINDS = ("record", "error", "enum", "fixed")


def _full_name(name: str, namespace: str | None) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def referenced_json(registered, lookup, seen=None) -> list:
    """Loaded JSON of every schema ``registered`` references (transitively), dependencies
    first, each fetched once through ``lookup`` (whose client caches numbered versions)."""
    seen = set() if seen is None else seen
    out = []
    for ref in registered.references or ():
        key = (ref.subject, ref.version)
        if key in seen:
            continue
        seen.add(key)
        if lookup is None:
            raise AvroSchemaError(
                f"schema references {ref.subject} version {ref.version} "
                "but the codec has no registry to fetch it from"
            )
        referenced = lookup.schema_version(ref.subject, ref.version)
        out += referenced_json(referenced, lookup, seen)
        out.append(load_json(referenced.schema_str))
    return out


def self_contained(registered, lookup):
    """``registered`` with its references inlined and dropped (the same schema id): what
    the writer's fit check and the tasks' encoder use, so no task needs the registry."""
    if not registered.references:
        return registered
    text = inline_references(load_json(registered.schema_str), referenced_json(registered, lookup))
    return dataclasses.replace(registered, schema_str=json.dumps(text), references=())


def _collect_definitions(schema, namespace, out: dict) -> None:
    """Every named type ``schema`` defines (nested ones too), by full name."""
    if isinstance(schema, list):
        for branch in schema:
            _collect_definitions(branch, namespace, out)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in _NAMED_KINDS and isinstance(schema.get("name"), str):
            full = _full_name(schema["name"], schema.get("namespace", namespace))
            out.setdefault(full, schema)
            inner = full.rpartition(".")[0]
            for field in schema.get("fields") or ():
                _collect_definitions(field.get("type"), inner, out)
        elif kind == "array":
            _collect_definitions(schema.get("items"), namespace, out)
        elif kind == "map":
            _collect_definitions(schema.get("values"), namespace, out)
        elif isinstance(kind, (dict, list)):
            _collect_definitions(kind, namespace, out)


def inline_references(schema, referenced: list):
    """Loaded Avro JSON ``schema`` with the named types of ``referenced`` (loaded JSON of
    the referenced schemas, dependencies first) defined where ``schema`` first names them.
    A name neither defines is left as it is (fastavro then reports it)."""
    definitions: dict = {}
    for ref_json in referenced:
        _collect_definitions(ref_json, "", definitions)
    if not definitions:
        return schema
    return _inline(schema, "", definitions, set())


def _inline(schema, namespace, definitions, defined):
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return schema
        full = _full_name(schema, namespace)
        if full not in defined and full not in definitions and schema in definitions:
            full = schema  # a bare name of a type in the null namespace
        if full in defined or full not in definitions:
            return full if full in defined else schema
        # the first use: the definition, its name spelled out so the enclosing
        # namespace cannot change it ("" is Avro's null namespace)
        inner, _, name = full.rpartition(".")
        return _inline(
            {**definitions[full], "name": name, "namespace": inner}, inner, definitions, defined
        )
    if isinstance(schema, list):
        return [_inline(branch, namespace, definitions, defined) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in _NAMED_KINDS and isinstance(schema.get("name"), str):
        full = _full_name(schema["name"], schema.get("namespace", namespace))
        defined.add(full)
        if "fields" not in schema:
            return schema
        inner = full.rpartition(".")[0]
        return {
            **schema,
            "fields": [
                {**field, "type": _inline(field.get("type"), inner, definitions, defined)}
                for field in schema["fields"]
            ],
        }
    if kind == "array":
        return {**schema, "items": _inline(schema.get("items"), namespace, definitions, defined)}
    if kind == "map":
        return {**schema, "values": _inline(schema.get("values"), namespace, definitions, defined)}
    if isinstance(kind, (str, dict, list)):
        return {**schema, "type": _inline(kind, namespace, definitions, defined)}
    return schema
