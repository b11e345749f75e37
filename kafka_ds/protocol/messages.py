"""Every Kafka API kafka_ds speaks, described once as data (see ``schema.py``): the list
of them all, by name and by API key. The descriptions live by API family:

* ``messages_connection.py``  ApiVersions, SaslHandshake, SaslAuthenticate
* ``messages_cluster.py``     Metadata, CreateTopics
* ``messages_produce_fetch.py``  ListOffsets, Fetch, Produce
* ``messages_groups.py``      FindCoordinator, OffsetCommit, OffsetFetch
* ``messages_transactions.py``  InitProducerId, AddPartitionsToTxn, EndTxn

Transcribed field-for-field from Apache Kafka's JSON message definitions
(clients/src/main/resources/common/message/*.json): names, types, version
ranges, nullable versions and tags. ``valid_versions`` is the range this client
supports; the connection negotiates the highest version the broker also speaks.
"""

from __future__ import annotations

from .messages_cluster import CREATE_TOPICS, METADATA
from .messages_connection import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from .messages_groups import FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH
from .messages_produce_fetch import FETCH, LIST_OFFSETS, PRODUCE
from .messages_transactions import ADD_PARTITIONS_TO_TXN, END_TXN, INIT_PRODUCER_ID

ALL_MESSAGES = {
    m.name: m
    for m in [
        API_VERSIONS,
        METADATA,
        LIST_OFFSETS,
        FETCH,
        PRODUCE,
        FIND_COORDINATOR,
        OFFSET_COMMIT,
        OFFSET_FETCH,
        INIT_PRODUCER_ID,
        CREATE_TOPICS,
        ADD_PARTITIONS_TO_TXN,
        END_TXN,
        SASL_HANDSHAKE,
        SASL_AUTHENTICATE,
    ]
}
BY_KEY = {m.api_key: m for m in ALL_MESSAGES.values()}
