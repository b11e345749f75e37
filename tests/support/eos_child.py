"""Exactly-once scenarios that need a Spark driver of their own
(tests/spark/test_transactions.py).

``python tests/support/eos_child.py SPEC_JSON`` (by path: it imports nothing of the suite,
so no path entry is needed); SPEC: ``scenario``, ``bootstrap``, ``topic``, ``flag``
(a file path), plus per scenario:

* ``retry``: master local[2,2] (a failed task is retried once); a 90k-row batch write in
  3 tasks whose task 1 fails once, after 60k of its rows were read, while the flag file
  is absent. Prints ``DONE``.
* ``fail``: the same write, but task 1 always fails: the job fails. Prints ``FAILED``.
* ``speculate``: ``master`` (a standalone cluster whose two one-core workers have
  different hosts, so Spark may launch a speculative copy), speculation on; a 40k-row
  write in 4 tasks. Attempt 0 of task 0 stops halfway until a speculative copy has
  written half of its rows (the copy fenced it), then goes on: its next Produce is
  refused (PRODUCER_FENCED) and it fails. The copy waits until then, finishes and is
  committed. Flag files under ``flag`` (a directory) time the two attempts. Prints
  ``DONE``.
* ``zombie``: master local[2,2] with ``spark.python.task.killTimeout`` 60 s (a killed
  task's Python worker lives that long instead of 2-4 s); a 9k-row write in 3 tasks
  through a subclass of the writer whose task 2 waits, before kafka_ds's ``write`` runs,
  until the driver's ``abort()`` has returned (flag ``aborted``), and whose task 1 fails
  on every attempt once task 2 has started (flag ``task2-started``): task 2 is a task
  Spark cancelled that begins its transaction after the driver fenced its id. Prints
  ``FAILED``, then ``ZOMBIE <what task 2 did>`` once it is over (flag ``zombie-done``;
  ``flag`` is a directory).
* ``stream``: ``source`` topic -> pykafka sink (exactly-once, ``checkpoint``), trigger
  ``trigger_ms``, until killed or, with ``available_now``, until the source is drained.
"""

import json
import os
import sys


