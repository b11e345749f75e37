"""The exactly-once sink (deliveryGuarantee=exactly-once) in batch and streaming writes, in
Spark drivers of their own (tests/support/eos_child.py): a task retried mid-write, a failed
job, a speculative copy, drivers SIGKILLed mid-stream. The transactions underneath, without
Spark: tests/integration/test_transactions.py.

Exactly-once is judged on the raw log (``txlog.verdict``): a transactional batch
counts only when its producer's next marker in that partition is a COMMIT.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.test_transactions import (
    END_TXN,
    kafka_topic,  # noqa: F401  (fixture)
    read_committed_both,
)
from tests.support import PROJECT_ROOT
from tests.support.brokers import produce_confluent
from tests.support.faultproxy import FaultProxy
from tests.support.txlog import nothing_open, verdict, verdict_when

# Run by path: it imports nothing of the suite.
EOS_CHILD = str(PROJECT_ROOT / "tests" / "support" / "eos_child.py")


# --- the sink, in Spark drivers of their own (master local[2,2] retries a failed task) ---


def run_child(spec, timeout=300):
    spec = dict(spec)
    proc = subprocess.run(
        [sys.executable, EOS_CHILD, json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    return proc


def rows(n):
    return [f"row-{i}".encode() for i in range(n)]


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_task_retried_mid_write_commits_every_row_once(broker, new_topic, tmp_path):
    topic = new_topic(partitions=3)
    flag = tmp_path / "failed-once"
    proc = run_child(
        {
            "scenario": "retry",
            "bootstrap": broker.bootstrap_servers,
            "topic": topic,
            "flag": str(flag),
        }
    )
    assert "DONE" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert flag.exists()  # the failure did happen
    result = verdict_when(broker.bootstrap_servers, topic, nothing_open)
    assert sorted(result.committed) == sorted(rows(90000))
    # the failed attempt's rows reached the log and were aborted, never committed
    assert len(result.aborted) > 0
    assert result.open == []
    # read_committed: kafka_ds reads what librdkafka reads
    ours, theirs = read_committed_both(broker.bootstrap_servers, topic)
    assert ours == theirs and len(ours) > 0


@pytest.mark.heavy
@pytest.mark.timeout(900)
@pytest.mark.only_brokers("kafka")  # one child driver per broker; Kafka's is the one to trust
def test_failed_job_leaves_nothing_visible(broker, new_topic, tmp_path):
    topic = new_topic(partitions=3)
    proc = run_child(
        {
            "scenario": "fail",
            "bootstrap": broker.bootstrap_servers,
            "topic": topic,
            "flag": str(tmp_path / "flag"),
        }
    )
    assert "FAILED" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    result = verdict_when(broker.bootstrap_servers, topic, nothing_open)
    assert result.committed == []
    # the failed task's transaction was fenced (aborted) by the driver's abort()
    assert result.open == []
    assert len(result.aborted) > 0


@pytest.mark.only_brokers("kafka")  # the marker on both brokers: integration/test_transactions.py
@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_task_beginning_after_the_abort_writes_nothing(broker, new_topic, tmp_path):
    # Spark calls abort() as soon as the job failed, while the tasks it cancels may still
    # be starting: task 2 here begins its transaction only after abort() fenced its id (so
    # nothing fences it), then gets all its rows. It must find the write aborted and write
    # nothing; before the fix its 3,000 rows stayed in a transaction nobody ended. (It
    # passes on the mock too, and failed there before the fix; one broker saves a Spark
    # driver's start in the suite.)
    topic = new_topic(partitions=3)
    flags = tmp_path / "flags"
    flags.mkdir()
    proc = run_child(
        {
            "scenario": "zombie",
            "bootstrap": broker.bootstrap_servers,
            "topic": topic,
            "flag": str(flags),
        }
    )
    assert "FAILED" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    zombie = [line for line in proc.stdout.splitlines() if line.startswith("ZOMBIE")]
    result = verdict_when(broker.bootstrap_servers, topic, nothing_open)
    assert result.committed == []
    assert result.open == [], zombie
    written = set(result.committed + result.aborted + result.open)
    assert not written & set(rows(9000)[6000:]), zombie
    assert zombie and "the write was aborted" in zombie[0], proc.stdout + proc.stderr[-3000:]


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_speculative_copy_fences_the_original_and_commits_every_row_once(
    kafka_broker, kafka_topic, tmp_path
):
    # Apache Kafka only: the mock does not fence (tests/README.md, mock deviation 10). A standalone
    # cluster with workers on two hosts, since Spark never speculates on the host of a
    # running attempt (local and local-cluster masters have one host).
    from tests.support.standalone import StandaloneCluster

    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic("spec", 3)
    flags = tmp_path / "flags"
    flags.mkdir()
    with StandaloneCluster(str(tmp_path / "cluster")) as cluster:
        proc = run_child(
            {
                "scenario": "speculate",
                "master": cluster.url,
                "bootstrap": bs,
                "topic": topic,
                "flag": str(flags),
            },
            timeout=600,
        )
    assert "DONE" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    # Both attempts of task 0 ran at the same time: the copy reached half its rows
    # while the original waited, and the original went on after that.
    assert sorted(os.listdir(flags)) == ["copy-halfway", "original-resumed", "original-waiting"]
    # ... and the original, fenced by the copy's InitProducerId, was refused (Apache Kafka
    # answers a Produce of the fenced epoch with INVALID_PRODUCER_EPOCH, its coordinator
    # answers PRODUCER_FENCED)
    lost = [
        line
        for line in proc.stderr.splitlines()
        if "PRODUCER_FENCED" in line or "INVALID_PRODUCER_EPOCH" in line
    ]
    assert lost, proc.stderr[-3000:]
    result = verdict(bs, topic)
    assert len(result.committed) == 120000
    assert sorted(result.committed) == sorted(rows(120000))
    # what the original wrote before the copy started was aborted, not committed
    assert len(result.aborted) > 0 and set(result.aborted) <= set(rows(30000))
    assert result.open == []


# --- streaming: SIGKILLed drivers, one of them inside the driver's commit ------------------


def start_stream_child(spec, env=None):
    return subprocess.Popen(
        [sys.executable, EOS_CHILD, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
    )


def kill_session(session_id: int) -> None:
    """SIGKILL every process of a session (a driver started with start_new_session):
    Spark's Python worker daemon runs in a process group of its own within it."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session_id:  # field 6 of stat: the session id
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass


