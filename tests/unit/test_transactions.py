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