def session(master, **conf):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafka_ds

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = (
        builder.master(master)
        .appName("kafka_ds-eos-child")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kafka_ds.register(spark)
    return spark


def batch_write(spark, spec, always_fail):
    flag = spec["flag"]

    def check(value):
        # Task 1's rows are 30000..59999: fail at its 20000th row, once part of them is in
        # the log. The writer is a Python worker of its own, downstream of this UDF's, and
        # sends only whole Arrow batches: failing at once could beat every row of the
        # attempt to the broker under load (CI saw nothing to abort).
        if value == b"row-50000" and (always_fail or not os.path.exists(flag)):
            _wait_for_values(spec, range(30000, 50000))
            with open(flag, "w") as f:
                f.write("failed once\n")
            raise RuntimeError("injected failure of a write task")
        return value

    write_rows(spark, spec, 90000, 3, check)


def write_rows(spark, spec, rows, tasks, each_value, source="pykafka"):
    """Exactly-once batch write of values b"row-0" .. in ``tasks`` tasks, every value
    passing through the Python UDF ``each_value`` on its way to the writer."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    through = F.udf(each_value, BinaryType())
    df = spark.range(0, rows, 1, tasks).select(
        through(F.concat(F.lit("row-"), F.col("id").cast("string")).cast("binary")).alias("value")
    )
    (
        df.write.format(source)
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("topic", spec["topic"])
        .option("deliveryGuarantee", "exactly-once")
        .option("kafka.batch.size", "16384")
        .mode("append")
        .save()
    )


def _wait_for_values(spec, numbers, seconds=120.0):
    """Wait until the topic's log (read_uncommitted: open transactions too) holds one of
    the values b"row-<n>" for n in ``numbers``."""
    import time

    from kafka_ds.read.ranges import read_range
    from kafka_ds.source import KafkaDataSource

    wanted = {f"row-{n}".encode() for n in numbers}
    options = {"kafka.bootstrap.servers": spec["bootstrap"], "subscribe": spec["topic"]}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        reader = KafkaDataSource(options).reader(None)
        for part in reader.partitions():
            for batch in read_range(reader.opts, part):
                if not wanted.isdisjoint(batch.column("value").to_pylist()):
                    return
        time.sleep(0.2)
    raise RuntimeError(f"none of the {len(wanted)} values reached {spec['topic']} in {seconds} s")


def _wait_for(path, seconds=240.0):
    import time

    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {path}")
        time.sleep(0.1)


def speculative_write(spark, spec):
    flags = spec["flag"]
    rows_per_task = 30000

    def pace(value):
        import time

        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None  # runs inside a Spark task
        if context.partitionId() != 0 or value != b"row-20000":
            return value
        if context.attemptNumber() == 0:
            # The original, halfway (5000 rows already passed on to the writer): wait until
            # the speculative copy has opened its transaction (fencing this attempt's) and
            # written half its rows, then go on writing -- into a fenced transaction.
            with open(os.path.join(flags, "original-waiting"), "w") as f:
                f.write(str(context.taskAttemptId()))
            _wait_for(os.path.join(flags, "copy-halfway"))
            with open(os.path.join(flags, "original-resumed"), "w") as f:
                f.write(str(context.taskAttemptId()))
        else:
            # The copy: halfway too. Let the original go on, give it time to be refused,
            # then finish.
            with open(os.path.join(flags, "copy-halfway"), "w") as f:
                f.write(str(context.taskAttemptId()))
            _wait_for(os.path.join(flags, "original-resumed"))
            time.sleep(8)
        return value

    write_rows(spark, spec, 4 * rows_per_task, 4, pace)


def _touch(path, text=""):
    with open(path, "w") as f:
        f.write(text)


def zombie_write(spark, spec):
    from pyspark import TaskContext

    from kafka_ds.source import KafkaDataSource
    from kafka_ds.writer import KafkaDataSourceWriter

    flags = spec["flag"]
    started, aborted, done = (
        os.path.join(flags, name) for name in ("task2-started", "aborted", "zombie-done")
    )

    class ZombieWriter(KafkaDataSourceWriter):
        def write(self, iterator):
            context = TaskContext.get()
            assert context is not None  # runs inside a Spark task
            if context.partitionId() != 2:
                return super().write(iterator)
            # A task slow to reach its InitProducerId (a Python worker starting under
            # memory pressure, say) until after the job failed and abort() fenced.
            _touch(started)
            _wait_for(aborted, 120)
            try:
                message = super().write(iterator)
            except BaseException as exc:
                _touch(done, f"failed: {type(exc).__name__}: {exc}".replace("\n", " "))
                raise
            _touch(done, f"wrote {message.records} records")
            return message

        def abort(self, messages):
            try:
                super().abort(messages)
            finally:
                _touch(aborted)

    class ZombieSource(KafkaDataSource):
        @classmethod
        def name(cls):
            return "pykafka_zombie_test"

        def writer(self, schema, overwrite):
            return ZombieWriter(*self._write_plan(schema))

    spark.dataSource.register(ZombieSource)

    def fail_task_1(value):
        # Task 1's rows are 3000..5999: every attempt fails at row 4000, once task 2 runs.
        if value == b"row-4000":
            _wait_for(started, 120)
            raise RuntimeError("injected failure of a write task")
        return value

    try:
        write_rows(spark, spec, 9000, 3, fail_task_1, source="pykafka_zombie_test")
    except Exception as exc:  # noqa: BLE001 -- the job is meant to fail
        print("FAILED", type(exc).__name__, flush=True)
    else:
        print("DONE", flush=True)
    _wait_for(done, 120)
    with open(done) as f:
        print("ZOMBIE", f.read(), flush=True)


def stream(spark, spec):
    reader = (
        spark.readStream.format("pykafka")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("subscribe", spec["source"])
        .option("startingOffsets", "earliest")
        .option("latestOffsetsVia", "fetch")  # Tansu: ListOffsets LATEST is off
        .option("maxOffsetsPerTrigger", str(spec.get("max_offsets", 20000)))
    )
    writer = (
        reader.load()
        .selectExpr("value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("topic", spec["topic"])
        .option("deliveryGuarantee", "exactly-once")
        .option("checkpointLocation", spec["checkpoint"])
    )
    if spec.get("available_now"):
        query = writer.trigger(availableNow=True).start()
    else:
        query = writer.trigger(processingTime=f"{spec['trigger_ms']} milliseconds").start()
    print("STARTED", query.id, flush=True)
    query.awaitTermination()
    print("DONE", flush=True)


def main():
    spec = json.loads(sys.argv[1])
    scenario = spec["scenario"]
    if scenario == "stream":
        stream(session("local[2]"), spec)
        return
    if scenario == "speculate":
        spark = session(
            spec["master"],
            **{
                "spark.speculation": "true",
                "spark.speculation.interval": "100ms",
                "spark.speculation.quantile": "0.5",
                "spark.speculation.multiplier": "1.5",
                "spark.speculation.minTaskRuntime": "500ms",
                "spark.speculation.efficiency.enabled": "false",
                "spark.executor.memory": "1024m",
                "spark.executor.cores": "1",
                "spark.driver.host": "127.0.0.1",
            },
        )
        spark.sparkContext.setLogLevel("WARN")
        speculative_write(spark, spec)
        print("DONE", flush=True)
        return
    if scenario == "zombie":
        zombie_write(session("local[2,2]", **{"spark.python.task.killTimeout": "60s"}), spec)
        return
    spark = session("local[2,2]")
    if scenario == "retry":
        batch_write(spark, spec, always_fail=False)
        print("DONE", flush=True)
    elif scenario == "fail":
        try:
            batch_write(spark, spec, always_fail=True)
        except Exception as exc:  # noqa: BLE001 -- the job is meant to fail
            print("FAILED", type(exc).__name__, flush=True)
            return
        print("DONE", flush=True)


if __name__ == "__main__":
    main()
