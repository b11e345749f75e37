"""Connection behaviour under faults, against a scripted broker on a real socket."""

import struct
import time

import pytest

from kafka_ds.client.connection import BrokerConnection
from kafka_ds.errors import (
    KafkaConnectionError,
    KafkaProtocolError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from kafka_ds.protocol import messages as m
from kafka_ds.protocol.schema import encode_response
from tests.support.fakebroker import FakeBroker, api_versions_v0_answer


def test_api_versions_falls_back_to_v0_on_error_35_with_malformed_body():
    def handler(api_key, version, correlation_id, frame, conn):
        if api_key == 18 and version > 0:
            # Error 35 followed by bytes that do not parse at v3.
            conn.sendall(struct.pack(">iih", 4 + 2 + 3, correlation_id, 35) + b"\xff\xff\xff")
        elif api_key == 18:
            conn.sendall(api_versions_v0_answer(correlation_id))

    broker = FakeBroker(handler)
    try:
        conn = BrokerConnection("127.0.0.1", broker.port).connect()
        assert broker.requests == [(18, 3), (18, 0)]
        assert conn.api_versions[1] == (4, 12)
        assert conn.version_for(m.FETCH) == 12
        assert conn.version_for(m.METADATA, max_version=5) == 5
        conn.close()
    finally:
        broker.close()


def test_version_negotiation_fails_clearly_without_overlap():
    def handler(api_key, version, correlation_id, frame, conn):
        conn.sendall(api_versions_v0_answer(correlation_id, {18: (0, 3), 1: (20, 30)}, version))

    broker = FakeBroker(handler)
    try:
        conn = BrokerConnection("127.0.0.1", broker.port).connect()
        with pytest.raises(UnsupportedVersionError, match="Fetch"):
            conn.version_for(m.FETCH)
        with pytest.raises(UnsupportedVersionError, match="Metadata"):
            conn.version_for(m.METADATA)
    finally:
        broker.close()


def _connected(handler_after_versions, timeout_ms=1000):
    def handler(api_key, version, correlation_id, frame, conn):
        if api_key == 18:
            conn.sendall(api_versions_v0_answer(correlation_id, version=version))
            return None
        return handler_after_versions(correlation_id, conn)

    broker = FakeBroker(handler)
    conn = BrokerConnection("127.0.0.1", broker.port, request_timeout_ms=timeout_ms).connect()
    return broker, conn


def test_connection_closed_mid_response():
    def respond(correlation_id, conn):
        conn.sendall(struct.pack(">ii", 100, correlation_id) + b"\0" * 10)
        return "close"

    broker, conn = _connected(respond)
    try:
        with pytest.raises(KafkaConnectionError, match="closed by the broker"):
            conn.request(m.METADATA, {"topics": None})
        assert not conn.connected
    finally:
        broker.close()


def test_no_response_times_out_instead_of_hanging():
    broker, conn = _connected(lambda cid, c: time.sleep(3), timeout_ms=300)
    try:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError):
            conn.request(m.METADATA, {"topics": None})
        assert time.monotonic() - started < 2.5
    finally:
        broker.close()


def test_wrong_correlation_id_is_an_error():
    def respond(correlation_id, conn):
        conn.sendall(struct.pack(">ii", 4, correlation_id + 7))

    broker, conn = _connected(respond)
    try:
        with pytest.raises(KafkaProtocolError, match="correlation id"):
            conn.request(m.METADATA, {"topics": None})
    finally:
        broker.close()


def test_absurd_frame_size_is_an_error():
    broker, conn = _connected(lambda cid, c: c.sendall(struct.pack(">i", -5)))
    try:
        with pytest.raises(KafkaProtocolError, match="absurd response size"):
            conn.request(m.METADATA, {"topics": None})
    finally:
        broker.close()


def test_truncated_body_is_a_protocol_error():
    # A Metadata response whose body stops half way through the broker list.
    def respond(correlation_id, conn):
        body = struct.pack(">ii", correlation_id, 5) + b"\x00"
        conn.sendall(struct.pack(">i", len(body)) + body)

    broker, conn = _connected(respond)
    try:
        with pytest.raises(KafkaProtocolError, match="malformed Metadata"):
            conn.request(m.METADATA, {"topics": None})
    finally:
        broker.close()


def test_connect_refused_is_a_connection_error():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{port}"):
        BrokerConnection("127.0.0.1", port, connect_timeout_ms=500).connect()


def test_answers_to_requests_sent_without_expecting_one_are_skipped():
    # Kafka never answers Produce acks=0; the librdkafka mock and Tansu do. Such answers
    # must not be taken for the answer of the next request on the connection.
    def respond(correlation_id, conn):
        conn.sendall(
            encode_response(
                m.METADATA,
                1,
                correlation_id,
                {"brokers": [{"node_id": correlation_id, "host": "h", "port": 1}], "topics": []},
            )
        )

    broker, conn = _connected(respond)
    try:
        for _ in range(3):
            conn.send(m.METADATA, {"topics": None}, version=1, expects_response=False)
        answer = conn.request(m.METADATA, {"topics": None}, version=1)
        assert answer["brokers"][0]["node_id"] == conn._next_correlation_id - 1
        assert (
            conn.request(m.METADATA, {"topics": None}, version=1)["brokers"][0]["node_id"]
            == conn._next_correlation_id - 1
        )
    finally:
        broker.close()
