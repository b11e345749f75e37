"""What becomes of a sent batch: acknowledged, retried, or the write fails.

:class:`BatchOutcomes` reads a Produce answer partition by partition and decides: an
acknowledgement (or a duplicate of an earlier attempt) counts the records; a retriable
error puts the batch back in its partition's queue after a back-off, within its own
limits (``kafka.retries`` and its ``kafka.delivery.timeout.ms`` deadline), and asks for
a metadata refresh when the leader may have moved; anything else raises
:class:`ProduceError` naming the partition and input rows.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from ..errors import ProduceError
from ..protocol.errors import (
    DuplicateSequenceNumber,
    MessageTooLarge,
    OutOfOrderSequenceNumber,
    RecordListTooLarge,
    error_for_code,
)
from .producer_batches import PartitionQueues, PartitionState, ProducerBatch
from .retry import RetryPolicy, needs_metadata_refresh

log = logging.getLogger(__name__)


@dataclass
class ProducerStats:
    requests: int = 0
    bytes_sent: int = 0
    retries: int = 0
    connection_losses: int = 0
    duplicates: int = 0
    metadata_refreshes: int = 0
    errors: dict = field(default_factory=dict)  # error name -> count of retried batches


class BatchOutcomes:
    """Acknowledges, retries or fails the batches of one producer."""

    def __init__(self, config, queues: PartitionQueues, stats: ProducerStats):
        self.config = config
        self.queues = queues
        self.stats = stats
        self.refresh_needed = False  # a retried batch's leader may have moved
        # The shared policy's back-off (exponential, jittered); the limits are per batch:
        # its delivery deadline and kafka.retries, checked in retry().
        self._policy = RetryPolicy(
            config.delivery_timeout_ms,
            backoff_ms=config.retry_backoff_ms,
            backoff_max_ms=config.retry_backoff_max_ms,
        )

    def handle_response(
        self, leader: int, batches: dict, response: dict, producer_id: int, producer_epoch: int
    ) -> None:
        """The Produce ``response`` of ``leader`` to ``batches`` ((topic, partition) ->
        batch); ``producer_id`` and ``producer_epoch`` are only for error messages."""
        answered = set()
        for topic_response in response["responses"]:
            topic = topic_response["name"]
            for part in topic_response["partition_responses"]:
                key = (topic, part["index"])
                batch = batches.get(key)
                if batch is None or key in answered:
                    continue
                answered.add(key)
                self._handle_partition(batch, part, producer_id, producer_epoch)
        missing = [b for k, b in batches.items() if k not in answered]
        for batch in missing:
            raise ProduceError(
                f"the Produce response from broker {leader} has no answer for {batch.where()}",
                topic=batch.topic,
                partition=batch.partition,
            )

    def _handle_partition(
        self, batch: ProducerBatch, part: dict, producer_id: int, producer_epoch: int
    ) -> None:
        code = part["error_code"]
        if code == 0:
            self.queues.acknowledge(batch, part["base_offset"])
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
                    f"{producer_id}, epoch {producer_epoch}, base sequence "
                    f"{batch.base_sequence}): it claims to hold records this writer never "
                    "sent before, so they are not counted as written. Another producer may be "
                    "using the same producer id.",
                    topic=batch.topic,
                    partition=batch.partition,
                )
            # The broker has this batch already (an earlier attempt got through).
            self.stats.duplicates += 1
            self.queues.acknowledge(batch, part.get("base_offset", -1))
            return
        detail = part.get("error_message") or ""
        exc = error_for_code(code)(
            f"Produce to {batch.where()}" + (f": {detail}" if detail else "")
        )
        if code == OutOfOrderSequenceNumber.code and idempotent:
            if self.queues.has_earlier_unacked(batch):
                # An earlier batch of this partition failed and is being resent: this one
                # was refused because of the gap and goes again right after it.
                self.retry(batch, exc)
                return
        if exc.retriable:
            self.retry(batch, exc)
            return
        self._fail(batch, exc, part)

    def retry_head(self, state: PartitionState, exc: Exception) -> None:
        """No leader (or no metadata) for a partition: its waiting head backs off."""
        self.retry(state.pop_head(), exc)

    def retry(self, batch: ProducerBatch, exc: Exception) -> None:
        """Back in the queue after a back-off, or :class:`ProduceError` when the batch
        is out of attempts or would miss its delivery deadline."""
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
                f"last error: {exc}",
                topic=batch.topic,
                partition=batch.partition,
                cause=exc,
            ) from exc
        if now + backoff >= batch.deadline:
            raise ProduceError(
                f"{batch.record_count} records for {batch.where()} were not acknowledged within "
                f"'kafka.delivery.timeout.ms' ({self.config.delivery_timeout_ms} ms, "
                f"{batch.attempts} attempts); last error: {exc}",
                topic=batch.topic,
                partition=batch.partition,
                cause=exc,
            ) from exc
        log.info(
            "retrying %d records for %s (attempt %d): %s",
            batch.record_count,
            batch.where(),
            batch.attempts + 1,
            exc,
        )
        self.stats.retries += 1
        batch.retry_at = now + backoff
        self.queues.requeue(batch)
        if needs_metadata_refresh(exc):
            # Only when the leader may have moved (a throttled or busy broker, or an
            # out-of-order resend, costs no Metadata request).
            self.refresh_needed = True

    def _fail(self, batch: ProducerBatch, exc: Exception, part: dict) -> None:
        code = part["error_code"]
        hints = []
        for record_error in part.get("record_errors") or []:
            index = record_error.get("batch_index", -1)
            message = record_error.get("batch_index_error_message") or ""
            hints.append(f"record {index} ({batch.where(index)}): {message}".rstrip(": "))
        if code in (MessageTooLarge.code, RecordListTooLarge.code):
            # The broker names no number: its limit is the topic's max.message.bytes
            # (MESSAGE_TOO_LARGE) or its segment size (RECORD_LIST_TOO_LARGE).
            limit = (
                "the topic's max.message.bytes (the broker's message.max.bytes unless "
                "the topic sets it; 1048588 by default)"
                if code == MessageTooLarge.code
                else "the topic's segment.bytes (the broker's log.segment.bytes)"
            )
            if batch.record_count == 1:
                hints.append(
                    f"the record is {len(batch.data)} bytes as a record batch, more "
                    f"than the broker accepts: {limit}; write a smaller record or "
                    "raise that limit"
                )
            else:
                hints.append(
                    f"the batch is {len(batch.data)} bytes with "
                    f"{batch.record_count} records, more than the broker accepts: "
                    f"{limit}; lower 'kafka.batch.size' or raise that limit"
                )
        text = f"producing {batch.record_count} records failed: {exc}"
        if hints:
            text += "; " + "; ".join(hints)
        raise ProduceError(text, topic=batch.topic, partition=batch.partition, cause=exc) from exc
