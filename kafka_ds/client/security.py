"""TLS and SASL settings: parsed from the ``kafka.*`` options on the driver at plan
time (every error names the option), shipped to executors inside ``ClientConfig``
(picklable, secrets redacted from ``repr``), and turned into an ``ssl.SSLContext``
and a SASL authenticator on first use where the connections are made.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import importlib
import json
import logging
import os
import secrets
import ssl
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, fields

from ..protocol.errors import AuthenticationError, ConfigurationError

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
STORE_TYPES = ("PEM", "PKCS12", "JKS")

# (option, applies to, default, description): rows for the README option table.
SECURITY_OPTIONS = [
    ("kafka.security.protocol", "read, write", "`PLAINTEXT`",
     "`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`; used on every connection (bootstrap, "
     "leaders, coordinators, driver and executors)."),
    ("kafka.ssl.endpoint.identification.algorithm", "read, write", "`https`",
     "`https` checks that the broker certificate names the broker host; empty turns the "
     "hostname check off (logged as a warning). The certificate chain is always verified."),
    ("kafka.ssl.truststore.type", "read, write", "by file extension: `.p12`/`.pfx` PKCS12, "
     "`.pem`/`.crt` PEM, else JKS (Java's default)", "`PEM`, `PKCS12` or `JKS` (the "
     "certificate entries of a `keytool` store)."),
    ("kafka.ssl.truststore.location", "read, write", "(system CA bundle)",
     "File of trusted CA certificates; without it and without "
     "`kafka.ssl.truststore.certificates` the system CAs are trusted."),
    ("kafka.ssl.truststore.password", "read, write", "",
     "Password of a PKCS12/JKS truststore (JKS: checks the store's integrity)."),
    ("kafka.ssl.truststore.certificates", "read, write", "",
     "Trusted CA certificates inline, PEM text."),
    ("kafka.ssl.keystore.type", "read, write", "by file extension, as the truststore",
     "`PEM` or `PKCS12` client certificate store for mutual TLS. A JKS keystore is refused "
     "with the `keytool` command that converts it to PKCS12."),
    ("kafka.ssl.keystore.location", "read, write", "", "Client certificate chain and key."),
    ("kafka.ssl.keystore.password", "read, write", "", "Password of the keystore."),
    ("kafka.ssl.key.password", "read, write", "",
     "Password of the private key (PEM keystore, or PKCS12 whose key has its own)."),
    ("kafka.ssl.keystore.certificate.chain", "read, write", "",
     "Client certificate chain inline, PEM text (with `kafka.ssl.keystore.key`)."),
    ("kafka.ssl.keystore.key", "read, write", "",
     "Client private key inline, PEM text (encrypted keys use `kafka.ssl.key.password`)."),
    ("kafka.ssl.protocol", "read, write", "`TLSv1.3`",
     "`TLSv1.2` caps the connection at TLS 1.2, as in Java; `TLS`/`TLSv1.3` leave it open."),
    ("kafka.ssl.enabled.protocols", "read, write", "`TLSv1.2,TLSv1.3`",
     "Lowest and highest TLS versions allowed."),
    ("kafka.ssl.cipher.suites", "read, write", "(OpenSSL defaults)",
     "TLS 1.2 cipher suites, IANA (Java) or OpenSSL names. Python cannot restrict TLS 1.3 "
     "suites; those names are accepted and ignored."),
    ("kafka.sasl.mechanism", "read, write", "(required for `SASL_*`)",
     "`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` or `OAUTHBEARER` (Java's default GSSAPI is "
     "not supported, so it must be set)."),
    ("kafka.sasl.jaas.config", "read, write", "",
     "JAAS entry as for the Java client: `PlainLoginModule`/`ScramLoginModule` with "
     "`username`/`password`, `OAuthBearerLoginModule` with `unsecuredLoginStringClaim_sub` "
     "(unsecured development token) or `clientId`/`clientSecret`/`scope` (OIDC)."),
    ("kafka.sasl.username", "read, write", "",
     "Username for PLAIN/SCRAM instead of the JAAS entry (confluent-kafka style)."),
    ("kafka.sasl.password", "read, write", "", "Password to go with `kafka.sasl.username`."),
    ("kafka.sasl.oauthbearer.token.provider", "read, write", "",
     "`package.module:callable` returning a token or `(token, expiry_epoch_seconds)`; "
     "imported on the driver and on executors (e.g. MSK IAM, Azure)."),
    ("kafka.sasl.oauthbearer.token.endpoint.url", "read, write", "",
     "OIDC token endpoint (client-credentials grant, KIP-768); the JAAS entry gives "
     "`clientId`, `clientSecret` and optional `scope`."),
    ("kafka.sasl.oauthbearer.extensions", "read, write", "",
     "SASL extensions sent with the token, `key=value` comma-separated (the JAAS entry's "
     "`unsecuredLoginExtension_<key>` options work too)."),
]

SECURITY_OPTION_NAMES = frozenset(row[0] for row in SECURITY_OPTIONS)

# --- JAAS ---------------------------------------------------------------------

_JAAS_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _is_word_char(c: str) -> bool:
    # Kafka's JaasConfig tokenizer: codes 33..128 and >= 160 are word characters,
    # except the ordinary ';' and '=', the comment '/' and the quotes.
    code = ord(c)
    return (33 <= code <= 128 or code >= 160) and c not in ";=/\"'"


def _jaas_tokens(text: str):
    """Tokens of a JAAS entry: ("word", text), ("quoted", text), (";"), ("=")."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if ord(c) <= 32:
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # "//" and a lone "/" both comment out the rest of the line
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
        elif c in ";=":
            yield (c, c)
            i += 1
        elif c in "\"'":
            out, i = [], i + 1
            while i < n and text[i] not in (c, "\n", "\r"):
                ch = text[i]
                if ch == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    if nxt in "01234567":
                        j = i + 1
                        while j < n and j < i + 4 and text[j] in "01234567":
                            j += 1
                        value = int(text[i + 1:j], 8)
                        if value > 0o377:  # StreamTokenizer takes at most \377
                            j -= 1
                            value = int(text[i + 1:j], 8)
                        out.append(chr(value))
                        i = j
                        continue
                    out.append(_ESCAPES.get(nxt, nxt))
                    i += 2
                    continue
                out.append(ch)
                i += 1
            i += 1  # the closing quote (or the line end that ended the string)
            yield ("quoted", "".join(out))
        elif _is_word_char(c):
            start = i
            while i < n and _is_word_char(text[i]):
                i += 1
            yield ("word", text[start:i])
        else:  # an ordinary character StreamTokenizer returns on its own
            yield ("other", c)
            i += 1


