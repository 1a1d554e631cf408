"""The Node Unleash Proxy for `--peer-node`: installed from npm once into benchmarks/load/.node (gitignored).

The package has no `bin`; it is started as `node node_modules/@unleash/proxy/dist/start.js`
(../shared/reference/proxy-behaviour.md, "Sources").
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

VERSION = "1.4.19"
CACHE = Path(__file__).parent / ".node"


def installed_start_script(cache: Path = CACHE) -> Path:
    """dist/start.js of @unleash/proxy VERSION, running `npm install` first if it is not there yet."""
    package = cache / "node_modules" / "@unleash" / "proxy"
    if _version(package) != VERSION:
        if shutil.which("node") is None or shutil.which("npm") is None:
            raise RuntimeError("--peer-node needs node and npm on PATH")
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--prefix", str(cache), "--no-audit", "--no-fund", "--loglevel=error",
             f"@unleash/proxy@{VERSION}"],
            check=True,
        )  # fmt: skip
        if _version(package) != VERSION:
            raise RuntimeError(f"npm did not install @unleash/proxy@{VERSION} into {cache}")
    return package / "dist" / "start.js"


def _version(package: Path) -> str | None:
    try:
        return json.loads((package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def node_version() -> str | None:
    try:
        done = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()
