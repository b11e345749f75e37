"""Declarations of the read options, batch and streaming: what to read (subscription and
offsets, parsed by :mod:`.subscription` and :mod:`.offset_spec`), how to split it into
Spark partitions, how executors fetch, and the streaming triggers and consumer group.
"""

from __future__ import annotations

from .core import (
    BATCH,
    READ,
    STREAM,
    Option,
    boolean,
    choice,
    duration_ms,
    integer,
    text,
)

READ_OPTIONS: tuple[Option, ...] = (
    Option(
        "subscribe",
        READ,
        "Comma-separated topic list. Exactly one of `subscribe`, `subscribePattern`, `assign`.",
    ),
    Option(
        "subscribePattern",
        READ,
        "Java regex; every topic whose whole name matches is read (re-evaluated every "
        "trigger when streaming).",
    ),
    Option(
        "assign", READ, 'JSON of the partitions to read, e.g. `{"topicA":[0,1],"topicB":[2,4]}`.'
    ),
    Option(
        "startingOffsets",
        READ,
        "`earliest`, `latest` (streaming only), `group` (streaming, from the consumer "
        'group\'s committed offsets) or JSON `{"topicA":{"0":23,"1":-2},"topicB":"earliest"}` '
        '(-2 earliest, -1 latest; a topic-level "earliest"/"latest" covers all its '
        "partitions, also those of a topic `subscribePattern` matches later).",
        shown_default="batch: `earliest`, streaming: `latest`",
    ),
    Option(
        "startingOffsetsFallback",
        frozenset({STREAM}),
        "With `startingOffsets=group`: where partitions without a committed offset start "
        "(`earliest` or `latest`).",
        choice({"earliest": "earliest", "latest": "latest"}),
        "earliest",
        field="group_fallback",
    ),
    Option(
        "endingOffsets",
        frozenset({BATCH}),
        '`latest` or JSON `{"topicA":{"0":50,"1":-1},"topicB":"latest"}` (-1 latest). '
        "Resolved when the scan runs, so every action on the DataFrame reads up to the "
        "offsets of its time.",
        default="latest",
    ),
    Option(
        "startingOffsetsByTimestamp",
        READ,
        'JSON `{"topicA":{"0":1700000000000}}`: start of each partition at the first offset '
        "whose timestamp is at or after the given epoch milliseconds.",
    ),
    Option(
        "startingTimestamp",
        READ,
        "Epoch milliseconds applied to every partition; wins over the other starting options.",
    ),
    Option(
        "endingOffsetsByTimestamp",
        frozenset({BATCH}),
        "Like `startingOffsetsByTimestamp`, for the end.",
    ),
    Option("endingTimestamp", frozenset({BATCH}), "Like `startingTimestamp`, for the end."),
    Option(
        "startingOffsetsByTimestampStrategy",
        READ,
        "`error` fails when no offset matches a timestamp; `latest` uses the latest offset "
        "instead.",
        choice({"error": "error", "latest": "latest"}),
        "error",
        field="timestamp_strategy",
    ),
    Option(
        "latestOffsetsVia",
        READ,
        "How `latest` (and `earliest`) offsets are looked up: `auto` (ListOffsets, as "
        "Spark does, checked against one small Fetch per broker: the larger of it and the "
        "high watermark for `latest`, the smaller of it and the log start offset for "
        "`earliest`: on Apache Kafka both agree; on a Kafka-compatible broker whose "
        "ListOffsets answers are off, the demo's Tansu among them, the read still gets every "
        "record), `listOffsets` (ListOffsets only, one request fewer, as Spark) or `fetch` "
        "(same as `auto`).",
        choice({"auto": True, "listOffsets": False, "fetch": True}),
        "auto",
        field="latest_via_fetch",
    ),
    Option(
        "timestampOffsetsVia",
        READ,
        "How the timestamp options (`startingTimestamp`, `startingOffsetsByTimestamp`, "
        "`endingTimestamp`, `endingOffsetsByTimestamp`) find offsets: `auto` (ListOffsets "
        "by timestamp, as Spark does, its answer checked with at most three small Fetches; "
        "when the check fails, e.g. on brokers that do not index timestamps, a binary "
        "search over record batches: O(log n) small Fetches per partition), `listOffsets` "
        "(trust the broker) or `fetch` (the search only).",
        choice({"auto": "auto", "listOffsets": "listOffsets", "fetch": "fetch"}),
        "auto",
        field="timestamp_offsets_via",
    ),
    Option(
        "pushFilters",
        frozenset({BATCH}),
        "Narrow a batch read by the query's filters on `topic`, `partition`, `offset` and "
        "`timestamp` ([Reading less](reading-less.md)). Needs Spark's conf "
        "`spark.sql.python.filterPushdown.enabled=true` too (pyspark >= 4.1); with the conf "
        "off the read fails naming both. Left out (or `false`), the read works whatever the "
        "conf says, without pushdown.",
        boolean,
        False,
        field="push_filters",
    ),
    Option(
        "failOnDataLoss",
        READ,
        "Fail when requested offsets are gone (aged out, topic deleted); `false` logs and "
        "reads what is left.",
        boolean,
        True,
        field="fail_on_data_loss",
    ),
    Option(
        "minPartitions",
        READ,
        "Minimum number of Spark partitions; large offset ranges are split in proportion to size.",
        integer,
        field="min_partitions",
        minimum=1,
        example="8",
    ),
    Option(
        "maxRecordsPerPartition",
        READ,
        "Split offset ranges so no Spark partition reads more records than this.",
        integer,
        field="max_records_per_partition",
        minimum=1,
        example="100000",
    ),
    Option(
        "includeHeaders", READ, "Add the `headers` column.", boolean, False, field="include_headers"
    ),
    Option(
        "fetchOffset.numRetries",
        READ,
        "Accepted for compatibility with Spark's source; driver-side offset look-ups retry "
        "within `kafka.default.api.timeout.ms` ([Reliability](reliability.md)).",
        integer,
        3,
        field="fetch_offset_retries",
        minimum=0,
    ),
    Option(
        "fetchOffset.retryIntervalMs",
        READ,
        "Accepted for compatibility (see above).",
        integer,
        1000,
        field="fetch_offset_retry_interval_ms",
        minimum=0,
    ),
    Option(
        "kafkaConsumer.pollTimeoutMs",
        READ,
        "Time budget of one Fetch on an executor, retries of retriable errors, connection "
        "failures and leader changes included.",
        integer,
        120000,
        field="poll_timeout_ms",
        minimum=0,
        shown_default="`120000` (`spark.network.timeout`'s default)",
    ),
    Option(
        "maxOffsetsPerTrigger",
        frozenset({STREAM}),
        "Upper bound of records per micro-batch, split over partitions in proportion to backlog.",
        integer,
        field="max_offsets_per_trigger",
        minimum=1,
        example="100000",
    ),
    Option(
        "minOffsetsPerTrigger",
        frozenset({STREAM}),
        "Wait for at least this many new records before a micro-batch (see `maxTriggerDelay`).",
        integer,
        field="min_offsets_per_trigger",
        minimum=1,
        example="1000",
    ),
    Option(
        "maxTriggerDelay",
        frozenset({STREAM}),
        "Longest wait for `minOffsetsPerTrigger` before a batch runs anyway.",
        duration_ms,
        "15m",
        field="max_trigger_delay_ms",
    ),
    Option(
        "idlePollIntervalMs",
        frozenset({STREAM}),
        "When a trigger found no new records, ask the brokers again after this long at the "
        "earliest (Spark asks every ~10 ms when idle; `100` cuts an idle query's requests "
        "~10x). `0` asks every time, as Spark's source does: with a pause, "
        "`processAllAvailable()` may return before records written in the last pause are "
        "read.",
        integer,
        0,
        field="idle_poll_interval_ms",
        minimum=0,
    ),
    Option(
        "smallBatchRecords",
        frozenset({STREAM}),
        "A micro-batch of at most this many records (offsets) is read by one Spark task, "
        "its partitions one after the other, instead of one task per partition: each task "
        "costs Spark a Python worker round trip (two with a Python sink such as pykafka) "
        "and tasks beyond the cores wait for a second wave, so small batches finish sooner "
        "(benchmarks/results.md: Streaming latency). `0`: one task per partition, as "
        "Spark's source; also so with `minPartitions` or `maxRecordsPerPartition`.",
        integer,
        10000,
        field="small_batch_records",
        minimum=0,
    ),
    Option(
        "groupIdPrefix",
        frozenset({STREAM}),
        "Set explicitly (and no `kafka.group.id`): the query commits its progress to a "
        "generated group `<prefix>-<uuid>`, new for every run. Unset, nothing is committed.",
        text,
        "spark-kafka-source",
        field="group_id_prefix",
    ),
    Option(
        "kafka.group.id",
        frozenset({STREAM}),
        "Consumer group the query commits its progress to: the end offsets of every "
        "finished micro-batch ([Streaming](streaming.md)); also the group "
        "`startingOffsets=group` starts from.",
        text,
        field="group_id",
    ),
    Option(
        "kafka.isolation.level",
        READ,
        "`read_committed` skips aborted transactions and reads up to the last stable offset.",
        choice({"read_uncommitted": False, "read_committed": True}),
        "read_uncommitted",
        field="read_committed",
    ),
    Option(
        "kafka.max.partition.fetch.bytes",
        READ,
        "Bytes asked per partition per Fetch; bounds executor memory. A record batch "
        "larger than this (or than `kafka.fetch.max.bytes`) is still read, alone, as the "
        "Java consumer does since KIP-74 ([Reliability](reliability.md#edges-of-size)).",
        integer,
        8 << 20,
        field="max_partition_fetch_bytes",
        minimum=1024,
    ),
    Option(
        "kafka.fetch.max.bytes",
        READ,
        "Bytes of one Fetch answer. A task fetches one partition at a time, so its Fetch "
        "asks for the smaller of this and `kafka.max.partition.fetch.bytes`.",
        integer,
        50 << 20,
        field="fetch_max_bytes",
        minimum=1024,
    ),
    Option(
        "kafka.fetch.max.wait.ms",
        READ,
        "Longest time the broker may hold a Fetch.",
        integer,
        500,
        field="fetch_max_wait_ms",
        minimum=0,
    ),
)
