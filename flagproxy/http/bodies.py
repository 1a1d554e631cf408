"""Request bodies: JSON read as the Node proxy reads it (415 for another content type or charset, then
400 for bad JSON; an empty body is `{}`), and checks of the SDK bodies (registerMetricsSchema,
registerClientSchema), first error only.

Errors use the Node proxy's shape (ajv's instancePath, schemaPath, keyword, params, message), so a
client that logs them sees the same text from either product.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson

from flagproxy.http.errors import ClientError, parse_error, type_error, validation_error

_METRICS = "#/components/schemas/registerMetricsSchema"
_REGISTER = "#/components/schemas/registerClientSchema"


def _required(path: str, schema: str, body: dict[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        if name not in body:
            raise validation_error(
                path,
                f"{schema}/required",
                "required",
                {"missingProperty": name},
                f"must have required property '{name}'",
            )


def _is_date_time(value: Any) -> bool:
    if not isinstance(value, str) or "T" not in value.upper():
        return False
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return False
    return parsed.tzinfo is not None


def _format_error(path: str, schema: str) -> ClientError:
    return validation_error(
        path, f"{schema}/format", "format", {"format": "date-time"}, 'must match format "date-time"'
    )


def _count(path: str, schema: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise type_error(path, schema, "integer")
    if value < 0:
        raise validation_error(
            path, f"{schema}/minimum", "minimum", {"comparison": ">=", "limit": 0}, "must be >= 0"
        )


def check_usage(body: Any) -> dict[str, dict[str, Any]]:
    """Validate a client metrics body; return its `bucket.toggles`."""
    if not isinstance(body, dict):
        raise type_error("/body", _METRICS, "object")
    _required("/body", _METRICS, body, ("appName", "instanceId", "bucket"))
    for name in ("appName", "instanceId", "environment"):
        if name in body and not isinstance(body[name], str):
            raise type_error(f"/body/{name}", f"{_METRICS}/properties/{name}", "string")
    bucket = body["bucket"]
    bucket_schema = f"{_METRICS}/properties/bucket"
    if not isinstance(bucket, dict):
        raise type_error("/body/bucket", bucket_schema, "object")
    _required("/body/bucket", bucket_schema, bucket, ("start", "stop", "toggles"))
    for name in ("start", "stop"):
        if not _is_date_time(bucket[name]):
            raise _format_error(f"/body/bucket/{name}", f"{bucket_schema}/properties/{name}")
    toggles = bucket["toggles"]
    toggles_schema = f"{bucket_schema}/properties/toggles"
    if not isinstance(toggles, dict):
        raise type_error("/body/bucket/toggles", toggles_schema, "object")
    item_schema = f"{toggles_schema}/additionalProperties"
    for name, counts in toggles.items():
        path = f"/body/bucket/toggles/{name}"
        if not isinstance(counts, dict):
            raise type_error(path, item_schema, "object")
        for key in ("yes", "no"):
            if key in counts:
                _count(f"{path}/{key}", f"{item_schema}/properties/{key}", counts[key])
        variants = counts.get("variants")
        if variants is not None:
            if not isinstance(variants, dict):
                raise type_error(f"{path}/variants", f"{item_schema}/properties/variants", "object")
            for variant, n in variants.items():
                _count(
                    f"{path}/variants/{variant}", f"{item_schema}/properties/variants/additionalProperties", n
                )
    return toggles


def check_register(body: Any) -> None:
    if not isinstance(body, dict):
        raise type_error("/body", _REGISTER, "object")
    _required("/body", _REGISTER, body, ("appName", "interval", "started", "strategies"))
    for name in ("appName", "instanceId", "sdkVersion", "environment"):
        if name in body and not isinstance(body[name], str):
            raise type_error(f"/body/{name}", f"{_REGISTER}/properties/{name}", "string")
    interval = body["interval"]
    if not isinstance(interval, int | float) or isinstance(interval, bool):
        raise type_error("/body/interval", f"{_REGISTER}/properties/interval", "number")
    started = body["started"]
    if not (isinstance(started, int | float) and not isinstance(started, bool)) and not _is_date_time(
        started
    ):
        raise _format_error("/body/started", f"{_REGISTER}/properties/started")
    strategies = body["strategies"]
    if not isinstance(strategies, list):
        raise type_error("/body/strategies", f"{_REGISTER}/properties/strategies", "array")
    for index, item in enumerate(strategies):
        if not isinstance(item, str):
            raise type_error(
                f"/body/strategies/{index}", f"{_REGISTER}/properties/strategies/items", "string"
            )


def check_content_type(request: Any) -> None:
    """415 for a body that is not `application/json` (utf-8): body-parser's check, as in the Node proxy."""
    headers = request.headers
    if "content-length" in headers or "transfer-encoding" in headers:
        content_type = headers.get("content-type")
        if content_type:
            refusal = _content_types.get(content_type, _UNSEEN)
            if refusal is _UNSEEN:
                refusal = _content_type_refusal(content_type)
                if len(_content_types) < _CONTENT_TYPES_KEPT:
                    _content_types[content_type] = refusal
            if refusal is not None:
                raise ClientError(415, refusal)


# Each Content-Type value's verdict, kept after the first time: clients send the same few values over and
# over, and the parse below cost a microsecond of every POST. Bounded, since the value is the caller's.
_content_types: dict[str, dict[str, str] | None] = {}
_CONTENT_TYPES_KEPT = 64
_UNSEEN: Any = object()


def _content_type_refusal(content_type: str) -> dict[str, str] | None:
    """The 415 body for a Content-Type value, or None when it is JSON in UTF-8."""
    media, _, parameters = content_type.partition(";")
    if media.strip().lower() != "application/json":
        return {"error": f"Unsupported content type {media.strip()!r}: send application/json"}
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in ("utf-8", "utf8"):
            return {"error": f'unsupported charset "{charset.upper()}"'}
    return None


def parse_json(raw: bytes) -> Any:
    """A JSON body (400 for bad JSON); empty → {}."""
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not raw.strip():  # only whitespace: empty too
            return {}
        raise parse_error(str(exc)) from None
    if not isinstance(value, dict | list):
        # body-parser's strict mode: only objects and arrays are JSON documents here.
        raise parse_error(f"JSON text must be an object or an array, not {type(value).__name__}")
    return value


def read_json(request: Any) -> Any:
    """The request body as JSON, checked as the Node proxy checks it (415, then 400); empty → {}."""
    check_content_type(request)
    return parse_json(request.body)
