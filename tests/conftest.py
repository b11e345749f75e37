"""Shared fixtures: real brokers started (lazily, once per session) by the suite.

* ``kafka_broker``: Apache Kafka itself, one KRaft node (tests/support/apache_kafka.py), started
  once for the whole run and shared by every pytest-xdist worker.
* ``kafka3``: three Apache Kafka nodes, replication factor 3, ``min.insync.replicas=2``
  (module-scoped: started and stopped by the one worker that runs the failover module).
* ``kafka_older``: Apache Kafka 3.9 (KRaft), one node, shared: the older line's smoke set.
* ``kafka_secure``: Apache Kafka, one node, with SASL (PLAIN, SCRAM, OAUTHBEARER), TLS and
  mTLS listeners and the StandardAuthorizer (tests/support/secure_kafka.py), shared.
* ``mock_cluster`` / ``tansu_broker``: librdkafka's mock cluster (injected errors) and Tansu
  (the demo's broker), session-scoped, started on first use.
* ``broker``: parametrized over the enabled brokers ``mock`` and ``kafka``, so a test written
  against ``broker`` runs on each of them (a Spark test, under tests/spark/, on ``kafka``
  only: ``SPARK_LEAVES_OUT``); tests marked ``smoke`` run on ``tansu`` and
  ``kafka_older`` too.
* ``new_topic(partitions=1, prefix="t", replication=1)``: fresh topic on ``broker``.

Restrict brokers with ``--brokers=mock,kafka`` or ``KAFKA_DS_BROKERS=kafka``.
Tests using any of these fixtures get the ``integration`` marker automatically.

Running in parallel (the README's ``-n 4 --dist loadgroup``): each pytest-xdist worker starts
its own brokers and Spark session. Tests marked ``heavy`` are collected first, so the long
ones start at once instead of trailing at the end, with those marked ``waits`` among them
(``run_order``); the modules in ``ONE_WORKER_MODULES`` run on one worker each (see
``pytest_xdist_make_scheduler``).
"""

import os
import sys
import tempfile

import pytest

from tests.support import apache_kafka, debezium, jvm_options, secure_kafka, spark_home
from tests.support.brokers import BROKER_CLASSES, BrokerError

# Spark's Python workers import pyspark from site-packages, not from a zip
# (tests/support/spark_home.py).
spark_home.install()

# Every JVM the suite starts runs C1-only with the serial collector and maps Spark's classes
# from a shared archive (tests/support/jvm_options.py: half the CPU of a Spark session's start).
_SPARK_CLASS_ARCHIVE = jvm_options.install()

ALL_BROKERS = ("mock", "kafka", "tansu")
# the brokers a test written against ``broker`` runs on; the tests marked ``smoke`` run on
# Tansu (the demo's broker) and on Apache Kafka's older line (kafka_older) too
PARAMETRIZED_BROKERS = ("mock", "kafka")
# ... except the Spark tests (tests/spark/), which run on Apache Kafka only: the Spark glue
# is the same whatever the broker, the mock is there for injected errors and for a second
# implementation of the protocol, and the protocol is tested on it below Spark
# (tests/integration/). Its Spark runs proved nothing the Apache Kafka ones did not and
# cost a sixth of the suite's Spark time (99 tests, 182 s of a worker in a loaded run).
SPARK_LEAVES_OUT = ("mock",)
# Apache Kafka clusters shared by all pytest-xdist workers: started by the first worker that
# asks, stopped by pytest's main process at the end (apache_kafka.shared_cluster)
SHARED_KAFKA = {
    "kafka": {},
    "kafka_older": {"version": apache_kafka.OLDER_VERSION},
    "kafka_secure": secure_kafka.CLUSTER_ARGS,
}

# Modules whose module-scoped fixtures must run once: the wheel is built once, the other
# pyspark releases are installed into one shared folder (.venv-spark), the parity cases
# against Spark's own connector run in one child driver for the module, and the failover
# tests kill and restart nodes of the one ``kafka3`` cluster, so they must not run side by
# side.
ONE_WORKER_MODULES = (
    "tests/spark/test_wheel.py",
    "tests/spark/test_spark_versions.py",
    "tests/spark/test_parity_jvm.py",
    "tests/spark/test_failover.py",
)
# Modules that share one worker: each starts a local Spark Connect server on its default
# port (15002), so two at once collide (seen: the pipelines CLI's server could not bind).
SHARED_WORKER_GROUPS = {
    "tests/spark/test_deploy.py": "spark-connect",
    "tests/spark/test_pipelines_example.py": "spark-connect",
    # module-scoped fixtures that write one PostgreSQL table each (the run's shared server):
    # on two workers at once they would both create it
    "tests/spark/test_debezium.py": "change-data",
    "tests/spark/test_debezium_apply.py": "change-data",
}
_BROKER_FIXTURES = {
    "broker",
    "mock_cluster",
    "tansu_broker",
    "new_topic",
    "kafka_broker",
    "kafka3",
    "kafka_older",
    "kafka_secure",
}


