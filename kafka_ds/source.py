"""The Spark DataSource ``pykafka``: thin glue over options, planning and reading."""

from __future__ import annotations

import time
from dataclasses import replace

from pyspark.sql.datasource import DataSource, DataSourceReader

from .columns import simple_string, spark_ddl
from .errors import ConfigurationError
from .options import check_option_names, parse_read_options
from .options.core import lower_keys, parse_bool
from .worker_process import spark_entry_point


def _check_schema(schema, include_headers: bool, typed=None) -> None:
    expected = typed.simple_string(include_headers) if typed else simple_string(include_headers)
    if schema is not None and schema.simpleString() != expected:
        raise ConfigurationError(
            "The pykafka source has a fixed schema and cannot be set with a custom one: "
            f"got {schema.simpleString()}, the source produces {expected}. Remove .schema(...) "
            "and cast the key/value columns after loading."
        )


# Spark makes the stream writer anew for every micro-batch, twice (to plan the batch, and
# in the Python worker that commits it; both workers are reused across batches): the
# topic check, a connection and a Metadata request, is done once per process within
# kafka.metadata.max.age.ms. A topic deleted meanwhile fails the batch's write tasks with
# the same error.
_topics_found: dict = {}  # (bootstrap, topic, auto-create, client settings) -> monotonic


def _check_stream_topic(opts, check) -> None:
    """``check(opts)`` unless it passed in this process within kafka.metadata.max.age.ms."""
    key = (opts.bootstrap_servers, opts.topic, opts.allow_auto_create_topics, opts.client)
    try:
        found = _topics_found.get(key)
    except TypeError:  # unhashable client settings: no cache
        check(opts)
        return
    now = time.monotonic()
    if found is not None and (now - found) * 1000 < opts.client.metadata_max_age_ms:
        return
    check(opts)
    _topics_found[key] = now


class KafkaDataSource(DataSource):
    """``spark.read.format("pykafka")``: Apache Kafka, spoken in Python."""

    @classmethod
    def name(cls) -> str:
        return "pykafka"

    def _include_headers(self) -> bool:
        return parse_bool(lower_keys(self.options), "includeHeaders", False)

    def _names_reported(self) -> bool:
        # Set by schema() at load(): Spark pickles this instance after schema() and plans
        # the query with it, so the warning about unknown names is given once per read.
        return getattr(self, "_unknown_names_reported", False)

    def _typed_columns(self, opts):
        """The typed key/value columns (valueFormat, keyFormat) with their reader schemas,
        looked up once: by schema() at load(), whose result Spark pickles with this
        instance, so the tasks decode with the schema the DataFrame was given (a streaming
        query: the one of its start)."""
        if opts.typed_spec is None:
            return None
        if getattr(self, "_typed", None) is None:
            from .read.typed_columns import resolve_for_read

            def newest(column):  # debezium-json: the type of records carrying their schema
                from .read.newest import newest_record

                return newest_record(opts, column)

            self._typed = resolve_for_read(opts.typed_spec, opts.subscribed_topics(), newest)
        return self._typed

    @spark_entry_point
    def schema(self):
        # A read fails at load() already for options that are wrong in every mode; the
        # batch- or stream-specific checks follow in reader()/streamReader().
        keys = lower_keys(self.options)
        check_option_names(keys)
        self._unknown_names_reported = True
        if any(k in keys for k in ("subscribe", "subscribepattern", "assign")):
            opts = parse_read_options(self.options, streaming=None, report_unknown=False)
            typed = self._typed_columns(opts)
            if typed is not None:
                return typed.spark_ddl(opts.include_headers)
        return spark_ddl(self._include_headers())

    def _with_typed(self, opts):
        typed = self._typed_columns(opts)
        return opts if typed is None else replace(opts, typed=typed)

    @spark_entry_point
    def streamReader(self, schema):
        from .stream import InvalidOptionsStreamReader, KafkaStreamReader

        try:
            opts = self._with_typed(
                parse_read_options(
                    self.options, streaming=True, report_unknown=not self._names_reported()
                )
            )
            _check_schema(schema, opts.include_headers, opts.typed)
        except ConfigurationError as exc:
            # Raised from here, PySpark's runner would hide it behind an UnboundLocalError
            # (see InvalidOptionsStreamReader); raised from the reader's first call, the
            # message reaches the user as the query's error.
            return InvalidOptionsStreamReader(exc)
        return KafkaStreamReader(opts, self.options)

    @spark_entry_point
    def reader(self, schema) -> DataSourceReader:
        opts = self._with_typed(
            parse_read_options(
                self.options, streaming=False, report_unknown=not self._names_reported()
            )
        )
        _check_schema(schema, opts.include_headers, opts.typed)
        from .reader import batch_reader

        return batch_reader(opts)

    # --- writing (writer.py) ---

    def _write_plan(self, schema, streaming: bool = False):
        """Options and columns checked on the driver, before any task runs."""
        from .options import parse_write_options
        from .write.plan import plan_columns
        from .write.topics import check_topic_exists

        opts = parse_write_options(self.options)
        plan = plan_columns(schema, opts, streaming=streaming)
        if streaming and opts.topic is not None:
            _check_stream_topic(opts, check_topic_exists)
        else:
            check_topic_exists(opts)
        return opts, plan

    @spark_entry_point
    def writer(self, schema, overwrite: bool):
        from .writer import KafkaDataSourceWriter

        if overwrite:
            # Spark sends overwrite=True for mode("overwrite"); a plain .save() (mode
            # "errorifexists") is refused by Spark itself, asking for Append or Overwrite.
            raise ConfigurationError(
                "Save mode Overwrite is not supported by the pykafka sink: a Kafka topic cannot "
                "be truncated, records are only ever appended. Use "
                'df.write.format("pykafka").mode("append").save().'
            )
        return KafkaDataSourceWriter(*self._write_plan(schema))

    @spark_entry_point
    def streamWriter(self, schema, overwrite: bool):
        # Like Spark's Kafka sink, any output mode writes the rows Spark hands over
        # (complete mode: the whole result table again each trigger); a topic is
        # never truncated.
        from .compat import DataSourceStreamArrowWriter, require
        from .writer import KafkaStreamWriter

        require(
            DataSourceStreamArrowWriter is not None,
            "The pykafka streaming sink (DataSourceStreamArrowWriter)",
            "4.1",
        )
        return KafkaStreamWriter(*self._write_plan(schema, streaming=True))


def register(spark) -> None:
    """Register the ``pykafka`` format explicitly (not needed after pip install)."""
    spark.dataSource.register(KafkaDataSource)
