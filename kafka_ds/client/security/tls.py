"""Key stores and TLS: trusted CAs and the client certificate read from PEM, PKCS12 or
JKS stores (``TlsMaterial``), and the ``ssl.SSLContext`` built from them where the
connections are made (cached per settings).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import ssl
import struct
import tempfile
import threading
from dataclasses import dataclass

from ...errors import ConfigurationError
from .settings import SecuritySettings

log = logging.getLogger(__name__)

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
            raise fail(
                "JCEKS stores are not supported; convert with keytool -importkeystore "
                "-deststoretype PKCS12"
            )
        raise fail("bad magic number; set 'kafka.ssl.truststore.type' to the store's type")
    version = _I32.unpack_from(data, 4)[0]
    if version not in (1, 2):
        raise fail(f"unknown version {version}")
    count = _I32.unpack_from(data, 8)[0]
    pos = 12
    certs = []

    def read_utf(pos):
        size = _U16.unpack_from(data, pos)[0]
        return data[pos + 2 : pos + 2 + size], pos + 2 + size

    def read_cert(pos):
        if version == 2:
            cert_type, pos = read_utf(pos)
            if cert_type != b"X.509":
                raise fail(f"certificate type {cert_type!r}")
        size = _I32.unpack_from(data, pos)[0]
        if size < 0 or pos + 4 + size > len(data):
            raise fail("truncated certificate")
        return data[pos + 4 : pos + 4 + size], pos + 4 + size

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
                "'kafka.ssl.truststore.password' or a corrupted file"
            )
    if not certs:
        raise fail("no certificate entries")
    return certs


def _read_file(path, option):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigurationError(
            f"Option '{option}': cannot read {path!r}: {exc.strerror}"
        ) from None


@dataclass
class TlsMaterial:
    """What an SSLContext is built from: trusted CAs (PEM) and the client chain/key."""

    cadata: str | None = None
    cert_chain_pem: bytes | None = None
    key: object = None  # a cryptography private key


def _pem_certs_from_der(ders) -> str:
    return "".join(ssl.DER_cert_to_PEM_cert(bytes(d)) for d in ders)


def _open_pkcs12(data: bytes, password: str | None, store: str):
    """(key, certificate, extra certificates) of a PKCS12 ``store`` ("truststore" or
    "keystore", read from ``kafka.ssl.<store>.location``)."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_key_and_certificates(
            data, password.encode() if password is not None else None
        )
    except ValueError:
        raise ConfigurationError(
            f"Option 'kafka.ssl.{store}.location': cannot open the PKCS12 {store}: wrong "
            f"'kafka.ssl.{store}.password' or not a PKCS12 file"
        ) from None


def load_tls_material(settings: SecuritySettings) -> TlsMaterial:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    material = TlsMaterial()
    option = "kafka.ssl.truststore.location"
    if settings.truststore_certificates:
        material.cadata = _check_pem_certs(
            settings.truststore_certificates.encode(), "kafka.ssl.truststore.certificates"
        )
    elif settings.truststore_location:
        data = _read_file(settings.truststore_location, option)
        kind = settings.truststore_type
        if kind == "JKS":
            material.cadata = _pem_certs_from_der(
                read_jks_certificates(data, settings.truststore_password, option)
            )
        elif kind == "PKCS12":
            _key, cert, extra = _open_pkcs12(data, settings.truststore_password, "truststore")
            ders = [
                c.public_bytes(serialization.Encoding.DER)
                for c in ([cert] if cert is not None else []) + list(extra)
            ]
            if not ders:
                raise ConfigurationError(
                    f"Option '{option}': the PKCS12 truststore holds no certificates"
                )
            material.cadata = _pem_certs_from_der(ders)
        else:
            material.cadata = _check_pem_certs(data, option)
    # client certificate
    key_bytes = chain_bytes = None
    if settings.keystore_certificate_chain and settings.keystore_key:  # both or neither
        chain_bytes = settings.keystore_certificate_chain.encode()
        key_bytes = settings.keystore_key.encode()
        key_option = "kafka.ssl.keystore.key"
        chain_option = "kafka.ssl.keystore.certificate.chain"
    elif settings.keystore_location:
        key_option = chain_option = "kafka.ssl.keystore.location"
        data = _read_file(settings.keystore_location, key_option)
        if settings.keystore_type == "PKCS12":
            key, cert, extra = _open_pkcs12(data, settings.keystore_password, "keystore")
            if key is None or cert is None:
                raise ConfigurationError(
                    "Option 'kafka.ssl.keystore.location': the PKCS12 "
                    "keystore holds no private key with its certificate"
                )
            material.key = key
            material.cert_chain_pem = b"".join(
                c.public_bytes(serialization.Encoding.PEM) for c in [cert, *extra]
            )
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
            key_pem, password.encode() if password is not None else None
        )
    except TypeError:
        raise ConfigurationError(
            f"Option '{key_option}': the private key is encrypted: set 'kafka.ssl.key.password'"
            if password is None
            else f"Option '{key_option}': the key is not encrypted, but "
            "'kafka.ssl.key.password' is set"
        ) from None
    except ValueError:
        raise ConfigurationError(
            f"Option '{key_option}': cannot read the private key (wrong 'kafka.ssl.key.password'?)"
        ) from None
    material.cert_chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    return material


def _first_pem_key(data: bytes) -> bytes | None:
    text = data.decode("ascii", "replace")
    start = text.find("-----BEGIN ")
    while start >= 0:
        line_end = text.find("-----", start + 11)
        label = text[start + 11 : line_end]
        if "PRIVATE KEY" in label:
            end_marker = f"-----END {label}-----"
            end = text.find(end_marker, line_end)
            if end < 0:
                return None
            return text[start : end + len(end_marker)].encode()
        start = text.find("-----BEGIN ", line_end)
    return None


def _check_pem_certs(data: bytes, option: str) -> str:
    from cryptography import x509

    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise ConfigurationError(
            f"Option '{option}': no PEM certificate found (expected "
            "-----BEGIN CERTIFICATE----- blocks)"
        ) from None
    from cryptography.hazmat.primitives import serialization

    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


# --- SSLContext (built where the connections are made, cached per settings) ---------

_contexts: dict = {}
_contexts_lock = threading.Lock()


def ssl_context(settings: SecuritySettings) -> ssl.SSLContext:
    key = settings.cache_key()
    with _contexts_lock:
        context = _contexts.get(key)
        if context is None:
            context = _contexts[key] = build_ssl_context(settings)
    return context


def build_ssl_context(settings: SecuritySettings) -> ssl.SSLContext:
    material = load_tls_material(settings)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = settings.check_hostname
    if not settings.check_hostname:  # once per process and settings (contexts are cached)
        log.warning(
            "kafka.ssl.endpoint.identification.algorithm is empty: broker certificates "
            "are verified but their host names are not checked"
        )
    if material.cadata:
        context.load_verify_locations(cadata=material.cadata)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    for attr, name in (
        ("minimum_version", settings.tls_min_version),
        ("maximum_version", settings.tls_max_version),
    ):
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
            handle.write(
                material.key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.BestAvailableEncryption(one_time.encode()),
                )
            )
        context.load_cert_chain(chain_path, key_path, password=one_time)
