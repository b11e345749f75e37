"""Reading the last 1% of a topic by timestamp: a pushed ``timestamp >=`` filter
(``pushFilters=true``) against the unfiltered read, in one run on one broker.

Tansu (the default) and the librdkafka mock both answer ListOffsets by timestamp wrongly
(Tansu 0.6 always 0, the mock -1), so ``timestampOffsetsVia=auto`` falls back to the Fetch
search there. Records are produced with confluent-kafka, CreateTime = a base + the record's
index in its partition, so the filter keeps exactly the last 1% of every partition.

For each of the two plans it reports: the records planned; planning time and the Fetches
(and records in them) the timestamp lookup made; then the plan read in this process
(``reader.read`` of every planned partition, one thread, no Spark): rows returned, Fetches,
and the records in the record batches the broker sent (what was fetched, counted from the
batch headers of every Fetch response, planning Fetches included). The fetched share of the
topic is the figure the issue bounds (<= 2%). With ``--spark`` also the wall time of
``df.where(timestamp >= since).count()`` both ways, twice (the second runs are warm).

    .venv/bin/python benchmarks/bench_pushdown.py [--records 10000000] [--partitions 4]
        [--batch 1000] [--broker tansu|mock] [--spark]
"""

from __future__ import annotations

import datetime as dt
import struct
import time

import harness

BASE_TS = 1_700_000_000_000

# Record batch v2 header: baseOffset int64, batchLength int32 (bytes after these 12),
# ..., magic int8 at 16, ..., recordCount int32 at 57 (KIP-98 layout).
BATCH_LENGTH = struct.Struct(">i")
RECORD_COUNT = struct.Struct(">i")
MAGIC_AT, RECORD_COUNT_AT, LOG_OVERHEAD = 16, 57, 12


def records_in_response(data) -> int:
    """Records of the complete v2 batches in a Fetch response's records bytes (a partial
    batch at the end is cut by the fetch size and not decoded, so not counted)."""
    view = memoryview(data or b"")
    pos, total = 0, 0
    while pos + RECORD_COUNT_AT + 4 <= len(view):
        (length,) = BATCH_LENGTH.unpack_from(view, pos + 8)
        if pos + LOG_OVERHEAD + length > len(view):
            break
        if view[pos + MAGIC_AT] != 2:
            raise ValueError(
                f"record batch of magic {view[pos + MAGIC_AT]}: this benchmark "
                f"counts v2 batches only"
            )
        total += RECORD_COUNT.unpack_from(view, pos + RECORD_COUNT_AT)[0]
        pos += LOG_OVERHEAD + length
    return total


class FetchCounter:
    """Wraps ``KafkaClient.fetch`` (every Fetch kafka_ds makes for one partition: the
    timestamp search's probes and the reads): how many, and the records they carried."""

    def __init__(self, client_class):
        self.fetches = self.records = 0
        real_fetch = client_class.fetch
        counter = self

        def counting_fetch(client, *args, **kwargs):
            part = real_fetch(client, *args, **kwargs)
            counter.fetches += 1
            counter.records += records_in_response(part.get("records"))
            return part

        client_class.fetch = counting_fetch

    def reset(self):
        self.fetches = self.records = 0


def produce(bootstrap, topic, partitions, per_partition, batch):
    """confluent-kafka, one shared delivery callback (a closure per record costs GBs at
    10M); value = index in the partition, timestamp = BASE_TS + that index."""
    from confluent_kafka import Producer

    failures, delivered = [], [0]

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(err)
        else:
            delivered[0] += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 50,
            "batch.num.messages": batch,
            "batch.size": 16 << 20,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 3,
        }
    )
    for i in range(per_partition):
        value = b"v%d" % i
        for p in range(partitions):
            while True:
                try:
                    producer.produce(
                        topic,
                        value=value,
                        partition=p,
                        timestamp=BASE_TS + i,
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) or failures or delivered[0] != per_partition * partitions:
        raise RuntimeError(
            f"produce: {delivered[0]} delivered of {per_partition * partitions}"
            f", failures {failures[:3]}"
        )


def read_plan(reader, planned):
    """Every planned partition read in this process; rows returned."""
    rows = 0
    for partition in planned:
        for batch in reader.read(partition):
            rows += batch.num_rows
    return rows


