"""A program that embeds the proxy, as docs/proxy.md's "From Python" does: `create_app(**keywords)`, then
Sanic's own `app.run`. Tests run it as a process of its own (tests/http/processes.py EmbeddedProxy) for the
options an operator cannot give `flagproxy proxy` through its environment or flags: a logger object and a
storage provider object (keyword only), and create_app's keywords with the environment beside them.

    python tests/http/embedded.py '{"keywords": {...}, "logger": "recording", "storage": "/tmp/saved.json"}'

- `keywords`: passed to create_app as they are (snake_case or camelCase names, nested objects); the
  process's environment fills in the rest, as create_app reads os.environ by default.
- `logger`: "recording", an object with the five methods that writes `LOGGED <level> <message>` lines to
  stderr; or "stdlib", the standard logging.Logger "my.proxy" whose handler writes `STDLIB <LEVELNAME>
  <message>` lines to stderr. Either way the proxy itself should print nothing to stdout.
- `storage`: a path; the storage provider (async get/set) writes each payload it is given there as
  {"key": ..., "payload": ...}.
- `middleware`: true to register a response middleware of the program's own that adds `X-Embedder: seen`
  to every answer (Sanic's `app.register_middleware`), as a program adding a header of its own would.
It listens on 127.0.0.1 at $PORT.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

from flagproxy.proxy import create_app


class RecordingLogger:
    def _line(self, level: str, message: str) -> None:
        print(f"LOGGED {level} {message}", file=sys.stderr, flush=True)

    def debug(self, message: str, *args: Any) -> None:
        self._line("debug", message)

    def info(self, message: str, *args: Any) -> None:
        self._line("info", message)

    def warn(self, message: str, *args: Any) -> None:
        self._line("warn", message)

    def error(self, message: str, *args: Any) -> None:
        self._line("error", message)

    def fatal(self, message: str, *args: Any) -> None:
        self._line("fatal", message)


def stdlib_logger() -> logging.Logger:
    logger = logging.getLogger("my.proxy")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("STDLIB %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger


class FileStorage:
    """A custom storage provider: what the proxy saves, written where the test reads it."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def get(self, key: str) -> Any:
        return None  # nothing saved before: the proxy waits for its upstream

    async def set(self, key: str, payload: Any) -> None:
        temporary = self.path + ".tmp"
        with open(temporary, "w") as file:
            json.dump({"key": key, "payload": payload}, file)
        os.replace(temporary, self.path)


def main() -> None:
    spec = json.loads(sys.argv[1])
    keywords = dict(spec.get("keywords", {}))
    if spec.get("logger") == "recording":
        keywords["logger"] = RecordingLogger()
    elif spec.get("logger") == "stdlib":
        keywords["logger"] = stdlib_logger()
    if spec.get("storage"):
        keywords["storage_provider"] = FileStorage(spec["storage"])
    app = create_app(**keywords)
    if spec.get("middleware"):

        async def mark(request: Any, response: Any) -> None:
            response.headers["X-Embedder"] = "seen"

        app.register_middleware(mark, "response")
    app.run(host="127.0.0.1", port=int(os.environ["PORT"]), single_process=True, motd=False)


if __name__ == "__main__":
    main()