def parse_jaas_config(text: str, option: str = "kafka.sasl.jaas.config"):
    """``<LoginModule> <flag> (key=value)*;`` -> (login module class, options dict).

    Follows Kafka's JaasConfig tokenizer (quotes, escapes, comments). The error
    messages never quote values: they may be passwords.
    """
    tokens = list(_jaas_tokens(text))
    entries = []
    pos = 0
    while pos < len(tokens):
        kind, module = tokens[pos]
        if kind not in ("word", "quoted"):
            raise ConfigurationError(f"Option '{option}': expected a login module class name, "
                                     f"found {module!r}")
        pos += 1
        if pos >= len(tokens) or tokens[pos][0] not in ("word", "quoted"):
            raise ConfigurationError(f"Option '{option}': login module control flag (e.g. "
                                     "'required') not specified after " + module)
        flag = tokens[pos][1]
        if flag.upper() not in _JAAS_FLAGS:
            raise ConfigurationError(f"Option '{option}': invalid login module control flag "
                                     f"{flag!r}; use 'required'")
        pos += 1
        options = {}
        while pos < len(tokens) and tokens[pos][0] != ";":
            kind, key = tokens[pos]
            if kind not in ("word", "quoted") or pos + 2 >= len(tokens) \
                    or tokens[pos + 1][0] != "=" or tokens[pos + 2][0] not in ("word", "quoted"):
                raise ConfigurationError(f"Option '{option}': value not specified for key "
                                         f"{key!r} (write key=\"value\")")
            options[key] = tokens[pos + 2][1]
            pos += 3
        if pos >= len(tokens):
            raise ConfigurationError(f"Option '{option}': the JAAS entry is not terminated by "
                                     "a semicolon ';'")
        pos += 1
        entries.append((module, options))
    if not entries:
        raise ConfigurationError(f"Option '{option}': no login module specified")
    if len(entries) > 1:
        raise ConfigurationError(f"Option '{option}' contains {len(entries)} login modules, "
                                 "should be 1")
    return entries[0]


# --- settings -------------------------------------------------------------------

