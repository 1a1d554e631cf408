"""The last good payload, kept so a restarted proxy is ready while its upstream is down (DESIGN D4).

A storage provider is any object with `get(key)` and `set(key, payload)`, plain or async, as the Node
SDK's `storageProvider` option. The default writes `$TMPDIR/flagproxy-backup-<appName>.json` atomically
(temporary file, then rename), so a crash never leaves half a file.
"""

from __future__ import annotations

import inspect
import os
import re
import tempfile
from typing import Any

import orjson


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
        path = self.path(key)
        os.makedirs(self.directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".flagproxy-backup-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(orjson.dumps(payload))
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise


async def call(method: Any, *args: Any) -> Any:
    """Call a provider method that may be plain or async."""
    result = method(*args)
    if inspect.isawaitable(result):
        result = await result
    return result
