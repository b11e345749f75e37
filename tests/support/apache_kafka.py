"""Apache Kafka itself (KRaft, combined broker+controller nodes) from Maven Central's jars.

The suite's ``kafka`` (one node) and ``kafka3`` (three nodes, replication factor 3,
``min.insync.replicas=2``) brokers, and a launcher for people::

    python -m tests.support.apache_kafka [--brokers N] [--version V]

prints ``bootstrap.servers=127.0.0.1:P,...`` and runs until Ctrl-C or SIGTERM, then removes
everything it made.

The jars: ``tests/support/maven/pom.xml`` names ``org.apache.kafka:kafka_2.13`` (and a log4j
binding); ``mvn dependency:build-classpath`` resolves it once per version into Maven's own
cache (``~/.m2``) and the classpath is kept in ``.venv-kafka/kafka-V.classpath``, so a later
run starts at once. Nothing is built, nothing is committed.

Each node runs under ``mock_cluster_child.py guard``: the JVM dies with its guard
(PR_SET_PDEATHSIG), and the guard ends it when its owner process exits (``--owner``), so
a broker shared by pytest-xdist workers lives as long as the pytest run, not as long as the
worker that happened to start it (tests/conftest.py).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from tests.support import procfs
from tests.support.brokers import (
    HOST,
    BrokerError,
    _Broker,
    _live,
    _log_tail,
    api_versions,
    free_ports,
)
from tests.support.guarded import jvm_environment, start_guarded

DEFAULT_VERSION = "4.4.0"  # the newest Apache Kafka release; the suite's `kafka` and `kafka3`
OLDER_VERSION = "3.9.1"  # the last 3.x line (KRaft): a smoke set on an older broker
POM = Path(__file__).resolve().with_name("maven") / "pom.xml"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("KAFKA_DS_KAFKA_CACHE") or PROJECT_ROOT / ".venv-kafka")

# Broker settings for a test machine. Each one says why it differs from Kafka's default.
COMMON_SETTINGS = {
    # __consumer_offsets and __transaction_state are created on first use: 50 partitions each
    # by default, which costs a first group or transaction seconds on a 2-core machine.
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    # a new group's first join answers at once (Kafka waits 3 s for more members)
    "group.initial.rebalance.delay.ms": "0",
    # the broker's background work runs within a second, so the tests of compaction,
    # retention and transaction timeouts see it happen (defaults: 15 s, 5 min, 10 s, 30 s)
    "log.cleaner.backoff.ms": "500",
    "log.retention.check.interval.ms": "1000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "log.initial.task.delay.ms": "1000",
    # a transaction may stay open for as long as a test's child driver runs (the parity
    # module holds one open for its whole child run, 20 minutes at most: Kafka's cap is 15)
    "transaction.max.timeout.ms": "3600000",
    # Tests write records stamped 1970 and 2023; Kafka's 7-day time retention would delete
    # them while a test reads (within a second, with the check interval above). The tests of
    # retention set retention.ms on their topic.
    "log.retention.ms": "-1",
    # a SIGKILLed node is fenced (and leaves the ISR) after 4 s instead of 9 s
    "broker.session.timeout.ms": "4000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "5000",
    # fewer threads: several JVMs share two cores with Spark
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "log.cleaner.threads": "1",
    "num.recovery.threads.per.data.dir": "1",
}


def _replication_settings(nodes: int) -> dict:
    replicas = min(nodes, 3)
    in_sync = 2 if replicas >= 3 else 1
    return {
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(in_sync),
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(in_sync),
    }


# The JVM: a bounded heap, the serial collector and C1 only (start-up costs half the CPU of
# the default tiered compilation). JAVA_TOOL_OPTIONS of the suite (Spark's class archive) is
# not passed on.
TEST_JVM_OPTIONS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
HEAP = {1: "512m", 3: "320m"}
# For benchmarks (benchmarks/bench_jvm.py): what bin/kafka-server-start.sh gives a broker
# (G1, C2 compilation; its 1 GiB heap is the ``heap`` argument), so that the broker's
# throughput is not the test settings' (C1 only, serial collector).
BENCHMARK_JVM_OPTIONS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
# ... and Kafka's own thread counts (COMMON_SETTINGS lowers them for a shared test machine)
BENCHMARK_SETTINGS = {
    "num.network.threads": "3",
    "num.io.threads": "8",
    "background.threads": "10",
}


@contextlib.contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise BrokerError("Apache Kafka needs Java 17 or later: no `java` on PATH or in JAVA_HOME")
    return java


def classpath(version: str = DEFAULT_VERSION) -> str:
    """Apache Kafka's classpath: resolved by Maven from Maven Central once, then cached."""
    target = CACHE_DIR / f"kafka-{version}.classpath"
    with _locked(CACHE_DIR / f"kafka-{version}.lock"):
        if target.exists():
            jars = target.read_text().strip()
            if jars and all(os.path.exists(jar) for jar in jars.split(os.pathsep)):
                return jars
        mvn = shutil.which("mvn")
        if mvn is None:
            raise BrokerError(
                "Apache Kafka's jars come from Maven Central through Maven: "
                "install it (apt-get install maven) and put `mvn` on PATH"
            )
        partial = target.with_suffix(".partial")
        started = time.monotonic()
        run = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(POM),
                f"-Dkafka.version={version}",
                "dependency:build-classpath",
                f"-Dmdep.outputFile={partial}",
            ],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        if run.returncode != 0 or not partial.exists():
            raise BrokerError(
                f"mvn could not resolve org.apache.kafka:kafka_2.13:{version} "
                f"(rc={run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}"
            )
        os.replace(partial, target)
        print(
            f"resolved Apache Kafka {version} from Maven Central in "
            f"{time.monotonic() - started:.0f} s",
            file=sys.stderr,
        )
        return target.read_text().strip()


