"""Requests any broker answers, with no leader or coordinator to find: CreateTopics (the
broker forwards it to the controller) and the idempotent producer's InitProducerId.

Functions of a :class:`~kafka_ds.client.cluster.KafkaClient`, which offers them as its
methods too (``client.create_topic(...)``, ``client.init_producer_id()``).
"""

from __future__ import annotations

from ..protocol.errors import error_for_code
from ..protocol.messages_cluster import CREATE_TOPICS
from ..protocol.messages_transactions import INIT_PRODUCER_ID


def create_topic(
    client,
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    timeout_ms: int | None = None,
) -> None:
    """CreateTopics through any broker (it forwards to the controller); an existing
    topic is an error, as in the admin API."""
    conn = client.any_connection()
    response = conn.request(
        CREATE_TOPICS,
        CREATE_TOPICS.body(
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                }
            ],
            timeout_ms=client.config.request_timeout_ms if timeout_ms is None else timeout_ms,
        ),
    )
    for topic in response["topics"]:
        if topic["error_code"]:
            raise error_for_code(topic["error_code"])(
                f"CreateTopics {name!r}: {topic.get('error_message') or ''}".rstrip(": ")
            )
    client.refresh_metadata([name])


def init_producer_id(
    client, transactional_id: str | None = None, transaction_timeout_ms: int = 60000
) -> tuple[int, int]:
    """(producer id, epoch) from any broker, under the client's retry policy. A
    transactional producer asks its coordinator instead (transactions.py)."""

    def attempt():
        conn = client.any_connection()
        response = conn.request(
            INIT_PRODUCER_ID,
            INIT_PRODUCER_ID.body(
                transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms
            ),
        )
        if response["error_code"]:
            raise error_for_code(response["error_code"])("InitProducerId")
        return response["producer_id"], response["producer_epoch"]

    return client.retrying(attempt, "InitProducerId")
