"""TLS and SASL (issue 12) without a broker: the settings parsed at plan time and their
errors, the JAAS parser, SCRAM against RFC 7677's vector, JKS stores made by keytool, and
that no secret shows. Here are also the test CA and the JAAS lines that
tests/integration/test_security.py and tests/spark/test_security.py use.
"""

from __future__ import annotations

import os
import pickle
import subprocess

import pytest

from kafka_ds.client.security.jaas import parse_jaas_config
from kafka_ds.client.security.parse import security_settings
from kafka_ds.client.security.sasl import ScramMechanism
from kafka_ds.client.security.settings import SecuritySettings
from kafka_ds.client.security.tls import read_jks_certificates
from kafka_ds.errors import ConfigurationError

SECRET = "s3cr3t-Pa55-XyZ"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def client_config(params):
    """The ClientConfig the driver builds at plan time from these kafka.* params (given
    without the prefix; None values left out)."""
    from kafka_ds.options import parse_read_options

    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "subscribe": "t",
        **{f"kafka.{k}": v for k, v in params.items() if v is not None},
    }
    return parse_read_options(options, streaming=False).client


# --- fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    import trustme

    directory = tmp_path_factory.mktemp("certs")
    ca = trustme.CA()
    client = ca.issue_cert("client@kafka-ds.test")
    paths = {
        "dir": str(directory),
        "ca": str(directory / "ca.pem"),
        "client_cert": str(directory / "client.pem"),
        "client_key": str(directory / "client.key"),
        "client_combined": str(directory / "client-combined.pem"),
    }
    ca.cert_pem.write_to_path(paths["ca"])
    client.cert_chain_pems[0].write_to_path(paths["client_cert"])
    client.private_key_pem.write_to_path(paths["client_key"])
    with open(paths["client_combined"], "wb") as handle:
        handle.write(
            client.private_key_pem.bytes() + b"".join(pem.bytes() for pem in client.cert_chain_pems)
        )
    return ca, client, paths


def jaas(mechanism, user="alice", password=SECRET):
    if mechanism == "PLAIN":
        return f'{PLAIN_MODULE} required username="{user}" password="{password}";'
    if mechanism.startswith("SCRAM"):
        return f'{SCRAM_MODULE} required username="{user}" password="{password}";'
    return f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="{user}";'


# --- keytool stores -----------------------------------------------------------------------


def keytool(*args):
    subprocess.run(["keytool", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def keytool_stores(certs, tmp_path_factory):
    directory = tmp_path_factory.mktemp("keytool")
    paths = certs[2]
    stores = {}
    for kind in ("JKS", "PKCS12"):
        path = str(directory / f"truststore.{'jks' if kind == 'JKS' else 'p12'}")
        keytool(
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            paths["ca"],
            "-keystore",
            path,
            "-storetype",
            kind,
            "-storepass",
            "changeit",
        )
        stores[kind] = path
    # a JKS keystore with a key entry (and its self-signed certificate)
    stores["JKS-keystore"] = str(directory / "keystore.jks")
    keytool(
        "-genkeypair",
        "-alias",
        "me",
        "-keyalg",
        "RSA",
        "-keysize",
        "2048",
        "-dname",
        "CN=me",
        "-validity",
        "2",
        "-keystore",
        stores["JKS-keystore"],
        "-storetype",
        "JKS",
        "-storepass",
        "changeit",
        "-keypass",
        "changeit",
    )
    keytool(
        "-importcert",
        "-noprompt",
        "-alias",
        "ca",
        "-file",
        paths["ca"],
        "-keystore",
        stores["JKS-keystore"],
        "-storetype",
        "JKS",
        "-storepass",
        "changeit",
    )
    return stores


def test_jks_reader_reads_key_entries_chains_and_checks_integrity(keytool_stores, certs):
    data = open(keytool_stores["JKS-keystore"], "rb").read()
    ders = read_jks_certificates(data, "changeit", "opt")
    import ssl

    ca_der = ssl.PEM_cert_to_DER_cert(open(certs[2]["ca"]).read())
    assert ca_der in ders and len(ders) == 2  # the CA entry and the key entry's chain
    assert read_jks_certificates(data, None, "opt") == ders  # no password: no check
    corrupted = bytearray(data)
    corrupted[-30] ^= 1
    with pytest.raises(ConfigurationError, match="integrity"):
        read_jks_certificates(bytes(corrupted), "changeit", "opt")
    with pytest.raises(ConfigurationError, match="integrity"):
        read_jks_certificates(data, "changeiT", "opt")


def test_jks_keystore_is_refused_with_the_keytool_command(keytool_stores):
    with pytest.raises(ConfigurationError) as info:
        security_settings(
            {
                "security.protocol": "SSL",
                "ssl.keystore.location": keytool_stores["JKS-keystore"],
                "ssl.keystore.password": "changeit",
            }
        )
    text = str(info.value)
    assert "keytool -importkeystore -srckeystore " + keytool_stores["JKS-keystore"] in text
    assert "-deststoretype PKCS12" in text and "changeit" not in text


# --- plan-time validation -----------------------------------------------------------


@pytest.mark.parametrize(
    "params, match",
    [
        ({"security.protocol": "SSLv3"}, "kafka.security.protocol"),
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/nope.pem"},
            "kafka.ssl.truststore.location",
        ),
        (
            {
                "security.protocol": "SSL",
                "ssl.keystore.location": "/nope.p12",
                "ssl.keystore.type": "PKCS12",
            },
            "kafka.ssl.keystore.location",
        ),
        ({"security.protocol": "SASL_SSL", "sasl.jaas.config": "x required;"}, "GSSAPI"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"}, "PLAIN, SCRAM"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password="{SECRET}"',
            },
            "semicolon",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password;',
            },
            "value",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": f'{PLAIN_MODULE} required username="u" password="{SECRET}";',
            },
            "ScramLoginModule",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.token.provider": "no_such_module_xyz:fn",
            },
            "token.provider",
        ),
        ({"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv9"}, "enabled.protocols"),
        ({"security.protocol": "SSL", "ssl.truststore.type": "JCEKS"}, "kafka.ssl.truststore.type"),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"},
            "endpoint.identification.algorithm",
        ),
        (
            {"security.protocol": "SSL", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"},
            "certificate.chain",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="a" '
                'unsecuredLoginLifetimeSeconds="soon";',
            },
            "LifetimeSeconds",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.jaas.config": f"{OAUTH_MODULE} required;",
            },
            "token source",
        ),
    ],
)
def test_bad_options_fail_at_plan_time_naming_the_option(params, match):
    with pytest.raises(ConfigurationError, match=match) as info:
        client_config(params)
    assert SECRET not in str(info.value)