def pytest_addoption(parser):
    parser.addoption(
        "--brokers",
        action="store",
        default=None,
        help="comma-separated brokers for integration tests: mock,kafka,tansu "
        "(default: $KAFKA_DS_BROKERS or all three)",
    )


def pytest_configure(config):
    if not hasattr(config, "workerinput") and "KAFKA_DS_SHARED_STATE" not in os.environ:
        # pytest's main process: the workers (started after this, with this environment)
        # record the shared Apache Kafka clusters here; pytest_unconfigure stops them
        os.environ["KAFKA_DS_SHARED_STATE"] = tempfile.mkdtemp(prefix="kafka_ds-shared-")
        os.environ["KAFKA_DS_SHARED_OWNER"] = str(os.getpid())
        config._kafka_ds_shared_state = os.environ["KAFKA_DS_SHARED_STATE"]
    if _SPARK_CLASS_ARCHIVE and not hasattr(config, "workerinput"):  # not in xdist workers
        jvm_options.train_in_background(_SPARK_CLASS_ARCHIVE)
    config.addinivalue_line("markers", "integration: needs a real broker started by the suite")
    config.addinivalue_line(
        "markers",
        "only_brokers(*names): run on these of the enabled brokers only (tests whose "
        "every run costs the suite many seconds, where one real broker is enough for "
        "what they prove: Spark drivers started and killed, codecs round-tripped)",
    )
    config.addinivalue_line(
        "markers",
        "smoke: a test of ``broker`` that also runs on Tansu (the demo's broker) and "
        "on Apache Kafka 3.9 (kafka_older)",
    )
    config.addinivalue_line(
        "markers",
        "heavy: starts Spark driver processes or venvs of its own (tens of "
        "seconds); collected first",
    )
    config.addinivalue_line(
        "markers",
        "waits: spends most of its seconds waiting on timers (transaction timeouts, "
        "sessions that expire, injected delays); collected among the heavy tests, "
        "whose CPU it leaves to them",
    )
    config.addinivalue_line(
        "markers",
        f"{NODE_FAULTS}: kills or stalls nodes of Apache Kafka under the driver's steps "
        "(tests/faults/); not in the README's command, run by .ci/run after it",
    )
    # kafka-python 3.x loads its schemas with deprecated importlib.resources calls
    config.addinivalue_line("filterwarnings", "ignore:read_text is deprecated:DeprecationWarning")
    config.addinivalue_line("filterwarnings", "ignore:open_text is deprecated:DeprecationWarning")


def pytest_unconfigure(config):
    state = getattr(config, "_kafka_ds_shared_state", None)
    if state:
        debezium.stop_shared(state)  # Connect first: it writes to the shared Kafka
        apache_kafka.stop_shared(state)
        for name in ("KAFKA_DS_SHARED_STATE", "KAFKA_DS_SHARED_OWNER"):
            os.environ.pop(name, None)


def enabled_brokers(config):
    raw = (
        config.getoption("--brokers") or os.environ.get("KAFKA_DS_BROKERS") or ",".join(ALL_BROKERS)
    )
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    bad = [n for n in names if n not in ALL_BROKERS]
    if bad:
        raise pytest.UsageError(f"unknown broker(s) {bad}; choose from {ALL_BROKERS}")
    return names


def pytest_generate_tests(metafunc):
    if "broker" in metafunc.fixturenames:
        smoke = metafunc.definition.get_closest_marker("smoke") is not None
        enabled = enabled_brokers(metafunc.config)
        names = [
            name for name in enabled if name in PARAMETRIZED_BROKERS or (smoke and name == "tansu")
        ]
        if metafunc.definition.path.parent.name == "spark":
            names = [name for name in names if name not in SPARK_LEAVES_OUT]
        if smoke and "kafka" in enabled:
            names.append("kafka_older")
        only = metafunc.definition.get_closest_marker("only_brokers")
        if only is not None:
            names = [name for name in names if name in only.args]
        metafunc.parametrize("broker", names, ids=names, indirect=True)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _BROKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
    _spark_tests_on_apache_kafka_only(config, items)
    _deselect_node_faults(config, items)
    items[:] = run_order(items)


