"""User-facing options: one table describes them all (README tables are made from it),
and the parsers turn a Spark options map into validated settings.

Every error here is a :class:`ConfigurationError` raised on the driver at
planning time, naming the option and the fix.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .protocol.errors import ConfigurationError

EARLIEST = -2
LATEST = -1

# (option, applies to, default, description). "read" covers batch and streaming reads.
OPTIONS = [
    ("kafka.bootstrap.servers", "read, write", "(required)",
     "Comma-separated `host:port` list of brokers to bootstrap from."),
    ("subscribe", "read", "",
     "Comma-separated topic list. Exactly one of `subscribe`, `subscribePattern`, `assign`."),
    ("subscribePattern", "read", "",
     "Java regex; every topic whose whole name matches is read (re-evaluated every trigger "
     "when streaming)."),
    ("assign", "read", "",
     'JSON of the partitions to read, e.g. `{"topicA":[0,1],"topicB":[2,4]}`.'),
    ("startingOffsets", "read", "batch: `earliest`, streaming: `latest`",
     '`earliest`, `latest` (streaming only), `group` (streaming, from the consumer group\'s '
     'committed offsets) or JSON `{"topicA":{"0":23,"1":-2}}` (-2 earliest, -1 latest).'),
    ("startingOffsetsFallback", "streaming read", "`earliest`",
     "With `startingOffsets=group`: where partitions without a committed offset start "
     "(`earliest` or `latest`)."),
    ("endingOffsets", "batch read", "`latest`",
     '`latest` or JSON `{"topicA":{"0":50,"1":-1}}` (-1 latest).'),
    ("startingOffsetsByTimestamp", "read", "",
     'JSON `{"topicA":{"0":1700000000000}}`: start of each partition at the first offset whose '
     'timestamp is at or after the given epoch milliseconds.'),
    ("startingTimestamp", "read", "",
     "Epoch milliseconds applied to every partition; wins over the other starting options."),
    ("endingOffsetsByTimestamp", "batch read", "", "Like `startingOffsetsByTimestamp`, for the end."),
    ("endingTimestamp", "batch read", "", "Like `startingTimestamp`, for the end."),
    ("startingOffsetsByTimestampStrategy", "read", "`error`",
     "`error` fails when no offset matches a timestamp; `latest` uses the latest offset instead."),
    ("latestOffsetsVia", "read", "`auto`",
     "How `latest` offsets are looked up: `auto` (ListOffsets, as Spark does, checked against "
     "the high watermark of one small Fetch per broker; the larger wins, so brokers whose "
     "ListOffsets lags, e.g. Tansu 0.6 after multi-record batches, still read every record), "
     "`listOffsets` (ListOffsets only, one request fewer) or `fetch` (same as `auto`)."),
    ("failOnDataLoss", "read", "`true`",
     "Fail when requested offsets are gone (aged out, topic deleted); `false` logs and reads "
     "what is left."),
    ("minPartitions", "read", "",
     "Minimum number of Spark partitions; large offset ranges are split in proportion to size."),
    ("maxRecordsPerPartition", "read", "",
     "Split offset ranges so no Spark partition reads more records than this."),
    ("includeHeaders", "read", "`false`", "Add the `headers` column."),
    ("fetchOffset.numRetries", "read", "`3`", "Attempts to look up offsets before failing."),
    ("fetchOffset.retryIntervalMs", "read", "`1000`", "Wait between those attempts (ms)."),
    ("maxOffsetsPerTrigger", "streaming read", "",
     "Upper bound of records per micro-batch, split over partitions in proportion to backlog."),
    ("minOffsetsPerTrigger", "streaming read", "",
     "Wait for at least this many new records before a micro-batch (see `maxTriggerDelay`)."),
    ("maxTriggerDelay", "streaming read", "`15m`",
     "Longest wait for `minOffsetsPerTrigger` before a batch runs anyway."),
    ("groupIdPrefix", "streaming read", "`spark-kafka-source`",
     "Set explicitly (and no `kafka.group.id`): the query commits its progress to a generated "
     "group `<prefix>-<uuid>`, new for every run. Unset, nothing is committed."),
    ("kafka.group.id", "streaming read", "",
     "Consumer group the query commits its progress to: the end offsets of every finished "
     "micro-batch (docs/streaming.md); also the group `startingOffsets=group` starts from."),
    ("kafka.isolation.level", "read", "`read_uncommitted`",
     "`read_committed` skips aborted transactions and reads up to the last stable offset."),
    ("kafka.max.partition.fetch.bytes", "read", "`8388608`",
     "Bytes asked per partition per Fetch; bounds executor memory."),
    ("kafka.fetch.max.wait.ms", "read", "`500`", "Longest time the broker may hold a Fetch."),
    ("kafka.request.timeout.ms", "read, write", "`30000`", "Per-request timeout."),
    ("kafka.retries", "read, write", "read: `5`, write: `2147483647`",
     "Retries of retriable errors (after a metadata refresh). Writes retry until "
     "`kafka.delivery.timeout.ms` by default, like the Java producer."),
    ("kafka.retry.backoff.ms", "read, write", "`100`", "Initial back-off between retries."),
    ("kafka.client.id", "read, write", "`kafka-ds`", "Client id sent with every request."),
    ("topic", "write", "",
     "Topic for every row; overrides the `topic` column. Required if there is no topic column."),
    ("kafka.acks", "write", "`all`", "`0`, `1` or `all` (`-1`)."),
    ("kafka.compression.type", "write", "`none`", "`none`, `gzip`, `snappy`, `lz4` or `zstd`."),
    ("kafka.enable.idempotence", "write", "`true`",
     "Producer id, epoch and sequence numbers so retried requests never duplicate records."),
    ("kafka.batch.size", "write", "`1048576`",
     "Largest record batch per partition (bytes, before compression, header included); a "
     "single larger record gets a batch of its own. Also the size of a sticky run of "
     "null-key records in one partition."),
    ("kafka.max.request.size", "write", "`1048576`",
     "Largest Produce request (bytes; one batch per partition per request, at least one "
     "batch). A record larger than this fails the write, naming topic, partition and row."),
    ("kafka.linger.ms", "write", "`0`",
     "How long rows may wait in a partition's buffer for rows of the following Arrow batches "
     "before they are sent; `0` sends the rows of each Arrow batch at once (in batches of at "
     "most `kafka.batch.size`)."),
    ("kafka.delivery.timeout.ms", "write", "`120000`",
     "Longest time a record may take from the write to its acknowledgement, retries included."),
    ("kafka.max.in.flight.requests.per.connection", "write", "`5`",
     "Produce requests pipelined to one broker."),
    ("kafka.allow.auto.create.topics", "write", "`true`",
     "Ask for metadata with auto-creation allowed, as the Java producer does: brokers with "
     "`auto.create.topics.enable=true` create a missing topic (with their default partition "
     "count); `false` fails the write on a missing topic."),
]

# Kafka consumer/producer settings that Spark's own Kafka source rejects, with the fix.
REJECTED_READ = {
    "auto.offset.reset": "set the source option 'startingOffsets' to 'earliest' or 'latest' "
                         "(or 'group') instead",
    "key.deserializer": "keys are always returned as binary; cast or use a UDF on the key column",
    "value.deserializer": "values are always returned as binary; cast or use a UDF on the value "
                          "column",
    "enable.auto.commit": "the source does not commit through the consumer; set 'kafka.group.id' "
                          "and it commits each finished streaming batch itself",
    "interceptor.classes": "interceptors are not supported; transform the DataFrame instead",
}
REJECTED_WRITE = {
    "key.serializer": "the key column must be binary or string; cast it before writing",
    "value.serializer": "the value column must be binary or string; cast it before writing",
    "interceptor.classes": "interceptors are not supported; transform the DataFrame instead",
    "partitioner.class": "custom partitioners are not supported; compute a 'partition' column "
                         "instead (rows with a null partition use the Java default partitioner)",
    "transactional.id": "transactions are not supported; the idempotent producer "
                        "('kafka.enable.idempotence', on by default) already keeps retried "
                        "requests from duplicating records",
}


def options_markdown(applies_to_prefix: str = "") -> str:
    """The README's option table, made from OPTIONS."""
    lines = ["| option | applies to | default | meaning |", "| --- | --- | --- | --- |"]
    for name, applies, default, text in OPTIONS:
        if applies_to_prefix and applies_to_prefix not in applies:
            continue
        lines.append(f"| `{name}` | {applies} | {default} | {text} |")
    return "\n".join(lines)


