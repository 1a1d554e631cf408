"""The official Unleash client specification, asked over HTTP: one real `flagproxy proxy` process per spec
file (all started at once, configured through their environment), one POST /proxy with `toggles: [name]`
and the case's context per case. Files whose state is a delta (`events`) are served as the upstream payload
too; the engine accepts both forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SPEC_DIR
from tests.http.loopback import KEY, StubUpstream
from tests.http.processes import ProxyUnderTest, process_env

SPEC_DIR = SPEC_DIR


def _cases() -> list[Any]:
    cases = []  # a missing specification fails the collection: never an empty, silently passing run
    for file_name in json.loads((SPEC_DIR / "index.json").read_text()):
        spec = json.loads((SPEC_DIR / file_name).read_text())
        stem = file_name.removesuffix(".json")
        for case in spec.get("tests", []):
            cases.append(pytest.param(file_name, "enabled", case, id=f"{stem}-{case['description']}"))
        for case in spec.get("variantTests", []):
            cases.append(pytest.param(file_name, "variant", case, id=f"{stem}-{case['description']}"))
    return cases


class ProxiesBySpecFile:
    """A proxy process and its stub upstream per spec file, all started on the first ask."""

    def __init__(self, loop_thread, tmp_dir: Path) -> None:
        self.loop_thread = loop_thread
        self.tmp_dir = tmp_dir
        self.running: dict[str, tuple[StubUpstream, ProxyUnderTest]] = {}

    def get(self, file_name: str) -> ProxyUnderTest:
        if not self.running:
            for name in json.loads((SPEC_DIR / "index.json").read_text()):
                state = json.loads((SPEC_DIR / name).read_text())["state"]
                upstream = StubUpstream(self.loop_thread, state)
                options = {
                    "service_url": upstream.url,
                    "service_api_token": "t",
                    "client_keys": [KEY],
                    "metrics_interval": 0,
                    "refresh_interval": 60_000,
                    "service_app_name": f"conformance-{name}",
                }
                folder = self.tmp_dir / name.removesuffix(".json")
                folder.mkdir()
                self.running[name] = (upstream, ProxyUnderTest(options, upstream, process_env(folder)))
            for _, proxy in self.running.values():
                proxy.wait_ready(timeout=60)
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
