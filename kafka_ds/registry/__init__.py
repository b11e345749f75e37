"""Confluent-compatible Schema Registry: what it stores (``schema.py``), how to reach it
(``settings.py``), a small REST client (``client.py``) and its errors (``errors.py``).
Standard library only, so the driver may import it at planning time."""
