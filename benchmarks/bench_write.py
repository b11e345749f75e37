"""Write throughput: Spark ``df.write.format("pykafka")`` vs the confluent-kafka Producer.

    .venv/bin/python benchmarks/bench_write.py                          # 1M rows, mock cluster
    .venv/bin/python benchmarks/bench_write.py --broker tansu --records 10000000   # the #22 target
    .venv/bin/python benchmarks/bench_write.py --broker tansu --exactly-once       # EOS vs ALO

Starts its own broker (tests/support/brokers.py: the librdkafka mock cluster with 3 brokers,
or one Tansu node), then writes the same N rows (10-byte key ``key-000042``, 100-byte
value) to fresh topics of ``--partitions`` partitions (6 on the mock, 8 on Tansu), in
the same run:

* **kafka_ds**: a Spark ``local[2]`` session; the DataFrame comes from ``spark.range``
  (``--tasks`` partitions, so that many write tasks) and is written with
  ``df.write.format("pykafka").mode("append").save()`` -- end to end: Spark reads the
  rows, ships them to Python as Arrow, kafka_ds partitions, encodes and produces them
  and waits for every acknowledgement. Timed from ``save()`` to its return, after one
  small warm-up write (JVM and Python workers already up).
  ``--input prepared`` (the default): the rows are made before the clock starts, as
  confluent-kafka's are -- the DataFrame is cached in the JVM's memory (checked: every
  partition in memory) and counted once; the write then reads the cache.
  ``--input generated``: Spark makes each row inside the timed write (``rpad``,
  ``concat``, ``lpad`` and casts per row: ~0.75 CPU-us per row in the JVM on the
  2-core benchmark machine, more than kafka_ds's own work).
* **confluent-kafka**: one ``Producer`` (librdkafka, C) in this process, fed the same
  keys and values as Python bytes built beforehand: ``produce()`` per row, ``flush()``
  at the end. Same acks (all), idempotence (on) and codec; ``linger.ms`` 5 and
  ``batch.size`` 1 MiB.

Both write acks=all, idempotent, with the default partitioner (murmur2 of the key). The
topic is checked after each run: its end offsets add up to N (nothing lost, nothing
written twice).

``--exactly-once``: instead of confluent-kafka, the same kafka_ds write with
``deliveryGuarantee=exactly-once`` (one transaction per task, committed by the driver)
against the at-least-once write, alternating in the same run; the exactly-once topic is
checked by reading it back read_committed (N records, every transaction committed).

Each write also prints the CPU seconds it cost per process: the broker (Tansu; it shares
the machine's cores), the Spark JVM and its Python workers (kafka_ds), or this process
(confluent-kafka). Best of ``--repeat``.
"""

from __future__ import annotations

import harness
from cpu_use import Timed

from tests.support.brokers import MockCluster, TansuBroker

VALUE_SQL = "cast(rpad(concat('{\"id\":', id, ',\"kind\":\"bench\"}'), 100, ' ') AS binary)"
KEY_SQL = "cast(concat('key-', lpad(cast(id % 1000000 AS string), 6, '0')) AS binary)"


def python_rows(n):
    keys = [b"key-%06d" % (i % 1_000_000) for i in range(n)]
    values = [(b'{"id":%d,"kind":"bench"}' % i).ljust(100, b" ") for i in range(n)]
    return keys, values


def end_offsets(broker, topic) -> dict:
    """{partition: (high watermark, last stable offset)} from one Fetch per partition.

    From a Fetch answer, not ListOffsets: Tansu's ListOffsets LATEST is wrong after
    multi-record batches (tests/README.md, Tansu deviation 1); the end offset, not end -
    start, because the mock drops data beyond ~5 MiB a partition.
    """
    from kafka_ds.client import KafkaClient

    client = KafkaClient(broker.bootstrap_servers)
    try:
        ends = {}
        for partition in client.topic_partitions(topic):
            part = client.fetch(topic, partition, 0, max_bytes=1024, max_wait_ms=1, min_bytes=0)
            ends[partition] = (part["high_watermark"], part.get("last_stable_offset", -1))
        return ends
    finally:
        client.close()


