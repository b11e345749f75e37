"""TLS material for the fake Schema Registry (``trustme``): a CA, a server certificate for
127.0.0.1 and a client certificate for mutual TLS, as PEM files."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field


@dataclass
class TlsFiles:
    """PEM files: the CA clients trust, and a client certificate + key for mutual TLS."""

    ca: str
    client_certificate: str
    client_key: str
    # the trustme CA, to issue more certificates (a client certificate it did not sign ...)
    authority: object = field(repr=False, default=None)


def make_tls(directory, *, require_client_cert: bool) -> tuple[TlsFiles, ssl.SSLContext]:
    """A CA, a server certificate for 127.0.0.1/localhost and a client certificate, written
    to ``directory``; and the server's context (asking for a client certificate or not)."""
    import trustme

    authority = trustme.CA()
    server_cert = authority.issue_cert("127.0.0.1", "localhost")
    client_cert = authority.issue_cert("kafka-ds-client@example.com")
    ca_path = directory / "ca.pem"
    authority.cert_pem.write_to_path(str(ca_path))
    client_cert_path = directory / "client.pem"
    client_key_path = directory / "client.key"
    client_cert.cert_chain_pems[0].write_to_path(str(client_cert_path))
    client_cert.private_key_pem.write_to_path(str(client_key_path))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_cert.configure_cert(context)
    if require_client_cert:
        authority.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    files = TlsFiles(str(ca_path), str(client_cert_path), str(client_key_path), authority)
    return files, context
