"""Reading the last 1% of a topic by timestamp: a pushed ``timestamp >=`` filter
(``pushFilters=true``) against the unfiltered read, on the librdkafka mock (which answers
no ListOffsets by timestamp, so ``timestampOffsetsVia=auto`` falls back to the Fetch search).

Reports the records each plan reads, the planning time and the Fetches the timestamp
lookup made; with ``--spark`` also the wall time of ``df.where(...).count()`` both ways.

    .venv/bin/python benchmarks/bench_pushdown.py [--records 200000] [--partitions 4]
        [--batch 100] [--spark]
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

BASE_TS = 1_700_000_000_000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch", type=int, default=100, help="records per produced batch")
    parser.add_argument("--spark", action="store_true")
    args = parser.parse_args()

    from pyspark.sql.datasource import GreaterThanOrEqual

    from brokers import MockCluster, produce_confluent
    from kafka_ds.client import KafkaClient
    from kafka_ds.options import parse_read_options
    from kafka_ds.pushdown import CONF, KafkaPushdownReader
    from kafka_ds.reader import KafkaBatchReader

    fetches = [0]
    real_fetch = KafkaClient.fetch

    def counting_fetch(self, *a, **k):
        fetches[0] += 1
        return real_fetch(self, *a, **k)

    KafkaClient.fetch = counting_fetch
    with MockCluster() as cluster:
        topic = cluster.unique_topic("push")
        cluster.create_topic(topic, partitions=args.partitions)
        per = args.records // args.partitions
        for p in range(args.partitions):
            produce_confluent(cluster.bootstrap_servers, topic,
                              [{"value": b"v%d" % i, "timestamp_ms": BASE_TS + i}
                               for i in range(per)], partition=p,
                              **{"batch.num.messages": args.batch, "linger.ms": 50})
        since_ms = BASE_TS + per - per // 100
        since = dt.datetime.fromtimestamp(since_ms / 1000, dt.timezone.utc)
        options = {"kafka.bootstrap.servers": cluster.bootstrap_servers, "subscribe": topic}
        opts = parse_read_options({**options, "pushFilters": "true"}, streaming=False)
        results = {}
        for name, reader in (("unfiltered", KafkaBatchReader(opts)),
                             ("pushed", KafkaPushdownReader(opts))):
            if name == "pushed":
                reader.pushFilters([GreaterThanOrEqual(("timestamp",), since)])
            fetches[0] = 0
            began = time.perf_counter()
            planned = reader.partitions()
            took = time.perf_counter() - began
            results[name] = (sum(r.end - r.start for r in planned), took, fetches[0])
        print(f"{args.records} records, {args.partitions} partitions, {args.batch} per batch; "
              f"filter timestamp >= the last 1% of each partition:")
        for name, (records, took, n) in results.items():
            print(f"  {name:10s} records planned {records:8d}  planning {took * 1000:7.1f} ms"
                  f"  Fetches at planning {n}")
        if args.spark:
            from spark_support import make_spark
            spark = make_spark("bench_pushdown")
            spark.conf.set(CONF, "true")
            for push in ("false", "true", "false", "true"):
                df = spark.read.format("pykafka").options(**options, pushFilters=push).load()
                began = time.perf_counter()
                n = df.where(df.timestamp >= since).count()
                print(f"  spark pushFilters={push:5s} count {n} in "
                      f"{time.perf_counter() - began:.2f} s")
            spark.stop()


if __name__ == "__main__":
    main()
