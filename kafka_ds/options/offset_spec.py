"""Where each end of a read's offset range is: the ``starting*``/``ending*`` options, in
Spark's precedence, parsed into an :class:`OffsetSpec`, and Spark's check that explicit
start and end offsets agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..client.reads import EARLIEST, LATEST
from ..errors import ConfigurationError
from .core import closest, did_you_mean, parse_int, parse_json


@dataclass(frozen=True)
class OffsetSpec:
    """How to resolve one end of a range.

    kind: earliest | latest | group | specific | timestamp | global_timestamp.
    ``specific`` maps (topic, partition) -> offset (-2/-1 allowed), and ``topic_offsets``
    maps topic -> -2/-1 for every partition of a topic (SPARK-58774's topic-level
    ``{"topicA":"earliest"}``); ``timestamp`` maps (topic, partition) -> epoch ms;
    ``global_timestamp`` uses ``timestamp`` for all.
    """

    kind: str
    option: str
    offsets: tuple = ()  # ((topic, partition), value) pairs
    timestamp: int = 0
    topic_offsets: tuple = ()  # ((topic, -2 | -1), ...), kind "specific" only

    def as_dict(self) -> dict:
        return dict(self.offsets)

    def topic_dict(self) -> dict:
        return dict(self.topic_offsets)

    def for_partitions(self, tps) -> dict:
        """The partition-level offsets, with the topic-level values expanded over ``tps``
        (a partition-level entry wins over its topic's value)."""
        result = {}
        topic_level = self.topic_dict()
        for tp in tps:
            if tp[0] in topic_level:
                result[tp] = topic_level[tp[0]]
        result.update(self.as_dict())
        return result


_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-2},"topicB":"earliest"}'


def _partition_json(options, key, allow_earliest, allow_latest) -> tuple:
    """``(partition pairs, topic pairs)`` of an offsets JSON. A topic maps either to
    ``{"partition": offset}`` or, for all its partitions, to "earliest" / "latest"."""
    value = parse_json(options, key)
    example = _OFFSETS_EXAMPLE
    if not isinstance(value, dict):
        raise ConfigurationError(f"Option '{key}' must be a JSON object like {example}")
    pairs, topic_pairs = [], []

    def check(offset, where):
        # Spark's wording (KafkaSourceProvider.validateBatchOptions), then the fix.
        if offset == EARLIEST and not allow_earliest:
            raise ConfigurationError(
                f"ending offset for {where} can't be earliest for batch queries on Kafka "
                f"(option '{key}'); use an explicit offset or -1 / \"latest\""
            )
        if offset == LATEST and not allow_latest:
            raise ConfigurationError(
                f"startingOffsets for {where} can't be latest for batch queries on Kafka "
                f"(option '{key}'); use -2 / \"earliest\" or an explicit offset"
            )

    for topic, parts in value.items():
        if isinstance(parts, str):
            word = parts.strip().lower()
            if word not in ("earliest", "latest"):
                raise ConfigurationError(
                    f"Option '{key}': topic {topic!r} maps to {parts!r}; a topic-level value must "
                    f'be "earliest" or "latest", like {example}'
                )
            offset = EARLIEST if word == "earliest" else LATEST
            check(offset, f"topic {topic}")
            topic_pairs.append((topic, offset))
            continue
        if not isinstance(parts, dict):
            raise ConfigurationError(
                f"Option '{key}': topic {topic!r} must map partitions to offsets, or be "
                f'"earliest" / "latest", like {example}'
            )
        for part, offset in parts.items():
            if (
                not str(part).lstrip("-").isdigit()
                or not isinstance(offset, int)
                or isinstance(offset, bool)
            ):
                raise ConfigurationError(
                    f"Option '{key}': partition {part!r} of topic {topic!r} must map to an "
                    f"integer, like {example}"
                )
            check(offset, f"{topic}-{part}")
            if offset < -2:
                raise ConfigurationError(
                    f"Option '{key}': invalid offset {offset} for {topic}-{part}"
                )
            pairs.append(((topic, int(part)), offset))
    return tuple(sorted(pairs)), tuple(sorted(topic_pairs))


