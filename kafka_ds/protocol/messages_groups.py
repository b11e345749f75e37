"""Consumer groups: FindCoordinator (which finds transaction coordinators too),
OffsetCommit and OffsetFetch.

Described as data like every message (see ``messages.py``, the list of them all).
"""

from __future__ import annotations

from .schema import F, Message

FIND_COORDINATOR = Message(
    "FindCoordinator",
    10,
    valid_versions="0-4",
    flexible_versions="3+",
    request=(
        F("Key", "string", "0-3"),
        F("KeyType", "int8", "1+"),
        F("CoordinatorKeys", "[]string", "4+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0-3"),
        F("ErrorMessage", "string", "1-3", nullable="1-3"),
        F("NodeId", "int32", "0-3"),
        F("Host", "string", "0-3"),
        F("Port", "int32", "0-3"),
        F(
            "Coordinators",
            "[]Coordinator",
            "4+",
            F("Key", "string", "4+"),
            F("NodeId", "int32", "4+"),
            F("Host", "string", "4+"),
            F("Port", "int32", "4+"),
            F("ErrorCode", "int16", "4+"),
            F("ErrorMessage", "string", "4+", nullable="4+"),
        ),
    ),
)

OFFSET_COMMIT = Message(
    "OffsetCommit",
    8,
    valid_versions="2-9",
    flexible_versions="8+",
    request=(
        F("GroupId", "string"),
        F("GenerationIdOrMemberEpoch", "int32", "1+", default=-1),
        F("MemberId", "string", "1+"),
        F("GroupInstanceId", "string", "7+", nullable="7+", default="null"),
        F("RetentionTimeMs", "int64", "2-4", default=-1),
        F(
            "Topics",
            "[]OffsetCommitRequestTopic",
            "0+",
            F("Name", "string"),
            F(
                "Partitions",
                "[]OffsetCommitRequestPartition",
                "0+",
                F("PartitionIndex", "int32"),
                F("CommittedOffset", "int64"),
                F("CommittedLeaderEpoch", "int32", "6+", default=-1),
                F("CommitTimestamp", "int64", "1", default=-1),
                F("CommittedMetadata", "string", "0+", nullable="0+"),
            ),
        ),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "3+"),
        F(
            "Topics",
            "[]OffsetCommitResponseTopic",
            "0+",
            F("Name", "string"),
            F(
                "Partitions",
                "[]OffsetCommitResponsePartition",
                "0+",
                F("PartitionIndex", "int32"),
                F("ErrorCode", "int16"),
            ),
        ),
    ),
)

# v8+ batch several groups; kafka_ds sends one group either way.
OFFSET_FETCH = Message(
    "OffsetFetch",
    9,
    valid_versions="1-9",
    flexible_versions="6+",
    request=(
        F("GroupId", "string", "0-7"),
        F(
            "Topics",
            "[]OffsetFetchRequestTopic",
            "0-7",
            F("Name", "string", "0-7"),
            F("PartitionIndexes", "[]int32", "0-7"),
            nullable="2-7",
        ),
        F(
            "Groups",
            "[]OffsetFetchRequestGroup",
            "8+",
            F("GroupId", "string", "8+"),
            F("MemberId", "string", "9+", nullable="9+", default="null"),
            F("MemberEpoch", "int32", "9+", default=-1),
            F(
                "Topics",
                "[]OffsetFetchRequestTopics",
                "8+",
                F("Name", "string", "8+"),
                F("PartitionIndexes", "[]int32", "8+"),
                nullable="8+",
            ),
        ),
        F("RequireStable", "bool", "7+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "3+"),
        F(
            "Topics",
            "[]OffsetFetchResponseTopic",
            "0-7",
            F("Name", "string", "0-7"),
            F(
                "Partitions",
                "[]OffsetFetchResponsePartition",
                "0-7",
                F("PartitionIndex", "int32", "0-7"),
                F("CommittedOffset", "int64", "0-7"),
                F("CommittedLeaderEpoch", "int32", "5-7", default=-1),
                F("Metadata", "string", "0-7", nullable="0-7"),
                F("ErrorCode", "int16", "0-7"),
            ),
        ),
        F("ErrorCode", "int16", "2-7"),
        F(
            "Groups",
            "[]OffsetFetchResponseGroup",
            "8+",
            F("GroupId", "string", "8+"),
            F(
                "Topics",
                "[]OffsetFetchResponseTopics",
                "8+",
                F("Name", "string", "8+"),
                F(
                    "Partitions",
                    "[]OffsetFetchResponsePartitions",
                    "8+",
                    F("PartitionIndex", "int32", "8+"),
                    F("CommittedOffset", "int64", "8+"),
                    F("CommittedLeaderEpoch", "int32", "8+", default=-1),
                    F("Metadata", "string", "8+", nullable="8+"),
                    F("ErrorCode", "int16", "8+"),
                ),
            ),
            F("ErrorCode", "int16", "8+"),
        ),
    ),
)
