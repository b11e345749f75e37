"""The default partitioner against librdkafka's ``murmur2_random`` partitioner, which is
documented as Java-compatible, asked on a real broker (the other references:
tests/unit/test_partitioner.py).
"""

import pyarrow as pa

from kafka_ds.write.partitioner import partitions_for_keys
from tests.support.brokers import produce_confluent
from tests.unit.test_partitioner import random_keys


def test_librdkafka_murmur2_random_agrees(broker, new_topic):
    """librdkafka's Java-compatible partitioner, on a real broker, picks our partitions."""
    topic = new_topic(partitions=7)
    keys = [f"user-{i}".encode() for i in range(300)] + random_keys(100, seed=9)[:100]
    keys = [k for k in keys if k]  # librdkafka treats an empty key as no key in some paths
    placed = produce_confluent(
        broker.bootstrap_servers,
        topic,
        [{"key": k, "value": b"v"} for k in keys],
        partitioner="murmur2_random",
        **{"linger.ms": 0},
    )
    assert [p for p, _offset in placed] == partitions_for_keys(
        pa.array(keys, pa.binary()), 7
    ).tolist()
