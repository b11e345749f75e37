"""Apache Kafka with the listeners and the authorizer of the security tests (``kafka_secure``).

One KRaft node (tests/support/apache_kafka.py) with, besides PLAINTEXT (the suite's admin and
the inter-broker listener) and CONTROLLER:

============  ==============  ==========================================================
listener      protocol        what it checks
============  ==============  ==========================================================
``SASL``      SASL_PLAINTEXT  PLAIN (users in the JAAS entry), SCRAM-SHA-256/512 (users
                              created by ``kafka-storage format --add-scram``; more with
                              AlterUserScramCredentials), OAUTHBEARER (Kafka's unsecured
                              JWS validator, ``alg: none`` tokens)
``SASL_TLS``  SASL_SSL        the same mechanisms over TLS
``TLS``       SSL             TLS, no client certificate (principal ``User:ANONYMOUS``)
``MTLS``      SSL             TLS, ``ssl.client.auth=required`` (principal
                              ``User:mtls-client``, by ``ssl.principal.mapping.rules``)
``REAUTH``    SASL_PLAINTEXT  PLAIN and SCRAM-SHA-512 only, ``connections.max.reauth.ms``
                              1.5 s (KIP-368)
============  ==============  ==========================================================

Certificates come from ``trustme`` (one CA, a server certificate naming 127.0.0.1 only, a
client certificate), written as PEM into ``<cluster dir>/tls`` (:func:`cert_paths`); the
broker reads its key and certificate from a PKCS12 keystore and the CA from a PEM
truststore.

Authorizer: ``StandardAuthorizer``, ``allow.everyone.if.no.acl.found=false``. Super users:
``User:ANONYMOUS`` (the PLAINTEXT and CONTROLLER listeners: the suite's admin client, the
broker itself, the TLS listener's clients) and ``User:admin``. The security tests' main user
``alice`` (SASL) and ``mtls-client`` get ALL on every topic, group and transactional id
and on the cluster by ACLs made at start-up; every other principal has only the ACLs its
test gives it.
"""

from __future__ import annotations

import os

from tests.support.apache_kafka import KafkaCluster

SECRET = "s3cr3t-Pa55-XyZ"  # alice's password (tests/unit/test_security.py)
ADMIN_SECRET = "adm1n-Pa55-" + "Qw"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
LISTENERS = {
    "SASL": "SASL_PLAINTEXT",
    "SASL_TLS": "SASL_SSL",
    "TLS": "SSL",
    "MTLS": "SSL",
    "REAUTH": "SASL_PLAINTEXT",
}
# KIP-368 on the REAUTH listener: the broker announces this session lifetime and closes a
# connection whose session ran out without re-authenticating
REAUTH_MS = 1500
REAUTH_MECHANISMS = ("PLAIN", "SCRAM-SHA-512")
MTLS_PRINCIPAL = "mtls-client"
KEYSTORE_PASSWORD = "server-store-pass"
# users whose name PLAIN knows from the broker's JAAS entry: (name, password)
CONNECTION_STRING = (
    "Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName="
    "RootManageSharedAccessKey;SharedAccessKey=" + SECRET + "="
)
PLAIN_USERS = {"alice": SECRET, "admin": ADMIN_SECRET, "$ConnectionString": CONNECTION_STRING}
# more PLAIN/SCRAM users for the ACL tests (no ACL of their own: each test grants them)
ACL_USERS = {"reader": "r3ader-Pa55", "eos": "e0s-Pa55", "nobody": "n0body-Pa55"}
SCRAM_USERS = {"alice": SECRET, "admin": ADMIN_SECRET, **ACL_USERS}
PLAIN_USERS.update(ACL_USERS)
# principals with every right, by ACLs (not super users: the authorizer decides for them)
FULL_RIGHTS = ("alice", MTLS_PRINCIPAL)

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def cert_paths(directory: str) -> dict:
    """The PEM files of the cluster in ``directory`` (the keys of tests/unit/test_security's
    ``certs`` fixture, plus the server's)."""
    tls = os.path.join(directory, "tls")
    return {
        "dir": tls,
        "ca": os.path.join(tls, "ca.pem"),
        "client_cert": os.path.join(tls, "client.pem"),
        "client_key": os.path.join(tls, "client.key"),
        "client_combined": os.path.join(tls, "client-combined.pem"),
        "server_keystore": os.path.join(tls, "server.p12"),
    }


