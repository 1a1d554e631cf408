"""SPEC.md's two configuration tables, option by option: a keyword (snake_case and SPEC.md's camelCase or
nested name), the SPEC.md environment variable, the Node proxy's UNLEASH_* alias where it has one, the
default, the --help entry and the row in docs/proxy.md.

The tables are typed here from SPEC.md ("Configuration options" and the experimental table);
`test_the_copy_matches_spec_md` checks them against data/spec-configuration.md, that section of SPEC.md
copied verbatim into the repository so the check runs in every clone (SPEC.md is not part of it).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flagproxy.http.trust import TrustProxy
from flagproxy.proxy.cli import build_parser
from flagproxy.proxy.settings import OPTIONS, OPTIONS_BY_KEY, ProxySettings

REPO = Path(__file__).resolve().parents[2]
SPEC_MD = Path(__file__).resolve().parent / "data" / "spec-configuration.md"

# (SPEC.md option, SPEC.md env names, SPEC.md default) for every row of both tables.
SPEC_TABLE: list[tuple[str, tuple[str, ...], str]] = [
    ("serviceUrl", ("SERVICE_URL",), "none"),
    ("serviceApiToken", ("SERVICE_API_TOKEN",), "none"),
    ("clientKeys", ("SERVICE_PROXY_CLIENT_KEYS",), "none"),
    ("proxySecrets", ("SERVICE_PROXY_SECRETS",), "none"),
    ("(none)", ("PORT", "PROXY_PORT"), "3000"),
    ("proxyBasePath", ("PROXY_BASE_PATH",), "empty string"),
    ("serviceAppName", ("SERVICE_APP_NAME",), "`service-proxy`"),
    ("serviceInstanceId", ("SERVICE_INSTANCE_ID",), "generated"),
    ("refreshInterval", ("SERVICE_FETCH_INTERVAL",), "5000"),
    ("metricsInterval", ("SERVICE_METRICS_INTERVAL",), "30000"),
    ("metricsJitter", ("SERVICE_METRICS_JITTER",), "0"),
    ("environment", ("SERVICE_ENVIRONMENT",), "undefined"),
    ("projectName", ("SERVICE_PROJECT_NAME",), "undefined"),
    ("logger", (), "SimpleLogger"),
    ("useJsonLogger", ("JSON_LOGGER",), "false"),
    ("logLevel", ("LOG_LEVEL",), "`warn`"),
    ("customStrategies", ("SERVICE_CUSTOM_STRATEGIES_FILE",), "empty list"),
    ("trustProxy", ("TRUST_PROXY",), "false"),
    ("namePrefix", ("SERVICE_NAME_PREFIX",), "undefined"),
    ("tags", ("SERVICE_TAGS",), "undefined"),
    ("clientKeysHeaderName", ("CLIENT_KEY_HEADER_NAME",), "`authorization`"),
    ("storageProvider", (), "undefined"),
    ("enableOAS", ("ENABLE_OAS",), "false"),
    ("enableAllEndpoint", ("ENABLE_ALL_ENDPOINT",), "false"),
    ("cors", (), "none"),
    ("cors.allowedHeaders", ("CORS_ALLOWED_HEADERS",), "none"),
    ("cors.credentials", ("CORS_CREDENTIALS",), "false"),
    ("cors.exposedHeaders", ("CORS_EXPOSED_HEADERS",), "`ETag`"),
    ("cors.maxAge", ("CORS_MAX_AGE",), "172800"),
    ("cors.methods", ("CORS_METHODS",), "`GET, POST`"),
    ("cors.optionsSuccessStatus", ("CORS_OPTIONS_SUCCESS_STATUS",), "204"),
    ("cors.origin", ("CORS_ORIGIN",), "`*`"),
    ("cors.preflightContinue", ("CORS_PREFLIGHT_CONTINUE",), "false"),
    ("httpOptions.rejectUnauthorized", ("HTTP_OPTIONS_REJECT_UNAUTHORIZED",), "true"),
    ("(none)", ("HTTP_PROXY",), "none"),
    ("(none)", ("HTTPS_PROXY",), "none"),
    # experimental
    ("expBootstrap", (), "none"),
    ("expBootstrap.url", ("EXP_BOOTSTRAP_URL",), "none"),
    ("expBootstrap.urlHeaders.Authorization", ("EXP_BOOTSTRAP_AUTHORIZATION",), "none"),
    ("expServerSideSdkConfig.tokens", ("EXP_SERVER_SIDE_SDK_CONFIG_TOKENS",), "none"),
    ("expCustomEnrichers", ("EXP_CUSTOM_ENRICHERS_FILE",), "empty list"),
]

# The Node proxy's names for SPEC.md's SERVICE_* variables (proxy-behaviour.md, the mapping at the top).
NODE_ALIASES = {
    "SERVICE_URL": "UNLEASH_URL",
    "SERVICE_API_TOKEN": "UNLEASH_API_TOKEN",
    "SERVICE_PROXY_CLIENT_KEYS": "UNLEASH_PROXY_CLIENT_KEYS",
    "SERVICE_PROXY_SECRETS": "UNLEASH_PROXY_SECRETS",
    "SERVICE_APP_NAME": "UNLEASH_APP_NAME",
    "SERVICE_INSTANCE_ID": "UNLEASH_INSTANCE_ID",
    "SERVICE_FETCH_INTERVAL": "UNLEASH_FETCH_INTERVAL",
    "SERVICE_METRICS_INTERVAL": "UNLEASH_METRICS_INTERVAL",
    "SERVICE_METRICS_JITTER": "UNLEASH_METRICS_JITTER",
    "SERVICE_ENVIRONMENT": "UNLEASH_ENVIRONMENT",
    "SERVICE_PROJECT_NAME": "UNLEASH_PROJECT_NAME",
    "SERVICE_CUSTOM_STRATEGIES_FILE": "UNLEASH_CUSTOM_STRATEGIES_FILE",
    "SERVICE_NAME_PREFIX": "UNLEASH_NAME_PREFIX",
    "SERVICE_TAGS": "UNLEASH_TAGS",
}

# Objects of SPEC.md with no env variable of their own: accepted as nested keyword objects.
NESTED_OBJECTS = {"cors", "expBootstrap"}

REQUIRED = {"SERVICE_URL": "http://up/api", "SERVICE_API_TOKEN": "t", "SERVICE_PROXY_CLIENT_KEYS": "k"}


def _files(tmp_path: Path) -> tuple[str, str]:
    strategies = tmp_path / "strategies.py"
    strategies.write_text(
        "from flagproxy.strategies import Strategy\n"
        "class Gold(Strategy):\n"
        "    name = 'gold'\n"
        "    def is_enabled(self, parameters, context):\n"
        "        return True\n"
        "strategies = [Gold()]\n"
    )
    enrichers = tmp_path / "enrichers.py"
    enrichers.write_text("def tag(ctx):\n    return ctx\nenrichers = [tag]\n")
    return str(strategies), str(enrichers)


def _names(items: Any) -> list[str]:
    return [getattr(item, "name", None) or item.__name__ for item in items]


# key → (a string value that is not the default, a check of the parsed setting)
Sample = tuple[str, Callable[[Any], bool]]


def samples(tmp_path: Path) -> dict[str, Sample]:
    strategies, enrichers = _files(tmp_path)
    return {
        "service_url": ("http://other:4242/api", lambda v: v == "http://other:4242/api"),
        "service_api_token": ("token-2", lambda v: v == "token-2"),
        "client_keys": ("a, b", lambda v: v == ("a", "b")),
        "proxy_secrets": ("s1,s2", lambda v: v == ("s1", "s2")),
        "port": ("4321", lambda v: v == 4321),
        "host": ("127.0.0.1", lambda v: v == "127.0.0.1"),
        "proxy_base_path": ("base/path/", lambda v: v == "/base/path"),
        "service_app_name": ("my-app", lambda v: v == "my-app"),
        "service_instance_id": ("instance-9", lambda v: v == "instance-9"),
        "refresh_interval": ("250", lambda v: v == 250),
        "streaming": ("true", lambda v: v is True),
        "metrics_interval": ("0", lambda v: v == 0),
        "metrics_jitter": ("100", lambda v: v == 100),
        "environment": ("production", lambda v: v == "production"),
        "project_name": ("proj", lambda v: v == "proj"),
        "use_json_logger": ("true", lambda v: v is True),
        "log_level": ("debug", lambda v: v == "debug"),
        "custom_strategies": (strategies, lambda v: _names(v) == ["gold"]),
        "trust_proxy": (
            "10.0.0.0/8",
            lambda v: v == TrustProxy(networks=(ipaddress.ip_network("10.0.0.0/8"),)),
        ),
        "name_prefix": ("c-", lambda v: v == "c-"),
        "tags": ("a:b", lambda v: v == (("a", "b"),)),
        "client_keys_header_name": ("X-Key", lambda v: v == "x-key"),
        "enable_oas": ("true", lambda v: v is True),
        "enable_all_endpoint": ("true", lambda v: v is True),
        "cors_allowed_headers": ("authorization", lambda v: v == "authorization"),
        "cors_credentials": ("true", lambda v: v is True),
        "cors_exposed_headers": ("ETag, X-A", lambda v: v == "ETag, X-A"),
        "cors_max_age": ("60", lambda v: v == 60),
        "cors_methods": ("GET", lambda v: v == "GET"),
        "cors_options_success_status": ("200", lambda v: v == 200),
        "cors_origin": ("https://a.example", lambda v: v == "https://a.example"),
        "cors_preflight_continue": ("true", lambda v: v is True),
        "http_options_reject_unauthorized": ("false", lambda v: v is False),
        "http_proxy": ("http://proxy:3128", lambda v: v == "http://proxy:3128"),
        "https_proxy": ("http://proxy:3129", lambda v: v == "http://proxy:3129"),
        "response_cache_mb": ("8", lambda v: v == 8),
        "enable_prometheus": ("false", lambda v: v is False),
        "enable_status_page": ("false", lambda v: v is False),
        "upstream_timeout": ("2500", lambda v: v == 2500),
        "exp_bootstrap_url": ("http://boot/features.json", lambda v: v == "http://boot/features.json"),
        "exp_bootstrap_authorization": ("boot-secret", lambda v: v == "boot-secret"),
        "exp_server_side_sdk_config_tokens": ("t1,t2", lambda v: v == ("t1", "t2")),
        "exp_custom_enrichers": (enrichers, lambda v: _names(v) == ["tag"]),
    }


ENV_OPTIONS = [o for o in OPTIONS if o.env]


def _option_for_spec(spec: str, env: tuple[str, ...]):
    if env:
        found = [o for o in OPTIONS if env[0] in o.env]
        assert len(found) == 1, env
        return found[0]
    return next((o for o in OPTIONS if o.spec == spec), None)


@pytest.mark.parametrize(("spec", "env", "default"), SPEC_TABLE, ids=[f"{s}-{e}" for s, e, _ in SPEC_TABLE])
def test_every_spec_row_is_an_option_with_its_env_names_and_alias(spec, env, default):
    if spec in NESTED_OBJECTS:
        # An object row: each of its fields is an option of its own, given nested as a keyword.
        assert any(o.spec.startswith(spec + ".") for o in OPTIONS)
        return
    option = _option_for_spec(spec, env)
    assert option is not None, spec
    if spec != "(none)":
        assert option.spec == spec
    assert set(env) <= set(option.env)
    for name in env:
        if name in NODE_ALIASES:
            assert NODE_ALIASES[name] in option.aliases
    assert option.key in ProxySettings.__dataclass_fields__


def test_every_option_has_a_sample_here(tmp_path):
    assert set(samples(tmp_path)) == {o.key for o in OPTIONS if o.kind != "object"}


@pytest.mark.parametrize("option", ENV_OPTIONS, ids=[o.key for o in ENV_OPTIONS])
def test_each_env_name_and_alias_sets_the_option(option, tmp_path):
    raw, check = samples(tmp_path)[option.key]
    assert not check(getattr(load_required(), option.key)), "the sample must differ from the default"
    # The SPEC.md names of this option are left out, so that each alias is what is read.
    others = {k: v for k, v in REQUIRED.items() if k not in option.env}
    for name in (*option.env, *option.aliases):
        settings = ProxySettings.load({}, env={**others, name: raw})
        assert check(getattr(settings, option.key)), (name, getattr(settings, option.key))


def load_required(**options: Any) -> ProxySettings:
    return ProxySettings.load(options, env=REQUIRED)


def _camel_keyword(spec: str, value: Any) -> dict[str, Any]:
    """SPEC.md's name as a keyword: `refreshInterval=…`, or nested: `cors={"origin": …}`."""
    head, _, rest = spec.partition(".")
    if not rest:
        return {head: value}
    nested: Any = value
    for part in reversed(rest.split(".")):
        nested = {part: nested}
    return {head: nested}


