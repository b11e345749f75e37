"""Client layer: every socket kafka_ds opens is opened here."""
from .cluster import (  # noqa: F401
    EARLIEST, LATEST, READ_COMMITTED, READ_UNCOMMITTED, ClientConfig, KafkaClient,
    PartitionInfo, TopicInfo, make_client,
)
from .connection import BrokerConnection, parse_bootstrap  # noqa: F401
from .config import DEFAULT_CLIENT_CONFIG  # noqa: F401
