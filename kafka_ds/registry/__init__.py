"""Confluent-compatible Schema Registry: what it stores (``schema.py``), how to reach it
(``settings.py``), a small REST client (``client.py``) and its errors (``errors.py``).
Standard library only, so the driver may import it at planning time."""
from .client import SchemaRegistry, registry_for  # noqa: F401
from .errors import (  # noqa: F401
    IncompatibleSchemaError,
    InvalidSchemaError,
    RegistryAuthenticationError,
    RegistryUnavailableError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectNotFoundError,
    VersionNotFoundError,
)
from .schema import RegisteredSchema, SchemaLookup, SchemaReference  # noqa: F401
from .settings import RegistrySettings  # noqa: F401
