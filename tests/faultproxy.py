"""A fault-injecting TCP proxy between a Kafka client and a real cluster.

One listener per broker on 127.0.0.1; every byte goes to the real broker and back.
Metadata responses are rewritten so brokers are advertised at their proxy addresses
(a client bootstrapped through the proxy stays on it). Requests are followed by
correlation id, so the proxy knows which response answers a Produce.

``drop_produce_replies(count, skip=0)``: let ``skip`` Produce responses through, then
for the next ``count`` Produce requests forward the request, wait until the broker
answered (so the broker has appended the records), discard the answer and close both
sockets -- the client sees its connection lost with the outcome unknown.

``inject(api_key, kind, count=1, seconds=0.0)``: the next ``count`` responses to
requests of ``api_key`` (the request always reaches the broker) are damaged:

* ``"drop"``     -- nothing of the response is sent; both sockets are closed.
* ``"truncate"`` -- only the first half of the response frame is sent, then closed
  (a drop in the middle of a response).
* ``"stall"``    -- the response is held for ``seconds`` before it goes (a slow
  broker; longer than the client's request timeout, a timeout).
* ``"reset"``    -- the connection is reset (TCP RST, SO_LINGER 0) instead of the answer.

``counters``: requests seen per API key (``by_api``), for the idle-cost benchmark.
"""
from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from collections import Counter, deque

from kafka_ds.client import KafkaClient
from kafka_ds.protocol import messages as m
from kafka_ds.protocol.schema import decode_response, encode_response

PRODUCE, METADATA = 0, 3


def _read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(sock):
    head = _read_exact(sock, 4)
    if head is None:
        return None
    body = _read_exact(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


class _Listener:
    def __init__(self, proxy, upstream):
        self.proxy = proxy
        self.upstream = upstream
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.proxy.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            _Pair(self.proxy, client, server)


class _Pair:
    """One client connection and its broker connection."""

    def __init__(self, proxy, client, server):
        self.proxy = proxy
        self.client = client
        self.server = server
        self.requests = {}   # correlation id -> (api key, version)
        self.lock = threading.Lock()
        self.closed = False
        with proxy.lock:
            proxy.pairs.append(self)
        threading.Thread(target=self._requests, daemon=True).start()
        threading.Thread(target=self._responses, daemon=True).start()

    def close(self):
        self.closed = True
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _requests(self):
        try:
            while not self.closed:
                frame = _read_frame(self.client)
                if frame is None:
                    break
                api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 4)
                with self.lock:
                    self.requests[correlation_id] = (api_key, version)
                if api_key == PRODUCE:
                    self.proxy._count("produce_requests")
                with self.proxy.lock:
                    self.proxy.by_api[api_key] += 1
                self.server.sendall(frame)
        except OSError:
            pass
        self.close()

    def _responses(self):
        try:
            while not self.closed:
                frame = _read_frame(self.server)
                if frame is None:
                    break
                correlation_id = struct.unpack_from(">i", frame, 4)[0]
                with self.lock:
                    api_key, version = self.requests.pop(correlation_id, (None, None))
                if api_key == PRODUCE and self.proxy._take_drop():
                    # The broker answered: it has appended the batch. The client never
                    # learns that.
                    break
                fault = self.proxy._take_fault(api_key)
                if fault is not None:
                    kind, seconds = fault
                    if kind == "stall":
                        time.sleep(seconds)
                    elif kind == "truncate":
                        self.client.sendall(frame[:max(len(frame) // 2, 5)])
                        break
                    elif kind == "reset":
                        self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                               struct.pack("ii", 1, 0))
                        self.client.close()
                        break
                    else:   # drop
                        break
                if api_key == METADATA:
                    frame = self.proxy._rewrite_metadata(version, frame)
                self.client.sendall(frame)
        except OSError:
            pass
        self.close()


class FaultProxy:
    def __init__(self, bootstrap_servers: str):
        self.closed = False
        self.lock = threading.Lock()
        self.pairs = []
        self.counters = {"produce_requests": 0, "dropped_produce_replies": 0}
        self._skip = 0
        self._drop = 0
        self.by_api: Counter = Counter()
        self._faults: deque = deque()   # [api_key, kind, remaining, seconds]
        self.injected: Counter = Counter()   # kind -> faults applied
        self._listeners: dict[tuple[str, int], _Listener] = {}
        client = KafkaClient(bootstrap_servers)
        try:
            client.refresh_metadata([])
            brokers = list(client.brokers.values())
        finally:
            client.close()
        for host, port in brokers:
            self._listener((host, port))
        self.bootstrap_servers = ",".join(
            f"127.0.0.1:{self._listener(hp).port}" for hp in brokers)

    def _listener(self, upstream) -> _Listener:
        with self.lock:
            listener = self._listeners.get(upstream)
            if listener is None:
                listener = self._listeners[upstream] = _Listener(self, upstream)
            return listener

    def _count(self, name, n=1):
        with self.lock:
            self.counters[name] += n

    def drop_produce_replies(self, count: int = 1, skip: int = 0) -> None:
        with self.lock:
            self._skip = skip
            self._drop = count

    def inject(self, api_key: int, kind: str, count: int = 1, seconds: float = 0.0) -> None:
        if kind not in ("drop", "truncate", "stall", "reset"):
            raise ValueError(f"unknown fault {kind!r}")
        with self.lock:
            self._faults.append([api_key, kind, count, seconds])

    def _take_fault(self, api_key):
        with self.lock:
            for entry in self._faults:
                if entry[0] == api_key and entry[2] > 0:
                    entry[2] -= 1
                    self.injected[entry[1]] += 1
                    return entry[1], entry[3]
            return None

    def pending_faults(self) -> int:
        with self.lock:
            return sum(entry[2] for entry in self._faults)

    def _take_drop(self) -> bool:
        with self.lock:
            if self._skip > 0:
                self._skip -= 1
                return False
            if self._drop > 0:
                self._drop -= 1
                self.counters["dropped_produce_replies"] += 1
                return True
            return False

    def _rewrite_metadata(self, version, frame):
        correlation_id = struct.unpack_from(">i", frame, 4)[0]
        try:
            body = decode_response(m.METADATA, version, memoryview(frame)[4:])
        except Exception as exc:   # pragma: no cover - a proxy bug must be visible
            print(f"faultproxy: cannot decode Metadata v{version}: {exc}", file=sys.stderr)
            return frame
        for broker in body["brokers"]:
            listener = self._listener((broker["host"], broker["port"]))
            broker["host"], broker["port"] = "127.0.0.1", listener.port
        return bytes(encode_response(m.METADATA, version, correlation_id, body))

    def close(self):
        self.closed = True
        for listener in self._listeners.values():
            listener.sock.close()
        with self.lock:
            pairs = list(self.pairs)
        for pair in pairs:
            pair.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
