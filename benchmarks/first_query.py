"""What the first query of an application costs: a cold first write and read of 10,000 rows
through ``format("pykafka")`` against a warm second one, and against Spark's own start-up
of a Python data source, measured the same way with a null source and a null sink that do
nothing but yield or take Arrow batches -- and where the time goes.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/first_query.py [--rows 10000] [--repeat 3] [--compare DIR]

Each case runs in a Spark application of its own (a fresh JVM and fresh Python workers, so
its first action is really the first), ``--repeat`` times; the figures are medians. The
broker is a local Tansu (kafka_ds.demo.broker). Run it on an otherwise idle machine: the
first query pays for starting Python workers and importing modules, which a busy machine
slows.

Itemization. Spark runs a Python data source's steps in Python processes of its own, one
pool per step (the driver's ``schema()``, ``reader()``/``partitions()``, ``writer()``,
``commit()``; the executors' ``read()``/``write()`` tasks), forked by a daemon per pool and
kept for later queries (``spark.python.worker.reuse``). The benchmark wraps each source's
methods (a subclass registered under the same name; the wrapped objects are pykafka's own)
and records, per call: the process and its age when the call began (a new process's age is
its fork, Python's and pyspark's start and the unpickling of the source -- our module
imports included), the call's own time, whether pandas was loaded, and the connections it
opened and the requests it sent (counted at the socket: nothing of kafka_ds is changed).
Then it prints, for each step of the first and second action: the wait in Spark (the JVM,
starting the pool's daemon), the new process's start, and the call. A second table gives
the import time of each kafka_ds module a step's process loads, in a fresh interpreter
that has already imported what pyspark's worker for that step imports.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import uuid

import harness
from first_query_report import checkout_env, itemize, load, report
from harness import API_NAMES

# --- tracing, in whichever process Spark calls the source ------------------------------------


def _process_started() -> float:
    """This process's start, epoch seconds (Linux /proc; 10 ms resolution)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(line.split()[1]) for line in f if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def _socket_counts() -> dict:
    """Count the sockets this process opens with socket.create_connection (kafka_ds's only
    way to connect) and the API key of every frame sent on them; installed once per process."""
    import socket

    counts = getattr(socket, "_first_query_counts", None)
    if counts is not None:
        return counts
    counts = socket._first_query_counts = {"connections": 0, "requests": {}}
    create, sendall = socket.create_connection, socket.socket.sendall
    ours = set()

    def counting_create(*args, **kwargs):
        sock = create(*args, **kwargs)
        counts["connections"] += 1
        ours.add(id(sock))
        return sock

    def counting_sendall(self, data, *args):
        if id(self) in ours and len(data) >= 6:
            key = struct.unpack_from(">h", data, 4)[0]
            name = API_NAMES.get(key, f"api{key}")
            counts["requests"][name] = counts["requests"].get(name, 0) + 1
        return sendall(self, data, *args)

    socket.create_connection = counting_create
    socket.socket.sendall = counting_sendall
    return counts


def _traced(path: str, step: str, call):
    """Run ``call()`` and append what it cost to the trace file ``path``."""
    counts = _socket_counts()
    before = (counts["connections"], dict(counts["requests"]))
    reused = getattr(sys, "_first_query_calls", 0) > 0
    sys._first_query_calls = getattr(sys, "_first_query_calls", 0) + 1
    started = time.time()
    try:
        return call()
    finally:
        ended = time.time()
        requests = {
            k: v - before[1].get(k, 0)
            for k, v in counts["requests"].items()
            if v - before[1].get(k, 0)
        }
        record = {
            "step": step,
            "pid": os.getpid(),
            "born": _process_started(),
            "start": started,
            "end": ended,
            "reused": reused,
            "pandas": "pandas" in sys.modules,
            "connections": counts["connections"] - before[0],
            "requests": requests,
        }
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def traced_source(base, trace_path: str):
    """``base`` (a DataSource class) with every method Spark calls traced into
    ``trace_path``; its readers and writers are the base's own, wrapped."""
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceReader

    class TracedReader(DataSourceReader):
        def __init__(self, inner):
            self.inner = inner

        def partitions(self):
            return _traced(trace_path, "partitions()", self.inner.partitions)

        def read(self, partition):
            batches = []

            def read_all():
                # The task's whole read, its batches kept (10k rows: small)
                batches.extend(self.inner.read(partition))

            _traced(trace_path, "read()", read_all)
            yield from batches

    class TracedWriter(DataSourceArrowWriter):
        def __init__(self, inner):
            self.inner = inner

        def write(self, iterator):
            return _traced(trace_path, "write()", lambda: self.inner.write(iterator))

        def commit(self, messages):
            return _traced(trace_path, "commit()", lambda: self.inner.commit(messages))

        def abort(self, messages):
            return self.inner.abort(messages)

    class Traced(base):
        def schema(self):
            return _traced(trace_path, "schema()", super().schema)

        def reader(self, schema):
            return TracedReader(
                _traced(trace_path, "reader()", lambda: super(Traced, self).reader(schema))
            )

        def writer(self, schema, overwrite):
            return TracedWriter(
                _traced(
                    trace_path, "writer()", lambda: super(Traced, self).writer(schema, overwrite)
                )
            )

    return Traced


