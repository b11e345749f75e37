"""Which topics a read covers: exactly one of ``subscribe``, ``subscribePattern`` and
``assign``, parsed into a :class:`Subscription`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigurationError
from .core import parse_json


@dataclass(frozen=True)
class Subscription:
    kind: str  # subscribe | subscribePattern | assign
    topics: tuple = ()  # subscribe
    pattern: str = ""  # subscribePattern
    assignment: tuple = ()  # assign: ((topic, partition), ...)


def parse_subscription(options) -> Subscription:
    # Messages keep the key words of Spark's own (KafkaSourceProvider) so a search for
    # Spark's message finds ours.
    given = [k for k in ("subscribe", "subscribePattern", "assign") if k.lower() in options]
    if len(given) != 1:
        if not given:
            raise ConfigurationError(
                "One of the following options must be specified for Kafka source: 'subscribe', "
                "'subscribePattern', 'assign'. Example: .option(\"subscribe\", \"topicA,topicB\")."
            )
        raise ConfigurationError(
            "Only one of the following options can be specified for Kafka source: 'subscribe', "
            f"'subscribePattern', 'assign'; got {', '.join(given)}. Keep exactly one of them."
        )
    kind = given[0]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not topics:
            raise ConfigurationError(
                "No topics to subscribe to as specified value for option 'subscribe' is "
                f"{options['subscribe']!r}: give a comma-separated topic list, e.g. 'topicA,topicB'"
            )
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        pattern = options["subscribepattern"].strip()
        if not pattern:
            raise ConfigurationError(
                "Pattern to subscribe is empty as specified value for option 'subscribePattern' is "
                f"{options['subscribepattern']!r}: give a regex, e.g. 'events-.*'"
            )
        import re

        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigurationError(
                f"Option 'subscribePattern' is not a valid regex ({exc}): {pattern!r}"
            ) from None
        return Subscription(kind, pattern=pattern)
    if not str(options["assign"]).strip().startswith("{"):
        raise ConfigurationError(
            "No topicpartitions to assign as specified value for option 'assign' is "
            f'{options["assign"]!r}: give JSON like \'{{"topicA":[0,1],"topicB":[2,4]}}\''
        )
    value = parse_json(options, "assign")
    if (
        not isinstance(value, dict)
        or not value
        or not all(
            isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps)
            for ps in value.values()
        )
    ):
        raise ConfigurationError(
            "Option 'assign' must be a JSON object of topic to partition list, e.g. "
            f'\'{{"topicA":[0,1],"topicB":[2,4]}}\', got {options["assign"]!r}'
        )
    assignment = tuple(sorted((t, p) for t, ps in value.items() for p in ps))
    return Subscription(kind, assignment=assignment)
