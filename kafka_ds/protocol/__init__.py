"""Pure Kafka protocol encode/decode: no I/O lives in this package."""
from .errors import KafkaError, KafkaProtocolError  # noqa: F401
