"""The server's settings, from the environment and the command line (the command line wins).

    >>> ServerSettings.load({"PORT": "8080"}, ["--database", "/tmp/flags.db"]).port
    8080

Values are checked when read, so a bad setting stops the server at start, not at first use.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from flagproxy.http.command_line import OneLineParser
from flagproxy.http.trust import TrustProxy
from flagproxy.options import ConfigError, parse_trust
from flagproxy.server.tokens import parse_init_token

DEFAULT_PORT = 4242
DEFAULT_DATABASE_PATH = "flagproxy.db"
DEFAULT_MAX_REQUEST_SIZE = 1_048_576  # 1 MiB: the largest metrics batch a busy proxy sends is far smaller
DEFAULT_DELTA_KEPT_EVENTS = 10_000  # delta events kept for replay (a feature in one environment, a segment)
DEFAULT_MAX_STREAMS = 1000  # open /api/client/streaming connections per process; beyond: back to polling
# Sanic's own proxy settings: a second trust rule beside TRUST_PROXY, so setting one stops start-up.
SANIC_PROXY_SETTINGS = ("SANIC_PROXIES_COUNT", "SANIC_FORWARDED_SECRET", "SANIC_REAL_IP_HEADER")


class SettingsError(ConfigError):
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
    trust_proxy: TrustProxy = field(default_factory=TrustProxy)  # who may set X-Forwarded-For / -Proto
    default_admin_username: str | None = None
    default_admin_password: str | None = field(default=None, repr=False)
    # setting -> how the user wrote it ("--port" or "PORT"), so a message names what they typed
    written: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def named(self, setting: str) -> str:
        """The flag or variable the user set `setting` with (the variable when it is a default)."""
        return self.written.get(setting) or _ENV_NAMES[setting]

    def database_named(self) -> str:
        """The setting that chose the database: DATABASE_URL (or --database-url) when set, else the file's."""
        return self.named("database_url") if self.database_url else self.named("database_path")

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise SettingsError(f"{self.named('port')}: must be 1-65535, got {self.port}")
        if self.workers < 1:
            raise SettingsError(f"{self.named('workers')}: must be at least 1, got {self.workers}")
        if self.delta_kept_events < 1:
            raise SettingsError(
                f"{self.named('delta_kept_events')}: must be at least 1, got {self.delta_kept_events}"
            )
        if self.max_streams < 0:
            raise SettingsError(f"{self.named('max_streams')}: must be 0 or more, got {self.max_streams}")
        if self.max_request_size < 1024:
            raise SettingsError(
                f"{self.named('max_request_size')}: must be at least 1024 bytes, got {self.max_request_size}"
            )
        if self.database_url and not self.database_url.startswith(
            ("postgresql://", "postgres://", "sqlite:///")
        ):
            raise SettingsError(
                f"{self.named('database_url')}: must start with postgresql:// (or sqlite:///)"
            )
        if self.log_level not in ("debug", "info", "warn", "error"):
            raise SettingsError(
                f"{self.named('log_level')}: must be debug, info, warn or error, got {self.log_level!r}"
            )
        if bool(self.default_admin_username) != bool(self.default_admin_password):
            raise SettingsError(
                "UNLEASH_DEFAULT_ADMIN_USERNAME and UNLEASH_DEFAULT_ADMIN_PASSWORD: set both or neither"
            )
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
    def load(
        cls, env: Mapping[str, str], argv: Sequence[str], parser: argparse.ArgumentParser | None = None
    ) -> ServerSettings:
        args = (parser or _parser()).parse_args(list(argv))
        written: dict[str, str] = {}
        for name in SANIC_PROXY_SETTINGS:
            if env.get(name):
                raise SettingsError(
                    f"{name} is no longer read: the server trusts proxies as flagproxy's proxy and edge do. "
                    "Set TRUST_PROXY to your reverse proxy's address (or CIDR range, or true) and unset "
                    f"{name} (see docs/server.md)"
                )

        def text(setting: str) -> str | None:
            """The flag's value if given, else the variable's; remembers which one the user wrote."""
            flag = FLAGS.get(setting)
            given = getattr(args, setting, None) if flag else None
            if given not in (None, ""):
                written[setting] = flag  # type: ignore[assignment]
                return str(given)
            value = env.get(_ENV_NAMES[setting])
            if value not in (None, ""):
                written[setting] = _ENV_NAMES[setting]
                return value
            return None

        def integer(setting: str, default: int) -> int:
            value = text(setting)
            if value is None:
                return default
            try:
                return int(value)
            except ValueError:
                raise SettingsError(f"{written[setting]}: must be a whole number, got {value!r}") from None

        return cls(
            host=text("host") or "0.0.0.0",
            port=integer("port", DEFAULT_PORT),
            database_url=text("database_url"),
            database_path=text("database_path") or DEFAULT_DATABASE_PATH,
            init_admin_tokens=_token_list(env.get("INIT_ADMIN_API_TOKENS")),
            init_client_tokens=_token_list(env.get("INIT_CLIENT_API_TOKENS")),
            init_frontend_tokens=_token_list(env.get("INIT_FRONTEND_API_TOKENS")),
            max_request_size=integer("max_request_size", DEFAULT_MAX_REQUEST_SIZE),
            workers=integer("workers", 1),
            log_level=(text("log_level") or "warn").lower(),
            default_admin_username=env.get("UNLEASH_DEFAULT_ADMIN_USERNAME") or None,
            default_admin_password=env.get("UNLEASH_DEFAULT_ADMIN_PASSWORD") or None,
            delta_api=False
            if getattr(args, "no_delta_api", False)
            else _boolean("DELTA_API", env.get("DELTA_API"), True),
            delta_kept_events=integer("delta_kept_events", DEFAULT_DELTA_KEPT_EVENTS),
            max_streams=integer("max_streams", DEFAULT_MAX_STREAMS),
            trust_proxy=_trust(text("trust_proxy"), written),
            written=written,
        )


