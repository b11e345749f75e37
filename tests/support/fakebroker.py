"""A scripted broker on a real socket, for faults a real broker cannot be made to show.

Each accepted connection runs ``handler(request_header, request_body_bytes, conn)``
per request frame; the handler writes raw bytes back (or closes, or stalls).
"""

import socket
import struct
import threading

from kafka_ds.protocol import messages as m
from kafka_ds.protocol.schema import encode_response


class FakeBroker:
    def __init__(self, handler):
        self.handler = handler
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.requests = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn):
        conn.settimeout(5)
        try:
            while not self._stop:
                head = _read_exact(conn, 4)
                if head is None:
                    return
                frame = _read_exact(conn, struct.unpack(">i", head)[0])
                api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
                self.requests.append((api_key, version))
                if self.handler(api_key, version, correlation_id, frame, conn) == "close":
                    conn.close()
                    return
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self._stop = True
        self.sock.close()


def _read_exact(conn, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def api_versions_v0_answer(correlation_id, apis=None, version=0):
    """An ApiVersions answer (v0 unless ``version`` says otherwise) listing ``apis``."""
    apis = apis or {18: (0, 3), 3: (0, 12), 1: (4, 12), 2: (1, 8)}
    return bytes(
        encode_response(
            m.API_VERSIONS,
            version,
            correlation_id,
            {
                "error_code": 0,
                "api_keys": [
                    {"api_key": k, "min_version": lo, "max_version": hi}
                    for k, (lo, hi) in apis.items()
                ],
            },
        )
    )


def serve_cluster(topics, handlers, apis=None):
    """A one-node cluster (node 0) on a real socket: answers ApiVersions and Metadata
    for ``topics`` ({name: partition count}) and hands other requests to
    ``handlers[api_key](version, correlation_id, frame, conn)``."""
    apis = apis or {18: (0, 3), 3: (0, 12), 1: (4, 12), 2: (1, 9)}

    def handler(api_key, version, correlation_id, frame, conn):
        if api_key == 18:
            conn.sendall(api_versions_v0_answer(correlation_id, apis, version))
        elif api_key == 3:
            conn.sendall(
                encode_response(
                    m.METADATA,
                    version,
                    correlation_id,
                    {
                        "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": broker.port}],
                        "topics": [
                            {
                                "error_code": 0,
                                "name": name,
                                "partitions": [
                                    {
                                        "error_code": 0,
                                        "partition_index": p,
                                        "leader_id": 0,
                                        "replica_nodes": [0],
                                        "isr_nodes": [0],
                                        "offline_replicas": [],
                                    }
                                    for p in range(count)
                                ],
                            }
                            for name, count in topics.items()
                        ],
                    },
                )
            )
        else:
            return handlers[api_key](version, correlation_id, frame, conn)

    broker = FakeBroker(handler)
    return broker