_SECRET_FIELDS = frozenset({
    "truststore_password", "keystore_password", "key_password", "keystore_key", "password",
    "oauth_client_secret", "oauth_static_token"})


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

    # --- parsing ----------------------------------------------------------------

    @classmethod
    def from_params(cls, params: dict, *, check_files: bool = True) -> "SecuritySettings":
        """From the ``kafka.*`` params with the prefix removed (keys lower case).

        Cached per distinct security params: every task builds a client, and reading a
        PKCS12 store (key derivation) is not free.
        """
        key = (check_files, tuple(sorted(
            (k, str(v)) for k, v in params.items()
            if k.startswith(("security.", "ssl.", "sasl.")))))
        with _settings_lock:
            cached = _settings_cache.get(key)
        if cached is not None:
            return cached
        settings = cls._parse(params, check_files)
        with _settings_lock:
            if len(_settings_cache) > 64:
                _settings_cache.clear()
            _settings_cache[key] = settings
        return settings

    @classmethod
    def _parse(cls, params: dict, check_files: bool) -> "SecuritySettings":
        get = _getter(params)
        protocol = (get("security.protocol") or "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigurationError(
                f"Option 'kafka.security.protocol' must be one of {', '.join(SECURITY_PROTOCOLS)},"
                f" got {protocol!r}")
        values: dict = {"protocol": protocol}
        if protocol in ("SSL", "SASL_SSL"):
            values.update(_parse_tls(get, params, check_files))
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            values.update(_parse_sasl(get))
        settings = cls(**values)
        if settings.uses_tls and check_files:
            # Read every store now, on the driver: a wrong password or a broken file fails
            # the plan naming the option instead of failing every task.
            load_tls_material(settings)
        return settings


_settings_cache: dict = {}
_settings_lock = threading.Lock()


def _getter(params):
    def get(key):
        value = params.get(key)
        if value is None:
            return None
        value = str(value)
        return value if value.strip() else None
    return get


def _store_type(get, which, location):
    key = f"ssl.{which}.type"
    raw = get(key)
    if raw is None:
        if location is None:
            return "PEM"
        lower = location.lower()
        if lower.endswith(".jks"):
            return "JKS"
        if lower.endswith((".p12", ".pfx", ".pkcs12")):
            return "PKCS12"
        if lower.endswith((".pem", ".crt", ".cer", ".key")):
            return "PEM"
        return "JKS"  # Java's default store type
    value = raw.strip().upper()
    if value not in STORE_TYPES:
        raise ConfigurationError(f"Option 'kafka.{key}' must be PEM, PKCS12 or JKS, got {raw!r}")
    return value


_TLS_VERSIONS = {"TLSV1": "TLSv1", "TLSV1.1": "TLSv1_1", "TLSV1.2": "TLSv1_2",
                 "TLSV1.3": "TLSv1_3"}


def _parse_tls(get, params, check_files):
    values = {}
    algorithm = get("ssl.endpoint.identification.algorithm")
    if algorithm is None and "ssl.endpoint.identification.algorithm" in params:
        values["check_hostname"] = False  # set, but empty: Java's way to turn the check off
    elif algorithm is not None and algorithm.strip().lower() != "https":
        raise ConfigurationError(
            "Option 'kafka.ssl.endpoint.identification.algorithm' must be 'https' or empty, "
            f"got {algorithm!r}")
    location = get("ssl.truststore.location")
    values["truststore_location"] = location
    values["truststore_type"] = _store_type(get, "truststore", location)
    values["truststore_password"] = get("ssl.truststore.password")
    values["truststore_certificates"] = get("ssl.truststore.certificates")
    if location and values["truststore_certificates"]:
        raise ConfigurationError("Options 'kafka.ssl.truststore.location' and "
                                 "'kafka.ssl.truststore.certificates' exclude each other")
    if location and check_files and not os.path.isfile(location):
        raise ConfigurationError(f"Option 'kafka.ssl.truststore.location': file {location!r} "
                                 "does not exist (it must exist on the driver and executors)")
    klocation = get("ssl.keystore.location")
    values["keystore_location"] = klocation
    values["keystore_type"] = _store_type(get, "keystore", klocation)
    values["keystore_password"] = get("ssl.keystore.password")
    values["key_password"] = get("ssl.key.password")
    values["keystore_certificate_chain"] = get("ssl.keystore.certificate.chain")
    values["keystore_key"] = get("ssl.keystore.key")
    if klocation:
        if values["keystore_type"] == "JKS":
            raise ConfigurationError(
                "Option 'kafka.ssl.keystore.type' JKS is not supported for the client keystore; "
                "convert it to PKCS12 and set 'kafka.ssl.keystore.type' to PKCS12:\n  keytool "
                f"-importkeystore -srckeystore {klocation} -destkeystore "
                f"{os.path.splitext(klocation)[0]}.p12 -deststoretype PKCS12")
        if check_files and not os.path.isfile(klocation):
            raise ConfigurationError(f"Option 'kafka.ssl.keystore.location': file "
                                     f"{klocation!r} does not exist (it must exist on the driver "
                                     "and executors)")
        if values["keystore_certificate_chain"] or values["keystore_key"]:
            raise ConfigurationError("Option 'kafka.ssl.keystore.location' excludes "
                                     "'kafka.ssl.keystore.certificate.chain'/'kafka.ssl.keystore.key'")
    elif bool(values["keystore_certificate_chain"]) != bool(values["keystore_key"]):
        raise ConfigurationError("Options 'kafka.ssl.keystore.certificate.chain' and "
                                 "'kafka.ssl.keystore.key' must be set together")
    protocol = get("ssl.protocol")
    enabled = get("ssl.enabled.protocols")
    names = []
    if enabled:
        for item in enabled.split(","):
            item = item.strip()
            if not item:
                continue
            if item.upper() not in _TLS_VERSIONS:
                raise ConfigurationError(f"Option 'kafka.ssl.enabled.protocols': unknown protocol "
                                         f"{item!r} (use TLSv1.2, TLSv1.3)")
            names.append(item.upper())
        order = list(_TLS_VERSIONS)
        names.sort(key=order.index)
        if names:
            values["tls_min_version"] = _TLS_VERSIONS[names[0]]
            values["tls_max_version"] = _TLS_VERSIONS[names[-1]]
    if protocol:
        upper = protocol.strip().upper()
        if upper in ("TLSV1.2", "TLSV1.1", "TLSV1"):
            # Java: ssl.protocol TLSv1.2 keeps TLS 1.3 off even if enabled.
            cap = _TLS_VERSIONS[upper]
            current = values.get("tls_max_version")
            order = list(_TLS_VERSIONS.values())
            if current is None or order.index(current) > order.index(cap):
                values["tls_max_version"] = cap
        elif upper not in ("TLS", "TLSV1.3", "SSL"):
            raise ConfigurationError(f"Option 'kafka.ssl.protocol' must be TLS, TLSv1.2 or "
                                     f"TLSv1.3, got {protocol!r}")
    suites = get("ssl.cipher.suites")
    if suites:
        values["ciphers"] = _openssl_ciphers(suites)
    return values


