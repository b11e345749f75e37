"""Declarations of the write options: the target topic, the producer's batching, acks,
compression and idempotence, and exactly-once delivery through Kafka transactions
(:mod:`.write` checks how they combine).
"""

from __future__ import annotations

from ..client.config import DEFAULT_PRODUCER_CONFIG as PRODUCER
from .core import WRITE, Option, boolean, choice, integer, text

WRITE_OPTIONS: tuple[Option, ...] = (
    Option(
        "topic",
        frozenset({WRITE}),
        "Topic for every row; overrides the `topic` column. Required if there is no topic column.",
    ),
    Option(
        "kafka.acks",
        frozenset({WRITE}),
        "`0`, `1` or `all` (`-1`).",
        choice({"0": 0, "1": 1, "all": -1, "-1": -1}, hidden=("-1",)),
        "all",
        field="acks",
    ),
    Option(
        "kafka.compression.type",
        frozenset({WRITE}),
        "`none`, `gzip`, `snappy`, `lz4` or `zstd`.",
        choice(
            {c: c for c in ("none", "gzip", "snappy", "lz4", "zstd")},
            "one of none, gzip, snappy, lz4, zstd",
        ),
        "none",
        field="compression",
    ),
    Option(
        "kafka.enable.idempotence",
        frozenset({WRITE}),
        "Producer id, epoch and sequence numbers so retried requests never duplicate records.",
        boolean,
        PRODUCER.idempotent,
        field="idempotent",
    ),
    Option(
        "kafka.batch.size",
        frozenset({WRITE}),
        "Largest record batch per partition (bytes, before compression, header included); "
        "a single larger record gets a batch of its own. Also the size of a sticky run of "
        "null-key records in one partition.",
        integer,
        1 << 20,
        field="batch_size",
        minimum=1,
    ),
    Option(
        "kafka.max.request.size",
        frozenset({WRITE}),
        "Largest Produce request (bytes; one batch per partition per request, at least one "
        "batch). A record larger than this fails the write, naming topic, partition and row.",
        integer,
        PRODUCER.max_request_size,
        field="max_request_size",
        minimum=1,
    ),
    Option(
        "kafka.linger.ms",
        frozenset({WRITE}),
        "How long rows may wait in a partition's buffer for rows of the following Arrow "
        "batches to fill a `kafka.batch.size` batch; `0` sends the rows of each Arrow batch "
        "at once. Longer than the Java producer's default: a task's rows are complete only "
        "when the task ends, and full batches cost the task and the broker less per row "
        "(benchmarks/results.md, #22).",
        integer,
        200,
        field="linger_ms",
        minimum=0,
    ),
    Option(
        "kafka.buffer.memory",
        frozenset({WRITE}),
        "Most bytes of rows a write task keeps in its partition buffers while they wait "
        "(`kafka.linger.ms`) to fill `kafka.batch.size`; above it the fullest buffers "
        "are sent at once, so many partitions do not multiply the task's memory.",
        integer,
        32 << 20,
        field="buffer_memory",
        minimum=1,
    ),
    Option(
        "kafka.delivery.timeout.ms",
        frozenset({WRITE}),
        "Longest time a record may take from the write to its acknowledgement, retries "
        "included (at least `kafka.linger.ms` + `kafka.request.timeout.ms`).",
        integer,
        field="delivery_timeout_ms",
        minimum=1,
        example=str(PRODUCER.delivery_timeout_ms),
        shown_default=f"`{PRODUCER.delivery_timeout_ms}`",
    ),
    Option(
        "kafka.max.in.flight.requests.per.connection",
        frozenset({WRITE}),
        "Produce requests pipelined to one broker (at most 5 with idempotence).",
        integer,
        PRODUCER.max_in_flight,
        field="max_in_flight",
        minimum=1,
    ),
    Option(
        "deliveryGuarantee",
        frozenset({WRITE}),
        "`exactly-once`: every task writes in a Kafka transaction that the driver commits "
        "when Spark commits the write ([Exactly-once](exactly_once.md)); `at-least-once`: "
        "plain idempotent writes, a retried task or a replayed micro-batch writes its rows "
        "again.",
        choice({"at-least-once": False, "exactly-once": True}),
        "at-least-once",
        field="exactly_once",
    ),
    Option(
        "transactionalIdPrefix",
        frozenset({WRITE}),
        "Exactly-once: task p of a write uses the transactional id `<prefix>-p`. Must be "
        "unique among concurrent writers; keep it when restarting a streaming query.",
        text,
        field="transactional_id_prefix",
        example="orders-writer",
        shown_default="batch: `pykafka-<topic>-<random>`, streaming: "
        "`pykafka-<hash of checkpointLocation>`",
    ),
    Option(
        "kafka.transaction.timeout.ms",
        frozenset({WRITE}),
        "Exactly-once: the broker aborts a transaction left open this long (a task's write "
        "plus the wait until the driver commits must fit; capped by the broker's "
        "transaction.max.timeout.ms).",
        integer,
        60000,
        field="transaction_timeout_ms",
        minimum=1,
    ),
    Option(
        "kafka.allow.auto.create.topics",
        frozenset({WRITE}),
        "Ask for metadata with auto-creation allowed, as the Java producer does: brokers "
        "with `auto.create.topics.enable=true` create a missing topic (with their default "
        "partition count); `false` fails the write on a missing topic.",
        boolean,
        "true",
        field="allow_auto_create_topics",
    ),
)
