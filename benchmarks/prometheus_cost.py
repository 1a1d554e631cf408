"""What the Prometheus series cost a proxy worker, in CPU instructions: `flagproxy proxy` run under
valgrind's callgrind with ENABLE_PROMETHEUS on and off, the same post-unique requests sent to each.

    python -m benchmarks.prometheus_cost [--flags 200] [--requests 1000] [--idle 8]

Instruction counts do not depend on what else the machine runs (the same binary, inputs and environment
give the same count), so this shows a difference of a fraction of a percent that the load benchmark's
req/s, swinging by a few percent from round to round on a shared machine, cannot
(`python -m benchmarks.load --prometheus-off` is the end-to-end figure; benchmarks/README.md).

Each proxy is one process (`--workers 1`: its sync and its one worker together), counted as
benchmarks/callgrind.py counts: an idle phase (what runs by the clock) taken out of `--requests` POST
/proxy with a unique userId each, on one keep-alive connection, leaving the instructions a request costs
(the series' per-request work included: the wrapper, and the fold of its duration and status at the next
flush). Needs valgrind (Debian package `valgrind`, which has callgrind_control).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from benchmarks.callgrind import Counted, check_tools, count, loopback_upstream
from benchmarks.load import scenarios
from benchmarks.load.processes import free_port
from flagproxy.http import series

REPO = Path(__file__).resolve().parent.parent


def measure(label: str, upstream_port: int, args: argparse.Namespace, work: Path, **extra: str) -> Counted:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHONHASHSEED": "0",
        "SERVICE_URL": f"http://127.0.0.1:{upstream_port}/api",
        "SERVICE_API_TOKEN": scenarios.UPSTREAM_TOKEN,
        "SERVICE_PROXY_CLIENT_KEYS": scenarios.CLIENT_KEY,
        "PORT": str(port),
        "PROXY_HOST": "127.0.0.1",
        **extra,
    }
    return count(
        label,
        ["proxy", "--workers", "1"],
        env,
        work,
        port=port,
        health="/proxy/health",
        workload=scenarios.workload(scenarios.SCENARIOS_BY_NAME["post-unique"], args.flags),
        requests=args.requests,
        idle=args.idle,
        dilation=args.dilation,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flags", type=int, default=200, help="flags in the snapshot (default: 200)")
    parser.add_argument("--requests", type=int, default=1000, help="POST /proxy counted (default: 1000)")
    parser.add_argument(
        "--idle", type=float, default=8.0, help="seconds counted without requests (default: 8)"
    )
    parser.add_argument(
        "--dilation",
        type=float,
        default=25.0,
        help="how many times slower a request runs under callgrind; the flush and hand-off intervals are "
        "stretched by it (default: 25; the run prints how many requests a flush saw)",
    )
    args = parser.parse_args()
    check_tools()
    work = Path(tempfile.mkdtemp(prefix="flagproxy-prometheus-cost-"))
    with loopback_upstream(args.flags) as upstream_port:
        on = measure("series-on", upstream_port, args, work)
        off = measure("series-off", upstream_port, args, work, ENABLE_PROMETHEUS="false")
    print(f"{args.flags} flags, {args.requests} post-unique requests, one process (callgrind, {work})")
    print("| series | instructions a request | by the clock, a second (idle) |")
    print("|---|---:|---:|")
    for counted in (on, off):
        print(f"| {counted.label} | {counted.per_request:,.0f} | {counted.clock_rate:,.0f} |")
    print(f"series on / off, instructions a request: {on.per_request / off.per_request:.4f}")
    slowed = (on.request_seconds + off.request_seconds) / (2 * args.requests) * 1000
    per_flush = series.FLUSH_SECONDS * args.dilation / (slowed / 1000)
    print(
        f"a request took {slowed:.1f} ms under callgrind, so a flush saw about {per_flush:,.0f} requests "
        f"(--dilation {args.dilation:g}; natively a worker at 4,000 req/s sees about 1,000)"
    )
    slowed = (on.request_seconds + off.request_seconds) / (2 * args.requests) * 1000
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
