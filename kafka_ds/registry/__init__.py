"""Confluent-compatible Schema Registry: a small REST client (``client.py``)."""
