"""`flagproxy edge` options with Edge's names: `--upstream-url` / UPSTREAM_URL and so on (docs/edge.md).

A flag wins over its environment variable, which wins over the default. Every value is checked here, at
start: a bad one raises ConfigError, whose text is the one line `flagproxy edge` prints before exiting 2.
The CORS, trust-proxy and base-path values are read with the parsers every command shares
(flagproxy/options.py) and land in the attributes flagproxy/http/cors.py and trust.py read.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from flagproxy.edge.persistence import RedisTarget, S3Target, check_persistence
from flagproxy.edge.tokens import EdgeToken, TokenFormatError, parse_offline, parse_pretrusted, parse_token
from flagproxy.http.client_tls import ClientTls, client_context
from flagproxy.http.tls import server_ssl
from flagproxy.http.trust import TrustProxy
from flagproxy.options import ConfigError, from_string, is_http_url, split_list

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
EDGE, OFFLINE = "edge", "offline"
BOTH = (EDGE, OFFLINE)


@dataclass(frozen=True)
class Option:
    key: str
    env: str
    default: Any
    kind: str  # str url int bool tokens offline_tokens pretrusted cidrs level path base_path origin
    help: str
    modes: tuple[str, ...] = BOTH
    short: str | None = None
    group: str = ""  # the --help group (flagproxy/http/command_line.py OPTION_GROUPS)

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")

    def default_text(self) -> str:
        if self.default is None:
            return "unset"
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        if self.default in ("", ()):
            return "empty"
        return str(self.default)


# fmt: off
OPTIONS: tuple[Option, ...] = (
    Option("upstream_url", "UPSTREAM_URL", None, "url",
           "the upstream's base URL without /api: a flagproxy server, Unleash, or another edge",
           (EDGE,), "-u", group="upstream"),
    Option("tokens", "TOKENS", (), "tokens",
           "client tokens to sync with at start (comma-separated); their environments and projects are "
           "what this instance serves", BOTH, "-t", group="tokens"),
    Option("pretrusted_tokens", "PRETRUSTED_TOKENS", (), "pretrusted",
           "frontend tokens accepted without asking the upstream: [project]:environment.secret, or a Node "
           "proxy key as <key>@<environment>, sent as Authorization: <key> (the text before the last @)",
           (EDGE,), group="tokens"),
    Option("dynamic", "DYNAMIC", False, "bool",
           "accept any token the upstream validates, syncing its environment on first use (default: strict, "
           "only tokens covered by --tokens)", (EDGE,), group="tokens"),
    Option("strict", "STRICT", True, "bool",
           "accept only tokens whose environment and projects a --tokens token covers (default)", (EDGE,),
           group="tokens"),
    Option("port", "PORT", 3063, "int", "listening port", BOTH, "-p", group="serving"),
    Option("interface", "INTERFACE", "0.0.0.0", "str", "listening address", BOTH, "-i", group="serving"),
    Option("workers", "WORKERS", 1, "int",
           "worker processes serving as one instance: one upstream sync, one validation per new token and "
           "one usage stream for all of them", group="workers"),
    Option("base_path", "BASE_PATH", "", "base_path", "path prefix of every route", group="serving"),
    Option("features_refresh_interval_seconds", "FEATURES_REFRESH_INTERVAL_SECONDS", 15, "int",
           "seconds between two feature fetches of one environment", (EDGE,), "-f", group="upstream"),
    Option("streaming", "STREAMING", False, "bool",
           "keep each environment's features by streaming the upstream's changes (/api/client/streaming) "
           "instead of polling; polls every --features-refresh-interval-seconds while the stream is refused "
           "or unreachable", (EDGE,), group="upstream"),
    Option("metrics_interval_seconds", "METRICS_INTERVAL_SECONDS", 60, "int",
           "seconds between two bulk metrics posts upstream", (EDGE,), "-m", group="usage"),
    Option("token_revalidation_interval_seconds", "TOKEN_REVALIDATION_INTERVAL_SECONDS", 3600, "int",
           "seconds between two revalidations of every known token", (EDGE,), group="tokens"),
    # Persistence (flagproxy/edge/persistence.py): at most one of --backup-folder, Redis, S3.
    Option("backup_folder", "BACKUP_FOLDER", None, "path",
           "folder where the last good features of each environment and the validated tokens' digests are "
           "kept and read at start (never a secret)", (EDGE,), "-b", group="persistence"),
    Option("redis_url", "REDIS_URL", (), "list",
           "Redis to keep features and validated tokens' digests in, read at start: redis://, rediss:// or "
           "unix:// URL (of a comma-separated list, the first)", (EDGE,), group="persistence"),
    Option("redis_mode", "REDIS_MODE", "single", "str", "single (cluster is not supported)", (EDGE,),
           group="persistence"),
    Option("redis_password", "REDIS_PASSWORD", None, "secret", "password for Redis, over the URL's",
           (EDGE,), group="persistence"),
    Option("redis_username", "REDIS_USERNAME", None, "str", "user name for Redis, over the URL's", (EDGE,),
           group="persistence"),
    Option("redis_port", "REDIS_PORT", None, "int", "Redis port, over the URL's", (EDGE,),
           group="persistence"),
    Option("redis_host", "REDIS_HOST", None, "str",
           "Redis host, when --redis-url is not given (a socket path with --redis-scheme unix)", (EDGE,),
           group="persistence"),
    Option("redis_secure", "REDIS_SECURE", False, "bool", "connect to Redis with TLS (rediss)", (EDGE,),
           group="persistence"),
    Option("redis_scheme", "REDIS_SCHEME", "redis", "str",
           "scheme with --redis-host: tcp, tls, redis, rediss, redis-unix or unix", (EDGE,),
           group="persistence"),
    Option("redis_read_connection_timeout_milliseconds", "REDIS_READ_CONNECTION_TIMEOUT_MILLISECONDS", 2000,
           "int", "milliseconds allowed to connect to Redis and read, at start", (EDGE,),
           group="persistence"),
    Option("redis_write_connection_timeout_milliseconds", "REDIS_WRITE_CONNECTION_TIMEOUT_MILLISECONDS",
           2000, "int", "milliseconds allowed to connect to Redis and write", (EDGE,), group="persistence"),
    Option("s3_bucket_name", "S3_BUCKET_NAME", None, "str",
           "S3 bucket to keep features and validated tokens' digests in, read at start; endpoint, region "
           "and credentials from the AWS variables (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, ...)",
           (EDGE,), group="persistence"),
    Option("s3_force_path_style", "S3_FORCE_PATH_STYLE", False, "bool",
           "address the bucket in the URL's path (<endpoint>/<bucket>/...), not its host name", (EDGE,),
           group="persistence"),
    Option("delta_kept_events", "DELTA_KEPT_EVENTS", 100, "int",
           "delta events kept per environment and project set for /api/client/delta and "
           "/api/client/streaming; a reader further behind gets a hydration", group="serving"),
    Option("max_streams", "MAX_STREAMS", 1000, "int",
           "open /api/client/streaming connections per worker; more are told to poll (fetch-mode: polling)",
           group="serving"),
    Option("disable_all_endpoint", "DISABLE_ALL_ENDPOINT", False, "bool",
           "do not serve /api/frontend/all and /api/proxy/all", group="serving"),
    Option("trust_proxy", "TRUST_PROXY", False, "bool",
           "read the client address from X-Forwarded-For (from every peer, or from --proxy-trusted-servers)",
           group="serving"),
    Option("proxy_trusted_servers", "PROXY_TRUSTED_SERVERS", (), "cidrs",
           "peers trusted to set X-Forwarded-For: IP addresses or CIDRs, comma-separated", group="serving"),
    Option("allow_list", "ALLOW_LIST", (), "cidrs",
           "accept requests only from these CIDRs (default: every address)", group="serving"),
    Option("deny_list", "DENY_LIST", (), "cidrs", "refuse requests from these CIDRs (403)", group="serving"),
    Option("cors_origin", "CORS_ORIGIN", "*", "origin",
           "Access-Control-Allow-Origin: one origin, or a comma-separated list (matches are reflected)",
           group="cors"),
    Option("cors_allowed_headers", "CORS_ALLOWED_HEADERS", None, "str",
           "Access-Control-Allow-Headers (unset: reflect the preflight's request headers)", group="cors"),
    Option("cors_max_age", "CORS_MAX_AGE", 172800, "int", "Access-Control-Max-Age, seconds", group="cors"),
    Option("cors_exposed_headers", "CORS_EXPOSED_HEADERS", "ETag", "str", "Access-Control-Expose-Headers",
           group="cors"),
    Option("cors_methods", "CORS_METHODS", "GET, POST", "str", "Access-Control-Allow-Methods", group="cors"),
    Option("app_name", "APP_NAME", "unleash-edge", "str",
           "application name sent upstream with registrations and metrics", BOTH, "-a", group="upstream"),
    Option("instance_id", "INSTANCE_ID", None, "str", "instance id sent upstream (default: generated)",
           group="upstream"),
    Option("upstream_request_timeout", "UPSTREAM_REQUEST_TIMEOUT", 5, "int",
           "seconds allowed for one upstream request", (EDGE,), group="upstream"),
    Option("skip_ssl_verification", "SKIP_SSL_VERIFICATION", False, "bool",
           "do not check the upstream's TLS certificate", (EDGE,), "-s", group="upstream"),
    # Edge's deployment options (TLS, headers, client certificates): flag, variable and default as in
    # crates/oss/unleash-edge-cli/src/lib.rs of Unleash/unleash-edge.
    Option("tls_enable", "TLS_ENABLE", False, "bool",
           "serve HTTPS on --tls-server-port; --port then serves nothing, unless --redirect-http-to-https",
           group="serving"),
    Option("tls_server_key", "TLS_SERVER_KEY", None, "path",
           "with --tls-enable: the server's private key, a PEM file", group="serving"),
    Option("tls_server_cert", "TLS_SERVER_CERT", None, "path",
           "with --tls-enable: the server's certificate chain, a PEM file, leaf first", group="serving"),
    Option("tls_server_port", "TLS_SERVER_PORT", 3043, "int", "with --tls-enable: the HTTPS port",
           group="serving"),
    Option("redirect_http_to_https", "REDIRECT_HTTP_TO_HTTPS", False, "bool",
           "with --tls-enable: answer every request on --port with a 308 to the same path on "
           "--tls-server-port", group="serving"),
    Option("upstream_certificate_file", "UPSTREAM_CERTIFICATE_FILE", None, "path",
           "a PEM file of CA certificates trusted for the upstream, besides the system's", (EDGE,),
           group="upstream"),
    Option("pkcs12_identity_file", "PKCS12_IDENTITY_FILE", None, "path",
           "the client certificate shown to the upstream: a PKCS#12 archive (.pfx) of key and chain "
           "(used over the options below, as in Edge)", (EDGE,), group="upstream"),
    Option("pkcs12_passphrase", "PKCS12_PASSPHRASE", None, "secret",
           "the passphrase of --pkcs12-identity-file", (EDGE,), group="upstream"),
    Option("pkcs8_client_certificate_file", "PKCS8_CLIENT_CERTIFICATE_FILE", None, "path",
           "the client certificate shown to the upstream: a PEM chain, leaf first (with "
           "--pkcs8-client-key-file)", (EDGE,), group="upstream"),
    Option("pkcs8_client_key_file", "PKCS8_CLIENT_KEY_FILE", None, "path",
           "the PKCS#8 PEM private key of --pkcs8-client-certificate-file", (EDGE,), group="upstream"),
    Option("pem_cert_file", "PEM_CERT_FILE", None, "path",
           "the client certificate shown to the upstream: one PEM file of private key and chain", (EDGE,),
           group="upstream"),
    Option("custom_client_headers", "CUSTOM_CLIENT_HEADERS", (), "headers",
           "headers sent with every upstream request: `Name: value` entries, comma-separated or repeated",
           (EDGE,), "-H", group="upstream"),
    Option("upstream_auth_header", "UPSTREAM_AUTH_HEADER", "Authorization", "header",
           "the header that carries edge's tokens upstream", (EDGE,), group="upstream"),
    Option("edge_auth_header", "EDGE_AUTH_HEADER", "Authorization", "header",
           "the header clients send their token in", group="tokens"),
    Option("token_header", "TOKEN_HEADER", None, "header",
           "one header for both: clients' tokens and edge's upstream (not with --edge-auth-header or "
           "--upstream-auth-header)", group="tokens"),
    Option("log_level", "LOG_LEVEL", "warn", "level", "debug, info, warn, error or fatal", group="logging"),
    Option("bootstrap_file", "BOOTSTRAP_FILE", None, "path",
           "offline: a client features document, or an object of environment -> such a document",
           (OFFLINE,), group="serving"),
    Option("client_tokens", "CLIENT_TOKENS", (), "offline_tokens",
           "offline: client tokens accepted on /api/client/*", (OFFLINE,), "-c", group="tokens"),
    Option("frontend_tokens", "FRONTEND_TOKENS", (), "offline_tokens",
           "offline: frontend tokens accepted on /api/frontend and /api/proxy", (OFFLINE,), group="tokens"),
    Option("reload_interval", "RELOAD_INTERVAL", 0, "int",
           "offline: seconds between two reads of the bootstrap file (0: read once)", (OFFLINE,), "-r",
           group="serving"),
)
# fmt: on
OPTIONS_BY_KEY = {o.key: o for o in OPTIONS}


@dataclass(frozen=True, kw_only=True)
class EdgeSettings:
    mode: str = EDGE
    upstream_url: str = ""
    tokens: tuple[EdgeToken, ...] = ()
    pretrusted_tokens: tuple[EdgeToken, ...] = ()
    dynamic: bool = False
    port: int = 3063
    interface: str = "0.0.0.0"
    workers: int = 1
    base_path: str = ""
    features_refresh_interval_seconds: int = 15
    streaming: bool = False
    metrics_interval_seconds: int = 60
    token_revalidation_interval_seconds: int = 3600
    # Persistence: --backup-folder, Redis or S3 (`redis`, `s3`: what their options make: edge/persistence.py)
    backup_folder: str | None = None
    redis_url: tuple[str, ...] = ()
    redis_mode: str = "single"
    redis_password: str | None = None
    redis_username: str | None = None
    redis_port: int | None = None
    redis_host: str | None = None
    redis_secure: bool = False
    redis_scheme: str = "redis"
    redis_read_connection_timeout_milliseconds: int = 2000
    redis_write_connection_timeout_milliseconds: int = 2000
    s3_bucket_name: str | None = None
    s3_force_path_style: bool = False
    redis: RedisTarget | None = None
    s3: S3Target | None = None
    delta_kept_events: int = 100
    max_streams: int = 1000
    disable_all_endpoint: bool = False
    trust_proxy: TrustProxy = field(default_factory=TrustProxy)
    allow_list: tuple[Network, ...] = ()
    deny_list: tuple[Network, ...] = ()
    app_name: str = "unleash-edge"
    instance_id: str = ""
    upstream_request_timeout: int = 5
    skip_ssl_verification: bool = False
    tls_enable: bool = False
    tls_server_key: str | None = None
    tls_server_cert: str | None = None
    tls_server_port: int = 3043
    redirect_http_to_https: bool = False
    tls: dict[str, Any] | None = None  # with tls_enable: Sanic's ssl= argument (flagproxy/http/tls.py)
    upstream_certificate_file: str | None = None
    pkcs12_identity_file: str | None = None
    pkcs12_passphrase: str | None = field(default=None, repr=False)
    pkcs8_client_certificate_file: str | None = None
    pkcs8_client_key_file: str | None = None
    pem_cert_file: str | None = None
    # the upstream's SSLContext when any of the above is given (flagproxy/http/client_tls.py)
    upstream_tls: ssl.SSLContext | None = field(default=None, compare=False, repr=False)
    custom_client_headers: tuple[tuple[str, str], ...] = ()
    upstream_auth_header: str = "Authorization"
    edge_auth_header: str = "Authorization"
    log_level: str = "warn"
    bootstrap_file: str | None = None
    client_tokens: tuple[EdgeToken, ...] = ()
    frontend_tokens: tuple[EdgeToken, ...] = ()
    reload_interval: int = 0
    # CORS, in the attribute names flagproxy/http/cors.py reads.
    cors_origin: str | tuple[str, ...] = "*"
    cors_allowed_headers: str | None = None
    cors_max_age: int = 172800
    cors_exposed_headers: str | None = "ETag"
    cors_methods: str = "GET, POST"
    cors_credentials: bool = False
    cors_options_success_status: int = 204
    cors_preflight_continue: bool = False
    # option key -> the flag or variable it was given by, so a later message names what the user wrote
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def strict(self) -> bool:
        return not self.dynamic

    @classmethod
    def load(
        cls, options: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None, mode: str = EDGE
    ) -> EdgeSettings:
        """Resolve `options` (flag values as strings, keyed by option key) over `env`; raise ConfigError."""
        return _load(dict(options or {}), os.environ if env is None else env, mode)


def _load(options: dict[str, Any], env: Mapping[str, str], mode: str) -> EdgeSettings:
    values: dict[str, Any] = {"mode": mode}
    named: dict[str, str] = {}  # option key -> the flag or variable it came from, for the checks below
    for option in OPTIONS:
        if mode not in option.modes:
            continue
        if mode == OFFLINE and option.kind == "tokens":
            option = replace(option, kind="offline_tokens")  # offline, any string is a token (as in Edge)
        raw = options.get(option.key)
        label = option.flag
        if raw is None:
            raw, label = env.get(option.env), option.env
        if raw not in (None, ""):
            named[option.key] = label
        values[option.key] = option.default if raw in (None, "") else _convert(option, label, str(raw))
    if mode == EDGE:
        if not values["upstream_url"]:
            raise ConfigError("--upstream-url (UPSTREAM_URL) is required: the upstream's base URL")
        values["upstream_url"] = values["upstream_url"].rstrip("/")
        strict_said = options.get("strict") is not None or env.get("STRICT") not in (None, "")
        strict = values.pop("strict")
        if strict_said and strict and values["dynamic"]:
            raise ConfigError("--strict and --dynamic: choose one")
        values["dynamic"] = values["dynamic"] or not strict
        if not values["dynamic"] and not values["tokens"]:
            raise ConfigError(
                "--tokens (TOKENS) is required in strict mode: the client tokens whose environments and "
                "projects this instance serves (or start with --dynamic)"
            )
    else:
        if not values["bootstrap_file"]:
            raise ConfigError("--bootstrap-file (BOOTSTRAP_FILE) is required in offline mode")
        if not (values["tokens"] or values["client_tokens"] or values["frontend_tokens"]):
            raise ConfigError("offline mode needs --tokens, --client-tokens or --frontend-tokens")
    for key, low, high in (
        ("port", 1, 65535),
        ("tls_server_port", 1, 65535),
        ("workers", 1, None),
        ("features_refresh_interval_seconds", 1, None),
        ("metrics_interval_seconds", 1, None),
        ("token_revalidation_interval_seconds", 1, None),
        ("upstream_request_timeout", 1, None),
        ("cors_max_age", 0, None),
        ("delta_kept_events", 1, None),
        ("max_streams", 0, None),
        ("redis_port", 1, 65535),
        ("redis_read_connection_timeout_milliseconds", 1, None),
        ("redis_write_connection_timeout_milliseconds", 1, None),
    ):
        value = values.get(key)
        if value is not None and (value < low or (high is not None and value > high)):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ConfigError(f"{named.get(key, OPTIONS_BY_KEY[key].flag)}: must be {bound}, got {value}")
    _one_token_header(values, named)
    if values["tls_enable"]:
        values["tls"] = _server_tls(values, named)
        if values["redirect_http_to_https"] and values["port"] == values["tls_server_port"]:
            ports = named.get("tls_server_port", "--tls-server-port"), named.get("port", "--port")
            raise ConfigError(f"{ports[0]} and {ports[1]}: the HTTPS and the redirecting port must differ")
    if mode == EDGE:
        values["upstream_tls"] = _upstream_tls(values, named)
        check_persistence(values, named)
    servers = values.pop("proxy_trusted_servers")
    if values["trust_proxy"]:
        values["trust_proxy"] = TrustProxy(networks=servers) if servers else TrustProxy(trust_all=True)
    else:
        values["trust_proxy"] = TrustProxy()
    if not values.get("instance_id"):
        values["instance_id"] = f"flagproxy-edge@{uuid.uuid4().hex}"
    return EdgeSettings(**values, sources={key: named[key] for key in named if key in values})


def _server_tls(values: dict[str, Any], named: dict[str, str]) -> dict[str, Any]:
    """--tls-enable's certificate and key, read now: a missing or unreadable one stops the start."""
    tls_label = named.get("tls_enable", "--tls-enable")
    for key in ("tls_server_cert", "tls_server_key"):
        if not values[key]:
            option = OPTIONS_BY_KEY[key]
            raise ConfigError(f"{tls_label} needs {option.flag} ({option.env})")
    return server_ssl(
        values["tls_server_cert"], values["tls_server_key"], named["tls_server_cert"], named["tls_server_key"]
    )


