"""ACLs under Apache Kafka's StandardAuthorizer, in Spark (``kafka_secure``; the principals
``reader`` and ``eos`` log in with SASL PLAIN and have only the ACLs each test grants them on
its own fresh topics, groups and transactional-id prefixes).

* A principal with only Read on the topic and Read on its group reads (batch), streams and
  commits the group's offsets (``kafka.group.id``); a topic it has no ACL for fails the
  read naming the topic and the ACL.
* Exactly-once writes work with the ACLs docs/exactly_once.md lists; without Write on the
  transactional ids they fail naming the id; without the group ACLs (the abort marker) they
  write on, as documented.
Client-level errors of every missing ACL: tests/integration/test_acls.py.
"""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support import secure_kafka
from tests.support.spark_support import spark  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def user_options(cluster, user):
    return {
        "kafka.bootstrap.servers": cluster.listener_servers("SASL"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.username": user,
        "kafka.sasl.password": secure_kafka.ACL_USERS[user],
        "kafka.default.api.timeout.ms": "20000",
    }


def admin_produce(cluster, topic, values):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % 2)
    assert producer.flush(20) == 0


def committed(cluster, group, topic, partitions):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    result = cluster.admin().list_consumer_group_offsets([request])[group].result(20)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def read_committed(cluster, topic):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is not None and not msg.error():
                got.append(msg.value().decode())
            elif msg is None and got:
                break
    finally:
        consumer.close()
    return got


def test_read_only_principal_reads_streams_and_commits(spark, kafka_secure, tmp_path):
    topic = kafka_secure.create_topic(f"acl-r-{uuid.uuid4().hex[:8]}", 2, 1)
    other = kafka_secure.create_topic(f"acl-x-{uuid.uuid4().hex[:8]}", 1, 1)
    group = f"acl-g-{uuid.uuid4().hex[:6]}"
    values = [f"v{i}".encode() for i in range(6)]
    admin_produce(kafka_secure, topic, values)
    secure_kafka.grant(
        kafka_secure,
        "reader",
        [("TOPIC", topic, "LITERAL", "READ"), ("GROUP", group, "LITERAL", "READ")],
    )
    options = user_options(kafka_secure, "reader")
    batch = (
        spark.read.format("pykafka")
        .options(**options)
        .option("subscribe", topic)
        .load()
        .select("value")
        .collect()
    )
    assert sorted(r.value for r in batch) == values
    seen = []
    query = (
        spark.readStream.format("pykafka")
        .options(**options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 2)
        .option("kafka.group.id", group)
        .load()
        .writeStream.foreachBatch(
            lambda df, _id: seen.extend(r.value for r in df.select("value").collect())
        )
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert sorted(seen) == values
    deadline = time.monotonic() + 20
    while True:  # the group's commits are sent in the background (docs/streaming.md)
        offsets = committed(kafka_secure, group, topic, 2)
        if sum(max(o, 0) for o in offsets.values()) == 6 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    # batches of 2: each committed when the next is planned; the last at the query's end
    assert sum(max(o, 0) for o in offsets.values()) >= 4, offsets
    with pytest.raises(Exception) as info:
        spark.read.format("pykafka").options(**options).option("subscribe", other).load().collect()
    text = str(info.value)
    assert "TOPIC_AUTHORIZATION_FAILED" in text and f"lacks ACL Describe on topic '{other}'" in text


def eos_write(spark, cluster, topic, prefix, rows=5):
    (
        spark.createDataFrame([(f"r{i}",) for i in range(rows)], "value string")
        .coalesce(1)
        .write.format("pykafka")
        .options(**user_options(cluster, "eos"))
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly-once")
        .option("transactionalIdPrefix", prefix)
        .mode("append")
        .save()
    )


def test_exactly_once_write_with_the_documented_acls(spark, kafka_secure):
    topic = kafka_secure.create_topic(f"acl-eos-{uuid.uuid4().hex[:8]}", 1, 1)
    run = uuid.uuid4().hex[:6]
    full, no_txn, no_group = f"eosA-{run}", f"eosB-{run}", f"eosC-{run}"
    # docs/exactly_once.md "Costs", ACLs: Write on the topic and on the transactional ids
    # with the prefix; Describe and Read on the groups with that prefix (the abort marker),
    # Read on the topic (the marker's offset)
    acls = [("TOPIC", topic, "LITERAL", "WRITE"), ("TOPIC", topic, "LITERAL", "READ")]
    for prefix in (full, no_group):
        acls.append(("TRANSACTIONAL_ID", prefix, "PREFIXED", "WRITE"))
    acls += [("GROUP", full, "PREFIXED", "DESCRIBE"), ("GROUP", full, "PREFIXED", "READ")]
    secure_kafka.grant(kafka_secure, "eos", acls)
    eos_write(spark, kafka_secure, topic, full)
    assert read_committed(kafka_secure, topic) == [f"r{i}" for i in range(5)]
    # without Write on the transactional ids: the write fails naming the id
    with pytest.raises(Exception) as info:
        eos_write(spark, kafka_secure, topic, no_txn)
    text = str(info.value)
    assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in text and f"'{no_txn}-0'" in text
    assert "lacks ACL" in text
    # without the group ACLs: the tasks cannot look at the abort marker and write on
    eos_write(spark, kafka_secure, topic, no_group, rows=3)
    assert read_committed(kafka_secure, topic) == [f"r{i}" for i in range(5)] + [
        f"r{i}" for i in range(3)
    ]
