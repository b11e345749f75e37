"""One TCP connection to one broker: framing, correlation ids, pipelining,
timeouts and ApiVersions negotiation. All socket I/O of kafka_ds lives in
this package.
"""
from __future__ import annotations

import logging
import socket
import ssl
import time
from collections import deque
from dataclasses import dataclass

from ..protocol import messages as m
from ..protocol import primitives as p
from ..protocol.errors import (
    AuthenticationError,
    ConfigurationError,
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
    SecurityProtocolMismatchError,
    TlsError,
    UnsupportedSaslMechanism,
    error_for_code,
    UnsupportedVersion,
    UnsupportedVersionError,
)
from ..protocol.schema import Message, decode_response, encode_request
from .config import DEFAULT_CLIENT_CONFIG

log = logging.getLogger(__name__)

# Larger frames than this are not Kafka responses we asked for: treat as corruption.
MAX_RESPONSE_SIZE = 1 << 30


@dataclass
class Pending:
    """A request on the wire whose response has not been read yet."""

    correlation_id: int
    message: Message
    version: int
    expects_response: bool = True
    sent_number: int = 0   # order of sending on this connection


def parse_bootstrap(servers) -> list[tuple[str, int]]:
    """``"host:port,host2:port2"`` (or a list of them) -> ``[(host, port), ...]``.

    The one parser of ``kafka.bootstrap.servers``: the option check on the driver and the
    client on the executors both use it. IPv6 addresses go in brackets, ``[::1]:9092``.
    """
    example = ('e.g. .option("kafka.bootstrap.servers", "host1:9092,host2:9092") '
               '(IPv6: "[::1]:9092")')
    if isinstance(servers, str):
        servers = servers.split(",")
    servers = [s for s in (str(part).strip() for part in servers) if s]
    if not servers:
        raise ConfigurationError(f"Option 'kafka.bootstrap.servers' must be set, {example}")
    result = []
    for server in servers:
        host, sep, port = server.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif "[" in host or "]" in host:
            host = ""
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(
                f"Option 'kafka.bootstrap.servers': {server!r} is not host:port with a port "
                f"from 1 to 65535; {example}")
        result.append((host, int(port)))
    return result