def _openssl_ciphers(suites: str) -> str | None:
    """IANA (Java) suite names -> an OpenSSL cipher string; TLS 1.3 suites are dropped
    (Python's ssl cannot restrict them)."""
    names = []
    for raw in suites.split(","):
        name = raw.strip()
        if not name:
            continue
        if name.startswith("TLS_") and "_WITH_" not in name:
            continue  # TLS 1.3 suite
        if name.startswith(("TLS_", "SSL_")):
            kx, _, cipher = name[4:].partition("_WITH_")
            kx_part = "" if kx == "RSA" else kx.replace("_", "-") + "-"
            cipher = cipher.replace("AES_128", "AES128").replace("AES_256", "AES256")
            cipher = cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20_POLY1305")
            cipher = cipher.replace("_CBC_", "_").replace("_", "-")
            names.append(kx_part + cipher)
        else:
            names.append(name)
    if not names:
        return None
    cipher_string = ":".join(names)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        context.set_ciphers(cipher_string)
    except ssl.SSLError:
        raise ConfigurationError(f"Option 'kafka.ssl.cipher.suites': none of {suites!r} is a "
                                 "TLS 1.2 cipher suite this Python's OpenSSL supports") from None
    return cipher_string


def _parse_sasl(get):
    mechanism = get("sasl.mechanism")
    supported = ", ".join(MECHANISMS)
    if mechanism is None:
        raise ConfigurationError(
            "Option 'kafka.sasl.mechanism' must be set with kafka.security.protocol SASL_*: "
            f"one of {supported} (Java's default GSSAPI/Kerberos is not supported)")
    mechanism = mechanism.strip().upper()
    if mechanism not in MECHANISMS:
        raise ConfigurationError(f"Option 'kafka.sasl.mechanism' {mechanism!r} is not supported;"
                                 f" use one of {supported}")
    values = {"mechanism": mechanism}
    jaas_text = get("sasl.jaas.config")
    module, jaas = parse_jaas_config(jaas_text) if jaas_text else ("", {})
    short = module.rsplit(".", 1)[-1]
    expected = {"PLAIN": "PlainLoginModule", "SCRAM-SHA-256": "ScramLoginModule",
                "SCRAM-SHA-512": "ScramLoginModule", "OAUTHBEARER": "OAuthBearerLoginModule"}
    if jaas_text and short != expected[mechanism]:
        raise ConfigurationError(
            f"Option 'kafka.sasl.jaas.config' names login module {short!r}, but "
            f"'kafka.sasl.mechanism' {mechanism} needs {expected[mechanism]}")
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        username = jaas.get("username", get("sasl.username"))
        password = jaas.get("password", get("sasl.password"))
        if username is None or password is None:
            package = "plain" if mechanism == "PLAIN" else "scram"
            raise ConfigurationError(
                f"SASL {mechanism} needs a username and password: set 'kafka.sasl.jaas.config' "
                f"to 'org.apache.kafka.common.security.{package}.{expected[mechanism]} required "
                "username=\"...\" password=\"...\";' or set 'kafka.sasl.username' and "
                "'kafka.sasl.password'")
        values["username"] = username
        values["password"] = password
        return values
    # OAUTHBEARER
    extensions = {}
    for key, value in jaas.items():
        if key.startswith("unsecuredLoginExtension_"):
            extensions[key[len("unsecuredLoginExtension_"):]] = value
    raw_ext = get("sasl.oauthbearer.extensions")
    if raw_ext:
        for item in raw_ext.split(","):
            key, sep, value = item.strip().partition("=")
            if not sep or not key:
                raise ConfigurationError("Option 'kafka.sasl.oauthbearer.extensions' must be "
                                         "key=value pairs separated by commas")
            extensions[key] = value
    for key in extensions:
        if key == "auth" or not key.isalpha():
            raise ConfigurationError(f"OAUTHBEARER extension name {key!r} is invalid (letters "
                                     "only, and not 'auth')")
    values["oauth_extensions"] = tuple(sorted(extensions.items()))
    provider = get("sasl.oauthbearer.token.provider")
    endpoint = get("sasl.oauthbearer.token.endpoint.url")
    if provider:
        if ":" not in provider:
            raise ConfigurationError("Option 'kafka.sasl.oauthbearer.token.provider' must be "
                                     "'package.module:callable'")
        resolve_callable(provider)  # import now: a typo fails the plan
        values["oauth_token_provider"] = provider
    elif endpoint:
        if not endpoint.startswith(("https://", "http://")):
            raise ConfigurationError("Option 'kafka.sasl.oauthbearer.token.endpoint.url' must "
                                     "be an http(s) URL")
        if "clientId" not in jaas or "clientSecret" not in jaas:
            raise ConfigurationError("OIDC (kafka.sasl.oauthbearer.token.endpoint.url) needs "
                                     "clientId and clientSecret in 'kafka.sasl.jaas.config'")
        values.update(oauth_token_endpoint=endpoint, oauth_client_id=jaas["clientId"],
                      oauth_client_secret=jaas["clientSecret"], oauth_scope=jaas.get("scope"))
    elif "unsecuredLoginStringClaim_sub" in jaas:
        values["oauth_unsecured_sub"] = jaas["unsecuredLoginStringClaim_sub"]
        lifetime = jaas.get("unsecuredLoginLifetimeSeconds", "3600")
        try:
            values["oauth_unsecured_lifetime_s"] = int(lifetime)
        except ValueError:
            raise ConfigurationError("JAAS option unsecuredLoginLifetimeSeconds must be an "
                                     "integer") from None
        claims = []
        for key, value in jaas.items():
            if key.startswith("unsecuredLoginStringClaim_") and key != "unsecuredLoginStringClaim_sub":
                claims.append((key[len("unsecuredLoginStringClaim_"):], value))
        if "unsecuredLoginListClaim_scope" in jaas:
            raw = jaas["unsecuredLoginListClaim_scope"]
            claims.append(("scope", [s for s in raw[1:].split(raw[0])] if raw else []))
        values["oauth_unsecured_claims"] = tuple(claims)
    else:
        raise ConfigurationError(
            "SASL OAUTHBEARER needs a token source: 'kafka.sasl.oauthbearer.token.provider', "
            "'kafka.sasl.oauthbearer.token.endpoint.url' (OIDC) or, for development, "
            "'kafka.sasl.jaas.config' with OAuthBearerLoginModule unsecuredLoginStringClaim_sub")
    return values


