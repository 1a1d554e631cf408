"""Everything `flagproxy edge` does upstream: validate the startup tokens, poll one feed per sync token,
revalidate known tokens, send usage in bulk. Once per instance, in its leader (flagproxy/edge/leader.py);
routes never wait on this except to validate a new token, which workers ask the leader about.

With --streaming each feed keeps its token's features by the upstream's event stream instead
(flagproxy/sync/stream.py: hydrated, then each change applied; polling while the stream is refused or
unreachable): a hydration is published whole, each later change relayed to the workers as its events
(flagproxy/edge/relayed.py).

Start-up tokens are validated in the background until the upstream answers (the instance is not ready
until then); each validated client token becomes a feed (flagproxy/edge/feeds.py) polled with the
sync package's poller and upstream client (flagproxy/sync/), starting from what the persistence backend
(--backup-folder, --redis-url: flagproxy/edge/persistence.py) kept of it when there is something.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from flagproxy.edge.feeds import Feeds, Scope, covers, scope_name
from flagproxy.edge.relayed import FeedRelay
from flagproxy.edge.settings import EdgeSettings
from flagproxy.edge.tokens import CLIENT, EdgeToken, masked, token_key
from flagproxy.edge.usage import BulkSender, EdgeUsage
from flagproxy.edge.validation import TokenValidator, UpstreamUnavailable
from flagproxy.sync.poller import Poller
from flagproxy.sync.stream import StreamingSync
from flagproxy.sync.upstream import UpstreamClient, UpstreamConfig
from flagproxy.sync.usage import iso_now

EDGE_URL_LABEL = "--upstream-url is the upstream's base URL without /api, e.g. http://unleash:4242"
START_RETRY_SECONDS = 1.0  # between two tries to validate start-up tokens while the upstream is away


def upstream_client(settings: EdgeSettings, token: str, api: bool = True) -> UpstreamClient:
    return UpstreamClient(
        UpstreamConfig(
            url=settings.upstream_url + ("/api" if api else ""),
            token=token,
            app_name=settings.app_name,
            instance_id=settings.instance_id,
            refresh_interval=settings.features_refresh_interval_seconds * 1000,
            metrics_interval=settings.metrics_interval_seconds * 1000,
            verify_tls=not settings.skip_ssl_verification,
            timeout_seconds=float(settings.upstream_request_timeout),
            token_header=settings.upstream_auth_header,
            extra_headers=settings.custom_client_headers,
            ssl_context=settings.upstream_tls,
            streaming=settings.streaming,
        )
    )


class Feed:
    """One sync token's poll loop."""

    def __init__(self, token: EdgeToken, settings: EdgeSettings, feeds: Feeds, logger: Any) -> None:
        self.token = token
        self.scope: Scope = token.scope
        self.feeds = feeds
        self.client = upstream_client(settings, token.secret)
        self.poller = Poller(
            self.client,
            interval_ms=settings.features_refresh_interval_seconds * 1000,
            on_update=self._update,
            on_not_modified=self._not_modified,
            logger=logger,
            token_label=f"the --tokens token {masked(token.secret)}",
            url_label=EDGE_URL_LABEL,
            on_result=self._fetched,
        )
        # --streaming: the upstream's event stream for this token, falling back to the poller above.
        self.streamer = (
            StreamingSync(self.client, self.poller, on_update=self._streamed, on_checked=self._not_modified,
                          logger=logger, observer=self)
            if settings.streaming
            else None
        )  # fmt: skip
        self.stream_changes: dict[str, int] = {}  # streamed changes by how they were applied
        self.task: asyncio.Task[None] | None = None
        self.last_refresh: str | None = None
        self.last_check: str | None = None

    async def _update(self, document: bytes) -> bool:
        self.last_refresh = self.last_check = iso_now()
        return await self.feeds.update(self.scope, document)

    # ---- what the stream tells its observer (flagproxy/sync/stream.py) ----

    def stream_change(self, applied: str) -> None:
        """A streamed change that changed the flags: `patched` (relayed as events) or `whole`."""
        self.stream_changes[applied] = self.stream_changes.get(applied, 0) + 1

    def refused(self, reason: str, source: str, message: str) -> None:
        """A streamed document refused whole (the stream then hydrates again)."""
        self.feeds.count_refusal(reason)

    def _patched(self) -> None:
        """A streamed change relayed to the workers (flagproxy/edge/relayed.py), not published whole."""
        self.last_refresh = self.last_check = iso_now()
        self.feeds.touch(self.scope)

    async def _streamed(self, document: bytes) -> bool:
        """The stream's state, whose bytes `document` are: checked event by event as they came
        (flagproxy/sync/stream.py), so the feed takes the state's own document instead of parsing and
        checking 3.7 MB again on the loop (about 80 ms at 5000 flags)."""
        assert self.streamer is not None
        self.last_refresh = self.last_check = iso_now()
        return await self.feeds.update(self.scope, document, self.streamer.state.document())

    def _fetched(self, result: Any, accepted: bool) -> None:
        refused = getattr(result, "refused", None)  # a 200 whose document was refused whole
        if refused is not None:
            self.feeds.count_refusal(refused)

    def _not_modified(self) -> None:
        self.last_check = iso_now()
        self.feeds.touch(self.scope)

    def describe(self) -> dict[str, Any]:
        return {
            "token": masked(self.token.secret),
            "environment": self.scope[0],
            "projects": list(self.scope[1]),
            "lastRefreshed": self.last_refresh,
            "lastCheck": self.last_check,
        }


