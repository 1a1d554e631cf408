"""The refresh loop: poll every refreshInterval, back off on trouble, never drop the last good snapshot.

Backoff follows the Node SDK: after a retriable failure (timeouts, connection errors, 404/429/5xx) the
next poll waits `interval * (1 + failures)`, failures capped at 10; each success lowers it by one.
Unlike the Node proxy, a 401/403 does not stop polling for good (a rotated token would then need a restart):
it is logged as an error every time and polling goes on at the longest backoff.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from flagproxy.sync.upstream import NOT_MODIFIED, Failed, FetchResult, Updated

MAX_FAILURES = 10


class FeatureSource(Protocol):
    features_url: str

    async def fetch_features(self, etag: str | None) -> FetchResult: ...


class Poller:
    def __init__(
        self,
        source: FeatureSource,
        *,
        interval_ms: int,
        on_update: Callable[[dict[str, Any]], Awaitable[bool]],
        on_not_modified: Callable[[], None],
        logger: Any,
    ) -> None:
        self.source = source
        self.interval_ms = interval_ms
        self.on_update = on_update
        self.on_not_modified = on_not_modified
        self.logger = logger
        self.etag: str | None = None
        self.failures = 0
        self.polls = 0

    def next_delay_ms(self) -> int:
        return self.interval_ms * (1 + self.failures)

    async def poll_once(self) -> FetchResult:
        result = await self.source.fetch_features(self.etag)
        self.polls += 1
        if isinstance(result, Updated):
            if await self.on_update(result.payload):
                self.etag = result.etag
                self.failures = max(0, self.failures - 1)
            else:
                self.etag = None  # fetch it whole again next time
        elif result is NOT_MODIFIED:
            self.failures = max(0, self.failures - 1)
            self.on_not_modified()
        elif isinstance(result, Failed):
            self._failed(result)
        return result

    def _failed(self, failure: Failed) -> None:
        url = self.source.features_url
        if failure.kind == "auth":
            self.failures = MAX_FAILURES
            self.logger.error(
                f"Upstream {url} {failure.reason}: the API token (SERVICE_API_TOKEN) is not allowed to read "
                f"features. Still serving the last good flags; retrying in {self.next_delay_ms()} ms."
            )
        elif failure.kind == "retry":
            self.failures = min(MAX_FAILURES, self.failures + 1)
            self.logger.warn(
                f"Upstream {url} {failure.reason}; keeping the last good flags, next poll in "
                f"{self.next_delay_ms()} ms"
            )
        else:
            self.logger.error(f"Upstream {url} {failure.reason}; keeping the last good flags")

    async def run(self) -> None:
        while True:
            try:
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug here must not end polling for good
                self.logger.error(f"Polling the upstream failed unexpectedly: {exc!r}")
            await asyncio.sleep(self.next_delay_ms() / 1000)
