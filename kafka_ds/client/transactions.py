"""Kafka transactions (KIP-98) for a writer whose transactions are ended elsewhere.

A write task opens a transaction (:meth:`Transaction.begin`: FindCoordinator with
key type 1, then InitProducerId with the transactional id, which fences an earlier
producer of that id and aborts whatever it left open), adds partitions before it
produces to them (:meth:`Transaction.add_partitions`), produces with the
transactional id and flag, and hands ``(transactional_id, producer_id,
producer_epoch)`` to the driver. The driver -- another process -- ends it with
:func:`end_transaction`: EndTxn needs nothing but those three values.

Coordinator errors are retried until ``timeout_ms``: CONCURRENT_TRANSACTIONS (the
coordinator is still writing the markers of an earlier end), connection failures and
the coordinator moving or loading (the coordinator is looked up again). ``timeout_option``
names the option that set ``timeout_ms`` (a write's ``kafka.delivery.timeout.ms`` unless
the caller says otherwise), for the error when it runs out.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass

from ..errors import KafkaError, acl_hint
from ..protocol.errors import error_for_code
from ..protocol.messages_transactions import ADD_PARTITIONS_TO_TXN, END_TXN, INIT_PRODUCER_ID
from .coordinators import TRANSACTION_KEY_TYPE
from .retry import RetryPolicy

log = logging.getLogger(__name__)

CONCURRENT_TRANSACTIONS = 51
INVALID_PRODUCER_EPOCH = 47
PRODUCER_FENCED = 90
OPERATION_NOT_ATTEMPTED = 55
#: The option that bounds the transaction calls of a write (tasks' and driver's alike)
DELIVERY_TIMEOUT_OPTION = "kafka.delivery.timeout.ms"


class TransactionError(KafkaError):
    """A transaction could not be opened, extended or ended; names the transactional id."""

    def __init__(self, message: str, *, code: int = -1):
        super().__init__(message)
        self.code = code

    @property
    def fenced(self) -> bool:
        return self.code in (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH)


@dataclass(frozen=True)
class TransactionHandle:
    """What a task hands to the driver: enough to end the transaction from anywhere."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def _coordinator_call(
    client,
    transactional_id: str,
    what: str,
    call,
    timeout_ms: int,
    timeout_option: str = DELIVERY_TIMEOUT_OPTION,
):
    """``call(conn)`` at the coordinator of ``transactional_id`` (``Coordinators.call``
    of the client), retried until ``timeout_ms`` on connection errors and retriable
    coordinator errors (CONCURRENT_TRANSACTIONS among them) from 20 ms on, as the Java
    producer backs off on CONCURRENT_TRANSACTIONS. ``call`` returns an error code
    (0 = done) and a result. Failures raise :class:`TransactionError` with the code; one
    that ran out of time names ``timeout_option``."""

    def checked(conn):
        code, result = call(conn)
        if code:
            raise error_for_code(code)(
                f"{what} for transactional id {transactional_id!r}"
                f"{acl_hint(code, what, transactional_id=transactional_id)}"
            )
        return result

    try:
        return client.coordinators.call(
            transactional_id,
            checked,
            f"{what} for {transactional_id!r}",
            key_type=TRANSACTION_KEY_TYPE,
            policy=RetryPolicy(
                timeout_ms, backoff_ms=20, backoff_max_ms=1000, budget_option=timeout_option
            ),
        )
    except KafkaError as error:
        raise TransactionError(
            f"{what} failed for transactional id {transactional_id!r}: {error}",
            code=getattr(error, "code", -1),
        ) from error


def init_transactional_producer(
    client,
    transactional_id: str,
    transaction_timeout_ms: int,
    timeout_ms: int = 60000,
    timeout_option: str = DELIVERY_TIMEOUT_OPTION,
) -> TransactionHandle:
    """InitProducerId for ``transactional_id`` at its coordinator: a new epoch, which
    fences the previous one and aborts its open transaction (if any)."""

    def call(conn):
        response = conn.request(
            INIT_PRODUCER_ID,
            {
                "transactional_id": transactional_id,
                "transaction_timeout_ms": transaction_timeout_ms,
                "producer_id": -1,
                "producer_epoch": -1,
            },
        )
        return response["error_code"], (response["producer_id"], response["producer_epoch"])

    producer_id, epoch = _coordinator_call(
        client, transactional_id, "InitProducerId", call, timeout_ms, timeout_option
    )
    return TransactionHandle(transactional_id, producer_id, epoch)


def end_transaction(
    client,
    handle: TransactionHandle,
    commit: bool,
    timeout_ms: int = 60000,
    timeout_option: str = DELIVERY_TIMEOUT_OPTION,
) -> None:
    """EndTxn(commit or abort) of the transaction ``handle`` names.

    Ending a transaction that already ended the same way succeeds (a retried or
    repeated commit is harmless); a fenced or expired one raises :class:`TransactionError`.
    """
    body = {
        "transactional_id": handle.transactional_id,
        "producer_id": handle.producer_id,
        "producer_epoch": handle.producer_epoch,
        "committed": bool(commit),
    }

    def call(conn):
        return conn.request(END_TXN, body)["error_code"], None

    _coordinator_call(
        client,
        handle.transactional_id,
        "EndTxn(commit)" if commit else "EndTxn(abort)",
        call,
        timeout_ms,
        timeout_option,
    )


