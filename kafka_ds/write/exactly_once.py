"""deliveryGuarantee=exactly-once: the driver's half (docs/exactly_once.md).

Tasks write inside Kafka transactions they leave open (``write.task.TaskWriter`` with a
transactional id ``<prefix>-<Spark partition>``) and return the transaction's
``(transactional_id, producer_id, producer_epoch)`` in their commit messages. Here:

* :func:`commit_all` -- Spark committed the write: first a check that every task's
  transaction is still open (so a transaction fenced after its task finished -- by a
  speculative copy of the task, say -- fails the write before anything is visible),
  then EndTxn(commit) for every task.
* :func:`abort_all` -- the write failed: first the write's abort marker (an offset
  committed for the consumer group :func:`abort_marker` names), then EndTxn(abort) for every
  transaction a task returned that is still open, and InitProducerId (fencing: aborts
  whatever is open) for every other id a task of this write could have used.
* :func:`check_not_aborted` -- every task, after its InitProducerId and before it writes:
  a task that finds the marker writes nothing and fails. Spark calls ``abort()`` while
  tasks of the failed job may still be starting; one whose InitProducerId came after
  the driver's fence would otherwise write into a transaction nobody ends. The order
  makes it sound: a task that checked before the marker was committed had its
  InitProducerId answered before that, hence before the fence, which aborts it; a task
  that checks after the marker was committed sees it.
* :class:`TransactionLog` -- streaming only: before a micro-batch's transactions are
  committed, their handles are written to ``<checkpointLocation>/pykafka-transactions/
  <batch>.pending``; once all are committed the file becomes ``<batch>.committed``. On
  (re)start :meth:`TransactionLog.recover` commits what a crashed driver left pending
  (EndTxn(commit) of a transaction that already committed succeeds), and tasks of a
  micro-batch Spark replays that is already committed write nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid

from ..client import make_client
from ..client.retry import is_retriable
from ..client.transactions import (
    TransactionError,
    TransactionHandle,
    end_transactions,
    init_transactional_producer,
    verify_transactions,
)
from ..errors import ConfigurationError, KafkaError
from ..protocol.errors import error_by_name

log = logging.getLogger(__name__)

STATE_DIR = "pykafka-transactions"
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY
KEEP_COMMITTED = 10


def transactional_id(prefix: str, task: int) -> str:
    return f"{prefix}-{task}"


def batch_prefix(opts) -> str:
    """Default prefix of a batch write: unique per write, so concurrent writes to the
    same topic never fence each other (a crashed driver's open transactions are aborted
    by the broker after kafka.transaction.timeout.ms)."""
    if opts.transactional_id_prefix:
        return opts.transactional_id_prefix
    target = opts.topic or "topics"
    return f"pykafka-{target}-{uuid.uuid4().hex[:12]}"


def abort_marker(opts, prefix: str) -> tuple[str, str] | None:
    """``(group, topic)``: the write is aborted once consumer group ``group`` has an offset
    for partition 0 of ``topic``. The group is named after the transactional-id prefix
    (a prefixed group ACL on the prefix covers it) and unique per write, so a later write
    with the same prefix is never taken for an aborted one. The topic is one the cluster
    has (brokers refuse offsets of unknown topics): the write's ``topic``, else (a topic
    column) the first topic the cluster lists. Made on the driver with the writer; the
    tasks get it with the pickled writer. None when the cluster has no topic at all."""
    topic = opts.topic
    if topic is None:
        with make_client(opts) as client:
            topics = client.list_topics()
        if not topics:
            log.warning(
                "the cluster has no topic to mark an aborted write with: if the "
                "write fails, a task starting after the driver's abort() would "
                "leave its transaction open until kafka.transaction.timeout.ms"
            )
            return None
        topic = topics[0]
    return f"{prefix}-aborted-{uuid.uuid4().hex[:12]}", topic


def stream_prefix(opts) -> str:
    """Default prefix of a streaming write: from the checkpoint location, so it is the
    same after a restart (which fences the crashed run's tasks) and differs per query."""
    if opts.transactional_id_prefix:
        return opts.transactional_id_prefix
    location = require_checkpoint(opts)
    return "pykafka-" + hashlib.sha256(location.rstrip("/").encode()).hexdigest()[:16]


def require_checkpoint(opts) -> str:
    if not opts.checkpoint_location:
        raise ConfigurationError(
            "deliveryGuarantee 'exactly-once' on a streaming write needs the query's "
            "checkpoint location as a writeStream option: "
            '.option("checkpointLocation", "/path") (the sink keeps the transactions of '
            "each micro-batch there until they are committed)"
        )
    return opts.checkpoint_location


def current_batch_id() -> int | None:
    """The micro-batch a streaming task belongs to (a Spark local property)."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        value = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
        return int(value) if value is not None else None
    except Exception:  # not in a Spark task
        return None


def _reported(messages) -> list:
    """Commit messages of tasks that left a transaction open (tasks that wrote nothing
    have none)."""
    return [
        msg for msg in messages if msg is not None and msg.transactional_id and msg.producer_id >= 0
    ]


def _handle(msg) -> TransactionHandle:
    return TransactionHandle(msg.transactional_id, msg.producer_id, msg.producer_epoch)


def handles_of(messages) -> list[TransactionHandle]:
    """The open transactions the tasks reported."""
    return [_handle(msg) for msg in _reported(messages)]


def _probes(messages) -> list:
    """(handle, one partition its transaction holds) per reported transaction."""
    return [(_handle(msg), msg.partitions[0][:2]) for msg in _reported(messages) if msg.partitions]


def _describe(failures) -> str:
    return "; ".join(
        f"{h.transactional_id} (producer id {h.producer_id}, epoch {h.producer_epoch}): {exc}"
        for h, exc in failures
    )


def _end(client, opts, handles, commit: bool) -> None:
    if not handles:
        return
    failures = []
    for handle in handles:
        failures += end_transactions(client, [handle], commit, timeout_ms=opts.delivery_timeout_ms)
    if failures:
        what = "commit" if commit else "abort"
        raise TransactionError(
            f"could not {what} {len(failures)} of {len(handles)} task transactions: "
            f"{_describe(failures)}"
            + (
                ". The records of those tasks are not visible to read_committed readers; the "
                "other tasks' are"
                if commit and len(failures) < len(handles)
                else ""
            )
        )


def check_open(client, opts, messages) -> None:
    """Raise unless every transaction the tasks reported is still open, before anything
    is committed: Kafka cannot commit several producers' transactions atomically, so a
    transaction found fenced half-way through the EndTxn calls would leave the write
    partly visible."""
    probes = _probes(messages)
    failures = verify_transactions(client, probes, timeout_ms=opts.delivery_timeout_ms)
    if failures:
        fenced = [exc.code for _, exc in failures if getattr(exc, "fenced", False)]
        # A coordinator that never answered (its error retriable to the end) says nothing
        # about the transaction: it may well be open still.
        unanswered = all(is_retriable(exc.__cause__) for _, exc in failures)
        state = (
            "could not be checked (their coordinator did not answer)"
            if unanswered
            else "are no longer open"
        )
        raise TransactionError(
            f"nothing was committed: {len(failures)} of {len(probes)} task transactions "
            f"{state}: {_describe(failures)}"
            + (
                ". A newer producer with the same transactional id started after the task "
                "finished: a speculative copy of the task (spark.speculation=true; see "
                "docs/exactly_once.md), another write using the same transactionalIdPrefix, "
                "or the transaction outlived kafka.transaction.timeout.ms (raise it for long "
                "writes)"
                if fenced
                else ""
            ),
            code=fenced[0] if fenced else getattr(failures[0][1], "code", -1),
        )


def commit_all(opts, messages, before_first_commit=None) -> int:
    """Check that every task's transaction is still open, call ``before_first_commit``
    (streaming: record them durably), then EndTxn(commit) for each; returns how many."""
    handles = handles_of(messages)
    if not handles:
        return 0
    # One client: the check's coordinator lookups serve the commit.
    with make_client(opts) as client:
        check_open(client, opts, messages)
        if before_first_commit is not None:
            before_first_commit(handles)
        _end(client, opts, handles, True)
    return len(handles)


def mark_aborted(client, marker: tuple[str, str]) -> bool:
    """Commit the abort marker (an offset for the marker's group). False, logged, if that
    fails: a task starting after the fence could then leave a transaction open until
    kafka.transaction.timeout.ms."""
    group, topic = marker
    try:
        client.commit_offsets(group, {(topic, 0): 0}, metadata="aborted")
        return True
    except KafkaError as exc:
        log.warning(
            "could not mark the write aborted (OffsetCommit of consumer group %r, "
            "topic %r): %s. A task of it starting now (Spark cancels tasks "
            "asynchronously) would leave its transaction open until "
            "kafka.transaction.timeout.ms",
            group,
            topic,
            exc,
        )
        return False


#: OffsetFetch refused by ACLs: the marker cannot be read (check_not_aborted writes on)
AUTHORIZATION_FAILED = (
    error_by_name("GROUP_AUTHORIZATION_FAILED"),
    error_by_name("TOPIC_AUTHORIZATION_FAILED"),
)


def check_not_aborted(client, marker: tuple[str, str], txn_id: str) -> None:
    """Raise unless the write is still going: called by every task after its
    InitProducerId, before it writes anything (its transaction is still empty, so there
    is nothing to end). One OffsetFetch at the group's coordinator (plus its lookup)."""
    group, topic = marker
    try:
        found = client.fetch_committed(group, [(topic, 0)])
    except AUTHORIZATION_FAILED as exc:
        # A cluster whose ACLs predate the marker: write as before it, and say what the
        # check needs (a job failing as this task begins could leave it open until
        # kafka.transaction.timeout.ms).
        log.warning(
            "transactional id %r: not allowed to check whether the write was "
            "aborted (OffsetFetch of consumer group %r, topic %r: %s); writing "
            "unchecked. Allow Describe on consumer groups prefixed with the "
            "transactionalIdPrefix, and Read on that topic, to close the gap",
            txn_id,
            group,
            topic,
            exc,
        )
        return
    except KafkaError as exc:
        raise TransactionError(
            f"transactional id {txn_id!r}: could not check whether the write was aborted "
            f"(OffsetFetch of consumer group {group!r}, topic {topic!r}): {exc}. "
            "Exactly-once writes read and commit offsets of consumer groups named after "
            "transactionalIdPrefix (with ACLs: Describe and Read on groups with that "
            "prefix)",
            code=getattr(exc, "code", -1),
        ) from exc
    if found:
        raise TransactionError(
            f"the write was aborted (its job failed) before this task's transaction "
            f"{txn_id!r} began: the task writes nothing (consumer group {group!r} marks "
            "the write aborted)"
        )


def abort_all(opts, prefix: str, messages, marker: tuple[str, str] | None = None) -> None:
    """End every transaction this write may have left open.

    First the abort marker (:func:`mark_aborted`), so a task that begins its
    transaction after this fails before it writes (:func:`check_not_aborted`). Then a
    reported transaction that is still open gets EndTxn(abort). Every other id of the
    write gets a new epoch (InitProducerId aborts whatever that id has open): tasks that
    failed or are still running (no message), and tasks whose transaction is no longer
    theirs -- fenced by a speculative copy, which may have one open. (Tansu answers
    EndTxn of a fenced transaction by closing the connection, so EndTxn is only sent to
    open ones.) A fence is retried on retriable errors within kafka.delivery.timeout.ms,
    as EndTxn is."""
    reported = _reported(messages)
    reported_ids = {
        msg.transactional_id for msg in messages if msg is not None and msg.transactional_id
    }
    fence = [
        transactional_id(prefix, task)
        for task in range(len(messages))
        if transactional_id(prefix, task) not in reported_ids
    ]
    with make_client(opts) as client:
        if marker is not None:
            mark_aborted(client, marker)
        not_open = {
            h.transactional_id
            for h, _ in verify_transactions(
                client,
                _probes(messages),
                timeout_ms=opts.request_timeout_ms,
                timeout_option="kafka.request.timeout.ms",
            )
        }
        still_open = [_handle(msg) for msg in reported if msg.transactional_id not in not_open]
        fence += sorted(not_open)
        for handle, exc in end_transactions(
            client, still_open, False, timeout_ms=opts.delivery_timeout_ms
        ):
            log.warning("aborting the write's transactions: %s", exc)
            fence.append(handle.transactional_id)
        # Without this, an open transaction would hold read_committed readers at the last
        # stable offset until kafka.transaction.timeout.ms.
        for txn_id in fence:
            try:
                init_transactional_producer(
                    client, txn_id, opts.transaction_timeout_ms, timeout_ms=opts.delivery_timeout_ms
                )
            except KafkaError as exc:
                log.warning("could not fence transactional id %r: %s", txn_id, exc)


class TransactionLog:
    """Micro-batch transaction records under the checkpoint location (pyarrow.fs: local
    paths and any filesystem URI pyarrow knows, e.g. hdfs://, s3://)."""

    def __init__(self, checkpoint_location: str):
        import pyarrow.fs as pafs

        if "://" in checkpoint_location:
            self.fs, root = pafs.FileSystem.from_uri(checkpoint_location)
        else:
            self.fs, root = pafs.LocalFileSystem(), os.path.abspath(checkpoint_location)
        self.dir = root.rstrip("/") + "/" + STATE_DIR
        self.fs.create_dir(self.dir, recursive=True)

    def _path(self, batch_id: int, state: str) -> str:
        return f"{self.dir}/{batch_id:020d}.{state}"

    def _write(self, path: str, payload: dict) -> None:
        tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        with self.fs.open_output_stream(tmp) as out:
            out.write(json.dumps(payload, sort_keys=True).encode())
        self.fs.move(tmp, path)

    def _read(self, path: str) -> dict:
        with self.fs.open_input_stream(path) as f:
            return json.loads(f.read().decode())

    def _entries(self) -> list[tuple[int, str, str]]:
        import pyarrow.fs as pafs

        out = []
        for info in self.fs.get_file_info(pafs.FileSelector(self.dir)):
            name = info.base_name
            stem, _, state = name.partition(".")
            if stem.isdigit() and state in ("pending", "committed"):
                out.append((int(stem), state, info.path))
        return sorted(out)

    def record(self, batch_id: int, handles) -> None:
        self._write(
            self._path(batch_id, "pending"),
            {
                "batch": batch_id,
                "transactions": [
                    [h.transactional_id, h.producer_id, h.producer_epoch] for h in handles
                ],
            },
        )

    def mark_committed(self, batch_id: int) -> None:
        pending = self._path(batch_id, "pending")
        self.fs.move(pending, self._path(batch_id, "committed"))
        for old_id, state, path in self._entries():
            if state == "committed" and old_id <= batch_id - KEEP_COMMITTED:
                self.fs.delete_file(path)

    def last_committed(self) -> int:
        done = [batch for batch, state, _ in self._entries() if state == "committed"]
        return max(done) if done else -1

    def recover(self, opts) -> int:
        """Commit what a crashed driver recorded but may not have committed; returns the
        last committed micro-batch id (-1: none)."""
        for batch_id, state, path in self._entries():
            if state != "pending":
                continue
            handles = [
                TransactionHandle(t, int(p), int(e)) for t, p, e in self._read(path)["transactions"]
            ]
            log.warning(
                "micro-batch %d: committing %d transactions recorded before a restart",
                batch_id,
                len(handles),
            )
            try:
                with make_client(opts) as client:
                    _end(client, opts, handles, True)
            except TransactionError as exc:
                raise TransactionError(
                    f"micro-batch {batch_id} was being committed when the query stopped, and "
                    f"its transactions cannot all be committed now ({exc}). They may have "
                    "expired (kafka.transaction.timeout.ms) or been fenced. Look at the "
                    f"topic, then remove {path} to let the query go on."
                ) from exc
            self.mark_committed(batch_id)
        return self.last_committed()
