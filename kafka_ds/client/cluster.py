"""Cluster client: bootstrap, metadata cache, leader routing, retries, and the
group coordinator. Blocking and single-threaded: a Spark task owns one.
"""
from __future__ import annotations

import logging
import random
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field

from ..protocol import messages as m
from ..protocol.errors import (
    CoordinatorLoadInProgress,
    CoordinatorNotAvailable,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailable,
    NotCoordinator,
    OffsetOutOfRange,
    UnknownTopicOrPartition,
    error_for_code,
)
from .config import ClientConfig
from .connection import BrokerConnection, parse_bootstrap
from .retry import RetryPolicy

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE = 0, 1   # FindCoordinator key types


@dataclass
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    error_code: int = 0


@dataclass
class TopicInfo:
    name: str
    error_code: int
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    is_internal: bool = False


class KafkaClient:
    """Speaks to a whole cluster. Create one per task/driver; call ``close()``."""

    def __init__(self, bootstrap_servers, config: ClientConfig | None = None):
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.config = config or ClientConfig()
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._metadata_time = 0.0
        self._topic_time: dict[str, float] = {}   # when each topic's metadata was fetched
        self._coordinators: dict[tuple[int, str], int] = {}   # (key type, key) -> node
        self.retries = 0            # retried attempts, all operations
        self.requests = 0           # requests sent by this client's own calls (metadata,
        #                             ListOffsets, Fetch), for the idle-cost benchmark

    # --- connections -----------------------------------------------------------

    def _new_connection(self, host, port, node_id=-1) -> BrokerConnection:
        return BrokerConnection(host, port, node_id=node_id, client_id=self.config.client_id,
                                request_timeout_ms=self.config.request_timeout_ms,
                                connect_timeout_ms=self.config.connect_timeout_ms,
                                security=self.config.security)

    def any_connection(self) -> BrokerConnection:
        """A connected broker: a known node if any, else the bootstrap list in random order.

        Only an idle connection is handed out: a request on a connection with pipelined
        requests outstanding (a producer's) would read -- and drop -- their responses.
        """
        for conn in self._connections.values():
            if conn.connected and not conn.in_flight:
                return conn
        if self._bootstrap_conn is not None and self._bootstrap_conn.connected \
                and not self._bootstrap_conn.in_flight:
            return self._bootstrap_conn
        errors = []
        candidates = list(self.brokers.items()) + [(-1, hp) for hp in self.bootstrap]
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
            f"{','.join(f'{h}:{p}' for h, p in self.bootstrap)}: " + "; ".join(errors))

    def connection(self, node_id: int) -> BrokerConnection:
        conn = self._connections.get(node_id)
        if conn is None:
            if node_id not in self.brokers:
                self.refresh_metadata()
            if node_id not in self.brokers:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
            host, port = self.brokers[node_id]
            conn = self._connections[node_id] = self._new_connection(host, port, node_id)
        return conn.connect()

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

    def retry_policy(self, budget_ms: float | None = None, budget_option: str = "",
                     **kwargs) -> RetryPolicy:
        """The client's retry policy: ``budget_ms`` (default
        ``kafka.default.api.timeout.ms``), ``kafka.retries`` when set,
        ``kafka.retry.backoff.ms`` .. ``kafka.retry.backoff.max.ms``."""
        config = self.config
        if budget_ms is None:
            budget_ms = config.default_api_timeout_ms
            budget_option = budget_option or "kafka.default.api.timeout.ms"
        retries = config.retries
        return RetryPolicy(
            budget_ms, max_attempts=None if retries is None else retries + 1,
            backoff_ms=config.retry_backoff_ms,
            backoff_max_ms=max(config.retry_backoff_max_ms, config.retry_backoff_ms),
            budget_option=budget_option, attempts_option="kafka.retries", **kwargs)

    def retrying(self, operation, what: str, *, topics=None, budget_ms: float | None = None,
                 budget_option: str = ""):
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

    def refresh_metadata(self, topics: list[str] | None = None, *,
                         allow_auto_topic_creation: bool = False) -> dict[str, TopicInfo]:
        """Fetch metadata (all topics when ``topics`` is None) and update the cache.

        ``allow_auto_topic_creation`` asks brokers with ``auto.create.topics.enable`` to
        create the named topics, as the Java producer does (Metadata v4+; v0-3 brokers
        always decide by their own setting)."""
        conn = self.any_connection()
        version = conn.version_for(m.METADATA)
        if topics is None:
            # v0 says "all topics" with an empty array; later versions with null.
            topic_list = [] if version == 0 else None
        else:
            topic_list = [{"name": t} for t in topics]
        # A connection error propagates: the caller's retry policy tries again (elsewhere).
        response = conn.request(m.METADATA, m.METADATA.body(
            topics=topic_list,
            allow_auto_topic_creation=bool(allow_auto_topic_creation and topics)),
            version=version)
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
        self.cluster_id = response.get("cluster_id")
        for node_id in list(self._connections):
            if node_id not in self.brokers or (
                    self._connections[node_id].host, self._connections[node_id].port
            ) != self.brokers[node_id]:
                self._connections.pop(node_id).close()
        seen = {}
        for topic in response["topics"]:
            info = TopicInfo(topic["name"], topic["error_code"],
                             is_internal=topic.get("is_internal", False))
            for part in topic["partitions"]:
                info.partitions[part["partition_index"]] = PartitionInfo(
                    topic["name"], part["partition_index"], part["leader_id"],
                    part.get("leader_epoch", -1), part["error_code"])
            seen[topic["name"]] = info
        now = time.monotonic()
        if topics is None:
            self.topics = {name: info for name, info in seen.items() if info.error_code == 0}
            self._topic_time = {name: now for name in self.topics}
        else:
            for name in topics:
                info = seen.get(name)
                if info is None or info.error_code:
                    self.topics.pop(name, None)
                    self._topic_time.pop(name, None)
                else:
                    self.topics[name] = info
                    self._topic_time[name] = now
        self._metadata_time = now
        return seen

    def partitions_of_topics(self, topics, max_age_ms: float | None = None) -> dict[str, list[int]]:
        """{topic: partition ids} of the ``topics`` that exist, from cached metadata when
        every one of them was fetched less than ``max_age_ms`` ago (default
        ``kafka.metadata.max.age.ms``), else from one Metadata request for all of them.
        A topic the cluster does not have is left out."""
        topics = list(dict.fromkeys(topics))
        if max_age_ms is None:
            max_age_ms = self.config.metadata_max_age_ms
        now = time.monotonic()
        stale = [t for t in topics
                 if t not in self.topics or now - self._topic_time.get(t, 0.0) >= max_age_ms / 1000.0]
        if stale:
            seen = self.refresh_metadata(topics)
            for topic in topics:
                info = seen.get(topic)
                if info is not None and info.error_code and info.error_code != UnknownTopicOrPartition.code:
                    raise error_for_code(info.error_code)(f"Metadata of topic {topic!r}")
        return {t: sorted(self.topics[t].partitions) for t in topics if t in self.topics}

    def topic_partitions(self, topic: str, refresh: bool = False, *,
                         allow_auto_topic_creation: bool = False) -> list[int]:
        """Partition ids of ``topic``; raises the broker's error if it does not exist."""
        if refresh or topic not in self.topics:
            seen = self.refresh_metadata(
                [topic], allow_auto_topic_creation=allow_auto_topic_creation)
            info = seen.get(topic)
            if info is None:
                raise UnknownTopicOrPartition(f"topic {topic!r} not in metadata")
            if info.error_code:
                raise error_for_code(info.error_code)(f"topic {topic!r}")
        return sorted(self.topics[topic].partitions)

    def list_topics(self, include_internal: bool = False) -> list[str]:
        self.refresh_metadata(None)
        return sorted(name for name, info in self.topics.items()
                      if include_internal or not (info.is_internal or name.startswith("__")))

    def match_topics(self, pattern: str) -> list[str]:
        """Topics whose whole name matches the Java-style regex ``pattern``."""
        regex = re.compile(pattern)
        return [t for t in self.list_topics() if regex.fullmatch(t)]

    def leader_for(self, topic: str, partition: int) -> int:
        info = self.topics.get(topic)
        if info is None or partition not in info.partitions:
            self.refresh_metadata([topic])
            info = self.topics.get(topic)
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

    # --- offsets -----------------------------------------------------------------

    def list_offsets(self, requests: dict[tuple[str, int], int],
                     isolation_level: int = READ_UNCOMMITTED, *,
                     missing_ok: bool = False) -> dict[tuple[str, int], tuple[int, int]]:
        """{(topic, partition): timestamp | EARLIEST | LATEST} -> {(t, p): (offset, timestamp)}.

        For a timestamp with no record at or after it, Kafka answers offset -1.
        One request per leader. ``missing_ok``: partitions that fresh metadata no longer
        lists (topic deleted) are left out of the answer instead of retried.
        """
        results: dict[tuple[str, int], tuple[int, int]] = {}
        remaining = dict(requests)

        def attempt():
            if missing_ok:
                unknown = sorted({t for t, p in remaining if t not in self.topics
                                  or p not in self.topics[t].partitions})
                if unknown:
                    self.refresh_metadata(unknown)
                    for t, p in list(remaining):
                        if t not in self.topics or p not in self.topics[t].partitions:
                            log.info("ListOffsets: %s-%d is not in the metadata any more", t, p)
                            remaining.pop((t, p))
            failures = []
            for leader, tps in self.group_by_leader(list(remaining)).items():
                conn = self.connection(leader)
                by_topic = defaultdict(list)
                for topic, partition in tps:
                    by_topic[topic].append({
                        "partition_index": partition, "timestamp": remaining[(topic, partition)]})
                response = conn.request(m.LIST_OFFSETS, m.LIST_OFFSETS.body(
                    replica_id=-1, isolation_level=isolation_level,
                    topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()]))
                for topic in response["topics"]:
                    for part in topic["partitions"]:
                        key = (topic["name"], part["partition_index"])
                        code = part["error_code"]
                        if code:
                            failures.append(error_for_code(code)(f"ListOffsets {key[0]}-{key[1]}"))
                            continue
                        offset = part.get("offset", -1)
                        old = part.get("old_style_offsets") or []
                        if old and offset == -1:
                            offset = old[0]
                        results[key] = (offset, part.get("timestamp", -1))
                        remaining.pop(key, None)
            _raise_for_unanswered(remaining, failures, "ListOffsets")

        if remaining:
            self.retrying(attempt, "ListOffsets",
                          topics=lambda: {topic for topic, _p in remaining})
        return results

    # --- fetch -------------------------------------------------------------------

    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20,
              max_wait_ms: int = 500, min_bytes: int = 1,
              isolation_level: int = READ_UNCOMMITTED) -> dict:
        """One Fetch for one partition from its leader; returns the partition's response dict.

        Broker error codes are returned in ``error_code`` (not raised) so the caller can
        apply its own policy (data loss, retries).
        """
        leader = self.leader_for(topic, partition)
        conn = self.connection(leader)
        # A sessionless full fetch: session id 0 and epoch -1 are the message's defaults.
        response = conn.request(m.FETCH, m.FETCH.body(
            max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max(max_bytes, 1),
            isolation_level=isolation_level,
            topics=[{"topic": topic, "partitions": [{
                "partition": partition, "fetch_offset": offset,
                "partition_max_bytes": max_bytes}]}]))
        if response.get("error_code"):
            raise error_for_code(response["error_code"])(
                f"Fetch {topic}-{partition} at offset {offset}")
        for topic_response in response["responses"]:
            for part in topic_response["partitions"]:
                if part["partition_index"] == partition:
                    return part
        raise UnknownTopicOrPartition(f"Fetch response had no {topic}-{partition}")

    def fetch_watermarks(self, offsets: dict[tuple[str, int], int],
                         isolation_level: int = READ_UNCOMMITTED
                         ) -> dict[tuple[str, int], tuple[int, int, int]]:
        """{(topic, partition): fetch_offset} ->
        {(t, p): (high_watermark, last_stable_offset, log_start_offset)} from one Fetch per
        leader carrying all its partitions (-1 for what the Fetch version does not carry).

        Fetching at an offset at or near the end keeps the answers small (Kafka sends
        nothing at the high watermark; brokers that send the batch around ``fetch_offset``
        anyway send at most that one). min_bytes=0 answers at once; max_wait_ms=1 since
        Tansu answers a 0 ms wait with no partitions at all. A partition missing from an
        answer, or answered with an error, raises: callers must not guess an end.
        """
        results: dict[tuple[str, int], tuple[int, int, int]] = {}
        remaining = dict(offsets)

        def attempt():
            failures = []
            for leader, tps in self.group_by_leader(list(remaining)).items():
                by_topic = defaultdict(list)
                for topic, partition in tps:
                    by_topic[topic].append({
                        "partition": partition,
                        "fetch_offset": max(remaining[(topic, partition)], 0),
                        "partition_max_bytes": 1})
                response = self.connection(leader).request(m.FETCH, m.FETCH.body(
                    max_wait_ms=1, min_bytes=0, max_bytes=1, isolation_level=isolation_level,
                    topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()]))
                if response.get("error_code"):
                    raise error_for_code(response["error_code"])(f"Fetch from broker {leader}")
                for topic_response in response["responses"]:
                    for part in topic_response["partitions"]:
                        key = (topic_response["topic"], part["partition_index"])
                        # OFFSET_OUT_OF_RANGE still carries the high watermark.
                        if part["error_code"] and part["error_code"] != OffsetOutOfRange.code:
                            failures.append(error_for_code(part["error_code"])(
                                f"Fetch {key[0]}-{key[1]}"))
                            continue
                        if key in remaining:
                            results[key] = (part["high_watermark"],
                                            part.get("last_stable_offset", -1),
                                            part.get("log_start_offset", -1))
                            remaining.pop(key)
            _raise_for_unanswered(remaining, failures, "Fetch")

        if remaining:
            self.retrying(attempt, "Fetch (high watermarks)",
                          topics=lambda: {topic for topic, _p in remaining})
        return results

    # --- groups ------------------------------------------------------------------

    def find_coordinator(self, key: str, key_type: int = GROUP_KEY_TYPE) -> BrokerConnection:
        """The connection to the coordinator of ``key``: a group id, or a transactional id
        with ``key_type`` 1. One FindCoordinator request unless the answer is cached; no
        retries of its own (:meth:`coordinator_call` retries the whole operation)."""
        node = self._coordinators.get((key_type, key))
        if node is None:
            response = self.any_connection().request(m.FIND_COORDINATOR, m.FIND_COORDINATOR.body(
                key=key, key_type=key_type, coordinator_keys=[key]))
            # v0-3 answer at the top level, v4+ in a list of coordinators.
            entry = response["coordinators"][0] if response.get("coordinators") else response
            if entry["error_code"]:
                kind = " (transaction)" if key_type == TRANSACTION_KEY_TYPE else ""
                raise error_for_code(entry["error_code"])(f"FindCoordinator{kind} {key!r}")
            node = entry["node_id"]
            self.brokers.setdefault(node, (entry["host"], entry["port"]))
            self._coordinators[(key_type, key)] = node
        return self.connection(node)

    def coordinator_call(self, key: str, call, what: str, *, key_type: int = GROUP_KEY_TYPE,
                         policy: RetryPolicy | None = None):
        """``call(connection)`` at the coordinator of ``key``, under ``policy`` (default:
        the client's). A coordinator that went away, moved or is still loading is looked
        up again before the next attempt."""
        def attempt():
            try:
                return call(self.find_coordinator(key, key_type))
            except (KafkaConnectionError, KafkaTimeoutError, CoordinatorLoadInProgress,
                    CoordinatorNotAvailable, NotCoordinator):
                self._coordinators.pop((key_type, key), None)
                raise

        policy = policy or self.retry_policy()
        try:
            return policy.run(attempt, what, refresh=lambda _exc: self.refresh_metadata([]))
        finally:
            self.retry_stats_add(policy)

    def commit_offsets(self, group_id: str, offsets: dict[tuple[str, int], int],
                       metadata: str = "") -> None:
        """OffsetCommit outside any group generation (generation -1, empty member id),
        the way standalone consumers and Spark-managed offsets commit."""
        by_topic = defaultdict(list)
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic[topic].append({"partition_index": partition, "committed_offset": offset,
                                    "committed_metadata": metadata})
        # Generation -1, no member, no leader epoch, broker-side retention: the defaults.
        body = m.OFFSET_COMMIT.body(
            group_id=group_id,
            topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()])

        def call(conn):
            response = conn.request(m.OFFSET_COMMIT, body)
            for topic in response["topics"]:
                for part in topic["partitions"]:
                    if part["error_code"]:
                        raise error_for_code(part["error_code"])(
                            f"OffsetCommit {group_id!r} {topic['name']}-{part['partition_index']}")

        self.coordinator_call(group_id, call, "OffsetCommit")

    def fetch_committed(self, group_id: str, topic_partitions) -> dict[tuple[str, int], int]:
        """Committed offsets of ``group_id``; partitions with none are absent."""
        by_topic = defaultdict(list)
        for topic, partition in topic_partitions:
            by_topic[topic].append(partition)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        # v0-7 name the group at the top, v8+ in a list of groups; the codec sends
        # whichever the negotiated version has.
        body = m.OFFSET_FETCH.body(group_id=group_id, topics=topics,
                                   groups=[{"group_id": group_id, "topics": topics}])

        def call(conn):
            response = conn.request(m.OFFSET_FETCH, body)
            if response.get("groups"):
                group = response["groups"][0]
                code, topic_list = group["error_code"], group["topics"]
            else:
                code, topic_list = response.get("error_code", 0), response["topics"]
            if code:
                raise error_for_code(code)(f"OffsetFetch {group_id!r}")
            result = {}
            for topic in topic_list:
                for part in topic["partitions"]:
                    if part["error_code"]:
                        raise error_for_code(part["error_code"])(
                            f"OffsetFetch {group_id!r} {topic['name']}-{part['partition_index']}")
                    if part["committed_offset"] >= 0:
                        result[(topic["name"], part["partition_index"])] = part["committed_offset"]
            return result

        return self.coordinator_call(group_id, call, "OffsetFetch")

    # --- topics ------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     timeout_ms: int | None = None) -> None:
        """CreateTopics through any broker (it forwards to the controller); an existing
        topic is an error, as in the admin API."""
        conn = self.any_connection()
        response = conn.request(m.CREATE_TOPICS, m.CREATE_TOPICS.body(
            topics=[{"name": name, "num_partitions": partitions,
                     "replication_factor": replication_factor}],
            timeout_ms=self.config.request_timeout_ms if timeout_ms is None else timeout_ms))
        for topic in response["topics"]:
            if topic["error_code"]:
                raise error_for_code(topic["error_code"])(
                    f"CreateTopics {name!r}: {topic.get('error_message') or ''}".rstrip(": "))
        self.refresh_metadata([name])

    # --- producing ---------------------------------------------------------------

    def init_producer_id(self, transactional_id: str | None = None,
                         transaction_timeout_ms: int = 60000) -> tuple[int, int]:
        def attempt():
            conn = self.any_connection()
            response = conn.request(m.INIT_PRODUCER_ID, m.INIT_PRODUCER_ID.body(
                transactional_id=transactional_id,
                transaction_timeout_ms=transaction_timeout_ms))
            if response["error_code"]:
                raise error_for_code(response["error_code"])("InitProducerId")
            return response["producer_id"], response["producer_epoch"]

        return self.retrying(attempt, "InitProducerId")


__all__ = ["KafkaClient", "ClientConfig", "PartitionInfo", "TopicInfo", "EARLIEST", "LATEST",
           "READ_COMMITTED", "READ_UNCOMMITTED", "KafkaError"]


def _raise_for_unanswered(remaining: dict, failures: list, api: str) -> None:
    """After one round of per-leader requests: nothing left, or raise what a retry should
    see -- a retriable failure first (the policy retries it), else UNKNOWN_TOPIC_OR_PARTITION
    for partitions no answer named, else the first fatal failure."""
    if not remaining:
        return
    retriable = [f for f in failures if f.retriable]
    if retriable or not failures:
        raise retriable[0] if retriable else UnknownTopicOrPartition(
            f"no {api} answer for {sorted(remaining)}")
    raise failures[0]
