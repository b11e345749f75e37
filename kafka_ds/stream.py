"""Streaming read: ``spark.readStream.format("pykafka")``.

How Spark 4.3 drives a Python stream reader (verified end to end, see
tests/test_stream.py and docs/streaming.md): one long-lived Python process on
the driver holds this reader and answers, per trigger, ``latestOffset(start,
limit)`` (``start`` = end of the last batch in Spark's commit log, or
``initialOffset()`` before the first batch), then ``partitions(start, end)``
for the batch it wrote to the offset log; ``commit(end)`` arrives one batch
late (when the next batch is planned). An idle query asks ``latestOffset`` about
every 10 ms. The executors' ``read`` runs in other processes on a pickled copy.
``stop()`` only runs because the reader turns the SIGTERM Spark sends the
process into ``SystemExit``.

Offsets
    ``{topic: {"partition": offset}}`` with keys sorted (partitions as strings),
    so the JSON Spark stores and compares is stable. ``-1`` stands for "latest,
    not resolved yet": ``startingOffsets=latest`` (also ``-1`` in a JSON, or
    the ``latest`` fallback of ``startingOffsets=group``) gives such markers as the
    initial offset and the first micro-batch resolves them to the real offsets
    and reads nothing (an empty batch). Spark's own Kafka source persists its
    resolved initial offsets in the checkpoint, which a Python source cannot
    reach; without the marker a restart during the first batch would replay it
    from a different, later start. Every other start (``earliest``, JSON,
    timestamps, group) is resolved once per process and cached, because Spark
    asks ``initialOffset()`` again for every trigger until a first batch exists.

Admission control
    ``maxOffsetsPerTrigger`` is shared among partitions in proportion to their
    backlog exactly like Spark's ``KafkaMicroBatchStream.rateLimit`` (so 2
    partitions of 8 + 7 records with a limit of 5 take 4 batches);
    ``minOffsetsPerTrigger`` waits up to ``maxTriggerDelay``.
    ``Trigger.AvailableNow`` reads up to the latest offsets seen by the run's first
    ``latestOffset`` (in several batches when limited; not in
    ``prepareForTriggerAvailableNow``, SPARK-53560), and every batch of the run checks
    that its end is within them and still available (Spark's AvailableNow end checks);
    ``Trigger.Once`` gets ``ReadAllAvailable`` from Spark and reads everything.

    When no subscribed partition is left (the only topic deleted), ``latestOffset``
    returns its start: no batch, nothing recorded (SPARK-41375).

Tasks
    One Spark task per offset range, as Spark's source, except for a small micro-batch
    (at most ``smallBatchRecords`` records): one task reads all its ranges in turn
    (:func:`plan_tasks`). Every task costs Spark a Python worker round trip for the read
    and one for the sink; with the default trigger a batch's latency is mostly such
    fixed costs (benchmarks/stream_latency.py).

Data loss (``failOnDataLoss``)
    Partitions of a subscription that disappear are dropped from the end offset
    and reported when the batch is planned ("... are gone"); an end below the
    start (topic re-created) is reported too; offsets that aged out are reported
    by the executors as in batch reads. With ``failOnDataLoss=false`` these are
    logged and the query goes on; a partition that comes back starts at earliest.

Consumer-group commits
    Only with ``kafka.group.id`` or an explicit ``groupIdPrefix`` (Spark's own
    source never commits; committing under a generated id by default would
    leave a new group in the cluster for every query run). The group gets, via
    OffsetCommit (generation -1, empty member id, like any standalone
    consumer), the end offsets of batches that Spark has recorded as done in its
    commit log. Spark tells the reader so in two ways: ``latestOffset(start)`` is
    called only once the batch ending at ``start`` is done (also at the very
    start with the initial offsets, and before an ``AvailableNow`` query ends),
    and ``commit(end)``. A background thread sends the newest such offsets,
    retrying with back-off; failures are logged and never fail or stall the
    query. ``stop()`` waits (bounded) for the last one. So the group is **never
    ahead** of processed data and equals the end of the last processed batch
    whenever Spark has looked for more data after it: at the end of an
    AvailableNow query, after ``processAllAvailable()``, and whenever a
    default-trigger query is idle. It lags by the last batch when the query
    stops between that batch and the next trigger (``processingTime``
    intervals, ``Trigger.Once``); the next run from the same checkpoint commits
    it at its first trigger, or :func:`commit_query_progress` commits it at once.
"""
from __future__ import annotations

