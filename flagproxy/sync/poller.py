"""The refresh loop: poll every refreshInterval, back off on trouble, never drop the last good snapshot.

Backoff follows the Node SDK: after a retriable failure (timeouts, connection errors, 404/429/5xx) the
next poll waits `interval * (1 + failures)`, failures capped at 10; each success lowers it by one. A 429
or 503 with Retry-After waits at least that long (at most 10 minutes). Unlike the Node proxy, a 401/403
does not stop polling for good (a rotated token would then need a restart): polling goes on at the
longest backoff.

A failure is logged once when it starts (or changes: another status, another cause), not at every poll of
an upstream that stays down; the polls in between log at debug, and the first success after it logs that
the upstream answers again.

`on_update` gets each new document as the bytes the upstream sent and installs it; when it raises
DocumentError (no JSON, or of the wrong types: flagproxy/sync/documents.py) the poll counts as a failure
that names the first offending JSON path, said once while the upstream keeps sending such documents.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from flagproxy.sync.documents import NOT_JSON, NOT_JSON_PREFIX, DocumentError
from flagproxy.sync.upstream import (
    NOT_MODIFIED,
    PROXY_URL_LABEL,
    Failed,
    FetchResult,
    Updated,
    wrong_path_hint,
)

MAX_FAILURES = 10


class FeatureSource(Protocol):
    features_url: str

    async def fetch_features(self, etag: str | None) -> FetchResult: ...


def refused(exc: DocumentError) -> Failed:
    """A 200 whose document was refused whole, as a poll's failure (the etag of the last good one stays)."""
    if exc.reason == NOT_JSON:
        detail = exc.message.removeprefix(NOT_JSON_PREFIX)
        return Failed("other", f"sent invalid JSON: {detail}", 200, refused=exc.reason)
    return Failed("other", f"sent a features document that was refused whole: {exc}", 200, refused=exc.reason)


class Poller:
    def __init__(
        self,
        source: FeatureSource,
        *,
        interval_ms: int,
        on_update: Callable[[bytes], Awaitable[bool]],
        on_not_modified: Callable[[], None],
        logger: Any,
        on_result: Callable[[FetchResult, bool], None] | None = None,
        token_label: str = "the API token (SERVICE_API_TOKEN)",
        url_label: str = PROXY_URL_LABEL,
    ) -> None:
        self.source = source
        self.token_label = token_label  # how a refusal names the token (the edge polls with several)
        self.url_label = url_label  # which setting gives the address, and its form (a 404's hint)
        self.interval_ms = interval_ms
        self.on_update = on_update
        self.on_not_modified = on_not_modified
        self.on_result = on_result  # sees every poll's result and whether it was installed (Prometheus)
        self.logger = logger
        self.etag: str | None = None
        self.failures = 0
        self.polls = 0
        self.trouble: str | None = None  # what the current run of failures is, as logged
        self.retry_after_ms = 0  # what the upstream asked for with its last failure

    def next_delay_ms(self) -> int:
        return max(self.interval_ms * (1 + self.failures), self.retry_after_ms)

    def _recovered(self) -> None:
        self.retry_after_ms = 0
        if self.trouble is not None:
            self.logger.info(f"Upstream {self.source.features_url} answers again ({self.trouble} before)")
            self.trouble = None

    async def poll_once(self) -> FetchResult:
        result = await self.source.fetch_features(self.etag)
        self.polls += 1
        accepted = True
        if isinstance(result, Updated):
            try:
                accepted = await self.on_update(result.document)
            except DocumentError as exc:
                result = refused(exc)
            else:
                self._recovered()
        if isinstance(result, Updated):
            if accepted:
                self.etag = result.etag
                self.failures = max(0, self.failures - 1)
            else:
                self.etag = None  # fetch it whole again next time
        elif result is NOT_MODIFIED:
            self._recovered()
            self.failures = max(0, self.failures - 1)
            self.on_not_modified()
        elif isinstance(result, Failed):
            self._failed(result)
        if self.on_result is not None:
            self.on_result(result, accepted)
        return result

    def _failed(self, failure: Failed) -> None:
        url = self.source.features_url
        self.retry_after_ms = int((failure.retry_after or 0) * 1000)
        if failure.kind == "auth":
            self.failures = MAX_FAILURES
        elif failure.kind == "retry":
            self.failures = min(MAX_FAILURES, self.failures + 1)
        trouble = f"{failure.kind}: {failure.reason}"
        if trouble == self.trouble:
            self.logger.debug(
                f"Upstream {url} {failure.reason} again; next poll in {self.next_delay_ms()} ms"
            )
            return
        self.trouble = trouble
        once = "(said once until it changes)"
        if failure.kind == "auth":
            self.logger.error(
                f"Upstream {url} {failure.reason}: {self.token_label} is not allowed to read "
                f"features. Still serving the last good flags; retrying every {self.next_delay_ms()} ms "
                + once
            )
        elif failure.kind == "retry":
            hint = f" {wrong_path_hint(url, self.url_label)}" if failure.status == 404 else ""
            self.logger.warn(
                f"Upstream {url} {failure.reason}; keeping the last good flags, next poll in "
                f"{self.next_delay_ms()} ms {once}.{hint}"
            )
        else:
            self.logger.error(f"Upstream {url} {failure.reason}; keeping the last good flags {once}")

    async def run(self) -> None:
        while True:
            try:
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug here must not end polling for good
                self.logger.error(f"Polling the upstream failed unexpectedly: {exc!r}")
            await asyncio.sleep(self.next_delay_ms() / 1000)
