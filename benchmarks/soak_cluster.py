"""The soak's Apache Kafka cluster and its node faults (benchmarks/soak.py runs them).

Three KRaft nodes (tests/support/apache_kafka.py's ``KafkaCluster``: replication factor 3,
``min.insync.replicas=2``). The clients of the soak's Spark side reach each node through
its own listener of the fault proxy (Metadata and FindCoordinator answers name the
proxy's ports); the nodes reach each other directly, so a node the proxy cuts off from the
clients is still in the cluster. The last node's log directory is a tmpfs of its own
(``--disk-mib``), so that it can be filled up.

Each fault waits until the cluster is whole again (every node up, every partition of the
soak's topics and of Kafka's internal topics with three in-sync replicas) before it returns,
so that no two faults take two of the three replicas at once.
"""

from __future__ import annotations

import collections
import random
import threading
import time

from soak_common import END_TXN, log, now

NODE_FAULTS = (  # the default turn: the long ones (a rolling restart) last
    "leader_kill",
    "disk_full",
    "node_cut_off",
    "group_coordinator_kill",
    "txn_coordinator_kill",
    "controller_kill",
    "controlled_shutdown",
    "rolling_restart",
)
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def start_cluster(disk_mib: int):
    """Three nodes; the last one's log directory on a tmpfs of ``disk_mib`` MiB (None
    when the mount is refused: then ``disk_full`` is skipped and says why)."""
    from tests.support.node_faults import small_disk_cluster

    cluster = small_disk_cluster(disk_mib, heap="512m", name="kafka3-soak")
    log(
        f"Apache Kafka {cluster.version}, 3 nodes, started in {cluster.start_seconds:.1f} s; "
        f"node 3's log dir: "
        + (
            f"tmpfs of {disk_mib} MiB"
            if cluster.small_disk
            else f"NOT mounted: {cluster.small_disk_refused}"
        )
    )
    return cluster


def stop_cluster(cluster):
    from tests.support.node_faults import stop_small_disk_cluster

    stop_small_disk_cluster(cluster)


