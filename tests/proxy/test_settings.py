"""ProxySettings: every source of an option, its parsing, and the one-line errors."""

from __future__ import annotations

import ipaddress

import pytest

from flagproxy.http.trust import TrustProxy
from flagproxy.options import ConfigError, sanitise_base_path
from flagproxy.proxy.settings import OPTIONS, ProxySettings
from flagproxy.strategies import Strategy

REQUIRED = {"SERVICE_URL": "http://up/api", "SERVICE_API_TOKEN": "t", "SERVICE_PROXY_CLIENT_KEYS": "k"}


def load(env=None, **options):
    return ProxySettings.load(options, env={**REQUIRED, **(env or {})})


def test_defaults_are_spec_md_defaults():
    s = load()
    assert (s.port, s.proxy_base_path, s.service_app_name) == (3000, "", "service-proxy")
    assert (s.refresh_interval, s.metrics_interval, s.metrics_jitter) == (5000, 30000, 0)
    assert (s.log_level, s.use_json_logger, s.client_keys_header_name) == ("warn", False, "authorization")
    assert (s.enable_oas, s.enable_all_endpoint, s.http_options_reject_unauthorized) == (False, False, True)
    assert (s.cors_origin, s.cors_methods, s.cors_exposed_headers) == ("*", "GET, POST", "ETag")
    assert (s.cors_max_age, s.cors_options_success_status, s.cors_credentials) == (172800, 204, False)
    assert s.cors_allowed_headers is None and s.cors_preflight_continue is False
    assert s.trust_proxy == TrustProxy() and not s.trust_proxy.enabled
    assert s.environment is None and s.tags == () and s.custom_strategies == ()
    assert s.service_instance_id  # generated
    assert s.warnings == ()


def test_every_table_option_has_a_keyword():
    fields = set(ProxySettings.__dataclass_fields__)
    assert {o.key for o in OPTIONS} <= fields


def test_env_values_are_parsed():
    s = load(
        {
            "SERVICE_PROXY_CLIENT_KEYS": "a, b,c",
            "PORT": "4000",
            "PROXY_BASE_PATH": "base/path/",
            "SERVICE_FETCH_INTERVAL": "250",
            "SERVICE_TAGS": "simple:proxy, demo:test, a:b:c",
            "TRUST_PROXY": "127.0.0.1, 10.0.0.0/8",
            "ENABLE_OAS": "TRUE",
            "JSON_LOGGER": "false",
            "LOG_LEVEL": "Debug",
            "CORS_ORIGIN": "https://a.example, https://b.example",
            "CLIENT_KEY_HEADER_NAME": "X-Key",
            "EXP_SERVER_SIDE_SDK_CONFIG_TOKENS": "s1,s2",
            "HTTP_OPTIONS_REJECT_UNAUTHORIZED": "false",
        }
    )
    assert s.client_keys == ("a", "b", "c")
    assert (s.port, s.proxy_base_path, s.refresh_interval) == (4000, "/base/path", 250)
    assert s.tags == (("simple", "proxy"), ("demo", "test"), ("a", "b:c"))
    assert s.trust_proxy.networks == (
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("10.0.0.0/8"),
    )
    assert (s.enable_oas, s.use_json_logger, s.log_level) == (True, False, "debug")
    assert s.cors_origin == ("https://a.example", "https://b.example")
    assert s.client_keys_header_name == "x-key"
    assert s.exp_server_side_sdk_config_tokens == ("s1", "s2")
    assert s.http_options_reject_unauthorized is False


def test_port_falls_back_to_proxy_port():
    assert load({"PROXY_PORT": "5000"}).port == 5000
    assert load({"PROXY_PORT": "5000", "PORT": "6000"}).port == 6000


def test_unleash_aliases_and_d1():
    env = {
        "UNLEASH_URL": "http://node/api",
        "UNLEASH_API_TOKEN": "x",
        "UNLEASH_PROXY_CLIENT_KEYS": "nk",
        "UNLEASH_APP_NAME": "node-app",
        "UNLEASH_ENVIRONMENT": "prod",
    }
    s = ProxySettings.load({}, env=env)
    assert (s.service_url, s.service_api_token, s.client_keys) == ("http://node/api", "x", ("nk",))
    assert (s.service_app_name, s.environment) == ("node-app", "prod")
    both = ProxySettings.load({}, env={**env, **REQUIRED})
    assert both.service_url == "http://up/api"
    assert both.warnings.count("both SERVICE_URL and UNLEASH_URL are set; using SERVICE_URL") == 1


