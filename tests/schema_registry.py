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
import binascii
import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import avro_compat
import pytest

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")


class RegistryError(Exception):
    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status, self.error_code, self.message = status, error_code, message


@dataclass
class Stored:
    schema_id: int
    schema_type: str
    text: str
    references: list
    key: tuple


@dataclass
class Version:
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class LoggedRequest:
    method: str
    path: str
    query: dict
    headers: dict
    body: object = None


@dataclass
class TlsFiles:
    """PEM files: the CA clients trust, and a client certificate + key for mutual TLS."""
    ca: str
    client_certificate: str
    client_key: str
    # the trustme CA, to issue more certificates (a client certificate it did not sign ...)
    authority: object = field(repr=False, default=None)


class _Handler(BaseHTTPRequestHandler):
    server_version = "FakeSchemaRegistry/1.0"

    def log_message(self, *args):        # quiet
        pass

    def _serve(self):
        self.server.registry._handle(self)

    do_GET = do_POST = do_PUT = do_DELETE = _serve


class FakeSchemaRegistry:
    def __init__(self, *, basic_auth: str | None = None, bearer_token: str | None = None,
                 tls: TlsFiles | None = None, server_context: ssl.SSLContext | None = None):
        self.basic_auth = basic_auth
        self.bearer_token = bearer_token
        self.tls = tls
        self._server_context = server_context
        self.port = 0
        self._server = None
        self._thread = None
        self._lock = threading.Lock()
        self.requests: list[LoggedRequest] = []
        self._failures: list[int] = []
        self.schemas: dict[int, Stored] = {}
        self._ids_by_key: dict[tuple, int] = {}
        self.subjects: dict[str, list[Version]] = {}
        self.global_level = "BACKWARD"
        self.subject_levels: dict[str, str] = {}

    # --- life -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{'https' if self._server_context else 'http'}://127.0.0.1:{self.port}"

    def start(self) -> FakeSchemaRegistry:
        """Listen (again: on the port of the first start)."""
        server = ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        server.daemon_threads = True
        server.registry = self
        if self._server_context is not None:
            server.socket = self._server_context.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fake-registry-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (connections are refused) but keep every schema."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
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
                raise RegistryError(failure, failure * 100 + 1 if failure >= 500 else failure,
                                    "injected failure")
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
                return sorted(s for s, vs in self.subjects.items()
                              if any(not v.deleted or _flag(query, "deleted") for v in vs))
            case ("GET", ["subjects", subject, "versions"]):
                return [v.version for v in self._live(subject, _flag(query, "deleted"))]
            case ("GET", ["subjects", subject, "versions", version]):
                found = self._version(subject, version, _flag(query, "deleted"))
                return self._describe(subject, found, query.get("format"))
            case ("POST", ["subjects", subject, "versions"]):
                return {"id": self._register(subject, body)}
            case ("POST", ["subjects", subject]):
                return self._lookup(subject, body, _flag(query, "deleted"))
            case ("DELETE", ["subjects", subject]):
                return self._delete(subject, None, _flag(query, "permanent"))
            case ("DELETE", ["subjects", subject, "versions", version]):
                return self._delete(subject, version, _flag(query, "permanent"))[0]
            case ("GET", ["schemas", "ids", schema_id]):
                stored = self._schema(schema_id)
                return self._schema_answer(stored, query.get("format"))
            case ("GET", ["schemas", "ids", schema_id, "versions"]):
                stored = self._schema(schema_id)
                return [{"subject": s, "version": v.version} for s, vs in self.subjects.items()
                        for v in vs if v.schema_id == stored.schema_id and not v.deleted]
            case ("GET", ["schemas", "ids", schema_id, "subjects"]):
                stored = self._schema(schema_id)
                return sorted({s for s, vs in self.subjects.items() for v in vs
                               if v.schema_id == stored.schema_id and not v.deleted})
            case ("GET", ["schemas", "types"]):
                return ["JSON", "PROTOBUF", "AVRO"]
            case ("GET", ["config"]):
                return {"compatibilityLevel": self.global_level}
            case ("PUT", ["config"]):
                self.global_level = _level(body)
                return {"compatibility": self.global_level}
            case ("GET", ["config", subject]):
                if subject in self.subject_levels:
                    return {"compatibilityLevel": self.subject_levels[subject]}
                if _flag(query, "defaultToGlobal"):
                    return {"compatibilityLevel": self.global_level}
                raise RegistryError(404, 40408, f"Subject '{subject}' does not have "
                                                "subject-level compatibility configured")
            case ("PUT", ["config", subject]):
                self.subject_levels[subject] = _level(body)
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

    # --- the store ----------------------------------------------------------------------------

    def _live(self, subject, deleted=False) -> list[Version]:
        versions = [v for v in self.subjects.get(subject, ()) if deleted or not v.deleted]
        if not versions:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        return versions

    def _version(self, subject, version, deleted=False) -> Version:
        versions = self._live(subject, deleted)
        if version in ("latest", "-1"):
            return versions[-1]
        try:
            number = int(version)
            if number < 1:
                raise ValueError
        except ValueError:
            raise RegistryError(422, 42202, f"The specified version '{version}' is not a valid "
                                "version id. Allowed values are between [1, 2^31-1] and the "
                                "string \"latest\"") from None
        for v in versions:
            if v.version == number:
                return v
        raise RegistryError(404, 40402, f"Version {number} not found.")

    def _schema(self, schema_id) -> Stored:
        try:
            return self.schemas[int(schema_id)]
        except (KeyError, ValueError):
            raise RegistryError(404, 40403, f"Schema {schema_id} not found") from None

    def _schema_answer(self, stored: Stored, fmt=None) -> dict:
        answer = {"schema": self._render(stored, fmt)}
        if stored.schema_type != "AVRO":
            answer["schemaType"] = stored.schema_type
        if stored.references:
            answer["references"] = stored.references
        return answer

    def _render(self, stored: Stored, fmt) -> str:
        if fmt == "serialized" and stored.schema_type == "PROTOBUF" \
                and _file_descriptor(stored.text) is None:
            raise RegistryError(422, 42201, "the fake registry cannot render .proto text as "
                                            "format=serialized (register the base64 form)")
        return stored.text

    def _describe(self, subject, version: Version, fmt=None) -> dict:
        stored = self.schemas[version.schema_id]
        return {"subject": subject, "version": version.version, "id": stored.schema_id,
                **self._schema_answer(stored, fmt)}

    def _parse_body(self, body) -> tuple:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryError(422, 42201, "Invalid schema: the request has no 'schema' text")
        schema_type = (body.get("schemaType") or "AVRO").upper()
        references = [{"name": r["name"], "subject": r["subject"], "version": int(r["version"])}
                      for r in body.get("references") or ()]
        text = body["schema"]
        self._validate(schema_type, text, references)
        canonical = text
        if schema_type in ("AVRO", "JSON"):
            canonical = json.dumps(json.loads(text), separators=(",", ":"))
        key = (schema_type, canonical, tuple((r["name"], r["subject"], r["version"])
                                            for r in references))
        return schema_type, text, references, key

    def _validate(self, schema_type, text, references) -> None:
        try:
            for ref in references:
                self._version(ref["subject"], str(ref["version"]))
        except RegistryError as exc:
            raise RegistryError(422, 42201, f"Invalid schema: reference {exc.message}") from None
        if schema_type == "AVRO":
            try:
                import fastavro
                fastavro.parse_schema(json.loads(text), named_schemas=self._avro_named(references))
            except Exception as exc:                      # fastavro raises several kinds
                raise RegistryError(422, 42201, f"Invalid schema {text[:100]}: {exc}") from None
        elif schema_type == "JSON":
            try:
                import jsonschema
                schema = json.loads(text)
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except Exception as exc:
                raise RegistryError(422, 42201, f"Invalid schema {text[:100]}: {exc}") from None
        elif schema_type == "PROTOBUF":
            if not text.strip():
                raise RegistryError(422, 42201, "Invalid schema: empty Protobuf schema")
        else:
            raise RegistryError(422, 42201, f"Invalid schema type {schema_type}")

    def _avro_named(self, references, out=None) -> dict:
        """fastavro's named-schema table from the references (depth first)."""
        import fastavro
        out = {} if out is None else out
        for ref in references:
            stored = self.schemas[self._version(ref["subject"], str(ref["version"])).schema_id]
            self._avro_named(stored.references, out)
            fastavro.parse_schema(json.loads(stored.text), named_schemas=out)
        return out

    def _compat_named(self, references, out=None) -> dict:
        """avro_compat's named-type table from the references."""
        out = {} if out is None else out
        for ref in references:
            stored = self.schemas[self._version(ref["subject"], str(ref["version"])).schema_id]
            self._compat_named(stored.references, out)
            out.update(avro_compat.parse(stored.text, out)[1])
        return out

    def _register(self, subject, body) -> int:
        schema_type, text, references, key = self._parse_body(body)
        versions = [v for v in self.subjects.get(subject, ()) if not v.deleted]
        for v in versions:
            if self.schemas[v.schema_id].key == key:
                return v.schema_id
        problems = self._problems(subject, schema_type, text, references, versions,
                                  self._level_of(subject))
        if problems:
            raise RegistryError(409, 409, "Schema being registered is incompatible with an "
                                f"earlier schema for subject \"{subject}\", details: "
                                f"{problems}")
        schema_id = self._ids_by_key.get(key)
        if schema_id is None:
            schema_id = self._ids_by_key[key] = len(self.schemas) + 1
            self.schemas[schema_id] = Stored(schema_id, schema_type, text, references, key)
        every = self.subjects.setdefault(subject, [])
        every.append(Version(max((v.version for v in every), default=0) + 1, schema_id))
        return schema_id

    def _level_of(self, subject) -> str:
        return self.subject_levels.get(subject, self.global_level)

    def _problems(self, subject, schema_type, text, references, versions, level) -> list[str]:
        """Why the candidate breaks ``level`` against ``versions`` (oldest first)."""
        if level == "NONE" or not versions:
            return []
        if not level.endswith("_TRANSITIVE"):
            versions = versions[-1:]
        problems = []
        for v in versions:
            old = self.schemas[v.schema_id]
            if old.schema_type != schema_type:
                problems.append(f"Incompatible because of different schema type: version "
                                f"{v.version} is {old.schema_type}, the new schema {schema_type}")
                continue
            if schema_type != "AVRO":
                continue                     # deviation: any JSON/PROTOBUF change is accepted
            new_named = self._compat_named(references)
            old_named = self._compat_named(old.references)
            if level.startswith(("BACKWARD", "FULL")):
                problems += [f"{p} (new schema reading version {v.version})"
                             for p in avro_compat.incompatibilities(text, old.text, new_named,
                                                                    old_named)]
            if level.startswith(("FORWARD", "FULL")):
                problems += [f"{p} (version {v.version} reading the new schema)"
                             for p in avro_compat.incompatibilities(old.text, text, old_named,
                                                                    new_named)]
        return problems

    def _lookup(self, subject, body, deleted) -> dict:
        versions = self._live(subject, deleted)
        _, _, _, key = self._parse_body(body)
        for v in reversed(versions):
            if self.schemas[v.schema_id].key == key:
                return self._describe(subject, v)
        raise RegistryError(404, 40403, "Schema not found")

    def _delete(self, subject, version, permanent) -> list[int]:
        every = self.subjects.get(subject)
        if not every:
            raise RegistryError(404, 40401, f"Subject '{subject}' not found.")
        if version is None:
            chosen = list(every)
        else:
            chosen = [self._version(subject, version, deleted=permanent)]
        if permanent:
            if any(not v.deleted for v in chosen):
                raise RegistryError(404, 40405 if version is None else 40407,
                                    f"Subject '{subject}' was not deleted first before being "
                                    "permanently deleted")
            self.subjects[subject] = [v for v in every if v not in chosen]
            if not self.subjects[subject]:
                del self.subjects[subject]
        else:
            if version is None and all(v.deleted for v in chosen):
                raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.")
            for v in chosen:
                v.deleted = True
        return [v.version for v in chosen]

    def _test_compatibility(self, subject, body, version, query) -> dict:
        schema_type, text, references, _ = self._parse_body(body)
        level = self._level_of(subject)
        if version is None:                                       # all versions
            versions = [v for v in self.subjects.get(subject, ()) if not v.deleted]
            level = level if level.endswith("_TRANSITIVE") or level == "NONE" \
                else f"{level}_TRANSITIVE"
        elif version in ("latest", "-1") and not any(
                not v.deleted for v in self.subjects.get(subject, ())):
            versions = []                   # as the registry: nothing to break yet
        else:
            versions = [self._version(subject, version)]
            level = level.removesuffix("_TRANSITIVE")
        problems = self._problems(subject, schema_type, text, references, versions, level)
        answer = {"is_compatible": not problems}
        if _flag(query, "verbose"):
            answer["messages"] = problems
        return answer


