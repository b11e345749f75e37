"""User-facing options. Each option is declared once, below, as an :class:`Option`: its
name, the queries it applies to, its default, its parser and bounds, and its doc. The
declarations drive parsing and validation and make the README's option tables
(``python -m kafka_ds.options --write-readme`` rewrites them).

Every error here is a :class:`ConfigurationError` raised on the driver at planning time,
naming the option and the fix. The client's and producer's settings are built here, once,
on the driver, as frozen values (:mod:`kafka_ds.client.config`) that executors use as is.

Adding an option: declare it in ``OPTIONS`` (its ``field`` is the attribute it fills on
``ReadOptions``, ``WriteOptions``, ``ClientConfig`` or ``ProducerConfig`` -- add that
attribute there), then run ``python -m kafka_ds.options --write-readme``.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, fields
from typing import Any, Callable

from .client.config import DEFAULT_CLIENT_CONFIG as CLIENT
from .client.config import DEFAULT_PRODUCER_CONFIG as PRODUCER
from .client.config import ClientConfig, ProducerConfig
from .client.connection import parse_bootstrap
from .client.security import SECURITY_OPTION_NAMES, SecuritySettings
from .protocol.errors import ConfigurationError

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1
INT32_MAX = 2147483647

# --- value parsers: text -> value, or ValueError(what was expected) ----------------------


def text(raw) -> str:
    return str(raw)


def integer(raw) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError("an integer") from None


def boolean(raw) -> bool:
    value = str(raw).strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise ValueError("'true' or 'false'")


_DURATION_UNITS = (("ms", 1), ("s", 1000), ("m", 60000), ("h", 3600000), ("d", 86400000))


def duration_ms(raw) -> int:
    """'15m', '30s', '500ms', '2h' or plain milliseconds."""
    value = str(raw).strip().lower()
    for suffix, factor in _DURATION_UNITS:
        number = value[:-len(suffix)].strip()
        if value.endswith(suffix) and number.replace(".", "", 1).isdigit():
            return int(float(number) * factor)
    if value.isdigit():
        return int(value)
    raise ValueError("a duration like '15m', '30s' or '500ms'")


def choice(mapping: dict, expected: str = "") -> Callable[[Any], Any]:
    """One of ``mapping``'s keys (any case) -> its value."""
    lowered = {key.lower(): value for key, value in mapping.items()}
    names = [f"'{key}'" for key in mapping]
    expected = expected or (", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1
                            else names[0])

    def parse(raw):
        key = str(raw).strip().lower()
        if key not in lowered:
            raise ValueError(expected)
        return lowered[key]
    return parse


# --- declarations ----------------------------------------------------------------------

BATCH, STREAM, WRITE = "batch read", "streaming read", "write"
READ = frozenset({BATCH, STREAM})
READ_WRITE = READ | {WRITE}


@dataclass(frozen=True)
class ByMode:
    """A default that differs between reads and writes."""

    read: Any
    write: Any


