"""The upstream's TLS through real `flagproxy edge` processes against a loopback HTTPS upstream whose
certificate a test CA signed and which asks for a client certificate of that CA: the client identity as
a PKCS#8 pair, a PKCS#12 archive or one PEM file, the CA as --upstream-certificate-file or no check with
--skip-ssl-verification; without an identity or without the CA nothing gets through; a file that cannot
be used is one line and exit 2."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.edge.certificates import TestCA
from tests.edge.harness import CountingUpstream, edge, features_doc
from tests.http.loopback import LoopThread

DEV_CLIENT = "*:development.mtls-client-secret"
DEV_FRONTEND = "*:development.mtls-frontend-secret"


@pytest.fixture
def ca(tmp_path: Path) -> TestCA:
    return TestCA(tmp_path / "pki")


@pytest.fixture
def secure(loop_thread: LoopThread, ca: TestCA) -> Iterator[CountingUpstream]:
    stub = CountingUpstream(loop_thread, ssl_context=ca.server_context(client_certificates=True))
    stub.add(DEV_CLIENT, "client", "development", ["*"], features_doc(("f", "default", True)))
    stub.add(DEV_FRONTEND, "frontend", "development", ["*"])
    yield stub
    stub.stop()


def _serves_through(secure: CountingUpstream, client_name: str, *args: str, env: dict | None = None) -> None:
    process = edge(secure.url, [DEV_CLIENT], *args, env=env)
    try:
        process.wait_ready()
        status, _, body = process.get("/api/frontend", DEV_FRONTEND)
        assert status == 200 and b'"f"' in body
        assert secure.validate_calls >= 1 and secure.received("/api/client/features")
        assert set(secure.client_names) == {client_name}  # every request showed the identity
    finally:
        _, err = process.stop()
    assert process.popen.returncode == 0, err


def test_a_pkcs8_pair_and_the_upstream_ca(secure: CountingUpstream, ca: TestCA) -> None:
    cert, key = ca.issue("edge-pkcs8", "client")
    _serves_through(
        secure, "edge-pkcs8",
        "--pkcs8-client-certificate-file", str(cert), "--pkcs8-client-key-file", str(key),
        "--upstream-certificate-file", str(ca.ca_file),
    )  # fmt: skip


def test_a_pkcs12_archive_with_its_passphrase_without_verification(
    secure: CountingUpstream, ca: TestCA
) -> None:
    archive = ca.pkcs12("edge-pfx", "correct horse")
    env = {
        "PKCS12_IDENTITY_FILE": str(archive),
        "PKCS12_PASSPHRASE": "correct horse",
        "SKIP_SSL_VERIFICATION": "1",
    }
    _serves_through(secure, "edge-pfx", env=env)


def test_one_pem_file_of_key_and_chain(secure: CountingUpstream, ca: TestCA, tmp_path: Path) -> None:
    cert, key = ca.issue("edge-pem", "client")
    combined = tmp_path / "identity.pem"
    combined.write_bytes(key.read_bytes() + cert.read_bytes())
    _serves_through(
        secure,
        "edge-pem",
        "--pem-cert-file",
        str(combined),
        env={"UPSTREAM_CERTIFICATE_FILE": str(ca.ca_file)},
    )


@pytest.mark.parametrize("missing", ["identity", "ca"])
def test_without_the_identity_or_the_ca_nothing_gets_through(
    secure: CountingUpstream, ca: TestCA, missing: str
) -> None:
    cert, key = ca.issue("edge-client", "client")
    args = [] if missing == "identity" else ["--pkcs8-client-certificate-file", str(cert)]
    env = (
        {"UPSTREAM_CERTIFICATE_FILE": str(ca.ca_file)}
        if missing == "identity"
        else {"PKCS8_CLIENT_KEY_FILE": str(key)}
    )
    process = edge(secure.url, [DEV_CLIENT], *args, env=env)
    try:
        said = process.read_until("Validating 1 token(s) upstream failed")
        if "\n" not in said.split("upstream failed", 1)[1]:  # the line's end (it is said once)
            said += process.read_until("\n")
        if missing == "ca":
            assert "CERTIFICATE_VERIFY_FAILED" in said or "certificate verify failed" in said, said
        assert process.get("/internal-backstage/ready")[0] == 503
        assert secure.validate_calls == 0  # no request got past the handshake
    finally:
        process.stop()


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    full = {k: v for k, v in os.environ.items() if not k.startswith(("PKCS", "UPSTREAM_", "PEM_", "TOKENS"))}
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "edge", "-u", "https://127.0.0.1:9", "-t", DEV_CLIENT, *args],
        capture_output=True,
        text=True,
        env={**full, **(env or {})},
        timeout=60,
    )


def test_a_file_that_cannot_be_used_is_one_line_and_exit_2(ca: TestCA, tmp_path: Path) -> None:
    cert, key = ca.issue("edge-client", "client")
    _, other_key = ca.issue("someone-else", "client")
    archive = ca.pkcs12("edge-pfx", "s3cr3t-pass")
    text = tmp_path / "notes.txt"
    text.write_text("no certificate here\n")
    cases = [
        (["--pkcs12-identity-file", str(tmp_path / "none.pfx")], {}, "--pkcs12-identity-file: cannot read"),
        (
            ["--pkcs12-identity-file", str(archive)],
            {"PKCS12_PASSPHRASE": "n0t-the-pass"},
            f"--pkcs12-identity-file: {archive} cannot be opened with PKCS12_PASSPHRASE",
        ),
        (
            ["--pkcs12-identity-file", str(text)],
            {},
            f"--pkcs12-identity-file: {text} cannot be opened with no passphrase",
        ),
        (
            ["--pkcs8-client-certificate-file", str(cert)],
            {},
            "--pkcs8-client-certificate-file needs --pkcs8-client-key-file",
        ),
        (
            [],
            {"PKCS8_CLIENT_KEY_FILE": str(key)},
            "PKCS8_CLIENT_KEY_FILE needs --pkcs8-client-certificate-file",
        ),
        (
            ["--pkcs8-client-certificate-file", str(cert), "--pkcs8-client-key-file", str(other_key)],
            {},
            f"--pkcs8-client-key-file: {other_key} is not the PEM private key of --pkcs8-client-certificate",
        ),
        (
            ["--pkcs8-client-certificate-file", str(text), "--pkcs8-client-key-file", str(key)],
            {},
            f"--pkcs8-client-certificate-file: {text} holds no PEM certificate",
        ),
        (
            ["--pem-cert-file", str(cert)],
            {},
            f"--pem-cert-file: {cert} does not hold its certificate's PEM private key",
        ),
        (
            [],
            {"UPSTREAM_CERTIFICATE_FILE": str(text)},
            f"UPSTREAM_CERTIFICATE_FILE: {text} holds no PEM certificate",
        ),
        (
            ["--upstream-certificate-file", str(tmp_path)],
            {},
            f"--upstream-certificate-file: cannot read {tmp_path}",
        ),
    ]
    for args, env, said in cases:
        answer = _start(*args, env=env)
        lines = answer.stderr.strip().splitlines()
        assert answer.returncode == 2 and len(lines) == 1, (args, env, answer.stderr)
        assert lines[0].startswith(f"flagproxy edge: {said}"), (said, answer.stderr)
        assert (
            "n0t-the-pass" not in answer.stderr and "s3cr3t-pass" not in answer.stderr
        )  # never a passphrase
