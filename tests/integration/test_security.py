"""TLS and SASL (issue 12): the fixture proven with confluent-kafka, then kafka_ds through it.

The fixture (tests/support/secure_proxy.py) terminates TLS / serves SASL in front of a
dedicated Tansu that advertises the fixture's address. One fixture per listener kind,
shared by the module: ``ssl`` (TLS), ``mtls`` (TLS + client certificate), ``sasl``
(SASL_PLAINTEXT, every mechanism) and ``sasl_ssl`` (SASL_SSL, every mechanism). Spark
through the fixture: tests/spark/test_security.py; what needs no broker:
tests/unit/test_security.py.
"""
from __future__ import annotations

import base64
import logging
import time
import uuid

import pytest

from kafka_ds.client import KafkaClient
from kafka_ds.client.security.oauth import unsecured_jwt
from kafka_ds.errors import (
    AuthenticationError,
    ConfigurationError,
    KafkaConnectionError,
    SecurityProtocolMismatchError,
    TlsError,
)
from tests.support.secure_proxy import SecureProxy
from tests.unit.test_security import (  # noqa: F401  (fixtures)
    OAUTH_MODULE,
    SECRET,
    certs,
    client_config,
    jaas,
    keytool_stores,
)

pytestmark = pytest.mark.integration

USERS = {"alice": SECRET}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


# --- fixtures ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def proxies(certs):
    ca = certs[0]
    started = {}

    def get(kind):
        if kind not in started:
            kwargs = {"ssl": dict(tls=True), "mtls": dict(tls=True, client_auth=True),
                      "sasl": dict(sasl=MECHANISMS, users=USERS),
                      "sasl_ssl": dict(tls=True, sasl=MECHANISMS, users=USERS)}[kind]
            started[kind] = SecureProxy(ca=ca, **kwargs)
        return started[kind]

    yield get
    for proxy in started.values():
        proxy.stop()


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
    admin = AdminClient(conf)   # kept referenced until the futures resolve
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
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
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


MODES = [("ssl", None), ("mtls", None)] + [("sasl", m) for m in MECHANISMS] + \
    [("sasl_ssl", "SCRAM-SHA-512"), ("sasl_ssl", "OAUTHBEARER")]
MODE_IDS = [f"{k}-{m}" if m else k for k, m in MODES]


# --- 1. the fixture, proven with confluent-kafka ---------------------------------------

@pytest.mark.parametrize("kind, mechanism", MODES, ids=MODE_IDS)
def test_fixture_serves_confluent_kafka(proxies, certs, kind, mechanism):
    proxy = proxies(kind)
    conf = confluent_conf(proxy, kind, mechanism, certs[2])
    topic = create_topic(conf)
    confluent_produce(conf, topic, [b"one", b"two"])
    assert confluent_consume(conf, topic, 2) == [b"one", b"two"]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_fixture_refuses_confluent_kafka_with_a_wrong_password(proxies, certs, mechanism,
                                                                capfd):
    from confluent_kafka.admin import AdminClient
    conf = confluent_conf(proxies("sasl"), "sasl", mechanism, certs[2], password="wrong")
    admin = AdminClient(conf)
    with pytest.raises(Exception):  # noqa: B017 (the peer's own error types)
        admin.list_topics(timeout=3)
    assert "Authentication failed" in capfd.readouterr().err   # librdkafka's log line


def test_fixture_refuses_confluent_kafka_without_client_certificate(proxies, certs):
    from confluent_kafka.admin import AdminClient
    conf = confluent_conf(proxies("mtls"), "ssl", None, certs[2])
    with pytest.raises(Exception):  # noqa: B017 (the peer's own error types)
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
    _ca, client_cert, paths = certs
    params = {"security.protocol": "SSL",
              "ssl.truststore.certificates": open(paths["ca"]).read(),
              "ssl.keystore.certificate.chain": open(paths["client_cert"]).read(),
              "ssl.keystore.key": open(paths["client_key"]).read()}
    with KafkaClient(proxy.bootstrap_servers, client_config(params)) as client:
        assert client.list_topics() is not None


def test_encrypted_pkcs12_keystore_and_encrypted_pem_key(proxies, certs, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    proxy = proxies("mtls")
    _ca, client_cert, paths = certs
    key = serialization.load_pem_private_key(client_cert.private_key_pem.bytes(), None)
    cert = x509.load_pem_x509_certificate(client_cert.cert_chain_pems[0].bytes())
    p12 = tmp_path / "client.p12"
    p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"client", key, cert, None, serialization.BestAvailableEncryption(b"storepass")))
    params = {"security.protocol": "SSL", "ssl.truststore.location": paths["ca"],
              "ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(p12),
              "ssl.keystore.password": "storepass"}
    with KafkaClient(proxy.bootstrap_servers, client_config(params)) as client:
        client.list_topics()
    with pytest.raises(ConfigurationError, match="kafka.ssl.keystore.password"):
        client_config({**params, "ssl.keystore.password": "nope"})
    enc = tmp_path / "enc.pem"
    enc.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(b"keypass"))
                    + client_cert.cert_chain_pems[0].bytes())
    params = {"security.protocol": "SSL", "ssl.truststore.location": paths["ca"],
              "ssl.keystore.type": "PEM", "ssl.keystore.location": str(enc),
              "ssl.key.password": "keypass"}
    with KafkaClient(proxy.bootstrap_servers, client_config(params)) as client:
        client.list_topics()
    with pytest.raises(ConfigurationError, match="kafka.ssl.key.password"):
        client_config({**params, "ssl.key.password": None})


