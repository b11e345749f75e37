"""The retry policy (kafka_ds/client/retry.py), deterministic: injected clock, sleep and
randomness. No broker."""

from __future__ import annotations

import pytest

from kafka_ds.client.retry import RetryPolicy, is_retriable, needs_metadata_refresh
from kafka_ds.errors import ConfigurationError, KafkaConnectionError, KafkaTimeoutError
from kafka_ds.protocol.errors import error_for_code

NOT_LEADER = error_for_code(6)
UNKNOWN_TOPIC = error_for_code(3)
LEADER_NOT_AVAILABLE = error_for_code(5)
FENCED_LEADER_EPOCH = error_for_code(74)
REQUEST_TIMED_OUT = error_for_code(7)
THROTTLED = error_for_code(89)
TOPIC_AUTH = error_for_code(29)
CORRUPT = error_for_code(2)


class FakeTime:
    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def policy(fake, budget_ms=10_000, rng=lambda: 0.5, **kw):
    return RetryPolicy(budget_ms, clock=fake.clock, sleep=fake.sleep, rng=rng, **kw)


def failing(errors, result="ok", fake=None, cost=0.0):
    """An operation raising ``errors`` in turn, then returning ``result``; each
    attempt takes ``cost`` seconds of fake time."""
    calls = []

    def operation():
        calls.append(1)
        if fake is not None:
            fake.now += cost
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    operation.calls = calls
    return operation


