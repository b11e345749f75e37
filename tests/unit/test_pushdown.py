"""Filter pushdown (option pushFilters + Spark's spark.sql.python.filterPushdown.enabled):
Spark's filters translated to offset and partition bounds, and what goes back to Spark. The
reads on the brokers: tests/integration/test_pushdown.py, tests/spark/test_pushdown.py."""

import datetime as dt

import pytest

from kafka_ds.read.pushdown import Narrowing, narrow

pytest.importorskip("pyspark.sql.datasource", minversion=None)
from pyspark.sql.datasource import (  # noqa: E402
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
)

BASE_TS = 1_700_000_000_000


def utc(ms):
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


# --- the translation of filters ---------------------------------------------------------------


def test_exact_filters_are_taken_and_timestamps_go_back_to_spark():
    filters = [
        EqualTo(("topic",), "t1"),
        In(("partition",), (0, 2, 5)),
        GreaterThan(("partition",), 0),
        GreaterThanOrEqual(("offset",), 3),
        LessThan(("offset",), 40),
        LessThanOrEqual(("offset",), 30),
        GreaterThan(("timestamp",), utc(BASE_TS + 1000) + dt.timedelta(microseconds=1)),
        LessThanOrEqual(("timestamp",), utc(BASE_TS + 9000)),
        IsNotNull(("key",)),
        Not(EqualTo(("partition",), 2)),
        EqualTo(("offset",), "x"),
    ]
    narrowing, back = narrow(filters)
    assert back == filters[6:]
    assert narrowing == Narrowing(
        topics=frozenset({"t1"}),
        partitions=frozenset({0, 2, 5}),
        partition_low=1,
        offset_low=3,
        offset_high=31,
        timestamp_low=BASE_TS + 1001,
        timestamp_high=BASE_TS + 9001,
    )
    assert (
        narrowing.keeps("t1", 2) and not narrowing.keeps("t1", 0) and not narrowing.keeps("t2", 2)
    )


def test_comparisons_combine_and_timestamps_are_whole_milliseconds():
    narrowing, back = narrow(
        [
            In(("topic",), ("x", "y")),
            EqualTo(("topic",), "y"),
            EqualTo(("partition",), 3),
            LessThan(("partition",), 9),
            EqualTo(("offset",), 7),
            GreaterThan(("offset",), 2),
            GreaterThanOrEqual(("timestamp",), utc(BASE_TS) + dt.timedelta(microseconds=1)),
            LessThan(("timestamp",), utc(BASE_TS + 5)),
            LessThan(("timestamp",), utc(BASE_TS + 7)),
        ]
    )
    assert narrowing == Narrowing(
        topics=frozenset({"y"}),
        partition_low=3,
        partition_high=4,
        offset_low=7,
        offset_high=8,
        timestamp_low=BASE_TS + 1,
        timestamp_high=BASE_TS + 5,
    )
    assert len(back) == 3
