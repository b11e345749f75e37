"""Soak: faults, SIGKILLs and restarts under a streaming query; nothing lost.

    python benchmarks/soak_mock.py                    # ~10-15 min on 2 busy cores: 3 kills, faults every ~3 s
    python benchmarks/soak_mock.py --kills 8 --rate 1000 --down-max 30

On the librdkafka mock cluster (3 brokers; tests/support/brokers.py):

* a producer thread (confluent-kafka, acks=all) writes ``--rate`` records/s into a
  6-partition source topic for the whole run, remembering every acknowledged
  (partition, offset);
* a fault thread injects, every ``--fault-every`` s on average, one of: a broker down
  for 2..``--down-max`` s then up again, a partition leader moved to another broker,
  a burst of retriable errors pushed into Fetch / ListOffsets / Produce / Metadata;
* a streaming child process (benchmarks/_soak_mock_child.py: the source into a parquet file
  sink and, in a second query, into the ``pykafka`` sink) is SIGKILLed -- its whole
  process group, JVM included -- ``--kills`` times, each at a random point 0..``--run-max``
  s after the run finished its first batch (mid-batch or between batches), and
  restarted from its checkpoints;
* at the end faults stop, production stops, one last child run catches up, and:
  the file sink must hold every acknowledged (partition, offset) exactly once; the Kafka
  sink topic must hold every one at least once (duplicates counted: without
  transactions the sink is at-least-once, like the JVM's).

Prints one JSON object: records, faults by kind, kills, restarts, lost, duplicated.
Exit status 1 if anything was lost or the file sink has a duplicate.
"""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import harness

HERE = os.path.dirname(os.path.abspath(__file__))

PARTITIONS = 6
FETCH, LIST_OFFSETS, METADATA, PRODUCE = 1, 2, 3, 0
RETRIABLE = {FETCH: (6, 7, 5, 74), LIST_OFFSETS: (6, 5, 74), METADATA: (5,), PRODUCE: (6, 7, 19)}


class SourceProducer(threading.Thread):
    def __init__(self, bootstrap, topic, rate):
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 20,
                "log_level": 0,
                "message.timeout.ms": 300000,
            }
        )
        self.topic = topic
        self.rate = rate
        self.acked = set()
        self.failed = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def _done(self, err, msg):
        if err is not None:
            self.failed += 1
            return
        with self.lock:
            self.acked.add((msg.partition(), msg.offset()))

    def run(self):
        n = 0
        started = time.monotonic()
        while not self.stopping.is_set():
            target = int((time.monotonic() - started) * self.rate)
            while n < target:
                try:
                    self.producer.produce(
                        self.topic,
                        value=b"r%d" % n,
                        partition=n % PARTITIONS,
                        on_delivery=self._done,
                    )
                    n += 1
                except BufferError:
                    break
            self.producer.poll(0.05)
        self.producer.flush(300)


class Faults(threading.Thread):
    def __init__(self, cluster, topics, every, down_max, rng):
        super().__init__(daemon=True)
        self.cluster = cluster
        self.topics = topics
        self.every = every
        self.down_max = down_max
        self.rng = rng
        self.counts = collections.Counter()
        self.stopping = threading.Event()
        self.down = None

    def run(self):
        while not self.stopping.wait(self.rng.uniform(0.5, 1.5) * self.every):
            kind = self.rng.choice(["broker_down", "leader_move", "leader_move", "errors"])
            try:
                if kind == "broker_down" and self.down is None:
                    broker = self.rng.choice((1, 2, 3))
                    seconds = self.rng.uniform(2.0, self.down_max)
                    self.cluster.broker_down(broker)
                    self.down = broker
                    self.counts["broker_down"] += 1
                    self.counts["broker_down_seconds"] += round(seconds)
                    if self.stopping.wait(seconds):
                        pass
                    self.cluster.broker_up(broker)
                    self.down = None
                elif kind in ("leader_move", "broker_down"):
                    topic = self.rng.choice(self.topics)
                    self.cluster.set_leader(
                        topic, self.rng.randrange(PARTITIONS), self.rng.choice((1, 2, 3))
                    )
                    self.counts["leader_move"] += 1
                else:
                    api = self.rng.choice(list(RETRIABLE))
                    codes = [self.rng.choice(RETRIABLE[api]) for _ in range(self.rng.randint(1, 4))]
                    self.cluster.push_request_errors(api, *codes)
                    self.counts[f"errors_api{api}"] += len(codes)
            except Exception as exc:  # noqa: BLE001 - a fault that could not be applied
                self.counts["fault_command_failed"] += 1
                print(f"fault {kind} failed: {exc}", file=sys.stderr)
        if self.down is not None:
            self.cluster.broker_up(self.down)


