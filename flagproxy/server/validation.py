"""Request validation through sanic-ext, with failures as SPEC.md's ValidationError naming the field.

`json_body(Model)` documents the body in the OpenAPI document and validates it with sanic-ext's
`validate` hook. The hook is given a callable rather than the model class because sanic-ext flattens a
pydantic error into one string; the callable keeps pydantic's location so the record can name the field.
It also runs the content-type check first, in Unleash's order: 415 before 400.

Text holding a NUL character is refused in every body that is stored: PostgreSQL cannot store one (SQLite
can), and both backends must answer alike. The playground stores nothing and takes any context the
frontend API takes, NUL included.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError
from sanic import Request
from sanic_ext import openapi, validate

from flagproxy.http.context import body_context, query_context
from flagproxy.http.errors import ClientError
from flagproxy.server.errors import UnsupportedContentType, ValidationFailed

Handler = TypeVar("Handler", bound=Callable[..., Any])


def field_path(location: tuple[int | str, ...]) -> str:
    """pydantic's ('constraints', 0, 'operator') -> `constraints[0].operator`."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


def _holds(data: Any, location: tuple[int | str, ...]) -> bool:
    """Whether the request data has something at `location`."""
    for part in location:
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if not (in_list or (isinstance(data, dict) and part in data)):
            return False
        data = data[part]
    return True


def as_validation_failed(error: PydanticError, data: Any) -> ValidationFailed:
    first = error.errors(include_url=False)[0]
    location = tuple(first["loc"])
    # A value that matches no member of a union (a parameter that is neither text, number nor boolean)
    # is reported at a location ending in the member's name, which is not in the data: the field is the
    # one before. A field left out is not in the data either, but it is the field at fault.
    if first["type"] != "missing" and location and not _holds(data, location) and _holds(data, location[:-1]):
        location = location[:-1]
    return ValidationFailed(field_path(location), first["msg"])


def nul_location(data: Any) -> tuple[tuple[int | str, ...], bool] | None:
    """Where a text holding a NUL character is, if any: (location, True when it is a key there)."""
    pending: list[tuple[tuple[int | str, ...], Any]] = [((), data)]
    while pending:  # a loop, not recursion: a body may nest as deep as the JSON parser allows
        location, value = pending.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return location, False
        elif isinstance(value, dict):
            for key, item in value.items():
                if "\x00" in key:
                    return location, True
                pending.append(((*location, key), item))
        elif isinstance(value, list):
            pending.extend(((*location, index), item) for index, item in enumerate(value))
    return None


def require_json(request: Request) -> Any:
    """The parsed JSON body; 415 unless the request says it is JSON, 400 when it is not valid JSON."""
    content_type = request.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        shown = media_type or "you didn't provide one"
        raise UnsupportedContentType(
            f"We do not accept the content-type you provided ({shown}). Try using one of the content-types"
            " we do accept instead (application/json) and make sure the body is in the corresponding format."
        )
    try:
        return orjson.loads(request.body or b"")
    except orjson.JSONDecodeError as exc:
        raise ValidationFailed("body", f"the body is not valid JSON ({exc})") from None


class _Check:
    """sanic-ext calls this with the parsed body; on success the model lands in the handler's `body`."""

    def __init__(self, model: type[BaseModel], wrap_list: bool, stored: bool) -> None:
        self.model = model
        self.wrap_list = wrap_list
        self.stored = stored

    def __call__(self, *, request: Request, data: Any, handler_kwargs: dict[str, Any]) -> None:
        if self.wrap_list:
            # PUT .../variants takes a bare array; validate it as VariantList.variants.
            if not isinstance(data, list):
                raise ValidationFailed("body", "expected a JSON array of variants")
            data = {"variants": data}
        elif not isinstance(data, dict):
            raise ValidationFailed("body", "expected a JSON object")
        found = nul_location(data) if self.stored else None
        if found is not None:
            location, in_key = found
            what = "its keys" if in_key else "text"
            raise ValidationFailed(field_path(location), f"{what} may not hold the NUL character (\\u0000)")
        try:
            handler_kwargs["body"] = self.model.model_validate(data)
        except PydanticError as exc:
            raise as_validation_failed(exc, data) from None


def json_body(
    model: type[BaseModel], *, wrap_list: bool = False, stored: bool = True
) -> Callable[[Handler], Handler]:
    """Document and validate a JSON body; the handler receives the model as keyword `body`. A body that is
    `stored` may hold no NUL character (PostgreSQL's text cannot); one only read (the playground's context,
    which takes what the frontend API takes) may."""
    check = _Check(model, wrap_list, stored)

    def decorate(handler: Handler) -> Handler:
        # sanic-ext calls a validator with request, data and handler_kwargs (_Check.__call__); its annotation
        # names only the older one-argument form.
        validated = validate(json=check)(handler)  # type: ignore[arg-type]

        @functools.wraps(handler)
        async def with_content_type(request: Request, *args: Any, **kwargs: Any) -> Any:
            # Parse here so that 415 comes before 400, and sanic-ext reads the already-parsed body.
            request.parsed_json = require_json(request)
            return await validated(request, *args, **kwargs)

        return openapi.body({"application/json": model}, required=True)(with_content_type)  # type: ignore[return-value]

    return decorate


def request_context(query_string: str | None = None, body: Any = None) -> dict[str, Any]:
    """The Unleash context of a query string or of a body's `context`, read by the one parser the proxy,
    edge and the server share (flagproxy/http/context.py: numbers written as the Node proxy writes them,
    null as "", empty standard fields dropped, currentTime normalised, properties winning over top-level
    fields of the same name); its 400 becomes a ValidationError naming the field (`context.userId`)."""
    try:
        if query_string is not None:
            return query_context(query_string)
        if not isinstance(body, dict):
            raise ValidationFailed("body", "must be an object")
        return body_context(body)
    except ClientError as error:
        path = (error.instance_path or "/body").removeprefix("/query").removeprefix("/body").strip("/")
        raise ValidationFailed(path.replace("/", ".") or "body", error.problem) from None
