"""Driver-side planning cost of a batch read: ``latestOffsetsVia=listOffsets``
(ListOffsets only, as Spark does) against the default ``auto`` (ListOffsets checked
against one small Fetch per leader), on the librdkafka mock cluster (3 brokers) with
many partitions. No Spark: ``KafkaBatchReader.partitions()`` is what the driver runs.

    .venv/bin/python benchmarks/bench_planning.py [--partitions 600] [--repeat 15]
"""

from __future__ import annotations

import time

import harness


def main():
    parser = harness.parser()
    parser.add_argument("--partitions", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    from kafka_ds.source import KafkaDataSource
    from tests.support.brokers import MockCluster, produce_confluent

    with MockCluster() as cluster:
        topic = cluster.unique_topic("plan")
        cluster.create_topic(topic, partitions=args.partitions)
        produce_confluent(
            cluster.bootstrap_servers,
            topic,
            [{"value": b"v%d" % i} for i in range(args.partitions * 3)],
        )
        best = {}
        # Interleave the two modes so machine load hits both alike; best of N.
        for _ in range(args.repeat):
            for via in ("listOffsets", "auto"):
                source = KafkaDataSource(
                    {
                        "kafka.bootstrap.servers": cluster.bootstrap_servers,
                        "subscribe": topic,
                        "latestOffsetsVia": via,
                    }
                )
                began = time.perf_counter()
                ranges = source.reader(None).partitions()
                took = time.perf_counter() - began
                best[via] = min(best.get(via, took), took)
                assert sum(r.end - r.start for r in ranges) == args.partitions * 3
        print(f"{args.partitions} partitions, 3 brokers, best of {args.repeat}:")
        for via, took in best.items():
            print(f"  latestOffsetsVia={via:12s} {took * 1000:8.1f} ms")
        print(f"  added by the Fetch check: {(best['auto'] - best['listOffsets']) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
