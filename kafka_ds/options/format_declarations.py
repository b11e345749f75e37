"""Declarations of the typed key/value options: the format of each column (binary, string,
or Schema-Registry Avro, Protobuf and JSON), which schema it is read or written with, the
registry's address and credentials, and what a bad record does (:mod:`.formats` gathers
them into one :class:`~kafka_ds.options.formats.TypedColumnsSpec`).
"""

from __future__ import annotations

from .core import READ, READ_WRITE, WRITE, Option, boolean, choice, integer, text

FORMATS = ("binary", "string", "avro", "protobuf", "json", "debezium-json", "debezium-avro")
#: formats whose values carry a schema (the others are plain bytes or UTF-8 text)
SCHEMA_FORMATS = ("avro", "protobuf", "json")
#: Debezium's change events (read only; kafka_ds/formats/debezium/)
CHANGE_FORMATS = ("debezium-json", "debezium-avro")


def _per_column(
    stem: str, doc: str, parse=None, default=None, applies=READ_WRITE, example=None
) -> tuple[Option, Option]:
    """``value<Stem>`` and ``key<Stem>``: the same option for either column."""
    value, key = (
        Option(
            f"{column}{stem}",
            applies,
            doc.replace("COLUMN", column),
            parse,
            default,
            field=None,
            example=example,
        )
        for column in ("value", "key")
    )
    return value, key


def _version(raw) -> int | str:
    value = str(raw).strip().lower()
    if value == "latest":
        return value
    try:
        number = int(value)
    except ValueError:
        raise ValueError("a version number or 'latest'") from None
    if number < 1:
        raise ValueError("a version number (1 or more) or 'latest'")
    return number


def _subject_list(raw) -> tuple[str, ...]:
    subjects = tuple(s.strip() for s in str(raw).split(","))
    if not subjects or "" in subjects:
        raise ValueError("subjects separated by commas, none empty")
    return subjects


