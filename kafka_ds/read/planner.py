"""Read planning on the driver: subscriptions and offset options resolved into offset
ranges through the cluster, split into Spark tasks as Spark's Kafka source splits them.
A range whose bound is "earliest" or "latest" can be resolved again by its task
(:func:`rebind`), so each Spark action reads up to the offsets of its own time."""

from __future__ import annotations

import logging
import math

from ..client import EARLIEST, LATEST, KafkaClient
from ..client.timestamp_offsets import check_answer, partition_fetcher, search_offset
from ..errors import ConfigurationError, DataLossError
from ..options import ReadOptions
from ..options.offset_spec import OffsetSpec
from ..protocol.errors import UnknownTopicId, UnknownTopicOrPartition
from .ranges import OffsetRange, data_loss

log = logging.getLogger(__name__)


class OffsetPlanner:
    """Resolves subscriptions and offset specs into concrete offsets via the cluster.
    One planner serves one planning step (a batch read's plan, a micro-batch's offsets,
    a task's rebinding)."""

    def __init__(self, opts: ReadOptions, client: KafkaClient):
        self.opts = opts
        self.client = client
        # (isolation level, topic, partition) -> the Fetch answer that checked ListOffsets:
        # one Fetch per leader serves a step's earliest and latest checks alike.
        self._fetched: dict[tuple[int, str, int], tuple[int, int, int]] = {}

    def _with_retries(self, operation, what, topics=None):
        """Driver-side calls retry under the client's policy, within
        ``kafka.default.api.timeout.ms``."""
        return self.client.retrying(operation, what, topics=topics)

    def topic_partitions(self, max_age_ms: float = 0) -> list[tuple[str, int]]:
        """The subscribed partitions. One Metadata request at most: for
        ``subscribePattern`` (every call, as Spark lists topics every trigger) all
        topics, for ``subscribe`` the subscribed ones unless the cached metadata is
        younger than ``max_age_ms`` (streaming: ``kafka.metadata.max.age.ms``)."""
        sub = self.opts.subscription
        if sub.kind == "assign":
            return list(sub.assignment)
        if sub.kind == "subscribe":
            topics = list(sub.topics)
        else:
            # match_topics fetched every topic's metadata: the cache below is fresh.
            topics = self._with_retries(lambda: self.client.match_topics(sub.pattern), "Metadata")
            max_age_ms = max(max_age_ms, 1000)
        found = self._with_retries(
            lambda: self.client.partitions_of_topics(topics, max_age_ms), "Metadata", topics=topics
        )
        for topic in topics:
            if topic not in found:
                # Spark's source reads nothing from a subscribed topic that does not exist.
                log.warning("subscribed topic %r does not exist", topic)
        return sorted((topic, p) for topic, partitions in found.items() for p in partitions)

    def list_offsets(self, requests: dict, isolation=None) -> dict:
        if not requests:
            return {}
        level = 1 if (self.opts.read_committed if isolation is None else isolation) else 0
        # KafkaClient.list_offsets retries under the same policy itself. Partitions of a
        # topic deleted meanwhile are left out (the caller reports them).
        found = self.client.list_offsets(requests, isolation_level=level, missing_ok=True)
        if self.opts.latest_via_fetch:
            ends = {
                tp: wanted
                for tp, wanted in requests.items()
                if wanted in (EARLIEST, LATEST) and tp in found
            }
            checked = self._check_with_fetch({tp: found[tp][0] for tp in ends}, ends, level)
            for tp in ends:
                if tp in checked:
                    found[tp] = (checked[tp], found[tp][1])
                else:  # deleted between the ListOffsets and the Fetch
                    del found[tp]
        return found

    def _check_with_fetch(self, listed: dict, wanted: dict, level: int) -> dict:
        """Check ListOffsets' earliest and latest answers against one Fetch per leader for
        all partitions: its high watermark (or last stable offset) for latest, its log start
        offset for earliest. On Apache Kafka both agree (the Fetch, at the high watermark,
        carries no records). Tansu answers both from its batches' modification times
        (latest: the newest batch's base offset + 1; earliest: the oldest-written batch's
        base offset, which concurrent producers can make a later batch's), so without the
        check a read would silently start after, or stop before, records it should read.
        Latest takes the larger answer and earliest the smaller: a batch read's range is
        fixed here, at planning."""
        if not listed:
            return {}
        unchecked = {
            tp: offset for tp, offset in listed.items() if (level, *tp) not in self._fetched
        }
        if unchecked:
            # KafkaClient.fetch_watermarks retries under the client's policy itself.
            marks = self.client.fetch_watermarks(unchecked, isolation_level=level, missing_ok=True)
            self._fetched.update(((level, *tp), mark) for tp, mark in marks.items())
        result = {}
        for tp, offset in listed.items():
            if (level, tp[0], tp[1]) not in self._fetched:
                continue  # its topic was deleted: the caller reports it
            high_watermark, last_stable, log_start = self._fetched[(level, tp[0], tp[1])]
            if wanted[tp] == EARLIEST:
                checked = min(offset, log_start) if log_start >= 0 else offset
            else:
                end = last_stable if level and last_stable >= 0 else high_watermark
                checked = max(offset, end)
            if checked != offset:
                log.debug(
                    "%s-%d: ListOffsets said %s=%d, Fetch says %d",
                    tp[0],
                    tp[1],
                    "earliest" if wanted[tp] == EARLIEST else "latest",
                    offset,
                    checked,
                )
            result[tp] = checked
        return result

    def offsets_for_times(self, wanted: dict) -> dict:
        """{(topic, partition): timestamp} -> {(t, p): (offset, -1)}: the first offset at or
        after each timestamp (-1: none), by ``timestampOffsetsVia``: ListOffsets trusted
        (``listOffsets``), checked with a small Fetch and searched when wrong (``auto``), or
        searched only (``fetch``; kafka_ds/client/timestamp_offsets.py)."""
        via = self.opts.timestamp_offsets_via
        if not wanted:
            return {}
        listed = {} if via == "fetch" else self.list_offsets(wanted)
        if via == "listOffsets":
            return listed
        tps = [tp for tp in wanted if via == "fetch" or tp in listed]
        earliest, latest = self.earliest(tps), self.latest(tps)
        level = 1 if self.opts.read_committed else 0
        result = {}
        for tp in tps:
            if tp not in earliest or tp not in latest:
                continue  # deleted meanwhile: the caller reports it
            fetch_batch = partition_fetcher(self.client, tp[0], tp[1], level)
            answer = listed[tp][0] if tp in listed else None
            if answer is not None and check_answer(
                fetch_batch, wanted[tp], answer, earliest[tp], latest[tp]
            ):
                result[tp] = (answer, -1)
                continue
            offset = search_offset(fetch_batch, wanted[tp], earliest[tp], latest[tp])
            if answer is not None:
                log.info(
                    "%s-%d: ListOffsets answered %d for timestamp %d; the Fetch search found %d",
                    tp[0],
                    tp[1],
                    answer,
                    wanted[tp],
                    offset,
                )
            result[tp] = (offset, -1)
        return result

    def _offsets_at(self, markers: dict) -> dict:
        """{(topic, partition): offset} for ``{(topic, partition): EARLIEST or LATEST}``."""
        return {tp: off for tp, (off, _ts) in self.list_offsets(markers).items()}

    def earliest(self, partitions) -> dict:
        """{(topic, partition): earliest offset} of ``partitions``."""
        return self._offsets_at({tp: EARLIEST for tp in partitions})

    def latest(self, partitions) -> dict:
        """{(topic, partition): latest offset} of ``partitions`` (the high watermark; the
        last stable offset with read_committed)."""
        return self._offsets_at({tp: LATEST for tp in partitions})

    def specific(
        self, spec: OffsetSpec, tps: list[tuple[str, int]], *, keep_latest: bool = False
    ) -> dict:
        """{(topic, partition): offset} for specific offsets (-2 earliest, -1 latest), which
        must name every partition of ``tps``.  ``keep_latest``: -1 stays the LATEST marker
        (a stream pins it when it plans its first batch)."""
        given = spec.for_partitions(tps)  # topic-level values expanded (SPARK-58774)
        missing = [tp for tp in tps if tp not in given]
        extra = [tp for tp in given if tp not in set(tps)]
        if missing or extra:
            details = []
            if missing:
                details.append(f"partitions without an offset: {missing}")
            if extra:
                details.append(f"partitions that are not subscribed: {extra}")
            where = "start" if spec.option.lower().startswith("starting") else "end"
            raise ConfigurationError(
                f"Partitions specified for Kafka {where} offsets don't match what are "
                f"assigned: option '{spec.option}' gives specific offsets, so it must name "
                f"every subscribed partition exactly; {'; '.join(details)}. Use -2 for "
                'earliest and -1 for latest, or "earliest"/"latest" for a whole topic.'
            )
        markers = {
            tp: off
            for tp, off in given.items()
            if off == EARLIEST or (off == LATEST and not keep_latest)
        }
        resolved = self._offsets_at(markers)
        return {tp: resolved.get(tp, given[tp]) for tp in tps}

    def resolve(self, spec: OffsetSpec, tps: list[tuple[str, int]], *, start: bool) -> dict:
        """{(topic, partition): offset} for ``spec`` over ``tps``."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "specific":
            return self.specific(spec, tps)
        if spec.kind in ("timestamp", "global_timestamp"):
            if spec.kind == "timestamp":
                wanted = spec.as_dict()
                missing = [tp for tp in tps if tp not in wanted]
                if missing:
                    raise ConfigurationError(
                        f"Option '{spec.option}' must give a timestamp for every subscribed "
                        f"partition; missing {missing}"
                    )
            else:
                wanted = {tp: spec.timestamp for tp in tps}
            found = self.offsets_for_times({tp: wanted[tp] for tp in tps})
            tps = [tp for tp in tps if tp in found]  # a deleted topic's are left out
            result = {}
            unmatched = [tp for tp in tps if found[tp][0] < 0]
            latest = {}
            if unmatched and (not start or self.opts.timestamp_strategy == "latest"):
                latest = self.latest(unmatched)
            for tp in tps:
                offset = found[tp][0]
                if offset < 0:
                    if start and self.opts.timestamp_strategy == "error":
                        raise DataLossError(
                            f"No offset matched from request of topic-partition {tp[0]}-{tp[1]} "
                            f"and timestamp {wanted[tp]}: no offset of {tp[0]}-{tp[1]} has a "
                            f"timestamp at or after it (option '{spec.option}'). Set "
                            "'startingOffsetsByTimestampStrategy' to 'latest' to start at the "
                            "latest offset instead."
                        )
                    offset = latest[tp]
                result[tp] = offset
            return result
        raise ConfigurationError(f"Option '{spec.option}'={spec.kind} is not valid here")

    def batch_ranges(self, keep=None) -> list[OffsetRange]:
        """One unsplit range per subscribed partition (empty ones included); only of the
        partitions ``keep(topic, partition)`` is true of, when given (pushed filters)."""
        subscribed = self.topic_partitions()
        tps = [tp for tp in subscribed if keep is None or keep(*tp)]
        if not tps:
            return []
        # Specific offsets must name every subscribed partition: checked on all of them.
        starts = self.resolve(
            self.opts.starting,
            subscribed if self.opts.starting.kind == "specific" else tps,
            start=True,
        )
        ends = self.resolve(
            self.opts.ending,
            subscribed if self.opts.ending.kind == "specific" else tps,
            start=False,
        )
        ranges = []
        gone = [tp for tp in tps if tp not in starts or tp not in ends]
        if gone:
            data_loss(
                self.opts,
                "Partitions "
                + ", ".join(f"{t}-{p}" for t, p in gone)
                + " disappeared while the read was planned (topic deleted?)",
            )
        for topic, partition in tps:
            if (topic, partition) not in starts or (topic, partition) not in ends:
                continue
            begin, finish = starts[(topic, partition)], ends[(topic, partition)]
            if begin > finish:
                raise DataLossError(
                    f"The resolved start offset {begin} is greater than the resolved end offset "
                    f"{finish} for topic {topic} partition {partition}: check options "
                    "'startingOffsets'/'endingOffsets' (or their timestamp forms); the topic "
                    "may also have been truncated."
                )
            ranges.append(OffsetRange(topic, partition, begin, finish))
        return ranges

    def plan_batch(self) -> list[OffsetRange]:
        return split_ranges(
            self.batch_ranges(), self.opts.min_partitions, self.opts.max_records_per_partition
        )


def _divide(rng: OffsetRange, parts: int) -> list[OffsetRange]:
    """Split evenly; the last part takes the rounding remainder (as Spark does)."""
    out = []
    remaining = rng.size
    begin = rng.start
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        finish = min(begin + this, rng.end)
        if finish > begin:
            out.append(OffsetRange(rng.topic, rng.partition, begin, finish))
        begin = finish
    return out


def split_ranges(ranges, min_partitions=None, max_records=None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: drop empty ranges, cap records per range,
    then split large ranges in proportion to their size until there are at least
    ``min_partitions``."""
    ranges = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(ranges) >= min_partitions) and max_records is None:
        return ranges
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _divide(r, math.ceil(r.size / max_records))]
    if min_partitions is None or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)

    def part_count(size, total_size, min_parts):
        # Scala's math.round rounds half up (Python's round() would round half to even).
        return max(math.floor(size / total_size * min_parts + 0.5), 1)

    unsplit = [r for r in ranges if part_count(r.size, total, min_partitions) == 1]
    unsplit_ids = {id(r) for r in unsplit}
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for r in ranges:
        parts = 1 if id(r) in unsplit_ids else part_count(r.size, split_total, split_min)
        out.extend(_divide(r, parts))
    return out


