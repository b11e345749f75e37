"""What a write checks on the driver before any task runs: which columns of the written
DataFrame carry which Kafka field, with which types (as Spark's Kafka sink checks them),
and the typed columns' writer schemas (``valueFormat``/``keyFormat``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..columns import sink_column, spark_type_name
from ..errors import ConfigurationError
from ..options import WriteOptions
from ..registry.errors import RegistryUnavailableError

if TYPE_CHECKING:
    from .typed_writes import DeferredTypedColumns, TypedWriteColumns

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ColumnPlan:
    """Where each Kafka field is in the written rows (column positions; -1 = absent)."""

    value: int
    key: int = -1
    topic: int = -1
    partition: int = -1
    headers: int = -1
    timestamp: int = -1
    names: tuple = ()
    #: valueFormat/keyFormat (None: bytes as given)
    typed: TypedWriteColumns | DeferredTypedColumns | None = None


def plan_columns(schema, opts: WriteOptions, streaming: bool = False) -> ColumnPlan:
    """Check the written DataFrame's schema; a ConfigurationError names column and fix.

    Column names match case-insensitively (as in Spark's Kafka sink); other columns
    are ignored.  Which columns are read, with which types: ``kafka_ds.columns``.

    ``streaming``: pyspark builds the sink's writer anew on the driver for every
    micro-batch's commit, which needs no writer schema (the tasks write with the plan made
    when the query started). A registry outage there must not fail a micro-batch already
    written, so the typed columns' resolution is deferred to the first batch a task
    encodes (:class:`~kafka_ds.write.typed_writes.DeferredTypedColumns`).
    """
    found = {}
    for index, fld in enumerate(schema.fields):
        column = sink_column(fld.name)
        if column is not None:
            if column.name in found:
                raise ConfigurationError(
                    f"The DataFrame has two '{column.name}' columns (names match "
                    "case-insensitively): keep one"
                )
            found[column.name] = (index, fld)
    have = ", ".join(f.name for f in schema.fields) or "none"
    if "value" not in found:
        raise ConfigurationError(
            "The DataFrame written to Kafka needs a 'value' column (binary or string); its "
            f"columns are: {have}. Example: df.selectExpr('to_json(struct(*)) AS value')"
        )
    index_of = {}
    typed_names = (
        {c.column for c in opts.typed_spec.columns} if opts.typed_spec is not None else set()
    )
    for name, (index, fld) in found.items():
        if name == "topic" and opts.topic is not None:
            continue  # the option names the topic; the column is ignored
        column = sink_column(name)
        if name in typed_names:
            index_of[name] = index  # its type is checked against its schema below
            continue
        if spark_type_name(fld.dataType) not in column.sink_types:
            raise ConfigurationError(
                f"Column '{fld.name}' must be {' or '.join(column.sink_types)} to be written to "
                f"Kafka, but it is {fld.dataType.simpleString()}: {column.sink_fix}."
            )
        index_of[name] = index
    if opts.topic is None and "topic" not in found:
        raise ConfigurationError(
            'No topic to write to: set the option \'topic\' (.option("topic", "name")) or '
            f"add a string 'topic' column; the DataFrame's columns are: {have}"
        )
    typed: TypedWriteColumns | DeferredTypedColumns | None = None
    if typed_names and opts.typed_spec is not None:
        from .typed_writes import resolve_for_write

        fields = {name: fld for name, (_, fld) in found.items()}
        try:
            typed = resolve_for_write(opts.typed_spec, opts.topic, fields)
        except RegistryUnavailableError as exc:
            if not streaming:
                raise
            from .typed_writes import DeferredTypedColumns

            log.warning("the sink's writer schemas are resolved by the tasks: %s", exc)
            typed = DeferredTypedColumns(opts.typed_spec, opts.topic, fields)
    return ColumnPlan(names=tuple(f.name for f in schema.fields), typed=typed, **index_of)
