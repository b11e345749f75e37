"""The cluster's shape: Metadata (brokers, topics, partitions and their leaders) and
CreateTopics.

Described as data like every message (see ``messages.py``, the list of them all).
"""

from __future__ import annotations

from .schema import F, Message

# Metadata: v0 asks for all topics with an empty array, later versions with null.
METADATA = Message(
    "Metadata",
    3,
    valid_versions="0-12",
    flexible_versions="9+",
    request=(
        F(
            "Topics",
            "[]MetadataRequestTopic",
            "0+",
            F("TopicId", "uuid", "10+"),
            F("Name", "string", "0+", nullable="10+"),
            nullable="1+",
        ),
        F("AllowAutoTopicCreation", "bool", "4+", default=True),
        F("IncludeClusterAuthorizedOperations", "bool", "8-10"),
        F("IncludeTopicAuthorizedOperations", "bool", "8+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "3+"),
        F(
            "Brokers",
            "[]MetadataResponseBroker",
            "0+",
            F("NodeId", "int32"),
            F("Host", "string"),
            F("Port", "int32"),
            F("Rack", "string", "1+", nullable="1+", default="null"),
        ),
        F("ClusterId", "string", "2+", nullable="2+", default="null"),
        F("ControllerId", "int32", "1+", default=-1),
        F(
            "Topics",
            "[]MetadataResponseTopic",
            "0+",
            F("ErrorCode", "int16"),
            F("Name", "string", "0+", nullable="12+"),
            F("TopicId", "uuid", "10+"),
            F("IsInternal", "bool", "1+"),
            F(
                "Partitions",
                "[]MetadataResponsePartition",
                "0+",
                F("ErrorCode", "int16"),
                F("PartitionIndex", "int32"),
                F("LeaderId", "int32"),
                F("LeaderEpoch", "int32", "7+", default=-1),
                F("ReplicaNodes", "[]int32"),
                F("IsrNodes", "[]int32"),
                F("OfflineReplicas", "[]int32", "5+"),
            ),
            F("TopicAuthorizedOperations", "int32", "8+", default=-(1 << 31)),
        ),
        F("ClusterAuthorizedOperations", "int32", "8-10", default=-(1 << 31)),
    ),
)

# CreateTopics: used by the demo and tooling to make topics on brokers that allow it.
CREATE_TOPICS = Message(
    "CreateTopics",
    19,
    valid_versions="2-7",
    flexible_versions="5+",
    request=(
        F(
            "Topics",
            "[]CreatableTopic",
            "0+",
            F("Name", "string"),
            F("NumPartitions", "int32"),
            F("ReplicationFactor", "int16"),
            F(
                "Assignments",
                "[]CreatableReplicaAssignment",
                "0+",
                F("PartitionIndex", "int32"),
                F("BrokerIds", "[]int32"),
            ),
            F(
                "Configs",
                "[]CreatableTopicConfig",
                "0+",
                F("Name", "string"),
                F("Value", "string", "0+", nullable="0+"),
            ),
        ),
        F("TimeoutMs", "int32", default=60000),
        F("ValidateOnly", "bool", "1+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+"),
        F(
            "Topics",
            "[]CreatableTopicResult",
            "0+",
            F("Name", "string"),
            F("TopicId", "uuid", "7+"),
            F("ErrorCode", "int16"),
            F("ErrorMessage", "string", "1+", nullable="0+"),
            F("TopicConfigErrorCode", "int16", "5+", tag=0),
            F("NumPartitions", "int32", "5+", default=-1),
            F("ReplicationFactor", "int16", "5+", default=-1),
            F(
                "Configs",
                "[]CreatableTopicConfigs",
                "5+",
                F("Name", "string", "5+"),
                F("Value", "string", "5+", nullable="5+"),
                F("ReadOnly", "bool", "5+"),
                F("ConfigSource", "int8", "5+", default=-1),
                F("IsSensitive", "bool", "5+"),
                nullable="5+",
            ),
        ),
    ),
)
