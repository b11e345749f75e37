"""The offset policy of the streaming read (docs/streaming.md says how Spark drives it):
which offsets a query starts from, where each micro-batch ends (read limits,
``Trigger.AvailableNow``, new partitions), and which planned ranges are data loss
(``failOnDataLoss``).

:class:`StreamOffsets` asks the brokers through its own driver-side client and keeps
the state that lasts across triggers; :class:`~kafka_ds.stream.KafkaStreamReader`
answers Spark's calls by delegating here. Offsets cross this boundary in Spark's JSON
form (:func:`to_offset_dict`); inside they are ``{(topic, partition): offset}``.
"""

from __future__ import annotations

import json
import time

from ..client import LATEST, KafkaClient, make_client
from ..compat import ReadAllAvailable, ReadMaxRows, ReadMinRows
from ..errors import ConfigurationError, DataLossError
from ..options import ReadOptions
from .planner import OffsetPlanner
from .ranges import OffsetRange, data_loss


def to_offset_dict(offsets: dict[tuple[str, int], int]) -> dict:
    """{(topic, partition): offset} -> JSON-able dict with keys sorted as strings."""
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in offsets.items():
        nested.setdefault(topic, {})[str(partition)] = int(offset)
    return {topic: dict(sorted(parts.items())) for topic, parts in sorted(nested.items())}


def from_offset_dict(offsets: dict) -> dict[tuple[str, int], int]:
    return {
        (topic, int(partition)): int(offset)
        for topic, parts in offsets.items()
        for partition, offset in parts.items()
    }


def rate_limit(limit: int, start: dict, end: dict, earliest_new: dict) -> dict:
    """Spark's KafkaMicroBatchStream.rateLimit: share ``limit`` records among partitions in
    proportion to their backlog; small partitions get at least one record."""
    begins = {}  # the partitions with a backlog: where each begins
    for tp, finish in end.items():
        begin = start.get(tp, earliest_new.get(tp))
        if begin is not None and finish - begin > 0:
            begins[tp] = begin
    total = float(sum(end[tp] - begin for tp, begin in begins.items()))
    if total < 1:
        return dict(end)
    result = {}
    for tp, finish in end.items():
        begin = begins.get(tp)
        if begin is None:
            result[tp] = finish
            continue
        prorate = limit * ((finish - begin) / total)
        share = int(prorate) if prorate >= 1 else (1 if prorate > 0 else 0)
        result[tp] = min(finish, begin + share)
    return result


def check_available_now_end(target: dict, finish: dict, fetch_latest) -> None:
    """Spark's verifyEndOffsetForTriggerAvailableNow: a batch of an AvailableNow run must
    end within the offsets fetched for the run (``target``), on partitions that still
    exist and have not gone back (``fetch_latest()``, asked only once the end is known to
    be within the target) -- checked for every partition of the end offset, also those
    without new records. (Spark fails here whatever failOnDataLoss says.)"""
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
            f"end offset: {show(end)}. The error could be transient - restart your query."
        )
    if any(off > target[tp] for tp, off in end.items()):
        raise DataLossError(
            "For Kafka data source with Trigger.AvailableNow, end offset should have lower "
            "or equal offset per each topic partition than pre-fetched offset. pre-fetched "
            f"offset: {show(target)}, end offset: {show(end)}."
        )
    latest = fetch_latest()
    lost = sorted(set(end) - set(latest))
    if lost:
        raise DataLossError(
            "Some of partitions in Kafka topic(s) have been lost during running query with "
            "Trigger.AvailableNow: "
            + ", ".join(f"{t}-{p}" for t, p in lost)
            + f". topic-partitions for latest offset: {show(latest)}, topic-partitions for "
            f"end offset: {show(end)}. The error could be transient - restart your query."
        )
    back = sorted(tp for tp, off in end.items() if off > latest[tp])
    if back:
        raise DataLossError(
            "Some of partitions in Kafka topic(s) report available offset which is less "
            "than end offset during running query with Trigger.AvailableNow: "
            + ", ".join(f"{t}-{p}" for t, p in back)
            + f". latest offset: {show(latest)}, end offset: {show(end)}. The topic may "
            "have been deleted and re-created, or truncated."
        )


