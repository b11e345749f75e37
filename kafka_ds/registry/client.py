"""A Confluent-compatible Schema Registry REST client, standard library only.

:class:`SchemaRegistry` implements :class:`~kafka_ds.registry.schema.SchemaLookup`. What
cannot change once registered is cached for the life of the process: a schema by id, a
subject's numbered version. ``registry_for(settings)`` gives one client per settings per
process, and a pickled client unpickles to that one, so a codec shipped to the executors
fetches each writer schema once per executor process.

Every call retries with back-off on connection errors, 5xx and 429 (trying the URLs in
turn) until ``retry_budget_ms`` is spent, then raises one
:class:`~kafka_ds.registry.errors.RegistryUnavailableError` naming every URL tried and the
last cause. An HTTP 500 that carries the registry's own JSON error is the registry failing
at the request, not an outage: it is asked again only ``_DEFINITE_ERROR_ATTEMPTS`` times in
all (as confluent-kafka's client retries), then raised with the registry's message. Other
error answers raise at once (see :mod:`kafka_ds.registry.errors`).

Protobuf schemas are wanted as base64 of a serialized FileDescriptorProto (``fmt=
"serialized"``); see :func:`_serialized` for how they are asked.
"""

from __future__ import annotations

import base64
import http.client
import json
import random
import ssl
import threading
import time
from urllib.parse import quote, urlencode, urlsplit

from ..errors import ConfigurationError
from .errors import (
    SCHEMA_NOT_FOUND,
    SUBJECT_NOT_FOUND,
    RegistryUnavailableError,
    SchemaRegistryError,
    error_class,
)
from .schema import RegisteredSchema, SchemaLookup, SchemaReference
from .settings import (
    SSL_CA_LOCATION,
    SSL_CERTIFICATE_LOCATION,
    SSL_KEY_LOCATION,
    RegistrySettings,
)

_ACCEPT = (
    "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"
)
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_FIRST_BACKOFF_S = 0.1
_MAX_BACKOFF_S = 2.0
# answers worth asking again (elsewhere or later): the registry is busy, restarting or
# behind a proxy that lost it
_RETRIABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# A 500 with the registry's JSON error body: it answered, and failed at the request itself
# (Apicurio 3.3 answering a Protobuf look-up it cannot render, a backend error). A few answers
# ride out a one-off; the whole budget (60 s by default) would only hide the message.
_DEFINITE_ERROR_STATUS = 500
_DEFINITE_ERROR_ATTEMPTS = 3
SERIALIZED = "serialized"


def _quote(subject: str) -> str:
    return quote(subject, safe="")


def _schema_body(schema: RegisteredSchema) -> dict:
    body: dict[str, object] = {"schema": schema.schema_str}
    if schema.schema_type and schema.schema_type.upper() != "AVRO":
        body["schemaType"] = schema.schema_type.upper()
    if schema.references:
        body["references"] = [
            {"name": ref.name, "subject": ref.subject, "version": ref.version}
            for ref in schema.references
        ]
    return body


def _registered(answer: dict, *, schema_id=None, subject=None, version=None) -> RegisteredSchema:
    if not isinstance(answer, dict) or not isinstance(answer.get("schema"), str):
        raise SchemaRegistryError(f"the registry's answer has no schema: {str(answer)[:200]}")
    references = tuple(
        SchemaReference(ref["name"], ref["subject"], int(ref["version"]))
        for ref in answer.get("references") or ()
    )
    return RegisteredSchema(
        schema_type=(answer.get("schemaType") or "AVRO").upper(),
        schema_str=answer["schema"],
        references=references,
        schema_id=answer.get("id", schema_id),
        subject=answer.get("subject", subject),
        version=answer.get("version", version),
    )


