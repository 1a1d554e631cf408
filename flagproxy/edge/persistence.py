"""Where the edge keeps what it knows across restarts, so an edge whose upstream is away at start is ready
with the flags and tokens it knew: Edge's `EdgePersistence` (crates/oss/unleash-edge-persistence), one
interface with a backend per option, and at most one of them (Edge's `data-provider` argument group).

- `--backup-folder` (`FolderPersistence`): each feed's document written as it changes, and the
  validated tokens as SHA-256 digests with their scope (flagproxy/sync/backup.py's files).
- `--redis-url` or `--redis-host` (flagproxy/edge/redis_store.py): Edge's keys, written every 60 s,
  soon after a change, and at stop.
- `--s3-bucket-name` (flagproxy/edge/s3_store.py): Edge's objects in an S3 bucket, written as Redis's
  keys are (flagproxy/edge/persistence_keys.py).

The leader (flagproxy/edge/leader.py) owns the one backend of an instance; workers never write. At start
it `load`s it before the sync asks for a feed (`restore_feed`) or the tokens (`restore_tokens`); every
published feed goes to `feed_changed`, every change of the validated tokens to `tokens_changed`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import orjson

from flagproxy.disk import disk_writer
from flagproxy.edge.feeds import Scope, scope_key
from flagproxy.options import ConfigError
from flagproxy.sync.backup import FileStorageProvider

TOKENS_BACKUP = "edge-tokens"  # in --backup-folder: token digests and scopes, never a secret


class Persistence:
    """What every backend answers; a backend that writes as things change needs no `run` or `persist`."""

    async def load(self) -> None:
        """Read what the backend holds, once, before anything is restored."""

    def restore_feed(self, scope: Scope) -> tuple[dict[str, Any], int | None] | None:
        """The feed's document and the id of its last delta event (flagproxy/edge/changes.py), if kept."""
        return None

    def restore_tokens(self) -> Any:
        """The validated tokens as TokenValidator.restore takes them (`saved()`'s shape)."""
        return None

    def feed_changed(self, scope: Scope, payload: dict[str, Any], event_id: int) -> None:
        pass

    def tokens_changed(self, saved: list[dict[str, Any]]) -> None:
        pass

    async def run(self) -> None:
        """The periodic writes, if the backend has any."""

    async def persist(self) -> None:
        """Write everything now (at stop)."""

    async def close(self) -> None:
        pass


class FolderPersistence(Persistence):
    """Each change written on the process's writer thread (flagproxy/disk.py: the leader may share a serving
    loop, which never waits on the disk), in order; a stop drains it (flagproxy/edge/leader.py)."""

    def __init__(self, folder: str, logger: Any = None) -> None:
        self.files = FileStorageProvider(folder)
        self.logger = logger

    def restore_feed(self, scope: Scope) -> tuple[dict[str, Any], int | None] | None:
        saved = self.files.get(_feed_key(scope))
        if not isinstance(saved, dict) or not isinstance(saved.get("features"), dict):
            return None
        event_id = saved.get("eventId")
        return saved["features"], event_id if isinstance(event_id, int) else None

    def restore_tokens(self) -> Any:
        return self.files.get(TOKENS_BACKUP)

    def feed_changed(self, scope: Scope, payload: dict[str, Any], event_id: int) -> None:
        kept = {"scope": [scope[0], list(scope[1])], "features": payload, "eventId": event_id}
        self._write(_feed_key(scope), kept)

    def tokens_changed(self, saved: list[dict[str, Any]]) -> None:
        self._write(TOKENS_BACKUP, saved)

    def _write(self, key: str, value: Any) -> None:
        """Encoded here (the value may change after), written on the writer thread."""
        disk_writer().later(self.files.set_document, key, orjson.dumps(value), failed=self._failed)

    def _failed(self, exc: BaseException) -> None:
        if self.logger is not None:
            self.logger.warn(f"Could not write to the backup folder: {exc!r}")


def _feed_key(scope: Scope) -> str:
    return "edge-" + scope_key(scope)


# ---- Edge's Redis options (crates/oss/unleash-edge-cli/src/lib.rs, RedisArgs) ----------------------------

# --redis-scheme's values (clap's ValueEnum names) → the URL scheme Edge's Display writes for each; redis-py
# names Edge's `redis+unix` `unix`.
REDIS_SCHEMES = {"tcp": "redis", "tls": "rediss", "redis": "redis", "rediss": "rediss",
                 "redis-unix": "unix", "unix": "unix"}  # fmt: skip
URL_SCHEMES = {"redis": "redis", "rediss": "rediss", "redis+unix": "unix", "unix": "unix"}


@dataclass(frozen=True)
class RedisTarget:
    url: str  # with the credentials: for the client only, never for a message
    shown: str  # the URL without them, for the log
    read_timeout: float  # seconds: reads at start (Edge: --redis-read-connection-timeout-milliseconds)
    write_timeout: float  # seconds: every write