def wait_committed(bootstrap, topic, at_least, child, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            return
        if len(verdict(bootstrap, topic).committed) >= at_least:
            return
        time.sleep(1)
    raise AssertionError(f"fewer than {at_least} records committed in {timeout} s")


@pytest.mark.only_brokers("kafka")  # one real broker: each run starts and kills Spark drivers
@pytest.mark.heavy
@pytest.mark.timeout(1200)
def test_stream_killed_repeatedly_commits_every_record_once(broker, new_topic, tmp_path):
    bs = broker.bootstrap_servers
    source = new_topic(partitions=2, prefix="src")
    sink = new_topic(partitions=3, prefix="sink")
    values = rows(30000)
    produce_confluent(bs, source, values, **{"linger.ms": 50})
    spec = {
        "scenario": "stream",
        "bootstrap": bs,
        "source": source,
        "topic": sink,
        "checkpoint": str(tmp_path / "checkpoint"),
        "trigger_ms": 300,
        "max_offsets": 4000,
        "flag": "",
    }
    # 1. the driver is SIGKILLed (its whole session: driver, JVM, Python workers) right
    #    after the broker committed the first transaction of its first micro-batch with
    #    data: the proxy holds that EndTxn's answer, so the driver never marks the batch
    #    committed (nor ends any other transaction of it); the batch stays recorded as
    #    pending in the checkpoint, for the restart to finish.
    with FaultProxy(bs) as proxy:
        proxy.inject(END_TXN, "hold")
        child = start_stream_child({**spec, "bootstrap": proxy.bootstrap_servers})
        try:
            held = proxy.wait_held(timeout=300)
        finally:
            kill_session(child.pid)
            child.wait(timeout=60)
        assert held, child.stderr.read()[-3000:]
    assert child.returncode == -signal.SIGKILL
    # (the commit's markers reach the partitions after the coordinator logged it)
    held_commit = verdict_when(bs, sink, lambda result: bool(result.committed))
    assert held_commit.committed, "the broker committed the held EndTxn"
    # 2. killed from outside while batches are being written and committed (once: each
    #    kill costs a Spark driver's start, tens of CPU seconds of the suite's budget)
    for at_least in (12000,):
        child = start_stream_child(spec)
        try:
            wait_committed(bs, sink, at_least, child)
        finally:
            kill_session(child.pid)
            child.wait(timeout=60)
    # 3. restart and drain
    proc = subprocess.run(
        [sys.executable, EOS_CHILD, json.dumps({**spec, "available_now": True})],
        capture_output=True,
        text=True,
        timeout=400,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert "DONE" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    result = verdict_when(bs, sink, nothing_open)
    assert len(result.committed) == len(values)
    assert sorted(result.committed) == sorted(values)
    assert result.open == []