def _random_cluster_id() -> str:
    while True:  # as Kafka's Uuid.randomUuid: none that a command line reads as an option
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by its guard) is not alive
        return procfs.stat(pid).state != "Z"
    except OSError:
        return False


class Node:
    """One KRaft node (broker and controller in one JVM) of a :class:`KafkaCluster`."""

    def __init__(self, cluster: KafkaCluster, node_id: int, port: int, controller_port: int):
        self.cluster = cluster
        self.node_id = node_id
        self.port = port
        self.controller_port = controller_port
        # extra listeners (KafkaCluster's ``listeners``): name -> port
        self.listener_ports: dict[str, int] = {}
        self.dir = os.path.join(cluster.directory, f"node-{node_id}")
        self.properties_path = os.path.join(self.dir, "server.properties")
        self.log_path = os.path.join(self.dir, "server.log")
        self.java_pid: int | None = None
        self._guard: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def write_config(self, voters: str, settings: dict):
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        extra = self.cluster.listeners
        advertised = ",".join(
            [f"PLAINTEXT://{self.address}"]
            + [f"{name}://{HOST}:{self.listener_ports[name]}" for name in extra]
        )
        protocols = ",".join(
            ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
            + [f"{name}:{protocol}" for name, protocol in extra.items()]
        )
        config = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"{advertised},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": protocols,
            "log.dirs": os.path.join(self.dir, "data"),
            **settings,
        }
        with open(self.properties_path, "w") as out:
            out.writelines(f"{key}={value}\n" for key, value in config.items())
        level = os.environ.get("KAFKA_DS_KAFKA_LOG_LEVEL", "WARN")
        with open(os.path.join(self.dir, "log4j2.properties"), "w") as out:
            out.write(
                f"rootLogger.level={level}\nrootLogger.appenderRef.file.ref=file\n"
                f"appender.file.type=File\nappender.file.name=file\n"
                f"appender.file.fileName={self.log_path}\n"
                "appender.file.layout.type=PatternLayout\n"
                "appender.file.layout.pattern=[%d] %p %m (%c)%n\n"
            )

    def _java(self, main_class: str, *args: str) -> list[str]:
        cluster = self.cluster
        return [
            java_executable(),
            f"-Xmx{cluster.heap}",
            "-Xms64m",
            *cluster.jvm_options,
            f"-Dlog4j2.configurationFile={os.path.join(self.dir, 'log4j2.properties')}",
            f"-Dkafka.logs.dir={self.dir}",
            "-cp",
            cluster.classpath,
            main_class,
            *args,
        ]

    def format_storage(self) -> subprocess.Popen:
        return subprocess.Popen(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                self.cluster.cluster_id,
                "-c",
                self.properties_path,
                *self.cluster.format_args,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=jvm_environment(),
        )

    def start(self):
        """Start the JVM (returns at once; :meth:`KafkaCluster.wait_ready` waits for it)."""
        cmd = self._java("kafka.Kafka", self.properties_path)
        self._guard, pid = start_guarded(
            cmd,
            os.path.join(self.dir, "stdout.log"),
            self.cluster.owner_pid,
            10,
            env=jvm_environment(),
        )
        if pid is None:
            raise BrokerError(f"node {self.node_id}: the guard did not start the JVM")
        self.java_pid = pid

    def is_alive(self) -> bool:
        return _pid_alive(self.java_pid)

    def kill(self):
        """SIGKILL: no controlled shutdown, no flush; the node's data stays for a restart."""
        if self.java_pid and _pid_alive(self.java_pid):
            os.kill(self.java_pid, signal.SIGKILL)
        self._wait_gone(10)

    def shutdown(self, timeout: float = 60.0):
        """SIGTERM: Kafka's controlled shutdown (leaders move away first)."""
        if self.java_pid and _pid_alive(self.java_pid):
            os.kill(self.java_pid, signal.SIGTERM)
        self._wait_gone(timeout)

    def _wait_gone(self, timeout: float):
        deadline = time.monotonic() + timeout
        while _pid_alive(self.java_pid):
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"node {self.node_id} (pid {self.java_pid}) still running after {timeout}s"
                )
            time.sleep(0.05)
        if self._guard is not None:
            self._guard.wait(10)
            self._guard = None

    def log_tail(self, lines: int = 30) -> str:
        return (
            _log_tail(os.path.join(self.dir, "stdout.log"), lines)
            + "\n"
            + _log_tail(self.log_path, lines)
        )


