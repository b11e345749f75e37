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

from pyspark.sql.datasource import DataSourceStreamReader

from .compat import (
    ADMISSION_CONTROL,
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
    require,
)

from .client import EARLIEST, LATEST
from .options import ReadOptions
from .protocol.errors import ConfigurationError, DataLossError
from .reader import (
    KafkaInputPartition,
    OffsetPlanner,
    OffsetRange,
    _data_loss,
    make_client,
    read_range,
    split_ranges,
)

log = logging.getLogger(__name__)


def to_offset_dict(offsets: dict[tuple[str, int], int]) -> dict:
    """{(topic, partition): offset} -> JSON-able dict with keys sorted as strings."""
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in offsets.items():
        nested.setdefault(topic, {})[str(partition)] = int(offset)
    return {topic: dict(sorted(parts.items())) for topic, parts in sorted(nested.items())}


def from_offset_dict(offsets: dict) -> dict[tuple[str, int], int]:
    return {(topic, int(partition)): int(offset)
            for topic, parts in offsets.items() for partition, offset in parts.items()}


def rate_limit(limit: int, start: dict, end: dict, earliest_new: dict) -> dict:
    """Spark's KafkaMicroBatchStream.rateLimit: share ``limit`` records among partitions in
    proportion to their backlog; small partitions get at least one record."""
    sizes = {}
    for tp, finish in end.items():
        begin = start.get(tp, earliest_new.get(tp))
        if begin is not None and finish - begin > 0:
            sizes[tp] = finish - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(end)
    result = {}
    for tp, finish in end.items():
        if tp not in sizes:
            result[tp] = finish
            continue
        begin = start.get(tp, earliest_new.get(tp))
        prorate = limit * (sizes[tp] / total)
        share = int(prorate) if prorate >= 1 else (1 if prorate > 0 else 0)
        result[tp] = min(finish, begin + share)
    return result


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
    def __init__(self, opts: ReadOptions, raw_options):
        for option, value in (("maxOffsetsPerTrigger", opts.max_offsets_per_trigger),
                              ("minOffsetsPerTrigger", opts.min_offsets_per_trigger)):
            if value is not None:
                require(ADMISSION_CONTROL, f"Option '{option}' (admission control)", "4.2")
        self.opts = opts
        self._client = None
        self._initial: dict | None = None
        self._available_now_target: dict | None = None
        self._available_now = False
        self._latest: dict | None = None
        self._last_batch_time = time.monotonic()
        self._committer: GroupCommitter | None = None
        # (start, when) of the last latestOffset that found nothing new: Spark asks again
        # ~10 ms later, and the brokers are not asked again before idlePollIntervalMs.
        self._idle: tuple | None = None
        explicit_prefix = any(str(k).lower() == "groupidprefix" for k in dict(raw_options))
        if opts.group_id:
            self.group_id = opts.group_id
        elif explicit_prefix:
            self.group_id = f"{opts.group_id_prefix}-{uuid.uuid4()}"
        else:
            self.group_id = None

    # --- plumbing --------------------------------------------------------------

    def __getstate__(self):
        # Executors get a pickled copy for read(): no sockets, threads or locks.
        state = dict(self.__dict__)
        state["_client"] = None
        state["_committer"] = None
        return state

    @property
    def client(self):
        if self._client is None:
            self._client = make_client(self.opts)
        return self._client

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

    def _planner(self):
        return OffsetPlanner(self.opts, self.client)

    def _topic_partitions(self):
        # Spark asks every trigger (~100 times a second when idle): reuse the metadata
        # of subscribed topics for kafka.metadata.max.age.ms (a pattern still lists the
        # topics every trigger, as Spark's source does).
        return self._planner().topic_partitions(self.client.config.metadata_max_age_ms)

    def _latest_offsets(self, tps):
        return self._planner().latest(tps) if tps else {}

    def _earliest_offsets(self, tps):
        return self._planner().earliest(tps) if tps else {}

    # --- offsets -----------------------------------------------------------------

    def initialOffset(self) -> dict:
        self._install_sigterm_handler()
        if self._initial is None:
            self._initial = to_offset_dict(self._resolve_initial())
        return self._initial

    def _resolve_initial(self) -> dict:
        tps = self._topic_partitions()
        spec = self.opts.starting
        if spec.kind == "latest":
            return {tp: LATEST for tp in tps}
        if spec.kind == "group":
            return self._group_offsets(tps)
        if spec.kind == "specific":
            # -1 (latest) stays a marker until the first batch is planned
            return self._planner().specific(spec, tps, keep_latest=True)
        return self._planner().resolve(spec, tps, start=True)

    def _group_offsets(self, tps):
        if not self.group_id:
            raise ConfigurationError("startingOffsets=group needs option 'kafka.group.id'")
        committed = self.client.fetch_committed(self.group_id, tps) if tps else {}
        missing = [tp for tp in tps if tp not in committed]
        fallback = {}
        if missing:
            if self.opts.group_fallback == "latest":
                fallback = {tp: LATEST for tp in missing}
            else:
                fallback = self._earliest_offsets(missing)
        return {tp: committed.get(tp, fallback.get(tp)) for tp in tps}

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # The offsets to read up to are fetched by the first latestOffset() of the run, not
        # here (SPARK-53560): a restarted query first re-runs the batch it has in its offset
        # log but not in its commit log, with that batch's recorded offsets and without
        # asking latestOffset(); a target fetched now would see partitions created since and
        # fail that batch's end checks on every restart.
        self._install_sigterm_handler()
        self._available_now = True
        self._available_now_target = None

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        self._install_sigterm_handler()
        if start is None:
            # pyspark < 4.2 asks without the start (no admission control): the latest
            # offsets; partitions(start, end) skips what is still a "latest" marker.
            latest = self._latest_offsets(self._topic_partitions())
            self._latest = dict(latest)
            return to_offset_dict(latest)
        # Spark asks for the next batch only after the batch ending at ``start`` is done.
        self._commit_to_group(start)
        interval = self.opts.idle_poll_interval_ms / 1000.0
        if interval and self._idle is not None and self._available_now_target is None:
            idle_start, since = self._idle
            if idle_start == start and time.monotonic() - since < interval:
                return start   # asked the brokers a moment ago: still nothing new
        result = self._latest_offset(start, limit)
        self._idle = (start, time.monotonic()) if result == start else None
        return result

    def _latest_offset(self, start: dict, limit) -> dict:
        begin = from_offset_dict(start)
        if self._available_now and self._available_now_target is None:
            self._available_now_target = self._latest_offsets(self._topic_partitions())
        if self._available_now_target is not None:
            latest = dict(self._available_now_target)
        else:
            latest = self._latest_offsets(self._topic_partitions())
        if not latest and start:
            # No partition at all (the only subscribed topic was deleted): keep the previous
            # offsets instead of recording {} as the latest (SPARK-41375); Spark's source
            # returns no offset, so no batch runs.
            self._latest = None
            return start
        self._latest = dict(latest)
        # Unresolved "latest" markers: resolved now, with nothing to read in between.
        # (A marker of a partition that does not exist now stays a marker.)
        markers = [tp for tp, off in begin.items() if off == LATEST]
        resolved = {tp: latest[tp] for tp in markers if tp in latest}
        unresolved = {tp: LATEST for tp in markers if tp not in latest}
        pending = {tp: off for tp, off in begin.items() if off != LATEST}
        if resolved:
            # The batch that pins them reads nothing; the others keep their offsets.
            return to_offset_dict({**pending, **unresolved, **resolved})
        # Partitions gone from the subscription are left out (reported in partitions()).
        new = [tp for tp in latest if tp not in pending]
        earliest_new = self._new_partition_starts(new, latest)
        end = latest
        if limit is not None and not isinstance(limit, ReadAllAvailable):
            end = self._admit(limit, pending, latest, earliest_new, start)
            if end is None:
                return start
        result = to_offset_dict({**end, **unresolved})
        if result != start:
            self._last_batch_time = time.monotonic()
        return result

    def _admit(self, limit, begin, latest, earliest_new, start):
        """End offsets under a ReadLimit; None = wait (minOffsetsPerTrigger not reached)."""
        max_rows = min_rows = None
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
            min_rows = self.opts.min_offsets_per_trigger
        elif isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
            max_rows = self.opts.max_offsets_per_trigger
        if min_rows is not None and self._available_now_target is None:
            backlog = sum(max(0, off - begin.get(tp, earliest_new.get(tp, off)))
                          for tp, off in latest.items())
            waited_ms = (time.monotonic() - self._last_batch_time) * 1000
            if backlog < min_rows and waited_ms < self.opts.max_trigger_delay_ms:
                return None
        if max_rows is None:
            return latest
        return rate_limit(max_rows, begin, latest, earliest_new)

    def reportLatestOffset(self):
        return None if self._latest is None else to_offset_dict(self._latest)

    # --- planning and reading ------------------------------------------------------

    def _new_partition_starts(self, new, end: dict) -> dict:
        """Where partitions that appeared after the start begin: earliest, as in Spark, or
        ``end`` (nothing read before it) for a topic whose startingOffsets value is the
        topic-level "latest" (a topic subscribePattern matches later, SPARK-58774)."""
        spec = self.opts.starting
        latest_topics = {t for t, off in spec.topic_offsets if off == LATEST} \
            if spec.kind == "specific" else set()
        at_end = {tp: end[tp] for tp in new if tp[0] in latest_topics and tp in end}
        starts = self._earliest_offsets([tp for tp in new if tp not in at_end])
        starts.update(at_end)
        return starts

    def _verify_available_now_end(self, finish: dict) -> None:
        """Spark's verifyEndOffsetForTriggerAvailableNow: a batch of an AvailableNow run must
        end within the offsets fetched for the run, on partitions that still exist and have
        not gone back -- checked for every partition of the end offset, also those without
        new records. (Spark fails here whatever failOnDataLoss says.)"""
        target = self._available_now_target
        end = {tp: off for tp, off in finish.items() if off != LATEST}

        def show(offsets):
            return json.dumps(to_offset_dict(offsets), sort_keys=True)

        # Spark wants the same partitions; a subset is fine here, since the batch that
        # resolves "latest" markers ends only on the partitions the query started with.
        if not set(end) <= set(target):
            raise DataLossError(
                "Kafka data source in Trigger.AvailableNow should provide the same topic "
                "partitions in pre-fetched offset to end offset for each microbatch. "
                f"topic-partitions for pre-fetched offset: {show(target)}, topic-partitions for "
                f"end offset: {show(end)}. The error could be transient - restart your query.")
        if any(off > target[tp] for tp, off in end.items()):
            raise DataLossError(
                "For Kafka data source with Trigger.AvailableNow, end offset should have lower "
                "or equal offset per each topic partition than pre-fetched offset. pre-fetched "
                f"offset: {show(target)}, end offset: {show(end)}.")
        latest = self._latest_offsets(self._topic_partitions())
        lost = sorted(set(end) - set(latest))
        if lost:
            raise DataLossError(
                "Some of partitions in Kafka topic(s) have been lost during running query with "
                "Trigger.AvailableNow: " + ", ".join(f"{t}-{p}" for t, p in lost)
                + f". topic-partitions for latest offset: {show(latest)}, topic-partitions for "
                f"end offset: {show(end)}. The error could be transient - restart your query.")
        back = sorted(tp for tp, off in end.items() if off > latest[tp])
        if back:
            raise DataLossError(
                "Some of partitions in Kafka topic(s) report available offset which is less "
                "than end offset during running query with Trigger.AvailableNow: "
                + ", ".join(f"{t}-{p}" for t, p in back)
                + f". latest offset: {show(latest)}, end offset: {show(end)}. The topic may "
                "have been deleted and re-created, or truncated.")

    def partitions(self, start: dict, end: dict):
        begin = from_offset_dict(start)
        finish = from_offset_dict(end)
        if self._available_now_target is not None:
            self._verify_available_now_end(finish)
        gone = sorted(tp for tp, off in begin.items() if tp not in finish and off != LATEST)
        if gone:
            # A batch 0 that Spark re-runs after a restart gets its start from
            # initialOffset() again (a Python source cannot store its initial offsets in the
            # checkpoint), which may name partitions created after the batch's end was
            # recorded (SPARK-53560's case). Those are not gone: this batch skips them and
            # the next one reads them as new partitions, from earliest.
            subscribed = set(self._topic_partitions())
            gone = [tp for tp in gone if tp not in subscribed]
        if gone:
            _data_loss(self.opts, "Partitions " + ", ".join(f"{t}-{p}" for t, p in gone)
                       + " are gone (topic deleted, or no longer matching the subscription)")
        new = [tp for tp in finish if tp not in begin]
        earliest_new = self._new_partition_starts(new, finish)
        ranges = []
        for tp, stop in sorted(finish.items()):
            first = begin.get(tp, earliest_new.get(tp))
            if first is None or first == LATEST or stop == LATEST:
                continue
            if stop < first:
                what = (f"new partition {tp[0]}-{tp[1]} starts at offset {first}, after the "
                        f"planned end {stop} (records were deleted)") if tp in earliest_new else \
                    (f"{tp[0]}-{tp[1]} went backwards from offset {first} to {stop} (was the "
                     "topic deleted and re-created?)")
                _data_loss(self.opts, what)
                continue
            ranges.append(OffsetRange(tp[0], tp[1], first, stop))
        ranges = split_ranges(ranges, self.opts.min_partitions,
                              self.opts.max_records_per_partition)
        return [KafkaInputPartition(r.topic, r.partition, r.start, r.end) for r in ranges]

    def read(self, partition):
        yield from read_range(self.opts, partition)

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
        if self._client is not None:
            self._client.close()
            self._client = None

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