def _upstream_tls(values: dict[str, Any], named: dict[str, str]) -> ssl.SSLContext | None:
    tls = ClientTls(
        verify=not values["skip_ssl_verification"],
        ca_file=values["upstream_certificate_file"],
        pkcs12_file=values["pkcs12_identity_file"],
        pkcs12_passphrase=values["pkcs12_passphrase"],
        cert_file=values["pkcs8_client_certificate_file"],
        key_file=values["pkcs8_client_key_file"],
        pem_file=values["pem_cert_file"],
        labels=tuple(named.items()),
    )
    return client_context(tls) if tls.needed else None


def _one_token_header(values: dict[str, Any], named: dict[str, str]) -> None:
    """--token-header names the header of both sides, as in Edge, where it conflicts with either."""
    header = values.pop("token_header", None)
    if header is None:
        return
    for key in ("edge_auth_header", "upstream_auth_header"):
        if key in named:
            raise ConfigError(f"{named['token_header']} and {named[key]}: choose one")
        if key in values:
            values[key] = header


def _convert(option: Option, label: str, raw: str) -> Any:
    kind = option.kind
    if kind == "url":
        if not is_http_url(raw):
            raise ConfigError(f"{label}: {raw!r} is not an http:// or https:// URL")
        if raw.rstrip("/").endswith("/api"):
            raise ConfigError(f"{label}: {raw!r} ends in /api; give the base URL without it")
        return raw.strip()
    if kind in ("tokens", "pretrusted", "offline_tokens"):
        parse = {"tokens": parse_token, "pretrusted": parse_pretrusted, "offline_tokens": parse_offline}[kind]
        tokens = []
        for index, part in enumerate(split_list(raw), start=1):
            try:
                tokens.append(parse(part))
            except TokenFormatError as exc:
                # The entry's position, never its text: it may be a secret with a typo in it.
                raise ConfigError(f"{label}: entry {index} is {exc}") from None
        return tuple(tokens)
    if kind == "cidrs":
        networks = []
        for part in split_list(raw):
            try:
                networks.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ConfigError(f"{label}: {part!r} is not an IP address or CIDR range") from None
        return tuple(networks)
    if kind == "path":
        return os.path.abspath(raw.strip())
    # str, int, bool, level, base_path, origin: read as `flagproxy proxy` reads its options.
    return from_string(kind, label, raw)
