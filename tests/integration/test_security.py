"""TLS and SASL (issue 12) against Apache Kafka's own listeners (issue 38).

The broker: ``kafka_secure`` (tests/conftest.py, tests/support/secure_kafka.py), one KRaft
node with listeners ``SASL`` (SASL_PLAINTEXT: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with
Kafka's unsecured-token validator), ``SASL_TLS`` (the same over TLS), ``TLS``, ``MTLS``
(``ssl.client.auth=required``) and ``REAUTH`` (``connections.max.reauth.ms``), and the
StandardAuthorizer (ACL tests: tests/integration/test_acls.py). Each listener is first proven
with confluent-kafka, then kafka_ds runs through it.

The hand-written proxy (tests/support/secure_proxy.py) stays only for what a broker does not
do on request: a wrong SCRAM server signature, and showing which SASL extensions arrived.
Spark: tests/spark/test_security.py; what needs no broker: tests/unit/test_security.py.
"""

from __future__ import annotations

import base64
import logging
import time
import uuid

import pytest
from confluent_kafka import KafkaException

from kafka_ds.client import KafkaClient
from kafka_ds.client.security.oauth import unsecured_jwt
from kafka_ds.errors import (
    AuthenticationError,
    ConfigurationError,
    KafkaConnectionError,
    SecurityProtocolMismatchError,
    TlsError,
)
from tests.support import secure_kafka
from tests.support.secure_proxy import SecureProxy
from tests.unit.test_security import (
    OAUTH_MODULE,
    SECRET,
    client_config,
    jaas,
    keytool_stores,  # noqa: F401  (fixture)
)

pytestmark = pytest.mark.integration

USERS = {"alice": SECRET}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
LISTENER_OF = {
    "sasl": "SASL",
    "sasl_ssl": "SASL_TLS",
    "ssl": "TLS",
    "mtls": "MTLS",
    "reauth": "REAUTH",
}


# --- fixtures ------------------------------------------------------------------------


