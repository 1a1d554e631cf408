"""Serving HTTPS: the certificate and key checked at start, Sanic's `ssl=` argument, and the plain port's
redirect to the HTTPS port (Unleash Edge's --tls-* options and --redirect-http-to-https).

Sanic serves TLS itself. Its `ssl=` dict form is what crosses to `--workers N`'s worker processes (an
SSLContext does not pickle); "names" is given so Sanic does not read the certificate's subjectAltName,
which a certificate without one lacks (a KeyError in every worker).

The redirect listens apart from Sanic, in a thread of the main process: Sanic's worker processes put the
first listener's `ssl` on every listener of the app, so one app cannot serve HTTPS on one port and plain
HTTP on another with more than one worker.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from typing import TYPE_CHECKING, Any

from flagproxy.options import ConfigError

if TYPE_CHECKING:
    from aiohttp import web


def read_file(path: str, label: str) -> bytes:
    """The file's bytes; ConfigError naming `label` when it is missing or cannot be read."""
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise ConfigError(f"{label}: cannot read {path}: {error.strerror or error}") from None


def trust_certificates(context: ssl.SSLContext, path: str, label: str) -> None:
    """Trust the PEM certificates in `path` too; ConfigError when it holds none."""
    read_file(path, label)
    try:
        context.load_verify_locations(cafile=path)
    except ssl.SSLError:
        raise ConfigError(f"{label}: {path} holds no PEM certificate") from None


def load_identity(
    context: ssl.SSLContext, cert: str, key: str | None, cert_label: str, key_label: str, password: Any = None
) -> None:
    """Present the PEM certificate chain `cert` (leaf first) with its PEM private key (`key`, or in `cert`
    itself when None); ConfigError saying which file is missing, unreadable, or not what it should be."""
    trust_certificates(ssl.create_default_context(), cert, cert_label)
    if key is not None:
        read_file(key, key_label)
    try:
        context.load_cert_chain(cert, key, password)
    except ssl.SSLError as error:
        reason = error.reason or "not a PEM private key"
        if key is None:
            raise ConfigError(
                f"{cert_label}: {cert} does not hold its certificate's PEM private key ({reason})"
            ) from None
        raise ConfigError(
            f"{key_label}: {key} is not the PEM private key of {cert_label}'s certificate ({reason})"
        ) from None


def server_ssl(cert: str, key: str, cert_label: str, key_label: str) -> dict[str, Any]:
    """Sanic's `ssl=` argument for a PEM certificate chain (leaf first) and its PEM private key, checked."""
    read_file(cert, cert_label)
    load_identity(ssl.create_default_context(ssl.Purpose.CLIENT_AUTH), cert, key, cert_label, key_label)
    return {"cert": cert, "key": key, "names": []}


def redirect_target(host: str, https_port: int, path_and_query: str) -> str:
    """Edge's redirect_to_https: the request's Host with its port replaced by the HTTPS port."""
    name = host
    if host.startswith("["):  # an IPv6 literal, [::1]:3063
        name = host[: host.index("]") + 1]
    elif host.count(":") == 1:
        name = host.partition(":")[0]
    return f"https://{name}:{https_port}{path_and_query or '/'}"


class HttpsRedirect:
    """Answers every request on host:port with 308 Permanent Redirect to the same path and query on the
    HTTPS port, as Edge's plain port does with --redirect-http-to-https. `start` binds (OSError if it
    cannot) before the instance serves; `stop` after it has stopped."""

    def __init__(self, host: str, port: int, https_port: int) -> None:
        self.host, self.port, self.https_port = host, port, https_port
        self._loop = asyncio.new_event_loop()
        self._runner: Any = None  # aiohttp's AppRunner once listening
        self._thread = threading.Thread(target=self._loop.run_forever, name="https-redirect", daemon=True)

    async def _redirect(self, request: web.Request) -> web.Response:
        from aiohttp import web

        host = request.headers.get("Host", "")
        if not host or any(c in host for c in "/\\@ ?#"):
            return web.Response(status=400, text="Bad Request: no usable Host header\n")
        # The path and query of the request target (of an absolute-form target too, as Edge reads it).
        target = request.raw_path if request.raw_path.startswith("/") else request.rel_url.raw_path_qs
        location = redirect_target(host, self.https_port, target)
        return web.Response(status=308, headers={"Location": location})

    async def _start(self) -> None:
        from aiohttp import web  # imported by the main process only, which runs the redirect

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._redirect)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port, reuse_address=True).start()

    def start(self) -> None:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result()
            self._runner = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()
