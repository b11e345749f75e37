"""The TLS/SASL options (``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.*``) parsed
into :class:`~.settings.SecuritySettings` on the driver at plan time: every error names the
option, and key stores and JAAS entries are read there, so a wrong password fails the plan
instead of every task. (The options' declarations: ``kafka_ds.options.client_declarations``.)
"""

from __future__ import annotations

import os
import ssl
import threading

from ...errors import ConfigurationError
from .jaas import parse_jaas_config
from .oauth import resolve_callable
from .settings import MECHANISMS, SECURITY_PROTOCOLS, STORE_TYPES, SecuritySettings
from .tls import load_tls_material


def security_settings(params: dict, *, check_files: bool = True) -> SecuritySettings:
    """From the ``kafka.*`` params with the prefix removed (keys lower case).

    Cached per distinct security params: every task builds a client, and reading a
    PKCS12 store (key derivation) is not free.
    """
    key = (
        check_files,
        tuple(
            sorted(
                (k, str(v))
                for k, v in params.items()
                if k.startswith(("security.", "ssl.", "sasl."))
            )
        ),
    )
    with _settings_lock:
        cached = _settings_cache.get(key)
    if cached is not None:
        return cached
    settings = _parse(params, check_files)
    with _settings_lock:
        if len(_settings_cache) > 64:
            _settings_cache.clear()
        _settings_cache[key] = settings
    return settings