def test_options_win_over_env_and_accept_spec_names():
    s = ProxySettings.load(
        {
            "serviceUrl": "http://kw/api",
            "clientKeys": ["kw"],
            "refreshInterval": 10,
            "cors": {"origin": ["https://a"], "maxAge": 5, "credentials": True},
            "httpOptions": {"rejectUnauthorized": False},
            "expBootstrap": {"url": "http://boot/x.json", "urlHeaders": {"Authorization": "b"}},
            "expServerSideSdkConfig": {"tokens": ["st"]},
            "trustProxy": True,
            "tags": [{"name": "n", "value": "v"}],
        },
        env=REQUIRED,
    )
    assert (s.service_url, s.client_keys, s.refresh_interval) == ("http://kw/api", ("kw",), 10)
    assert (s.cors_origin, s.cors_max_age, s.cors_credentials) == (("https://a",), 5, True)
    assert s.http_options_reject_unauthorized is False
    assert (s.exp_bootstrap_url, s.exp_bootstrap_authorization) == ("http://boot/x.json", "b")
    assert s.exp_server_side_sdk_config_tokens == ("st",)
    assert s.trust_proxy.trust_all and s.tags == (("n", "v"),)


def test_proxy_secrets_is_a_deprecated_alias():
    s = ProxySettings.load(
        {}, env={"SERVICE_URL": "http://u", "SERVICE_API_TOKEN": "t", "SERVICE_PROXY_SECRETS": "old"}
    )
    assert s.accepted_client_keys == ("old",)
    assert any("deprecated" in w for w in s.warnings)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("base/path", "/base/path"),
        ("base/path/", "/base/path"),
        ("   base/path   ", "/base/path"),
        ("/x", "/x"),
        ("", ""),
        ("   ", ""),
    ],
)
def test_base_path_sanitising(raw, expected):
    assert sanitise_base_path(raw) == expected


@pytest.mark.parametrize(
    ("env", "options", "message"),
    [
        ({"SERVICE_METRICS_INTERVAL": "30s"}, {}, "SERVICE_METRICS_INTERVAL: '30s' is not a whole number"),
        ({"SERVICE_METRICS_JITTER": "-1"}, {}, "SERVICE_METRICS_JITTER: '-1' is not a whole number"),
        (
            {"CORS_OPTIONS_SUCCESS_STATUS": "404"},
            {},
            "CORS_OPTIONS_SUCCESS_STATUS: must be between 200 and 299",
        ),
        (
            {"CLIENT_KEY_HEADER_NAME": "bad header"},
            {},
            "CLIENT_KEY_HEADER_NAME: 'bad header' is not a header name",
        ),
        ({"EXP_BOOTSTRAP_URL": "file:///x"}, {}, "EXP_BOOTSTRAP_URL"),
        ({"TRUST_PROXY": "1"}, {}, "TRUST_PROXY: '1' is a number; hop counts are not supported"),
        ({"SERVICE_URL": "http://"}, {}, "SERVICE_URL: 'http://' is not an http:// or https:// URL"),
        (
            {"SERVICE_URL": "http://admin:s3cret@up/api"},
            {},
            "SERVICE_URL: a user or password in the URL is not supported; the upstream is authorized by "
            "SERVICE_API_TOKEN",
        ),
        (
            {"SERVICE_URL": "http://up:api/x"},
            {},
            "SERVICE_URL: 'http://up:api/x' is not an http:// or https://",
        ),
        (
            {"EXP_BOOTSTRAP_URL": "https:///x.json"},
            {},
            "EXP_BOOTSTRAP_URL: 'https:///x.json' is not an http(s)",
        ),
        (
            {"HTTPS_PROXY": "socks5://p:1080"},
            {},
            "HTTPS_PROXY: 'socks5://p:1080' is not an http:// or https://",
        ),
        ({"http_proxy": "http://"}, {}, "http_proxy: 'http://' is not an http:// or https://"),
        ({}, {"nonsense": 1}, "nonsense: unknown option"),
        ({}, {"cors": {"nope": 1}}, "cors.nope: unknown option"),
        ({}, {"port": True}, "port: invalid value True"),
        ({}, {"customStrategies": [object()]}, "is not a Strategy"),
        ({}, {"expCustomEnrichers": [1]}, "is not callable"),
    ],
)
def test_bad_values_name_the_option(env, options, message):
    with pytest.raises(ConfigError, match=None) as raised:
        load(env, **options)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert "s3cret" not in str(raised.value)  # a password in a URL is never echoed


def test_custom_strategies_as_objects():
    class Gold(Strategy):
        name = "gold"

        def is_enabled(self, parameters, context):
            return True

    assert load(custom_strategies=[Gold()]).custom_strategies[0].name == "gold"


def test_the_configuration_reference_lists_every_option():
    from pathlib import Path

    reference = (Path(__file__).resolve().parents[2] / "docs" / "proxy.md").read_text()
    for option in OPTIONS:
        assert f"`{option.key}`" in reference, option.key
        for name in (*option.env, *option.aliases):
            assert f"`{name}`" in reference, name


def test_a_proxy_address_without_a_scheme_is_http():
    assert load({"HTTP_PROXY": "proxy.corp:3128"}).http_proxy == "http://proxy.corp:3128"
    assert load({"HTTPS_PROXY": "https://proxy.corp"}).https_proxy == "https://proxy.corp"
