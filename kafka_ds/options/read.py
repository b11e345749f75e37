"""The whole read configuration: every read option parsed, checked against the others and
gathered into one frozen :class:`ReadOptions`, built on the driver.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ..client.config import DEFAULT_CLIENT_CONFIG as CLIENT
from ..client.config import ClientConfig
from ..errors import ConfigurationError
from .client_declarations import check_bootstrap, parse_security
from .core import BATCH, READ, STREAM, fields_of, lower_keys
from .formats import TypedColumnsSpec, parse_typed_columns
from .offset_spec import OffsetSpec, check_offset_consistency, parse_offset_spec
from .registry import (
    check_kafka_settings,
    check_option_names,
    declared_values,
    default_of,
    warn_ignored,
)
from .subscription import Subscription, parse_subscription

log = logging.getLogger(__package__)  # the package's logger (see .registry)


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
    fetch_max_bytes: int = default_of("kafka.fetch.max.bytes")
    fetch_max_wait_ms: int = default_of("kafka.fetch.max.wait.ms")
    poll_timeout_ms: int = default_of("kafkaConsumer.pollTimeoutMs")  # budget of one Fetch
    latest_via_fetch: bool = default_of("latestOffsetsVia")
    timestamp_offsets_via: str = default_of("timestampOffsetsVia")
    push_filters: bool = default_of("pushFilters")
    client: ClientConfig = CLIENT  # built on the driver; executors use it as is
    # streaming
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = default_of("maxTriggerDelay")
    group_id: str | None = None
    group_id_prefix: str = default_of("groupIdPrefix")
    idle_poll_interval_ms: int = default_of("idlePollIntervalMs")
    small_batch_records: int = default_of("smallBatchRecords")
    group_fallback: str = default_of("startingOffsetsFallback")
    # typed key/value (valueFormat, keyFormat): the options, and on the driver the resolved
    # schemas and codecs (kafka_ds.read.typed_columns.TypedColumns) that the tasks decode with
    typed_spec: TypedColumnsSpec | None = None
    typed: Any = None  # Any: options/ cannot import read/ (it sits below it)

    def subscribed_topics(self) -> list | None:
        """The topics a read names explicitly (None for a pattern)."""
        if self.subscription.kind == "subscribe":
            return list(self.subscription.topics)
        if self.subscription.kind == "assign":
            return sorted({topic for topic, _ in self.subscription.assignment})
        return None


def parse_read_options(
    raw_options, *, streaming: bool | None, report_unknown: bool = True
) -> ReadOptions:
    """Validate every read option. ``streaming=None``: the checks common to both modes.
    ``report_unknown=False``: unknown option names were warned about already."""
    options = lower_keys(raw_options)
    check_option_names(options, report=report_unknown)
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
            "exceed 'maxOffsetsPerTrigger'"
        )
    if streaming is False:
        check_offset_consistency(starting, ending)
    if subscription.kind == "assign" and starting.kind == "specific":
        missing = set(subscription.assignment) - set(
            starting.for_partitions(subscription.assignment)
        )
        if missing:
            raise ConfigurationError(
                f"Option 'startingOffsets' must give an offset for every assigned partition; "
                f"missing {sorted(missing)} (use -2 for earliest, -1 for latest)"
            )
    if starting.kind == "group" and not values["group_id"]:
        raise ConfigurationError(
            "Option 'startingOffsets'='group' needs option 'kafka.group.id': the group whose "
            "committed offsets the query starts from"
        )
    if streaming is not None:
        warn_ignored(options, modes)
    if streaming and values["group_id"] and "groupidprefix" in options:
        log.warning("Option groupIdPrefix will be ignored as option kafka.group.id has been set.")
    return ReadOptions(
        bootstrap_servers=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        typed_spec=parse_typed_columns(options, modes),
        client=ClientConfig(**fields_of(ClientConfig, values, security=parse_security(options))),
        **fields_of(ReadOptions, values),
    )