def _parse(params: dict, check_files: bool) -> SecuritySettings:
    get = _getter(params)
    protocol = (get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigurationError(
            f"Option 'kafka.security.protocol' must be one of {', '.join(SECURITY_PROTOCOLS)},"
            f" got {protocol!r}"
        )
    values: dict = {"protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        values.update(_parse_tls(get, params, check_files))
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        values.update(_parse_sasl(get))
    settings = SecuritySettings(**values)
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


_TLS_VERSIONS = {"TLSV1": "TLSv1", "TLSV1.1": "TLSv1_1", "TLSV1.2": "TLSv1_2", "TLSV1.3": "TLSv1_3"}


def _parse_tls(get, params, check_files):
    values: dict = {}
    algorithm = get("ssl.endpoint.identification.algorithm")
    if algorithm is None and "ssl.endpoint.identification.algorithm" in params:
        values["check_hostname"] = False  # set, but empty: Java's way to turn the check off
    elif algorithm is not None and algorithm.strip().lower() != "https":
        raise ConfigurationError(
            "Option 'kafka.ssl.endpoint.identification.algorithm' must be 'https' or empty, "
            f"got {algorithm!r}"
        )
    location = get("ssl.truststore.location")
    values["truststore_location"] = location
    values["truststore_type"] = _store_type(get, "truststore", location)
    values["truststore_password"] = get("ssl.truststore.password")
    values["truststore_certificates"] = get("ssl.truststore.certificates")
    if location and values["truststore_certificates"]:
        raise ConfigurationError(
            "Options 'kafka.ssl.truststore.location' and "
            "'kafka.ssl.truststore.certificates' exclude each other"
        )
    if location and check_files and not os.path.isfile(location):
        raise ConfigurationError(
            f"Option 'kafka.ssl.truststore.location': file {location!r} "
            "does not exist (it must exist on the driver and executors)"
        )
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
                f"{os.path.splitext(klocation)[0]}.p12 -deststoretype PKCS12"
            )
        if check_files and not os.path.isfile(klocation):
            raise ConfigurationError(
                f"Option 'kafka.ssl.keystore.location': file "
                f"{klocation!r} does not exist (it must exist on the driver "
                "and executors)"
            )
        if values["keystore_certificate_chain"] or values["keystore_key"]:
            raise ConfigurationError(
                "Option 'kafka.ssl.keystore.location' excludes "
                "'kafka.ssl.keystore.certificate.chain'/'kafka.ssl.keystore.key'"
            )
    elif bool(values["keystore_certificate_chain"]) != bool(values["keystore_key"]):
        raise ConfigurationError(
            "Options 'kafka.ssl.keystore.certificate.chain' and "
            "'kafka.ssl.keystore.key' must be set together"
        )
    protocol = get("ssl.protocol")
    enabled = get("ssl.enabled.protocols")
    names = []
    if enabled:
        for item in enabled.split(","):
            item = item.strip()
            if not item:
                continue
            if item.upper() not in _TLS_VERSIONS:
                raise ConfigurationError(
                    f"Option 'kafka.ssl.enabled.protocols': unknown protocol "
                    f"{item!r} (use TLSv1.2, TLSv1.3)"
                )
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
            raise ConfigurationError(
                f"Option 'kafka.ssl.protocol' must be TLS, TLSv1.2 or TLSv1.3, got {protocol!r}"
            )
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
        raise ConfigurationError(
            f"Option 'kafka.ssl.cipher.suites': none of {suites!r} is a "
            "TLS 1.2 cipher suite this Python's OpenSSL supports"
        ) from None
    return cipher_string


def _parse_sasl(get):
    mechanism = get("sasl.mechanism")
    supported = ", ".join(MECHANISMS)
    if mechanism is None:
        raise ConfigurationError(
            "Option 'kafka.sasl.mechanism' must be set with kafka.security.protocol SASL_*: "
            f"one of {supported} (Java's default GSSAPI/Kerberos is not supported)"
        )
    mechanism = mechanism.strip().upper()
    if mechanism not in MECHANISMS:
        raise ConfigurationError(
            f"Option 'kafka.sasl.mechanism' {mechanism!r} is not supported; use one of {supported}"
        )
    values = {"mechanism": mechanism}
    jaas_text = get("sasl.jaas.config")
    module, jaas = parse_jaas_config(jaas_text) if jaas_text else ("", {})
    short = module.rsplit(".", 1)[-1]
    expected = {
        "PLAIN": "PlainLoginModule",
        "SCRAM-SHA-256": "ScramLoginModule",
        "SCRAM-SHA-512": "ScramLoginModule",
        "OAUTHBEARER": "OAuthBearerLoginModule",
    }
    if jaas_text and short != expected[mechanism]:
        raise ConfigurationError(
            f"Option 'kafka.sasl.jaas.config' names login module {short!r}, but "
            f"'kafka.sasl.mechanism' {mechanism} needs {expected[mechanism]}"
        )
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        username = jaas.get("username", get("sasl.username"))
        password = jaas.get("password", get("sasl.password"))
        if username is None or password is None:
            package = "plain" if mechanism == "PLAIN" else "scram"
            raise ConfigurationError(
                f"SASL {mechanism} needs a username and password: set 'kafka.sasl.jaas.config' "
                f"to 'org.apache.kafka.common.security.{package}.{expected[mechanism]} required "
                'username="..." password="...";\' or set \'kafka.sasl.username\' and '
                "'kafka.sasl.password'"
            )
        values["username"] = username
        values["password"] = password
        return values
    # OAUTHBEARER
    extensions = {}
    for key, value in jaas.items():
        if key.startswith("unsecuredLoginExtension_"):
            extensions[key[len("unsecuredLoginExtension_") :]] = value
    raw_ext = get("sasl.oauthbearer.extensions")
    if raw_ext:
        for item in raw_ext.split(","):
            key, sep, value = item.strip().partition("=")
            if not sep or not key:
                raise ConfigurationError(
                    "Option 'kafka.sasl.oauthbearer.extensions' must be "
                    "key=value pairs separated by commas"
                )
            extensions[key] = value
    for key in extensions:
        if key == "auth" or not key.isalpha():
            raise ConfigurationError(
                f"OAUTHBEARER extension name {key!r} is invalid (letters only, and not 'auth')"
            )
    values["oauth_extensions"] = tuple(sorted(extensions.items()))
    provider = get("sasl.oauthbearer.token.provider")
    endpoint = get("sasl.oauthbearer.token.endpoint.url")
    if provider:
        if ":" not in provider:
            raise ConfigurationError(
                "Option 'kafka.sasl.oauthbearer.token.provider' must be 'package.module:callable'"
            )
        resolve_callable(provider)  # import now: a typo fails the plan
        values["oauth_token_provider"] = provider
    elif endpoint:
        if not endpoint.startswith(("https://", "http://")):
            raise ConfigurationError(
                "Option 'kafka.sasl.oauthbearer.token.endpoint.url' must be an http(s) URL"
            )
        if "clientId" not in jaas or "clientSecret" not in jaas:
            raise ConfigurationError(
                "OIDC (kafka.sasl.oauthbearer.token.endpoint.url) needs "
                "clientId and clientSecret in 'kafka.sasl.jaas.config'"
            )
        values.update(
            oauth_token_endpoint=endpoint,
            oauth_client_id=jaas["clientId"],
            oauth_client_secret=jaas["clientSecret"],
            oauth_scope=jaas.get("scope"),
        )
    elif "unsecuredLoginStringClaim_sub" in jaas:
        values["oauth_unsecured_sub"] = jaas["unsecuredLoginStringClaim_sub"]
        lifetime = jaas.get("unsecuredLoginLifetimeSeconds", "3600")
        try:
            values["oauth_unsecured_lifetime_s"] = int(lifetime)
        except ValueError:
            raise ConfigurationError(
                "JAAS option unsecuredLoginLifetimeSeconds must be an integer"
            ) from None
        claims = []
        for key, value in jaas.items():
            if (
                key.startswith("unsecuredLoginStringClaim_")
                and key != "unsecuredLoginStringClaim_sub"
            ):
                claims.append((key[len("unsecuredLoginStringClaim_") :], value))
        if "unsecuredLoginListClaim_scope" in jaas:
            raw = jaas["unsecuredLoginListClaim_scope"]
            claims.append(("scope", [s for s in raw[1:].split(raw[0])] if raw else []))
        values["oauth_unsecured_claims"] = tuple(claims)
    else:
        raise ConfigurationError(
            "SASL OAUTHBEARER needs a token source: 'kafka.sasl.oauthbearer.token.provider', "
            "'kafka.sasl.oauthbearer.token.endpoint.url' (OIDC) or, for development, "
            "'kafka.sasl.jaas.config' with OAuthBearerLoginModule unsecuredLoginStringClaim_sub"
        )
    return values