def _boolean(name: str, text: str | None, default: bool) -> bool:
    if text is None or text == "":
        return default
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise SettingsError(f"{name}: must be true or false, got {text!r}")


def _trust(text: str | None, written: Mapping[str, str]) -> TrustProxy:
    """TRUST_PROXY as the proxy reads it (flagproxy/options.py): the one rule for all three services."""
    return TrustProxy() if text is None else parse_trust(written["trust_proxy"], text)


def _token_list(text: str | None) -> tuple[str, ...]:
    return tuple(entry.strip() for entry in (text or "").split(",") if entry.strip())


# setting -> its environment variable, and (when it has one) its flag
_ENV_NAMES = {
    "host": "HOST",
    "port": "PORT",
    "database_url": "DATABASE_URL",
    "database_path": "DATABASE_PATH",
    "max_request_size": "MAX_REQUEST_SIZE",
    "workers": "WORKERS",
    "log_level": "LOG_LEVEL",
    "delta_kept_events": "DELTA_KEPT_EVENTS",
    "max_streams": "MAX_STREAMS",
    "trust_proxy": "TRUST_PROXY",
}
FLAGS = {
    "host": "--host",
    "port": "--port",
    "database_url": "--database-url",
    "database_path": "--database",
    "workers": "--workers",
    "log_level": "--log-level",
    "delta_kept_events": "--delta-kept-events",
    "max_streams": "--max-streams",
    "trust_proxy": "--trust-proxy",
}


def add_database_options(parser: argparse.ArgumentParser) -> None:
    """--database and --database-url: `flagproxy server` and `flagproxy server create-admin` share them."""
    parser.add_argument(
        "--database",
        dest="database_path",
        metavar="PATH",
        help=f"SQLite file (DATABASE_PATH, default {DEFAULT_DATABASE_PATH})",
    )
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="postgresql://user@host:5432/db to use PostgreSQL (DATABASE_URL)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="flagproxy server",
        description="Run the flag server: Unleash's admin and client API on SQLite or PostgreSQL. "
        "`flagproxy server create-admin --help`: make a console Admin.",
        epilog="Environment: PORT, HOST, DATABASE_URL, DATABASE_PATH, INIT_ADMIN_API_TOKENS, "
        "INIT_CLIENT_API_TOKENS, INIT_FRONTEND_API_TOKENS, UNLEASH_DEFAULT_ADMIN_USERNAME, "
        "UNLEASH_DEFAULT_ADMIN_PASSWORD, MAX_REQUEST_SIZE, WORKERS, LOG_LEVEL, DELTA_API, DELTA_KEPT_EVENTS, "
        "MAX_STREAMS, TRUST_PROXY (see docs/server.md).",
    )
    parser.add_argument("--host", help="address to listen on (HOST, default 0.0.0.0)")
    parser.add_argument("--port", help=f"port to listen on (PORT, default {DEFAULT_PORT})")
    add_database_options(parser)
    parser.add_argument("--workers", metavar="N", help="worker processes (WORKERS, default 1)")
    parser.add_argument("--log-level", help="debug, info, warn or error (LOG_LEVEL, default warn)")
    parser.add_argument(
        "--no-delta-api",
        action="store_true",
        help="turn off /api/client/delta and /api/client/streaming (DELTA_API=false; default on)",
    )
    parser.add_argument(
        "--delta-kept-events",
        metavar="N",
        help="delta events kept for replay; a reader further behind gets a hydration "
        f"(DELTA_KEPT_EVENTS, default {DEFAULT_DELTA_KEPT_EVENTS})",
    )
    parser.add_argument(
        "--max-streams",
        metavar="N",
        help="open streams per process; more are asked to poll instead "
        f"(MAX_STREAMS, default {DEFAULT_MAX_STREAMS})",
    )
    parser.add_argument(
        "--trust-proxy",
        metavar="TRUST",
        help="who may set X-Forwarded-For and X-Forwarded-Proto: true, false, or comma-separated "
        "addresses/CIDR ranges of your reverse proxies, or loopback, linklocal, uniquelocal "
        "(TRUST_PROXY, default false)",
    )
    return parser
