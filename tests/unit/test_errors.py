"""The Kafka error table, the named classes made from it, and the public error module."""

import pytest

import kafka_ds
import kafka_ds.errors as public
from kafka_ds.errors import BrokerError, RetriableError
from kafka_ds.protocol import errors as e
from kafka_ds.protocol.errors import (
    ERROR_TABLE,
    error_by_name,
    error_for_code,
    raise_for_code,
)

# Hand-checked against Apache Kafka's Errors.java and the exception classes it builds
# (RetriableException / InvalidMetadataException subclasses):
# code: (name, retriable, invalid_metadata)
CHECKED = {
    -1: ("UNKNOWN_SERVER_ERROR", False, False),
    1: ("OFFSET_OUT_OF_RANGE", False, False),
    2: ("CORRUPT_MESSAGE", True, False),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", True, True),
    5: ("LEADER_NOT_AVAILABLE", True, True),
    6: ("NOT_LEADER_OR_FOLLOWER", True, True),
    7: ("REQUEST_TIMED_OUT", True, False),
    8: ("BROKER_NOT_AVAILABLE", False, False),
    9: ("REPLICA_NOT_AVAILABLE", True, True),
    10: ("MESSAGE_TOO_LARGE", False, False),
    13: ("NETWORK_EXCEPTION", True, True),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", True, False),
    16: ("NOT_COORDINATOR", True, False),
    29: ("TOPIC_AUTHORIZATION_FAILED", False, False),
    35: ("UNSUPPORTED_VERSION", False, False),
    45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", False, False),
    51: ("CONCURRENT_TRANSACTIONS", True, False),
    56: ("KAFKA_STORAGE_ERROR", True, True),
    58: ("SASL_AUTHENTICATION_FAILED", False, False),
    74: ("FENCED_LEADER_EPOCH", True, True),
    75: ("UNKNOWN_LEADER_EPOCH", True, False),  # RetriableException, not InvalidMetadata
    78: ("OFFSET_NOT_AVAILABLE", True, False),
    90: ("PRODUCER_FENCED", False, False),
    100: ("UNKNOWN_TOPIC_ID", True, True),
    103: ("INCONSISTENT_TOPIC_ID", True, True),
    120: ("TRANSACTION_ABORTABLE", False, False),  # abort the transaction; a retry fails again
    129: ("REBOOTSTRAP_REQUIRED", False, False),
    133: ("SHARE_SESSION_LIMIT_REACHED", True, False),
}


def test_table_codes_and_names_are_unique_and_complete():
    codes = [spec.code for spec in ERROR_TABLE]
    names = [spec.name for spec in ERROR_TABLE]
    assert len(codes) == len(set(codes)) and len(names) == len(set(names))
    # Every code from -1 to the newest, no gaps.
    assert sorted(codes) == list(range(-1, max(codes) + 1)) and max(codes) >= 133
    assert all(spec.description for spec in ERROR_TABLE)
    assert all(spec.name == spec.name.upper() and " " not in spec.name for spec in ERROR_TABLE)
    # Only retriable errors may say "refresh metadata and retry".
    assert all(spec.retriable for spec in ERROR_TABLE if spec.invalid_metadata)


@pytest.mark.parametrize("code", sorted(CHECKED))
def test_flags_match_the_java_client(code):
    name, retriable, invalid_metadata = CHECKED[code]
    cls = error_for_code(code)
    assert (cls.name, cls.retriable, cls.invalid_metadata) == (name, retriable, invalid_metadata)
    assert issubclass(cls, BrokerError)
    assert issubclass(cls, RetriableError) == retriable


def test_every_code_has_a_named_class():
    for spec in ERROR_TABLE:
        if spec.code == 0:  # NONE is no error, so no class
            continue
        cls = getattr(e, e.class_name(spec.name))
        assert cls is error_for_code(spec.code) is error_by_name(spec.name)
        assert (cls.code, cls.name, cls.retriable, cls.invalid_metadata, cls.description) == (
            spec.code,
            spec.name,
            spec.retriable,
            spec.invalid_metadata,
            spec.description,
        )
        assert cls.__name__ in e.__all__


