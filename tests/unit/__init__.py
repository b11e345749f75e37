"""Unit tests: kafka_ds's parts in this process, with no broker, server or Spark session."""
