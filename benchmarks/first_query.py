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
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid

import harness

# --- tracing, in whichever process Spark calls the source ------------------------------------

_API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    18: "ApiVersions",
    19: "CreateTopics",
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    26: "EndTxn",
}


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
            name = _API_NAMES.get(key, f"api{key}")
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


# --- the itemization ----------------------------------------------------------------------

READ_STEPS = ("schema()", "reader()", "partitions()", "read()")
WRITE_STEPS = ("writer()", "write()", "commit()")


def itemize(action: tuple[float, float], trace: list[dict]) -> dict:
    """{step: {"wait", "start", "call", "pandas", "connections", "requests"}} and "total",
    "spark": one action's steps from the trace records that fall in its window. Several
    tasks of a step: from the first's start to the last's end, the oldest new process."""
    start, end = action
    inside = [r for r in trace if start <= r["start"] <= end]
    steps, previous = {}, start
    order = sorted(
        {r["step"] for r in inside}, key=lambda s: min(r["start"] for r in inside if r["step"] == s)
    )
    for step in order:
        records = [r for r in inside if r["step"] == step]
        first = min(r["start"] for r in records)
        last = max(r["end"] for r in records)
        # a process born during the wait started for this step
        fresh = [
            first - max(r["born"], previous)
            for r in records
            if not r["reused"] and r["born"] > previous - 0.02
        ]
        process = max(fresh) if fresh else 0.0
        requests: dict = {}
        for r in records:
            for k, v in r["requests"].items():
                requests[k] = requests.get(k, 0) + v
        steps[step] = {
            "wait": max(0.0, first - previous - process),
            "start": process,
            "call": last - first,
            "pandas": any(r["pandas"] for r in records),
            "connections": sum(r["connections"] for r in records),
            "requests": requests,
            "processes": len({r["pid"] for r in records}),
            "new": sum(not r["reused"] for r in records),
        }
        previous = max(previous, last)
    return {"steps": steps, "total": end - start, "after": end - previous}


def median_items(runs: list[dict]) -> dict:
    """The median of each figure over the runs (steps present in every run)."""
    names = [s for s in runs[0]["steps"] if all(s in r["steps"] for r in runs)]
    steps = {}
    for name in names:
        cells = [r["steps"][name] for r in runs]
        steps[name] = {
            k: statistics.median(c[k] for c in cells)
            for k in ("wait", "start", "call", "connections", "new")
        }
        steps[name]["pandas"] = any(c["pandas"] for c in cells)
        steps[name]["requests"] = cells[-1]["requests"]
    return {
        "steps": steps,
        "total": statistics.median(r["total"] for r in runs),
        "after": statistics.median(r["after"] for r in runs),
    }


# Per step: what pyspark's worker of that step imports itself, then the kafka_ds modules the
# step loads (the source's class is unpickled by reference: its module is imported).
_TASK_BASE = "pyspark.worker, pyarrow, pyspark.sql.pandas.serializers"
IMPORT_STEPS = (
    ("schema() (read)", "pyspark.sql.worker.create_data_source", ("kafka_ds.source",)),
    (
        "reader(), partitions()",
        "pyspark.sql.worker.plan_data_source_read",
        ("kafka_ds.source", "kafka_ds.reader"),
    ),
    (
        "read() task",
        _TASK_BASE,
        (
            "kafka_ds.reader",
            "kafka_ds.read.fetch_pipeline",
            "kafka_ds.protocol.records",
            "kafka_ds.read.record_timestamps",
        ),
    ),
    (
        "writer()",
        "pyspark.sql.worker.write_into_data_source",
        ("kafka_ds.source", "kafka_ds.writer", "kafka_ds.write.topics"),
    ),
    ("write() task", _TASK_BASE, ("kafka_ds.writer", "kafka_ds.write.task")),
    ("commit()", "pyspark.sql.worker.commit_data_source_write", ("kafka_ds.writer",)),
    (
        "streamReader() (driver)",
        "pyspark.sql.worker.create_data_source",
        ("kafka_ds.source", "kafka_ds.stream"),
    ),
)

_IMPORT_PROBE = """
import sys, time
import {base}
t = time.perf_counter()
{imports}
print(time.perf_counter() - t, 'pandas' in sys.modules, 'pyarrow' in sys.modules)
"""


