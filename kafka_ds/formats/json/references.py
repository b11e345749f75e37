"""JSON Schema references to other subjects, made self-contained.

A registered JSON Schema may ``$ref`` a schema of another subject by the reference's name
(``{"$ref": "address.json"}``, or ``"address.json#/definitions/City"``), as Confluent's
``JSONSerializer`` resolves it. :func:`self_contained` copies every referenced document
(transitively, each fetched once through the lookup) under one key of the schema and
rewrites the ``$ref``\\ s to JSON pointers into it, so the compiler and the fit check, which
know only ``#/...`` references, read it unchanged, and no task needs the registry.
"""

from __future__ import annotations

import dataclasses
import json

from .schema import JsonSchemaError

#: where the referenced documents go in the self-contained schema
REFERENCES_KEY = "x-kafka-ds-references"


def _pointer_part(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _documents(registered, lookup, out: dict) -> None:
    """``out``: reference name -> loaded document, for every schema referenced (transitively)."""
    for ref in registered.references or ():
        if ref.name in out:
            continue
        if lookup is None:
            raise JsonSchemaError(
                f"the schema references {ref.subject} version {ref.version} "
                "but the codec has no registry to fetch it from"
            )
        referenced = lookup.schema_version(ref.subject, ref.version)
        out[ref.name] = json.loads(referenced.schema_str)
        _documents(referenced, lookup, out)


def _rewrite(schema, own: str, names: dict):
    """``schema`` (part of the document ``own``: "" for the root) with every ``$ref``
    pointing into the self-contained document."""
    if isinstance(schema, list):
        return [_rewrite(item, own, names) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _rewrite(value, own, names) for key, value in schema.items()}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        base, _, fragment = ref.partition("#")
        target = names.get(base) if base else own
        if target is None:
            known = ", ".join(sorted(set(names.values()))) or "none"
            raise JsonSchemaError(
                f"$ref {ref!r} names no schema reference of the subject (its references: {known})"
            )
        prefix = f"#/{REFERENCES_KEY}/{_pointer_part(target)}" if target else "#"
        out["$ref"] = prefix + fragment
    return out


def self_contained(registered, lookup):
    """``registered`` (a JSON RegisteredSchema) with the documents it references embedded and
    its references dropped (the same schema id)."""
    if not registered.references:
        return registered
    documents: dict = {}
    _documents(registered, lookup, documents)
    names = {name: name for name in documents}
    for name, document in documents.items():  # a $ref may also use a document's $id
        if isinstance(document, dict) and isinstance(document.get("$id"), str):
            names.setdefault(document["$id"], name)
    root = json.loads(registered.schema_str)
    if not isinstance(root, dict):
        raise JsonSchemaError("a JSON Schema with references must be an object")
    text = _rewrite(root, "", names)
    text[REFERENCES_KEY] = {
        name: _rewrite(document, name, names) for name, document in documents.items()
    }
    return dataclasses.replace(registered, schema_str=json.dumps(text), references=())