@dataclass(frozen=True)
class Option:
    """One user-facing option.

    ``default`` is the value when the option is not set: a ``str`` is written as a user
    would write it and goes through ``parse``; ``None`` means unset. ``parse=None``: a
    dedicated function parses it (subscription, offsets), declared for docs and checks.
    ``field``: the attribute the value fills (see the module docstring).
    """

    name: str
    applies: frozenset
    doc: str
    parse: Callable[[Any], Any] | None = None
    default: Any = None
    field: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    example: str | None = None         # a valid value, shown in errors
    shown_default: str | None = None   # README default when not simply `default`

    def __post_init__(self):
        if self.parse is integer and self.name.startswith("kafka.") and self.maximum is None:
            # Kafka's int settings; they end up in int32 wire fields.
            object.__setattr__(self, "maximum", INT32_MAX)

    def default_for(self, modes: frozenset):
        default = self.default
        if isinstance(default, ByMode):
            default = default.write if WRITE in modes else default.read
        if isinstance(default, str) and self.parse is not None:
            default = self.parse(default)
        return default

    def value(self, options: dict, modes: frozenset):
        """The parsed, checked value in ``options`` (lower-cased keys), else the default."""
        raw = options.get(self.name.lower())
        return self.default_for(modes) if raw is None else self.check(raw)

    def check(self, raw):
        try:
            value = self.parse(raw)
        except ValueError as exc:
            raise ConfigurationError(
                f"Option '{self.name}' must be {exc}, got {raw!r}{self._fix()}") from None
        if self.minimum is not None and value < self.minimum:
            raise ConfigurationError(
                f"Option '{self.name}' must be at least {self.minimum}, got {value}{self._fix()}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigurationError(
                f"Option '{self.name}' must be at most {self.maximum}, got {value}{self._fix()}")
        return value

    def _fix(self) -> str:
        default = self.default.read if isinstance(self.default, ByMode) else self.default
        example = self.example or _plain(default)
        return f"; e.g. .option(\"{self.name}\", \"{example}\")" if example else ""

    def markdown_default(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if isinstance(self.default, ByMode):
            return f"read: `{_plain(self.default.read)}`, write: `{_plain(self.default.write)}`"
        return f"`{_plain(self.default)}`" if self.default is not None else ""

    def markdown_applies(self) -> str:
        if self.applies >= READ:
            return "read, write" if WRITE in self.applies else "read"
        return ", ".join(sorted(self.applies))


def _plain(value) -> str:
    if value is None or isinstance(value, ByMode):
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


OPTIONS: tuple[Option, ...] = (
    Option("kafka.bootstrap.servers", READ_WRITE,
           "Comma-separated `host:port` list of brokers to bootstrap from (IPv6: `[::1]:9092`).",
           shown_default="(required)"),
    Option("subscribe", READ,
           "Comma-separated topic list. Exactly one of `subscribe`, `subscribePattern`, `assign`."),
    Option("subscribePattern", READ,
           "Java regex; every topic whose whole name matches is read (re-evaluated every "
           "trigger when streaming)."),
    Option("assign", READ,
           'JSON of the partitions to read, e.g. `{"topicA":[0,1],"topicB":[2,4]}`.'),
    Option("startingOffsets", READ,
           '`earliest`, `latest` (streaming only), `group` (streaming, from the consumer '
           'group\'s committed offsets) or JSON `{"topicA":{"0":23,"1":-2},"topicB":"earliest"}` '
           '(-2 earliest, -1 latest; a topic-level "earliest"/"latest" covers all its '
           'partitions, also those of a topic `subscribePattern` matches later).',
           shown_default="batch: `earliest`, streaming: `latest`"),
    Option("startingOffsetsFallback", frozenset({STREAM}),
           "With `startingOffsets=group`: where partitions without a committed offset start "
           "(`earliest` or `latest`).",
           choice({"earliest": "earliest", "latest": "latest"}), "earliest",
           field="group_fallback"),
    Option("endingOffsets", frozenset({BATCH}),
           '`latest` or JSON `{"topicA":{"0":50,"1":-1},"topicB":"latest"}` (-1 latest). '
           'Resolved when the scan runs, so every action on the DataFrame reads up to the '
           'offsets of its time.', default="latest"),
    Option("startingOffsetsByTimestamp", READ,
           'JSON `{"topicA":{"0":1700000000000}}`: start of each partition at the first offset '
           'whose timestamp is at or after the given epoch milliseconds.'),
    Option("startingTimestamp", READ,
           "Epoch milliseconds applied to every partition; wins over the other starting "
           "options."),
    Option("endingOffsetsByTimestamp", frozenset({BATCH}),
           "Like `startingOffsetsByTimestamp`, for the end."),
    Option("endingTimestamp", frozenset({BATCH}), "Like `startingTimestamp`, for the end."),
    Option("startingOffsetsByTimestampStrategy", READ,
           "`error` fails when no offset matches a timestamp; `latest` uses the latest offset "
           "instead.",
           choice({"error": "error", "latest": "latest"}), "error", field="timestamp_strategy"),
    Option("latestOffsetsVia", READ,
           "How `latest` (and `earliest`) offsets are looked up: `auto` (ListOffsets, as "
           "Spark does, checked against one small Fetch per broker: the larger of it and the "
           "high watermark for `latest`, the smaller of it and the log start offset for "
           "`earliest`, so brokers whose ListOffsets is off, e.g. Tansu 0.6 after "
           "multi-record or concurrently written batches, still read every record), "
           "`listOffsets` (ListOffsets only, one request fewer) or `fetch` (same as `auto`).",
           choice({"auto": True, "listOffsets": False, "fetch": True}), "auto",
           field="latest_via_fetch"),
    Option("failOnDataLoss", READ,
           "Fail when requested offsets are gone (aged out, topic deleted); `false` logs and "
           "reads what is left.",
           boolean, True, field="fail_on_data_loss"),
    Option("minPartitions", READ,
           "Minimum number of Spark partitions; large offset ranges are split in proportion to "
           "size.",
           integer, field="min_partitions", minimum=1, example="8"),
    Option("maxRecordsPerPartition", READ,
           "Split offset ranges so no Spark partition reads more records than this.",
           integer, field="max_records_per_partition", minimum=1, example="100000"),
    Option("includeHeaders", READ, "Add the `headers` column.",
           boolean, False, field="include_headers"),
    Option("fetchOffset.numRetries", READ,
           "Accepted for compatibility with Spark's source; driver-side offset look-ups retry "
           "within `kafka.default.api.timeout.ms` (docs/reliability.md).",
           integer, 3, field="fetch_offset_retries", minimum=0),
    Option("fetchOffset.retryIntervalMs", READ, "Accepted for compatibility (see above).",
           integer, 1000, field="fetch_offset_retry_interval_ms", minimum=0),
    Option("kafkaConsumer.pollTimeoutMs", READ,
           "Time budget of one Fetch on an executor, retries of retriable errors, connection "
           "failures and leader changes included.",
           integer, 120000, field="poll_timeout_ms", minimum=0,
           shown_default="`120000` (`spark.network.timeout`'s default)"),
    Option("maxOffsetsPerTrigger", frozenset({STREAM}),
           "Upper bound of records per micro-batch, split over partitions in proportion to "
           "backlog.",
           integer, field="max_offsets_per_trigger", minimum=1, example="100000"),
    Option("minOffsetsPerTrigger", frozenset({STREAM}),
           "Wait for at least this many new records before a micro-batch (see "
           "`maxTriggerDelay`).",
           integer, field="min_offsets_per_trigger", minimum=1, example="1000"),
    Option("maxTriggerDelay", frozenset({STREAM}),
           "Longest wait for `minOffsetsPerTrigger` before a batch runs anyway.",
           duration_ms, "15m", field="max_trigger_delay_ms"),
    Option("idlePollIntervalMs", frozenset({STREAM}),
           "When a trigger found no new records, ask the brokers again after this long at the "
           "earliest (Spark asks every ~10 ms when idle; `100` cuts an idle query's requests "
           "~10x). `0` asks every time, as Spark's source does: with a pause, "
           "`processAllAvailable()` may return before records written in the last pause are "
           "read.",
           integer, 0, field="idle_poll_interval_ms", minimum=0),
    Option("groupIdPrefix", frozenset({STREAM}),
           "Set explicitly (and no `kafka.group.id`): the query commits its progress to a "
           "generated group `<prefix>-<uuid>`, new for every run. Unset, nothing is committed.",
           text, "spark-kafka-source", field="group_id_prefix"),
    Option("kafka.group.id", frozenset({STREAM}),
           "Consumer group the query commits its progress to: the end offsets of every "
           "finished micro-batch (docs/streaming.md); also the group `startingOffsets=group` "
           "starts from.",
           text, field="group_id"),
    Option("kafka.isolation.level", READ,
           "`read_committed` skips aborted transactions and reads up to the last stable "
           "offset.",
           choice({"read_uncommitted": False, "read_committed": True}), "read_uncommitted",
           field="read_committed"),
    Option("kafka.max.partition.fetch.bytes", READ,
           "Bytes asked per partition per Fetch; bounds executor memory.",
           integer, 8 << 20, field="max_partition_fetch_bytes", minimum=1024),
    Option("kafka.fetch.max.wait.ms", READ, "Longest time the broker may hold a Fetch.",
           integer, 500, field="fetch_max_wait_ms", minimum=0),
    Option("kafka.request.timeout.ms", READ_WRITE, "Per-request timeout.",
           integer, CLIENT.request_timeout_ms, field="request_timeout_ms", minimum=1),
    Option("kafka.socket.connection.setup.timeout.ms", READ_WRITE,
           "Longest time to open a connection to a broker.",
           integer, CLIENT.connect_timeout_ms, field="connect_timeout_ms", minimum=1),
    Option("kafka.retries", READ_WRITE,
           "Retries of retriable errors (metadata of the partitions concerned is refreshed "
           "when the error says it is stale). By default only the time budgets limit them: "
           "`kafkaConsumer.pollTimeoutMs`, `kafka.default.api.timeout.ms`, "
           "`kafka.delivery.timeout.ms`.",
           integer, ByMode(read=CLIENT.retries, write=PRODUCER.retries), shown_default="unlimited (the time budgets)", example="10", field="retries",
           minimum=0),
    Option("kafka.retry.backoff.ms", READ_WRITE,
           "Initial back-off between retries (doubles each retry, +-20% jitter).",
           integer, CLIENT.retry_backoff_ms, field="retry_backoff_ms", minimum=0),
    Option("kafka.retry.backoff.max.ms", READ_WRITE, "Longest back-off between retries.",
           integer, CLIENT.retry_backoff_max_ms, field="retry_backoff_max_ms", minimum=0),
    Option("kafka.default.api.timeout.ms", READ,
           "Time budget of driver-side metadata, ListOffsets and offset-commit calls, "
           "retries included.",
           integer, CLIENT.default_api_timeout_ms, field="default_api_timeout_ms", minimum=0),
    Option("kafka.metadata.max.age.ms", READ_WRITE,
           "Leaders and partitions learnt from Metadata are reused this long (refreshed "
           "earlier when a broker says they moved or a topic is gone).",
           integer, CLIENT.metadata_max_age_ms, field="metadata_max_age_ms", minimum=0),
    Option("kafka.client.id", READ_WRITE, "Client id sent with every request.",
           text, CLIENT.client_id, field="client_id"),
    Option("topic", frozenset({WRITE}),
           "Topic for every row; overrides the `topic` column. Required if there is no topic "
           "column."),
    Option("kafka.acks", frozenset({WRITE}), "`0`, `1` or `all` (`-1`).",
           choice({"0": 0, "1": 1, "all": -1, "-1": -1}, "'0', '1' or 'all'"), "all",
           field="acks"),
    Option("kafka.compression.type", frozenset({WRITE}),
           "`none`, `gzip`, `snappy`, `lz4` or `zstd`.",
           choice({c: c for c in ("none", "gzip", "snappy", "lz4", "zstd")},
                  "one of none, gzip, snappy, lz4, zstd"), "none", field="compression"),
    Option("kafka.enable.idempotence", frozenset({WRITE}),
           "Producer id, epoch and sequence numbers so retried requests never duplicate "
           "records.",
           boolean, PRODUCER.idempotent, field="idempotent"),
    Option("kafka.batch.size", frozenset({WRITE}),
           "Largest record batch per partition (bytes, before compression, header included); "
           "a single larger record gets a batch of its own. Also the size of a sticky run of "
           "null-key records in one partition.",
           integer, 1 << 20, field="batch_size", minimum=1),
    Option("kafka.max.request.size", frozenset({WRITE}),
           "Largest Produce request (bytes; one batch per partition per request, at least one "
           "batch). A record larger than this fails the write, naming topic, partition and row.",
           integer, PRODUCER.max_request_size, field="max_request_size", minimum=1),
    Option("kafka.linger.ms", frozenset({WRITE}),
           "How long rows may wait in a partition's buffer for rows of the following Arrow "
           "batches before they are sent; `0` sends the rows of each Arrow batch at once (in "
           "batches of at most `kafka.batch.size`).",
           integer, 0, field="linger_ms", minimum=0),
    Option("kafka.delivery.timeout.ms", frozenset({WRITE}),
           "Longest time a record may take from the write to its acknowledgement, retries "
           "included (at least `kafka.linger.ms` + `kafka.request.timeout.ms`).",
           integer, field="delivery_timeout_ms", minimum=1,
           example=str(PRODUCER.delivery_timeout_ms),
           shown_default=f"`{PRODUCER.delivery_timeout_ms}`"),
    Option("kafka.max.in.flight.requests.per.connection", frozenset({WRITE}),
           "Produce requests pipelined to one broker (at most 5 with idempotence).",
           integer, PRODUCER.max_in_flight, field="max_in_flight", minimum=1),
    Option("deliveryGuarantee", frozenset({WRITE}),
           "`exactly-once`: every task writes in a Kafka transaction that the driver commits "
           "when Spark commits the write (docs/exactly_once.md); `at-least-once`: plain "
           "idempotent writes, a retried task or a replayed micro-batch writes its rows again.",
           choice({"at-least-once": False, "exactly-once": True}), "at-least-once",
           field="exactly_once"),
    Option("transactionalIdPrefix", frozenset({WRITE}),
           "Exactly-once: task p of a write uses the transactional id `<prefix>-p`. Must be "
           "unique among concurrent writers; keep it when restarting a streaming query.",
           text, field="transactional_id_prefix", example="orders-writer",
           shown_default="batch: `pykafka-<topic>-<random>`, streaming: "
                         "`pykafka-<hash of checkpointLocation>`"),
    Option("kafka.transaction.timeout.ms", frozenset({WRITE}),
           "Exactly-once: the broker aborts a transaction left open this long (a task's write "
           "plus the wait until the driver commits must fit; capped by the broker's "
           "transaction.max.timeout.ms).",
           integer, 60000, field="transaction_timeout_ms", minimum=1),
    Option("kafka.allow.auto.create.topics", frozenset({WRITE}),
           "Ask for metadata with auto-creation allowed, as the Java producer does: brokers "
           "with `auto.create.topics.enable=true` create a missing topic (with their default "
           "partition count); `false` fails the write on a missing topic.",
           boolean, "true", field="allow_auto_create_topics"),
)

BY_NAME = {option.name.lower(): option for option in OPTIONS}


@dataclass(frozen=True)
class Forbidden:
    """A Kafka client setting Spark's connector rejects (or that cannot work here)."""

    name: str
    applies: frozenset
    reason: str    # Spark's words where Spark rejects it
    fix: str

    def error(self) -> ConfigurationError:
        # Spark names the Kafka setting without the source's "kafka." prefix.
        short = self.name[len("kafka."):] if self.name.startswith("kafka.") else self.name
        return ConfigurationError(
            f"Kafka option '{short}' is not supported{self.reason} (option '{self.name}'): "
            f"{self.fix}.")


FORBIDDEN: tuple[Forbidden, ...] = (
    # Spark's KafkaSourceProvider rejects these for every source.
    Forbidden("kafka.auto.offset.reset", READ,
              "; Structured Streaming manages which offsets are consumed",
              "set the source option 'startingOffsets' to 'earliest' or 'latest' "
              "(or 'group') instead"),
    Forbidden("kafka.key.deserializer", READ,
              " as keys are deserialized as byte arrays",
              "keys are always returned as binary; cast or use a UDF on the key column"),
    Forbidden("kafka.value.deserializer", READ,
              " as values are deserialized as byte arrays",
              "values are always returned as binary; cast or use a UDF on the value column"),
    Forbidden("kafka.enable.auto.commit", READ, "",
              "the source does not commit through the consumer; set 'kafka.group.id' and it "
              "commits each finished streaming batch itself"),
    # (Spark's sink hands this one to its Java producer; there is no JVM here.)
    Forbidden("kafka.interceptor.classes", READ_WRITE, "",
              "interceptors are not supported; transform the DataFrame instead"),
    # Spark's sink rejects these.
    Forbidden("kafka.key.serializer", frozenset({WRITE}), " as keys are serialized as bytes",
              "the key column must be binary or string; cast it before writing"),
    Forbidden("kafka.value.serializer", frozenset({WRITE}), " as values are serialized as bytes",
              "the value column must be binary or string; cast it before writing"),
    # Spark hands these Java classes to its producer; there is no JVM here.
    Forbidden("kafka.partitioner.class", frozenset({WRITE}), "",
              "custom partitioners are not supported; compute a 'partition' column instead "
              "(rows with a null partition use the Java default partitioner)"),
    Forbidden("kafka.transactional.id", frozenset({WRITE}), "",
              "set .option('deliveryGuarantee', 'exactly-once') for transactional writes (each "
              "task then uses the id '<transactionalIdPrefix>-<task>'; set "
              "'transactionalIdPrefix' to choose the prefix)"),
)


def _modes_text(modes: frozenset) -> str:
    return {frozenset({BATCH}): "batch queries", frozenset({STREAM}): "streaming queries",
            frozenset({WRITE}): "writes"}.get(modes, "reads")


def check_kafka_settings(options: dict, modes: frozenset, *, log_unused: bool = True) -> None:
    """Reject the forbidden ``kafka.*`` settings; log the ones kafka_ds does not use.

    Spark hands every ``kafka.*`` setting to the Kafka client; kafka_ds is its own client,
    so a setting it has no use for is accepted and named in a warning (as the Java client
    warns of configurations it does not know) rather than failing the query.
    """
    unused = []
    for forbidden in FORBIDDEN:
        if forbidden.applies & modes and forbidden.name.lower() in options:
            raise forbidden.error()
    for key in sorted(options):
        option = BY_NAME.get(key)
        if key.startswith("kafka.") and not (option and option.applies & modes) \
                and key not in SECURITY_OPTION_NAMES:
            unused.append(key)
    if unused and log_unused:
        log.warning("kafka_ds does not use these Kafka settings in %s; they have no effect: %s",
                    _modes_text(modes), ", ".join(unused))


def warn_ignored(options: dict, modes: frozenset) -> None:
    """Like Spark, options of other kinds of query are ignored with a warning."""
    for key in options:
        option = BY_NAME.get(key)
        if option and not key.startswith("kafka.") and not option.applies & modes:
            log.warning("%s option ignored in %s (it applies to %s)", option.name,
                        _modes_text(modes), option.markdown_applies())


def declared_values(options: dict, modes: frozenset) -> dict[str, Any]:
    """``field -> value`` of every declared option: parsed and checked when the option
    applies to ``modes`` (else its default; see :func:`warn_ignored`)."""
    values = {}
    for option in OPTIONS:
        if option.field is None:
            continue
        values[option.field] = (option.value(options, modes) if option.applies & modes
                                else option.default_for(modes))
    return values


def fields_of(cls, values: dict, **overrides) -> dict:
    """The entries of ``values`` that are fields of the dataclass ``cls``."""
    picked = {f.name: values[f.name] for f in fields(cls) if f.name in values}
    return {**picked, **overrides}


def default_of(name: str, modes: frozenset = READ):
    return BY_NAME[name.lower()].default_for(modes)


# --- README tables ------------------------------------------------------------------------

README_BEGIN = "<!-- options table: generated by `python -m kafka_ds.options --write-readme` -->"
README_END = "<!-- end of options table -->"


def options_markdown(applies_to_prefix: str = "") -> str:
    """The README's option table, made from OPTIONS."""
    lines = ["| option | applies to | default | meaning |", "| --- | --- | --- | --- |"]
    for option in OPTIONS:
        applies = option.markdown_applies()
        if applies_to_prefix and applies_to_prefix not in applies:
            continue
        lines.append(f"| `{option.name}` | {applies} | {option.markdown_default()} "
                     f"| {option.doc} |")
    return "\n".join(lines)


def forbidden_markdown() -> str:
    """The README's table of rejected Kafka settings, made from FORBIDDEN."""
    lines = ["| Kafka setting | rejected for | instead |", "| --- | --- | --- |"]
    for forbidden in FORBIDDEN:
        applies = "read, write" if forbidden.applies == READ_WRITE else (
            "read" if forbidden.applies == READ else "write")
        lines.append(f"| `{forbidden.name}` | {applies} | {forbidden.fix[0].upper()}"
                     f"{forbidden.fix[1:]}. |")
    return "\n".join(lines)


def readme_section() -> str:
    return "\n".join([README_BEGIN, "", options_markdown(), "", forbidden_markdown(), "",
                      README_END])


def _update_readme(path) -> bool:
    """Replace the generated section of the README at ``path``; True when it changed."""
    import pathlib
    path = pathlib.Path(path)
    old = path.read_text()
    start, end = old.index(README_BEGIN), old.index(README_END) + len(README_END)
    new = old[:start] + readme_section() + old[end:]
    if new != old:
        path.write_text(new)
    return new != old


# --- helpers ----------------------------------------------------------------------------

def lower_keys(options) -> dict[str, str]:
    """Spark option keys are case-insensitive: normalise to lower case."""
    return {str(k).lower(): v for k, v in dict(options).items()}


def kafka_params(options: dict[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix removed (keys lower-cased)."""
    return {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}


def parse_security(options: dict):
    """TLS/SASL settings from ``kafka.security.protocol``/``kafka.ssl.*``/``kafka.sasl.*``
    (their table: ``kafka_ds.client.security.SECURITY_OPTIONS``), None for PLAINTEXT.
    Stores and JAAS entries are read and checked here, on the driver."""
    params = kafka_params(options)
    if not any(key.startswith(("security.", "ssl.", "sasl.")) for key in params):
        return None
    settings = SecuritySettings.from_params(params)
    return None if settings.protocol == "PLAINTEXT" else settings


def _checked(options, key, parse, default, minimum=None):
    raw = options.get(key.lower())
    if raw is None:
        return default
    return Option(key, READ_WRITE, "", parse, minimum=minimum).check(raw)


def parse_bool(options, key, default: bool) -> bool:
    return _checked(options, key, boolean, default)


def parse_int(options, key, default=None, minimum=None):
    return _checked(options, key, integer, default, minimum)


def parse_duration_ms(options, key, default_ms):
    """'15m', '30s', '500ms', '2h' or plain milliseconds."""
    return _checked(options, key, duration_ms, default_ms)


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
    # Messages keep the key words of Spark's own (KafkaSourceProvider) so a search for
    # Spark's message finds ours.
    given = [k for k in ("subscribe", "subscribePattern", "assign") if k.lower() in options]
    if len(given) != 1:
        if not given:
            raise ConfigurationError(
                "One of the following options must be specified for Kafka source: 'subscribe', "
                "'subscribePattern', 'assign'. Example: .option(\"subscribe\", \"topicA,topicB\").")
        raise ConfigurationError(
            "Only one of the following options can be specified for Kafka source: 'subscribe', "
            f"'subscribePattern', 'assign'; got {', '.join(given)}. Keep exactly one of them.")
    kind = given[0]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not topics:
            raise ConfigurationError(
                "No topics to subscribe to as specified value for option 'subscribe' is "
                f"{options['subscribe']!r}: give a comma-separated topic list, e.g. 'topicA,topicB'")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        pattern = options["subscribepattern"].strip()
        if not pattern:
            raise ConfigurationError(
                "Pattern to subscribe is empty as specified value for option 'subscribePattern' is "
                f"{options['subscribepattern']!r}: give a regex, e.g. 'events-.*'")
        import re
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigurationError(f"Option 'subscribePattern' is not a valid regex ({exc}): "
                                     f"{pattern!r}") from None
        return Subscription(kind, pattern=pattern)
    if not str(options["assign"]).strip().startswith("{"):
        raise ConfigurationError(
            "No topicpartitions to assign as specified value for option 'assign' is "
            f"{options['assign']!r}: give JSON like '{{\"topicA\":[0,1],\"topicB\":[2,4]}}'")
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
    ``specific`` maps (topic, partition) -> offset (-2/-1 allowed), and ``topic_offsets``
    maps topic -> -2/-1 for every partition of a topic (SPARK-58774's topic-level
    ``{"topicA":"earliest"}``); ``timestamp`` maps (topic, partition) -> epoch ms;
    ``global_timestamp`` uses ``timestamp`` for all.
    """

    kind: str
    option: str
    offsets: tuple = ()   # ((topic, partition), value) pairs
    timestamp: int = 0
    topic_offsets: tuple = ()   # ((topic, -2 | -1), ...), kind "specific" only

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
    value = _json(options, key)
    example = _OFFSETS_EXAMPLE
    if not isinstance(value, dict):
        raise ConfigurationError(f"Option '{key}' must be a JSON object like {example}")
    pairs, topic_pairs = [], []

    def check(offset, where):
        # Spark's wording (KafkaSourceProvider.validateBatchOptions), then the fix.
        if offset == EARLIEST and not allow_earliest:
            raise ConfigurationError(
                f"ending offset for {where} can't be earliest for batch queries on Kafka "
                f"(option '{key}'); use an explicit offset or -1 / \"latest\"")
        if offset == LATEST and not allow_latest:
            raise ConfigurationError(
                f"startingOffsets for {where} can't be latest for batch queries on Kafka "
                f"(option '{key}'); use -2 / \"earliest\" or an explicit offset")

    for topic, parts in value.items():
        if isinstance(parts, str):
            word = parts.strip().lower()
            if word not in ("earliest", "latest"):
                raise ConfigurationError(
                    f"Option '{key}': topic {topic!r} maps to {parts!r}; a topic-level value must "
                    f"be \"earliest\" or \"latest\", like {example}")
            offset = EARLIEST if word == "earliest" else LATEST
            check(offset, f"topic {topic}")
            topic_pairs.append((topic, offset))
            continue
        if not isinstance(parts, dict):
            raise ConfigurationError(
                f"Option '{key}': topic {topic!r} must map partitions to offsets, or be "
                f"\"earliest\" / \"latest\", like {example}")
        for part, offset in parts.items():
            if not str(part).lstrip("-").isdigit() or not isinstance(offset, int) or isinstance(offset, bool):
                raise ConfigurationError(
                    f"Option '{key}': partition {part!r} of topic {topic!r} must map to an "
                    f"integer, like {example}")
            check(offset, f"{topic}-{part}")
            if offset < -2:
                raise ConfigurationError(f"Option '{key}': invalid offset {offset} for {topic}-{part}")
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
                    "bounded read.")
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
                "ending offset can't be earliest for batch queries on Kafka: Option "
                "'endingOffsets' cannot be 'earliest' (that reads nothing); use 'latest' or a JSON "
                "of offsets")
        return OffsetSpec("earliest", offsets_key)
    if lowered == "latest":
        if start and not streaming:
            raise ConfigurationError(
                "starting offset can't be latest for batch queries on Kafka: Option "
                "'startingOffsets' cannot be 'latest' for a batch query (that reads nothing); use "
                "'earliest' or a JSON of offsets")
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
    pairs, topic_pairs = _partition_json(options, offsets_key, allow_earliest=start,
                                         allow_latest=(not start) or streaming)
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
    unmatched = ([tp for tp in start if tp not in end and tp[0] not in end_topics]
                 + [tp for tp in end if tp not in start and tp[0] not in start_topics])
    named_start = {tp[0] for tp in start} | set(start_topics)
    named_end = {tp[0] for tp in end} | set(end_topics)
    if unmatched or set(start_topics) - named_end or set(end_topics) - named_start:
        def names(partitions, topics):
            return ", ".join([f"{t}-{p}" for t, p in sorted(partitions)]
                             + [f"{t} (all partitions)" for t in sorted(topics)])
        raise ConfigurationError(
            f"The specified start {what} and end {what} should have the same topic-partitions. "
            f"Topic-partitions for start {what} ('{starting.option}'): "
            f"[{names(start, start_topics)}], topic-partitions for end {what} "
            f"('{ending.option}'): [{names(end, end_topics)}].")
    for tp, first in sorted(start.items()):
        last = end.get(tp)
        if last is not None and first >= 0 and last >= 0 and first > last:
            raise ConfigurationError(
                f"The specified start {what} {first} is greater than the end {what} {last} for "
                f"topic {tp[0]} partition {tp[1]} (options '{starting.option}' and "
                f"'{ending.option}').")


# --- the whole read configuration ----------------------------------------------------

@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    timestamp_strategy: str = default_of("startingOffsetsByTimestampStrategy")
    fail_on_data_loss: bool = default_of("failOnDataLoss")
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = default_of("includeHeaders")
    fetch_offset_retries: int = default_of("fetchOffset.numRetries")
    fetch_offset_retry_interval_ms: int = default_of("fetchOffset.retryIntervalMs")
    read_committed: bool = default_of("kafka.isolation.level")
    max_partition_fetch_bytes: int = default_of("kafka.max.partition.fetch.bytes")
    fetch_max_wait_ms: int = default_of("kafka.fetch.max.wait.ms")
    poll_timeout_ms: int = default_of("kafkaConsumer.pollTimeoutMs")   # budget of one Fetch
    latest_via_fetch: bool = default_of("latestOffsetsVia")
    client: ClientConfig = CLIENT    # built on the driver; executors use it as is
    # streaming
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = default_of("maxTriggerDelay")
    group_id: str | None = None
    group_id_prefix: str = default_of("groupIdPrefix")
    idle_poll_interval_ms: int = default_of("idlePollIntervalMs")
    group_fallback: str = default_of("startingOffsetsFallback")


def check_bootstrap(options) -> str:
    """The ``kafka.bootstrap.servers`` option, checked by the client's own parser."""
    servers = str(options.get("kafka.bootstrap.servers", "")).strip()
    parse_bootstrap(servers)
    return servers


def parse_read_options(raw_options, *, streaming: bool | None) -> ReadOptions:
    """Validate every read option. ``streaming=None``: the checks common to both modes."""
    options = lower_keys(raw_options)
    modes = READ if streaming is None else frozenset({STREAM if streaming else BATCH})
    bootstrap = check_bootstrap(options)
    check_kafka_settings(options, modes, log_unused=streaming is not None)
    subscription = parse_subscription(options)
    starting = parse_offset_spec(options, start=True, streaming=streaming)
    ending = parse_offset_spec(options, start=False, streaming=streaming)
    values = declared_values(options, modes)
    max_offsets, min_offsets = values["max_offsets_per_trigger"], values["min_offsets_per_trigger"]
    if max_offsets is not None and min_offsets is not None and min_offsets > max_offsets:
        raise ConfigurationError(
            f"The value of minOffsetPerTrigger({min_offsets}) is higher than the "
            f"maxOffsetsPerTrigger({max_offsets}): option 'minOffsetsPerTrigger' must not "
            "exceed 'maxOffsetsPerTrigger'")
    if streaming is False:
        check_offset_consistency(starting, ending)
    if subscription.kind == "assign" and starting.kind == "specific":
        missing = set(subscription.assignment) - set(starting.for_partitions(subscription.assignment))
        if missing:
            raise ConfigurationError(
                f"Option 'startingOffsets' must give an offset for every assigned partition; "
                f"missing {sorted(missing)} (use -2 for earliest, -1 for latest)")
    if starting.kind == "group" and not values["group_id"]:
        raise ConfigurationError(
            "Option 'startingOffsets'='group' needs option 'kafka.group.id': the group whose "
            "committed offsets the query starts from")
    if streaming is not None:
        warn_ignored(options, modes)
    if streaming and values["group_id"] and "groupidprefix" in options:
        log.warning("Option groupIdPrefix will be ignored as option kafka.group.id has been set.")
    return ReadOptions(
        bootstrap_servers=bootstrap, subscription=subscription, starting=starting,
        ending=ending,
        client=ClientConfig(**fields_of(ClientConfig, values, security=parse_security(options))),
        **fields_of(ReadOptions, values))


# --- the whole write configuration ---------------------------------------------------

MAX_RETRIES = INT32_MAX


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None = None          # the 'topic' option; overrides the topic column
    acks: int = default_of("kafka.acks", frozenset({WRITE}))         # 0, 1 or -1 (all)
    compression: str = default_of("kafka.compression.type")          # none|gzip|snappy|lz4|zstd
    idempotent: bool = default_of("kafka.enable.idempotence")
    batch_size: int = default_of("kafka.batch.size")
    max_request_size: int = default_of("kafka.max.request.size")
    linger_ms: int = default_of("kafka.linger.ms")
    delivery_timeout_ms: int = PRODUCER.delivery_timeout_ms
    request_timeout_ms: int = default_of("kafka.request.timeout.ms")
    max_in_flight: int = default_of("kafka.max.in.flight.requests.per.connection")
    allow_auto_create_topics: bool = default_of("kafka.allow.auto.create.topics")
    retries: int = default_of("kafka.retries", frozenset({WRITE}))
    retry_backoff_ms: int = default_of("kafka.retry.backoff.ms")
    # Built on the driver from the values above; write tasks use them as they are.
    client: ClientConfig = CLIENT
    producer: ProducerConfig = PRODUCER
    exactly_once: bool = False                   # deliveryGuarantee=exactly-once
    transactional_id_prefix: str | None = None   # None: the writer derives one
    transaction_timeout_ms: int = default_of("kafka.transaction.timeout.ms", frozenset({WRITE}))
    checkpoint_location: str | None = None       # Spark's writeStream checkpointLocation


def parse_write_options(raw_options) -> WriteOptions:
    """Validate every write option (driver side, before any task runs)."""
    options = lower_keys(raw_options)
    modes = frozenset({WRITE})
    bootstrap = check_bootstrap(options)
    check_kafka_settings(options, modes)
    topic = options.get("topic")
    if topic is not None:
        topic = str(topic).strip()
        if not topic:
            raise ConfigurationError(
                "Option 'topic' is empty: give the topic to write to, or leave the option out "
                "and provide a string 'topic' column")
    values = declared_values(options, modes)
    _check_exactly_once(values, options)
    _resolve_idempotence(values, explicit="kafka.enable.idempotence" in options,
                         acks_raw=options.get("kafka.acks"))
    linger_ms, request_timeout_ms = values["linger_ms"], values["request_timeout_ms"]
    if values["delivery_timeout_ms"] is None:
        values["delivery_timeout_ms"] = max(PRODUCER.delivery_timeout_ms,
                                            linger_ms + request_timeout_ms)
    elif values["delivery_timeout_ms"] < linger_ms + request_timeout_ms:
        raise ConfigurationError(
            f"Option 'kafka.delivery.timeout.ms' ({values['delivery_timeout_ms']}) must be at "
            f"least 'kafka.linger.ms' + 'kafka.request.timeout.ms' ({linger_ms} + "
            f"{request_timeout_ms}), so a request can time out and be retried once")
    warn_ignored(options, modes)
    # Metadata and InitProducerId of a write retry within the write's own budget
    # (kafka.delivery.timeout.ms, and kafka.retries when set), like its Produce requests.
    client = ClientConfig(**fields_of(
        ClientConfig, values,
        retries=None if values["retries"] >= MAX_RETRIES else values["retries"],
        default_api_timeout_ms=values["delivery_timeout_ms"],
        security=parse_security(options)))
    return WriteOptions(
        bootstrap_servers=bootstrap, topic=topic, client=client,
        producer=ProducerConfig(**fields_of(ProducerConfig, values)),
        checkpoint_location=options.get("checkpointlocation") or None,
        **fields_of(WriteOptions, values))


def _idempotence_conflicts(values: dict, acks_raw) -> list[tuple[str, str]]:
    """The settings that rule out the idempotent producer, as (setting, why) pairs; one
    list for both the idempotence rules and the exactly-once check."""
    found = []
    if values["acks"] != -1:
        found.append((f"'kafka.acks' is {acks_raw!r}", "idempotence needs 'all'"))
    if values["max_in_flight"] > 5:
        found.append((f"'kafka.max.in.flight.requests.per.connection' is "
                      f"{values['max_in_flight']}", "idempotence allows at most 5"))
    if values["retries"] == 0:
        found.append(("'kafka.retries' is 0", "idempotence needs retries"))
    return found


def _check_exactly_once(values: dict, options: dict) -> None:
    """Exactly-once needs the idempotent producer: no quiet fallback as for idempotence."""
    prefix = values.get("transactional_id_prefix")
    if prefix is not None:
        values["transactional_id_prefix"] = prefix = prefix.strip()
        if not prefix:
            raise ConfigurationError(
                "Option 'transactionalIdPrefix' is empty: give a prefix unique to this writer, "
                "or leave the option out for the default")
    if not values["exactly_once"]:
        return
    conflicts = [setting for setting, _why in
                 _idempotence_conflicts(values, options.get("kafka.acks"))]
    if not values["idempotent"]:
        conflicts.append("'kafka.enable.idempotence' is 'false'")
    if conflicts:
        raise ConfigurationError(
            "Option 'deliveryGuarantee' is 'exactly-once', which needs the idempotent "
            "producer, but " + "; ".join(conflicts) + ". Remove those options (or use "
            "deliveryGuarantee 'at-least-once').")


def _resolve_idempotence(values: dict, *, explicit: bool, acks_raw) -> None:
    """Like the Java producer: idempotence is on unless asked otherwise, and quietly off
    when another setting it needs was changed -- but an explicit 'true' with such a
    setting is a contradiction the user must resolve."""
    conflicts = [f"{setting} ({why})"
                 for setting, why in _idempotence_conflicts(values, acks_raw)]
    if values["idempotent"] and conflicts:
        if explicit:
            raise ConfigurationError(
                "Option 'kafka.enable.idempotence' is 'true' but " + "; ".join(conflicts)
                + ". Change those options, or set 'kafka.enable.idempotence' to 'false'.")
        values["idempotent"] = False


def main(argv=None) -> int:
    """``python -m kafka_ds.options``: print the README's option tables;
    ``--write-readme [PATH]``: rewrite them in README.md (default: the repository's)."""
    import pathlib
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--write-readme":
        path = argv[1] if len(argv) > 1 else pathlib.Path(__file__).parents[1] / "README.md"
        print(f"{path}: {'updated' if _update_readme(path) else 'already up to date'}")
    else:
        print(readme_section())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
