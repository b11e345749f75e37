"""Reading partitions from their leaders: ListOffsets and Fetch.

Functions of a :class:`~kafka_ds.client.cluster.KafkaClient` (which offers them as its
methods too: ``client.list_offsets(...)``). They use only the client's routing
(``leader_for``, ``group_by_leader``, ``connection``), its metadata cache and its retry
policy (``retrying``), so the client itself stays the cluster view.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from ..protocol.errors import OffsetOutOfRange, UnknownTopicOrPartition, error_for_code
from ..protocol.messages_produce_fetch import FETCH, LIST_OFFSETS

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def list_offsets(
    client,
    requests: dict[tuple[str, int], int],
    isolation_level: int = READ_UNCOMMITTED,
    *,
    missing_ok: bool = False,
) -> dict[tuple[str, int], tuple[int, int]]:
    """{(topic, partition): timestamp | EARLIEST | LATEST} -> {(t, p): (offset, timestamp)}.

    For a timestamp with no record at or after it, Kafka answers offset -1.
    One request per leader. ``missing_ok``: partitions that fresh metadata no longer
    lists (topic deleted) are left out of the answer instead of retried.
    """
    results: dict[tuple[str, int], tuple[int, int]] = {}
    remaining = dict(requests)

    def attempt():
        if missing_ok:
            _drop_missing(client, remaining, "ListOffsets")
        failures = []
        for leader, tps in client.group_by_leader(list(remaining)).items():
            conn = client.connection(leader)
            by_topic = defaultdict(list)
            for topic, partition in tps:
                by_topic[topic].append(
                    {"partition_index": partition, "timestamp": remaining[(topic, partition)]}
                )
            response = conn.request(
                LIST_OFFSETS,
                LIST_OFFSETS.body(
                    replica_id=-1,
                    isolation_level=isolation_level,
                    topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                ),
            )
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
        client.retrying(attempt, "ListOffsets", topics=lambda: {topic for topic, _p in remaining})
    return results


def _drop_missing(client, remaining: dict, api: str) -> None:
    """Leave out of ``remaining`` the partitions the metadata does not list (refreshed
    first for those): a topic deleted, a partition gone. Retries refresh the metadata of
    partitions whose leader answered UNKNOWN_TOPIC_OR_PARTITION, so a deletion the
    broker reported is seen here at the next attempt."""
    unknown = sorted({t for t, p in remaining if not client.metadata.has_partition(t, p)})
    if unknown:
        client.refresh_metadata(unknown)
        for t, p in list(remaining):
            if not client.metadata.has_partition(t, p):
                log.info("%s: %s-%d is not in the metadata any more", api, t, p)
                remaining.pop((t, p))


# --- fetch -------------------------------------------------------------------


def fetch(
    client,
    topic: str,
    partition: int,
    offset: int,
    *,
    max_bytes: int = 1 << 20,
    max_wait_ms: int = 500,
    min_bytes: int = 1,
    isolation_level: int = READ_UNCOMMITTED,
) -> dict:
    """One Fetch for one partition from its leader; returns the partition's response dict.

    Broker error codes are returned in ``error_code`` (not raised) so the caller can
    apply its own policy (data loss, retries).
    """
    leader = client.leader_for(topic, partition)
    conn = client.connection(leader)
    # A sessionless full fetch: session id 0 and epoch -1 are the message's defaults.
    response = conn.request(
        FETCH,
        FETCH.body(
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=max(max_bytes, 1),
            isolation_level=isolation_level,
            topics=[
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "fetch_offset": offset,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
        ),
    )
    if response.get("error_code"):
        raise error_for_code(response["error_code"])(
            f"Fetch {topic}-{partition} at offset {offset}"
        )
    for topic_response in response["responses"]:
        for part in topic_response["partitions"]:
            if part["partition_index"] == partition:
                return part
    raise UnknownTopicOrPartition(f"Fetch response had no {topic}-{partition}")


def fetch_watermarks(
    client,
    offsets: dict[tuple[str, int], int],
    isolation_level: int = READ_UNCOMMITTED,
    *,
    missing_ok: bool = False,
) -> dict[tuple[str, int], tuple[int, int, int]]:
    """{(topic, partition): fetch_offset} ->
    {(t, p): (high_watermark, last_stable_offset, log_start_offset)} from one Fetch per
    leader carrying all its partitions (-1 for what the Fetch version does not carry).

    Fetching at an offset at or near the end keeps the answers small (Kafka sends
    nothing at the high watermark; brokers that send the batch around ``fetch_offset``
    anyway send at most that one). min_bytes=0 answers at once; max_wait_ms=1 since
    Tansu answers a 0 ms wait with no partitions at all. A partition missing from an
    answer, or answered with an error, raises: callers must not guess an end.
    ``missing_ok``: partitions that fresh metadata no longer lists (topic deleted) are left
    out of the answer instead of retried, as in :func:`list_offsets`.
    """
    results: dict[tuple[str, int], tuple[int, int, int]] = {}
    remaining = dict(offsets)

    def attempt():
        if missing_ok:
            _drop_missing(client, remaining, "Fetch")
        failures = []
        for leader, tps in client.group_by_leader(list(remaining)).items():
            by_topic = defaultdict(list)
            for topic, partition in tps:
                by_topic[topic].append(
                    {
                        "partition": partition,
                        "fetch_offset": max(remaining[(topic, partition)], 0),
                        "partition_max_bytes": 1,
                    }
                )
            response = client.connection(leader).request(
                FETCH,
                FETCH.body(
                    max_wait_ms=1,
                    min_bytes=0,
                    max_bytes=1,
                    isolation_level=isolation_level,
                    topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                ),
            )
            if response.get("error_code"):
                raise error_for_code(response["error_code"])(f"Fetch from broker {leader}")
            for topic_response in response["responses"]:
                for part in topic_response["partitions"]:
                    key = (topic_response["topic"], part["partition_index"])
                    # OFFSET_OUT_OF_RANGE still carries the high watermark.
                    if part["error_code"] and part["error_code"] != OffsetOutOfRange.code:
                        failures.append(
                            error_for_code(part["error_code"])(f"Fetch {key[0]}-{key[1]}")
                        )
                        continue
                    if key in remaining:
                        results[key] = (
                            part["high_watermark"],
                            part.get("last_stable_offset", -1),
                            part.get("log_start_offset", -1),
                        )
                        remaining.pop(key)
        _raise_for_unanswered(remaining, failures, "Fetch")

    if remaining:
        client.retrying(
            attempt, "Fetch (high watermarks)", topics=lambda: {topic for topic, _p in remaining}
        )
    return results


def _raise_for_unanswered(remaining: dict, failures: list, api: str) -> None:
    """After one round of per-leader requests: nothing left, or raise what a retry should
    see -- a retriable failure first (the policy retries it), else UNKNOWN_TOPIC_OR_PARTITION
    for partitions no answer named, else the first fatal failure."""
    if not remaining:
        return
    retriable = [f for f in failures if f.retriable]
    if retriable or not failures:
        raise (
            retriable[0]
            if retriable
            else UnknownTopicOrPartition(f"no {api} answer for {sorted(remaining)}")
        )
    raise failures[0]
