"""Kafka Connect (standalone) with Debezium's PostgreSQL connector, for the change-data tests.

Real change events: a PostgreSQL server (tests/support/postgres.py) and one Kafka Connect
worker that writes to the suite's Apache Kafka node. Tests add their own connectors through
Connect's REST API (:meth:`ConnectWorker.add_connector`) on tables of their own. A launcher
for people::

    python -m tests.support.debezium [--bootstrap HOST:PORT]

starts Apache Kafka (unless ``--bootstrap`` names one), PostgreSQL and the worker, prints
their addresses and runs until Ctrl-C or SIGTERM.

The jars: ``tests/support/maven/debezium/pom.xml`` names Apache Kafka's own
``connect-runtime`` and ``connect-json`` (4.3.0, the release Debezium 3.6 is built against) and
``io.debezium:debezium-connector-postgres`` 3.6.1.Final; ``mvn dependency:build-classpath``
resolves them once into Maven's cache (``~/.m2``, 40 MB) and the classpath is kept in
``.venv-kafka/connect-debezium-V.classpath``. Debezium sits on the worker's class path (no
``plugin.path``). Nothing is built, nothing is committed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support import procfs
from tests.support.apache_kafka import (
    CACHE_DIR,
    _locked,
    _pid_alive,
    java_executable,
)
from tests.support.brokers import HOST, BrokerError, _log_tail, free_ports
from tests.support.guarded import jvm_environment, start_guarded
from tests.support.postgres import Postgres

DEBEZIUM_VERSION = "3.6.1.Final"
# Connect's own release: the Kafka that Debezium 3.6 is built against (its parent pom's
# version.kafka). Connect 4.4.0's classes lack org.apache.kafka.common.utils.Sanitizer, which
# Debezium's metrics call: the connector's task fails at start (NoClassDefFoundError). The
# worker's 4.3 clients talk to the suite's 4.4 broker like any client of another release.
CONNECT_VERSION = "4.3.0"
POM = Path(__file__).resolve().with_name("maven") / "debezium" / "pom.xml"
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectStandalone"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

# C1 only, the serial collector and a bounded heap, as the suite's other JVMs; the suite's
# JAVA_TOOL_OPTIONS (Spark's class archive) is not passed on.
JVM_OPTIONS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-Xmx256m",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)

LOG4J2 = """\
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = %d{HH:mm:ss.SSS} %p [%t] %c{1}: %m%n
"""


class ConnectStartError(BrokerError):
    """Kafka Connect could not be fetched or started (the message says what to do)."""


def classpath(version: str = CONNECT_VERSION) -> str:
    """Connect's and Debezium's jars: resolved by Maven from Maven Central once, then cached."""
    target = CACHE_DIR / f"connect-debezium-{version}-{DEBEZIUM_VERSION}.classpath"
    with _locked(CACHE_DIR / "connect-debezium.lock"):
        if target.exists():
            jars = target.read_text().strip()
            if jars and all(os.path.exists(jar) for jar in jars.split(os.pathsep)):
                return jars
        mvn = shutil.which("mvn")
        if mvn is None:
            raise ConnectStartError(
                "Kafka Connect and Debezium come from Maven Central through Maven: install it "
                "(apt-get install maven) and put `mvn` on PATH"
            )
        partial = target.with_suffix(".partial")
        run = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(POM),
                f"-Dkafka.version={version}",
                f"-Ddebezium.version={DEBEZIUM_VERSION}",
                "dependency:build-classpath",
                f"-Dmdep.outputFile={partial}",
            ],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        if run.returncode != 0 or not partial.exists():
            raise ConnectStartError(
                f"mvn could not resolve connect-runtime {version} and Debezium "
                f"{DEBEZIUM_VERSION} (rc={run.returncode}):\n{run.stdout[-3000:]}"
                f"{run.stderr[-3000:]}"
            )
        os.replace(partial, target)
        return target.read_text().strip()


class ConnectWorker:
    """One Kafka Connect standalone worker on 127.0.0.1 (REST API at ``url``), writing to
    ``bootstrap_servers``, its converters Connect's JSON converter with schemas (a connector
    may override them)."""

    def __init__(
        self, bootstrap_servers: str, *, owner_pid: int | None = None, start_timeout=120.0
    ):
        self.bootstrap_servers = bootstrap_servers
        self.owner_pid = owner_pid or os.getpid()
        self.directory = tempfile.mkdtemp(prefix="kafka_ds-connect-")
        self.log_path = os.path.join(self.directory, "worker.log")
        (self.port,) = free_ports(1)
        self.java_pid: int | None = None
        self.owned = True
        self._guard: subprocess.Popen | None = None
        try:
            self._start(start_timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _worker_properties(self) -> dict:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "key.converter": JSON_CONVERTER,
            "value.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": "true",
            "value.converter.schemas.enable": "true",
            "offset.storage.file.filename": os.path.join(self.directory, "offsets"),
            "offset.flush.interval.ms": "500",
            "listeners": f"http://{HOST}:{self.port}",
            # Debezium is on the class path; its jars declare their plugins as services
            "plugin.discovery": "service_load",
            "task.shutdown.graceful.timeout.ms": "2000",
        }

    def _start(self, timeout: float) -> None:
        started = time.monotonic()
        jars = classpath()
        properties = os.path.join(self.directory, "worker.properties")
        with open(properties, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in self._worker_properties().items())
        log_config = os.path.join(self.directory, "log4j2.properties")
        with open(log_config, "w") as f:
            f.write(LOG4J2)
        command = [
            java_executable(),
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={log_config}",
            "-cp",
            jars,
            MAIN_CLASS,
            properties,
        ]
        self._guard, pid = start_guarded(
            command, self.log_path, self.owner_pid, 5, env=jvm_environment(), cwd=self.directory
        )
        if pid is None:
            raise ConnectStartError("the guard did not start Kafka Connect's JVM")
        self.java_pid = pid
        deadline = time.monotonic() + timeout
        while True:
            if not _pid_alive(self.java_pid):
                raise ConnectStartError(f"Kafka Connect exited at start-up:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                if self._request("GET", "/connector-plugins").status == 200:
                    break
            if time.monotonic() > deadline:
                raise ConnectStartError(
                    f"Kafka Connect not ready after {timeout:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.2)
        self.start_seconds = time.monotonic() - started

    # --- REST --------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        answer = urllib.request.urlopen(request, timeout=30)
        answer.body = answer.read()
        answer.close()
        return answer

    def call(self, method: str, path: str, body: dict | None = None):
        """A REST call; the answer's JSON (None when empty). Errors name Connect's message."""
        try:
            answer = self._request(method, path, body)
        except urllib.error.HTTPError as exc:
            raise ConnectStartError(
                f"Kafka Connect answered {exc.code} to {method} {path}: {exc.read()[:2000]!r}"
            ) from None
        return json.loads(answer.body) if answer.body else None

    def add_connector(self, name: str, config: dict, timeout: float = 60.0) -> None:
        """Create (or replace) connector ``name`` and wait until it and its task run."""
        self.call("PUT", f"/connectors/{name}/config", {"name": name, **config})
        deadline = time.monotonic() + timeout
        status: dict = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(ConnectStartError):
                status = self.call("GET", f"/connectors/{name}/status")
                states = [status["connector"]["state"]] + [t["state"] for t in status["tasks"]]
                if "FAILED" in states:
                    break
                if status["tasks"] and set(states) == {"RUNNING"}:
                    return
            time.sleep(0.2)
        raise ConnectStartError(
            f"connector {name} is not running after {timeout:.0f} s: {status}\n{self.log_tail()}"
        )

    def remove_connector(self, name: str) -> None:
        with contextlib.suppress(ConnectStartError):
            self.call("DELETE", f"/connectors/{name}")

    # --- the process -------------------------------------------------------------------------

    def is_alive(self) -> bool:
        return _pid_alive(self.java_pid)

    def rss_bytes(self) -> int:
        if self.java_pid is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            return procfs.rss_bytes(self.java_pid)
        return 0

    def log_tail(self, lines: int = 40) -> str:
        return _log_tail(self.log_path, lines)

    def stop(self) -> None:
        if not self.owned:
            return
        if self.java_pid and _pid_alive(self.java_pid):
            os.kill(self.java_pid, signal.SIGKILL)  # test offsets: nothing to keep
        deadline = time.monotonic() + 10
        while _pid_alive(self.java_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._guard is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._guard.wait(10)
            self._guard = None
        if not os.environ.get("KAFKA_DS_KEEP_BROKER_LOGS"):
            shutil.rmtree(self.directory, ignore_errors=True)

    def state(self) -> dict:
        return {
            "directory": self.directory,
            "java_pid": self.java_pid,
            "port": self.port,
            "bootstrap_servers": self.bootstrap_servers,
            "start_seconds": round(self.start_seconds, 1),
        }

    @classmethod
    def attach(cls, state: dict) -> ConnectWorker:
        worker = cls.__new__(cls)
        worker.bootstrap_servers = state["bootstrap_servers"]
        worker.owner_pid = 0
        worker.directory = state["directory"]
        worker.log_path = os.path.join(worker.directory, "worker.log")
        worker.port = state["port"]
        worker.java_pid = state["java_pid"]
        worker.start_seconds = state["start_seconds"]
        worker.owned = False
        worker._guard = None
        return worker


class ChangeData:
    """PostgreSQL and a Connect worker (Debezium on its class path), started together."""

    def __init__(self, postgres: Postgres, connect: ConnectWorker):
        self.postgres = postgres
        self.connect = connect

    @classmethod
    def start(cls, bootstrap_servers: str, owner_pid: int | None = None) -> ChangeData:
        """Both at once: PostgreSQL's initdb runs while Connect's JVM starts."""
        found: dict = {}

        def start_postgres():
            try:
                found["postgres"] = Postgres(owner_pid=owner_pid)
            except BaseException as exc:  # raised below, in the caller's thread
                found["error"] = exc

        thread = threading.Thread(target=start_postgres, name="postgres-start")
        thread.start()
        try:
            connect = ConnectWorker(bootstrap_servers, owner_pid=owner_pid)
        finally:
            thread.join()
        if "error" in found:
            connect.stop()
            raise found["error"]
        return cls(found["postgres"], connect)

    def connector_config(
        self, *, prefix: str, tables: str, slot: str, schemas: bool = True, **extra
    ) -> dict:
        """Debezium's PostgreSQL connector on ``tables`` (``schema.table``, comma-separated),
        writing topics ``<prefix>.<schema>.<table>``; ``schemas``: the JSON converter's
        ``schemas.enable`` (the schema in every key and value, or the payload alone)."""
        enabled = "true" if schemas else "false"
        return {
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "tasks.max": "1",
            "plugin.name": "pgoutput",
            "database.hostname": HOST,
            "database.port": str(self.postgres.port),
            "database.user": "postgres",
            "database.password": "unused",
            "database.dbname": "postgres",
            "topic.prefix": prefix,
            "table.include.list": tables,
            "slot.name": slot,
            "publication.name": f"{slot}_publication",
            "publication.autocreate.mode": "filtered",
            "snapshot.mode": "no_data",
            "skipped.operations": "none",  # truncates too
            "slot.drop.on.stop": "true",
            "poll.interval.ms": "100",
            "status.update.interval.ms": "1000",
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "1",
            "key.converter": JSON_CONVERTER,
            "value.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": enabled,
            "value.converter.schemas.enable": enabled,
            **extra,
        }

    def execute(self, *statements: str) -> None:
        """Run SQL statements on the server, each committed on its own (psycopg)."""
        import psycopg

        with psycopg.connect(self.postgres.dsn, autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement)

    def query(self, sql: str) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.postgres.dsn, autocommit=True) as connection:
            return connection.execute(sql).fetchall()

    def capture(self, table: str, *, schemas: bool = True, **extra) -> str:
        """A connector of its own on ``public.<table>`` (slot and topic prefix named after the
        table and ``schemas``); returns the topic Debezium writes the table's changes to."""
        name = f"{table}_{'s' if schemas else 'p'}"
        config = self.connector_config(
            prefix=name, tables=f"public.{table}", slot=name, schemas=schemas, **extra
        )
        self.connect.add_connector(name, config)
        return f"{name}.public.{table}"

    def stop(self) -> None:
        self.connect.stop()
        self.postgres.stop()

    def state(self) -> dict:
        return {"postgres": self.postgres.state(), "connect": self.connect.state()}

    @classmethod
    def attach(cls, state: dict) -> ChangeData:
        return cls(Postgres.attach(state["postgres"]), ConnectWorker.attach(state["connect"]))


