"""A streaming query in a process of its own, for tests/spark/test_stream.py to kill.

``python -m tests.support.stream_child SPEC_JSON``, run in the project root (where ``-m``
finds this package first on the path): SPEC has ``options`` (source options), ``sink``,
``checkpoint``, ``trigger_ms``. Runs ``readStream.format("pykafka")`` into a parquet file
sink until killed, printing ``STARTED <query id>`` once the query runs.

With ``"available_now": true`` the query runs with ``Trigger.AvailableNow`` instead; once it
has ended the child prints ``DONE <end offsets of the last batch, JSON>`` and its Python
process exits at once, as a driver script's last line would (no ``spark.stop()``).
"""

import json
import sys

from tests.support.spark_support import make_spark


def main():
    spec = json.loads(sys.argv[1])
    spark = make_spark("kafka_ds-stream-child")
    reader = spark.readStream.format("pykafka")
    for key, value in spec["options"].items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", spec["sink"])
        .option("checkpointLocation", spec["checkpoint"])
    )
    if spec.get("available_now"):
        query = query.trigger(availableNow=True).start()
        print("STARTED", query.id, flush=True)
        query.awaitTermination()
        if query.exception() is not None:
            raise query.exception()
        print("DONE", query.lastProgress["sources"][0]["endOffset"], flush=True)
        return
    query = query.trigger(processingTime=f"{spec['trigger_ms']} milliseconds").start()
    print("STARTED", query.id, flush=True)
    query.awaitTermination()


if __name__ == "__main__":
    main()
