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
"""
from __future__ import annotations

import heapq
import logging
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from ..protocol import messages as m
from ..protocol.errors import (
    DuplicateSequenceNumber,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
    MessageTooLarge,
    OutOfOrderSequenceNumber,
    ProduceError,
    RetriableError,
    error_for_code,
)
from .config import ProducerConfig  # noqa: F401  (defined with the other settings)
from .retry import RetryPolicy, needs_metadata_refresh

log = logging.getLogger(__name__)

SEQUENCE_MODULUS = 1 << 31   # sequences wrap from Int32.MAX to 0, as in the Java client


class ProducerBatch:
    """One encoded record batch on its way to one partition."""

    __slots__ = ("topic", "partition", "data", "record_count", "base_sequence", "ordinal",
                 "created", "deadline", "attempts", "retry_at", "last_error", "rows",
                 "describe_rows")

    def __init__(self, topic, partition, data, record_count, base_sequence, ordinal, created,
                 deadline, rows, describe_rows):
        self.topic = topic
        self.partition = partition
        self.data = data
        self.record_count = record_count
        self.base_sequence = base_sequence
        self.ordinal = ordinal           # send order within the partition
        self.created = created
        self.deadline = deadline
        self.attempts = 0                # failed attempts so far
        self.retry_at = 0.0
        self.last_error: Exception | None = None
        self.rows = rows                 # input row positions of the records, or None
        self.describe_rows = describe_rows

    def where(self, index: int | None = None) -> str:
        """Topic, partition and the input rows, for error messages."""
        text = f"topic '{self.topic}' partition {self.partition}"
        if self.rows is not None and len(self.rows):
            if index is not None and 0 <= index < len(self.rows):
                rows = self.rows[index:index + 1]
            else:
                rows = self.rows
            text += ", " + self.describe_rows(rows)
        return text


@dataclass
class PartitionResult:
    """What one partition received: counts and the offsets the broker assigned."""

    records: int = 0
    batches: int = 0
    first_offset: int = -1      # -1: unknown (acks=0, or only duplicates acknowledged)
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


class _PartitionState:
    __slots__ = ("queue", "unacked", "next_sequence", "next_ordinal", "result")

    def __init__(self):
        self.queue: list = []          # heap of (ordinal, batch) waiting to be sent
        self.unacked: set = set()      # ordinals sent or queued, not yet acknowledged
        self.next_sequence = 0
        self.next_ordinal = 0
        self.result = PartitionResult()


@dataclass
class _InFlight:
    leader: int
    conn: object
    pending: object
    batches: dict           # (topic, partition) -> ProducerBatch
    sent_at: float


@dataclass
class ProducerStats:
    requests: int = 0
    bytes_sent: int = 0
    retries: int = 0
    connection_losses: int = 0
    duplicates: int = 0
    metadata_refreshes: int = 0
    errors: dict = field(default_factory=dict)   # error name -> count of retried batches


def _no_rows(_rows) -> str:
    return ""


class Producer:
    """Sends encoded batches for one writer (single-threaded, like its ``KafkaClient``)."""

    def __init__(self, client, config: ProducerConfig | None = None):
        self.client = client
        self.config = config or ProducerConfig()
        self.producer_id = -1
        self.producer_epoch = -1
        self.stats = ProducerStats()
        self._partitions: dict[tuple[str, int], _PartitionState] = {}
        self._in_flight: dict[int, deque[_InFlight]] = {}
        self._acks0_leaders: set[int] = set()   # brokers sent acks=0 requests since flush
        self._refresh_needed = False
        self._rotation = 0
        # The shared policy's back-off (exponential, jittered); the limits are per batch:
        # its delivery deadline and kafka.retries, checked in _retry.
        self._policy = RetryPolicy(self.config.delivery_timeout_ms,
                                   backoff_ms=self.config.retry_backoff_ms,
                                   backoff_max_ms=self.config.retry_backoff_max_ms)

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

    def _state(self, topic: str, partition: int) -> _PartitionState:
        key = (topic, partition)
        state = self._partitions.get(key)
        if state is None:
            state = self._partitions[key] = _PartitionState()
        return state

    def batch_identity(self, topic: str, partition: int, record_count: int) -> tuple[int, int, int]:
        """(producer_id, producer_epoch, base_sequence) for the next batch of ``partition``.

        The batch built with it must be the next one :meth:`send` gets for that
        partition (``send`` moves the sequence on). Without idempotence: ``(-1, -1, -1)``.
        """
        if not self.config.idempotent:
            return -1, -1, -1
        self.start()
        return self.producer_id, self.producer_epoch, self._state(topic, partition).next_sequence

    # --- public API ------------------------------------------------------------------

    def send(self, topic: str, partition: int, data: bytes, record_count: int, *,
             base_sequence: int = -1, rows: np.ndarray | None = None, describe_rows=None) -> None:
        """Queue one encoded batch and send what can be sent without waiting (blocks only
        when a broker already has ``max_in_flight`` requests outstanding)."""
        if len(data) > self.config.max_request_size:
            # Never happens for batches built within max_request_size; a guard for callers.
            raise ProduceError(
                f"record batch of {len(data)} bytes for topic '{topic}' partition {partition} "
                f"is larger than 'kafka.max.request.size' ({self.config.max_request_size})",
                topic=topic, partition=partition)
        state = self._state(topic, partition)
        if self.config.idempotent:
            if base_sequence != state.next_sequence:
                raise KafkaProtocolError(
                    f"batch for topic '{topic}' partition {partition} has base sequence "
                    f"{base_sequence}, the partition's next sequence is {state.next_sequence}")
            state.next_sequence = (base_sequence + record_count) % SEQUENCE_MODULUS
        now = time.monotonic()
        batch = ProducerBatch(topic, partition, data, record_count, base_sequence,
                              state.next_ordinal, now,
                              now + self.config.delivery_timeout_ms / 1000.0,
                              rows, describe_rows or _no_rows)
        state.next_ordinal += 1
        state.unacked.add(batch.ordinal)
        heapq.heappush(state.queue, (batch.ordinal, batch))
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
                self.client.connection(leader).request(m.METADATA, {"topics": []})
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                log.warning("acks=0: could not confirm broker %d handled the writes: %s",
                            leader, exc)
        self._acks0_leaders.clear()

    def results(self) -> dict[tuple[str, int], PartitionResult]:
        return {tp: state.result for tp, state in self._partitions.items() if state.result.batches}

    def pending_batches(self) -> int:
        return sum(len(state.unacked) for state in self._partitions.values())

    # --- the send/receive loop ---------------------------------------------------------

    def _pump(self, drain: bool) -> None:
        while True:
            blocked = self._send_ready()
            in_flight = [q[0] for q in self._in_flight.values() if q]
            if drain:
                if not in_flight:
                    waiting = [b for s in self._partitions.values() for _o, b in s.queue]
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
        if self._refresh_needed:
            self._refresh_metadata()
        now = time.monotonic()
        by_leader: dict[int, list[_PartitionState]] = {}
        for (topic, partition), state in self._partitions.items():
            if not state.queue:
                continue
            head = state.queue[0][1]
            if head.retry_at > now:
                continue
            try:
                leader = self.client.leader_for(topic, partition)
            except RetriableError as exc:
                self._retry_queued(state, exc)
                continue
            except KafkaError as exc:
                raise ProduceError(f"cannot produce to {head.where()}: {exc}",
                                   topic=topic, partition=partition, cause=exc) from exc
            by_leader.setdefault(leader, []).append(state)
        blocked = []
        self._rotation += 1
        for leader, states in by_leader.items():
            queue = self._in_flight.setdefault(leader, deque())
            # Rotate the start so no partition is always last when requests fill up.
            start = self._rotation % len(states)
            states = states[start:] + states[:start]
            while True:
                ready = [s for s in states if s.queue and s.queue[0][1].retry_at <= now]
                if not ready:
                    break
                if len(queue) >= self.config.max_in_flight:
                    blocked.append(leader)
                    break
                if not self._send_request(leader, ready):
                    break   # the connection failed; its batches were requeued
        return blocked

    def _send_request(self, leader: int, ready: list[_PartitionState]) -> bool:
        batches: dict[tuple[str, int], ProducerBatch] = {}
        size = 0
        for state in ready:
            batch = state.queue[0][1]
            if batches and size + len(batch.data) > self.config.max_request_size:
                continue
            heapq.heappop(state.queue)
            batches[(batch.topic, batch.partition)] = batch
            size += len(batch.data)
        by_topic: dict[str, list] = {}
        for (topic, partition), batch in batches.items():
            by_topic.setdefault(topic, []).append({"index": partition, "records": batch.data})
        body = m.PRODUCE.body(
            transactional_id=self.config.transactional_id,
            acks=self.config.acks, timeout_ms=self.config.request_timeout_ms,
            topic_data=[{"name": t, "partition_data": parts} for t, parts in by_topic.items()])
        expects_response = self.config.acks != 0
        try:
            conn = self.client.connection(leader)
            pending = conn.send(m.PRODUCE, body, expects_response=expects_response)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            # The connection is gone, and with it every request still in flight on it.
            self.stats.connection_losses += 1
            self._lose_in_flight(leader, exc)
            for batch in batches.values():
                self._retry(batch, exc)
            return False
        self.stats.requests += 1
        self.stats.bytes_sent += size
        if not expects_response:
            # acks=0: the broker never answers; a batch counts as delivered once written.
            self._acks0_leaders.add(leader)
            for batch in batches.values():
                self._acknowledge(batch, -1)
            return True
        self._in_flight[leader].append(_InFlight(leader, conn, pending, batches, time.monotonic()))
        return True

    def _receive(self, leader: int) -> None:
        queue = self._in_flight[leader]
        request = queue.popleft()
        if not request.conn.is_waiting(request.pending):
            # Closed (or closed and reopened) since: the answer is lost.
            exc = KafkaConnectionError(f"connection to broker {leader} was reset before its "
                                       "Produce response arrived")
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
        self._handle_response(request, response)

    def _lose_in_flight(self, leader: int, exc: Exception) -> None:
        queue = self._in_flight.get(leader)
        while queue:
            self._requeue_request(queue.popleft(), exc)

    def _requeue_request(self, request: _InFlight, exc: Exception) -> None:
        for batch in request.batches.values():
            self._retry(batch, exc)

    def _handle_response(self, request: _InFlight, response: dict) -> None:
        answered = set()
        for topic_response in response["responses"]:
            topic = topic_response["name"]
            for part in topic_response["partition_responses"]:
                key = (topic, part["index"])
                batch = request.batches.get(key)
                if batch is None or key in answered:
                    continue
                answered.add(key)
                self._handle_partition(batch, part)
        missing = [b for k, b in request.batches.items() if k not in answered]
        for batch in missing:
            raise ProduceError(
                f"the Produce response from broker {request.leader} has no answer for "
                f"{batch.where()}", topic=batch.topic, partition=batch.partition)

    def _handle_partition(self, batch: ProducerBatch, part: dict) -> None:
        code = part["error_code"]
        if code == 0:
            self._acknowledge(batch, part["base_offset"])
            return
        idempotent = self.config.idempotent
        if code == DuplicateSequenceNumber.code and idempotent:
            if batch.attempts == 0:
                # Sent once and never resent, so no earlier attempt of ours can have put
                # it there: the broker's sequence for this producer id is ahead of ours
                # (another writer with the same producer id, or a broker that lost track).
                # Counting it as delivered would report records no broker confirmed.
                raise ProduceError(
                    f"the broker answered DUPLICATE_SEQUENCE_NUMBER (46) to the first attempt "
                    f"of {batch.record_count} records for {batch.where()} (producer id "
                    f"{self.producer_id}, epoch {self.producer_epoch}, base sequence "
                    f"{batch.base_sequence}): it claims to hold records this writer never "
                    "sent before, so they are not counted as written. Another producer may be "
                    "using the same producer id.", topic=batch.topic, partition=batch.partition)
            # The broker has this batch already (an earlier attempt got through).
            self.stats.duplicates += 1
            self._acknowledge(batch, part.get("base_offset", -1))
            return
        detail = part.get("error_message") or ""
        exc = error_for_code(code)(f"Produce to {batch.where()}" + (f": {detail}" if detail else ""))
        if code == OutOfOrderSequenceNumber.code and idempotent:
            state = self._partitions[(batch.topic, batch.partition)]
            if any(o < batch.ordinal for o in state.unacked):
                # An earlier batch of this partition failed and is being resent: this one
                # was refused because of the gap and goes again right after it.
                self._retry(batch, exc)
                return
        if exc.retriable:
            self._retry(batch, exc)
            return
        self._fail(batch, exc, part)

    def _acknowledge(self, batch: ProducerBatch, base_offset: int) -> None:
        state = self._partitions[(batch.topic, batch.partition)]
        state.unacked.discard(batch.ordinal)
        state.result.add(base_offset, batch.record_count)
        batch.data = b""   # the bytes are no longer needed

    def _retry_queued(self, state: _PartitionState, exc: Exception) -> None:
        """No leader (or no metadata) for a partition: its waiting head backs off."""
        _ordinal, batch = heapq.heappop(state.queue)
        self._retry(batch, exc)

    def _retry(self, batch: ProducerBatch, exc: Exception) -> None:
        batch.attempts += 1
        batch.last_error = exc
        now = time.monotonic()
        backoff = self._policy.backoff(batch.attempts)
        name = getattr(exc, "name", type(exc).__name__)
        self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
        if batch.attempts > self.config.retries:
            raise ProduceError(
                f"gave up producing {batch.record_count} records to {batch.where()} after "
                f"{batch.attempts} failed attempts ('kafka.retries' is {self.config.retries}); "
                f"last error: {exc}", topic=batch.topic, partition=batch.partition,
                cause=exc) from exc
        if now + backoff >= batch.deadline:
            raise ProduceError(
                f"{batch.record_count} records for {batch.where()} were not acknowledged within "
                f"'kafka.delivery.timeout.ms' ({self.config.delivery_timeout_ms} ms, "
                f"{batch.attempts} attempts); last error: {exc}",
                topic=batch.topic, partition=batch.partition, cause=exc) from exc
        log.info("retrying %d records for %s (attempt %d): %s", batch.record_count,
                 batch.where(), batch.attempts + 1, exc)
        self.stats.retries += 1
        batch.retry_at = now + backoff
        state = self._partitions[(batch.topic, batch.partition)]
        heapq.heappush(state.queue, (batch.ordinal, batch))
        if needs_metadata_refresh(exc):
            # Only when the leader may have moved (a throttled or busy broker, or an
            # out-of-order resend, costs no Metadata request).
            self._refresh_needed = True

    def _fail(self, batch: ProducerBatch, exc: Exception, part: dict) -> None:
        code = part["error_code"]
        hints = []
        for record_error in part.get("record_errors") or []:
            index = record_error.get("batch_index", -1)
            message = record_error.get("batch_index_error_message") or ""
            hints.append(f"record {index} ({batch.where(index)}): {message}".rstrip(": "))
        if code == MessageTooLarge.code:
            hints.append(f"the batch is {len(batch.data)} bytes with {batch.record_count} "
                         "records: lower 'kafka.batch.size' or raise the topic's "
                         "max.message.bytes")
        text = f"producing {batch.record_count} records failed: {exc}"
        if hints:
            text += "; " + "; ".join(hints)
        raise ProduceError(text, topic=batch.topic, partition=batch.partition, cause=exc) from exc

    def _refresh_metadata(self) -> None:
        topics = sorted({t for (t, _p), s in self._partitions.items() if s.queue or s.unacked})
        if not topics:
            self._refresh_needed = False
            return
        try:
            self.client.refresh_metadata(topics)
            self.stats.metadata_refreshes += 1
            self._refresh_needed = False
        except (KafkaConnectionError, KafkaTimeoutError, KafkaProtocolError) as exc:
            # Try again before the next send; the batches' back-off paces this.
            log.info("metadata refresh failed: %s", exc)
