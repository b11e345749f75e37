"""How to reach a Schema Registry: :class:`RegistrySettings`, picklable (it goes to the
executors), hashable (``registry_for`` keeps one client per settings), and with every
secret redacted from its repr."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import ConfigurationError

URL = "schema.registry.url"
BASIC_AUTH_USER_INFO = "schema.registry.basic.auth.user.info"
BEARER_AUTH_TOKEN = "schema.registry.bearer.auth.token"
SSL_CA_LOCATION = "schema.registry.ssl.ca.location"
SSL_CERTIFICATE_LOCATION = "schema.registry.ssl.certificate.location"
SSL_KEY_LOCATION = "schema.registry.ssl.key.location"
REQUEST_TIMEOUT_MS = "schema.registry.request.timeout.ms"
RETRY_BUDGET_MS = "schema.registry.retry.budget.ms"

DEFAULT_REQUEST_TIMEOUT_MS = 30_000
# A registry restarting (tens of seconds) delays a query rather than failing it, as
# kafka.default.api.timeout.ms (60 s) does for brokers.
DEFAULT_RETRY_BUDGET_MS = 60_000

_REDACTED = "***"


def redact_user_info(user_info: str | None) -> str | None:
    """``key:secret`` -> ``key:***`` (the key names the account and helps find the fault)."""
    if user_info is None:
        return None
    key, _, _ = user_info.partition(":")
    return f"{key}:{_REDACTED}"


@dataclass(frozen=True, repr=False)
class RegistrySettings:
    #: base URLs, tried in turn while one fails (connection error, 5xx, 429)
    urls: tuple
    #: HTTP basic auth as ``key:secret``
    basic_auth_user_info: str | None = None
    bearer_auth_token: str | None = None
    #: PEM file of the CAs that sign the registry's certificate (default: the system's)
    ssl_ca_location: str | None = None
    #: client certificate (PEM; may hold the key too) and key for mutual TLS
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    #: one HTTP request
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    #: all attempts of one call together, back-off sleeps included
    retry_budget_ms: int = DEFAULT_RETRY_BUDGET_MS

    def __post_init__(self):
        if isinstance(self.urls, str):
            object.__setattr__(self, "urls", split_urls(self.urls))
        else:
            object.__setattr__(self, "urls", tuple(self.urls))
        if not self.urls:
            raise ConfigurationError(
                f"'{URL}' names no URL; set it to the registry's "
                "http(s)://host:port (comma-separated for several)"
            )
        for url in self.urls:
            _check_url(url)
        if self.basic_auth_user_info is not None and ":" not in self.basic_auth_user_info:
            raise ConfigurationError(
                f"'{BASIC_AUTH_USER_INFO}' must be 'key:secret' (got "
                f"{len(self.basic_auth_user_info)} characters with no ':'; not shown, "
                "it may be the secret)"
            )
        if self.basic_auth_user_info is not None and self.bearer_auth_token is not None:
            raise ConfigurationError(
                f"set either '{BASIC_AUTH_USER_INFO}' or '{BEARER_AUTH_TOKEN}', not both"
            )
        if self.ssl_key_location and not self.ssl_certificate_location:
            raise ConfigurationError(
                f"'{SSL_KEY_LOCATION}' needs '{SSL_CERTIFICATE_LOCATION}' "
                "(the client certificate the key belongs to)"
            )
        for name, value in (
            (REQUEST_TIMEOUT_MS, self.request_timeout_ms),
            (RETRY_BUDGET_MS, self.retry_budget_ms),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigurationError(
                    f"'{name}' must be a positive number of milliseconds, got {value!r}"
                )

    def __repr__(self):
        fields = [f"urls={self.urls!r}"]
        if self.basic_auth_user_info is not None:
            fields.append(f"basic_auth_user_info={redact_user_info(self.basic_auth_user_info)!r}")
        if self.bearer_auth_token is not None:
            fields.append(f"bearer_auth_token={_REDACTED!r}")
        for name in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location"):
            if getattr(self, name) is not None:
                fields.append(f"{name}={getattr(self, name)!r}")
        fields.append(f"request_timeout_ms={self.request_timeout_ms}")
        fields.append(f"retry_budget_ms={self.retry_budget_ms}")
        return f"RegistrySettings({', '.join(fields)})"

    __str__ = __repr__

    @classmethod
    def from_options(cls, lower_cased_options: dict) -> RegistrySettings:
        """The settings from a query's options (keys lower-cased, values strings)."""
        options = lower_cased_options
        if not options.get(URL, "").strip():
            raise ConfigurationError(
                f"'{URL}' is required to use a schema registry; set it "
                "to http(s)://host:port (comma-separated for several)"
            )

        def text(name):
            value = options.get(name)
            return value if value not in (None, "") else None

        def millis(name, default):
            raw = options.get(name)
            if raw in (None, ""):
                return default
            try:
                return int(str(raw).strip())
            except ValueError:
                raise ConfigurationError(
                    f"'{name}' must be a whole number of milliseconds, got {raw!r}"
                ) from None

        return cls(
            urls=split_urls(options[URL]),
            basic_auth_user_info=text(BASIC_AUTH_USER_INFO),
            bearer_auth_token=text(BEARER_AUTH_TOKEN),
            ssl_ca_location=text(SSL_CA_LOCATION),
            ssl_certificate_location=text(SSL_CERTIFICATE_LOCATION),
            ssl_key_location=text(SSL_KEY_LOCATION),
            request_timeout_ms=millis(REQUEST_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS),
            retry_budget_ms=millis(RETRY_BUDGET_MS, DEFAULT_RETRY_BUDGET_MS),
        )


def split_urls(text: str) -> tuple:
    return tuple(url.strip().rstrip("/") for url in text.split(",") if url.strip())


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"'{URL}': {_without_user_info(url)!r} is not an http:// or https:// URL with a host"
        )
    if parts.username is not None or parts.password is not None:
        # Credentials in a URL end up in logs and error messages: they have their own option.
        raise ConfigurationError(
            f"'{URL}': {_without_user_info(url)!r} carries credentials; remove them from the "
            f"URL and set '{BASIC_AUTH_USER_INFO}' to 'key:secret' instead"
        )
    try:
        _ = parts.port  # urllib checks the port when it is read
    except ValueError:
        raise ConfigurationError(f"'{URL}': {url!r} has an invalid port") from None


def _without_user_info(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0]:
        rest = f"{_REDACTED}@" + rest.split("@", 1)[1]
    return f"{scheme}{sep}{rest}"
