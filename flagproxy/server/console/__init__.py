"""The web console: server-rendered pages (Jinja2) with htmx, served by `flagproxy server` under /console.

Pages read through the storage layer and the admin API's views; every change a page offers is a request
from the browser to the admin API itself (`/api/admin/...`, JSON, with the session cookie and the CSRF
header), so permissions and validation have one code path and everything a page does the API does.
What a person may not do is not offered (or rendered disabled): a template asks `may("<route name>")`,
the route's own ROUTE_NEEDS entry through the `allowed()` the API asks.

Modules, one page group each: `signin` (login, invite signup), `flags` (projects, a project's flags,
archive), `flag` (a flag's page), `playground`, `people` (users, invite links, roles, groups, project
access), `resources` (API tokens, segments, the event log). `render` holds the Jinja2 environment, the
session check and the security headers.
"""

from __future__ import annotations

from sanic import Blueprint

_BLUEPRINTS: list[Blueprint] = []


def blueprints() -> list[Blueprint]:
    """The console's blueprints, set up once per process: Sanic re-registers a blueprint on every app it
    already serves when a handler is added to it, so a second create_app() in the same process (tests,
    embedding) must not add the error handler again (that raised RouteExists once the first app had
    started)."""
    if not _BLUEPRINTS:
        from flagproxy.server.console import flag, flags, people, playground, resources, signin
        from flagproxy.server.console.render import error_page
        from flagproxy.server.errors import ApiError

        found = [signin.bp, flags.bp, flag.bp, playground.bp, people.bp, resources.bp]
        for blueprint in found:
            blueprint.exception(ApiError)(error_page)  # pages, not the API's JSON records
        _BLUEPRINTS.extend(found)
    return list(_BLUEPRINTS)
