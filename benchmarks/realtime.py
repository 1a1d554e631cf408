"""Propagation latency of a flag change, from the admin API's 2xx to the moment a reader sees it.

    python -m benchmarks.realtime [--via server|replica|edge|proxy] [--flags 200] [--changes 200]
                                  [--workers 1] [--database-url URL | --postgres] [--edge-option OPTIONS]

Starts a server (a fresh SQLite file unless --database-url or --postgres), creates `--flags` flags, then
switches flags one at a time through the admin API and times each change to its reader:

- `server` (a): the official Node SDK (npm `unleash-client`, pinned in tests/sdk/node) with
  `experimentalMode: {type: 'streaming'}` through tests/sdk/node/follow.js, streaming from that server;
  the moment it emitted `changed` holding the new state (the SDK's `performance.timeOrigin + now()`).
- `replica` (d): the same SDK streaming from a second `flagproxy server` on the same PostgreSQL database
  (the change goes through the first): the change crosses processes by LISTEN/NOTIFY.
- `edge` (b): the same SDK streaming from `flagproxy edge --streaming` whose upstream is the server
  (`--edge-option`, e.g. `--edge-option '--workers 2'`, adds to edge's options).
- `proxy` (c): `flagproxy proxy` streaming from the server (`--proxy-streaming-option`, polling every
  60 s), asked `POST /proxy` on one kept-alive connection until it answers the new state.

One machine, one wall clock. Prints p50, p99, max and min in ms. A wall-clock figure on a shared, loaded
machine: read it as an order of magnitude, and compare runs taken together, never across days.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks.load.processes import Service, fetch, free_port

NODE_PROJECT = Path(__file__).resolve().parent.parent / "tests" / "sdk" / "node"
ADMIN = "*:*.bench-admin"
CLIENT = "*:development.bench-client"
PROXY_KEY = "bench-proxy-key"
POSTGRES_ADMIN_URL = os.environ.get(
    "FLAGPROXY_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
VIAS = ("server", "replica", "edge", "proxy")


def admin(port: int, method: str, path: str, body: object = None) -> float:
    """The request; the wall-clock moment its 2xx arrived."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": ADMIN, "Content-Type": "application/json"}
    answer = fetch(port, method, path, headers, data)
    arrived = time.time()
    if not 200 <= answer.status < 300:
        raise RuntimeError(f"{method} {path}: {answer.status} {answer.body[:200]!r}")
    return arrived


def toggle(port: int, name: str, enabled: bool) -> float:
    path = f"/api/admin/projects/default/features/{name}/environments/development/"
    return admin(port, "POST", path + ("on" if enabled else "off"))


def create_flags(port: int, count: int) -> list[str]:
    names = [f"bench-{index:04d}" for index in range(count)]
    for name in names:
        admin(port, "POST", "/api/admin/projects/default/features", {"name": name})
    return names


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh database on the local PostgreSQL, dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"flagproxy_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def server_env(folder: Path, database_url: str | None, **extra: str) -> dict[str, str]:
    env = {**os.environ, "INIT_ADMIN_API_TOKENS": ADMIN, "INIT_CLIENT_API_TOKENS": CLIENT, **extra}
    if database_url:
        env["DATABASE_URL"] = database_url
    else:
        env["DATABASE_PATH"] = str(folder / "flags.db")
    return env


def start_server(name: str, folder: Path, env: dict[str, str], *args: str) -> Service:
    port = free_port()
    command = [sys.executable, "-m", "flagproxy", "server", "--host", "127.0.0.1", "--port", str(port), *args]
    server = Service.start(name, command, env, port, folder, Path.cwd())
    server.wait_until(lambda: fetch(port, "GET", "/health").status == 200, 60)
    return server


def start_edge(folder: Path, upstream: Service, *args: str) -> Service:
    port = free_port()
    command = [
        sys.executable, "-m", "flagproxy", "edge", "--upstream-url", f"http://127.0.0.1:{upstream.port}",
        "--tokens", CLIENT, "--interface", "127.0.0.1", "--port", str(port),
        "--metrics-interval-seconds", "3600", *args,
    ]  # fmt: skip
    edge = Service.start("edge", command, dict(os.environ), port, folder, Path.cwd())
    ready = {"Authorization": CLIENT}
    edge.wait_until(lambda: fetch(port, "GET", "/api/client/features", ready).status == 200, 60)
    return edge


def start_proxy(folder: Path, upstream: Service, streaming: str) -> Service:
    port = free_port()
    env = {
        **os.environ,
        "UNLEASH_URL": f"http://127.0.0.1:{upstream.port}/api",
        "UNLEASH_API_TOKEN": CLIENT,
        "UNLEASH_PROXY_CLIENT_KEYS": PROXY_KEY,
        "UNLEASH_FETCH_INTERVAL": "60000",
        "UNLEASH_METRICS_INTERVAL": "0",
        "PROXY_HOST": "127.0.0.1",
        "PORT": str(port),
        "TMPDIR": str(folder),  # no backup from an earlier run
    }
    command = [sys.executable, "-m", "flagproxy", "proxy", *streaming.split()]
    proxy = Service.start("proxy", command, env, port, folder, Path.cwd())
    proxy.wait_until(lambda: fetch(port, "GET", "/proxy/health").status == 200, 60)
    return proxy