def redis_target(values: dict[str, Any], named: dict[str, str]) -> RedisTarget | None:
    """Edge's `RedisArgs::to_url`: the first --redis-url, or --redis-scheme://--redis-host; then
    --redis-username/--redis-password, --redis-port and --redis-secure (rediss) over it. None without
    Redis options; ConfigError for what cannot make a URL."""

    def label(key: str) -> str:
        return named.get(key, "--" + key.replace("_", "-"))

    urls = values.get("redis_url") or ()
    host = values.get("redis_host")
    mode = str(values.get("redis_mode") or "single").strip().lower()
    if mode not in ("single", "cluster"):
        raise ConfigError(f"{label('redis_mode')}: {mode!r} is neither single nor cluster")
    scheme_name = str(values.get("redis_scheme") or "redis").strip().lower()
    if scheme_name not in REDIS_SCHEMES:
        raise ConfigError(
            f"{label('redis_scheme')}: {scheme_name!r} is not one of {', '.join(REDIS_SCHEMES)}"
        )
    if mode == "cluster":
        raise ConfigError(
            f"{label('redis_mode')}: cluster is not supported by flagproxy edge; give one Redis server "
            "with --redis-mode single (the default)"
        )
    if not urls and not host:
        for key in ("redis_username", "redis_password", "redis_port"):
            if values.get(key) is not None:
                raise ConfigError(f"{label(key)} needs --redis-url or --redis-host")
        return None
    if urls:
        raw = urls[0]
        parts = urlsplit(raw)
        scheme = URL_SCHEMES.get(parts.scheme.lower())
        if scheme is None:
            raise ConfigError(f"{label('redis_url')}: give a redis://, rediss:// or unix:// URL")
        if scheme != "unix" and not parts.hostname:
            raise ConfigError(f"{label('redis_url')}: the URL names no host")
        try:
            url_port = parts.port
        except ValueError:
            raise ConfigError(
                f"{label('redis_url')}: the URL's port is not a number from 1 to 65535"
            ) from None
        username, password = parts.username, parts.password
        hostname, path, query = parts.hostname or "", parts.path, parts.query
        # What redis-py takes without complaint at the first connection: a database number (`/N`, or
        # `?db=N` after a socket's path), nothing else.
        if scheme != "unix" and (query or not re.fullmatch(r"/?|/\d+", path)):
            raise ConfigError(f"{label('redis_url')}: after the host, only a database number (/0) is taken")
        if scheme == "unix" and query and not re.fullmatch(r"db=\d+", query):
            raise ConfigError(f"{label('redis_url')}: after the socket's path, only ?db=N is taken")
    else:
        scheme = REDIS_SCHEMES[scheme_name]
        username = password = None
        url_port, query = None, ""
        hostname, path = ("", host) if scheme == "unix" else (host, "")
    if values.get("redis_username") is not None:
        username = quote(values["redis_username"], safe="")
    if values.get("redis_password") is not None:
        password = quote(values["redis_password"], safe="")
    port = values.get("redis_port") or url_port
    if values.get("redis_secure"):
        scheme = "rediss"
    where = hostname + (f":{port}" if port and scheme != "unix" else "")
    if ":" in hostname:  # an IPv6 address
        where = f"[{hostname}]" + (f":{port}" if port else "")
    credentials = ""
    if username is not None or password is not None:
        credentials = (username or "") + (f":{password}" if password is not None else "") + "@"
    if scheme == "unix":  # redis-py reads the socket's path; urlunsplit would drop the empty netloc
        url, shown = f"unix://{credentials}{path}" + (f"?{query}" if query else ""), f"unix://{path}"
    else:
        url, shown = urlunsplit((scheme, credentials + where, path, query, "")), f"{scheme}://{where}{path}"
    return RedisTarget(
        url=url,
        shown=shown,
        read_timeout=values["redis_read_connection_timeout_milliseconds"] / 1000,
        write_timeout=values["redis_write_connection_timeout_milliseconds"] / 1000,
    )


# ---- Edge's S3 options (crates/oss/unleash-edge-cli/src/lib.rs, S3Args) -----------------------------------

# What botocore takes as a bucket name (botocore/handlers.py VALID_BUCKET): checked here so that a bad one
# stops the start instead of failing every write.
BUCKET_NAME = re.compile(r"[a-zA-Z0-9.\-_]{1,255}")
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")  # the AWS SDKs' order, S3's own first


@dataclass(frozen=True)
class S3Target:
    bucket: str
    force_path_style: bool
    # From the environment, as Edge's `aws_config::load_from_env` reads them; None: the SDK's default
    # (AWS's endpoint; the region of the profile, or us-east-1).
    endpoint: str | None
    region: str | None

    @property
    def shown(self) -> str:
        return f"S3 bucket {self.bucket}" + (f" at {self.endpoint}" if self.endpoint else "")


def s3_target(values: dict[str, Any], named: dict[str, str]) -> S3Target | None:
    """--s3-bucket-name and --s3-force-path-style, with the AWS endpoint and region of the environment;
    None without a bucket; ConfigError for what cannot reach one."""

    def label(key: str) -> str:
        return named.get(key, "--" + key.replace("_", "-"))

    bucket = values.get("s3_bucket_name")
    if bucket is None:
        if values.get("s3_force_path_style"):
            raise ConfigError(f"{label('s3_force_path_style')} needs --s3-bucket-name")
        return None
    if not BUCKET_NAME.fullmatch(bucket):
        raise ConfigError(
            f"{label('s3_bucket_name')}: {bucket!r} is not a bucket name (letters, digits, '.', '-', '_')"
        )
    endpoint = None
    for variable in ENDPOINT_VARIABLES:
        if os.environ.get(variable):
            endpoint = os.environ[variable]
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"{variable}: {endpoint!r} is not an http:// or https:// URL")
            break
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    return S3Target(bucket, bool(values.get("s3_force_path_style")), endpoint, region)


def check_persistence(values: dict[str, Any], named: dict[str, str]) -> None:
    """At start: one backend at most (`values["redis"]`, `values["s3"]`), each with options that reach it."""
    values["redis"] = redis_target(values, named)
    values["s3"] = s3_target(values, named)
    chosen = [
        named.get(key) or "--" + key.replace("_", "-")
        for key, given in (
            ("backup_folder", values.get("backup_folder")),
            ("redis_url" if values.get("redis_url") else "redis_host", values["redis"]),
            ("s3_bucket_name", values["s3"]),
        )
        if given
    ]
    if len(chosen) > 1:
        raise ConfigError(f"{' and '.join(chosen)}: choose one place to persist to")
