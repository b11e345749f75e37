"""Cluster client: bootstrap, connections, the metadata cache (its memory in
metadata.py), leader routing and retries. Blocking and single-threaded: a Spark task owns
one.

What the client does with that routing lives beside it: ListOffsets and Fetch in
reads.py, group and transaction coordinators in coordinators.py, CreateTopics and
InitProducerId in admin.py. The client offers those as its methods too.
"""

from __future__ import annotations

import logging
import random
import re
from collections import defaultdict

from ..errors import KafkaConnectionError
from ..protocol.errors import LeaderNotAvailable, UnknownTopicOrPartition
from ..protocol.messages_cluster import METADATA
from . import admin, coordinators, reads
from .config import ClientConfig
from .connection import BrokerConnection, parse_bootstrap
from .coordinators import Coordinators
from .metadata import MetadataCache, TopicInfo, metadata_error
from .retry import RetryPolicy

log = logging.getLogger(__name__)


class KafkaClient:
    """Speaks to a whole cluster. Create one per task/driver; call ``close()``."""

    def __init__(self, bootstrap_servers, config: ClientConfig | None = None):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.config = config or ClientConfig()
        self.metadata = MetadataCache()
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self.coordinators = Coordinators(self)  # group and transaction coordinators
        self.retries = 0  # retried attempts, all operations

    @property
    def brokers(self) -> dict[int, tuple[str, int]]:
        """{node id: (host, port)} of the cluster's brokers (``metadata.brokers``)."""
        return self.metadata.brokers

    # --- connections -----------------------------------------------------------

    def _new_connection(self, host, port, node_id=-1) -> BrokerConnection:
        return BrokerConnection(
            host,
            port,
            node_id=node_id,
            client_id=self.config.client_id,
            request_timeout_ms=self.config.request_timeout_ms,
            connect_timeout_ms=self.config.connect_timeout_ms,
            security=self.config.security,
        )

    def any_connection(self) -> BrokerConnection:
        """A connected broker: a known node if any, else the bootstrap list in random order.

        Only an idle connection is handed out: a request on a connection with pipelined
        requests outstanding (a producer's) would read -- and drop -- their responses.
        """
        for conn in self._connections.values():
            if conn.connected and not conn.in_flight:
                return conn
        if (
            self._bootstrap_conn is not None
            and self._bootstrap_conn.connected
            and not self._bootstrap_conn.in_flight
        ):
            return self._bootstrap_conn
        errors = []
        candidates = list(self.metadata.brokers.items()) + [(-1, hp) for hp in self.bootstrap]
        random.shuffle(candidates)
        for node_id, (host, port) in candidates:
            try:
                busy = self._connections.get(node_id)
                if node_id >= 0 and not (busy is not None and busy.in_flight):
                    return self.connection(node_id)
                # A separate connection for this request (the node's own one is busy).
                conn = self._new_connection(host, port, node_id)
                conn.connect()
                if self._bootstrap_conn is not None:
                    self._bootstrap_conn.close()
                self._bootstrap_conn = conn
                return conn
            except KafkaConnectionError as exc:
                errors.append(str(exc))
        raise KafkaConnectionError(
            "cannot reach any broker of kafka.bootstrap.servers="
            f"{','.join(f'{h}:{p}' for h, p in self.bootstrap)}: " + "; ".join(errors)
        )

    def connection(self, node_id: int) -> BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is None:
            if node_id not in self.metadata.brokers:
                self.refresh_metadata()
            if node_id not in self.metadata.brokers:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
            host, port = self.metadata.brokers[node_id]
            conn = self._connections[node_id] = self._new_connection(host, port, node_id)
        return conn.connect()

    def adopt_connection(self, node_id: int, conn: BrokerConnection) -> None:
        """Use ``conn`` (open, idle, to broker ``node_id``) instead of opening one: a
        connection an earlier task of this process left (kept.py). A metadata answer that
        moves the node elsewhere closes it, as for any connection."""
        self._connections[node_id] = conn

    def detach_connections(self) -> dict[int, BrokerConnection]:
        """The brokers' connections, no longer this client's (``close()`` leaves them open)."""
        connections, self._connections = self._connections, {}
        return connections

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()
            self._bootstrap_conn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- retries -----------------------------------------------------------------

    def retry_policy(
        self, budget_ms: float | None = None, budget_option: str = "", **kwargs
    ) -> RetryPolicy:
        """The client's retry policy (``RetryPolicy.from_config`` of its options)."""
        return RetryPolicy.from_config(self.config, budget_ms, budget_option, **kwargs)

    def retrying(
        self,
        operation,
        what: str,
        *,
        topics=None,
        budget_ms: float | None = None,
        budget_option: str = "",
    ):
        """Run ``operation()`` under the retry policy (kafka_ds/client/retry.py). On an
        invalid-metadata error the metadata of ``topics`` only is refreshed (none given:
        just the broker list)."""

        def refresh(_exc):
            wanted = sorted(set(topics() if callable(topics) else topics or ()))
            self.refresh_metadata(wanted)

        policy = self.retry_policy(budget_ms, budget_option)
        try:
            return policy.run(operation, what, refresh=refresh)
        finally:
            self.retry_stats_add(policy)

    def retry_stats_add(self, policy: RetryPolicy) -> None:
        self.retries += policy.stats.retries

    # --- metadata ----------------------------------------------------------------

    def refresh_metadata(
        self, topics: list[str] | None = None, *, allow_auto_topic_creation: bool = False
    ) -> dict[str, TopicInfo]:
        """Fetch metadata (all topics when ``topics`` is None) and update the cache.

        ``allow_auto_topic_creation`` asks brokers with ``auto.create.topics.enable`` to
        create the named topics, as the Java producer does (Metadata v4+; v0-3 brokers
        always decide by their own setting)."""
        conn = self.any_connection()
        version = conn.version_for(METADATA)
        if topics is None:
            # v0 says "all topics" with an empty array; later versions with null.
            topic_list: list | None = [] if version == 0 else None
        else:
            topic_list = [{"name": t} for t in topics]
        # A connection error propagates: the caller's retry policy tries again (elsewhere).
        response = conn.request(
            METADATA,
            METADATA.body(
                topics=topic_list,
                allow_auto_topic_creation=bool(allow_auto_topic_creation and topics),
            ),
            version=version,
        )
        seen = self.metadata.update(response, topics)
        brokers = self.metadata.brokers
        for node_id, conn in list(self._connections.items()):
            if brokers.get(node_id) != (conn.host, conn.port):  # gone, or moved elsewhere
                self._connections.pop(node_id).close()
        return seen

    def partitions_of_topics(self, topics, max_age_ms: float | None = None) -> dict[str, list[int]]:
        """{topic: partition ids} of the ``topics`` that exist, from cached metadata when
        every one of them was fetched less than ``max_age_ms`` ago (default
        ``kafka.metadata.max.age.ms``), else from one Metadata request for all of them.
        A topic the cluster does not have is left out."""
        topics = list(dict.fromkeys(topics))
        if max_age_ms is None:
            max_age_ms = self.config.metadata_max_age_ms
        if self.metadata.stale(topics, max_age_ms):
            seen = self.refresh_metadata(topics)
            for topic in topics:
                info = seen.get(topic)
                if (
                    info is not None
                    and info.error_code
                    and info.error_code != UnknownTopicOrPartition.code
                ):
                    raise metadata_error(info.error_code, topic)
        return {
            t: sorted(self.metadata.topics[t].partitions)
            for t in topics
            if t in self.metadata.topics
        }

    def topic_partitions(
        self, topic: str, refresh: bool = False, *, allow_auto_topic_creation: bool = False
    ) -> list[int]:
        """Partition ids of ``topic``; raises the broker's error if it does not exist."""
        if refresh or topic not in self.metadata.topics:
            seen = self.refresh_metadata(
                [topic], allow_auto_topic_creation=allow_auto_topic_creation
            )
            info = seen.get(topic)
            if info is None:
                raise UnknownTopicOrPartition(f"topic {topic!r} not in metadata")
            if info.error_code:
                raise metadata_error(info.error_code, topic)
        return sorted(self.metadata.topics[topic].partitions)

    def list_topics(self, include_internal: bool = False) -> list[str]:
        self.refresh_metadata(None)
        return sorted(
            name
            for name, info in self.metadata.topics.items()
            if include_internal or not (info.is_internal or name.startswith("__"))
        )

    def match_topics(self, pattern: str) -> list[str]:
        """Topics whose whole name matches the Java-style regex ``pattern``."""
        regex = re.compile(pattern)
        return [t for t in self.list_topics() if regex.fullmatch(t)]

    def leader_for(self, topic: str, partition: int) -> int:
        info = self.metadata.topics.get(topic)
        if info is None or partition not in info.partitions:
            seen = self.refresh_metadata([topic]).get(topic)
            if (
                seen is not None
                and seen.error_code
                and seen.error_code != UnknownTopicOrPartition.code
            ):
                # e.g. TOPIC_AUTHORIZATION_FAILED: not retriable, and not an unknown topic
                raise metadata_error(seen.error_code, topic)
            info = self.metadata.topics.get(topic)
            if info is None or partition not in info.partitions:
                raise UnknownTopicOrPartition(f"{topic}-{partition} not in metadata")
        part = info.partitions[partition]
        if part.leader < 0:
            raise LeaderNotAvailable(f"{topic}-{partition} has no leader")
        return part.leader

    def group_by_leader(self, topic_partitions) -> dict[int, list[tuple[str, int]]]:
        grouped = defaultdict(list)
        for topic, partition in topic_partitions:
            grouped[self.leader_for(topic, partition)].append((topic, partition))
        return grouped

    # --- operations -------------------------------------------------------------
    # Built on the routing above, written in their own modules as functions of a client;
    # bound here so callers keep writing ``client.list_offsets(...)``.

    list_offsets = reads.list_offsets
    fetch = reads.fetch
    fetch_watermarks = reads.fetch_watermarks
    commit_offsets = coordinators.commit_offsets
    fetch_committed = coordinators.fetch_committed
    create_topic = admin.create_topic
    init_producer_id = admin.init_producer_id


__all__ = ["KafkaClient", "make_client"]


def make_client(opts) -> KafkaClient:
    """The client for parsed options (``ReadOptions``, ``WriteOptions``: anything with
    ``bootstrap_servers`` and ``client``)."""
    return KafkaClient(opts.bootstrap_servers, opts.client)
