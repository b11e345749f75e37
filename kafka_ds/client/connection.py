"""One TCP connection to one broker: correlation ids, pipelining and ApiVersions
negotiation (its frames on the socket, with their timeouts: ``frames``; its TLS handshake
and SASL exchange: ``broker_security``). All socket I/O of kafka_ds lives in this package.
"""

from __future__ import annotations

import logging
import select
import socket
import time
from collections import deque
from dataclasses import dataclass

from ..errors import (
    ConfigurationError,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    UnsupportedVersionError,
)
from ..protocol import primitives as p
from ..protocol.errors import UnsupportedVersion
from ..protocol.messages_connection import API_VERSIONS
from ..protocol.schema import Message, decode_response, encode_request
from .broker_security import explain_first_failure, sasl_authenticate, tls_handshake
from .config import DEFAULT_CLIENT_CONFIG
from .frames import read_frame, write_frame

log = logging.getLogger(__name__)


@dataclass
class Pending:
    """A request on the wire whose response has not been read yet."""

    correlation_id: int
    message: Message
    version: int
    expects_response: bool = True
    sent_number: int = 0  # order of sending on this connection


class InFlightRequests:
    """The bookkeeping of pipelining on one connection: the requests sent whose answers
    may still come, oldest first, and which answer belongs to which (no I/O)."""

    def __init__(self):
        self._sent = 0
        self.awaiting: deque[Pending] = deque()
        # Requests sent expecting no answer (Produce acks=0), oldest first. Kafka does not
        # answer them, but some brokers do (the librdkafka mock, Tansu): such answers are
        # skipped, and ones older than an answered request can no longer come.
        self.unanswered: deque[Pending] = deque()

    def add(
        self, correlation_id: int, message: Message, version: int, expects_response: bool
    ) -> Pending:
        """Record a request written to the socket."""
        self._sent += 1
        pending = Pending(correlation_id, message, version, expects_response, self._sent)
        (self.awaiting if expects_response else self.unanswered).append(pending)
        return pending

    def clear(self) -> None:
        self.awaiting.clear()
        self.unanswered.clear()

    @property
    def idle(self) -> bool:
        """No request on the wire whose answer may still come."""
        return not self.awaiting and not self.unanswered

    def is_unasked_answer(self, correlation_id: int, head: Pending) -> bool:
        """Whether the frame answers a request sent expecting no answer (dropping the
        record of those sent before it, which can no longer be answered)."""
        while self.unanswered and self.unanswered[0].sent_number < head.sent_number:
            if self.unanswered.popleft().correlation_id == correlation_id:
                return True
        return False


def parse_bootstrap(servers) -> list[tuple[str, int]]:
    """``"host:port,host2:port2"`` (or a list of them) -> ``[(host, port), ...]``.

    The one parser of ``kafka.bootstrap.servers``: the option check on the driver and the
    client on the executors both use it. IPv6 addresses go in brackets, ``[::1]:9092``.
    """
    example = (
        'e.g. .option("kafka.bootstrap.servers", "host1:9092,host2:9092") (IPv6: "[::1]:9092")'
    )
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
                f"from 1 to 65535; {example}"
            )
        result.append((host, int(port)))
    return result


