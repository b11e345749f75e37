"""A fault-injecting TCP proxy between a Kafka client and a real cluster.

One listener per broker on 127.0.0.1; every byte goes to the real broker and back.
Metadata and FindCoordinator responses are rewritten so brokers are advertised at their
proxy addresses (a client bootstrapped through the proxy stays on it, coordinators
included). Requests are followed by
correlation id, so the proxy knows which response answers a Produce.

``drop_produce_replies(count, skip=0)``: let ``skip`` Produce responses through, then
for the next ``count`` Produce requests forward the request, wait until the broker
answered (so the broker has appended the records), discard the answer and close both
sockets -- the client sees its connection lost with the outcome unknown.

``inject(api_key, kind, count=1, seconds=0.0, skip=0, behind=0)``: after ``skip`` more,
the next ``count`` responses to requests of ``api_key`` (the request always reaches the
broker) are damaged; a Produce answer is first held until the client has ``behind`` more
Produce requests in flight on that connection (at most 10 s):

* ``"drop"``     -- nothing of the response is sent; both sockets are closed.
* ``"truncate"`` -- only the first half of the response frame is sent, then closed
  (a drop in the middle of a response).
* ``"stall"``    -- the response is held for ``seconds`` before it goes (a slow
  broker; longer than the client's request timeout, a timeout).
* ``"reset"``    -- the connection is reset (TCP RST, SO_LINGER 0) instead of the answer.
* ``"hold"``     -- the response is never sent and the connection stays open: the broker
  did the work, the client waits. ``wait_held(timeout)`` returns once an answer is held,
  so a test can act at exactly that point (kill the client, say, or kill the broker
  ``held_at`` names and ``cut(held_at)`` its connections, as its death cuts them).

``refuse_produce(count, error_code, skip=0)``: let ``skip`` Produce requests through,
then keep the next ``count`` from the broker and answer them from the proxy with
``error_code`` for every partition (in their place in the connection's answer order):
the broker never sees those batches, so requests pipelined behind one reach it with a
gap in their sequence numbers.

``down()`` / ``up()``: a broker outage as clients see it: every open connection is cut
and new ones are closed at once (the broker behind keeps running) until ``up()``.
``isolate(upstream)`` / ``rejoin(upstream)``: the same for one broker of a cluster.

``counters``: requests seen per API key (``by_api``), for the idle-cost benchmark.
``max_produce_in_flight``: the most Produce requests one connection had unanswered;
``in_flight_at_fault``: for every fault applied to a Produce (a dropped, damaged or
refused answer), how many Produce requests were unanswered on its connection then
(itself included); ``produce_errors``: error code -> partition answers the broker sent
with it (the proxy's own refusals not counted).
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
from kafka_ds.protocol.schema import decode_request, decode_response, encode_response

PRODUCE, METADATA, FIND_COORDINATOR = 0, 3, 10


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
            if self.proxy.is_down or self.upstream in self.proxy.isolated:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            _Pair(self.proxy, client, server, self.upstream)


class _Pair:
    """One client connection and its broker connection."""

    def __init__(self, proxy, client, server, upstream=None):
        self.proxy = proxy
        self.client = client
        self.server = server
        self.upstream = upstream  # (host, port) of the broker behind
        self.requests = {}  # correlation id -> (api key, version)
        self.lock = threading.Lock()
        # Answers go to the client in request order: ``order`` holds the correlation ids
        # of requests that get one; ``refused`` the proxy's own answers among them.
        self.order: deque[int] = deque()
        self.refused = {}
        self.send_lock = threading.Lock()  # taken before ``lock``
        self.produce_in_flight = 0
        self.closed = False
        with proxy.lock:
            # closed pairs are dropped here, so a long run (benchmarks/soak.py) keeps no
            # list of every connection it ever had
            proxy.pairs[:] = [pair for pair in proxy.pairs if not pair.closed]
            proxy.pairs.append(self)
        if proxy.is_down or upstream in proxy.isolated:  # down() came in between
            self.close()
            return
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
                answered, refusal = True, None
                if api_key == PRODUCE:
                    self.proxy._count("produce_requests")
                    _header, body = decode_request(m.PRODUCE, memoryview(frame)[4:])
                    answered = body["acks"] != 0
                    code = self.proxy._take_refusal() if answered else None
                    if code is not None:
                        refusal = _refusal(version, correlation_id, body, code)
                with self.lock:
                    self.requests[correlation_id] = (api_key, version)
                    if answered:
                        self.order.append(correlation_id)
                    if api_key == PRODUCE and answered:
                        self.produce_in_flight += 1
                        self.proxy._note_in_flight(self.produce_in_flight)
                    if refusal is not None:
                        self.refused[correlation_id] = refusal
                        self.proxy._note_fault("refuse", self.produce_in_flight)
                with self.proxy.lock:
                    self.proxy.by_api[api_key] += 1
                if refusal is not None:
                    with self.send_lock:
                        self._send_refusals()
                    continue
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
                # Held until this answer is sent: a refusal queued behind it waits.
                with self.send_lock:
                    if not self._answer(frame):
                        break
        except OSError:
            pass
        self.close()

    def _answer(self, frame) -> bool:
        """Pass one broker answer on (or damage it); False once the connection is cut."""
        correlation_id = struct.unpack_from(">i", frame, 4)[0]
        with self.lock:
            api_key, version = self.requests.pop(correlation_id, (None, None))
            if correlation_id in self.order:
                self.order.remove(correlation_id)
            in_flight = self.produce_in_flight
            if api_key == PRODUCE:
                self.produce_in_flight -= 1
        if api_key == PRODUCE and self.proxy._take_drop():
            # The broker answered: it has appended the batch. The client never learns that.
            self.proxy._note_fault("drop_reply", in_flight)
            return False
        fault = self.proxy._take_fault(api_key)
        if fault is not None:
            kind, seconds, behind = fault
            if api_key == PRODUCE:
                if behind:
                    in_flight = 1 + self._wait_for_requests_behind(behind)
                self.proxy._note_fault(kind, in_flight)
            if kind == "hold":
                # This answer and every later one of the connection stay here until the
                # connection closes (the client is killed, the proxy closed, or ``cut``).
                self.proxy.held_at = self.upstream
                self.proxy._held.set()
                while not self.closed and not self.proxy.closed:
                    time.sleep(0.05)
                return False
            if kind == "stall":
                time.sleep(seconds)
            elif kind == "truncate":
                self.client.sendall(frame[: max(len(frame) // 2, 5)])
                return False
            elif kind == "reset":
                self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.client.close()
                return False
            else:  # drop
                return False
        if api_key == METADATA:
            frame = self.proxy._rewrite_metadata(version, frame)
        elif api_key == FIND_COORDINATOR:
            frame = self.proxy._rewrite_coordinator(version, frame)
        elif api_key == PRODUCE:
            self.proxy._count_produce_errors(version, frame)
        self.client.sendall(frame)
        self._send_refusals()
        return True

    def _wait_for_requests_behind(self, count, timeout=10.0) -> int:
        """Hold the answer being handled until the client has sent ``count`` more Produce
        requests on this connection (or ``timeout`` passed); how many it has sent."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                waiting = self.produce_in_flight
            if waiting >= count or time.monotonic() > deadline:
                return waiting
            time.sleep(0.005)

    def _send_refusals(self):
        """The proxy's own answers that are next in answer order (``send_lock`` held)."""
        while True:
            with self.lock:
                if not self.order or self.order[0] not in self.refused:
                    return
                correlation_id = self.order.popleft()
                self.requests.pop(correlation_id, None)
                self.produce_in_flight -= 1
                frame = self.refused.pop(correlation_id)
            self.client.sendall(frame)


