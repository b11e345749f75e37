"""Soak: a typed, exactly-once stream on two executor JVMs while everything fails.

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/soak.py              # 30 min
    PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/soak.py --minutes 60

One command, not in the default test run. It starts, on this machine:

* Tansu (tests/support/brokers.py) with a source topic and a sink topic, and the TCP fault
  proxy (tests/support/faultproxy.py) in front of it: Spark talks to Kafka only through
  the proxy;
* the fake Schema Registry (tests/support/schema_registry.py, HTTP), in this process;
* a producer thread: confluent-kafka's ``Producer`` (idempotent, acks=all, straight to
  Tansu) writing ``--rate`` records/s of Avro values framed by confluent-kafka's
  ``AvroSerializer`` (subject ``<source>-value``, version 1); at about 40 % of the run it
  switches to version 2 (an added field ``unit`` with a default: a compatible evolution),
  registered then. Every acknowledged (partition, offset) is remembered;
* the Spark driver (benchmarks/_soak_eos_child.py, in a session of its own) on
  ``local-cluster[2,1,1024]``: two executor JVMs. Two queries read the source with
  ``valueFormat=avro``; one writes ``partition, offset, value.*`` to a parquet file sink,
  the other ``struct(src_partition, src_offset, value.*)`` typed (``valueFormat=avro``) with
  ``deliveryGuarantee=exactly-once`` to the sink topic.

Faults, all through the run:

* network (a thread, every ~``--fault-every`` s): a broker outage of 2..``--down-max`` s
  (the proxy cuts every connection and refuses new ones), or one answer of Fetch, Produce,
  Metadata, ListOffsets, FindCoordinator, InitProducerId, AddPartitionsToTxn or EndTxn
  stalled 1..``--stall-max`` s (past the 30 s request timeout at the top);
* processes and the registry (events spread over the run, in turn):
  SIGKILL of one executor JVM while a micro-batch runs (its checkpoint has an offsets
  entry without a commit); SIGKILL of the driver's whole session while its commit holds
  (the proxy holds an EndTxn answer: the broker committed one transaction of the batch,
  the driver has not finished), then a restart from the checkpoints; a Schema Registry
  outage shorter than ``schema.registry.retry.budget.ms`` (``--budget-ms``) right after a
  new executor started (its Python workers look the writer schemas up); an outage longer
  than the budget while the driver restarts (its planning looks the reader schema up) or
  an executor is replaced. A query that fails is restarted from its checkpoints and
  counted, with its error;
* a query that commits no batch for ``--stuck-s`` s while records wait is a stuck query:
  counted, killed and restarted.

At the end the faults stop, the registry and the proxy are up, production stops, and the
driver runs until both queries have committed every record, then stops them. Checked:

* the file sink (the files its ``_spark_metadata`` log committed) holds every acknowledged
  (partition, offset) exactly once;
* the sink topic: every acknowledged source record exactly once among the committed
  transactions of the raw log (tests/support/txlog.py applies Kafka's rule), values
  decoded by confluent-kafka's ``AvroDeserializer`` (the source record's id must match),
  and no transaction open; also a confluent-kafka consumer with
  ``isolation.level=read_committed``: what it returns and whether it reaches the high
  watermark, and the last stable offset against the high watermark of every partition
  (Tansu sends no aborted-transactions list, so that reader also returns aborted records:
  tests/README.md, deviations, *Both*);
* memory: RSS from /proc every ``--sample-every`` s of the driver JVM, the driver's Python
  process and its Python workers, each executor JVM and its Python workers, and this
  process; growth per hour by a least-squares line over each process's life (after its
  first 2 minutes).

Writes ``soak_summary.json`` (also printed) and ``soak.png`` (throughput, lag and memory
over time) into ``--out-dir`` (default: this folder). Exit status 1 if anything was lost or
duplicated, a transaction was left open, or the queries did not catch up.
"""

from __future__ import annotations

import argparse
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
from array import array
from itertools import pairwise

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
FIND_COORDINATOR, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 10, 22, 24, 26
STALLABLE = {
    "Fetch": FETCH,
    "Produce": PRODUCE,
    "Metadata": METADATA,
    "ListOffsets": LIST_OFFSETS,
    "FindCoordinator": FIND_COORDINATOR,
    "InitProducerId": INIT_PRODUCER_ID,
    "AddPartitionsToTxn": ADD_PARTITIONS_TO_TXN,
    "EndTxn": END_TXN,
}

SCHEMA_V1 = {
    "type": "record",
    "name": "Reading",
    "namespace": "soak",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "reading", "type": "double"},
        {"name": "ts", "type": "long"},
    ],
}
SCHEMA_V2 = {
    **SCHEMA_V1,
    "fields": SCHEMA_V1["fields"] + [{"name": "unit", "type": ["null", "string"], "default": None}],
}

T0 = time.monotonic()


def now() -> float:
    return round(time.monotonic() - T0, 1)


def log(*parts):
    print(f"[soak {now():7.1f}s]", *parts, file=sys.stderr, flush=True)


# --- the source -------------------------------------------------------------------------


