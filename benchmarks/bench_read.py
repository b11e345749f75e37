"""End-to-end batch read: spark.read.format("pykafka") vs its peers, in one run.

    python benchmarks/bench_read.py                   # 1M x 100 B records
    python benchmarks/bench_read.py --records 200000  # quick run

Fills a topic on the librdkafka mock cluster (3 brokers; 32 partitions because the mock
keeps only ~5 MiB per partition) with N records of 100-byte values and 10-byte keys in
batches of 5,000, then measures, best of ``--repeat`` after a warm-up:

* pykafka count  -- ``spark.read.format("pykafka")...load().count()``, local[2];
* pykafka noop   -- the same DataFrame written to the ``noop`` format (all columns
  cross into the JVM);
* ceiling count / noop -- a dummy Python DataSource that yields pre-built Arrow
  batches of the same schema, rows and partitioning (what the Python Data Source
  framework itself costs: the ceiling for any Python source);
* aiokafka       -- aiokafka's consumer reading every record of the topic into Python
  (``getmany``, touching key and value), one process.

Rows/s for each and the ratios are printed as a Markdown table.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))

import pyarrow as pa  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

PARTITIONS = 32
PER_BATCH = 5000
VALUE_SIZE = 100


def fill_topic(bootstrap: str, topic: str, records: int) -> None:
    """Produce with kafka_ds's own encoder + Produce, a few requests in flight per leader."""
    from kafka_ds.client import KafkaClient
    from kafka_ds.protocol import messages as m
    from kafka_ds.protocol.records import encode_record_batch

    def acknowledge(conn, pending):
        for topic_response in conn.receive(pending)["responses"]:
            for part in topic_response["partition_responses"]:
                if part["error_code"]:
                    raise RuntimeError(f"produce failed: {part}")

    client = KafkaClient(bootstrap)
    try:
        per_partition, extra = divmod(records, PARTITIONS)
        in_flight = []
        for partition in range(PARTITIONS):
            count = per_partition + (1 if partition < extra else 0)
            conn = client.connection(client.leader_for(topic, partition))
            for start in range(0, count, PER_BATCH):
                n = min(PER_BATCH, count - start)
                keys = pa.array([b"key-%06d" % ((start + i) % 1_000_000) for i in range(n)])
                values = pa.array([(b"%d-%d " % (partition, start + i)).ljust(VALUE_SIZE, b"x")
                                   for i in range(n)])
                in_flight.append((conn, conn.send(m.PRODUCE, {
                    "transactional_id": None, "acks": 1, "timeout_ms": 30000,
                    "topic_data": [{"name": topic, "partition_data": [
                        {"index": partition, "records": encode_record_batch(
                            keys=keys, values=values)}]}]})))
                if len(in_flight) >= 16:
                    acknowledge(*in_flight.pop(0))
        for conn, pending in in_flight:
            acknowledge(conn, pending)
    finally:
        client.close()


# --- the framework's ceiling: a Python DataSource yielding ready-made Arrow batches ---------

class _CeilingPartition(InputPartition):
    def __init__(self, index, rows):
        super().__init__(index)
        self.rows = rows


class CeilingDataSource(DataSource):
    """Yields pre-built Arrow batches shaped like pykafka's (no I/O, no decoding)."""

    @classmethod
    def name(cls):
        return "kafka_ds_ceiling"

    def schema(self):
        from kafka_ds.reader import spark_schema
        return spark_schema(False)

    def reader(self, schema):
        return CeilingReader(int(self.options["records"]), int(self.options["partitions"]))


