"""SASL OAUTHBEARER: the bearer token (an unsecured development JWT, a token provider
callable, or the OIDC client-credentials grant), cached until shortly before it expires,
and the RFC 7628 client message.
"""

from __future__ import annotations

import base64
import importlib
import json
import threading
import time

from ...errors import AuthenticationError, ConfigurationError
from .settings import SecuritySettings


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jwt(sub: str, lifetime_s: int = 3600, claims=(), now: float | None = None) -> str:
    """An unsecured JWT (alg none), like Kafka's OAuthBearerUnsecuredLoginCallbackHandler.

    ``iat`` and ``exp`` are whole seconds (RFC 7519 NumericDate as brokers write them):
    Apache Kafka's unsecured validator refused about half of the tokens whose ``iat`` was
    the current time with a fraction ("issued at" after its clock once rounded)."""
    now = int(time.time() if now is None else now)
    header = {"alg": "none"}
    payload = {"iat": now, "exp": now + int(lifetime_s), "sub": sub}
    payload.update(dict(claims))
    return (
        _b64url(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + _b64url(json.dumps(payload, separators=(",", ":")).encode())
        + "."
    )


# token cache for providers and OIDC: settings key -> (token, expiry epoch seconds)
_token_cache: dict = {}
_token_lock = threading.Lock()
TOKEN_REFRESH_MARGIN_S = 60


def _jwt_expiry(token: str) -> float | None:
    try:
        payload = token.split(".")[1]
        payload += "=" * (-len(payload) % 4)
        exp = json.loads(base64.urlsafe_b64decode(payload)).get("exp")
        return float(exp) if exp is not None else None
    except Exception:
        return None


def oauth_token(settings: SecuritySettings) -> str:
    """The bearer token to send now (cached until shortly before it expires)."""
    if settings.oauth_unsecured_sub:
        return unsecured_jwt(
            settings.oauth_unsecured_sub,
            settings.oauth_unsecured_lifetime_s,
            settings.oauth_unsecured_claims,
        )
    key = settings.cache_key()
    with _token_lock:
        cached = _token_cache.get(key)
        if cached is not None and (
            cached[1] is None or cached[1] - TOKEN_REFRESH_MARGIN_S > time.time()
        ):
            return cached[0]
        if settings.oauth_token_provider:
            result = resolve_callable(settings.oauth_token_provider)()
            if isinstance(result, (tuple, list)):
                token, expiry = result[0], result[1]
            else:
                token, expiry = result, None
            if isinstance(token, bytes):
                token = token.decode()
            if expiry is None:
                expiry = _jwt_expiry(token)
        else:
            token, expiry = _oidc_client_credentials(settings)
        _token_cache[key] = (token, expiry)
        return token


def _oidc_client_credentials(settings):
    """KIP-768 client-credentials grant: POST to the token endpoint with HTTP Basic
    client authentication; answer {"access_token", "expires_in"}."""
    import urllib.error
    import urllib.parse
    import urllib.request

    form = {"grant_type": "client_credentials"}
    if settings.oauth_scope:
        form["scope"] = settings.oauth_scope
    basic = base64.b64encode(
        f"{urllib.parse.quote(settings.oauth_client_id)}:"
        f"{urllib.parse.quote(settings.oauth_client_secret)}".encode()
    ).decode()
    request = urllib.request.Request(
        settings.oauth_token_endpoint,
        data=urllib.parse.urlencode(form).encode(),
        headers={
            "Authorization": f"Basic {basic}",
            "Accept": "application/json",
            "Content-Type": "application/x-www-form-urlencoded",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise AuthenticationError(
            f"OIDC token endpoint {settings.oauth_token_endpoint} refused client "
            f"{settings.oauth_client_id!r}: HTTP {exc.code}"
        ) from None
    except (OSError, ValueError) as exc:
        raise AuthenticationError(
            f"OIDC token endpoint {settings.oauth_token_endpoint} failed: {type(exc).__name__}"
        ) from None
    token = body.get("access_token")
    if not token:
        raise AuthenticationError(
            f"OIDC token endpoint {settings.oauth_token_endpoint} answered no access_token"
        )
    expires_in = body.get("expires_in")
    expiry = time.time() + float(expires_in) if expires_in is not None else _jwt_expiry(token)
    return token, expiry


class OAuthBearerMechanism:
    """RFC 7628 client message: GS2 header, auth=Bearer token, extensions, \\x01\\x01."""

    def __init__(self, settings):
        token = oauth_token(settings)
        parts = ["n,,", f"auth=Bearer {token}"]
        for key, value in settings.oauth_extensions:
            parts.append(f"{key}={value}")
        self._message = ("\x01".join(parts) + "\x01\x01").encode()
        self.server_error = None

    def first(self) -> bytes:
        return self._message

    def step(self, challenge: bytes) -> bytes | None:
        # An error challenge (JSON status): answer with a lone \x01 so that the broker
        # ends the exchange with its error (RFC 7628 section 3.2.3).
        if challenge:
            try:
                self.server_error = json.loads(bytes(challenge)).get("status")
            except ValueError:
                self.server_error = "invalid challenge"
            return b"\x01"
        return None


def resolve_callable(spec: str):
    module_name, _, attr = spec.partition(":")
    try:
        target = importlib.import_module(module_name.strip())
        for part in attr.strip().split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise ConfigurationError(
            f"Option 'kafka.sasl.oauthbearer.token.provider': cannot "
            f"import {spec!r}: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(target):
        raise ConfigurationError(
            f"Option 'kafka.sasl.oauthbearer.token.provider': {spec!r} is not callable"
        )
    return target