# --- keytool stores -----------------------------------------------------------------------

@pytest.mark.parametrize("store_type", ["JKS", "PKCS12"])
def test_keytool_truststores(proxies, keytool_stores, store_type):
    proxy = proxies("ssl")
    params = {"security.protocol": "SSL", "ssl.truststore.type": store_type,
              "ssl.truststore.location": keytool_stores[store_type],
              "ssl.truststore.password": "changeit"}
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


def test_unknown_mechanism_names_what_the_broker_offers(certs):
    with SecureProxy(sasl=["PLAIN"], users=USERS) as proxy:
        params = kds_options("sasl", "SCRAM-SHA-256", certs[2])
        text = _fails_fast(_client(proxy, params), AuthenticationError, "does not enable")
        assert "PLAIN" in text and "alice" in text


def expired_token():
    return unsecured_jwt("alice", lifetime_s=-60)


def test_expired_token_is_an_authentication_error(proxies, certs):
    proxy = proxies("sasl")
    params = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
              "sasl.oauthbearer.token.provider": "tests.integration.test_security:expired_token"}
    text = _fails_fast(_client(proxy, params), AuthenticationError, "invalid_token")
    assert "OAUTHBEARER" in text


def test_wrong_scram_server_signature_is_refused(certs):
    with SecureProxy(sasl=["SCRAM-SHA-256"], users=USERS, bad_server_signature=True) as proxy:
        params = kds_options("sasl", "SCRAM-SHA-256", certs[2])
        _fails_fast(_client(proxy, params), AuthenticationError, "server signature")


def test_unknown_ca_is_a_tls_error(proxies, certs):
    import trustme
    other = trustme.CA()
    params = {"security.protocol": "SSL",
              "ssl.truststore.certificates": other.cert_pem.bytes().decode()}
    text = _fails_fast(_client(proxies("ssl"), params), TlsError, "certificate verification")
    assert "truststore" in text and proxies("ssl").bootstrap_servers in text


def test_hostname_mismatch_is_a_tls_error_and_can_be_turned_off(proxies, certs, caplog):
    proxy = proxies("ssl")   # its certificate names 127.0.0.1 only
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
    _fails_fast(_client(proxies("ssl"), {}, **{"retries": 0}),
                (SecurityProtocolMismatchError, KafkaConnectionError), "security.protocol")


def test_tls_against_a_plaintext_listener_points_at_security_protocol(proxies, certs):
    tansu = proxies("ssl").tansu   # Tansu itself speaks PLAINTEXT
    params = {**kds_options("ssl", None, certs[2]), "socket.connection.setup.timeout.ms": "2000"}
    _fails_fast(_client(tansu.bootstrap_servers, params),
                (SecurityProtocolMismatchError, TlsError), "security.protocol")


def test_plaintext_against_a_sasl_listener_points_at_security_protocol(proxies):
    _fails_fast(_client(proxies("sasl"), {}, **{"retries": 0}), KafkaConnectionError,
                "security.protocol")


# --- 7. OAUTHBEARER token sources, KIP-368 re-authentication ---------------------------------

PROVIDER_CALLS = []


def good_token():
    PROVIDER_CALLS.append(time.time())
    return unsecured_jwt("bob", lifetime_s=3600), time.time() + 3600


def test_token_provider_and_extensions(proxies):
    proxy = proxies("sasl")
    params = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
              "sasl.oauthbearer.token.provider": "tests.integration.test_security:good_token",
              "sasl.oauthbearer.extensions": "traceId=abc,logicalCluster=lkc-1"}
    before = len(PROVIDER_CALLS)
    for _ in range(2):
        with _client(proxy, params) as client:
            client.list_topics()
    assert len(PROVIDER_CALLS) - before == 1       # cached until shortly before expiry
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
            answer = json.dumps({"access_token": unsecured_jwt("spark-app", 600),
                                 "token_type": "bearer", "expires_in": 600}).encode()
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
    params = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
              "sasl.oauthbearer.token.endpoint.url": url,
              "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="spark-app" '
                                  f'clientSecret="{SECRET}" scope="kafka";'}
    for _ in range(2):
        with _client(proxy, params) as client:
            client.list_topics()
    assert len(calls) == 1 and "scope=kafka" in calls[0][1]
    assert SECRET not in repr(client_config(params))
    bad = {**params, "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="spark-app" '
                                         'clientSecret="wrong-secret-123";'}
    text = _fails_fast(_client(proxy, bad), AuthenticationError, "HTTP 401")
    assert "spark-app" in text and "wrong-secret-123" not in text