class CeilingReader(DataSourceReader):
    def __init__(self, records, partitions):
        self.records = records
        self.partitions_count = partitions

    def partitions(self):
        per = self.records // self.partitions_count
        return [_CeilingPartition(i, per + (1 if i < self.records % self.partitions_count else 0))
                for i in range(self.partitions_count)]

    def read(self, partition):
        import numpy as np

        from kafka_ds.reader import arrow_schema
        # Same shape as a decoded fetch: ~8 MiB fetches of 5,000-record batches.
        chunk = 40_000
        schema = arrow_schema(False)
        keys = pa.array([b"key-%06d" % i for i in range(chunk)])
        values = pa.array([b"x" * VALUE_SIZE] * chunk)
        made = 0
        while made < partition.rows:
            n = min(chunk, partition.rows - made)
            yield pa.RecordBatch.from_arrays([
                keys.slice(0, n), values.slice(0, n),
                pa.array(["bench"] * n, pa.string()),
                pa.array(np.full(n, partition.value, np.int32)),
                pa.array(np.arange(made, made + n, dtype=np.int64)),
                pa.array(np.full(n, 1_700_000_000_000_000, np.int64)).cast(
                    pa.timestamp("us", tz="UTC")),
                pa.array(np.zeros(n, np.int32)),
            ], schema=schema)
            made += n


# --- aiokafka ---------------------------------------------------------------------------------

def aiokafka_read(bootstrap: str, topic: str, records: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                                    auto_offset_reset="earliest", group_id=None,
                                    max_partition_fetch_bytes=8 << 20, fetch_max_bytes=64 << 20)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            started = time.perf_counter()
            seen = value_bytes = 0
            while seen < records:
                batches = await consumer.getmany(timeout_ms=1000, max_records=100_000)
                for messages in batches.values():
                    for msg in messages:
                        value_bytes += len(msg.value)
                    seen += len(messages)
            elapsed = time.perf_counter() - started
            assert value_bytes == records * VALUE_SIZE
            return elapsed
        finally:
            await consumer.stop()

    return asyncio.run(run())


def best_of(repeat, fn):
    fn()  # warm-up: JIT, Python workers, connections
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    from brokers import MockCluster
    from spark_support import make_spark

    records = args.records
    cluster = MockCluster(3)
    try:
        topic = "bench_read"
        cluster.create_topic(topic, partitions=PARTITIONS)
        started = time.perf_counter()
        fill_topic(cluster.bootstrap_servers, topic, records)
        print(f"filled {topic}: {records:,} records in {time.perf_counter() - started:.1f}s",
              file=sys.stderr)
        spark = make_spark("kafka_ds bench_read")
        spark.dataSource.register(CeilingDataSource)
        pykafka = (spark.read.format("pykafka")
                   .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                   .option("subscribe", topic))
        ceiling = (spark.read.format("kafka_ds_ceiling").option("records", records)
                   .option("partitions", PARTITIONS))
        count = pykafka.load().count()
        assert count == records, f"pykafka read {count} rows, expected {records}"
        results = {}
        for label, reader in (("pykafka", pykafka), ("ceiling", ceiling)):
            results[(label, "count")] = best_of(args.repeat, lambda: reader.load().count())
            results[(label, "noop")] = best_of(args.repeat, lambda: reader.load().write.format(
                "noop").mode("overwrite").save())
        spark.stop()
        results[("aiokafka", "python")] = min(
            aiokafka_read(cluster.bootstrap_servers, topic, records) for _ in range(args.repeat))
    finally:
        cluster.stop()

    rate = {k: records / v for k, v in results.items()}
    print(f"\nEnd-to-end batch read, {records:,} records x {VALUE_SIZE} B, local[2], "
          f"{PARTITIONS} partitions, best of {args.repeat}\n")
    print("| measurement | rows/s | vs ceiling | vs aiokafka |")
    print("|---|---:|---:|---:|")
    for key in [("pykafka", "count"), ("ceiling", "count"), ("pykafka", "noop"),
                ("ceiling", "noop"), ("aiokafka", "python")]:
        label, action = key
        ceiling_rate = rate.get(("ceiling", action))
        vs_ceiling = f"{rate[key] / ceiling_rate:.2f}x" if ceiling_rate else ""
        print(f"| {label} {action} | {rate[key]:,.0f} | {vs_ceiling} | "
              f"{rate[key] / rate[('aiokafka', 'python')]:.2f}x |")


if __name__ == "__main__":
    main()
