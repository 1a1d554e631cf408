"""What a worker asks the instance's leader, and its answer: one JSON line each way over a unix socket.

The folder is the instance's (private to this user, flagproxy/instance/leader.py), so only this user's
processes can connect. A question opens its own connection: questions are rare (the edge asks only about
a token this worker has not seen), and a worker never depends on a connection a dead leader left behind.
Unix socket paths are limited to 107 bytes; a longer folder path is reached through the folder's file
descriptor (/proc/self/fd/N/…), which is as private as the folder itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

MAX_LINE = 16 * 1024 * 1024  # a question or an answer: a thousand tokens are some 100 kB
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class ChannelUnavailable(Exception):
    """The leader could not be asked (gone, starting, or it did not answer in time)."""


def _short_path(path: str) -> tuple[str, int | None]:
    """A path bind/connect accept, and the folder descriptor to close afterwards (if one was opened)."""
    if len(path.encode()) < 100:
        return path, None
    folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY)
    return f"/proc/self/fd/{folder}/{os.path.basename(path)}", folder


class ChannelServer:
    """The leader's side: each line read is handed to `handler`, its answer written back."""

    def __init__(self, path: str, handler: Handler, logger: Any) -> None:
        self.path = path
        self.handler = handler
        self.logger = logger
        self.server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # a former leader's
        path, folder = _short_path(self.path)
        try:
            self.server = await asyncio.start_unix_server(self._serve, path, limit=MAX_LINE)
        finally:
            if folder is not None:
                os.close(folder)
        os.chmod(self.path, 0o600)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                try:
                    answer = await self.handler(orjson.loads(line))
                except Exception as exc:  # a bug here must not leave the worker waiting
                    self.logger.error(f"Answering a worker failed: {exc!r}")
                    answer = {"error": repr(exc)}
                writer.write(orjson.dumps(answer) + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


async def ask(path: str, question: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The leader's answer to `question`; ChannelUnavailable when there is none within `timeout` s."""
    writer = None
    try:
        short, folder = _short_path(path)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(short, limit=MAX_LINE), timeout
            )
        finally:
            if folder is not None:
                os.close(folder)
        writer.write(orjson.dumps(question) + b"\n")
        line = await asyncio.wait_for(reader.readline(), timeout)
        if not line:
            raise ChannelUnavailable("the leader closed the connection")
        answer: dict[str, Any] = orjson.loads(line)
        return answer
    except (OSError, TimeoutError, ValueError) as exc:
        raise ChannelUnavailable(f"the instance's leader cannot be asked: {exc!r}") from None
    finally:
        if writer is not None:
            writer.close()
