"""Streaming latency: produce-to-visible through a pykafka -> pykafka query on Tansu.

    .venv/bin/python benchmarks/stream_latency.py                      # ~6 min
    .venv/bin/python benchmarks/stream_latency.py --seconds 20 --ramp-max 60000   # quick look

Starts Tansu (memory storage, tests/support/brokers.py) with an input and an output topic of
``--partitions`` partitions, and a Spark ``local[2]`` session running

    spark.readStream.format("pykafka").option("subscribe", IN) ... .load()
         .select("key", "value")
         .writeStream.format("pykafka").option("topic", OUT) ... .start()

with the default trigger (a micro-batch as soon as the previous one ended; Spark asks
the source for new data every ~10 ms while idle). Two clients that know nothing of
Spark measure it:

* a **producer** (confluent-kafka ``Producer``, acks=all, idempotent, ``linger.ms=1``,
  in its own process so that the measuring consumer never holds it up) writes
  ``--value-size``-byte values at a fixed rate; each value starts with (phase, sequence
  number, ``time.time_ns()`` taken right before ``produce()``);
* a **consumer** (confluent-kafka ``Consumer``, ``fetch.wait.max.ms=10``, in this
  process) reads the output topic from the start and takes, per record, the time it
  got the record minus the stamped produce time: the produce-to-visible latency. It
  also checks every record arrived, once.

Phases: a short warm-up (not reported), then ``--rates`` (default 1k and 20k records/s)
for ``--seconds`` each: p50/p99/max latency, the records per micro-batch and the
median of Spark's per-trigger durations (``query.recentProgress``: latestOffset,
walCommit, addBatch, commitOffsets, ...); then the ramp: rates from ``--ramp-start``
times ``--ramp-factor`` per step, each held for two ``--window``-second windows. A step
is sustained when the lag (records produced, not yet visible) averaged over the last
quarter of its second window exceeds that of its first window by less than half a
second of records, and the producer reached 95 % of the rate; the ramp stops at the
first step that is not. The query drains (lag 0) before each phase.

All of it runs on the same 2 cores: Tansu, Spark's JVM and Python workers and both
measuring clients (their CPU share per phase is printed). Prints Markdown tables
(and ``--json`` writes the raw figures).
"""

from __future__ import annotations

import array
import datetime
import json
import multiprocessing as mp
import os
import shutil
import statistics
import struct
import tempfile
import threading
import time

import harness

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


# --- the benchmark ---------------------------------------------------------------------------


class Bench:
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
        deadline = time.monotonic() + timeout
        while self.lag() > 0:
            if self.query.exception() is not None:
                raise RuntimeError(f"the query failed: {self.query.exception()}")
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

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


def ramp_verdict(step, window, rate) -> tuple[bool, float]:
    """(sustained, lag growth in seconds of records) of a two-window ramp step."""
    samples = step["lag_samples"]

    def tail_mean(lo, hi):
        values = [lag for t, lag in samples if lo + 0.75 * (hi - lo) <= t < hi]
        return statistics.fmean(values) if values else float("nan")

    growth = (tail_mean(window, 2 * window) - tail_mean(0, window)) / rate
    sustained = growth < 0.5 and step["achieved_rate"] >= 0.95 * rate
    return sustained, growth


# --- report ---------------------------------------------------------------------------------


def cpu_text(cpu):
    return ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())


