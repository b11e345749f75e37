"""Every exception kafka_ds raises, in one public module.

Catch :class:`KafkaError` for anything from kafka_ds. The ones a Spark user meets:

- :class:`ConfigurationError` — a bad option; raised at planning time, the message names
  the option and the fix.
- :class:`DataLossError` — requested offsets are gone and ``failOnDataLoss`` is true.
- :class:`CorruptRecordError` — fetched record data fails validation (CRC, lengths);
  the message names topic, partition and offset.
- :class:`RecordDecodeError` — a key or value does not decode with its schema
  (``valueFormat``/``keyFormat``, ``mode=FAILFAST``); names topic, partition, offset,
  schema id and the reason.
- :class:`ProduceError` — a write could not be delivered; names topic and partition.
- :class:`AuthenticationError` — SASL authentication failed; :class:`TlsError` — the TLS
  handshake or certificate check failed; :class:`SecurityProtocolMismatchError` — the
  listener speaks another ``kafka.security.protocol`` than configured.
- :class:`BrokerError` — a broker answered with a Kafka error code. Each code has its
  own subclass named after the protocol name (``UnknownTopicOrPartition``,
  ``NotLeaderOrFollower``, ...), built from the one table in
  :mod:`kafka_ds.protocol.errors`.

Anything that is also :class:`RetriableError` may succeed when tried again.

This module imports nothing from kafka_ds, so every layer (protocol included) can
build on it without pulling in the client or the Spark glue.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base of every error raised by kafka_ds."""

    retriable = False
    # True when the client's metadata is likely stale (Java's InvalidMetadataException):
    # refresh metadata before trying again.
    invalid_metadata = False


class RetriableError(KafkaError):
    """The operation may succeed if retried (after a metadata refresh)."""

    retriable = True


# --- bytes and sockets -----------------------------------------------------------------------


class KafkaProtocolError(KafkaError):
    """Bytes that do not decode: truncated, corrupt, absurd lengths, bad CRC."""


class CorruptRecordError(KafkaProtocolError):
    """Record data failed validation; the message names topic, partition, offset."""


class RecordDecodeError(KafkaError):
    """A key or value could not be decoded as its ``keyFormat``/``valueFormat`` says (not
    framed, unknown schema id, truncated, or not resolvable to the reader schema); the
    message names topic, partition, offset, schema id and the reason."""


class KafkaConnectionError(RetriableError):
    """The TCP connection to a broker failed or was closed."""


class KafkaTimeoutError(RetriableError):
    """A request got no answer within its timeout."""


class UnsupportedVersionError(KafkaError):
    """No API version is supported by both this client and the broker."""


class UnknownFieldError(KafkaError, ValueError):
    """A request (or response) body names a field its message does not have in any
    version: a bug in kafka_ds, caught before any byte is sent. The message names the
    message, version, nesting path and the closest field name.
    """


# --- what a user configured or asked for -----------------------------------------------------


class ConfigurationError(KafkaError, ValueError):
    """Invalid user-facing option; the message names the option and the fix."""


class DataLossError(KafkaError):
    """Requested offsets are no longer available (``failOnDataLoss``)."""


class ProduceError(KafkaError):
    """A batch could not be delivered; the message names topic, partition and rows.

    ``cause`` is the last error seen (often a :class:`BrokerError`); the produce error is
    retriable when that cause was.
    """

    def __init__(self, message: str, *, topic: str, partition: int, cause: Exception | None = None):
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.cause = cause
        self.retriable = bool(cause is not None and getattr(cause, "retriable", False))


class AuthenticationError(KafkaError):
    """The broker refused our credentials (SASL handshake or authenticate failed).

    Not retriable: the same credentials fail again. Raised by the security layer; a broker's
    SASL error codes (``SaslAuthenticationFailed``, ``UnsupportedSaslMechanism``,
    ``IllegalSaslState``) are reported through it, with the broker's message.
    """


class TlsError(AuthenticationError):
    """The TLS handshake failed: the certificate did not verify, the host name did not
    match, or the two sides share no protocol or cipher. Not retriable; the message names
    the broker and what to check (``kafka.ssl.*`` options).
    """


class SecurityProtocolMismatchError(KafkaError):
    """The broker's listener speaks another security protocol than configured (plain text
    against a TLS listener, TLS against a plain one, SASL against a listener without it).
    Not retriable; the message points at ``kafka.security.protocol``.
    """


# --- error codes from brokers ----------------------------------------------------------------


class BrokerError(KafkaError):
    """An error code returned by a broker; the subclass per code says which.

    Class attributes: ``code``, ``name`` (Kafka's protocol name), ``retriable``,
    ``invalid_metadata`` and ``description``.
    """

    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    description = ""

    def __init__(self, message: str = ""):
        text = f"[{self.code} {self.name}] {self.description}"
        if message:
            text = f"{text} ({message})"
        super().__init__(text)


# --- ACLs ------------------------------------------------------------------------------------

#: The ACL operation each request needs on each kind of resource (Apache Kafka's
#: "Operations and Resources on Protocols" table), for the messages of refused requests.
ACL_OPERATIONS = {
    "Metadata": {"topic": "Describe"},
    "ListOffsets": {"topic": "Describe"},
    "Fetch": {"topic": "Read"},
    "Produce": {"topic": "Write", "transactional id": "Write"},
    "OffsetCommit": {"group": "Read", "topic": "Read"},
    "OffsetFetch": {"group": "Describe", "topic": "Describe"},
    "FindCoordinator": {"group": "Describe", "transactional id": "Describe"},
    "InitProducerId": {"transactional id": "Write", "cluster": "IdempotentWrite"},
    "AddPartitionsToTxn": {"transactional id": "Write", "topic": "Write"},
    "EndTxn": {"transactional id": "Write"},
}
#: authorization error code -> (the resource kind in messages, its ``acl_hint`` keyword)
_REFUSED_RESOURCE = {
    29: ("topic", "topic"),
    30: ("group", "group"),
    31: ("cluster", None),
    53: ("transactional id", "transactional_id"),
}


def acl_hint(
    code: int,
    request: str,
    *,
    topic: str | None = None,
    group: str | None = None,
    transactional_id: str | None = None,
) -> str:
    """For an authorization error code (TOPIC/GROUP/CLUSTER/TRANSACTIONAL_ID_AUTHORIZATION_
    FAILED) of ``request``: "; the principal lacks ACL <operation> on <resource> '<name>'",
    the name being the one given for the refused kind of resource; "" for any other code."""
    refused = _REFUSED_RESOURCE.get(code)
    if refused is None:
        return ""
    resource, keyword = refused
    names = {"topic": topic, "group": group, "transactional_id": transactional_id}
    name = names.get(keyword) if keyword else None
    operation = ACL_OPERATIONS.get(request, {}).get(resource, "an operation")
    where = f"{resource} {name!r}" if name else resource
    return (
        f"; the principal lacks ACL {operation} on {where} (Kafka's authorizer refused {request})"
    )
