"""Driver-side planning of a wide read: time, requests and memory.

    python benchmarks/wide_plan.py                         # 50 topics x 40 partitions
    python benchmarks/wide_plan.py --topics 10 --partitions 20 --repeat 5
    python benchmarks/wide_plan.py --topics 1 --partitions 2000 --peer-partitions 8

Creates ``--topics`` topics of ``--partitions`` partitions on the librdkafka mock
cluster (3 brokers), one record in every partition, and plans
``subscribePattern=<stem>-.*`` (earliest to latest) the way the driver does for
``spark.read`` (``KafkaBatchReader.partitions()``: Metadata, ListOffsets earliest and
latest, offset ranges, Spark input partitions) and the way a streaming trigger does
(``KafkaStreamReader``: ``initialOffset`` once, then a trigger, ``latestOffset`` +
``partitions``, timed on its own as ``trigger``), in this process, no Spark.
``--peer-partitions N`` measures the same on one topic of N partitions in the same
cluster and run, the repeats of the two interleaved so the machine's load hits both alike,
and prints the ratios. Requests are counted
per API at the broker side by the TCP fault proxy (tests/support/faultproxy.py). Memory:
``tracemalloc`` peak of one more planning (not timed), and the process's peak RSS.

Prints one JSON object and a Markdown line.
"""

from __future__ import annotations

import json
import os
import resource
import time
import tracemalloc

import harness

API_NAMES = {1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions"}


def main(argv=None):
    parser = harness.parser(__doc__)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--peer-partitions",
        type=int,
        default=0,
        help="also plan one topic of this many partitions (e.g. 8)",
    )
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
        layouts = {"wide": ([f"{stem}-{i:03d}" for i in range(args.topics)], args.partitions)}
        if args.peer_partitions:
            layouts["peer"] = ([f"peer{os.getpid()}-000"], args.peer_partitions)
        for topics, partitions in layouts.values():
            for topic in topics:
                cluster.create_topic(topic, partitions=partitions)
        # One record per partition, one Produce per leader (confluent would take minutes).
        client = KafkaClient(cluster.bootstrap_servers)
        try:
            tps = [
                (t, p)
                for topics, partitions in layouts.values()
                for t in topics
                for p in range(partitions)
            ]
            batch = encode_record_batch(keys=None, values=[b"x"])
            for leader, group in client.group_by_leader(tps).items():
                by_topic = {}
                for t, p in group:
                    by_topic.setdefault(t, []).append({"index": p, "records": batch})
                response = client.connection(leader).request(
                    m.PRODUCE,
                    {
                        "transactional_id": None,
                        "acks": 1,
                        "timeout_ms": 10000,
                        "topic_data": [
                            {"name": t, "partition_data": ps} for t, ps in by_topic.items()
                        ],
                    },
                )
                assert all(
                    pr["error_code"] == 0
                    for tr in response["responses"]
                    for pr in tr["partition_responses"]
                )
        finally:
            client.close()
        proxy = FaultProxy(cluster.bootstrap_servers)

        def subscription(name):
            topics, _partitions = layouts[name]
            if len(topics) == 1:
                return {"subscribe": topics[0]}
            return {"subscribePattern": f"{stem}-.*"}

        def measure(name, mode, trace=False):
            options = {"kafka.bootstrap.servers": proxy.bootstrap_servers, **subscription(name)}
            with proxy.lock:
                before = dict(proxy.by_api)
            if trace:
                tracemalloc.start()
            started = time.perf_counter()
            trigger = None
            if mode == "batch":
                planned = KafkaBatchReader(
                    parse_read_options(options, streaming=False)
                ).partitions()
                count = len(planned)
            else:
                stream = KafkaStreamReader(
                    parse_read_options({**options, "startingOffsets": "earliest"}, streaming=True),
                    options,
                )
                start = stream.initialOffset()
                # A trigger: latestOffset then partitions(), on the same reader (what the
                # driver runs for every micro-batch of a running query).
                began = time.perf_counter()
                end = stream.latestOffset(start, None)
                count = len(stream.partitions(start, end))
                trigger = time.perf_counter() - began
                stream.stop()
            elapsed = time.perf_counter() - started
            peak = 0
            if trace:
                _current, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
            with proxy.lock:
                after = dict(proxy.by_api)
            requests = {
                API_NAMES.get(k, str(k)): after.get(k, 0) - before.get(k, 0)
                for k in sorted(after)
                if after.get(k, 0) - before.get(k, 0)
            }
            run = {
                "seconds": round(elapsed, 4),
                "python_peak_mib": round(peak / 2**20, 2),
                "input_partitions": count,
                "requests": requests,
            }
            if trigger is not None:
                run["trigger_seconds"] = round(trigger, 4)
            return run

        results = {name: {} for name in layouts}
        for _ in range(args.repeat):
            for mode in ("batch", "stream_trigger"):
                for name in layouts:  # interleaved: the same load for both layouts
                    run = measure(name, mode)
                    best = results[name].get(mode)
                    if best is None or run["seconds"] < best["seconds"]:
                        results[name][mode] = run
                    key = "trigger_seconds"
                    if key in run:
                        results[name][mode]["best_" + key] = min(
                            run[key], results[name][mode].get("best_" + key, run[key])
                        )
        for name in layouts:  # memory from one more run each (tracemalloc slows the clock)
            for mode in ("batch", "stream_trigger"):
                results[name][mode]["python_peak_mib"] = measure(name, mode, True)[
                    "python_peak_mib"
                ]
        wide = results["wide"]
        result = {
            "topics": args.topics,
            "partitions_per_topic": args.partitions,
            "partitions": args.topics * args.partitions,
            **wide,
            "process_max_rss_mib": round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
            ),
            "load_average": [round(x, 2) for x in harness.load_average()],
        }
        assert wide["batch"]["input_partitions"] == args.topics * args.partitions
        if args.peer_partitions:
            peer = results["peer"]
            result["peer"] = {"partitions": args.peer_partitions, **peer}
            result["ratio_to_peer"] = {
                "batch": round(wide["batch"]["seconds"] / peer["batch"]["seconds"], 1),
                "stream_trigger": round(
                    wide["stream_trigger"]["best_trigger_seconds"]
                    / peer["stream_trigger"]["best_trigger_seconds"],
                    1,
                ),
            }
        print(json.dumps(result))
        print(
            f"| plan {args.topics}x{args.partitions} | batch {wide['batch']['seconds']} s, "
            f"{wide['batch']['python_peak_mib']} MiB, {wide['batch']['requests']} | "
            f"stream start + trigger {wide['stream_trigger']['seconds']} s "
            f"(trigger {wide['stream_trigger']['best_trigger_seconds']} s), "
            f"{wide['stream_trigger']['requests']} |"
        )
        if args.peer_partitions:
            peer = results["peer"]
            print(
                f"| plan 1x{args.peer_partitions} | batch {peer['batch']['seconds']} s | "
                f"trigger {peer['stream_trigger']['best_trigger_seconds']} s | ratios "
                f"{result['ratio_to_peer']} |"
            )
        return result
    finally:
        if proxy is not None:
            proxy.close()
        cluster.stop()


if __name__ == "__main__":
    main()