FORMAT_OPTIONS: tuple[Option, ...] = (
    *_per_column(
        "Format",
        "How the `COLUMN` column is decoded on read and encoded on write: `binary` "
        "(bytes as stored), `string` (UTF-8), or `avro`, `protobuf`, `json` (Confluent "
        "Schema-Registry framing: magic byte, schema id; the column becomes the Spark "
        "type of the schema; [Typed values](typed-values.md)), or, on read, "
        "`debezium-json`/`debezium-avro`: Debezium's change events as Kafka Connect's JSON "
        "or Avro converter writes them ([Change data](cdc.md)).",
        choice({name: name for name in FORMATS}),
        "binary",
    ),
    *_per_column("Subject", "Registry subject of the COLUMN schema.", text, example="orders-value"),
    *_per_column(
        "Subjects",
        "Several record types in the COLUMN, one subject per type "
        "(RecordNameStrategy, TopicRecordNameStrategy; Avro, Protobuf or JSON Schema): "
        "the subjects, comma-separated; "
        "an entry ending in `*` is every subject with that prefix (`orders-*`, leaving "
        "out `orders-key`/`orders-value`). Read as `struct<member0, member1, ...>` of "
        "their latest versions in that order; a record of another type is a bad "
        "record. On write each row's one set field picks its subject "
        "([Several types in one topic](typed-values.md#several-types-in-one-topic)).",
        _subject_list,
        example="com.acme.Order,com.acme.Payment",
    ),
    *_per_column(
        "MemberNames",
        "How the fields of the struct several record types read as (an Avro union, "
        "or `COLUMNSubjects` in any format) are named: "
        "`position` as spark-avro (`member0`, `member1`, ...), or `type`, each type's "
        "name (`Order`, `Payment`; the full name with `_` for dots where two share a "
        "name). Writes take the fields by position either way.",
        choice({"position": "position", "type": "type"}),
        "position",
    ),
    *_per_column(
        "SchemaVersion",
        "Version of the subject to read or write with (`latest` or a number).",
        _version,
        "latest",
    ),
    *_per_column(
        "Schema",
        "Inline schema (Avro or JSON Schema JSON text) instead of the registry's. "
        "With `avro` and no `schema.registry.url`, values are plain Avro without the "
        "registry frame, as Spark's `from_avro` reads them. With `debezium-json`: the "
        "table's columns (the key's for `keySchema`) as a DDL, "
        "`id INT, amount DECIMAL(10,2), at TIMESTAMP_NTZ`, for values written without "
        "schemas ([Change data](cdc.md)).",
        text,
    ),
    *_per_column(
        "MessageName",
        "Protobuf: the message of the schema the COLUMN holds (full name, e.g. "
        "`shop.Order`); default: the schema's first message.",
        text,
        example="shop.Order",
    ),
    Option(
        "debezium.flatten",
        READ,
        "`valueFormat=debezium-json`/`debezium-avro`: read each change as the table's "
        "columns (`before`'s for a delete, else `after`'s) plus `__op` and "
        "`__unavailable`, instead of the envelope "
        "`struct<op, before, after, source, ts_ms, unavailable>`.",
        boolean,
        "false",
    ),
    Option(
        "debezium.tombstones",
        READ,
        "`valueFormat=debezium-json`/`debezium-avro`: what the tombstone (a null value) "
        "after each delete does: `drop` reads no row for it, as Flink's debezium-json; "
        "`keep` reads it as a row whose value is null.",
        choice({"drop": "drop", "keep": "keep"}),
        "drop",
    ),
    Option(
        "mode",
        READ,
        "What a record that cannot be decoded does: `FAILFAST` fails the query with an "
        "error naming topic, partition, offset, schema id and the reason; `PERMISSIVE` "
        "reads it as null and fills the `valueError`/`keyError` column (reason, schema id, "
        "the raw bytes).",
        choice({"FAILFAST": "FAILFAST", "PERMISSIVE": "PERMISSIVE"}),
        "FAILFAST",
    ),
    Option(
        "schema.registry.url",
        READ_WRITE,
        "Schema Registry URL(s), comma-separated, tried in turn (Confluent, Apicurio's "
        "ccompat API, Karapace and managed registries speak the same REST API).",
        text,
        example="http://localhost:8081",
    ),
    Option(
        "schema.registry.basic.auth.user.info",
        READ_WRITE,
        "`key:secret` for HTTP basic auth (never shown in errors or logs).",
        text,
        example="key:secret",
    ),
    Option(
        "schema.registry.bearer.auth.token",
        READ_WRITE,
        "Bearer token for the registry (never shown in errors or logs).",
        text,
    ),
    Option(
        "schema.registry.ssl.ca.location",
        READ_WRITE,
        "PEM file of the CA that signed the registry's certificate.",
        text,
    ),
    Option(
        "schema.registry.ssl.certificate.location",
        READ_WRITE,
        "PEM client certificate for mutual TLS.",
        text,
    ),
    Option(
        "schema.registry.ssl.key.location",
        READ_WRITE,
        "PEM private key of the client certificate.",
        text,
    ),
    Option(
        "schema.registry.request.timeout.ms",
        READ_WRITE,
        "Timeout of one HTTP request to the registry.",
        integer,
        30000,
        minimum=1,
    ),
    Option(
        "schema.registry.retry.budget.ms",
        READ_WRITE,
        "Time budget of one registry look-up: connection failures, 5xx and 429 answers "
        "are retried (with back-off, failing over between the URLs) this long; the error "
        "then names every URL tried and the last cause. An HTTP 500 carrying the "
        "registry's own error is asked three times in all, then raised with its message.",
        integer,
        60000,
        minimum=1,
    ),
    Option(
        "schema.registry.auto.register.schemas",
        frozenset({WRITE}),
        "When the DataFrame's type does not fit the subject's schema: register the schema "
        "derived from it (the registry's compatibility check decides), as Confluent's "
        "serializers do; `false` fails the write at planning, naming the subject and the "
        "first field that does not fit.",
        boolean,
        "true",
    ),
)
