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

    client_id: str = "kafka-ds"                 # client.id
    request_timeout_ms: int = 30000             # request.timeout.ms
    connect_timeout_ms: int = 10000             # socket.connection.setup.timeout.ms
    retries: int = 5                            # retries: attempts after the first
    retry_backoff_ms: int = 100                 # retry.backoff.ms
    # metadata.max.age.ms: validated and carried, not read yet -- the client refreshes
    # metadata on errors only; reusing cached metadata up to this age is the reliability
    # work's to add.
    metadata_max_age_ms: int = 300000
    # TLS/SASL: kafka_ds.client.security.SecuritySettings (frozen, secrets hidden from
    # repr), parsed from kafka.security.protocol / kafka.ssl.* / kafka.sasl.*; None is
    # PLAINTEXT.
    security: Any = None


DEFAULT_CLIENT_CONFIG = _CLIENT = ClientConfig()


@dataclass(frozen=True)
class ProducerConfig:
    """Producer settings, built once on the driver (kafka_ds.options) and pickled to the
    write tasks. The defaults are those of the ``kafka.*`` options (stated here only)."""

    acks: int = -1                    # 0, 1 or -1 (all in-sync replicas)
    idempotent: bool = True
    max_request_size: int = 1 << 20
    # also the broker-side Produce timeout
    request_timeout_ms: int = _CLIENT.request_timeout_ms
    delivery_timeout_ms: int = 120000
    max_in_flight: int = 5
    retries: int = 2147483647
    retry_backoff_ms: int = _CLIENT.retry_backoff_ms
    retry_backoff_max_ms: int = 1000


DEFAULT_PRODUCER_CONFIG = ProducerConfig()

__all__ = ["ClientConfig", "ProducerConfig", "DEFAULT_CLIENT_CONFIG", "DEFAULT_PRODUCER_CONFIG"]
