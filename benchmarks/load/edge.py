"""`python -m benchmarks.load.edge`: `flagproxy edge` under wrk, beside `flagproxy proxy` in the same run.

    python -m benchmarks.load.edge --flags 200 --environments 4 --json edge.json

Against the loopback upstream (benchmarks/load/upstream.py, which also answers /edge/validate) it starts
`flagproxy proxy --workers 1`, `flagproxy edge` with one environment, `flagproxy edge` with N environments
(one client token each, the same 200 flags in each: N snapshots), and a one-worker fixed-body baseline;
then for each scenario it loads them one after the other with the same requests:

- post-unique, post-rotating, get-query: the proxy's /proxy with a client key, the edges' /api/frontend
  with a frontend token (the edge's figure over the proxy's is the issue's "within 10%");
- client-features: the edges' /api/client/features with a client token, the baseline serving the same
  bytes (the "0.85x of the fixed-body baseline");
- the N-environment edge is loaded with another environment's tokens in each scenario, so each of its
  rows is one environment's throughput, over the one-environment edge's;
- key-rotation (Edge's benchmark shape): 150 concurrent clients, each request a new random token, for the
  run's duration; every answer must be 401/403, and the upstream must have been asked about each token at
  most once. Latencies are reported (p50, p95, p99), not asserted: speed is measured here, not in tests.

The edges run one worker each, so the proxy runs one worker too.

    python -m benchmarks.load.edge --workers 2

compares instead `flagproxy edge --workers 2` with `flagproxy edge --workers 1` (one environment) in
paired alternating rounds (benchmarks/load/runner.py measure_paired) on post-unique, get-query and
client-features: requests per second and requests per CPU-second of each process group (main process and
workers), N workers over one.

Exit status 1 when any request failed or got an unexpected status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.load import wrk
from benchmarks.load.probe import baseline_route, probe
from benchmarks.load.processes import QUIET_TIMEOUT, Service, fetch, wait_until_quiet
from benchmarks.load.report import Row
from benchmarks.load.runner import Options, measure, measure_paired, stderr_log
from benchmarks.load.scenarios import SCENARIOS_BY_NAME, Scenario
from benchmarks.load.targets import (
    REPO,
    RunDirectory,
    Target,
    start_baseline,
    start_flagproxy,
    start_upstream,
)

FRONTEND_SCENARIOS = ("post-unique", "post-rotating", "get-query")
START_TIMEOUT = 60.0
ROTATION_CLIENTS = 150


def client_token(environment: str) -> str:
    return f"*:{environment}.load-client"


def frontend_token(environment: str) -> str:
    return f"*:{environment}.load-frontend"


def environment_names(count: int) -> list[str]:
    return ["development"] + [f"environment-{i}" for i in range(1, count)]


WORKER_SCENARIOS = ("post-unique", "get-query", "client-features")


def start_edge(
    run: RunDirectory, upstream: Service, name: str, environments: int, workers: int = 1, tree: Path = REPO
) -> Target:
    """`flagproxy edge --workers N` from source tree `tree` (another built checkout: a before/after pair)."""
    tokens = ",".join(client_token(e) for e in environment_names(environments))

    def build(port: int) -> tuple[list[str], dict[str, str]]:
        env = run.env(PORT=str(port), INTERFACE="127.0.0.1", PYTHONPATH=str(tree))
        command = [
            sys.executable, "-m", "flagproxy", "edge", "--upstream-url", f"http://127.0.0.1:{upstream.port}",
            "--tokens", tokens, "--metrics-interval-seconds", "3600",
        ]  # fmt: skip
        if (
            workers != 1
        ):  # a checkout from before `--workers` existed runs one worker, and knows no such option
            command += ["--workers", str(workers)]
        return command, env

    def wait(service: Service) -> None:
        service.wait_until(
            lambda: fetch(service.port, "GET", "/internal-backstage/ready").status == 200, START_TIMEOUT
        )

    return Target(name, run.launch(name, build, wait, tree), "sanic")


def edge_scenario(name: str, environment: str = "development") -> Scenario:
    if name == "client-features":
        base = SCENARIOS_BY_NAME[name]
        return replace(base, path="/api/client/features", token=client_token(environment))
    return replace(SCENARIOS_BY_NAME[name], path="/api/frontend", token=frontend_token(environment))


async def _rotation(port: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    url = f"http://127.0.0.1:{port}/api/frontend"
    stop_at = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=ROTATION_CLIENTS)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client() -> None:
            while time.monotonic() < stop_at:
                token = f"*:development.{secrets.token_hex(16)}"
                started = time.perf_counter()
                try:
                    async with session.get(url, headers={"Authorization": token}) as response:
                        await response.read()
                        status = str(response.status)
                except aiohttp.ClientError as error:
                    status = type(error).__name__
                latencies.append(time.perf_counter() - started)
                statuses[status] = statuses.get(status, 0) + 1

        await asyncio.gather(*(client() for _ in range(ROTATION_CLIENTS)))
    latencies.sort()

    def at(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 1)

    return {"requests": len(latencies), "statuses": statuses, "p50_ms": at(0.5), "p95_ms": at(0.95),
            "p99_ms": at(0.99)}  # fmt: skip


def key_rotation(edge: Target, upstream: Service, seconds: float) -> dict[str, Any]:
    before = json.loads(fetch(upstream.port, "GET", "/stats").body)
    result = asyncio.run(_rotation(edge.service.port, seconds))
    after = json.loads(fetch(upstream.port, "GET", "/stats").body)
    asked = after["tokens_asked"] - before["tokens_asked"]
    distinct = after["distinct_tokens_asked"] - before["distinct_tokens_asked"]
    refused = sum(n for code, n in result["statuses"].items() if code in ("401", "403"))
    result.update(
        tokens_asked_upstream=asked,
        asked_more_than_once=asked - distinct,
        errors=result["requests"] - refused + (asked - distinct),
    )
    return result


def compare_workers(args: argparse.Namespace) -> int:
    """`--workers N`: edge with N workers against edge with one, in paired alternating rounds."""
    options = _options(args)
    root = Path(tempfile.mkdtemp(prefix="flagproxy-edge-workers-"))
    directory = RunDirectory(root)
    services: list[Service] = []
    rows: list[Row] = []
    try:
        stderr_log(f"[{args.flags} flags] starting upstream, edge with 1 and with {args.workers} workers")
        upstream = start_upstream(directory, args.flags)
        services.append(upstream)
        one = start_edge(directory, upstream, "edge-1-worker", 1)
        services.append(one.service)
        many = start_edge(directory, upstream, f"edge-{args.workers}-workers", 1, args.workers)
        services.append(many.service)

        def settle() -> None:
            if wait_until_quiet([service.process.pid for service in services]) is None:
                stderr_log(f"services still busy after {QUIET_TIMEOUT:.0f} s; measuring anyway")

        for name in WORKER_SCENARIOS:
            scenario = edge_scenario(name)
            probes = {(t.name, name): probe(t, scenario, args.flags) for t in (one, many)}
            label = f"{args.workers} workers / 1"
            rows += measure_paired(
                [many, one], probes, scenario, args.flags, options, directory, stderr_log, settle, label
            )
    finally:
        for service in reversed(services):
            service.stop()
    print(_workers_markdown(rows, args.workers))
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows]}, indent=2))
    failed = any(r.errors for r in rows)
    if not failed and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        stderr_log(f"run directory kept: {root}")
    return 1 if failed else 0


def _workers_markdown(rows: list[Row], workers: int) -> str:
    lines = [
        f"| scenario | {workers} workers req/s | 1 worker req/s | req/s ratio (median of rounds) "
        "| req per CPU-s ratio | errors |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for many, one in zip(rows[::2], rows[1::2], strict=True):
        per_cpu = (
            f"{one.cpu_us_per_request / many.cpu_us_per_request:.3f}"
            if many.cpu_us_per_request and one.cpu_us_per_request
            else "-"
        )
        lines.append(
            f"| {many.scenario} | {many.requests_per_s:,.0f} | {one.requests_per_s:,.0f} | "
            f"{many.paired_ratio} ({many.paired_median}) | {per_cpu} | {many.errors + one.errors} |"
        )
    return "\n".join(lines)


def _options(args: argparse.Namespace) -> Options:
    return Options(
        flags=(args.flags,),
        scenarios=(),
        workers=1,
        baseline_workers=1,
        duration=args.duration,
        warmup=args.warmup,
        wrk=wrk.WrkOptions(args.threads, args.connections, 10, args.wrk_cpus),
        peer_node=False,
    )


def run(args: argparse.Namespace) -> int:
    options = _options(args)
    root = Path(tempfile.mkdtemp(prefix="flagproxy-edge-load-"))
    directory = RunDirectory(root)
    services: list[Service] = []
    rows: list[Row] = []
    rotation: dict[str, Any] = {}
    try:
        stderr_log(
            f"[{args.flags} flags] starting upstream, proxy (1 worker), edge (1 and {args.environments} "
            "environments)"
        )
        upstream = start_upstream(directory, args.flags)
        services.append(upstream)
        proxy = start_flagproxy(directory, upstream, 1)
        services.append(proxy.service)
        edge_one = start_edge(directory, upstream, "edge", 1)
        services.append(edge_one.service)
        edge_many = start_edge(directory, upstream, f"edge-{args.environments}env", args.environments)
        services.append(edge_many.service)
        # The N-environment edge is loaded with another environment's token in each scenario, so every
        # figure of it is one environment's, and not always the first one's.
        others = environment_names(args.environments)[1:] or ["development"]
        for index, name in enumerate(FRONTEND_SCENARIOS):
            many = edge_scenario(name, others[index % len(others)])
            pairs = [
                (proxy, SCENARIOS_BY_NAME[name]),
                (edge_one, edge_scenario(name)),
                (edge_many, many),
            ]
            rows += [
                measure(t, probe(t, s, args.flags), args.flags, options, directory, stderr_log)
                for t, s in pairs
            ]
        features = edge_scenario("client-features")
        many_features = edge_scenario("client-features", others[-1])
        edge_probe = probe(edge_one, features, args.flags)
        if edge_probe.typical is not None:
            baseline = start_baseline(directory, [baseline_route(features, edge_probe.typical)], 1)
            services.append(baseline.service)
            base_probe = probe(baseline, features, args.flags, given=edge_probe.workload)
            rows.append(measure(baseline, base_probe, args.flags, options, directory, stderr_log))
        rows.append(measure(edge_one, edge_probe, args.flags, options, directory, stderr_log))
        rows.append(
            measure(
                edge_many,
                probe(edge_many, many_features, args.flags),
                args.flags,
                options,
                directory,
                stderr_log,
            )
        )
        stderr_log(
            f"[{args.flags} flags] key rotation: {ROTATION_CLIENTS} clients, random tokens, {args.duration} s"
        )
        rotation = key_rotation(edge_one, upstream, args.duration)
    finally:
        for service in reversed(services):
            service.stop()
    ratios = _ratios(rows)
    print(_markdown(rows, ratios, rotation))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rows": [asdict(r) for r in rows], "ratios": ratios, "key_rotation": rotation}, indent=2
            )
        )
    failed = any(r.errors for r in rows) or rotation.get("errors", 1) > 0
    if not failed and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        stderr_log(f"run directory kept: {root}")
    return 1 if failed else 0


def _ratios(rows: list[Row]) -> dict[str, float | None]:
    by = {(r.scenario, r.target): r.requests_per_s for r in rows}
    found: dict[str, float | None] = {}
    many = next((r.target for r in rows if r.target.startswith("edge-")), None)
    for name in FRONTEND_SCENARIOS:
        proxy, edge = by.get((name, "flagproxy")), by.get((name, "edge"))
        found[f"{name}: edge / proxy"] = round(edge / proxy, 3) if proxy and edge else None
        found[f"{name}: {many} / edge"] = (
            round(by[(name, many)] / edge, 3) if edge and by.get((name, many)) else None
        )
    base, edge = by.get(("client-features", "baseline")), by.get(("client-features", "edge"))
    found["client-features: edge / baseline"] = round(edge / base, 3) if base and edge else None
    many_features = by.get(("client-features", many))
    found[f"client-features: {many} / edge"] = (
        round(many_features / edge, 3) if edge and many_features else None
    )
    return found


def _markdown(rows: list[Row], ratios: dict[str, float | None], rotation: dict[str, Any]) -> str:
    lines = ["| scenario | target | req/s | p50 ms | p99 ms | errors |", "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r.scenario} | {r.target} | {r.requests_per_s:,.0f} | {r.p50_ms} | {r.p99_ms} | {r.errors} |"
        )
    lines += ["", "| ratio | value |", "|---|---:|"]
    lines += [f"| {name} | {'-' if value is None else f'{value:.2f}x'} |" for name, value in ratios.items()]
    if rotation:
        lines += [
            "",
            f"key rotation: {rotation['requests']:,} requests from {ROTATION_CLIENTS} clients, statuses "
            f"{rotation['statuses']}, p50 {rotation['p50_ms']} ms, p95 {rotation['p95_ms']} ms, "
            f"p99 {rotation['p99_ms']} ms; upstream asked about {rotation['tokens_asked_upstream']:,} "
            "tokens, "
            f"{rotation['asked_more_than_once']} more than once",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.load.edge",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--flags", type=int, default=200, help="flags per environment (default 200)")
    parser.add_argument("--environments", type=int, default=4, help="environments of the second edge (4)")
    parser.add_argument("--duration", type=int, default=10, help="seconds of each measured run (10)")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of wrk before each run (2)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (2)")
    parser.add_argument("--connections", type=int, default=50, help="wrk connections (50)")
    parser.add_argument(
        "--wrk-cpus",
        metavar="LIST",
        help="CPUs wrk runs on (taskset -c LIST, e.g. 1; default any): keeps the load generator off the "
        "other cores, so that N workers have cores to use",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="compare edge with N workers against edge with one instead (paired rounds)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the run's directory")
    parser.add_argument(
        "--smoke", action="store_true", help="50 flags, 2 environments, 1 s a run: CI's check"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.flags, args.environments, args.duration, args.warmup = 50, 2, 1, 0
    if min(args.flags, args.environments, args.duration, args.threads) < 1 or args.warmup < 0:
        parser.error("--flags, --environments, --duration and --threads must be at least 1")
    if not wrk.available():
        parser.error("wrk is not installed (apt-get install wrk)")
    if args.workers is not None:
        if args.workers < 2:
            parser.error("--workers: compare at least 2 workers with one")
        return compare_workers(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