def resolve_callable(spec: str):
    module_name, _, attr = spec.partition(":")
    try:
        target = importlib.import_module(module_name.strip())
        for part in attr.strip().split("."):
            target = getattr(target, part)
    except Exception as exc:
        raise ConfigurationError(f"Option 'kafka.sasl.oauthbearer.token.provider': cannot "
                                 f"import {spec!r}: {type(exc).__name__}: {exc}") from None
    if not callable(target):
        raise ConfigurationError(f"Option 'kafka.sasl.oauthbearer.token.provider': {spec!r} "
                                 "is not callable")
    return target


# --- key stores -------------------------------------------------------------------

JKS_MAGIC = 0xFEEDFEED
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


def read_jks_certificates(data: bytes, password: str | None, option: str) -> list[bytes]:
    """DER certificates of a keytool JKS store's trusted-certificate entries (and the
    chains of its key entries). With a password the store's keyed SHA-1 digest is checked.

    Layout: magic 0xFEEDFEED, version 1|2, entry count; each entry a tag (1 private key,
    2 trusted certificate), alias (UTF), timestamp (int64) and its data; then 20 bytes of
    SHA-1 over (password as UTF-16BE, "Mighty Aphrodite", everything before).
    """
    def fail(why):
        return ConfigurationError(f"Option '{option}': not a readable JKS truststore ({why})")

    if len(data) < 12 + 20 or _U32.unpack_from(data, 0)[0] != JKS_MAGIC:
        if data[:4] == b"\xce\xce\xce\xce":
            raise fail("JCEKS stores are not supported; convert with keytool -importkeystore "
                       "-deststoretype PKCS12")
        raise fail("bad magic number; set 'kafka.ssl.truststore.type' to the store's type")
    version = _I32.unpack_from(data, 4)[0]
    if version not in (1, 2):
        raise fail(f"unknown version {version}")
    count = _I32.unpack_from(data, 8)[0]
    pos = 12
    certs = []

    def read_utf(pos):
        size = _U16.unpack_from(data, pos)[0]
        return data[pos + 2:pos + 2 + size], pos + 2 + size

    def read_cert(pos):
        if version == 2:
            cert_type, pos = read_utf(pos)
            if cert_type != b"X.509":
                raise fail(f"certificate type {cert_type!r}")
        size = _I32.unpack_from(data, pos)[0]
        if size < 0 or pos + 4 + size > len(data):
            raise fail("truncated certificate")
        return data[pos + 4:pos + 4 + size], pos + 4 + size

    try:
        for _ in range(count):
            tag = _I32.unpack_from(data, pos)[0]
            _alias, pos = read_utf(pos + 4)
            pos += 8  # timestamp
            if tag == 2:
                cert, pos = read_cert(pos)
                certs.append(cert)
            elif tag == 1:
                size = _I32.unpack_from(data, pos)[0]
                pos += 4 + size  # encrypted private key: not needed for trust
                chain = _I32.unpack_from(data, pos)[0]
                pos += 4
                for _ in range(chain):
                    cert, pos = read_cert(pos)
                    certs.append(cert)
            else:
                raise fail(f"unknown entry tag {tag}")
    except struct.error:
        raise fail("truncated") from None
    if pos + 20 != len(data):
        raise fail("trailing bytes after the entries")
    if password is not None:
        digest = hashlib.sha1()
        digest.update(password.encode("utf-16-be"))
        digest.update(b"Mighty Aphrodite")
        digest.update(data[:pos])
        if not hmac.compare_digest(digest.digest(), data[pos:]):
            raise ConfigurationError(
                f"Option '{option}': the JKS store's integrity check failed: wrong "
                "'kafka.ssl.truststore.password' or a corrupted file")
    if not certs:
        raise fail("no certificate entries")
    return certs