def test_backoff_doubles_up_to_the_cap_without_jitter():
    fake = FakeTime()
    p = policy(fake, backoff_ms=100, backoff_max_ms=1000)  # rng 0.5: no jitter
    assert [round(p.backoff(n), 3) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


@pytest.mark.parametrize("draw, factor", [(0.0, 0.8), (1.0, 1.2), (0.25, 0.9)])
def test_jitter_spreads_the_backoff_by_twenty_percent(draw, factor):
    fake = FakeTime()
    p = policy(fake, rng=lambda: draw, backoff_ms=100, backoff_max_ms=1000)
    assert p.backoff(3) == pytest.approx(0.4 * factor)


def test_retriable_errors_are_retried_until_success_and_sleeps_follow_the_backoff():
    fake = FakeTime()
    p = policy(fake)
    op = failing([NOT_LEADER("Fetch t-0"), REQUEST_TIMED_OUT(), KafkaConnectionError("down")])
    assert p.run(op, "Fetch t-0") == "ok"
    assert len(op.calls) == 4
    assert fake.sleeps == pytest.approx([0.1, 0.2, 0.4])
    assert p.stats.retries == 3
    assert p.stats.errors == {
        "NOT_LEADER_OR_FOLLOWER": 1,
        "REQUEST_TIMED_OUT": 1,
        "KafkaConnectionError": 1,
    }


def test_a_broker_down_for_thirty_seconds_does_not_exhaust_a_two_minute_budget():
    fake = FakeTime()
    p = policy(fake, budget_ms=120_000)
    down_until = fake.now + 30.0

    def fetch():
        if fake.now < down_until:
            raise KafkaConnectionError("connection refused")
        return "records"

    assert p.run(fetch, "Fetch t-0") == "records"
    assert 30.0 <= fake.now - 1000.0 <= 31.5  # back-off capped at 1 s: little overshoot


def test_budget_exhausted_reraises_the_last_error_naming_option_and_attempts():
    fake = FakeTime()
    p = policy(fake, budget_ms=3000, budget_option="kafkaConsumer.pollTimeoutMs")
    op = failing([NOT_LEADER(f"Fetch t-3 at offset 42 (attempt {i})") for i in range(100)])
    with pytest.raises(NOT_LEADER) as info:
        p.run(op, "Fetch t-3 at offset 42")
    text = str(info.value)
    assert "NOT_LEADER_OR_FOLLOWER" in text and "t-3 at offset 42" in text
    assert "kafkaConsumer.pollTimeoutMs" in text and "within 3 s" in text
    # Never sleeps past the deadline.
    assert fake.now - 1000.0 <= 3.0
    assert len(op.calls) == len(fake.sleeps) + 1


def test_max_attempts_caps_retries_before_the_budget():
    fake = FakeTime()
    p = policy(fake, budget_ms=60_000, max_attempts=3, attempts_option="kafka.retries")
    op = failing([LEADER_NOT_AVAILABLE()] * 10)
    with pytest.raises(LEADER_NOT_AVAILABLE, match="after 3 attempts.*kafka.retries"):
        p.run(op, "ListOffsets")
    assert len(op.calls) == 3


@pytest.mark.parametrize(
    "exc",
    [TOPIC_AUTH("Fetch t-1 at offset 7"), ConfigurationError("bad option"), ValueError("bug")],
)
def test_non_retriable_errors_fail_at_once(exc):
    fake = FakeTime()
    p = policy(fake)
    op = failing([exc])
    with pytest.raises(type(exc)) as info:
        p.run(op, "Fetch t-1")
    assert info.value is exc and len(op.calls) == 1 and fake.sleeps == []
    if isinstance(exc, TOPIC_AUTH):
        assert "TOPIC_AUTHORIZATION_FAILED" in str(exc) and "t-1 at offset 7" in str(exc)


def test_metadata_is_refreshed_only_for_invalid_metadata_errors():
    fake = FakeTime()
    refreshed = []
    p = policy(fake)
    errors = [
        NOT_LEADER(),
        THROTTLED(),
        UNKNOWN_TOPIC(),
        REQUEST_TIMED_OUT(),
        FENCED_LEADER_EPOCH(),
        KafkaConnectionError("leader gone"),
        LEADER_NOT_AVAILABLE(),
        CORRUPT(),
    ]
    p.run(failing(errors), "Fetch", refresh=refreshed.append)
    assert [type(e) for e in refreshed] == [
        NOT_LEADER,
        UNKNOWN_TOPIC,
        FENCED_LEADER_EPOCH,
        KafkaConnectionError,
        LEADER_NOT_AVAILABLE,
    ]
    assert p.stats.refreshes == 5


def test_a_failing_refresh_does_not_end_the_retries_but_a_fatal_one_does():
    fake = FakeTime()
    p = policy(fake)

    def flaky_refresh(_exc):
        raise KafkaConnectionError("metadata broker down too")

    assert p.run(failing([NOT_LEADER(), NOT_LEADER()]), "Fetch", refresh=flaky_refresh) == "ok"

    def fatal_refresh(_exc):
        raise TOPIC_AUTH("Metadata t")

    with pytest.raises(TOPIC_AUTH):
        policy(FakeTime()).run(failing([NOT_LEADER()]), "Fetch", refresh=fatal_refresh)


def test_slow_attempts_count_against_the_budget():
    fake = FakeTime()
    p = policy(fake, budget_ms=10_000)
    # Each attempt burns 4 s (a request timing out): the third failure is past 10 s.
    op = failing([KafkaTimeoutError("no answer")] * 10, fake=fake, cost=4.0)
    with pytest.raises(KafkaTimeoutError):
        p.run(op, "ListOffsets")
    assert len(op.calls) == 3


def test_classification():
    assert is_retriable(NOT_LEADER()) and is_retriable(KafkaConnectionError("x"))
    assert not is_retriable(TOPIC_AUTH()) and not is_retriable(ConfigurationError("x"))
    assert needs_metadata_refresh(NOT_LEADER()) and needs_metadata_refresh(KafkaTimeoutError("x"))
    assert not needs_metadata_refresh(THROTTLED()) and not needs_metadata_refresh(CORRUPT())


def test_invalid_metadata_codes_are_the_error_tables():
    from kafka_ds.client.retry import INVALID_METADATA_CODES
    from kafka_ds.protocol.errors import ERROR_TABLE, error_for_code

    assert INVALID_METADATA_CODES == {s.code for s in ERROR_TABLE if s.invalid_metadata}
    # UNKNOWN_LEADER_EPOCH: the broker lags the client's metadata; retry without a refresh.
    assert 75 not in INVALID_METADATA_CODES and not needs_metadata_refresh(error_for_code(75)())
    # PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, ELECTION_NOT_NEEDED:
    # InvalidMetadataException subclasses in Java (ElectLeaders answers only).
    for code in (80, 83, 84):
        assert code in INVALID_METADATA_CODES and needs_metadata_refresh(error_for_code(code)())


def test_client_policy_follows_the_client_settings():
    from kafka_ds.client import KafkaClient
    from kafka_ds.client.config import ClientConfig

    client = KafkaClient(
        "127.0.0.1:9",
        ClientConfig(
            default_api_timeout_ms=5000, retries=4, retry_backoff_ms=50, retry_backoff_max_ms=400
        ),
    )
    p = client.retry_policy()
    assert (p.budget_ms, p.max_attempts, p.backoff_ms, p.backoff_max_ms) == (5000, 5, 50, 400)
    assert p.budget_option == "kafka.default.api.timeout.ms"
    fetch = client.retry_policy(120000, "kafkaConsumer.pollTimeoutMs")
    assert fetch.budget_ms == 120000 and fetch.budget_option == "kafkaConsumer.pollTimeoutMs"
    assert KafkaClient("127.0.0.1:9").retry_policy().max_attempts is None


def test_the_first_failure_is_logged_with_the_budget_and_a_connection_error_says_how_to_fail_sooner(
    caplog,
):
    """A wait for brokers that are down is not silent: the first failed attempt is logged at
    WARNING with the time kafka_ds will keep trying and the option that sets it; the rest at
    INFO. When the budget runs out on a connection failure, the error says how to fail
    sooner."""
    import logging

    caplog.set_level(logging.INFO, logger="kafka_ds.client.retry")
    fake = FakeTime()
    limited = policy(fake, budget_ms=3000, budget_option="kafka.default.api.timeout.ms")
    errors = [KafkaConnectionError("cannot reach any broker")] * 100
    with pytest.raises(KafkaConnectionError) as caught:
        limited.run(failing(errors, fake=fake), "Metadata")
    first, *rest = [r for r in caplog.records if "Metadata failed" in r.getMessage()]
    assert first.levelno == logging.WARNING
    assert "retrying for up to 3 s ('kafka.default.api.timeout.ms')" in first.getMessage()
    assert rest and all(r.levelno == logging.INFO for r in rest)
    assert str(caught.value).endswith(
        "Check that the brokers are up and reachable from Spark's driver and executors, or "
        "set 'kafka.default.api.timeout.ms' lower to fail sooner"
    )