class SecureListener:
    """One listener of ``kafka_secure``: ``bootstrap_servers`` and ``port``."""

    def __init__(self, cluster, kind):
        self.cluster = cluster
        self.kind = kind
        self.bootstrap_servers = cluster.listener_servers(LISTENER_OF[kind])
        self.port = int(self.bootstrap_servers.split(",")[0].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def proxies(kafka_secure):
    """``proxies(kind)``: the broker's listener of that kind (``ssl``, ``mtls``, ``sasl``,
    ``sasl_ssl``, ``reauth``). (The name is the one the tests used for the proxies.)"""
    return lambda kind: SecureListener(kafka_secure, kind)


@pytest.fixture(scope="module")
def certs(kafka_secure):
    """The broker's CA and the client certificate it trusts, as PEM files:
    ``(None, None, paths)`` in the shape of tests/unit/test_security.py's ``certs``."""
    return None, None, secure_kafka.cert_paths(kafka_secure.directory)


def kds_options(kind, mechanism, paths):
    """kafka.* options (without the prefix) for kafka_ds in one listener kind."""
    opts = {}
    if kind in ("ssl", "mtls", "sasl_ssl"):
        opts["security.protocol"] = "SASL_SSL" if kind == "sasl_ssl" else "SSL"
        opts["ssl.truststore.location"] = paths["ca"]
        opts["ssl.truststore.type"] = "PEM"
    if kind == "mtls":
        opts["ssl.keystore.type"] = "PEM"
        opts["ssl.keystore.location"] = paths["client_combined"]
    if kind == "sasl":
        opts["security.protocol"] = "SASL_PLAINTEXT"
    if mechanism:
        opts["sasl.mechanism"] = mechanism
        opts["sasl.jaas.config"] = jaas(mechanism)
    return opts


def confluent_conf(proxy, kind, mechanism, paths, password=SECRET):
    conf = {"bootstrap.servers": proxy.bootstrap_servers}
    if kind in ("ssl", "mtls", "sasl_ssl"):
        conf["security.protocol"] = "SASL_SSL" if kind == "sasl_ssl" else "SSL"
        conf["ssl.ca.location"] = paths["ca"]
    if kind == "mtls":
        conf["ssl.certificate.location"] = paths["client_cert"]
        conf["ssl.key.location"] = paths["client_key"]
    if kind == "sasl":
        conf["security.protocol"] = "SASL_PLAINTEXT"
    if mechanism:
        conf["sasl.mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            conf["sasl.oauthbearer.config"] = "principal=alice"
            conf["enable.sasl.oauthbearer.unsecure.jwt"] = True
        else:
            conf["sasl.username"] = "alice"
            conf["sasl.password"] = password
    return conf


def create_topic(conf, partitions=1):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"sec-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(conf)  # kept referenced until the futures resolve
    futures = admin.create_topics([NewTopic(topic, partitions, 1)])
    for future in futures.values():
        future.result(20)
    del admin
    return topic


def confluent_produce(conf, topic, values):
    from confluent_kafka import Producer

    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(20) == 0


def confluent_consume(conf, topic, count, partitions=(0,)):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    got = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got


MODES = (
    [("ssl", None), ("mtls", None)]
    + [("sasl", m) for m in MECHANISMS]
    + [("sasl_ssl", "SCRAM-SHA-512"), ("sasl_ssl", "OAUTHBEARER")]
)
MODE_IDS = [f"{k}-{m}" if m else k for k, m in MODES]


# --- 1. the fixture, proven with confluent-kafka ---------------------------------------


@pytest.mark.parametrize("kind, mechanism", MODES, ids=MODE_IDS)
def test_fixture_serves_confluent_kafka(proxies, certs, kind, mechanism):
    proxy = proxies(kind)
    conf = confluent_conf(proxy, kind, mechanism, certs[2])
    topic = create_topic(conf)
    confluent_produce(conf, topic, [b"one", b"two"])
    assert confluent_consume(conf, topic, 2) == [b"one", b"two"]


@pytest.mark.waits
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_fixture_refuses_confluent_kafka_with_a_wrong_password(proxies, certs, mechanism, capfd):
    from confluent_kafka.admin import AdminClient

    conf = confluent_conf(proxies("sasl"), "sasl", mechanism, certs[2], password="wrong")
    admin = AdminClient(conf)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    assert "Authentication failed" in capfd.readouterr().err  # librdkafka's log line


@pytest.mark.waits
def test_fixture_refuses_confluent_kafka_without_client_certificate(proxies, certs):
    from confluent_kafka.admin import AdminClient

    conf = confluent_conf(proxies("mtls"), "ssl", None, certs[2])
    with pytest.raises(KafkaException):
        AdminClient(conf).list_topics(timeout=3)


# --- 2. kafka_ds client through the fixture (every mode, fast) --------------------------


@pytest.mark.parametrize("kind, mechanism", MODES, ids=MODE_IDS)
def test_kafka_ds_client_reads_what_confluent_wrote(proxies, certs, kind, mechanism):
    proxy = proxies(kind)
    paths = certs[2]
    conf = confluent_conf(proxy, kind, mechanism, paths)
    topic = create_topic(conf)
    confluent_produce(conf, topic, [b"a", b"b", b"c"])
    config = client_config(kds_options(kind, mechanism, paths))
    with KafkaClient(proxy.bootstrap_servers, config) as client:
        assert client.list_offsets({(topic, 0): -2})[(topic, 0)][0] == 0
        part = client.fetch(topic, 0, 0)
        assert part["error_code"] == 0 and part["high_watermark"] == 3
        group = f"g-{uuid.uuid4().hex[:6]}"
        client.commit_offsets(group, {(topic, 0): 2})
        assert client.fetch_committed(group, [(topic, 0)]) == {(topic, 0): 2}


def test_inline_pem_truststore_and_keystore(proxies, certs):
    proxy = proxies("mtls")
    paths = certs[2]
    params = {
        "security.protocol": "SSL",
        "ssl.truststore.certificates": open(paths["ca"]).read(),
        "ssl.keystore.certificate.chain": open(paths["client_cert"]).read(),
        "ssl.keystore.key": open(paths["client_key"]).read(),
    }
    with KafkaClient(proxy.bootstrap_servers, client_config(params)) as client:
        assert client.list_topics() is not None


def test_encrypted_pkcs12_keystore_and_encrypted_pem_key(proxies, certs, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    proxy = proxies("mtls")
    paths = certs[2]
    client_cert_pem = open(paths["client_cert"], "rb").read()
    key = serialization.load_pem_private_key(open(paths["client_key"], "rb").read(), None)
    cert = x509.load_pem_x509_certificate(client_cert_pem)
    p12 = tmp_path / "client.p12"
    p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"client", key, cert, None, serialization.BestAvailableEncryption(b"storepass")
        )
    )
    params = {
        "security.protocol": "SSL",
        "ssl.truststore.location": paths["ca"],
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(p12),
        "ssl.keystore.password": "storepass",
    }
    with KafkaClient(proxy.bootstrap_servers, client_config(params)) as client:
        client.list_topics()
    with pytest.raises(ConfigurationError, match="kafka.ssl.keystore.password"):
        client_config({**params, "ssl.keystore.password": "nope"})
    enc = tmp_path / "enc.pem"
    enc.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"keypass"),
        )
        + client_cert_pem
    )
    params = {
        "security.protocol": "SSL",
        "ssl.truststore.location": paths["ca"],
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(enc),
        "ssl.key.password": "keypass",
    }
    with KafkaClient(proxy.bootstrap_servers, client_config(params)) as client:
        client.list_topics()
    with pytest.raises(ConfigurationError, match="kafka.ssl.key.password"):
        client_config({**params, "ssl.key.password": None})