KEYWORD_OPTIONS = [o for o in OPTIONS if o.kind != "object"]


@pytest.mark.parametrize("option", KEYWORD_OPTIONS, ids=[o.key for o in KEYWORD_OPTIONS])
def test_each_option_is_a_keyword_by_both_names(option, tmp_path):
    raw, check = samples(tmp_path)[option.key]
    assert check(getattr(load_required(**{option.key: raw}), option.key))
    if option.spec != "(none)":
        settings = ProxySettings.load(_camel_keyword(option.spec, raw), env=REQUIRED)
        assert check(getattr(settings, option.key))
        flat = ProxySettings.load({option.spec: raw}, env=REQUIRED)  # "cors.origin" works flat too
        assert check(getattr(flat, option.key))


def test_keywords_win_over_env_and_env_over_aliases():
    env = {**REQUIRED, "SERVICE_APP_NAME": "from-env", "UNLEASH_APP_NAME": "from-alias"}
    assert ProxySettings.load({}, env=env).service_app_name == "from-env"
    assert ProxySettings.load({"serviceAppName": "kw"}, env=env).service_app_name == "kw"
    aliased = ProxySettings.load({}, env={**REQUIRED, "UNLEASH_APP_NAME": "from-alias"})
    assert aliased.service_app_name == "from-alias"


