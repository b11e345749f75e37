"""Column functions on the codecs of ``valueFormat``: decode and encode Schema-Registry
Avro, Protobuf and JSON in any DataFrame, also one read with Spark's ``format("kafka")``.

    from kafka_ds.functions import from_registry, to_registry
    df.select(from_registry("value", "avro", subject="orders-value",
                            schema_registry_url="http://registry:8081").alias("order"))

Options are those of the source without the column prefix (``subject``, ``version``,
``schema``, ``messageName``, ``subjects`` (from_registry), ``memberNames``, ``mode``) and
the ``schema.registry.*`` ones, written either as ``**{"schema.registry.url": ...}`` or
``schema_registry_url=...``. The schema is looked up on the driver when the function is
called, so the returned column has its Spark type at
once; the executors decode whole Arrow batches (``arrow_udf``, pyspark >= 4.1).
"""

# No ``from __future__ import annotations``: arrow_udf reads the inner functions' type hints
# (pa.Array -> pa.Array) to know they are Arrow UDFs, and pa is a local name there.
from typing import TYPE_CHECKING

from .errors import ConfigurationError, RecordDecodeError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql._typing import ColumnOrName  # noqa: F401 (in string annotations)

    from .options.formats import TypedColumnsSpec  # noqa: F401 (in string annotations)

_PER_COLUMN = {
    "subject": "Subject",
    "version": "SchemaVersion",
    "schema": "Schema",
    "messagename": "MessageName",
    "message_name": "MessageName",
    "subjects": "Subjects",
    "membernames": "MemberNames",
    "member_names": "MemberNames",
}


def _source_options(fmt: str, options: dict) -> dict:
    """The function's options as the source's, for the ``value`` column."""
    out = {"valueformat": fmt}
    for key, raw in options.items():
        lowered = str(key).lower()
        if lowered.startswith("schema_registry_"):
            lowered = lowered.replace("_", ".")
        if lowered in _PER_COLUMN:
            out[f"value{_PER_COLUMN[lowered]}".lower()] = raw
        elif lowered.startswith("schema.registry.") or lowered in ("mode",):
            out[lowered] = raw
        else:
            raise ConfigurationError(
                f"Unknown option '{key}' of kafka_ds.functions: use subject, version, schema, "
                "messageName, subjects, memberNames, mode or the schema.registry.* options (e.g. "
                "schema_registry_url=...)"
            )
    return {k: str(v) for k, v in out.items()}


def _spec(fmt: str, options: dict, modes: frozenset) -> "TypedColumnsSpec":
    from .options.formats import parse_typed_columns

    if str(fmt).lower() not in ("avro", "protobuf", "json"):
        raise ConfigurationError(
            f"kafka_ds.functions: format must be 'avro', 'protobuf' or 'json', got {fmt!r}"
        )
    spec = parse_typed_columns(_source_options(str(fmt).lower(), options), modes)
    if spec is None:  # cannot be: the options name valueFormat
        raise ConfigurationError(f"kafka_ds.functions: no format in {options!r}")
    if (
        spec.value.subject is None
        and spec.value.inline_schema is None
        and spec.value.subjects is None
    ):
        raise ConfigurationError(
            "kafka_ds.functions: name the schema with subject=... (a registry subject) or "
            "schema=... (inline): a column has no topic to name the subject after"
        )
    return spec


def from_registry(col: "ColumnOrName", format: str, **options: object) -> "Column":
    """The binary column ``col`` decoded with its schema: a Column of the schema's Spark type
    (null for null input; ``mode="PERMISSIVE"``: null for records that do not decode, which
    otherwise fail the query naming the row's schema id and reason)."""
    import pyarrow as pa
    from pyspark.sql.functions import arrow_udf

    from .options.core import READ
    from .read.typed_columns import decode_column, resolve_for_read

    spec = _spec(format, options, READ)
    typed = resolve_for_read(spec, None)
    column = typed.columns[0]
    permissive = typed.permissive

    def decode(values: pa.Array) -> pa.Array:
        decoded, bad_rows, reasons, schema_ids = decode_column(column, values)
        if len(bad_rows) and not permissive:
            schema_id = int(schema_ids[0])
            raise RecordDecodeError(
                f"from_registry cannot decode a value as {column.spec.format}"
                + (f" (schema id {schema_id})" if schema_id >= 0 else "")
                + f": {reasons[0]} ({len(bad_rows)} of {len(values)} rows of this batch "
                'failed; mode="PERMISSIVE" reads them as null)'
            )
        return decoded

    # pyspark's stubs know arrow_udf only with functionType; at run time it comes from
    # the type hints of ``decode``
    return arrow_udf(decode, column.spark_type)(col)  # type: ignore[call-overload]