# --- keytool stores -----------------------------------------------------------------------


@pytest.mark.parametrize("store_type", ["JKS", "PKCS12"])
def test_keytool_truststores(proxies, keytool_stores, store_type):
    proxy = proxies("ssl")
    params = {
        "security.protocol": "SSL",
        "ssl.truststore.type": store_type,
        "ssl.truststore.location": keytool_stores[store_type],
        "ssl.truststore.password": "changeit",
    }
    with KafkaClient(proxy.bootstrap_servers, client_config(params)) as client:
        client.list_topics()
    with pytest.raises(ConfigurationError, match="kafka.ssl.truststore.password") as info:
        client_config({**params, "ssl.truststore.password": "wrong-pass"})
    assert "wrong-pass" not in str(info.value)


# --- 4. errors ------------------------------------------------------------------------------


def _client(proxy_or_bootstrap, params, **config):
    bootstrap = getattr(proxy_or_bootstrap, "bootstrap_servers", proxy_or_bootstrap)
    cfg = client_config({**params, **config})
    return KafkaClient(bootstrap, cfg)


def _fails_fast(client, error, match):
    start = time.monotonic()
    with pytest.raises(error, match=match) as info:
        with client:
            client.list_topics()
    assert time.monotonic() - start < 8
    return str(info.value)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_is_a_fast_authentication_error(proxies, certs, mechanism):
    proxy = proxies("sasl")
    params = kds_options("sasl", mechanism, certs[2])
    params["sasl.jaas.config"] = jaas(mechanism, password="Wr0ng-" + SECRET)
    text = _fails_fast(_client(proxy, params), AuthenticationError, "failed")
    assert mechanism in text and "alice" in text and proxy.bootstrap_servers in text
    assert SECRET not in text


def test_unknown_mechanism_names_what_the_broker_offers(proxies, certs):
    proxy = proxies("reauth")  # enables PLAIN and SCRAM-SHA-512 only
    params = kds_options("sasl", "SCRAM-SHA-256", certs[2])
    text = _fails_fast(_client(proxy, params), AuthenticationError, "does not enable")
    assert "PLAIN" in text and "SCRAM-SHA-512" in text and "alice" in text


def expired_token():
    return unsecured_jwt("alice", lifetime_s=-60)


def test_expired_token_is_an_authentication_error(proxies, certs):
    proxy = proxies("sasl")
    params = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.provider": "tests.integration.test_security:expired_token",
    }
    text = _fails_fast(_client(proxy, params), AuthenticationError, "invalid_token")
    assert "OAUTHBEARER" in text


def test_wrong_scram_server_signature_is_refused(certs):
    # the proxy: a broker that does not know the password's keys is what this is about
    with SecureProxy(sasl=["SCRAM-SHA-256"], users=USERS, bad_server_signature=True) as proxy:
        params = kds_options("sasl", "SCRAM-SHA-256", certs[2])
        _fails_fast(_client(proxy, params), AuthenticationError, "server signature")


def test_unknown_ca_is_a_tls_error(proxies, certs):
    import trustme

    other = trustme.CA()
    params = {
        "security.protocol": "SSL",
        "ssl.truststore.certificates": other.cert_pem.bytes().decode(),
    }
    text = _fails_fast(_client(proxies("ssl"), params), TlsError, "certificate verification")
    assert "truststore" in text and proxies("ssl").bootstrap_servers in text


def test_hostname_mismatch_is_a_tls_error_and_can_be_turned_off(proxies, certs, caplog):
    proxy = proxies("ssl")  # its certificate names 127.0.0.1 only
    params = kds_options("ssl", None, certs[2])
    bootstrap = f"localhost:{proxy.port}"
    text = _fails_fast(_client(bootstrap, params), TlsError, "localhost")
    assert "endpoint.identification.algorithm" in text
    with caplog.at_level(logging.WARNING):
        with _client(bootstrap, {**params, "ssl.endpoint.identification.algorithm": ""}) as c:
            c.refresh_metadata()
    assert "not checked" in caplog.text