def count_records(broker, topic) -> int:
    """Records appended to ``topic`` (no transactions: the sum of the end offsets)."""
    return sum(hw for hw, _lso in end_offsets(broker, topic).values())


def count_committed(broker, topic) -> int:
    """Data records of committed transactions in ``topic``, read back read_committed (the
    end offsets also count the transactions' commit markers). Fails when a transaction
    is still open (last stable offset below the high watermark)."""
    from kafka_ds.client import make_client
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.ranges import OffsetRange, read_range

    opts = parse_read_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap_servers,
            "subscribe": topic,
            "kafka.isolation.level": "read_committed",
        },
        streaming=False,
    )
    client = make_client(opts)
    total = 0
    try:
        for partition, (hw, lso) in end_offsets(broker, topic).items():
            if 0 <= lso < hw:
                raise AssertionError(
                    f"{topic}-{partition}: a transaction is still open "
                    f"(last stable offset {lso}, high watermark {hw})"
                )
            for batch in read_range(opts, OffsetRange(topic, partition, 0, hw), client):
                total += batch.num_rows
    finally:
        client.close()
    return total


def source_frame(spark, rows, tasks, prepared):
    """The rows to write: made per row by Spark's SQL functions, or (``prepared``) made
    once and cached in memory, so that the timed write reads them ready-made."""
    df = spark.range(0, rows, 1, tasks).selectExpr(f"{KEY_SQL} AS key", f"{VALUE_SQL} AS value")
    if not prepared:
        return df
    from pyspark import StorageLevel

    df = df.persist(StorageLevel.MEMORY_ONLY)
    if df.count() != rows:
        raise AssertionError("the cached DataFrame lost rows")
    for info in spark.sparkContext._jsc.sc().getRDDStorageInfo():
        if info.numCachedPartitions() != info.numPartitions() or info.diskSize():
            raise RuntimeError(
                f"only {info.numCachedPartitions()} of {info.numPartitions()} "
                "partitions of the input fit in memory: raise --driver-memory"
            )
    return df


def bench_kafka_ds(spark, broker, df, partitions, codec, exactly_once=False):
    topic = broker.unique_topic("bench-eos" if exactly_once else "bench-kds")
    broker.create_topic(topic, partitions=partitions)
    writer = (
        df.write.format("pykafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic)
        .option("kafka.compression.type", codec)
        .mode("append")
    )
    if exactly_once:
        writer = writer.option("deliveryGuarantee", "exactly-once")
    with Timed(broker, spark) as timed:
        writer.save()
    return timed, topic


def bench_confluent(broker, keys, values, partitions, codec):
    from confluent_kafka import Producer

    topic = broker.unique_topic("bench-ck")
    broker.create_topic(topic, partitions=partitions)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": codec,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 3,
        }
    )
    failures = []

    def on_delivery(err, _msg):
        if err is not None:
            failures.append(err)

    produce = producer.produce
    with Timed(broker) as timed:
        for i, (key, value) in enumerate(zip(keys, values, strict=True)):
            while True:
                try:
                    produce(topic, value, key, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.01)
            if i & 0x3FFF == 0:
                producer.poll(0)
        remaining = producer.flush(600)
    if remaining or failures:
        raise RuntimeError(f"confluent-kafka: {remaining} undelivered, errors {failures[:3]}")
    return timed, topic


def check_and_drop(broker, topic, rows, counter, who):
    found = counter(broker, topic)
    if found != rows:
        raise AssertionError(f"{who} wrote {found:,} records to {topic}, expected {rows:,}")
    broker.delete_topic(topic, wait=False)  # frees the broker's memory (Tansu: memory://)