def test_naming_scheme():
    assert e.UnknownTopicOrPartition.code == 3
    assert e.NotLeaderOrFollower.code == 6
    assert e.KafkaStorageError.code == 56  # Kafka's own name ends in ERROR
    assert e.NetworkException.code == 13  # ... or in EXCEPTION
    assert e.TransactionAbortable.code == 120
    assert e.UnknownServerError.code == -1


def test_isinstance_and_messages():
    with pytest.raises(e.NotLeaderOrFollower) as caught:
        raise_for_code(6, "Produce to t-0")
    assert isinstance(caught.value, RetriableError) and caught.value.invalid_metadata
    assert str(caught.value).startswith("[6 NOT_LEADER_OR_FOLLOWER] ")
    assert str(caught.value).endswith("(Produce to t-0)")
    with pytest.raises(BrokerError, match=r"\[10 MESSAGE_TOO_LARGE\].*topic t-0"):
        raise_for_code(10, "topic t-0")
    raise_for_code(0)  # no error: no exception
    assert error_for_code(6).retriable and not error_for_code(29).retriable
    assert not error_for_code(120).retriable


def test_unknown_codes():
    unknown = error_for_code(9999)
    assert unknown.code == 9999 and unknown.name == "UNKNOWN_ERROR_CODE_9999"
    assert not unknown.retriable and not unknown.invalid_metadata
    assert issubclass(unknown, e.UnknownServerError)  # as Java maps unknown codes
    assert error_for_code(9999) is unknown  # one class per code
    with pytest.raises(e.UnknownServerError, match=r"\[9999 UNKNOWN_ERROR_CODE_9999\]"):
        raise_for_code(9999)
    with pytest.raises(ValueError):
        error_for_code(0)


def test_public_module_is_the_one_definition():
    # kafka_ds.errors defines them; the package re-exports the same classes (documented), the
    # protocol module only adds the classes of its codes.
    for name in (
        "KafkaError",
        "RetriableError",
        "BrokerError",
        "ConfigurationError",
        "DataLossError",
        "CorruptRecordError",
        "KafkaProtocolError",
        "ProduceError",
        "AuthenticationError",
        "TlsError",
    ):
        cls = getattr(public, name)
        assert cls.__module__ == "kafka_ds.errors"
        assert name not in e.__all__
        assert getattr(kafka_ds, name) is cls
        assert issubclass(cls, public.KafkaError) and cls.__doc__
    from kafka_ds.client.producer import ProduceError

    assert ProduceError is public.ProduceError
    assert issubclass(public.TlsError, public.AuthenticationError)
    assert not public.AuthenticationError.retriable and not public.TlsError.retriable
    assert issubclass(public.ConfigurationError, ValueError)


def test_public_module_imports_nothing_from_kafka_ds():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(public))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module == "__future__", "kafka_ds.errors must stay a leaf module"
        assert not isinstance(node, ast.Import)


def test_acl_hint_names_the_refused_kind_of_resource():
    from kafka_ds.errors import acl_hint

    names = {"group": "g", "topic": "t"}
    assert acl_hint(30, "OffsetCommit", **names) == (
        "; the principal lacks ACL Read on group 'g' (Kafka's authorizer refused OffsetCommit)"
    )
    assert acl_hint(29, "OffsetCommit", **names).startswith(
        "; the principal lacks ACL Read on topic 't'"
    )
    # a refused topic of AddPartitionsToTxn is not named after the transactional id
    assert acl_hint(29, "AddPartitionsToTxn", transactional_id="tx").startswith(
        "; the principal lacks ACL Write on topic ("
    )
    assert "IdempotentWrite on cluster (" in acl_hint(31, "InitProducerId", transactional_id="tx")
    assert acl_hint(3, "Metadata", topic="t") == ""
