"""Where end-to-end read time goes: per-stage nanoseconds per row, one core.

    python benchmarks/profile_read.py                     # 1M x 100 B, mock cluster
    python benchmarks/profile_read.py --records 300000 --no-spark

Fills a 32-partition topic on the librdkafka mock cluster (as ``bench_read.py``
does), then:

1. runs ``kafka_ds.read.ranges.read_range`` over every partition in this process
   (what one Spark task does, without Spark), with timers around
   ``KafkaClient.fetch`` (request, broker, receiving the response, parsing the
   Fetch framing) and around the decoder's internal stages (the wrappers of
   ``profile_decode.py``); what is left of ``read_range`` is its own glue (range
   trimming, the topic/partition columns, the output RecordBatch);
2. unless ``--no-spark``: times ``count()`` and a ``noop`` write of
   ``spark.read.format("pykafka")`` and of the ceiling source (pre-built Arrow
   batches, no I/O), local[2].  The ceiling's time, in core-nanoseconds per
   row (2 cores), is what the Python Data Source framework costs per row:
   Arrow IPC from the Python worker to the JVM, Arrow -> rows, the query.

Prints one Markdown table of ns/row per stage and the share of the total.
"""

from __future__ import annotations

import time

import bench_read as br
import harness
import profile_decode as pdm


def python_read(bootstrap: str, topic: str, records: int) -> dict:
    """Seconds per stage for read_range over all partitions, one thread."""
    from kafka_ds.client import make_client
    from kafka_ds.options import parse_read_options
    from kafka_ds.read.fetch_pipeline import FetchAhead
    from kafka_ds.read.ranges import OffsetRange, read_range

    opts = parse_read_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False
    )
    client = make_client(opts)
    per, extra = divmod(records, br.PARTITIONS)
    ranges = [OffsetRange(topic, p, 0, per + (1 if p < extra else 0)) for p in range(br.PARTITIONS)]
    fetch_time = [0.0]
    wait_time = [0.0]
    original_fetch = client.fetch
    original_get = FetchAhead.get

    def timed_get(self, *args, **kwargs):
        # What the task waits for an answer (the Fetch runs ahead in a thread).
        started = time.perf_counter()
        try:
            return original_get(self, *args, **kwargs)
        finally:
            wait_time[0] += time.perf_counter() - started

    def timed_fetch(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original_fetch(*args, **kwargs)
        finally:
            fetch_time[0] += time.perf_counter() - started

    try:
        for rng in ranges[:2]:  # warm-up: connections, code paths
            for _ in read_range(opts, rng, client):
                pass
        best = None
        for _ in range(3):
            fetch_time[0] = wait_time[0] = 0.0
            rows = 0
            client.fetch = timed_fetch
            FetchAhead.get = timed_get
            with pdm.StageTimer() as st:
                started = time.perf_counter()
                for rng in ranges:
                    for batch in read_range(opts, rng, client):
                        rows += batch.num_rows
                total = time.perf_counter() - started
            client.fetch = original_fetch
            FetchAhead.get = original_get
            assert rows == records, (rows, records)
            stages = st.stages()
            stages["fetch"] = wait_time[0]
            stages["fetch_in_thread"] = fetch_time[0]
            stages["read_range"] = total
            if best is None or total < best["read_range"]:
                best = stages
    finally:
        client.close()
    return best


def spark_times(spark, bootstrap: str, topic: str, records: int, repeat: int = 3) -> dict:
    pykafka = (
        spark.read.format("pykafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
    )
    ceiling = (
        spark.read.format("kafka_ds_ceiling")
        .option("records", records)
        .option("partitions", br.PARTITIONS)
        .option("topic", topic)
    )
    out = {}
    for label, reader in (("pykafka", pykafka), ("ceiling", ceiling)):
        out[(label, "count")] = br.best_of(repeat, lambda reader=reader: reader.load().count())
        out[(label, "noop")] = br.best_of(
            repeat,
            lambda reader=reader: reader.load().write.format("noop").mode("overwrite").save(),
        )
    return out


def breakdown(py: dict, spark: dict | None, records: int) -> str:
    ns = 1e9 / records
    decode = py["total"]
    kernel_known = (
        py["crc"] + py["headers"] + py["decompress"] + py["starts"] + py["take"] + py["fields"]
    )
    rows = [
        (
            "waiting for a Fetch answer (request, broker, recv, Fetch framing; not hidden "
            "behind the decode)",
            py["fetch"],
        ),
        ("CRC-32C + batch headers", py["crc"] + py["headers"]),
        ("decompress", py["decompress"]),
        ("find record starts", py["starts"]),
        ("field decode (varints, offsets, timestamps)", py["fields"]),
        ("Arrow assembly (key/value take, RecordBatch)", py["take"] + decode - kernel_known),
        (
            "read_range glue (trim, topic/partition columns)",
            py["read_range"] - py["fetch"] - decode,
        ),
    ]
    lines = ["| stage | ns/row (one core) | share |", "|---|---:|---:|"]
    python_total = py["read_range"]
    total = python_total
    jvm = None
    if spark:
        # The ceiling source costs the framework's share: 2 cores busy for its wall time.
        jvm = spark[("ceiling", "count")] * 2
        total = python_total + jvm
    for label, seconds in rows:
        lines.append(f"| {label} | {seconds * ns:.0f} | {seconds / total:.0%} |")
    lines.append(
        f"| *kafka_ds in Python, total* | *{python_total * ns:.0f}* | "
        f"*{python_total / total:.0%}* |"
    )
    if spark:
        lines.append(
            f"| Python worker -> JVM transfer + Spark count (ceiling source) | "
            f"{jvm * ns:.0f} | {jvm / total:.0%} |"
        )
        lines.append(
            f"| **total per row (2 cores: divide by 2 for wall time)** | "
            f"**{total * ns:.0f}** | 100% |"
        )
    lines.append("")
    lines.append(
        f"Fetch time in all (mostly in the fetch-ahead thread, overlapping the decode): "
        f"{py['fetch_in_thread'] * ns:.0f} ns/row"
    )
    lines.append(f"read_range alone, one core: {records / python_total:,.0f} rows/s")
    if spark:
        for key, seconds in sorted(spark.items()):
            lines.append(f"spark {key[0]} {key[1]} (local[2]): {records / seconds:,.0f} rows/s")
    return "\n".join(lines)


def main(argv=None):
    ap = harness.parser(__doc__)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args(argv)

    from tests.support.brokers import MockCluster

    cluster = MockCluster(3)
    spark = None
    try:
        topic = "profile_read"
        cluster.create_topic(topic, partitions=br.PARTITIONS)
        br.fill_topic(cluster.bootstrap_servers, topic, args.records)
        py = python_read(cluster.bootstrap_servers, topic, args.records)
        times = None
        if not args.no_spark:
            spark = br.start_spark()
            times = spark_times(spark, cluster.bootstrap_servers, topic, args.records)
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
    print(f"\nEnd-to-end read stages, {args.records:,} records x 100 B, 32 partitions\n")
    print(breakdown(py, times, args.records))


if __name__ == "__main__":
    main()
