"""`flagproxy server`: an Unleash-compatible flag server.

It stores projects, environments, features, strategies, segments and API tokens (SQLite by default,
PostgreSQL when DATABASE_URL says so), offers Unleash's admin routes for authoring them, and serves the
Unleash client API that proxies and server-side SDKs read. `create_app` in `app.py` is the only
composition root.
"""
