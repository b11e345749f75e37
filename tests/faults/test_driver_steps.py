"""Driver-side steps with the node they talk to killed at that moment (issue 45, part 2),
on Apache Kafka's three nodes (``kafka3``: RF 3, ``min.insync.replicas=2``), below Spark:
the same functions the data source calls on the driver.

"At that moment" is made exact with the fault proxy (tests/support/faultproxy.py) between
kafka_ds and the cluster: the proxy holds the answer to the step's request (so the node
did the work, and a retry must be harmless), the test SIGKILLs the node that answered and
cuts the proxy's connections to it, as its death cuts them. The client then meets what a
dead node gives: its connection lost mid-request, new connections closed at once. Each
test checks the step ends as if nothing happened, within its documented budget, and how
long it took after the kill. The give-up tests (every node unreachable through the proxy)
check the error names the option that bounds the wait.

Marked ``node_faults``: outside the README's command (each kill costs 10-20 s of
restart and resync); ``.ci/run`` runs them after it (tests/README.md).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from kafka_ds.client import KafkaClient, make_client
from kafka_ds.client.transactions import TransactionError, init_transactional_producer
from kafka_ds.errors import KafkaConnectionError
from kafka_ds.options import parse_read_options, parse_write_options
from kafka_ds.read.group_commits import GroupCommitter
from kafka_ds.read.planner import OffsetPlanner
from kafka_ds.read.stream_offsets import StreamOffsets
from kafka_ds.reader import KafkaBatchReader
from kafka_ds.write.exactly_once import abort_all, commit_all, transactional_id
from kafka_ds.write.messages import KafkaCommitMessage
from kafka_ds.write.topics import check_topic_exists, partition_count
from tests.integration.test_transactions import wait_stable
from tests.support.brokers import produce_confluent
from tests.support.faultproxy import FaultProxy
from tests.support.txlog import produce_in_transaction, verdict

pytestmark = [pytest.mark.node_faults, pytest.mark.timeout(300)]

# Kafka API keys of the steps
LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 2, 3, 8, 9
INIT_PRODUCER_ID, END_TXN = 22, 26
# A request's own timeout: a client that waited on the dead node's connection for it
# (instead of seeing the connection cut) would show as a step slower than this.
REQUEST_TIMEOUT_MS = 5000
# The step's budget here (the documented defaults are 60 and 120 s): long enough for
# Kafka to fence the dead node and move its leaderships and coordinators
# (broker.session.timeout.ms is 4 s on the test cluster), short enough to fail the test
# rather than hang it.
BUDGET_MS = 45000


# --- the cluster, whole before and after each test -------------------------------------


def _unhealthy(cluster) -> list:
    try:
        topics = cluster.list_topics()
    except Exception as exc:  # noqa: BLE001 -- a node still starting: ask again
        return [repr(exc)]
    return [
        f"{name}-{p}"
        for name, meta in topics.items()
        for p, part in meta.partitions.items()
        if part.leader < 0 or len(part.isrs) < len(cluster.nodes)
    ]


def make_whole(cluster, timeout=120.0):
    for node in cluster.nodes:
        if not node.is_alive():
            cluster.restart(node.node_id, timeout=timeout)
    deadline = time.monotonic() + timeout
    while _unhealthy(cluster):
        assert time.monotonic() < deadline, f"not in sync after {timeout} s: {_unhealthy(cluster)}"
        time.sleep(0.25)


@pytest.fixture
def cluster(kafka3):
    make_whole(kafka3)
    yield kafka3
    make_whole(kafka3)


def new_topic(cluster, prefix, partitions=3, records=0):
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=partitions)
    cluster.wait_in_sync(topic, partitions, len(cluster.nodes))
    if records:
        produce_confluent(
            cluster.bootstrap_servers,
            topic,
            [
                {"key": str(i).encode(), "value": f"v{i}".encode(), "partition": i % partitions}
                for i in range(records)
            ],
        )
    return topic


def client_options(proxy, request_timeout_ms=REQUEST_TIMEOUT_MS, **extra):
    return {
        "kafka.bootstrap.servers": proxy.bootstrap_servers,
        "kafka.request.timeout.ms": str(request_timeout_ms),
        **extra,
    }


# --- the kill at the moment of the answer ---------------------------------------------


class KilledAtAnswer:
    """``step()`` in a thread; once the proxy holds the answer to its ``api`` request,
    the node that answered is SIGKILLed and its connections cut. ``result()``: the
    step's value, re-raising its error; ``killed``: the node's id; ``after_kill``: the
    seconds from the kill to the step's end."""

    def __init__(self, cluster, proxy, api, step, wait_s=60.0):
        proxy.inject(api, "hold")
        self.value = self.error = None
        self.ended_at = None
        thread = threading.Thread(target=self._run, args=(step,), daemon=True)
        thread.start()
        if not proxy.wait_held(wait_s):
            thread.join(1)
            raise AssertionError(f"no answer to API {api} was held within {wait_s} s: {self.error}")
        host, port = proxy.held_at
        self.killed = next(n.node_id for n in cluster.nodes if n.address == f"{host}:{port}")
        cluster.kill(self.killed)
        self.killed_at = time.monotonic()
        proxy.cut((host, port))
        thread.join(BUDGET_MS / 1000 + 30)
        assert not thread.is_alive(), "the step did not end within its budget"
        self.after_kill = self.ended_at - self.killed_at
        self.node_down_throughout = not cluster.node(self.killed).is_alive()

    def _run(self, step):
        try:
            self.value = step()
        except BaseException as exc:  # noqa: BLE001 -- handed to the test thread
            self.error = exc
        self.ended_at = time.monotonic()

    def result(self):
        if self.error is not None:
            raise self.error
        return self.value


