"""Pure Kafka protocol encode/decode: no I/O lives in this package."""
