"""``spark.readStream.format("pykafka")``: the Spark stream reader.

Spark asks a long-lived Python process on the driver for offsets every trigger; this
reader answers through :class:`~kafka_ds.read.stream_offsets.StreamOffsets` (where each
micro-batch starts and ends) and hands the offsets of finished batches to the consumer
group (``kafka.group.id``; :class:`~kafka_ds.read.group_commits.GroupCommitter`). The
executors' ``read`` runs on a pickled copy. How Spark drives it, the offset format, data
loss and when the group's offsets move: docs/streaming.md.
"""

from __future__ import annotations

import json
import logging
import signal
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming import StreamingQueryListener

from .client import LATEST, make_client
from .client.kept import task_connections
from .compat import ADMISSION_CONTROL, SupportsTriggerAvailableNow, require
from .errors import ConfigurationError
from .options import ReadOptions
from .read.group_commits import GroupCommitter
from .read.planner import split_ranges
from .read.ranges import read_range
from .read.stream_offsets import StreamOffsets, from_offset_dict, to_offset_dict
from .reader import KafkaInputPartition
from .worker_process import freeze_long_lived_objects, spark_entry_point

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.streaming.listener import (
        QueryIdleEvent,
        QueryProgressEvent,
        QueryStartedEvent,
        QueryTerminatedEvent,
    )

log = logging.getLogger(__name__)


@dataclass
class KafkaInputRanges(InputPartition):
    """One Spark task reading several offset ranges one after the other: a small
    micro-batch (option ``smallBatchRecords``)."""

    ranges: tuple[KafkaInputPartition, ...]


def plan_tasks(ranges, opts: ReadOptions) -> list[InputPartition]:
    """The Spark tasks of a micro-batch: one per offset range, or a single
    :class:`KafkaInputRanges` when the batch has several ranges and at most
    ``smallBatchRecords`` records in all (and neither ``minPartitions`` nor
    ``maxRecordsPerPartition`` asks for a spread). Each task costs Spark a Python worker
    round trip for the read and one for the write, and tasks beyond the cores run in a
    second wave; reading a few thousand records takes far less (docs/streaming.md, "What
    a micro-batch costs")."""
    tasks = [KafkaInputPartition(r.topic, r.partition, r.start, r.end) for r in ranges]
    small = opts.small_batch_records
    if (
        len(tasks) > 1
        and small
        and opts.min_partitions is None
        and opts.max_records_per_partition is None
        and sum(r.end - r.start for r in ranges) <= small
    ):
        return [KafkaInputRanges(tuple(tasks))]
    return list(tasks)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Answers Spark's calls; where batches start and end is :class:`StreamOffsets`'s
    business (read/stream_offsets.py), the consumer group's :class:`GroupCommitter`'s."""

    def __init__(self, opts: ReadOptions, raw_options):
        for option, value in (
            ("maxOffsetsPerTrigger", opts.max_offsets_per_trigger),
            ("minOffsetsPerTrigger", opts.min_offsets_per_trigger),
        ):
            if value is not None:
                require(ADMISSION_CONTROL, f"Option '{option}' (admission control)", "4.2")
        self.opts = opts
        self._committer: GroupCommitter | None = None
        explicit_prefix = any(str(k).lower() == "groupidprefix" for k in dict(raw_options))
        self.group_id: str | None
        if opts.group_id:
            self.group_id = opts.group_id
        elif explicit_prefix:
            self.group_id = f"{opts.group_id_prefix}-{uuid.uuid4()}"
        else:
            self.group_id = None
        self.offsets = StreamOffsets(opts, self.group_id)

    # --- plumbing --------------------------------------------------------------

    def __getstate__(self):
        # Executors get a pickled copy for read(): no sockets, threads or locks (the
        # offsets leave their client behind).
        state = dict(self.__dict__)
        state["_committer"] = None
        return state

    @property
    def client(self):
        """The driver's client (the offsets' own, created on first use)."""
        return self.offsets.client

    @property
    def _client(self):
        """The driver's client if one is open, else None."""
        return self.offsets._client

    @staticmethod
    def _install_sigterm_handler():
        # Spark ends the driver-side Python process with SIGTERM; turned into SystemExit,
        # the runner's ``finally: reader.stop()`` runs and can flush the group commit.
        # Installed from the driver-side methods only (never in executor workers).
        try:
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):

                def _exit(signum, frame):
                    raise SystemExit(0)

                signal.signal(signal.SIGTERM, _exit)
        except ValueError:  # not the main thread (e.g. tests calling us directly)
            pass

    # --- offsets -----------------------------------------------------------------

    @spark_entry_point
    def initialOffset(self) -> dict:
        self._install_sigterm_handler()
        return self.offsets.initial()

    @spark_entry_point
    def getDefaultReadLimit(self):
        return self.offsets.default_read_limit()

    @spark_entry_point
    def prepareForTriggerAvailableNow(self) -> None:
        self._install_sigterm_handler()
        self.offsets.prepare_available_now()

    @spark_entry_point
    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        self._install_sigterm_handler()
        if start is not None:
            # Spark asks for the next batch only after the batch ending at ``start`` is done.
            self._commit_to_group(start)
        end = self.offsets.latest(start, limit)
        if start is not None and end == start and self.offsets.available_now:
            # The AvailableNow run ends with this answer: Spark stops the query, and a
            # driver script may exit at once, taking this process with it before the
            # background commit of the last batch went out (or while the one before it
            # still waits for its answer). Wait for it here, bounded, so the group holds
            # the end of the last batch when awaitTermination() returns.
            self._flush_group("the AvailableNow run ended")
        return end

    @spark_entry_point
    def reportLatestOffset(self):
        return self.offsets.reported_latest()

    # --- planning and reading ------------------------------------------------------

    @spark_entry_point
    def partitions(self, start: dict, end: dict):
        ranges = split_ranges(
            self.offsets.ranges(start, end),
            self.opts.min_partitions,
            self.opts.max_records_per_partition,
        )
        tasks = plan_tasks(ranges, self.opts)
        if not tasks and LATEST in from_offset_dict(start).values():
            # The first micro-batch of a "latest" start reads nothing: it only resolves the
            # latest offsets (docs/streaming.md). Given no task, Spark runs the sink's task
            # alone, so the first batch with records would start the read's Python worker
            # (fork, imports: seconds on a cold machine) while its records wait. One empty
            # task starts it now, before any record arrives (docs/performance.md).
            return [InputPartition(None)]
        return tasks

    @spark_entry_point
    def read(self, partition):
        freeze_long_lived_objects()
        # One client for all the ranges, with the connections this process's last task left
        # (read_range passes over the empty task that starts the worker: partitions())
        pieces = partition.ranges if isinstance(partition, KafkaInputRanges) else (partition,)
        with task_connections(self.opts) as client:
            for piece in pieces:
                yield from read_range(self.opts, piece, client)

    # --- progress ----------------------------------------------------------------

    def commit(self, end: dict) -> None:
        self._commit_to_group(end)

    def _commit_to_group(self, offsets: dict) -> None:
        """Hand offsets of a finished batch to the committer (never raises)."""
        if not self.group_id or not offsets:
            return
        try:
            if self._committer is None:
                self._committer = GroupCommitter(self.opts, self.group_id)
            self._committer.submit(from_offset_dict(offsets))
        except Exception as exc:  # noqa: BLE001 - a commit must never fail the query
            log.warning("cannot commit offsets of group %r: %s", self.group_id, exc)

    def _flush_group(self, why: str) -> None:
        """Wait until the group has the newest submitted offsets: at most
        ``kafka.request.timeout.ms``, and never more than 15 s (never raises)."""
        if self._committer is None:
            return
        if not self._committer.flush(self._flush_timeout_s()):
            log.warning(
                "%s with the offsets %s of group %r not committed yet",
                why,
                self._committer.wanted,
                self.group_id,
            )

    def _flush_timeout_s(self) -> float:
        return min(self.client_timeout_s(), 15.0)

    def stop(self) -> None:
        if self._committer is not None:
            self._committer.close(self._flush_timeout_s())
        self.offsets.close()

    def client_timeout_s(self) -> float:
        return self.opts.client.request_timeout_ms / 1000.0


class InvalidOptionsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Stands in for a stream reader whose options are wrong.

    PySpark's streaming source runner calls ``streamReader()`` inside a ``try`` whose
    ``finally`` calls ``reader.stop()``; an exception from ``streamReader()`` itself
    therefore surfaces as ``UnboundLocalError: ... 'reader'`` and the real message is
    lost. Returning this reader instead lets the runner start, and its first call raises
    the original error, which Spark then reports as the query's failure."""

    def __init__(self, error: Exception):
        self.error = error

    @spark_entry_point
    def _fail(self, *args, **kwargs):
        raise self.error

    initialOffset = latestOffset = partitions = read = commit = _fail
    getDefaultReadLimit = reportLatestOffset = prepareForTriggerAvailableNow = _fail

    def stop(self) -> None:
        pass


#: offsets or records behind as Spark's Kafka source writes them: {topic: {"partition": n}}
OffsetsByTopic = dict[str, dict[str, int]]


def _kafka_offsets(value: object) -> dict | None:
    """A source's offsets from a query progress (JSON text or already a dict) when they
    have the shape of a Kafka source's, ``{topic: {"partition": offset}}``; else None."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if (
        isinstance(value, dict)
        and value
        and all(
            isinstance(parts, dict)
            and all(str(p).isdigit() and isinstance(o, int) for p, o in parts.items())
            for parts in value.values()
        )
    ):
        return value
    return None


def _kafka_source(progress: Mapping[str, Any] | None, what: str) -> dict | None:
    """The one source of ``progress`` with Kafka offsets (None: no finished batch yet);
    ``what`` asks for it, named in the error."""
    if not progress:
        return None
    sources = [
        source
        for source in progress.get("sources", [])
        if _kafka_offsets(source.get("endOffset")) is not None
    ]
    if len(sources) != 1:
        raise ConfigurationError(
            f"{what} needs a query with exactly one Kafka source; found {len(sources)} sources "
            "with Kafka offsets in its progress"
        )
    return sources[0]


def commit_query_progress(query: StreamingQuery, options: Mapping[str, str]) -> OffsetsByTopic:
    """Commit to the consumer group the end offsets of the last batch ``query`` finished.

    For the case the reader cannot cover by itself (docs/streaming.md): a query
    stopped between a batch and the next trigger, or a ``Trigger.Once`` query.
    ``query.lastProgress`` is reported only after Spark wrote the batch to its commit
    log, so its end offsets are safe. ``options`` are the source's options
    (``kafka.bootstrap.servers``, ``kafka.group.id`` and any other ``kafka.*``); the
    query must read from exactly one ``pykafka`` source. Returns the committed offsets
    ``{topic: {partition: offset}}`` ({} when there was no finished batch).
    """
    from .options import parse_read_options

    opts = parse_read_options(options, streaming=True)
    if not opts.group_id:
        raise ConfigurationError("commit_query_progress needs option 'kafka.group.id'")
    source = _kafka_source(query.lastProgress, "commit_query_progress")
    if source is None:
        return {}
    offsets = {
        tp: off
        for tp, off in from_offset_dict(_kafka_offsets(source.get("endOffset")) or {}).items()
        if off >= 0
    }
    client = make_client(opts)
    try:
        client.commit_offsets(opts.group_id, offsets)
    finally:
        client.close()
    return to_offset_dict(offsets)


def progress_lag(progress: Mapping[str, Any] | None) -> OffsetsByTopic:
    """Records behind, ``{topic: {partition: count}}``, of the one pykafka source of a
    query's progress (``query.lastProgress``, or ``event.progress`` in a
    ``StreamingQueryListener``): the latest offsets the source saw when Spark planned the
    batch, minus the batch's end offsets. Spark asks for no broker here, so it is as fresh
    as the last trigger; {} before the first batch."""
    source = _kafka_source(progress, "progress_lag")
    if source is None:
        return {}
    end = from_offset_dict(_kafka_offsets(source.get("endOffset")) or {})
    latest = from_offset_dict(_kafka_offsets(source.get("latestOffset")) or {})
    lag = {
        tp: max(latest[tp] - offset, 0)
        for tp, offset in end.items()
        if tp in latest and offset >= 0 and latest[tp] >= 0
    }
    return to_offset_dict(lag)


def group_lag(options: Mapping[str, str]) -> OffsetsByTopic:
    """Records behind, ``{topic: {partition: count}}``, of the consumer group
    ``kafka.group.id`` on the partitions the options subscribe to: their latest offsets
    now (the last stable offset with ``read_committed``) minus the group's committed
    offsets, asked of the brokers. A partition the group has no offset for counts from
    its earliest offset. ``options`` are the source's options."""
    from .options import parse_read_options
    from .read.planner import OffsetPlanner

    opts = parse_read_options(options, streaming=True)
    if not opts.group_id:
        raise ConfigurationError("group_lag needs option 'kafka.group.id'")
    client = make_client(opts)
    try:
        planner = OffsetPlanner(opts, client)
        partitions = planner.topic_partitions()
        latest = planner.latest(partitions)
        committed = client.fetch_committed(opts.group_id, partitions)
        missing = [tp for tp in partitions if committed.get(tp, -1) < 0]
        committed.update(planner.earliest(missing))
    finally:
        client.close()
    return to_offset_dict(
        {
            tp: max(latest[tp] - committed[tp], 0)
            for tp in partitions
            if tp in latest and tp in committed
        }
    )


class LagListener(StreamingQueryListener):
    """Logs how far behind each query with a pykafka source is, after every micro-batch:
    ``spark.streams.addListener(LagListener())``. One line per batch on the logger
    ``kafka_ds.stream`` (INFO; ``level`` to change it): the query's name or id, the records
    behind in all and the partitions furthest behind (``progress_lag``)."""

    def __init__(self, level: int = logging.INFO, partitions_shown: int = 3):
        self.level = level
        self.partitions_shown = partitions_shown

    def onQueryStarted(self, event: QueryStartedEvent) -> None:
        pass

    def onQueryProgress(self, event: QueryProgressEvent) -> None:
        try:
            lag = from_offset_dict(progress_lag(event.progress))
        except ConfigurationError:
            return  # no pykafka source, or several Kafka sources
        if not lag:
            return
        worst = sorted(lag.items(), key=lambda item: -item[1])[: self.partitions_shown]
        log.log(
            self.level,
            "query %s is %d records behind (most: %s)",
            event.progress.name or event.progress.id,
            sum(lag.values()),
            ", ".join(f"{topic}-{partition} {count}" for (topic, partition), count in worst),
        )

    def onQueryIdle(self, event: QueryIdleEvent) -> None:
        pass

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:
        pass
