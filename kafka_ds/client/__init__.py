"""Client layer: every socket kafka_ds opens is opened here. ``cluster.KafkaClient`` is the
client (metadata, leader routing, retries); ``connection`` one broker connection;
``reads``, ``producer``, ``transactions``, ``coordinators``, ``admin`` the requests by
concern; ``security`` TLS and SASL."""

from .cluster import KafkaClient, make_client
from .reads import EARLIEST, LATEST

__all__ = ["EARLIEST", "LATEST", "KafkaClient", "make_client"]
