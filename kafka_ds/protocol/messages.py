"""Every Kafka API kafka_ds speaks, described once as data (see ``schema.py``).

Transcribed field-for-field from Apache Kafka's JSON message definitions
(clients/src/main/resources/common/message/*.json): names, types, version
ranges, nullable versions and tags. ``valid_versions`` is the range this client
supports; the connection negotiates the highest version the broker also speaks.
"""

from __future__ import annotations

from .schema import F, Message

API_VERSIONS = Message(
    "ApiVersions",
    18,
    valid_versions="0-3",
    flexible_versions="3+",
    request=(
        F("ClientSoftwareName", "string", "3+"),
        F("ClientSoftwareVersion", "string", "3+"),
    ),
    response=(
        F("ErrorCode", "int16"),
        F(
            "ApiKeys",
            "[]ApiVersion",
            "0+",
            F("ApiKey", "int16"),
            F("MinVersion", "int16"),
            F("MaxVersion", "int16"),
        ),
        F("ThrottleTimeMs", "int32", "1+"),
        F(
            "SupportedFeatures",
            "[]SupportedFeatureKey",
            "3+",
            F("Name", "string", "3+"),
            F("MinVersion", "int16", "3+"),
            F("MaxVersion", "int16", "3+"),
            tag=0,
        ),
        F("FinalizedFeaturesEpoch", "int64", "3+", tag=1, default=-1),
        F(
            "FinalizedFeatures",
            "[]FinalizedFeatureKey",
            "3+",
            F("Name", "string", "3+"),
            F("MaxVersionLevel", "int16", "3+"),
            F("MinVersionLevel", "int16", "3+"),
            tag=2,
        ),
        F("ZkMigrationReady", "bool", "3+", tag=3),
    ),
)


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

# SASL (KIP-43, KIP-152): SaslHandshake picks the mechanism, SaslAuthenticate
# carries the mechanism's opaque exchange; v1+ answers the session lifetime (KIP-368).
SASL_HANDSHAKE = Message(
    "SaslHandshake",
    17,
    valid_versions="0-1",
    flexible_versions="none",
    request=(F("Mechanism", "string"),),
    response=(
        F("ErrorCode", "int16"),
        F("Mechanisms", "[]string"),
    ),
)

SASL_AUTHENTICATE = Message(
    "SaslAuthenticate",
    36,
    valid_versions="0-2",
    flexible_versions="2+",
    request=(F("AuthBytes", "bytes"),),
    response=(
        F("ErrorCode", "int16"),
        F("ErrorMessage", "string", "0+", nullable="0+"),
        F("AuthBytes", "bytes"),
        F("SessionLifetimeMs", "int64", "1+", default=0),
    ),
)

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
