"""Fan-out: one serving process holding many idle `/api/client/streaming` connections, its memory per
stream and the time one change takes to reach all of them.

    python -m benchmarks.fanout [--via server|edge] [--streams 10000] [--clients 2] [--flags 200]
                                [--postgres | --database-url URL] [--smoke]

Starts `flagproxy server` (one worker, MAX_STREAMS above --streams; a fresh SQLite file unless
--postgres/--database-url) with --flags flags, and with `--via edge` a `flagproxy edge --streaming` whose
upstream it is, the streams then opened on the edge. --clients processes of benchmarks/fanout_client.py
open the streams (raw asyncio sockets). Memory per stream: the serving process's RSS with every stream
open and hydrated, less its RSS after one stream was served and closed, divided by the streams. Then one
flag is switched through the admin API; fan-out time: from the 2xx to the moment the last stream read its
`unleash-updated` (one machine, one wall clock), with the first arrival and the median beside it, and the
CPU time the serving process used meanwhile (change_cpu_s: with `--via server`, the change's own request
too; less noisy than the wall clock on a loaded machine).

The serving process is the server's (or edge's) Sanic worker. A wall-clock figure on a shared machine:
read it as an order of magnitude. --smoke: 200 streams, 20 flags, a check that it runs (a few seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.load.processes import Service, children, is_sanic_worker, rss_mib
from benchmarks.realtime import (
    CLIENT,
    create_flags,
    percentile,
    postgres_database,
    server_env,
    start_edge,
    start_server,
    toggle,
)


def serving_pid(service: Service) -> int:
    """The process that holds the streams: the Sanic worker (the main process if none)."""
    workers = [pid for pid in children(service.process.pid) if is_sanic_worker(pid)]
    return workers[0] if workers else service.process.pid


def serving_rss(service: Service) -> float:
    """RSS in MiB of the process that holds the streams."""
    value = rss_mib(serving_pid(service))
    assert value is not None, "the serving process is gone"
    return value


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_streams(port: int, streams: int, clients: int) -> list[subprocess.Popen[str]]:
    """`clients` processes holding `streams` streams between them, every one hydrated."""
    shares = [streams // clients + (1 if index < streams % clients else 0) for index in range(clients)]
    command = [sys.executable, "-m", "benchmarks.fanout_client", "--port", str(port), "--token", CLIENT]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
    started = [subprocess.Popen([*command, "--streams", str(share)], **pipes) for share in shares]
    failed = 0
    for process in started:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("a stream client ended before opening its streams")
        failed += json.loads(line)["failed"]
    if failed:
        raise RuntimeError(f"{failed} of {streams} streams were refused or never hydrated")
    return started


def arrivals(started: list[subprocess.Popen[str]]) -> list[float]:
    for process in started:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    found: list[float] = []
    for process in started:
        assert process.stdout is not None
        found += json.loads(process.stdout.readline())["arrivals"]
        process.wait(30)
    return found


def run(via: str, streams: int, clients: int, flags: int, database_url: str | None) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="flagproxy-fanout-"))
    services: list[Service] = []
    started: list[subprocess.Popen[str]] = []
    try:
        env = server_env(folder, database_url, MAX_STREAMS=str(streams + 100))
        server = start_server("server", folder, env, "--workers", "1")
        services.append(server)
        names = create_flags(server.port, flags)
        serving = server
        if via == "edge":
            serving = start_edge(folder, server, "--streaming", "--max-streams", str(streams + 100))
            services.append(serving)
        # One stream served and closed first: the hydration and whatever a first stream builds are in
        # the baseline, not counted per stream.
        for process in open_streams(serving.port, 1, 1):
            process.kill()
            process.wait()
        time.sleep(1)
        before = serving_rss(serving)
        opened_at = time.monotonic()
        started = open_streams(serving.port, streams, clients)
        opening = time.monotonic() - opened_at
        time.sleep(2)
        after = serving_rss(serving)
        pid = serving_pid(serving)
        cpu_before = cpu_seconds(pid)
        answered = toggle(server.port, names[0], True)
        found = arrivals(started)
        cpu = cpu_seconds(pid) - cpu_before
        started = []
        if len(found) < streams:
            raise RuntimeError(f"only {len(found)} of {streams} streams got the change")
        delays = [(at - answered) * 1000 for at in found]
    finally:
        for process in started:
            process.kill()
        for service in reversed(services):
            service.stop()
    return {
        "rss_before_mib": before,
        "rss_after_mib": after,
        "kib_per_stream": (after - before) * 1024 / streams,
        "opening_s": opening,
        "first_ms": min(delays),
        "p50_ms": statistics.median(delays),
        "p99_ms": percentile(delays, 0.99),
        "last_ms": max(delays),
        "change_cpu_s": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--via", choices=("server", "edge"), default="server", help="who holds the streams")
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=2, help="processes holding the streams (2)")
    parser.add_argument("--flags", type=int, default=200)
    database = parser.add_mutually_exclusive_group()
    database.add_argument("--database-url", help="postgresql://... (default: a fresh SQLite file)")
    database.add_argument("--postgres", action="store_true", help="a fresh database on the local PostgreSQL")
    parser.add_argument("--smoke", action="store_true", help="200 streams at 20 flags: a check that it runs")
    args = parser.parse_args()
    if args.smoke:
        args.streams, args.flags, args.clients = 200, 20, 1
    if min(args.streams, args.clients, args.flags) < 1:
        parser.error("--streams, --clients and --flags must be at least 1")
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < args.streams + 1000:
        parser.error(f"the open-file limit ({hard}) is too low for {args.streams} streams")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the server inherits it
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(postgres_database()) if args.postgres else args.database_url
        figures = run(args.via, args.streams, args.clients, args.flags, url)
    print(
        f"fan-out via {args.via}, {args.streams} streams at {args.flags} flags: "
        + ", ".join(f"{key} {value:.1f}" for key, value in figures.items())
    )


if __name__ == "__main__":
    main()