class KafkaCluster(_Broker):
    """``nodes`` KRaft nodes on free 127.0.0.1 ports, each broker and controller.

    With three nodes: replication factor 3 for new topics and the internal topics,
    ``min.insync.replicas=2``. :meth:`kill`, :meth:`restart` and :meth:`shutdown` act on one
    node; :meth:`leader` names a partition's leader.
    """

    name = "kafka"

    def __init__(
        self,
        nodes: int = 1,
        version: str = DEFAULT_VERSION,
        *,
        settings: dict | None = None,
        owner_pid: int | None = None,
        start_timeout: float = 120.0,
        name: str | None = None,
        listeners: dict | None = None,
        format_args: tuple = (),
        prepare=None,
        ready=None,
        jvm_options: tuple[str, ...] = TEST_JVM_OPTIONS,
        heap: str | None = None,
    ):
        """``listeners``: extra listeners besides PLAINTEXT (inter-broker, the suite's admin)
        and CONTROLLER, ``{name: security protocol}``, each on a free port of every node
        (:meth:`listener_servers`). ``format_args``: extra ``kafka-storage format``
        arguments (e.g. ``--add-scram``). ``prepare(cluster) -> dict``: called before the
        configs are written (files in ``cluster.directory``), its settings are added;
        ``ready(cluster)``: called once the nodes answer (e.g. to create ACLs).
        ``jvm_options``/``heap``: the nodes' JVM flags (default: the test machine's,
        ``TEST_JVM_OPTIONS``; benchmarks give ``BENCHMARK_JVM_OPTIONS`` and ``"1g"``)."""
        if name:
            self.name = name
        super().__init__()
        self.version = version
        self.directory = self._tmpdir
        self.owner_pid = owner_pid or os.getpid()
        self.owned = True
        self.heap = heap or HEAP.get(nodes, "384m")
        self.jvm_options = tuple(jvm_options)
        self.cluster_id = _random_cluster_id()
        self.classpath = classpath(version)
        self.listeners = dict(listeners or {})
        self.format_args = tuple(format_args)
        self._prepare, self._ready = prepare, ready
        self.settings = {**COMMON_SETTINGS, **_replication_settings(nodes), **(settings or {})}
        ports = iter(free_ports(nodes * (2 + len(self.listeners))))
        self.nodes = [
            Node(self, node_id, next(ports), next(ports)) for node_id in range(1, nodes + 1)
        ]
        for node in self.nodes:
            node.listener_ports = {name: next(ports) for name in self.listeners}
        self.log_path = self.nodes[0].log_path
        self.bootstrap_servers = ",".join(node.address for node in self.nodes)
        self.broker_ids = [node.node_id for node in self.nodes]
        _live.add(self)
        try:
            self._start(start_timeout)
        except BaseException:
            self.stop()
            raise

    # -- life
    def _start(self, start_timeout: float):
        started = time.monotonic()
        voters = ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in self.nodes)
        if self._prepare is not None:
            self.settings.update(self._prepare(self))
        for node in self.nodes:
            node.write_config(voters, self.settings)
        formats = [(node, node.format_storage()) for node in self.nodes]
        for node, run in formats:
            output = run.communicate(timeout=120)[0].decode("utf-8", "replace")
            if run.returncode != 0:
                raise BrokerError(
                    f"kafka-storage format failed for node {node.node_id}:\n{output[-3000:]}"
                )
        for node in self.nodes:
            node.start()
        self.wait_ready(start_timeout - (time.monotonic() - started))
        if self._ready is not None:
            self._ready(self)
        self.start_seconds = time.monotonic() - started

    def wait_ready(self, timeout: float = 60.0, nodes: list[Node] | None = None):
        """Until every node (or those given) answers and Metadata lists all of them."""
        deadline = time.monotonic() + max(timeout, 1.0)
        waiting = nodes or self.nodes
        last: object = None
        while True:
            dead = [node for node in waiting if not node.is_alive()]
            if dead:
                raise BrokerError(
                    f"{self.name}: node {dead[0].node_id} exited during start-up\n"
                    f"{dead[0].log_tail()}"
                )
            try:
                for node in waiting:
                    api_versions(node.address, timeout=2.0)
                listed = set(self.admin().list_topics(timeout=2.0).brokers)
                if all(node.node_id in listed for node in self.nodes):
                    return
                last = f"Metadata lists brokers {sorted(listed)}"
            except Exception as e:  # refused while starting, or Metadata without all brokers
                last = e
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{self.name} not ready after {timeout:.0f}s: {last!r}\n{waiting[0].log_tail()}"
                )
            time.sleep(0.1)

    def listener_servers(self, name: str) -> str:
        """``host:port,...`` of the extra listener ``name`` on every node."""
        return ",".join(f"{HOST}:{node.listener_ports[name]}" for node in self.nodes)

    def rss_bytes(self) -> int:
        """Resident memory of the nodes' JVMs (from /proc), for the suite's README."""
        total = 0
        for node in self.nodes:
            if node.java_pid is None:  # not started, or stopped
                continue
            with contextlib.suppress(OSError, ValueError):
                total += procfs.rss_bytes(node.java_pid)
        return total

    def node(self, node_id: int) -> Node:
        return next(node for node in self.nodes if node.node_id == node_id)

    def leader(self, topic: str, partition: int, timeout: float = 30.0) -> int:
        """The partition's leader, once Metadata names one (a topic just created may not be
        in the answering node's metadata yet)."""
        deadline = time.monotonic() + timeout
        while True:
            partitions = self.topic_metadata(topic) or {}
            leader = partitions.get(partition, (-1, []))[0]
            if leader >= 0:
                return leader
            if time.monotonic() > deadline:
                raise BrokerError(f"{topic}-{partition} has no leader after {timeout}s")
            time.sleep(0.1)

    def in_sync_replicas(self, topic: str, partition: int) -> list[int]:
        metadata = self.list_topics().get(topic)
        if metadata is None:
            raise BrokerError(f"{topic} is not in the metadata")
        return sorted(metadata.partitions[partition].isrs)

    def kill(self, node_id: int):
        """SIGKILL one node."""
        self.node(node_id).kill()

    def shutdown(self, node_id: int, timeout: float = 60.0):
        """Controlled shutdown of one node (SIGTERM)."""
        self.node(node_id).shutdown(timeout)

    def restart(self, node_id: int, timeout: float = 60.0):
        """Start a stopped or killed node again on its data; returns once Metadata lists it."""
        node = self.node(node_id)
        if node.is_alive():
            raise BrokerError(f"node {node_id} is running")
        # The admin client is kept: librdkafka 2.16 aborts the process when an AdminClient
        # is destroyed with a request to a killed node pending; it reconnects by itself.
        node.start()
        self.wait_ready(timeout, nodes=[node])

    def wait_in_sync(self, topic: str, partitions: int, replicas: int, timeout: float = 60.0):
        """Until every partition of the topic has ``replicas`` in-sync replicas."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                metadata = self.list_topics().get(topic)
                if (
                    metadata
                    and len(metadata.partitions) == partitions
                    and all(len(p.isrs) >= replicas for p in metadata.partitions.values())
                ):
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{topic}: fewer than {replicas} in-sync replicas after {timeout}s"
                )
            time.sleep(0.1)

    def is_alive(self) -> bool:
        return not self._stopped and all(node.is_alive() for node in self.nodes)

    def log_tail(self) -> str:
        return "\n".join(node.log_tail() for node in self.nodes)

    def stop(self):
        if self._stopped:
            return
        self._stopped = True
        self._close_admin()
        try:
            if self.owned:
                for node in self.nodes:
                    if node.java_pid and _pid_alive(node.java_pid):
                        os.kill(node.java_pid, signal.SIGKILL)  # the data is thrown away
                for node in self.nodes:
                    with contextlib.suppress(BrokerError):
                        node._wait_gone(10)
        finally:
            _live.discard(self)
            if self.owned:
                self._remove_tmpdir()

    # -- topics
    def wait_topic(self, topic: str, partitions: int | None = None, timeout: float = 15.0):
        """Until the metadata names every partition's leader, then until each leader answers
        ListOffsets for it. A KRaft broker shows a new topic in its metadata before its
        replica manager has taken the partitions; a Produce or ListOffsets in between gets
        NOT_LEADER_OR_FOLLOWER (95 of 200 new 3-partition topics under load). An ``acks=0``
        write then loses every record, and a producer's retry can reorder its batches."""
        from confluent_kafka import KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        deadline = time.monotonic() + timeout
        leaders = super().wait_topic(topic, partitions, timeout)
        waiting = {TopicPartition(topic, partition) for partition in leaders}
        while True:
            answers = self.admin().list_offsets(
                {tp: OffsetSpec.latest() for tp in waiting},
                request_timeout=max(0.5, min(5.0, deadline - time.monotonic())),
            )
            errors = {}
            for tp, answer in answers.items():
                try:
                    answer.result()
                except KafkaException as e:
                    errors[tp] = e
            waiting = set(errors)
            if not waiting:
                return leaders
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{self.name}: topic {topic!r} not served after {timeout}s: {errors}"
                )
            time.sleep(0.05)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication: int | None = None,
        wait: bool = True,
        timeout: float = 30.0,
        config: dict | None = None,
    ) -> str:
        from confluent_kafka.admin import NewTopic

        replicas = int(replication) if replication else len(self.nodes[:3])
        future = self.admin().create_topics(
            [
                NewTopic(
                    name,
                    num_partitions=int(partitions),
                    replication_factor=replicas,
                    config=config or {},
                )
            ],
            operation_timeout=timeout,
            request_timeout=timeout,
        )[name]
        future.result(timeout=timeout)
        if wait:
            self.wait_topic(name, partitions, timeout)
        return name

    def delete_topic(self, name: str, wait: bool = True, timeout: float = 30.0):
        future = self.admin().delete_topics(
            [name], operation_timeout=timeout, request_timeout=timeout
        )[name]
        future.result(timeout=timeout)
        if wait:
            self.wait_topic_gone(name, timeout)

    def set_leader(self, topic: str, partition: int, broker_id: int):
        raise NotImplementedError("Apache Kafka moves leaders itself: kill or shut down a node")

    # -- shared by pytest-xdist workers
    def state(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "directory": self.directory,
            "owner_pid": self.owner_pid,
            "cluster_id": self.cluster_id,
            "start_seconds": round(getattr(self, "start_seconds", 0.0), 1),
            "heap": self.heap,
            "listeners": self.listeners,
            "nodes": [
                {
                    "node_id": n.node_id,
                    "port": n.port,
                    "controller_port": n.controller_port,
                    "java_pid": n.java_pid,
                    "listener_ports": n.listener_ports,
                }
                for n in self.nodes
            ],
        }

    @classmethod
    def attach(cls, state: dict) -> KafkaCluster:
        """A handle on a cluster another process started (it stops it, not this handle)."""
        cluster = cls.__new__(cls)
        cluster.name = state["name"]
        cluster._admin = None
        cluster._stopped = False
        cluster._tmpdir = cluster.directory = state["directory"]
        cluster.version = state["version"]
        cluster.owner_pid = state["owner_pid"]
        cluster.cluster_id = state["cluster_id"]
        cluster.start_seconds = state.get("start_seconds", 0.0)
        cluster.owned = False
        cluster.heap = state.get("heap") or HEAP.get(len(state["nodes"]), "384m")
        cluster.listeners = dict(state.get("listeners") or {})
        cluster.format_args = ()
        cluster._prepare = cluster._ready = None
        cluster.jvm_options = TEST_JVM_OPTIONS
        cluster.classpath = ""
        cluster.settings = {}
        cluster.nodes = []
        for entry in state["nodes"]:
            node = Node(cluster, entry["node_id"], entry["port"], entry["controller_port"])
            node.java_pid = entry["java_pid"]
            node.listener_ports = dict(entry.get("listener_ports") or {})
            cluster.nodes.append(node)
        cluster.log_path = cluster.nodes[0].log_path
        cluster.bootstrap_servers = ",".join(node.address for node in cluster.nodes)
        cluster.broker_ids = [node.node_id for node in cluster.nodes]
        return cluster


