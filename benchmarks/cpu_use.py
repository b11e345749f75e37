"""CPU seconds per process during a timed benchmark step: the broker (Tansu), the Spark JVM
and its Python workers, or this process. Every process shares the machine's cores, so a
step's wall time is bounded below by the CPU it needs divided by the cores."""

from __future__ import annotations

import time

from harness import processes as _processes


def _descendants(root, procs) -> set:
    found, grew = {root}, True
    while grew:
        grew = False
        for pid, process in procs.items():
            if process.ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def broker_pids(broker) -> set[int]:
    """The broker's processes: Tansu's, or the JVM of each Apache Kafka node (the mock
    cluster runs in a process of its own that is not counted)."""
    pid = getattr(broker, "tansu_pid", None)
    if pid:
        return {pid}
    return {node.java_pid for node in getattr(broker, "nodes", []) if node.java_pid}


class Timed:
    """Wall seconds of one step (a write, a read) and the CPU seconds it cost: the broker
    (Tansu or Apache Kafka), the Spark JVM and its Python workers (``spark`` given), or this
    process (confluent-kafka: the Python loop and librdkafka's threads)."""

    def __init__(self, broker, spark=None):
        self.broker_pids = broker_pids(broker)
        self.jvm = spark.sparkContext._gateway.proc.pid if spark is not None else None

    def __enter__(self):
        self.before = _processes()
        self.own = time.process_time()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.started
        own = time.process_time() - self.own
        after = _processes()

        def used(pids):
            return sum(
                after[p].cpu_seconds - (self.before[p].cpu_seconds if p in self.before else 0.0)
                for p in pids
                if p in after
            )

        self.cpu = {}
        if self.broker_pids:
            self.cpu["broker"] = used(self.broker_pids)
        if self.jvm is not None:
            tree = _descendants(self.jvm, after)
            self.cpu["Spark JVM"] = used({self.jvm})
            self.cpu["Python workers"] = used(
                {p for p in tree if p != self.jvm and after[p].name.startswith("python")}
            )
        else:
            self.cpu["producer process"] = own

    def per_row_ns(self, rows) -> dict:
        """{process: CPU nanoseconds per row}."""
        return {what: seconds / rows * 1e9 for what, seconds in self.cpu.items()}

    def describe(self, rows) -> str:
        cpu = ", ".join(f"{what} {seconds:.2f}" for what, seconds in self.cpu.items())
        return f"{rows / self.seconds:,.0f} rows/s ({self.seconds:.2f} s; CPU s: {cpu})"
