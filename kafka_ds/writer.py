"""``df.write.format("pykafka")`` and ``df.writeStream.format("pykafka")``.

Driver side: :func:`plan_columns` checks the DataFrame's columns (names and types, as
Spark's Kafka sink does) and the options; the writer object is then pickled to the
tasks.

Task side (:class:`TaskWriter`), per Arrow batch and without a Python object per row:
the topic of every row (option or column), its partition (the ``partition`` column,
else murmur2 of the key, else sticky for null keys), one stable sort by
(topic, partition) and zero-copy slices per partition, buffered until about
``kafka.batch.size`` bytes (or ``kafka.linger.ms``), then encoded into RecordBatch v2
column-wise and handed to the :class:`~kafka_ds.client.producer.Producer`. ``write``
returns only after every batch is acknowledged, with the per-partition counts and
offset ranges in its commit message. The per-row steps are in kafka_ds/write_rows.py,
the buffering and encoding in kafka_ds/write_buffers.py.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)

from .client import KafkaClient, make_client
from .client.producer import Producer
from .client.retry import RetryPolicy
from .client.transactions import Transaction
from .columns import sink_column, spark_type_name
from .compat import DataSourceStreamArrowWriter
from .options import WriteOptions
from .worker_process import freeze_long_lived_objects
from .protocol.errors import (
    BrokerError,
    ConfigurationError,
    LeaderNotAvailable,
    UnknownTopicOrPartition,
)
from .write_buffers import RecordBatcher
from .write_rows import (
    RowTopics,
    TopicState,
    assign_partitions,
    check_record_sizes,
    row_columns,
    row_topics,
)

log = logging.getLogger(__name__)

# --- the columns (driver) ------------------------------------------------------------------

@dataclass(frozen=True)
class ColumnPlan:
    """Where each Kafka field is in the written rows (column positions; -1 = absent)."""

    value: int
    key: int = -1
    topic: int = -1
    partition: int = -1
    headers: int = -1
    timestamp: int = -1
    names: tuple = ()
    #: valueFormat/keyFormat: kafka_ds.typed_writes.TypedWriteColumns (None: bytes as given)
    typed: object = None


def plan_columns(schema, opts: WriteOptions) -> ColumnPlan:
    """Check the written DataFrame's schema; a ConfigurationError names column and fix.

    Column names match case-insensitively (as in Spark's Kafka sink); other columns
    are ignored.  Which columns are read, with which types: ``kafka_ds.columns``.
    """
    found = {}
    for index, fld in enumerate(schema.fields):
        column = sink_column(fld.name)
        if column is not None:
            if column.name in found:
                raise ConfigurationError(
                    f"The DataFrame has two '{column.name}' columns (names match "
                    "case-insensitively): keep one")
            found[column.name] = (index, fld)
    have = ", ".join(f.name for f in schema.fields) or "none"
    if "value" not in found:
        raise ConfigurationError(
            "The DataFrame written to Kafka needs a 'value' column (binary or string); its "
            f"columns are: {have}. Example: df.selectExpr('to_json(struct(*)) AS value')")
    index_of = {}
    typed_names = ({c.column for c in opts.typed_spec.columns} if opts.typed_spec is not None
                   else set())
    for name, (index, fld) in found.items():
        if name == "topic" and opts.topic is not None:
            continue      # the option names the topic; the column is ignored
        column = sink_column(name)
        if name in typed_names:
            index_of[name] = index    # its type is checked against its schema below
            continue
        if spark_type_name(fld.dataType) not in column.sink_types:
            raise ConfigurationError(
                f"Column '{fld.name}' must be {' or '.join(column.sink_types)} to be written to "
                f"Kafka, but it is {fld.dataType.simpleString()}: {column.sink_fix}.")
        index_of[name] = index
    if opts.topic is None and "topic" not in found:
        raise ConfigurationError(
            "No topic to write to: set the option 'topic' (.option(\"topic\", \"name\")) or "
            f"add a string 'topic' column; the DataFrame's columns are: {have}")
    typed = None
    if typed_names:
        from .typed_writes import resolve_for_write
        typed = resolve_for_write(opts.typed_spec, opts.topic,
                                  {name: fld for name, (_, fld) in found.items()})
    return ColumnPlan(names=tuple(f.name for f in schema.fields), typed=typed, **index_of)


def check_topic_exists(opts: WriteOptions) -> None:
    """Fail on the driver, before any task runs, when the 'topic' option names a topic the
    cluster does not have (and, with ``kafka.allow.auto.create.topics``, does not create)."""
    if opts.topic is None:
        return
    client = make_client(opts)
    try:
        _partition_count(client, opts.topic, opts.bootstrap_servers,
                         opts.allow_auto_create_topics)
    finally:
        client.close()


class _TopicLookupFailed(Exception):
    """One failed look at a topic's metadata, carried through the grace policy of
    :func:`_partition_count`: ``retriable`` when another look may help (the topic is
    unknown, or still being created), else final. The error it carries is raised as it
    was, so its message stays the broker's (and the client policy's) without a second
    note from the grace."""

    def __init__(self, error: Exception, again: bool):
        super().__init__(str(error))
        self.error = error
        self.retriable = again


def _partition_count(client: KafkaClient, topic: str, bootstrap: str,
                     allow_auto_create: bool = True) -> int:
    """Partitions of ``topic``; a clear error when it does not exist (and was not created).

    ``allow_auto_create`` (``kafka.allow.auto.create.topics``, default true, as the Java
    producer) asks for metadata with AllowAutoTopicCreation, so brokers with
    auto.create.topics.enable create a missing topic as they do for Spark's
    ``format("kafka")`` sink; such a topic shows up after LEADER_NOT_AVAILABLE answers.

    Each look runs under the client's retry policy (connection failures, a broker
    restarting); a grace policy around the looks gives a topic being created 10 s
    (1 s without auto-creation) whatever ``kafka.retries`` says, and an unknown topic
    at most 4 looks, the first from cached metadata."""
    what = f"Metadata of topic '{topic}'"
    looks = 0

    def look():
        nonlocal looks
        refresh = looks > 0
        looks += 1

        def lookup():
            # An unknown topic comes back here, not retried under the client's policy:
            # it gets only the grace.
            try:
                return client.topic_partitions(
                    topic, refresh=refresh, allow_auto_topic_creation=allow_auto_create)
            except UnknownTopicOrPartition as exc:
                return exc

        try:
            found = client.retrying(lookup, what)
        except BrokerError as exc:
            found = exc
        except Exception as exc:   # e.g. no broker reachable within the client's policy
            raise _TopicLookupFailed(exc, again=False) from None
        if isinstance(found, BrokerError):
            unknown = isinstance(found, UnknownTopicOrPartition)
            if not unknown and not found.retriable:
                raise ConfigurationError(f"Cannot write to topic '{topic}': {found}") from found
            if unknown and looks > 3:
                return None
            raise _TopicLookupFailed(found, again=True)
        if not found:
            raise _TopicLookupFailed(
                LeaderNotAvailable(f"topic {topic!r} has no partitions yet"), again=True)
        return len(found)

    grace = RetryPolicy(10_000 if allow_auto_create else 1_000, backoff_ms=100,
                        backoff_max_ms=1000, jitter=0)
    count = failed = None
    try:
        count = grace.run(look, what)
    except _TopicLookupFailed as exc:
        failed = exc.error
    if failed is not None and not isinstance(failed, UnknownTopicOrPartition):
        raise failed   # outside the except: its own cause and traceback, not the carrier's
    if count is not None:
        return count
    if allow_auto_create:
        how = ("The cluster did not create it on request (as for Spark's format('kafka') "
               "sink, a missing topic is created only by brokers with "
               "auto.create.topics.enable=true): create it first (e.g. kafka-topics.sh "
               "--create), or fix the 'topic' option / topic column.")
    else:
        how = ("The pykafka sink does not create topics with "
               "'kafka.allow.auto.create.topics'=false: create it first (e.g. kafka-topics.sh "
               "--create), or fix the 'topic' option / topic column.")
    raise ConfigurationError(
        f"Topic '{topic}' does not exist on the cluster at kafka.bootstrap.servers={bootstrap}. "
        + how)


# --- commit messages -----------------------------------------------------------------------

@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one write task delivered.

    ``partitions``: ``(topic, partition, records, first_offset, last_offset)`` per
    partition written; offsets are -1 when unknown (``acks=0``, or every batch was
    acknowledged as a duplicate of an earlier attempt). Other tasks may have written to
    the same partition in between, so ``records`` can be less than the range's length.
    """

    task: int
    records: int
    bytes: int
    partitions: list = field(default_factory=list)
    retries: int = 0
    seconds: float = 0.0
    # deliveryGuarantee=exactly-once: the task's open transaction, for the driver to end
    # (producer_id -1: no transaction). ``skipped``: a replayed micro-batch already committed.
    transactional_id: str | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    skipped: bool = False


