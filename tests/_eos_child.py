"""Exactly-once scenarios that need a Spark driver of their own (tests/test_transactions.py).

``python _eos_child.py SPEC_JSON``; SPEC: ``scenario``, ``bootstrap``, ``topic``, ``flag``
(a file path), plus per scenario:

* ``retry``: master local[2,2] (a failed task is retried once); a 90k-row batch write in
  3 tasks whose task 1 fails once, after 60k of its rows were read, while the flag file
  is absent. Prints ``DONE``.
* ``fail``: the same write, but task 1 always fails: the job fails. Prints ``FAILED``.
* ``stream``: ``source`` topic -> pykafka sink (exactly-once, ``checkpoint``), trigger
  ``trigger_ms``, until killed or, with ``available_now``, until the source is drained.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def session(master):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafka_ds
    spark = (SparkSession.builder.master(master).appName("kafka_ds-eos-child")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
             .config("spark.python.worker.reuse", "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    kafka_ds.register(spark)
    return spark


def batch_write(spark, spec, always_fail):
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    flag = spec["flag"]

    def check(value):
        # Task 1's rows are 30000..59999: fail at its 20000th row (part of it written).
        if value == b"row-50000" and (always_fail or not os.path.exists(flag)):
            with open(flag, "w") as f:
                f.write("failed once\n")
            raise RuntimeError("injected failure of a write task")
        return value

    boom = F.udf(check, BinaryType())
    df = (spark.range(0, 90000, 1, 3)
          .select(boom(F.concat(F.lit("row-"), F.col("id").cast("string")).cast("binary"))
                  .alias("value")))
    (df.write.format("pykafka")
     .option("kafka.bootstrap.servers", spec["bootstrap"])
     .option("topic", spec["topic"])
     .option("deliveryGuarantee", "exactly-once")
     .option("kafka.batch.size", "16384")
     .mode("append").save())


def stream(spark, spec):
    reader = (spark.readStream.format("pykafka")
              .option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("subscribe", spec["source"])
              .option("startingOffsets", "earliest")
              .option("latestOffsetsVia", "fetch")   # Tansu: ListOffsets LATEST is off
              .option("maxOffsetsPerTrigger", str(spec.get("max_offsets", 20000))))
    writer = (reader.load().selectExpr("value")
              .writeStream.format("pykafka")
              .option("kafka.bootstrap.servers", spec["bootstrap"])
              .option("topic", spec["topic"])
              .option("deliveryGuarantee", "exactly-once")
              .option("checkpointLocation", spec["checkpoint"]))
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
    spark = session("local[2,2]")
    if scenario == "retry":
        batch_write(spark, spec, always_fail=False)
        print("DONE", flush=True)
    elif scenario == "fail":
        try:
            batch_write(spark, spec, always_fail=True)
        except Exception as exc:   # noqa: BLE001 -- the job is meant to fail
            print("FAILED", type(exc).__name__, flush=True)
            return
        print("DONE", flush=True)


if __name__ == "__main__":
    main()
