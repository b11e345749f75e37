"""A TLS- and SASL-terminating proxy in front of a real Tansu broker, for the security tests.

No broker installable here does TLS or SASL, so this fixture does what a Kafka listener
does up to authentication -- with real bytes on a real socket -- and then relays the Kafka
traffic to a dedicated Tansu that advertises the proxy's address (so Metadata and
FindCoordinator answers lead clients back through the proxy):

* TLS with the standard ``ssl`` module, certificates from ``trustme``; optionally requires
  a client certificate (mTLS).
* SASL (KIP-43/152): ApiVersions is answered before authentication (Tansu's table plus
  SaslHandshake v0-1 and SaslAuthenticate v0-2); any other request before authentication
  closes the connection, as Kafka does. Mechanisms PLAIN, SCRAM-SHA-256/512 (the proof is
  verified against stored keys, the server signature sent) and OAUTHBEARER (unsecured
  ``alg: none`` JWTs, RFC 7628 error challenge). ``session_lifetime_ms`` answers a session
  lifetime (KIP-368) and closes connections that send a request after it ran out without
  re-authenticating.

The wire formats here are written by hand from the Kafka protocol guide on purpose: the
fixture does not use kafka_ds's codec, and it is proven with confluent-kafka first
(tests/integration/test_security.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import socket
import ssl
import struct
import threading
import time

from tests.support import brokers
from tests.support.brokers import HOST, BrokerError, _log_tail

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE = 58, 33, 34
MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class AdvertisingTansu(brokers.TansuBroker):
    """Tansu whose Metadata answers name ``advertised`` instead of its own listener."""

    def __init__(self, advertised: str, **kwargs):
        self.advertised = advertised
        super().__init__(**kwargs)

    def _start(self, start_timeout, extra_args):
        # Readiness by ApiVersions only: Metadata would name the proxy, not yet running.
        self._launch(extra_args)
        proc = self._proc
        assert proc is not None  # _launch started it
        deadline = time.monotonic() + start_timeout
        last = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BrokerError(f"tansu exited rc={proc.returncode}\n{_log_tail(self.log_path)}")
            try:
                self.api_table = brokers.api_versions(self.bootstrap_servers, timeout=1.0)
                return
            except Exception as e:  # not listening yet
                last = e
            time.sleep(0.05)
        raise BrokerError(f"tansu not ready: {last!r}\n{_log_tail(self.log_path)}")


# --- hand-written wire helpers -------------------------------------------------------


def _uvarint(buf, pos):
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _write_uvarint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _skip_tags(buf, pos):
    count, pos = _uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        pos += size
    return pos


def parse_request_header(frame):
    """(api_key, version, correlation_id, body position) of a request frame (no size)."""
    api_key, version, correlation_id = struct.unpack_from(">hhi", frame, 0)
    (client_len,) = struct.unpack_from(">h", frame, 8)
    pos = 10 + max(client_len, 0)
    flexible = (api_key == API_VERSIONS and version >= 3) or (
        api_key == SASL_AUTHENTICATE and version >= 2
    )
    if flexible:
        pos = _skip_tags(frame, pos)
    return api_key, version, correlation_id, pos


def _frame(correlation_id, body, flexible_header=False):
    payload = struct.pack(">i", correlation_id) + (b"\0" if flexible_header else b"") + body
    return struct.pack(">i", len(payload)) + payload


def _string(text):
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def api_versions_response(correlation_id, version, table):
    entries = sorted(table.items())
    if version > 4:  # like Kafka: answer v0 with UNSUPPORTED_VERSION and the table
        body = struct.pack(">hi", 35, len(entries)) + b"".join(
            struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in entries
        )
        return _frame(correlation_id, body)
    if version >= 3:
        body = (
            struct.pack(">h", 0)
            + _write_uvarint(len(entries) + 1)
            + b"".join(struct.pack(">hhh", k, lo, hi) + b"\0" for k, (lo, hi) in entries)
        )
        body += struct.pack(">i", 0) + b"\0"
        return _frame(correlation_id, body)
    body = struct.pack(">hi", 0, len(entries)) + b"".join(
        struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in entries
    )
    if version >= 1:
        body += struct.pack(">i", 0)
    return _frame(correlation_id, body)


def sasl_authenticate_response(
    correlation_id, version, error_code, error_message, auth_bytes=b"", lifetime_ms=0
):
    if version >= 2:
        msg = (
            _write_uvarint(0)
            if error_message is None
            else _write_uvarint(len(error_message.encode()) + 1) + error_message.encode()
        )
        body = (
            struct.pack(">h", error_code)
            + msg
            + _write_uvarint(len(auth_bytes) + 1)
            + auth_bytes
            + struct.pack(">q", lifetime_ms)
            + b"\0"
        )
        return _frame(correlation_id, body, flexible_header=True)
    body = (
        struct.pack(">h", error_code)
        + _string(error_message)
        + struct.pack(">i", len(auth_bytes))
        + auth_bytes
    )
    if version >= 1:
        body += struct.pack(">q", lifetime_ms)
    return _frame(correlation_id, body)


def read_sasl_auth_bytes(frame, version, pos):
    if version >= 2:
        size, pos = _uvarint(frame, pos)
        return bytes(frame[pos : pos + size - 1])
    (size,) = struct.unpack_from(">i", frame, pos)
    return bytes(frame[pos + 4 : pos + 4 + size])


# --- server-side SASL mechanisms ---------------------------------------------------


class AuthFailed(Exception):
    pass


class PlainServer:
    def __init__(self, proxy):
        self.proxy = proxy
        self.user = None

    def step(self, data):
        parts = data.split(b"\0")
        if len(parts) != 3:
            raise AuthFailed("Authentication failed: invalid SASL/PLAIN message")
        user, password = parts[1].decode(), parts[2].decode()
        if self.proxy.users.get(user) != password:
            raise AuthFailed("Authentication failed: Invalid username or password")
        self.user = user
        return b"", True


class ScramServer:
    def __init__(self, proxy, mechanism):
        self.proxy = proxy
        self.hash = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
        self.mechanism = mechanism
        self.state = 0
        self.user = None

    def _hmac(self, key, msg):
        return hmac.new(key, msg, self.hash).digest()

    def step(self, data):
        text = data.decode()
        fail = AuthFailed(
            "Authentication failed during authentication due to invalid "
            f"credentials with SASL mechanism {self.mechanism}"
        )
        if self.state == 0:
            if not text.startswith("n,"):
                raise fail
            self.client_first_bare = text.split(",", 2)[2]
            attrs = dict(p.split("=", 1) for p in self.client_first_bare.split(","))
            user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            password = self.proxy.users.get(user)
            if password is None:
                raise fail
            self.user = user
            self.salt = secrets.token_bytes(16)
            self.iterations = 4096
            salted = hashlib.pbkdf2_hmac(self.hash, password.encode(), self.salt, self.iterations)
            self.stored_key = hashlib.new(self.hash, self._hmac(salted, b"Client Key")).digest()
            self.server_key = self._hmac(salted, b"Server Key")
            self.nonce = attrs["r"] + secrets.token_urlsafe(18)
            self.server_first = (
                f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
            )
            self.state = 1
            return self.server_first.encode(), False
        if self.state == 1:
            without_proof, _, proof = text.rpartition(",p=")
            attrs = dict(p.split("=", 1) for p in without_proof.split(","))
            if attrs.get("r") != self.nonce or attrs.get("c") != "biws":
                raise fail
            auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
            signature = self._hmac(self.stored_key, auth_message)
            client_key = bytes(
                a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=True)
            )
            if hashlib.new(self.hash, client_key).digest() != self.stored_key:
                raise fail
            server_signature = self._hmac(self.server_key, auth_message)
            if self.proxy.bad_server_signature:
                server_signature = bytes(b ^ 0xFF for b in server_signature)
            self.state = 2
            return f"v={base64.b64encode(server_signature).decode()}".encode(), True
        raise AuthFailed("unexpected SCRAM message")


class OAuthBearerServer:
    """Accepts unsecured JWTs (alg none) with a sub and an unexpired exp, like Kafka's
    OAuthBearerUnsecuredValidatorCallbackHandler; an invalid token gets the RFC 7628
    error challenge and fails on the client's \\x01 answer."""

    def __init__(self, proxy):
        self.proxy = proxy
        self.failed = None
        self.user = None

    def step(self, data):
        if self.failed is not None:
            raise AuthFailed(f"Authentication failed: {self.failed}")
        text = data.decode()
        if not text.startswith("n,") or not text.endswith("\x01\x01"):
            raise AuthFailed("Authentication failed: invalid OAUTHBEARER message")
        items = text.split("\x01")[1:-2]
        kv = dict(item.split("=", 1) for item in items)
        auth = kv.pop("auth", "")
        self.extensions = kv
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        try:
            header_b64, payload_b64, _sig = token.split(".")
            pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
            header = json.loads(base64.urlsafe_b64decode(pad(header_b64)))
            payload = json.loads(base64.urlsafe_b64decode(pad(payload_b64)))
            if header.get("alg") != "none" or not payload.get("sub"):
                raise ValueError("bad token")
            if float(payload["exp"]) < time.time():
                self.failed = "token expired"
            elif self.proxy.required_extensions and any(
                kv.get(k) != v for k, v in self.proxy.required_extensions.items()
            ):
                self.failed = "missing extension"
        except (ValueError, KeyError):
            self.failed = "invalid token"
        if self.failed is not None:
            return json.dumps({"status": "invalid_token"}).encode(), False
        self.user = payload["sub"]
        self.proxy.seen_extensions.append(dict(kv))
        return b"", True


