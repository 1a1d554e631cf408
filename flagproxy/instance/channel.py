"""What a worker asks the instance's leader, and its answer: one JSON line each way over a unix socket.

The folder is the instance's (private to this user, flagproxy/instance/leader.py), so only this user's
processes can connect. A question opens its own connection: questions are rare (the edge asks only about
a token this worker has not seen), and a worker never depends on a connection a dead leader left behind.
Unix socket paths are limited to 107 bytes; a longer folder path is reached through the folder's file
descriptor (/proc/self/fd/N/…), which is as private as the folder itself.

The other way, the leader wakes the workers (`wake_workers`, `Wakeup`): each serving worker binds a unix
datagram socket `wake-<pid>-<n>.sock` in the folder and its loop watches it (`add_reader`); after each
publish the leader sends one empty datagram to every such socket, so a worker reads a new document at
once instead of at its next look (flagproxy/instance/follower.py keeps a slow look as a safety net). A
datagram, not a connection: the leader holds nothing per worker, a worker that started late is found by
its file, and a dead worker's file is removed by the next wake (connection refused).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

WAKE_PREFIX = "wake-"
WAKE_SUFFIX = ".sock"
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


def wake_workers(directory: str) -> int:
    """One empty datagram to every worker's wake socket in `directory` (the caller just published); how
    many were sent. Never blocks nor raises: a worker whose socket buffer is full has a wake pending
    already, and a socket no one reads any more (its worker died) is removed."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(WAKE_PREFIX) and n.endswith(WAKE_SUFFIX)]
    except OSError:
        return 0
    if not names:
        return 0
    sent = 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
        sender.setblocking(False)
        for name in names:
            path = os.path.join(directory, name)
            folder = None
            try:
                short, folder = _short_path(path)
                sender.sendto(b"", short)
                sent += 1
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    os.unlink(path)  # its worker is gone
            except OSError:  # BlockingIOError: a wake is waiting to be read already
                pass
            finally:
                if folder is not None:
                    os.close(folder)
    return sent


_numbers = itertools.count(1)


class Wakeup:
    """A worker's wake socket in the instance folder, watched by its running loop: `wait(timeout)` returns
    as soon as the leader called `wake_workers` since the last wait (True), or after `timeout` s (False)."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, f"{WAKE_PREFIX}{os.getpid()}-{next(_numbers)}{WAKE_SUFFIX}")
        self.socket: socket.socket | None = None
        self.event = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    def open(self) -> bool:
        """Bind and watch the socket; False (the caller looks often instead) when it cannot be bound."""
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        folder = None
        try:
            receiver.setblocking(False)
            short, folder = _short_path(self.path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            receiver.bind(short)
            self.loop = asyncio.get_running_loop()
            self.loop.add_reader(receiver.fileno(), self._readable)
        except OSError:
            receiver.close()
            return False
        finally:
            if folder is not None:
                os.close(folder)
        self.socket = receiver
        return True

    def _readable(self) -> None:
        assert self.socket is not None
        with contextlib.suppress(OSError):  # BlockingIOError: drained
            while True:
                self.socket.recv(16)  # any number of wakes since the last wait is one
        self.event.set()

    async def wait(self, timeout: float) -> bool:
        if not self.event.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.event.wait(), timeout)
        woken = self.event.is_set()
        self.event.clear()  # before the caller reads: a publish meanwhile wakes the next wait
        return woken

    def close(self) -> None:
        if self.socket is None:
            return
        if self.loop is not None and not self.loop.is_closed():
            self.loop.remove_reader(self.socket.fileno())
        self.socket.close()
        self.socket = None
        with contextlib.suppress(OSError):
            os.unlink(self.path)
