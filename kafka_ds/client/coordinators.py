"""Group and transaction coordinators: which broker coordinates a key (cached), calls to
it under the retry policy, and the group offset requests (OffsetCommit, OffsetFetch).

A :class:`~kafka_ds.client.cluster.KafkaClient` owns one :class:`Coordinators` as
``client.coordinators`` (the cache lives as long as the client's connections) and offers
:func:`commit_offsets` and :func:`fetch_committed` as its methods too.
"""

from __future__ import annotations

from collections import defaultdict

from ..errors import KafkaConnectionError, KafkaTimeoutError, acl_hint
from ..protocol.errors import (
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    NotCoordinator,
    error_for_code,
)
from ..protocol.messages_groups import FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH
from .connection import BrokerConnection
from .retry import RetryPolicy

GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1  # FindCoordinator key types


class Coordinators:
    """The coordinators one client has found: ``(key type, key) -> node id``."""

    def __init__(self, client):
        self.client = client
        self._nodes: dict[tuple[int, str], int] = {}

    def find(self, key: str, key_type: int = GROUP_KEY_TYPE) -> BrokerConnection:
        """The connection to the coordinator of ``key``: a group id, or a transactional id
        with ``key_type`` 1. One FindCoordinator request unless the answer is cached; no
        retries of its own (:meth:`call` retries the whole operation)."""
        client = self.client
        node = self._nodes.get((key_type, key))
        if node is None:
            response = client.any_connection().request(
                FIND_COORDINATOR,
                FIND_COORDINATOR.body(key=key, key_type=key_type, coordinator_keys=[key]),
            )
            # v0-3 answer at the top level, v4+ in a list of coordinators.
            entry = response["coordinators"][0] if response.get("coordinators") else response
            if entry["error_code"]:
                code = entry["error_code"]
                if key_type == TRANSACTION_KEY_TYPE:
                    kind, hint = (
                        "transactional id",
                        acl_hint(code, "FindCoordinator", transactional_id=key),
                    )
                else:
                    kind, hint = "group", acl_hint(code, "FindCoordinator", group=key)
                raise error_for_code(code)(f"FindCoordinator of {kind} {key!r}{hint}")
            node = entry["node_id"]
            client.metadata.brokers.setdefault(node, (entry["host"], entry["port"]))
            self._nodes[(key_type, key)] = node
        return client.connection(node)

    def call(
        self,
        key: str,
        call,
        what: str,
        *,
        key_type: int = GROUP_KEY_TYPE,
        policy: RetryPolicy | None = None,
    ):
        """``call(connection)`` at the coordinator of ``key``, under ``policy`` (default:
        the client's). A coordinator that went away, moved or is still loading is looked
        up again before the next attempt."""
        client = self.client

        def attempt():
            try:
                return call(self.find(key, key_type))
            except (
                KafkaConnectionError,
                KafkaTimeoutError,
                CoordinatorLoadInProgress,
                CoordinatorNotAvailable,
                NotCoordinator,
            ):
                self._nodes.pop((key_type, key), None)
                raise

        policy = policy or client.retry_policy()
        try:
            return policy.run(attempt, what, refresh=lambda _exc: client.refresh_metadata([]))
        finally:
            client.retry_stats_add(policy)


def commit_offsets(
    client, group_id: str, offsets: dict[tuple[str, int], int], metadata: str = ""
) -> None:
    """OffsetCommit outside any group generation (generation -1, empty member id),
    the way standalone consumers and Spark-managed offsets commit."""
    by_topic = defaultdict(list)
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic[topic].append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_metadata": metadata,
            }
        )
    # Generation -1, no member, no leader epoch, broker-side retention: the defaults.
    body = OFFSET_COMMIT.body(
        group_id=group_id, topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()]
    )

    def call(conn):
        response = conn.request(OFFSET_COMMIT, body)
        for topic in response["topics"]:
            for part in topic["partitions"]:
                code = part["error_code"]
                if code:
                    hint = acl_hint(code, "OffsetCommit", group=group_id, topic=topic["name"])
                    raise error_for_code(code)(
                        f"OffsetCommit of group {group_id!r}, "
                        f"{topic['name']}-{part['partition_index']}{hint}"
                    )

    client.coordinators.call(group_id, call, "OffsetCommit")


def fetch_committed(client, group_id: str, topic_partitions) -> dict[tuple[str, int], int]:
    """Committed offsets of ``group_id``; partitions with none are absent."""
    by_topic = defaultdict(list)
    for topic, partition in topic_partitions:
        by_topic[topic].append(partition)
    topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    # v0-7 name the group at the top, v8+ in a list of groups; the codec sends
    # whichever the negotiated version has. RequireStable (v7+), as Kafka's consumer asks:
    # without it, Kafka 4's group coordinator answers from its last committed state, which
    # just after the coordinator moved to another node can lack offsets already in its log
    # (seen: a stream started from the group's offsets got none, and would have read the
    # topic again from the start); with it, the answer waits for them (or is
    # UNSTABLE_OFFSET_COMMIT, retriable, from older brokers).
    body = OFFSET_FETCH.body(
        group_id=group_id,
        topics=topics,
        groups=[{"group_id": group_id, "topics": topics}],
        require_stable=True,
    )

    def call(conn):
        response = conn.request(OFFSET_FETCH, body)
        if response.get("groups"):
            group = response["groups"][0]
            code, topic_list = group["error_code"], group["topics"]
        else:
            code, topic_list = response.get("error_code", 0), response["topics"]
        if code:
            raise error_for_code(code)(
                f"OffsetFetch of group {group_id!r}{acl_hint(code, 'OffsetFetch', group=group_id)}"
            )
        result = {}
        for topic in topic_list:
            for part in topic["partitions"]:
                code = part["error_code"]
                if code:
                    hint = acl_hint(code, "OffsetFetch", group=group_id, topic=topic["name"])
                    raise error_for_code(code)(
                        f"OffsetFetch of group {group_id!r}, "
                        f"{topic['name']}-{part['partition_index']}{hint}"
                    )
                if part["committed_offset"] >= 0:
                    result[(topic["name"], part["partition_index"])] = part["committed_offset"]
        return result

    return client.coordinators.call(group_id, call, "OffsetFetch")