class SchemaRegistry(SchemaLookup):
    """One registry (a list of equivalent URLs). Thread-safe."""

    def __init__(self, settings: RegistrySettings, *, sleep=time.sleep, clock=time.monotonic):
        self.settings = settings
        self._sleep = sleep
        self._clock = clock
        self._ssl_context: ssl.SSLContext | None = None
        self._lock = threading.Lock()
        # key -> lock, so concurrent first look-ups of one id make one request
        self._key_locks: dict = {}
        self._by_id: dict = {}
        self._by_version: dict = {}
        self._registered_ids: dict = {}

    def __repr__(self):
        return f"SchemaRegistry({self.settings!r})"

    def __reduce__(self):
        # Unpickled on an executor: that process's one client for these settings (its cache).
        return registry_for, (self.settings,)

    # --- the REST calls ------------------------------------------------------------------

    def schema_by_id(self, schema_id: int, fmt: str | None = None) -> RegisteredSchema:
        """GET /schemas/ids/{id}: the schema a framed record names. Cached forever."""
        key = (int(schema_id), fmt)

        def fetch(ask_fmt: str | None, _version=None) -> RegisteredSchema:
            return _registered(
                self._request(
                    "GET",
                    f"/schemas/ids/{int(schema_id)}",
                    {"format": ask_fmt},
                    what=f"schema id {schema_id}",
                ),
                schema_id=int(schema_id),
            )

        if fmt == SERIALIZED:
            return self._cached(self._by_id, key, lambda: _serialized(fetch, self.settings.urls[0]))
        return self._cached(self._by_id, key, lambda: fetch(fmt))

    def schema_version(
        self, subject: str, version: int | str, fmt: str | None = None
    ) -> RegisteredSchema:
        """GET /subjects/{subject}/versions/{version}; numbered versions are cached forever,
        ``'latest'`` is asked every time."""
        version = "latest" if str(version).lower() in ("latest", "-1") else int(version)

        def fetch_as(ask_fmt: str | None, asked_version=None) -> RegisteredSchema:
            asked = version if asked_version is None else asked_version
            return _registered(
                self._request(
                    "GET",
                    f"/subjects/{_quote(subject)}/versions/{asked}",
                    {"format": ask_fmt},
                    what=f"subject '{subject}' version {asked}",
                ),
                subject=subject,
            )

        def fetch():
            return (
                _serialized(fetch_as, self.settings.urls[0]) if fmt == SERIALIZED else fetch_as(fmt)
            )

        if version == "latest":
            found = fetch()
            if found.version is not None:
                with self._lock:
                    self._by_version.setdefault((subject, found.version, fmt), found)
            return found
        return self._cached(self._by_version, (subject, version, fmt), fetch)

    def latest(self, subject: str, fmt: str | None = None) -> RegisteredSchema:
        return self.schema_version(subject, "latest", fmt)

    def versions(self, subject: str) -> list[int]:
        """GET /subjects/{subject}/versions."""
        return list(
            self._request(
                "GET", f"/subjects/{_quote(subject)}/versions", what=f"subject '{subject}'"
            )
        )

    def register(self, subject: str, schema: RegisteredSchema, normalize: bool = False) -> int:
        """POST /subjects/{subject}/versions: the schema's id (the same schema registered
        again keeps its id). Raises IncompatibleSchemaError (409), InvalidSchemaError (42201)."""
        key = (subject, schema.schema_type.upper(), schema.schema_str, schema.references, normalize)
        with self._lock:
            if key in self._registered_ids:
                return self._registered_ids[key]
        answer = self._request(
            "POST",
            f"/subjects/{_quote(subject)}/versions",
            {"normalize": "true" if normalize else None},
            body=_schema_body(schema),
            what=f"subject '{subject}'",
        )
        schema_id = int(answer["id"])
        with self._lock:
            self._registered_ids[key] = schema_id
        return schema_id

    def lookup(self, subject: str, schema: RegisteredSchema) -> RegisteredSchema | None:
        """POST /subjects/{subject}: the registered version of ``schema``, None when the
        subject or the schema under it is not registered."""
        try:
            answer = self._request(
                "POST",
                f"/subjects/{_quote(subject)}",
                body=_schema_body(schema),
                what=f"subject '{subject}'",
            )
        except SchemaRegistryError as exc:
            if exc.error_code in (SUBJECT_NOT_FOUND, SCHEMA_NOT_FOUND):
                return None
            raise
        return _registered(answer, subject=subject)

    def compatibility(
        self, subject: str, schema: RegisteredSchema, version: int | str = "latest"
    ) -> tuple[bool, list]:
        """POST /compatibility/subjects/{subject}/versions/{version}?verbose=true:
        whether ``schema`` may be registered, and the registry's reasons when not."""
        answer = self._request(
            "POST",
            f"/compatibility/subjects/{_quote(subject)}/versions/{version}",
            {"verbose": "true"},
            body=_schema_body(schema),
            what=f"subject '{subject}' version {version}",
        )
        return bool(answer.get("is_compatible")), list(answer.get("messages") or ())

    def subjects(self) -> list[str]:
        """GET /subjects."""
        return list(self._request("GET", "/subjects", what="the subject list"))

    # --- caching -------------------------------------------------------------------------

    def _cached(self, cache: dict, key, fetch):
        with self._lock:
            if key in cache:
                return cache[key]
            key_lock = self._key_locks.setdefault((id(cache), key), threading.Lock())
        with key_lock:
            with self._lock:
                if key in cache:
                    return cache[key]
            value = fetch()
            with self._lock:
                cache[key] = value
                self._key_locks.pop((id(cache), key), None)
            return value

    # --- HTTP ----------------------------------------------------------------------------

    def _request(self, method: str, path: str, query: dict | None = None, *, body=None, what: str):
        """One REST call with fail-over and retries under the budget; the decoded JSON."""
        query = {k: v for k, v in (query or {}).items() if v is not None}
        target = path + (f"?{urlencode(query)}" if query else "")
        payload = json.dumps(body).encode() if body is not None else None
        settings = self.settings
        deadline = self._clock() + settings.retry_budget_ms / 1000
        tried: list[str] = []
        last_cause = "no attempt"
        last_status = last_code = None
        definite_errors = 0
        backoff = _FIRST_BACKOFF_S
        while True:
            for base in settings.urls:
                url = base + target
                if url not in tried:
                    tried.append(url)
                timeout = max(
                    0.05, min(settings.request_timeout_ms / 1000, deadline - self._clock())
                )
                try:
                    status, data = self._send(base, method, target, payload, timeout)
                except ssl.SSLCertVerificationError as exc:
                    raise SchemaRegistryError(
                        f"schema registry {url}: the TLS certificate did not verify "
                        f"({exc.verify_message}); check '{SSL_CA_LOCATION}'",
                        url=url,
                    ) from None
                except ssl.SSLError as exc:
                    raise SchemaRegistryError(
                        f"schema registry {url}: the TLS handshake failed ({exc}); check the "
                        f"'schema.registry.ssl.*' options",
                        url=url,
                    ) from None
                except (OSError, http.client.HTTPException) as exc:
                    last_cause = f"{type(exc).__name__}: {exc}"
                    last_status = last_code = None
                    continue
                if 200 <= status < 300:
                    return _decode(data, url) if data else None
                error_code, message = _error_of(status, data)
                if status == _DEFINITE_ERROR_STATUS and _is_registry_error(data):
                    definite_errors += 1
                    if definite_errors >= _DEFINITE_ERROR_ATTEMPTS:
                        raise SchemaRegistryError(
                            f"schema registry {method} {url} for {what}: HTTP {status} "
                            f"error_code {error_code}: {message} (the registry's own error, "
                            f"{definite_errors} answers in a row: not asked again)",
                            http_status=status,
                            error_code=error_code,
                            url=url,
                        )
                if status in _RETRIABLE_STATUS:
                    last_cause = f"HTTP {status} error_code {error_code}: {message}"
                    last_status, last_code = status, error_code
                    continue
                raise error_class(status, error_code)(
                    f"schema registry {method} {url} for {what}: HTTP {status} error_code "
                    f"{error_code}: {message}",
                    http_status=status,
                    error_code=error_code,
                    url=url,
                )
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            self._sleep(min(remaining, backoff * random.uniform(0.5, 1.0)))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
        raise RegistryUnavailableError(
            f"schema registry unavailable for {what}: no answer within the retry budget of "
            f"{settings.retry_budget_ms} ms ('schema.registry.retry.budget.ms') from "
            f"{', '.join(tried)}; last cause: {last_cause}",
            http_status=last_status,
            error_code=last_code,
            url=tried[-1],
        )

    def _send(
        self, base: str, method: str, target: str, payload: bytes | None, timeout: float
    ) -> tuple[int, bytes]:
        parts = urlsplit(base)
        host = parts.hostname or ""  # settings.py refuses a URL without one
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                host, parts.port, timeout=timeout, context=self._tls_context()
            )
        else:
            connection = http.client.HTTPConnection(host, parts.port, timeout=timeout)
        headers = {"Accept": _ACCEPT, **self._auth_headers()}
        if payload is not None:
            headers["Content-Type"] = _CONTENT_TYPE
        try:
            connection.request(method, parts.path + target, body=payload, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def _auth_headers(self) -> dict:
        settings = self.settings
        if settings.basic_auth_user_info is not None:
            token = base64.b64encode(settings.basic_auth_user_info.encode()).decode("ascii")
            return {"Authorization": f"Basic {token}"}
        if settings.bearer_auth_token is not None:
            return {"Authorization": f"Bearer {settings.bearer_auth_token}"}
        return {}

    def _tls_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._ssl_context is None:
                self._ssl_context = _make_tls_context(self.settings)
            return self._ssl_context


def _make_tls_context(settings: RegistrySettings) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=settings.ssl_ca_location)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(
            f"'{SSL_CA_LOCATION}' = {settings.ssl_ca_location!r}: cannot "
            f"load CA certificates ({exc})"
        ) from None
    if settings.ssl_certificate_location:
        try:
            context.load_cert_chain(settings.ssl_certificate_location, settings.ssl_key_location)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"'{SSL_CERTIFICATE_LOCATION}' = {settings.ssl_certificate_location!r}, "
                f"'{SSL_KEY_LOCATION}' = {settings.ssl_key_location!r}: cannot load the client "
                f"certificate and key ({exc})"
            ) from None
    return context


