"""HEAD for every GET route and OPTIONS for every path, added once the server's routes are all in.

sanic-ext adds the same routes itself (HTTP_AUTO_HEAD, HTTP_AUTO_OPTIONS), but in a before-server-start
listener, where every `add_route` amends a started app: Sanic rebuilds its signal router (generated and
compiled Python) after each of the ~150 routes, 2.5 of the worker's ~4.5 s start-up. Added here, before
the app starts, the routers are built once. The answers are sanic-ext's: HEAD runs the GET handler (Sanic
drops the body), OPTIONS is an empty 204 naming the path's methods in `Allow`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from functools import partial
from inspect import isawaitable
from typing import Any

from sanic import Sanic
from sanic.response import HTTPResponse, empty


def add_head_and_options(app: Sanic) -> None:
    """Call after the last route is added and before the app starts; turns sanic-ext's own off. Walks the
    router's groups (a path, host and strictness each) in sanic-ext's order, so the routes get its names."""
    app.config.HTTP_AUTO_HEAD = False
    app.config.HTTP_AUTO_OPTIONS = False
    for group in list(app.router.groups.values()):
        if "GET" in group.methods and "HEAD" not in group.methods:
            for route in group:
                if "GET" in route.methods:
                    handler = _auto(partial(_head, get_handler=route.handler))
                    handler.__route_handler__ = route.handler  # type: ignore[attr-defined]
                    app.add_route(
                        handler,
                        group.uri,
                        methods=["HEAD"],
                        strict_slashes=group.strict,
                        name=f"{_own(route)}_head",
                        host=route.requirements.get("host"),
                        unquote=group.unquote,
                    )
    for group in list(app.router.groups.values()):
        if "OPTIONS" not in group.methods:
            hosts = {requirement.get("host") for requirement in group.requirements} or {None}
            base = next((route for route in group if not route.name.endswith("_head")), group[0])
            handler = _auto(partial(_options, methods=tuple(group.methods)))
            app.add_route(
                handler,
                group.uri,
                methods=["OPTIONS"],
                strict_slashes=group.strict,
                name=f"{_own(base)}_options",
                host=list(hosts) if hosts != {None} else None,
                unquote=group.unquote,
            )


def _own(route: Any) -> str:
    """A route's name without the app's prefix, as `add_route` takes it."""
    return route.name.split(".", 1)[1] if "." in route.name else route.name


def _auto(
    handler: Callable[..., Coroutine[Any, Any, HTTPResponse]],
) -> Callable[..., Coroutine[Any, Any, HTTPResponse]]:
    handler.__auto_handler__ = True  # type: ignore[attr-defined]  # sanic-ext's mark: not in the OpenAPI document
    return handler


async def _head(request: Any, *args: Any, get_handler: Callable[..., Any], **kwargs: Any) -> HTTPResponse:
    answer = get_handler(request, *args, **kwargs)
    return await answer if isawaitable(answer) else answer


async def _options(request: Any, *args: Any, methods: Iterable[str], **kwargs: Any) -> HTTPResponse:
    answer = empty()
    answer.headers["allow"] = ",".join([*methods, "OPTIONS"])
    return answer
