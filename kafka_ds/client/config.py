"""The client's and the producer's settings: frozen values, built once on the driver at
plan time (:mod:`kafka_ds.options` validates the ``kafka.*`` options into them) and pickled
to the executors, which use them as they are.

The field defaults below are the defaults of the matching ``kafka.*`` options: the option
declarations in :mod:`kafka_ds.options` read them from here, so each is stated once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClientConfig:
    """Client settings, named after the Kafka client properties they mirror."""

    client_id: str = "kafka-ds"  # client.id
    request_timeout_ms: int = 30000  # request.timeout.ms
    connect_timeout_ms: int = 10000  # socket.connection.setup.timeout.ms
    # retries: attempts after the first; None: only the time budget (default_api_timeout_ms
    # or the caller's, kafka_ds/client/retry.py) limits them.
    retries: int | None = None
    retry_backoff_ms: int = 100  # retry.backoff.ms
    retry_backoff_max_ms: int = 1000  # retry.backoff.max.ms
    # metadata.max.age.ms: cached leaders and partitions of subscribed topics are reused
    # this long (refreshed earlier on invalid-metadata errors).
    metadata_max_age_ms: int = 300000
    default_api_timeout_ms: int = 60000  # default.api.timeout.ms: driver-side budget
    # The option that set default_api_timeout_ms, named when the budget runs out: a write's
    # client gets kafka.delivery.timeout.ms (its metadata and coordinator calls wait as
    # long as its Produce requests).
    api_timeout_option: str = "kafka.default.api.timeout.ms"
    # TLS/SASL: kafka_ds.client.security.SecuritySettings (frozen, secrets hidden from
    # repr), parsed from kafka.security.protocol / kafka.ssl.* / kafka.sasl.*; None is
    # PLAINTEXT.
    security: Any = None


DEFAULT_CLIENT_CONFIG = _CLIENT = ClientConfig()


@dataclass(frozen=True)
class ProducerConfig:
    """Producer settings, built once on the driver (kafka_ds.options) and pickled to the
    write tasks. The defaults are those of the ``kafka.*`` options (stated here only)."""

    acks: int = -1  # 0, 1 or -1 (all in-sync replicas)
    idempotent: bool = True
    max_request_size: int = 1 << 20
    # also the broker-side Produce timeout
    request_timeout_ms: int = _CLIENT.request_timeout_ms
    delivery_timeout_ms: int = 120000
    max_in_flight: int = 5
    retries: int = 2147483647
    retry_backoff_ms: int = _CLIENT.retry_backoff_ms
    retry_backoff_max_ms: int = _CLIENT.retry_backoff_max_ms
    transactional_id: str | None = None  # set: Produce requests carry it (see transactions.py)


DEFAULT_PRODUCER_CONFIG = ProducerConfig()

__all__ = ["ClientConfig", "ProducerConfig", "DEFAULT_CLIENT_CONFIG", "DEFAULT_PRODUCER_CONFIG"]
