"""Logging with the Node proxy's interface: `debug/info/warn/error/fatal(message, *args)`.

`SimpleLogger` prints `LEVEL: message` lines, or one JSON object a line (`useJsonLogger`):
`{"level":"info","message":"…","args":[]}`. A custom logger is any object with those five methods; a
stdlib `logging.Logger` works too (warn → warning, fatal → critical). `as_logger` wraps either so the rest
of the code can also call `.warning()` (the engine's compile_snapshot takes a stdlib-style logger).

`announce` is the one line a command prints when it is ready (where it listens, its upstream, how many
flags): an info line that the default level (warn) shows too, as Unleash Edge shows its start at its
default level; only `error` or `fatal` silence it. A custom logger gets it as `info`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson

LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")

_RANK = {name: rank for rank, name in enumerate(LOG_LEVELS)}


class SimpleLogger:
    def __init__(self, level: str = "warn", *, json: bool = False, stream: TextIO | None = None) -> None:
        self.threshold = _RANK[level]
        self.json = json
        self.stream = stream

    def _write(self, level: str, message: str, args: tuple[Any, ...], *, shown: bool = False) -> None:
        if _RANK[level] < self.threshold and not shown:
            return
        if self.json:
            line = orjson.dumps(
                {"level": level, "message": message, "args": list(args)}, default=str
            ).decode()
        else:
            line = f"{level.upper()}: {message}" + ("" if not args else " " + " ".join(map(str, args)))
        stream = self.stream or sys.stdout
        stream.write(line + "\n")
        stream.flush()

    def debug(self, message: str, *args: Any) -> None:
        self._write("debug", message, args)

    def info(self, message: str, *args: Any) -> None:
        self._write("info", message, args)

    def warn(self, message: str, *args: Any) -> None:
        self._write("warn", message, args)

    def error(self, message: str, *args: Any) -> None:
        self._write("error", message, args)

    def fatal(self, message: str, *args: Any) -> None:
        self._write("fatal", message, args)

    def announce(self, message: str) -> None:
        self._write("info", message, (), shown=self.threshold <= _RANK["warn"])


class LoggerAdapter:
    """One calling convention over a Node-style or stdlib logger. Never raises from a log call."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self._stdlib = isinstance(target, logging.Logger)

    def _call(self, node_name: str, std_name: str, message: str, args: tuple[Any, ...]) -> None:
        method = getattr(self.target, std_name if self._stdlib else node_name, None)
        if method is None and node_name == "warn":
            method = getattr(self.target, "warning", None)
        if method is None and node_name == "fatal":
            method = getattr(self.target, "critical", None) or getattr(self.target, "error", None)
        if method is None:
            return
        try:
            if self._stdlib:
                method(message + (" %s" * len(args)), *args)
            else:
                method(message, *args)
        except Exception:  # a broken custom logger must not break a request or the poller
            pass

    def debug(self, message: str, *args: Any) -> None:
        self._call("debug", "debug", message, args)

    def info(self, message: str, *args: Any) -> None:
        self._call("info", "info", message, args)

    def warn(self, message: str, *args: Any) -> None:
        self._call("warn", "warning", message, args)

    warning = warn

    def error(self, message: str, *args: Any) -> None:
        self._call("error", "error", message, args)

    def fatal(self, message: str, *args: Any) -> None:
        self._call("fatal", "critical", message, args)

    critical = fatal

    def exception(self, message: str, *args: Any) -> None:
        self._call("error", "error", message, args)

    def announce(self, message: str) -> None:
        """The ready line (see the module's docstring)."""
        if isinstance(self.target, SimpleLogger):
            self.target.announce(message)
        else:
            self.info(message)


def make_logger(custom: Any, level: str, use_json: bool) -> LoggerAdapter:
    if isinstance(custom, LoggerAdapter):
        return custom
    return LoggerAdapter(custom if custom is not None else SimpleLogger(level, json=use_json))
