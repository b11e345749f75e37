"""Declarations of the options that configure the Kafka client itself (bootstrap servers,
request timeouts, retries, metadata age, client id) for reads and writes alike, and the
dedicated parsers of the bootstrap list and the TLS/SASL settings.

Their defaults come from :mod:`kafka_ds.client.config`, so each is stated once.
"""

from __future__ import annotations

from ..client.config import DEFAULT_CLIENT_CONFIG as CLIENT
from ..client.config import DEFAULT_PRODUCER_CONFIG as PRODUCER
from ..client.connection import parse_bootstrap
from ..client.security.parse import security_settings
from .core import READ, READ_WRITE, ByMode, Option, integer, kafka_params, text

# Declared for the docs and the checks; check_bootstrap parses it.
BOOTSTRAP = Option(
    "kafka.bootstrap.servers",
    READ_WRITE,
    "Comma-separated `host:port` list of brokers to bootstrap from (IPv6: `[::1]:9092`).",
    shown_default="(required)",
)

CLIENT_OPTIONS: tuple[Option, ...] = (
    Option(
        "kafka.request.timeout.ms",
        READ_WRITE,
        "Per-request timeout.",
        integer,
        CLIENT.request_timeout_ms,
        field="request_timeout_ms",
        minimum=1,
    ),
    Option(
        "kafka.socket.connection.setup.timeout.ms",
        READ_WRITE,
        "Longest time to open a connection to a broker.",
        integer,
        CLIENT.connect_timeout_ms,
        field="connect_timeout_ms",
        minimum=1,
    ),
    Option(
        "kafka.retries",
        READ_WRITE,
        "Retries of retriable errors (metadata of the partitions concerned is refreshed "
        "when the error says it is stale). By default only the time budgets limit them: "
        "`kafkaConsumer.pollTimeoutMs`, `kafka.default.api.timeout.ms`, "
        "`kafka.delivery.timeout.ms`.",
        integer,
        ByMode(read=CLIENT.retries, write=PRODUCER.retries),
        shown_default="unlimited (the time budgets)",
        example="10",
        field="retries",
        minimum=0,
    ),
    Option(
        "kafka.retry.backoff.ms",
        READ_WRITE,
        "Initial back-off between retries (doubles each retry, +-20% jitter).",
        integer,
        CLIENT.retry_backoff_ms,
        field="retry_backoff_ms",
        minimum=0,
    ),
    Option(
        "kafka.retry.backoff.max.ms",
        READ_WRITE,
        "Longest back-off between retries.",
        integer,
        CLIENT.retry_backoff_max_ms,
        field="retry_backoff_max_ms",
        minimum=0,
    ),
    Option(
        "kafka.default.api.timeout.ms",
        READ,
        "Time budget of driver-side metadata, ListOffsets and offset-commit calls, "
        "retries included.",
        integer,
        CLIENT.default_api_timeout_ms,
        field="default_api_timeout_ms",
        minimum=0,
    ),
    Option(
        "kafka.metadata.max.age.ms",
        READ_WRITE,
        "Leaders and partitions learnt from Metadata are reused this long (refreshed "
        "earlier when a broker says they moved or a topic is gone).",
        integer,
        CLIENT.metadata_max_age_ms,
        field="metadata_max_age_ms",
        minimum=0,
    ),
    Option(
        "kafka.client.id",
        READ_WRITE,
        "Client id sent with every request.",
        text,
        CLIENT.client_id,
        field="client_id",
    ),
)


def check_bootstrap(options) -> str:
    """The ``kafka.bootstrap.servers`` option, checked by the client's own parser."""
    servers = str(options.get("kafka.bootstrap.servers", "")).strip()
    parse_bootstrap(servers)
    return servers


def parse_security(options: dict):
    """TLS/SASL settings from ``kafka.security.protocol``/``kafka.ssl.*``/``kafka.sasl.*``
    (declared in :mod:`.security_declarations`), None for PLAINTEXT.
    Stores and JAAS entries are read and checked here, on the driver."""
    params = kafka_params(options)
    if not any(key.startswith(("security.", "ssl.", "sasl.")) for key in params):
        return None
    settings = security_settings(params)
    return None if settings.protocol == "PLAINTEXT" else settings
