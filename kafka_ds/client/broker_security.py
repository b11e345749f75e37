"""Security of one broker connection: the TLS handshake, the SASL exchange
(SaslHandshake + SaslAuthenticate, KIP-152), and the hints for a listener that speaks
another security protocol than configured; every failure is explained in terms of the
``kafka.security.protocol``/``kafka.ssl.*``/``kafka.sasl.*`` options.

Functions over what a connection offers (:class:`SaslChannel`: its address, its
ApiVersions and ``request``); the connection keeps the state: its socket and when to
authenticate again (KIP-368).
"""

from __future__ import annotations

import logging
import socket
import ssl
from typing import Protocol

from ..errors import (
    AuthenticationError,
    SecurityProtocolMismatchError,
    TlsError,
    UnsupportedVersionError,
)
from ..protocol.errors import UnsupportedSaslMechanism, error_for_code
from ..protocol.messages_connection import SASL_AUTHENTICATE, SASL_HANDSHAKE
from .security.settings import SecuritySettings

log = logging.getLogger(__name__)


class SaslChannel(Protocol):
    """What the SASL exchange needs of a broker connection (``connection.BrokerConnection``
    is one): where it goes, its security settings and negotiated versions, and a request."""

    host: str
    port: int
    security: SecuritySettings | None
    api_versions: dict

    def version_for(self, message) -> int: ...

    def request(self, message, body: dict, *, version: int | None = None) -> dict: ...


def tls_handshake(
    sock: socket.socket, host: str, port: int, settings, connect_timeout: float
) -> ssl.SSLSocket:
    """``sock`` wrapped in TLS by ``settings`` (a ``SecuritySettings``), handshake done;
    ``sock`` is closed when that fails."""
    from .security.tls import ssl_context

    where = f"broker {host}:{port}"
    protocol = settings.protocol
    try:
        context = ssl_context(settings)
    except BaseException:
        sock.close()
        raise
    try:
        tls = context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
        tls.settimeout(connect_timeout)
        tls.do_handshake()
        return tls
    except TimeoutError:
        sock.close()
        raise SecurityProtocolMismatchError(
            f"TLS handshake with {where} did not complete within {connect_timeout:.1f}s:"
            f" is its listener PLAINTEXT or SASL_PLAINTEXT? kafka.security.protocol is "
            f"{protocol}"
        ) from None
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        reason = exc.verify_message or exc.reason or str(exc)
        hint = (
            "set kafka.ssl.truststore.location/.certificates to the CA that signed the "
            "broker certificate"
        )
        if "hostname" in str(reason).lower() or "ip address mismatch" in str(reason).lower():
            hint = (
                "connect with a host name the certificate names, or (not recommended) "
                "set kafka.ssl.endpoint.identification.algorithm to an empty string"
            )
        raise TlsError(
            f"TLS handshake with {where} failed: certificate verification: {reason}; {hint}"
        ) from None
    except ssl.SSLEOFError as exc:
        # Apache Kafka reads a ClientHello on a plain listener as a 369 MB request size and
        # closes the connection without a word
        sock.close()
        raise SecurityProtocolMismatchError(
            f"TLS handshake with {where} failed: the broker closed the connection during "
            f"the handshake ({exc.reason or exc.__class__.__name__}): is its listener "
            f"PLAINTEXT or SASL_PLAINTEXT? kafka.security.protocol is {protocol}"
        ) from None
    except ssl.SSLError as exc:
        sock.close()
        reason = exc.reason or str(exc)
        if reason in (
            "WRONG_VERSION_NUMBER",
            "UNKNOWN_PROTOCOL",
            "RECORD_LAYER_FAILURE",
            "PACKET_LENGTH_TOO_LONG",
            "HTTP_REQUEST",
        ):
            raise SecurityProtocolMismatchError(
                f"{where} does not speak TLS ({reason}): is its listener PLAINTEXT or "
                f"SASL_PLAINTEXT? kafka.security.protocol is {protocol}"
            ) from None
        raise TlsError(f"TLS handshake with {where} failed: {reason}") from None
    except OSError as exc:
        sock.close()
        raise TlsError(
            f"TLS handshake with {where} failed: the broker closed the connection "
            f"({exc.__class__.__name__}); does the listener use TLS (kafka.security.protocol "
            f"is {protocol}) and does it require a client certificate "
            "(kafka.ssl.keystore.*)?"
        ) from None


def explain_first_failure(exc, host: str, port: int):
    """The first exchange on a new connection failed: say why in security terms."""
    cause = exc.__cause__
    where = f"broker {host}:{port}"
    if isinstance(cause, ssl.SSLError):
        reason = cause.reason or str(cause)
        hint = ""
        if (
            "CERTIFICATE_REQUIRED" in str(reason).upper()
            or "HANDSHAKE_FAILURE" in str(reason).upper()
        ):
            hint = ": the broker requires a client certificate (kafka.ssl.keystore.*)"
        return TlsError(f"TLS with {where} failed: {reason}{hint}")
    return exc