def coordinator_of(cluster, key, key_type=0) -> int:
    """The node that coordinates a group (``key_type`` 0) or transactional id (1); the
    first lookup of a transactional id makes Kafka create its internal topic, so retried."""
    with KafkaClient(cluster.bootstrap_servers) as client:
        return client.coordinators.call(
            key, lambda conn: conn.node_id, "FindCoordinator", key_type=key_type
        )


# --- a write's start ---------------------------------------------------------------------


def test_write_start_survives_the_node_answering_its_metadata_killed(cluster):
    """The topic check of a write's start (``check_topic_exists``, what ``writer()`` and
    ``streamWriter()`` call on the driver): its Metadata answered, the node killed before
    the answer arrives. The check goes on at another node: the write starts."""
    topic = new_topic(cluster, "start-meta")
    with FaultProxy(cluster.bootstrap_servers) as proxy:
        opts = parse_write_options(
            client_options(proxy, topic=topic, **{"kafka.delivery.timeout.ms": str(BUDGET_MS)})
        )
        run = KilledAtAnswer(cluster, proxy, METADATA, lambda: check_topic_exists(opts))
        run.result()
        assert run.node_down_throughout
        assert run.after_kill < REQUEST_TIMEOUT_MS / 1000, run.after_kill
        with make_client(opts) as client:
            assert partition_count(client, topic, opts.bootstrap_servers) == 3
    print(f"Metadata: the write's start went on {run.after_kill:.1f} s after the kill")


def test_exactly_once_task_start_survives_its_transaction_coordinator_killed(cluster):
    """A task's InitProducerId (the exactly-once write's start): answered by the
    transactional id's coordinator, which is killed before the answer arrives. The task
    finds the new coordinator (once Kafka moved it) and gets an epoch; what it writes in
    that transaction commits."""
    topic = new_topic(cluster, "start-txn", partitions=2)
    txn_id = f"{topic}-task-0"
    with FaultProxy(cluster.bootstrap_servers) as proxy:
        coordinator = coordinator_of(cluster, txn_id, 1)
        run = KilledAtAnswer(
            cluster,
            proxy,
            INIT_PRODUCER_ID,
            lambda: produce_in_transaction(
                proxy.bootstrap_servers, topic, txn_id, {0: [b"a", b"b"], 1: [b"c"]}, BUDGET_MS
            ),
        )
        handle = run.result()
        assert run.killed == coordinator
        assert run.node_down_throughout
        opts = parse_write_options(
            client_options(
                proxy,
                topic=topic,
                deliveryGuarantee="exactly-once",
                **{"kafka.delivery.timeout.ms": str(BUDGET_MS)},
            )
        )
        commit_all(opts, [message(0, handle, topic, 0)])
    # EndTxn is answered before the coordinator wrote its markers: wait for them
    wait_stable(cluster.bootstrap_servers, topic)
    result = verdict(cluster.bootstrap_servers, topic)
    assert sorted(result.committed) == [b"a", b"b", b"c"] and result.open == [], (result, handle)
    print(f"InitProducerId: the task went on {run.after_kill:.1f} s after the kill")


# --- a write's end -------------------------------------------------------------------------