def shared_cluster(state_dir: str, name: str, owner_pid: int, **kwargs) -> KafkaCluster:
    """The cluster ``name`` of this pytest run: started by the first process that asks (under
    a file lock), attached to by the others. The owner (pytest's main process) stops it with
    :func:`stop_shared`."""
    state_path = Path(state_dir) / f"{name}.json"
    with _locked(Path(state_dir) / f"{name}.lock"):
        if state_path.exists():
            state = json.loads(state_path.read_text())
            if "error" in state:
                raise BrokerError(f"{name} failed to start earlier: {state['error']}")
            return KafkaCluster.attach(state)
        try:
            cluster = KafkaCluster(owner_pid=owner_pid, name=name, **kwargs)
        except Exception as e:
            state_path.write_text(json.dumps({"error": str(e)[:2000]}))
            raise
        cluster.owned = False  # pytest's main process removes it (stop_shared)
        _live.discard(cluster)
        state_path.write_text(json.dumps(cluster.state()))
        return cluster


def stop_shared(state_dir: str):
    """Kill every cluster (and the registry) recorded in ``state_dir`` and remove their
    files (pytest's end)."""
    for state_path in Path(state_dir).glob("*.json"):
        state = json.loads(state_path.read_text())
        # a cluster's nodes, or one JVM (the shared Apicurio registry, tests/support/apicurio.py)
        pids = [entry["java_pid"] for entry in state.get("nodes", ())]
        if state.get("java_pid"):
            pids.append(state["java_pid"])
        if not pids:
            continue
        for pid in pids:
            if _pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if not os.environ.get("KAFKA_DS_KEEP_BROKER_LOGS"):
            shutil.rmtree(state["directory"], ignore_errors=True)
    shutil.rmtree(state_dir, ignore_errors=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.apache_kafka",
        description="Start Apache Kafka (KRaft) on 127.0.0.1 from Maven Central's jars; print "
        "its bootstrap servers; run until Ctrl-C or SIGTERM, then remove it all.",
    )
    parser.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="number of nodes (each broker and controller); 3 gives replication "
        "factor 3 and min.insync.replicas=2 (default 1)",
    )
    parser.add_argument(
        "--version",
        default=DEFAULT_VERSION,
        help=f"Apache Kafka release from Maven Central (default {DEFAULT_VERSION})",
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cluster = KafkaCluster(args.brokers, args.version)
    try:
        print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
        print(
            f"Apache Kafka {args.version}, {args.brokers} node(s), started in "
            f"{cluster.start_seconds:.1f} s; Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.5):
            if not cluster.is_alive():
                print("a node exited:\n" + cluster.log_tail(), file=sys.stderr)
                return 1
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
