"""Kafka frames on one broker's socket: a request written whole; an answer read whole, its
4-byte size first, within the request timeout. Every failure is worded with the broker's
address and the request's name, with a hint when the listener speaks another security
protocol than configured (``broker_security``); ``connection.BrokerConnection`` closes the
connection on any of them.
"""

from __future__ import annotations

import socket
import time
from typing import Protocol

from ..errors import KafkaConnectionError, KafkaProtocolError, KafkaTimeoutError
from ..protocol import primitives as p
from .broker_security import early_close_hint, tls_answer_error
from .security.settings import SecuritySettings

# Larger frames than this are not Kafka responses we asked for: treat as corruption.
MAX_RESPONSE_SIZE = 1 << 30


class Peer(Protocol):
    """What the frames need of a broker connection (``connection.BrokerConnection`` is
    one): the broker's address and security settings, for the errors, and the timeout."""

    host: str
    port: int
    security: SecuritySettings | None
    request_timeout: float


def write_frame(peer: Peer, sock: socket.socket | None, frame, name: str) -> None:
    """Send one request frame (``name``: the request's, for the errors)."""
    if sock is None:
        raise KafkaConnectionError(f"connection to {peer.host}:{peer.port} is closed")
    try:
        sock.sendall(frame)
    except TimeoutError:
        raise KafkaTimeoutError(f"timed out sending {name} to {peer.host}:{peer.port}") from None
    except OSError as exc:
        raise KafkaConnectionError(
            f"connection to {peer.host}:{peer.port} lost while sending {name}: {exc}"
        ) from exc


def read_frame(
    peer: Peer, sock: socket.socket | None, size_buf: bytearray, name: str, sent_number: int
) -> bytearray:
    """The next answer frame (correlation id first) on ``sock``, for the request ``name``
    that was the ``sent_number``-th sent on it; ``size_buf``: 4 bytes to read the size into."""
    size = p.INT32.unpack(_read_exact_into(peer, sock, size_buf, 4, name, sent_number))[0]
    security = peer.security
    if sent_number <= 2 and not (security and security.uses_tls):
        # A TLS listener answers plain text with an alert record (15 03 03 ..):
        # read as a size that is 352 MB, under MAX_RESPONSE_SIZE (Apache Kafka).
        mismatch = tls_answer_error(size_buf, peer.host, peer.port, security)
        if mismatch is not None:
            raise mismatch
    if size < 4 or size > MAX_RESPONSE_SIZE:
        mismatch = tls_answer_error(size_buf, peer.host, peer.port, security)
        if mismatch is not None:
            raise mismatch
        raise KafkaProtocolError(f"absurd response size {size} from {peer.host}:{peer.port}")
    frame = bytearray(size)
    return _read_exact_into(peer, sock, frame, size, name, sent_number)


def _read_exact_into(peer: Peer, sock, buf: bytearray, size: int, name: str, sent_number: int):
    view = memoryview(buf)
    got = 0
    deadline = time.monotonic() + peer.request_timeout
    if sock is None:
        raise KafkaConnectionError(f"connection to {peer.host}:{peer.port} is closed")
    while got < size:
        try:
            n = sock.recv_into(view[got:size])
        except TimeoutError:
            raise KafkaTimeoutError(
                f"no {name} response from {peer.host}:{peer.port} within "
                f"{peer.request_timeout:.1f}s"
            ) from None
        except OSError as exc:
            hint = early_close_hint(peer.security, sent_number)
            raise KafkaConnectionError(
                f"connection to {peer.host}:{peer.port} lost while reading "
                f"{name} response: {exc}{hint}"
            ) from exc
        if n == 0:
            hint = early_close_hint(peer.security, sent_number)
            raise KafkaConnectionError(
                f"connection to {peer.host}:{peer.port} closed by the broker while reading "
                f"{name} response ({got} of {size} bytes){hint}"
            )
        got += n
        if time.monotonic() > deadline:
            raise KafkaTimeoutError(
                f"{name} response from {peer.host}:{peer.port} took longer "
                f"than {peer.request_timeout:.1f}s"
            )
    return buf
