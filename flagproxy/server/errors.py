"""SPEC.md's error records `{id, name, message}` and the exceptions that produce them.

    ApiError
     ├── ValidationFailed        400 ValidationError      (names the field at fault)
     ├── AuthenticationRequired  401 AuthenticationRequired
     ├── NoAccess                403 NoAccessError
     ├── NotFound                404 NotFoundError
     ├── NameExists              409 NameExistsError      (create/update conflicts with existing state)
     ├── UnsupportedContentType  415 ContentTypeerror     (spelled as SPEC.md spells it)
     └── TooManyAttempts         429 TooManyRequestsError (sign-in refused for a while after failures)

Every failure of every route, Sanic's own (unknown path, bad JSON, too large) included, leaves as one of
these records; an unexpected exception is logged and becomes a 500 record without a traceback.
"""

from __future__ import annotations

import logging
import uuid

import orjson
from sanic import HTTPResponse, Request, Sanic
from sanic.exceptions import BadRequest, MethodNotAllowed, PayloadTooLarge, SanicException
from sanic.exceptions import NotFound as RouteNotFound

log = logging.getLogger("flagproxy.server")


class ApiError(Exception):
    status = 500
    name = "UnknownError"

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.path = path


class ValidationFailed(ApiError):
    status = 400
    name = "ValidationError"

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f'Invalid value for "{path}": {problem}', path=path)


class AuthenticationRequired(ApiError):
    status = 401
    name = "AuthenticationRequired"


class NoAccess(ApiError):
    status = 403
    name = "NoAccessError"


class InvalidOperation(ApiError):
    """A change the rules forbid whoever asks (Unleash's InvalidOperationError, also a 403)."""

    status = 403
    name = "InvalidOperationError"


class NotFound(ApiError):
    status = 404
    name = "NotFoundError"


class NameExists(ApiError):
    status = 409
    name = "NameExistsError"


class UnsupportedContentType(ApiError):
    status = 415
    name = "ContentTypeerror"


class TooManyAttempts(ApiError):
    status = 429
    name = "TooManyRequestsError"


def error_response(status: int, name: str, message: str, path: str | None = None) -> HTTPResponse:
    record: dict[str, object] = {"id": str(uuid.uuid4()), "name": name, "message": message}
    detail: dict[str, str] = {"message": message}
    if path is not None:
        detail["path"] = path
    record["details"] = [detail]
    return HTTPResponse(orjson.dumps(record), status=status, content_type="application/json; charset=utf-8")


def _from_sanic(request: Request, exc: SanicException) -> HTTPResponse:
    if isinstance(exc, RouteNotFound):
        return error_response(
            404, "NotFoundError", f"The path you were looking for ({request.path}) is not available."
        )
    if isinstance(exc, MethodNotAllowed):
        return error_response(405, "MethodNotAllowed", f"{request.method} is not allowed on {request.path}.")
    if isinstance(exc, PayloadTooLarge):
        if "header" in str(exc):  # Sanic's limit on the request line and headers, not on the body
            return error_response(
                431, "RequestHeaderFieldsTooLarge", "The request line and headers are larger than 8 KB."
            )
        return error_response(413, "PayloadTooLarge", "The request body is larger than this server accepts.")
    if isinstance(exc, BadRequest):
        return error_response(400, "ValidationError", f"Invalid request: {exc}", "body")
    status = getattr(exc, "status_code", 500) or 500
    if status >= 500:
        log.error("request failed: %s %s", request.method, request.path, exc_info=exc)
        return error_response(status, "UnknownError", "The server could not complete the request.")
    return error_response(status, type(exc).__name__, str(exc))


def install_error_handlers(app: Sanic) -> None:
    """Route every exception to an error record."""

    @app.exception(ApiError)
    async def api_error(request: Request, exc: ApiError) -> HTTPResponse:
        return error_response(exc.status, exc.name, exc.message, exc.path)

    @app.exception(SanicException)
    async def sanic_error(request: Request, exc: SanicException) -> HTTPResponse:
        return _from_sanic(request, exc)

    @app.exception(Exception)
    async def unexpected(request: Request, exc: Exception) -> HTTPResponse:
        log.error("request failed: %s %s", request.method, request.path, exc_info=exc)
        return error_response(500, "UnknownError", "The server could not complete the request.")