class SourceProducer(threading.Thread):
    """Avro records at ``rate``/s, partition = n % partitions; acknowledged offsets kept
    compactly (16 bytes a record: offset and id per partition)."""

    def __init__(self, bootstrap, registry_url, topic, partitions, rate):
        super().__init__(daemon=True, name="producer")
        from confluent_kafka import Producer
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 20,
                "message.timeout.ms": 600000,
                "log_level": 0,
            }
        )
        self.registry = SchemaRegistryClient({"url": registry_url})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.offsets = [array("q") for _ in range(partitions)]
        self.ids = [array("q") for _ in range(partitions)]
        self.failed = 0
        self.errors = collections.Counter()
        self.produced = 0
        self.version = 1
        self._serializer = self._make_serializer(SCHEMA_V1)
        self._switch = threading.Event()
        self.v2_from_id = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def _make_serializer(self, schema):
        from confluent_kafka.schema_registry.avro import AvroSerializer

        return AvroSerializer(
            self.registry, json.dumps(schema), conf={"auto.register.schemas": True}
        )

    def switch_to_v2(self):
        """Register version 2 (now: the registry must be up) and write it from now on."""
        from confluent_kafka.serialization import MessageField, SerializationContext

        serializer = self._make_serializer(SCHEMA_V2)
        serializer(
            {"id": -1, "sensor": "probe", "reading": 0.0, "ts": 0, "unit": None},
            SerializationContext(self.topic, MessageField.VALUE),
        )  # registers it
        self._v2 = serializer
        self._switch.set()

    def acked(self) -> int:
        with self.lock:
            return sum(len(a) for a in self.offsets)

    def end_offsets(self) -> list[int]:
        with self.lock:
            return [(max(a) + 1 if len(a) else 0) for a in self.offsets]

    def run(self):
        from confluent_kafka.serialization import MessageField, SerializationContext

        ctx = SerializationContext(self.topic, MessageField.VALUE)
        n = 0
        started = time.monotonic()
        while not self.stopping.is_set():
            if self._switch.is_set() and self.version == 1:
                self._serializer, self.version, self.v2_from_id = self._v2, 2, n
            target = int((time.monotonic() - started) * self.rate)
            while n < target:
                record = {
                    "id": n,
                    "sensor": f"s{n % 97}",
                    "reading": n * 0.5,
                    "ts": int(time.time() * 1000),
                }
                if self.version == 2:
                    record["unit"] = "C" if n % 2 else None
                value = self._serializer(record, ctx)
                partition = n % self.partitions
                try:
                    self.producer.produce(
                        self.topic, value=value, partition=partition, on_delivery=self._callback(n)
                    )
                except BufferError:
                    break
                n += 1
            self.produced = n
            self.producer.poll(0.05)
        left = self.producer.flush(600)
        if left:
            log(f"producer: {left} records not delivered at the end")

    def _callback(self, n):
        def done(err, msg):
            if err is not None:
                self.failed += 1
                self.errors[str(err)[:200]] += 1
                return
            with self.lock:
                self.offsets[msg.partition()].append(msg.offset())
                self.ids[msg.partition()].append(n)

        return done

    def acknowledged(self) -> dict:
        """{(partition, offset): id} of every acknowledged record."""
        with self.lock:
            return {
                (p, o): i
                for p in range(self.partitions)
                for o, i in zip(self.offsets[p], self.ids[p], strict=True)
            }


# --- network faults -----------------------------------------------------------------------


class NetworkFaults(threading.Thread):
    def __init__(self, proxy, every, down_max, stall_max, rng, events):
        super().__init__(daemon=True, name="network-faults")
        self.proxy, self.every, self.down_max, self.stall_max = proxy, every, down_max, stall_max
        self.rng, self.events = rng, events
        self.counts = collections.Counter()
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.wait(self.rng.uniform(0.5, 1.5) * self.every):
            if self.rng.random() < 0.4:
                seconds = self.rng.uniform(2.0, self.down_max)
                self.proxy.down()
                self.events.append((now(), "broker_down", round(seconds, 1)))
                self.counts["broker_outages"] += 1
                self.counts["broker_down_s"] += round(seconds)
                self.stopping.wait(seconds)
                self.proxy.up()
            else:
                name = self.rng.choice(list(STALLABLE))
                seconds = self.rng.uniform(1.0, self.stall_max)
                self.proxy.inject(STALLABLE[name], "stall", seconds=seconds)
                self.events.append((now(), f"stall {name}", round(seconds, 1)))
                self.counts[f"stall_{name}"] += 1
        self.proxy.up()


# --- processes --------------------------------------------------------------------------


def proc_table() -> dict:
    """pid -> (ppid, session id, rss KiB, cmdline) of every process we may read."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            rss = 0
            with open(f"/proc/{entry}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
                        break
        except OSError:
            continue
        table[int(entry)] = (int(fields[1]), int(fields[3]), rss, cmd)
    return table


def session_pids(session_id, table=None) -> list[int]:
    table = table or proc_table()
    return [pid for pid, row in table.items() if row[1] == session_id]


def kill_session(session_id: int) -> None:
    for pid in session_pids(session_id):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def executor_pids(session_id) -> list[int]:
    table = proc_table()
    return [
        pid
        for pid in session_pids(session_id, table)
        if "CoarseGrainedExecutorBackend" in table[pid][3]
    ]


def python_under(jvms, session_id) -> list[int]:
    """Python processes of the session descended from one of the JVM pids ``jvms``."""
    table = proc_table()
    out = []
    for pid in session_pids(session_id, table):
        if "python" not in table[pid][3]:
            continue
        parent, seen = table[pid][0], 0
        while parent in table and parent not in jvms and seen < 20:
            parent, seen = table[parent][0], seen + 1
        if parent in jvms:
            out.append(pid)
    return out


def classify(session_id, table) -> dict:
    """pid -> role name for the driver's session, plus this process."""
    pids = set(session_pids(session_id, table))
    roles = {}
    jvm_role = {}
    for pid in pids:
        cmd = table[pid][3]
        if "CoarseGrainedExecutorBackend" in cmd:
            parts = cmd.split()
            eid = parts[parts.index("--executor-id") + 1] if "--executor-id" in parts else "?"
            jvm_role[pid] = roles[pid] = f"executor {eid} JVM"
        elif "org.apache.spark.deploy.SparkSubmit" in cmd:
            jvm_role[pid] = roles[pid] = "driver JVM"
        elif pid == session_id:
            roles[pid] = "driver Python"
    for pid in pids - set(roles):
        if "python" not in table[pid][3]:
            continue
        parent, seen = table[pid][0], 0
        while parent in table and parent not in jvm_role and seen < 20:
            parent, seen = table[parent][0], seen + 1
        owner = jvm_role.get(parent, "driver JVM")
        roles[pid] = owner.replace(" JVM", "") + " Python workers"
    roles[os.getpid()] = "soak process"
    return roles