def late_offsets(spec: OffsetSpec, tps, marker: int) -> set:
    """Partitions whose offset ``spec`` gives as ``marker`` (EARLIEST or LATEST), i.e. to be
    resolved again when the scan runs."""
    if spec.kind == ("earliest" if marker == EARLIEST else "latest"):
        return set(tps)
    if spec.kind == "specific":
        return {tp for tp, off in spec.for_partitions(tps).items() if off == marker}
    return set()


def rebind(opts: ReadOptions, client: KafkaClient, piece):
    """``piece`` with its "earliest" start / "latest" end resolved now (None: nothing to
    read). Runs in the task, so each Spark action reads up to the offsets of its time."""
    tp = (piece.topic, piece.partition)
    planner = OffsetPlanner(opts, client)
    begin, finish = piece.start, piece.end
    try:
        # The planner leaves out partitions of a topic deleted since planning.
        if piece.late_start:
            begin = planner.earliest([tp]).get(tp)
        if piece.late_end and begin is not None:
            finish = planner.latest([tp]).get(tp)
        gone = begin is None or finish is None
        reason = ""
    except (UnknownTopicOrPartition, UnknownTopicId) as exc:
        gone, reason = True, f": {exc}"
    if gone:
        data_loss(opts, f"{tp[0]}-{tp[1]} no longer exists (was the topic deleted?){reason}")
        return None
    if piece.late_start and not piece.late_end:
        # Later pieces of this partition start at the planned end: never read past it.
        begin = min(begin, piece.end)
    if piece.late_end and not piece.late_start:
        if finish < begin:
            data_loss(
                opts,
                f"{tp[0]}-{tp[1]} now ends at offset {finish}, before the planned "
                f"start {begin} (records were deleted or the topic re-created)",
            )
            return None
    if finish <= begin:
        return None
    return OffsetRange(piece.topic, piece.partition, begin, finish)