def test_reauthentication_before_the_session_ends(certs):
    with SecureProxy(sasl=["SCRAM-SHA-256"], users=USERS, session_lifetime_ms=1000) as proxy:
        params = kds_options("sasl", "SCRAM-SHA-256", certs[2])
        with _client(proxy, params) as client:
            client.list_topics()
            for _ in range(3):
                time.sleep(0.9)
                client.list_topics()
        assert proxy.reauthentications >= 3 and proxy.expired_closes == 0
    # the fixture does close a connection that lets its session run out
    with SecureProxy(sasl=["PLAIN"], users=USERS, session_lifetime_ms=300) as proxy:
        config = client_config(kds_options("sasl", "PLAIN", certs[2]))
        from kafka_ds.client.connection import BrokerConnection
        from kafka_ds.protocol import messages as m
        conn = BrokerConnection("127.0.0.1", proxy.port, security=config.security).connect()
        conn._reauth_at = None      # a client without KIP-368
        time.sleep(0.4)
        with pytest.raises(KafkaConnectionError):
            conn.request(m.METADATA, {"topics": [], "allow_auto_topic_creation": False,
                                      "include_cluster_authorized_operations": False,
                                      "include_topic_authorized_operations": False})
        assert proxy.expired_closes == 1


# --- README -------------------------------------------------------------------------------

def test_readme_recipe_paths_over_sasl_ssl(proxies, certs, token_endpoint):
    """The paths the README recipes use, over SASL_SSL: PLAIN with kafka.sasl.username/
    password and an Event Hubs style connection string, a token provider (MSK IAM) and
    OIDC with extensions (Confluent Cloud OAuth)."""
    proxy = proxies("sasl_ssl")
    connection_string = ("Endpoint=sb://myns.servicebus.windows.net/;SharedAccessKeyName="
                         "RootManageSharedAccessKey;SharedAccessKey=" + SECRET + "=")
    proxy.users["$ConnectionString"] = connection_string
    tls = {"security.protocol": "SASL_SSL", "ssl.truststore.location": certs[2]["ca"]}
    url, _calls = token_endpoint
    variants = [
        {"sasl.mechanism": "PLAIN", "sasl.username": "$ConnectionString",
         "sasl.password": connection_string},
        {"sasl.mechanism": "OAUTHBEARER",
         "sasl.oauthbearer.token.provider": "tests.integration.test_security:good_token"},
        {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url": url,
         "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2",
         "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="spark-app" '
                             f'clientSecret="{SECRET}" scope="kafka";'},
    ]
    for variant in variants:
        with _client(proxy, {**tls, **variant}) as client:
            client.list_topics()
    assert {"logicalCluster": "lkc-1", "identityPoolId": "pool-2"} in proxy.seen_extensions


def test_without_truststore_the_system_cas_are_used(proxies):
    # The fixture's CA is not a system CA: verification against the system bundle fails.
    with pytest.raises(TlsError, match="certificate verification"):
        with _client(proxies("ssl"), {"security.protocol": "SSL"}) as client:
            client.list_topics()


def test_sasl_against_a_listener_without_sasl_points_at_security_protocol(proxies):
    tansu = proxies("ssl").tansu   # PLAINTEXT, no SASL
    params = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.username": "alice", "sasl.password": SECRET}
    text = _fails_fast(_client(tansu.bootstrap_servers, params),
                       (AuthenticationError, SecurityProtocolMismatchError, KafkaConnectionError),
                       "security.protocol")
    assert SECRET not in text


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_names_and_passwords_as_kafka_treats_them(proxies, mechanism):
    """Kafka's ScramFormatter hashes the raw UTF-8 password (no SASLprep) and escapes ',' and
    '=' in the user name: a password SASLprep would change still logs in."""
    proxy = proxies("sasl")
    user, password = "svc,team=a", "pa\u00a0ss\u00adw\u00f6rd-" + SECRET
    proxy.users[user] = password
    params = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
              "sasl.username": user, "sasl.password": password}
    with _client(proxy, params) as client:
        client.list_topics()


def test_tls_versions_and_cipher_suites_are_applied(proxies, certs):
    from kafka_ds.client.connection import BrokerConnection
    proxy = proxies("ssl")
    base = kds_options("ssl", None, certs[2])
    cases = [({}, "TLSv1.3", None),
             ({"ssl.protocol": "TLSv1.2"}, "TLSv1.2", None),
             ({"ssl.enabled.protocols": "TLSv1.2",
               "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
              "TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")]
    for extra, version, cipher in cases:
        config = client_config({**base, **extra})
        conn = BrokerConnection("127.0.0.1", proxy.port, security=config.security).connect()
        try:
            assert conn._sock.version() == version
            if cipher:
                assert conn._sock.cipher()[0] == cipher
        finally:
            conn.close()
