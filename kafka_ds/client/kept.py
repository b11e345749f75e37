"""Broker connections kept from one Spark task to the next in a Python worker process.

PySpark's daemon runs task after task in one worker process (``spark.python.worker.reuse``,
on by default). A task that opened its connections afresh paid, for each broker it spoke
to, a TCP connect, an ApiVersions round trip and (with SASL) the authentication before its
first request: for the small micro-batches of a stream, about as long as reading and
writing the records (docs/streaming.md, "What a micro-batch costs"). Spark's own connector
keeps its consumers and producers per executor in the same way.

What is kept: the task's connections, by node id, for the same ``kafka.bootstrap.servers``
and connection settings (client id, timeouts, security), when the task ended cleanly and no
request is waiting for its answer. What is not: metadata (a task looks up leaders and
partition counts as before), producer ids and sequence numbers, transactions, consumer
groups. A kept connection the broker closed (idle, restarted) is found closed when the next
task takes it and opened again; one left idle longer than :data:`KEEP_SECONDS` is closed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

from .cluster import KafkaClient, make_client
from .connection import BrokerConnection

#: A connection idle longer than this is closed rather than reused (brokers close idle
#: connections after connections.max.idle.ms, 10 minutes by default).
KEEP_SECONDS = 60.0

_lock = threading.Lock()
#: (bootstrap servers, client settings) -> (when kept, {node id: connection})
_kept: dict[Hashable, tuple[float, dict[int, BrokerConnection]]] = {}


def _key(client: KafkaClient) -> Hashable | None:
    """What a connection is made with (a read's and a write's client differ only in their
    retry budgets, so they share)."""
    config = client.config
    key = (
        tuple(client.bootstrap),
        config.client_id,
        config.request_timeout_ms,
        config.connect_timeout_ms,
        config.security,
    )
    try:
        hash(key)
    except TypeError:  # settings that cannot be compared: nothing is kept for them
        return None
    return key


def task_client(opts) -> KafkaClient:
    """A client for one task (``make_client``), with the connections an earlier task of
    this process left for the same servers and settings. Give it back with :func:`release`."""
    client = make_client(opts)
    key = _key(client)
    if key is None:
        return client
    with _lock:
        entry = _kept.pop(key, None)
    if entry is None:
        return client
    kept_at, connections = entry
    fresh = time.monotonic() - kept_at < KEEP_SECONDS
    for node_id, conn in connections.items():
        if fresh and conn.reusable():
            client.adopt_connection(node_id, conn)
        else:
            conn.close()
    return client


def release(client: KafkaClient, reusable: bool) -> None:
    """End a task's client: its idle connections are kept for the next task of this
    process when ``reusable`` (the task ended without an error), the rest closed."""
    key = _key(client) if reusable else None
    connections = client.detach_connections() if key is not None else {}
    client.close()
    keep = {node_id: conn for node_id, conn in connections.items() if conn.reusable()}
    for node_id, conn in connections.items():
        if node_id not in keep:
            conn.close()
    if not keep:
        return
    with _lock:
        previous = _kept.pop(key, None)
        _kept[key] = (time.monotonic(), keep)
    if previous is not None:  # two tasks of one process at once: keep the later one's
        for conn in previous[1].values():
            conn.close()


@contextmanager
def task_connections(opts) -> Iterator[KafkaClient]:
    """A Spark task's client (:func:`task_client`), given back when the block ends: its
    connections kept if the block ended without an exception, closed otherwise."""
    client = task_client(opts)
    done = False
    try:
        yield client
        done = True
    finally:
        release(client, reusable=done)


def close_kept() -> None:
    """Close every kept connection (tests; a process that ends closes them anyway)."""
    with _lock:
        entries = list(_kept.values())
        _kept.clear()
    for _, connections in entries:
        for conn in connections.values():
            conn.close()


__all__ = ["KEEP_SECONDS", "close_kept", "release", "task_client", "task_connections"]