def start_child(spec, log):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, "_soak_mock_child.py"), json.dumps(spec)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def started_count(log_path):
    with open(log_path, "rb") as fh:
        return fh.read().count(b"STARTED")


def committed_batches(checkpoint):
    path = os.path.join(checkpoint, "commits")
    if not os.path.isdir(path):
        return -1
    ids = [int(name) for name in os.listdir(path) if name.isdigit()]
    return max(ids) if ids else -1


def main(argv=None):
    parser = harness.parser(__doc__)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--rate", type=int, default=200, help="records/s produced")
    parser.add_argument("--fault-every", type=float, default=3.0)
    parser.add_argument("--down-max", type=float, default=10.0)
    parser.add_argument(
        "--run-min",
        type=float,
        default=0.0,
        help="s the queries run after a finished batch before a kill",
    )
    parser.add_argument("--run-max", type=float, default=15.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)

    from tests.support.brokers import MockCluster, consume_confluent

    work = tempfile.mkdtemp(prefix="kafka_ds-soak-")
    cluster = MockCluster()
    producer = faults = child = None
    report = {"seed": seed, "work_dir": work}
    started = time.monotonic()
    try:
        source, sink = f"soak-src-{seed}", f"soak-sink-{seed}"
        cluster.create_topic(source, partitions=PARTITIONS)
        cluster.create_topic(sink, partitions=PARTITIONS)
        spec = {
            "bootstrap": cluster.bootstrap_servers,
            "source": source,
            "sink_topic": sink,
            "file_sink": os.path.join(work, "files"),
            "file_checkpoint": os.path.join(work, "ck-files"),
            "kafka_checkpoint": os.path.join(work, "ck-kafka"),
            "trigger_ms": 500,
            "max_offsets": 5000,
        }
        producer = SourceProducer(cluster.bootstrap_servers, source, args.rate)
        producer.start()
        faults = Faults(cluster, [source, sink], args.fault_every, args.down_max, rng)
        faults.start()
        log_path = os.path.join(work, "child.log")
        log = open(log_path, "ab")
        kills = restarts = child_failures = 0
        for run in range(args.kills):
            child = start_child(spec, log)
            restarts += run > 0
            before = committed_batches(spec["file_checkpoint"])
            # Kill at a random point once the queries run (Spark's start takes a while).
            wait_started = time.monotonic() + 300
            while (
                time.monotonic() < wait_started
                and child.poll() is None
                and started_count(log_path) < run + 1
            ):
                time.sleep(0.2)
            # ... and, so that every kill interrupts a query that is making progress,
            # once it finished a batch in this run (Spark's first batch is slow).
            wait_batch = time.monotonic() + 300
            while (
                time.monotonic() < wait_batch
                and child.poll() is None
                and committed_batches(spec["file_checkpoint"]) <= before
            ):
                time.sleep(0.2)
            deadline = time.monotonic() + rng.uniform(args.run_min, args.run_max)
            while time.monotonic() < deadline and child.poll() is None:
                time.sleep(0.2)
            progressed = committed_batches(spec["file_checkpoint"]) > before
            if child.poll() is not None:
                child_failures += 1
                print(f"child exited with {child.returncode} before its kill", file=sys.stderr)
            else:
                os.killpg(child.pid, signal.SIGKILL)
                kills += 1
            child.wait(60)
            print(
                f"run {run}: killed={child.returncode == -9} progressed={progressed} "
                f"faults={dict(faults.counts)}",
                file=sys.stderr,
                flush=True,
            )
        faults.stopping.set()
        faults.join(60)
        producer.stopping.set()
        producer.join(300)
        produced = set(producer.acked)
        # A last run catches up with everything produced (no maxOffsetsPerTrigger: the
        # backlog in one batch), then is stopped.
        child = start_child({**spec, "max_offsets": None}, log)
        restarts += 1
        total = len(produced)

        def file_rows():
            """Rows of the files Spark's file sink committed (its _spark_metadata log; files
            a killed batch left behind are not part of the sink's output)."""
            import urllib.parse

            import pyarrow.parquet as pq

            log_dir = os.path.join(spec["file_sink"], "_spark_metadata")
            if not os.path.isdir(log_dir):
                return []
            files = set()
            for name in os.listdir(log_dir):
                if name.startswith("."):
                    continue
                with open(os.path.join(log_dir, name)) as fh:
                    for line in fh.read().splitlines()[1:]:
                        entry = json.loads(line)
                        if entry.get("action", "add") == "add":
                            files.add(
                                urllib.parse.unquote(urllib.parse.urlparse(entry["path"]).path)
                            )
            out = []
            for path in sorted(files):
                table = pq.read_table(path, columns=["partition", "offset"])
                out += zip(
                    table.column("partition").to_pylist(),
                    table.column("offset").to_pylist(),
                    strict=True,
                )
            return out

        catch_up_deadline = time.monotonic() + 900
        caught_up = False
        rows = []
        while time.monotonic() < catch_up_deadline and child.poll() is None:
            time.sleep(5)
            try:
                rows = file_rows()
            except Exception:  # noqa: BLE001 - a file being written
                continue
            if len(set(rows) & produced) >= total:
                caught_up = True
                break
        # The Kafka-sink query runs its own batches: wait until the sink topic has every
        # record too (or the deadline).
        expected_values = {f"{p}:{o}" for p, o in produced}
        sink_values = collections.Counter()
        kafka_caught_up = False
        while caught_up and time.monotonic() < catch_up_deadline and child.poll() is None:
            sink_values = collections.Counter(
                m.value.decode()
                for m in consume_confluent(cluster.bootstrap_servers, sink, timeout=120)
            )
            if expected_values <= set(sink_values):
                kafka_caught_up = True
                break
            time.sleep(10)
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        else:
            child_failures += 1
        child.wait(60)
        rows = file_rows()
        counts = collections.Counter(rows)
        file_lost = len(produced - set(counts))
        file_dup = sum(n - 1 for n in counts.values() if n > 1)
        file_unknown = len(set(counts) - produced)
        if not kafka_caught_up:
            sink_values = collections.Counter(
                m.value.decode()
                for m in consume_confluent(cluster.bootstrap_servers, sink, timeout=120)
            )
        kafka_lost = len(expected_values - set(sink_values))
        kafka_dup = sum(n - 1 for v, n in sink_values.items() if v in expected_values and n > 1)
        report.update(
            {
                "caught_up": caught_up,
                "kafka_sink_caught_up": kafka_caught_up,
                "seconds": round(time.monotonic() - started),
                "records_produced": total,
                "producer_failures": producer.failed,
                "faults": dict(faults.counts),
                "kills": kills,
                "restarts": restarts,
                "child_failures": child_failures,
                "file_sink": {
                    "rows": sum(counts.values()),
                    "lost": file_lost,
                    "duplicated": file_dup,
                    "unexpected": file_unknown,
                },
                "kafka_sink": {
                    "records": sum(sink_values.values()),
                    "lost": kafka_lost,
                    "duplicated": kafka_dup,
                },
            }
        )
        print(json.dumps(report))
        ok = caught_up and kafka_caught_up and file_lost == 0 and file_dup == 0 and kafka_lost == 0
        return 0 if ok else 1
    finally:
        if child is not None and child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(60)
        if faults is not None:
            faults.stopping.set()
        if producer is not None:
            producer.stopping.set()
        cluster.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
