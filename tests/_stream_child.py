"""A streaming query in a process of its own, for tests/test_stream.py to kill.

``python _stream_child.py SPEC_JSON``: SPEC has ``options`` (source options), ``sink``,
``checkpoint``, ``trigger_ms``. Runs ``readStream.format("pykafka")`` into a parquet
file sink until killed, printing ``STARTED <query id>`` once the query runs.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spark_support import make_spark  # noqa: E402


def main():
    spec = json.loads(sys.argv[1])
    spark = make_spark("kafka_ds-stream-child")
    reader = spark.readStream.format("pykafka")
    for key, value in spec["options"].items():
        reader = reader.option(key, value)
    query = (reader.load()
             .writeStream.format("parquet")
             .option("path", spec["sink"])
             .option("checkpointLocation", spec["checkpoint"])
             .trigger(processingTime=f"{spec['trigger_ms']} milliseconds")
             .start())
    print("STARTED", query.id, flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main()
