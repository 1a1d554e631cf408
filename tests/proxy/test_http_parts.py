"""The small parts of the HTTP layer: ETags, keys, X-Forwarded-For, CORS, logging, enrichers, OpenAPI."""

from __future__ import annotations

import asyncio
import base64
import hmac
import io
import json
import logging
import re
import subprocess
import sys

import pytest
import xxhash

from flagproxy.http.cors import CorsPolicy
from flagproxy.http.etag import none_match, weak_etag
from flagproxy.http.logger import LoggerAdapter, SimpleLogger, make_logger
from flagproxy.http.trust import TrustProxy, client_address
from flagproxy.proxy.auth import KeyRing, accepts_either
from flagproxy.proxy.enrichers import EnricherError, EnricherFileError, enrich, load_enrichers_file
from flagproxy.proxy.openapi import build_openapi
from flagproxy.proxy.settings import ProxySettings
from tests.etags import express_etag, xxh3_etag


# Express's ETags as the Node proxy sends them (proxy-behaviour.md section 8 and its transcripts): they check
# express_etag, which the HTTP tests use to prove our bodies are the Node proxy's bytes.
@pytest.mark.parametrize(
    ("body", "etag"),
    [
        (b"ok", 'W/"2-eoX0dku9ba8cNUXvu/DyeabcC+s"'),
        (b"Unauthorized", 'W/"c-dAuDFQrdjS3hezqxDTNgW7AOlYk"'),
        (b"OK", 'W/"2-nOO9QiTIwXgNtWtBJezz8kv3SLc"'),
    ],
)
def test_express_etag_is_the_node_proxys(body, etag):
    assert express_etag(body) == etag


# XXH3-128 with the default seed, big-endian (canonical) digest, base64 without padding; the empty body's is
# xxHash's own test vector 99aa06d3014798d8 6001c324468d497f. A fixed table catches a change of algorithm,
# seed or encoding, which would make every client revalidate once.
@pytest.mark.parametrize(
    ("body", "etag"),
    [
        (b"", 'W/"0-maoG0wFHmNhgAcMkRo1Jfw"'),
        (b"ok", 'W/"2-cH2lRsqTScc4r0z+0lqCIg"'),
    ],
)
def test_weak_etag_known_values(body, etag):
    assert weak_etag(body) == etag
    assert xxh3_etag(body) == etag  # the HTTP tests' oracle (tests/etags.py), pinned to the same values


@pytest.mark.parametrize("body", [b"", b"ok", b"OK", b'{"toggles":[]}', bytes(range(256)) * 600])
def test_the_http_tests_oracle_agrees_with_weak_etag(body):
    assert xxh3_etag(body) == weak_etag(body)


BODIES = [b"", b"ok", b"OK", b"Unauthorized", b'{"toggles":[]}', bytes(range(256)) * 600]


@pytest.mark.parametrize("body", BODIES, ids=lambda b: f"{len(b)}-bytes")
def test_weak_etag_format(body):
    etag = weak_etag(body)
    match = re.fullmatch(r'W/"([0-9a-f]+)-([A-Za-z0-9+/]{22})"', etag)
    assert match, etag  # weak, lower-case hex length, 22 base64 characters (16 bytes) without padding
    assert int(match.group(1), 16) == len(body)
    assert base64.b64decode(match.group(2) + "==") == xxhash.xxh3_128_digest(body)


