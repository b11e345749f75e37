"""SASL mechanisms as client exchanges (``first()``, then ``step(challenge)``): PLAIN,
SCRAM-SHA-256/512 and OAUTHBEARER (in ``oauth``); ``make_mechanism`` picks one.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from ...errors import AuthenticationError
from .oauth import OAuthBearerMechanism
from .settings import SecuritySettings


class PlainMechanism:
    """RFC 4616: one message, authzid NUL authcid NUL password."""

    def __init__(self, settings):
        self._message = b"\0" + settings.username.encode() + b"\0" + settings.password.encode()

    def first(self) -> bytes:
        return self._message

    def step(self, challenge: bytes) -> bytes | None:
        raise AuthenticationError("the broker sent a challenge after SASL PLAIN")


class ScramMechanism:
    """RFC 5802 / 7677 client: client-first, server-first, client-final with the proof;
    the server's signature in server-final is verified."""

    def __init__(self, settings, nonce: str | None = None):
        self.hash_name = "sha256" if settings.mechanism == "SCRAM-SHA-256" else "sha512"
        self.mechanism = settings.mechanism
        # Kafka's SCRAM (ScramFormatter) uses the UTF-8 bytes of username and password
        # without SASLprep, so SASLprep here would break passwords it changes; the username
        # only gets RFC 5802's escaping of ',' and '='.
        self.username = settings.username.replace("=", "=3D").replace(",", "=2C")
        self.password = settings.password
        self.client_nonce = nonce or secrets.token_urlsafe(24)
        self.client_first_bare = f"n={self.username},r={self.client_nonce}"
        self.server_signature = None
        self.state = 0

    def first(self) -> bytes:
        self.state = 1
        return ("n,," + self.client_first_bare).encode()

    def _hmac(self, key, msg):
        return hmac.new(key, msg, self.hash_name).digest()

    def step(self, challenge: bytes) -> bytes | None:
        text = bytes(challenge).decode("utf-8", "replace")
        attrs = _scram_attributes(text)
        if self.state == 1:
            if "e" in attrs:
                raise AuthenticationError(f"SCRAM server error: {attrs['e']}")
            nonce, salt, iterations = attrs.get("r"), attrs.get("s"), attrs.get("i")
            if not nonce or not salt or not iterations or not nonce.startswith(self.client_nonce):
                raise AuthenticationError("invalid SCRAM server-first message")
            iterations = int(iterations)
            if iterations < 1:
                raise AuthenticationError("invalid SCRAM iteration count")
            salted = hashlib.pbkdf2_hmac(
                self.hash_name, self.password.encode(), base64.b64decode(salt), iterations
            )
            client_key = self._hmac(salted, b"Client Key")
            stored_key = hashlib.new(self.hash_name, client_key).digest()
            without_proof = f"c=biws,r={nonce}"
            auth_message = f"{self.client_first_bare},{text},{without_proof}".encode()
            client_signature = self._hmac(stored_key, auth_message)
            proof = bytes(a ^ b for a, b in zip(client_key, client_signature, strict=True))
            server_key = self._hmac(salted, b"Server Key")
            self.server_signature = self._hmac(server_key, auth_message)
            self.state = 2
            return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        if self.state == 2:
            if "e" in attrs:
                raise AuthenticationError(f"SCRAM server error: {attrs['e']}")
            signature = attrs.get("v")
            if (
                signature is None
                or self.server_signature is None
                or not hmac.compare_digest(base64.b64decode(signature), self.server_signature)
            ):
                raise AuthenticationError(
                    "the broker's SCRAM server signature is wrong: it does not know the "
                    "password (a server impersonating the broker?)"
                )
            self.state = 3
            return None
        raise AuthenticationError("unexpected SCRAM message")

    @property
    def complete(self) -> bool:
        return self.state == 3


def _scram_attributes(text):
    attrs = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            attrs[key] = value
    return attrs


def make_mechanism(settings: SecuritySettings):
    if settings.mechanism == "PLAIN":
        return PlainMechanism(settings)
    if settings.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramMechanism(settings)
    if settings.mechanism == "OAUTHBEARER":
        return OAuthBearerMechanism(settings)
    raise AuthenticationError(f"unsupported SASL mechanism {settings.mechanism}")
