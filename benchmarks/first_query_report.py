"""first_query.py's figures: each action's steps itemized from the trace records (the wait in
Spark, a new Python process's start, the call), the medians over the applications of a case,
the import cost of kafka_ds's modules in each step's process, and the printed report."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

import harness

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
    return "load average " + harness.describe_load()


def checkout_env(path: str) -> dict:
    """This environment with the checkout at ``path`` first on PYTHONPATH (its kafka_ds)."""
    return dict(os.environ, PYTHONPATH=path + os.pathsep + os.environ.get("PYTHONPATH", ""))


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
        env = checkout_env(path)
        print(
            f"\nImports per step's process{label}, fresh interpreter, after what pyspark's "
            "worker for the step imports itself (median of 5):"
        )
        for step, seconds, pandas, pyarrow in import_costs(5, env, path):
            print(
                f"  {step:26} {seconds:6.3f} s   pyarrow {'yes' if pyarrow else 'no ':3}  "
                f"pandas {'yes' if pandas else 'no'}"
            )