def _decode(data: bytes, url: str):
    try:
        return json.loads(data)
    except ValueError:
        raise SchemaRegistryError(
            f"schema registry {url} answered with no JSON: {data[:200]!r}", url=url
        ) from None


def _serialized(fetch, registry_url: str) -> RegisteredSchema:
    """A schema with ``fmt="serialized"``: Protobuf as base64 of its FileDescriptorProto.

    Asked first as stored. A Protobuf schema registered in the serialized form (as
    confluent-kafka's ProtobufSerializer registers it) comes back as it is: Apicurio
    Registry 3.3 answers ``format=serialized`` for such a schema with HTTP 500 (it parses
    the base64 as ``.proto`` text). Only a schema stored as ``.proto`` text (which is
    never base64: it has spaces and ``;``) is asked again with ``format=serialized``, by
    the version or id just read, so a new ``latest`` cannot slip in between.
    ``fetch(fmt, version)`` makes one request to ``registry_url``."""
    stored = fetch(None)
    if stored.schema_type != "PROTOBUF" or _is_base64(stored.schema_str):
        return stored
    rendered = fetch(SERIALIZED, stored.version)
    if not _is_base64(rendered.schema_str):
        where = (
            f"subject '{stored.subject}' version {stored.version}"
            if stored.subject
            else f"schema id {stored.schema_id}"
        )
        raise SchemaRegistryError(
            f"schema registry {registry_url}: {where} is stored as .proto text, and "
            "its answer with format=serialized is not base64 of a FileDescriptorProto ("
            f"{rendered.schema_str[:60]!r}...; Apicurio Registry 3.3 sends the descriptor's "
            "bytes as text, which loses those above 0x7f). Register the schema as base64 of "
            "its FileDescriptorProto (as confluent-kafka's ProtobufSerializer does)"
        )
    return rendered