def test_missing_client_certificate_is_a_tls_error(proxies, certs):
    params = kds_options("ssl", None, certs[2])
    text = _fails_fast(_client(proxies("mtls"), params), TlsError, "TLS")
    assert proxies("mtls").bootstrap_servers in text


def test_plaintext_against_a_tls_listener_points_at_security_protocol(proxies):
    # Kafka's TLS listener answers plain text with a TLS alert, whose first bytes read as a
    # frame size of 352 MB: recognised at once (it was waited for until Kafka closed)
    _fails_fast(
        _client(proxies("ssl"), {}, **{"retries": 0}),
        SecurityProtocolMismatchError,
        "answered with TLS.*security.protocol",
    )


def test_tls_against_a_plaintext_listener_points_at_security_protocol(kafka_secure, certs):
    params = {**kds_options("ssl", None, certs[2]), "socket.connection.setup.timeout.ms": "2000"}
    _fails_fast(
        _client(kafka_secure.bootstrap_servers, params),
        (SecurityProtocolMismatchError, TlsError),
        "security.protocol",
    )


def test_plaintext_against_a_sasl_listener_points_at_security_protocol(proxies):
    _fails_fast(
        _client(proxies("sasl"), {}, **{"retries": 0}), KafkaConnectionError, "security.protocol"
    )


# --- 7. OAUTHBEARER token sources, KIP-368 re-authentication ---------------------------------

PROVIDER_CALLS = []


def good_token():
    PROVIDER_CALLS.append(time.time())
    return unsecured_jwt("bob", lifetime_s=3600), time.time() + 3600


def test_token_provider_and_extensions(proxies):
    """Kafka's unsecured validator takes the provider's token and the extensions (its parser
    of the client's first message is strict); which extensions arrived, only the proxy can
    show."""
    params = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.provider": "tests.integration.test_security:good_token",
        "sasl.oauthbearer.extensions": "traceId=abc,logicalCluster=lkc-1",
    }
    before = len(PROVIDER_CALLS)
    for _ in range(2):
        with _client(proxies("sasl"), params) as client:
            client.list_topics()
    assert len(PROVIDER_CALLS) - before == 1  # cached until shortly before expiry
    with SecureProxy(sasl=["OAUTHBEARER"], users=USERS) as proxy:
        with _client(proxy, params) as client:
            client.list_topics()
        assert {"traceId": "abc", "logicalCluster": "lkc-1"} in proxy.seen_extensions