def main():
    parser = harness.parser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1000, help="records per produced batch")
    parser.add_argument("--broker", choices=("tansu", "mock"), default="tansu")
    parser.add_argument("--spark", action="store_true")
    args = parser.parse_args()

    from pyspark.sql.datasource import GreaterThanOrEqual

    from kafka_ds.client import KafkaClient
    from kafka_ds.compat import PUSHDOWN_CONF
    from kafka_ds.options import parse_read_options
    from kafka_ds.reader import KafkaBatchReader, KafkaPushdownReader
    from tests.support.brokers import start_broker

    counter = FetchCounter(KafkaClient)
    with start_broker(args.broker) as broker:
        topic = broker.unique_topic("push")
        broker.create_topic(topic, partitions=args.partitions)
        per = args.records // args.partitions
        total = per * args.partitions
        began = time.perf_counter()
        produce(broker.bootstrap_servers, topic, args.partitions, per, args.batch)
        print(
            f"{args.broker}: produced {total:,} records ({args.partitions} partitions, "
            f"{args.batch} per batch) in {time.perf_counter() - began:.1f} s"
        )
        since_ms = BASE_TS + per - per // 100
        expected_rows = args.partitions * (per // 100)
        since = dt.datetime.fromtimestamp(since_ms / 1000, dt.timezone.utc)
        options = {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic}
        opts = parse_read_options({**options, "pushFilters": "true"}, streaming=False)
        print(
            f"filter timestamp >= {since.isoformat()} (the last 1% of each partition, "
            f"{expected_rows:,} records); timestampOffsetsVia=auto"
        )
        results = {}
        for name, reader in (
            ("unfiltered", KafkaBatchReader(opts)),
            ("pushed", KafkaPushdownReader(opts)),
        ):
            if name == "pushed":
                rejected = list(reader.pushFilters([GreaterThanOrEqual(("timestamp",), since)]))
                assert len(rejected) == 1, rejected  # timestamp filters go back to Spark too
            counter.reset()
            began = time.perf_counter()
            planned = reader.partitions()
            planning = (time.perf_counter() - began, counter.fetches, counter.records)
            counter.reset()
            began = time.perf_counter()
            rows = read_plan(reader, planned)
            reading = (time.perf_counter() - began, counter.fetches, counter.records)
            results[name] = (sum(r.end - r.start for r in planned), planning, rows, reading)
        for name, (records, planning, rows, reading) in results.items():
            fetched = planning[2] + reading[2]
            print(
                f"  {name:10s} planned {records:>11,} records | planning {planning[0]:6.2f} s,"
                f" {planning[1]:3d} Fetches carrying {planning[2]:,} records | read "
                f"{rows:>11,} rows in {reading[0]:6.2f} s, {reading[1]:5d} Fetches carrying "
                f"{reading[2]:,} records | fetched {fetched:,} = {fetched / total:.3%} "
                f"of the topic"
            )
        unfiltered, pushed = results["unfiltered"], results["pushed"]
        assert unfiltered[2] == total, unfiltered
        pushed_fetched = pushed[1][2] + pushed[3][2]
        print(
            f"pushed read: {pushed_fetched / total:.3%} of the topic's records fetched "
            f"(target <= 2%: {'met' if pushed_fetched <= 0.02 * total else 'NOT met'}); "
            f"planning + read {pushed[1][0] + pushed[3][0]:.2f} s against "
            f"{unfiltered[1][0] + unfiltered[3][0]:.2f} s unfiltered"
        )
        if args.spark:
            from tests.support.spark_support import make_spark

            spark = make_spark("bench_pushdown")
            spark.conf.set(PUSHDOWN_CONF, "true")
            for push in ("false", "true", "false", "true"):
                df = spark.read.format("pykafka").options(**options, pushFilters=push).load()
                began = time.perf_counter()
                n = df.where(df.timestamp >= since).count()
                assert n == expected_rows, (push, n)
                print(
                    f"  spark pushFilters={push:5s} count {n:,} in "
                    f"{time.perf_counter() - began:.2f} s"
                )
            spark.stop()


if __name__ == "__main__":
    main()
