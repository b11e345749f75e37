"""The registry: the declared options in one list, ``OPTIONS`` (its order is the docs'
table's; the security options, ``SECURITY_OPTIONS``, have a table of their own), every
one looked up by lower-cased name in ``BY_NAME``; the Kafka settings rejected outright,
``FORBIDDEN``; and the checks and look-ups that go through them.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ConfigurationError
from .client_declarations import BOOTSTRAP, CLIENT_OPTIONS
from .core import BATCH, READ, READ_WRITE, STREAM, WRITE, Forbidden, Option, closest, did_you_mean
from .format_declarations import FORMAT_OPTIONS
from .names import SPARK_INJECTED, STRICT, strictness
from .read_declarations import READ_OPTIONS
from .security_declarations import SECURITY_OPTIONS
from .write_declarations import WRITE_OPTIONS

# One logger for the whole package, named as before the split, so logging set up for
# 'kafka_ds.options' sees the same records.
log = logging.getLogger(__package__)

OPTIONS: tuple[Option, ...] = (
    BOOTSTRAP,
    *READ_OPTIONS,
    *CLIENT_OPTIONS,
    *WRITE_OPTIONS,
    *FORMAT_OPTIONS,
    STRICT,
)

# The security options have a table of their own (docs/security.md), so they are not in
# OPTIONS; BY_NAME knows every declared option.
BY_NAME = {option.name.lower(): option for option in (*OPTIONS, *SECURITY_OPTIONS)}


FORBIDDEN: tuple[Forbidden, ...] = (
    # Spark's KafkaSourceProvider rejects these for every source.
    Forbidden(
        "kafka.auto.offset.reset",
        READ,
        "; Structured Streaming manages which offsets are consumed",
        "set the source option 'startingOffsets' to 'earliest' or 'latest' (or 'group') instead",
    ),
    Forbidden(
        "kafka.key.deserializer",
        READ,
        " as keys are deserialized as byte arrays",
        "keys are read as binary unless 'keyFormat' says how to decode them (string, avro, "
        "protobuf or json)",
    ),
    Forbidden(
        "kafka.value.deserializer",
        READ,
        " as values are deserialized as byte arrays",
        "values are read as binary unless 'valueFormat' says how to decode them (string, "
        "avro, protobuf or json)",
    ),
    Forbidden(
        "kafka.enable.auto.commit",
        READ,
        "",
        "the source does not commit through the consumer; set 'kafka.group.id' and it "
        "commits each finished streaming batch itself",
    ),
    # (Spark's sink hands this one to its Java producer; there is no JVM here.)
    Forbidden(
        "kafka.interceptor.classes",
        READ_WRITE,
        "",
        "interceptors are not supported; transform the DataFrame instead",
    ),
    # Spark's sink rejects these.
    Forbidden(
        "kafka.key.serializer",
        frozenset({WRITE}),
        " as keys are serialized as bytes",
        "the key column must be binary or string, or 'keyFormat' names how to encode it "
        "(avro, protobuf or json)",
    ),
    Forbidden(
        "kafka.value.serializer",
        frozenset({WRITE}),
        " as values are serialized as bytes",
        "the value column must be binary or string, or 'valueFormat' names how to encode "
        "it (avro, protobuf or json)",
    ),
    # Spark hands these Java classes to its producer; there is no JVM here.
    Forbidden(
        "kafka.partitioner.class",
        frozenset({WRITE}),
        "",
        "custom partitioners are not supported; compute a 'partition' column instead "
        "(rows with a null partition use the Java default partitioner)",
    ),
    Forbidden(
        "kafka.transactional.id",
        frozenset({WRITE}),
        "",
        "set .option('deliveryGuarantee', 'exactly-once') for transactional writes (each "
        "task then uses the id '<transactionalIdPrefix>-<task>'; set "
        "'transactionalIdPrefix' to choose the prefix)",
    ),
)


def _modes_text(modes: frozenset) -> str:
    return {
        frozenset({BATCH}): "batch queries",
        frozenset({STREAM}): "streaming queries",
        frozenset({WRITE}): "writes",
    }.get(modes, "reads")


def check_kafka_settings(options: dict, modes: frozenset, *, log_unused: bool = True) -> None:
    """Reject the forbidden ``kafka.*`` settings; log the ones kafka_ds does not use.

    Spark hands every ``kafka.*`` setting to the Kafka client; kafka_ds is its own client,
    so a setting it has no use for is accepted and named in a warning (as the Java client
    warns of configurations it does not know) rather than failing the query.
    """
    unused = []
    for forbidden in FORBIDDEN:
        if forbidden.applies & modes and forbidden.name.lower() in options:
            raise forbidden.error()
    for key in sorted(options):
        option = BY_NAME.get(key)
        if key.startswith("kafka.") and not (option and option.applies & modes):
            unused.append(key)
    if unused and log_unused:
        log.warning(
            "kafka_ds does not use these Kafka settings in %s; they have no effect: %s",
            _modes_text(modes),
            ", ".join(unused),
        )


def unknown_option_names(options: dict) -> list[str]:
    """The keys of ``options`` (lower-cased) that nothing knows: no declaration (of any
    mode: those of another mode are :func:`warn_ignored`), not ``kafka.*`` (see
    :func:`check_kafka_settings`), not put there by Spark."""
    return sorted(
        key
        for key in options
        if key not in BY_NAME and key not in SPARK_INJECTED and not key.startswith("kafka.")
    )


def check_option_names(options: dict, *, report: bool = True) -> None:
    """Name every unknown option and the closest known ones: a ConfigurationError when
    strictOptions (or $KAFKA_DS_STRICT_OPTIONS) says so, else a warning (``report=False``:
    no warning, as one was given for this query already)."""
    unknown = unknown_option_names(options)
    why = strictness(options)
    if not unknown:
        return
    names = [option.name for option in OPTIONS]
    found = [
        f"Option '{key}' is not a pykafka option{did_you_mean(closest(key, names, 3)) or '.'}"
        for key in unknown
    ]
    if why:
        raise ConfigurationError(
            " ".join(found) + f" Unknown options fail the query as {why}: correct the "
            "name (see kafka_ds's option table, docs/options.md), or remove the option."
        )
    if report:
        for message in found:
            # Spark's Python worker logs: the console of local mode, the driver's log, and
            # spark.tvf.python_worker_logs() with spark.sql.pyspark.worker.logging.enabled.
            log.warning(
                "%s It is ignored, as Spark ignores options it does not know; "
                '.option("strictOptions", "true") makes unknown options fail the '
                "query.",
                message,
            )


def warn_ignored(options: dict, modes: frozenset) -> None:
    """Like Spark, options of other kinds of query are ignored with a warning."""
    for key in options:
        option = BY_NAME.get(key)
        if option and not key.startswith("kafka.") and not option.applies & modes:
            log.warning(
                "%s option ignored in %s (it applies to %s)",
                option.name,
                _modes_text(modes),
                option.markdown_applies(),
            )


def declared_values(options: dict, modes: frozenset) -> dict[str, Any]:
    """``field -> value`` of every declared option: parsed and checked when the option
    applies to ``modes`` (else its default; see :func:`warn_ignored`)."""
    values = {}
    for option in OPTIONS:
        if option.field is None:
            continue
        values[option.field] = (
            option.value(options, modes) if option.applies & modes else option.default_for(modes)
        )
    return values


def default_of(name: str, modes: frozenset = READ):
    """The parsed default of option ``name`` in ``modes`` (the dataclasses' field defaults)."""
    return BY_NAME[name.lower()].default_for(modes)
