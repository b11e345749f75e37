"""The streaming side of benchmarks/soak_mock.py, in a process of its own (to be SIGKILLed).

``python _soak_child.py SPEC_JSON``: SPEC has ``bootstrap``, ``source``, ``sink_topic``,
``file_sink``, ``file_checkpoint``, ``kafka_checkpoint``, ``trigger_ms``,
``max_offsets``. Runs two queries over the same source topic until killed:

* into a parquet file sink: ``partition, offset, value``;
* into the ``pykafka`` sink: value ``"<partition>:<offset>"`` (so the soak can count
  what arrived, and how often).

Prints ``STARTED`` once both run; exits (non-zero) if a query fails.
"""

import json
import sys

from tests.support.spark_support import make_spark


def main():
    spec = json.loads(sys.argv[1])
    spark = make_spark("kafka_ds-soak-child")

    def source():
        reader = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", spec["bootstrap"])
            .option("subscribe", spec["source"])
            .option("startingOffsets", "earliest")
        )
        if spec.get("max_offsets"):
            reader = reader.option("maxOffsetsPerTrigger", str(spec["max_offsets"]))
        return reader.load()

    trigger = f"{spec['trigger_ms']} milliseconds"
    to_files = (
        source()
        .selectExpr("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", spec["file_sink"])
        .option("checkpointLocation", spec["file_checkpoint"])
        .trigger(processingTime=trigger)
        .start()
    )
    to_kafka = (
        source()
        .selectExpr("CAST(concat(partition, ':', offset) AS STRING) AS value")
        .writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", spec["bootstrap"])
        .option("topic", spec["sink_topic"])
        .option("checkpointLocation", spec["kafka_checkpoint"])
        .trigger(processingTime=trigger)
        .start()
    )
    print("STARTED", flush=True)
    spark.streams.awaitAnyTermination()
    for query in (to_files, to_kafka):
        if query.exception() is not None:
            print("FAILED", query.name, query.exception(), flush=True)
            sys.exit(3)


if __name__ == "__main__":
    main()