def message(task, handle, topic, partition):
    return KafkaCommitMessage(
        task=task,
        records=1,
        bytes=1,
        partitions=[(topic, partition, 1, -1, -1)],
        transactional_id=handle.transactional_id,
        producer_id=handle.producer_id,
        producer_epoch=handle.producer_epoch,
    )


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_exactly_once_end_survives_the_transaction_coordinator_killed(cluster, commit):
    """The driver's commit (``commit_all``: check, then EndTxn(commit) per task) or abort
    (``abort_all``: marker, EndTxn(abort), fences) of an exactly-once write, the
    coordinator killed after it ended the first transaction and before its answer
    arrives. The driver ends every transaction at the new coordinator: all committed, or
    all aborted; none left open."""
    topic = new_topic(cluster, "end-txn", partitions=2)
    prefix = f"{topic}-w"
    handles = [
        produce_in_transaction(
            cluster.bootstrap_servers,
            topic,
            transactional_id(prefix, task),
            {task: [f"r{task}".encode()]},
        )
        for task in range(2)
    ]
    messages = [message(task, handle, topic, task) for task, handle in enumerate(handles)]
    with FaultProxy(cluster.bootstrap_servers) as proxy:
        opts = parse_write_options(
            client_options(
                proxy,
                topic=topic,
                deliveryGuarantee="exactly-once",
                **{"kafka.delivery.timeout.ms": str(BUDGET_MS)},
            )
        )
        if commit:
            run = KilledAtAnswer(cluster, proxy, END_TXN, lambda: commit_all(opts, messages))
            assert run.result() == 2
        else:
            run = KilledAtAnswer(cluster, proxy, END_TXN, lambda: abort_all(opts, prefix, messages))
            run.result()
        assert run.node_down_throughout
    wait_stable(cluster.bootstrap_servers, topic)
    result = verdict(cluster.bootstrap_servers, topic)
    assert result.open == []
    if commit:
        assert sorted(result.committed) == [b"r0", b"r1"] and result.aborted == []
    else:
        assert sorted(result.aborted) == [b"r0", b"r1"] and result.committed == []
    print(f"EndTxn: the driver went on {run.after_kill:.1f} s after the kill")


# --- a read's planning -----------------------------------------------------------------------


def planned_ends(opts):
    with make_client(opts) as client:
        ranges, _late_start, _late_end = KafkaBatchReader(opts).plan(OffsetPlanner(opts, client))
    return {(r.topic, r.partition): (r.start, r.end) for r in ranges}


@pytest.mark.parametrize("api", [METADATA, LIST_OFFSETS], ids=["Metadata", "ListOffsets"])
def test_read_planning_survives_the_node_answering_killed(cluster, api):
    """A batch read's plan on the driver (``KafkaBatchReader.plan``: Metadata, then
    ListOffsets at each partition's leader), the node answering one of them killed before
    its answer arrives. The plan is the one of a whole cluster: every partition, from 0 to
    its end. ListOffsets has to wait for Kafka to elect a new leader."""
    topic = new_topic(cluster, "plan", records=90)
    with FaultProxy(cluster.bootstrap_servers) as proxy:
        opts = parse_read_options(
            client_options(
                proxy,
                subscribe=topic,
                **{"kafka.default.api.timeout.ms": str(BUDGET_MS)},
            ),
            streaming=False,
        )
        run = KilledAtAnswer(cluster, proxy, api, lambda: planned_ends(opts))
        plan = run.result()
        assert run.node_down_throughout
    # (ListOffsets of a partition the dead node led waits for its new leader, after a
    # killed Metadata node too)
    assert plan == {(topic, p): (0, 30) for p in range(3)}
    print(f"planning went on {run.after_kill:.1f} s after the kill")


def test_stream_start_from_the_group_survives_its_coordinator_killed(cluster):
    """``startingOffsets=group``: the stream's first plan reads the group's offsets
    (OffsetFetch at its coordinator), the coordinator killed before its answer arrives.
    The offsets come from the new coordinator, the same ones."""
    topic = new_topic(cluster, "group-start", records=90)
    group = f"{topic}-g"
    committed = {(topic, 0): 7, (topic, 1): 11, (topic, 2): 30}
    with KafkaClient(cluster.bootstrap_servers) as client:
        client.commit_offsets(group, committed)
    coordinator = coordinator_of(cluster, group)
    with FaultProxy(cluster.bootstrap_servers) as proxy:
        opts = parse_read_options(
            client_options(
                proxy,
                subscribe=topic,
                startingOffsets="group",
                **{"kafka.group.id": group, "kafka.default.api.timeout.ms": str(BUDGET_MS)},
            ),
            streaming=True,
        )
        offsets = StreamOffsets(opts, group)
        try:
            run = KilledAtAnswer(cluster, proxy, OFFSET_FETCH, offsets.initial)
            initial = run.result()
        finally:
            offsets.close()
        assert run.killed == coordinator and run.node_down_throughout
    assert initial == {topic: {"0": 7, "1": 11, "2": 30}}
    print(f"OffsetFetch: planning went on {run.after_kill:.1f} s after the kill")


