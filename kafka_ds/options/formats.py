"""The typed key/value options gathered into one :class:`TypedColumnsSpec` (driver side,
pure parsing: the registry is asked nothing here; :mod:`kafka_ds.read.typed_columns` resolves
the schemas)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigurationError
from .core import WRITE
from .format_declarations import CHANGE_FORMATS, SCHEMA_FORMATS
from .registry import BY_NAME

if TYPE_CHECKING:
    from ..registry.settings import RegistrySettings

COLUMNS = ("value", "key")
#: the registry's options with a typed value (RegistrySettings reads them all)
REGISTRY_OPTIONS = ("schema.registry.request.timeout.ms", "schema.registry.retry.budget.ms")


@dataclass(frozen=True)
class ColumnFormatSpec:
    column: str  # "key" or "value"
    format: str = "binary"  # binary | string | avro | protobuf | json
    subject: str | None = None  # None: TopicNameStrategy, "<topic>-<column>"
    #: several record types, one subject per type (or ``prefix*``)
    subjects: tuple | None = None
    #: "position" (member0, ...) or "type": the field names of a union of several types
    member_names: str = "position"
    version: int | str = "latest"
    inline_schema: str | None = None
    message_name: str | None = None

    @property
    def has_schema(self) -> bool:
        return self.format in SCHEMA_FORMATS

    def option(self, stem: str) -> str:
        """The user's name of this column's option ``stem``: ``valueSubject``..."""
        return f"{self.column}{stem}"


@dataclass(frozen=True)
class TypedColumnsSpec:
    value: ColumnFormatSpec
    key: ColumnFormatSpec
    mode: str = "FAILFAST"
    #: None without schema.registry.url
    registry: RegistrySettings | None = None
    auto_register: bool = True
    #: valueFormat=debezium-json: the table's columns instead of the envelope
    debezium_flatten: bool = False
    #: valueFormat=debezium-json: "drop" or "keep" the tombstones
    debezium_tombstones: str = "drop"

    @property
    def columns(self) -> tuple[ColumnFormatSpec, ...]:
        """The columns not read/written as plain binary."""
        return tuple(c for c in (self.value, self.key) if c.format != "binary")


def _value(options: dict, name: str, modes):
    option = BY_NAME[name.lower()]
    return option.value(options, modes) if option.applies & modes else option.default_for(modes)


def parse_typed_columns(options: dict, modes: frozenset) -> TypedColumnsSpec | None:
    """None when both columns stay binary (nothing to decode or encode)."""
    # Checked even while both columns are binary: a wrong value is a mistake either way.
    mode = _value(options, "mode", modes)
    flatten = _value(options, "debezium.flatten", modes)
    tombstones = _value(options, "debezium.tombstones", modes)
    auto_register = _value(options, "schema.registry.auto.register.schemas", modes)
    for name in REGISTRY_OPTIONS:
        _value(options, name, modes)
    specs = {}
    for column in COLUMNS:
        spec = ColumnFormatSpec(
            column=column,
            format=_value(options, f"{column}Format", modes),
            subject=_value(options, f"{column}Subject", modes),
            subjects=_value(options, f"{column}Subjects", modes),
            member_names=_value(options, f"{column}MemberNames", modes),
            version=_value(options, f"{column}SchemaVersion", modes),
            inline_schema=_value(options, f"{column}Schema", modes),
            message_name=_value(options, f"{column}MessageName", modes),
        )
        _check_column(spec, options, modes)
        specs[column] = spec
    url = options.get("schema.registry.url")
    registry = None
    if url is not None and str(url).strip():
        from ..registry.settings import RegistrySettings

        registry = RegistrySettings.from_options(options)
    for spec in specs.values():
        if spec.has_schema and registry is None and spec.inline_schema is None:
            raise ConfigurationError(
                f"Option '{spec.option('Format')}'='{spec.format}' needs a schema: set "
                "'schema.registry.url' (.option(\"schema.registry.url\", "
                f"\"http://registry:8081\")) or an inline schema in '{spec.option('Schema')}'"
            )
        if spec.format == "debezium-avro" and registry is None:
            raise ConfigurationError(
                f"Option '{spec.option('Format')}'='debezium-avro' reads the writer schemas "
                "from the registry: set 'schema.registry.url'"
            )
        if spec.format == "protobuf" and registry is None:
            raise ConfigurationError(
                f"Option '{spec.option('Format')}'='protobuf' needs 'schema.registry.url': "
                "Protobuf schemas are read from the registry as compiled descriptors "
                f"('{spec.option('Schema')}' takes Avro or JSON Schema text only)"
            )
    if all(spec.format == "binary" for spec in specs.values()):
        return None
    return TypedColumnsSpec(
        value=specs["value"],
        key=specs["key"],
        mode=mode,
        registry=registry,
        auto_register=auto_register if WRITE in modes else False,
        debezium_flatten=bool(flatten),
        debezium_tombstones=tombstones or "drop",
    )


def _check_column(spec: ColumnFormatSpec, options: dict, modes) -> None:
    """Schema options of a column that is not read with a schema are mistakes, not no-ops."""
    if spec.format in CHANGE_FORMATS:
        _check_change_column(spec, options, modes)
        return
    if spec.has_schema:
        if spec.message_name is not None and spec.format != "protobuf":
            raise ConfigurationError(
                f"Option '{spec.option('MessageName')}' applies to "
                f"{spec.option('Format')}=protobuf only (it is '{spec.format}'): remove it"
            )
        if spec.inline_schema is not None and spec.subject is not None and WRITE not in modes:
            # (a write registers the inline schema under the subject)
            raise ConfigurationError(
                f"Options '{spec.option('Schema')}' and '{spec.option('Subject')}' both name "
                f"the {spec.column} schema: keep one"
            )
        if spec.subjects is not None:
            _check_several_subjects(spec, options)
        if (
            spec.option("MemberNames").lower() in options
            and spec.format != "avro"
            and spec.subjects is None
        ):
            raise ConfigurationError(
                f"Option '{spec.option('MemberNames')}' applies to {spec.option('Format')}=avro "
                f"and to '{spec.option('Subjects')}' only (it is '{spec.format}' with one "
                "subject): remove it"
            )
        return
    for stem in ("Subject", "Subjects", "SchemaVersion", "Schema", "MessageName", "MemberNames"):
        if spec.option(stem).lower() in options:
            raise ConfigurationError(
                f"Option '{spec.option(stem)}' has no effect while '{spec.option('Format')}' "
                f"is '{spec.format}': set {spec.option('Format')} to avro, protobuf or json, "
                "or remove the option"
            )


def _check_change_column(spec: ColumnFormatSpec, options: dict, modes) -> None:
    if WRITE in modes:
        raise ConfigurationError(
            f"Option '{spec.option('Format')}'='{spec.format}' reads change events and "
            "writes none: write the rows with another format (json, avro), or remove the "
            "option"
        )
    stems: tuple[str, ...] = ("Subject", "Subjects", "SchemaVersion", "MessageName", "MemberNames")
    if spec.format == "debezium-avro":  # the registry's subject: its name and version apply
        stems = ("Subjects", "MessageName", "MemberNames", "Schema")
    for stem in stems:
        if spec.option(stem).lower() in options:
            raise ConfigurationError(
                f"Option '{spec.option(stem)}' has no effect with "
                f"{spec.option('Format')}={spec.format} (its type comes from the records' own "
                f"schema, or from a DDL in '{spec.option('Schema')}'): remove it"
            )


def _check_several_subjects(spec: ColumnFormatSpec, options: dict) -> None:
    option = spec.option("Subjects")
    for stem in ("Subject", "Schema", "SchemaVersion", "MessageName"):
        if spec.option(stem).lower() in options:
            raise ConfigurationError(
                f"Options '{option}' and '{spec.option(stem)}' both choose the "
                f"{spec.column} schema ('{option}' reads each subject's latest version"
                + (
                    ", its message the one the subject is named after, else the first"
                    if stem == "MessageName"
                    else ""
                )
                + "): keep one"
            )
