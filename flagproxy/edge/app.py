"""The `flagproxy edge` app's wiring: settings, per-scope snapshot stores, the token gate, CORS, the shared
Sanic configuration and error answers, the helpers its routes answer with (the route table, and
`create_app`, are flagproxy/edge/routes.py; docs/edge.md lists the routes).

One app per worker process. It follows what the instance's leader publishes (flagproxy/edge/scopes.py,
flagproxy/instance/follower.py), asks the leader about tokens it has not seen (flagproxy/edge/leader.py)
and hands the usage it counts to the leader through the instance folder's spool. Without a main process
(`--workers 1`, or an app made in a program or a test) it runs the leader itself, on its own loop.

Request order: allow/deny list (403) → route → token (flagproxy/edge/access.py: 401, 403, 511) → not
hydrated yet 503 → 415/400 on a bad body → the answer. Frontend answers are the engine's finished bytes
(the same evaluator and response cache as `flagproxy proxy`), client features are bytes built once per
snapshot with their ETag; nothing is computed per request that does not depend on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
from collections.abc import Awaitable, Callable
from typing import Any, cast

import orjson
from sanic import HTTPResponse, Request, Sanic
from sanic.exceptions import BadRequest, MethodNotAllowed, NotFound, PayloadTooLarge

from flagproxy.disk import disk_writer
from flagproxy.edge.access import Gate, Refusal
from flagproxy.edge.leader import EdgeLeader, EdgeLink, Revocations
from flagproxy.edge.offline import OfflineSource
from flagproxy.edge.scopes import Scopes, ServedScope
from flagproxy.edge.settings import OFFLINE, EdgeSettings
from flagproxy.edge.tokens import EdgeToken
from flagproxy.edge.usage import EdgeUsage
from flagproxy.edge.validation import TokenValidator
from flagproxy.http import responses as r
from flagproxy.http.base_app import TOO_LARGE, bad_http, headers_too_large, new_app, unexpected
from flagproxy.http.conditional import make_answer
from flagproxy.http.cors import CorsPolicy
from flagproxy.http.delta import Streams
from flagproxy.http.errors import ClientError
from flagproxy.http.logger import make_logger
from flagproxy.http.series import RequestSeries, preflight_or_fallback
from flagproxy.http.serving import guard_worker_signals
from flagproxy.http.trust import remote_address_of
from flagproxy.instance.follower import InstanceFollower
from flagproxy.instance.leader import Instance

BODY_LIMIT = 256 * 1024  # a downstream edge's usage batch is under 95 kB; SDK bodies far smaller
NOT_READY = b'{"error":"Edge has no features for this token yet: its upstream has not answered"}'
_numbers = itertools.count(1)
Handler = Callable[..., Awaitable[HTTPResponse]]


class EdgeApp:
    def __init__(
        self, settings: EdgeSettings, instance_directory: str | None = None, parent_pid: int | None = None
    ) -> None:
        self.settings = s = settings
        self.offline = settings.mode == OFFLINE
        self.logger = make_logger(None, s.log_level, False)
        # Without a parent process this app is a whole instance: it runs the leader itself (in a private
        # folder unless given one) and follows it like any worker.
        self.parent_pid = parent_pid
        self.instance: Instance | None = None
        if instance_directory is not None:
            directory = instance_directory
            self.instance = Instance(directory) if parent_pid else Instance.create(directory)
        self.leader: EdgeLeader | None = None
        # Open /api/client/streaming connections of this worker (flagproxy/edge/delta_api.py): each new
        # revision's delta events reach them as the worker installs it.
        self.streams = Streams(s.max_streams)
        self.scopes = Scopes(
            "", self.logger, self.streams.offer
        )  # its folder is the instance's, known at start
        self.usage = EdgeUsage()
        self.cors = CorsPolicy(s)
        self.token_header = s.edge_auth_header.lower()  # where clients put their token (EDGE_AUTH_HEADER)
        # Questions for the leader wait as long as the leader waits for the upstream, and a little more.
        self.link = EdgeLink("", 2.0 * s.upstream_request_timeout + 5.0)
        if self.offline:
            self.validator = OfflineSource(s, self.logger).validator  # the tokens given: nothing to ask
        else:
            self.validator = TokenValidator(self.link, self.logger, trusted=s.pretrusted_tokens)
        self.follower: InstanceFollower | None = None
        self.gate = Gate(self)
        self.answer = make_answer(self.cors)
        self.remote_address = remote_address_of(s.trust_proxy)  # request → the context's remoteAddress
        self.connect_via = {"appName": s.app_name, "instanceId": s.instance_id}  # added to registrations
        self.tasks: list[asyncio.Task[Any]] = []
        # Requests by route and status and their durations, as `flagproxy proxy` counts them
        # (flagproxy/http/series.py), served with the other series at /internal-backstage/metrics and
        # summed over every worker of the instance.
        self.request_series = RequestSeries(enabled=True, logger=self.logger)
        # The delta stream's series (flagproxy/edge/delta_api.py), summed over the workers.
        self.open_streams, self.stream_messages = self.request_series.stream_cells()

        app = new_app(
            f"flagproxy-edge-{next(_numbers)}", body_limit=BODY_LIMIT, access_log=s.log_level == "debug"
        )
        app.ctx.edge = self
        self.app = app
        if s.allow_list or s.deny_list:
            app.register_middleware(self._address_check, "request")
        handlers: tuple[tuple[type[Exception], Any], ...] = (
            (NotFound, self.request_series.observe("fallback", self._fallback, label=preflight_or_fallback)),
            (
                MethodNotAllowed,
                self.request_series.observe("fallback", self._fallback, label=preflight_or_fallback),
            ),
            (PayloadTooLarge, self._too_large),
            (BadRequest, self._bad_http),
            (Exception, self._unexpected),
        )
        for exception, handler in handlers:
            app.error_handler.add(exception, handler)
        for listener, event in (
            (self._start, "before_server_start"),
            (self._end_streams, "before_server_stop"),
            (self._stop, "after_server_stop"),
        ):
            app.register_listener(listener, event)
        guard_worker_signals(app)

    # ---- wiring -------------------------------------------------------------------------------------

    def route(
        self,
        path: str,
        methods: list[str],
        handler: Callable[..., Awaitable[HTTPResponse | None]],
        *,
        observed: bool = True,
    ) -> None:
        """`observed`: counted in the request series (not a stream, whose duration is its connection's)."""
        name = f"{'_'.join(methods)}{path}".replace("/", "_").replace("<", "").replace(">", "").lower()
        label = path.removeprefix(self.settings.base_path) or "/"  # a route template: bounded
        answer = self.request_series.observe(label, handler) if observed else handler
        # Both are coroutine functions: Sanic's annotation says Coroutine, the series wrapper's Awaitable.
        self.app.add_route(cast(Any, answer), path, methods=methods, name=name, strict_slashes=False)

    async def _start(self, app: Sanic) -> None:
        if self.instance is None:
            self.instance = Instance.create()
        instance = self.instance
        if self.parent_pid is None:
            self.leader = EdgeLeader(self.settings, instance, self.logger, compile_apart=True)
            await self.leader.start()
        self.scopes.directory = instance.directory
        self.link.path = instance.channel_path
        self.request_series.start(instance.series_directory)
        watched: list[Any] = []
        if not self.offline:
            # The leader says when its revalidation refused a token; this worker then asks it about every
            # token it knows (answered from the leader's cache), so a revoked token stops working here too.
            watched.append(Revocations(instance.directory, self.validator.revalidate))
        self.follower = InstanceFollower(
            lambda: [*self.scopes.documents(), *watched],
            self._hand_off,
            self.logger,
            parent_pid=self.parent_pid,
            on_orphaned=lambda: app.stop(terminate=False),
            wake_directory=instance.directory,
        )
        self.follower.load()  # before the first connection: a late worker serves the current revisions
        self.tasks.append(asyncio.get_running_loop().create_task(self.follower.run()))

    async def _end_streams(self, app: Sanic) -> None:
        # Open streams end now rather than hold the graceful stop; their clients reconnect and resume.
        self.streams.stop_streams()

    def _hand_off(self) -> None:
        """This worker's usage to the leader's one usage stream (offline there is none: kept, bounded)."""
        if self.offline or self.instance is None:
            return
        handed = self.usage.handoff()
        if handed is not None and self.follower is not None:
            self.instance.spool.hand_off_document(handed, later=self.follower.handoff_failed)

    async def _stop(self, app: Sanic) -> None:
        for task in self.tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.follower is not None:
            self.follower.stop()  # hands over what was counted since the last handoff
        await self.request_series.stop()
        await disk_writer().drain()  # that hand-off is in the spool before the leader (or the exit)
        if self.leader is not None:
            await self.leader.stop()  # and, with the leader here, sends it
        if self.parent_pid is None and self.instance is not None:
            self.instance.remove()

    def catch_up(self) -> None:
        """Install what the leader published since the last watch (a wake may not have been read yet) now."""
        if self.follower is not None:
            self.follower.load()

    async def is_ready(self) -> bool:
        """The leader says the instance is ready, and this worker serves every feed it published."""
        status = await self.link.status()
        if not status or not status.get("ready"):
            return False
        self.catch_up()
        return self.scopes.loaded

    async def dynamic_feed(self, token: EdgeToken) -> None:
        """--dynamic: the leader syncs the token's scope (once for the instance); then serve it here."""
        if await self.link.follow(token.secret):
            self.catch_up()

    # ---- request helpers ----------------------------------------------------------------------------

    def headers(self, request: Request, extra: dict[str, str] | None = None) -> dict[str, str]:
        cors = self.cors.actual(request.headers.get("origin"))
        return {**cors, **(extra or {})}

    def json(self, request: Request, body: bytes, status: int = 200, etag: str | None = None) -> HTTPResponse:
        headers = self.headers(request, {"ETag": etag} if etag else None)
        return r.DatedResponse(body, status=status, headers=headers, content_type=r.JSON)

    def empty(self, request: Request, status: int) -> HTTPResponse:
        return r.DatedResponse(status=status, headers=self.headers(request))

    def refusal(self, request: Request, refusal: Refusal) -> HTTPResponse:
        if refusal.body:
            return self.json(request, refusal.body, refusal.status)
        return self.empty(request, refusal.status)

    def client_error(self, request: Request, error: ClientError) -> HTTPResponse:
        return self.json(request, error.body, error.status)

    def not_ready(self, request: Request) -> HTTPResponse:
        return self.json(request, NOT_READY, 503)

    def conditional(self, request: Request, body: bytes, etag: str) -> HTTPResponse:
        """200 with the body and its ETag, or 304 when If-None-Match has it."""
        return self.answer(request, body, etag, True)

    async def served(self, request: Request, family: str) -> ServedScope | HTTPResponse:
        """The scope the request's token reads, or the answer refusing it."""
        header = request.headers.get(self.token_header)
        served = self.gate.fast(header, family)
        if served is None:
            checked = await self.gate.check(header, family)
            if isinstance(checked, Refusal):
                return self.refusal(request, checked)
            served = checked
        return served

    async def hydrated(self, request: Request, family: str) -> ServedScope | HTTPResponse:
        """As `served`, and 503 while the scope has no features yet."""
        served = await self.served(request, family)
        if isinstance(served, ServedScope) and served.current is None:
            self.catch_up()
            if served.current is None:
                return self.not_ready(request)
        return served

    # ---- everything else ----------------------------------------------------------------------------

    async def _address_check(self, request: Request) -> HTTPResponse | None:
        """--allow-list / --deny-list on the socket peer's address (Edge's middleware): 403 outside."""
        try:
            address = ipaddress.ip_address(request.ip)
        except ValueError:
            return self.empty(request, 403)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        allow, deny = self.settings.allow_list, self.settings.deny_list
        if allow and not any(address.version == n.version and address in n for n in allow):
            return self.empty(request, 403)
        if any(address.version == n.version and address in n for n in deny):
            return self.empty(request, 403)
        return None

    async def _fallback(self, request: Request, exception: Exception) -> HTTPResponse:
        if request.method == "OPTIONS":
            preflight = self.cors.preflight(
                request.headers.get("origin"), request.headers.get("access-control-request-headers")
            )
            return r.DatedResponse(status=self.cors.success_status, headers=preflight)
        status = 405 if isinstance(exception, MethodNotAllowed) else 404
        return self.json(
            request, orjson.dumps({"error": f"{request.method} {request.path}: no such route"}), status
        )

    async def _too_large(self, request: Request, exception: Exception) -> HTTPResponse:
        return headers_too_large(exception) or self.json(request, TOO_LARGE, 413)

    async def _bad_http(self, request: Request, exception: Exception) -> HTTPResponse:
        return bad_http(exception)

    async def _unexpected(self, request: Request, exception: Exception) -> HTTPResponse:
        return unexpected(self.logger, request, exception)