def _read_file(path, option):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigurationError(f"Option '{option}': cannot read {path!r}: "
                                 f"{exc.strerror}") from None


@dataclass
class TlsMaterial:
    """What an SSLContext is built from: trusted CAs (PEM) and the client chain/key."""

    cadata: str | None = None
    cert_chain_pem: bytes | None = None
    key: object = None   # a cryptography private key


def _pem_certs_from_der(ders) -> str:
    return "".join(ssl.DER_cert_to_PEM_cert(bytes(d)) for d in ders)


def load_tls_material(settings: SecuritySettings) -> TlsMaterial:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    material = TlsMaterial()
    option = "kafka.ssl.truststore.location"
    if settings.truststore_certificates:
        material.cadata = _check_pem_certs(settings.truststore_certificates.encode(),
                                           "kafka.ssl.truststore.certificates")
    elif settings.truststore_location:
        data = _read_file(settings.truststore_location, option)
        kind = settings.truststore_type
        if kind == "JKS":
            material.cadata = _pem_certs_from_der(
                read_jks_certificates(data, settings.truststore_password, option))
        elif kind == "PKCS12":
            password = settings.truststore_password
            try:
                _key, cert, extra = pkcs12.load_key_and_certificates(
                    data, password.encode() if password is not None else None)
            except ValueError:
                raise ConfigurationError(
                    f"Option '{option}': cannot open the PKCS12 truststore: wrong "
                    "'kafka.ssl.truststore.password' or not a PKCS12 file") from None
            ders = [c.public_bytes(serialization.Encoding.DER) for c in
                    ([cert] if cert is not None else []) + list(extra)]
            if not ders:
                raise ConfigurationError(f"Option '{option}': the PKCS12 truststore holds no "
                                         "certificates")
            material.cadata = _pem_certs_from_der(ders)
        else:
            material.cadata = _check_pem_certs(data, option)
    # client certificate
    key_bytes = chain_bytes = None
    if settings.keystore_certificate_chain:
        chain_bytes = settings.keystore_certificate_chain.encode()
        key_bytes = settings.keystore_key.encode()
        key_option = "kafka.ssl.keystore.key"
        chain_option = "kafka.ssl.keystore.certificate.chain"
    elif settings.keystore_location:
        key_option = chain_option = "kafka.ssl.keystore.location"
        data = _read_file(settings.keystore_location, key_option)
        if settings.keystore_type == "PKCS12":
            password = settings.keystore_password
            try:
                key, cert, extra = pkcs12.load_key_and_certificates(
                    data, password.encode() if password is not None else None)
            except ValueError:
                raise ConfigurationError(
                    "Option 'kafka.ssl.keystore.location': cannot open the PKCS12 keystore: wrong "
                    "'kafka.ssl.keystore.password' or not a PKCS12 file") from None
            if key is None or cert is None:
                raise ConfigurationError("Option 'kafka.ssl.keystore.location': the PKCS12 "
                                         "keystore holds no private key with its certificate")
            material.key = key
            material.cert_chain_pem = b"".join(
                c.public_bytes(serialization.Encoding.PEM) for c in [cert, *extra])
            return material
        key_bytes = chain_bytes = data
    else:
        return material
    _check_pem_certs(chain_bytes, chain_option)
    try:
        certs = x509.load_pem_x509_certificates(chain_bytes)
    except ValueError:
        raise ConfigurationError(f"Option '{chain_option}': no PEM certificate found") from None
    password = settings.key_password
    key_pem = _first_pem_key(key_bytes)
    if key_pem is None:
        raise ConfigurationError(f"Option '{key_option}': no PEM private key found")
    try:
        material.key = serialization.load_pem_private_key(
            key_pem, password.encode() if password is not None else None)
    except TypeError:
        raise ConfigurationError(f"Option '{key_option}': the private key is encrypted: set "
                                 "'kafka.ssl.key.password'" if password is None else
                                 f"Option '{key_option}': the key is not encrypted, but "
                                 "'kafka.ssl.key.password' is set") from None
    except ValueError:
        raise ConfigurationError(f"Option '{key_option}': cannot read the private key (wrong "
                                 "'kafka.ssl.key.password'?)") from None
    material.cert_chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    return material


