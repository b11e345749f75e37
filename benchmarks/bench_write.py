"""Write throughput: Spark ``df.write.format("pykafka")`` vs the confluent-kafka Producer.

    .venv/bin/python benchmarks/bench_write.py                    # 1M rows, mock cluster
    .venv/bin/python benchmarks/bench_write.py --broker tansu --rows 200000

Starts its own broker (tests/brokers.py: the librdkafka mock cluster with 3 brokers,
or Tansu), then writes the same N rows (10-byte key ``key-000042``, 100-byte value) to
fresh topics of ``--partitions`` partitions, in the same run:

* **kafka_ds**: a Spark ``local[2]`` session; the DataFrame comes from ``spark.range``
  (2 partitions, so 2 write tasks) and is written with
  ``df.write.format("pykafka").mode("append").save()`` -- end to end: Spark makes the
  rows, ships them to Python as Arrow, kafka_ds partitions, encodes and produces them
  and waits for every acknowledgement. Timed from ``save()`` to its return, after one
  small warm-up write (JVM and Python workers already up).
* **confluent-kafka**: one ``Producer`` (librdkafka, C) in this process, fed the same
  keys and values as Python bytes built beforehand: ``produce()`` per row, ``flush()``
  at the end. Same acks (all), idempotence (on) and codec.

Both write acks=all, idempotent, with the default partitioner (murmur2 of the key), and
the topic's contents are checked (record count) after each run. Best of ``--repeat``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

from brokers import MockCluster, TansuBroker  # noqa: E402

VALUE_SQL = "cast(rpad(concat('{\"id\":', id, ',\"kind\":\"bench\"}'), 100, ' ') AS binary)"
KEY_SQL = "cast(concat('key-', lpad(cast(id % 1000000 AS string), 6, '0')) AS binary)"


def python_rows(n):
    keys = [b"key-%06d" % (i % 1_000_000) for i in range(n)]
    values = [(b'{"id":%d,"kind":"bench"}' % i).ljust(100, b" ") for i in range(n)]
    return keys, values


def count_records(broker, topic):
    """Records appended to ``topic``: the sum of the partitions' high watermarks.

    From a Fetch answer, not ListOffsets: Tansu's ListOffsets LATEST is wrong after
    multi-record batches (tests/README.md, Tansu deviation 1); the end offset, not end -
    start, because the mock drops data beyond ~5 MiB a partition.
    """
    from kafka_ds.client import KafkaClient

    client = KafkaClient(broker.bootstrap_servers)
    try:
        total = 0
        for partition in client.topic_partitions(topic):
            part = client.fetch(topic, partition, 0, max_bytes=1024, max_wait_ms=1, min_bytes=0)
            total += part["high_watermark"]
        return total
    finally:
        client.close()


def bench_kafka_ds(spark, broker, rows, partitions, codec):
    topic = broker.unique_topic("bench-kds")
    broker.create_topic(topic, partitions=partitions)
    df = spark.range(0, rows, 1, 2).selectExpr(f"{KEY_SQL} AS key", f"{VALUE_SQL} AS value")
    started = time.perf_counter()
    (df.write.format("pykafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .option("topic", topic).option("kafka.compression.type", codec).mode("append").save())
    elapsed = time.perf_counter() - started
    return elapsed, topic


def bench_confluent(broker, keys, values, partitions, codec):
    from confluent_kafka import Producer

    topic = broker.unique_topic("bench-ck")
    broker.create_topic(topic, partitions=partitions)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True, "compression.type": codec,
                         "partitioner": "murmur2_random", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, "log_level": 3})
    failures = []

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(err)

    produce = producer.produce
    started = time.perf_counter()
    for i, (key, value) in enumerate(zip(keys, values)):
        while True:
            try:
                produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if i & 0x3FFF == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"confluent-kafka: {remaining} undelivered, errors {failures[:3]}")
    return elapsed, topic


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--codec", default="none")
    parser.add_argument("--broker", choices=("mock", "tansu"), default="mock")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    from spark_support import make_spark

    broker = MockCluster() if args.broker == "mock" else TansuBroker()
    spark = make_spark("kafka_ds-bench-write")
    try:
        print(f"broker={args.broker} rows={args.rows:,} value=100 B key=10 B "
              f"partitions={args.partitions} codec={args.codec} local[2]")
        bench_kafka_ds(spark, broker, 20_000, args.partitions, args.codec)   # warm-up
        keys, values = python_rows(args.rows)
        ours, theirs = [], []
        for run in range(args.repeat):
            elapsed, topic = bench_kafka_ds(spark, broker, args.rows, args.partitions, args.codec)
            assert count_records(broker, topic) == args.rows, "kafka_ds wrote a wrong count"
            broker.delete_topic(topic, wait=False)   # the mock keeps ~5 MiB per partition anyway
            ours.append(args.rows / elapsed)
            elapsed, topic = bench_confluent(broker, keys, values, args.partitions, args.codec)
            assert count_records(broker, topic) == args.rows, "confluent wrote a wrong count"
            broker.delete_topic(topic, wait=False)
            theirs.append(args.rows / elapsed)
            print(f"run {run + 1}: kafka_ds {ours[-1]:,.0f} rows/s, "
                  f"confluent-kafka {theirs[-1]:,.0f} rows/s")
        best_ours, best_theirs = max(ours), max(theirs)
        print(f"best: kafka_ds (Spark local[2], df.write) {best_ours:,.0f} rows/s | "
              f"confluent-kafka Producer {best_theirs:,.0f} rows/s | "
              f"ratio {best_ours / best_theirs:.2f}x")
    finally:
        spark.stop()
        broker.stop()


if __name__ == "__main__":
    main()