def lower_keys(options) -> dict[str, str]:
    """Spark option keys are case-insensitive: normalise to lower case."""
    return {str(k).lower(): v for k, v in dict(options).items()}


def kafka_params(options: dict[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix removed (keys lower-cased)."""
    return {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}


def parse_bool(options, key, default: bool) -> bool:
    raw = options.get(key.lower())
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConfigurationError(f"Option '{key}' must be 'true' or 'false', got {raw!r}")


def parse_int(options, key, default=None, minimum=None):
    raw = options.get(key.lower())
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ConfigurationError(f"Option '{key}' must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"Option '{key}' must be at least {minimum}, got {value}")
    return value


def parse_duration_ms(options, key, default_ms):
    """'15m', '30s', '500ms', '2h' or plain milliseconds."""
    raw = options.get(key.lower())
    if raw is None:
        return default_ms
    text = str(raw).strip().lower()
    units = [("ms", 1), ("s", 1000), ("m", 60000), ("h", 3600000), ("d", 86400000)]
    for suffix, factor in units:
        number = text[:-len(suffix)].strip()
        if text.endswith(suffix) and number.replace(".", "", 1).isdigit():
            return int(float(number) * factor)
    if text.isdigit():
        return int(text)
    raise ConfigurationError(
        f"Option '{key}' must be a duration like '15m', '30s' or '500ms', got {raw!r}")


def _json(options, key):
    raw = options[key.lower()]
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(f"Option '{key}' is not valid JSON ({exc}): {raw!r}") from None


# --- subscription ----------------------------------------------------------------

@dataclass(frozen=True)
class Subscription:
    kind: str                      # subscribe | subscribePattern | assign
    topics: tuple = ()             # subscribe
    pattern: str = ""              # subscribePattern
    assignment: tuple = ()         # assign: ((topic, partition), ...)


def parse_subscription(options) -> Subscription:
    given = [k for k in ("subscribe", "subscribePattern", "assign") if k.lower() in options]
    if len(given) != 1:
        found = f"; got {', '.join(given)}" if given else ""
        raise ConfigurationError(
            "Exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be set"
            f" for the Kafka source{found}. Example: .option(\"subscribe\", \"topicA,topicB\").")
    kind = given[0]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not topics:
            raise ConfigurationError(
                "Option 'subscribe' is empty: give a comma-separated topic list, e.g. 'topicA,topicB'")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        pattern = options["subscribepattern"].strip()
        if not pattern:
            raise ConfigurationError("Option 'subscribePattern' is empty: give a regex, e.g. 'events-.*'")
        import re
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigurationError(f"Option 'subscribePattern' is not a valid regex ({exc}): "
                                     f"{pattern!r}") from None
        return Subscription(kind, pattern=pattern)
    value = _json(options, "assign")
    if not isinstance(value, dict) or not value or not all(
            isinstance(ps, list) and all(isinstance(p, int) and p >= 0 for p in ps)
            for ps in value.values()):
        raise ConfigurationError(
            "Option 'assign' must be a JSON object of topic to partition list, e.g. "
            f"'{{\"topicA\":[0,1],\"topicB\":[2,4]}}', got {options['assign']!r}")
    assignment = tuple(sorted((t, p) for t, ps in value.items() for p in ps))
    return Subscription(kind, assignment=assignment)


# --- offsets -----------------------------------------------------------------------

@dataclass(frozen=True)
class OffsetSpec:
    """How to resolve one end of a range.

    kind: earliest | latest | group | specific | timestamp | global_timestamp.
    ``specific`` maps (topic, partition) -> offset (-2/-1 allowed); ``timestamp`` maps
    (topic, partition) -> epoch ms; ``global_timestamp`` uses ``timestamp`` for all.
    """

    kind: str
    option: str
    offsets: tuple = ()   # ((topic, partition), value) pairs
    timestamp: int = 0

    def as_dict(self) -> dict:
        return dict(self.offsets)


def _partition_json(options, key, allow_earliest, allow_latest) -> tuple:
    value = _json(options, key)
    example = '{"topicA":{"0":23,"1":-2}}'
    if not isinstance(value, dict):
        raise ConfigurationError(f"Option '{key}' must be a JSON object like {example}")
    pairs = []
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            raise ConfigurationError(
                f"Option '{key}': topic {topic!r} must map partitions to offsets, like {example}")
        for part, offset in parts.items():
            if not str(part).lstrip("-").isdigit() or not isinstance(offset, int) or isinstance(offset, bool):
                raise ConfigurationError(
                    f"Option '{key}': partition {part!r} of topic {topic!r} must map to an "
                    f"integer, like {example}")
            if offset == EARLIEST and not allow_earliest:
                raise ConfigurationError(
                    f"Option '{key}': earliest offset (-2) is not allowed for {topic}-{part} "
                    "here; use an explicit offset or -1 (latest)")
            if offset == LATEST and not allow_latest:
                raise ConfigurationError(
                    f"Option '{key}': latest offset (-1) is not allowed for {topic}-{part} in a "
                    "batch query's starting offsets; use -2 (earliest) or an explicit offset")
            if offset < -2:
                raise ConfigurationError(f"Option '{key}': invalid offset {offset} for {topic}-{part}")
            pairs.append(((topic, int(part)), offset))
    return tuple(sorted(pairs))


def parse_offset_spec(options, *, start: bool, streaming: bool | None) -> OffsetSpec:
    """Resolve the precedence Spark uses: timestamp > by-timestamp JSON > offsets.

    ``streaming=None`` (schema time, mode not known yet) skips the mode-specific checks.
    """
    prefix = "starting" if start else "ending"
    if streaming is None:
        if not start:
            return OffsetSpec("latest", "endingOffsets")
        streaming = True
    if not start and streaming:
        for key in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if key.lower() in options:
                raise ConfigurationError(
                    f"Option '{key}' is for batch queries only; a streaming query has no end. "
                    "Remove it, or use spark.read for a bounded read.")
        return OffsetSpec("latest", "endingOffsets")
    global_key = f"{prefix}Timestamp"
    by_ts_key = f"{prefix}OffsetsByTimestamp"
    offsets_key = f"{prefix}Offsets"
    if global_key.lower() in options:
        ts = parse_int(options, global_key)
        if ts < 0:
            raise ConfigurationError(f"Option '{global_key}' must be epoch milliseconds >= 0, got {ts}")
        return OffsetSpec("global_timestamp", global_key, timestamp=ts)
    if by_ts_key.lower() in options:
        value = _json(options, by_ts_key)
        pairs = []
        if not isinstance(value, dict):
            raise ConfigurationError(
                f"Option '{by_ts_key}' must be JSON like {{\"topicA\":{{\"0\":1700000000000}}}}")
        for topic, parts in value.items():
            if not isinstance(parts, dict):
                raise ConfigurationError(f"Option '{by_ts_key}': topic {topic!r} must map partitions "
                                         "to epoch milliseconds")
            for part, ts in parts.items():
                if not str(part).isdigit() or not isinstance(ts, int) or ts < 0:
                    raise ConfigurationError(
                        f"Option '{by_ts_key}': {topic}-{part} must map to epoch milliseconds >= 0")
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
                "Option 'endingOffsets' cannot be 'earliest' (that reads nothing); use 'latest' "
                "or a JSON of offsets")
        return OffsetSpec("earliest", offsets_key)
    if lowered == "latest":
        if start and not streaming:
            raise ConfigurationError(
                "Option 'startingOffsets' cannot be 'latest' for a batch query (that reads "
                "nothing); use 'earliest' or a JSON of offsets")
        return OffsetSpec("latest", offsets_key)
    if lowered == "group":
        if not start or not streaming:
            raise ConfigurationError(
                f"Option '{offsets_key}'='group' is only for streaming starting offsets")
        return OffsetSpec("group", offsets_key)
    if not text.startswith("{"):
        allowed = "'earliest', 'latest', 'group' or JSON" if streaming else "'earliest' or JSON"
        if not start:
            allowed = "'latest' or JSON"
        raise ConfigurationError(f"Option '{offsets_key}' must be {allowed}, got {raw!r}")
    pairs = _partition_json(options, offsets_key,
                            allow_earliest=start, allow_latest=(not start) or streaming)
    return OffsetSpec("specific", offsets_key, offsets=pairs)


# --- the whole read configuration ----------------------------------------------------

@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    read_committed: bool = False
    max_partition_fetch_bytes: int = 8 << 20
    fetch_max_wait_ms: int = 500
    latest_via_fetch: bool = False
    client: dict = field(default_factory=dict)   # kafka.* params for ClientConfig
    # streaming
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    group_id: str | None = None
    group_id_prefix: str = "spark-kafka-source"
    group_fallback: str = "earliest"


def check_bootstrap(options) -> str:
    servers = options.get("kafka.bootstrap.servers", "").strip()
    if not servers:
        raise ConfigurationError(
            "Option 'kafka.bootstrap.servers' must be set, e.g. "
            ".option(\"kafka.bootstrap.servers\", \"host1:9092,host2:9092\")")
    for server in servers.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigurationError(
                f"Option 'kafka.bootstrap.servers': {server.strip()!r} is not host:port")
    return servers


def parse_read_options(raw_options, *, streaming: bool | None) -> ReadOptions:
    """Validate every read option. ``streaming=None``: the checks common to both modes."""
    options = lower_keys(raw_options)
    bootstrap = check_bootstrap(options)
    params = kafka_params(options)
    for key, fix in REJECTED_READ.items():
        if key in params:
            raise ConfigurationError(f"Kafka option 'kafka.{key}' is not supported: {fix}.")
    subscription = parse_subscription(options)
    starting = parse_offset_spec(options, start=True, streaming=streaming)
    ending = parse_offset_spec(options, start=False, streaming=streaming)
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ConfigurationError(
            "Option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', got "
            f"{options['startingoffsetsbytimestampstrategy']!r}")
    isolation = params.get("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise ConfigurationError(
            "Option 'kafka.isolation.level' must be 'read_uncommitted' or 'read_committed', "
            f"got {params['isolation.level']!r}")
    latest_via = options.get("latestoffsetsvia", "auto").strip().lower()
    if latest_via not in ("auto", "listoffsets", "fetch"):
        raise ConfigurationError(
            f"Option 'latestOffsetsVia' must be 'auto', 'listOffsets' or 'fetch', got "
            f"{latest_via!r}")
    min_partitions = parse_int(options, "minPartitions", minimum=1)
    max_records = parse_int(options, "maxRecordsPerPartition", minimum=1)
    max_offsets = parse_int(options, "maxOffsetsPerTrigger", minimum=1)
    min_offsets = parse_int(options, "minOffsetsPerTrigger", minimum=1)
    if streaming is False:
        for key in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if key.lower() in options:
                raise ConfigurationError(
                    f"Option '{key}' is for streaming queries only; remove it from spark.read")
    if (max_offsets is not None and min_offsets is not None and min_offsets > max_offsets):
        raise ConfigurationError(
            f"Option 'minOffsetsPerTrigger' ({min_offsets}) must not exceed "
            f"'maxOffsetsPerTrigger' ({max_offsets})")
    if subscription.kind == "assign" and starting.kind == "specific":
        missing = set(subscription.assignment) - set(starting.as_dict())
        if missing:
            raise ConfigurationError(
                f"Option 'startingOffsets' must give an offset for every assigned partition; "
                f"missing {sorted(missing)} (use -2 for earliest, -1 for latest)")
    group_id = params.get("group.id")
    fallback = options.get("startingoffsetsfallback", "earliest").strip().lower()
    if fallback not in ("earliest", "latest"):
        raise ConfigurationError(
            f"Option 'startingOffsetsFallback' must be 'earliest' or 'latest', got {fallback!r}")
    if starting.kind == "group" and not group_id:
        raise ConfigurationError(
            "Option 'startingOffsets'='group' needs option 'kafka.group.id': the group whose "
            "committed offsets the query starts from")
    return ReadOptions(
        bootstrap_servers=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        fail_on_data_loss=parse_bool(options, "failOnDataLoss", True),
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        include_headers=parse_bool(options, "includeHeaders", False),
        fetch_offset_retries=parse_int(options, "fetchOffset.numRetries", 3, minimum=0),
        fetch_offset_retry_interval_ms=parse_int(options, "fetchOffset.retryIntervalMs", 1000,
                                                 minimum=0),
        read_committed=isolation == "read_committed",
        max_partition_fetch_bytes=parse_int(options, "kafka.max.partition.fetch.bytes", 8 << 20,
                                            minimum=1024),
        fetch_max_wait_ms=parse_int(options, "kafka.fetch.max.wait.ms", 500, minimum=0),
        latest_via_fetch=latest_via != "listoffsets",
        client=params,
        max_offsets_per_trigger=max_offsets,
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=parse_duration_ms(options, "maxTriggerDelay", 15 * 60 * 1000),
        group_id=group_id,
        group_id_prefix=options.get("groupidprefix", "spark-kafka-source"),
        group_fallback=fallback,
    )



# --- the whole write configuration ---------------------------------------------------

ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
MAX_RETRIES = 2147483647


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None = None          # the 'topic' option; overrides the topic column
    acks: int = -1                    # 0, 1 or -1 (all)
    compression: str = "none"         # none | gzip | snappy | lz4 | zstd
    idempotent: bool = True
    batch_size: int = 1 << 20
    max_request_size: int = 1 << 20
    linger_ms: int = 0
    delivery_timeout_ms: int = 120000
    request_timeout_ms: int = 30000
    max_in_flight: int = 5
    retries: int = MAX_RETRIES
    retry_backoff_ms: int = 100
    client: dict = field(default_factory=dict)   # kafka.* params for ClientConfig


def parse_write_options(raw_options) -> WriteOptions:
    """Validate every write option (driver side, before any task runs)."""
    options = lower_keys(raw_options)
    bootstrap = check_bootstrap(options)
    params = kafka_params(options)
    for key, fix in REJECTED_WRITE.items():
        if key in params:
            raise ConfigurationError(f"Kafka option 'kafka.{key}' is not supported: {fix}.")
    topic = options.get("topic")
    if topic is not None:
        topic = str(topic).strip()
        if not topic:
            raise ConfigurationError(
                "Option 'topic' is empty: give the topic to write to, or leave the option out "
                "and provide a string 'topic' column")
    acks_raw = params.get("acks", "all")
    acks = ACKS.get(str(acks_raw).strip().lower())
    if acks is None:
        raise ConfigurationError(f"Option 'kafka.acks' must be '0', '1' or 'all', got {acks_raw!r}")
    compression = str(params.get("compression.type", "none")).strip().lower()
    if compression not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise ConfigurationError(
            "Option 'kafka.compression.type' must be one of none, gzip, snappy, lz4, zstd, "
            f"got {params['compression.type']!r}")
    max_in_flight = parse_int(options, "kafka.max.in.flight.requests.per.connection", 5, minimum=1)
    retries = parse_int(options, "kafka.retries", MAX_RETRIES, minimum=0)
    # Like the Java producer: idempotence is on unless asked otherwise, and quietly off when
    # another setting it needs was changed -- but an explicit 'true' with such a setting
    # is a contradiction the user must resolve.
    explicit_idempotence = "kafka.enable.idempotence" in options
    idempotent = parse_bool(options, "kafka.enable.idempotence", True)
    conflicts = []
    if acks != -1:
        conflicts.append(f"'kafka.acks' is {acks_raw!r} (idempotence needs 'all')")
    if max_in_flight > 5:
        conflicts.append(f"'kafka.max.in.flight.requests.per.connection' is {max_in_flight} "
                         "(idempotence allows at most 5)")
    if retries == 0:
        conflicts.append("'kafka.retries' is 0 (idempotence needs retries)")
    if idempotent and conflicts:
        if explicit_idempotence:
            raise ConfigurationError(
                "Option 'kafka.enable.idempotence' is 'true' but " + "; ".join(conflicts)
                + ". Change those options, or set 'kafka.enable.idempotence' to 'false'.")
        idempotent = False
    linger_ms = parse_int(options, "kafka.linger.ms", 0, minimum=0)
    request_timeout_ms = parse_int(options, "kafka.request.timeout.ms", 30000, minimum=1)
    delivery_timeout_ms = parse_int(options, "kafka.delivery.timeout.ms", None, minimum=1)
    if delivery_timeout_ms is None:
        delivery_timeout_ms = max(120000, linger_ms + request_timeout_ms)
    elif delivery_timeout_ms < linger_ms + request_timeout_ms:
        raise ConfigurationError(
            f"Option 'kafka.delivery.timeout.ms' ({delivery_timeout_ms}) must be at least "
            f"'kafka.linger.ms' + 'kafka.request.timeout.ms' ({linger_ms} + "
            f"{request_timeout_ms}), so a request can time out and be retried once")
    return WriteOptions(
        bootstrap_servers=bootstrap,
        topic=topic,
        acks=acks,
        compression=compression,
        idempotent=idempotent,
        batch_size=parse_int(options, "kafka.batch.size", 1 << 20, minimum=1),
        max_request_size=parse_int(options, "kafka.max.request.size", 1 << 20, minimum=1),
        linger_ms=linger_ms,
        delivery_timeout_ms=delivery_timeout_ms,
        request_timeout_ms=request_timeout_ms,
        max_in_flight=max_in_flight,
        retries=retries,
        retry_backoff_ms=parse_int(options, "kafka.retry.backoff.ms", 100, minimum=0),
        client=params,
    )


if __name__ == "__main__":
    print(options_markdown())