def _first_pem_key(data: bytes) -> bytes | None:
    text = data.decode("ascii", "replace")
    start = text.find("-----BEGIN ")
    while start >= 0:
        line_end = text.find("-----", start + 11)
        label = text[start + 11:line_end]
        if "PRIVATE KEY" in label:
            end_marker = f"-----END {label}-----"
            end = text.find(end_marker, line_end)
            if end < 0:
                return None
            return text[start:end + len(end_marker)].encode()
        start = text.find("-----BEGIN ", line_end)
    return None


def _check_pem_certs(data: bytes, option: str) -> str:
    from cryptography import x509
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ConfigurationError(f"Option '{option}': no PEM certificate found (expected "
                                 "-----BEGIN CERTIFICATE----- blocks)") from None
    from cryptography.hazmat.primitives import serialization
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


# --- SSLContext (built where the connections are made, cached per settings) ---------

_contexts: dict = {}
_contexts_lock = threading.Lock()


def ssl_context(settings: SecuritySettings) -> ssl.SSLContext:
    key = _context_key(settings)
    with _contexts_lock:
        context = _contexts.get(key)
        if context is None:
            context = _contexts[key] = build_ssl_context(settings)
    return context


def _context_key(settings):
    return tuple(getattr(settings, f.name) for f in fields(settings))


def build_ssl_context(settings: SecuritySettings) -> ssl.SSLContext:
    material = load_tls_material(settings)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = settings.check_hostname
    if not settings.check_hostname:   # once per process and settings (contexts are cached)
        log.warning("kafka.ssl.endpoint.identification.algorithm is empty: broker certificates "
                    "are verified but their host names are not checked")
    if material.cadata:
        context.load_verify_locations(cadata=material.cadata)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    for attr, name in (("minimum_version", settings.tls_min_version),
                       ("maximum_version", settings.tls_max_version)):
        if name:
            setattr(context, attr, getattr(ssl.TLSVersion, name))
    if settings.ciphers:
        context.set_ciphers(settings.ciphers)
    if material.key is not None:
        _load_client_chain(context, material)
    return context


