"""A small Confluent Schema Registry for the test suite (the real one runs on the JVM).

:class:`FakeSchemaRegistry` serves the REST subset that kafka_ds and confluent-kafka's
``SchemaRegistryClient`` with its Avro/Protobuf/JSON serializers use, over real sockets on
127.0.0.1 (an ephemeral port), optionally behind basic auth, a bearer token, TLS or mutual
TLS (certificates from ``trustme``):

* POST /subjects/{s}/versions (register: the same schema again keeps its version and id;
  ids are global, so one schema under two subjects has one id), POST /subjects/{s} (lookup)
* GET /schemas/ids/{id}[?format=serialized], /schemas/ids/{id}/versions, /ids/{id}/subjects
* GET /subjects, /subjects/{s}/versions, /subjects/{s}/versions/{v|latest|-1}
* DELETE /subjects/{s}[?permanent=true], /subjects/{s}/versions/{v}[?permanent=true]
* GET/PUT /config, GET/PUT/DELETE /config/{s} (compatibility level)
* POST /compatibility/subjects/{s}/versions/{v}[?verbose=true] and .../versions (all)

Errors are the registry's JSON ``{"error_code": ..., "message": ...}``: 40401 subject,
40402 version, 40403 schema not found, 409 incompatible, 42201 invalid schema, 42202
invalid version, 42203 invalid compatibility level, 40408 no subject-level config, 401.

Compatibility (BACKWARD by default; BACKWARD/FORWARD/FULL with or without _TRANSITIVE, and
NONE) is checked for AVRO with ``avro_compat`` (Avro schema resolution). Deviations from
the real registry, on purpose:

* JSON and PROTOBUF schemas pass every compatibility level (any change is accepted); a
  change of schema type is still incompatible.
* Schemas are compared as given (Avro/JSON: the JSON re-serialized compactly, whitespace
  aside; Protobuf: the text as is); ``normalize=true`` changes nothing.
* Protobuf schemas are stored as they arrive. confluent-kafka's ProtobufSerializer
  registers base64 of a serialized FileDescriptorProto, and its deserializer asks for
  ``format=serialized``: both get that text back. ``.proto`` text cannot be rendered as
  ``format=serialized`` here (no protobuf compiler): that request is a 42201.
* Protobuf and JSON validity: base64 FileDescriptorProto or any non-empty text; JSON text
  that ``jsonschema`` accepts as a schema.

``stop()`` and ``start()`` take the registry down and up on the same port; ``fail_next(n,
status)`` answers the next n requests with an error; ``requests`` logs every request.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from tests.support.registry_store import RegistryError, RegistryStore, flag, parse_level
from tests.support.registry_tls import TlsFiles, make_tls


@dataclass
class LoggedRequest:
    method: str
    path: str
    query: dict
    headers: dict
    body: object = None


class _RegistryServer(ThreadingHTTPServer):
    registry: FakeSchemaRegistry  # set by FakeSchemaRegistry.start


class _Handler(BaseHTTPRequestHandler):
    server: _RegistryServer
    server_version = "FakeSchemaRegistry/1.0"

    def log_message(self, *args):  # quiet
        pass

    def _serve(self):
        self.server.registry._handle(self)

    do_GET = do_POST = do_PUT = do_DELETE = _serve


class FakeSchemaRegistry(RegistryStore):
    def __init__(
        self,
        *,
        basic_auth: str | None = None,
        bearer_token: str | None = None,
        tls: TlsFiles | None = None,
        server_context: ssl.SSLContext | None = None,
    ):
        super().__init__()
        self.basic_auth = basic_auth
        self.bearer_token = bearer_token
        self.tls = tls
        self._server_context = server_context
        self.port = 0
        self._server: _RegistryServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.requests: list[LoggedRequest] = []
        self._failures: list[int] = []

    # --- life -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self._server_context else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> FakeSchemaRegistry:
        """Listen (again: on the port of the first start)."""
        server = _RegistryServer(("127.0.0.1", self.port), _Handler)
        server.daemon_threads = True
        server.registry = self
        if self._server_context is not None:
            server.socket = self._server_context.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self._server = server
        self._thread = thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-registry-{self.port}",
            daemon=True,
        )
        thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (connections are refused) but keep every schema."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            assert self._thread is not None  # start() set both
            self._thread.join()
            self._server = None

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` requests with ``status`` (a 5xx, 429, ...)."""
        with self._lock:
            self._failures.extend([status] * count)

    def count(self, method: str, path: str) -> int:
        """How many requests had this method and path (query aside)."""
        return sum(1 for r in self.requests if r.method == method and r.path == path)

    # --- HTTP ---------------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        body = None
        with self._lock:
            logged = LoggedRequest(handler.command, parts.path, query, dict(handler.headers))
            self.requests.append(logged)
            failure = self._failures.pop(0) if self._failures else None
        try:
            if failure is not None:
                raise RegistryError(
                    failure, failure * 100 + 1 if failure >= 500 else failure, "injected failure"
                )
            self._authenticate(handler)
            if raw:
                try:
                    body = logged.body = json.loads(raw)
                except ValueError:
                    raise RegistryError(400, 400, "Unrecognized request body") from None
            segments = [unquote(s) for s in parts.path.strip("/").split("/") if s]
            with self._lock:
                status, answer = 200, self._route(handler.command, segments, query, body)
        except RegistryError as exc:
            status, answer = exc.status, {"error_code": exc.error_code, "message": exc.message}
        data = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        handler.send_header("Content-Length", str(len(data)))
        if status == 401:
            handler.send_header("WWW-Authenticate", 'Basic realm="SchemaRegistry"')
        handler.end_headers()
        handler.wfile.write(data)

    def _authenticate(self, handler) -> None:
        if self.basic_auth is None and self.bearer_token is None:
            return
        given = handler.headers.get("Authorization", "")
        allowed = set()
        if self.basic_auth is not None:
            allowed.add("Basic " + base64.b64encode(self.basic_auth.encode()).decode())
        if self.bearer_token is not None:
            allowed.add(f"Bearer {self.bearer_token}")
        if given not in allowed:
            raise RegistryError(401, 401, "Unauthorized")

    def _route(self, method, segments, query, body):
        match (method, segments):
            case ("GET", ["subjects"]):
                return sorted(
                    s
                    for s, vs in self.subjects.items()
                    if any(not v.deleted or flag(query, "deleted") for v in vs)
                )
            case ("GET", ["subjects", subject, "versions"]):
                return [v.version for v in self._live(subject, flag(query, "deleted"))]
            case ("GET", ["subjects", subject, "versions", version]):
                found = self._version(subject, version, flag(query, "deleted"))
                return self._describe(subject, found, query.get("format"))
            case ("POST", ["subjects", subject, "versions"]):
                return {"id": self._register(subject, body)}
            case ("POST", ["subjects", subject]):
                return self._lookup(subject, body, flag(query, "deleted"))
            case ("DELETE", ["subjects", subject]):
                return self._delete(subject, None, flag(query, "permanent"))
            case ("DELETE", ["subjects", subject, "versions", version]):
                return self._delete(subject, version, flag(query, "permanent"))[0]
            case ("GET", ["schemas", "ids", schema_id]):
                stored = self._schema(schema_id)
                return self._schema_answer(stored, query.get("format"))
            case ("GET", ["schemas", "ids", schema_id, "versions"]):
                stored = self._schema(schema_id)
                return [
                    {"subject": s, "version": v.version}
                    for s, vs in self.subjects.items()
                    for v in vs
                    if v.schema_id == stored.schema_id and not v.deleted
                ]
            case ("GET", ["schemas", "ids", schema_id, "subjects"]):
                stored = self._schema(schema_id)
                return sorted(
                    {
                        s
                        for s, vs in self.subjects.items()
                        for v in vs
                        if v.schema_id == stored.schema_id and not v.deleted
                    }
                )
            case ("GET", ["schemas", "types"]):
                return ["JSON", "PROTOBUF", "AVRO"]
            case ("GET", ["config"]):
                return {"compatibilityLevel": self.global_level}
            case ("PUT", ["config"]):
                self.global_level = parse_level(body)
                return {"compatibility": self.global_level}
            case ("GET", ["config", subject]):
                if subject in self.subject_levels:
                    return {"compatibilityLevel": self.subject_levels[subject]}
                if flag(query, "defaultToGlobal"):
                    return {"compatibilityLevel": self.global_level}
                raise RegistryError(
                    404,
                    40408,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
            case ("PUT", ["config", subject]):
                self.subject_levels[subject] = parse_level(body)
                return {"compatibility": self.subject_levels[subject]}
            case ("DELETE", ["config", subject]):
                level = self.subject_levels.pop(subject, None)
                if level is None:
                    raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
                return {"compatibilityLevel": level}
            case ("POST", ["compatibility", "subjects", subject, "versions", version]):
                return self._test_compatibility(subject, body, version, query)
            case ("POST", ["compatibility", "subjects", subject, "versions"]):
                return self._test_compatibility(subject, body, None, query)
        raise RegistryError(404, 404, f"HTTP 404 Not Found: {method} /{'/'.join(segments)}")


# --- fixtures ---------------------------------------------------------------------------------


def start_registry(
    tmp_path=None, *, tls: bool = False, mtls: bool = False, **kwargs
) -> FakeSchemaRegistry:
    files = context = None
    if tls or mtls:
        files, context = make_tls(tmp_path, require_client_cert=mtls)
    return FakeSchemaRegistry(tls=files, server_context=context, **kwargs).start()


@pytest.fixture(scope="module")
def schema_registry():
    """A plain-HTTP fake registry for the module (use fresh subject names per test)."""
    registry = start_registry()
    yield registry
    registry.stop()


@pytest.fixture(scope="module")
def tls_registry(tmp_path_factory):
    """A fake registry over TLS; ``.tls`` holds the CA and client certificate files."""
    registry = start_registry(tmp_path_factory.mktemp("registry-tls"), tls=True)
    yield registry
    registry.stop()


@pytest.fixture(scope="module")
def mtls_registry(tmp_path_factory):
    """A fake registry over TLS that requires a client certificate its CA signed."""
    registry = start_registry(tmp_path_factory.mktemp("registry-mtls"), mtls=True)
    yield registry
    registry.stop()
