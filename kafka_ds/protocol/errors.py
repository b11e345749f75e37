"""The one Kafka error table, and the exception classes made from it.

Each row of :data:`ERROR_TABLE` is an :class:`ErrorSpec` (code, name, retriable,
invalid_metadata, description). Facts from Apache Kafka's ``Errors.java``, codes -1 to 133
(Kafka 4.1): ``retriable`` where Java's exception class derives from
``RetriableException``, ``invalid_metadata`` where it derives from
``InvalidMetadataException`` (the client's metadata is stale: refresh it, then retry).

Naming: every code but NONE gets a class named by the CamelCase of its protocol name,
nothing added or dropped (as franz-go's ``kerr`` variables): UNKNOWN_TOPIC_OR_PARTITION
-> ``UnknownTopicOrPartition``, KAFKA_STORAGE_ERROR -> ``KafkaStorageError``,
NETWORK_EXCEPTION -> ``NetworkException``. Each class derives from :class:`BrokerError`
(and :class:`RetriableError` when retriable) and carries ``code``, ``name``,
``retriable``, ``invalid_metadata`` and ``description``. Test a caught error with
``isinstance(exc, UnknownTopicOrPartition)`` and a code read from a response with
``code == OffsetOutOfRange.code``; never with a bare number.

``error_for_code(code)`` gives the class for a code. A code missing from the table gets
its own subclass of ``UnknownServerError`` (Java maps unknown codes to
UNKNOWN_SERVER_ERROR), so it still raises and still says its number.

The exception hierarchy (:class:`~kafka_ds.errors.KafkaError`,
:class:`~kafka_ds.errors.BrokerError`, ...) is defined in :mod:`kafka_ds.errors`, the one
public module; this module adds one class per code below :class:`BrokerError`.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import BrokerError, RetriableError


class ErrorSpec(NamedTuple):
    code: int
    name: str
    retriable: bool
    invalid_metadata: bool
    description: str


# (code, name, retriable, invalid_metadata, description)
# fmt: off
_ROWS = [
    (-1, "UNKNOWN_SERVER_ERROR", False, False, "The server experienced an unexpected error when processing the request."),
    (0, "NONE", False, False, "No error."),
    (1, "OFFSET_OUT_OF_RANGE", False, False, "The requested offset is not within the range of offsets maintained by the server."),
    (2, "CORRUPT_MESSAGE", True, False, "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, True, "This server does not host this topic-partition."),
    (4, "INVALID_FETCH_SIZE", False, False, "The requested fetch size is invalid."),
    (5, "LEADER_NOT_AVAILABLE", True, True, "There is no leader for this topic-partition as we are in the middle of a leadership election."),
    (6, "NOT_LEADER_OR_FOLLOWER", True, True, "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition."),
    (7, "REQUEST_TIMED_OUT", True, False, "The request timed out."),
    (8, "BROKER_NOT_AVAILABLE", False, False, "The broker is not available."),
    (9, "REPLICA_NOT_AVAILABLE", True, True, "The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition."),
    (10, "MESSAGE_TOO_LARGE", False, False, "The request included a message larger than the max message size the server will accept."),
    (11, "STALE_CONTROLLER_EPOCH", False, False, "The controller moved to another broker."),
    (12, "OFFSET_METADATA_TOO_LARGE", False, False, "The metadata field of the offset request was too large."),
    (13, "NETWORK_EXCEPTION", True, True, "The server disconnected before a response was received."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, False, "The coordinator is loading and hence can't process requests."),
    (15, "COORDINATOR_NOT_AVAILABLE", True, False, "The coordinator is not available."),
    (16, "NOT_COORDINATOR", True, False, "This is not the correct coordinator."),
    (17, "INVALID_TOPIC_EXCEPTION", False, False, "The request attempted to perform an operation on an invalid topic."),
    (18, "RECORD_LIST_TOO_LARGE", False, False, "The request included message batch larger than the configured segment size on the server."),
    (19, "NOT_ENOUGH_REPLICAS", True, False, "Messages are rejected since there are fewer in-sync replicas than required."),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, False, "Messages are written to the log, but to fewer in-sync replicas than required."),
    (21, "INVALID_REQUIRED_ACKS", False, False, "Produce request specified an invalid value for required acks."),
    (22, "ILLEGAL_GENERATION", False, False, "Specified group generation id is not valid."),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False, False, "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list."),
    (24, "INVALID_GROUP_ID", False, False, "The configured groupId is invalid."),
    (25, "UNKNOWN_MEMBER_ID", False, False, "The coordinator is not aware of this member."),
    (26, "INVALID_SESSION_TIMEOUT", False, False, "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms)."),
    (27, "REBALANCE_IN_PROGRESS", False, False, "The group is rebalancing, so a rejoin is needed."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False, False, "The committing offset data size is not valid."),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, False, "Topic authorization failed."),
    (30, "GROUP_AUTHORIZATION_FAILED", False, False, "Group authorization failed."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, False, "Cluster authorization failed."),
    (32, "INVALID_TIMESTAMP", False, False, "The timestamp of the message is out of acceptable range."),
    (33, "UNSUPPORTED_SASL_MECHANISM", False, False, "The broker does not support the requested SASL mechanism."),
    (34, "ILLEGAL_SASL_STATE", False, False, "Request is not valid given the current SASL state."),
    (35, "UNSUPPORTED_VERSION", False, False, "The version of API is not supported."),
    (36, "TOPIC_ALREADY_EXISTS", False, False, "Topic with this name already exists."),
    (37, "INVALID_PARTITIONS", False, False, "Number of partitions is below 1."),
    (38, "INVALID_REPLICATION_FACTOR", False, False, "Replication factor is below 1 or larger than the number of available brokers."),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, False, "Replica assignment is invalid."),
    (40, "INVALID_CONFIG", False, False, "Configuration is invalid."),
    (41, "NOT_CONTROLLER", True, False, "This is not the correct controller for this cluster."),
    (42, "INVALID_REQUEST", False, False, "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details."),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False, False, "The message format version on the broker does not support the request."),
    (44, "POLICY_VIOLATION", False, False, "Request parameters do not satisfy the configured policy."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, False, "The broker received an out of order sequence number."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, False, "The broker received a duplicate sequence number."),
    (47, "INVALID_PRODUCER_EPOCH", False, False, "Producer attempted to produce with an old epoch."),
    (48, "INVALID_TXN_STATE", False, False, "The producer attempted a transactional operation in an invalid state."),
    (49, "INVALID_PRODUCER_ID_MAPPING", False, False, "The producer attempted to use a producer id which is not currently assigned to its transactional id."),
    (50, "INVALID_TRANSACTION_TIMEOUT", False, False, "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms)."),
    (51, "CONCURRENT_TRANSACTIONS", True, False, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing."),
    (52, "TRANSACTION_COORDINATOR_FENCED", False, False, "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer."),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, False, "Transactional Id authorization failed."),
    (54, "SECURITY_DISABLED", False, False, "Security features are disabled."),
    (55, "OPERATION_NOT_ATTEMPTED", False, False, "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest."),
    (56, "KAFKA_STORAGE_ERROR", True, True, "Disk error when trying to access log file on the disk."),
    (57, "LOG_DIR_NOT_FOUND", False, False, "The user-specified log directory is not found in the broker config."),
    (58, "SASL_AUTHENTICATION_FAILED", False, False, "SASL Authentication failed."),
    (59, "UNKNOWN_PRODUCER_ID", False, False, "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception."),
    (60, "REASSIGNMENT_IN_PROGRESS", False, False, "A partition reassignment is in progress."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", False, False, "Delegation Token feature is not enabled."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", False, False, "Delegation Token is not found on server."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", False, False, "Specified Principal is not valid Owner/Renewer."),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False, False, "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels."),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False, False, "Delegation Token authorization failed."),
    (66, "DELEGATION_TOKEN_EXPIRED", False, False, "Delegation Token is expired."),
    (67, "INVALID_PRINCIPAL_TYPE", False, False, "Supplied principalType is not supported."),
    (68, "NON_EMPTY_GROUP", False, False, "The group is not empty."),
    (69, "GROUP_ID_NOT_FOUND", False, False, "The group id does not exist."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, False, "The fetch session ID was not found."),
    (71, "INVALID_FETCH_SESSION_EPOCH", True, False, "The fetch session epoch is invalid."),
    (72, "LISTENER_NOT_FOUND", True, True, "There is no listener on the leader broker that matches the listener on which metadata request was processed."),
    (73, "TOPIC_DELETION_DISABLED", False, False, "Topic deletion is disabled."),
    (74, "FENCED_LEADER_EPOCH", True, True, "The leader epoch in the request is older than the epoch on the broker."),
    (75, "UNKNOWN_LEADER_EPOCH", True, False, "The leader epoch in the request is newer than the epoch on the broker."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, False, "The requesting client does not support the compression type of given partition."),
    (77, "STALE_BROKER_EPOCH", False, False, "Broker epoch has changed."),
    (78, "OFFSET_NOT_AVAILABLE", True, False, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing."),
    (79, "MEMBER_ID_REQUIRED", False, False, "The group member needs to have a valid member id before actually entering a consumer group."),
    # 80, 83, 84 answer ElectLeaders only (an admin request kafka_ds never sends); Java
    # makes them InvalidMetadataException subclasses, so they are flagged as Java has them.
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, True, "The preferred leader was not available."),
    (81, "GROUP_MAX_SIZE_REACHED", False, False, "The consumer group has reached its max size."),
    (82, "FENCED_INSTANCE_ID", False, False, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id."),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, True, "Eligible topic partition leaders are not available."),
    (84, "ELECTION_NOT_NEEDED", True, True, "Leader election not needed for topic partition."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False, False, "No partition reassignment is in progress."),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", False, False, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it."),
    (87, "INVALID_RECORD", False, False, "This record has failed the validation on broker and hence will be rejected."),
    (88, "UNSTABLE_OFFSET_COMMIT", True, False, "There are unstable offsets that need to be cleared."),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, False, "The throttling quota has been exceeded."),
    (90, "PRODUCER_FENCED", False, False, "There is a newer producer with the same transactionalId which fences the current one."),
    (91, "RESOURCE_NOT_FOUND", False, False, "A request illegally referred to a resource that does not exist."),
    (92, "DUPLICATE_RESOURCE", False, False, "A request illegally referred to the same resource twice."),
    (93, "UNACCEPTABLE_CREDENTIAL", False, False, "Requested credential would not meet criteria for acceptability."),
    (94, "INCONSISTENT_VOTER_SET", False, False, "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters."),
    (95, "INVALID_UPDATE_VERSION", False, False, "The given update version was invalid."),
    (96, "FEATURE_UPDATE_FAILED", False, False, "Unable to update finalized features due to an unexpected server error."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", False, False, "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup."),
    (98, "SNAPSHOT_NOT_FOUND", False, False, "Requested snapshot was not found."),
    (99, "POSITION_OUT_OF_RANGE", False, False, "Requested position is not greater than or equal to zero, and less than the size of the snapshot."),
    (100, "UNKNOWN_TOPIC_ID", True, True, "This server does not host this topic ID."),
    (101, "DUPLICATE_BROKER_REGISTRATION", False, False, "This broker ID is already in use."),
    (102, "BROKER_ID_NOT_REGISTERED", False, False, "The given broker ID was not registered."),
    (103, "INCONSISTENT_TOPIC_ID", True, True, "The log's topic ID did not match the topic ID in the request."),
    (104, "INCONSISTENT_CLUSTER_ID", False, False, "The clusterId in the request does not match that found on the server."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False, False, "The transactionalId could not be found."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True, False, "The fetch session encountered inconsistent topic ID usage."),
    (107, "INELIGIBLE_REPLICA", False, False, "The new ISR contains at least one ineligible replica."),
    (108, "NEW_LEADER_ELECTED", False, False, "The AlterPartition request successfully updated the partition state but the leader has changed."),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", False, False, "The requested offset is moved to tiered storage."),
    (110, "FENCED_MEMBER_EPOCH", False, False, "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin."),
    (111, "UNRELEASED_INSTANCE_ID", False, False, "The instance ID is still used by another member in the consumer group. That member must leave first."),
    (112, "UNSUPPORTED_ASSIGNOR", False, False, "The assignor or its version range is not supported by the consumer group."),
    (113, "STALE_MEMBER_EPOCH", False, False, "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API."),
    (114, "MISMATCHED_ENDPOINT_TYPE", False, False, "The request was sent to an endpoint of the wrong type."),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", False, False, "This endpoint type is not supported yet."),
    (116, "UNKNOWN_CONTROLLER_ID", False, False, "This controller ID is not known."),
    (117, "UNKNOWN_SUBSCRIPTION_ID", False, False, "Client sent a push telemetry request with an invalid or outdated subscription ID."),
    (118, "TELEMETRY_TOO_LARGE", False, False, "Client sent a push telemetry request larger than the maximum size the broker will accept."),
    (119, "INVALID_REGISTRATION", False, False, "The controller has considered the broker registration to be invalid."),
    (120, "TRANSACTION_ABORTABLE", False, False, "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID."),
    (121, "INVALID_RECORD_STATE", False, False, "The record state is invalid. The acknowledgement of delivery could not be completed."),
    (122, "SHARE_SESSION_NOT_FOUND", True, False, "The share session was not found."),
    (123, "INVALID_SHARE_SESSION_EPOCH", True, False, "The share session epoch is invalid."),
    (124, "FENCED_STATE_EPOCH", False, False, "The share coordinator rejected the request because the share-group state epoch did not match."),
    (125, "INVALID_VOTER_KEY", False, False, "The voter key doesn't match the receiving replica's key."),
    (126, "DUPLICATE_VOTER", False, False, "The voter is already part of the set of voters."),
    (127, "VOTER_NOT_FOUND", False, False, "The voter is not part of the set of voters."),
    (128, "INVALID_REGULAR_EXPRESSION", False, False, "The regular expression is not valid."),
    (129, "REBOOTSTRAP_REQUIRED", False, False, "Client metadata is stale. The client should rebootstrap to obtain new metadata."),
    (130, "STREAMS_INVALID_TOPOLOGY", False, False, "The supplied topology is invalid."),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", False, False, "The supplied topology epoch is invalid."),
    (132, "STREAMS_TOPOLOGY_FENCED", False, False, "The supplied topology epoch is outdated."),
    (133, "SHARE_SESSION_LIMIT_REACHED", True, False, "The limit of share sessions has been reached."),
]
# fmt: on
ERROR_TABLE: tuple[ErrorSpec, ...] = tuple(ErrorSpec(*row) for row in _ROWS)
del _ROWS


def class_name(name: str) -> str:
    """Python name of the class for Kafka error ``name``: its CamelCase."""
    return "".join(part.capitalize() for part in name.split("_"))


def _make_class(spec: ErrorSpec, base: type[BrokerError] = BrokerError) -> type[BrokerError]:
    bases = (base, RetriableError) if spec.retriable else (base,)
    return type(
        class_name(spec.name),
        bases,
        {
            "code": spec.code,
            "name": spec.name,
            "retriable": spec.retriable,
            "invalid_metadata": spec.invalid_metadata,
            "description": spec.description,
            "__doc__": f"Kafka error {spec.code} {spec.name}: {spec.description}",
            "__module__": __name__,
        },
    )


_BY_CODE: dict[int, type[BrokerError]] = {}
_BY_NAME: dict[str, type[BrokerError]] = {}

for _spec in ERROR_TABLE:
    if _spec.code == 0:  # NONE is the absence of an error, not an exception
        continue
    _cls = _make_class(_spec)
    _BY_CODE[_spec.code] = _BY_NAME[_spec.name] = _cls
    globals()[_cls.__name__] = _cls
del _spec, _cls

# The classes kafka_ds imports by name, spelled out for the type checker (the loop above made
# them all; these lines only name them).
CoordinatorLoadInProgress = _BY_NAME["COORDINATOR_LOAD_IN_PROGRESS"]
CoordinatorNotAvailable = _BY_NAME["COORDINATOR_NOT_AVAILABLE"]
DuplicateSequenceNumber = _BY_NAME["DUPLICATE_SEQUENCE_NUMBER"]
LeaderNotAvailable = _BY_NAME["LEADER_NOT_AVAILABLE"]
MessageTooLarge = _BY_NAME["MESSAGE_TOO_LARGE"]
NotCoordinator = _BY_NAME["NOT_COORDINATOR"]
OffsetOutOfRange = _BY_NAME["OFFSET_OUT_OF_RANGE"]
OutOfOrderSequenceNumber = _BY_NAME["OUT_OF_ORDER_SEQUENCE_NUMBER"]
RecordListTooLarge = _BY_NAME["RECORD_LIST_TOO_LARGE"]
UnknownTopicId = _BY_NAME["UNKNOWN_TOPIC_ID"]
UnknownTopicOrPartition = _BY_NAME["UNKNOWN_TOPIC_OR_PARTITION"]
UnsupportedSaslMechanism = _BY_NAME["UNSUPPORTED_SASL_MECHANISM"]
UnsupportedVersion = _BY_NAME["UNSUPPORTED_VERSION"]

__all__ = [
    "ERROR_TABLE",
    "ErrorSpec",
    "error_for_code",
    "error_by_name",
    "raise_for_code",
    "class_name",
    *(cls.__name__ for cls in _BY_CODE.values()),
]


def error_for_code(code: int) -> type[BrokerError]:
    """Exception class for a broker error code (an unknown code gets a class of its own)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        if code == 0:
            raise ValueError("error code 0 (NONE) is not an error")
        cls = _make_class(
            ErrorSpec(
                code,
                f"UNKNOWN_ERROR_CODE_{code}",
                False,
                False,
                "Error code not in this client's table.",
            ),
            base=_BY_CODE[-1],
        )
        cls.__name__ = cls.__qualname__ = f"UnknownErrorCode{code}"
        _BY_CODE[code] = cls
    return cls


def error_by_name(name: str) -> type[BrokerError]:
    """Exception class for a Kafka protocol error name (``"NOT_LEADER_OR_FOLLOWER"``)."""
    return _BY_NAME[name]


def raise_for_code(code: int, context: str = "") -> None:
    """Raise the error for ``code`` (with ``context`` in its message) unless it is 0."""
    if code:
        raise error_for_code(code)(context)