# --- checkpoints --------------------------------------------------------------------------


def _batch_ids(path):
    if not os.path.isdir(path):
        return []
    return sorted(int(n) for n in os.listdir(path) if n.isdigit())


def checkpoint_state(checkpoint, topic):
    """(last committed batch id, its end offsets per partition {p: o}, batch running?)."""
    commits = _batch_ids(os.path.join(checkpoint, "commits"))
    offsets = _batch_ids(os.path.join(checkpoint, "offsets"))
    last = commits[-1] if commits else -1
    ends = {}
    if last >= 0:
        try:
            with open(os.path.join(checkpoint, "offsets", str(last))) as f:
                lines = f.read().splitlines()
            for line in lines[2:]:
                data = json.loads(line)
                if isinstance(data, dict) and topic in data:
                    ends = {int(p): int(o) for p, o in data[topic].items()}
        except (OSError, ValueError):
            pass
    running = bool(offsets) and offsets[-1] > last
    return last, ends, running


# --- the driver -----------------------------------------------------------------------------


class Driver:
    """The Spark driver child: start, kill, watch, restart."""

    def __init__(self, spec, work):
        self.spec, self.work = spec, work
        self.log_path = os.path.join(work, "driver.log")
        self.proc = None
        self.starts = 0
        self.failures = []  # (t, exit code, FAILED line)
        self.kills = 0
        self._log_pos = 0

    def start(self):
        env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        env["PYTHONPATH"] = os.pathsep.join(
            [ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        )
        with open(self.log_path, "ab") as out:
            self._log_pos = out.tell()
            self.proc = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "_soak_eos_child.py"), json.dumps(self.spec)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self.starts += 1
        log(f"driver started (pid {self.proc.pid}, start {self.starts})")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is None:
            return
        kill_session(self.proc.pid)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            kill_session(self.proc.pid)
            self.proc.wait(60)
        kill_session(self.proc.pid)  # anything its session started meanwhile
        self.kills += 1

    def output(self) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(self._log_pos)
            return f.read().decode(errors="replace")

    def started(self) -> bool:
        return "STARTED" in self.output()

    def note_exit(self):
        """The driver exited by itself: remember why; kill what its session left."""
        text = self.output()
        lines = text.splitlines()
        failed = (
            [line for line in lines if line.startswith("FAILED")]
            or [line for line in lines if "kafka_ds." in line and "Error" in line]
            or [line for line in lines if "Exception:" in line or "Error:" in line]
        )
        reason = failed[-1] if failed else "\n".join(lines[-15:])
        self.failures.append({"t": now(), "exit": self.proc.returncode, "error": reason[:3000]})
        log(f"driver exited with {self.proc.returncode}: {reason[:600]}")
        kill_session(self.proc.pid)


# --- sampling ---------------------------------------------------------------------------------


class Sampler(threading.Thread):
    def __init__(self, every, driver, producer, checkpoints, topic):
        super().__init__(daemon=True, name="sampler")
        self.every, self.driver, self.producer = every, driver, producer
        self.checkpoints, self.topic = checkpoints, topic
        self.memory = collections.defaultdict(list)  # (role, pid) -> [(t, MiB)]
        self.series = []  # (t, produced, {query: committed records}, {query: lag})
        self.stopping = threading.Event()
        self.last_progress = {name: (now(), -1) for name in checkpoints}

    def sample(self):
        t = now()
        table = proc_table()
        session = self.driver.proc.pid if self.driver.alive else None
        roles = classify(session, table) if session else {os.getpid(): "soak process"}
        for pid, role in roles.items():
            if pid in table:
                self.memory[(role, pid)].append((t, table[pid][2] / 1024.0))
        ends = self.producer.end_offsets()
        produced = sum(ends)
        committed, lag = {}, {}
        for name, checkpoint in self.checkpoints.items():
            last, offsets, _ = checkpoint_state(checkpoint, self.topic)
            done = sum(offsets.values())
            committed[name] = done
            lag[name] = max(0, produced - done)
            if last != self.last_progress[name][1]:
                self.last_progress[name] = (t, last)
        self.series.append((t, produced, committed, lag))

    def run(self):
        while not self.stopping.wait(self.every):
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - a process that went away mid-read
                log(f"sampler: {exc!r}")


def growth(points, skip_s=120.0):
    """MiB/hour of a least-squares line through the points after the first ``skip_s``."""
    import numpy as np

    if not points:
        return None
    start = points[0][0]
    pts = [(t, m) for t, m in points if t - start >= skip_s]
    if len(pts) < 10 or pts[-1][0] - pts[0][0] < 300:
        return None
    t = np.array([p[0] for p in pts]) / 3600.0
    m = np.array([p[1] for p in pts])
    return float(np.polyfit(t, m, 1)[0])


def memory_summary(memory) -> dict:
    """Per role: processes seen, the longest-lived one's life, first/last/peak RSS and growth
    per hour; the largest growth of any process of the role that lived >= 7 minutes."""
    by_role = collections.defaultdict(list)
    for (role, pid), pts in memory.items():
        by_role[role].append((pid, pts))
    out = {}
    for role, procs in sorted(by_role.items()):
        procs.sort(key=lambda item: item[1][-1][0] - item[1][0][0], reverse=True)
        pid, pts = procs[0]
        fits = [g for g in (growth(p) for _, p in procs) if g is not None]
        out[role] = {
            "processes": len(procs),
            "longest_life_s": round(pts[-1][0] - pts[0][0]),
            "longest_first_mib": round(pts[0][1], 1),
            "longest_last_mib": round(pts[-1][1], 1),
            "peak_mib": round(max(m for _, p in procs for _, m in p), 1),
            "longest_growth_mib_per_h": None if growth(pts) is None else round(growth(pts), 1),
            "max_growth_mib_per_h": round(max(fits), 1) if fits else None,
        }
    return out


# --- the checks at the end -----------------------------------------------------------------


