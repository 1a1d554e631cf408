"""The evaluation proxy: Unleash Node proxy routes over a compiled, in-memory flag snapshot.

    from flagproxy.proxy import create_app, ProxySettings
    app = create_app(ProxySettings.load({"service_url": ..., "service_api_token": ..., "client_keys": [...]}))

Modules: settings (the option table), app (factory and routes), auth (client keys), sync (the sync built
from the settings, the leader of `--workers N`), series (the proxy's own Prometheus series), status_page,
enrichers, openapi, docs_page, cli. What it shares with `flagproxy edge` (context, CORS, trusted proxies,
ETags, answers, bodies, the request series, the worker machinery) is in flagproxy/http/ and
flagproxy/instance/.
"""

from flagproxy.proxy.app import create_app
from flagproxy.proxy.settings import ConfigError, ProxySettings

__all__ = ["ConfigError", "ProxySettings", "create_app"]