def _refusal(version, correlation_id, body, code) -> bytes:
    """A Produce answer with error ``code`` for every partition of the request ``body``."""
    responses = [
        {
            "name": topic["name"],
            "partition_responses": [
                {
                    "index": part["index"],
                    "error_code": code,
                    "base_offset": -1,
                    "log_append_time_ms": -1,
                    "log_start_offset": -1,
                    "record_errors": [],
                    "error_message": None,
                }
                for part in topic["partition_data"]
            ],
        }
        for topic in body["topic_data"]
    ]
    return bytes(
        encode_response(
            m.PRODUCE, version, correlation_id, {"responses": responses, "throttle_time_ms": 0}
        )
    )


class FaultProxy:
    def __init__(self, bootstrap_servers: str):
        self.closed = False
        self.is_down = False
        self.isolated: set[tuple[str, int]] = set()  # brokers cut off by isolate()
        self.lock = threading.Lock()
        self.pairs: list[_Pair] = []
        self.counters = {"produce_requests": 0, "dropped_produce_replies": 0}
        self._skip = 0
        self._drop = 0
        self.by_api: Counter = Counter()
        self._faults: deque = deque()  # [api_key, kind, remaining, seconds]
        self.injected: Counter = Counter()  # kind -> faults applied
        self._refuse = [0, 0, 0]  # skip, count, error code
        self._held = threading.Event()
        self.held_at: tuple[str, int] | None = None  # the broker whose answer is held
        self.max_produce_in_flight = 0
        self.in_flight_at_fault: list = []  # (kind, Produce requests unanswered then)
        self.produce_errors: Counter = Counter()  # broker's Produce error code -> partitions
        self._listeners: dict[tuple[str, int], _Listener] = {}
        client = KafkaClient(bootstrap_servers)
        try:
            client.refresh_metadata([])
            brokers = list(client.brokers.values())
        finally:
            client.close()
        for host, port in brokers:
            self._listener((host, port))
        self.bootstrap_servers = ",".join(f"127.0.0.1:{self._listener(hp).port}" for hp in brokers)

    def _listener(self, upstream) -> _Listener:
        with self.lock:
            listener = self._listeners.get(upstream)
            if listener is None:
                listener = self._listeners[upstream] = _Listener(self, upstream)
            return listener

    def _count(self, name, n=1):
        with self.lock:
            self.counters[name] += n

    def down(self) -> None:
        """Cut every connection and refuse new ones (closed at once) until :meth:`up`."""
        self.is_down = True
        with self.lock:
            pairs = list(self.pairs)
        for pair in pairs:
            pair.close()

    def up(self) -> None:
        self.is_down = False

    def isolate(self, upstream: tuple[str, int]) -> None:
        """One broker cut off from the clients (its connections cut, new ones closed at
        once) until :meth:`rejoin`; the broker keeps running and its peers still reach it
        directly (inter-broker and controller traffic does not pass the proxy)."""
        self.isolated.add((str(upstream[0]), int(upstream[1])))
        self.cut(upstream)

    def rejoin(self, upstream: tuple[str, int]) -> None:
        self.isolated.discard((str(upstream[0]), int(upstream[1])))

    def cut(self, upstream: tuple[str, int]) -> None:
        """Close every open connection to the broker at ``upstream`` (a held answer's
        too): what its clients see when that broker dies. Used after the broker behind was
        killed, whose death the proxy's sockets to it may not show at once (a held
        answer's connection reads nothing more from the broker)."""
        with self.lock:
            pairs = [pair for pair in self.pairs if pair.upstream == tuple(upstream)]
        for pair in pairs:
            pair.close()

    def drop_produce_replies(self, count: int = 1, skip: int = 0) -> None:
        with self.lock:
            self._skip = skip
            self._drop = count

    def refuse_produce(self, count: int, error_code: int, skip: int = 0) -> None:
        with self.lock:
            self._refuse = [skip, count, error_code]

    def _take_refusal(self):
        with self.lock:
            skip, count, code = self._refuse
            if skip > 0:
                self._refuse[0] -= 1
                return None
            if count > 0:
                self._refuse[1] -= 1
                self.injected["refuse"] += 1
                return code
            return None

    def _count_produce_errors(self, version, frame):
        body = decode_response(m.PRODUCE, version, memoryview(frame)[4:])
        with self.lock:
            for topic in body["responses"]:
                for part in topic["partition_responses"]:
                    if part["error_code"]:
                        self.produce_errors[part["error_code"]] += 1

    def _note_in_flight(self, n):
        with self.lock:
            self.max_produce_in_flight = max(self.max_produce_in_flight, n)

    def _note_fault(self, kind, in_flight):
        with self.lock:
            self.in_flight_at_fault.append((kind, in_flight))

    def inject(
        self,
        api_key: int,
        kind: str,
        count: int = 1,
        seconds: float = 0.0,
        skip: int = 0,
        behind: int = 0,
    ) -> None:
        if kind not in ("drop", "truncate", "stall", "reset", "hold"):
            raise ValueError(f"unknown fault {kind!r}")
        if kind == "hold":
            self._held.clear()
        with self.lock:
            self._faults.append([api_key, kind, count, seconds, skip, behind])

    def clear_faults(self) -> None:
        """Forget the faults not applied yet."""
        with self.lock:
            self._faults.clear()

    def _take_fault(self, api_key):
        with self.lock:
            for entry in self._faults:
                if entry[0] == api_key and entry[2] > 0:
                    if entry[4] > 0:  # answers to let through first
                        entry[4] -= 1
                        return None
                    entry[2] -= 1
                    self.injected[entry[1]] += 1
                    return entry[1], entry[3], entry[5]
            return None

    def wait_held(self, timeout: float) -> bool:
        """Wait until an answer is held (fault ``"hold"``); False after ``timeout`` s."""
        return self._held.wait(timeout)

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
        except Exception as exc:  # pragma: no cover - a proxy bug must be visible
            print(f"faultproxy: cannot decode Metadata v{version}: {exc}", file=sys.stderr)
            return frame
        for broker in body["brokers"]:
            listener = self._listener((broker["host"], broker["port"]))
            broker["host"], broker["port"] = "127.0.0.1", listener.port
        return bytes(encode_response(m.METADATA, version, correlation_id, body))

    def _rewrite_coordinator(self, version, frame):
        correlation_id = struct.unpack_from(">i", frame, 4)[0]
        body = decode_response(m.FIND_COORDINATOR, version, memoryview(frame)[4:])
        # v0-3 answer at the top level, v4+ one entry per key asked for.
        for entry in body.get("coordinators") or [body]:
            if entry.get("host") and entry.get("port", -1) >= 0:
                listener = self._listener((entry["host"], entry["port"]))
                entry["host"], entry["port"] = "127.0.0.1", listener.port
        return bytes(encode_response(m.FIND_COORDINATOR, version, correlation_id, body))

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