def _write_certificates(directory: str) -> dict:
    import trustme
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import pkcs12

    paths = cert_paths(directory)
    os.makedirs(paths["dir"], exist_ok=True)
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")  # not "localhost": the host name tests
    client = ca.issue_cert("client@kafka-ds.test")
    ca.cert_pem.write_to_path(paths["ca"])
    client.cert_chain_pems[0].write_to_path(paths["client_cert"])
    client.private_key_pem.write_to_path(paths["client_key"])
    with open(paths["client_combined"], "wb") as out:
        out.write(
            client.private_key_pem.bytes() + b"".join(pem.bytes() for pem in client.cert_chain_pems)
        )
    key = serialization.load_pem_private_key(server.private_key_pem.bytes(), None)
    # the key types PKCS#12 can hold (trustme makes EC or RSA keys)
    assert isinstance(
        key,
        (
            rsa.RSAPrivateKey,
            dsa.DSAPrivateKey,
            ec.EllipticCurvePrivateKey,
            ed25519.Ed25519PrivateKey,
            ed448.Ed448PrivateKey,
        ),
    )
    chain = [x509.load_pem_x509_certificate(pem.bytes()) for pem in server.cert_chain_pems]
    with open(paths["server_keystore"], "wb") as out:
        out.write(
            pkcs12.serialize_key_and_certificates(
                b"server",
                key,
                chain[0],
                chain[1:] or None,
                serialization.BestAvailableEncryption(KEYSTORE_PASSWORD.encode()),
            )
        )
    return paths


def _jaas_plain() -> str:
    users = " ".join(f'user_{name}="{password}"' for name, password in PLAIN_USERS.items())
    return f'{PLAIN_MODULE} required username="admin" password="{ADMIN_SECRET}" {users};'


def _prepare(cluster: KafkaCluster) -> dict:
    paths = _write_certificates(cluster.directory)
    settings = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "allow.everyone.if.no.acl.found": "false",
        # a refused login is answered at once (the default waits 100 ms)
        "connection.failed.authentication.delay.ms": "0",
    }
    tls = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": paths["server_keystore"],
        "ssl.keystore.password": KEYSTORE_PASSWORD,
        "ssl.key.password": KEYSTORE_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": paths["ca"],
    }
    for listener in ("sasl_tls", "tls", "mtls"):
        for key, value in tls.items():
            settings[f"listener.name.{listener}.{key}"] = value
    settings["listener.name.mtls.ssl.client.auth"] = "required"
    settings["listener.name.mtls.ssl.principal.mapping.rules"] = (
        f"RULE:^.*$/{MTLS_PRINCIPAL}/,DEFAULT"
    )
    for listener in ("sasl", "sasl_tls", "reauth"):
        prefix = f"listener.name.{listener}."
        if listener == "reauth":
            for mechanism in REAUTH_MECHANISMS:
                settings[prefix + f"{mechanism.lower()}.connections.max.reauth.ms"] = str(REAUTH_MS)
        settings[prefix + "sasl.enabled.mechanisms"] = (
            ",".join(REAUTH_MECHANISMS) if listener == "reauth" else ",".join(MECHANISMS)
        )
        settings[prefix + "plain.sasl.jaas.config"] = _jaas_plain()
        for mechanism in ("scram-sha-256", "scram-sha-512"):
            settings[prefix + f"{mechanism}.sasl.jaas.config"] = f"{SCRAM_MODULE} required;"
        # Kafka's unsecured JWS validator (its default for OAUTHBEARER when no server
        # callback handler is configured), named here so that a change of default shows
        settings[prefix + "oauthbearer.sasl.jaas.config"] = (
            f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="admin";'
        )
        settings[prefix + "oauthbearer.sasl.server.callback.handler.class"] = (
            "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
            "OAuthBearerUnsecuredValidatorCallbackHandler"
        )
    return settings


def _format_args() -> tuple:
    args = []
    for name, password in SCRAM_USERS.items():
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            args += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
    return tuple(args)


def grant(cluster: KafkaCluster, principal: str, acls, timeout: float = 30.0):
    """Create ACLs for ``User:principal``: ``acls`` is a list of
    ``(resource type, name, pattern, operation)`` with confluent-kafka's enum names, e.g.
    ``("TOPIC", "t1", "LITERAL", "READ")``; ALLOW from any host."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    bindings = [
        AclBinding(
            ResourceType[rtype],
            name,
            ResourcePatternType[pattern],
            f"User:{principal}",
            "*",
            AclOperation[operation],
            AclPermissionType.ALLOW,
        )
        for rtype, name, pattern, operation in acls
    ]
    futures = cluster.admin().create_acls(bindings, request_timeout=timeout)
    for future in futures.values():
        future.result(timeout)


def _ready(cluster: KafkaCluster):
    for principal in FULL_RIGHTS:
        grant(
            cluster,
            principal,
            [
                ("TOPIC", "*", "LITERAL", "ALL"),
                ("GROUP", "*", "LITERAL", "ALL"),
                ("TRANSACTIONAL_ID", "*", "LITERAL", "ALL"),
                ("BROKER", "kafka-cluster", "LITERAL", "ALL"),
            ],
        )


# The entry of tests/conftest.py's SHARED_KAFKA: one node, a smaller heap than `kafka`'s.
CLUSTER_ARGS = {
    "listeners": LISTENERS,
    "format_args": _format_args(),
    "prepare": _prepare,
    "ready": _ready,
    "heap": "256m",
}
