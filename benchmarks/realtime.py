"""Propagation latency of a flag change to the official Node SDK streaming from `flagproxy server`.

    python -m benchmarks.realtime [--flags 200] [--changes 200] [--workers 1] [--database-url URL]

Starts a server (a fresh SQLite file unless --database-url), creates `--flags` flags, starts the Node SDK
(npm `unleash-client`, pinned in tests/sdk/node) with `experimentalMode: {type: 'streaming'}` through
tests/sdk/node/follow.js, then switches flags one at a time through the admin API. For each change: the
wall-clock moment the admin API's 2xx arrived, and the moment the SDK emitted `changed` holding the new
state (the SDK's `performance.timeOrigin + now()`; one machine, one clock). Prints p50, p99 and max.

A wall-clock figure on a shared, loaded machine: read it as an order of magnitude, and compare runs taken
together (the same run with --workers 2, or on PostgreSQL), never across days.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.load.processes import Service, fetch, free_port

NODE_PROJECT = Path(__file__).resolve().parent.parent / "tests" / "sdk" / "node"
ADMIN = "*:*.bench-admin"
CLIENT = "*:development.bench-client"


def _admin(port: int, method: str, path: str, body: object = None) -> float:
    """The request; the wall-clock moment its 2xx arrived."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": ADMIN, "Content-Type": "application/json"}
    answer = fetch(port, method, path, headers, data)
    arrived = time.time()
    if not 200 <= answer.status < 300:
        raise RuntimeError(f"{method} {path}: {answer.status} {answer.body[:200]!r}")
    return arrived


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def run(flags: int, changes: int, workers: int, database_url: str | None) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="flagproxy-realtime-"))
    port = free_port()
    env = {**os.environ, "INIT_ADMIN_API_TOKENS": ADMIN, "INIT_CLIENT_API_TOKENS": CLIENT}
    if database_url:
        env["DATABASE_URL"] = database_url
    else:
        env["DATABASE_PATH"] = str(folder / "flags.db")
    command = [sys.executable, "-m", "flagproxy", "server", "--host", "127.0.0.1", "--port", str(port)]
    server = Service.start("server", [*command, "--workers", str(workers)], env, port, folder, Path.cwd())
    sdk = None
    try:
        server.wait_until(lambda: fetch(port, "GET", "/health").status == 200, 60)
        names = [f"bench-{index:04d}" for index in range(flags)]
        for name in names:
            _admin(port, "POST", "/api/admin/projects/default/features", {"name": name})
        job = {
            "url": f"http://127.0.0.1:{port}/api/",
            "token": CLIENT,
            "appName": "realtime-bench",
            "mode": {"type": "streaming"},
            "refreshInterval": 60000,
        }
        sdk = subprocess.Popen(
            ["node", "follow.js"], cwd=NODE_PROJECT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert sdk.stdin is not None and sdk.stdout is not None
        sdk.stdin.write(json.dumps(job).encode())
        sdk.stdin.close()
        lines: queue.Queue[dict] = queue.Queue()
        stdout = sdk.stdout
        threading.Thread(target=lambda: [lines.put(json.loads(line)) for line in stdout], daemon=True).start()

        def seen(name: str, enabled: bool) -> float:
            while True:
                line = lines.get(timeout=60)
                if line.get("flags", {}).get(name) is enabled:
                    return float(line["at"]) / 1000

        seen(names[-1], False)  # hydrated
        latencies = []
        state = dict.fromkeys(names, False)
        for index in range(changes):
            name = names[index % flags]
            state[name] = not state[name]
            path = f"/api/admin/projects/default/features/{name}/environments/development/"
            answered = _admin(port, "POST", path + ("on" if state[name] else "off"))
            latencies.append((seen(name, state[name]) - answered) * 1000)
    finally:
        if sdk is not None:
            sdk.terminate()
            sdk.wait(10)
        server.stop()
    return {
        "p50_ms": statistics.median(latencies),
        "p99_ms": _percentile(latencies, 0.99),
        "max_ms": max(latencies),
        "min_ms": min(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flags", type=int, default=200)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--database-url", help="postgresql://... (default: a fresh SQLite file)")
    args = parser.parse_args()
    figures = run(args.flags, args.changes, args.workers, args.database_url)
    backend = "PostgreSQL" if args.database_url else "SQLite"
    print(
        f"{args.changes} changes at {args.flags} flags, {backend}, {args.workers} worker(s): "
        + ", ".join(f"{key} {value:.1f}" for key, value in figures.items())
    )


if __name__ == "__main__":
    main()