def test_keyword_only_objects():
    class Logger:
        def debug(self, *a): ...
        def info(self, *a): ...
        def warn(self, *a): ...
        def error(self, *a): ...
        def fatal(self, *a): ...

    class Storage:
        def get(self, key): ...
        def set(self, key, payload): ...

    logger, storage = Logger(), Storage()
    settings = ProxySettings.load({"logger": logger, "storageProvider": storage}, env=REQUIRED)
    assert settings.logger is logger and settings.storage_provider is storage


SPEC_DEFAULTS = {
    "port": 3000,
    "proxy_base_path": "",
    "service_app_name": "service-proxy",
    "refresh_interval": 5000,
    "metrics_interval": 30000,
    "metrics_jitter": 0,
    "environment": None,
    "project_name": None,
    "logger": None,
    "use_json_logger": False,
    "log_level": "warn",
    "custom_strategies": (),
    "trust_proxy": TrustProxy(),
    "name_prefix": None,
    "tags": (),
    "client_keys_header_name": "authorization",
    "storage_provider": None,
    "enable_oas": False,
    "enable_all_endpoint": False,
    "cors_allowed_headers": None,
    "cors_credentials": False,
    "cors_exposed_headers": "ETag",
    "cors_max_age": 172800,
    "cors_methods": "GET, POST",
    "cors_options_success_status": 204,
    "cors_origin": "*",
    "cors_preflight_continue": False,
    "http_options_reject_unauthorized": True,
    "http_proxy": None,
    "https_proxy": None,
    "exp_bootstrap_url": None,
    "exp_bootstrap_authorization": None,
    "exp_server_side_sdk_config_tokens": (),
    "exp_custom_enrichers": (),
}


