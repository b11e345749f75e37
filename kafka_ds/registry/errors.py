"""Errors from a Confluent-compatible Schema Registry.

Each carries the HTTP status, the registry's ``error_code`` (40401 subject not found, 40402
version not found, 40403 schema not found, 409 incompatible, 42201 invalid schema, ...) and
the URL asked, never with credentials. :func:`error_for_response` picks the class.
"""

from __future__ import annotations

from ..errors import AuthenticationError, KafkaError, RetriableError

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
INCOMPATIBLE = 409
INVALID_SCHEMA = 42201


class SchemaRegistryError(KafkaError):
    """The registry refused a request or could not be reached.

    ``http_status`` and ``error_code`` are None when no answer came (connection failures);
    ``url`` is the request's URL (credentials are never part of it).
    """

    def __init__(
        self,
        message: str,
        *,
        http_status: int | None = None,
        error_code: int | None = None,
        url: str | None = None,
    ):
        super().__init__(message)
        self.http_status = http_status
        self.error_code = error_code
        self.url = url


class SubjectNotFoundError(SchemaRegistryError):
    """40401: no subject of that name (or all its versions are deleted)."""


class VersionNotFoundError(SchemaRegistryError):
    """40402: the subject has no such version."""


class SchemaNotFoundError(SchemaRegistryError):
    """40403: no schema with that id, or the schema is not registered under the subject."""


class IncompatibleSchemaError(SchemaRegistryError):
    """409: the schema breaks the subject's compatibility level."""


class InvalidSchemaError(SchemaRegistryError):
    """42201: the registry could not parse the schema (or its references)."""


class RegistryAuthenticationError(SchemaRegistryError, AuthenticationError):
    """401/403: the credentials (basic auth user info, bearer token, client certificate)
    were refused. Not retriable."""


class RegistryUnavailableError(SchemaRegistryError, RetriableError):
    """No registry URL answered within the retry budget (connection errors, 5xx, 429);
    the message names every URL tried and the last cause. An HTTP 500 with the registry's
    own JSON error is not an outage: after three such answers it is a
    SchemaRegistryError with the registry's message."""


_BY_ERROR_CODE = {
    SUBJECT_NOT_FOUND: SubjectNotFoundError,
    VERSION_NOT_FOUND: VersionNotFoundError,
    SCHEMA_NOT_FOUND: SchemaNotFoundError,
    INCOMPATIBLE: IncompatibleSchemaError,
    INVALID_SCHEMA: InvalidSchemaError,
}


def error_class(http_status: int, error_code: int | None) -> type[SchemaRegistryError]:
    """The class for an error answer: by registry code first, then by HTTP status."""
    if error_code in _BY_ERROR_CODE:
        return _BY_ERROR_CODE[error_code]
    if http_status in (401, 403):
        return RegistryAuthenticationError
    if http_status == 409:
        return IncompatibleSchemaError
    return SchemaRegistryError