def import_costs(repeat: int, env=None, cwd=None) -> list[tuple[str, float, bool, bool]]:
    """(step, median seconds of importing kafka_ds's modules after pyspark's, pandas loaded,
    pyarrow loaded) in fresh interpreters."""
    out = []
    for step, base, modules in IMPORT_STEPS:
        code = _IMPORT_PROBE.format(base=base, imports="\n".join(f"import {m}" for m in modules))
        runs = []
        for _ in range(repeat):
            line = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                check=True,
                env=env,
                cwd=cwd,
            ).stdout.split()
            runs.append((float(line[0]), line[1] == "True", line[2] == "True"))
        out.append((step, statistics.median(r[0] for r in runs), runs[0][1], runs[0][2]))
    return out


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in harness.load_average())


def describe_requests(requests: dict) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(requests.items())) or "-"


def print_itemization(kind: str, figures: dict, compared: bool) -> None:
    steps = READ_STEPS if kind == "read" else WRITE_STEPS
    null = "null source, read" if kind == "read" else "null sink, write"
    ours = f"pykafka, {kind}"
    columns = [(null, "first"), (ours, "first"), (ours, "second")]
    if compared:
        columns.append((f"pykafka (compared), {kind}", "first"))
    print(
        f"\n{kind}: each step's wait in Spark (JVM, a pool's daemon starting), its new "
        "Python process's start\n(fork, Python, pyspark, unpickling the source: our "
        "imports) and the call itself; seconds, medians:"
    )
    names = {null: "null", ours: "pykafka", f"pykafka (compared), {kind}": "compared"}
    print(f"{'':24}" + "".join(f"{names[c] + ' ' + w:>16}" for c, w in columns))
    for step in steps:
        for part in ("wait", "start", "call"):
            cells = []
            for case, which in columns:
                item = figures[case][which]["steps"].get(step)
                cells.append(f"{item[part]:16.2f}" if item else f"{'-':>16}")
            print(f"{step + ' ' + part:24}" + "".join(cells))
    for name, key in (("after the last call", "after"), ("total", "total")):
        print(f"{name:24}" + "".join(f"{figures[c][w][key]:16.2f}" for c, w in columns))
    for case in [ours] + ([f"pykafka (compared), {kind}"] if compared else []):
        print(f"{case}, first action: connections, requests and pandas per step:")
        for step in steps:
            item = figures[case]["first"]["steps"].get(step)
            if item:
                print(
                    f"  {step:14} {int(item['new'])} new process(es), "
                    f"{int(item['connections'])} connection(s), "
                    f"requests: {describe_requests(item['requests'])}; pandas loaded: "
                    f"{'yes' if item['pandas'] else 'no'}"
                )


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
            env = dict(os.environ, PYTHONPATH=path + os.pathsep + os.environ.get("PYTHONPATH", ""))
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


def report(figures: dict, repeat: int, checkouts: dict, rows: int) -> None:
    """Print the medians, the itemization and the import table."""
    medians = {
        name: {which: median_items(runs) for which, runs in by.items()}
        for name, by in figures.items()
    }
    if " (compared)" in checkouts:
        print(f"compared: kafka_ds of {checkouts[' (compared)']}")
    print(
        f"\n{rows} rows of 100 B, each case in {repeat} Spark applications of "
        "its own (local[2]), median seconds:"
    )
    print(f"{'':30} {'first':>7} {'second':>7} {'first - second':>15}")
    for name, by in medians.items():
        first, second = by["first"]["total"], by["second"]["total"]
        print(f"{name:30} {first:7.2f} {second:7.2f} {first - second:15.2f}")
    for kind, null in (("write", "null sink, write"), ("read", "null source, read")):
        nulls = medians[null]["first"]
        for label in checkouts:
            ours = medians[f"pykafka{label}, {kind}"]["first"]
            print(
                f"first {kind}: pykafka{label} {ours['total']:.2f} s, "
                f"{ours['total'] - nulls['total']:+.2f} s against Spark's own Python data "
                f"source start-up ({nulls['total']:.2f} s)"
            )
    for kind in ("read", "write"):
        print_itemization(kind, medians, " (compared)" in checkouts)
    for label, path in checkouts.items():
        env = dict(os.environ, PYTHONPATH=path + os.pathsep + os.environ.get("PYTHONPATH", ""))
        print(
            f"\nImports per step's process{label}, fresh interpreter, after what pyspark's "
            "worker for the step imports itself (median of 5):"
        )
        for step, seconds, pandas, pyarrow in import_costs(5, env, path):
            print(
                f"  {step:26} {seconds:6.3f} s   pyarrow {'yes' if pyarrow else 'no ':3}  "
                f"pandas {'yes' if pandas else 'no'}"
            )


if __name__ == "__main__":
    raise SystemExit(main())
