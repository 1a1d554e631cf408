"""The server's settings, from the environment and the command line (the command line wins).

    >>> ServerSettings.load({"PORT": "8080"}, ["--database", "/tmp/flags.db"]).port
    8080

Values are checked when read, so a bad setting stops the server at start, not at first use.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flagproxy.server.tokens import parse_init_token

DEFAULT_PORT = 4242
DEFAULT_DATABASE_PATH = "flagproxy.db"
DEFAULT_MAX_REQUEST_SIZE = 1_048_576  # 1 MiB: the largest metrics batch a busy proxy sends is far smaller
DEFAULT_DELTA_KEPT_EVENTS = 10_000  # delta events kept for replay (a feature in one environment, a segment)
DEFAULT_MAX_STREAMS = 1000  # open /api/client/streaming connections per process; beyond: back to polling


class SettingsError(ValueError):
    """A setting that cannot be used; the message says which and why."""


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    database_url: str | None = None
    database_path: str = DEFAULT_DATABASE_PATH
    init_admin_tokens: tuple[str, ...] = ()
    init_client_tokens: tuple[str, ...] = ()
    init_frontend_tokens: tuple[str, ...] = ()
    max_request_size: int = DEFAULT_MAX_REQUEST_SIZE
    workers: int = 1
    log_level: str = "warn"
    delta_api: bool = True
    delta_kept_events: int = DEFAULT_DELTA_KEPT_EVENTS
    max_streams: int = DEFAULT_MAX_STREAMS

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise SettingsError(f"PORT must be 1-65535, got {self.port}")
        if self.workers < 1:
            raise SettingsError(f"--workers must be at least 1, got {self.workers}")
        if self.delta_kept_events < 1:
            raise SettingsError(f"DELTA_KEPT_EVENTS must be at least 1, got {self.delta_kept_events}")
        if self.max_streams < 0:
            raise SettingsError(f"MAX_STREAMS must be 0 or more, got {self.max_streams}")
        if self.max_request_size < 1024:
            raise SettingsError(f"MAX_REQUEST_SIZE must be at least 1024 bytes, got {self.max_request_size}")
        if self.database_url and not self.database_url.startswith(
            ("postgresql://", "postgres://", "sqlite:///")
        ):
            raise SettingsError("DATABASE_URL must start with postgresql:// (or sqlite:///)")
        for token_type, entries in self.init_tokens().items():
            for entry in entries:
                try:
                    parse_init_token(entry, token_type)
                except ValueError as exc:
                    raise SettingsError(f"INIT_{token_type.upper()}_API_TOKENS: {exc}") from None

    def init_tokens(self) -> dict[str, tuple[str, ...]]:
        return {
            "admin": self.init_admin_tokens,
            "client": self.init_client_tokens,
            "frontend": self.init_frontend_tokens,
        }

    @classmethod
    def load(cls, env: Mapping[str, str], argv: Sequence[str]) -> ServerSettings:
        args = _parser().parse_args(list(argv))

        def integer(name: str, text: str | None, default: int) -> int:
            if text is None or text == "":
                return default
            try:
                return int(text)
            except ValueError:
                raise SettingsError(f"{name} must be an integer, got {text!r}") from None

        return cls(
            host=args.host or env.get("HOST") or "0.0.0.0",
            port=args.port if args.port is not None else integer("PORT", env.get("PORT"), DEFAULT_PORT),
            database_url=args.database_url or env.get("DATABASE_URL") or None,
            database_path=args.database or env.get("DATABASE_PATH") or DEFAULT_DATABASE_PATH,
            init_admin_tokens=_token_list(env.get("INIT_ADMIN_API_TOKENS")),
            init_client_tokens=_token_list(env.get("INIT_CLIENT_API_TOKENS")),
            init_frontend_tokens=_token_list(env.get("INIT_FRONTEND_API_TOKENS")),
            max_request_size=integer(
                "MAX_REQUEST_SIZE", env.get("MAX_REQUEST_SIZE"), DEFAULT_MAX_REQUEST_SIZE
            ),
            workers=args.workers if args.workers is not None else integer("WORKERS", env.get("WORKERS"), 1),
            log_level=(args.log_level or env.get("LOG_LEVEL") or "warn").lower(),
            delta_api=False if args.no_delta_api else _boolean("DELTA_API", env.get("DELTA_API"), True),
            delta_kept_events=args.delta_kept_events
            if args.delta_kept_events is not None
            else integer("DELTA_KEPT_EVENTS", env.get("DELTA_KEPT_EVENTS"), DEFAULT_DELTA_KEPT_EVENTS),
            max_streams=args.max_streams
            if args.max_streams is not None
            else integer("MAX_STREAMS", env.get("MAX_STREAMS"), DEFAULT_MAX_STREAMS),
        )


def _boolean(name: str, text: str | None, default: bool) -> bool:
    if text is None or text == "":
        return default
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise SettingsError(f"{name} must be true or false, got {text!r}")


def _token_list(text: str | None) -> tuple[str, ...]:
    return tuple(entry.strip() for entry in (text or "").split(",") if entry.strip())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flagproxy server",
        description="Run the flag server: Unleash's admin and client API on SQLite or PostgreSQL.",
        epilog="Environment: PORT, HOST, DATABASE_URL, DATABASE_PATH, INIT_ADMIN_API_TOKENS, "
        "INIT_CLIENT_API_TOKENS, INIT_FRONTEND_API_TOKENS, MAX_REQUEST_SIZE, WORKERS, LOG_LEVEL, DELTA_API, "
        "DELTA_KEPT_EVENTS, MAX_STREAMS (see docs/server.md).",
    )
    parser.add_argument("--host", help="address to listen on (HOST, default 0.0.0.0)")
    parser.add_argument("--port", type=int, help=f"port to listen on (PORT, default {DEFAULT_PORT})")
    parser.add_argument("--database", help=f"SQLite file (DATABASE_PATH, default {DEFAULT_DATABASE_PATH})")
    parser.add_argument("--database-url", help="postgresql://... to use PostgreSQL (DATABASE_URL)")
    parser.add_argument("--workers", type=int, help="worker processes (WORKERS, default 1)")
    parser.add_argument("--log-level", help="debug, info, warn or error (LOG_LEVEL, default warn)")
    parser.add_argument(
        "--no-delta-api",
        action="store_true",
        help="turn off /api/client/delta and /api/client/streaming (DELTA_API=false; default on)",
    )
    parser.add_argument(
        "--delta-kept-events",
        type=int,
        help="delta events kept for replay; a reader further behind gets a hydration "
        f"(DELTA_KEPT_EVENTS, default {DEFAULT_DELTA_KEPT_EVENTS})",
    )
    parser.add_argument(
        "--max-streams",
        type=int,
        help="open streams per process; more are asked to poll instead "
        f"(MAX_STREAMS, default {DEFAULT_MAX_STREAMS})",
    )
    return parser