@dataclass
class WriteSummary:
    """All tasks' commit messages folded per (topic, partition)."""

    records: int = 0
    bytes: int = 0
    tasks: int = 0
    failed_tasks: int = 0
    retries: int = 0
    partitions: dict = field(default_factory=dict)   # (topic, partition) -> [records, first, last]

    @classmethod
    def of(cls, messages) -> "WriteSummary":
        summary = cls()
        for message in messages:
            if message is None:
                summary.failed_tasks += 1
                continue
            summary.tasks += 1
            summary.records += message.records
            summary.bytes += message.bytes
            summary.retries += message.retries
            for topic, partition, records, first, last in message.partitions:
                entry = summary.partitions.setdefault((topic, partition), [0, -1, -1])
                entry[0] += records
                if first >= 0 and (entry[1] < 0 or first < entry[1]):
                    entry[1] = first
                if last > entry[2]:
                    entry[2] = last
        return summary

    def describe(self) -> str:
        parts = []
        for (topic, partition), (records, first, last) in sorted(self.partitions.items()):
            offsets = f" offsets {first}-{last}" if first >= 0 else ""
            parts.append(f"{topic}-{partition}: {records}{offsets}")
        text = (f"{self.records} records ({self.bytes} bytes in record batches) from "
                f"{self.tasks} tasks")
        if self.failed_tasks:
            text += f", {self.failed_tasks} tasks failed"
        if self.retries:
            text += f", {self.retries} retried batches"
        return text + (": " + ", ".join(parts) if parts else "")


