"""kafka_ds: an Apache Kafka connector for Apache Spark, in Python.

``spark.read.format("pykafka")`` / ``readStream`` / ``df.write.format("pykafka")``.
Heavy imports (pyspark, pyarrow) happen only where they are needed.
"""

from typing import TYPE_CHECKING

from .errors import (  # noqa: F401  (the public exceptions; see kafka_ds.errors)
    AuthenticationError,
    BrokerError,
    ConfigurationError,
    CorruptRecordError,
    DataLossError,
    KafkaError,
    KafkaProtocolError,
    ProduceError,
    RetriableError,
    SecurityProtocolMismatchError,
    TlsError,
)

__version__ = "0.1.0"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: "SparkSession") -> None:
    """Register the ``pykafka`` format with ``spark`` (auto-registered after pip install)."""
    from .source import register as _register

    _register(spark)
