"""The newest record of the subscribed partitions that has a ``key``/``value``: where
``valueFormat=debezium-json`` finds the type of a topic whose records carry their own
schema (Kafka Connect's JSON converter with schemas). Driver side, once per query."""

from __future__ import annotations

from dataclasses import replace

from ..client import make_client
from ..options import ReadOptions
from .planner import OffsetPlanner
from .ranges import OffsetRange, read_range

#: records read back from each partition's end first; the window grows 8x while it finds none
FIRST_WINDOW = 32
LAST_WINDOW = 1 << 20


def newest_record(opts: ReadOptions, column: str) -> bytes | None:
    """The ``column`` (``key`` or ``value``) of the newest record (by timestamp, over the
    partitions' last records) that has one; None when no record has."""
    import numpy as np

    raw = replace(opts, typed=None, typed_spec=None, include_headers=False)
    client = make_client(raw)
    try:
        planner = OffsetPlanner(raw, client)
        partitions = planner.topic_partitions()
        earliest, latest = planner.earliest(partitions), planner.latest(partitions)
        best: tuple[int, bytes] | None = None
        for tp in partitions:
            start, end, window = earliest[tp], latest[tp], FIRST_WINDOW
            while end > start:
                begin = max(start, end - window)
                found = None
                for batch in read_range(raw, OffsetRange(tp[0], tp[1], begin, end), client):
                    values = batch.column(column)
                    rows = np.flatnonzero(
                        np.asarray(values.is_valid().to_numpy(zero_copy_only=False), bool)
                    )
                    if len(rows):
                        row = int(rows[-1])
                        stamp = batch.column("timestamp").cast("int64")[row].as_py() or 0
                        found = (stamp, values[row].as_py())
                if found is not None:
                    if best is None or found[0] >= best[0]:
                        best = found
                    break
                end, window = begin, min(window * 8, LAST_WINDOW)
        return best[1] if best is not None else None
    finally:
        client.close()
