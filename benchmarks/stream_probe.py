"""One streaming query measured from outside: an independent producer and consumer around it.

:class:`LatencyRun` creates an input and an output topic, starts
``readStream.format(source) -> writeStream.format(sink)`` between them (``start_query``) and
runs phases (``run_phase``): a **producer** (confluent-kafka ``Producer``, acks=all,
idempotent, ``linger.ms=1``, in its own process so that the measuring consumer never holds
it up) writes values stamped with (phase, sequence number, ``time.time_ns()`` right before
``produce()``) at a fixed rate; a **consumer** (confluent-kafka ``Consumer``,
``fetch.wait.max.ms=10``, a thread of this process) reads the output topic and takes, per
record, the time it got it minus the stamp: the produce-to-visible latency. A phase's
figures: latency percentiles, records missing or duplicated, the lag over time, Spark's
trigger durations (``query.recentProgress``) and the CPU of the broker, Spark, the producer
and the consumer. stream_latency.py runs it for pykafka -> pykafka; bench_jvm.py for each
connector, with :class:`NudgedLatencyRun` where Spark's connector reads from Tansu.
"""

from __future__ import annotations

import array
import datetime
import multiprocessing as mp
import os
import shutil
import statistics
import struct
import tempfile
import threading
import time

import harness  # noqa: F401 -- puts the project root on sys.path (tests.support)

# phase (u16), sequence number (u64), produce time in ns since the epoch (i64)
STAMP = struct.Struct(">HQq")
WARMUP_PHASE = 0
TRIGGER_STAGES = (
    "latestOffset",
    "walCommit",
    "queryPlanning",
    "getBatch",
    "addBatch",
    "commitOffsets",
    "triggerExecution",
)


# --- the producer (own process) ------------------------------------------------------------


