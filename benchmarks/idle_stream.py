"""What an idle streaming query costs: requests/s at the brokers and CPU, no data arriving.

    python benchmarks/idle_stream.py                  # 3 topics x 4 partitions, 30 s
    python benchmarks/idle_stream.py --topics 10 --seconds 60 --pattern --idle-poll-ms 100

Starts the librdkafka mock cluster (3 brokers, tests/support/brokers.py) behind the TCP fault
proxy (tests/support/faultproxy.py, which counts requests per API key at the broker side),
fills every partition with a few records, runs
``spark.readStream.format("pykafka")`` (``subscribe`` or ``subscribePattern``, default
trigger: Spark asks the source for new data every ~10 ms when idle) into the ``noop``
sink, waits until the query has read everything, then measures for ``--seconds``
while nothing is produced:

* requests/s per API (Metadata, ListOffsets, Fetch, ...), all brokers together;
* CPU seconds per second of Spark's JVM and its Python workers (the driver-side Python
  process holding the stream reader included), not of the proxy or the mock cluster;
* micro-batches started during the window (must be 0: nothing arrived).

Prints one JSON object (and a Markdown line) with the figures.
"""

from __future__ import annotations

import json
import os
import time

import harness


def cpu_seconds(procs):
    import psutil

    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def main(argv=None):
    parser = harness.parser(__doc__)
    parser.add_argument("--topics", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--pattern", action="store_true", help="subscribePattern, not subscribe")
    parser.add_argument(
        "--idle-poll-ms",
        type=int,
        default=None,
        help="the source option idlePollIntervalMs (default: not set)",
    )
    args = parser.parse_args(argv)

    import psutil

    from tests.support.brokers import MockCluster, produce_confluent
    from tests.support.faultproxy import FaultProxy
    from tests.support.spark_support import make_spark

    cluster = MockCluster()
    proxy = None
    query = None
    try:
        stem = f"idle{os.getpid()}"
        topics = [f"{stem}-{i}" for i in range(args.topics)]
        for topic in topics:
            cluster.create_topic(topic, partitions=args.partitions)
            for p in range(args.partitions):
                produce_confluent(cluster.bootstrap_servers, topic, [b"x"] * 3, partition=p)
        proxy = FaultProxy(cluster.bootstrap_servers)
        spark = make_spark("kafka_ds-idle-bench")
        reader = (
            spark.readStream.format("pykafka")
            .option("kafka.bootstrap.servers", proxy.bootstrap_servers)
            .option("startingOffsets", "earliest")
        )
        if args.idle_poll_ms is not None:
            reader = reader.option("idlePollIntervalMs", str(args.idle_poll_ms))
        reader = (
            reader.option("subscribePattern", f"{stem}-.*")
            if args.pattern
            else reader.option("subscribe", ",".join(topics))
        )
        query = reader.load().writeStream.format("noop").start()
        query.processAllAvailable()
        time.sleep(3.0)  # let the first batches settle
        me = psutil.Process()
        mock_pids = (
            {c.pid for c in psutil.Process(cluster._proc.pid).children(recursive=True)}
            | {cluster._proc.pid}
            if hasattr(cluster, "_proc")
            else set()
        )
        # Spark's JVM and its Python workers; not this process (the proxy's relaying
        # threads run here) and not the mock cluster.
        procs = [p for p in me.children(recursive=True) if p.pid not in mock_pids]
        batches_before = query.lastProgress["batchId"] if query.lastProgress else -1
        with proxy.lock:
            before = dict(proxy.by_api)
        cpu_before = cpu_seconds(procs)
        started = time.monotonic()
        time.sleep(args.seconds)
        elapsed = time.monotonic() - started
        cpu_after = cpu_seconds(procs)
        with proxy.lock:
            after = dict(proxy.by_api)
        batches_after = query.lastProgress["batchId"] if query.lastProgress else -1
        per_api = {
            harness.API_NAMES.get(k, str(k)): round(
                (after.get(k, 0) - before.get(k, 0)) / elapsed, 2
            )
            for k in sorted(set(after) | set(before))
            if after.get(k, 0) - before.get(k, 0)
        }
        result = {
            "topics": args.topics,
            "partitions_per_topic": args.partitions,
            "subscription": "subscribePattern" if args.pattern else "subscribe",
            "idlePollIntervalMs": args.idle_poll_ms,
            "seconds": round(elapsed, 1),
            "requests_per_s": round(sum(per_api.values()), 2),
            "requests_per_s_by_api": per_api,
            "cpu_s_per_s": round((cpu_after - cpu_before) / elapsed, 3),
            "batches_while_idle": batches_after - batches_before,
        }
        print(json.dumps(result))
        print(
            f"| idle {result['subscription']} {args.topics}x{args.partitions} | "
            f"{result['requests_per_s']} req/s {per_api} | "
            f"{result['cpu_s_per_s']} CPU s/s |"
        )
        return result
    finally:
        if query is not None:
            query.stop()
        if proxy is not None:
            proxy.close()
        cluster.stop()


if __name__ == "__main__":
    main()
