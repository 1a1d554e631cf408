"""The last good payload, kept so a restarted proxy is ready while its upstream is down: serving the flags
it last knew beats answering 503.

A storage provider is any object with `get(key)` and `set(key, payload)`, plain or async, as the Node
SDK's `storageProvider` option. `FileStorageProvider` writes `<directory>/flagproxy-backup-<key>.json`
atomically (temporary file, then rename), so a crash never leaves half a file. The proxy's default,
`UpstreamBackup`, is such a file that belongs to one upstream and one token: its name carries a digest of
both, and it records the upstream, so a proxy never serves the flags another proxy (another upstream,
another environment) left in the same temporary folder.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import os
import re
import tempfile
from typing import Any

import orjson

from flagproxy.tokens import hex_digest, masked


def wrapped(fields: dict[str, Any], name: str, document: bytes | memoryview) -> bytes:
    """The JSON object of `fields` with `name` holding `document`, JSON bytes already checked: spliced in
    as they are, so a backup of megabytes is never parsed or encoded again."""
    head = orjson.dumps(fields)[:-1] + (b"," if fields else b"")
    return head + orjson.dumps(name) + b":" + bytes(document) + b"}"


async def save_document(storage: Any, key: str, document: bytes) -> None:
    """Back `document` (a features document's checked JSON bytes) up in `storage`: as bytes, in a thread,
    when it can take them (`set_document`, as the file providers here), else parsed for its `set`."""
    set_document = getattr(storage, "set_document", None)
    if set_document is not None:
        await asyncio.to_thread(set_document, key, document)
    else:  # a provider of the application's own (create_app's storage_provider)
        await call(storage.set, key, orjson.loads(document))


class FileStorageProvider:
    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory or tempfile.gettempdir()

    def path(self, key: str) -> str:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", key)
        return os.path.join(self.directory, f"flagproxy-backup-{safe}.json")

    def get(self, key: str) -> Any:
        try:
            with open(self.path(key), "rb") as file:
                return orjson.loads(file.read())
        except FileNotFoundError:
            return None

    def set(self, key: str, payload: Any) -> None:
        self.set_document(key, orjson.dumps(payload))

    def set_document(self, key: str, document: bytes | memoryview) -> None:
        """`set` for a value that is JSON bytes already."""
        path = self.path(key)
        os.makedirs(self.directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".flagproxy-backup-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(document)
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise


class UpstreamBackup(FileStorageProvider):
    """`$TMPDIR/flagproxy-backup-<appName>-<owner>.json`: `owner` is a digest of the upstream URL, the
    token (its scope `<project>:<environment>` when it states one, else the whole token, hashed: never the
    secret itself) and `selection`, the filters' query (project, namePrefix, tags): a proxy that asks for
    other flags of the same upstream must not start from this one's. The file holds `{"upstream", "token"
    (masked), "owner", "features"}`; a file whose upstream or owner is not this proxy's is never read
    (`rejected` says why, for the log)."""

    def __init__(
        self, upstream_url: str, token: str, directory: str | None = None, selection: str = ""
    ) -> None:
        super().__init__(directory)
        self.upstream_url = upstream_url
        self.token = masked(token)
        scope = self.token if self.token != "****" else hex_digest(token)
        # Without filters the digest is what it was before they counted: an upgrade keeps its backup.
        owned_by = f"{upstream_url}\n{scope}" + (f"\n{selection}" if selection else "")
        self.owner = hashlib.sha256(owned_by.encode()).hexdigest()[:16]
        self.rejected: str | None = None

    def path(self, key: str) -> str:
        return super().path(f"{key}-{self.owner}")

    def get(self, key: str) -> Any:
        record = super().get(key)
        if record is None:
            return None
        if not isinstance(record, dict) or (record.get("upstream"), record.get("owner")) != (
            self.upstream_url,
            self.owner,
        ):
            upstream = record.get("upstream") if isinstance(record, dict) else None
            self.rejected = f"{self.path(key)} was written for {upstream or 'another upstream'}; not read"
            return None
        return record.get("features")

    def set(self, key: str, payload: Any) -> None:
        self.set_document(key, orjson.dumps(payload))

    def set_document(self, key: str, document: bytes | memoryview) -> None:
        owned = {"upstream": self.upstream_url, "token": self.token, "owner": self.owner}
        super().set_document(key, wrapped(owned, "features", document))


async def call(method: Any, *args: Any) -> Any:
    """Call a provider method that may be plain or async."""
    result = method(*args)
    if inspect.isawaitable(result):
        result = await result
    return result
