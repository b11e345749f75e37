"""``SecuritySettings``: the validated TLS/SASL settings of a client, picklable (they ship to
the executors inside ``ClientConfig``) with every secret hidden from ``repr``. A leaf: the
parsing of the ``kafka.*`` options into it is ``parse.py``."""

from __future__ import annotations

from dataclasses import dataclass, fields

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
STORE_TYPES = ("PEM", "PKCS12", "JKS")

_SECRET_FIELDS = frozenset(
    {
        "truststore_password",
        "keystore_password",
        "key_password",
        "keystore_key",
        "password",
        "oauth_client_secret",
        "oauth_static_token",
    }
)


@dataclass(frozen=True, repr=False)
class SecuritySettings:
    """Validated, picklable security settings; ``repr`` hides every secret."""

    protocol: str = "PLAINTEXT"
    # TLS
    check_hostname: bool = True
    truststore_type: str | None = None
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None
    keystore_type: str | None = None
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    tls_min_version: str | None = None
    tls_max_version: str | None = None
    ciphers: str | None = None
    # SASL
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    oauth_token_provider: str | None = None
    oauth_token_endpoint: str | None = None
    oauth_client_id: str | None = None
    oauth_client_secret: str | None = None
    oauth_scope: str | None = None
    oauth_unsecured_sub: str | None = None
    oauth_unsecured_lifetime_s: int = 3600
    oauth_unsecured_claims: tuple = ()
    oauth_static_token: str | None = None
    oauth_extensions: tuple = ()

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def principal(self) -> str:
        """Who authenticates, for error messages (never a secret)."""
        if self.mechanism == "OAUTHBEARER":
            if self.oauth_unsecured_sub:
                return self.oauth_unsecured_sub
            if self.oauth_client_id:
                return self.oauth_client_id
            if self.oauth_token_provider:
                return f"token from {self.oauth_token_provider}"
            return "(token)"
        return self.username or "(none)"

    def __repr__(self):
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value in (None, (), f.default) and f.name != "protocol":
                continue
            if f.name in _SECRET_FIELDS:
                shown = "***"
            elif f.name in ("truststore_certificates", "keystore_certificate_chain"):
                shown = f"<{value.count('BEGIN CERTIFICATE')} PEM certificate(s)>"
            else:
                shown = repr(value)
            parts.append(f"{f.name}={shown}")
        return f"SecuritySettings({', '.join(parts)})"

    __str__ = __repr__

    def cache_key(self) -> tuple:
        """Every field's value: the key of the per-settings caches (SSL contexts, tokens)."""
        return tuple(getattr(self, f.name) for f in fields(self))
