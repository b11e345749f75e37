"""``df.write.format("pykafka")`` and ``df.writeStream.format("pykafka")``: the Spark
writers. The driver checks the columns and the topic (``write/plan.py``,
``write/topics.py``); each task writes its Arrow batches without a Python object per row
(``write/task.py``) and returns only once every batch is acknowledged. With
``deliveryGuarantee=exactly-once`` tasks leave their transactions open and the driver
commits them all (``write/exactly_once.py``, docs/exactly_once.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter

from .compat import DataSourceStreamArrowWriter
from .options import WriteOptions
from .worker_process import freeze_long_lived_objects, spark_entry_point
from .write.messages import KafkaCommitMessage, WriteSummary, spark_partition_id
from .write.plan import ColumnPlan

log = logging.getLogger(__name__)


class _TaskWrites:
    """What the batch and the streaming writer share: the options, the column plan, and
    a task's write of its Arrow batches."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan):
        self.opts = opts
        self.plan = plan
        self.summary: WriteSummary | None = None
        self.prefix: str | None = None  # exactly-once: transactional id prefix
        # exactly-once: (consumer group, topic) whose offset abort() commits, tasks check
        self.abort_marker: tuple[str, str] | None = None
        self.committed_through = -1  # streaming exactly-once: replays to skip

    @spark_entry_point
    def write(self, iterator) -> KafkaCommitMessage:
        # The encoder (numpy, pyarrow) loads in the write tasks only: Spark's writer() and
        # commit() run in Python processes of their own, which unpickle this class.
        from .client.kept import task_connections
        from .write.task import write_batches

        freeze_long_lived_objects()
        transactional: dict = {}  # exactly-once: the task's transaction
        if self.prefix is not None:
            from .write.exactly_once import current_batch_id, transactional_id

            task = spark_partition_id()
            batch_id = current_batch_id()
            if batch_id is not None and batch_id <= self.committed_through:
                # A micro-batch Spark replays whose transactions were committed before a crash.
                log.info(
                    "micro-batch %d is already committed: task %d writes nothing", batch_id, task
                )
                return KafkaCommitMessage(task=task, records=0, bytes=0, skipped=True)
            transactional = {
                "task": task,
                "transactional_id": transactional_id(self.prefix, task),
                "abort_marker": self.abort_marker,
            }
        with task_connections(self.opts) as client:
            return write_batches(self.opts, self.plan, iterator, client=client, **transactional)


class KafkaDataSourceWriter(_TaskWrites, DataSourceArrowWriter):
    """Batch writes: one :class:`TaskWriter` per task."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan):
        super().__init__(opts, plan)
        if opts.exactly_once:
            from .write.exactly_once import abort_marker, batch_prefix

            self.prefix = batch_prefix(opts)
            self.abort_marker = abort_marker(opts, self.prefix)

    @spark_entry_point
    def commit(self, messages) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .write.exactly_once import commit_all

            commit_all(self.opts, messages)
        log.info("pykafka write committed: %s", self.summary.describe())

    @spark_entry_point
    def abort(self, messages) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .write.exactly_once import abort_all

            abort_all(self.opts, self.prefix, messages, self.abort_marker)
            log.warning(
                "pykafka write failed; its transactions were aborted: %s", self.summary.describe()
            )
            return
        # Kafka has no rollback: what the successful tasks wrote stays in the topics.
        log.warning(
            "pykafka write failed; records already acknowledged stay in Kafka: %s",
            self.summary.describe(),
        )


if TYPE_CHECKING:
    _StreamWriterBase = DataSourceStreamArrowWriter
else:  # pyspark 4.0 has no Arrow stream writer
    _StreamWriterBase = DataSourceStreamArrowWriter or DataSourceStreamWriter


class KafkaStreamWriter(_TaskWrites, _StreamWriterBase):
    """Streaming sink: every micro-batch is written like a batch write (at least once:
    a micro-batch Spark re-runs after a failure is written again)."""

    def __init__(self, opts: WriteOptions, plan: ColumnPlan):
        super().__init__(opts, plan)
        if opts.exactly_once:
            # Driver side, at query (re)start: finish what a crashed run was committing.
            # No abort marker (batch writes'): pyspark builds this writer anew for every
            # micro-batch's commit or abort, so a marker made here is not the one the
            # tasks carry. A stream's task that begins after its micro-batch's abort is
            # fenced by the restarted query's tasks, which take the same transactional ids.
            from .write.exactly_once import TransactionLog, require_checkpoint, stream_prefix

            self.prefix = stream_prefix(opts)
            self.committed_through = TransactionLog(require_checkpoint(opts)).recover(opts)

    @spark_entry_point
    def commit(self, messages, batchId) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .write.exactly_once import TransactionLog, commit_all, require_checkpoint

            txn_log = TransactionLog(require_checkpoint(self.opts))
            # Recorded durably after the open-transactions check and before the first
            # EndTxn: a restart re-commits exactly these.
            if commit_all(
                self.opts,
                messages,
                before_first_commit=lambda handles: txn_log.record(batchId, handles),
            ):
                txn_log.mark_committed(batchId)
            elif any(msg is not None and msg.skipped for msg in messages):
                log.info("pykafka micro-batch %s was committed before a restart", batchId)
        log.info("pykafka micro-batch %s committed: %s", batchId, self.summary.describe())

    @spark_entry_point
    def abort(self, messages, batchId) -> None:
        self.summary = WriteSummary.of(messages)
        if self.prefix is not None:
            from .write.exactly_once import abort_all

            abort_all(self.opts, self.prefix, messages, self.abort_marker)
            log.warning(
                "pykafka micro-batch %s failed; its transactions were aborted: %s",
                batchId,
                self.summary.describe(),
            )
            return
        log.warning(
            "pykafka micro-batch %s failed; records already acknowledged stay in Kafka: %s",
            batchId,
            self.summary.describe(),
        )
