"""ACLs under Apache Kafka's StandardAuthorizer (``kafka_secure``): a request the ACLs refuse
fails at once, with an error naming the resource and the ACL operation it lacks.

The principal ``nobody`` (SASL PLAIN on the ``SASL`` listener) has no ACL but those a test
grants it on its own fresh topic, group and transactional id. Spark (read, stream, group
commits, exactly-once writes with the documented ACLs): tests/spark/test_acls.py.
"""

from __future__ import annotations

import uuid

import pytest

from kafka_ds.client import KafkaClient
from kafka_ds.client.transactions import TransactionError, init_transactional_producer
from kafka_ds.errors import BrokerError
from tests.support import secure_kafka
from tests.unit.test_security import client_config

pytestmark = pytest.mark.integration


def user_options(user):
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": secure_kafka.ACL_USERS[user],
        "default.api.timeout.ms": "20000",
    }


def test_missing_acls_fail_at_once_naming_resource_and_operation(kafka_secure):
    topic = kafka_secure.create_topic(f"acl-{uuid.uuid4().hex[:8]}", 1, 1)
    group, txn = f"g-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    servers = kafka_secure.listener_servers("SASL")
    with KafkaClient(servers, client_config(user_options("nobody"))) as client:
        for call in (
            lambda: client.list_offsets({(topic, 0): -1}),
            lambda: client.fetch(topic, 0, 0),
        ):
            with pytest.raises(BrokerError) as info:
                call()
            text = str(info.value)
            assert "TOPIC_AUTHORIZATION_FAILED" in text and "lacks ACL Describe on topic" in text
            assert repr(topic) in text and "retrying" not in text  # no 60 s of retries
        for call in (
            lambda: client.commit_offsets(group, {(topic, 0): 1}),
            lambda: client.fetch_committed(group, [(topic, 0)]),
        ):
            with pytest.raises(BrokerError, match="GROUP_AUTHORIZATION_FAILED") as info:
                call()
            assert f"lacks ACL Describe on group {group!r}" in str(info.value)
        with pytest.raises(TransactionError) as info:
            init_transactional_producer(client, txn, 60000, timeout_ms=20000)
        text = str(info.value)
        assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in text
        assert f"lacks ACL Describe on transactional id {txn!r}" in text
    # Describe on the group, but not Read: the commit itself is refused, named as such
    secure_kafka.grant(
        kafka_secure,
        "nobody",
        [
            ("TOPIC", topic, "LITERAL", "READ"),
            ("GROUP", group, "LITERAL", "DESCRIBE"),
            ("TRANSACTIONAL_ID", txn, "LITERAL", "DESCRIBE"),
        ],
    )
    with KafkaClient(servers, client_config(user_options("nobody"))) as client:
        assert client.fetch(topic, 0, 0)["error_code"] == 0
        assert client.fetch_committed(group, [(topic, 0)]) == {}
        with pytest.raises(BrokerError, match="GROUP_AUTHORIZATION_FAILED") as info:
            client.commit_offsets(group, {(topic, 0): 1})
        assert f"lacks ACL Read on group {group!r}" in str(info.value)
        with pytest.raises(TransactionError) as info:
            init_transactional_producer(client, txn, 60000, timeout_ms=20000)
        assert f"lacks ACL Write on transactional id {txn!r}" in str(info.value)
