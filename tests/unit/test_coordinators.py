"""The group offset requests kafka_ds sends (kafka_ds/client/coordinators.py), read back
from the bytes the codec writes at every version the client may negotiate."""

from __future__ import annotations

import pytest

from kafka_ds.client.coordinators import fetch_committed
from kafka_ds.protocol.errors import error_for_code
from kafka_ds.protocol.messages_groups import OFFSET_FETCH
from kafka_ds.protocol.schema import compile_codec


class _Recording:
    """A connection that keeps the request body and answers with ``answer``."""

    def __init__(self, answer):
        self.answer = answer
        self.bodies = []

    def request(self, message, body):
        self.bodies.append(body)
        return self.answer


class _Client:
    """What fetch_committed asks of a client: its coordinators' ``call``."""

    def __init__(self, connection):
        self.coordinators = self
        self.connection = connection

    def call(self, key, call, what):
        return call(self.connection)


def _answer(partitions):
    topics = [{"name": "events", "partitions": partitions}]
    return {"groups": [{"group_id": "g", "error_code": 0, "topics": topics}]}


@pytest.mark.parametrize("version", range(7, OFFSET_FETCH.versions().high + 1))
def test_offset_fetch_asks_for_stable_offsets(version):
    connection = _Recording(
        _answer(
            [
                {"partition_index": 0, "committed_offset": 7, "error_code": 0},
                {"partition_index": 1, "committed_offset": -1, "error_code": 0},
            ]
        )
    )
    assert fetch_committed(_Client(connection), "g", [("events", 0), ("events", 1)]) == {
        ("events", 0): 7
    }
    (body,) = connection.bodies
    decode, encode = compile_codec(OFFSET_FETCH, version, "request")
    written = bytearray()
    encode(written, body)
    sent, _end = decode(memoryview(bytes(written)), 0)
    assert sent["require_stable"] is True


def test_unstable_offsets_are_a_retriable_error():
    # what a broker without the new group coordinator answers while offsets are pending
    connection = _Recording(
        _answer([{"partition_index": 0, "committed_offset": -1, "error_code": 88}])
    )
    with pytest.raises(error_for_code(88)) as caught:
        fetch_committed(_Client(connection), "g", [("events", 0)])
    assert caught.value.retriable
    assert "OffsetFetch of group 'g', events-0" in str(caught.value)