def _is_base64(text: str) -> bool:
    try:
        return bool(text) and bool(base64.b64decode(text, validate=True))
    except ValueError:  # binascii.Error
        return False


def _is_registry_error(data: bytes) -> bool:
    """The body is a registry's JSON error (``error_code``/``message``), not a proxy's page."""
    try:
        answer = json.loads(data)
    except ValueError:
        return False
    return isinstance(answer, dict) and "error_code" in answer and "message" in answer


def _error_of(status: int, data: bytes) -> tuple[int | None, str]:
    """The registry's ``error_code`` and message (a proxy's HTML page: its first bytes)."""
    try:
        answer = json.loads(data)
        if isinstance(answer, dict):
            return answer.get("error_code", status), str(answer.get("message", ""))
    except ValueError:
        pass
    return None, data[:200].decode("utf-8", "replace")


_REGISTRIES: dict = {}
_REGISTRIES_LOCK = threading.Lock()


def registry_for(settings: RegistrySettings | None) -> SchemaRegistry:
    """This process's one client for ``settings`` (so its caches are shared); ``None`` (no
    'schema.registry.url' given) is a ConfigurationError."""
    if settings is None:
        raise ConfigurationError("this needs a Schema Registry: set 'schema.registry.url'")
    with _REGISTRIES_LOCK:
        registry = _REGISTRIES.get(settings)
        if registry is None:
            registry = _REGISTRIES[settings] = SchemaRegistry(settings)
        return registry
