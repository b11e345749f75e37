"""End-to-end batch read: spark.read.format("pykafka") vs its peers, in one run.

    python benchmarks/bench_read.py                          # 1M x 100 B records
    python benchmarks/bench_read.py --records 200000         # quick run
    python benchmarks/bench_read.py --value-size 1024 --records 100000

Fills a topic on the librdkafka mock cluster (3 brokers; 32 partitions because the mock
keeps only ~5 MiB per partition) with N records of ``--value-size``-byte values and
10-byte keys (batches of ~500 KB), then measures, best of ``--repeat`` after a warm-up:

* pykafka count  -- ``spark.read.format("pykafka")...load().count()``, local[2];
* pykafka noop   -- the same DataFrame written to the ``noop`` format (all columns
  cross into the JVM);
* ceiling count / noop -- a dummy Python DataSource that yields pre-built Arrow
  batches of the same schema, rows and partitioning (what the Python Data Source
  framework itself costs: the ceiling for any Python source);
* kafka_ds python -- ``kafka_ds.read.ranges.read_range`` (what a Spark task runs) over every
  partition in the benchmark process, one thread, into Arrow batches -- no Spark;
* aiokafka       -- aiokafka's consumer reading every record of the topic into Python
  (``getmany``, touching key and value), one process, alternating with the previous.

Rows/s for each and the ratios are printed as a Markdown table.
"""

from __future__ import annotations

import asyncio
import sys
import time

import harness
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

PARTITIONS = 32
VALUE_SIZE = 100
BATCH_BYTES = 500_000  # ~bytes per produced record batch


