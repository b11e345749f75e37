"""A TCP proxy that can take a server away and bring it back: outages of a server whose
state must survive them (Apicurio's storage is in memory: stopping the JVM would lose every
schema).

``OutageProxy(host, port)`` listens on a free 127.0.0.1 port and forwards every byte both
ways. ``down()`` cuts every open connection and refuses new ones (closed at once: a client
sees a connection reset, as from a server that died); ``up()`` forwards again.
``connections`` counts the connections accepted while up (kafka_ds's registry client opens
one per request). tests/support/faultproxy.py is the Kafka-aware proxy (it follows Kafka
frames); this one knows nothing of what it carries.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.support.brokers import HOST


class OutageProxy:
    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self.is_down = False
        self.connections = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = False
        self._listener = socket.create_server((HOST, 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name=f"outage-proxy-{self.port}", daemon=True).start()

    def down(self) -> None:
        """Cut every connection and refuse new ones until :meth:`up`."""
        with self._lock:
            self.is_down = True
            cut, self._open = self._open, set()
        for sock in cut:
            _close(sock)

    def up(self) -> None:
        with self._lock:
            self.is_down = False

    def close(self) -> None:
        self._closed = True
        self.down()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                refused = self.is_down
                if not refused:
                    self.connections += 1
            if refused:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:  # the server itself is gone: the client sees its connection end
                _close(client)
                continue
            server.settimeout(None)
            with self._lock:
                if self.is_down:  # went down while connecting
                    _close(client)
                    _close(server)
                    continue
                self._open.update((client, server))
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                target.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(source)
                self._open.discard(target)
            _close(source)
            _close(target)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
