"""The one retry policy of kafka_ds: exponential back-off with jitter inside a time
budget, optionally capped in attempts.

What is retried: errors whose ``retriable`` flag is set (broker codes marked retriable
in the error table, connection failures, request timeouts). Everything else fails at
once with the caller's own message (which names topic, partition and offset).

What is refreshed between attempts: cluster metadata, but only when the error says the
client's metadata is stale (``invalid_metadata``: the leader moved, the partition is
unknown, the leader's epoch changed, the leader could not be reached) and only for the
topics the operation touches -- a retried request never costs a full-cluster Metadata
request, and a throttled or busy broker does not cost a Metadata request at all.

The budgets (see docs/reliability.md): a Fetch ``kafkaConsumer.pollTimeoutMs``
(120 s, the default of ``spark.network.timeout``), driver-side metadata/ListOffsets/
OffsetCommit ``kafka.default.api.timeout.ms`` (60 s), a write
``kafka.delivery.timeout.ms`` (120 s) and ``kafka.retries``. So a broker that is
down for a rolling restart (tens of seconds) delays a read or a write, it does not
fail it.

Clock, sleep and randomness are injectable so tests are deterministic.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ConfigurationError, KafkaConnectionError, KafkaTimeoutError
from ..protocol.errors import ERROR_TABLE

log = logging.getLogger(__name__)

# Broker error codes that mean "your metadata is out of date": the error table's
# invalid_metadata rows (the Java client's InvalidMetadataException family). Not
# UNKNOWN_LEADER_EPOCH (75): the broker is behind the client's metadata, so a plain retry
# is what helps (Java: "Clients need not refresh metadata before retrying").
INVALID_METADATA_CODES = frozenset(spec.code for spec in ERROR_TABLE if spec.invalid_metadata)


def is_retriable(exc: BaseException) -> bool:
    """Whether retrying ``exc`` may succeed."""
    if isinstance(exc, ConfigurationError):
        return False
    return bool(getattr(exc, "retriable", False))


def needs_metadata_refresh(exc: BaseException) -> bool:
    """Whether ``exc`` says the client's view of leaders is stale."""
    if isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
        # The leader (or the broker holding the connection) went away.
        return True
    code = getattr(exc, "code", None)
    flag = getattr(type(exc), "invalid_metadata", None)
    if code is not None and isinstance(flag, bool):
        return flag  # the error table's flag (Java's InvalidMetadataException family)
    return code in INVALID_METADATA_CODES


@dataclass
class RetryStats:
    """What a policy did, for logs, commit messages and tests."""

    attempts: int = 0
    retries: int = 0
    slept_s: float = 0.0
    refreshes: int = 0
    errors: dict = field(default_factory=dict)  # error name -> count


def error_name(exc: BaseException) -> str:
    return getattr(exc, "name", None) or type(exc).__name__


