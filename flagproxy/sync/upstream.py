"""The upstream client API over aiohttp: what the Node proxy's SDK sends, header for header.

`fetch_features(etag)` answers `Updated(document, etag)`, `NOT_MODIFIED` or `Failed(...)`, never raises for
network trouble: the poller decides what a failure means. The document stays the bytes the upstream sent:
whoever installs it parses and checks it (flagproxy/sync/documents.py `read_document`), in the compile
process when the sync shares its process with a serving loop, so that process never parses it.

Filters (project, namePrefix, tag) go in the query string in the Node SDK's order.
HTTP_PROXY/HTTPS_PROXY/NO_PROXY and rejectUnauthorized apply to every upstream request.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import ssl
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit
from urllib.request import proxy_bypass_environment  # type: ignore[attr-defined]  # in the module, not its stubs

import aiohttp
import orjson
import yarl
from multidict import CIMultiDict

from flagproxy import __version__
from flagproxy.sync.documents import is_features_document

CLIENT_SPEC_VERSION = "5.2.0"
SDK_NAME = f"flagproxy:{__version__}"
# Upstream statuses worth retrying with backoff (the Node SDK's list, plus 408 and 5xx in general).
RETRIABLE = frozenset((404, 408, 429))


@dataclass(frozen=True, kw_only=True)
class UpstreamConfig:
    url: str
    token: str
    app_name: str
    instance_id: str
    refresh_interval: int = 5000
    metrics_interval: int = 30000
    project: str | None = None
    name_prefix: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    verify_tls: bool = True
    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: str | None = None
    timeout_seconds: float = 10.0
    # The header the token goes in, and headers every request carries (edge's --upstream-auth-header and
    # --custom-client-headers; a custom header of the token's name replaces it, as in Edge).
    token_header: str = "Authorization"
    extra_headers: tuple[tuple[str, str], ...] = ()
    # The TLS of every request when more than verify_tls is said: a CA, a client certificate
    # (flagproxy/http/client_tls.py).
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False, repr=False)
    streaming: bool = False  # keep the features by streaming (flagproxy/sync/stream.py), polling as fall-back
    connection_id: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass(frozen=True)
class Updated:
    document: bytes  # the features document's JSON, unparsed and unchecked
    etag: str | None
    fetch_mode: str | None = None  # the `fetch-mode` header: "streaming" when the upstream offers a stream


class _NotModified:
    def __repr__(self) -> str:
        return "NOT_MODIFIED"


NOT_MODIFIED = _NotModified()


@dataclass(frozen=True)
class Failed:
    """kind: "retry" (timeouts, 5xx, 429, 404: back off), "auth" (401/403), "other" (anything else).
    `retry_after`: seconds the upstream asked us to wait (Retry-After on a 429 or 503), if it said.
    `refused`: a 200 whose document was refused, why (flagproxy/sync/documents.py's reasons: the poller
    makes these from the installer's DocumentError)."""

    kind: str
    reason: str
    status: int | None = None
    retry_after: float | None = None
    refused: str | None = None


MAX_RETRY_AFTER = 600.0  # seconds: a longer Retry-After is taken as this


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds: a number of seconds, or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return min(max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds()), MAX_RETRY_AFTER)


FetchResult = Updated | _NotModified | Failed


PROXY_URL_LABEL = "SERVICE_URL is the upstream's API address, e.g. http://unleash:4242/api"


def wrong_path_hint(features_url: str, url_label: str) -> str:
    """What a 404 at the features path most likely means, for the log line that reports it: the address
    lacks or doubles `/api` (the first mistake with Unleash's URLs), or it is not an Unleash API at all.
    `url_label` says which setting gives the address and what it should look like."""
    path = urlsplit(features_url).path
    if "/api/api/" in path:
        guess = "The URL probably doubles /api"
    elif not path.endswith("/api/client/features"):
        guess = "The URL probably lacks /api"
    else:
        guess = "Nothing answers there as Unleash does"
    return f"{guess}: {url_label}."


def base_url(url: str) -> str:
    """The Node SDK's normalisation: drop a trailing `/features`, end with one `/`."""
    url = url.rstrip("/")
    if url.endswith("/features") and not url.endswith("/client/features"):
        url = url[: -len("/features")]
    return url + "/"


def features_url(config: UpstreamConfig, path: str = "client/features") -> str:
    """`path` under the upstream's API address, with the filters in the query string (the features fetch,
    and the stream, flagproxy/sync/stream.py, which the upstream scopes the same way)."""
    query: list[tuple[str, str]] = []
    if config.project:
        query.append(("project", config.project))
    if config.name_prefix:
        query.append(("namePrefix", config.name_prefix))
    query += [("tag", f"{name}:{value}") for name, value in config.tags]
    url = base_url(config.url) + path
    return url + ("?" + urlencode(query) if query else "")


def classify_status(status: int) -> str:
    if status in (401, 403):
        return "auth"
    if status in RETRIABLE or status >= 500:
        return "retry"
    return "other"


