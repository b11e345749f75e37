"""How many partitions a written topic has: asked on the driver before a write (a missing
topic fails the query before any task runs) and by each task for the topics its rows
name."""

from __future__ import annotations

from ..client import KafkaClient, make_client
from ..client.retry import RetryPolicy
from ..errors import BrokerError, ConfigurationError
from ..options import WriteOptions
from ..protocol.errors import LeaderNotAvailable, UnknownTopicOrPartition


def check_topic_exists(opts: WriteOptions) -> None:
    """Fail on the driver, before any task runs, when the 'topic' option names a topic the
    cluster does not have (and, with ``kafka.allow.auto.create.topics``, does not create)."""
    if opts.topic is None:
        return
    client = make_client(opts)
    try:
        partition_count(client, opts.topic, opts.bootstrap_servers, opts.allow_auto_create_topics)
    finally:
        client.close()


class _TopicLookupFailed(Exception):
    """One failed look at a topic's metadata, carried through the grace policy of
    :func:`_partition_count`: ``retriable`` when another look may help (the topic is
    unknown, or still being created), else final. The error it carries is raised as it
    was, so its message stays the broker's (and the client policy's) without a second
    note from the grace."""

    def __init__(self, error: Exception, again: bool):
        super().__init__(str(error))
        self.error = error
        self.retriable = again


def partition_count(
    client: KafkaClient, topic: str, bootstrap: str, allow_auto_create: bool = True
) -> int:
    """Partitions of ``topic``; a clear error when it does not exist (and was not created).

    ``allow_auto_create`` (``kafka.allow.auto.create.topics``, default true, as the Java
    producer) asks for metadata with AllowAutoTopicCreation, so brokers with
    auto.create.topics.enable create a missing topic as they do for Spark's
    ``format("kafka")`` sink; such a topic shows up after LEADER_NOT_AVAILABLE answers.

    Each look runs under the client's retry policy (connection failures, a broker
    restarting); a grace policy around the looks gives a topic being created 10 s
    (1 s without auto-creation) whatever ``kafka.retries`` says, and an unknown topic
    at most 4 looks, the first from cached metadata."""
    what = f"Metadata of topic '{topic}'"
    looks = 0

    def look():
        nonlocal looks
        refresh = looks > 0
        looks += 1

        def lookup():
            # An unknown topic comes back here, not retried under the client's policy:
            # it gets only the grace.
            try:
                return client.topic_partitions(
                    topic, refresh=refresh, allow_auto_topic_creation=allow_auto_create
                )
            except UnknownTopicOrPartition as exc:
                return exc

        try:
            found = client.retrying(lookup, what)
        except BrokerError as exc:
            found = exc
        except Exception as exc:  # e.g. no broker reachable within the client's policy
            raise _TopicLookupFailed(exc, again=False) from None
        if isinstance(found, BrokerError):
            unknown = isinstance(found, UnknownTopicOrPartition)
            if not unknown and not found.retriable:
                raise ConfigurationError(f"Cannot write to topic '{topic}': {found}") from found
            if unknown and looks > 3:
                return None
            raise _TopicLookupFailed(found, again=True)
        if not found:
            raise _TopicLookupFailed(
                LeaderNotAvailable(f"topic {topic!r} has no partitions yet"), again=True
            )
        return len(found)

    grace = RetryPolicy(
        10_000 if allow_auto_create else 1_000, backoff_ms=100, backoff_max_ms=1000, jitter=0
    )
    count = failed = None
    try:
        count = grace.run(look, what)
    except _TopicLookupFailed as exc:
        failed = exc.error
    if failed is not None and not isinstance(failed, UnknownTopicOrPartition):
        raise failed  # outside the except: its own cause and traceback, not the carrier's
    if count is not None:
        return count
    if allow_auto_create:
        how = (
            "The cluster did not create it on request (as for Spark's format('kafka') "
            "sink, a missing topic is created only by brokers with "
            "auto.create.topics.enable=true): create it first (e.g. kafka-topics.sh "
            "--create), or fix the 'topic' option / topic column."
        )
    else:
        how = (
            "The pykafka sink does not create topics with "
            "'kafka.allow.auto.create.topics'=false: create it first (e.g. kafka-topics.sh "
            "--create), or fix the 'topic' option / topic column."
        )
    raise ConfigurationError(
        f"Topic '{topic}' does not exist on the cluster at kafka.bootstrap.servers={bootstrap}. "
        + how
    )
