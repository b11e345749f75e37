"""The change-data fixture proven with independent clients: PostgreSQL's changes, captured by
Debezium in Kafka Connect (tests/support/debezium.py), read back by confluent-kafka."""

import json

import pytest

from tests.support.debezium import change_data, read_topic  # noqa: F401  (fixture)

pytestmark = pytest.mark.only_brokers("kafka")


def test_inserts_updates_deletes_and_a_truncate_reach_kafka_as_debezium_envelopes(
    change_data,  # noqa: F811
    kafka_broker,
):
    change_data.execute("CREATE TABLE fixture_proof (id int PRIMARY KEY, name text)")
    topic = change_data.capture("fixture_proof", schemas=True)
    change_data.execute(
        "INSERT INTO fixture_proof VALUES (1, 'one'), (2, 'two')",
        "UPDATE fixture_proof SET name = 'uno' WHERE id = 1",
        "DELETE FROM fixture_proof WHERE id = 2",
        "TRUNCATE fixture_proof",
    )
    # c, c, u, d, the delete's tombstone, t
    records = read_topic(kafka_broker.bootstrap_servers, topic, 6)
    values = [json.loads(value) if value else None for _, _, value in records]
    assert [v and v["payload"]["op"] for v in values] == ["c", "c", "u", "d", None, "t"]
    assert values[2]["payload"]["after"] == {"id": 1, "name": "uno"}
    assert values[3]["payload"]["before"]["id"] == 2
    assert [json.loads(key)["payload"] if key else None for _, key, _ in records] == [
        {"id": 1},
        {"id": 2},
        {"id": 1},
        {"id": 2},
        {"id": 2},
        None,  # a truncate has no key
    ]
    envelope = values[0]["schema"]
    assert envelope["name"] == f"{topic}.Envelope"
    assert [f["field"] for f in envelope["fields"]][:3] == ["before", "after", "source"]
