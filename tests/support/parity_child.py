"""One Spark driver that runs every case of tests/spark/test_parity_jvm.py through both
connectors: Spark's own ``format("kafka")`` (its jars on ``spark.jars``) and ``format("pykafka")``,
in the same session, so that the connectors are the only thing that differs.

    <python of the connector's pyspark> -m tests.support.parity_child SPEC.json RESULTS.json

SPEC: ``bootstrap``, ``jars`` (comma separated), ``topics`` (the names the parent made and
filled, see ``tests/spark/test_parity_jvm.py``), ``scratch`` (checkpoints), ``only`` (case
names, or null for all). RESULTS: ``{case: {side: result}}``, written after every case; a
result is ``{"schema": JSON, "rows": [...]}`` (a stream's rows carry their micro-batch id in
a first column ``batch``), or ``{"error": "first line"}``; some cases add ``extra``. Rows
are encoded for JSON (binary: ``{"$b": base64}``, timestamps: ``{"$ts": ISO}``); the parent
turns them back into DataFrames and compares them with chispa.

The cases are listed in :data:`CASES` (the parent parametrizes its tests with them).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import sys
import time
import traceback

BASE_TS = 1_700_000_000_000
MIDDLE_TS = BASE_TS + 1000 * 10  # record 10 of each partition of topic "a"
SIDES = ("pykafka", "kafka")


# --- the cases ---------------------------------------------------------------------------------
# (name, kind, options): options' strings are formatted with the topics ({a}, {b}, ...) and
# {middle}/{base}/{end_ts}; "json:" values are JSON text built from Python literals.


def _j(value):
    return "json:" + json.dumps(value)


BATCH = [
    # the cases the retired benchmarks/parity_jvm.py ran
    (
        "subscribe, earliest to latest",
        {"subscribe": "{a},{b}", "startingOffsets": "earliest"},
    ),
    (
        "subscribePattern",
        {"subscribePattern": "{prefix}-[ab]", "startingOffsets": "earliest"},
    ),
    (
        "assign",
        {"assign": _j({"{a}": [0, 2], "{b}": [1]}), "startingOffsets": "earliest"},
    ),
    (
        "offsets JSON (-2/-1 and numbers)",
        {
            "subscribe": "{a},{b}",
            "startingOffsets": _j({"{a}": {"0": 2, "1": -2, "2": 5}, "{b}": {"0": 1, "1": -2}}),
            "endingOffsets": _j({"{a}": {"0": 9, "1": -1, "2": 11}, "{b}": {"0": -1, "1": 4}}),
        },
    ),
    (
        "includeHeaders=true",
        {"subscribe": "{a}", "startingOffsets": "earliest", "includeHeaders": "true"},
    ),
    (
        "minPartitions=7",
        {"subscribe": "{a},{b}", "startingOffsets": "earliest", "minPartitions": "7"},
    ),
    (
        "startingOffsetsByTimestamp + endingOffsetsByTimestamp",
        {
            "subscribe": "{a}",
            "startingOffsetsByTimestamp": _j(
                {"{a}": {"0": "{middle}", "1": "{middle+5000}", "2": "{base-1}"}}
            ),
            "endingOffsetsByTimestamp": _j(
                {"{a}": {"0": "{middle+5000}", "1": "{middle+100000}", "2": "{middle}"}}
            ),
        },
    ),
    ("startingTimestamp", {"subscribe": "{a}", "startingTimestamp": "{middle}"}),
    # latest / earliest starts and ends
    ("default start and end (earliest to latest)", {"subscribe": "{a}"}),
    (
        "startingOffsets=earliest, endingOffsets=latest",
        {"subscribe": "{a}", "startingOffsets": "earliest", "endingOffsets": "latest"},
    ),
    (
        "startingOffsets=latest (batch: refused)",
        {"subscribe": "{a}", "startingOffsets": "latest"},
    ),
    (
        "endingOffsets=earliest (batch: refused)",
        {"subscribe": "{a}", "endingOffsets": "earliest"},
    ),
    (
        "offsets JSON, -2 start and -1 end per partition",
        {
            "subscribe": "{a}",
            "startingOffsets": _j({"{a}": {"0": -2, "1": -2, "2": -2}}),
            "endingOffsets": _j({"{a}": {"0": -1, "1": -1, "2": -1}}),
        },
    ),
    (
        "offsets JSON, -1 start (batch: refused)",
        {
            "subscribe": "{a}",
            "startingOffsets": _j({"{a}": {"0": -1, "1": -2, "2": -2}}),
        },
    ),
    (
        "offsets JSON, -2 end (batch: refused)",
        {"subscribe": "{a}", "endingOffsets": _j({"{a}": {"0": -2, "1": -1, "2": -1}})},
    ),
    # timestamps
    (
        "startingTimestamp + endingTimestamp",
        {
            "subscribe": "{a},{b}",
            "startingTimestamp": "{middle}",
            "endingTimestamp": "{middle+8000}",
        },
    ),
    ("endingTimestamp", {"subscribe": "{a}", "endingTimestamp": "{middle}"}),
    (
        "startingTimestamp before every record",
        {"subscribe": "{a}", "startingTimestamp": "{base-5}"},
    ),
    (
        "startingTimestamp after every record (strategy error: refused)",
        {"subscribe": "{a}", "startingTimestamp": "{end_ts}"},
    ),
    (
        "startingTimestamp after every record, strategy latest",
        {
            "subscribe": "{a}",
            "startingTimestamp": "{end_ts}",
            "startingOffsetsByTimestampStrategy": "latest",
        },
    ),
    (
        "startingOffsetsByTimestamp, one partition after every record, strategy latest",
        {
            "subscribe": "{a}",
            "startingOffsetsByTimestampStrategy": "latest",
            "startingOffsetsByTimestamp": _j(
                {"{a}": {"0": "{middle}", "1": "{end_ts}", "2": "{base-1}"}}
            ),
        },
    ),
    (
        "endingOffsetsByTimestamp, one partition after every record",
        {
            "subscribe": "{a}",
            "endingOffsetsByTimestamp": _j(
                {"{a}": {"0": "{middle}", "1": "{end_ts}", "2": "{middle+3000}"}}
            ),
        },
    ),
    (
        "endingTimestamp after every record",
        {"subscribe": "{a}", "endingTimestamp": "{end_ts}"},
    ),
    # transactions and compaction
    (
        "transactional topic, read_uncommitted",
        {"subscribe": "{tx}", "startingOffsets": "earliest"},
    ),
    (
        "transactional topic, read_committed",
        {
            "subscribe": "{tx}",
            "startingOffsets": "earliest",
            "kafka.isolation.level": "read_committed",
        },
    ),
    (
        "compacted transactional topic, read_committed",
        {
            "subscribe": "{compact}",
            "startingOffsets": "earliest",
            "kafka.isolation.level": "read_committed",
            "includeHeaders": "true",
        },
    ),
    (
        "compacted transactional topic, read_uncommitted",
        {"subscribe": "{compact}", "startingOffsets": "earliest"},
    ),
    # data loss: offsets below the log start (DeleteRecords before the read)
    (
        "failOnDataLoss=true, start below the log start",
        {
            "subscribe": "{lost}",
            "failOnDataLoss": "true",
            "startingOffsets": _j({"{lost}": {"0": 2, "1": 0}}),
        },
    ),
    (
        "failOnDataLoss=false, start below the log start",
        {
            "subscribe": "{lost}",
            "failOnDataLoss": "false",
            "startingOffsets": _j({"{lost}": {"0": 2, "1": 0}}),
        },
    ),
    (
        "earliest after DeleteRecords",
        {"subscribe": "{lost}", "startingOffsets": "earliest"},
    ),
]

# Trigger.AvailableNow into foreachBatch: every micro-batch's rows.
STREAM = [
    (
        "stream, maxOffsetsPerTrigger=20",
        {
            "subscribe": "{a}",
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "20",
        },
    ),
    (
        "stream, maxOffsetsPerTrigger=7, two topics, offsets JSON",
        {
            "subscribe": "{a},{b}",
            "maxOffsetsPerTrigger": "7",
            "startingOffsets": _j({"{a}": {"0": 20, "1": 25, "2": -2}, "{b}": {"0": 3, "1": -2}}),
        },
    ),
    (
        "stream, maxOffsetsPerTrigger=1000 (one batch)",
        {
            "subscribe": "{a},{b}",
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "1000",
        },
    ),
    ("stream, earliest, no limit", {"subscribe": "{a}", "startingOffsets": "earliest"}),
    ("stream, latest", {"subscribe": "{a}", "startingOffsets": "latest"}),
    (
        "stream, includeHeaders",
        {
            "subscribe": "{b}",
            "startingOffsets": "earliest",
            "includeHeaders": "true",
            "maxOffsetsPerTrigger": "10",
        },
    ),
    (
        "stream, startingTimestamp",
        {
            "subscribe": "{a}",
            "startingTimestamp": "{middle}",
            "maxOffsetsPerTrigger": "25",
        },
    ),
    (
        "stream, startingOffsetsByTimestamp, strategy latest",
        {
            "subscribe": "{a}",
            "startingOffsetsByTimestampStrategy": "latest",
            "startingOffsetsByTimestamp": _j(
                {"{a}": {"0": "{middle}", "1": "{end_ts}", "2": "{base-1}"}}
            ),
        },
    ),
    (
        "stream, transactional topic, read_committed",
        {
            "subscribe": "{tx}",
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "4",
            "kafka.isolation.level": "read_committed",
        },
    ),
    (
        "stream, compacted transactional topic, read_committed",
        {
            "subscribe": "{compact}",
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "5",
            "kafka.isolation.level": "read_committed",
        },
    ),
    (
        "stream, failOnDataLoss=false, start below the log start",
        {
            "subscribe": "{lost}",
            "failOnDataLoss": "false",
            "startingOffsets": _j({"{lost}": {"0": 2, "1": 0}}),
        },
    ),
    (
        "stream, failOnDataLoss=true, start below the log start",
        {
            "subscribe": "{lost}",
            "failOnDataLoss": "true",
            "startingOffsets": _j({"{lost}": {"0": 2, "1": 0}}),
        },
    ),
]

# Cases with steps of their own (below); each side gets its own topic.
STEPPED = [
    "stream, minOffsetsPerTrigger=10 (maxTriggerDelay 10 min): batches wait for 10 records",
    "stream, minOffsetsPerTrigger=10, maxTriggerDelay=2s: a smaller batch after the delay",
    "stream restart after DeleteRecords, failOnDataLoss=false",
    "stream restart after DeleteRecords, failOnDataLoss=true",
]

# Writes of every sink column; each side's output is read back by the other connector.
WRITES = [
    "write: topic, key, value, partition, headers columns (strings)",
    "write: key, value binary, topic option, keyed partitioning",
    "write: value only, null keys, topic option",
    "write: timestamp column",
]

# A checkpoint moves between the connectors: run 1 with FIRST, run 2 on its checkpoint with
# SECOND; the same-connector pairs are the reference.
MIGRATIONS = [
    ("kafka", "pykafka"),
    ("pykafka", "kafka"),
    ("kafka", "kafka"),
    ("pykafka", "pykafka"),
]


def migration_name(first, second):
    return f"checkpoint: {first} then {second}"


CASES = (
    [name for name, _ in BATCH]
    + [name for name, _ in STREAM]
    + STEPPED
    + WRITES
    + [migration_name(*pair) for pair in MIGRATIONS]
)


# --- encoding ------------------------------------------------------------------------------


def encode(value):
    if isinstance(value, (bytes, bytearray)):
        return {"$b": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, dt.datetime):
        return {"$ts": value.isoformat()}
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def rows_of(df, batch=None):
    out = []
    for row in df.collect():
        values = [encode(v.asDict(recursive=True) if hasattr(v, "asDict") else v) for v in row]
        values = [
            [encode(h.asDict()) if hasattr(h, "asDict") else h for h in v]
            if isinstance(v, list)
            else v
            for v in values
        ]
        out.append(([batch] if batch is not None else []) + values)
    return out


def first_line(exc) -> str:
    """The error's message: the first ``...Error: `` / ``...Exception: `` line (Spark wraps a
    Python source's error in a traceback and a JVM one in a py4j call), else the first line."""
    import re

    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        found = re.match(r"^(?:Caused by: )?[\w.$]*(?:Error|Exception): (.+)$", line)
        if found and not line.startswith(("py4j.", "org.apache.spark.SparkException: Job ab")):
            return line[:500]
    return lines[0][:500] if lines else type(exc).__name__