def _flag(query: dict, name: str) -> bool:
    return query.get(name, "false").lower() == "true"


def _level(body) -> str:
    level = (body or {}).get("compatibility") or (body or {}).get("compatibilityLevel")
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise RegistryError(422, 42203, f"Invalid compatibility level. Valid values are "
                                        f"{', '.join(LEVELS)}")
    return level.upper()


def _file_descriptor(text: str):
    """The FileDescriptorProto in base64 ``text``, or None when it is not one."""
    from google.protobuf import descriptor_pb2
    try:
        data = base64.b64decode(text, validate=True)
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(data)
    except (binascii.Error, ValueError, Exception):
        return None
    return proto


# --- TLS material and fixtures --------------------------------------------------------------

def make_tls(directory, *, require_client_cert: bool) -> tuple[TlsFiles, ssl.SSLContext]:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate, written
    to ``directory``; and the server's context (asking for a client certificate or not)."""
    import trustme
    authority = trustme.CA()
    server_cert = authority.issue_cert("127.0.0.1", "localhost")
    client_cert = authority.issue_cert("kafka-ds-client@example.com")
    ca_path = directory / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_path))
    client_cert_path = directory / "client.pem"
    client_key_path = directory / "client.key"
    client_cert.cert_chain_pems[0].write_to_path(str(client_cert_path))
    client_cert.private_key_pem.write_to_path(str(client_key_path))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_cert.configure_cert(context)
    if require_client_cert:
        authority.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    files = TlsFiles(str(ca_path), str(client_cert_path), str(client_key_path), authority)
    return files, context


def start_registry(tmp_path=None, *, tls: bool = False, mtls: bool = False,
                   **kwargs) -> FakeSchemaRegistry:
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
