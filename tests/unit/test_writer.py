"""The write path without a broker: the write options and their defaults (the Java
producer's), and the commit summary. Writes on the brokers: tests/integration/test_writer.py;
the sink's column plan (its schema types are parsed by Spark), ``df.write`` and
``writeStream``: tests/spark/test_writer.py.
"""

import pytest

from kafka_ds.errors import ConfigurationError
from kafka_ds.options import parse_write_options
from kafka_ds.write.messages import KafkaCommitMessage, WriteSummary

# --- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options,message",
    [
        (
            {"kafka.key.serializer": "x"},
            r"Kafka option 'key.serializer' is not supported.*binary or string",
        ),
        ({"kafka.value.serializer": "x"}, r"Kafka option 'value.serializer' is not supported"),
        ({"kafka.transactional.id": "x"}, r"transactional.id.*deliveryGuarantee.*exactly-once"),
        ({"kafka.partitioner.class": "x"}, r"compute a 'partition' column"),
        ({"kafka.acks": "2"}, r"'kafka.acks' must be '0', '1' or 'all'"),
        ({"kafka.compression.type": "brotli"}, r"'kafka.compression.type' must be one of"),
        (
            {"kafka.enable.idempotence": "true", "kafka.acks": "1"},
            r"'kafka.enable.idempotence' is 'true' but 'kafka.acks' is '1'",
        ),
        (
            {
                "kafka.enable.idempotence": "true",
                "kafka.max.in.flight.requests.per.connection": "6",
            },
            r"idempotence allows at most 5",
        ),
        (
            {"kafka.delivery.timeout.ms": "1000"},
            r"'kafka.delivery.timeout.ms' \(1000\) must be at least",
        ),
        ({"kafka.batch.size": "-1"}, r"'kafka.batch.size' must be at least 1"),
        ({"topic": " "}, r"Option 'topic' is empty"),
        ({"kafka.bootstrap.servers": ""}, r"'kafka.bootstrap.servers' must be set"),
        ({"deliveryGuarantee": "exactly_once"}, r"'deliveryGuarantee' must be 'at-least-once' or"),
        (
            {"deliveryGuarantee": "exactly-once", "kafka.acks": "1"},
            r"'deliveryGuarantee' is 'exactly-once'.*'kafka.acks' is '1'",
        ),
        (
            {"deliveryGuarantee": "exactly-once", "kafka.enable.idempotence": "false"},
            r"'deliveryGuarantee' is 'exactly-once'.*'kafka.enable.idempotence' is 'false'",
        ),
        ({"transactionalIdPrefix": " "}, r"'transactionalIdPrefix' is empty"),
        (
            {"kafka.transaction.timeout.ms": "0"},
            r"'kafka.transaction.timeout.ms' must be at least 1",
        ),
    ],
)
def test_write_option_errors(options, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_write_options({"kafka.bootstrap.servers": "h:1", **options})


def test_write_option_defaults_follow_the_java_producer():
    opts = parse_write_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Topic": "t"})
    assert (
        opts.acks,
        opts.idempotent,
        opts.compression,
        opts.delivery_timeout_ms,
        opts.max_in_flight,
        opts.retries,
    ) == (-1, True, "none", 120000, 5, 2147483647)
    # acks=1 without an explicit idempotence setting quietly turns idempotence off
    assert not parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1"}).idempotent
    assert parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "all"}).acks == -1


# --- errors in the data, naming topic / partition / row ------------------------------------


def test_allow_auto_create_topics_option_is_checked_on_the_driver():
    with pytest.raises(ConfigurationError, match="'kafka.allow.auto.create.topics'"):
        parse_write_options(
            {
                "kafka.bootstrap.servers": "127.0.0.1:1",
                "topic": "t",
                "kafka.allow.auto.create.topics": "maybe",
            }
        )
    assert parse_write_options({"kafka.bootstrap.servers": "h:1"}).allow_auto_create_topics
    assert not parse_write_options(
        {"kafka.bootstrap.servers": "h:1", "kafka.allow.auto.create.topics": "false"}
    ).allow_auto_create_topics


# --- batching, acks, commit messages ------------------------------------------------------


def test_commit_summary_folds_task_messages():
    messages = [
        KafkaCommitMessage(
            task=0,
            records=30,
            bytes=900,
            retries=1,
            partitions=[("a", 0, 10, 0, 9), ("a", 1, 20, 5, 24)],
        ),
        None,
        KafkaCommitMessage(
            task=2, records=15, bytes=400, partitions=[("a", 0, 5, 10, 14), ("b", 0, 10, -1, -1)]
        ),
    ]
    summary = WriteSummary.of(messages)
    assert (summary.records, summary.tasks, summary.failed_tasks, summary.retries) == (45, 2, 1, 1)
    assert summary.partitions == {
        ("a", 0): [15, 0, 14],
        ("a", 1): [20, 5, 24],
        ("b", 0): [10, -1, -1],
    }
    text = summary.describe()
    assert "45 records" in text and "a-0: 15 offsets 0-14" in text and "b-0: 10" in text
