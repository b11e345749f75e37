"""TLS and SASL settings: parsed from the ``kafka.*`` options on the driver at plan
time (every error names the option), shipped to executors inside ``ClientConfig``
(picklable, secrets redacted from ``repr``), and turned into an ``ssl.SSLContext``
and a SASL authenticator on first use where the connections are made.

By concern: ``jaas`` (the ``kafka.sasl.jaas.config`` entry), ``settings`` (the option
declarations and ``SecuritySettings``), ``tls`` (key stores, ``ssl.SSLContext``),
``sasl`` (PLAIN, SCRAM, ``make_mechanism``) and ``oauth`` (OAUTHBEARER tokens).
Every name is importable from here as before the split.
"""
from __future__ import annotations

from .jaas import parse_jaas_config  # noqa: F401  (re-exports: the names as before the split)
from .oauth import (  # noqa: F401
    TOKEN_REFRESH_MARGIN_S,
    OAuthBearerMechanism,
    oauth_token,
    resolve_callable,
    unsecured_jwt,
)
from .sasl import PlainMechanism, ScramMechanism, make_mechanism  # noqa: F401
from .settings import (  # noqa: F401
    MECHANISMS,
    SECURITY_OPTION_NAMES,
    SECURITY_OPTIONS,
    SECURITY_PROTOCOLS,
    STORE_TYPES,
    SecuritySettings,
    security_options_markdown,
)
from .tls import (  # noqa: F401
    JKS_MAGIC,
    TlsMaterial,
    build_ssl_context,
    load_tls_material,
    read_jks_certificates,
    ssl_context,
)

__all__ = ["SecuritySettings", "SECURITY_OPTIONS", "parse_jaas_config", "ssl_context",
           "read_jks_certificates", "make_mechanism", "unsecured_jwt"]