class UpstreamClient:
    def __init__(self, config: UpstreamConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        self.features_url = features_url(config)
        self.streaming_url = features_url(config, "client/streaming")

    def _headers(self, interval: int | None) -> CIMultiDict[str]:
        c = self.config
        headers = CIMultiDict(
            {
                "User-Agent": c.app_name,
                "unleash-appname": c.app_name,
                "UNLEASH-INSTANCEID": c.instance_id,
                "Unleash-Client-Spec": CLIENT_SPEC_VERSION,
                "unleash-sdk": SDK_NAME,
                "unleash-connection-id": c.connection_id,
                "unleash-interval": str(interval) if interval is not None else "undefined",
            }
        )
        if c.token:  # edge's /edge/validate client has none
            headers[c.token_header] = c.token
        for name, value in c.extra_headers:
            headers[name] = value
        return headers

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            context = self.config.ssl_context
            connector = aiohttp.TCPConnector(
                ssl=context if context is not None else self.config.verify_tls  # True: aiohttp's checks
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.config.timeout_seconds),
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    def proxy_for(self, url: str) -> str | None:
        parts = urlsplit(url)
        proxy = self.config.https_proxy if parts.scheme == "https" else self.config.http_proxy
        if (
            proxy
            and self.config.no_proxy
            and proxy_bypass_environment(parts.hostname or "", {"no": self.config.no_proxy})
        ):
            return None
        return proxy

    async def close(self) -> None:
        # Let go of the session before awaiting its close: a request started meanwhile opens a new one,
        # which must not be forgotten unclosed by an assignment after the await.
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def fetch_features(self, etag: str | None) -> FetchResult:
        headers = self._headers(self.config.refresh_interval)
        if etag:
            headers["If-None-Match"] = etag
        try:
            async with self._session_now().get(
                yarl.URL(self.features_url, encoded=True),
                headers=headers,
                proxy=self.proxy_for(self.features_url),
            ) as response:
                if response.status == 304:
                    return NOT_MODIFIED
                if response.status != 200:
                    wait = None
                    if response.status in (429, 503):
                        wait = retry_after_seconds(response.headers.get("Retry-After"))
                    return Failed(
                        classify_status(response.status), f"answered {response.status}", response.status, wait
                    )
                body = await response.read()
                new_etag = response.headers.get("ETag")
                fetch_mode = response.headers.get("fetch-mode")
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            return Failed("retry", describe_failure(exc))
        return Updated(body, new_etag, fetch_mode)

    def open_stream(self, last_event_id: str | None) -> Any:
        """GET the upstream's server-sent events (`client/streaming`, scoped by the same filters as the
        features fetch), for `async with`: the response, read by flagproxy/sync/stream.py. No overall time
        limit (a stream stays open); connecting has the fetch's, idle time is the reader's to bound."""
        headers = self._headers(None)
        headers["Accept"] = "text/event-stream"
        headers["Cache-Control"] = "no-cache"
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        limit = self.config.timeout_seconds
        return self._session_now().get(
            yarl.URL(self.streaming_url, encoded=True),
            headers=headers,
            proxy=self.proxy_for(self.streaming_url),
            timeout=aiohttp.ClientTimeout(total=None, connect=limit, sock_connect=limit),
        )

    async def post(self, path: str, body: dict[str, Any] | bytes, interval: int | None) -> int | str:
        """POST JSON to `<url>/<path>`; the status, or a description of the network failure."""
        answer = await self.exchange(path, body, interval)
        return answer if isinstance(answer, str) else answer[0]

    async def exchange(
        self, path: str, body: dict[str, Any] | bytes, interval: int | None = None
    ) -> tuple[int, bytes] | str:
        """POST JSON to `<url>/<path>`; (status, response body), or a description of the network failure.
        `body` may be bytes already encoded (the edge's metrics batches are measured before they go)."""
        url = base_url(self.config.url) + path
        headers = self._headers(interval)
        headers["Content-Type"] = "application/json"
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        try:
            async with self._session_now().post(
                url, data=data, headers=headers, proxy=self.proxy_for(url)
            ) as response:
                return response.status, await response.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            return describe_failure(exc)

    async def register(self, body: dict[str, Any]) -> int | str:
        return await self.post("client/register", body, None)

    async def send_usage(self, body: dict[str, Any]) -> int | str:
        return await self.post("client/metrics", body, self.config.metrics_interval)

    async def fetch_document(self, url: str, authorization: str | None) -> dict[str, Any] | str:
        """The bootstrap document at `url`, or a description of why there is none."""
        headers = self._headers(None)
        headers.pop(self.config.token_header, None)
        if authorization:
            headers["Authorization"] = authorization
        try:
            async with self._session_now().get(url, headers=headers, proxy=self.proxy_for(url)) as response:
                if response.status != 200:
                    return f"answered {response.status}"
                body = await response.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            return describe_failure(exc)
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return f"sent invalid JSON: {exc}"
        if not is_features_document(document):  # every field is checked when it is installed
            return "sent a document without a `features` list"
        return document


def describe_failure(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
