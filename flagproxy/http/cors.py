"""CORS headers with every cors.* option, as the Node proxy's `cors` middleware sends them.

Every response gets the actual-request headers (allowed origin, credentials, exposed headers); an OPTIONS
request on any path is a preflight, answered with `optionsSuccessStatus` unless `preflightContinue`. For the
default `*` origin the headers do not depend on the request, so they are built once.
"""

from __future__ import annotations

from typing import Protocol


class CorsSettings(Protocol):
    """The cors_* options, under these attribute names in each product's settings (read only: the
    settings are frozen)."""

    @property
    def cors_origin(self) -> str | tuple[str, ...]: ...

    @property
    def cors_credentials(self) -> bool: ...

    @property
    def cors_exposed_headers(self) -> str | None: ...

    @property
    def cors_allowed_headers(self) -> str | None: ...

    @property
    def cors_methods(self) -> str: ...

    @property
    def cors_max_age(self) -> int: ...

    @property
    def cors_options_success_status(self) -> int: ...

    @property
    def cors_preflight_continue(self) -> bool: ...


class CorsPolicy:
    def __init__(self, settings: CorsSettings) -> None:
        self.origin = settings.cors_origin
        self.credentials = settings.cors_credentials
        self.exposed_headers = settings.cors_exposed_headers
        self.allowed_headers = settings.cors_allowed_headers
        self.methods = settings.cors_methods
        self.max_age = settings.cors_max_age
        self.success_status = settings.cors_options_success_status
        self.preflight_continue = settings.cors_preflight_continue
        self.origin_list = set(self.origin) if isinstance(self.origin, tuple) else None
        # Constant parts; None when they depend on the request's Origin.
        self._fixed = None if self.origin_list is not None else self._actual(None)

    def _origin_headers(self, request_origin: str | None) -> list[tuple[str, str]]:
        if self.origin == "*" or not self.origin:
            return [("Access-Control-Allow-Origin", "*")]
        if self.origin_list is None:
            return [("Access-Control-Allow-Origin", str(self.origin)), ("Vary", "Origin")]
        if request_origin is not None and request_origin in self.origin_list:
            return [("Access-Control-Allow-Origin", request_origin), ("Vary", "Origin")]
        return [("Vary", "Origin")]

    def _actual(self, request_origin: str | None) -> dict[str, str]:
        headers = dict(self._origin_headers(request_origin))
        if self.credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        if self.exposed_headers:
            headers["Access-Control-Expose-Headers"] = self.exposed_headers
        return headers

    def actual(self, request_origin: str | None) -> dict[str, str]:
        """Headers for a normal response. The caller must copy before changing (the dict may be shared)."""
        if self._fixed is not None:
            return self._fixed
        return self._actual(request_origin)

    def preflight(self, request_origin: str | None, request_headers: str | None) -> dict[str, str]:
        headers: dict[str, str] = {}
        vary: list[str] = []
        for name, value in self._origin_headers(request_origin):
            if name == "Vary":
                vary.append(value)
            else:
                headers[name] = value
        if self.credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        if self.methods:
            headers["Access-Control-Allow-Methods"] = self.methods
        if self.allowed_headers is None:
            vary.append("Access-Control-Request-Headers")
            if request_headers:
                headers["Access-Control-Allow-Headers"] = request_headers
        elif self.allowed_headers:
            headers["Access-Control-Allow-Headers"] = self.allowed_headers
        if self.max_age:
            headers["Access-Control-Max-Age"] = str(self.max_age)
        if self.exposed_headers:
            headers["Access-Control-Expose-Headers"] = self.exposed_headers
        if vary:
            headers["Vary"] = ", ".join(vary)
        return headers
