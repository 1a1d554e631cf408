"""`flagproxy edge offline`: flags from a file, no upstream at all; the file is read again on an interval.

The bootstrap file is an Unleash client features document (served to every token) or an object of
environment name → such a document (a token sees its environment's). With `--reload-interval N` the file
is checked every N seconds and served anew when its bytes changed; a file that cannot be read or parsed
leaves the last good flags in place and says why once (Edge's hot reload broke twice on such cases:
Unleash/unleash-edge #265, #594). Tokens are those given at start; none is ever asked about upstream.
The instance's leader reads the file and publishes each environment's document as a feed
(flagproxy/edge/feeds.py); every worker follows them, so all serve the same revision of the file.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import replace
from typing import Any

import orjson

from flagproxy.edge.feeds import Feeds
from flagproxy.edge.settings import EdgeSettings
from flagproxy.edge.tokens import ALL_PROJECTS, CLIENT, FRONTEND, TRUSTED, EdgeToken
from flagproxy.edge.validation import TokenValidator
from flagproxy.sync.documents import DocumentError, check_document, is_features_document


class BootstrapError(ValueError):
    """The bootstrap file cannot be served; the text says why. `refused`: the reason when a document in
    it was refused whole (flagproxy/sync/documents.py's reasons), for the refused documents counter."""

    def __init__(self, message: str, refused: str | None = None) -> None:
        super().__init__(message)
        self.refused = refused


def read_bootstrap(path: str) -> tuple[bytes, dict[str, dict[str, Any]] | dict[str, Any]]:
    """(the file's bytes, a features document or a map of environment → document)."""
    try:
        with open(path, "rb") as file:
            raw = file.read()
        document = orjson.loads(raw)
    except OSError as exc:
        raise BootstrapError(f"cannot read {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise BootstrapError(f"{path} is not JSON: {exc}") from None
    if is_features_document(document):
        _check(path, document, None)
        return raw, document
    if isinstance(document, dict) and document and all(is_features_document(v) for v in document.values()):
        for environment, features in document.items():
            _check(path, features, environment)
        return raw, {"environments": document}
    raise BootstrapError(
        f"{path} is neither a client features document nor an object of environment -> features document"
    )


def _check(path: str, document: Any, environment: str | None) -> None:
    """The whole file is refused when one document in it does not match the schema (the last good flags
    stay), as the upstream's documents are."""
    try:
        check_document(document)
    except DocumentError as exc:
        which = f"the features of environment {environment!r}" if environment is not None else "its features"
        raise BootstrapError(f"{path}: {which} were refused whole: {exc}", exc.reason) from None


class OfflineSource:
    def __init__(self, settings: EdgeSettings, logger: Any) -> None:
        self.settings = settings
        self.logger = logger
        self.path = settings.bootstrap_file or ""
        tokens = [replace(t, type=None) for t in settings.tokens]
        tokens += [replace(t, type=CLIENT) for t in settings.client_tokens]
        tokens += [replace(t, type=FRONTEND) for t in settings.frontend_tokens]
        # Offline every token sees every project of its environment's document.
        self.tokens = [replace(t, projects=(ALL_PROJECTS,), status=TRUSTED) for t in tokens]
        self.validator = TokenValidator(None, logger, trusted=self.tokens)
        self.digest: bytes | None = None
        self.loaded = False
        self.trouble: str | None = None
        self.reloads = 0

    def check(self) -> None:
        """At start: the file must be servable (ConfigError-style one line from the CLI otherwise)."""
        read_bootstrap(self.path)

    def load(self, feeds: Feeds) -> bool:
        """Serve the file if its bytes changed; False (last good flags kept) if it cannot be served."""
        try:
            raw, document = read_bootstrap(self.path)
        except BootstrapError as exc:
            if str(exc) != self.trouble:  # one line, and one refusal counted, per change of the file
                self.logger.error(f"Bootstrap file: {exc}; keeping the last good flags")
                self.trouble = str(exc)
                if exc.refused is not None:
                    feeds.count_refusal(exc.refused)
            return False
        digest = hashlib.sha256(raw).digest()
        if digest == self.digest:
            return True
        environments = (
            document.get("environments")
            if "environments" in document and not is_features_document(document)
            else None
        )
        for environment in sorted({t.environment for t in self.tokens}):
            payload = document if environments is None else environments.get(environment)
            if payload is None:
                continue
            scope = (environment, (ALL_PROJECTS,))
            if not feeds.publish(scope, payload, source="bootstrap", save=False):
                return False
        self.digest = digest
        self.loaded = True
        self.trouble = None
        self.reloads += 1
        self.logger.info(f"Serving the flags of {self.path}")
        return True

    async def run(self, feeds: Feeds) -> None:
        interval = self.settings.reload_interval
        if interval <= 0:
            return
        while True:
            await asyncio.sleep(interval)
            try:
                self.load(feeds)
            except Exception as exc:  # a bug here must not end reloading for good
                self.logger.error(f"Reloading the bootstrap file failed unexpectedly: {exc!r}")


__all__ = ["BootstrapError", "EdgeToken", "OfflineSource", "read_bootstrap"]
