"""The whole write configuration: every write option parsed and gathered into one frozen
:class:`WriteOptions` on the driver, with the producer's idempotence and exactly-once rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..client.config import DEFAULT_CLIENT_CONFIG as CLIENT
from ..client.config import DEFAULT_PRODUCER_CONFIG as PRODUCER
from ..client.config import ClientConfig, ProducerConfig
from ..errors import ConfigurationError
from .client_declarations import check_bootstrap, parse_security
from .core import INT32_MAX, WRITE, fields_of, lower_keys
from .formats import TypedColumnsSpec, parse_typed_columns
from .registry import (
    check_kafka_settings,
    check_option_names,
    declared_values,
    default_of,
    warn_ignored,
)

MAX_RETRIES = INT32_MAX


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None = None  # the 'topic' option; overrides the topic column
    acks: int = default_of("kafka.acks", frozenset({WRITE}))  # 0, 1 or -1 (all)
    compression: str = default_of("kafka.compression.type")  # none|gzip|snappy|lz4|zstd
    idempotent: bool = default_of("kafka.enable.idempotence")
    batch_size: int = default_of("kafka.batch.size")
    max_request_size: int = default_of("kafka.max.request.size")
    linger_ms: int = default_of("kafka.linger.ms")
    buffer_memory: int = default_of("kafka.buffer.memory")
    delivery_timeout_ms: int = PRODUCER.delivery_timeout_ms
    request_timeout_ms: int = default_of("kafka.request.timeout.ms")
    max_in_flight: int = default_of("kafka.max.in.flight.requests.per.connection")
    allow_auto_create_topics: bool = default_of("kafka.allow.auto.create.topics")
    retries: int = default_of("kafka.retries", frozenset({WRITE}))
    retry_backoff_ms: int = default_of("kafka.retry.backoff.ms")
    # Built on the driver from the values above; write tasks use them as they are.
    client: ClientConfig = CLIENT
    producer: ProducerConfig = PRODUCER
    exactly_once: bool = False  # deliveryGuarantee=exactly-once
    transactional_id_prefix: str | None = None  # None: the writer derives one
    transaction_timeout_ms: int = default_of("kafka.transaction.timeout.ms", frozenset({WRITE}))
    checkpoint_location: str | None = None  # Spark's writeStream checkpointLocation
    # valueFormat / keyFormat (kafka_ds.write.typed_writes resolves the schemas at planning)
    typed_spec: TypedColumnsSpec | None = None


def parse_write_options(raw_options) -> WriteOptions:
    """Validate every write option (driver side, before any task runs)."""
    options = lower_keys(raw_options)
    check_option_names(options)
    modes = frozenset({WRITE})
    bootstrap = check_bootstrap(options)
    check_kafka_settings(options, modes)
    topic = options.get("topic")
    if topic is not None:
        topic = str(topic).strip()
        if not topic:
            raise ConfigurationError(
                "Option 'topic' is empty: give the topic to write to, or leave the option out "
                "and provide a string 'topic' column"
            )
    values = declared_values(options, modes)
    _check_exactly_once(values, options)
    _resolve_idempotence(
        values, explicit="kafka.enable.idempotence" in options, acks_raw=options.get("kafka.acks")
    )
    linger_ms, request_timeout_ms = values["linger_ms"], values["request_timeout_ms"]
    if values["delivery_timeout_ms"] is None:
        values["delivery_timeout_ms"] = max(
            PRODUCER.delivery_timeout_ms, linger_ms + request_timeout_ms
        )
    elif values["delivery_timeout_ms"] < linger_ms + request_timeout_ms:
        raise ConfigurationError(
            f"Option 'kafka.delivery.timeout.ms' ({values['delivery_timeout_ms']}) must be at "
            f"least 'kafka.linger.ms' + 'kafka.request.timeout.ms' ({linger_ms} + "
            f"{request_timeout_ms}), so a request can time out and be retried once"
        )
    warn_ignored(options, modes)
    # Metadata and InitProducerId of a write retry within the write's own budget
    # (kafka.delivery.timeout.ms, and kafka.retries when set), like its Produce requests.
    client = ClientConfig(
        **fields_of(
            ClientConfig,
            values,
            retries=None if values["retries"] >= MAX_RETRIES else values["retries"],
            default_api_timeout_ms=values["delivery_timeout_ms"],
            api_timeout_option="kafka.delivery.timeout.ms",
            security=parse_security(options),
        )
    )
    return WriteOptions(
        bootstrap_servers=bootstrap,
        topic=topic,
        client=client,
        producer=ProducerConfig(**fields_of(ProducerConfig, values)),
        checkpoint_location=options.get("checkpointlocation") or None,
        typed_spec=parse_typed_columns(options, modes),
        **fields_of(WriteOptions, values),
    )


def _idempotence_conflicts(values: dict, acks_raw) -> list[tuple[str, str]]:
    """The settings that rule out the idempotent producer, as (setting, why) pairs; one
    list for both the idempotence rules and the exactly-once check."""
    found = []
    if values["acks"] != -1:
        found.append((f"'kafka.acks' is {acks_raw!r}", "idempotence needs 'all'"))
    if values["max_in_flight"] > 5:
        found.append(
            (
                f"'kafka.max.in.flight.requests.per.connection' is {values['max_in_flight']}",
                "idempotence allows at most 5",
            )
        )
    if values["retries"] == 0:
        found.append(("'kafka.retries' is 0", "idempotence needs retries"))
    return found


def _check_exactly_once(values: dict, options: dict) -> None:
    """Exactly-once needs the idempotent producer: no quiet fallback as for idempotence."""
    prefix = values.get("transactional_id_prefix")
    if prefix is not None:
        values["transactional_id_prefix"] = prefix = prefix.strip()
        if not prefix:
            raise ConfigurationError(
                "Option 'transactionalIdPrefix' is empty: give a prefix unique to this writer, "
                "or leave the option out for the default"
            )
    if not values["exactly_once"]:
        return
    conflicts = [
        setting for setting, _why in _idempotence_conflicts(values, options.get("kafka.acks"))
    ]
    if not values["idempotent"]:
        conflicts.append("'kafka.enable.idempotence' is 'false'")
    if conflicts:
        raise ConfigurationError(
            "Option 'deliveryGuarantee' is 'exactly-once', which needs the idempotent "
            "producer, but " + "; ".join(conflicts) + ". Remove those options (or use "
            "deliveryGuarantee 'at-least-once')."
        )


def _resolve_idempotence(values: dict, *, explicit: bool, acks_raw) -> None:
    """Like the Java producer: idempotence is on unless asked otherwise, and quietly off
    when another setting it needs was changed -- but an explicit 'true' with such a
    setting is a contradiction the user must resolve."""
    conflicts = [f"{setting} ({why})" for setting, why in _idempotence_conflicts(values, acks_raw)]
    if values["idempotent"] and conflicts:
        if explicit:
            raise ConfigurationError(
                "Option 'kafka.enable.idempotence' is 'true' but "
                + "; ".join(conflicts)
                + ". Change those options, or set 'kafka.enable.idempotence' to 'false'."
            )
        values["idempotent"] = False