# --- the task side ---------------------------------------------------------------------

def _spark_partition_id() -> int:
    try:
        from pyspark import TaskContext
        context = TaskContext.get()
        return context.partitionId() if context is not None else -1
    except Exception:   # not in a Spark task (tests, tools)
        return -1


class TaskWriter:
    """Writes one task's Arrow batches; not thread-safe. ``close()`` when done."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan, task: int | None = None,
                 transactional_id: str | None = None):
        self.opts = opts
        self.plan = plan
        self.task = _spark_partition_id() if task is None else task
        # Both settings objects were built on the driver (kafka_ds.options).
        self.client = make_client(opts)
        producer_config = opts.producer
        if transactional_id is not None:
            producer_config = dataclasses.replace(producer_config,
                                                  transactional_id=transactional_id)
        self.producer = Producer(self.client, producer_config)
        self.transaction: Transaction | None = None
        if transactional_id is not None:
            # Begun at once, rows or not: the new epoch fences an earlier attempt of this
            # task and aborts what it left open.
            self.transaction = Transaction(self.client, transactional_id,
                                           opts.transaction_timeout_ms,
                                           timeout_ms=opts.delivery_timeout_ms)
            self.transaction.begin()
            self.producer.use_transaction(self.transaction.producer_id,
                                          self.transaction.producer_epoch)
        self.batches = RecordBatcher(opts, self.producer, self.transaction, self.describe_rows)
        self.topics: dict[str, TopicState] = {}
        self.rows_seen = 0
        self.started = time.monotonic()

    # --- context for errors ---

    def describe_rows(self, rows: np.ndarray) -> str:
        where = f"Spark partition {self.task}" if self.task >= 0 else "this write task"
        if len(rows) == 1:
            return f"row {int(rows[0])} of {where}'s input"
        return (f"{len(rows)} rows of {where}'s input between row {int(rows.min())} and "
                f"{int(rows.max())}")

    def _topic(self, name: str) -> TopicState:
        state = self.topics.get(name)
        if state is None:
            count = _partition_count(self.client, name, self.opts.bootstrap_servers,
                                     self.opts.allow_auto_create_topics)
            state = self.topics[name] = TopicState(name, count, self.opts.batch_size)
        return state

    # --- per Arrow batch ---

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """Buffer ``batch``'s rows by (topic, partition) and send what is ready; the
        steps are in kafka_ds/write_rows.py (in the order their errors are raised)."""
        if batch.num_rows == 0:
            return
        first_row = self.rows_seen
        self.rows_seen += batch.num_rows
        rows = row_columns(batch, self.plan, first_row, self.batches.batch_limit,
                           self.describe_rows)
        names, index = row_topics(batch, self.plan, self.opts.topic, first_row,
                                  self.describe_rows)
        states = [self._topic(t) for t in names]
        topics = RowTopics(names, index, states,
                           np.array([s.num_partitions for s in states], dtype=np.int64))
        partitions = assign_partitions(batch, self.plan, rows, topics, first_row,
                                       self.describe_rows)
        check_record_sizes(rows, topics, partitions, self.opts.max_request_size, first_row,
                           self.describe_rows)
        self.batches.add(rows, topics, partitions, first_row)
        self.batches.emit(final=False)

    # --- end of the task ---

    def finish(self) -> KafkaCommitMessage:
        self.batches.emit(final=True)
        self.producer.flush()
        partitions = []
        records = 0
        for (topic, partition), result in sorted(self.producer.results().items()):
            partitions.append((topic, partition, result.records, result.first_offset,
                               result.last_offset))
            records += result.records
        stats = self.producer.stats
        message = KafkaCommitMessage(task=self.task, records=records, bytes=stats.bytes_sent,
                                     partitions=partitions, retries=stats.retries,
                                     seconds=round(time.monotonic() - self.started, 3))
        if self.transaction is not None:
            message.transactional_id = self.transaction.transactional_id
            if self.transaction.partitions:   # an empty transaction has nothing to end
                message.producer_id = self.transaction.producer_id
                message.producer_epoch = self.transaction.producer_epoch
        return message

    def close(self) -> None:
        self.client.close()


def write_batches(opts: WriteOptions, plan: ColumnPlan, batches, task: int | None = None,
                  transactional_id: str | None = None):
    """Write an iterator of Arrow batches; the commit message once all are acknowledged."""
    writer = TaskWriter(opts, plan, task, transactional_id)
    try:
        for batch in batches:
            writer.write_batch(batch)
        return writer.finish()
    finally:
        writer.close()


# --- Spark glue ----------------------------------------------------------------------------

class _TaskWrites:
    """What the batch and the streaming writer share: the options, the column plan, and
    a task's write of its Arrow batches."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan):
        self.opts = opts
        self.plan = plan
        self.summary: WriteSummary | None = None
        self.prefix: str | None = None        # exactly-once: transactional id prefix
        self.committed_through = -1           # streaming exactly-once: replays to skip

    def write(self, iterator) -> KafkaCommitMessage:
        freeze_long_lived_objects()
        if self.prefix is None:
            return write_batches(self.opts, self.plan, iterator)
        from .exactly_once import current_batch_id, transactional_id
        task = _spark_partition_id()
        batch_id = current_batch_id()
        if batch_id is not None and batch_id <= self.committed_through:
            # A micro-batch Spark replays whose transactions were committed before a crash.
            log.info("micro-batch %d is already committed: task %d writes nothing",
                     batch_id, task)
            return KafkaCommitMessage(task=task, records=0, bytes=0, skipped=True)
        return write_batches(self.opts, self.plan, iterator, task,
                             transactional_id(self.prefix, task))


