"""The cluster as its Metadata answers described it: the brokers, each topic's partitions
and their leaders, and when each topic was learnt. No I/O: ``cluster.KafkaClient`` asks,
this remembers and answers from memory while it is fresh enough.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..errors import acl_hint
from ..protocol.errors import error_for_code


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


def metadata_error(code: int, topic: str) -> Exception:
    """The error a Metadata answer gave for ``topic``, naming it (and the ACL it lacks)."""
    return error_for_code(code)(
        f"Metadata of topic {topic!r}{acl_hint(code, 'Metadata', topic=topic)}"
    )


class MetadataCache:
    """What the last Metadata answers said: ``brokers`` ({node id: (host, port)}),
    ``topics`` (the existing ones, {name: TopicInfo}) and ``cluster_id``."""

    def __init__(self):
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self._topic_time: dict[str, float] = {}  # when each topic's metadata was fetched

    def has_partition(self, topic: str, partition: int) -> bool:
        info = self.topics.get(topic)
        return info is not None and partition in info.partitions

    def stale(self, topics, max_age_ms: float) -> list[str]:
        """The ``topics`` not known, or fetched ``max_age_ms`` ago or longer."""
        now = time.monotonic()
        return [
            t
            for t in topics
            if t not in self.topics or now - self._topic_time.get(t, 0.0) >= max_age_ms / 1000.0
        ]

    def update(self, response: dict, topics: list[str] | None) -> dict[str, TopicInfo]:
        """Take in the answer to a Metadata request for ``topics`` (None: all of them):
        every topic it names, {name: TopicInfo}, errors included, is returned."""
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in response["brokers"]}
        self.cluster_id = response.get("cluster_id")
        seen = {}
        for topic in response["topics"]:
            info = TopicInfo(
                topic["name"], topic["error_code"], is_internal=topic.get("is_internal", False)
            )
            for part in topic["partitions"]:
                info.partitions[part["partition_index"]] = PartitionInfo(
                    topic["name"],
                    part["partition_index"],
                    part["leader_id"],
                    part.get("leader_epoch", -1),
                    part["error_code"],
                )
            seen[topic["name"]] = info
        now = time.monotonic()
        if topics is None:
            self.topics = {name: info for name, info in seen.items() if info.error_code == 0}
            self._topic_time = {name: now for name in self.topics}
        else:
            for name in topics:
                found = seen.get(name)
                if found is None or found.error_code:
                    self.topics.pop(name, None)
                    self._topic_time.pop(name, None)
                else:
                    self.topics[name] = found
                    self._topic_time[name] = now
        return seen