def broadest_first(tokens: list[EdgeToken]) -> list[EdgeToken]:
    """Every-project tokens first, then by how many projects: a narrower one is then cut from a broader."""
    return sorted(tokens, key=lambda t: (not t.all_projects, -len(t.projects)))


class EdgeSync:
    def __init__(
        self,
        settings: EdgeSettings,
        published: Feeds,
        usage: EdgeUsage,
        logger: Any,
        gather_usage: Callable[[], Any] | None = None,
    ) -> None:
        self.settings = settings
        self.published = published
        self.logger = logger
        self.validator = TokenValidator(
            upstream_client(settings, "", api=False), logger, trusted=settings.pretrusted_tokens
        )
        self.validator.on_change = self.save_tokens
        self.feeds: dict[Scope, Feed] = {}
        self.unvalidated = list(settings.tokens)  # start-up tokens the upstream has not confirmed yet
        self.sender = BulkSender(
            usage,
            self.client_for,
            interval_seconds=settings.metrics_interval_seconds,
            logger=logger,
            gather=gather_usage,
        )
        self.tasks: list[asyncio.Task[Any]] = []

    @property
    def ready(self) -> bool:
        return not self.unvalidated and self.published.ready

    def stream_changes(self) -> dict[str, int]:
        """Streamed changes of every feed, by how they were applied."""
        counts: dict[str, int] = {}
        for feed in self.feeds.values():
            for applied, count in feed.stream_changes.items():
                counts[applied] = counts.get(applied, 0) + count
        return counts

    def client_for(self, environment: str) -> UpstreamClient | None:
        """A client with a token of `environment`, for its metrics (the broadest one)."""
        feeds = sorted(
            (f for f in self.feeds.values() if f.scope[0] == environment), key=lambda f: f.scope[1]
        )
        return feeds[0].client if feeds else None

    def follow(self, token: EdgeToken) -> Feed:
        """Poll for `token`'s scope, starting from the backup if there is one; a scope a feed already
        covers is cut from that feed instead (one fetch per environment and project set, as Edge skips
        tokens another subsumes)."""
        feed = self.feeds.get(token.scope) or next(
            (f for f in self.feeds.values() if covers(f.scope, token.scope)), None
        )
        if feed is not None:
            return feed
        feed = self.feeds[token.scope] = Feed(token, self.settings, self.published, self.logger)
        self.logger.info(f"Syncing {scope_name(feed.scope)} with {masked(token.secret)}")
        self.published.add_feed(feed.scope)
        if feed.streamer is not None:  # each change after a hydration relayed as its events
            feed.streamer.patcher = FeedRelay(self.published, feed.scope)
            feed.streamer.on_patched = feed._patched
        if self.published.restore(feed.scope):
            self.logger.info(f"Serving {scope_name(feed.scope)} from the backup until the upstream answers")
        feed.task = asyncio.get_running_loop().create_task((feed.streamer or feed.poller).run())
        return feed

    def save_tokens(self) -> None:
        if self.published.persistence is not None:
            self.published.persistence.tokens_changed(self.validator.saved())

    def _restore(self) -> None:
        """With persistence: the tokens validated before the restart (by hash) and the start-up tokens
        among them followed at once, so the instance serves what it kept while the upstream is away."""
        persistence = self.published.persistence
        if persistence is None or not self.validator.restore(persistence.restore_tokens()):
            return
        restored = []
        for token in list(self.unvalidated):
            _, known, _ = self.validator.cached(token.secret)
            if known is not None and known.type == CLIENT:
                self.unvalidated.remove(token)
                restored.append(known)
        for known in broadest_first(restored):
            self.follow(known)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._restore()
        self.tasks = [
            loop.create_task(self._validate_start_tokens()),
            loop.create_task(
                self.validator.run_revalidation(self.settings.token_revalidation_interval_seconds)
            ),
            loop.create_task(self.sender.run()),
        ]

    async def _validate_start_tokens(self) -> None:
        while self.unvalidated:
            try:
                answers = await self.validator.ask([t.secret for t in self.unvalidated])
            except UpstreamUnavailable:
                await asyncio.sleep(START_RETRY_SECONDS)
                continue
            valid = []
            for token in self.unvalidated:
                answer = answers.get(token_key(token.secret))
                if answer is None or answer.type != CLIENT:
                    what = "not valid" if answer is None else f"a {answer.type} token"
                    self.logger.error(f"--tokens: {masked(token.secret)} is {what} upstream; not syncing it")
                    continue
                self.validator.known[token_key(token.secret)] = answer
                valid.append(answer)
            for answer in broadest_first(valid):
                self.follow(answer)
            self.unvalidated = []  # after the feeds exist, so `ready` never sees neither
            self.save_tokens()

    async def dynamic_feed(self, token: EdgeToken, timeout: float) -> None:
        """--dynamic: sync a validated client token's scope on first use and wait for its first fetch."""
        feed = self.follow(token)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.published.hydrated[feed.scope].wait(), timeout)

    async def stop(self) -> None:
        tasks = [*self.tasks, *(f.task for f in self.feeds.values() if f.task is not None)]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await self.sender.flush()  # the last counts go before the instance does
        for client in [self.validator.client, *(f.client for f in self.feeds.values())]:
            await client.close()
