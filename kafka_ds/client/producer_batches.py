"""One writer's batches, partition by partition: the idempotent producer's sequence
numbers, the send order, the queue of batches waiting to be sent (or sent again) and
what each partition received. Bookkeeping only, no I/O: the
:class:`~kafka_ds.client.producer.Producer` sends, :mod:`.producer_outcomes` decides
what an answer means.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

from ..errors import KafkaProtocolError

SEQUENCE_MODULUS = 1 << 31  # sequences wrap from Int32.MAX to 0, as in the Java client


class ProducerBatch:
    """One encoded record batch on its way to one partition."""

    __slots__ = (
        "topic",
        "partition",
        "data",
        "record_count",
        "base_sequence",
        "ordinal",
        "created",
        "deadline",
        "attempts",
        "retry_at",
        "last_error",
        "rows",
        "describe_rows",
    )

    def __init__(
        self,
        topic,
        partition,
        data,
        record_count,
        base_sequence,
        ordinal,
        created,
        deadline,
        rows,
        describe_rows,
    ):
        self.topic = topic
        self.partition = partition
        self.data = data
        self.record_count = record_count
        self.base_sequence = base_sequence
        self.ordinal = ordinal  # send order within the partition
        self.created = created
        self.deadline = deadline
        self.attempts = 0  # failed attempts so far
        self.retry_at = 0.0
        self.last_error: Exception | None = None
        self.rows = rows  # input row positions of the records, or None
        self.describe_rows = describe_rows

    def where(self, index: int | None = None) -> str:
        """Topic, partition and the input rows, for error messages."""
        text = f"topic '{self.topic}' partition {self.partition}"
        if self.rows is not None and len(self.rows):
            if index is not None and 0 <= index < len(self.rows):
                rows = self.rows[index : index + 1]
            else:
                rows = self.rows
            text += ", " + self.describe_rows(rows)
        return text


@dataclass
class PartitionResult:
    """What one partition received: counts and the offsets the broker assigned."""

    records: int = 0
    batches: int = 0
    first_offset: int = -1  # -1: unknown (acks=0, or only duplicates acknowledged)
    last_offset: int = -1
    records_without_offset: int = 0

    def add(self, base_offset: int, count: int) -> None:
        self.records += count
        self.batches += 1
        if base_offset < 0:
            self.records_without_offset += count
            return
        last = base_offset + count - 1
        if self.first_offset < 0 or base_offset < self.first_offset:
            self.first_offset = base_offset
        if last > self.last_offset:
            self.last_offset = last


class PartitionState:
    __slots__ = ("queue", "unacked", "next_sequence", "next_ordinal", "result")

    def __init__(self):
        self.queue: list = []  # heap of (ordinal, batch) waiting to be sent
        self.unacked: set = set()  # ordinals sent or queued, not yet acknowledged
        self.next_sequence = 0
        self.next_ordinal = 0
        self.result = PartitionResult()

    def head(self) -> ProducerBatch:
        """The batch to send next (the queue is not empty)."""
        return self.queue[0][1]

    def pop_head(self) -> ProducerBatch:
        return heapq.heappop(self.queue)[1]

    def may_send_head(self, idempotent: bool) -> bool:
        """Whether the head may go now. A broker that has no state of this producer id on
        the partition takes its batch whatever its sequence (KIP-360's unknown producer),
        so a later batch sent while the first one is refused retriably (a new topic's
        NOT_LEADER_OR_FOLLOWER) would be appended before it, and the first one then
        refused as out of order (seen on Apache Kafka 4.4). Until the partition's first
        batch is acknowledged, nothing else of the partition is in flight with it."""
        if not idempotent or self.result.batches:
            return True
        return len(self.unacked) == len(self.queue)  # nothing in flight


def _no_rows(_rows) -> str:
    return ""


class PartitionQueues:
    """The :class:`PartitionState` of every partition one producer writes to."""

    def __init__(self):
        self._states: dict[tuple[str, int], PartitionState] = {}

    def state(self, topic: str, partition: int) -> PartitionState:
        key = (topic, partition)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = PartitionState()
        return state

    def items(self):
        """``((topic, partition), state)`` pairs."""
        return self._states.items()

    def add(
        self,
        topic: str,
        partition: int,
        data: bytes | memoryview,
        record_count: int,
        base_sequence: int,
        *,
        idempotent: bool,
        delivery_timeout_ms: int,
        rows=None,
        describe_rows=None,
    ) -> ProducerBatch:
        """Queue a new batch as the partition's next (its sequence must be the next)."""
        state = self.state(topic, partition)
        if idempotent:
            if base_sequence != state.next_sequence:
                raise KafkaProtocolError(
                    f"batch for topic '{topic}' partition {partition} has base sequence "
                    f"{base_sequence}, the partition's next sequence is {state.next_sequence}"
                )
            state.next_sequence = (base_sequence + record_count) % SEQUENCE_MODULUS
        now = time.monotonic()
        batch = ProducerBatch(
            topic,
            partition,
            data,
            record_count,
            base_sequence,
            state.next_ordinal,
            now,
            now + delivery_timeout_ms / 1000.0,
            rows,
            describe_rows or _no_rows,
        )
        state.next_ordinal += 1
        state.unacked.add(batch.ordinal)
        heapq.heappush(state.queue, (batch.ordinal, batch))
        return batch

    def requeue(self, batch: ProducerBatch) -> None:
        """Back in its partition's queue, in its send order (before later batches)."""
        heapq.heappush(self._states[(batch.topic, batch.partition)].queue, (batch.ordinal, batch))

    def acknowledge(self, batch: ProducerBatch, base_offset: int) -> None:
        state = self._states[(batch.topic, batch.partition)]
        state.unacked.discard(batch.ordinal)
        state.result.add(base_offset, batch.record_count)
        batch.data = b""  # the bytes are no longer needed

    def has_earlier_unacked(self, batch: ProducerBatch) -> bool:
        """Whether a batch sent before ``batch`` to its partition is not acknowledged."""
        unacked = self._states[(batch.topic, batch.partition)].unacked
        return any(o < batch.ordinal for o in unacked)

    def waiting(self) -> list[ProducerBatch]:
        """Every queued batch (waiting for its first send, a retry, or a leader)."""
        return [b for s in self._states.values() for _o, b in s.queue]

    def active_topics(self) -> list[str]:
        """Topics with batches queued or not yet acknowledged."""
        return sorted({t for (t, _p), s in self._states.items() if s.queue or s.unacked})

    def results(self) -> dict[tuple[str, int], PartitionResult]:
        return {tp: state.result for tp, state in self._states.items() if state.result.batches}

    def pending(self) -> int:
        return sum(len(state.unacked) for state in self._states.values())