def test_jaas_parser_follows_kafka_quoting_rules():
    module, opts = parse_jaas_config(
        f'{PLAIN_MODULE}  Required\n  username="al\\"ice" /* comment */ password=\'p;w=d\'\n'
        "  other=bare.word-$x // trailing comment\n;"
    )
    assert module == PLAIN_MODULE
    assert opts == {"username": 'al"ice', "password": "p;w=d", "other": "bare.word-$x"}
    with pytest.raises(ConfigurationError, match="control flag"):
        parse_jaas_config(f'{PLAIN_MODULE} mandatory username="u";')
    with pytest.raises(ConfigurationError, match="1"):
        parse_jaas_config(f"{PLAIN_MODULE} required; {PLAIN_MODULE} required;")


def test_scram_client_matches_rfc7677_vector():
    settings = SecuritySettings(
        protocol="SASL_PLAINTEXT", mechanism="SCRAM-SHA-256", username="user", password="pencil"
    )
    scram = ScramMechanism(settings, nonce="rOprNGfwEbeRWgbNEkqO")
    assert scram.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = scram.step(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert scram.step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert scram.complete


def test_settings_pickle_and_never_show_secrets():
    settings = security_settings(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": jaas("PLAIN"),
        }
    )
    assert pickle.loads(pickle.dumps(settings)) == settings
    config = client_config(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": SECRET,
        }
    )
    assert SECRET not in repr(settings) and SECRET not in repr(config) and SECRET not in str(config)
    assert "alice" in repr(config)
    # the plan-time objects shipped to the executors: picklable, no secret in their text
    from kafka_ds.options import parse_read_options, parse_write_options

    options = {
        "kafka.bootstrap.servers": "127.0.0.1:9",
        "subscribe": "t",
        "topic": "t",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": jaas("PLAIN"),
    }
    for opts in (parse_read_options(options, streaming=True), parse_write_options(options)):
        assert SECRET not in repr(opts) and SECRET not in str(opts)
        assert pickle.loads(pickle.dumps(opts)).client.security.password == SECRET


# --- docs ---------------------------------------------------------------------------------


def test_security_page_has_the_security_option_table():
    from kafka_ds.options.tables import security_section

    page = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "security.md")).read()
    assert security_section() in page, "regenerate with python docs/generate.py"


def test_unsecured_token_times_are_whole_seconds():
    """Apache Kafka's unsecured validator refused about half of the tokens whose ``iat`` was
    the current time with a fraction (tests/integration/test_security.py's OAUTHBEARER runs
    on Apache Kafka showed it); whole seconds, not later than now, are always taken."""
    import base64
    import json
    import time

    from kafka_ds.client.security.oauth import unsecured_jwt

    before = time.time()
    payload = unsecured_jwt("alice", lifetime_s=60).split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert isinstance(claims["iat"], int) and isinstance(claims["exp"], int)
    assert claims["iat"] <= before and claims["exp"] == claims["iat"] + 60
