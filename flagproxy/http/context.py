"""The Unleash context of a request, built as the Node proxy builds it (proxy-behaviour.md section 5). The one
parser of every service: the proxy's `/proxy`, edge's `/api/frontend`, the server's `/api/frontend` and its
playground (tests/differential holds their answers equal).

GET takes the query string (qs syntax: `properties[region]=eu`), POST takes `body.context`; the query of a
POST and the body of a GET are ignored. The root fields appName, environment, userId, sessionId,
remoteAddress and currentTime stay at the top; every other key goes into `properties`, where an explicit
`properties` entry wins. Empty root fields are dropped, an unparsable currentTime is dropped, and
remoteAddress defaults to the client address (the caller's own value is kept, DESIGN D6).

Every value must end up a string. POST converts numbers and booleans as the Node proxy does, the way
JavaScript writes them (`7` and `7.0` → "7", `1e21` → "1e+21", `0.000001` → "0.000001"), and null to "";
objects, arrays and repeated query fields are a 400 with the Node proxy's validation body.
(The Node proxy passes nested GET values such as `properties[a][b]=c` through to its SDK, where they can
never match; flagproxy rejects them so a caller learns about the mistake.)
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import unquote_plus

from flagproxy.http.errors import ClientError, type_error

ROOT_FIELDS = frozenset(("appName", "environment", "userId", "sessionId", "remoteAddress", "currentTime"))

_QUERY_SCHEMA = "#/properties/query/properties"
_CONTEXT_SCHEMA = "#/components/schemas/lookupTogglesSchema/properties/context"


def query_context(query_string: str) -> dict[str, Any]:
    """Parse a GET query into (root fields, properties), then build the context."""
    fields: dict[str, str] = {}
    properties: dict[str, str] = {}
    if query_string:
        for part in query_string.split("&"):
            if not part:
                continue
            raw_key, _, raw_value = part.partition("=")
            key = unquote_plus(raw_key)
            value = unquote_plus(raw_value)
            root, subkeys = _split_brackets(key)
            if not root:
                continue
            if root == "properties":
                if not subkeys or not subkeys[0]:
                    raise type_error("/query/properties", f"{_QUERY_SCHEMA}/properties", "object")
                name = subkeys[0]
                if len(subkeys) > 1 or name in properties:
                    raise type_error(
                        f"/query/properties/{name}",
                        f"{_QUERY_SCHEMA}/properties/additionalProperties",
                        "string",
                    )
                properties[name] = value
                continue
            if subkeys or root in fields:
                raise type_error(f"/query/{root}", f"{_QUERY_SCHEMA}/{root}", "string")
            fields[root] = value
    return build_context(fields, properties)


def _split_brackets(key: str) -> tuple[str, list[str]]:
    """`a[b][c]` → ("a", ["b", "c"]); a key that is not well-formed bracket syntax stays literal."""
    open_at = key.find("[")
    if open_at <= 0 or not key.endswith("]"):
        return key, []
    root, rest = key[:open_at], key[open_at:]
    subkeys = []
    while rest:
        if not rest.startswith("["):
            return key, []
        close = rest.find("]")
        inner = rest[1:close]
        if "[" in inner:
            return key, []
        subkeys.append(inner)
        rest = rest[close + 1 :]
    return root, subkeys


def body_context(body: dict[str, Any]) -> dict[str, Any]:
    """Check and convert `body.context` (an object of strings, numbers, booleans; `properties` likewise)."""
    if "context" not in body:
        return build_context({}, {})
    context = body["context"]
    if not isinstance(context, dict):
        raise type_error("/body/context", _CONTEXT_SCHEMA, "object")
    fields: dict[str, str] = {}
    properties: dict[str, str] = {}
    for key, value in context.items():
        if key == "properties":
            if not isinstance(value, dict):
                raise type_error(
                    "/body/context/properties", f"{_CONTEXT_SCHEMA}/properties/properties", "object"
                )
            for name, item in value.items():
                text = item if type(item) is str else _as_string(item)  # strings (nearly all) without a call
                if text is None:
                    raise type_error(
                        f"/body/context/properties/{name}",
                        f"{_CONTEXT_SCHEMA}/properties/properties/additionalProperties",
                        "string",
                    )
                properties[name] = text
            continue
        if key == "currentTime" and not isinstance(value, str):
            continue  # not part of the Node proxy's POST schema; an unusable time is dropped, as there
        text = value if type(value) is str else _as_string(value)
        if text is None:
            raise type_error(f"/body/context/{key}", f"{_CONTEXT_SCHEMA}/properties/{key}", "string")
        fields[key] = text
    return build_context(fields, properties)


def _as_string(value: Any) -> str | None:
    """ajv's coercion to string: numbers and booleans are written out, null becomes ''."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -_EXACT < value < _EXACT else _js_number(float(value))
    if isinstance(value, float):
        return _js_number(value)
    return None


_EXACT = 2**53  # JavaScript reads a JSON integer as a double: past this one, as the nearest double


def _js_number(value: float) -> str:
    """JavaScript's String(number) (ECMA-262 Number::toString): the shortest digits that read back as the
    same double (Python's repr finds the same ones), written out from 1e-6 up to 1e21, else as
    `d.ddde+N` / `de-N`; -0 is "0"."""
    if value == 0:
        return "0"
    if value != value or value in (float("inf"), float("-inf")):  # not JSON; for completeness
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # n: where the decimal point goes relative to the digits (value = 0.digits x 10**n)
    n = (
        len(whole) + int(exponent or 0)
        if whole != "0"
        else int(exponent or 0) - (len(fraction) - len(digits))
    )
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    power = f"e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return sign + (digits if k == 1 else digits[0] + "." + digits[1:]) + power


def build_context(fields: dict[str, str], properties: dict[str, str]) -> dict[str, Any]:
    context: dict[str, Any] = {}
    extra: dict[str, str] = {}
    for key, value in fields.items():
        if key in ROOT_FIELDS:
            if value:
                context[key] = value
        else:
            extra[key] = value
    if extra:
        extra.update(properties)
        properties = extra
    current_time = context.get("currentTime")
    if current_time is not None:
        normalised = normalise_time(current_time)
        if normalised is None:
            del context["currentTime"]
        else:
            context["currentTime"] = normalised
    context["properties"] = properties
    return context


def normalise_time(value: str) -> str | None:
    """An ISO 8601 time as UTC `YYYY-MM-DDTHH:MM:SS.mmmZ` (the form a JS Date prints), or None."""
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.UTC)
        in_utc = parsed.astimezone(dt.UTC)
    except (ValueError, OverflowError):  # OverflowError: 0001-01-01T00:00+01:00 is before year 1 in UTC
        return None
    return in_utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_toggles(body: dict[str, Any]) -> list[str] | None:
    """`body.toggles` as a list of names (numbers/booleans converted), or None when absent or empty."""
    if "toggles" not in body:
        return None
    toggles = body["toggles"]
    schema = "#/components/schemas/lookupTogglesSchema/properties/toggles"
    if not isinstance(toggles, list):
        raise type_error("/body/toggles", schema, "array")
    names = []
    for index, item in enumerate(toggles):
        text = _as_string(item)
        if text is None:
            raise type_error(f"/body/toggles/{index}", f"{schema}/items", "string")
        names.append(text)
    return names or None


__all__ = ["ClientError", "body_context", "build_context", "parse_toggles", "query_context"]
