"""Request validation through sanic-ext, with failures as SPEC.md's ValidationError naming the field.

`json_body(Model)` documents the body in the OpenAPI document and validates it with sanic-ext's
`validate` hook. The hook is given a callable rather than the model class because sanic-ext flattens a
pydantic error into one string; the callable keeps pydantic's location so the record can name the field.
It also runs the content-type check first, in Unleash's order: 415 before 400.
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

from flagproxy.server.errors import UnsupportedContentType, ValidationFailed

Handler = TypeVar("Handler", bound=Callable[..., Any])


def field_path(location: tuple[int | str, ...]) -> str:
    """pydantic's ('constraints', 0, 'operator') -> `constraints[0].operator`."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "body"


def as_validation_failed(error: PydanticError) -> ValidationFailed:
    first = error.errors(include_url=False)[0]
    return ValidationFailed(field_path(tuple(first["loc"])), first["msg"])


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

    def __init__(self, model: type[BaseModel], wrap_list: bool) -> None:
        self.model = model
        self.wrap_list = wrap_list

    def __call__(self, *, request: Request, data: Any, handler_kwargs: dict[str, Any]) -> None:
        if self.wrap_list:
            # PUT .../variants takes a bare array; validate it as VariantList.variants.
            if not isinstance(data, list):
                raise ValidationFailed("body", "expected a JSON array of variants")
            data = {"variants": data}
        elif not isinstance(data, dict):
            raise ValidationFailed("body", "expected a JSON object")
        try:
            handler_kwargs["body"] = self.model.model_validate(data)
        except PydanticError as exc:
            raise as_validation_failed(exc) from None


def json_body(model: type[BaseModel], *, wrap_list: bool = False) -> Callable[[Handler], Handler]:
    """Document and validate a JSON body; the handler receives the model as keyword `body`."""
    check = _Check(model, wrap_list)

    def decorate(handler: Handler) -> Handler:
        validated = validate(json=check)(handler)

        @functools.wraps(handler)
        async def with_content_type(request: Request, *args: Any, **kwargs: Any) -> Any:
            # Parse here so that 415 comes before 400, and sanic-ext reads the already-parsed body.
            request.parsed_json = require_json(request)
            return await validated(request, *args, **kwargs)

        return openapi.body({"application/json": model}, required=True)(with_content_type)  # type: ignore[return-value]

    return decorate
