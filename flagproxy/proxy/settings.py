"""The proxy's configuration: every option, from keywords, CLI flags or env vars.

    settings = ProxySettings.load({"service_url": "http://unleash:4242/api", ...}, env=os.environ)

Precedence, highest first: explicit options (keywords or CLI flags) → the options' own env names → the Node
proxy's UNLEASH_* aliases (when both are set the own one wins, and one warning says so)
→ defaults. Every value is checked here, at start, so a bad value stops start-up with one line naming the
option (`ConfigError`) instead of failing on the first request or the first poll.

Keyword names are snake_case (`service_url`); the camelCase names (`serviceUrl`) and the nested
objects `cors`, `httpOptions`, `expBootstrap`, `expServerSideSdkConfig` are accepted as well.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flagproxy.http.trust import TrustProxy
from flagproxy.options import (
    ConfigError,
    from_string,
    has_credentials,
    is_http_url,
    parse_tag,
    parse_trust,
    tag_pair,
)


@dataclass(frozen=True)
class Option:
    """One configuration option: how it is named everywhere, its default and how a string is read."""

    key: str  # keyword / attribute name
    spec: str  # camelCase option name ("(none)" for env-only ones)
    env: tuple[str, ...]  # env names, in priority order (no warning between them)
    aliases: tuple[str, ...]  # the Node proxy's UNLEASH_* names (warning when shadowed)
    default: Any
    kind: str  # str, secret, list, int, bool, level, tags, trust, base_path, origin, path, proxy_url, object
    help: str
    required: bool = False
    default_label: str | None = None  # how --help and docs/proxy.md say the default, when not str(default)
    group: str = ""  # the --help group (flagproxy/http/command_line.py OPTION_GROUPS)

    @property
    def label(self) -> str:
        return self.env[0] if self.env else self.key

    def default_text(self) -> str:
        if self.default_label is not None:
            return self.default_label
        if self.required:
            return "required"
        if self.default is None:
            return "unset"
        if self.default == ():
            return "empty list"
        if self.default == "":
            return "empty string"
        if isinstance(self.default, TrustProxy):
            return "false"
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)


def _opt(
    key, spec, env, aliases, default, kind, help_, required=False, default_label=None, *, group
) -> Option:
    return Option(key, spec, tuple(env), tuple(aliases), default, kind, help_, required, default_label, group)


# The table that --help, docs/proxy.md and the loader all follow (--help groups it by `group`).
# One option a line: it reads as the table it is.
# fmt: off
OPTIONS: tuple[Option, ...] = (
    _opt("service_url", "serviceUrl", ["SERVICE_URL"], ["UNLEASH_URL"], None, "str",
         "API address of the upstream server, e.g. http://unleash:4242/api (no user:password in it)", True,
         group="upstream"),
    _opt("service_api_token", "serviceApiToken", ["SERVICE_API_TOKEN"], ["UNLEASH_API_TOKEN"], None, "secret",
         "client-type API token used to read from the upstream", True, group="upstream"),
    _opt("client_keys", "clientKeys", ["SERVICE_PROXY_CLIENT_KEYS"], ["UNLEASH_PROXY_CLIENT_KEYS"],
         (), "list",
         "comma-separated client keys accepted from SDKs", True, group="tokens"),
    _opt("proxy_secrets", "proxySecrets", ["SERVICE_PROXY_SECRETS"], ["UNLEASH_PROXY_SECRETS"], (), "list",
         "deprecated alias of clientKeys", group="tokens"),
    _opt("port", "(none)", ["PORT", "PROXY_PORT"], [], 3000, "int",
         "listening port", group="serving"),
    _opt("host", "(none)", ["PROXY_HOST"], [], "0.0.0.0", "str",
         "listening address (flagproxy extension; the Node proxy always listens on all interfaces)",
         group="serving"),
    _opt("proxy_base_path", "proxyBasePath", ["PROXY_BASE_PATH"], [], "", "base_path",
         "path prefix; `base/path` serves /base/path/proxy", group="serving"),
    _opt("service_app_name", "serviceAppName", ["SERVICE_APP_NAME"], ["UNLEASH_APP_NAME"],
         "service-proxy", "str",
         "application name sent upstream and the default appName of the context", group="upstream"),
    _opt("service_instance_id", "serviceInstanceId", ["SERVICE_INSTANCE_ID"], ["UNLEASH_INSTANCE_ID"],
         None, "str",
         "instance id sent upstream", default_label="generated: <os user>-<hostname>", group="upstream"),
    _opt("refresh_interval", "refreshInterval", ["SERVICE_FETCH_INTERVAL"], ["UNLEASH_FETCH_INTERVAL"],
         5000, "int",
         "upstream polling interval, ms (> 0)", group="upstream"),
    _opt("streaming", "streaming", ["SERVICE_STREAMING"], ["UNLEASH_STREAMING"], False, "bool",
         "keep the flags by streaming the upstream's changes (GET /api/client/streaming) instead of polling; "
         "polls every refreshInterval while the stream is refused or unreachable (flagproxy extension)",
         group="upstream"),
    _opt("metrics_interval", "metricsInterval", ["SERVICE_METRICS_INTERVAL"], ["UNLEASH_METRICS_INTERVAL"],
         30000, "int",
         "usage metrics sending interval, ms (0 = never register or send metrics)", group="usage"),
    _opt("metrics_jitter", "metricsJitter", ["SERVICE_METRICS_JITTER"], ["UNLEASH_METRICS_JITTER"], 0, "int",
         "random ± jitter added to each metrics interval, ms", group="usage"),
    _opt("environment", "environment", ["SERVICE_ENVIRONMENT"], ["UNLEASH_ENVIRONMENT"], None, "str",
         "fixed context environment; callers cannot override it", group="serving"),
    _opt("project_name", "projectName", ["SERVICE_PROJECT_NAME"], ["UNLEASH_PROJECT_NAME"], None, "str",
         "only this project's features (?project= on polls)", group="upstream"),
    _opt("logger", "logger", [], [], None, "object",
         "custom logger object with debug/info/warn/error/fatal methods (keyword only)",
         default_label="SimpleLogger (stdout)", group="logging"),
    _opt("use_json_logger", "useJsonLogger", ["JSON_LOGGER"], [], False, "bool",
         "default logger writes one JSON object a line; no effect with a custom logger", group="logging"),
    _opt("log_level", "logLevel", ["LOG_LEVEL"], [], "warn", "level",
         "debug, info, warn, error or fatal", group="logging"),
    _opt("custom_strategies", "customStrategies",
         ["SERVICE_CUSTOM_STRATEGIES_FILE"], ["UNLEASH_CUSTOM_STRATEGIES_FILE"],
         (), "path",
         "Python file defining `strategies = [...]` (keyword: a list of Strategy objects or a path)",
         group="serving"),
    _opt("trust_proxy", "trustProxy", ["TRUST_PROXY"], [], TrustProxy(), "trust",
         "true/false, or comma-separated IPs/CIDRs (and loopback, linklocal, uniquelocal) of trusted "
         "proxies", group="serving"),
    _opt("name_prefix", "namePrefix", ["SERVICE_NAME_PREFIX"], ["UNLEASH_NAME_PREFIX"], None, "str",
         "only features whose name starts with this (?namePrefix= on polls)", group="upstream"),
    _opt("tags", "tags", ["SERVICE_TAGS"], ["UNLEASH_TAGS"], (), "tags",
         "only features with these tags: tagName:tagValue,tagName2:tagValue2", group="upstream"),
    _opt("client_keys_header_name", "clientKeysHeaderName", ["CLIENT_KEY_HEADER_NAME"], [],
         "authorization", "str",
         "request header that carries the client key", group="tokens"),
    _opt("storage_provider", "storageProvider", [], [], None, "object",
         "object with get(key)/set(key, payload) keeping the last good payload (keyword only)",
         default_label="a file: $TMPDIR/flagproxy-backup-<serviceAppName>-<owner>.json", group="upstream"),
    _opt("enable_oas", "enableOAS", ["ENABLE_OAS"], [], False, "bool",
         "serve /docs/openapi.json and the /docs/openapi page", group="serving"),
    _opt("enable_all_endpoint", "enableAllEndpoint", ["ENABLE_ALL_ENDPOINT"], [], False, "bool",
         "serve /proxy/all (otherwise 501)", group="serving"),
    _opt("cors_allowed_headers", "cors.allowedHeaders", ["CORS_ALLOWED_HEADERS"], [], None, "str",
         "Access-Control-Allow-Headers (unset: reflect the request's headers)", group="cors"),
    _opt("cors_credentials", "cors.credentials", ["CORS_CREDENTIALS"], [], False, "bool",
         "send Access-Control-Allow-Credentials: true", group="cors"),
    _opt("cors_exposed_headers", "cors.exposedHeaders", ["CORS_EXPOSED_HEADERS"], [], "ETag", "str",
         "Access-Control-Expose-Headers", group="cors"),
    _opt("cors_max_age", "cors.maxAge", ["CORS_MAX_AGE"], [], 172800, "int",
         "seconds a preflight result may be cached", group="cors"),
    _opt("cors_methods", "cors.methods", ["CORS_METHODS"], [], "GET, POST", "str",
         "Access-Control-Allow-Methods", group="cors"),
    _opt("cors_options_success_status", "cors.optionsSuccessStatus", ["CORS_OPTIONS_SUCCESS_STATUS"], [],
         204, "int",
         "status of a preflight answer", group="cors"),
    _opt("cors_origin", "cors.origin", ["CORS_ORIGIN"], [], "*", "origin",
         "allowed origin, or comma-separated list of them (matches are reflected)", group="cors"),
    _opt("cors_preflight_continue", "cors.preflightContinue", ["CORS_PREFLIGHT_CONTINUE"], [], False, "bool",
         "pass preflights on to the routes (200 with Allow, 404 on unknown paths)", group="cors"),
    _opt("http_options_reject_unauthorized", "httpOptions.rejectUnauthorized",
         ["HTTP_OPTIONS_REJECT_UNAUTHORIZED"], [],
         True, "bool",
         "reject upstream TLS connections with invalid certificates", group="upstream"),
    _opt("http_proxy", "(none)", ["HTTP_PROXY", "http_proxy"], [], None, "proxy_url",
         "proxy server for upstream http:// requests (NO_PROXY honoured)", group="upstream"),
    _opt("https_proxy", "(none)", ["HTTPS_PROXY", "https_proxy"], [], None, "proxy_url",
         "proxy server for upstream https:// requests (NO_PROXY honoured)", group="upstream"),
    _opt("response_cache_mb", "(none)", ["RESPONSE_CACHE_MB"], [], 32, "int",
         "memory for cached toggle answers per worker, MiB (0 = no response cache; flagproxy extension)",
         group="serving"),
    _opt("enable_prometheus", "(none)", ["ENABLE_PROMETHEUS"], [], True, "bool",
         "serve every proxy series at /proxy/internal-backstage/prometheus, added up over the workers "
         "(false: the Node proxy's three gauges only; flagproxy extension)", group="prometheus"),
    _opt("enable_status_page", "(none)", ["ENABLE_STATUS_PAGE"], [], True, "bool",
         "serve the status page at /proxy/status (open; it holds no data) and its data at "
         "/proxy/status.json (client key) (flagproxy extension)", group="serving"),
    _opt("upstream_timeout", "(none)", ["UPSTREAM_TIMEOUT"], [], 10000, "int",
         "time allowed for one upstream request, whole body included, ms (the Node SDK's timeout; "
         "flagproxy extension)", group="upstream"),
    _opt("exp_bootstrap_url", "expBootstrap.url", ["EXP_BOOTSTRAP_URL"], [], None, "str",
         "experimental: URL of a features document that makes the proxy ready before the upstream answers",
         group="upstream"),
    _opt("exp_bootstrap_authorization", "expBootstrap.urlHeaders.Authorization",
         ["EXP_BOOTSTRAP_AUTHORIZATION"], [],
         None, "secret",
         "experimental: Authorization header value for the bootstrap URL", group="upstream"),
    _opt("exp_server_side_sdk_config_tokens", "expServerSideSdkConfig.tokens",
         ["EXP_SERVER_SIDE_SDK_CONFIG_TOKENS"], [],
         (), "list",
         "experimental: tokens that may read /proxy/client/features (server SDKs, other proxies)",
         group="tokens"),
    _opt("exp_custom_enrichers", "expCustomEnrichers", ["EXP_CUSTOM_ENRICHERS_FILE"], [], (), "path",
         "experimental: Python file defining `enrichers = [callable]` (keyword: a list or a path)",
         group="serving"),
)
# fmt: on

OPTIONS_BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}

# camelCase names (and the nested-object spellings) → keyword names.
_CAMEL = {o.spec: o.key for o in OPTIONS if o.spec != "(none)"}
_NESTED = {
    "cors": {
        "allowedHeaders": "cors_allowed_headers",
        "credentials": "cors_credentials",
        "exposedHeaders": "cors_exposed_headers",
        "maxAge": "cors_max_age",
        "methods": "cors_methods",
        "optionsSuccessStatus": "cors_options_success_status",
        "origin": "cors_origin",
        "preflightContinue": "cors_preflight_continue",
    },
    "httpOptions": {"rejectUnauthorized": "http_options_reject_unauthorized"},
    "expServerSideSdkConfig": {"tokens": "exp_server_side_sdk_config_tokens"},
    "expBootstrap": {"url": "exp_bootstrap_url", "urlHeaders": "_bootstrap_headers"},
}


@dataclass(frozen=True, kw_only=True)
class ProxySettings:
    """Resolved, checked configuration of one proxy. Build it with `ProxySettings.load(...)`."""

    service_url: str
    service_api_token: str
    client_keys: tuple[str, ...]
    proxy_secrets: tuple[str, ...] = ()
    port: int = 3000
    host: str = "0.0.0.0"
    proxy_base_path: str = ""
    service_app_name: str = "service-proxy"
    service_instance_id: str = ""
    refresh_interval: int = 5000
    streaming: bool = False
    metrics_interval: int = 30000
    metrics_jitter: int = 0
    environment: str | None = None
    project_name: str | None = None
    logger: Any = None
    use_json_logger: bool = False
    log_level: str = "warn"
    custom_strategies: tuple[Any, ...] = ()
    trust_proxy: TrustProxy = field(default_factory=TrustProxy)
    name_prefix: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    client_keys_header_name: str = "authorization"
    storage_provider: Any = None
    enable_oas: bool = False
    enable_all_endpoint: bool = False
    cors_allowed_headers: str | None = None
    cors_credentials: bool = False
    cors_exposed_headers: str | None = "ETag"
    cors_max_age: int = 172800
    cors_methods: str = "GET, POST"
    cors_options_success_status: int = 204
    cors_origin: str | tuple[str, ...] = "*"
    cors_preflight_continue: bool = False
    http_options_reject_unauthorized: bool = True
    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: str | None = None
    response_cache_mb: int = 32
    enable_prometheus: bool = True
    enable_status_page: bool = True
    upstream_timeout: int = 10000
    exp_bootstrap_url: str | None = None
    exp_bootstrap_authorization: str | None = None
    exp_server_side_sdk_config_tokens: tuple[str, ...] = ()
    exp_custom_enrichers: tuple[Callable[..., Any], ...] = ()
    # Things noticed while loading that the logger should say once at start (a variable shadowing its
    # UNLEASH_* alias, deprecations).
    warnings: tuple[str, ...] = ()
    # option key -> how the user gave it (`--port`, `PROXY_PORT`, a keyword), for messages after loading
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def named(self, key: str) -> str:
        """The flag, variable or keyword that set `key` (its first variable when it is the default)."""
        return self.sources.get(key) or OPTIONS_BY_KEY[key].label

    @property
    def accepted_client_keys(self) -> tuple[str, ...]:
        return self.client_keys or self.proxy_secrets

    @classmethod
    def load(
        cls,
        options: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        written: Mapping[str, str] | None = None,
    ) -> ProxySettings:
        """Resolve every option from `options` (keywords, CLI flags) and `env`; raise ConfigError naming the
        option as the user wrote it: `written` maps an option key to its flag when `flagproxy proxy` got it
        on the command line; a variable is named by its name, a keyword by itself."""
        env = os.environ if env is None else env
        return _Loader(_normalise_keys(options or {}), env, written or {}).build()


def _normalise_keys(options: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in options.items():
        if name in _NESTED:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{name}: must be an object, got {value!r}")
            for sub, sub_value in value.items():
                key = _NESTED[name].get(sub)
                if key is None:
                    raise ConfigError(f"{name}.{sub}: unknown option")
                if key == "_bootstrap_headers":
                    if not isinstance(sub_value, Mapping):
                        raise ConfigError("expBootstrap.urlHeaders: must be an object")
                    auth = {k.lower(): v for k, v in sub_value.items()}.get("authorization")
                    if auth is not None:
                        out["exp_bootstrap_authorization"] = auth
                    continue
                out[key] = sub_value
            continue
        key = _CAMEL.get(name, name)
        if key not in OPTIONS_BY_KEY:
            raise ConfigError(f"{name}: unknown option")
        out[key] = value
    return out


class _Loader:
    def __init__(self, options: dict[str, Any], env: Mapping[str, str], written: Mapping[str, str]) -> None:
        self.options = options
        self.env = env
        self.written = written
        self.warnings: list[str] = []
        self.sources: dict[str, str] = {}  # option key -> the flag, variable or keyword that gave it

    def named(self, key: str) -> str:
        return self.sources.get(key) or OPTIONS_BY_KEY[key].label

    def build(self) -> ProxySettings:
        values: dict[str, Any] = {}
        for option in OPTIONS:
            values[option.key] = self.resolve(option)
        if not values["service_url"]:
            raise ConfigError("You must specify the serviceUrl option (SERVICE_URL)")
        if not values["service_api_token"]:
            raise ConfigError("You must specify the serviceApiToken option (SERVICE_API_TOKEN)")
        if not values["client_keys"] and not values["proxy_secrets"]:
            raise ConfigError("You must specify the clientKeys option (SERVICE_PROXY_CLIENT_KEYS)")
        if not values["client_keys"]:
            self.warnings.append("proxySecrets / SERVICE_PROXY_SECRETS is deprecated; use clientKeys")
        if not is_http_url(values["service_url"]):
            raise ConfigError(
                f"{self.named('service_url')}: {values['service_url']!r} is not an http:// or https:// URL"
            )
        if values["exp_bootstrap_url"] and not is_http_url(values["exp_bootstrap_url"]):
            raise ConfigError(
                f"{self.named('exp_bootstrap_url')}: {values['exp_bootstrap_url']!r} is not an http(s) URL"
            )
        # The upstream client sends the token as the Authorization header, which a user:password in the URL
        # would contradict (aiohttp refuses every request); said at start, without echoing the password.
        for key, by in (
            ("service_url", "SERVICE_API_TOKEN"),
            ("exp_bootstrap_url", "EXP_BOOTSTRAP_AUTHORIZATION"),
        ):
            if values[key] and has_credentials(values[key]):
                raise ConfigError(
                    f"{self.named(key)}: a user or password in the URL is not supported; the upstream is "
                    f"authorized by {by}"
                )
        self.check_range("port", values, 1, 65535)
        self.check_range("refresh_interval", values, 1, None)
        self.check_range("metrics_interval", values, 0, None)
        self.check_range("metrics_jitter", values, 0, None)
        self.check_range("cors_max_age", values, 0, None)
        self.check_range("response_cache_mb", values, 0, None)
        self.check_range("upstream_timeout", values, 1, None)
        self.check_range("cors_options_success_status", values, 200, 299)
        if not values["service_instance_id"]:
            values["service_instance_id"] = _generated_instance_id()
        if not values["client_keys_header_name"] or not re.fullmatch(
            r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", values["client_keys_header_name"]
        ):
            raise ConfigError(
                f"{self.named('client_keys_header_name')}: {values['client_keys_header_name']!r} is not a "
                "header name"
            )
        values["client_keys_header_name"] = values["client_keys_header_name"].lower()
        values["no_proxy"] = self.env.get("NO_PROXY") or self.env.get("no_proxy") or None
        values["warnings"] = tuple(self.warnings)
        values["sources"] = self.sources
        return ProxySettings(**values)

    def check_range(self, key: str, values: dict[str, Any], low: int, high: int | None) -> None:
        value = values[key]
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ConfigError(f"{self.named(key)}: must be {bound}, got {value}")

    def resolve(self, option: Option) -> Any:
        if option.key in self.options and self.options[option.key] is not None:
            self.sources[option.key] = self.written.get(option.key, option.key)
            return self.from_python(option, self.options[option.key])
        for name in option.env:
            raw = self.env.get(name)
            if raw not in (None, ""):
                shadowed = [a for a in option.aliases if self.env.get(a) not in (None, "")]
                if shadowed:
                    self.warnings.append(f"both {name} and {shadowed[0]} are set; using {name}")
                self.sources[option.key] = name
                return self.from_string(option, name, raw)
        for name in option.aliases:
            raw = self.env.get(name)
            if raw not in (None, ""):
                self.sources[option.key] = name
                return self.from_string(option, name, raw)
        return option.default

    def from_python(self, option: Option, value: Any) -> Any:
        label = self.sources[option.key]
        if isinstance(value, str) and option.kind not in ("object",):
            return self.from_string(option, label, value)
        kind = option.kind
        if kind == "object":
            return value
        if kind == "bool" and isinstance(value, bool):
            return value
        if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind in ("list",) and _is_str_sequence(value):
            return tuple(str(v) for v in value if str(v))
        if kind == "origin" and _is_str_sequence(value):
            return tuple(value)
        if kind == "tags" and isinstance(value, Sequence):
            return tuple(parse_tag(label, t) if isinstance(t, str) else tag_pair(label, t) for t in value)
        if kind == "tags" and isinstance(value, Mapping):
            return tuple((str(k), str(v)) for k, v in value.items())
        if kind == "trust" and isinstance(value, bool):
            return TrustProxy(trust_all=value)
        if kind == "trust" and _is_str_sequence(value):
            return parse_trust(label, ",".join(value))
        if kind == "trust" and isinstance(value, TrustProxy):
            return value
        if kind == "path" and isinstance(value, Sequence):
            return self.check_loaded(option, tuple(value))
        raise ConfigError(f"{label}: invalid value {value!r}")

    def from_string(self, option: Option, label: str, raw: str) -> Any:
        if option.kind == "path":
            return self.load_file(option, label, raw)
        return from_string(option.kind, label, raw)

    def load_file(self, option: Option, label: str, path: str) -> tuple[Any, ...]:
        path = os.path.abspath(path)
        if option.key == "custom_strategies":
            from flagproxy.strategies import load_strategies_file

            try:
                return tuple(load_strategies_file(path))
            except ValueError as exc:
                raise ConfigError(f"{label}: {exc}") from None
        from flagproxy.proxy.enrichers import EnricherFileError, load_enrichers_file

        try:
            return tuple(load_enrichers_file(path))
        except EnricherFileError as exc:
            raise ConfigError(f"{label}: {exc}") from None

    @staticmethod
    def check_loaded(option: Option, items: tuple[Any, ...]) -> tuple[Any, ...]:
        for item in items:
            if option.key == "custom_strategies" and not (
                isinstance(getattr(item, "name", None), str) and callable(getattr(item, "is_enabled", None))
            ):
                raise ConfigError(f"customStrategies: {item!r} is not a Strategy (name, is_enabled)")
            if option.key == "exp_custom_enrichers" and not callable(item):
                raise ConfigError(f"expCustomEnrichers: {item!r} is not callable")
        return items


def _is_str_sequence(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes)
        and all(isinstance(v, str) for v in value)
    )


def _generated_instance_id() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user name in some containers; the Node proxy falls back the same way
        user = "generated"
    return f"{user}-{socket.gethostname()}"