class RetryPolicy:
    """Back-off ``backoff_ms * 2**n`` (capped at ``backoff_max_ms``) with +-``jitter``
    (a fraction), until ``budget_ms`` has passed since :meth:`run` began or
    ``max_attempts`` attempts failed (``None``: only the budget limits).

    ``budget_option`` / ``attempts_option`` name the user options that set the limits,
    so the final error tells the user which one to raise.
    """

    @classmethod
    def from_config(
        cls, config, budget_ms: float | None = None, budget_option: str = "", **kwargs
    ) -> RetryPolicy:
        """The retry policy of a client's ``config`` (a ``ClientConfig``): ``budget_ms``
        (default: the client's API timeout, ``kafka.default.api.timeout.ms``, or a write's
        ``kafka.delivery.timeout.ms``), ``kafka.retries`` when set,
        ``kafka.retry.backoff.ms`` .. ``kafka.retry.backoff.max.ms``."""
        if budget_ms is None:
            budget_ms = config.default_api_timeout_ms
            budget_option = budget_option or config.api_timeout_option
        retries = config.retries
        return cls(
            budget_ms,
            max_attempts=None if retries is None else retries + 1,
            backoff_ms=config.retry_backoff_ms,
            backoff_max_ms=max(config.retry_backoff_max_ms, config.retry_backoff_ms),
            budget_option=budget_option,
            attempts_option="kafka.retries",
            **kwargs,
        )

    def __init__(
        self,
        budget_ms: float,
        *,
        max_attempts: int | None = None,
        backoff_ms: float = 100,
        backoff_max_ms: float = 1000,
        jitter: float = 0.2,
        budget_option: str = "",
        attempts_option: str = "",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
    ):
        if budget_ms < 0:
            raise ValueError("budget_ms must be >= 0")
        if max_attempts is not None and max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.budget_ms = budget_ms
        self.max_attempts = max_attempts
        self.backoff_ms = max(backoff_ms, 0)
        self.backoff_max_ms = max(backoff_max_ms, self.backoff_ms)
        self.jitter = jitter
        self.budget_option = budget_option
        self.attempts_option = attempts_option
        self.clock = clock
        self.sleep = sleep
        self.rng = rng
        self.stats = RetryStats()

    def backoff(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failed attempt (1-based)."""
        base = min(self.backoff_ms * (2 ** min(max(failures - 1, 0), 30)), self.backoff_max_ms)
        spread = 1.0 + self.jitter * (2.0 * self.rng() - 1.0)
        return max(base * spread, 0.0) / 1000.0

    def deadline(self, start: float | None = None) -> float:
        return (self.clock() if start is None else start) + self.budget_ms / 1000.0

    def run(
        self,
        operation: Callable[[], object],
        what: str,
        *,
        refresh: Callable[[BaseException], None] | None = None,
    ):
        """``operation()`` until it succeeds, a non-retriable error, or the limits.

        ``refresh(exc)`` is called before the next attempt when ``exc`` means stale
        metadata; its own retriable failures are logged and the next attempt goes on
        (it will fail the same way, and back off again).
        """
        start = self.clock()
        deadline = self.deadline(start)
        failures = 0
        while True:
            self.stats.attempts += 1
            try:
                return operation()
            except Exception as exc:
                if not is_retriable(exc):
                    raise
                failures += 1
                name = error_name(exc)
                self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
                pause = self.backoff(failures)
                now = self.clock()
                if self.max_attempts is not None and failures >= self.max_attempts:
                    self._give_up(
                        exc,
                        what,
                        failures,
                        now - start,
                        f"after {failures} attempts",
                        self.attempts_option,
                    )
                if now >= deadline:
                    self._give_up(
                        exc,
                        what,
                        failures,
                        now - start,
                        f"within {self.budget_ms / 1000.0:g} s",
                        self.budget_option,
                    )
                # The last attempt comes at the deadline, not a back-off before it.
                pause = min(pause, deadline - now)
                if failures == 1:
                    # Said once at WARNING, so a wait for brokers that are down is not silent.
                    log.warning(
                        "%s failed (%s); retry %d in %.2f s, retrying for up to %g s%s",
                        what,
                        exc,
                        failures,
                        pause,
                        self.budget_ms / 1000.0,
                        f" ('{self.budget_option}')" if self.budget_option else "",
                    )
                else:
                    log.info("%s failed (%s); retry %d in %.2f s", what, exc, failures, pause)
                self.stats.retries += 1
                self.stats.slept_s += pause
                self.sleep(pause)
                if refresh is not None and needs_metadata_refresh(exc):
                    self.stats.refreshes += 1
                    try:
                        refresh(exc)
                    except Exception as refresh_exc:  # noqa: BLE001
                        if not is_retriable(refresh_exc):
                            raise
                        log.info("metadata refresh for %s failed: %s", what, refresh_exc)

    @staticmethod
    def _give_up(exc: Exception, what: str, failures: int, elapsed: float, limit: str, option: str):
        """Re-raise ``exc`` itself (callers test its type and code), its message saying
        that retrying did not help and which option set the limit."""
        note = (
            f"{what} still failing {limit}"
            + (f" ('{option}')" if option else "")
            + f"; {failures} failed attempts over {elapsed:.1f} s"
        )
        if isinstance(exc, KafkaConnectionError):
            note += (
                ". Check that the brokers are up and reachable from Spark's driver and "
                "executors" + (f", or set '{option}' lower to fail sooner" if option else "")
            )
        if exc.args and isinstance(exc.args[0], str):
            exc.args = (f"{exc.args[0]} -- {note}",) + tuple(exc.args[1:])
        else:
            exc.args = (note,)
        raise exc


__all__ = [
    "RetryPolicy",
    "RetryStats",
    "is_retriable",
    "needs_metadata_refresh",
    "INVALID_METADATA_CODES",
    "error_name",
]