def _load_client_chain(context, material):
    """Python's ssl loads a client certificate only from files: write the chain and the
    key, encrypted under a one-time password, to a private temporary directory."""
    from cryptography.hazmat.primitives import serialization
    one_time = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="kafka_ds_tls_") as tmp:
        os.chmod(tmp, 0o700)
        chain_path = os.path.join(tmp, "chain.pem")
        key_path = os.path.join(tmp, "key.pem")
        with open(chain_path, "wb") as handle:
            handle.write(material.cert_chain_pem)
        with open(os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as handle:
            handle.write(material.key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(one_time.encode())))
        context.load_cert_chain(chain_path, key_path, password=one_time)


# --- SASL mechanisms ------------------------------------------------------------------

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
            salted = hashlib.pbkdf2_hmac(self.hash_name, self.password.encode(),
                                         base64.b64decode(salt), iterations)
            client_key = self._hmac(salted, b"Client Key")
            stored_key = hashlib.new(self.hash_name, client_key).digest()
            without_proof = f"c=biws,r={nonce}"
            auth_message = f"{self.client_first_bare},{text},{without_proof}".encode()
            client_signature = self._hmac(stored_key, auth_message)
            proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
            server_key = self._hmac(salted, b"Server Key")
            self.server_signature = self._hmac(server_key, auth_message)
            self.state = 2
            return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        if self.state == 2:
            if "e" in attrs:
                raise AuthenticationError(f"SCRAM server error: {attrs['e']}")
            signature = attrs.get("v")
            if signature is None or not hmac.compare_digest(
                    base64.b64decode(signature), self.server_signature):
                raise AuthenticationError(
                    "the broker's SCRAM server signature is wrong: it does not know the "
                    "password (a server impersonating the broker?)")
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


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_jwt(sub: str, lifetime_s: int = 3600, claims=(), now: float | None = None) -> str:
    """An unsecured JWT (alg none), like Kafka's OAuthBearerUnsecuredLoginCallbackHandler."""
    now = time.time() if now is None else now
    header = {"alg": "none"}
    payload = {"iat": now, "exp": now + lifetime_s, "sub": sub}
    payload.update(dict(claims))
    return (_b64url(json.dumps(header, separators=(",", ":")).encode()) + "."
            + _b64url(json.dumps(payload, separators=(",", ":")).encode()) + ".")


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
        return unsecured_jwt(settings.oauth_unsecured_sub, settings.oauth_unsecured_lifetime_s,
                             settings.oauth_unsecured_claims)
    key = _context_key(settings)
    with _token_lock:
        cached = _token_cache.get(key)
        if cached is not None and (cached[1] is None
                                   or cached[1] - TOKEN_REFRESH_MARGIN_S > time.time()):
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
        f"{urllib.parse.quote(settings.oauth_client_secret)}".encode()).decode()
    request = urllib.request.Request(
        settings.oauth_token_endpoint, data=urllib.parse.urlencode(form).encode(),
        headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                 "Content-Type": "application/x-www-form-urlencoded"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise AuthenticationError(
            f"OIDC token endpoint {settings.oauth_token_endpoint} refused client "
            f"{settings.oauth_client_id!r}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise AuthenticationError(f"OIDC token endpoint {settings.oauth_token_endpoint} "
                                  f"failed: {type(exc).__name__}") from None
    token = body.get("access_token")
    if not token:
        raise AuthenticationError(f"OIDC token endpoint {settings.oauth_token_endpoint} "
                                  "answered no access_token")
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


def make_mechanism(settings: SecuritySettings):
    if settings.mechanism == "PLAIN":
        return PlainMechanism(settings)
    if settings.mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramMechanism(settings)
    if settings.mechanism == "OAUTHBEARER":
        return OAuthBearerMechanism(settings)
    raise AuthenticationError(f"unsupported SASL mechanism {settings.mechanism}")


__all__ = ["SecuritySettings", "SECURITY_OPTIONS", "parse_jaas_config", "ssl_context",
           "read_jks_certificates", "make_mechanism", "unsecured_jwt"]


def security_options_markdown() -> str:
    """The README's security option table, made from SECURITY_OPTIONS."""
    lines = ["| option | applies to | default | meaning |", "| --- | --- | --- | --- |"]
    for name, applies, default, text in SECURITY_OPTIONS:
        lines.append(f"| `{name}` | {applies} | {default} | {text} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(security_options_markdown())