def main():
    parser = harness.parser(__doc__, paragraph=True)
    parser.add_argument("--records", "--rows", dest="rows", type=int, default=1_000_000)
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="topic partitions (default: 6 on the mock, 8 on Tansu)",
    )
    parser.add_argument("--tasks", type=int, default=2, help="Spark partitions = write tasks")
    parser.add_argument("--codec", default="none")
    parser.add_argument("--broker", choices=("mock", "tansu"), default="mock")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument(
        "--exactly-once",
        action="store_true",
        help="compare deliveryGuarantee=exactly-once with at-least-once",
    )
    parser.add_argument(
        "--input",
        choices=("prepared", "generated"),
        default="prepared",
        help="rows cached before the clock starts (as confluent-kafka's "
        "are built before), or made by Spark inside the timed write",
    )
    parser.add_argument(
        "--driver-memory",
        default="6g",
        help="the Spark JVM's heap (the prepared input is cached in it)",
    )
    args = parser.parse_args()
    partitions = args.partitions or (8 if args.broker == "tansu" else 6)

    from tests.support.spark_support import make_spark

    broker = MockCluster() if args.broker == "mock" else TansuBroker()
    spark = make_spark("kafka_ds-bench-write", driver_memory=args.driver_memory)
    try:
        print(
            f"broker={args.broker} rows={args.rows:,} value=100 B key=10 B "
            f"partitions={partitions} tasks={args.tasks} codec={args.codec} local[2] "
            f"input={args.input}" + (" exactly-once vs at-least-once" if args.exactly_once else "")
        )
        # Warm-up: JVM code paths, Python workers, imports (and a transaction's round trips).
        warm = source_frame(spark, 20_000, args.tasks, prepared=False)
        for warm_eos in (False, True) if args.exactly_once else (False,):
            _t, topic = bench_kafka_ds(spark, broker, warm, partitions, args.codec, warm_eos)
            broker.delete_topic(topic, wait=False)
        df = source_frame(spark, args.rows, args.tasks, args.input == "prepared")
        if args.exactly_once:
            run_exactly_once(spark, broker, df, args, partitions)
        else:
            run_against_confluent(spark, broker, df, args, partitions)
        print(f"load average at the end: {harness.describe_load()}")
    finally:
        spark.stop()
        broker.stop()


def run_against_confluent(spark, broker, df, args, partitions):
    keys, values = python_rows(args.rows)
    ours, theirs = [], []
    for run in range(args.repeat):
        timed, topic = bench_kafka_ds(spark, broker, df, partitions, args.codec)
        check_and_drop(broker, topic, args.rows, count_records, "kafka_ds")
        ours.append(args.rows / timed.seconds)
        line = f"run {run + 1}: kafka_ds {timed.describe(args.rows)}"
        timed, topic = bench_confluent(broker, keys, values, partitions, args.codec)
        check_and_drop(broker, topic, args.rows, count_records, "confluent-kafka")
        theirs.append(args.rows / timed.seconds)
        print(f"{line}, confluent-kafka {timed.describe(args.rows)}", flush=True)
    best_ours, best_theirs = max(ours), max(theirs)
    print(
        f"best: kafka_ds (Spark local[2], df.write) {best_ours:,.0f} rows/s | "
        f"confluent-kafka Producer {best_theirs:,.0f} rows/s | "
        f"ratio {best_ours / best_theirs:.2f}x"
    )


def run_exactly_once(spark, broker, df, args, partitions):
    alo, eos = [], []
    for run in range(args.repeat):
        timed, topic = bench_kafka_ds(spark, broker, df, partitions, args.codec)
        check_and_drop(broker, topic, args.rows, count_records, "kafka_ds at-least-once")
        alo.append(timed.seconds)
        line = f"run {run + 1}: at-least-once {timed.describe(args.rows)}"
        timed, topic = bench_kafka_ds(spark, broker, df, partitions, args.codec, exactly_once=True)
        check_and_drop(broker, topic, args.rows, count_committed, "kafka_ds exactly-once")
        eos.append(timed.seconds)
        print(f"{line}, exactly-once {timed.describe(args.rows)}", flush=True)
    print(
        f"best: at-least-once {min(alo):.2f} s | exactly-once {min(eos):.2f} s | "
        f"exactly-once / at-least-once time {min(eos) / min(alo):.2f}x"
    )


if __name__ == "__main__":
    main()
