"""The JSON bytes of every answer the proxy can give for a flag, built once per snapshot.

Key order and shapes are the Node Unleash Proxy's (proxy-behaviour.md section 3.1), so bodies are
byte-identical to it and ETags are stable across workers:

- a toggle is {"name","enabled","variant","impressionData"};
- a feature-level variant is {"name","payload"?,"enabled","feature_enabled","featureEnabled"}, a
  strategy-level one {"name","enabled","payload"?,"feature_enabled","featureEnabled"};
- list routes copy impressionData from the upstream definition and omit it when the upstream did;
  named lookups default it to false;
- a disabled toggle in /proxy/all has a variant without featureEnabled; one looked up by name has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from flagproxy.compiler import model as m

_NO_VARIANT_ENABLED = b'{"name":"disabled","enabled":false,"feature_enabled":true,"featureEnabled":true}'
_DISABLED_ALL_VARIANT = b'{"name":"disabled","enabled":false,"feature_enabled":false}'
_DISABLED_NAMED_VARIANT = (
    b'{"name":"disabled","enabled":false,"feature_enabled":false,"featureEnabled":false}'
)
_TAIL = b',"feature_enabled":true,"featureEnabled":true}'

BODY_PREFIX = b'{"toggles":['
BODY_SUFFIX = b"]}"


def _impression(value: Any, *, default_false: bool) -> bytes:
    if value is None and not default_false:
        return b""
    return b',"impressionData":true' if value is True else b',"impressionData":false'


def variant_json(name: str, payload: Any, strategy_level: bool) -> bytes:
    name_json = orjson.dumps(name)
    payload_json = b',"payload":' + orjson.dumps(payload) if payload is not None else b""
    if strategy_level:
        return b'{"name":' + name_json + b',"enabled":true' + payload_json + _TAIL
    return b'{"name":' + name_json + payload_json + b',"enabled":true' + _TAIL


def add_fragments(flag: m.Flag, feature: Mapping[str, Any]) -> None:
    impression = feature.get("impressionData")
    name_json = orjson.dumps(flag.name)
    listed = _impression(impression, default_false=False)
    named = _impression(impression, default_false=True)

    def toggle(enabled: bytes, variant: bytes, tail: bytes) -> bytes:
        return b'{"name":' + name_json + b',"enabled":' + enabled + b',"variant":' + variant + tail + b"}"

    flag.enabled_list = []
    flag.enabled_named = []
    for index, (name, payload, strategy_level) in enumerate(flag.outcomes):
        variant = _NO_VARIANT_ENABLED if index == 0 else variant_json(name, payload, strategy_level)
        flag.enabled_list.append(toggle(b"true", variant, listed))
        flag.enabled_named.append(toggle(b"true", variant, named))
    flag.disabled_all = toggle(b"false", _DISABLED_ALL_VARIANT, listed)
    flag.disabled_named = toggle(b"false", _DISABLED_NAMED_VARIANT, named)


def unknown_named(name: str) -> bytes:
    """A name the caller asked for that the snapshot does not know: disabled, impressionData false."""
    return (
        b'{"name":'
        + orjson.dumps(name)
        + b',"enabled":false,"variant":'
        + _DISABLED_NAMED_VARIANT
        + (b',"impressionData":false}')
    )
