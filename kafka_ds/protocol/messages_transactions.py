"""Idempotent and transactional producers: InitProducerId, AddPartitionsToTxn, EndTxn.

Described as data like every message (see ``messages.py``, the list of them all).
"""

from __future__ import annotations

from .schema import F, Message

INIT_PRODUCER_ID = Message(
    "InitProducerId",
    22,
    valid_versions="0-5",
    flexible_versions="2+",
    request=(
        F("TransactionalId", "string", "0+", nullable="0+"),
        F("TransactionTimeoutMs", "int32"),
        F("ProducerId", "int64", "3+", default=-1),
        F("ProducerEpoch", "int16", "3+", default=-1),
    ),
    response=(
        F("ThrottleTimeMs", "int32"),
        F("ErrorCode", "int16"),
        F("ProducerId", "int64", default=-1),
        F("ProducerEpoch", "int16"),
    ),
)

# Transactions (KIP-98). AddPartitionsToTxn stops at v3: v4+ batch several
# transactions and are sent by brokers only (KIP-890 verification).
ADD_PARTITIONS_TO_TXN = Message(
    "AddPartitionsToTxn",
    24,
    valid_versions="0-3",
    flexible_versions="3+",
    request=(
        F("V3AndBelowTransactionalId", "string", "0-3"),
        F("V3AndBelowProducerId", "int64", "0-3"),
        F("V3AndBelowProducerEpoch", "int16", "0-3"),
        F(
            "V3AndBelowTopics",
            "[]AddPartitionsToTxnTopic",
            "0-3",
            F("Name", "string", "0+"),
            F("Partitions", "[]int32", "0+"),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F(
            "ResultsByTopicV3AndBelow",
            "[]AddPartitionsToTxnTopicResult",
            "0-3",
            F("Name", "string", "0+"),
            F(
                "ResultsByPartition",
                "[]AddPartitionsToTxnPartitionResult",
                "0+",
                F("PartitionIndex", "int32", "0+"),
                F("PartitionErrorCode", "int16", "0+"),
            ),
        ),
    ),
)

# EndTxn stops at v4: v5 bumps the producer epoch at every commit (KIP-890 part 2),
# which would change the (producer id, epoch) a task hands to the driver.
END_TXN = Message(
    "EndTxn",
    26,
    valid_versions="0-4",
    flexible_versions="3+",
    request=(
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("Committed", "bool", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
    ),
)
