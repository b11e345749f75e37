"""Kafka Connect schemas (as Connect's JSON converter writes them) and Spark DDL, both turned
into one tree of :class:`Node`: what pyarrow's JSON reader reads a field as (``raw``) and the
Spark type it becomes (``spark_type``, ``arrow_type``), Debezium's logical types included.

Connect type or Debezium logical name      Spark type
``int8``/``int16``/``int32``/``int64``         ``tinyint``/``smallint``/``int``/``bigint``
``float32``/``float64``, ``boolean``           ``float``/``double``, ``boolean``
``string``; ``io.debezium.data.Uuid``, ``Json``, ``Enum``, ``Xml``, ``ZonedTime``   ``string``
``bytes`` (base64 in JSON)                    ``binary``
``org.apache.kafka.connect.data.Decimal``     ``decimal(p,s)`` (p from
                                              ``connect.decimal.precision``, else 38)
``io.debezium.data.VariableScaleDecimal``     ``decimal(38,18)``
``io.debezium.time.MicroTimestamp``, ``Timestamp``, ``NanoTimestamp``,
``org.apache.kafka.connect.data.Timestamp``  ``timestamp_ntz`` (a ``timestamp`` without time
                                              zone: Debezium writes its wall-clock value)
``io.debezium.time.ZonedTimestamp``           ``timestamp`` (an instant)
``io.debezium.time.Date``, Connect's ``Date``  ``date``
``io.debezium.time.MicroTime``, ``Time``, ``NanoTime``  ``bigint`` (as written)
``struct``, ``array``                          ``struct``, ``array``
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa

from ...errors import ConfigurationError

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
#: the Spark type of a decimal whose scale each value carries (PostgreSQL's bare numeric)
VARIABLE_PRECISION, VARIABLE_SCALE = 38, 18
#: logical type -> (Spark type, Arrow type) of the integer-coded timestamps and dates
_TIMESTAMPS = {
    "io.debezium.time.MicroTimestamp": "us",
    "io.debezium.time.Timestamp": "ms",
    "org.apache.kafka.connect.data.Timestamp": "ms",
    "io.debezium.time.NanoTimestamp": "ns",
}
_DATES = ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date")
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"

_PRIMITIVES = {
    "int8": ("tinyint", pa.int8()),
    "int16": ("smallint", pa.int16()),
    "int32": ("int", pa.int32()),
    "int64": ("bigint", pa.int64()),
    "float32": ("float", pa.float32()),
    "float64": ("double", pa.float64()),
    "boolean": ("boolean", pa.bool_()),
    "string": ("string", pa.string()),
}


@dataclass
class Node:
    """One field's type. ``kind``: a Connect type (``int32``, ``string``, ``bytes``,
    ``struct``, ``array``) or one of ``decimal``, ``variable_decimal``, ``timestamp``
    (integer-coded, ``unit``), ``zoned_timestamp``, ``date``."""

    kind: str
    fields: list = field(default_factory=list)  # (name, Node) of a struct
    items: Node | None = None  # of an array
    precision: int = 38
    scale: int = 0
    unit: str = "us"
    #: bytes, decimals as JSON carries them (base64); False: as Avro does (already decoded)
    encoded: bool = True

    @property
    def raw(self) -> pa.DataType:
        """What pyarrow's JSON reader reads the field's JSON as."""
        kind = self.kind
        if kind in ("bytes", "decimal", "zoned_timestamp"):
            return pa.string()  # base64, base64 of the unscaled value, ISO-8601
        if kind == "variable_decimal":
            return pa.struct([("scale", pa.int32()), ("value", pa.string())])
        if kind == "timestamp":
            return pa.int64()
        if kind == "date":
            return pa.int32()
        if kind == "struct":
            return pa.struct([(name, node.raw) for name, node in self.fields])
        if kind == "array":
            assert self.items is not None
            return pa.list_(self.items.raw)
        return _PRIMITIVES[kind][1]

    @property
    def arrow_type(self) -> pa.DataType:
        """The Arrow type of the Spark type."""
        kind = self.kind
        if kind == "bytes":
            return pa.binary()
        if kind in ("decimal", "variable_decimal"):
            return pa.decimal128(self.precision, self.scale)
        if kind == "timestamp":
            return pa.timestamp("us")
        if kind == "zoned_timestamp":
            return pa.timestamp("us", tz="UTC")
        if kind == "date":
            return pa.date32()
        if kind == "struct":
            return pa.struct([(name, node.arrow_type) for name, node in self.fields])
        if kind == "array":
            assert self.items is not None
            return pa.list_(self.items.arrow_type)
        return _PRIMITIVES[kind][1]

    @property
    def spark_type(self) -> str:
        kind = self.kind
        if kind == "bytes":
            return "binary"
        if kind in ("decimal", "variable_decimal"):
            return f"decimal({self.precision},{self.scale})"
        if kind == "timestamp":
            return "timestamp_ntz"
        if kind == "zoned_timestamp":
            return "timestamp"
        if kind == "date":
            return "date"
        if kind == "struct":
            return "struct<" + ",".join(f"{n}:{node.spark_type}" for n, node in self.fields) + ">"
        if kind == "array":
            assert self.items is not None
            return f"array<{self.items.spark_type}>"
        return _PRIMITIVES[kind][0]

    def field(self, name: str) -> Node:
        for field_name, node in self.fields:
            if field_name == name:
                return node
        raise KeyError(name)


# --- Connect's JSON schema ------------------------------------------------------------------


def from_connect(schema: dict, where: str = "$") -> Node:
    """The Node of a Connect schema as the JSON converter writes it (``{"type": ...,
    "name": ..., "fields": [...]}``)."""
    kind = schema.get("type")
    name = schema.get("name")
    if name == DECIMAL:
        parameters = schema.get("parameters") or {}
        precision = int(parameters.get("connect.decimal.precision", 38))
        scale = int(parameters.get("scale", 0))
        if precision > 38 or scale > precision:
            raise ValueError(f"{where}: decimal({precision},{scale}) is wider than Spark's 38")
        return Node("decimal", precision=precision, scale=scale)
    if name == VARIABLE_DECIMAL:
        return Node("variable_decimal", precision=VARIABLE_PRECISION, scale=VARIABLE_SCALE)
    if name in _TIMESTAMPS:
        return Node("timestamp", unit=_TIMESTAMPS[name])
    if name == ZONED_TIMESTAMP:
        return Node("zoned_timestamp")
    if name in _DATES:
        return Node("date")
    if kind == "struct":
        return Node(
            "struct",
            fields=[
                (f["field"], from_connect(f, f"{where}.{f['field']}")) for f in schema["fields"]
            ],
        )
    if kind == "array":
        return Node("array", items=from_connect(schema["items"], f"{where}[]"))
    if kind == "bytes":
        return Node("bytes")
    if kind in _PRIMITIVES:
        return Node(kind)  # Uuid, Json, Enum, times... keep their Connect type
    raise ValueError(f"{where}: Connect type {kind!r} ({name}) is not read by debezium-json")


# --- Avro (Connect's AvroConverter: connect.name on each logical type) ------------------------

_AVRO_PRIMITIVES = {
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}


def from_avro(schema, names: dict | None = None, where: str = "$", namespace=None) -> Node:
    """The Node of an Avro schema as Connect's AvroConverter writes Debezium's (its Spark
    type as kafka_ds's Avro codec reads it, with Debezium's ``connect.name`` logical types
    still to convert)."""
    names = {} if names is None else names
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return Node(_AVRO_PRIMITIVES[schema], encoded=False)
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        for name in (full, schema):
            if name in names:
                return names[name]
        raise ValueError(f"{where}: unknown Avro type {schema!r}")
    if isinstance(schema, list):
        members = [member for member in schema if member != "null"]
        if len(members) != 1:
            raise ValueError(f"{where}: a union of {len(members)} types is not a Connect type")
        return from_avro(members[0], names, where, namespace)
    kind, connect = schema.get("type"), schema.get("connect.name")
    if connect == VARIABLE_DECIMAL:
        return Node(
            "variable_decimal", precision=VARIABLE_PRECISION, scale=VARIABLE_SCALE, encoded=False
        )
    if kind == "record":
        space = schema.get("namespace", namespace)
        name = schema["name"]
        full = name if "." in name or not space else f"{space}.{name}"
        node = Node("struct", encoded=False)
        names[full] = names[name] = node
        node.fields = [
            (f["name"], from_avro(f["type"], names, f"{where}.{f['name']}", space))
            for f in schema["fields"]
        ]
        return node
    if kind == "array":
        return Node(
            "array", items=from_avro(schema["items"], names, f"{where}[]", namespace), encoded=False
        )
    if schema.get("logicalType") == "decimal":
        precision, scale = int(schema.get("precision", 38)), int(schema.get("scale", 0))
        if precision > 38:
            raise ValueError(f"{where}: decimal({precision},{scale}) is wider than Spark's 38")
        return Node("decimal", precision=precision, scale=scale, encoded=False)
    if connect in _TIMESTAMPS and kind == "long" and "logicalType" not in schema:
        return Node("timestamp", unit=_TIMESTAMPS[connect], encoded=False)
    if connect == ZONED_TIMESTAMP:
        return Node("zoned_timestamp", encoded=False)
    if connect in _DATES or schema.get("logicalType") == "date":
        return Node("date", encoded=False)
    if kind in _AVRO_PRIMITIVES and "logicalType" not in schema:
        return Node(_AVRO_PRIMITIVES[kind], encoded=False)
    raise ValueError(
        f"{where}: Avro type {kind!r} ({connect or schema.get('logicalType')}) is not read "
        "by debezium-avro"
    )


# --- Spark DDL ------------------------------------------------------------------------------

_DDL_PRIMITIVES = {
    "tinyint": "int8",
    "byte": "int8",
    "smallint": "int16",
    "short": "int16",
    "int": "int32",
    "integer": "int32",
    "bigint": "int64",
    "long": "int64",
    "float": "float32",
    "real": "float32",
    "double": "float64",
    "boolean": "boolean",
    "string": "string",
}
_TOKEN = re.compile(r"\s*(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*|\d+|[<>(),:])")


class _DdlParser:
    def __init__(self, text: str):
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ValueError(f"expected {expected or 'more'} at {token or 'the end'}")
        self.at += 1
        return token

    def name(self) -> str:
        token = self.take()
        return token[1:-1] if token.startswith("`") else token

    def fields(self, closing: str | None) -> list:
        fields = []
        while True:
            name = self.name()
            if self.peek() == ":":
                self.take(":")
            fields.append((name, self.type()))
            if self.peek() != ",":
                break
            self.take(",")
        if closing is not None:
            self.take(closing)
        return fields

    def type(self) -> Node:
        word = self.take().lower()
        if word in _DDL_PRIMITIVES:
            return Node(_DDL_PRIMITIVES[word])
        if word == "binary":
            return Node("bytes")
        if word in ("decimal", "dec", "numeric"):
            precision, scale = 10, 0
            if self.peek() == "(":
                self.take("(")
                precision = int(self.take())
                if self.peek() == ",":
                    self.take(",")
                    scale = int(self.take())
                self.take(")")
            return Node("decimal", precision=precision, scale=scale)
        if word == "timestamp_ntz":
            return Node("timestamp", unit="us")
        if word in ("timestamp", "timestamp_ltz"):
            return Node("zoned_timestamp")
        if word == "date":
            return Node("date")
        if word == "array":
            self.take("<")
            items = self.type()
            self.take(">")
            return Node("array", items=items)
        if word == "struct":
            self.take("<")
            return Node("struct", fields=self.fields(">"))
        raise ValueError(f"type {word!r} is not read by debezium-json")


def _tokens(text: str) -> list[str]:
    tokens, at = [], 0
    text = text.strip()
    while at < len(text):
        found = _TOKEN.match(text, at)
        if not found:
            raise ValueError(f"cannot read {text[at : at + 20]!r}")
        tokens.append(found.group(1))
        at = found.end()
    return tokens


def from_ddl(text: str, option: str) -> Node:
    """The row type of a DDL (``id INT, amount DECIMAL(10,2), at TIMESTAMP_NTZ``) as the
    schemaless JSON converter's payload holds it: ``DECIMAL`` is Connect's Decimal (base64 of
    the unscaled value), ``TIMESTAMP_NTZ`` MicroTimestamp, ``TIMESTAMP`` ZonedTimestamp,
    ``DATE`` days, ``BINARY`` base64."""
    try:
        parser = _DdlParser(text)
        fields = parser.fields(None)
        if parser.peek() is not None:
            raise ValueError(f"unexpected {parser.peek()!r}")
    except (ValueError, IndexError) as exc:
        raise ConfigurationError(
            f"Option '{option}' is not a DDL of the table's columns ({exc}): write it as "
            "'id INT, amount DECIMAL(10,2), at TIMESTAMP_NTZ, tags ARRAY<STRING>'"
        ) from None
    for name, node in fields:
        if node.kind == "decimal" and not 0 <= node.scale <= node.precision <= 38:
            raise ConfigurationError(f"Option '{option}': {name} DECIMAL must fit (38, s)")
    return Node("struct", fields=fields)


#: the ``source`` block of a schemaless value: the fields every Debezium connector writes
#: and PostgreSQL's own (others read as null)
SCHEMALESS_SOURCE = Node(
    "struct",
    fields=[
        ("version", Node("string")),
        ("connector", Node("string")),
        ("name", Node("string")),
        ("ts_ms", Node("int64")),
        ("snapshot", Node("string")),
        ("db", Node("string")),
        ("sequence", Node("string")),
        ("schema", Node("string")),
        ("table", Node("string")),
        ("txId", Node("int64")),
        ("lsn", Node("int64")),
    ],
)