def null_source():
    """A Python data source that yields ``rows`` rows of Kafka's shape from one task, and a
    sink that takes Arrow batches and drops them: Spark's own cost of a Python data source.
    Its batch is built from numpy buffers: ``pa.array`` of a Python list would import pandas
    (pyarrow looks for pandas types), a cost of the null source's, not of Spark's."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        WriterCommitMessage,
    )

    class NullReader(DataSourceReader):
        def __init__(self, rows):
            self.rows = rows

        def read(self, partition):
            import numpy as np
            import pyarrow as pa

            offsets = np.arange(0, 100 * self.rows + 1, 100, dtype=np.int32)
            values = pa.Array.from_buffers(
                pa.binary(),
                self.rows,
                [None, pa.py_buffer(offsets), pa.py_buffer(b"x" * (100 * self.rows))],
            )
            yield pa.RecordBatch.from_arrays([values], names=["value"])

    class NullWriter(DataSourceArrowWriter):
        def write(self, iterator):
            for _batch in iterator:
                pass
            return WriterCommitMessage()

    class NullSource(DataSource):
        @classmethod
        def name(cls):
            return "nullsource"

        def schema(self):
            return "value binary"

        def reader(self, schema):
            return NullReader(int(self.options.get("rows", "10000")))

        def writer(self, schema, overwrite):
            return NullWriter()

    return NullSource


def timed(action) -> tuple[float, float]:
    started = time.time()
    action()
    return started, time.time()


CASES = ("null sink, write", "pykafka, write", "null source, read", "pykafka, read")


def run_case(case: str, rows: int, bootstrap: str, topic: str, trace_path: str) -> dict:
    """The first and second action of ``case`` in this process's own Spark application:
    {"first": (start, end), "second": (start, end)} (case "prepare": write the rows the
    read case reads, in an application of its own)."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kafka_ds first query")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    if case.startswith("pykafka"):
        from kafka_ds.source import KafkaDataSource

        spark.dataSource.register(traced_source(KafkaDataSource, trace_path))
    else:
        spark.dataSource.register(traced_source(null_source(), trace_path))
    data = (
        spark.range(rows)
        .selectExpr("CAST(id AS STRING) AS key", "repeat('x', 100) AS value")
        .cache()
    )
    data.count()  # the input is ready before any clock starts

    def pykafka_write():
        data.write.format("pykafka").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", topic
        ).mode("append").save()

    def pykafka_read():
        spark.read.format("pykafka").option("kafka.bootstrap.servers", bootstrap).option(
            "subscribe", topic
        ).load().selectExpr("length(value)").collect()

    def null_write():
        data.select("value").write.format("nullsource").mode("append").save()

    def null_read():
        spark.read.format("nullsource").option("rows", str(rows)).load().selectExpr(
            "length(value)"
        ).collect()

    action = {
        "prepare": pykafka_write,
        "null sink, write": null_write,
        "pykafka, write": pykafka_write,
        "null source, read": null_read,
        "pykafka, read": pykafka_read,
    }[case]
    try:
        first = timed(action)
        return {"first": first, "second": timed(action) if case != "prepare" else first}
    finally:
        spark.stop()