import json
import logging
import signal
import threading
import time
import uuid
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from .compat import ADMISSION_CONTROL, SupportsTriggerAvailableNow, require

from .client import EARLIEST, LATEST
from .options import ReadOptions
from .protocol.errors import ConfigurationError
from .reader import KafkaInputPartition, make_client, read_range, split_ranges
from .stream_offsets import StreamOffsets, from_offset_dict, rate_limit, to_offset_dict
from .worker_process import freeze_long_lived_objects

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
    round trip for the read and one for the write, ~50 ms on 2 cores, and tasks beyond
    the cores run in a second wave; reading a few thousand records takes far less."""
    tasks = [KafkaInputPartition(r.topic, r.partition, r.start, r.end) for r in ranges]
    small = opts.small_batch_records
    if (len(tasks) > 1 and small and opts.min_partitions is None
            and opts.max_records_per_partition is None
            and sum(r.end - r.start for r in ranges) <= small):
        return [KafkaInputRanges(tuple(tasks))]
    return tasks


class GroupCommitter:
    """Sends OffsetCommit for the newest offsets handed to :meth:`submit`, from a daemon
    thread with its own connection, so a slow or absent coordinator never holds up
    planning. Offsets only move forward: a submission at or below the previous one
    everywhere is ignored."""

    def __init__(self, opts: ReadOptions, group_id: str, max_backoff_s: float = 10.0):
        self.opts = opts
        self.group_id = group_id
        self.max_backoff_s = max_backoff_s
        self._cond = threading.Condition()
        self._wanted: dict | None = None      # newest offsets to commit
        self._committed: dict | None = None   # last offsets the coordinator accepted
        self._thread: threading.Thread | None = None
        self._closed = False
        self.failures = 0

    def submit(self, offsets: dict[tuple[str, int], int]) -> None:
        offsets = {tp: off for tp, off in offsets.items() if off >= 0}
        if not offsets:
            return
        with self._cond:
            previous = self._wanted
            if previous is not None and (offsets == previous or (
                    set(offsets) <= set(previous)
                    and all(off <= previous[tp] for tp, off in offsets.items()))):
                return
            self._wanted = offsets
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name=f"kafka_ds-group-commit-{self.group_id}")
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        client = None
        backoff = 0.2
        while True:
            with self._cond:
                while not self._closed and self._wanted == self._committed:
                    self._cond.wait()
                if self._closed and self._wanted == self._committed:
                    break
                wanted = self._wanted
            try:
                if client is None:
                    client = make_client(self.opts)
                client.commit_offsets(self.group_id, wanted)
            except Exception as exc:  # noqa: BLE001 - a commit must never fail the query
                self.failures += 1
                log.warning("OffsetCommit of group %r failed (%s); retrying in %.1f s",
                            self.group_id, exc, backoff)
                if client is not None:
                    client.close()
                    client = None
                with self._cond:
                    if not self._closed:
                        self._cond.wait(backoff)
                    else:
                        break
                backoff = min(backoff * 2, self.max_backoff_s)
                continue
            backoff = 0.2
            with self._cond:
                self._committed = wanted
                self._cond.notify_all()
        if client is not None:
            client.close()

    def flush(self, timeout: float) -> bool:
        """Wait until the newest submitted offsets are committed (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._wanted != self._committed:
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    break
                self._cond.wait(left)
            return self._wanted == self._committed

    def close(self, timeout: float) -> None:
        done = self.flush(timeout)
        if not done:
            log.warning("stopping with the offsets %s of group %r not committed",
                        self._wanted, self.group_id)
        with self._cond:
            self._closed = True
            self._cond.notify_all()


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Answers Spark's calls; where batches start and end is :class:`StreamOffsets`'s
    business (kafka_ds/stream_offsets.py), the consumer group's :class:`GroupCommitter`'s."""

    def __init__(self, opts: ReadOptions, raw_options):
        for option, value in (("maxOffsetsPerTrigger", opts.max_offsets_per_trigger),
                              ("minOffsetsPerTrigger", opts.min_offsets_per_trigger)):
            if value is not None:
                require(ADMISSION_CONTROL, f"Option '{option}' (admission control)", "4.2")
        self.opts = opts
        self._committer: GroupCommitter | None = None
        explicit_prefix = any(str(k).lower() == "groupidprefix" for k in dict(raw_options))
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

    def initialOffset(self) -> dict:
        self._install_sigterm_handler()
        return self.offsets.initial()

    def getDefaultReadLimit(self):
        return self.offsets.default_read_limit()

    def prepareForTriggerAvailableNow(self) -> None:
        self._install_sigterm_handler()
        self.offsets.prepare_available_now()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        self._install_sigterm_handler()
        if start is not None:
            # Spark asks for the next batch only after the batch ending at ``start`` is done.
            self._commit_to_group(start)
        return self.offsets.latest(start, limit)

    def reportLatestOffset(self):
        return self.offsets.reported_latest()

    # --- planning and reading ------------------------------------------------------

    def partitions(self, start: dict, end: dict):
        ranges = split_ranges(self.offsets.ranges(start, end), self.opts.min_partitions,
                              self.opts.max_records_per_partition)
        return plan_tasks(ranges, self.opts)

    def read(self, partition):
        freeze_long_lived_objects()
        if not isinstance(partition, KafkaInputRanges):
            yield from read_range(self.opts, partition)
            return
        client = make_client(self.opts)   # one connection for all the ranges
        try:
            for piece in partition.ranges:
                yield from read_range(self.opts, piece, client)
        finally:
            client.close()

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

    def stop(self) -> None:
        if self._committer is not None:
            timeout = min(self.client_timeout_s(), 15.0)
            self._committer.close(timeout)
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

    def _fail(self, *args, **kwargs):
        raise self.error

    initialOffset = latestOffset = partitions = read = commit = _fail
    getDefaultReadLimit = reportLatestOffset = prepareForTriggerAvailableNow = _fail

    def stop(self) -> None:
        pass


def commit_query_progress(query, options: dict) -> dict:
    """Commit to the consumer group the end offsets of the last batch ``query`` finished.

    For the case the reader cannot cover by itself (see the module docstring): a query
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
    progress = query.lastProgress
    if not progress:
        return {}
    candidates = []
    for source in progress.get("sources", []):
        try:
            end = json.loads(source.get("endOffset") or "null")
        except (TypeError, ValueError):
            continue
        if isinstance(end, dict) and end and all(
                isinstance(parts, dict) and all(str(p).isdigit() and isinstance(o, int)
                                                for p, o in parts.items())
                for parts in end.values()):
            candidates.append(end)
    if len(candidates) != 1:
        raise ConfigurationError(
            f"commit_query_progress needs a query with exactly one Kafka source; found "
            f"{len(candidates)} sources with Kafka offsets in query.lastProgress")
    offsets = {tp: off for tp, off in from_offset_dict(candidates[0]).items() if off >= 0}
    client = make_client(opts)
    try:
        client.commit_offsets(opts.group_id, offsets)
    finally:
        client.close()
    return to_offset_dict(offsets)


__all__ = ["KafkaStreamReader", "InvalidOptionsStreamReader", "GroupCommitter", "commit_query_progress", "to_offset_dict",
           "from_offset_dict", "rate_limit", "EARLIEST", "LATEST"]