class BrokerConnection:
    """A blocking connection to one broker. Not thread-safe: one user at a time."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = DEFAULT_CLIENT_CONFIG.client_id,
        request_timeout_ms: int = DEFAULT_CLIENT_CONFIG.request_timeout_ms,
        connect_timeout_ms: int = DEFAULT_CLIENT_CONFIG.connect_timeout_ms,
        security=None,
    ):
        self.host = host
        # kafka_ds.client.security.SecuritySettings, or None for PLAINTEXT
        self.security = (
            security if security is not None and security.protocol != "PLAINTEXT" else None
        )
        self._reauth_at: float | None = None
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout_ms / 1000.0
        self.connect_timeout = connect_timeout_ms / 1000.0
        self._sock: socket.socket | None = None
        self._next_correlation_id = 1
        self._requests = InFlightRequests()
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
        return len(self._requests.awaiting)

    def reusable(self) -> bool:
        """Connected, nothing in flight, and nothing to read: an idle socket that is readable
        holds the broker's close (or stray bytes); either way it is not to be used again."""
        sock = self._sock
        if sock is None or self.in_flight:
            return False
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    # --- lifecycle -----------------------------------------------------------

    def connect(self) -> BrokerConnection:
        if self._sock is not None:
            return self
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        if self.security is not None and self.security.uses_tls:
            sock = tls_handshake(sock, self.host, self.port, self.security, self.connect_timeout)
        sock.settimeout(self.request_timeout)
        self._sock = sock
        self._requests.clear()
        self._reauth_at = None
        try:
            try:
                self._negotiate_versions()
            except KafkaConnectionError as exc:
                raise explain_first_failure(exc, self.host, self.port) from None
            if self.security is not None and self.security.uses_sasl:
                self._authenticate()
        except BaseException:
            self.close()
            raise
        return self

    # --- SASL (kafka_ds.client.broker_security) ----------------------------------

    def _authenticate(self) -> None:
        lifetime_ms = sasl_authenticate(self)
        if lifetime_ms > 0:
            # KIP-368: authenticate again on this connection before the session ends
            # (at 85% of its lifetime, like the Java client's earliest point).
            self._reauth_at = time.monotonic() + lifetime_ms * 0.85 / 1000.0

    def _maybe_reauthenticate(self) -> None:
        if (
            self._reauth_at is not None
            and time.monotonic() >= self._reauth_at
            and self._requests.idle
        ):
            self._reauth_at = None
            try:
                self._authenticate()
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._requests.clear()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def interrupt(self) -> None:
        """Wake a thread blocked on this connection's socket: its send or receive fails at
        once (and closes the connection). Safe from another thread, unlike ``close``,
        whose file descriptor could be reused under the blocked call."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self):
        return self.connect()

    def __exit__(self, *exc):
        self.close()

    # --- version negotiation -------------------------------------------------

    def _negotiate_versions(self) -> None:
        api = API_VERSIONS
        version = api.versions().high
        pending = self._send(
            api, version, {"client_software_name": "kafka-ds", "client_software_version": "0.1.0"}
        )
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
                f"ApiVersions to {self.host}:{self.port} failed with error {body['error_code']}"
            )
        self.api_versions = {
            entry["api_key"]: (entry["min_version"], entry["max_version"])
            for entry in body["api_keys"]
        }

    def version_for(self, message: Message, max_version: int | None = None) -> int:
        """Highest version both sides speak (optionally capped)."""
        ours = message.versions()
        theirs = self.api_versions.get(message.api_key)
        if theirs is None:
            raise UnsupportedVersionError(
                f"broker {self.host}:{self.port} does not support {message.name}"
            )
        high = min(ours.high, theirs[1])
        if max_version is not None:
            high = min(high, max_version)
        if high < max(ours.low, theirs[0]):
            raise UnsupportedVersionError(
                f"{message.name}: broker {self.host}:{self.port} speaks v{theirs[0]}-{theirs[1]},"
                f" kafka_ds speaks {message.valid_versions}"
            )
        return high

    # --- requests --------------------------------------------------------------

    def send(
        self,
        message: Message,
        body: dict,
        *,
        version: int | None = None,
        expects_response: bool = True,
    ) -> Pending:
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
        return any(item is pending for item in self._requests.awaiting)

    def request(self, message: Message, body: dict, *, version: int | None = None) -> dict:
        response = self.receive(self.send(message, body, version=version))
        assert response is not None  # sent expecting a response
        return response

    def _decode(self, pending: Pending, frame) -> dict:
        try:
            return decode_response(pending.message, pending.version, frame)
        except KafkaProtocolError as exc:
            self.close()
            raise KafkaProtocolError(
                f"malformed {pending.message.name} v{pending.version} response from "
                f"{self.host}:{self.port}: {exc}"
            ) from None

    def _send(self, message, version, body, expects_response=True) -> Pending:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(message, version, correlation_id, self.client_id, body)
        try:
            write_frame(self, self._sock, frame, message.name)
        except KafkaError:
            self.close()
            raise
        return self._requests.add(correlation_id, message, version, expects_response)

    def _receive_frame(self, pending: Pending) -> memoryview:
        awaiting = self._requests.awaiting
        if pending not in awaiting:
            raise KafkaProtocolError(
                f"response for correlation id {pending.correlation_id} "
                "was already read or never requested"
            )
        while True:
            head = awaiting[0]
            try:
                frame = read_frame(
                    self, self._sock, self._size_buf, head.message.name, head.sent_number
                )
            except KafkaError:
                self.close()  # the stream is lost: a timeout, a drop, or not Kafka's answer
                raise
            correlation_id = p.INT32.unpack_from(frame, 0)[0]
            if self._requests.is_unasked_answer(correlation_id, head):
                continue
            if correlation_id != head.correlation_id:
                self.close()
                raise KafkaProtocolError(
                    f"response correlation id {correlation_id} from {self.host}:{self.port} "
                    f"does not match request {head.correlation_id} ({head.message.name})"
                )
            awaiting.popleft()
            if head is pending:
                return memoryview(frame)
            # An earlier pipelined response nobody waits for any more: drop it.
            log.debug("dropping unread %s response", head.message.name)