def main(argv=None) -> int:
    parser = harness.parser(__doc__, paragraph=True)
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument(
        "--repeat", type=int, default=3, help="Spark applications per case (medians)"
    )
    parser.add_argument("--bootstrap", help="a broker to use instead of a local Tansu")
    parser.add_argument(
        "--compare",
        metavar="DIR",
        help="another checkout of kafka_ds (e.g. git worktree add /tmp/old "
        "<commit>): its pykafka cases run too, interleaved with this "
        "checkout's, as 'pykafka (compared)'",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="append every application's itemization to PATH as it ends "
        "(a run cut short keeps what it measured)",
    )
    parser.add_argument(
        "--from-json",
        metavar="PATH",
        help="print the tables of the applications saved in PATH; run nothing",
    )
    parser.add_argument("--case", choices=("prepare",) + CASES, help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--trace", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.case:
        result = run_case(args.case, args.rows, args.bootstrap, args.topic, args.trace)
        print("RESULT", json.dumps(result), flush=True)
        return 0

    if args.from_json:
        saved = [json.loads(line) for line in open(args.from_json)]
        figures = {}
        for app in saved:
            by = figures.setdefault(app["case"], {"first": [], "second": []})
            by["first"].append(app["first"])
            by["second"].append(app["second"])
        complete = min(len(by["first"]) for by in figures.values())
        print(f"{args.from_json}: {len(saved)} applications, {load()} now")
        report(figures, complete, saved[0]["checkouts"], args.rows)
        return 0

    from kafka_ds.demo.broker import LocalBroker

    # Spark's Python workers start in the driver's working directory (``python -m``), so
    # a checkout's kafka_ds is imported by running its cases there, with it on PYTHONPATH.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    checkouts = {"": here}
    if args.compare:
        checkouts[" (compared)"] = os.path.abspath(args.compare)
    cases = []
    for case in CASES:
        kind = case.split(", ")[1]
        if case.startswith("pykafka"):
            cases.extend(
                (f"pykafka{label}, {kind}", case, path) for label, path in checkouts.items()
            )
        else:
            cases.append((case, case, here))

    print(f"start: {load()}", flush=True)
    broker = None if args.bootstrap else LocalBroker()
    bootstrap = args.bootstrap or broker.start()
    figures: dict = {name: {"first": [], "second": []} for name, _, _ in cases}
    try:
        read_topic = f"first-query-{uuid.uuid4().hex[:8]}"
        order = [("prepare", "prepare", here)] + [c for _ in range(args.repeat) for c in cases]
        for name, case, path in order:
            topic = (
                read_topic
                if case in ("prepare", "pykafka, read")
                else f"first-query-{uuid.uuid4().hex[:8]}"
            )
            env = checkout_env(path)
            with tempfile.NamedTemporaryFile(suffix=".jsonl") as trace_file:
                out = subprocess.run(
                    [
                        sys.executable,
                        os.path.abspath(__file__),
                        "--case",
                        case,
                        "--rows",
                        str(args.rows),
                        "--bootstrap",
                        bootstrap,
                        "--topic",
                        topic,
                        "--trace",
                        trace_file.name,
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=path,
                )
                if out.returncode:
                    sys.stderr.write(out.stdout + out.stderr)
                    raise SystemExit(f"case {name!r} failed")
                trace = [json.loads(line) for line in open(trace_file.name)]
            line = next(line for line in out.stdout.splitlines() if line.startswith("RESULT"))
            result = json.loads(line.split(" ", 1)[1])
            if case != "prepare":
                for which in ("first", "second"):
                    figures[name][which].append(itemize(result[which], trace))
                if args.json:
                    with open(args.json, "a") as f:
                        f.write(
                            json.dumps(
                                {
                                    "case": name,
                                    "checkouts": checkouts,
                                    "load": harness.load_average(),
                                    "first": figures[name]["first"][-1],
                                    "second": figures[name]["second"][-1],
                                }
                            )
                            + "\n"
                        )
                print(
                    f"  {name}: first {figures[name]['first'][-1]['total']:.2f} s, second "
                    f"{figures[name]['second'][-1]['total']:.2f} s ({load()})",
                    flush=True,
                )
    finally:
        if broker is not None:
            broker.stop()
    print(f"end of the Spark runs: {load()}")
    report(figures, args.repeat, checkouts, args.rows)
    print(f"end: {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
