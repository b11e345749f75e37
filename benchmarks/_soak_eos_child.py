"""The Spark driver of benchmarks/soak.py, in a session of its own (to be SIGKILLed).

``python _soak_eos_child.py SPEC_JSON``; SPEC: ``master``, ``bootstrap``, ``registry``,
``budget_ms``, ``source``, ``sink_topic``, ``file_sink``, ``file_checkpoint``,
``kafka_checkpoint``, ``trigger_ms``, ``max_offsets``, ``txn_timeout_ms``, ``stop_file``,
``group`` (optional: the file query commits its progress to that consumer group).
Two queries over the Avro source topic (``valueFormat=avro``, the subject's latest
version at start as reader schema):

* into a parquet file sink: ``partition, offset, value.*``;
* into the ``pykafka`` sink, typed and exactly-once: the value
  ``struct(src_partition, src_offset, value.*)`` written with ``valueFormat=avro`` (the
  schema derived from the Spark type, registered under ``<sink>-value``).

Prints ``STARTED`` once both run. Stops both queries and exits 0 when ``stop_file``
appears; exits 3 printing ``FAILED <query> <error>`` when a query fails.
"""

import json
import os
import sys
import time


def session(spec):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafka_ds

    spark = (
        SparkSession.builder.master(spec["master"])
        .appName("kafka_ds-soak")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.executor.memory", "1024m")
        .config("spark.python.worker.reuse", "true")
        # the executors' Python workers import the same kafka_ds as this driver
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    kafka_ds.register(spark)
    return spark


def main():
    spec = json.loads(sys.argv[1])
    spark = session(spec)
    registry = {
        "schema.registry.url": spec["registry"],
        "schema.registry.retry.budget.ms": str(spec["budget_ms"]),
    }

    def source(group=None):
        reader = spark.readStream.format("pykafka")
        if group:  # the stream's progress also goes to this consumer group
            reader = reader.option("kafka.group.id", group)
        return (
            reader.options(**registry)
            .option("kafka.bootstrap.servers", spec["bootstrap"])
            .option("subscribe", spec["source"])
            .option("startingOffsets", "earliest")
            .option("valueFormat", "avro")
            .option("maxOffsetsPerTrigger", str(spec["max_offsets"]))
            .load()
        )

    trigger = f"{spec['trigger_ms']} milliseconds"
    to_files = (
        source(spec.get("group"))
        .select("partition", "offset", "value.*")
        .writeStream.format("parquet")
        .queryName("files")
        .option("path", spec["file_sink"])
        .option("checkpointLocation", spec["file_checkpoint"])
        .trigger(processingTime=trigger)
        .start()
    )
    to_kafka = (
        source()
        .selectExpr("struct(partition AS src_partition, offset AS src_offset, value.*) AS value")
        .writeStream.format("pykafka")
        .queryName("kafka")
        .options(**registry)
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("topic", spec["sink_topic"])
        .option("valueFormat", "avro")
        .option("deliveryGuarantee", "exactly-once")
        .option("kafka.transaction.timeout.ms", str(spec["txn_timeout_ms"]))
        .option("checkpointLocation", spec["kafka_checkpoint"])
        .trigger(processingTime=trigger)
        .start()
    )
    print("STARTED", flush=True)
    queries = (to_files, to_kafka)
    while True:
        for query in queries:
            if not query.isActive:
                error = query.exception()
                print("FAILED", query.name, str(error).replace("\n", " | ")[:4000], flush=True)
                sys.exit(3)
        if os.path.exists(spec["stop_file"]):
            for query in queries:
                query.stop()
            print("STOPPED", flush=True)
            return
        time.sleep(1)


if __name__ == "__main__":
    main()