@pytest.fixture
def token_endpoint():
    """A tiny OIDC token endpoint (client-credentials grant) on 127.0.0.1."""
    import http.server
    import json
    import threading

    calls = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            basic = base64.b64decode(self.headers["Authorization"].split()[1]).decode()
            calls.append((basic.split(":")[0], body))
            if basic != "spark-app:" + SECRET or "grant_type=client_credentials" not in body:
                self.send_response(401)
                self.end_headers()
                return
            answer = json.dumps(
                {
                    "access_token": unsecured_jwt("spark-app", 600),
                    "token_type": "bearer",
                    "expires_in": 600,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/oauth2/token", calls
    server.shutdown()
    server.server_close()


def test_oidc_client_credentials(proxies, token_endpoint):
    url, calls = token_endpoint
    proxy = proxies("sasl")
    params = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": url,
        "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="spark-app" '
        f'clientSecret="{SECRET}" scope="kafka";',
    }
    for _ in range(2):
        with _client(proxy, params) as client:
            client.list_topics()
    assert len(calls) == 1 and "scope=kafka" in calls[0][1]
    assert SECRET not in repr(client_config(params))
    bad = {
        **params,
        "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="spark-app" '
        'clientSecret="wrong-secret-123";',
    }
    text = _fails_fast(_client(proxy, bad), AuthenticationError, "HTTP 401")
    assert "spark-app" in text and "wrong-secret-123" not in text


METADATA_ALL = {
    "topics": [],
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}


@pytest.mark.waits
@pytest.mark.parametrize("mechanism", secure_kafka.REAUTH_MECHANISMS)
def test_reauthentication_before_the_session_ends(proxies, certs, mechanism):
    """The REAUTH listener announces a 1.5 s session (connections.max.reauth.ms) and closes
    a connection that sends a request after its session ran out: one connection of kafka_ds
    serves requests over three lifetimes (it re-authenticates), while the same connection
    with its re-authentication switched off is closed by Kafka."""
    from kafka_ds.client.connection import BrokerConnection
    from kafka_ds.protocol import messages as m

    proxy = proxies("reauth")
    config = client_config(kds_options("sasl", mechanism, certs[2]))
    lifetime = secure_kafka.REAUTH_MS / 1000
    conn = BrokerConnection("127.0.0.1", proxy.port, security=config.security).connect()
    try:
        sock = conn._sock
        assert conn._reauth_at is not None  # Kafka announced the session lifetime
        deadline = time.monotonic() + 3 * lifetime + 0.5
        while time.monotonic() < deadline:
            time.sleep(lifetime / 3)
            conn.request(m.METADATA, METADATA_ALL)
            assert conn._sock is sock  # the same connection all along
    finally:
        conn.close()
    conn = BrokerConnection("127.0.0.1", proxy.port, security=config.security).connect()
    try:
        conn._reauth_at = None  # a client without KIP-368
        time.sleep(lifetime + 0.3)
        with pytest.raises(KafkaConnectionError):
            conn.request(m.METADATA, METADATA_ALL)
    finally:
        conn.close()


# --- README -------------------------------------------------------------------------------


def test_readme_recipe_paths_over_sasl_ssl(proxies, certs, token_endpoint):
    """The paths the README recipes use, over SASL_SSL: PLAIN with kafka.sasl.username/
    password and an Event Hubs style connection string, a token provider (MSK IAM) and
    OIDC with extensions (Confluent Cloud OAuth)."""
    proxy = proxies("sasl_ssl")
    connection_string = secure_kafka.CONNECTION_STRING  # a PLAIN user of the broker
    tls = {"security.protocol": "SASL_SSL", "ssl.truststore.location": certs[2]["ca"]}
    url, _calls = token_endpoint
    variants = [
        {
            "sasl.mechanism": "PLAIN",
            "sasl.username": "$ConnectionString",
            "sasl.password": connection_string,
        },
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.provider": "tests.integration.test_security:good_token",
        },
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": url,
            "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
            "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="spark-app" '
            f'clientSecret="{SECRET}" scope="kafka";',
        },
    ]
    for variant in variants:
        with _client(proxy, {**tls, **variant}) as client:
            client.list_topics()


def test_without_truststore_the_system_cas_are_used(proxies):
    # The fixture's CA is not a system CA: verification against the system bundle fails.
    with pytest.raises(TlsError, match="certificate verification"):
        with _client(proxies("ssl"), {"security.protocol": "SSL"}) as client:
            client.list_topics()


def test_sasl_against_a_listener_without_sasl_points_at_security_protocol(kafka_secure):
    params = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": SECRET,
    }
    text = _fails_fast(
        _client(kafka_secure.bootstrap_servers, params),  # PLAINTEXT
        (AuthenticationError, SecurityProtocolMismatchError, KafkaConnectionError),
        "security.protocol",
    )
    assert SECRET not in text


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_names_and_passwords_as_kafka_treats_them(proxies, kafka_secure, mechanism):
    """Kafka's ScramFormatter hashes the raw UTF-8 password (no SASLprep) and escapes ',' and
    '=' in the user name: a password SASLprep would change still logs in. The credential is
    stored with AlterUserScramCredentials (confluent-kafka, as the super user)."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    proxy = proxies("sasl")
    user = f"svc,team=a{mechanism[-3:]}"
    password = "pa\u00a0ss\u00adw\u00f6rd-" + SECRET
    info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], 4096)
    futures = kafka_secure.admin().alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode())]
    )
    for future in futures.values():
        future.result(30)
    params = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    with _client(proxy, params) as client:
        client.list_topics()


def test_tls_versions_and_cipher_suites_are_applied(proxies, certs):
    from kafka_ds.client.connection import BrokerConnection

    proxy = proxies("ssl")
    base = kds_options("ssl", None, certs[2])
    cases = [
        ({}, "TLSv1.3", None),
        ({"ssl.protocol": "TLSv1.2"}, "TLSv1.2", None),
        (
            {
                "ssl.enabled.protocols": "TLSv1.2",
                "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            },
            "TLSv1.2",
            "ECDHE-ECDSA-AES128-GCM-SHA256",
        ),
    ]
    for extra, version, cipher in cases:
        config = client_config({**base, **extra})
        conn = BrokerConnection("127.0.0.1", proxy.port, security=config.security).connect()
        try:
            assert conn._sock.version() == version
            if cipher:
                assert conn._sock.cipher()[0] == cipher
        finally:
            conn.close()
