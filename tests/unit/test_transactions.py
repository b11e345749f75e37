"""Transactions without a broker: the exactly-once sink's transactional id prefixes and
option defaults (the transactions on the brokers: tests/integration/test_transactions.py;
the sink in Spark: tests/spark/test_transactions.py).
"""

import pytest

# --- the driver's pieces, without Spark -------------------------------------------------------


def eos_options(bootstrap, **extra):
    from kafka_ds.options import parse_write_options

    return parse_write_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": "t",
            "deliveryGuarantee": "exactly-once",
            **extra,
        }
    )


def test_prefix_defaults():
    from kafka_ds.errors import ConfigurationError
    from kafka_ds.write.exactly_once import batch_prefix, stream_prefix

    opts = eos_options("h:1", checkpointLocation="/chk/q1")
    assert stream_prefix(opts) == stream_prefix(eos_options("h:1", checkpointLocation="/chk/q1"))
    assert stream_prefix(opts) != stream_prefix(eos_options("h:1", checkpointLocation="/chk/q2"))
    assert batch_prefix(opts).startswith("pykafka-t-") and batch_prefix(opts) != batch_prefix(opts)
    chosen = eos_options("h:1", transactionalIdPrefix="orders-writer")
    assert batch_prefix(chosen) == stream_prefix(chosen) == "orders-writer"
    with pytest.raises(ConfigurationError, match="checkpointLocation"):
        stream_prefix(eos_options("h:1"))
    assert eos_options("h:1").transaction_timeout_ms == 60000


# --- giving up: the error names the option that bounded the wait ---------------------------


class _UnreachableCoordinators:
    """A client's coordinators that never answer: every attempt's connection fails, under
    the policy the transaction call gives (its budget and its option)."""

    def call(self, key, call, what, *, key_type, policy):
        from kafka_ds.errors import KafkaConnectionError

        def attempt():
            raise KafkaConnectionError(f"cannot connect to the coordinator of {key!r}")

        return policy.run(attempt, what)


def _unreachable_client():
    from types import SimpleNamespace

    return SimpleNamespace(coordinators=_UnreachableCoordinators())


def test_transaction_calls_that_run_out_of_time_name_the_option():
    from kafka_ds.client.transactions import (
        TransactionError,
        TransactionHandle,
        end_transaction,
        init_transactional_producer,
        verify_transaction,
    )

    client = _unreachable_client()
    handle = TransactionHandle("w-0", 7, 0)
    with pytest.raises(TransactionError, match=r"within 0.05 s \('kafka.delivery.timeout.ms'\)"):
        end_transaction(client, handle, True, timeout_ms=50)
    with pytest.raises(TransactionError, match=r"\('kafka.delivery.timeout.ms'\)"):
        init_transactional_producer(client, "w-1", 60000, timeout_ms=50)
    with pytest.raises(TransactionError, match=r"\('kafka.request.timeout.ms'\)"):
        verify_transaction(client, handle, ("t", 0), 50, "kafka.request.timeout.ms")


def test_a_commit_whose_coordinator_never_answers_does_not_call_the_transactions_ended():
    """check_open: transactions not verified because their coordinator did not answer
    are reported as unchecked (they may be open), not as no longer open."""
    from kafka_ds.client.transactions import TransactionError
    from kafka_ds.write.exactly_once import check_open
    from kafka_ds.write.messages import KafkaCommitMessage

    opts = eos_options(
        "h:1", **{"kafka.request.timeout.ms": "100", "kafka.delivery.timeout.ms": "300"}
    )
    message = KafkaCommitMessage(
        task=0,
        records=1,
        bytes=1,
        partitions=[("t", 0, 1, 0, 0)],
        transactional_id="w-0",
        producer_id=7,
        producer_epoch=0,
    )
    with pytest.raises(TransactionError) as info:
        check_open(_unreachable_client(), opts, [message])
    text = str(info.value)
    assert "1 of 1 task transactions could not be checked" in text
    assert "no longer open" not in text and "'kafka.delivery.timeout.ms'" in text
