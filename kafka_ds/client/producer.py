"""Producing encoded record batches: pipelined Produce requests per leader, retries
with metadata refresh, and the idempotent producer's sequence numbers.

The caller (one Spark write task) encodes record batches itself -- column-wise, from
Arrow -- after asking :meth:`Producer.batch_identity` for the producer id, epoch and
base sequence that go into the batch header. :meth:`Producer.send` queues the bytes;
the producer groups the queued batches by partition leader into Produce requests (at
most one batch per partition per request, at most ``max_request_size`` bytes, at
least one batch) and keeps up to ``max_in_flight`` requests outstanding per broker.
:meth:`Producer.flush` returns once every batch is acknowledged (per ``acks``) or
raises the first fatal error.

Retries resend the very same bytes, sequence included, so with idempotence a batch the
broker already appended (but whose answer was lost) is recognised as a duplicate.

Here is the send pump (requests out, answers in, connection losses). The per-partition
queues and sequence numbers are in :mod:`.producer_batches`; what an answer or an error
means for a batch (acknowledge, retry, fail) in :mod:`.producer_outcomes`.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    ProduceError,
    RetriableError,
)
from ..protocol.messages_cluster import METADATA
from ..protocol.messages_produce_fetch import PRODUCE
from .config import ProducerConfig
from .connection import BrokerConnection, Pending
from .producer_batches import PartitionQueues, PartitionResult, PartitionState, ProducerBatch
from .producer_outcomes import BatchOutcomes, ProducerStats

log = logging.getLogger(__name__)


@dataclass
class _InFlight:
    leader: int
    conn: BrokerConnection
    pending: Pending
    batches: dict  # (topic, partition) -> ProducerBatch
    sent_at: float


class Producer:
    """Sends encoded batches for one writer (single-threaded, like its ``KafkaClient``)."""

    def __init__(self, client, config: ProducerConfig | None = None):
        self.client = client
        self.config = config or ProducerConfig()
        self.producer_id = -1
        self.producer_epoch = -1
        self.stats = ProducerStats()
        self._partitions = PartitionQueues()
        self._in_flight: dict[int, deque[_InFlight]] = {}
        self._acks0_leaders: set[int] = set()  # brokers sent acks=0 requests since flush
        self._rotation = 0
        self._outcomes = BatchOutcomes(self.config, self._partitions, self.stats)

    # --- identity ------------------------------------------------------------------

    def use_transaction(self, producer_id: int, producer_epoch: int) -> None:
        """Produce as the transactional producer (id, epoch) InitProducerId gave a
        :class:`~kafka_ds.client.transactions.Transaction` (instead of our own id)."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch

    def start(self) -> None:
        """InitProducerId (once) when idempotent."""
        if self.config.idempotent and self.producer_id < 0:
            self.producer_id, self.producer_epoch = self.client.init_producer_id()
            log.debug("producer id %d epoch %d", self.producer_id, self.producer_epoch)

    def batch_identity(self, topic: str, partition: int, record_count: int) -> tuple[int, int, int]:
        """(producer_id, producer_epoch, base_sequence) for the next batch of ``partition``.

        The batch built with it must be the next one :meth:`send` gets for that
        partition (``send`` moves the sequence on). Without idempotence: ``(-1, -1, -1)``.
        """
        if not self.config.idempotent:
            return -1, -1, -1
        self.start()
        sequence = self._partitions.state(topic, partition).next_sequence
        return self.producer_id, self.producer_epoch, sequence

    # --- public API ------------------------------------------------------------------

    def send(
        self,
        topic: str,
        partition: int,
        data: bytes | memoryview,
        record_count: int,
        *,
        base_sequence: int = -1,
        rows: np.ndarray | None = None,
        describe_rows=None,
    ) -> None:
        """Queue one encoded batch and send what can be sent without waiting (blocks only
        when a broker already has ``max_in_flight`` requests outstanding)."""
        if len(data) > self.config.max_request_size:
            # Never happens for batches built within max_request_size; a guard for callers.
            raise ProduceError(
                f"record batch of {len(data)} bytes for topic '{topic}' partition {partition} "
                f"is larger than 'kafka.max.request.size' ({self.config.max_request_size})",
                topic=topic,
                partition=partition,
            )
        self._partitions.add(
            topic,
            partition,
            data,
            record_count,
            base_sequence,
            idempotent=self.config.idempotent,
            delivery_timeout_ms=self.config.delivery_timeout_ms,
            rows=rows,
            describe_rows=describe_rows,
        )
        self._pump(drain=False)

    def flush(self) -> None:
        """Send everything queued and wait until every batch is acknowledged."""
        self._pump(drain=True)
        if self.config.acks == 0:
            self._barrier()

    def _barrier(self) -> None:
        """acks=0 gets no answers, and a broker may drop requests still unread when the
        connection closes (Tansu does). Brokers handle one connection's requests in
        order, so the answer to one more request on each connection used says every
        Produce before it was handled. Costs one round trip per broker per flush."""
        for leader in list(self._acks0_leaders):
            try:
                self.client.connection(leader).request(METADATA, {"topics": []})
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.warning(
                    "acks=0: could not confirm broker %d handled the writes: %s", leader, exc
                )
        self._acks0_leaders.clear()

    def results(self) -> dict[tuple[str, int], PartitionResult]:
        return self._partitions.results()

    def pending_batches(self) -> int:
        return self._partitions.pending()

    # --- the send/receive loop ---------------------------------------------------------

    def _pump(self, drain: bool) -> None:
        while True:
            blocked = self._send_ready()
            in_flight = [q[0] for q in self._in_flight.values() if q]
            if drain:
                if not in_flight:
                    waiting = self._partitions.waiting()
                    if not waiting:
                        return
                    # Everything left waits for a retry back-off (or a leader): sleep.
                    pause = min(b.retry_at for b in waiting) - time.monotonic()
                    time.sleep(min(max(pause, 0.005), 1.0))
                    continue
                oldest = min(in_flight, key=lambda r: r.sent_at)
                self._receive(oldest.leader)
            else:
                # Make room on brokers whose pipeline is full while batches wait for them.
                if not blocked:
                    return
                self._receive(blocked[0])

    def _send_ready(self) -> list[int]:
        """Send the batches that may go now. Returns the leaders that are at
        ``max_in_flight`` while batches for them still wait."""
        if self._outcomes.refresh_needed:
            self._refresh_metadata()
        now = time.monotonic()
        by_leader: dict[int, list[PartitionState]] = {}
        for (topic, partition), state in self._partitions.items():
            if not state.queue:
                continue
            head = state.head()
            if head.retry_at > now:
                continue
            try:
                leader = self.client.leader_for(topic, partition)
            except RetriableError as exc:
                self._outcomes.retry_head(state, exc)
                continue
            except KafkaError as exc:
                raise ProduceError(
                    f"cannot produce to {head.where()}: {exc}",
                    topic=topic,
                    partition=partition,
                    cause=exc,
                ) from exc
            by_leader.setdefault(leader, []).append(state)
        blocked = []
        self._rotation += 1
        for leader, states in by_leader.items():
            queue = self._in_flight.setdefault(leader, deque())
            # Rotate the start so no partition is always last when requests fill up.
            start = self._rotation % len(states)
            states = states[start:] + states[:start]
            while True:
                ready = [
                    s
                    for s in states
                    if s.queue
                    and s.head().retry_at <= now
                    and s.may_send_head(self.config.idempotent)
                ]
                if not ready:
                    break
                if len(queue) >= self.config.max_in_flight:
                    blocked.append(leader)
                    break
                if not self._send_request(leader, ready):
                    break  # the connection failed; its batches were requeued
        return blocked

    def _send_request(self, leader: int, ready: list[PartitionState]) -> bool:
        batches: dict[tuple[str, int], ProducerBatch] = {}
        size = 0
        for state in ready:
            batch = state.head()
            if batches and size + len(batch.data) > self.config.max_request_size:
                continue
            state.pop_head()
            batches[(batch.topic, batch.partition)] = batch
            size += len(batch.data)
        by_topic: dict[str, list] = {}
        for (topic, partition), batch in batches.items():
            by_topic.setdefault(topic, []).append({"index": partition, "records": batch.data})
        body = PRODUCE.body(
            transactional_id=self.config.transactional_id,
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            topic_data=[{"name": t, "partition_data": parts} for t, parts in by_topic.items()],
        )
        expects_response = self.config.acks != 0
        try:
            conn = self.client.connection(leader)
            pending = conn.send(PRODUCE, body, expects_response=expects_response)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            # The connection is gone, and with it every request still in flight on it.
            self.stats.connection_losses += 1
            self._lose_in_flight(leader, exc)
            for batch in batches.values():
                self._outcomes.retry(batch, exc)
            return False
        self.stats.requests += 1
        self.stats.bytes_sent += size
        if not expects_response:
            # acks=0: the broker never answers; a batch counts as delivered once written.
            self._acks0_leaders.add(leader)
            for batch in batches.values():
                self._partitions.acknowledge(batch, -1)
            return True
        self._in_flight[leader].append(_InFlight(leader, conn, pending, batches, time.monotonic()))
        return True

    def _receive(self, leader: int) -> None:
        queue = self._in_flight[leader]
        request = queue.popleft()
        if not request.conn.is_waiting(request.pending):
            # Closed (or closed and reopened) since: the answer is lost.
            exc = KafkaConnectionError(
                f"connection to broker {leader} was reset before its Produce response arrived"
            )
            self._requeue_request(request, exc)
            return
        try:
            response = request.conn.receive(request.pending)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            # Whether the broker appended these batches is unknown: resend them (same
            # sequence numbers, so an idempotent broker drops what it already has).
            self.stats.connection_losses += 1
            self._requeue_request(request, exc)
            self._lose_in_flight(leader, exc)
            return
        assert response is not None  # in flight: sent expecting an answer
        self._outcomes.handle_response(
            request.leader, request.batches, response, self.producer_id, self.producer_epoch
        )

    def _lose_in_flight(self, leader: int, exc: Exception) -> None:
        queue = self._in_flight.get(leader)
        while queue:
            self._requeue_request(queue.popleft(), exc)

    def _requeue_request(self, request: _InFlight, exc: Exception) -> None:
        for batch in request.batches.values():
            self._outcomes.retry(batch, exc)

    def _refresh_metadata(self) -> None:
        topics = self._partitions.active_topics()
        if not topics:
            self._outcomes.refresh_needed = False
            return
        try:
            self.client.refresh_metadata(topics)
            self.stats.metadata_refreshes += 1
            self._outcomes.refresh_needed = False
        except (KafkaConnectionError, KafkaTimeoutError, KafkaProtocolError) as exc:
            # Try again before the next send; the batches' back-off paces this.
            log.info("metadata refresh failed: %s", exc)
