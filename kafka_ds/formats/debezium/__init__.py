"""Debezium's change events (``valueFormat``/``keyFormat`` ``debezium-json``): the codec
(``codec.py``), Connect schemas and Spark DDL as types (``types.py``), the column-wise
conversions (``convert.py``). :func:`debezium_codec` builds one on the driver from the
newest record's schema or from a DDL option; docs/cdc.md tells the whole story."""

from __future__ import annotations

import json

from ...errors import ConfigurationError

FORMATS = ("debezium-json", "debezium-avro")


def debezium_avro_codec(spec, avro_codec, *, flatten: bool, tombstones: str):
    """The debezium-avro codec of column ``spec`` over ``avro_codec`` (kafka_ds's Avro codec
    of the subject's schema, Confluent-framed)."""
    from .avro import DebeziumAvroCodec

    try:
        return DebeziumAvroCodec(
            avro_codec,
            envelope=spec.column == "value",
            flatten=flatten,
            drop_tombstones=tombstones == "drop",
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(
            f"Option '{spec.option('Format')}'='debezium-avro': the {spec.column} schema in "
            f"the registry is not Debezium's as Connect's Avro converter writes it: {exc}"
        ) from None


def debezium_codec(spec, sample: bytes | None, *, flatten: bool, tombstones: str, topics):
    """The codec of column ``spec`` (a ColumnFormatSpec): its type from ``spec.inline_schema``
    (a DDL of the table's columns, or of the key's) or else from the Connect schema that
    ``sample`` (the newest record's value or key, None: the topic has none) carries."""
    from .codec import DebeziumJsonCodec
    from .types import SCHEMALESS_SOURCE, from_connect, from_ddl

    envelope = spec.column == "value"
    option = spec.option("Schema")
    if spec.inline_schema is not None:
        row = from_ddl(spec.inline_schema, option)
        return DebeziumJsonCodec(
            row,
            envelope=envelope,
            source=SCHEMALESS_SOURCE,
            flatten=flatten,
            drop_tombstones=tombstones == "drop",
        )
    where = f"the newest {spec.column} of {', '.join(topics or ['the topics'])}"
    if sample is None:
        raise ConfigurationError(
            f"Option '{spec.option('Format')}'='debezium-json' takes the {spec.column}'s type "
            f"from the schema in {where}, which has no such record yet: give the "
            f"{'table' if envelope else 'key'}'s columns as a DDL in '{option}' "
            "(e.g. 'id INT, amount DECIMAL(10,2)')"
        )
    try:
        document = json.loads(sample)
    except ValueError as exc:
        raise ConfigurationError(
            f"Option '{spec.option('Format')}'='debezium-json': {where} is not JSON ({exc})"
        ) from None
    if not (isinstance(document, dict) and set(document) == {"schema", "payload"}):
        raise ConfigurationError(
            f"Option '{spec.option('Format')}'='debezium-json': {where} carries no schema "
            "(Kafka Connect's JSON converter with schemas.enable=false): give the "
            f"{'table' if envelope else 'key'}'s columns as a DDL in '{option}' "
            "(e.g. 'id INT, amount DECIMAL(10,2)')"
        )
    schema = document["schema"] or {}
    try:
        if not envelope:
            return DebeziumJsonCodec(from_connect(schema), envelope=False)
        fields = {f.get("field"): f for f in schema.get("fields", [])}
        if not {"before", "after", "source", "op"} <= set(fields):
            raise ValueError(f"no Debezium envelope (fields: {', '.join(map(str, fields))})")
        return DebeziumJsonCodec(
            from_connect(fields["after"], "after"),
            envelope=True,
            source=from_connect(fields["source"], "source"),
            flatten=flatten,
            drop_tombstones=tombstones == "drop",
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(
            f"Option '{spec.option('Format')}'='debezium-json': the schema in {where} cannot "
            f"be read: {exc}"
        ) from None
