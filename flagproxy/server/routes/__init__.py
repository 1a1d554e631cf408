"""HTTP routes, one module per domain. `blueprints()` lists them for the app factory."""

from __future__ import annotations

from sanic import Blueprint


def blueprints() -> list[Blueprint]:
    from flagproxy.server.routes import (
        client,
        environments,
        features,
        health,
        projects,
        segments,
        strategies,
        tags,
        tokens,
        usage,
    )

    return [
        tokens.bp,
        projects.bp,
        environments.bp,
        features.bp,
        strategies.bp,
        tags.bp,
        segments.bp,
        usage.bp,
        client.bp,
        health.bp,
    ]