def file_sink_rows(file_sink):
    """(partition, offset) of every row in the files the sink's _spark_metadata committed."""
    import urllib.parse

    import pyarrow.parquet as pq

    log_dir = os.path.join(file_sink, "_spark_metadata")
    files = set()
    for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
        if name.startswith("."):
            continue
        with open(os.path.join(log_dir, name)) as fh:
            for line in fh.read().splitlines()[1:]:
                entry = json.loads(line)
                if entry.get("action", "add") == "add":
                    files.add(urllib.parse.unquote(urllib.parse.urlparse(entry["path"]).path))
    out = []
    for path in sorted(files):
        table = pq.read_table(path, columns=["partition", "offset", "id"])
        out += zip(
            table.column("partition").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("id").to_pylist(),
            strict=True,
        )
    return out, len(files)


def check_kafka_sink(bootstrap, registry_url, sink, partitions, acked):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from kafka_ds.client import KafkaClient
    from kafka_ds.client.reads import fetch_watermarks
    from tests.support.txlog import verdict

    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry_url}))
    ctx = SerializationContext(sink, MessageField.VALUE)
    result = {}

    def tally(values):
        counts = collections.Counter()
        wrong_id = with_unit = 0
        for raw in values:
            record = deserialize(raw, ctx)
            key = (record["src_partition"], record["src_offset"])
            counts[key] += 1
            if key in acked and acked[key] != record["id"]:
                wrong_id += 1
            with_unit += record.get("unit") is not None
        return counts, wrong_id, with_unit

    log_verdict = verdict(bootstrap, sink)
    counts, wrong_id, with_unit = tally(log_verdict.committed)
    aborted_keys = set(tally(log_verdict.aborted)[0])
    result["raw_log"] = {
        "committed_records": sum(counts.values()),
        "lost": len(set(acked) - set(counts)),
        "lost_by_source_partition": dict(
            collections.Counter(p for p, _ in set(acked) - set(counts))
        ),
        "duplicated": sum(n - 1 for n in counts.values() if n > 1),
        "unexpected": len(set(counts) - set(acked)),
        "value_mismatch": wrong_id,
        "raw_log_first_offset_by_partition": {
            str(p): min(
                (b.base_offset for b in log_verdict.batches if b.partition == p), default=None
            )
            for p in range(partitions)
        },
        "records_with_v2_field_set": with_unit,
        "aborted_records": len(log_verdict.aborted),
        "open_records": len(log_verdict.open),
        "commit_markers": log_verdict.commits,
    }
    client = KafkaClient(bootstrap)
    try:
        marks = fetch_watermarks(
            client, {(sink, p): 0 for p in range(partitions)}, isolation_level=1
        )
    finally:
        client.close()
    lso = {p: marks[(sink, p)][:2] for p in range(partitions)}
    result["last_stable_offset"] = {
        "partitions_lso_below_hw": {
            str(p): {"hw": hw, "lso": ls} for p, (hw, ls) in lso.items() if ls != hw
        }
    }
    # an independent read_committed reader
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"soak-check-{os.getpid()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    try:
        highs = {
            p: consumer.get_watermark_offsets(TopicPartition(sink, p), timeout=30)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(sink, p, 0) for p in range(partitions)])
        values, position = [], {p: 0 for p in range(partitions)}
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 30:
            msgs = consumer.consume(1000, 1.0)
            got = False
            for msg in msgs:
                if msg.error():
                    continue
                got = True
                values.append(msg.value())
                position[msg.partition()] = msg.offset() + 1
            if got:
                idle_since = time.monotonic()
            if all(position[p] >= highs[p] - 1 for p in range(partitions)):
                # the last offset of a partition is a commit marker, never returned
                pass
    finally:
        consumer.close()
    rc_counts, rc_wrong, _ = tally(values)
    extra = {k: n for k, n in rc_counts.items() if n > counts.get(k, 0)}
    result["read_committed_consumer"] = {
        "records": sum(rc_counts.values()),
        "lost": len(set(acked) - set(rc_counts)),
        "duplicated": sum(n - 1 for n in rc_counts.values() if n > 1),
        "duplicates_that_are_aborted_in_the_raw_log": sum(
            n - counts.get(k, 0) for k, n in extra.items() if k in aborted_keys
        ),
        "last_offset_read_vs_high_watermark": {
            str(p): [position[p], highs[p]] for p in range(partitions)
        },
    }
    return result


# --- plot -----------------------------------------------------------------------------------


