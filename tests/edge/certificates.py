"""A test certificate authority made with `cryptography`: server certificates for 127.0.0.1 and localhost,
client certificates, their keys as PKCS#8 PEM and as PKCS#12 archives, and TLS contexts for the servers
and clients of a test (HTTPS to an edge, an HTTPS upstream that asks for a client certificate)."""

from __future__ import annotations

import datetime as dt
import http.client
import ipaddress
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PEM = serialization.Encoding.PEM


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class TestCA:
    """A CA in `folder`: `ca_file` is its certificate (PEM), to trust it."""

    __test__ = False  # not a pytest class

    def __init__(self, folder: Path, name: str = "flagproxy test CA") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .sign(self.key, hashes.SHA256())
        )
        self.ca_file = folder / f"{name.replace(' ', '-')}.pem"
        self.ca_file.write_bytes(self.cert.public_bytes(PEM))

    def issue(self, name: str, usage: str = "server") -> tuple[Path, Path]:
        """A certificate for 127.0.0.1 and localhost (`usage` server or client), signed by this CA: the paths
        of its PEM chain (leaf, then the CA) and its PKCS#8 PEM key."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        purpose = ExtendedKeyUsageOID.SERVER_AUTH if usage == "server" else ExtendedKeyUsageOID.CLIENT_AUTH
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        cert_file, key_file = self.folder / f"{name}.crt", self.folder / f"{name}.key"
        cert_file.write_bytes(cert.public_bytes(PEM) + self.cert.public_bytes(PEM))
        key_file.write_bytes(
            key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
        return cert_file, key_file

    def pkcs12(self, name: str, passphrase: str) -> Path:
        """A client identity as a PKCS#12 archive (.pfx) protected by `passphrase`."""
        cert_file, key_file = self.issue(name, "client")
        key = serialization.load_pem_private_key(key_file.read_bytes(), None)
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        archive = pkcs12.serialize_key_and_certificates(
            name.encode(),
            key,  # type: ignore[arg-type]
            cert,
            [self.cert],
            serialization.BestAvailableEncryption(passphrase.encode()),
        )
        path = self.folder / f"{name}.pfx"
        path.write_bytes(archive)
        return path

    def server_context(self, name: str = "upstream", client_certificates: bool = False) -> ssl.SSLContext:
        """A server's context with a certificate of this CA; `client_certificates`: the handshake fails
        without a client certificate this CA signed."""
        cert_file, key_file = self.issue(name)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_file, key_file)
        if client_certificates:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=self.ca_file)
        return context

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


def https_fetch(
    port: int,
    method: str,
    path: str,
    context: ssl.SSLContext,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    timeout: float = 10,
) -> tuple[int, dict[str, str], bytes]:
    """One HTTPS request to 127.0.0.1:`port` on a fresh connection, the certificate checked by `context`."""
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=context)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()