# --- the proxy ---------------------------------------------------------------------


class SecureProxy:
    """``SecureProxy(tls=..., sasl=[mechanisms], users={...})``; ``bootstrap_servers``."""

    def __init__(
        self,
        *,
        tls: bool = False,
        client_auth: bool = False,
        sasl=(),
        users=None,
        session_lifetime_ms: int = 0,
        bad_server_signature: bool = False,
        server_hostnames=("127.0.0.1",),
        ca=None,
        required_extensions=None,
    ):
        import trustme

        self.tls = tls
        self.sasl = tuple(sasl)
        self.users = dict(users or {})
        self.session_lifetime_ms = session_lifetime_ms
        self.bad_server_signature = bad_server_signature
        self.required_extensions = dict(required_extensions or {})
        self.seen_extensions: list[dict[str, str]] = []
        self.authentications = 0
        self.reauthentications = 0
        self.expired_closes = 0
        self.ca = ca or trustme.CA()
        self.server_cert = self.ca.issue_cert(*server_hostnames)
        self.server_context: ssl.SSLContext | None = None
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.server_cert.configure_cert(ctx)
            if client_auth:
                self.ca.configure_trust(ctx)
                ctx.verify_mode = ssl.CERT_REQUIRED
            self.server_context = ctx
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((HOST, 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.bootstrap_servers = f"{HOST}:{self.port}"
        self.tansu = AdvertisingTansu(self.bootstrap_servers)
        self.api_table = dict(self.tansu.api_table)
        if self.sasl:
            self.api_table[SASL_HANDSHAKE] = (0, 1)
            self.api_table[SASL_AUTHENTICATE] = (0, 2)
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    # paths for clients
    def ca_pem_path(self, directory):
        path = os.path.join(directory, "ca.pem")
        self.ca.cert_pem.write_to_path(path)
        return path

    def client_cert(self, name="client@kafka-ds.test"):
        return self.ca.issue_cert(name)

    def stop(self):
        self._stopped = True
        try:
            self._listener.close()
        except OSError:
            pass
        with self._lock:
            socks = list(self._sockets)
        for s in socks:
            try:
                s.close()
            except OSError:
                pass
        self.tansu.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def _track(self, sock):
        with self._lock:
            self._sockets.add(sock)
        return sock

    def _accept_loop(self):
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        upstream = None
        try:
            client.settimeout(10)
            if self.tls:
                assert self.server_context is not None  # made when tls is set
                try:
                    client = self._track(self.server_context.wrap_socket(client, server_side=True))
                except (ssl.SSLError, OSError):
                    return  # a failed handshake ends the connection, as in Kafka
            client.settimeout(None)
            _Session(self, client).run()
        finally:
            try:
                client.close()
            except OSError:
                pass
            if upstream is not None:
                upstream.close()


class _Session:
    """One client connection: authentication, then relaying frames to Tansu."""

    def __init__(self, proxy, client):
        self.proxy = proxy
        self.client = client
        self.write_lock = threading.Lock()
        self.outstanding = 0
        self.cond = threading.Condition()
        self.authenticated = not proxy.sasl
        self.session_end = None
        self.mechanism = None
        self.server = None
        self.upstream = None

    def send(self, data):
        with self.write_lock:
            self.client.sendall(data)

    def recv_exact(self, sock, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def wait_idle(self, timeout=10):
        with self.cond:
            self.cond.wait_for(lambda: self.outstanding == 0, timeout)

    def run(self):
        try:
            while True:
                (size,) = struct.unpack(">i", self.recv_exact(self.client, 4))
                if size < 0 or size > MAX_FRAME:
                    return  # Kafka closes connections sending invalid sizes (e.g. TLS bytes)
                frame = self.recv_exact(self.client, size)
                api_key, version, correlation_id, pos = parse_request_header(frame)
                if api_key == API_VERSIONS:
                    self.wait_idle()
                    self.send(api_versions_response(correlation_id, version, self.proxy.api_table))
                elif api_key == SASL_HANDSHAKE and self.proxy.sasl:
                    self.wait_idle()
                    if not self.handshake(frame, version, correlation_id, pos):
                        return
                elif api_key == SASL_AUTHENTICATE and self.proxy.sasl:
                    if not self.authenticate(frame, version, correlation_id, pos):
                        return
                else:
                    if not self.authenticated:
                        return  # Kafka: unexpected request before authentication
                    if self.session_end is not None and time.monotonic() > self.session_end:
                        self.proxy.expired_closes += 1
                        return  # KIP-368: the session ran out without re-authentication
                    self.forward(size, frame)
        except (EOFError, OSError, ssl.SSLError):
            return
        finally:
            if self.upstream is not None:
                try:
                    self.upstream.close()
                except OSError:
                    pass

    def handshake(self, frame, version, correlation_id, pos):
        (length,) = struct.unpack_from(">h", frame, pos)
        mechanism = bytes(frame[pos + 2 : pos + 2 + length]).decode()
        mechanisms = [m for m in self.proxy.sasl]
        error = 0 if mechanism in mechanisms else UNSUPPORTED_SASL_MECHANISM
        body = struct.pack(">hi", error, len(mechanisms)) + b"".join(_string(m) for m in mechanisms)
        self.send(_frame(correlation_id, body))
        if error or version < 1:
            return False  # v0 (raw SASL bytes) is not served
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self.server = PlainServer(self.proxy)
        elif mechanism.startswith("SCRAM-"):
            self.server = ScramServer(self.proxy, mechanism)
        else:
            self.server = OAuthBearerServer(self.proxy)
        return True

    def authenticate(self, frame, version, correlation_id, pos):
        if self.server is None:
            self.send(
                sasl_authenticate_response(
                    correlation_id,
                    version,
                    ILLEGAL_SASL_STATE,
                    "SaslAuthenticate before SaslHandshake",
                )
            )
            return False
        data = read_sasl_auth_bytes(frame, version, pos)
        try:
            reply, done = self.server.step(data)
        except AuthFailed as exc:
            time.sleep(0.1)  # Kafka's connection.failed.authentication.delay.ms
            self.send(
                sasl_authenticate_response(
                    correlation_id, version, SASL_AUTHENTICATION_FAILED, str(exc)
                )
            )
            return False
        lifetime = self.proxy.session_lifetime_ms if done else 0
        self.send(sasl_authenticate_response(correlation_id, version, 0, None, reply, lifetime))
        if done:
            if self.authenticated:
                self.proxy.reauthentications += 1
            else:
                self.proxy.authentications += 1
            self.authenticated = True
            self.server = None
            self.session_end = (time.monotonic() + lifetime / 1000.0) if lifetime else None
        return True

    def forward(self, size, frame):
        if self.upstream is None:
            self.upstream = socket.create_connection((HOST, self.proxy.tansu.port), timeout=10)
            self.upstream.settimeout(None)
            self.proxy._track(self.upstream)
            threading.Thread(target=self._relay_responses, daemon=True).start()
        with self.cond:
            self.outstanding += 1
        self.upstream.sendall(struct.pack(">i", size) + frame)

    def _relay_responses(self):
        try:
            while True:
                head = self.recv_exact(self.upstream, 4)
                (size,) = struct.unpack(">i", head)
                body = self.recv_exact(self.upstream, size)
                self.send(bytes(head) + bytes(body))
                with self.cond:
                    self.outstanding -= 1
                    self.cond.notify_all()
        except (EOFError, OSError):
            try:
                self.client.close()
            except OSError:
                pass
