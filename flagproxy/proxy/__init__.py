"""The evaluation proxy: Unleash Node proxy routes over a compiled, in-memory flag snapshot.

    from flagproxy.proxy import create_app, ProxySettings
    app = create_app(ProxySettings.load({"service_url": ..., "service_api_token": ..., "client_keys": [...]}))

Modules: settings (options), app (factory and routes), context (request → Unleash context), trust
(X-Forwarded-For), auth (keys), cors, etag, responses, errors, schemas (frontend SDK bodies), store (the
engine behind one door), enrichers, logger, openapi, docs_page, cli.
"""

from flagproxy.proxy.app import create_app
from flagproxy.proxy.settings import ConfigError, ProxySettings

__all__ = ["ConfigError", "ProxySettings", "create_app"]
