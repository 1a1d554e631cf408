"""The official Unleash client specification, asked over HTTP: one proxy per spec file, one POST /proxy
with `toggles: [name]` and the case's context per case. Files whose state is a delta (`events`) are served
as the upstream payload too; the engine accepts both forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flagproxy.proxy.settings import ProxySettings
from flagproxy.sync.backup import FileStorageProvider
from tests.conftest import SPEC_DIR
from tests.http.loopback import KEY, RunningProxy, StubUpstream

SPEC_DIR = SPEC_DIR


def _cases() -> list[Any]:
    if not (SPEC_DIR / "index.json").exists():
        return []
    cases = []
    for file_name in json.loads((SPEC_DIR / "index.json").read_text()):
        spec = json.loads((SPEC_DIR / file_name).read_text())
        stem = file_name.removesuffix(".json")
        for case in spec.get("tests", []):
            cases.append(pytest.param(file_name, "enabled", case, id=f"{stem}-{case['description']}"))
        for case in spec.get("variantTests", []):
            cases.append(pytest.param(file_name, "variant", case, id=f"{stem}-{case['description']}"))
    return cases


class ProxiesBySpecFile:
    def __init__(self, loop_thread, tmp_dir: Path) -> None:
        self.loop_thread = loop_thread
        self.tmp_dir = tmp_dir
        self.running: dict[str, tuple[StubUpstream, RunningProxy]] = {}

    def get(self, file_name: str) -> RunningProxy:
        if file_name not in self.running:
            state = json.loads((SPEC_DIR / file_name).read_text())["state"]
            upstream = StubUpstream(self.loop_thread, state)
            settings = ProxySettings.load(
                {
                    "service_url": upstream.url,
                    "service_api_token": "t",
                    "client_keys": [KEY],
                    "metrics_interval": 0,
                    "refresh_interval": 60_000,
                    "storage_provider": FileStorageProvider(str(self.tmp_dir)),
                    "service_app_name": f"conformance-{file_name}",
                },
                env={},
            )
            proxy = RunningProxy(self.loop_thread, settings, upstream)
            proxy.wait_ready()
            self.running[file_name] = (upstream, proxy)
        return self.running[file_name][1]

    def stop(self) -> None:
        for upstream, proxy in self.running.values():
            proxy.stop()
            upstream.stop()


@pytest.fixture(scope="module")
def proxies(loop_thread, tmp_path_factory):
    by_file = ProxiesBySpecFile(loop_thread, tmp_path_factory.mktemp("conformance"))
    yield by_file
    by_file.stop()


# Over HTTP a context never lacks remoteAddress: the proxy supplies the caller's socket address (DESIGN D6).
# The spec's addresses are 127.0.0.1 and a few private ones, so every case is asked from 127.0.0.2: a caller
# whose address no case lists, which is what "no remoteAddress on the context" means to those strategies.
CALLER_ADDRESS = "127.0.0.2"


def _as_request_context(context: dict[str, Any]) -> dict[str, Any]:
    # The spec's contexts are SDK contexts; over HTTP the same fields go in the `context` object.
    return {key: value for key, value in context.items() if value is not None}


@pytest.mark.parametrize(("file_name", "kind", "case"), _cases())
def test_conformance_over_http(proxies, file_name, kind, case):
    proxy = proxies.get(file_name)
    body = {"toggles": [case["toggleName"]], "context": _as_request_context(case.get("context", {}))}
    status, _, answer = proxy.post("/proxy", body, key=KEY, source=CALLER_ADDRESS)
    assert status == 200, answer
    (toggle,) = json.loads(answer)["toggles"]
    if kind == "enabled":
        assert toggle["enabled"] is case["expectedResult"]
        return
    expected = case["expectedResult"]
    variant = toggle["variant"]
    assert variant["name"] == expected["name"]
    assert variant["enabled"] == expected["enabled"]
    assert variant.get("payload") == expected.get("payload")
    if "feature_enabled" in expected:
        assert variant["feature_enabled"] == expected["feature_enabled"]
