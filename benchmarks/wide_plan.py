"""Driver-side planning of a wide read: time, requests and memory.

    python benchmarks/wide_plan.py                         # 50 topics x 40 partitions
    python benchmarks/wide_plan.py --topics 10 --partitions 20 --repeat 5

Creates ``--topics`` topics of ``--partitions`` partitions on the librdkafka mock
cluster (3 brokers), one record in every partition, and plans
``subscribePattern=<stem>-.*`` (earliest to latest) the way the driver does for
``spark.read`` (``KafkaBatchReader.partitions()``: Metadata, ListOffsets earliest and
latest, offset ranges, Spark input partitions) and the way a streaming trigger does
(``KafkaStreamReader.latestOffset``), in this process, no Spark. Requests are counted
per API at the broker side by the TCP fault proxy (tests/support/faultproxy.py). Memory:
``tracemalloc`` peak of one planning, and the process's peak RSS.

Prints one JSON object and a Markdown line.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import time
import tracemalloc

API_NAMES = {1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    from kafka_ds.client import KafkaClient
    from kafka_ds.options import parse_read_options
    from kafka_ds.protocol import messages as m
    from kafka_ds.protocol.records_encode import encode_record_batch
    from kafka_ds.reader import KafkaBatchReader
    from kafka_ds.stream import KafkaStreamReader
    from tests.support.brokers import MockCluster
    from tests.support.faultproxy import FaultProxy

    cluster = MockCluster()
    proxy = None
    try:
        stem = f"wide{os.getpid()}"
        topics = [f"{stem}-{i:03d}" for i in range(args.topics)]
        for topic in topics:
            cluster.create_topic(topic, partitions=args.partitions)
        # One record per partition, one Produce per leader (confluent would take minutes).
        client = KafkaClient(cluster.bootstrap_servers)
        try:
            tps = [(t, p) for t in topics for p in range(args.partitions)]
            batch = encode_record_batch(keys=None, values=[b"x"])
            for leader, group in client.group_by_leader(tps).items():
                by_topic = {}
                for t, p in group:
                    by_topic.setdefault(t, []).append({"index": p, "records": batch})
                response = client.connection(leader).request(m.PRODUCE, {
                    "transactional_id": None, "acks": 1, "timeout_ms": 10000,
                    "topic_data": [{"name": t, "partition_data": ps} for t, ps in by_topic.items()]})
                assert all(pr["error_code"] == 0 for tr in response["responses"]
                           for pr in tr["partition_responses"])
        finally:
            client.close()
        proxy = FaultProxy(cluster.bootstrap_servers)
        options = {"kafka.bootstrap.servers": proxy.bootstrap_servers,
                   "subscribePattern": f"{stem}-.*"}
        batch_opts = parse_read_options(options, streaming=False)
        results = {}
        for mode in ("batch", "stream_trigger"):
            best = None
            for _ in range(args.repeat):
                with proxy.lock:
                    before = dict(proxy.by_api)
                tracemalloc.start()
                started = time.perf_counter()
                if mode == "batch":
                    planned = KafkaBatchReader(batch_opts).partitions()
                    count = len(planned)
                else:
                    stream = KafkaStreamReader(parse_read_options(
                        {**options, "startingOffsets": "earliest"}, streaming=True), options)
                    start = stream.initialOffset()
                    # A trigger: latestOffset then partitions(), on the same reader.
                    end = stream.latestOffset(start, None)
                    count = len(stream.partitions(start, end))
                    stream.stop()
                elapsed = time.perf_counter() - started
                _current, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                with proxy.lock:
                    after = dict(proxy.by_api)
                requests = {API_NAMES.get(k, str(k)): after.get(k, 0) - before.get(k, 0)
                            for k in sorted(after) if after.get(k, 0) - before.get(k, 0)}
                run = {"seconds": round(elapsed, 3), "python_peak_mib": round(peak / 2**20, 2),
                       "input_partitions": count, "requests": requests}
                if best is None or run["seconds"] < best["seconds"]:
                    best = run
            results[mode] = best
        result = {"topics": args.topics, "partitions_per_topic": args.partitions,
                  "partitions": args.topics * args.partitions, **results,
                  "process_max_rss_mib": round(
                      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
        assert results["batch"]["input_partitions"] == args.topics * args.partitions
        print(json.dumps(result))
        print(f"| plan {args.topics}x{args.partitions} | batch {results['batch']['seconds']} s, "
              f"{results['batch']['python_peak_mib']} MiB, {results['batch']['requests']} | "
              f"stream trigger {results['stream_trigger']['seconds']} s, "
              f"{results['stream_trigger']['requests']} |")
        return result
    finally:
        if proxy is not None:
            proxy.close()
        cluster.stop()


if __name__ == "__main__":
    main()