class NodeFaults(threading.Thread):
    """The node faults, in turn (``plan``), one started every ~``every`` s until ``until``
    (seconds of the soak's clock), in a thread of their own beside the soak's process and
    registry events. ``hold_lock`` is held while an EndTxn answer is held by the proxy (the
    soak's mid-commit driver kill holds one too)."""

    def __init__(self, cluster, proxy, topics, group, seed, events, plan, every, until, hold_lock):
        super().__init__(daemon=True, name="node-faults")
        self.cluster, self.proxy, self.topics, self.group = cluster, proxy, topics, group
        self.rng, self.events = random.Random(seed), events
        self.plan, self.every, self.until, self.hold_lock = plan, every, until, hold_lock
        self.counts: collections.Counter = collections.Counter()
        self.failures: list[dict] = []  # a fault that could not be made, and why
        self.disk_outcomes: list[dict] = []  # what Kafka did, each time
        self.stopping = threading.Event()

    def run(self):
        start = self.every * self.rng.uniform(0.6, 1.0)
        turn = 0
        while self.plan and not self.stopping.wait(max(0.0, start - now())):
            if now() >= self.until:
                return
            kind = self.plan[turn % len(self.plan)]
            turn += 1
            start = now() + self.every * self.rng.uniform(0.7, 1.3)
            log(f"node fault {turn}: {kind}")
            try:
                getattr(self, kind)()
            except Exception as exc:  # noqa: BLE001 - counted; the run goes on
                self.failures.append({"t": now(), "what": f"{kind}: {exc!r}"[:2000]})
                log(f"{kind} failed: {exc!r}")
                self.heal()

    def wait_for(self, predicate, timeout) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.5)
        return False

    def pause(self, low, high):
        time.sleep(self.rng.uniform(low, high))

    # -- the cluster whole again
    def _in_sync(self) -> bool:
        try:
            metadata = self.cluster.list_topics()
        except Exception:  # noqa: BLE001 - a node is moving
            return False
        for topic in (*self.topics, *INTERNAL_TOPICS):
            entry = metadata.get(topic)
            if entry is None and topic in INTERNAL_TOPICS:
                continue  # not made yet
            if entry is None or any(len(p.isrs) < 3 for p in entry.partitions.values()):
                return False
        return True

    def heal(self, timeout=300.0) -> bool:
        for node in self.cluster.nodes:
            if not node.is_alive():
                self._restart(node.node_id)
        started = now()
        whole = self.wait_for(self._in_sync, timeout)
        if not whole:
            self.failures.append({"t": now(), "what": "not in sync after a fault"})
            log("cluster NOT whole again after a fault")
        else:
            log(f"cluster whole again ({now() - started:.0f} s)")
        return whole

    def _restart(self, node_id):
        try:
            self.cluster.restart(node_id, timeout=180)
        except Exception as exc:  # noqa: BLE001 - counted and shown in the summary
            self.failures.append({"t": now(), "what": f"restart of node {node_id}: {exc}"[:2000]})
            log(f"node {node_id} did not restart: {exc}")

    def _note(self, kind, detail):
        self.counts[kind] += 1
        self.events.append((now(), kind, detail))
        log(f"{kind}: {detail}")

    def _kill_restart(self, kind, node_id, why, down=(5.0, 20.0)):
        self.cluster.kill(node_id)
        self._note(kind, f"node {node_id} SIGKILLed ({why})")
        self.pause(*down)
        self._restart(node_id)
        self.heal()

    def node_of(self, upstream) -> int:
        port = int(upstream[1])
        return next(n.node_id for n in self.cluster.nodes if n.port == port)

    # -- who is what
    def group_coordinator(self):
        """Asked again for 2 minutes (a coordinator just moved answers that it loads)."""
        found = []

        def ask():
            from kafka_ds.client import KafkaClient

            # FindCoordinator: confluent-kafka's describe_consumer_groups timed out for
            # minutes after the node faults (librdkafka 2.x, the cluster whole again)
            try:
                with KafkaClient(self.cluster.bootstrap_servers) as client:
                    found.append(
                        client.coordinators.call(
                            self.group, lambda conn: conn.node_id, "FindCoordinator"
                        )
                    )
                return True
            except Exception as exc:  # noqa: BLE001
                log(f"group coordinator not found yet: {exc}")
                time.sleep(2)
                return False

        return found[0] if self.wait_for(ask, 120) else None

    def active_controller(self):
        from tests.support.node_faults import active_controller

        return active_controller(self.cluster)

    # -- the faults
    def leader_kill(self):
        topic = self.rng.choice(self.topics)
        partition = self.rng.randrange(len(self.cluster.topic_metadata(topic) or {0: 0}))
        node = self.cluster.leader(topic, partition)
        self._kill_restart("leader_kill", node, f"leader of {topic}-{partition}")

    def group_coordinator_kill(self):
        node = self.group_coordinator()
        if node is None:
            self.failures.append({"t": now(), "what": "group_coordinator_kill: no coordinator"})
            return
        self._kill_restart("group_coordinator_kill", node, f"coordinator of group {self.group}")

    def txn_coordinator_kill(self):
        with self.hold_lock:
            self.proxy.inject(END_TXN, "hold")
            held = self.wait_for(lambda: self.proxy.wait_held(0), 300)
            self.proxy.clear_faults()
            upstream = self.proxy.held_at
            if not held or upstream is None:
                self.failures.append({"t": now(), "what": "txn_coordinator_kill: no EndTxn"})
                return
            node = self.node_of(upstream)
            self.cluster.kill(node)
            self.proxy.cut(upstream)
        self._note(
            "txn_coordinator_kill",
            f"node {node} SIGKILLed (transaction coordinator, its EndTxn answer held)",
        )
        self.pause(5.0, 20.0)
        self._restart(node)
        self.heal()

    def controller_kill(self):
        node = self.active_controller()
        if node is None:
            self.failures.append({"t": now(), "what": "controller_kill: no active controller"})
            return
        self._kill_restart("controller_kill", node, "active controller")

    def rolling_restart(self):
        for node in self.cluster.nodes:
            self.cluster.shutdown(node.node_id, timeout=120)
            self.events.append((now(), "rolling_restart", f"node {node.node_id} stopped"))
            self._restart(node.node_id)
            self.heal()
        self._note("rolling_restart", "all three nodes restarted in turn (controlled)")

    def controlled_shutdown(self):
        topic = self.rng.choice(self.topics)
        node = self.cluster.leader(topic, 0)
        self.cluster.shutdown(node, timeout=120)
        self._note("controlled_shutdown", f"node {node} (leader of {topic}-0), SIGTERM")
        self.pause(10.0, 30.0)
        self._restart(node)
        self.heal()

    def disk_full(self):
        from tests.support.node_faults import fill_log_dir, free_log_dir

        if not self.cluster.small_disk:
            self.failures.append(
                {"t": now(), "what": f"disk_full: no tmpfs ({self.cluster.small_disk_refused})"}
            )
            return
        outcome = {"t": now(), **fill_log_dir(self.cluster)}
        outcome["log_lines"] = [line.replace("|", "/") for line in outcome["log_lines"]]
        self._note("disk_full", f"node 3's log dir filled ({outcome['filler_mib']} MiB of filler)")
        self.disk_outcomes.append(outcome)
        log(f"disk full on node 3: exited {outcome['node_exited']}; {outcome['log_lines'][:1]}")
        self.pause(5.0, 15.0)
        try:
            free_log_dir(self.cluster, outcome, timeout=180)
        except Exception as exc:  # noqa: BLE001 - counted and shown in the summary
            self.failures.append({"t": now(), "what": f"restart of node 3: {exc}"[:2000]})
        outcome["healed"] = self.heal()

    def node_cut_off(self):
        node = self.rng.choice(self.cluster.nodes)
        upstream = ("127.0.0.1", node.port)
        self.proxy.isolate(upstream)
        seconds = self.rng.uniform(20.0, 60.0)
        self._note("node_cut_off", f"node {node.node_id} cut off from the clients {seconds:.0f} s")
        time.sleep(seconds)
        self.proxy.rejoin(upstream)
        self.heal()
