"""Streaming read: ``spark.readStream.format("pykafka")``.

Offsets are ``{topic: {"partition": offset}}`` dicts whose keys are sorted (as strings),
so the JSON Spark stores and compares is stable across calls and restarts.

Consumer-group commits: with ``kafka.group.id`` (or an explicit ``groupIdPrefix``) the
source commits, via OffsetCommit, the end offsets of every micro-batch Spark has
finished. Spark tells a source a batch is finished in two ways: ``latestOffset(start)``
is only called for the next batch after the previous one (ending at ``start``) is
done and in the commit log, and ``commit(end)`` arrives one batch late. Both are used,
so the group never runs ahead of processed data and is at most the batch in flight
behind it.
"""
from __future__ import annotations

import logging
import signal
import time
import uuid

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from .client import EARLIEST, LATEST
from .options import OffsetSpec, ReadOptions
from .protocol.errors import KafkaError
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


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions, raw_options):
        self.opts = opts
        self._client = None
        self._available_now_target: dict | None = None
        self._latest: dict | None = None
        self._last_batch_time = time.monotonic()
        self._committed: dict | None = None
        explicit_prefix = any(str(k).lower() == "groupidprefix" for k in dict(raw_options))
        if opts.group_id:
            self.group_id = opts.group_id
        elif explicit_prefix:
            self.group_id = f"{opts.group_id_prefix}-{uuid.uuid4()}"
        else:
            self.group_id = None
        self._install_sigterm_handler()

    # --- plumbing --------------------------------------------------------------

    @property
    def client(self):
        if self._client is None:
            self._client = make_client(self.opts)
        return self._client

    def _install_sigterm_handler(self):
        # Spark ends the driver-side Python runner with SIGTERM; turning that into
        # SystemExit lets the runner's ``finally: reader.stop()`` run.
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
        return self._planner().topic_partitions()

    def _latest_offsets(self, tps):
        planner = self._planner()
        return planner.resolve(OffsetSpec("latest", "latestOffset"), tps, start=False)

    def _earliest_offsets(self, tps):
        if not tps:
            return {}
        return self._planner().resolve(OffsetSpec("earliest", "earliest"), tps, start=True)

    # --- offsets -----------------------------------------------------------------

    def initialOffset(self) -> dict:
        tps = self._topic_partitions()
        spec = self.opts.starting
        if spec.kind == "group":
            offsets = self._group_offsets(tps)
        else:
            offsets = self._planner().resolve(spec, tps, start=True)
        return to_offset_dict(offsets)

    def _group_offsets(self, tps):
        if not self.group_id:
            raise KafkaError("startingOffsets=group needs option 'kafka.group.id'")
        committed = self.client.fetch_committed(self.group_id, tps) if tps else {}
        missing = [tp for tp in tps if tp not in committed]
        fallback = {}
        if missing:
            spec = OffsetSpec(self.opts.group_fallback, "startingOffsetsFallback")
            fallback = self._planner().resolve(spec, missing, start=True)
        return {tp: committed.get(tp, fallback.get(tp)) for tp in tps}

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._topic_partitions()
        self._available_now_target = self._latest_offsets(tps)

    def latestOffset(self, start: dict, limit=None) -> dict:
        # Spark asks for the next batch only after the batch ending at ``start`` is done.
        self._commit_to_group(start)
        begin = from_offset_dict(start)
        if self._available_now_target is not None:
            latest = dict(self._available_now_target)
        else:
            latest = self._latest_offsets(self._topic_partitions())
        self._latest = latest
        # Partitions that vanished are kept at their start (nothing to read).
        for tp, offset in begin.items():
            latest.setdefault(tp, offset)
        new = [tp for tp in latest if tp not in begin]
        earliest_new = self._earliest_offsets(new)
        if limit is None or isinstance(limit, ReadAllAvailable):
            return to_offset_dict(latest)
        max_rows = min_rows = None
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
            min_rows = self.opts.min_offsets_per_trigger
        elif isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
            max_rows = self.opts.max_offsets_per_trigger
        if min_rows is not None and self._available_now_target is None:
            backlog = sum(max(0, latest[tp] - begin.get(tp, earliest_new.get(tp, latest[tp])))
                          for tp in latest)
            waited_ms = (time.monotonic() - self._last_batch_time) * 1000
            if backlog < min_rows and waited_ms < self.opts.max_trigger_delay_ms:
                return start
        end = latest if max_rows is None else rate_limit(max_rows, begin, latest, earliest_new)
        result = to_offset_dict(end)
        if result != start:
            self._last_batch_time = time.monotonic()
        return result

    def reportLatestOffset(self):
        return None if self._latest is None else to_offset_dict(self._latest)

    # --- planning and reading ------------------------------------------------------

    def partitions(self, start: dict, end: dict):
        begin = from_offset_dict(start)
        finish = from_offset_dict(end)
        new = [tp for tp in finish if tp not in begin]
        earliest_new = self._earliest_offsets(new)
        ranges = []
        for tp, stop in sorted(finish.items()):
            first = begin.get(tp, earliest_new.get(tp))
            if first is None:
                continue
            if stop < first:
                _data_loss(self.opts, f"{tp[0]}-{tp[1]} went backwards from offset {first} to "
                           f"{stop} (was the topic deleted and re-created?)")
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
        """OffsetCommit ``offsets`` for the group; failures are logged, never raised."""
        if not self.group_id or not offsets or offsets == self._committed:
            return
        flat = from_offset_dict(offsets)
        if self._committed is not None:
            # Never move a group backwards because of a replayed, older offset.
            previous = from_offset_dict(self._committed)
            if all(flat.get(tp, -1) <= off for tp, off in previous.items()) and \
                    all(tp in previous for tp in flat) and flat != previous:
                return
        for attempt in range(3):
            try:
                self.client.commit_offsets(self.group_id, flat)
                self._committed = offsets
                return
            except Exception as exc:  # noqa: BLE001 - a commit must never fail the query
                log.warning("committing offsets of group %r failed (attempt %d): %s",
                            self.group_id, attempt + 1, exc)
                if self._client is not None:
                    self._client.close()
                    self._client = None
                time.sleep(0.2 * (attempt + 1))

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


__all__ = ["KafkaStreamReader", "to_offset_dict", "from_offset_dict", "rate_limit",
           "EARLIEST", "LATEST"]
