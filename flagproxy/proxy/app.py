"""The app factory: `create_app(settings)` → a Sanic app serving every proxy route.

Request order (proxy-behaviour.md section 1, with SPEC.md's readiness rule first): not ready → 503 for
every request; then 415 (content type) → 400 (JSON syntax, validation) → 401 (key) → 501 (/proxy/all off)
→ 200/304. The hot routes are plain Sanic handlers closing over what they need: no middleware, no
sanic-ext, one snapshot read, one engine call that returns the finished body, one hash for the ETag.

Unknown paths, other methods, any-case paths (`/PROXY`) and preflights reach Sanic's NotFound /
MethodNotAllowed handler (`_fallback`), which answers them as Express does; the common paths never pay
for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from sanic import HTTPResponse, Request, Sanic
from sanic.exceptions import BadRequest, MethodNotAllowed, NotFound, PayloadTooLarge

from flagproxy.disk import disk_writer
from flagproxy.http import responses as r
from flagproxy.http.base_app import (
    SDK_BODY_LIMIT,
    TOO_LARGE,
    bad_http,
    headers_too_large,
    new_app,
    unexpected,
)
from flagproxy.http.bodies import check_content_type, check_register, check_usage, parse_json, read_json
from flagproxy.http.conditional import make_answer, vary
from flagproxy.http.context import body_context, parse_toggles, query_context
from flagproxy.http.cors import CorsPolicy
from flagproxy.http.errors import ClientError, type_error
from flagproxy.http.etag import none_match, weak_etag
from flagproxy.http.hot_routes import HotRoutes
from flagproxy.http.logger import make_logger
from flagproxy.http.series import CONTENT_TYPE as PROMETHEUS_TYPE
from flagproxy.http.series import RequestSeries, preflight_or_fallback
from flagproxy.http.serving import answer_can_arrive, guard_worker_signals
from flagproxy.http.trust import remote_address_of
from flagproxy.instance.follower import Follower
from flagproxy.instance.leader import Instance, stop_sync
from flagproxy.instance.patcher import ServedPatcher
from flagproxy.instance.relay import RelayedChanges
from flagproxy.instance.response_cache import ResponseCache
from flagproxy.instance.store import ServedSnapshot, SnapshotStore
from flagproxy.proxy.auth import KeyRing, accepts_either
from flagproxy.proxy.docs_page import build_docs_page
from flagproxy.proxy.enrichers import EnricherError, enrich
from flagproxy.proxy.openapi import build_openapi
from flagproxy.proxy.series import FlagUsageSeries, ResponseCacheSeries, scrape
from flagproxy.proxy.settings import ProxySettings
from flagproxy.proxy.status_page import page_body, status_document
from flagproxy.proxy.sync import build_sync
from flagproxy.sync.usage import UsageCollector

_app_numbers = itertools.count(1)
Handler = Callable[[Request], Awaitable[HTTPResponse]]
Enriched = Callable[[dict[str, Any], Request], Awaitable[dict[str, Any]]]


def create_app(
    settings: ProxySettings | None = None,
    *,
    env: Mapping[str, str] | None = None,
    log_warnings: bool = True,
    **options: Any,
) -> Sanic:
    """Build the proxy app. Without `settings`, `options` (keywords, SPEC.md names too) and `env`
    (default os.environ) are resolved with ProxySettings.load; a bad option raises ConfigError."""
    if settings is None:
        settings = ProxySettings.load(options, os.environ if env is None else env)
    elif options:
        raise TypeError("pass either settings or options, not both")
    return _ProxyApp(settings, log_warnings).app


def create_worker_app(settings: ProxySettings, instance_directory: str, parent_pid: int | None) -> Sanic:
    """One process of `flagproxy proxy`, in the instance folder `instance_directory` (leader.py). With
    `parent_pid` (a worker of `--workers N`) it follows the sync that process runs; without, it is the
    whole instance (`--workers 1`) and runs the sync itself."""
    if parent_pid is None:
        return _ProxyApp(settings, False, Instance.create(instance_directory)).app
    return _ProxyApp(settings, False, Instance(instance_directory), parent_pid).app


class _ProxyApp:
    def __init__(
        self,
        settings: ProxySettings,
        log_warnings: bool,
        instance: Instance | None = None,
        parent_pid: int | None = None,
    ) -> None:
        self.settings = s = settings
        self.logger = make_logger(s.logger, s.log_level, s.use_json_logger)
        self.store = SnapshotStore(custom_strategies=s.custom_strategies, logger=self.logger)
        self.collector = UsageCollector()
        self.cors = CorsPolicy(s)
        self.client_keys = KeyRing(s.accepted_client_keys)
        self.server_keys = KeyRing(s.exp_server_side_sdk_config_tokens)
        self.log_warnings = log_warnings
        # Without a parent process this app is a whole instance: it runs the sync itself (in a private
        # folder unless given one) and follows it like any worker.
        self.runs_sync = parent_pid is None
        self.instance = instance
        self.parent_pid = parent_pid
        self.sync: Any = None
        self.follower: Follower | None = None
        self.following: Any = None

        app = new_app(
            f"flagproxy-proxy-{next(_app_numbers)}",
            body_limit=SDK_BODY_LIMIT,
            access_log=s.log_level == "debug",
        )
        app.ctx.proxy = self
        app.ctx.settings = s
        app.ctx.store = self.store
        app.ctx.collector = self.collector
        self.app = app
        self.routes: dict[tuple[str, str], Handler] = {}
        # One cache for the four toggle routes (keys start with the route's name), so RESPONSE_CACHE_MB bounds
        # the worker. Enrichers are arbitrary code (they may read the clock): their answers are never reused.
        cache_bytes = s.response_cache_mb * 1024 * 1024
        self.response_cache = (
            ResponseCache(cache_bytes) if cache_bytes and not s.exp_custom_enrichers else None
        )
        self._answer = make_answer(self.cors)
        self._remote_address = remote_address_of(s.trust_proxy)
        # Requests by route and status, durations (flagproxy/http/series.py): each handler wrapped once.
        self.series = RequestSeries(s.enable_prometheus, self.logger)
        self.flag_usage = FlagUsageSeries(self.series)
        ResponseCacheSeries(self.series, self.response_cache)
        self._add_routes()
        base = s.proxy_base_path
        HotRoutes(app, [(m, f"{base}/proxy{all_}") for m in ("GET", "POST") for all_ in ("", "/all")])
        fallback = self.series.observe("fallback", self._fallback, label=preflight_or_fallback)
        app.error_handler.add(NotFound, fallback)
        app.error_handler.add(MethodNotAllowed, fallback)
        app.error_handler.add(PayloadTooLarge, self.series.observe("error", self._too_large))
        app.error_handler.add(BadRequest, self.series.observe("error", self._bad_http))
        app.error_handler.add(Exception, self.series.observe("error", self._unexpected))
        app.register_listener(self._start, "before_server_start")
        app.register_listener(self._stop, "after_server_stop")
        guard_worker_signals(app)

    # ---- wiring -------------------------------------------------------------------------------------

    def _add_routes(self) -> None:
        base = self.settings.proxy_base_path
        p = base + "/proxy"
        get, post = ["GET", "HEAD"], ["POST"]
        self._route(p, get, "toggles_get", self._make_get_toggles(include_disabled=False))
        self._route(p, post, "toggles_post", self._make_post_toggles(include_disabled=False))
        self._route(p + "/all", get, "all_get", self._make_get_toggles(include_disabled=True))
        self._route(p + "/all", post, "all_post", self._make_post_toggles(include_disabled=True))
        self._route(p + "/client/metrics", post, "client_metrics", self._client_metrics)
        self._route(p + "/all/client/metrics", post, "all_client_metrics", self._client_metrics)
        self._route(p + "/client/register", post, "client_register", self._client_register)
        self._route(p + "/client/features", get, "client_features", self._client_features)
        self._route(p + "/health", get, "health", self._health)
        self._route(p + "/internal-backstage/prometheus", get, "prometheus", self._prometheus)
        if self.settings.enable_status_page:
            self.status_body = page_body(base, self.settings.client_keys_header_name)
            self._route(p + "/status", get, "status_page", self._status_page)
            self._route(p + "/status.json", get, "status_json", self._status_json)
        if self.settings.enable_oas:
            spec = build_openapi(base, self.settings.client_keys_header_name)
            self.openapi_body = orjson.dumps(spec)
            self.docs_body = build_docs_page(spec)
            self._route(base + "/docs/openapi.json", get, "openapi_json", self._openapi_json)
            self._route(base + "/docs/openapi", get, "openapi_page", self._openapi_page)

    def _route(self, path: str, methods: list[str], name: str, handler: Handler) -> None:
        observed = self.series.observe(name, handler)
        self.app.add_route(observed, path, methods=methods, name=name, strict_slashes=False)
        for method in methods:  # any-case spellings, through the fallback (counted as "fallback")
            self.routes[(method, path.lower())] = handler

    async def _start(self, app: Sanic) -> None:
        if self.runs_sync:
            if self.instance is None:
                self.instance = Instance.create()
            # On this serving loop: the compile runs in a process of its own (flagproxy/instance/compiler.py).
            self.sync = build_sync(
                self.settings, self.instance, self.logger, self.log_warnings, compile_apart=True
            )
            app.ctx.sync = self.sync
            if self.sync.streamer is not None:  # a streamed change patched into this store, not published
                self.sync.streamer.patcher = ServedPatcher(
                    self.store,
                    self.instance.publication,
                    custom_strategies=self.settings.custom_strategies,
                    logger=self.logger,
                )
            await self.sync.start()  # the backup, if there is one, is published when this returns
        else:
            app.ctx.sync = None
        assert self.instance is not None
        self.series.start(self.instance.series_directory)
        self.follower = Follower(
            self.store,
            self.instance.publication,
            self.instance.spool,
            self.collector,
            self.logger,
            parent_pid=self.parent_pid,
            on_orphaned=lambda: app.stop(terminate=False),
            hand_off_usage=self.settings.metrics_interval > 0,
            on_usage=self._count_usage if self.settings.enable_prometheus else None,
            relayed=None
            if self.runs_sync or not self.settings.streaming
            else RelayedChanges(
                self.store,
                self.instance.directory,
                custom_strategies=self.settings.custom_strategies,
                logger=self.logger,
            ),
        )
        self.follower.load()  # before the first connection: a late worker serves the current revision
        self.following = asyncio.get_running_loop().create_task(self.follower.run())

    async def _stop(self, app: Sanic) -> None:
        if self.following is not None:
            self.following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.following
        if self.follower is not None:
            self.follower.stop()  # hands over what was counted since the last handoff
        await self.series.stop()
        await disk_writer().drain()  # that hand-off is in the spool before the sync (or the exit)
        if self.sync is not None and self.instance is not None:
            await stop_sync(self.sync, self.instance)  # and, with the sync here, sends it
        if self.runs_sync and self.instance is not None:
            self.instance.remove()

    # ---- response helpers ---------------------------------------------------------------------------

    def _cors(self, request: Request) -> dict[str, str]:
        return self.cors.actual(request.headers.get("origin"))

    def _fixed(self, request: Request, status: int, body: bytes, content_type: str) -> HTTPResponse:
        cors = self._cors(request)
        headers = {**cors, "ETag": r.ETAGS[body], "Vary": vary(cors), "Keep-Alive": r.KEEP_ALIVE}
        return r.DatedResponse(body, status=status, headers=headers, content_type=content_type)

    def _catch_up(self) -> ServedSnapshot | None:
        """Asked only while this worker holds no snapshot: install a revision published since the last
        look (its wake may not have been read yet) now, so no worker answers 503 after another one has
        said it is ready. While nothing is published it costs a stat()."""
        if self.follower is not None:
            self.follower.load()
        return self.store.current

    def _not_ready(self, request: Request) -> HTTPResponse:
        return self._fixed(request, 503, r.NOT_READY, r.HTML)

    def _unauthorized(self, request: Request) -> HTTPResponse:
        return self._fixed(request, 401, r.UNAUTHORIZED, r.TEXT)

    def _json_error(self, request: Request, status: int, body: bytes) -> HTTPResponse:
        cors = self._cors(request)
        headers = {**cors, "ETag": weak_etag(body), "Vary": vary(cors), "Keep-Alive": r.KEEP_ALIVE}
        return r.DatedResponse(body, status=status, headers=headers, content_type=r.JSON)

    def _client_error(self, request: Request, error: ClientError) -> HTTPResponse:
        return self._json_error(request, error.status, error.body)

    # ---- context ------------------------------------------------------------------------------------

    def _make_context_finisher(
        self,
    ) -> tuple[Callable[[dict[str, Any], Request], dict[str, Any]], Enriched | None]:
        """(finish, finish_enriched): the context as the engine gets it. Without custom enrichers the
        second is None and `finish` does it all without a coroutine (one fewer per request); with them,
        `finish_enriched` awaits them between the caller's address and the defaults."""
        s = self.settings
        remote_address = self._remote_address
        forced_environment = s.environment
        app_name = s.service_app_name
        enrichers = s.exp_custom_enrichers

        def defaults(context: dict[str, Any]) -> dict[str, Any]:
            if forced_environment is not None:
                context["environment"] = forced_environment
            elif "environment" not in context:
                context["environment"] = "default"  # the Node SDK's static context underneath the request's
            if "appName" not in context:
                context["appName"] = app_name
            return context

        def finish(context: dict[str, Any], request: Request) -> dict[str, Any]:
            if "remoteAddress" not in context:
                context["remoteAddress"] = remote_address(request)
            return defaults(context)

        async def finish_enriched(context: dict[str, Any], request: Request) -> dict[str, Any]:
            if "remoteAddress" not in context:
                context["remoteAddress"] = remote_address(request)
            return defaults(await enrich(context, enrichers))

        return finish, (finish_enriched if enrichers else None)

    # ---- toggle routes (hot) ------------------------------------------------------------------------

    def _make_toggles(
        self,
        include_disabled: bool,
        read: Callable[[Request], Any],
        parse: Callable[[Any], tuple[list[str] | None, dict[str, Any]]],
        conditional: bool,
    ) -> Handler:
        """One toggle route: `read` gives the raw input (415 on a wrong content type), `parse` the toggle
        names and the context (400). Checks run in the Node proxy's order: 503, 415, 400, 401, 501."""
        store = self.store
        client_keys = self.client_keys
        key_header = self.settings.client_keys_header_name
        disabled = include_disabled and not self.settings.enable_all_endpoint
        finish, finish_enriched = self._make_context_finisher()
        collector = self.collector  # its bucket is swapped at every flush: look it up per request
        answer = self._answer
        remote_address = self._remote_address
        cache = self.response_cache
        route = "all" if include_disabled else "enabled"
        route += "-get" if conditional else "-post"

        async def toggles(request: Request) -> HTTPResponse:
            snapshot = store.current
            if snapshot is None and (snapshot := self._catch_up()) is None:
                return self._not_ready(request)
            try:
                raw = read(request)
            except ClientError as error:
                return self._client_error(request, error)
            key = (route, raw, remote_address(request)) if snapshot.reads_remote_address else (route, raw)
            hit = cache.get(snapshot.answers, key) if cache is not None else None
            if hit is None:
                try:
                    names, context = parse(raw)
                except ClientError as error:
                    return self._client_error(request, error)
            if not client_keys.accepts(request.headers.get(key_header)):
                return self._unauthorized(request)
            if hit is not None:
                cache.hits += 1  # type: ignore[union-attr]  # a hit comes from a cache
                if hit.outcomes is not None:
                    collector.counts.count_outcomes(hit.outcomes)
                return answer(request, hit.body, hit.etag, conditional)
            if disabled:
                return self._fixed(request, 501, r.ALL_DISABLED, r.HTML)
            if finish_enriched is None:
                context = finish(context, request)
            else:
                try:
                    context = await finish_enriched(context, request)
                except EnricherError as error:
                    return self._enricher_failed(request, error)
            outcomes = None
            if names is None:
                body, valid_in = snapshot.evaluate_all_body(context, include_disabled)
            else:
                body, valid_in, outcomes = snapshot.evaluate_named_body(context, names)
                collector.counts.count_outcomes(outcomes)
            etag = weak_etag(body)
            if cache is not None:
                cache.put(snapshot.answers, key, body, etag, outcomes, valid_in)
            return answer(request, body, etag, conditional)

        return toggles

    def _make_get_toggles(self, include_disabled: bool) -> Handler:
        return self._make_toggles(include_disabled, _query_string, _parse_query, conditional=True)

    def _make_post_toggles(self, include_disabled: bool) -> Handler:
        # POST answers are never 304 (Express's `fresh` only applies to GET and HEAD).
        return self._make_toggles(include_disabled, _json_body, _parse_post, conditional=False)

    def _enricher_failed(self, request: Request, error: EnricherError) -> HTTPResponse:
        self.logger.error(f"A custom context enricher failed: {error}")
        return self._json_error(request, 500, orjson.dumps(r.whoops(str(error))))

    # ---- other routes -------------------------------------------------------------------------------

    def _accepts_any_key(self, request: Request) -> bool:
        presented = request.headers.get(self.settings.client_keys_header_name)
        return accepts_either(presented, self.client_keys, self.server_keys)

    async def _client_metrics(self, request: Request) -> HTTPResponse:
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        try:
            toggles = check_usage(read_json(request))
        except ClientError as error:
            return self._client_error(request, error)
        if not self._accepts_any_key(request):
            return self._unauthorized(request)
        if answer_can_arrive(request):  # else a stop cut the connection: the SDK will send the bucket again
            self.collector.counts.merge(toggles)
        return self._fixed(request, 200, r.ACCEPTED, r.TEXT)

    async def _client_register(self, request: Request) -> HTTPResponse:
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        try:
            check_register(read_json(request))
        except ClientError as error:
            return self._client_error(request, error)
        if not self._accepts_any_key(request):
            return self._unauthorized(request)
        return self._fixed(request, 200, r.ACCEPTED, r.TEXT)

    async def _client_features(self, request: Request) -> HTTPResponse:
        snapshot = self.store.current
        if snapshot is None and (snapshot := self._catch_up()) is None:
            return self._not_ready(request)
        if not self.server_keys.accepts(request.headers.get(self.settings.client_keys_header_name)):
            return self._unauthorized(request)
        return self._answer(request, snapshot.features_body, snapshot.features_etag, True)

    async def _health(self, request: Request) -> HTTPResponse:
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        response = self._fixed(request, 200, r.HEALTH_OK, r.HTML)
        if none_match(request.headers.get("if-none-match"), r.ETAGS[r.HEALTH_OK]):
            return r.DatedResponse(status=304, headers={**self._cors(request), "ETag": r.ETAGS[r.HEALTH_OK]})
        return response

    def _count_usage(self, counts: Any) -> None:
        self.flag_usage.count_usage(counts, self.store.current)

    async def _prometheus(self, request: Request) -> HTTPResponse:
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        body = await scrape(self.series, self.store)
        cors = self._cors(request)
        return r.DatedResponse(
            body,
            headers={**cors, "ETag": weak_etag(body), "Vary": vary(cors), "Keep-Alive": r.KEEP_ALIVE},
            content_type=PROMETHEUS_TYPE,
        )

    async def _status_page(self, request: Request) -> HTTPResponse:
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        return r.DatedResponse(self.status_body, content_type=r.HTML, headers={"Keep-Alive": r.KEEP_ALIVE})

    async def _status_json(self, request: Request) -> HTTPResponse:
        """The status page's data: it names every flag, so it needs a client key, as /proxy does."""
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        if not self.client_keys.accepts(request.headers.get(self.settings.client_keys_header_name)):
            return self._unauthorized(request)
        assert self.instance is not None
        body = status_document(self.settings, self.store, self.instance.series_directory)
        headers = {**self._cors(request), "Cache-Control": "no-store", "Keep-Alive": r.KEEP_ALIVE}
        return r.DatedResponse(body, content_type=r.JSON, headers=headers)

    async def _openapi_json(self, request: Request) -> HTTPResponse:
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        # The Node proxy mounts /docs before its CORS middleware: no CORS headers here either.
        return r.DatedResponse(self.openapi_body, content_type=r.JSON, headers={"Keep-Alive": r.KEEP_ALIVE})

    async def _openapi_page(self, request: Request) -> HTTPResponse:
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        return r.DatedResponse(self.docs_body, content_type=r.HTML, headers={"Keep-Alive": r.KEEP_ALIVE})

    # ---- everything else ----------------------------------------------------------------------------

    async def _fallback(self, request: Request, exception: Exception) -> HTTPResponse:
        """Preflights, any-case paths and unknown routes (NotFound / MethodNotAllowed)."""
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        path = request.path
        key = path.lower().rstrip("/") or "/"
        if request.method == "OPTIONS":
            return self._options(request, key)
        handler = self.routes.get((request.method, key))
        if handler is not None:
            stream = request.stream
            if stream is not None and stream.request_body:
                # Sanic reads a body only for a route it found: this one's is still on the connection.
                try:
                    await request.receive_body()
                except PayloadTooLarge as error:
                    return await self._too_large(request, error)
                except BadRequest as error:
                    return await self._bad_http(request, error)
            return await handler(request)
        return self._not_found(request, {})

    def _options(self, request: Request, key: str) -> HTTPResponse:
        preflight = self.cors.preflight(
            request.headers.get("origin"), request.headers.get("access-control-request-headers")
        )
        if not self.cors.preflight_continue:
            return r.DatedResponse(
                status=self.cors.success_status,
                headers={**preflight, "Keep-Alive": r.KEEP_ALIVE},
            )
        # preflightContinue: the request goes on to the routes, where Express answers OPTIONS itself.
        allowed = sorted({m for (m, p) in self.routes if p == key})
        if not allowed:
            return self._not_found(request, preflight)
        body = ",".join(allowed).encode()
        vary = preflight.pop("Vary", None)
        headers = {
            **preflight,
            "Allow": body.decode(),
            "ETag": weak_etag(body),
            "Vary": f"{vary}, Accept-Encoding" if vary else "Accept-Encoding",
            "Keep-Alive": r.KEEP_ALIVE,
        }
        return r.DatedResponse(body, status=200, headers=headers, content_type=r.HTML)

    def _not_found(self, request: Request, cors: dict[str, str]) -> HTTPResponse:
        cors = {**(cors or self._cors(request))}
        vary = cors.pop("Vary", None)
        body = r.not_found_page(request.method, request.path)
        headers = {
            **cors,
            **r.NOT_FOUND_HEADERS,
            "Vary": f"{vary}, Accept-Encoding" if vary else "Accept-Encoding",
            "Keep-Alive": r.KEEP_ALIVE,
        }
        return r.DatedResponse(body, status=404, headers=headers, content_type=r.HTML)

    async def _too_large(self, request: Request, exception: Exception) -> HTTPResponse:
        if not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        return headers_too_large(exception) or self._json_error(request, 413, TOO_LARGE)

    async def _bad_http(self, request: Request, exception: Exception) -> HTTPResponse:
        if request is not None and not self.store.ready and not self._catch_up():
            return self._not_ready(request)
        return bad_http(exception)

    async def _unexpected(self, request: Request, exception: Exception) -> HTTPResponse:
        return unexpected(self.logger, request, exception)


def _query_string(request: Request) -> str:
    return request.query_string


def _parse_query(query: str) -> tuple[None, dict[str, Any]]:
    return None, query_context(query)


def _json_body(request: Request) -> bytes:
    """The raw body of a JSON request (415 for another content type); parsed later, unless cached."""
    check_content_type(request)
    return request.body


def _parse_post(raw: bytes) -> tuple[list[str] | None, dict[str, Any]]:
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise type_error("/body", "#/components/schemas/lookupTogglesSchema", "object")
    return parse_toggles(body), body_context(body)