def plot(path, series, memory, events, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(12, 11), sharex=True)
    ts = [s[0] / 60 for s in series]
    for name in ("files", "kafka"):
        rates = [0.0]
        for a, b in pairwise(series):
            dt = b[0] - a[0]
            rates.append(max(0.0, (b[2][name] - a[2][name]) / dt) if dt > 0 else 0.0)
        # a moving average over 1 minute: batches commit every few seconds
        width = max(1, int(60 / max(1e-9, (series[-1][0] - series[0][0]) / max(1, len(series)))))
        smooth = [
            sum(rates[max(0, i - width + 1) : i + 1]) / len(rates[max(0, i - width + 1) : i + 1])
            for i in range(len(rates))
        ]
        axes[0].plot(ts, smooth, label=f"{name} sink, records/s committed (1 min mean)")
        axes[1].plot(ts, [s[3][name] for s in series], label=f"{name} sink lag (records)")
    produced = [0.0] + [
        (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else 0.0 for a, b in pairwise(series)
    ]
    axes[0].plot(ts, produced, color="grey", alpha=0.4, lw=0.8, label="produced records/s")
    axes[0].set_ylabel("records/s")
    axes[1].set_ylabel("records behind")
    totals = collections.defaultdict(dict)  # role -> t -> MiB (sum over its processes)
    for (role, _pid), pts in memory.items():
        base = role.split(" ")[0] if role.startswith("executor") else None
        key = (
            "executor JVMs"
            if role.endswith("JVM") and base
            else "executor Python workers"
            if base
            else role
        )
        for t, mib in pts:
            totals[key][t] = totals[key].get(t, 0.0) + mib
    for key in sorted(totals):
        pts = sorted(totals[key].items())
        axes[2].plot([t / 60 for t, _ in pts], [m for _, m in pts], label=key)
    axes[2].set_ylabel("RSS MiB (sum per role)")
    axes[2].set_xlabel("minutes")
    colours = {
        "executor_kill": "red",
        "driver_kill": "black",
        "registry_down": "purple",
        "driver_failed": "orange",
        "schema_v2": "green",
    }
    for t, kind, _ in events:
        colour = colours.get(kind)
        if colour:
            for ax in axes:
                ax.axvline(t / 60, color=colour, alpha=0.5, lw=0.8)
    axes[0].set_title(
        title + "\nlines: red executor SIGKILL, black driver SIGKILL, purple "
        "registry down, orange query failed, green schema v2",
        fontsize=9,
    )
    for ax in axes:
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


# --- results.md -------------------------------------------------------------------------------


def _kind(role):
    """'executor 3 JVM' -> 'executor JVMs' (executors are replaced and renumbered)."""
    if role.startswith("executor "):
        return "executor JVMs" if role.endswith("JVM") else "executor Python workers"
    return role


def _short_error(text, limit=320):
    """The kafka_ds error of a driver's failure line, fit for a table cell."""
    at = text.find("kafka_ds.")
    text = text[at:] if at >= 0 else text
    text = text.split(" |  SQLSTATE")[0].replace("|", "/").replace("`", "'")
    return text[:limit] + (" ..." if len(text) > limit else "")


def results_markdown(report, command, png="soak.png") -> str:
    """The soak's section of benchmarks/results.md from its summary."""
    k, f = report["kafka_sink"], report["file_sink"]
    raw, rc = k.get("raw_log", {}), k.get("read_committed_consumer", {})
    faults = report["network_faults"]
    stalls = {name[6:]: n for name, n in faults.items() if name.startswith("stall_")}
    events = report["process_events"]
    failures = report["query_failures"]
    lso = k.get("last_stable_offset", {}).get("partitions_lso_below_hw", {})
    memory = collections.defaultdict(
        lambda: {"processes": 0, "life": 0, "peak": 0.0, "growth": None, "longest": None}
    )
    for role, m in report["memory"].items():
        agg = memory[_kind(role)]
        agg["processes"] += m["processes"]
        agg["peak"] = max(agg["peak"], m["peak_mib"])
        if m["longest_life_s"] > agg["life"]:
            agg["life"] = m["longest_life_s"]
            agg["longest"] = m
        if m["max_growth_mib_per_h"] is not None:
            agg["growth"] = max(
                agg["growth"] if agg["growth"] is not None else -1e9, m["max_growth_mib_per_h"]
            )
    load = report["load_average_at_start"], report["load_average_at_end"]
    kills = [e for e in report.get("events", []) if e[1] == "driver_kill"]
    mid_commit = sum("mid-commit" in str(e[2]) for e in kills)
    before_outage = sum("registry" in str(e[2]) for e in kills)
    lines = [
        "## Soak (`soak.py`): typed, exactly-once, two executor JVMs, everything failing",
        "",
        f"Command: `{command}`"
        + (f", finished {report['finished_utc']}" if report.get("finished_utc") else "")
        + f"; {report['production_s'] / 60:.0f} min of production and "
        f"faults, then {report['catch_up_s']} s of catch-up; {report['args']['master']}, "
        f"Tansu behind the fault proxy, seed {report['seed']}. Load average "
        f"{load[0][0]:.1f} at the start, {load[1][0]:.1f} at the end (2 cores, shared).",
        "",
        "| | |",
        "|---|---|",
        f"| records produced (acknowledged) | {report['records_produced']:,} at "
        f"{report['args']['rate']}/s into {report['args']['partitions']} partitions "
        f"(Avro; writer schema version 2 from record {report['v2_from_record_id']:,}) |",
        f"| broker outages (proxy down) | {faults.get('broker_outages', 0)}, "
        f"{faults.get('broker_down_s', 0)} s down in all |",
        f"| answers stalled 1-{report['args']['stall_max']:.0f} s | "
        + ", ".join(f"{name} {n}" for name, n in sorted(stalls.items()))
        + " |",
        f"| executor JVMs SIGKILLed mid-batch | {events.get('executor', 0)} |",
        f"| driver sessions SIGKILLed | {events.get('driver', 0)}: {mid_commit} mid-commit (an "
        f"EndTxn answer held), {before_outage} right before a long registry outage |",
        f"| registry outages shorter / longer than the {report['args']['budget_ms'] // 1000} s "
        f"budget | {events.get('registry_short', 0)} / {events.get('registry_long', 0)} |",
        f"| queries failed (restarted from the checkpoints) | {len(failures)}"
        + "".join(f"; at {x['t'] / 60:.0f} min: `{_short_error(x['error'])}`" for x in failures)
        + " |",
        f"| stuck queries | {len(report['stuck'])} |",
        f"| driver starts | {report['driver_starts']} |",
        f"| file sink: rows, **lost**, **duplicated** | {f.get('rows', '?'):,}, "
        f"**{f.get('lost', '?')}**, **{f.get('duplicated', '?')}** (every acknowledged "
        "(partition, offset) once; ids match) |",
        f"| `pykafka` sink, committed transactions of the raw log: records, **lost**, "
        f"**duplicated**, aborted, **open** | {raw.get('committed_records', '?'):,}, "
        f"**{raw.get('lost')}**, **{raw.get('duplicated')}**, {raw.get('aborted_records')}, "
        f"**{raw.get('open_records')}** ({raw.get('commit_markers')} commits; decoded by "
        "confluent-kafka's AvroDeserializer, ids match; "
        f"{raw.get('records_with_v2_field_set', 0):,} carry the version-2 field) |",
        f"| `read_committed` consumer (confluent-kafka): records, lost, duplicated | "
        f"{rc.get('records', '?'):,}, {rc.get('lost')}, {rc.get('duplicated')} "
        "(reached the high watermark of every partition) |"
        if all(
            pos >= hw - 1 for pos, hw in rc.get("last_offset_read_vs_high_watermark", {}).values()
        )
        else f"| `read_committed` consumer (confluent-kafka): records, lost, duplicated | "
        f"{rc.get('records', '?')}, {rc.get('lost')}, {rc.get('duplicated')} (stopped before "
        f"the high watermark: {rc.get('last_offset_read_vs_high_watermark')}) |",
        f"| last stable offset == high watermark | "
        f"{'every partition' if not lso else 'NOT: ' + json.dumps(lso)} |",
        f"| mean throughput, records/s | produced {report['throughput_records_per_s']['produced_mean']}, "
        f"committed (over the whole run) files {report['throughput_records_per_s']['files_committed_mean']}, "
        f"Kafka {report['throughput_records_per_s']['kafka_committed_mean']} |",
        f"| largest lag, records | files {report['max_lag_records']['files']:,}, Kafka "
        f"{report['max_lag_records']['kafka']:,} |",
        "",
        "Memory (RSS from /proc every 5 s; growth: least-squares line over a process's "
        "life after its first 2 minutes, for processes that lived at least 7 minutes):",
        "",
        "| process | processes seen | longest life | longest-lived: first -> last MiB | "
        "peak MiB | growth MiB/h (longest-lived) | largest growth MiB/h |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for kind in sorted(memory):
        agg = memory[kind]
        m = agg["longest"]
        lines.append(
            f"| {kind} | {agg['processes']} | {agg['life'] / 60:.0f} min | "
            f"{m['longest_first_mib']} -> {m['longest_last_mib']} | {agg['peak']} | "
            f"{m['longest_growth_mib_per_h'] if m['longest_growth_mib_per_h'] is not None else '--'} | "
            f"{agg['growth'] if agg['growth'] is not None else '--'} |"
        )
    lines += ["", f"![soak: throughput, lag and memory over time]({png})", ""]
    return "\n".join(lines)


# --- the run ----------------------------------------------------------------------------------


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="faults and production")
    parser.add_argument("--rate", type=int, default=200, help="records/s produced")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--trigger-ms", type=int, default=5000)
    parser.add_argument("--max-offsets", type=int, default=5000)
    parser.add_argument("--fault-every", type=float, default=30.0, help="s between network faults")
    parser.add_argument("--down-max", type=float, default=20.0)
    parser.add_argument("--stall-max", type=float, default=40.0)
    parser.add_argument(
        "--budget-ms",
        type=int,
        default=20000,
        help="schema.registry.retry.budget.ms of the queries",
    )
    parser.add_argument("--txn-timeout-ms", type=int, default=180000)
    parser.add_argument(
        "--event-every",
        type=float,
        default=None,
        help="s between process/registry events (default: minutes*60/10)",
    )
    parser.add_argument(
        "--plan",
        default="executor_kill,registry_short,driver_kill,"
        "registry_long_driver,executor_kill,driver_kill,registry_long_executor",
        help="the process/registry events, in turn",
    )
    parser.add_argument("--stuck-s", type=float, default=600.0)
    parser.add_argument("--catch-up-s", type=float, default=1800.0)
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out-dir", default=HERE)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--write-results",
        action="store_true",
        help="put the figures into benchmarks/results.md (section 'soak')",
    )
    parser.add_argument(
        "--results-from",
        metavar="SUMMARY_JSON",
        help="only write results.md's section from an earlier run's summary",
    )
    args = parser.parse_args(argv)
    command = "PYSPARK_PYTHON=.venv/bin/python .venv/bin/python benchmarks/soak.py " + " ".join(
        a
        for a in (argv if argv is not None else sys.argv[1:])
        if not a.startswith("--results-from") and not a.endswith(".json")
    )
    if args.results_from:
        with open(args.results_from) as f:
            report = json.load(f)
        command = report.get("command", command)
        _write_results(report, command)
        return 0
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)

    from tests.support import spark_home
    from tests.support.brokers import TansuBroker
    from tests.support.faultproxy import FaultProxy
    from tests.support.schema_registry import FakeSchemaRegistry

    spark_home.install()

    work = tempfile.mkdtemp(prefix="kafka_ds-soak-")
    events = []  # (t, kind, detail)
    broker = TansuBroker()
    registry = FakeSchemaRegistry().start()
    proxy = producer = faults = sampler = driver = None
    report = {
        "seed": seed,
        "work_dir": work,
        "args": vars(args),
        "load_average_at_start": os.getloadavg(),
    }
    budget_s = args.budget_ms / 1000.0
    registry_down = {"since": None}

    outages = []

    def registry_stop(seconds, why):
        registry.stop()
        registry_down["since"] = now()
        events.append((now(), "registry_down", f"{seconds:.0f} s ({why})"))
        outages.append({"t": now(), "seconds": round(seconds, 1), "why": why})
        log(f"registry down for {seconds:.0f} s ({why})")

    def registry_start():
        registry.start()
        registry_down["since"] = None
        outage = outages[-1]
        before = len(registry.requests)

        def count_after():  # lookups that waited through the outage come in right after it
            outage["requests_in_60_s_after"] = len(registry.requests) - before

        threading.Timer(60, count_after).start()
        log("registry up")

    try:
        source, sink = f"soak-src-{seed}", f"soak-sink-{seed}"
        broker.create_topic(source, partitions=args.partitions)
        broker.create_topic(sink, partitions=args.partitions)
        proxy = FaultProxy(broker.bootstrap_servers)
        spec = {
            "master": args.master,
            "bootstrap": proxy.bootstrap_servers,
            "registry": registry.url,
            "budget_ms": args.budget_ms,
            "source": source,
            "sink_topic": sink,
            "file_sink": os.path.join(work, "files"),
            "file_checkpoint": os.path.join(work, "ck-files"),
            "kafka_checkpoint": os.path.join(work, "ck-kafka"),
            "trigger_ms": args.trigger_ms,
            "max_offsets": args.max_offsets,
            "txn_timeout_ms": args.txn_timeout_ms,
            "stop_file": os.path.join(work, "STOP"),
        }
        checkpoints = {"files": spec["file_checkpoint"], "kafka": spec["kafka_checkpoint"]}
        producer = SourceProducer(
            broker.bootstrap_servers, registry.url, source, args.partitions, args.rate
        )
        producer.start()
        driver = Driver(spec, work)
        driver.start()
        sampler = Sampler(args.sample_every, driver, producer, checkpoints, source)
        sampler.start()
        faults = NetworkFaults(proxy, args.fault_every, args.down_max, args.stall_max, rng, events)
        faults.start()

        run_s = args.minutes * 60
        every = args.event_every or max(60.0, run_s / 10)
        plan = args.plan.split(",")
        next_event = every * rng.uniform(0.6, 1.0)
        v2_at = run_s * 0.4
        event_no = 0
        stuck = []

        def watch(until, stop_on_exit=False):
            """Supervise the driver until ``until`` (seconds since start): restart it when it
            exits by itself, and a query that is stuck."""
            while now() < until:
                if not driver.alive:
                    driver.note_exit()
                    events.append((now(), "driver_failed", driver.failures[-1]["error"][:200]))
                    if registry_down["since"] is not None:
                        # waits for the registry to come back (a long outage) before a restart
                        while registry_down["since"] is not None and now() < until:
                            time.sleep(1)
                    time.sleep(5)
                    driver.start()
                    for name in sampler.last_progress:
                        sampler.last_progress[name] = (now(), sampler.last_progress[name][1])
                    continue
                if sampler.series:
                    lag = sampler.series[-1][3]
                    for name, (since, batch) in sampler.last_progress.items():
                        if lag.get(name, 0) > 0 and now() - since > args.stuck_s:
                            detail = (
                                f"query {name} committed no batch for {now() - since:.0f} s "
                                f"(last batch {batch}, lag {lag[name]})"
                            )
                            log("STUCK: " + detail)
                            stuck.append(
                                {
                                    "t": now(),
                                    "detail": detail,
                                    "driver_log_tail": driver.output()[-3000:],
                                }
                            )
                            events.append((now(), "stuck", detail))
                            driver.kill()
                            driver.start()
                            for n in sampler.last_progress:
                                sampler.last_progress[n] = (now(), sampler.last_progress[n][1])
                            break
                time.sleep(1)

        def wait_for(predicate, timeout):
            deadline = now() + timeout
            while now() < deadline:
                if predicate():
                    return True
                watch(now() + 1)
            return False

        def batch_running():
            return any(checkpoint_state(c, source)[2] for c in checkpoints.values())

        def kill_executor(why):
            if not wait_for(
                lambda: (
                    driver.alive
                    and driver.started()
                    and batch_running()
                    and executor_pids(driver.proc.pid)
                ),
                180,
            ):
                log(f"no running batch to kill an executor in ({why})")
                return None
            pids = executor_pids(driver.proc.pid)
            pid = rng.choice(pids)
            os.kill(pid, signal.SIGKILL)
            events.append((now(), "executor_kill", f"pid {pid} ({why})"))
            log(f"SIGKILL executor JVM {pid} mid-batch ({why})")
            return pid

        def wait_new_executor_python(old, timeout=300):
            """Until a Python worker of an executor JVM not in ``old`` runs (its first task:
            it is about to look the writer schemas up)."""

            def ready():
                if not driver.alive:
                    return False
                new = set(executor_pids(driver.proc.pid)) - old
                return bool(new and python_under(new, driver.proc.pid))

            return wait_for(ready, timeout)

        def executor_then_registry_outage(length, draw_seconds, why, counter):
            """SIGKILL an executor, then stop the registry for ``draw_seconds()`` (drawn
            after the kill, as the seed's schedule has it) while the new executor's Python
            workers look the writer schemas up."""
            old = set(executor_pids(driver.proc.pid)) if driver.alive else set()
            if kill_executor(f"then a {length} registry outage") is None:
                return
            kills["executor"] += 1
            wait_new_executor_python(old)
            seconds = draw_seconds()
            registry_stop(seconds, why)
            watch(now() + seconds)
            registry_start()
            kills[counter] += 1

        def wait_driver_planning(timeout=300):
            """Until the new driver starts its first Python data source worker (before it
            looks the reader schema up)."""

            def ready():
                if not driver.alive:
                    return False
                table = proc_table()
                return any(
                    "pyspark.sql.worker" in table[p][3]
                    for p in session_pids(driver.proc.pid, table)
                )

            return wait_for(ready, timeout)

        kills = collections.Counter()
        while now() < run_s:
            watch(min(run_s, next_event if v2_at is None else min(next_event, v2_at)))
            if now() >= run_s:
                break
            if v2_at is not None and now() >= v2_at:
                producer.switch_to_v2()
                events.append((now(), "schema_v2", "writer schema version 2 registered"))
                log("schema version 2 registered; the producer writes it from now on")
                v2_at = None
                continue
            kind = plan[event_no % len(plan)]
            event_no += 1
            next_event = now() + every * rng.uniform(0.7, 1.3)
            log(f"event {event_no}: {kind}")
            if kind == "executor_kill":
                if kill_executor("plain") is not None:
                    kills["executor"] += 1
            elif kind == "registry_short":
                executor_then_registry_outage(
                    "short",
                    lambda: budget_s * rng.uniform(0.25, 0.6),
                    "shorter than the budget, new executor starting",
                    "registry_short",
                )
            elif kind == "driver_kill":
                if not wait_for(lambda: driver.alive and driver.started(), 300):
                    log("driver not running: no mid-commit kill")
                    continue
                proxy.inject(END_TXN, "hold")
                held = wait_for(lambda: proxy.wait_held(0), 300)
                proxy.clear_faults()
                driver.kill()
                kills["driver"] += 1
                events.append(
                    (
                        now(),
                        "driver_kill",
                        "mid-commit (EndTxn answer held)" if held else "no commit seen",
                    )
                )
                log(f"SIGKILL driver session {'mid-commit' if held else '(no commit held)'}")
                driver.start()
            elif kind == "registry_long_driver":
                seconds = budget_s + rng.uniform(15, 30)
                driver.kill()
                kills["driver"] += 1
                events.append((now(), "driver_kill", "before a long registry outage"))
                driver.start()
                wait_driver_planning()
                registry_stop(seconds, "longer than the budget, driver restarting")
                watch(now() + seconds)
                registry_start()
                kills["registry_long"] += 1
            elif kind == "registry_long_executor":
                executor_then_registry_outage(
                    "long",
                    lambda: budget_s + rng.uniform(15, 30),
                    "longer than the budget, executor replaced",
                    "registry_long",
                )
        # --- the end: faults off, production off, catch up -----------------------------------
        log("faults and production stop; catching up")
        faults.stopping.set()
        faults.join(120)
        proxy.clear_faults()
        proxy.up()
        if registry_down["since"] is not None:
            registry_start()
        producer.stopping.set()
        producer.join(900)
        ends = producer.end_offsets()
        produced_total = producer.acked()
        report["production_s"] = now()

        def caught_up():
            for checkpoint in checkpoints.values():
                _, offsets, _ = checkpoint_state(checkpoint, source)
                if any(offsets.get(p, 0) < ends[p] for p in range(args.partitions)):
                    return False
            return True

        caught = wait_for(caught_up, args.catch_up_s)
        report["catch_up_s"] = round(now() - report["production_s"])
        open(spec["stop_file"], "w").close()
        stopped = False
        deadline = now() + 300
        while now() < deadline and driver.alive:
            time.sleep(1)
        if driver.alive:
            driver.kill()
        else:
            stopped = "STOPPED" in driver.output()
            if not stopped:
                driver.note_exit()
        sampler.stopping.set()
        sampler.join(30)
        sampler.sample()
        report["seconds"] = now()
        report["load_average_at_end"] = os.getloadavg()
        log(f"caught up: {caught}; checking")

        acked = producer.acknowledged()
        import traceback

        try:
            rows, files = file_sink_rows(spec["file_sink"])
            counts = collections.Counter((p, o) for p, o, _ in rows)
            wrong = sum(1 for p, o, i in rows if acked.get((p, o), i) != i)
            file_result = {
                "files": files,
                "rows": len(rows),
                "lost": len(set(acked) - set(counts)),
                "duplicated": sum(n - 1 for n in counts.values() if n > 1),
                "unexpected": len(set(counts) - set(acked)),
                "value_mismatch": wrong,
            }
        except Exception:  # noqa: BLE001 - the summary and the plot are still written
            file_result = {"check_failed": traceback.format_exc()}
        try:
            kafka_result = check_kafka_sink(
                broker.bootstrap_servers, registry.url, sink, args.partitions, acked
            )
        except Exception:  # noqa: BLE001
            kafka_result = {
                "check_failed": traceback.format_exc(),
                "raw_log": {"lost": -1, "duplicated": -1, "open_records": -1, "value_mismatch": -1},
            }
        first_t, last_t = sampler.series[0][0], report["production_s"]
        committed_by_end = {name: sampler.series[-1][2][name] for name in checkpoints}
        max_lag = {name: max(s[3][name] for s in sampler.series) for name in checkpoints}
        report.update(
            {
                "caught_up": caught,
                "stopped_cleanly": stopped,
                "records_produced": produced_total,
                "producer_failures": producer.failed,
                "producer_errors": dict(producer.errors),
                "v2_from_record_id": producer.v2_from_id,
                "throughput_records_per_s": {
                    "produced_mean": round(produced_total / max(1.0, last_t - first_t), 1),
                    **{
                        f"{n}_committed_mean": round(
                            committed_by_end[n] / max(1.0, report["seconds"] - first_t), 1
                        )
                        for n in checkpoints
                    },
                },
                "max_lag_records": max_lag,
                "network_faults": dict(faults.counts),
                "process_events": dict(kills),
                "registry_outages": outages,
                "driver_starts": driver.starts,
                "driver_kills_by_soak": driver.kills,
                "query_failures": driver.failures,
                "stuck": stuck,
                "file_sink": file_result,
                "kafka_sink": kafka_result,
                "memory": memory_summary(sampler.memory),
                "events": events,
            }
        )
        raw = kafka_result["raw_log"]
        ok = (
            "check_failed" not in file_result
            and "check_failed" not in kafka_result
            and caught
            and file_result["lost"] == 0
            and file_result["duplicated"] == 0
            and file_result["value_mismatch"] == 0
            and raw["lost"] == 0
            and raw["duplicated"] == 0
            and raw["open_records"] == 0
            and raw["value_mismatch"] == 0
            and not stuck
        )
        report["ok"] = ok
        report["command"] = command
        report["finished_utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "soak_summary.json"), "w") as f:
            json.dump(report, f, indent=1, default=str)
        title = (
            f"soak {report['seconds'] / 60:.0f} min, {produced_total:,} records, "
            f"seed {seed}, {args.master}"
        )
        plot(os.path.join(args.out_dir, "soak.png"), sampler.series, sampler.memory, events, title)
        print(json.dumps({k: v for k, v in report.items() if k != "events"}, default=str))
        if args.write_results:
            _write_results(report, command)
        return 0 if ok else 1
    finally:
        if driver is not None and driver.alive:
            driver.kill()
        for thread in (faults, sampler, producer):
            if thread is not None:
                thread.stopping.set()
        if proxy is not None:
            proxy.close()
        registry.stop()
        broker.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _write_results(report, command):
    from benchmarks.run_all import replace_section

    replace_section(
        os.path.join(HERE, "results.md"), "soak", results_markdown(report, command.strip())
    )


if __name__ == "__main__":
    sys.exit(main())
