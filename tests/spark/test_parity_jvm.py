"""Differential tests against Spark's own ``format("kafka")`` on Apache Kafka.

Spark's released connector comes from Maven Central (tests/support/spark_connector.py: the
test venv's pyspark release if it is served, else the newest one served below it, run in
the version tests' release of its minor line, ``.venv-spark/4.2.1``). One child Spark driver
(tests/support/parity_child.py) runs every case through both connectors in one session, so
the connector is the only thing that differs between two results: same Spark engine, same
micro-batch planning, same session settings. (pykafka on the test venv's pyspark is what the
rest of the suite tests.) This module prepares the topics on ``kafka_broker`` (one record
layout for both sides; a side's own topic where a case writes or produces while it runs),
starts the driver once, and compares each case's schema and rows with chispa: batch reads
sorted by (topic, partition, offset), streams per micro-batch (the batch id is a column),
writes as read back by the other connector. A case where both connectors refuse the options
is parity too (the messages are printed, not compared).

Intended differences are asserted as such (``INTENDED``) and listed in docs/differences.md.
The checkpoint cases run one query with one connector and restart it on the same checkpoint
with the other; the same-connector runs are the reference.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
import time

import pytest
from chispa import assert_df_equality

from tests.support.parity_child import (
    BASE_TS,
    CASES,
    MIGRATIONS,
    SIDES,
    STEPPED,
    WRITES,
    migration_name,
)
from tests.support.spark_support import spark  # noqa: F401 -- fixture

# one child driver for the module: its fixture may take minutes on a loaded machine
pytestmark = [pytest.mark.heavy, pytest.mark.spark, pytest.mark.timeout(1500)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMPARED = [c for c in CASES if not c.startswith("checkpoint:")]

# case -> why the connectors differ there (docs/differences.md); test_intended_differences
# asserts each as it is: the rest of the result must be equal.
INTENDED = {
    "write: timestamp column": "pykafka's sink takes a `timestamp` column as the records' "
    "CreateTime; Spark's connector ignores the column and stamps the time of the send "
    "(SPARK-50160)",
    "write: value only, null keys, topic option": "records without a key go to a partition "
    "of the producer's choosing (sticky, KIP-480, random): Spark's connector shares one "
    "producer per executor JVM, so all tasks stick to its partition; each pykafka task has "
    "a sticky partitioner of its own",
}


# --- the data both connectors read -----------------------------------------------------------


def records(partition, count, start=0):
    """Null keys, null/empty/repeated header values (the layout of the retired
    benchmarks/parity_jvm.py)."""
    out = []
    for i in range(start, start + count):
        headers = (
            [("h", b"%d" % i), ("dup", b"a"), ("dup", b"b")]
            if i % 3 == 0
            else ([("none", None), ("empty", b"")] if i % 3 == 1 else [])
        )
        out.append(
            {
                "key": None if i % 7 == 6 else b"k%d" % i,
                "value": b"v-%d-%d" % (partition, i),
                "headers": headers,
                "partition": partition,
                "timestamp_ms": BASE_TS + 1000 * i + partition,
            }
        )
    return out


def plain(partition, count, start=0):
    """As parity_child.Runner.produce."""
    return [
        {
            "key": b"k%d" % i,
            "value": b"v-%d-%d" % (partition, i),
            "partition": partition,
            "timestamp_ms": BASE_TS + 1000 * i + partition,
        }
        for i in range(start, start + count)
    ]


def create_topics(broker, specs):
    """{name: (partitions, config)} in one CreateTopics request."""
    from confluent_kafka.admin import NewTopic

    futures = broker.admin().create_topics(
        [
            NewTopic(name, num_partitions=p, replication_factor=1, config=config or {})
            for name, (p, config) in specs.items()
        ],
        operation_timeout=60,
        request_timeout=60,
    )
    for future in futures.values():
        future.result(timeout=60)
    for name, (p, _config) in specs.items():
        broker.wait_topic(name, p, 60)


# The child driver's time limit. The open transaction of ``prepare`` must outlive it: a
# fresh machine's first run once took 14 minutes, and the broker aborted the transaction
# (then fenced its producer) at 10, under the cases that read it.
CHILD_SECONDS = 1200


def transactional_producer(bootstrap, txn_id):
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            # the broker's cap: transaction.max.timeout.ms (tests/support/apache_kafka.py)
            "transaction.timeout.ms": (CHILD_SECONDS + 600) * 1000,
            "log_level": 3,
        }
    )
    producer.init_transactions(30)
    return producer


def in_transaction(producer, topic, rows, commit=True):
    producer.begin_transaction()
    for key, value in rows:
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=0,
            timestamp=BASE_TS + len(value) * 1000,
        )
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def wait_compacted(bootstrap, topic, produced, deadline_s=60.0):
    """Until the cleaner has removed records (fewer than ``produced`` offsets hold one)."""
    from tests.support.brokers import consume_confluent

    deadline = time.monotonic() + deadline_s
    while True:
        seen = consume_confluent(bootstrap, topic, timeout=5)
        if len(seen) < produced:
            return len(seen)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{topic}: not compacted after {deadline_s} s "
                f"({len(seen)} of {produced} records still there)"
            )
        time.sleep(0.5)


def prepare(broker):
    """The topics of every case, filled; returns (topics, open transaction's producer)."""
    from confluent_kafka import TopicPartition

    from tests.support.brokers import produce_confluent

    prefix = broker.unique_topic("pj")
    t = {
        "prefix": prefix,
        "a": f"{prefix}-a",
        "b": f"{prefix}-b",
        "tx": f"{prefix}-tx",
        "compact": f"{prefix}-compact",
        "lost": f"{prefix}-lost",
    }
    specs = {
        t["a"]: (3, None),
        t["b"]: (2, None),
        t["tx"]: (1, None),
        t["lost"]: (2, None),
        t["compact"]: (
            1,
            {
                "cleanup.policy": "compact",
                "segment.ms": "100",
                "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "600000",
            },
        ),
    }
    for i, _case in enumerate(STEPPED):
        for side in SIDES:
            t[f"step{i}-{side}"] = f"{prefix}-step{i}-{side}"
            specs[t[f"step{i}-{side}"]] = (1 if i < 2 else 2, None)
    for i, _case in enumerate(WRITES):
        for side in SIDES:
            t[f"w{i}-{side}"] = f"{prefix}-w{i}-{side}"
            specs[t[f"w{i}-{side}"]] = (3, None)
    for first, second in MIGRATIONS:
        t[f"m-{first}-{second}"] = f"{prefix}-m-{first}-{second}"
        specs[t[f"m-{first}-{second}"]] = (2, None)
    create_topics(broker, specs)
    bootstrap = broker.bootstrap_servers

    produce_confluent(bootstrap, t["a"], [r for p in range(3) for r in records(p, 30)])
    produce_confluent(bootstrap, t["b"], [r for p in range(2) for r in records(p, 12)])
    produce_confluent(bootstrap, t["lost"], [r for p in range(2) for r in records(p, 20)])
    for i in range(len(STEPPED)):
        for side in SIDES:
            if i < 2:
                produce_confluent(bootstrap, t[f"step{i}-{side}"], plain(0, 25))
            else:
                produce_confluent(bootstrap, t[f"step{i}-{side}"], plain(0, 20) + plain(1, 20))
    for first, second in MIGRATIONS:
        produce_confluent(bootstrap, t[f"m-{first}-{second}"], plain(0, 10) + plain(1, 10))
    admin = broker.admin()
    for future in admin.delete_records(
        [TopicPartition(t["lost"], 0, 8)], request_timeout=30
    ).values():
        future.result(30)

    # transactions: committed, aborted, committed, and one left open (the LSO stops there)
    producer = transactional_producer(bootstrap, f"{prefix}-txn")
    in_transaction(producer, t["tx"], [(b"c1-%d" % i, b"committed-1-%d" % i) for i in range(5)])
    in_transaction(
        producer,
        t["tx"],
        [(b"a-%d" % i, b"aborted-%d" % i) for i in range(3)],
        commit=False,
    )
    in_transaction(producer, t["tx"], [(b"c2-%d" % i, b"committed-2-%d" % i) for i in range(4)])
    open_producer = transactional_producer(bootstrap, f"{prefix}-open")
    open_producer.begin_transaction()
    for i in range(2):
        open_producer.produce(t["tx"], key=b"o-%d" % i, value=b"open-%d" % i, partition=0)
    open_producer.flush(30)
    in_transaction(producer, t["tx"], [(b"c3-%d" % i, b"after-open-%d" % i) for i in range(2)])

    # compaction: keys written again, one transaction aborted; segments roll every 100 ms
    compacting = transactional_producer(bootstrap, f"{prefix}-compact")
    produced = 0
    for round_, commit in (
        ("one", True),
        ("two", False),
        ("three", True),
        ("four", True),
    ):
        keys = range(6) if round_ in ("one", "two") else range(0, 6, 2)
        in_transaction(
            compacting,
            t["compact"],
            [(b"key-%d" % k, f"{round_}-{k}".encode()) for k in keys],
            commit,
        )
        produced += len(keys) + 1  # and the transaction's marker
        time.sleep(0.3)
    produce_confluent(
        bootstrap,
        t["compact"],
        [{"key": b"tail", "value": b"rolls the segment", "partition": 0}],
    )
    wait_compacted(bootstrap, t["compact"], 6 + 6 + 3 + 1)  # records a consumer could see
    return t, open_producer


# --- results -----------------------------------------------------------------------------------


def decode(value):
    if isinstance(value, dict):
        if set(value) == {"$b"}:
            return bytearray(base64.b64decode(value["$b"]))
        if set(value) == {"$ts"}:
            return dt.datetime.fromisoformat(value["$ts"])
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def as_frame(spark, result, topics_to_mask=()):
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType.fromJson(json.loads(result["schema"]))
    if result.get("batch_schema"):
        schema = StructType([StructField("batch", LongType(), False)] + schema.fields)
    rows = []
    for raw in result["rows"]:
        row = []
        for field, value in zip(schema.fields, decode(raw), strict=True):
            if field.name == "topic" and value in topics_to_mask:
                value = "<topic>"
            if field.name == "headers" and value is not None:
                value = [tuple(h) if isinstance(h, list) else (h["key"], h["value"]) for h in value]
            row.append(value)
        rows.append(tuple(row))
    names = [f.name for f in schema.fields]
    order = [n for n in ("batch", "topic", "partition", "offset", "key", "value") if n in names]

    def sort_key(row):
        return tuple(
            (v is not None, v) if not isinstance(v, (list, dict)) else (True, repr(v))
            for v in (row[names.index(n)] for n in order)
        )

    rows.sort(key=sort_key)
    return spark.createDataFrame(rows, schema)


@pytest.fixture(scope="module")
def parity(kafka_broker, tmp_path_factory):
    """Runs the child driver once: {"results": {case: {side: result}}, "versions", ...}."""
    from tests.support import spark_connector

    reuse = os.environ.get("KAFKA_DS_PARITY_REUSE")
    if reuse:  # the results of an earlier run's child (its folder), to work on the comparisons
        got = json.loads(open(os.path.join(reuse, "results.json")).read())
        spec = json.loads(open(os.path.join(reuse, "spec.json")).read())
        got.update(topics=spec["topics"], connector={}, log="", wall_seconds=None)
        return got
    started = time.monotonic()
    found = spark_connector.resolve()
    python = spark_connector.spark_python(found["version"])
    resolved = time.monotonic() - started
    topics, open_producer = prepare(kafka_broker)
    prepared = time.monotonic() - started - resolved
    scratch = tmp_path_factory.mktemp("parity-jvm")
    spec = {
        "bootstrap": kafka_broker.bootstrap_servers,
        "topics": topics,
        "jars": ",".join(found["jars"]),
        "scratch": str(scratch),
        "only": [c for c in os.environ.get("KAFKA_DS_PARITY_CASES", "").split(";") if c] or None,
    }
    spec_path, out_path = scratch / "spec.json", scratch / "results.json"
    spec_path.write_text(json.dumps(spec))
    try:
        run = subprocess.run(
            [python, "-m", "tests.support.parity_child", str(spec_path), str(out_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=CHILD_SECONDS,
            env=spark_connector.child_environment(python),
        )
    finally:
        open_producer.abort_transaction(30)
    assert out_path.exists(), f"rc={run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"
    got = json.loads(out_path.read_text())
    got.update(
        topics=topics,
        connector=found,
        resolve_seconds=round(resolved, 1),
        prepare_seconds=round(prepared, 1),
        log=run.stderr,
        wall_seconds=round(time.monotonic() - started, 1),
    )
    print(
        f"\nparity child: {got['versions']}, connector {found['version']} "
        f"(kafka-clients {found['kafka_clients']}); resolve {resolved:.1f} s, topics "
        f"{prepared:.1f} s, module fixture {got['wall_seconds']} s",
        file=sys.stderr,
    )
    return got


def outcome(parity, case):
    results = parity["results"].get(case)
    if results is None:
        pytest.fail(
            f"{case}: the child driver gave no result (it ended early?)\n{parity['log'][-4000:]}"
        )
    return results


def masks(parity):
    return {v for k, v in parity["topics"].items() if k.startswith(("step", "w", "m-"))}


@pytest.mark.parametrize("case", COMPARED)
def test_same_schema_and_rows_as_sparks_connector(parity, spark, case):  # noqa: F811
    results = outcome(parity, case)
    ours, theirs = results["pykafka"], results["kafka"]
    print(
        f"{case}: pykafka {ours.get('error') or len(ours['rows'])} rows "
        f"({ours['seconds']} s), kafka {theirs.get('error') or len(theirs['rows'])} rows "
        f"({theirs['seconds']} s)"
    )
    if case in INTENDED:
        pytest.skip("intended difference: asserted in test_intended_differences")
    if "error" in ours or "error" in theirs:
        assert "error" in ours and "error" in theirs, (
            f"only one connector failed:\npykafka: {ours.get('error')}\n"
            f"kafka: {theirs.get('error')}\n{(ours.get('trace') or theirs.get('trace'))}"
        )
        return
    assert json.loads(ours["schema"]) == json.loads(theirs["schema"])
    hidden = masks(parity)
    assert_df_equality(as_frame(spark, ours, hidden), as_frame(spark, theirs, hidden))
    assert ours.get("extra") == theirs.get("extra") or case.startswith("write:"), (
        ours.get("extra"),
        theirs.get("extra"),
    )
    if case.startswith("write:"):
        assert ours["rows"], "nothing read back"


@pytest.mark.parametrize("first, second", [p for p in MIGRATIONS if p[0] != p[1]])
def test_checkpoint_moves_between_the_connectors(parity, spark, first, second):  # noqa: F811
    """Run 1 (``first``, ``maxOffsetsPerTrigger=7``, a long trigger interval) commits one
    micro-batch (offsets 0-2 of both partitions) and stops; 5 more records arrive in each
    partition; run 2 (``second``, AvailableNow) starts on the same checkpoint. It must go on
    exactly where run 1 stopped: the same micro-batches (ids and rows) as when ``first``
    runs twice (the reference), every offset 0-14 read once, the same offset log."""
    moved = outcome(parity, migration_name(first, second))["run"]
    same = outcome(parity, migration_name(first, first))["run"]
    assert "error" not in moved, moved.get("trace")
    assert "error" not in same, same.get("trace")
    extra, ref = moved["extra"], same["extra"]
    print(json.dumps({"moved": extra, "reference": ref}, indent=1))
    assert extra["first run batches"] == [0]
    assert extra["second run batches"] == ref["second run batches"]
    assert extra["second run batches"][0] == 1
    hidden = masks(parity)
    assert_df_equality(as_frame(spark, moved, hidden), as_frame(spark, same, hidden))
    # exactly once: offsets 0-14 of both partitions, each once
    frame = as_frame(spark, moved, hidden)
    seen = sorted((r.partition, r.offset) for r in frame.select("partition", "offset").collect())
    assert seen == [(p, o) for p in (0, 1) for o in range(15)]

    # the offset log: the same offsets per batch whichever connector wrote them (Spark's
    # JSON; pyspark's runner writes a Python source's with json.dumps' spaces)
    def offsets(log):
        return {batch: list(json.loads(line).values()) for batch, line in log.items()}

    assert offsets(extra["offset log after run 2"]) == offsets(ref["offset log after run 2"])
    assert len(extra["offset log after run 2"]) == 1 + len(extra["second run batches"])


def without(frame, column):
    return frame.drop(column).orderBy(*[c for c in frame.columns if c != column])


def test_intended_differences(parity, spark):  # noqa: F811
    hidden = masks(parity)
    for case, why in INTENDED.items():
        results = outcome(parity, case)
        ours, theirs = results["pykafka"], results["kafka"]
        assert "error" not in ours and "error" not in theirs, (
            ours.get("trace"),
            theirs.get("trace"),
        )
        mine, other = as_frame(spark, ours, hidden), as_frame(spark, theirs, hidden)
        if case == "write: timestamp column":
            # the rest is equal; pykafka's records carry the column's time, Spark's do not
            assert_df_equality(
                without(mine, "timestamp_is_the_column"),
                without(other, "timestamp_is_the_column"),
            )
            assert {r[0] for r in mine.select("timestamp_is_the_column").collect()} == {True}
            assert {r[0] for r in other.select("timestamp_is_the_column").collect()} == {False}
        elif case == "write: value only, null keys, topic option":
            # the same records, each once; only the partitions they went to differ
            assert_df_equality(without(mine, "partition"), without(other, "partition"))
            spread = {
                side: sorted({r[0] for r in f.select("partition").collect()})
                for side, f in (("pykafka", mine), ("kafka", other))
            }
            print(f"{case}: partitions used {spread} ({why})")
        else:
            raise AssertionError(f"no check for {case}")


def test_every_case_ran(parity):
    """All cases have results; prints the counts (cases, rows compared) and the times."""
    missing = [c for c in CASES if c not in parity["results"]]
    compared = sum(
        len(result.get("rows", ()))
        for case, sides in parity["results"].items()
        for result in sides.values()
    )
    print(
        f"{len(parity['results'])} of {len(CASES)} cases ran, {compared} rows compared "
        f"(both sides, each checkpoint run against its reference); child driver "
        f"{parity['versions'].get('seconds')} s (Spark start "
        f"{parity['versions'].get('start seconds')} s), module fixture "
        f"{parity.get('wall_seconds')} s"
    )
    if os.environ.get("KAFKA_DS_PARITY_CASES"):
        pytest.skip("KAFKA_DS_PARITY_CASES selects cases")
    assert not missing, missing