class BrokerConnection:
    """A blocking connection to one broker. Not thread-safe: one user at a time."""

    def __init__(self, host: str, port: int, *, node_id: int = -1,
                 client_id: str = DEFAULT_CLIENT_CONFIG.client_id,
                 request_timeout_ms: int = DEFAULT_CLIENT_CONFIG.request_timeout_ms,
                 connect_timeout_ms: int = DEFAULT_CLIENT_CONFIG.connect_timeout_ms,
                 security=None):
        self.host = host
        # kafka_ds.client.security.SecuritySettings, or None for PLAINTEXT
        self.security = security if security is not None and security.protocol != "PLAINTEXT" \
            else None
        self._reauth_at: float | None = None
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self.connect_timeout = connect_timeout_ms / 1000.0
        self._sock: socket.socket | None = None
        self._next_correlation_id = 1
        self._in_flight: deque[Pending] = deque()
        # Requests sent expecting no answer (Produce acks=0), oldest first. Kafka does not
        # answer them, but some brokers do (the librdkafka mock, Tansu): such answers are
        # skipped, and ones older than an answered request can no longer come.
        self._unanswered: deque[Pending] = deque()
        self._sent = 0
        self._size_buf = bytearray(4)
        self.api_versions: dict[int, tuple[int, int]] = {}

    def __repr__(self):
        return f"BrokerConnection(node={self.node_id}, {self.host}:{self.port})"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def in_flight(self) -> int:
        """Requests sent whose responses have not been read yet."""
        return len(self._in_flight)

    # --- lifecycle -----------------------------------------------------------

    def connect(self) -> "BrokerConnection":
        if self._sock is not None:
            return self
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        if self.security is not None and self.security.uses_tls:
            sock = self._tls_handshake(sock)
        sock.settimeout(self.request_timeout)
        self._sock = sock
        self._in_flight.clear()
        self._unanswered.clear()
        self._reauth_at = None
        try:
            try:
                self._negotiate_versions()
            except KafkaConnectionError as exc:
                raise self._explain_first_failure(exc) from None
            if self.security is not None and self.security.uses_sasl:
                self._authenticate()
        except BaseException:
            self.close()
            raise
        return self

    # --- TLS and SASL ----------------------------------------------------------

    def _tls_handshake(self, sock):
        from .security import ssl_context
        where = f"broker {self.host}:{self.port}"
        protocol = self.security.protocol
        try:
            context = ssl_context(self.security)
        except BaseException:
            sock.close()
            raise
        try:
            tls = context.wrap_socket(sock, server_hostname=self.host,
                                      do_handshake_on_connect=False)
            tls.settimeout(self.connect_timeout)
            tls.do_handshake()
            return tls
        except socket.timeout:
            sock.close()
            raise SecurityProtocolMismatchError(
                f"TLS handshake with {where} did not complete within {self.connect_timeout:.1f}s:"
                f" is its listener PLAINTEXT or SASL_PLAINTEXT? kafka.security.protocol is "
                f"{protocol}") from None
        except ssl.SSLCertVerificationError as exc:
            sock.close()
            reason = exc.verify_message or exc.reason or str(exc)
            hint = ("set kafka.ssl.truststore.location/.certificates to the CA that signed the "
                    "broker certificate")
            if "hostname" in str(reason).lower() or "ip address mismatch" in str(reason).lower():
                hint = ("connect with a host name the certificate names, or (not recommended) "
                        "set kafka.ssl.endpoint.identification.algorithm to an empty string")
            raise TlsError(f"TLS handshake with {where} failed: certificate verification: "
                           f"{reason}; {hint}") from None
        except ssl.SSLError as exc:
            sock.close()
            reason = exc.reason or str(exc)
            if reason in ("WRONG_VERSION_NUMBER", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE",
                          "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"):
                raise SecurityProtocolMismatchError(
                    f"{where} does not speak TLS ({reason}): is its listener PLAINTEXT or "
                    f"SASL_PLAINTEXT? kafka.security.protocol is {protocol}") from None
            raise TlsError(f"TLS handshake with {where} failed: {reason}") from None
        except OSError as exc:
            sock.close()
            raise TlsError(
                f"TLS handshake with {where} failed: the broker closed the connection "
                f"({exc.__class__.__name__}); does the listener use TLS (kafka.security.protocol "
                f"is {protocol}) and does it require a client certificate "
                "(kafka.ssl.keystore.*)?") from None

    def _explain_first_failure(self, exc):
        """The first exchange on a new connection failed: say why in security terms."""
        cause = exc.__cause__
        where = f"broker {self.host}:{self.port}"
        if isinstance(cause, ssl.SSLError):
            reason = cause.reason or str(cause)
            hint = ""
            if "CERTIFICATE_REQUIRED" in str(reason).upper() or "HANDSHAKE_FAILURE" in str(reason).upper():
                hint = ": the broker requires a client certificate (kafka.ssl.keystore.*)"
            return TlsError(f"TLS with {where} failed: {reason}{hint}")
        return exc

    def _authenticate(self) -> None:
        """SaslHandshake v1 + SaslAuthenticate (KIP-152) with the configured mechanism."""
        from .security import ScramMechanism, make_mechanism
        settings = self.security
        mechanism = settings.mechanism
        who = (f"SASL {mechanism} authentication of {settings.principal!r} with broker "
               f"{self.host}:{self.port}")
        if m.SASL_HANDSHAKE.api_key not in self.api_versions:
            raise SecurityProtocolMismatchError(
                f"broker {self.host}:{self.port} offers no SASL (no SaslHandshake in its "
                f"ApiVersions): its listener is not SASL_*; kafka.security.protocol is "
                f"{settings.protocol}")
        if self.version_for(m.SASL_HANDSHAKE) < 1:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} only speaks SaslHandshake v0 (raw SASL tokens, "
                "before Kafka 1.0), which kafka_ds does not speak")
        handshake = self.request(m.SASL_HANDSHAKE, {"mechanism": mechanism}, version=1)
        code = handshake["error_code"]
        if code == UnsupportedSaslMechanism.code and mechanism in handshake["mechanisms"]:
            # Refusing a mechanism it lists: no SASL on this listener (Tansu without
            # --authentication answers so).
            raise SecurityProtocolMismatchError(
                f"{who} failed: the broker refused {mechanism} although it lists it: its "
                f"listener does not use SASL; kafka.security.protocol is {settings.protocol}")
        if code == UnsupportedSaslMechanism.code:
            offered = ", ".join(handshake["mechanisms"]) or "none"
            raise AuthenticationError(
                f"{who} failed: the broker does not enable {mechanism} (it offers {offered});"
                " set kafka.sasl.mechanism to one of those")
        if code:
            raise AuthenticationError(
                f"{who} failed: the broker refused SaslHandshake with "
                f"{error_for_code(code).name}: does its listener use SASL? "
                f"kafka.security.protocol is {settings.protocol}")
        try:
            exchange = make_mechanism(settings)
        except AuthenticationError as exc:
            raise AuthenticationError(f"{who} failed: {exc}") from None
        version = self.version_for(m.SASL_AUTHENTICATE)
        message = exchange.first()
        while True:
            response = self.request(m.SASL_AUTHENTICATE, {"auth_bytes": message},
                                    version=version)
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
        if lifetime_ms > 0:
            # KIP-368: authenticate again on this connection before the session ends
            # (at 85% of its lifetime, like the Java client's earliest point).
            self._reauth_at = time.monotonic() + lifetime_ms * 0.85 / 1000.0
        log.debug("%s succeeded (session lifetime %d ms)", who, lifetime_ms)

    def _maybe_reauthenticate(self) -> None:
        if self._reauth_at is not None and time.monotonic() >= self._reauth_at \
                and not self._in_flight and not self._unanswered:
            self._reauth_at = None
            try:
                self._authenticate()
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._in_flight.clear()
        self._unanswered.clear()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def __enter__(self):
        return self.connect()

    def __exit__(self, *exc):
        self.close()

    # --- version negotiation -------------------------------------------------

    def _negotiate_versions(self) -> None:
        api = m.API_VERSIONS
        version = api.versions().high
        pending = self._send(api, version, {
            "client_software_name": "kafka-ds", "client_software_version": "0.1.0"})
        frame = self._receive_frame(pending)
        error_code = p.read_int16(frame, 4)[0] if len(frame) >= 6 else 0
        if error_code == UnsupportedVersion.code:
            # The broker does not speak our ApiVersions version. Some brokers send
            # a body that does not parse at that version: read nothing more, retry v0.
            version = 0
            pending = self._send(api, version, {})
            frame = self._receive_frame(pending)
        body = self._decode(pending, frame)
        if body["error_code"]:
            raise UnsupportedVersionError(
                f"ApiVersions to {self.host}:{self.port} failed with error {body['error_code']}")
        self.api_versions = {
            entry["api_key"]: (entry["min_version"], entry["max_version"])
            for entry in body["api_keys"]}

    def version_for(self, message: Message, max_version: int | None = None) -> int:
        """Highest version both sides speak (optionally capped)."""
        ours = message.versions()
        theirs = self.api_versions.get(message.api_key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} does not support {message.name}")
        high = min(ours.high, theirs[1])
        if max_version is not None:
            high = min(high, max_version)
        if high < max(ours.low, theirs[0]):
            raise UnsupportedVersionError(
                f"{message.name}: broker {self.host}:{self.port} speaks v{theirs[0]}-{theirs[1]},"
                f" kafka_ds speaks {message.valid_versions}")
        return high

    # --- requests --------------------------------------------------------------

    def send(self, message: Message, body: dict, *, version: int | None = None,
             expects_response: bool = True) -> Pending:
        """Write one request; read its response later with ``receive`` (pipelining)."""
        if self._sock is None:
            self.connect()
        elif self._reauth_at is not None:
            self._maybe_reauthenticate()
        if version is None:
            version = self.version_for(message)
        return self._send(message, version, body, expects_response)

    def receive(self, pending: Pending) -> dict | None:
        """Read responses in order until ``pending``'s arrives; decode it."""
        if not pending.expects_response:
            return None
        frame = self._receive_frame(pending)
        return self._decode(pending, frame)

    def is_waiting(self, pending: Pending) -> bool:
        """Whether ``pending``'s response can still be read here (False once the connection
        was closed, or closed and reopened, since it was sent)."""
        return any(item is pending for item in self._in_flight)

    def request(self, message: Message, body: dict, *, version: int | None = None) -> dict:
        return self.receive(self.send(message, body, version=version))

    def _decode(self, pending: Pending, frame) -> dict:
        try:
            return decode_response(pending.message, pending.version, frame)
        except KafkaProtocolError as exc:
            self.close()
            raise KafkaProtocolError(
                f"malformed {pending.message.name} v{pending.version} response from "
                f"{self.host}:{self.port}: {exc}") from None

    def _send(self, message, version, body, expects_response=True) -> Pending:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(message, version, correlation_id, self.client_id, body)
        try:
            self._sock.sendall(frame)
        except socket.timeout:
            self.close()
            raise KafkaTimeoutError(
                f"timed out sending {message.name} to {self.host}:{self.port}") from None
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(
                f"connection to {self.host}:{self.port} lost while sending {message.name}: {exc}"
            ) from exc
        self._sent += 1
        pending = Pending(correlation_id, message, version, expects_response, self._sent)
        (self._in_flight if expects_response else self._unanswered).append(pending)
        return pending

    def _receive_frame(self, pending: Pending) -> memoryview:
        if pending not in self._in_flight:
            raise KafkaProtocolError(f"response for correlation id {pending.correlation_id} "
                                     "was already read or never requested")
        while True:
            head = self._in_flight[0]
            size = p.INT32.unpack(self._read_exact_into(self._size_buf, 4, head))[0]
            if size < 4 or size > MAX_RESPONSE_SIZE:
                self.close()
                if self._size_buf[0] in (0x15, 0x16) and self._size_buf[1] == 0x03:
                    # A TLS record (alert or handshake) where a Kafka frame was expected.
                    protocol = self.security.protocol if self.security else "PLAINTEXT"
                    raise SecurityProtocolMismatchError(
                        f"broker {self.host}:{self.port} answered with TLS: its listener is SSL "
                        f"or SASL_SSL, but kafka.security.protocol is {protocol}")
                raise KafkaProtocolError(
                    f"absurd response size {size} from {self.host}:{self.port}")
            frame = bytearray(size)
            self._read_exact_into(frame, size, head)
            correlation_id = p.INT32.unpack_from(frame, 0)[0]
            if self._is_unasked_answer(correlation_id, head):
                continue
            if correlation_id != head.correlation_id:
                self.close()
                raise KafkaProtocolError(
                    f"response correlation id {correlation_id} from {self.host}:{self.port} "
                    f"does not match request {head.correlation_id} ({head.message.name})")
            self._in_flight.popleft()
            if head is pending:
                return memoryview(frame)
            # An earlier pipelined response nobody waits for any more: drop it.
            log.debug("dropping unread %s response", head.message.name)

    def _is_unasked_answer(self, correlation_id: int, head: Pending) -> bool:
        """Whether the frame answers a request sent expecting no answer (dropping the
        record of those sent before it, which can no longer be answered)."""
        while self._unanswered and self._unanswered[0].sent_number < head.sent_number:
            if self._unanswered.popleft().correlation_id == correlation_id:
                return True
        return False

    def _read_exact_into(self, buf: bytearray, size: int, head: Pending) -> bytearray:
        view = memoryview(buf)
        got = 0
        deadline = time.monotonic() + self.request_timeout
        sock = self._sock
        if sock is None:
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} is closed")
        while got < size:
            try:
                n = sock.recv_into(view[got:size])
            except socket.timeout:
                self.close()
                raise KafkaTimeoutError(
                    f"no {head.message.name} response from {self.host}:{self.port} within "
                    f"{self.request_timeout:.1f}s") from None
            except OSError as exc:
                self.close()
                raise KafkaConnectionError(
                    f"connection to {self.host}:{self.port} lost while reading "
                    f"{head.message.name} response: {exc}{self._early_close_hint(head)}"
                ) from exc
            if n == 0:
                self.close()
                hint = self._early_close_hint(head)
                raise KafkaConnectionError(
                    f"connection to {self.host}:{self.port} closed by the broker while reading "
                    f"{head.message.name} response ({got} of {size} bytes){hint}")
            got += n
            if time.monotonic() > deadline:
                self.close()
                raise KafkaTimeoutError(
                    f"{head.message.name} response from {self.host}:{self.port} took longer "
                    f"than {self.request_timeout:.1f}s")
        return buf

    def _early_close_hint(self, head: Pending) -> str:
        """A connection closed by the broker at its very start is typically a TLS or SASL
        listener talked to in plain text: say which option to check."""
        if head.sent_number > 2 or (self.security is not None and self.security.uses_sasl):
            return ""
        protocol = self.security.protocol if self.security else "PLAINTEXT"
        return ("; if its listener requires TLS or SASL, set kafka.security.protocol "
                f"(it is {protocol})")