def per_batch(value_size: int) -> int:
    return max(1, min(5000, BATCH_BYTES // (value_size + 20)))


def send_produce(conn, topic, partition, records):
    """Send one Produce request (acks=1) of the encoded batch ``records`` without waiting:
    the pending answer, for :func:`acknowledge`."""
    from kafka_ds.protocol import messages as m

    return conn.send(
        m.PRODUCE,
        {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 30000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        },
    )


def acknowledge(conn, pending):
    """Read one pipelined Produce answer; any partition error ends the benchmark."""
    for topic_response in conn.receive(pending)["responses"]:
        for part in topic_response["partition_responses"]:
            if part["error_code"]:
                raise RuntimeError(f"produce failed: {part}")


def fill_topic(
    bootstrap: str,
    topic: str,
    records: int,
    value_size: int = VALUE_SIZE,
    partitions: int = PARTITIONS,
    values: pa.Array | None = None,
    first_timestamp_ms: int | None = None,
) -> None:
    """Produce with kafka_ds's own encoder + Produce, a few requests in flight per leader.
    ``values``: a binary array of ``records`` values written instead of generated ones (in
    order, partition after partition; ``value_size`` then only sizes the batches).
    ``first_timestamp_ms``: each record's CreateTime is this plus its index in its
    partition (None: the time of writing)."""
    from kafka_ds.client import KafkaClient
    from kafka_ds.protocol.records_encode import encode_record_batch

    step = per_batch(value_size)
    client = KafkaClient(bootstrap)
    try:
        per_partition, extra = divmod(records, partitions)
        in_flight = []
        taken = 0
        for partition in range(partitions):
            count = per_partition + (1 if partition < extra else 0)
            conn = client.connection(client.leader_for(topic, partition))
            for start in range(0, count, step):
                n = min(step, count - start)
                keys = pa.array([b"key-%06d" % ((start + i) % 1_000_000) for i in range(n)])
                if values is None:
                    batch_values = pa.array(
                        [
                            (b"%d-%d " % (partition, start + i)).ljust(value_size, b"x")
                            for i in range(n)
                        ]
                    )
                else:
                    batch_values = values.slice(taken, n)
                    taken += n
                stamps = (
                    None
                    if first_timestamp_ms is None
                    else pa.array(
                        range(first_timestamp_ms + start, first_timestamp_ms + start + n),
                        pa.int64(),
                    )
                )
                records = encode_record_batch(keys=keys, values=batch_values, timestamps_ms=stamps)
                in_flight.append((conn, send_produce(conn, topic, partition, records)))
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
        from kafka_ds.columns import spark_ddl

        return spark_ddl(False)

    def reader(self, schema):
        return CeilingReader(
            int(self.options["records"]),
            int(self.options["partitions"]),
            int(self.options.get("value_size", VALUE_SIZE)),
            self.options.get("topic", "bench"),
        )


class CeilingReader(DataSourceReader):
    def __init__(self, records, partitions, value_size=VALUE_SIZE, topic="bench"):
        self.records = records
        self.partitions_count = partitions
        self.value_size = value_size
        self.topic = topic  # the topic pykafka reads: the same strings cross to the JVM

    def partitions(self):
        per = self.records // self.partitions_count
        return [
            _CeilingPartition(i, per + (1 if i < self.records % self.partitions_count else 0))
            for i in range(self.partitions_count)
        ]

    def read(self, partition):
        import numpy as np

        from kafka_ds.columns import arrow_schema

        # Same shape as pykafka's batches: one per ~8 MiB fetch.
        chunk = max(1, (8 << 20) // (self.value_size + 80))
        schema = arrow_schema(False)
        keys = pa.array([b"key-%06d" % i for i in range(chunk)])
        values = pa.array([b"x" * self.value_size] * chunk)
        made = 0
        while made < partition.rows:
            n = min(chunk, partition.rows - made)
            yield pa.RecordBatch.from_arrays(
                [
                    keys.slice(0, n),
                    values.slice(0, n),
                    pa.array([self.topic] * n, pa.string()),
                    pa.array(np.full(n, partition.value, np.int32)),
                    pa.array(np.arange(made, made + n, dtype=np.int64)),
                    pa.array(np.full(n, 1_700_000_000_000_000, np.int64)).cast(
                        pa.timestamp("us", tz="UTC")
                    ),
                    pa.array(np.zeros(n, np.int32)),
                ],
                schema=schema,
            )
            made += n


# --- aiokafka ---------------------------------------------------------------------------------


def aiokafka_read(
    bootstrap: str,
    topic: str,
    records: int,
    value_size: int = VALUE_SIZE,
    partitions: int = PARTITIONS,
) -> float:
    """Seconds for aiokafka's consumer to read every record (touching key and value)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap.split(","),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            group_id=None,
            max_partition_fetch_bytes=8 << 20,
            fetch_max_bytes=64 << 20,
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            started = time.perf_counter()
            seen = value_bytes = 0
            while seen < records:
                batches = await consumer.getmany(timeout_ms=1000, max_records=100_000)
                for messages in batches.values():
                    for msg in messages:
                        msg.key  # noqa: B018 (the peer decodes on access)
                        value_bytes += len(msg.value)
                    seen += len(messages)
            elapsed = time.perf_counter() - started
            assert value_bytes == records * value_size
            return elapsed
        finally:
            await consumer.stop()

    return asyncio.run(run())


def kafka_ds_python_read(
    bootstrap: str, topic: str, records: int, partitions: int = PARTITIONS
) -> float:
    """Seconds for ``kafka_ds.read.ranges.read_range`` to read every partition into Arrow
    batches in this process, one thread (what the Spark tasks run, without Spark)."""
    from kafka_ds.client import make_client
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.ranges import OffsetRange, read_range

    opts = parse_read_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False
    )
    per, extra = divmod(records, partitions)
    client = make_client(opts)
    try:
        client.leader_for(topic, 0)
        started = time.perf_counter()
        rows = 0
        for p in range(partitions):
            for batch in read_range(opts, OffsetRange(topic, p, 0, per + (p < extra)), client):
                rows += batch.num_rows
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    assert rows == records, (rows, records)
    return elapsed


def best_of(repeat, fn):
    """Best of ``repeat`` after a warm-up (JIT, Python workers, connections)."""
    return harness.best_of(repeat, fn, warmup=True)


def best_timed(repeat, fn, cluster, spark):
    """The :class:`cpu_use.Timed` of the fastest of ``repeat`` runs of ``fn`` (after a
    warm-up): its wall seconds and the CPU seconds of the broker, JVM and Python workers."""
    from cpu_use import Timed

    fn()
    best = None
    for _ in range(repeat):
        with Timed(cluster, spark) as timed:
            fn()
        if best is None or timed.seconds < best.seconds:
            best = timed
    return best


def measure(
    spark,
    cluster,
    records: int,
    value_size: int = VALUE_SIZE,
    repeat: int = 3,
    log=None,
    partitions: int = PARTITIONS,
    cpu: dict | None = None,
) -> dict:
    """Fill a fresh topic and time every reader; returns {(label, action): rows/s}.
    ``cpu``: filled with {(label, action): {process: CPU seconds}} of each Spark read's
    fastest run."""
    topic = f"bench_read_{value_size}_{records}"
    cluster.create_topic(topic, partitions=partitions)
    started = time.perf_counter()
    fill_topic(cluster.bootstrap_servers, topic, records, value_size, partitions)
    if log:
        log(
            f"filled {topic}: {records:,} records x {value_size} B in "
            f"{time.perf_counter() - started:.1f}s"
        )
    pykafka = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
    )
    ceiling = ceiling_reader(spark, topic, records, partitions, value_size)
    count = pykafka.load().count()
    assert count == records, f"pykafka read {count} rows, expected {records}"
    results = {}
    # Interleaved, so that both sides see the same background noise.
    for action in ("count", "noop"):
        for label, reader in (("pykafka", pykafka), ("ceiling", ceiling)):
            if action == "count":
                timed = best_timed(
                    repeat, lambda reader=reader: reader.load().count(), cluster, spark
                )
            else:
                timed = best_timed(
                    repeat,
                    lambda reader=reader: (
                        reader.load().write.format("noop").mode("overwrite").save()
                    ),
                    cluster,
                    spark,
                )
            results[(label, action)] = timed.seconds
            if cpu is not None:
                cpu[(label, action)] = timed.cpu
    # Both Python consumers read the topic into this process, one thread, alternating.
    kafka_ds_python_read(cluster.bootstrap_servers, topic, records, partitions)  # warm-up
    py_ours, py_aio = [], []
    for _ in range(repeat):
        py_ours.append(kafka_ds_python_read(cluster.bootstrap_servers, topic, records, partitions))
        py_aio.append(
            aiokafka_read(cluster.bootstrap_servers, topic, records, value_size, partitions)
        )
    results[("kafka_ds", "python")] = min(py_ours)
    results[("aiokafka", "python")] = min(py_aio)
    try:
        cluster.delete_topic(topic)
    except Exception:
        pass
    return {k: records / v for k, v in results.items()}


def register_ceiling(spark) -> None:
    """The ceiling source, registered in ``spark`` as ``kafka_ds_ceiling``."""
    from pyspark import cloudpickle

    # The Python workers cannot import benchmarks/: ship the ceiling source by value.
    if __name__ != "__main__":
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(CeilingDataSource)


def ceiling_reader(spark, topic, records, partitions, value_size):
    """A reader of the ceiling source (registered) yielding what a read of ``topic`` would."""
    return (
        spark.read.format("kafka_ds_ceiling")
        .option("records", records)
        .option("partitions", partitions)
        .option("value_size", value_size)
        .option("topic", topic)
    )


def start_spark():
    """A local[2] session (tests/support/spark_support.py) with pykafka and the ceiling source."""
    from tests.support.spark_support import make_spark

    spark = make_spark("kafka_ds bench_read")
    register_ceiling(spark)
    return spark


def start(broker: str = "mock"):
    """(spark, cluster) for :func:`measure`: the librdkafka mock cluster (3 brokers; it
    keeps ~5 MiB per partition) or Tansu (one node, memory storage, no size cap)."""
    from tests.support.brokers import MockCluster, TansuBroker

    cluster = MockCluster(3) if broker == "mock" else TansuBroker()
    return start_spark(), cluster


def cpu_table(cpu: dict, records: int) -> str:
    """CPU nanoseconds per row of each Spark read, per process (Markdown)."""
    names = sorted({name for used in cpu.values() for name in used})
    lines = [
        "| read | " + " | ".join(f"{name} ns/row" for name in names) + " | total ns/row |",
        "|---|" + "---:|" * (len(names) + 1),
    ]
    for (label, action), used in cpu.items():
        per_row = [used.get(name, 0.0) / records * 1e9 for name in names]
        lines.append(
            f"| {label} {action} | "
            + " | ".join(f"{v:,.0f}" for v in per_row)
            + f" | {sum(per_row):,.0f} |"
        )
    return "\n".join(lines)


def table(
    rate: dict,
    records: int,
    value_size: int,
    repeat: int,
    partitions: int = PARTITIONS,
    broker: str = "mock",
) -> str:
    lines = [
        f"End-to-end batch read, {records:,} records x {value_size} B, local[2], "
        f"{broker}, {partitions} partitions, best of {repeat}",
        "",
        "| measurement | rows/s | vs ceiling | vs aiokafka |",
        "|---|---:|---:|---:|",
    ]
    for key in [
        ("pykafka", "count"),
        ("ceiling", "count"),
        ("pykafka", "noop"),
        ("ceiling", "noop"),
        ("kafka_ds", "python"),
        ("aiokafka", "python"),
    ]:
        label, action = key
        ceiling_rate = rate.get(("ceiling", action))
        vs_ceiling = f"{rate[key] / ceiling_rate:.2f}x" if ceiling_rate else ""
        lines.append(
            f"| {label} {action} | {rate[key]:,.0f} | {vs_ceiling} | "
            f"{rate[key] / rate[('aiokafka', 'python')]:.2f}x |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = harness.parser(__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=VALUE_SIZE)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--broker", choices=("mock", "tansu"), default="mock")
    parser.add_argument(
        "--partitions",
        type=int,
        default=PARTITIONS,
        help="(the mock keeps ~5 MiB per partition: >= records / 40k)",
    )
    args = parser.parse_args(argv)

    spark, cluster = start(args.broker)
    cpu = {}
    try:
        rate = measure(
            spark,
            cluster,
            args.records,
            args.value_size,
            args.repeat,
            log=lambda s: print(s, file=sys.stderr),
            partitions=args.partitions,
            cpu=cpu,
        )
    finally:
        spark.stop()
        cluster.stop()
    print()
    print(table(rate, args.records, args.value_size, args.repeat, args.partitions, args.broker))
    print()
    print("CPU per row of the fastest run of each Spark read (the broker: Tansu only):")
    print()
    print(cpu_table(cpu, args.records))


if __name__ == "__main__":
    main()