# --- the runner ----------------------------------------------------------------------------


class Runner:
    def __init__(self, spec):
        self.spec = spec
        self.bootstrap = spec["bootstrap"]
        self.topics = spec["topics"]
        self.scratch = spec["scratch"]
        self.results = {}
        self.out_path: str | None = None  # main() sets it
        from pyspark.sql import SparkSession

        import kafka_ds

        os.environ["PYSPARK_PYTHON"] = sys.executable
        builder = (
            SparkSession.builder.master("local[2]")
            .appName("kafka_ds parity child")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.memory", "1g")
            .config("spark.python.worker.reuse", "true")
            .config("spark.jars", spec["jars"])
        )
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        kafka_ds.register(self.spark)
        import pyspark

        self.versions: dict[str, str | float] = {
            "pyspark": pyspark.__version__,
            "spark": self.spark.version,
        }

    def fill(self, text: str) -> str:
        values = {**self.topics}
        for key in ("middle", "base", "end_ts"):
            values[key] = {
                "middle": MIDDLE_TS,
                "base": BASE_TS,
                "end_ts": BASE_TS + 10_000_000,
            }[key]

        def sub(expr):
            for op in ("+", "-"):
                if op in expr:
                    name, number = expr.split(op)
                    return str(values[name] + (int(number) if op == "+" else -int(number)))
            return str(values[expr])

        out, i = "", 0
        while i < len(text):
            if text[i] == "{" and "}" in text[i:]:
                end = text.index("}", i)
                expr = text[i + 1 : end]
                if (
                    expr
                    and all(c.isalnum() or c in "+-_" for c in expr)
                    and (expr.split("+")[0].split("-")[0] in values)
                ):
                    out += sub(expr)
                    i = end + 1
                    continue
            out += text[i]
            i += 1
        return out

    def options(self, raw: dict) -> dict:
        out = {}
        for key, value in raw.items():
            value = value.removeprefix("json:")
            value = self.fill(value)
            if key in ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp"):
                # timestamps are numbers in Spark's JSON
                parsed = json.loads(value)
                value = json.dumps(
                    {t: {p: int(ts) for p, ts in parts.items()} for t, parts in parsed.items()}
                )
            out[key] = value
        return out

    def reader(self, fmt, options, stream=False):
        r = (self.spark.readStream if stream else self.spark.read).format(fmt)
        r = r.option("kafka.bootstrap.servers", self.bootstrap)
        for key, value in options.items():
            r = r.option(key, value)
        return r

    def save(self):
        assert self.out_path is not None  # main() sets it before run()
        tmp = self.out_path + ".partial"
        with open(tmp, "w") as out:
            json.dump({"versions": self.versions, "results": self.results}, out)
        os.replace(tmp, self.out_path)

    def record(self, case, side, fn):
        started = time.monotonic()
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 -- a failure is a result to compare
            result = {"error": first_line(exc), "trace": traceback.format_exc()[-3000:]}
        result["seconds"] = round(time.monotonic() - started, 2)
        self.results.setdefault(case, {})[side] = result
        print(
            f"[{time.strftime('%H:%M:%S')}] {case} / {side}: "
            f"{result.get('error') or len(result.get('rows', []))} "
            f"({result['seconds']} s)",
            file=sys.stderr,
            flush=True,
        )

    # -- batch
    def batch(self, case, raw):
        opts = self.options(raw)
        for fmt in SIDES:

            def run(fmt=fmt):
                df = self.reader(fmt, opts).load()
                out = {"schema": df.schema.json(), "rows": rows_of(df)}
                if "minPartitions" in opts:
                    got = df.rdd.mapPartitionsWithIndex(
                        lambda i, rows: [(i, r.topic, r.partition, r.offset) for r in rows]
                    ).collect()
                    groups: dict[tuple[int, str, int], list[int]] = {}
                    for i, t, p, o in got:
                        groups.setdefault((i, t, p), []).append(o)
                    out["extra"] = {
                        "spark partitions": df.rdd.getNumPartitions(),
                        "ranges": sorted(
                            [t, p, min(g), max(g), len(g)] for (_i, t, p), g in groups.items()
                        ),
                    }
                return out

            self.record(case, fmt, run)

    # -- streams
    def available_now(self, fmt, opts, checkpoint, timeout=240):
        batches = {}

        def sink(df, batch_id):
            batches[batch_id] = rows_of(df, batch_id)

        df = self.reader(fmt, opts, stream=True).load()
        query = (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(timeout)
            if query.isActive:
                raise RuntimeError(f"{fmt}: the AvailableNow query did not end in {timeout} s")
            if query.exception() is not None:
                raise RuntimeError(first_line(query.exception()))
        finally:
            if query.isActive:
                query.stop()
        return df.schema.json(), batches

    def stream(self, case, raw):
        opts = self.options(raw)
        for fmt in SIDES:

            def run(fmt=fmt):
                checkpoint = os.path.join(self.scratch, f"s{len(self.results)}-{fmt}")
                schema, batches = self.available_now(fmt, opts, checkpoint)
                return {
                    "schema": schema,
                    "batch_schema": True,
                    "rows": [r for b in sorted(batches) for r in batches[b]],
                    "extra": {"batches (with or without rows)": sorted(batches)},
                }

            self.record(case, fmt, run)

    def produce(self, topic, partition, start, count):
        """One Produce request (one record batch): with a long linger nothing is sent before
        the flush, so a trigger sees all ``count`` records or none of them."""
        from tests.support.brokers import produce_confluent

        produce_confluent(
            self.bootstrap,
            topic,
            [
                {
                    "key": b"k%d" % i,
                    "value": b"v-%d-%d" % (partition, i),
                    "partition": partition,
                    "timestamp_ms": BASE_TS + 1000 * i + partition,
                }
                for i in range(start, start + count)
            ],
            **{"linger.ms": 1000},
        )

    def continuous(self, fmt, opts, checkpoint, steps, interval_ms=100, timeout=120):
        """A processingTime query into foreachBatch; ``steps`` (callables taking the batches
        seen) run in order while it runs."""
        batches = {}

        def sink(df, batch_id):
            batches[batch_id] = rows_of(df, batch_id)

        df = self.reader(fmt, opts, stream=True).load()
        query = (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=f"{interval_ms} milliseconds")
            .start()
        )
        try:
            for step in steps:
                step(batches, query, timeout)
        finally:
            query.stop()
        if query.exception() is not None:
            raise RuntimeError(first_line(query.exception()))
        return df.schema.json(), batches

    @staticmethod
    def wait_rows(total):
        def step(batches, query, timeout):
            deadline = time.monotonic() + timeout
            while sum(len(b) for b in batches.values()) < total:
                if query.exception() is not None:
                    raise RuntimeError(first_line(query.exception()))
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"fewer than {total} rows after {timeout} s: "
                        f"{ {k: len(v) for k, v in batches.items()} }"
                    )
                time.sleep(0.05)

        return step

    @staticmethod
    def idle(seconds):
        def step(batches, query, timeout):
            time.sleep(seconds)

        return step

    def stepped(self, case):
        for fmt in SIDES:
            topic = self.topics[f"step{STEPPED.index(case)}-{fmt}"]

            def produce(start, count, topic=topic):
                def step(batches, query, timeout):
                    self.produce(topic, 0, start, count)

                return step

            def run(fmt=fmt, topic=topic, produce=produce):
                checkpoint = os.path.join(self.scratch, f"step{STEPPED.index(case)}-{fmt}")
                base = {"subscribe": topic, "startingOffsets": "earliest"}
                if case.startswith("stream, minOffsetsPerTrigger=10 (maxTriggerDelay 10 min)"):
                    opts = {
                        **base,
                        "minOffsetsPerTrigger": "10",
                        "maxTriggerDelay": "10m",
                    }
                    # 25 records before the start; 5 (a batch waits), 6 more (one batch of 11)
                    steps = [
                        self.wait_rows(25),
                        produce(25, 5),
                        self.idle(2.0),
                        produce(30, 6),
                        self.wait_rows(36),
                        self.idle(1.0),
                    ]
                elif case.startswith("stream, minOffsetsPerTrigger=10, maxTriggerDelay=2s"):
                    opts = {
                        **base,
                        "minOffsetsPerTrigger": "10",
                        "maxTriggerDelay": "2s",
                    }
                    steps = [
                        self.wait_rows(25),
                        produce(25, 3),
                        self.wait_rows(28),
                        self.idle(1.0),
                    ]
                else:
                    return self.restart_after_loss(
                        fmt, topic, checkpoint, case.endswith("failOnDataLoss=true")
                    )
                schema, batches = self.continuous(fmt, opts, checkpoint, steps)
                rows = [r for b in sorted(batches) for r in batches[b] if batches[b]]
                return {
                    "schema": schema,
                    "batch_schema": True,
                    "rows": rows,
                    "extra": {"batches with rows": sorted(b for b in batches if batches[b])},
                }

            self.record(case, fmt, run)

    def restart_after_loss(self, fmt, topic, checkpoint, fail):
        """Run 1 reads offsets 0-19 of both partitions; 10 more arrive; DeleteRecords removes
        partition 0 below 25; run 2 resumes at 20 on the checkpoint."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient

        opts = {
            "subscribe": topic,
            "startingOffsets": "earliest",
            "failOnDataLoss": "true" if fail else "false",
        }
        schema, first = self.available_now(fmt, opts, checkpoint)
        for partition in (0, 1):
            self.produce(topic, partition, 20, 10)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.delete_records(
            [TopicPartition(topic, 0, 25)], request_timeout=30
        ).values():
            future.result(30)
        _schema, second = self.available_now(fmt, opts, checkpoint)
        rows = [r for b in sorted(second) for r in second[b]]
        return {
            "schema": schema,
            "batch_schema": True,
            "rows": rows,
            "extra": {"first run rows": sum(len(b) for b in first.values())},
        }

    # -- writes
    def write(self, case):
        from pyspark.sql import functions as F

        ts = dt.datetime(2024, 1, 2, 3, 4, 5, 678000)
        index = WRITES.index(case)
        variants = {
            0: (
                "key string, value string, partition int, "
                "headers array<struct<key:string,value:binary>>",
                lambda i: (
                    f"k{i}" if i % 5 else None,
                    f"v{i}" if i % 9 else None,
                    i % 3,
                    [("h", b"%d" % i), ("n", None)] if i % 2 else [],
                ),
            ),
            1: ("key binary, value binary", lambda i: (b"key-%d" % i, b"value-%d" % i)),
            2: ("value string", lambda i: (f"value-{i}",)),
            3: (
                "key string, value string, timestamp timestamp",
                lambda i: (f"k{i}", f"v{i}", ts),
            ),
        }
        schema, make = variants[index]
        for fmt in SIDES:
            topic = self.topics[f"w{index}-{fmt}"]
            other = SIDES[1 - SIDES.index(fmt)]

            def run(fmt=fmt, topic=topic, other=other):
                df = self.spark.createDataFrame([make(i) for i in range(40)], schema)
                writer = (df.withColumn("topic", F.lit(topic)) if index == 0 else df).write
                writer = (
                    writer.format(fmt)
                    .option("kafka.bootstrap.servers", self.bootstrap)
                    .mode("append")
                )
                if index != 0:
                    writer = writer.option("topic", topic)
                writer.save()
                back = (
                    self.reader(
                        other,
                        {
                            "subscribe": topic,
                            "startingOffsets": "earliest",
                            "includeHeaders": "true",
                        },
                    )
                    .load()
                    .select(
                        "partition",
                        "key",
                        "value",
                        "headers",
                        (F.col("timestamp") == F.lit(ts)).alias("timestamp_is_the_column"),
                    )
                    .orderBy("partition", "key", "value")
                )
                return {
                    "schema": back.schema.json(),
                    "rows": rows_of(back),
                    "extra": {"read back by": other},
                }

            self.record(case, fmt, run)

    # -- checkpoints moving between the connectors
    def migrate(self, first, second):
        case = migration_name(first, second)
        topic = self.topics[f"m-{first}-{second}"]
        checkpoint = os.path.join(self.scratch, f"m-{first}-{second}")
        opts = {
            "subscribe": topic,
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "7",
        }

        def run():
            # Run 1: one micro-batch (the trigger's interval is long), then stop.
            one = {}

            def stop_after_first(batches, query, timeout):
                deadline = time.monotonic() + timeout
                while (
                    not query.recentProgress
                    or query.lastProgress["batchId"] < 0
                    or 0 not in batches
                ):
                    if query.exception() is not None:
                        raise RuntimeError(first_line(query.exception()))
                    if time.monotonic() > deadline:
                        raise RuntimeError("no first micro-batch")
                    time.sleep(0.05)
                one.update(batches)

            schema, _ = self.continuous(
                first, opts, checkpoint, [stop_after_first], interval_ms=600_000
            )
            offsets_1 = read_offset_log(checkpoint)
            for partition in (0, 1):
                self.produce(topic, partition, 10, 5)
            schema2, two = self.available_now(second, opts, checkpoint)
            offsets_2 = read_offset_log(checkpoint)
            rows = [r for b in sorted(one) for r in one[b]] + [
                r for b in sorted(two) for r in two[b]
            ]
            return {
                "schema": schema2,
                "batch_schema": True,
                "rows": rows,
                "extra": {
                    "first run batches": sorted(one),
                    "second run batches": sorted(two),
                    "first schema": schema,
                    "offset log after run 1": offsets_1,
                    "offset log after run 2": offsets_2,
                },
            }

        self.record(case, "run", run)

    def run(self, only=None):
        wanted = set(only) if only else None
        for name, raw in BATCH:
            if wanted is None or name in wanted:
                self.batch(name, raw)
                self.save()
        for name, raw in STREAM:
            if wanted is None or name in wanted:
                self.stream(name, raw)
                self.save()
        for name in STEPPED:
            if wanted is None or name in wanted:
                self.stepped(name)
                self.save()
        for name in WRITES:
            if wanted is None or name in wanted:
                self.write(name)
                self.save()
        for first, second in MIGRATIONS:
            if wanted is None or migration_name(first, second) in wanted:
                self.migrate(first, second)
                self.save()


def read_offset_log(checkpoint):
    """{batch id: the source's offsets line} of the checkpoint's offset log."""
    folder = os.path.join(checkpoint, "offsets")
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.isdigit():
            with open(os.path.join(folder, name)) as handle:
                lines = handle.read().splitlines()
            out[int(name)] = lines[2] if len(lines) > 2 else None
    return out


def main():
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    started = time.monotonic()
    runner = Runner(spec)
    runner.out_path = sys.argv[2]
    runner.versions["start seconds"] = round(time.monotonic() - started, 1)
    try:
        runner.run(spec.get("only"))
    finally:
        runner.versions["seconds"] = round(time.monotonic() - started, 1)
        runner.save()
        runner.spark.stop()


if __name__ == "__main__":
    main()
