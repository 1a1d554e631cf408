"""A server-sent-events reader for the tests: one connection, its events parsed as they arrive."""

from __future__ import annotations

import contextlib
import http.client
import queue
import socket
import threading
from dataclasses import dataclass
from typing import Any

import orjson

WAIT = 30.0  # how long a test waits for an event before it fails (never a measured bound)


@dataclass(frozen=True)
class Event:
    event: str | None  # None: a comment line
    data: str
    id: str | None = None

    def json(self) -> Any:
        return orjson.loads(self.data)


class StreamEnded(Exception):
    pass


class SseStream:
    """GET `path` with `token`; `status` and `headers` at once, then `next()` event by event."""

    def __init__(self, port: int, token: str, path: str = "/api/client/streaming", **headers: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        sent = {"Authorization": token, "Accept": "text/event-stream"}
        sent.update({name.replace("_", "-"): value for name, value in headers.items()})
        self.connection.request("GET", path, headers=sent)
        self._socket = self.connection.sock
        self.response = self.connection.getresponse()
        self.status = self.response.status
        self.headers = {k.lower(): v for k, v in self.response.getheaders()}
        self._events: queue.Queue[Event | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        fields: dict[str, str] = {}
        try:
            while True:
                line = self.response.readline()
                if not line:
                    break
                text = line.decode().rstrip("\r\n")
                if text.startswith(":"):
                    self._events.put(Event(None, text[1:].strip()))
                elif text == "":
                    if fields:
                        self._events.put(Event(fields.get("event"), fields.get("data", ""), fields.get("id")))
                    fields = {}
                else:
                    name, _, value = text.partition(":")
                    fields[name] = value.removeprefix(" ")
        except Exception:  # the server ended it, or the test hung up (http.client races its own close)
            pass
        self._events.put(None)

    def next(self, timeout: float = WAIT, *, comments: bool = False) -> Event:
        """The next event (comments skipped unless asked for); StreamEnded when the server ended it."""
        while True:
            try:
                event = self._events.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no event within {timeout} s") from None
            if event is None:
                self._events.put(None)
                raise StreamEnded
            if event.event is not None or comments:
                return event

    def ends(self, timeout: float = WAIT) -> bool:
        """Whether the server ends the stream (any events before the end are skipped)."""
        try:
            while True:
                self.next(timeout)
        except StreamEnded:
            return True

    def close(self) -> None:
        """Hang up, as a client going away does."""
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        self.connection.close()
