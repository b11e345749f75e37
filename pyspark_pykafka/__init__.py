"""Lets Spark find the ``pykafka`` format with no register call: Spark imports every
top-level ``pyspark_*`` module on its path and registers its ``DefaultSource``."""

from kafka_ds.source import KafkaDataSource as DefaultSource  # noqa: F401
