"""The requests to a partition's leader: ListOffsets and Fetch (reads), Produce (writes).

Described as data like every message (see ``messages.py``, the list of them all).
"""

from __future__ import annotations

from .schema import F, Message

LIST_OFFSETS = Message(
    "ListOffsets",
    2,
    valid_versions="0-9",
    flexible_versions="6+",
    request=(
        F("ReplicaId", "int32"),
        F("IsolationLevel", "int8", "2+"),
        F(
            "Topics",
            "[]ListOffsetsTopic",
            "0+",
            F("Name", "string"),
            F(
                "Partitions",
                "[]ListOffsetsPartition",
                "0+",
                F("PartitionIndex", "int32"),
                F("CurrentLeaderEpoch", "int32", "4+", default=-1),
                F("Timestamp", "int64"),
                F("MaxNumOffsets", "int32", "0", default=1),
            ),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+"),
        F(
            "Topics",
            "[]ListOffsetsTopicResponse",
            "0+",
            F("Name", "string"),
            F(
                "Partitions",
                "[]ListOffsetsPartitionResponse",
                "0+",
                F("PartitionIndex", "int32"),
                F("ErrorCode", "int16"),
                F("OldStyleOffsets", "[]int64", "0"),
                F("Timestamp", "int64", "1+", default=-1),
                F("Offset", "int64", "1+", default=-1),
                F("LeaderEpoch", "int32", "4+", default=-1),
            ),
        ),
    ),
)

# Fetch stops at v12: v13+ address topics by id instead of name.
FETCH = Message(
    "Fetch",
    1,
    valid_versions="4-12",
    flexible_versions="12+",
    request=(
        F("ClusterId", "string", "12+", nullable="12+", tag=0, default="null"),
        F("ReplicaId", "int32", "0-14", default=-1),
        F("MaxWaitMs", "int32"),
        F("MinBytes", "int32"),
        F("MaxBytes", "int32", "3+", default=0x7FFFFFFF),
        F("IsolationLevel", "int8", "4+"),
        F("SessionId", "int32", "7+"),
        F("SessionEpoch", "int32", "7+", default=-1),
        F(
            "Topics",
            "[]FetchTopic",
            "0+",
            F("Topic", "string", "0-12"),
            F(
                "Partitions",
                "[]FetchPartition",
                "0+",
                F("Partition", "int32"),
                F("CurrentLeaderEpoch", "int32", "9+", default=-1),
                F("FetchOffset", "int64"),
                F("LastFetchedEpoch", "int32", "12+", default=-1),
                F("LogStartOffset", "int64", "5+", default=-1),
                F("PartitionMaxBytes", "int32"),
            ),
        ),
        F(
            "ForgottenTopicsData",
            "[]ForgottenTopic",
            "7+",
            F("Topic", "string", "7-12"),
            F("Partitions", "[]int32", "7+"),
        ),
        F("RackId", "string", "11+", default=""),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "7+"),
        F("SessionId", "int32", "7+"),
        F(
            "Responses",
            "[]FetchableTopicResponse",
            "0+",
            F("Topic", "string", "0-12"),
            F(
                "Partitions",
                "[]PartitionData",
                "0+",
                F("PartitionIndex", "int32"),
                F("ErrorCode", "int16"),
                F("HighWatermark", "int64"),
                F("LastStableOffset", "int64", "4+", default=-1),
                F("LogStartOffset", "int64", "5+", default=-1),
                F(
                    "DivergingEpoch",
                    "EpochEndOffset",
                    "12+",
                    F("Epoch", "int32", "12+", default=-1),
                    F("EndOffset", "int64", "12+", default=-1),
                    tag=0,
                ),
                F(
                    "CurrentLeader",
                    "LeaderIdAndEpoch",
                    "12+",
                    F("LeaderId", "int32", "12+", default=-1),
                    F("LeaderEpoch", "int32", "12+", default=-1),
                    tag=1,
                ),
                F(
                    "SnapshotId",
                    "SnapshotId",
                    "12+",
                    F("EndOffset", "int64", "12+", default=-1),
                    F("Epoch", "int32", "12+", default=-1),
                    tag=2,
                ),
                F(
                    "AbortedTransactions",
                    "[]AbortedTransaction",
                    "4+",
                    F("ProducerId", "int64", "4+"),
                    F("FirstOffset", "int64", "4+"),
                    nullable="4+",
                ),
                F("PreferredReadReplica", "int32", "11+", default=-1),
                F("Records", "records", "0+", nullable="0+"),
            ),
        ),
    ),
)

# Produce from v3 (record batch v2) up to v11; v12+ add nothing we use, v13 uses topic ids.
PRODUCE = Message(
    "Produce",
    0,
    valid_versions="3-11",
    flexible_versions="9+",
    request=(
        F("TransactionalId", "string", "3+", nullable="3+", default="null"),
        F("Acks", "int16"),
        F("TimeoutMs", "int32"),
        F(
            "TopicData",
            "[]TopicProduceData",
            "0+",
            F("Name", "string"),
            F(
                "PartitionData",
                "[]PartitionProduceData",
                "0+",
                F("Index", "int32"),
                F("Records", "records", "0+", nullable="0+"),
            ),
        ),
    ),
    response=(
        F(
            "Responses",
            "[]TopicProduceResponse",
            "0+",
            F("Name", "string"),
            F(
                "PartitionResponses",
                "[]PartitionProduceResponse",
                "0+",
                F("Index", "int32"),
                F("ErrorCode", "int16"),
                F("BaseOffset", "int64"),
                F("LogAppendTimeMs", "int64", "2+", default=-1),
                F("LogStartOffset", "int64", "5+", default=-1),
                F(
                    "RecordErrors",
                    "[]BatchIndexAndErrorMessage",
                    "8+",
                    F("BatchIndex", "int32", "8+"),
                    F("BatchIndexErrorMessage", "string", "8+", nullable="8+", default="null"),
                ),
                F("ErrorMessage", "string", "8+", nullable="8+", default="null"),
                F(
                    "CurrentLeader",
                    "LeaderIdAndEpoch",
                    "10+",
                    F("LeaderId", "int32", "10+", default=-1),
                    F("LeaderEpoch", "int32", "10+", default=-1),
                    tag=0,
                ),
            ),
        ),
        F("ThrottleTimeMs", "int32", "1+"),
        F(
            "NodeEndpoints",
            "[]NodeEndpoint",
            "10+",
            F("NodeId", "int32", "10+"),
            F("Host", "string", "10+"),
            F("Port", "int32", "10+"),
            F("Rack", "string", "10+", nullable="10+", default="null"),
            tag=0,
        ),
    ),
)
