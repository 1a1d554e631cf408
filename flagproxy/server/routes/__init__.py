"""HTTP routes, one module per domain. `blueprints()` lists them for the app factory."""

from __future__ import annotations

from sanic import Blueprint


def blueprints() -> list[Blueprint]:
    from flagproxy.server.routes import (
        access,
        backstage,
        client,
        delta,
        edge,
        environments,
        events,
        features,
        frontend,
        groups,
        health,
        invites,
        playground,
        projects,
        roles,
        segments,
        strategies,
        tags,
        tokens,
        usage,
        users,
    )

    return [
        users.bp,
        users.me,
        users.personal,
        users.signin,
        invites.bp,
        invites.signup,
        roles.bp,
        groups.bp,
        access.bp,
        events.bp,
        events.search,
        tokens.bp,
        projects.bp,
        environments.bp,
        features.bp,
        strategies.bp,
        tags.bp,
        segments.bp,
        usage.bp,
        playground.bp,
        client.bp,
        delta.bp,
        frontend.bp,
        edge.bulk,
        edge.bp,
        health.bp,
        backstage.bp,
    ]
