"""One write task: its Arrow batches become records, buffered per partition, encoded and
produced (``rows.py``, ``buffers.py``); the task returns only once every batch is
acknowledged, with what it delivered in its commit message."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pyarrow as pa

from ..client import KafkaClient, make_client
from ..client.producer import Producer
from ..client.transactions import Transaction
from ..options import WriteOptions
from .buffers import RecordBatcher
from .exactly_once import check_not_aborted
from .messages import KafkaCommitMessage, spark_partition_id
from .plan import ColumnPlan
from .rows import (
    RowTopics,
    TopicState,
    assign_partitions,
    check_record_sizes,
    row_columns,
    row_topics,
)
from .topics import partition_count


class TaskWriter:
    """Writes one task's Arrow batches; not thread-safe. ``close()`` when done."""

    def __init__(
        self,
        opts: WriteOptions,
        plan: ColumnPlan,
        task: int | None = None,
        transactional_id: str | None = None,
        abort_marker: tuple[str, str] | None = None,
        client: KafkaClient | None = None,
    ):
        self.opts = opts
        self.plan = plan
        self.task = spark_partition_id() if task is None else task
        # Both settings objects were built on the driver (kafka_ds.options). ``client``: the
        # caller's (a Spark task's, client/kept.py), which the caller ends; else our own.
        self.own_client = client is None
        self.client = make_client(opts) if client is None else client
        try:
            self._producer(transactional_id, abort_marker)
        except BaseException:
            self.close()
            raise
        self.batches = RecordBatcher(opts, self.producer, self.transaction, self.describe_rows)
        self.topics: dict[str, TopicState] = {}
        self.rows_seen = 0
        self.started = time.monotonic()

    def _producer(self, transactional_id: str | None, abort_marker: tuple[str, str] | None) -> None:
        opts = self.opts
        producer_config = opts.producer
        if transactional_id is not None:
            producer_config = dataclasses.replace(
                producer_config, transactional_id=transactional_id
            )
        self.producer = Producer(self.client, producer_config)
        self.transaction: Transaction | None = None
        if transactional_id is not None:
            # Begun at once, rows or not: the new epoch fences an earlier attempt of this
            # task and aborts what it left open.
            self.transaction = Transaction(
                self.client,
                transactional_id,
                opts.transaction_timeout_ms,
                timeout_ms=opts.delivery_timeout_ms,
            )
            self.transaction.begin()
            if abort_marker is not None:
                # After the InitProducerId, before any record (exactly_once.py): a task
                # of a write the driver already aborted stops here.
                check_not_aborted(self.client, abort_marker, transactional_id)
            self.producer.use_transaction(
                self.transaction.producer_id, self.transaction.producer_epoch
            )

    # --- context for errors ---

    def describe_rows(self, rows: np.ndarray) -> str:
        where = f"Spark partition {self.task}" if self.task >= 0 else "this write task"
        if len(rows) == 1:
            return f"row {int(rows[0])} of {where}'s input"
        return (
            f"{len(rows)} rows of {where}'s input between row {int(rows.min())} and "
            f"{int(rows.max())}"
        )

    def _topic(self, name: str) -> TopicState:
        state = self.topics.get(name)
        if state is None:
            count = partition_count(
                self.client, name, self.opts.bootstrap_servers, self.opts.allow_auto_create_topics
            )
            state = self.topics[name] = TopicState(name, count, self.opts.batch_size)
        return state

    # --- per Arrow batch ---

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Buffer ``batch``'s rows by (topic, partition) and send what is ready; the
        steps are in rows.py (in the order their errors are raised)."""
        if batch.num_rows == 0:
            return
        first_row = self.rows_seen
        self.rows_seen += batch.num_rows
        rows = row_columns(
            batch, self.plan, first_row, self.batches.batch_limit, self.describe_rows
        )
        names, index = row_topics(batch, self.plan, self.opts.topic, first_row, self.describe_rows)
        states = [self._topic(t) for t in names]
        topics = RowTopics(
            names, index, states, np.array([s.num_partitions for s in states], dtype=np.int64)
        )
        partitions = assign_partitions(
            batch, self.plan, rows, topics, first_row, self.describe_rows
        )
        check_record_sizes(
            rows, topics, partitions, self.opts.max_request_size, first_row, self.describe_rows
        )
        self.batches.add(rows, topics, partitions, first_row)
        self.batches.emit(final=False)

    # --- end of the task ---

    def finish(self) -> KafkaCommitMessage:
        self.batches.emit(final=True)
        self.producer.flush()
        partitions = []
        records = 0
        for (topic, partition), result in sorted(self.producer.results().items()):
            partitions.append(
                (topic, partition, result.records, result.first_offset, result.last_offset)
            )
            records += result.records
        stats = self.producer.stats
        message = KafkaCommitMessage(
            task=self.task,
            records=records,
            bytes=stats.bytes_sent,
            partitions=partitions,
            retries=stats.retries,
            seconds=round(time.monotonic() - self.started, 3),
        )
        if self.transaction is not None:
            message.transactional_id = self.transaction.transactional_id
            if self.transaction.partitions:  # an empty transaction has nothing to end
                message.producer_id = self.transaction.producer_id
                message.producer_epoch = self.transaction.producer_epoch
        return message

    def close(self) -> None:
        if self.own_client:
            self.client.close()


def write_batches(
    opts: WriteOptions,
    plan: ColumnPlan,
    batches,
    task: int | None = None,
    transactional_id: str | None = None,
    abort_marker: tuple[str, str] | None = None,
    client: KafkaClient | None = None,
):
    """Write an iterator of Arrow batches; the commit message once all are acknowledged.
    ``client``: the caller's, left open (see :class:`TaskWriter`)."""
    writer = TaskWriter(opts, plan, task, transactional_id, abort_marker, client)
    try:
        for batch in batches:
            writer.write_batch(batch)
        return writer.finish()
    finally:
        writer.close()
