"""What a write task delivered (its commit message) and the driver's summary of a write's
messages. Light on purpose: Spark's commit runs in a Python process of its own that
unpickles the tasks' messages, which imports this module and nothing heavy (no numpy,
pyarrow or the encoder: those load in the write tasks, ``task.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.datasource import WriterCommitMessage


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
    partitions: dict = field(default_factory=dict)  # (topic, partition) -> [records, first, last]

    @classmethod
    def of(cls, messages) -> WriteSummary:
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
        text = (
            f"{self.records} records ({self.bytes} bytes in record batches) from {self.tasks} tasks"
        )
        if self.failed_tasks:
            text += f", {self.failed_tasks} tasks failed"
        if self.retries:
            text += f", {self.retries} retried batches"
        return text + (": " + ", ".join(parts) if parts else "")


def spark_partition_id() -> int:
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        return context.partitionId() if context is not None else -1
    except Exception:  # not in a Spark task (tests, tools)
        return -1
