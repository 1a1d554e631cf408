"""The TLS of flagproxy's upstream requests (Unleash Edge's --upstream-certificate-file, client identity
options and --skip-ssl-verification): one SSLContext, built and checked at start, that every upstream
session of the instance uses (flagproxy/sync/upstream.py).

As in Edge (crates/oss/unleash-edge-http-client): the extra certificate is trusted besides the system's
CAs; the client identity is a PKCS#12 archive if one is given, else a PKCS#8 certificate and key pair,
else one PEM file holding both. A PKCS#12 archive is opened with `cryptography`; Python's ssl module loads
identities from files only, so its key goes through a private temporary file, encrypted there with a
one-time password, and the file is removed at once.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from dataclasses import dataclass

from flagproxy.http.tls import load_identity, read_file, trust_certificates
from flagproxy.options import ConfigError


@dataclass(frozen=True, kw_only=True)
class ClientTls:
    """File paths as given (and the label each was given by, for messages)."""

    verify: bool = True
    ca_file: str | None = None
    pkcs12_file: str | None = None
    pkcs12_passphrase: str | None = None
    cert_file: str | None = None  # PKCS#8 pair: the certificate chain
    key_file: str | None = None  # PKCS#8 pair: the key
    pem_file: str | None = None  # key and chain in one PEM file
    labels: tuple[tuple[str, str], ...] = ()

    def label(self, key: str) -> str:
        return dict(self.labels).get(key, "--" + key.replace("_", "-"))

    @property
    def needed(self) -> bool:
        """Whether anything differs from the default context (verification against the system's CAs)."""
        return bool(self.ca_file or self.pkcs12_file or self.cert_file or self.key_file or self.pem_file)


def client_context(tls: ClientTls) -> ssl.SSLContext:
    """The upstream's SSLContext; ConfigError naming the option whose file cannot be used."""
    context = ssl.create_default_context()
    if tls.ca_file:
        trust_certificates(context, tls.ca_file, tls.label("upstream_certificate_file"))
    if tls.pkcs12_file:
        _load_pkcs12(context, tls)
    elif tls.cert_file:
        if not tls.key_file:
            label = tls.label("pkcs8_client_certificate_file")
            raise ConfigError(f"{label} needs --pkcs8-client-key-file (PKCS8_CLIENT_KEY_FILE)")
        load_identity(
            context, tls.cert_file, tls.key_file,
            tls.label("pkcs8_client_certificate_file"), tls.label("pkcs8_client_key_file"),
        )  # fmt: skip
    elif tls.key_file:
        raise ConfigError(
            f"{tls.label('pkcs8_client_key_file')} needs --pkcs8-client-certificate-file "
            "(PKCS8_CLIENT_CERTIFICATE_FILE)"
        )
    elif tls.pem_file:
        load_identity(context, tls.pem_file, None, tls.label("pem_cert_file"), "")
    if not tls.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _load_pkcs12(context: ssl.SSLContext, tls: ClientTls) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    path = tls.pkcs12_file or ""
    label = tls.label("pkcs12_identity_file")
    data = read_file(path, label)
    passphrase = (tls.pkcs12_passphrase or "").encode()
    try:
        key, cert, chain = pkcs12.load_key_and_certificates(data, passphrase or None)
    except ValueError:
        said = tls.label("pkcs12_passphrase") if tls.pkcs12_passphrase else "no passphrase"
        raise ConfigError(
            f"{label}: {path} cannot be opened with {said} (a wrong passphrase, or not a PKCS#12 archive)"
        ) from None
    if key is None or cert is None:
        raise ConfigError(f"{label}: {path} holds no private key with its certificate")
    once = secrets.token_bytes(32)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(once),
    )
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *chain])
    handle, temporary = tempfile.mkstemp(prefix="flagproxy-identity-", suffix=".pem")  # mode 0600
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(pem)
        context.load_cert_chain(temporary, password=once)
    except ssl.SSLError as error:
        raise ConfigError(f"{label}: {path}'s key and certificate cannot be used: {error.reason}") from None
    finally:
        os.unlink(temporary)