def sasl_authenticate(conn: SaslChannel) -> int:
    """SaslHandshake v1 + SaslAuthenticate (KIP-152) with the configured mechanism, over
    ``conn`` (versions negotiated); the session lifetime the broker gives, in ms (0: none)."""
    from .security.sasl import ScramMechanism, make_mechanism

    settings = conn.security
    assert settings is not None  # only SASL_* connections authenticate
    mechanism = settings.mechanism
    who = (
        f"SASL {mechanism} authentication of {settings.principal!r} with broker "
        f"{conn.host}:{conn.port}"
    )
    if SASL_HANDSHAKE.api_key not in conn.api_versions:
        raise SecurityProtocolMismatchError(
            f"broker {conn.host}:{conn.port} offers no SASL (no SaslHandshake in its "
            f"ApiVersions): its listener is not SASL_*; kafka.security.protocol is "
            f"{settings.protocol}"
        )
    if conn.version_for(SASL_HANDSHAKE) < 1:
        raise UnsupportedVersionError(
            f"broker {conn.host}:{conn.port} only speaks SaslHandshake v0 (raw SASL tokens, "
            "before Kafka 1.0), which kafka_ds does not speak"
        )
    handshake = conn.request(SASL_HANDSHAKE, {"mechanism": mechanism}, version=1)
    code = handshake["error_code"]
    if code == UnsupportedSaslMechanism.code and mechanism in handshake["mechanisms"]:
        # Refusing a mechanism it lists: no SASL on this listener (Tansu without
        # --authentication answers so).
        raise SecurityProtocolMismatchError(
            f"{who} failed: the broker refused {mechanism} although it lists it: its "
            f"listener does not use SASL; kafka.security.protocol is {settings.protocol}"
        )
    if code == UnsupportedSaslMechanism.code:
        offered = ", ".join(handshake["mechanisms"]) or "none"
        raise AuthenticationError(
            f"{who} failed: the broker does not enable {mechanism} (it offers {offered});"
            " set kafka.sasl.mechanism to one of those"
        )
    if code:
        raise AuthenticationError(
            f"{who} failed: the broker refused SaslHandshake with "
            f"{error_for_code(code).name}: does its listener use SASL? "
            f"kafka.security.protocol is {settings.protocol}"
        )
    try:
        exchange = make_mechanism(settings)
    except AuthenticationError as exc:
        raise AuthenticationError(f"{who} failed: {exc}") from None
    version = conn.version_for(SASL_AUTHENTICATE)
    message = exchange.first()
    while True:
        response = conn.request(SASL_AUTHENTICATE, {"auth_bytes": message}, version=version)
        if response["error_code"]:
            detail = response.get("error_message") or f"error {response['error_code']}"
            server_error = getattr(exchange, "server_error", None)
            if server_error:
                detail = f"{detail} (token status {server_error})"
            raise AuthenticationError(f"{who} failed: {detail}")
        lifetime_ms = response.get("session_lifetime_ms") or 0
        challenge = bytes(response["auth_bytes"])
        if not challenge and not isinstance(exchange, ScramMechanism):
            break
        try:
            message = exchange.step(challenge)
        except AuthenticationError as exc:
            raise AuthenticationError(f"{who} failed: {exc}") from None
        if message is None:
            break
    log.debug("%s succeeded (session lifetime %d ms)", who, lifetime_ms)
    return lifetime_ms


def tls_answer_error(size_bytes, host: str, port: int, settings):
    """The error for a TLS record (alert or handshake) read where a Kafka frame's size was
    expected, None if ``size_bytes`` does not start one."""
    if size_bytes[0] in (0x15, 0x16) and size_bytes[1] == 0x03:
        protocol = settings.protocol if settings else "PLAINTEXT"
        return SecurityProtocolMismatchError(
            f"broker {host}:{port} answered with TLS: its listener is SSL "
            f"or SASL_SSL, but kafka.security.protocol is {protocol}"
        )
    return None


def early_close_hint(settings, sent_number: int) -> str:
    """A connection closed by the broker at its very start is typically a TLS or SASL
    listener talked to in plain text, or a broker that just went down (the warning of a
    retry during a failover): say which option to check, and when."""
    if sent_number > 2 or (settings is not None and settings.uses_sasl):
        return ""
    protocol = settings.protocol if settings else "PLAINTEXT"
    return (
        "; if the broker is up and this repeats, its listener may require TLS or SASL: "
        f"set kafka.security.protocol (it is {protocol})"
    )