# --- a stream's commit to its group ------------------------------------------------------------


def test_stream_group_commit_survives_its_coordinator_killed(cluster):
    """A micro-batch's end committed to the consumer group (``GroupCommitter``, the
    streaming reader's ``commit()``), the group's coordinator killed after it stored the
    offsets and before its answer arrives. The commit is sent again to the new
    coordinator, and the group holds the offsets."""
    topic = new_topic(cluster, "commit", records=90)
    group = f"{topic}-g"
    wanted = {(topic, 0): 30, (topic, 1): 30, (topic, 2): 29}
    coordinator = coordinator_of(cluster, group)
    with FaultProxy(cluster.bootstrap_servers) as proxy:
        opts = parse_read_options(
            client_options(proxy, subscribe=topic, **{"kafka.group.id": group}), streaming=True
        )
        committer = GroupCommitter(opts, group)
        try:

            def commit():
                committer.submit(wanted)
                assert committer.flush(BUDGET_MS / 1000), "the offsets were never committed"

            run = KilledAtAnswer(cluster, proxy, OFFSET_COMMIT, commit)
            run.result()
        finally:
            committer.close(5)
        assert run.killed == coordinator and run.node_down_throughout
    with KafkaClient(cluster.bootstrap_servers) as client:
        assert client.fetch_committed(group, list(wanted)) == wanted
    print(f"OffsetCommit: committed {run.after_kill:.1f} s after the kill")


# --- giving up: every node unreachable -----------------------------------------------------------


GIVE_UP_MS = 2000


def gives_up(step, option):
    """``step()`` with the cluster unreachable (the proxy refuses every connection)
    fails after its budget of GIVE_UP_MS, naming ``option``."""
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        step()
    waited = time.monotonic() - started
    assert f"'{option}'" in str(info.value), str(info.value)
    assert GIVE_UP_MS / 1000 <= waited < GIVE_UP_MS / 1000 + 3, waited
    print(f"gave up after {waited:.1f} s: {info.value}")
    return info.value


def test_every_driver_step_gives_up_after_its_budget_naming_the_option(cluster):
    topic = new_topic(cluster, "give-up", partitions=1)
    budget = str(GIVE_UP_MS)
    with FaultProxy(cluster.bootstrap_servers) as proxy:
        # (a write's budget must be at least linger + one request's timeout)
        write = parse_write_options(
            client_options(proxy, 1000, topic=topic, **{"kafka.delivery.timeout.ms": budget})
        )
        eos = parse_write_options(
            client_options(
                proxy,
                1000,
                topic=topic,
                deliveryGuarantee="exactly-once",
                **{"kafka.delivery.timeout.ms": budget},
            )
        )
        read = parse_read_options(
            client_options(
                proxy,
                1000,
                subscribe=topic,
                startingOffsets="group",
                **{"kafka.group.id": f"{topic}-g", "kafka.default.api.timeout.ms": budget},
            ),
            streaming=True,
        )
        handle = produce_in_transaction(proxy.bootstrap_servers, topic, f"{topic}-t", {0: [b"x"]})
        proxy.down()
        error = gives_up(lambda: check_topic_exists(write), "kafka.delivery.timeout.ms")
        assert isinstance(error, KafkaConnectionError)
        with make_client(eos) as client:
            gives_up(
                lambda: init_transactional_producer(
                    client, f"{topic}-t2", 60000, timeout_ms=eos.delivery_timeout_ms
                ),
                "kafka.delivery.timeout.ms",
            )
        error = gives_up(
            lambda: commit_all(eos, [message(0, handle, topic, 0)]), "kafka.delivery.timeout.ms"
        )
        assert isinstance(error, TransactionError)
        # unanswered is not fenced: the transactions may well be open still
        assert "could not be checked (their coordinator did not answer)" in str(error)
        gives_up(lambda: planned_ends(read), "kafka.default.api.timeout.ms")
        offsets = StreamOffsets(read, f"{topic}-g")
        try:
            gives_up(offsets.initial, "kafka.default.api.timeout.ms")
        finally:
            offsets.close()
        proxy.up()


# --- a stalled answer: the node alive, its answer later than the request timeout -------------

STALL_REQUEST_TIMEOUT_MS = 2000


