"""A web site of its own on a loopback port: the origin a browser page is loaded from, so every call it
makes to the proxy (another port) is cross-origin, with CORS preflights, as from a real app.

It serves the pages in tests/browser/pages/ and the official SDKs' browser bundles straight from
tests/sdk/node/node_modules (installed by `npm ci`, pinned by package-lock.json): no build step.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PAGES = Path(__file__).resolve().parent / "pages"
NODE_MODULES = Path(__file__).resolve().parents[1] / "sdk" / "node" / "node_modules"
# URL path → file: each SDK's browser build (UMD, exposes a global) or its ES module build.
# The OpenFeature page loads ES modules by their package names through an import map.
FILES = {
    "/unleash-proxy-client.js": NODE_MODULES / "unleash-proxy-client" / "build" / "main.min.js",
    "/esm/unleash-proxy-client.js": NODE_MODULES / "unleash-proxy-client" / "build" / "main.esm.js",
    "/esm/openfeature-web-sdk.js": NODE_MODULES / "@openfeature" / "web-sdk" / "dist" / "esm" / "index.js",
    "/esm/openfeature-core.js": NODE_MODULES / "@openfeature" / "core" / "dist" / "esm" / "index.js",
    "/esm/openfeature-unleash-web-provider.js": NODE_MODULES
    / "@openfeature"
    / "unleash-web-provider"
    / "index.esm.js",
}
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


def _files() -> dict[str, Path]:
    files = {f"/{page.name}": page for page in PAGES.glob("*.html")}
    files.update(FILES)
    for path in files.values():
        assert path.is_file(), f"{path} is missing: run `npm ci` in tests/sdk/node (.ci/run does)"
    return files


class Origin:
    def __init__(self) -> None:
        files = _files()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = files.get(self.path.split("?", 1)[0])
                if path is None:
                    self.send_error(404)
                    return
                body = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", TYPES[path.suffix])
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet: the test reports what matters

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