class NodeFollower:
    """The official Node SDK in streaming mode against `port`; `seen(name, enabled)` waits for the
    `changed` event that holds that state and returns its wall-clock moment."""

    def __init__(self, port: int) -> None:
        job = {
            "url": f"http://127.0.0.1:{port}/api/",
            "token": CLIENT,
            "appName": "realtime-bench",
            "mode": {"type": "streaming"},
            "refreshInterval": 60000,
        }
        self.process = subprocess.Popen(
            ["node", "follow.js"], cwd=NODE_PROJECT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(job).encode())
        self.process.stdin.close()
        self.lines: queue.Queue[dict] = queue.Queue()
        stdout = self.process.stdout
        threading.Thread(
            target=lambda: [self.lines.put(json.loads(line)) for line in stdout], daemon=True
        ).start()

    def seen(self, name: str, enabled: bool) -> float:
        while True:
            line = self.lines.get(timeout=60)
            if line.get("mode", {}).get("to") == "polling":
                raise RuntimeError(f"the SDK left streaming: {line}")
            if line.get("flags", {}).get(name) is enabled:
                return float(line["at"]) / 1000

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


class ProxyAsker:
    """POST /proxy on one kept-alive connection, asked again at once until it answers the state."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": PROXY_KEY, "Content-Type": "application/json"}

    def seen(self, name: str, enabled: bool) -> float:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.connection.request("POST", "/proxy", b'{"context":{}}', self.headers)
            answer = self.connection.getresponse()
            body = answer.read()
            at = time.time()
            if answer.status != 200:
                raise RuntimeError(f"POST /proxy: {answer.status} {body[:200]!r}")
            toggles = {toggle["name"] for toggle in json.loads(body)["toggles"]}
            if (name in toggles) is enabled:
                return at
        raise RuntimeError(f"POST /proxy never answered {name}={enabled}")

    def stop(self) -> None:
        self.connection.close()


def run(
    via: str,
    flags: int,
    changes: int,
    workers: int,
    database_url: str | None,
    proxy_streaming: str = "--streaming",
    edge_options: str = "",
) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="flagproxy-realtime-"))
    services: list[Service] = []
    reader: NodeFollower | ProxyAsker | None = None
    try:
        env = server_env(folder, database_url)
        writer = start_server("server", folder, env, "--workers", str(workers))
        services.append(writer)
        names = create_flags(writer.port, flags)
        if via == "replica":
            services.append(start_server("replica", folder, env, "--workers", str(workers)))
            reader = NodeFollower(services[-1].port)
        elif via == "edge":
            services.append(start_edge(folder, writer, "--streaming", *edge_options.split()))
            reader = NodeFollower(services[-1].port)
        elif via == "proxy":
            services.append(start_proxy(folder, writer, proxy_streaming))
            reader = ProxyAsker(services[-1].port)
        else:
            reader = NodeFollower(writer.port)
        seen: Callable[[str, bool], float] = reader.seen
        seen(names[-1], False)  # hydrated
        latencies = []
        state = dict.fromkeys(names, False)
        for index in range(changes):
            name = names[index % flags]
            state[name] = not state[name]
            answered = toggle(writer.port, name, state[name])
            latencies.append((seen(name, state[name]) - answered) * 1000)
    finally:
        if reader is not None:
            reader.stop()
        for service in reversed(services):
            service.stop()
    return {
        "p50_ms": statistics.median(latencies),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies),
        "min_ms": min(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--via", choices=VIAS, default="server", help="who the reader reads from (server)")
    parser.add_argument("--flags", type=int, default=200)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1, help="of each server")
    database = parser.add_mutually_exclusive_group()
    database.add_argument("--database-url", help="postgresql://... (default: a fresh SQLite file)")
    database.add_argument(
        "--postgres",
        action="store_true",
        help=f"a fresh database on {POSTGRES_ADMIN_URL}, dropped afterwards",
    )
    parser.add_argument(
        "--proxy-streaming-option",
        default="--streaming",
        help="how `--via proxy` asks flagproxy proxy to stream from its upstream (--streaming)",
    )
    parser.add_argument(
        "--edge-option", default="", help="more options for `--via edge`'s edge (e.g. '--workers 2')"
    )
    args = parser.parse_args()
    if args.via == "replica" and not (args.database_url or args.postgres):
        parser.error("--via replica: the replicas share a PostgreSQL database (--postgres or --database-url)")
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(postgres_database()) if args.postgres else args.database_url
        streaming = args.proxy_streaming_option
        figures = run(args.via, args.flags, args.changes, args.workers, url, streaming, args.edge_option)
    backend = "PostgreSQL" if url else "SQLite"
    via = " ".join([args.via, args.edge_option]).strip()
    print(
        f"via {via}, {args.changes} changes at {args.flags} flags, {backend}, {args.workers} worker(s): "
        + ", ".join(f"{key} {value:.1f}" for key, value in figures.items())
    )


if __name__ == "__main__":
    main()
