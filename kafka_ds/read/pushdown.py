"""Filter pushdown for batch reads (option ``pushFilters=true``): Spark's filters on
``topic``, ``partition``, ``offset`` and ``timestamp`` narrow the offset ranges a read
plans, so fewer records are fetched.

* ``topic`` (=, IN), ``partition`` (=, IN, <, <=, >, >=) and ``offset`` (=, <, <=, >, >=)
  are exact: the planned ranges hold exactly the matching records, and Spark does not
  evaluate them again.
* ``timestamp`` (>, >=, <, <=; BETWEEN arrives as >= and <=) narrows each range through the
  offsets-by-timestamp lookup (``timestampOffsetsVia``) and goes back to Spark, which
  evaluates it on what is read: a partition's timestamps need not increase with offsets.
  The narrowing assumes they do batch by batch (as CreateTime from one producer, or
  LogAppendTime, gives); records before the first batch reaching the lower bound, or after
  the first reaching the upper bound, are not read.
* Everything else goes back to Spark untouched.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from ..compat import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual
from .ranges import OffsetRange

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class Narrowing:
    """What pushed filters allow. Offsets and timestamps are half-open ``[low, high)``
    (timestamps in epoch milliseconds); None: no bound."""

    topics: frozenset | None = None
    partitions: frozenset | None = None
    partition_low: int | None = None
    partition_high: int | None = None
    offset_low: int | None = None
    offset_high: int | None = None
    timestamp_low: int | None = None
    timestamp_high: int | None = None

    def keeps(self, topic: str, partition: int) -> bool:
        return (
            (self.topics is None or topic in self.topics)
            and (self.partitions is None or partition in self.partitions)
            and (self.partition_low is None or partition >= self.partition_low)
            and (self.partition_high is None or partition < self.partition_high)
        )

    def describe(self) -> str:
        parts = []
        for name in ("topics", "partitions"):
            value = getattr(self, name)
            if value is not None:
                parts.append(f"{name} in {sorted(value)}")
        for name in ("partition", "offset", "timestamp"):
            low, high = getattr(self, f"{name}_low"), getattr(self, f"{name}_high")
            if low is not None or high is not None:
                parts.append(
                    f"{name} in [{'' if low is None else low}, {'' if high is None else high})"
                )
        return ", ".join(parts) or "nothing"


def _both(a, b, pick):
    return b if a is None else a if b is None else pick(a, b)


def _epoch_us(value) -> int | None:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return (value - _EPOCH) // dt.timedelta(microseconds=1)
    return None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_COMPARISONS = (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)


def _int_bounds(f) -> tuple[int | None, int | None] | None:
    """[low, high) of an integer comparison, or None when it is not one."""
    if not _is_int(getattr(f, "value", None)):
        return None
    if isinstance(f, EqualTo):
        return f.value, f.value + 1
    if isinstance(f, GreaterThan):
        return f.value + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return f.value, None
    if isinstance(f, LessThan):
        return None, f.value
    if isinstance(f, LessThanOrEqual):
        return None, f.value + 1
    return None


def _timestamp_bounds(f) -> tuple[int | None, int | None] | None:
    """[low, high) in epoch ms of a comparison with a (microsecond) timestamp literal:
    Kafka timestamps are whole milliseconds."""
    if not isinstance(f, _COMPARISONS):
        return None
    us = _epoch_us(getattr(f, "value", None))
    if us is None:
        return None
    floor_ms, ceil_ms = us // 1000, -(-us // 1000)
    if isinstance(f, GreaterThan):
        return floor_ms + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return ceil_ms, None
    if isinstance(f, LessThan):
        return None, ceil_ms
    return None, floor_ms + 1


def narrow(filters, narrowing: Narrowing | None = None):
    """``(narrowing, filters for Spark to evaluate)``."""
    n = narrowing or Narrowing()
    back = []
    for f in filters:
        column = f.attribute if hasattr(f, "attribute") else None
        taken = False
        if column == ("topic",):
            if isinstance(f, EqualTo) and isinstance(f.value, str):
                values = {f.value}
            elif isinstance(f, In) and all(isinstance(v, str) for v in f.value):
                values = set(f.value)
            else:
                values = None
            if values is not None:
                n = replace(n, topics=frozenset(values if n.topics is None else n.topics & values))
                taken = True
        elif column == ("partition",):
            if isinstance(f, In) and all(_is_int(v) for v in f.value):
                n = replace(
                    n,
                    partitions=frozenset(
                        set(f.value) if n.partitions is None else n.partitions & set(f.value)
                    ),
                )
                taken = True
            elif (bounds := _int_bounds(f)) is not None:
                n = replace(
                    n,
                    partition_low=_both(n.partition_low, bounds[0], max),
                    partition_high=_both(n.partition_high, bounds[1], min),
                )
                taken = True
        elif column == ("offset",):
            if (bounds := _int_bounds(f)) is not None:
                n = replace(
                    n,
                    offset_low=_both(n.offset_low, bounds[0], max),
                    offset_high=_both(n.offset_high, bounds[1], min),
                )
                taken = True
        elif column == ("timestamp",):
            if (bounds := _timestamp_bounds(f)) is not None:
                n = replace(
                    n,
                    timestamp_low=_both(n.timestamp_low, bounds[0], max),
                    timestamp_high=_both(n.timestamp_high, bounds[1], min),
                )
            back.append(f)  # narrowed, still checked by Spark
            continue
        if not taken:
            back.append(f)
    return n, back


def narrow_ranges(ranges, narrowing: Narrowing, planner):
    """``ranges`` (OffsetRange) cut to ``narrowing``, with the sides it moved: ``(ranges,
    {(topic, partition)} whose start moved, {...} whose end moved)``."""
    ranges = [r for r in ranges if narrowing.keeps(r.topic, r.partition)]
    tps = [(r.topic, r.partition) for r in ranges]
    low_ts = high_ts = {}
    if narrowing.timestamp_low is not None:
        low_ts = planner.offsets_for_times({tp: narrowing.timestamp_low for tp in tps})
    if narrowing.timestamp_high is not None:
        high_ts = planner.offsets_for_times({tp: narrowing.timestamp_high for tp in tps})
    out, moved_start, moved_end = [], set(), set()
    for r in ranges:
        tp = (r.topic, r.partition)
        start, end = r.start, r.end
        if narrowing.offset_low is not None:
            start = max(start, narrowing.offset_low)
        if narrowing.offset_high is not None:
            end = min(end, narrowing.offset_high)
        if tp in low_ts:
            found = low_ts[tp][0]
            start = max(start, end if found < 0 else found)
        if tp in high_ts and high_ts[tp][0] >= 0:
            end = min(end, high_ts[tp][0])
        if start != r.start:
            moved_start.add(tp)
        if end != r.end:
            moved_end.add(tp)
        end = max(start, end)
        out.append(OffsetRange(r.topic, r.partition, start, end))
    return out, moved_start, moved_end