@pytest.mark.parametrize(
    "api",
    [METADATA, INIT_PRODUCER_ID, END_TXN, LIST_OFFSETS, OFFSET_FETCH, OFFSET_COMMIT],
    ids=lambda api: STEP_NAMES[api],
)
def test_each_driver_step_goes_on_after_a_stalled_answer(cluster, api):
    """The first answer of the step's request held 30 s, far longer than
    ``kafka.request.timeout.ms`` (2 s): the step gives up on that connection after the
    request timeout, asks again (another node, or the same coordinator, which already did
    the work) and ends with the result of a whole cluster, once."""
    topic = new_topic(cluster, "stall", partitions=2, records=40)
    group = f"{topic}-g"
    with KafkaClient(cluster.bootstrap_servers) as client:
        client.commit_offsets(group, {(topic, 0): 5, (topic, 1): 6})
    if api == END_TXN:
        handle = produce_in_transaction(cluster.bootstrap_servers, topic, f"{topic}-t", {0: [b"x"]})
    with FaultProxy(cluster.bootstrap_servers) as proxy:
        options = client_options(
            proxy,
            STALL_REQUEST_TIMEOUT_MS,
            **{"kafka.default.api.timeout.ms": str(BUDGET_MS)},
        )
        read = parse_read_options(
            {**options, "subscribe": topic, "startingOffsets": "group", "kafka.group.id": group},
            streaming=True,
        )
        # 30 s: a client that waited for it instead of timing out would fail the bound below
        proxy.inject(api, "stall", seconds=30.0)
        started = time.monotonic()
        if api == METADATA:
            write = parse_write_options(
                client_options(
                    proxy,
                    STALL_REQUEST_TIMEOUT_MS,
                    topic=topic,
                    **{"kafka.delivery.timeout.ms": str(BUDGET_MS)},
                )
            )
            check_topic_exists(write)
        elif api == INIT_PRODUCER_ID:
            eos = parse_write_options(
                client_options(
                    proxy,
                    STALL_REQUEST_TIMEOUT_MS,
                    topic=topic,
                    deliveryGuarantee="exactly-once",
                    **{"kafka.delivery.timeout.ms": str(BUDGET_MS)},
                )
            )
            with make_client(eos) as client:
                begun = init_transactional_producer(
                    client, f"{topic}-t2", 60000, timeout_ms=eos.delivery_timeout_ms
                )
            assert begun.producer_id >= 0 and begun.producer_epoch >= 0, begun
        elif api == OFFSET_COMMIT:
            committer = GroupCommitter(read, group)
            try:
                committer.submit({(topic, 0): 9, (topic, 1): 10})
                assert committer.flush(BUDGET_MS / 1000), "the offsets were never committed"
            finally:
                committer.close(5)
        elif api == LIST_OFFSETS:
            batch = parse_read_options({**options, "subscribe": topic}, streaming=False)
            assert planned_ends(batch) == {(topic, 0): (0, 20), (topic, 1): (0, 20)}
        elif api == OFFSET_FETCH:
            offsets = StreamOffsets(read, group)
            try:
                assert offsets.initial() == {topic: {"0": 5, "1": 6}}
            finally:
                offsets.close()
        else:
            eos = parse_write_options(
                client_options(
                    proxy,
                    STALL_REQUEST_TIMEOUT_MS,
                    topic=topic,
                    deliveryGuarantee="exactly-once",
                    **{"kafka.delivery.timeout.ms": str(BUDGET_MS)},
                )
            )
            assert commit_all(eos, [message(0, handle, topic, 0)]) == 1
        took = time.monotonic() - started
        assert proxy.injected["stall"] == 1, "the answer was stalled"
    # it waited out one request timeout, and not much more
    assert STALL_REQUEST_TIMEOUT_MS / 1000 <= took < STALL_REQUEST_TIMEOUT_MS / 1000 + 3, took
    if api == END_TXN:
        wait_stable(cluster.bootstrap_servers, topic)
        result = verdict(cluster.bootstrap_servers, topic)
        # the 40 records written before, and the transaction's, once
        assert sorted(result.committed).count(b"x") == 1 and len(result.committed) == 41
        assert result.open == []
    if api == OFFSET_COMMIT:
        with KafkaClient(cluster.bootstrap_servers) as client:
            assert client.fetch_committed(group, [(topic, 0), (topic, 1)]) == {
                (topic, 0): 9,
                (topic, 1): 10,
            }
    print(f"{STEP_NAMES[api]} stalled: the step went on after {took:.1f} s")


STEP_NAMES = {
    METADATA: "Metadata",
    INIT_PRODUCER_ID: "InitProducerId",
    OFFSET_COMMIT: "OffsetCommit",
    LIST_OFFSETS: "ListOffsets",
    OFFSET_FETCH: "OffsetFetch",
    END_TXN: "EndTxn",
}