def fixed_table(phases) -> str:
    lines = [
        "| rate (records/s) | produced | p50 latency | p99 latency | max | micro-batches | "
        "rows/batch | median trigger: latestOffset / walCommit / addBatch / commitOffsets "
        "/ total (ms) | lost / duplicated | CPU s/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for ph in phases:
        lat, tr = ph["latency_ms"], ph["triggers"]
        stages = " / ".join(
            str(tr.get(s, "-"))
            for s in ("latestOffset", "walCommit", "addBatch", "commitOffsets", "triggerExecution")
        )
        lines.append(
            f"| {ph['rate']:,} (achieved {ph['achieved_rate']:,}) | {ph['produced']:,} | "
            f"{lat.get('p50', '-')} ms | {lat.get('p99', '-')} ms | "
            f"{lat.get('max', '-')} ms | {tr['batches']} | "
            f"{tr.get('rows_per_batch', '-')} | {stages} | "
            f"{ph['missing']} / {ph['duplicated']} | {cpu_text(ph['cpu'])} |"
        )
    return "\n".join(lines)


def ramp_table(steps) -> str:
    lines = [
        "| target rate | achieved | lag growth over 10 s | p50 | p99 | rows/batch | "
        "sustained? | CPU s/s |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for st in steps:
        lat = st["latency_ms"]
        lines.append(
            f"| {st['rate']:,} | {st['achieved_rate']:,} | {st['growth_s']:+.2f} s | "
            f"{lat.get('p50', '-')} ms | {lat.get('p99', '-')} ms | "
            f"{st['triggers'].get('rows_per_batch', '-')} | "
            f"{'yes' if st['sustained'] else 'NO'} | {cpu_text(st['cpu'])} |"
        )
    return "\n".join(lines)


def main(argv=None):
    ap = harness.parser(__doc__)
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each fixed-rate run")
    ap.add_argument("--rates", default="1000,20000", help="fixed rates, records/s")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--window", type=float, default=10.0, help="ramp window, seconds")
    ap.add_argument("--ramp-start", type=int, default=20000)
    ap.add_argument("--ramp-factor", type=float, default=1.5)
    ap.add_argument("--ramp-max", type=int, default=1_000_000)
    ap.add_argument("--no-ramp", action="store_true")
    ap.add_argument("--json", default=None, help="write the raw figures here")
    harness.add_write_results(ap, "stream-latency")
    args = ap.parse_args(argv)
    if args.value_size < STAMP.size:
        ap.error(f"--value-size must be at least {STAMP.size}")

    log = harness.log
    started = time.monotonic()
    load_before = harness.load_average()
    bench = Bench(args)
    result = {"args": vars(args), "fixed": [], "ramp": []}
    try:
        log(f"Tansu at {bench.broker.bootstrap_servers}; starting the query")
        bench.start_query()
        log("warm-up: 1,000 records/s for 5 s")
        bench.run_phase(1000, 5.0)
        for rate in (int(r) for r in args.rates.split(",") if r):
            bench.drain()
            log(f"fixed rate {rate:,} records/s for {args.seconds:g} s")
            ph = bench.run_phase(rate, args.seconds)
            log(
                f"  p50 {ph['latency_ms'].get('p50')} ms, p99 {ph['latency_ms'].get('p99')} ms, "
                f"{ph['triggers']}"
            )
            result["fixed"].append(ph)
        rate = args.ramp_start
        while not args.no_ramp and rate <= args.ramp_max:
            if not bench.drain():
                log("the query did not drain in 120 s: ramp ends")
                break
            log(f"ramp: {rate:,} records/s for 2 x {args.window:g} s")
            st = bench.run_phase(rate, 2 * args.window)
            st["sustained"], st["growth_s"] = ramp_verdict(st, args.window, rate)
            log(
                f"  achieved {st['achieved_rate']:,}/s, lag growth {st['growth_s']:+.2f} s, "
                f"sustained: {st['sustained']}"
            )
            result["ramp"].append(st)
            if not st["sustained"]:
                break
            rate = int(round(rate * args.ramp_factor, -3))
    finally:
        bench.close()
    sustained = [st["rate"] for st in result["ramp"] if st["sustained"]]
    result["max_sustained"] = max(sustained) if sustained else None
    result["load_average"] = harness.load_average()
    result["minutes"] = round((time.monotonic() - started) / 60, 1)

    command = harness.command_line("stream_latency.py", argv)
    parts = [
        f"Command: `{command}` -- {harness.stamp()}, "
        f"{result['minutes']} min; pykafka -> pykafka on Tansu, default trigger, "
        f"local[2], {args.partitions} partitions, {args.value_size} B values; load "
        f"average (1 min) {load_before[0]:.2f} at the start, "
        f"{result['load_average'][0]:.2f} at the end.",
        fixed_table(result["fixed"]),
    ]
    if result["ramp"]:
        last = result["ramp"][-1]
        ceiling = (
            f"{result['max_sustained']:,} records/s"
            if result["max_sustained"]
            else "below the first step"
        )
        parts += [
            ramp_table(result["ramp"]),
            f"Sustained maximum rate: **{ceiling}**"
            + ("" if not last["sustained"] else " (the ramp reached --ramp-max)"),
        ]
    print("\n" + "\n\n".join(parts))
    if args.write_results:
        path = harness.RESULTS_MD
        harness.replace_section(
            path,
            "stream-latency",
            "\n\n".join(
                [
                    "## Streaming latency (`stream_latency.py`)",
                    parts[0] + f"  Machine: {harness.machine_and_load()}.",
                    *parts[1:],
                ]
            ),
        )
        print(f"\nwrote the stream-latency section of {os.path.relpath(path)}")
    if args.json:
        for part in result["fixed"] + result["ramp"]:
            part.pop("lag_samples", None)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