def read_topic(bootstrap_servers: str, topic: str, count: int, timeout: float = 60.0) -> list:
    """``count`` records of ``topic`` from its start, read by confluent-kafka's consumer
    (fails when fewer come within ``timeout``): ``(offset, key, value)`` each."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        records: list = []
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            records.append((message.offset(), message.key(), message.value()))
        if len(records) < count:
            raise AssertionError(f"{topic}: {len(records)} of {count} records in {timeout} s")
        return records
    finally:
        consumer.close()


# --- Debezium's Avro, as Connect's AvroConverter would write it --------------------------------
# No Avro converter is on Maven Central (Confluent's is in its own repository): the tests take
# the JSON converter's events (schema and payload) and write them as AvroConverter does, with
# confluent-kafka's AvroSerializer, in the same Avro schema AvroData derives.

_AVRO_TYPES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "long",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_DECIMAL = "org.apache.kafka.connect.data.Decimal"


def avro_schema(connect: dict, path: str = "ConnectDefault", seen: set | None = None):
    """The Avro schema of a Connect schema (the JSON converter's form) as AvroData writes it:
    optional fields as unions with null (default null), ``connect.name`` on named types,
    ``logicalType: decimal`` on Connect's Decimal, a named record used again by its name."""
    seen = set() if seen is None else seen
    kind, name = connect["type"], connect.get("name")
    if kind == "struct":
        full = name or path
        if full in seen:
            avro: object = full
        else:
            seen.add(full)
            namespace, _, short = full.rpartition(".")
            record = {
                "type": "record",
                "name": short,
                "fields": [_avro_field(f, f"{full}_{f['field']}", seen) for f in connect["fields"]],
            }
            if namespace:
                record["namespace"] = namespace
            if name:
                record["connect.name"] = name
            avro = record
    elif kind == "array":
        avro = {"type": "array", "items": _optional(connect["items"], path + "_item", seen)}
    elif name == _DECIMAL:
        parameters = connect.get("parameters") or {}
        avro = {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": int(parameters.get("connect.decimal.precision", 38)),
            "scale": int(parameters.get("scale", 0)),
            "connect.name": name,
        }
    elif name:
        avro = {"type": _AVRO_TYPES[kind], "connect.name": name}
    else:
        avro = _AVRO_TYPES[kind]
    return avro


def _optional(connect: dict, path: str, seen: set):
    avro = avro_schema(connect, path, seen)
    return ["null", avro] if connect.get("optional") else avro


def _avro_field(connect: dict, path: str, seen: set) -> dict:
    field = {"name": connect["field"], "type": _optional(connect, path, seen)}
    if connect.get("optional"):
        field["default"] = None
    return field


def avro_value(connect: dict, value):
    """A payload of the JSON converter as the Avro serializer takes it: base64 bytes
    decoded, Connect's Decimal as a ``decimal.Decimal``."""
    import base64
    from decimal import Decimal

    if value is None:
        return None
    kind, name = connect["type"], connect.get("name")
    if kind == "struct":
        return {f["field"]: avro_value(f, value.get(f["field"])) for f in connect["fields"]}
    if kind == "array":
        return [avro_value(connect["items"], item) for item in value]
    if name == _DECIMAL:
        scale = int((connect.get("parameters") or {}).get("scale", 0))
        unscaled = int.from_bytes(base64.b64decode(value), "big", signed=True)
        return Decimal(unscaled).scaleb(-scale)
    if kind == "bytes":
        return base64.b64decode(value)
    return value


STATE_NAME = "change-data"


def shared_change_data(state_dir: str, owner_pid: int, bootstrap_servers: str) -> ChangeData:
    """The run's PostgreSQL and Connect worker: started by the first process that asks
    (under a file lock), attached to by the others; pytest's main process stops them at the
    end (:func:`stop_shared`)."""
    state_path = Path(state_dir) / f"{STATE_NAME}.state"
    with _locked(Path(state_dir) / f"{STATE_NAME}.lock"):
        if state_path.exists():
            state = json.loads(state_path.read_text())
            if "error" in state:
                raise ConnectStartError(f"the change-data servers failed earlier: {state['error']}")
            return ChangeData.attach(state)
        try:
            stack = ChangeData.start(bootstrap_servers, owner_pid)
        except Exception as e:
            state_path.write_text(json.dumps({"error": str(e)[:2000]}))
            raise
        stack.postgres.owned = stack.connect.owned = False
        state_path.write_text(json.dumps(stack.state()))
        return stack


def stop_shared(state_dir: str) -> None:
    """Stop the run's PostgreSQL and Connect worker, if one was started (pytest's end)."""
    state_path = Path(state_dir) / f"{STATE_NAME}.state"
    if not state_path.exists():
        return
    state = json.loads(state_path.read_text())
    state_path.unlink()
    if "error" in state:
        return
    stack = ChangeData.attach(state)
    stack.postgres.owned = stack.connect.owned = True
    stack.stop()


def start_in_background(items) -> threading.Thread | None:
    """When ``items`` (the tests this process collected) use ``change_data``: start the
    run's Apache Kafka node, PostgreSQL and Connect worker in a thread now, so that the
    first test asking for them waits only for what is left (the fixture meets the same
    file locks and attaches). Errors are left to the fixture: the state file holds them."""
    state_dir = os.environ.get("KAFKA_DS_SHARED_STATE")
    if not state_dir or not any("change_data" in getattr(i, "fixturenames", ()) for i in items):
        return None
    owner = int(os.environ["KAFKA_DS_SHARED_OWNER"])

    def start():
        from tests.support import apache_kafka

        with contextlib.suppress(Exception):
            cluster = apache_kafka.shared_cluster(state_dir, "kafka", owner)
            shared_change_data(state_dir, owner, cluster.bootstrap_servers)

    thread = threading.Thread(target=start, name="change-data-start", daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="session")
def change_data(kafka_broker) -> ChangeData:
    """The run's PostgreSQL and Kafka Connect worker (Debezium), writing to ``kafka_broker``,
    shared by all workers; import it into a test module. Tests share them: use fresh table,
    slot and topic names. Outside a pytest run of the suite's conftest this process starts
    its own, stopped at its exit (their guards watch this process)."""
    state_dir = os.environ.get("KAFKA_DS_SHARED_STATE")
    if state_dir:
        return shared_change_data(
            state_dir, int(os.environ["KAFKA_DS_SHARED_OWNER"]), kafka_broker.bootstrap_servers
        )
    stack = ChangeData.start(kafka_broker.bootstrap_servers)
    return stack


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.debezium",
        description="Start PostgreSQL (wal_level=logical) and a Kafka Connect worker with "
        f"Debezium {DEBEZIUM_VERSION} on 127.0.0.1; print their addresses; run until Ctrl-C.",
    )
    parser.add_argument(
        "--bootstrap", help="the Kafka Connect writes to (default: start Apache Kafka, one node)"
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cluster = None
    if args.bootstrap is None:
        from tests.support.apache_kafka import KafkaCluster

        cluster = KafkaCluster(1)
    bootstrap = args.bootstrap or cluster.bootstrap_servers  # type: ignore[union-attr]
    try:
        stack = ChangeData.start(bootstrap)
    except BaseException:
        if cluster is not None:
            cluster.stop()
        raise
    try:
        print(f"bootstrap.servers={bootstrap}", flush=True)
        print(f"postgres={stack.postgres.dsn}", flush=True)
        print(f"connect={stack.connect.url}", flush=True)
        print(
            f"PostgreSQL started in {stack.postgres.start_seconds:.1f} s "
            f"({stack.postgres.rss_bytes() / 2**20:.0f} MiB resident), Kafka Connect in "
            f"{stack.connect.start_seconds:.1f} s ({stack.connect.rss_bytes() / 2**20:.0f} MiB "
            "resident); Ctrl-C stops them",
            file=sys.stderr,
            flush=True,
        )
        while not stop.wait(0.5):
            if not (stack.postgres.is_alive() and stack.connect.is_alive()):
                print(stack.postgres.log_tail() + stack.connect.log_tail(), file=sys.stderr)
                return 1
    finally:
        stack.stop()
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