class KafkaDataSourceWriter(_TaskWrites, DataSourceArrowWriter):
    """Batch writes: one :class:`TaskWriter` per task."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan):
        super().__init__(opts, plan)
        if opts.exactly_once:
            from .exactly_once import batch_prefix
            self.prefix = batch_prefix(opts)

    def commit(self, messages) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .exactly_once import commit_all
            commit_all(self.opts, messages)
        log.info("pykafka write committed: %s", self.summary.describe())

    def abort(self, messages) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .exactly_once import abort_all
            abort_all(self.opts, self.prefix, messages)
            log.warning("pykafka write failed; its transactions were aborted: %s",
                        self.summary.describe())
            return
        # Kafka has no rollback: what the successful tasks wrote stays in the topics.
        log.warning("pykafka write failed; records already acknowledged stay in Kafka: %s",
                    self.summary.describe())


class KafkaStreamWriter(_TaskWrites, DataSourceStreamArrowWriter or DataSourceStreamWriter):
    """Streaming sink: every micro-batch is written like a batch write (at least once:
    a micro-batch Spark re-runs after a failure is written again)."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan):
        super().__init__(opts, plan)
        if opts.exactly_once:
            # Driver side, at query (re)start: finish what a crashed run was committing.
            from .exactly_once import TransactionLog, require_checkpoint, stream_prefix
            self.prefix = stream_prefix(opts)
            self.committed_through = TransactionLog(require_checkpoint(opts)).recover(opts)

    def commit(self, messages, batchId) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .exactly_once import TransactionLog, commit_all
            txn_log = TransactionLog(self.opts.checkpoint_location)
            # Recorded durably after the open-transactions check and before the first
            # EndTxn: a restart re-commits exactly these.
            if commit_all(self.opts, messages,
                          before_first_commit=lambda handles: txn_log.record(batchId, handles)):
                txn_log.mark_committed(batchId)
            elif any(msg is not None and msg.skipped for msg in messages):
                log.info("pykafka micro-batch %s was committed before a restart", batchId)
        log.info("pykafka micro-batch %s committed: %s", batchId, self.summary.describe())

    def abort(self, messages, batchId) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .exactly_once import abort_all
            abort_all(self.opts, self.prefix, messages)
            log.warning("pykafka micro-batch %s failed; its transactions were aborted: %s",
                        batchId, self.summary.describe())
            return
        log.warning("pykafka micro-batch %s failed; records already acknowledged stay in "
                    "Kafka: %s", batchId, self.summary.describe())