def end_transactions(
    client,
    handles,
    commit: bool,
    timeout_ms: int = 60000,
    timeout_option: str = DELIVERY_TIMEOUT_OPTION,
) -> list:
    """End several transactions; returns ``[(handle, error)]`` for the ones that failed,
    after trying every one."""
    failures = []
    for handle in handles:
        try:
            end_transaction(client, handle, commit, timeout_ms, timeout_option)
        except KafkaError as exc:
            failures.append((handle, exc))
    return failures


def add_partitions_to_txn(
    client,
    handle: TransactionHandle,
    topic_partitions,
    timeout_ms: int = 60000,
    timeout_option: str = DELIVERY_TIMEOUT_OPTION,
) -> None:
    """AddPartitionsToTxn (v0-3: one transactional id per request). The coordinator
    checks the producer id and epoch first: a fenced handle gets PRODUCER_FENCED."""
    by_topic = defaultdict(list)
    for topic, partition in sorted(topic_partitions):
        by_topic[topic].append(partition)
    body = {
        "v3_and_below_transactional_id": handle.transactional_id,
        "v3_and_below_producer_id": handle.producer_id,
        "v3_and_below_producer_epoch": handle.producer_epoch,
        "v3_and_below_topics": [
            {"name": t, "partitions": ps} for t, ps in sorted(by_topic.items())
        ],
    }

    def call(conn):
        response = conn.request(ADD_PARTITIONS_TO_TXN, body)
        worst = 0
        for topic in response["results_by_topic_v3_and_below"]:
            for part in topic["results_by_partition"]:
                code = part["partition_error_code"]
                # OPERATION_NOT_ATTEMPTED only says another partition failed.
                if (
                    code
                    and code != OPERATION_NOT_ATTEMPTED
                    and (worst == 0 or worst == CONCURRENT_TRANSACTIONS)
                ):
                    worst = code
        return worst, None

    names = ", ".join(f"{t}-{p}" for t, ps in sorted(by_topic.items()) for p in ps)
    _coordinator_call(
        client,
        handle.transactional_id,
        f"AddPartitionsToTxn ({names})",
        call,
        timeout_ms,
        timeout_option,
    )


def verify_transaction(
    client,
    handle: TransactionHandle,
    topic_partition,
    timeout_ms: int = 60000,
    timeout_option: str = DELIVERY_TIMEOUT_OPTION,
) -> None:
    """Check, without changing it, that ``handle`` is still the open transaction of its
    id: AddPartitionsToTxn of a partition the transaction already holds is answered at
    once with no effect, after the coordinator's producer id and epoch check. Raises a
    fenced :class:`TransactionError` when a newer producer of the id started (and
    aborted this transaction) or the transaction timed out (Kafka aborts it with a new
    epoch)."""
    add_partitions_to_txn(client, handle, [tuple(topic_partition)], timeout_ms, timeout_option)


def verify_transactions(
    client, probes, timeout_ms: int = 60000, timeout_option: str = DELIVERY_TIMEOUT_OPTION
) -> list:
    """:func:`verify_transaction` for several ``(handle, topic_partition)`` pairs; returns
    ``[(handle, error)]`` for the ones that are not open."""
    failures = []
    for handle, topic_partition in probes:
        try:
            verify_transaction(client, handle, topic_partition, timeout_ms, timeout_option)
        except KafkaError as exc:
            failures.append((handle, exc))
    return failures


class Transaction:
    """One task's transaction: begin, add partitions, hand over (never ends it itself)."""

    def __init__(
        self,
        client,
        transactional_id: str,
        transaction_timeout_ms: int = 60000,
        timeout_ms: int = 60000,
    ):
        self.client = client
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.timeout_ms = timeout_ms
        self.handle: TransactionHandle | None = None
        self.partitions: set[tuple[str, int]] = set()

    def _begun(self) -> TransactionHandle:
        if self.handle is None:
            raise RuntimeError(f"transaction {self.transactional_id!r} was not begun")
        return self.handle

    @property
    def producer_id(self) -> int:
        return self._begun().producer_id

    @property
    def producer_epoch(self) -> int:
        return self._begun().producer_epoch

    def begin(self) -> TransactionHandle:
        handle = self.handle = init_transactional_producer(
            self.client, self.transactional_id, self.transaction_timeout_ms, self.timeout_ms
        )
        self.partitions.clear()
        log.debug(
            "transaction %r: producer id %d epoch %d",
            self.transactional_id,
            handle.producer_id,
            handle.producer_epoch,
        )
        return handle

    def add_partitions(self, topic_partitions) -> None:
        """AddPartitionsToTxn for the partitions not yet in the transaction."""
        new = sorted(set(topic_partitions) - self.partitions)
        if not new:
            return
        add_partitions_to_txn(self.client, self._begun(), new, self.timeout_ms)
        self.partitions.update(new)


__all__ = [
    "Transaction",
    "TransactionError",
    "TransactionHandle",
    "add_partitions_to_txn",
    "end_transaction",
    "end_transactions",
    "init_transactional_producer",
    "verify_transaction",
    "verify_transactions",
]