#: How long a stream reuses the partition list of its subscribed topics (at most; less with
#: a smaller ``kafka.metadata.max.age.ms``): new partitions are read from the first trigger
#: after that, for the cost of one Metadata request a second when idle.
PARTITION_DISCOVERY_MS = 1000


class StreamOffsets:
    """A stream's offsets across triggers: initial offsets, batch ends, planned ranges.

    Holds the driver's client (created on first use, never pickled: executors only
    read) and what outlives one trigger: the resolved initial offsets, the
    AvailableNow target, the last latest offsets seen, when the last batch was
    admitted, and the last trigger that found nothing new."""

    def __init__(self, opts: ReadOptions, group_id: str | None):
        self.opts = opts
        self.group_id = group_id
        self._client: KafkaClient | None = None
        self._initial: dict | None = None
        self._available_now_target: dict | None = None
        self._available_now = False
        self._latest: dict | None = None
        self._last_batch_time = time.monotonic()
        # (start, when) of the last latestOffset that found nothing new: Spark asks again
        # ~10 ms later, and the brokers are not asked again before idlePollIntervalMs.
        self._idle: tuple | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    @property
    def client(self):
        if self._client is None:
            self._client = make_client(self.opts)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # --- asking the brokers ------------------------------------------------------

    def _planner(self):
        return OffsetPlanner(self.opts, self.client)

    def _topic_partitions(self):
        # Spark asks every trigger (~100 times a second when idle): reuse the metadata
        # of subscribed topics, but for a second at most (PARTITION_DISCOVERY_MS), so that
        # partitions added to a subscribed topic are read from a following trigger, as
        # Spark's source (which asks for them every trigger) reads them. A pattern still
        # lists the topics every trigger, as Spark's source does.
        max_age_ms = min(self.client.config.metadata_max_age_ms, PARTITION_DISCOVERY_MS)
        return self._planner().topic_partitions(max_age_ms)

    def _latest_offsets(self, tps):
        return self._planner().latest(tps) if tps else {}

    def _earliest_offsets(self, tps):
        return self._planner().earliest(tps) if tps else {}

    # --- initial offsets -----------------------------------------------------------

    def initial(self) -> dict:
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

    # --- batch ends ------------------------------------------------------------------

    def default_read_limit(self):
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepare_available_now(self) -> None:
        # The offsets to read up to are fetched by the first latestOffset() of the run, not
        # here (SPARK-53560): a restarted query first re-runs the batch it has in its offset
        # log but not in its commit log, with that batch's recorded offsets and without
        # asking latestOffset(); a target fetched now would see partitions created since and
        # fail that batch's end checks on every restart.
        self._available_now = True
        self._available_now_target = None

    @property
    def available_now(self) -> bool:
        """A Trigger.AvailableNow run (Spark called prepareForTriggerAvailableNow): a
        ``latest`` answer equal to its start ends the run."""
        return self._available_now

    def latest(self, start: dict | None, limit) -> dict:
        """The end of the next batch (``start`` itself: no batch now)."""
        if start is None:
            # pyspark < 4.2 asks without the start (no admission control): the latest
            # offsets; partitions(start, end) skips what is still a "latest" marker.
            latest = self._latest_offsets(self._topic_partitions())
            self._latest = dict(latest)
            return to_offset_dict(latest)
        interval = self.opts.idle_poll_interval_ms / 1000.0
        if interval and self._idle is not None and self._available_now_target is None:
            idle_start, since = self._idle
            if idle_start == start and time.monotonic() - since < interval:
                return start  # asked the brokers a moment ago: still nothing new
        result = self._batch_end(start, limit)
        self._idle = (start, time.monotonic()) if result == start else None
        return result

    def _batch_end(self, start: dict, limit) -> dict:
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
        # Partitions gone from the subscription are left out (reported in ranges()).
        new = [tp for tp in latest if tp not in pending]
        earliest_new = self._new_partition_starts(new, latest)
        end = latest
        if limit is not None and not isinstance(limit, ReadAllAvailable):
            end = self._admit(limit, pending, latest, earliest_new)
            if end is None:
                return start
        result = to_offset_dict({**end, **unresolved})
        if result != start:
            self._last_batch_time = time.monotonic()
        return result

    def _admit(self, limit, begin, latest, earliest_new):
        """End offsets under a ReadLimit; None = wait (minOffsetsPerTrigger not reached)."""
        max_rows = min_rows = None
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
            min_rows = self.opts.min_offsets_per_trigger
        elif isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
            max_rows = self.opts.max_offsets_per_trigger
        if min_rows is not None and self._available_now_target is None:
            backlog = sum(
                max(0, off - begin.get(tp, earliest_new.get(tp, off))) for tp, off in latest.items()
            )
            waited_ms = (time.monotonic() - self._last_batch_time) * 1000
            if backlog < min_rows and waited_ms < self.opts.max_trigger_delay_ms:
                return None
        if max_rows is None:
            return latest
        return rate_limit(max_rows, begin, latest, earliest_new)

    def reported_latest(self):
        return None if self._latest is None else to_offset_dict(self._latest)

    # --- planned ranges --------------------------------------------------------------

    def _new_partition_starts(self, new, end: dict) -> dict:
        """Where partitions that appeared after the start begin: earliest, as in Spark, or
        ``end`` (nothing read before it) for a topic whose startingOffsets value is the
        topic-level "latest" (a topic subscribePattern matches later, SPARK-58774)."""
        spec = self.opts.starting
        latest_topics = (
            {t for t, off in spec.topic_offsets if off == LATEST}
            if spec.kind == "specific"
            else set()
        )
        at_end = {tp: end[tp] for tp in new if tp[0] in latest_topics and tp in end}
        starts = self._earliest_offsets([tp for tp in new if tp not in at_end])
        starts.update(at_end)
        return starts

    def ranges(self, start: dict, end: dict) -> list[OffsetRange]:
        """The offset ranges of the batch ``start``..``end`` (not split yet), after the
        AvailableNow end checks; lost partitions and offsets are data loss."""
        begin = from_offset_dict(start)
        finish = from_offset_dict(end)
        if self._available_now_target is not None:
            check_available_now_end(
                self._available_now_target,
                finish,
                lambda: self._latest_offsets(self._topic_partitions()),
            )
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
            data_loss(
                self.opts,
                "Partitions "
                + ", ".join(f"{t}-{p}" for t, p in gone)
                + " are gone (topic deleted, or no longer matching the subscription)",
            )
        new = [tp for tp in finish if tp not in begin]
        earliest_new = self._new_partition_starts(new, finish)
        ranges = []
        for tp, stop in sorted(finish.items()):
            first = begin.get(tp, earliest_new.get(tp))
            if first is None or first == LATEST or stop == LATEST:
                continue
            if stop < first:
                what = (
                    (
                        f"new partition {tp[0]}-{tp[1]} starts at offset {first}, after the "
                        f"planned end {stop} (records were deleted)"
                    )
                    if tp in earliest_new
                    else (
                        f"{tp[0]}-{tp[1]} went backwards from offset {first} to {stop} (was the "
                        "topic deleted and re-created?)"
                    )
                )
                data_loss(self.opts, what)
                continue
            ranges.append(OffsetRange(tp[0], tp[1], first, stop))
        return ranges


__all__ = [
    "StreamOffsets",
    "check_available_now_end",
    "from_offset_dict",
    "rate_limit",
    "to_offset_dict",
]
