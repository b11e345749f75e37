"""The soak's shared parts (benchmarks/soak.py runs it): the project root on sys.path, the
clock and log every part writes, the Kafka API keys the fault proxy stalls, the Avro schemas."""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 10, 22, 24, 26
STALLABLE = {
    "Fetch": FETCH,
    "Produce": PRODUCE,
    "Metadata": METADATA,
    "ListOffsets": LIST_OFFSETS,
    "FindCoordinator": FIND_COORDINATOR,
    "InitProducerId": INIT_PRODUCER_ID,
    "AddPartitionsToTxn": ADD_PARTITIONS_TO_TXN,
    "EndTxn": END_TXN,
}

SCHEMA_V1 = {
    "type": "record",
    "name": "Reading",
    "namespace": "soak",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "reading", "type": "double"},
        {"name": "ts", "type": "long"},
    ],
}
SCHEMA_V2 = {
    **SCHEMA_V1,
    "fields": SCHEMA_V1["fields"] + [{"name": "unit", "type": ["null", "string"], "default": None}],
}

T0 = time.monotonic()


def now() -> float:
    return round(time.monotonic() - T0, 1)


def log(*parts):
    print(f"[soak {now():7.1f}s]", *parts, file=sys.stderr, flush=True)