def pytest_collection_finish(session):
    # PostgreSQL and Kafka Connect (tests/support/debezium.py) start in a thread now when a
    # collected test uses them, while the first tests run
    if "kafka" in enabled_brokers(session.config) and not session.config.option.collectonly:
        debezium.start_in_background(session.items)


# --- node_faults: tests/faults/, too slow for the README's command (.ci/run's 2nd stage) ---
NODE_FAULTS = "node_faults"


def _deselect_node_faults(config, items):
    """Leave out the tests marked ``node_faults`` unless the run asks for them: ``-m``
    names the marker, or a path under tests/faults/ is given."""
    if NODE_FAULTS in (config.getoption("markexpr") or ""):
        return
    faults = os.path.join(str(config.rootpath), "tests", "faults")
    here = str(config.invocation_params.dir)
    if any(
        os.path.abspath(os.path.join(here, str(arg).split("::")[0])).startswith(faults)
        for arg in config.args
    ):
        return
    left_out = [item for item in items if item.get_closest_marker(NODE_FAULTS)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker(NODE_FAULTS)]


def _spark_tests_on_apache_kafka_only(config, items):
    """``SPARK_LEAVES_OUT`` for the Spark tests that take their broker from a module
    fixture of an integration module (``params=["mock", "kafka"]``, e.g. ``data``):
    ``pytest_generate_tests`` does it for ``broker``."""

    def left_out(item):
        if item.path.parent.name != "spark" or not hasattr(item, "callspec"):
            return False
        definitions = item._fixtureinfo.name2fixturedefs
        return any(
            value in SPARK_LEAVES_OUT
            and getattr(definitions.get(name, [None])[-1], "params", None) is not None
            for name, value in item.callspec.params.items()
            if isinstance(value, str)
        )

    dropped = [item for item in items if left_out(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not left_out(item)]


def run_order(items):
    """Long (``heavy``) tests first, so that in parallel runs they overlap with the many
    short ones; the ``waits`` tests spread evenly among them; the rest after, each group in
    collection order. The waits tests used to meet in the short part, four workers on
    timers at once: the CPU of the 2-core machine dropped to 40-70% for a minute.

    Spread by scheduling unit (``schedule_unit``): a module that runs on one worker is
    placed where its first test is."""
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(schedule_unit(item.nodeid), []).append(item)

    def marked(unit, name):
        return any(item.get_closest_marker(name) for item in unit)

    heavy, waits, rest = [], [], []
    for unit in units.values():
        (heavy if marked(unit, "heavy") else waits if marked(unit, "waits") else rest).append(unit)
    ordered = list(heavy)
    for i, unit in reversed(list(enumerate(waits))):
        ordered.insert((i + 1) * len(heavy) // (len(waits) + 1), unit)
    return [item for unit in ordered + rest for item in unit]


def schedule_unit(nodeid):
    """What ``--dist loadgroup`` gives one worker as a whole: the test, its module
    (``ONE_WORKER_MODULES``) or its modules' group (``SHARED_WORKER_GROUPS``)."""
    module = nodeid.split("::", 1)[0]
    if module in SHARED_WORKER_GROUPS:
        return SHARED_WORKER_GROUPS[module]
    return module if module in ONE_WORKER_MODULES else nodeid


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup``: every test is a unit of its own, except that each of
    ``ONE_WORKER_MODULES`` is one unit, and the modules of a ``SHARED_WORKER_GROUPS`` group
    are one unit together. (xdist's own loadgroup marks a group by renaming
    the test's node id, which pytest 9.2 no longer lets it do; this scheduler decides by the
    node id instead.)"""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return schedule_unit(nodeid)

    return ModuleGroups(config, log)


class _Brokers:
    """Session-wide registry: starts each broker on first use, stops all at the end."""

    def __init__(self, config):
        self.config = config
        self.instances = {}
        self.failures = {}

    def get(self, name):
        if name.startswith("kafka") and "kafka" not in enabled_brokers(self.config):
            pytest.skip("Apache Kafka disabled (--brokers / KAFKA_DS_BROKERS)")
        if not name.startswith("kafka") and name not in enabled_brokers(self.config):
            pytest.skip(f"broker {name!r} disabled (--brokers / KAFKA_DS_BROKERS)")
        if name in self.failures:  # do not retry a failed start for every test
            pytest.fail(f"{name} broker failed to start earlier: {self.failures[name]}")
        b = self.instances.get(name)
        if b is None:
            try:
                b = self.instances[name] = self._start(name)
            except Exception as e:
                self.failures[name] = e
                raise
        if not b.is_alive():
            raise BrokerError(f"{name} broker died; log: {b.log_path}")
        return b

    @staticmethod
    def _start(name):
        if name in SHARED_KAFKA:
            return apache_kafka.shared_cluster(
                os.environ["KAFKA_DS_SHARED_STATE"],
                name,
                int(os.environ["KAFKA_DS_SHARED_OWNER"]),
                **SHARED_KAFKA[name],
            )
        return BROKER_CLASSES[name]()

    def stop_all(self):
        for b in self.instances.values():
            try:
                b.stop()
            except Exception as e:  # pragma: no cover
                print(f"error stopping {b!r}: {e}", file=sys.stderr)
        self.instances.clear()


@pytest.fixture(scope="session")
def _brokers(request):
    reg = _Brokers(request.config)
    yield reg
    reg.stop_all()


@pytest.fixture(scope="session")
def enabled_broker_names(request):
    """Broker names enabled by --brokers / KAFKA_DS_BROKERS, e.g. ["mock", "tansu"]."""
    return enabled_brokers(request.config)


@pytest.fixture(scope="session")
def mock_cluster(_brokers):
    """librdkafka mock cluster, 3 brokers (tests.support.brokers.MockCluster)."""
    return _brokers.get("mock")


@pytest.fixture(scope="session")
def tansu_broker(_brokers):
    """Single Tansu node, memory storage (tests.support.brokers.TansuBroker)."""
    return _brokers.get("tansu")


@pytest.fixture(scope="session")
def kafka_broker(_brokers):
    """Apache Kafka, one KRaft node (tests.support.apache_kafka.KafkaCluster), shared by all
    workers."""
    return _brokers.get("kafka")


@pytest.fixture(scope="module")
def kafka3(request):
    """Apache Kafka, three KRaft nodes: replication factor 3, min.insync.replicas=2. For one
    module (the failover tests, on one worker): its three JVMs are stopped when the module
    ends instead of idling through the rest of the run."""
    if "kafka" not in enabled_brokers(request.config):
        pytest.skip("Apache Kafka disabled (--brokers / KAFKA_DS_BROKERS)")
    cluster = apache_kafka.KafkaCluster(3, name="kafka3")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def kafka_older(_brokers):
    """Apache Kafka of the older line (3.9, KRaft), one node, shared by all workers."""
    return _brokers.get("kafka_older")


@pytest.fixture(scope="session")
def kafka_secure(_brokers):
    """Apache Kafka, one KRaft node with the security tests' listeners (SASL PLAIN, SCRAM,
    OAUTHBEARER; TLS; mTLS) and StandardAuthorizer (tests.support.secure_kafka), shared by all
    workers."""
    return _brokers.get("kafka_secure")


@pytest.fixture
def broker(request, _brokers):
    """The broker named by the test's parameter ("mock", "kafka"; "tansu" and "kafka_older"
    for the tests marked smoke)."""
    return _brokers.get(request.param)


@pytest.fixture
def new_topic(broker):
    """Factory: ``new_topic(partitions=1, prefix="t", replication=1, config=None) -> name``
    (``config``: topic configs, e.g. ``{"max.message.bytes": ...}``; the mock ignores them).

    The topic is created on ``broker`` and usable (all partitions have a
    leader) when this returns; it is deleted (best effort) after the test.
    """
    created = []

    def make(partitions=1, prefix="t", replication=1, config=None):
        name = broker.unique_topic(prefix)
        if config and broker.name != "mock":  # the mock takes no topic configs
            broker.create_topic(name, partitions=partitions, replication=replication, config=config)
        else:
            broker.create_topic(name, partitions=partitions, replication=replication)
        created.append(name)
        return name

    yield make
    if broker.is_alive():
        for name in created:
            try:
                broker.delete_topic(name, wait=False)
            except Exception:
                pass
