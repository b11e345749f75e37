"""The columns of Spark's Kafka source and sink, defined once.

Everything that names the schema is derived from :data:`COLUMNS`: the source's
Spark DDL (:func:`spark_ddl`), the ``simpleString`` a custom ``.schema(...)`` is
checked against (:func:`simple_string`), the Arrow schema the reader yields
(:func:`arrow_schema`) and the decoder fills (``record_only=True``), and the
sink's input check (:func:`sink_column`: which columns it reads, with which types).

A leaf module (no pyspark, pyarrow only inside the Arrow functions), so the
protocol layer, the driver-side glue and the executors can all import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADERS = "array<struct<key:string,value:binary>>"


@dataclass(frozen=True)
class Column:
    name: str
    #: Spark type as ``DataType.simpleString()`` writes it
    spark_type: str
    #: decoded from the record batch (False: added by the reader, i.e. topic, partition)
    in_record: bool
    #: present only with ``includeHeaders=true``
    headers_only: bool = False
    #: Spark types the sink accepts for a column of this name; () = the sink ignores it
    sink_types: tuple = ()
    #: how to fix a column of another type (sink error messages)
    sink_fix: str = ""


COLUMNS = (
    Column(
        "key",
        "binary",
        True,
        sink_types=("binary", "string"),
        sink_fix="cast it with col('key').cast('binary') or .cast('string')",
    ),
    Column(
        "value",
        "binary",
        True,
        sink_types=("binary", "string"),
        sink_fix="cast it with col('value').cast('binary') or .cast('string')",
    ),
    Column(
        "topic",
        "string",
        False,
        sink_types=("string",),
        sink_fix="cast it with col('topic').cast('string')",
    ),
    Column(
        "partition",
        "int",
        False,
        sink_types=("int",),
        sink_fix="cast it with col('partition').cast('int')",
    ),
    Column("offset", "bigint", True),
    Column(
        "timestamp",
        "timestamp",
        True,
        sink_types=("timestamp", "timestamp_ntz"),
        sink_fix="cast it with col('timestamp').cast('timestamp')",
    ),
    Column("timestampType", "int", True),
    Column(
        "headers",
        HEADERS,
        True,
        headers_only=True,
        sink_types=(HEADERS,),
        sink_fix="build it as array(struct(lit('name').alias('key'), "
        "col('v').cast('binary').alias('value')), ...)",
    ),
)

#: the columns the sink reads, by (lower-case) name
SINK_COLUMNS = {c.name.lower(): c for c in COLUMNS if c.sink_types}


def output_columns(include_headers: bool, record_only: bool = False) -> tuple:
    """The source's columns in order (``record_only``: only those decoded from records)."""
    return tuple(
        c
        for c in COLUMNS
        if (include_headers or not c.headers_only) and (c.in_record or not record_only)
    )


def spark_ddl(include_headers: bool) -> str:
    """``"key binary, value binary, topic string, ..."``: what ``DataSource.schema()`` returns."""
    return ", ".join(f"{c.name} {c.spark_type}" for c in output_columns(include_headers))


def simple_string(include_headers: bool) -> str:
    """The source schema's ``StructType.simpleString()``."""
    return (
        "struct<"
        + ",".join(f"{c.name}:{c.spark_type}" for c in output_columns(include_headers))
        + ">"
    )


def spark_type_name(data_type) -> str:
    """A pyspark DataType's ``simpleString()``, with collated strings as plain ``string``
    (the sink takes any string, as Spark's Kafka sink does)."""
    return re.sub(r"string collate [\w.]+", "string", data_type.simpleString())


def sink_column(name: str):
    """The :class:`Column` the sink reads for a DataFrame column ``name`` (any case), or None."""
    return SINK_COLUMNS.get(name.lower())


def arrow_type(spark_type: str):
    """Arrow type of one of the column types above (as Spark maps them to Arrow)."""
    import pyarrow as pa

    if spark_type == HEADERS:
        return pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return {
        "binary": pa.binary(),
        "string": pa.string(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }[spark_type]


def arrow_schema(include_headers: bool, record_only: bool = False):
    """The Arrow schema of the source's batches (``record_only``: of the decoder's)."""
    import pyarrow as pa

    return pa.schema(
        [(c.name, arrow_type(c.spark_type)) for c in output_columns(include_headers, record_only)]
    )
