"""Expected answers from independent sources, never from flagproxy's own engine: the official SDKs
evaluating flags read from a live endpoint — the Python SDK (`UnleashClient`, whose engine is Unleash's
Yggdrasil, the behaviour flagproxy follows where the SDKs differ: `python_answers`) and the Node SDK (npm
`unleash-client`, pinned in tests/sdk/node: `node_answers`, tests/sdk/node/evaluate.js) — the Node SDK's
rollout buckets (`sdk_buckets`, tests/sdk/node/buckets.js), and fixed values published by the Unleash
SDKs and for MurmurHash3 itself.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

NODE_PROJECT = Path(__file__).resolve().parent / "node"
VARIANT_SEED = 86028157  # Unleash's variant normalization seed (unleash-client's strategy/util)

# normalizedStrategyValue(id, groupId) and with the variant seed, (groupId, id, seed) → bucket of 100, as the
# Unleash SDKs' own tests fix them ("normalized values are the same across node, java and go clients":
# unleash-client-node src/test/strategy/util.test.ts, unleash-client-java StrategyUtilsTest.java).
PUBLISHED_BUCKETS = [
    ("gr1", "123", 0, 73),
    ("groupX", "999", 0, 25),
    ("gr1", "123", VARIANT_SEED, 96),
    ("groupX", "999", VARIANT_SEED, 60),
]

# MurmurHash3 x86_32 of (bytes, seed): the test vectors published with the algorithm's verification values
# (Ian Boyd's list checked against SMHasher's reference, https://stackoverflow.com/a/31929528), in the
# unsigned form Unleash uses.
MURMUR3_VECTORS = [
    (b"", 0, 0x00000000),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"aaa", 0x9747B28C, 0x283E0130),
    (b"aa", 0x9747B28C, 0x5D211726),
    (b"a", 0x9747B28C, 0x7FA09EA6),
    (b"abcd", 0x9747B28C, 0xF0478627),
    (b"abc", 0x9747B28C, 0xC84A62DD),
    (b"ab", 0x9747B28C, 0x74875592),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    ("ππππππππ".encode(), 0x9747B28C, 0xD58063C1),
    (b"a" * 256, 0x9747B28C, 0x37405BDC),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
]


def _as_sdk_text(text: str) -> str:
    """The UTF-8 bytes of `text` (a lone surrogate as its surrogatepass bytes), one character per byte.
    The SDK's murmurhash3js hashes charCodeAt(i) & 0xff, so it hashes these bytes exactly as Yggdrasil and
    the other SDKs hash the UTF-8 text; plain ASCII passes through unchanged."""
    return text.encode("utf-8", "surrogatepass").decode("latin-1")


def _node(script: str, job: Any) -> Any:
    """Run one of tests/sdk/node's scripts with `job` as JSON on stdin; its JSON answer."""
    assert shutil.which("node"), "node is missing: .ci/run installs it"
    assert (NODE_PROJECT / "node_modules" / "unleash-client").is_dir(), "run `npm ci` in tests/sdk/node"
    finished = subprocess.run(
        ["node", script], cwd=NODE_PROJECT, input=json.dumps(job), capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout)


def depends_on_randomness(feature: dict[str, Any]) -> bool:
    """Whether some answer of `feature` can be drawn at random for a context with a userId and a
    sessionId: a gradualRolloutRandom strategy, or a rollout or variant whose stickiness is `random`.
    (`default` stickiness falls back to randomness only without userId and sessionId, which every test
    context has.)"""
    for strategy in feature.get("strategies", []):
        if strategy.get("name") == "gradualRolloutRandom":
            return True
        if (strategy.get("parameters") or {}).get("stickiness") == "random":
            return True
        if any(v.get("stickiness") == "random" for v in strategy.get("variants") or []):
            return True
    return any(v.get("stickiness") == "random" for v in feature.get("variants") or [])


def node_answers(
    url: str,
    token: str,
    flags: list[str],
    contexts: list[dict[str, Any]],
    app_name: str,
    environment: str = "development",
) -> list[dict[str, tuple[bool, dict[str, Any]]]]:
    """Per context, flag → (isEnabled, the variant's name, enabled and payload) as the Node SDK answers,
    connected to `url` (a flag server's /api/ or a proxy's /proxy/) with `token`."""
    job = {"url": url, "token": token, "appName": app_name, "environment": environment}
    answers = _node("evaluate.js", job | {"flags": flags, "contexts": contexts})
    return [{flag: (enabled, variant) for flag, (enabled, variant) in a.items()} for a in answers]


def python_answers(
    url: str, token: str, flags: list[str], contexts: list[dict[str, Any]], app_name: str, cache: Path
) -> list[dict[str, tuple[bool, dict[str, Any]]]]:
    """Per context, flag → (is_enabled, the variant's name, enabled and payload) as the Python SDK answers,
    connected to `url` (a flag server's /api or a proxy's /proxy) with `token`, in development."""
    from tests.demo.test_sdk_agreement import _sdk_answer, sdk_client

    client = sdk_client(url, token, app_name, cache)
    try:
        assert client.is_initialized
        return [{flag: _sdk_answer(client, flag, context) for flag in flags} for context in contexts]
    finally:
        client.destroy()


@functools.cache
def _sdk(queries: tuple[tuple[str, str, int, int], ...]) -> tuple[int, ...]:
    sent = [
        [_as_sdk_text(group), _as_sdk_text(ident), normalizer, seed]
        for group, ident, normalizer, seed in queries
    ]
    return tuple(_node("buckets.js", sent))


def sdk_buckets(
    group: str, identifiers: Iterable[str], normalizer: int = 100, seed: int = 0
) -> dict[str, int]:
    """identifier → the Node SDK's bucket (1..normalizer) of `group:identifier`, all in one node run."""
    identifiers = list(identifiers)
    answers = _sdk(tuple((group, ident, normalizer, seed) for ident in identifiers))
    return dict(zip(identifiers, answers, strict=True))