def producer_main(bootstrap, topic, value_size, commands, results, produced):
    """Runs ``(phase, rate, seconds)`` commands from ``commands``; ``produced`` (a shared
    counter) is the total number of ``produce()`` calls so far, updated every
    millisecond; each finished phase puts ``(phase, records, seconds)`` on ``results``."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_097_151,
            "log_level": 3,
        }
    )
    pad = b"x" * (value_size - STAMP.size)
    pack = STAMP.pack
    produce = producer.produce
    clock = time.time_ns
    total = 0
    while True:
        command = commands.get()
        if command is None:
            break
        phase, rate, seconds = command
        sent = 0
        began = time.monotonic()
        stop = began + seconds
        while True:
            now = time.monotonic()
            if now >= stop:
                break
            # Records due by now at the rate: a late loop catches up at once.
            due = min(int((now - began) * rate) + 1, int(rate * seconds))
            while sent < due:
                try:
                    produce(topic, pack(phase, sent, clock()) + pad)
                except BufferError:
                    producer.poll(0.001)
                    continue
                sent += 1
            producer.poll(0)
            produced.value = total + sent
            time.sleep(0.001)
        elapsed = time.monotonic() - began
        total += sent
        produced.value = total
        left = producer.flush(120)
        results.put((phase, sent, elapsed, left))
    producer.flush(30)


# --- the consumer (thread of this process) -------------------------------------------------


class LatencyConsumer(threading.Thread):
    """Reads the output topic; latency per record by phase, and which records arrived."""

    def __init__(self, bootstrap, topic, partitions):
        super().__init__(daemon=True, name="latency-consumer")
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"stream-latency-{os.getpid()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "fetch.min.bytes": 1,
                "log_level": 3,
            }
        )
        self.consumer.assign(
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        )
        self.lock = threading.Lock()
        self.latencies: dict[int, array.array] = {}  # phase -> ns
        self.seen: dict[int, bytearray] = {}  # phase -> times each sequence arrived
        self.visible = 0
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def run(self):
        unpack = STAMP.unpack_from
        clock = time.time_ns
        while not self.stopping.is_set():
            messages = self.consumer.consume(num_messages=10_000, timeout=0.05)
            if not messages:
                continue
            now = clock()
            with self.lock:
                for message in messages:
                    if message.error() is not None:
                        self.errors.append(str(message.error()))
                        continue
                    phase, seq, stamped = unpack(message.value())
                    lat = self.latencies.get(phase)
                    if lat is None:
                        lat = self.latencies[phase] = array.array("q")
                        self.seen[phase] = bytearray()
                    lat.append(now - stamped)
                    seen = self.seen[phase]
                    if seq >= len(seen):
                        seen.extend(bytes(max(seq + 1 - len(seen), 1 << 16)))
                    seen[seq] = min(seen[seq] + 1, 255)
                self.visible += len(messages)
        self.consumer.close()

    def phase_check(self, phase, produced):
        """(missing, duplicated) records of a phase that produced ``produced``."""
        import numpy as np

        with self.lock:
            seen = np.frombuffer(bytes(self.seen.get(phase, b"")), np.uint8)
        seen = np.pad(seen, (0, max(0, produced - len(seen))))
        return int((seen[:produced] == 0).sum()), int((seen > 1).sum())


# --- CPU shares ------------------------------------------------------------------------------


class CpuMeter:
    """CPU seconds per second, per group of processes, between two calls of :meth:`take`."""

    def __init__(self, groups):
        self.groups = groups  # name -> callable returning psutil.Process list

    def snapshot(self):
        out = {}
        for name, procs in self.groups.items():
            total = 0.0
            for proc in procs():
                try:
                    t = proc.cpu_times()
                    total += t.user + t.system
                except Exception:
                    pass
            out[name] = total
        return time.monotonic(), out

    @staticmethod
    def shares(before, after):
        elapsed = after[0] - before[0]
        return {k: round((after[1][k] - before[1].get(k, 0.0)) / elapsed, 2) for k in after[1]}


# --- the run ---------------------------------------------------------------------------------


class LatencyRun:
    """One query's latency run. ``broker``/``spark``: use these (and leave them running at
    :meth:`close`) instead of starting a broker and a session of its own."""

    def __init__(self, args, broker=None, spark=None):
        self.args = args
        from tests.support.brokers import TansuBroker

        self.own_broker = broker is None
        self.own_spark = spark is None
        self.broker = TansuBroker() if broker is None else broker
        self.in_topic = self.broker.create_topic(
            self.broker.unique_topic("lat-in"), partitions=args.partitions
        )
        self.out_topic = self.broker.create_topic(
            self.broker.unique_topic("lat-out"), partitions=args.partitions
        )
        self.checkpoint = tempfile.mkdtemp(prefix="kafka_ds-latency-")
        ctx = mp.get_context("spawn")
        self.commands = ctx.Queue()
        self.results = ctx.Queue()
        self.produced = ctx.Value("q", 0, lock=False)
        self.producer = ctx.Process(
            target=producer_main,
            daemon=True,
            args=(
                self.broker.bootstrap_servers,
                self.in_topic,
                args.value_size,
                self.commands,
                self.results,
                self.produced,
            ),
        )
        self.producer.start()
        self.consumer = LatencyConsumer(
            self.broker.bootstrap_servers, self.out_topic, args.partitions
        )
        self.consumer.start()
        self.spark = spark
        self.query = None
        self.phase = WARMUP_PHASE

    def start_query(
        self, source_format="pykafka", sink_format="pykafka", source_options=None, sink_options=None
    ):
        """``readStream.format(source_format)`` -> ``writeStream.format(sink_format)``, with
        more options for each (``bench_jvm.py`` runs Spark's ``format("kafka")`` here)."""
        if self.spark is None:
            from tests.support.spark_support import make_spark

            self.spark = make_spark("kafka_ds-stream-latency")
        self.spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
        bootstrap = self.broker.bootstrap_servers
        reader = (
            self.spark.readStream.format(source_format)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", self.in_topic)
            .option("startingOffsets", "latest")
        )
        for key, value in (source_options or {}).items():
            reader = reader.option(key, value)
        writer = (
            reader.load()
            .select("key", "value")
            .writeStream.format(sink_format)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", self.out_topic)
            .option("checkpointLocation", self.checkpoint)
        )
        for key, value in (sink_options or {}).items():
            writer = writer.option(key, value)
        self.query = writer.start()
        # The first batch pins the "latest" markers (reads nothing); wait for it.
        deadline = time.monotonic() + 120
        while not self.query.recentProgress:
            if time.monotonic() > deadline or self.query.exception() is not None:
                raise RuntimeError(f"the query did not start: {self.query.exception()}")
            time.sleep(0.1)

    def cpu_meter(self):
        import psutil

        me = psutil.Process()
        # the broker's process: Tansu's, or the JVM of Apache Kafka's (first) node
        pid = getattr(self.broker, "tansu_pid", None) or next(
            (node.java_pid for node in getattr(self.broker, "nodes", ())), None
        )
        broker = psutil.Process(pid) if pid else None
        producer = psutil.Process(self.producer.pid)

        def spark_procs():
            # Spark's JVM (a child of this process) and everything it started (Python
            # workers, the driver-side stream reader process).
            out = []
            for child in me.children():
                try:
                    if "java" in child.name():
                        out.append(child)
                        out.extend(child.children(recursive=True))
                except Exception:
                    pass
            return out

        return CpuMeter(
            {
                self.broker.name: lambda: [broker] if broker else [],
                "spark (JVM + Python workers)": spark_procs,
                "producer": lambda: [producer],
                "consumer (this process)": lambda: [me],
            }
        )

    def lag(self):
        with self.consumer.lock:
            visible = self.consumer.visible
        return self.produced.value - visible

    def drain(self, timeout=120.0):
        """Until every record produced is visible (True), or ``timeout`` seconds (False)."""
        deadline = time.monotonic() + timeout
        while self.lag() > 0:
            if self.query.exception() is not None:
                raise RuntimeError(f"the query failed: {self.query.exception()}")
            if time.monotonic() > deadline:
                return False
            self.while_lagging()
            time.sleep(0.05)
        return True

    def while_lagging(self):
        """What a drain does each time it finds records not yet visible: wait (a subclass may
        help the query along)."""

    def run_phase(self, rate, seconds, sample_every=0.25):
        """Produce at ``rate`` for ``seconds``; returns the phase's figures."""
        self.phase += 1
        phase = self.phase
        meter = self.cpu_meter()
        cpu_before = meter.snapshot()
        began = time.time()
        started = time.monotonic()
        self.commands.put((phase, rate, seconds))
        samples = []  # (seconds since start, lag)
        while True:
            if not self.results.empty():
                break
            samples.append((time.monotonic() - started, self.lag()))
            if self.query.exception() is not None:
                raise RuntimeError(f"the query failed: {self.query.exception()}")
            time.sleep(sample_every)
        got, sent, elapsed, undelivered = self.results.get()
        assert got == phase
        cpu_after = meter.snapshot()
        ended = time.time()
        drained = self.drain()
        missing, duplicated = self.consumer.phase_check(phase, sent)
        with self.consumer.lock:
            latencies = list(self.consumer.latencies.get(phase, ()))
        return {
            "rate": rate,
            "seconds": round(elapsed, 1),
            "produced": sent,
            "achieved_rate": round(sent / elapsed),
            "undelivered": undelivered,
            "drained": drained,
            "missing": missing,
            "duplicated": duplicated,
            "latency_ms": latency_figures(latencies),
            "lag_samples": samples,
            "triggers": trigger_figures(self.query.recentProgress, began, ended),
            "cpu": CpuMeter.shares(cpu_before, cpu_after),
        }

    def close(self):
        if self.query is not None:
            try:
                self.query.stop()
            except Exception:
                pass
        self.commands.put(None)
        self.producer.join(30)
        if self.producer.is_alive():
            self.producer.terminate()
        self.consumer.stopping.set()
        self.consumer.join(10)
        if self.spark is not None and self.own_spark:
            self.spark.stop()
        if self.own_broker:
            self.broker.stop()
        else:
            for topic in (self.in_topic, self.out_topic):
                self.broker.delete_topic(topic, wait=False)
        shutil.rmtree(self.checkpoint, ignore_errors=True)


class NudgedLatencyRun(LatencyRun):
    """A run whose query may leave records unread on Tansu until more arrive. Spark's
    connector finds a partition's end with ListOffsets LATEST, which Tansu answers with the
    base offset + 1 of the last batch (tests/README.md, Tansu deviation 1): the other records
    of that batch are read by a later trigger, once another batch follows. There, after each
    phase one single-record batch per partition (not measured) lets that query drain."""

    nudged = 0

    def lag(self):
        with self.consumer.lock:
            visible = self.consumer.visible
        return self.produced.value + self.nudged - visible

    def drain(self, timeout=120.0):
        self.quiet_since = time.monotonic()
        return super().drain(timeout)

    def while_lagging(self):
        if self.broker.name == "tansu" and time.monotonic() - self.quiet_since > 2.0:
            self.nudge()
            self.quiet_since = time.monotonic()

    def nudge(self):
        from confluent_kafka import Producer

        producer = Producer(
            {"bootstrap.servers": self.broker.bootstrap_servers, "linger.ms": 0, "log_level": 3}
        )
        for partition in range(self.args.partitions):
            producer.produce(
                self.in_topic,
                partition=partition,
                value=STAMP.pack(WARMUP_PHASE, 0, time.time_ns()).ljust(self.args.value_size, b"n"),
            )
            producer.flush(10)
        self.nudged += self.args.partitions


def latency_figures(latencies_ns) -> dict:
    import numpy as np

    if not latencies_ns:
        return {}
    ms = np.asarray(latencies_ns, dtype=np.float64) / 1e6
    return {
        "p50": round(float(np.percentile(ms, 50)), 1),
        "p99": round(float(np.percentile(ms, 99)), 1),
        "max": round(float(ms.max()), 1),
        "mean": round(float(ms.mean()), 1),
    }


def trigger_figures(progress, began, ended) -> dict:
    """Micro-batches that started in [began, ended] with input: how many, rows per batch
    and the median of each of Spark's trigger durations (ms)."""
    batches = []
    for p in progress:
        at = datetime.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        if began <= at <= ended and p.get("numInputRows", 0) > 0:
            batches.append(p)
    if not batches:
        return {"batches": 0}
    out = {
        "batches": len(batches),
        "rows_per_batch": round(statistics.median(p["numInputRows"] for p in batches)),
    }
    for stage in TRIGGER_STAGES:
        values = [p["durationMs"].get(stage, 0) for p in batches]
        out[stage] = round(statistics.median(values))
    return out