def test_weak_etag_is_deterministic_and_tells_bodies_apart():
    assert [weak_etag(bytes(b)) for b in BODIES] == [weak_etag(b) for b in BODIES]  # fresh copies, same tags
    assert weak_etag(b"ok") != express_etag(b"ok")  # not the Node proxy's any more
    assert len({weak_etag(b) for b in BODIES}) == len(BODIES)
    # Same length, one bit apart: only the hash can tell them apart, and it does.
    base = b'{"enabled":true}'
    flipped = [bytes([*base[: i // 8], base[i // 8] ^ (1 << i % 8), *base[i // 8 + 1 :]]) for i in range(128)]
    assert len({base, *flipped}) == 129 and {len(b) for b in flipped} == {len(base)}
    assert len({weak_etag(b) for b in (base, *flipped)}) == 129


def test_weak_etag_is_the_same_in_another_process():
    code = "from flagproxy.http.etag import weak_etag; print(weak_etag(b'ok'), weak_etag(bytes(range(256))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [weak_etag(b"ok"), weak_etag(bytes(range(256)))]


def test_none_match():
    etag = 'W/"2-abc"'
    assert none_match("*", etag) and none_match('W/"2-abc"', etag) and none_match('"2-abc"', etag)
    assert none_match('"x", W/"2-abc"', etag)
    assert not none_match(None, etag) and not none_match('"x"', etag) and not none_match("", etag)


def test_key_ring():
    ring = KeyRing(["one", "two", ""])
    assert ring.accepts("two") and not ring.accepts("tw") and not ring.accepts("") and not ring.accepts(None)
    assert not ring.accepts("ünïcode")
    assert not KeyRing([])


def test_keys_are_compared_in_constant_time(monkeypatch):
    # A unit test, not an HTTP one: timing cannot be asserted reliably, so what makes it constant is checked
    # instead, and that needs hmac.compare_digest replaced in the process that compares. Every configured
    # key is compared on every check, whichever key (if any) matches; tests/http/test_service_routes.py
    # proves through a real proxy that client keys and server-side SDK tokens are accepted where they belong.
    compared: list[bytes] = []
    original = hmac.compare_digest

    def recording(a, b):
        compared.append(a)
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    clients, servers = KeyRing(["key-one", "key-two", "key-three"]), KeyRing(["server-token"])
    for presented, accepted in [("key-one", True), ("key-thr", False), ("nope", False), ("key-three", True)]:
        compared.clear()
        assert clients.accepts(presented) is accepted
        assert sorted(compared) == [b"key-one", b"key-three", b"key-two"], presented
    for presented, accepted in [("key-one", True), ("server-token", True), ("nope", False)]:
        compared.clear()
        assert accepts_either(presented, clients, servers) is accepted
        # Both kinds, always.
        assert sorted(compared) == [b"key-one", b"key-three", b"key-two", b"server-token"]


@pytest.mark.parametrize(
    ("trust", "forwarded", "expected"),
    [
        (TrustProxy(), "1.1.1.1", "127.0.0.1"),
        (TrustProxy(trust_all=True), "1.1.1.1, 2.2.2.2", "1.1.1.1"),
        (TrustProxy(trust_all=True), " , ", "127.0.0.1"),
        (
            ProxySettings.load(
                {"trust_proxy": "loopback"},
                env={"SERVICE_URL": "http://x", "SERVICE_API_TOKEN": "t", "SERVICE_PROXY_CLIENT_KEYS": "k"},
            ).trust_proxy,
            "1.1.1.1, 10.0.0.1",
            "10.0.0.1",
        ),
    ],
)
def test_client_address(trust, forwarded, expected):
    assert client_address("127.0.0.1", forwarded, trust) == expected


def test_trust_of_mapped_ipv4_and_garbage():
    trust = TrustProxy(networks=(__import__("ipaddress").ip_network("10.0.0.0/8"),))
    assert trust.trusts("::ffff:10.1.2.3") and not trust.trusts("garbage") and not trust.trusts("11.0.0.1")


def _settings(**options):
    return ProxySettings.load(
        options, env={"SERVICE_URL": "http://x", "SERVICE_API_TOKEN": "t", "SERVICE_PROXY_CLIENT_KEYS": "k"}
    )


def test_cors_default_headers_are_shared_constants():
    policy = CorsPolicy(_settings())
    assert policy.actual("https://x") is policy.actual(None)
    assert policy.actual(None) == {
        "Access-Control-Allow-Origin": "*",
        "Access-Control-Expose-Headers": "ETag",
    }


def test_cors_preflight_with_everything_set():
    policy = CorsPolicy(
        _settings(
            cors_origin="https://a, https://b",
            cors_credentials=True,
            cors_allowed_headers="",
            cors_max_age=0,
            cors_exposed_headers="",
        )
    )
    assert policy.preflight("https://b", "x-y") == {
        "Access-Control-Allow-Origin": "https://b",
        "Access-Control-Allow-Credentials": "true",
        "Access-Control-Allow-Methods": "GET, POST",
        "Vary": "Origin",
    }


def test_simple_logger_text_and_json():
    text, js = io.StringIO(), io.StringIO()
    SimpleLogger("info", stream=text).info("ready", 1)
    SimpleLogger("info", stream=text).debug("hidden")
    SimpleLogger("warn", json=True, stream=js).error("bad", {"a": 1})
    assert text.getvalue() == "INFO: ready 1\n"
    assert json.loads(js.getvalue()) == {"level": "error", "message": "bad", "args": [{"a": 1}]}


def test_logger_adapter_over_stdlib_and_broken_loggers(caplog):
    std = logging.getLogger("flagproxy.test")
    with caplog.at_level(logging.WARNING, logger="flagproxy.test"):
        LoggerAdapter(std).warn("careful")
        LoggerAdapter(std).fatal("dead")
    assert [r.levelname for r in caplog.records] == ["WARNING", "CRITICAL"]

    class Broken:
        def error(self, *args):
            raise RuntimeError("logger down")

    LoggerAdapter(Broken()).error("x")  # swallowed
    LoggerAdapter(Broken()).info("no such method")
    adapter = make_logger(None, "warn", False)
    assert make_logger(adapter, "debug", True) is adapter


def test_enrichers(tmp_path):
    async def upper(ctx):
        ctx["userId"] = ctx["userId"].upper()
        return ctx

    assert asyncio.run(enrich({"userId": "a"}, [upper, lambda c: {**c, "x": "1"}])) == {
        "userId": "A",
        "x": "1",
    }
    with pytest.raises(EnricherError):
        asyncio.run(enrich({}, [lambda c: None]))
    with pytest.raises(EnricherError):
        asyncio.run(enrich({}, [lambda c: 1 / 0]))
    bad = tmp_path / "bad.py"
    for content, message in [
        ("enrichers = 3", "must define"),
        ("enrichers = [3]", "not callable"),
        ("raise ValueError('x')", "failed to load"),
    ]:
        bad.write_text(content)
        with pytest.raises(EnricherFileError, match=message):
            load_enrichers_file(str(bad))


def test_openapi_document_describes_every_route():
    spec = build_openapi("/base", "authorization")
    assert spec["servers"] == [{"url": "/base"}]
    assert set(spec["paths"]) == {
        "/proxy",
        "/proxy/all",
        "/proxy/client/features",
        "/proxy/client/metrics",
        "/proxy/all/client/metrics",
        "/proxy/client/register",
        "/proxy/health",
        "/proxy/internal-backstage/prometheus",
    }
    refs = json.dumps(spec)
    for name in spec["components"]["schemas"]:
        assert f"#/components/schemas/{name}" in refs or name == "variantSchema"
