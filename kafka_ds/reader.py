"""``spark.read.format("pykafka")``: the Spark batch reader. The driver plans offset ranges
(``read/planner.py``), each Spark task reads one (``read/ranges.py``); with the option
``pushFilters`` the reader takes Spark's filters and narrows the ranges
(``read/pushdown.py``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceReader, InputPartition

from .client import EARLIEST, LATEST, make_client
from .client.kept import task_connections
from .compat import FILTER_PUSHDOWN, require
from .read.planner import OffsetPlanner, late_offsets, rebind, split_ranges
from .read.pushdown import Narrowing, narrow, narrow_ranges
from .read.ranges import read_range
from .worker_process import freeze_long_lived_objects, spark_entry_point

log = logging.getLogger(__name__)


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task: read ``[start, end)`` of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int
    # Batch reads: Spark plans a Python source once per DataFrame, but Spark's Kafka
    # source resolves "earliest"/"latest" when each scan runs. A piece whose end came
    # from "latest" (or whose start came from "earliest") is re-resolved by its task.
    late_start: bool = False
    late_end: bool = False


class KafkaBatchReader(DataSourceReader):
    """``spark.read.format("pykafka")``: the driver plans offset ranges, each task reads one."""

    def __init__(self, opts):
        self.opts = opts

    def plan(self, planner):
        """``(ranges, partitions whose start is resolved again by the task, ... end ...)``."""
        ranges = planner.batch_ranges()
        tps = [(r.topic, r.partition) for r in ranges]
        return (
            ranges,
            late_offsets(self.opts.starting, tps, EARLIEST),
            late_offsets(self.opts.ending, tps, LATEST),
        )

    @spark_entry_point
    def partitions(self):
        client = make_client(self.opts)
        try:
            ranges, late_start, late_end = self.plan(OffsetPlanner(self.opts, client))
        finally:
            client.close()
        return plan_late_bound(
            ranges,
            late_start,
            late_end,
            self.opts.min_partitions,
            self.opts.max_records_per_partition,
        )

    @spark_entry_point
    def read(self, partition):
        freeze_long_lived_objects()
        # with the connections this process's last task left
        with task_connections(self.opts) as client:
            if getattr(partition, "late_start", False) or getattr(partition, "late_end", False):
                partition = rebind(self.opts, client, partition)
            if partition is not None:
                yield from read_range(self.opts, partition, client)


def plan_late_bound(ranges, late_start: set, late_end: set, min_partitions, max_records):
    """Split like Spark, then flag the first piece of a partition whose start is "earliest"
    and the last piece of one whose end is "latest". A partition empty now but with a
    "latest" end keeps one (empty) task: records produced before a later action are read."""
    pieces = split_ranges(ranges, min_partitions, max_records)
    first: dict = {}
    last: dict = {}
    for i, r in enumerate(pieces):
        tp = (r.topic, r.partition)
        first.setdefault(tp, i)
        last[tp] = i
    out = [
        KafkaInputPartition(
            r.topic,
            r.partition,
            r.start,
            r.end,
            late_start=(r.topic, r.partition) in late_start and first[(r.topic, r.partition)] == i,
            late_end=(r.topic, r.partition) in late_end and last[(r.topic, r.partition)] == i,
        )
        for i, r in enumerate(pieces)
    ]
    for r in ranges:
        tp = (r.topic, r.partition)
        if tp not in first and tp in late_end:
            out.append(
                KafkaInputPartition(
                    r.topic, r.partition, r.start, r.end, late_start=tp in late_start, late_end=True
                )
            )
    return out


class KafkaPushdownReader(KafkaBatchReader):
    """The batch reader with ``pushFilters=true``: takes Spark's filters on ``topic``,
    ``partition``, ``offset`` and ``timestamp`` and plans only the offsets they allow."""

    def __init__(self, opts):
        super().__init__(opts)
        self.narrowing = Narrowing()

    def pushFilters(self, filters):
        self.narrowing, back = narrow(filters, self.narrowing)
        log.info(
            "pykafka pushdown: reads %s; %d filter(s) left to Spark",
            self.narrowing.describe(),
            len(back),
        )
        return back

    def plan(self, planner):
        ranges = planner.batch_ranges(keep=self.narrowing.keeps)
        ranges, moved_start, moved_end = narrow_ranges(ranges, self.narrowing, planner)
        tps = [(r.topic, r.partition) for r in ranges]
        # A side a filter moved is fixed now; the others are re-resolved by their task.
        late_start = late_offsets(self.opts.starting, tps, EARLIEST) - moved_start
        late_end = late_offsets(self.opts.ending, tps, LATEST) - moved_end
        for r in ranges:
            log.info(
                "pykafka pushdown: %s-%d reads offsets [%d, %d)",
                r.topic,
                r.partition,
                r.start,
                r.end,
            )
        return ranges, late_start, late_end


# Spark refuses a reader that defines pushFilters while its conf is off, with a message of
# its own (DATA_SOURCE_PUSHDOWN_DISABLED) that names the conf and the reader's class by
# ``__name__``; the reader cannot see the conf. So the class name carries the other half:
# the option that chose this reader, and how to undo it. (Pickling goes by __qualname__.)
KafkaPushdownReader.__name__ = (
    "The pykafka reader asked for by option 'pushFilters'=true (remove the option to read "
    "without filter pushdown)"
)


def batch_reader(opts) -> KafkaBatchReader:
    """The batch reader for ``opts``: one that takes Spark's filters only when the option
    ``pushFilters`` is true. A reader without ``pushFilters`` reads under either value of
    Spark's conf (with the conf on, Spark hands it no filters to keep)."""
    if not opts.push_filters:
        return KafkaBatchReader(opts)
    require(FILTER_PUSHDOWN, "Option 'pushFilters' (filter pushdown)", "4.1")
    return KafkaPushdownReader(opts)
