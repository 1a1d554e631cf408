"""The status page (`<base>/proxy/status`, ENABLE_STATUS_PAGE) and the data it reads (`status.json`).

The page is one static HTML file (status.html beside this module) with no data in it, so it is served to
anyone; `status.json` needs a client key, like /proxy, because it names every flag. It tells whether the
instance is ready, the served revision and when the flags last changed, the upstream URL (without
credentials or query), the last fetch result and error, the last features document refused whole (what the
sync wrote, flagproxy/proxy/series.py), the instance's request count and each flag's yes/no counts (summed
over the workers from the Prometheus series); the page turns counts into rates.
"""

from __future__ import annotations

import time
import urllib.parse
from pathlib import Path
from typing import Any

import orjson

from flagproxy.proxy.series import SyncSeries, instance_totals

_PAGE = Path(__file__).with_name("status.html").read_text(encoding="utf-8")


def page_body(base_path: str, key_header: str) -> bytes:
    return (
        _PAGE.replace('content="KEY_HEADER"', f'content="{key_header}"')
        .replace('content="DATA_URL"', f'content="{base_path}/proxy/status.json"')
        .encode()
    )


def public_url(url: str) -> str:
    """`url` without user, password, query or fragment: what an open page may show of the upstream."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def status_document(settings: Any, store: Any, series_directory: str | None) -> bytes:
    """status.json for the instance this worker belongs to."""
    snapshot = store.current
    upstream: dict[str, Any] = {}
    if series_directory is not None:
        try:
            upstream = orjson.loads(Path(series_directory, SyncSeries.STATUS_FILE).read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            upstream = {}
    requests, usage = instance_totals(series_directory if settings.enable_prometheus else None)
    return orjson.dumps(
        {
            "now": time.time(),
            "ready": snapshot is not None,
            "revision": store.revision,
            "source": snapshot.source if snapshot is not None else None,
            "updated": store.last_update_ms / 1000,
            "checked": store.last_fetch_ms / 1000,
            "upstream": public_url(settings.service_url),
            "refresh_interval_ms": settings.refresh_interval,
            "last_success": upstream.get("last_success"),
            "last_failure": upstream.get("last_failure"),
            "last_error": upstream.get("last_error"),
            "last_refusal": upstream.get("last_refusal"),
            "requests_total": requests,
            "flags": sorted(snapshot.names) if snapshot is not None else [],
            "usage": usage,
        }
    )