def parse_offset_spec(options, *, start: bool, streaming: bool | None) -> OffsetSpec:
    """Resolve the precedence Spark uses: timestamp > by-timestamp JSON > offsets.

    ``streaming=None`` (schema time, mode not known yet) skips the mode-specific checks.
    Messages start with the words of Spark's own for the same mistake.
    """
    prefix = "starting" if start else "ending"
    if streaming is None:
        if not start:
            return OffsetSpec("latest", "endingOffsets")
        streaming = True
    if not start and streaming:
        for key in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if key.lower() in options:
                what = "ending offset" if key == "endingOffsets" else "ending timestamp"
                raise ConfigurationError(
                    f"{what} not valid in streaming queries: Option '{key}' is for batch queries "
                    "only; a streaming query has no end. Remove it, or use spark.read for a "
                    "bounded read."
                )
        return OffsetSpec("latest", "endingOffsets")
    global_key = f"{prefix}Timestamp"
    by_ts_key = f"{prefix}OffsetsByTimestamp"
    offsets_key = f"{prefix}Offsets"
    if global_key.lower() in options:
        ts = parse_int(options, global_key)
        if ts < 0:
            raise ConfigurationError(
                f"Option '{global_key}' must be epoch milliseconds >= 0, got {ts}"
            )
        return OffsetSpec("global_timestamp", global_key, timestamp=ts)
    if by_ts_key.lower() in options:
        value = parse_json(options, by_ts_key)
        pairs = []
        if not isinstance(value, dict):
            raise ConfigurationError(
                f'Option \'{by_ts_key}\' must be JSON like {{"topicA":{{"0":1700000000000}}}}'
            )
        for topic, parts in value.items():
            if not isinstance(parts, dict):
                raise ConfigurationError(
                    f"Option '{by_ts_key}': topic {topic!r} must map partitions "
                    "to epoch milliseconds"
                )
            for part, ts in parts.items():
                if not str(part).isdigit() or not isinstance(ts, int) or ts < 0:
                    raise ConfigurationError(
                        f"Option '{by_ts_key}': {topic}-{part} must map to epoch milliseconds >= 0"
                    )
                pairs.append(((topic, int(part)), ts))
        return OffsetSpec("timestamp", by_ts_key, offsets=tuple(sorted(pairs)))
    raw = options.get(offsets_key.lower())
    if raw is None:
        if start:
            return OffsetSpec("latest" if streaming else "earliest", offsets_key)
        return OffsetSpec("latest", offsets_key)
    text = raw.strip()
    lowered = text.lower()
    if lowered == "earliest":
        if not start:
            raise ConfigurationError(
                "ending offset can't be earliest for batch queries on Kafka: Option "
                "'endingOffsets' cannot be 'earliest' (that reads nothing); use 'latest' or a JSON "
                "of offsets"
            )
        return OffsetSpec("earliest", offsets_key)
    if lowered == "latest":
        if start and not streaming:
            raise ConfigurationError(
                "starting offset can't be latest for batch queries on Kafka: Option "
                "'startingOffsets' cannot be 'latest' for a batch query (that reads nothing); use "
                "'earliest' or a JSON of offsets"
            )
        return OffsetSpec("latest", offsets_key)
    if lowered == "group":
        if not start or not streaming:
            raise ConfigurationError(
                f"Option '{offsets_key}'='group' is only for streaming starting offsets"
            )
        return OffsetSpec("group", offsets_key)
    if not text.startswith("{"):
        allowed = "'earliest', 'latest', 'group' or JSON" if streaming else "'earliest' or JSON"
        words = ("earliest", "latest", "group") if streaming else ("earliest",)
        if not start:
            allowed, words = "'latest' or JSON", ("latest",)
        raise ConfigurationError(
            f"Option '{offsets_key}' must be {allowed}, got {raw!r}"
            f"{did_you_mean(closest(text, words))}"
        )
    pairs, topic_pairs = _partition_json(
        options, offsets_key, allow_earliest=start, allow_latest=(not start) or streaming
    )
    return OffsetSpec("specific", offsets_key, offsets=pairs, topic_offsets=topic_pairs)


def check_offset_consistency(starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Spark's checkOffsetLimitValidity for batch reads, before any broker is asked (so
    also for topics that do not exist): explicit start and end offsets must name the same
    partitions, and no explicit start may be after its end (-2/-1 are not compared).
    A topic-level value covers every partition of its topic."""
    if starting.kind != ending.kind or starting.kind not in ("specific", "timestamp"):
        return
    what = "offset" if starting.kind == "specific" else "timestamp"
    start, end = starting.as_dict(), ending.as_dict()
    start_topics, end_topics = starting.topic_dict(), ending.topic_dict()
    unmatched = [tp for tp in start if tp not in end and tp[0] not in end_topics] + [
        tp for tp in end if tp not in start and tp[0] not in start_topics
    ]
    named_start = {tp[0] for tp in start} | set(start_topics)
    named_end = {tp[0] for tp in end} | set(end_topics)
    if unmatched or set(start_topics) - named_end or set(end_topics) - named_start:

        def names(partitions, topics):
            return ", ".join(
                [f"{t}-{p}" for t, p in sorted(partitions)]
                + [f"{t} (all partitions)" for t in sorted(topics)]
            )

        raise ConfigurationError(
            f"The specified start {what} and end {what} should have the same topic-partitions. "
            f"Topic-partitions for start {what} ('{starting.option}'): "
            f"[{names(start, start_topics)}], topic-partitions for end {what} "
            f"('{ending.option}'): [{names(end, end_topics)}]."
        )
    for tp, first in sorted(start.items()):
        last = end.get(tp)
        if last is not None and first >= 0 and last >= 0 and first > last:
            raise ConfigurationError(
                f"The specified start {what} {first} is greater than the end {what} {last} for "
                f"topic {tp[0]} partition {tp[1]} (options '{starting.option}' and "
                f"'{ending.option}')."
            )