def to_registry(col: "ColumnOrName", format: str, **options: object) -> "Column":
    """The column ``col`` (a struct, or a scalar for a scalar schema) encoded with the
    subject's schema (``version``, default latest) or the inline ``schema``, framed with its
    schema id: a binary Column. The subject's schema must exist (or ``schema`` be given, and
    then it is registered unless ``schema.registry.auto.register.schemas`` is false): the
    column's Spark type is known only when the query runs, so no schema is derived from it."""
    import pyarrow as pa
    from pyspark.sql.functions import arrow_udf

    from .formats.codecs import SCHEMA_TYPES, make_codec
    from .options.core import WRITE
    from .registry.client import registry_for
    from .registry.schema import RegisteredSchema
    from .write.typed_writes import register_or_find

    spec = _spec(format, options, frozenset({WRITE}))
    column_spec = spec.value
    if column_spec.subjects is not None:
        raise ConfigurationError(
            "to_registry writes with one subject: subjects=... is for from_registry and for "
            "the sink's valueSubjects option (each row's set field picks its subject)"
        )
    if spec.registry is None:
        if column_spec.inline_schema is None:
            raise ConfigurationError(
                "to_registry with subject=... needs the registry: schema_registry_url=..."
            )
        schema, schema_id = (
            RegisteredSchema(SCHEMA_TYPES[column_spec.format], column_spec.inline_schema),
            None,
        )
    elif column_spec.inline_schema is not None:
        if column_spec.subject is None:
            raise ConfigurationError(
                "to_registry with schema=... and a registry needs subject=...: the subject "
                "the schema is registered under"
            )
        schema = RegisteredSchema(SCHEMA_TYPES[column_spec.format], column_spec.inline_schema)
        schema_id = register_or_find(
            registry_for(spec.registry), spec, column_spec, column_spec.subject or "", schema
        )
    else:
        assert column_spec.subject is not None  # _spec: a subject or an inline schema
        schema = registry_for(spec.registry).schema_version(
            column_spec.subject,
            column_spec.version,
            fmt="serialized" if column_spec.format == "protobuf" else None,
        )
        schema_id = schema.schema_id
    # a schema with references resolves them through the registry (once per process)
    lookup = registry_for(spec.registry) if schema.references else None
    codec = make_codec(
        column_spec, schema, framed=schema_id is not None, lookup=lookup, schema_id=schema_id
    )
    by_type = None
    if column_spec.member_names == "type":
        from .formats.avro.members import type_member_names

        by_type = type_member_names(codec.reader_node)

    def encode(values: pa.Array) -> pa.Array:
        if by_type is not None:  # the union struct's fields, taken by position
            from .formats.avro.members import renamed

            values = renamed(values, [f"member{i}" for i in range(len(by_type))])
        return codec.encode(values)

    # (functionType from the type hints, as above)
    return arrow_udf(encode, "binary")(col)  # type: ignore[call-overload]


# --- change data (Debezium): the last change of each key, applied to a table -----------------
# (docs/cdc.md, "Changes applied to a table")

_OP, _UNAVAILABLE = "__op", "__unavailable"


def _key_list(keys: "str | list[str] | tuple[str, ...]") -> list[str]:
    return [keys] if isinstance(keys, str) else list(keys)


def _require(df: "DataFrame", names: list, what: str) -> None:
    missing = [name for name in names if name not in df.columns]
    if missing:
        raise ConfigurationError(
            f"{what} needs the column(s) {', '.join(missing)} (it has {', '.join(df.columns)}): "
            "read the changes with valueFormat=debezium-json and debezium.flatten=true and "
            "select 'offset' and 'value.*'"
        )


