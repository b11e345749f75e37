"""Declarations of the TLS and SASL options (``kafka.security.protocol``, ``kafka.ssl.*``,
``kafka.sasl.*``), for the security page's option table and the name checks. They are parsed
together into one ``SecuritySettings`` by ``kafka_ds.client.security.parse``
(:func:`.client_declarations.parse_security`)."""

from __future__ import annotations

from .core import READ_WRITE, Option

SECURITY_OPTIONS: tuple[Option, ...] = (
    Option(
        "kafka.security.protocol",
        READ_WRITE,
        "`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`; used on every connection "
        "(bootstrap, leaders, coordinators, driver and executors).",
        shown_default="`PLAINTEXT`",
    ),
    Option(
        "kafka.ssl.endpoint.identification.algorithm",
        READ_WRITE,
        "`https` checks that the broker certificate names the broker host; empty turns "
        "the hostname check off (logged as a warning). The certificate chain is always "
        "verified.",
        shown_default="`https`",
    ),
    Option(
        "kafka.ssl.truststore.type",
        READ_WRITE,
        "`PEM`, `PKCS12` or `JKS` (the certificate entries of a `keytool` store).",
        shown_default="by file extension: `.p12`/`.pfx` PKCS12, `.pem`/`.crt` PEM, "
        "else JKS (Java's default)",
    ),
    Option(
        "kafka.ssl.truststore.location",
        READ_WRITE,
        "File of trusted CA certificates; without it and without "
        "`kafka.ssl.truststore.certificates` the system CAs are trusted.",
        shown_default="(system CA bundle)",
    ),
    Option(
        "kafka.ssl.truststore.password",
        READ_WRITE,
        "Password of a PKCS12/JKS truststore (JKS: checks the store's integrity).",
    ),
    Option(
        "kafka.ssl.truststore.certificates", READ_WRITE, "Trusted CA certificates inline, PEM text."
    ),
    Option(
        "kafka.ssl.keystore.type",
        READ_WRITE,
        "`PEM` or `PKCS12` client certificate store for mutual TLS. A JKS keystore is "
        "refused with the `keytool` command that converts it to PKCS12.",
        shown_default="by file extension, as the truststore",
    ),
    Option("kafka.ssl.keystore.location", READ_WRITE, "Client certificate chain and key."),
    Option("kafka.ssl.keystore.password", READ_WRITE, "Password of the keystore."),
    Option(
        "kafka.ssl.key.password",
        READ_WRITE,
        "Password of the private key (PEM keystore, or PKCS12 whose key has its own).",
    ),
    Option(
        "kafka.ssl.keystore.certificate.chain",
        READ_WRITE,
        "Client certificate chain inline, PEM text (with `kafka.ssl.keystore.key`).",
    ),
    Option(
        "kafka.ssl.keystore.key",
        READ_WRITE,
        "Client private key inline, PEM text (encrypted keys use `kafka.ssl.key.password`).",
    ),
    Option(
        "kafka.ssl.protocol",
        READ_WRITE,
        "`TLSv1.2` caps the connection at TLS 1.2, as in Java; `TLS`/`TLSv1.3` leave it open.",
        shown_default="`TLSv1.3`",
    ),
    Option(
        "kafka.ssl.enabled.protocols",
        READ_WRITE,
        "Lowest and highest TLS versions allowed.",
        shown_default="`TLSv1.2,TLSv1.3`",
    ),
    Option(
        "kafka.ssl.cipher.suites",
        READ_WRITE,
        "TLS 1.2 cipher suites, IANA (Java) or OpenSSL names. Python cannot restrict "
        "TLS 1.3 suites; those names are accepted and ignored.",
        shown_default="(OpenSSL defaults)",
    ),
    Option(
        "kafka.sasl.mechanism",
        READ_WRITE,
        "`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` or `OAUTHBEARER` (Java's default "
        "GSSAPI is not supported, so it must be set).",
        shown_default="(required for `SASL_*`)",
    ),
    Option(
        "kafka.sasl.jaas.config",
        READ_WRITE,
        "JAAS entry as for the Java client: `PlainLoginModule`/`ScramLoginModule` with "
        "`username`/`password`, `OAuthBearerLoginModule` with "
        "`unsecuredLoginStringClaim_sub` (unsecured development token) or "
        "`clientId`/`clientSecret`/`scope` (OIDC).",
    ),
    Option(
        "kafka.sasl.username",
        READ_WRITE,
        "Username for PLAIN/SCRAM instead of the JAAS entry (confluent-kafka style).",
    ),
    Option("kafka.sasl.password", READ_WRITE, "Password to go with `kafka.sasl.username`."),
    Option(
        "kafka.sasl.oauthbearer.token.provider",
        READ_WRITE,
        "`package.module:callable` returning a token or `(token, "
        "expiry_epoch_seconds)`; imported on the driver and on executors (e.g. MSK IAM,"
        " Azure).",
    ),
    Option(
        "kafka.sasl.oauthbearer.token.endpoint.url",
        READ_WRITE,
        "OIDC token endpoint (client-credentials grant, KIP-768); the JAAS entry gives "
        "`clientId`, `clientSecret` and optional `scope`.",
    ),
    Option(
        "kafka.sasl.oauthbearer.extensions",
        READ_WRITE,
        "SASL extensions sent with the token, `key=value` comma-separated (the JAAS "
        "entry's `unsecuredLoginExtension_<key>` options work too).",
    ),
)