def test_defaults_are_spec_md_defaults():
    settings = load_required()
    assert {key: getattr(settings, key) for key in SPEC_DEFAULTS} == SPEC_DEFAULTS
    assert settings.service_instance_id  # "generated"
    for key, value in SPEC_DEFAULTS.items():
        assert OPTIONS_BY_KEY[key].default == value, key


def _help_entries() -> dict[str, str]:
    """--help, one entry per flag (argparse's wrapping undone; set COLUMNS wide so it breaks no words)."""
    text = build_parser().format_help()
    flat = " ".join(text.split())
    entries = {}
    for option in OPTIONS:
        if option.env:
            flag = "--" + option.key.replace("_", "-")
            start = flat.index(f"{flag} ", flat.index("options:"))
            end = flat.find(" --", start + len(flag) + 1)
            entries[option.key] = flat[start:end]
        else:
            start = flat.index(f"{option.key} ({option.spec})")
            entries[option.key] = flat[start : flat.index("]", start) + 1]
    return entries


@pytest.mark.parametrize("option", OPTIONS, ids=[o.key for o in OPTIONS])
def test_help_names_the_option_its_variables_and_its_default(option, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")
    entry = _help_entries()[option.key]
    assert f"default: {option.default_text()}]" in entry
    for name in (*option.env, *option.aliases):
        assert name in entry
    if option.spec != "(none)":
        assert option.spec in entry


def _docs_rows() -> dict[str, list[str]]:
    reference = (REPO / "docs" / "proxy.md").read_text()
    rows = {}
    for line in reference.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[1].startswith("`"):
            rows[cells[1].strip("`")] = cells
    return rows


@pytest.mark.parametrize("option", OPTIONS, ids=[o.key for o in OPTIONS])
def test_docs_table_row_has_the_names_and_the_default(option):
    rows = _docs_rows()
    assert option.key in rows, option.key
    spec, _, env, alias, flag, default, _ = rows[option.key]
    assert spec == ("(none)" if option.spec == "(none)" else f"`{option.spec}`")
    for name in option.env:
        assert f"`{name}`" in env
    for name in option.aliases:
        assert f"`{name}`" in alias
    if option.env:
        assert flag == "`--" + option.key.replace("_", "-") + "`"
    assert default == option.default_text()


def test_the_copy_matches_spec_md():
    found = []
    for line in SPEC_MD.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or set(cells[0]) <= {"-"} or cells[0] == "Option":
            continue
        option, env, default = cells[0], cells[1], cells[2]
        envs = tuple(re.findall(r"[A-Z][A-Z0-9_]{2,}", env)) if env != "(none)" else ()
        found.append((option, envs, default))
    # Both ways: a typo in the typed table and an option it misses both fail.
    assert found == SPEC_TABLE