def last_changes(
    changes: "DataFrame", keys: "str | list[str] | tuple[str, ...]", order: str = "offset"
) -> "DataFrame":
    """The last change of each key among ``changes`` (rows of ``debezium.flatten=true``:
    the table's columns, ``__op``, ``__unavailable``, and ``order``, the topic's offset), in
    the order of the topic: deletes included (``__op`` = ``d``), ready for ``MERGE INTO``
    in ``foreachBatch``. A truncate (``__op`` = ``t``) drops the changes before it; whether
    the batch holds one is for the caller to see (:func:`apply_changes` empties the table).
    A column an update left unavailable (``__unavailable``: a TOASTed value it did not
    change) takes the value of the key's last earlier change in ``changes`` that had it,
    and stays listed in ``__unavailable`` when none had (the table holds it).
    A key's changes are in one partition (Debezium partitions by key), so ``order`` orders
    them."""
    from pyspark.sql import functions as F

    key_names = _key_list(keys)
    _require(changes, [*key_names, order, _OP], "last_changes")
    truncated_at = changes.where(F.col(_OP) == "t").agg(F.max(order).alias("__truncated_at"))
    rows = (
        changes.where(F.col(_OP) != "t")
        .crossJoin(truncated_at)
        .where(F.col("__truncated_at").isNull() | (F.col(order) > F.col("__truncated_at")))
        .drop("__truncated_at")
    )
    others = [name for name in rows.columns if name not in key_names]
    last = F.max_by(F.struct(*others), F.col(order)).alias("__last")
    if _UNAVAILABLE not in rows.columns:
        return rows.groupBy(*key_names).agg(last).select(*key_names, "__last.*")
    # A column an update left unavailable (TOASTed, unchanged) takes its value from the
    # key's last earlier change that had it; it stays unavailable when none did.
    values = [name for name in others if name not in (_OP, _UNAVAILABLE, order)]
    known = []
    for name in values:
        available = ~F.coalesce(F.array_contains(F.col(_UNAVAILABLE), name), F.lit(False))
        known.append(
            F.max_by(
                F.when(available, F.struct(F.col(name).alias("v"))),
                F.when(available, F.col(order)),
            ).alias(f"__known_{name}")
        )
    grouped = rows.groupBy(*key_names).agg(last, *known)
    still = F.filter(
        F.array(*[F.when(F.col(f"__known_{n}").isNull(), F.lit(n)) for n in values]),
        lambda name: name.isNotNull(),
    )
    return grouped.select(
        *key_names,
        *[
            F.col(f"__known_{n}.v").alias(n)
            if n in values
            else (still.alias(n) if n == _UNAVAILABLE else F.col(f"__last.{n}").alias(n))
            for n in others
        ],
    )


def apply_changes(
    table: "DataFrame | None",
    changes: "DataFrame",
    keys: "str | list[str] | tuple[str, ...]",
    order: str = "offset",
) -> "DataFrame":
    """``table`` (the table's rows, or None for none yet) with ``changes`` applied: the new
    table, for a lake without MERGE (a Parquet snapshot per micro-batch). Each key's last
    change wins: a delete removes its row, an insert or update replaces it, keeping the
    stored value of each column the change lists in ``__unavailable`` (a TOASTed value an
    update left unchanged); a truncate in ``changes`` empties the table first. A column
    the changes have and the table lacks (added since) is added, null in the stored rows."""
    from pyspark.sql import functions as F

    key_names = _key_list(keys)
    last = last_changes(changes, key_names, order)
    columns = [name for name in changes.columns if name not in (_OP, _UNAVAILABLE, order)]
    if table is None:
        table = last.select(*columns).where(F.lit(False))
    for name in columns:  # a column added to the table since: null in the stored rows
        if name not in table.columns:
            table = table.withColumn(name, F.lit(None).cast(changes.schema[name].dataType))
    truncated = changes.where(F.col(_OP) == "t").agg(F.count(F.lit(1)).alias("__truncates"))
    base = table.select(*columns).crossJoin(truncated).where("__truncates = 0").drop("__truncates")
    kept = base.join(last.select(*key_names), key_names, "left_anti")
    old = base.select(
        *key_names, *[F.col(c).alias(f"__old_{c}") for c in columns if c not in key_names]
    )
    upserts = last.where(F.col(_OP) != "d").join(old, key_names, "left")
    if _UNAVAILABLE in changes.columns:
        unavailable = F.coalesce(F.col(_UNAVAILABLE), F.array().cast("array<string>"))
        values = [
            F.col(c)
            if c in key_names
            else F.when(F.array_contains(unavailable, c), F.col(f"__old_{c}"))
            .otherwise(F.col(c))
            .alias(c)
            for c in columns
        ]
    else:
        values = [F.col(c) for c in columns]
    return kept.unionByName(upserts.select(*values))


def latest_values(
    records: "DataFrame", key: str = "key", value: str = "value", order: str = "offset"
) -> "DataFrame":
    """A topic read as a table, as log compaction keeps it: the latest record of each key
    (its ``key``, ``value`` and ``order`` columns), keys whose latest value is a tombstone
    (null) left out. With ``valueFormat=debezium-json`` read the topic with
    ``debezium.tombstones=keep``, so that a deleted key's tombstone is its latest value."""
    from pyspark.sql import functions as F

    _require(records, [key, value, order], "latest_values")
    return (
        records.groupBy(key)
        .agg(F.max_by(F.struct(value, order), F.col(order)).alias("__latest"))
        .select(key, "__latest.*")
        .where(F.col(value).isNotNull())
    )
