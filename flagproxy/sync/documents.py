"""What counts as a features document, in one place: the fetch (upstream.py), the store that compiles it
(flagproxy/instance/store.py), the backup, the bootstrap and edge's feeds and offline files all ask this,
and it imports nothing heavy, so a worker that only installs documents does not load the HTTP client for it.

A document is checked whole against the client API's schema before anything of it is compiled, as Unleash's
Rust engine and Edge deserialize it into their types first (unleash-types `ClientFeatures`,
`ClientFeaturesDelta`): a field the evaluator reads that has the wrong JSON type refuses the whole document,
so an upstream that serves garbage for a moment leaves the last good flags in place instead of turning some
or all of them off. Fields Unleash makes optional may be absent or null. Values of the right type that
cannot be used (a regex that does not compile, a date that is no date) are the compiler's business: they
turn their flag off with a warning (flagproxy/compiler/build.py), as in Yggdrasil.

The rules, by JSON path (`?` optional, may be null):

- document: `features` list of feature, `segments?` list of segment; or a delta: `events` list of event
- feature: `name` string, `enabled` boolean, `impressionData?` boolean, `project?` string,
  `strategies?` list of strategy, `variants?` list of variant, `dependencies?` list of dependency
- strategy: `name` string, `disabled?` boolean, `parameters?` object of scalar (string, number, boolean),
  `constraints?` list of constraint, `segments?` list of integer, `variants?` list of variant
- constraint: `contextName` string, `operator` string, `inverted?` `caseInsensitive?` boolean,
  `values?` list of string, `value?` string
- segment: `id` integer, `constraints` list of constraint
- variant: `name` string, `weight` integer, `stickiness?` string, `payload?` {`type` string, `value`
  string}, `overrides?` list of {`contextName` string, `values` list of string}
- dependency: `feature` string, `enabled?` boolean, `variants?` list of string
- event: `type` string; `feature-updated`: `feature` feature; `feature-removed`: `featureName` string;
  `segment-updated`: `segment` segment; `segment-removed`: `segmentId` integer; `hydration`:
  `features?` list of feature, `segments?` list of segment. Other types are skipped when applied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

# Why a document was refused, as the Prometheus label (a closed set, so the series stay bounded).
NOT_JSON = "not_json"  # the bytes are no JSON at all
NOT_A_DOCUMENT = "not_a_document"  # not an object with a `features` or `events` list
MISSING_FIELD = "missing_field"
NOT_JSON_PREFIX = "is not JSON: "  # how the message of a NOT_JSON refusal starts
WRONG_TYPE = "wrong_type"


class DocumentError(ValueError):
    """A document that does not match the schema: `path` is the first offending JSON path."""

    def __init__(self, reason: str, path: str, message: str) -> None:
        super().__init__(f"{path} {message}" if path else message)
        self.reason = reason
        self.path = path
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # Raised in the compile process too (flagproxy/instance/compiler.py): it must cross back whole.
        return (DocumentError, (self.reason, self.path, self.message))


_Check = Callable[[Any, str], None]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _wrong(value: Any, path: str, wanted: str) -> DocumentError:
    return DocumentError(WRONG_TYPE, path, f"must be {wanted}, not {_kind(value)}")


def _string(value: Any, path: str) -> None:
    if not isinstance(value, str):
        raise _wrong(value, path, "a string")


def _boolean(value: Any, path: str) -> None:
    if not isinstance(value, bool):
        raise _wrong(value, path, "a boolean")


def _integer(value: Any, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(value, path, "an integer")


def _scalar(value: Any, path: str) -> None:
    # Unleash sends parameters as strings; a number or boolean from another upstream reads as its text.
    if not isinstance(value, str | int | float) or value is None:
        raise _wrong(value, path, "a string")


def _list_of(item: _Check) -> _Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise _wrong(value, path, "a list")
        for i, element in enumerate(value):
            item(element, f"{path}[{i}]")

    return check


def _object(required: dict[str, _Check], optional: dict[str, _Check]) -> _Check:
    """An object with these fields (others are allowed and ignored, as Unleash adds fields over time)."""

    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _wrong(value, path, "an object")
        for name, field in required.items():
            if name not in value:
                raise DocumentError(MISSING_FIELD, f"{path}.{name}", "is missing")
            field(value[name], f"{path}.{name}")
        for name, field in optional.items():
            found = value.get(name)
            if found is not None:
                field(found, f"{path}.{name}")

    return check


def _parameters(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise _wrong(value, path, "an object")
    for name, found in value.items():
        _scalar(found, f"{path}.{name}")


_strings = _list_of(_string)
_constraint = _object(
    {"contextName": _string, "operator": _string},
    {"inverted": _boolean, "caseInsensitive": _boolean, "values": _strings, "value": _string},
)
_constraints = _list_of(_constraint)
_segment = _object({"id": _integer, "constraints": _constraints}, {})
_segments = _list_of(_segment)
_payload = _object({"type": _string, "value": _string}, {})
_override = _object({"contextName": _string, "values": _strings}, {})
_variant = _object(
    {"name": _string, "weight": _integer},
    {"stickiness": _string, "payload": _payload, "overrides": _list_of(_override)},
)
_variants = _list_of(_variant)
_strategy = _object(
    {"name": _string},
    {
        "disabled": _boolean,
        "parameters": _parameters,
        "constraints": _constraints,
        "segments": _list_of(_integer),
        "variants": _variants,
    },
)
_dependency = _object({"feature": _string}, {"enabled": _boolean, "variants": _strings})
_feature = _object(
    {"name": _string, "enabled": _boolean},
    {
        "impressionData": _boolean,
        "project": _string,
        "strategies": _list_of(_strategy),
        "variants": _variants,
        "dependencies": _list_of(_dependency),
    },
)
_features = _list_of(_feature)
_EVENTS: dict[str, _Check] = {
    "feature-updated": _object({"feature": _feature}, {}),
    "feature-removed": _object({"featureName": _string}, {}),
    "segment-updated": _object({"segment": _segment}, {}),
    "segment-removed": _object({"segmentId": _integer}, {}),
    "hydration": _object({}, {"features": _features, "segments": _segments}),
}


def _event(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise _wrong(value, path, "an object")
    kind = value.get("type")
    _string(kind, f"{path}.type")
    check = _EVENTS.get(str(kind))
    if check is not None:
        check(value, path)


_full = _object({"features": _features}, {"segments": _segments})
_delta = _object({"events": _list_of(_event)}, {})


def is_features_document(document: Any) -> bool:
    """A client API features document, or a delta document (`events`) as Unleash's delta API sends: the
    shape only (`check_document` checks every field)."""
    return isinstance(document, dict) and (
        isinstance(document.get("features"), list) or isinstance(document.get("events"), list)
    )


def check_document(document: Any) -> None:
    """Raise DocumentError, naming the first offending JSON path, unless `document` is a client features
    document (or a delta) whose every field the evaluator reads has its type."""
    if not is_features_document(document):
        raise DocumentError(
            NOT_A_DOCUMENT, "$", "is not a client features document (no `features` or `events` list)"
        )
    # A document with both is read as a full one (flagproxy/snapshot.py).
    (_full if isinstance(document.get("features"), list) else _delta)(document, "$")


def read_document(document: bytes | memoryview) -> Any:
    """The features document these bytes hold, checked whole (`check_document`); DocumentError (NOT_JSON
    when they are no JSON at all) otherwise. What the compile reads the upstream's bytes with, so the process
    that serves never parses a whole document (flagproxy/instance/compiler.py)."""
    try:
        payload = orjson.loads(document)
    except orjson.JSONDecodeError as exc:
        raise DocumentError(NOT_JSON, "", f"{NOT_JSON_PREFIX}{exc}") from None
    check_document(payload)
    return payload


def flag_count(payload: dict[str, Any]) -> int:
    """How many flags a features document holds (a delta document: those of its hydration events)."""
    if isinstance(payload.get("features"), list):
        return len(payload["features"])
    events = payload.get("events")
    if not isinstance(events, list):
        return 0
    return sum(len(e.get("features") or []) for e in events if isinstance(e, dict))
