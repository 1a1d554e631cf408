"""Instructions a request costs, before and after a change: the same product, scenario and requests run
under callgrind from two source trees, in alternating rounds.

    python -m benchmarks.instructions --before ../main-at-start --after . [--product proxy|edge]
        [--scenario post-unique] [--flags 200] [--requests 1000] [--rounds 2]

Each tree is a checkout of this repository with its compiled evaluator built (`pip install -e .` there, or
the .so copied when _eval.pyx did not change); the process measured runs that tree's `flagproxy` (its
PYTHONPATH), against the same loopback upstream (benchmarks/load/upstream.py, this tree's). `proxy` is
`flagproxy proxy --workers 1` (POST/GET /proxy with a client key); `edge` is `flagproxy edge` with one
environment (`/api/frontend` with a frontend token, or `/api/client/features` with a client token).
Counting follows benchmarks/callgrind.py (an idle phase's clock work taken out). Prints each round's
instructions a request, and after/before per round and their median: under 1 the change costs fewer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from benchmarks.callgrind import REPO, Counted, check_tools, count, loopback_upstream
from benchmarks.load import scenarios
from benchmarks.load.edge import client_token, edge_scenario
from benchmarks.load.processes import free_port


def measure(label: str, tree: Path, upstream_port: int, args: argparse.Namespace, work: Path) -> Counted:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0", "PORT": str(port)}
    if args.product == "proxy":
        scenario = scenarios.SCENARIOS_BY_NAME[args.scenario]
        env |= {
            "SERVICE_URL": f"http://127.0.0.1:{upstream_port}/api",
            "SERVICE_API_TOKEN": scenarios.UPSTREAM_TOKEN,
            "SERVICE_PROXY_CLIENT_KEYS": scenarios.CLIENT_KEY,
            "EXP_SERVER_SIDE_SDK_CONFIG_TOKENS": scenarios.SERVER_TOKEN,
            "PROXY_HOST": "127.0.0.1",
        }
        command = ["proxy", "--workers", "1"]
        health = "/proxy/health"
    else:
        scenario = edge_scenario(args.scenario)
        env |= {"INTERFACE": "127.0.0.1"}
        command = [
            "edge", "--upstream-url", f"http://127.0.0.1:{upstream_port}",
            "--tokens", client_token("development"), "--metrics-interval-seconds", "3600",
        ]  # fmt: skip
        health = "/internal-backstage/ready"
    return count(
        label,
        command,
        env,
        work,
        port=port,
        health=health,
        workload=scenarios.workload(scenario, args.flags),
        requests=args.requests,
        idle=args.idle,
        dilation=args.dilation,
        cwd=tree,  # else the working directory's flagproxy, ahead of PYTHONPATH, is the one counted
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the source tree before the change")
    parser.add_argument("--after", type=Path, default=REPO, help="the source tree after it (default: this)")
    parser.add_argument("--product", choices=("proxy", "edge"), default="proxy")
    parser.add_argument(
        "--scenario",
        default="post-unique",
        choices=("post-unique", "post-rotating", "get-query", "get-empty", "client-features"),
        help="what is sent (benchmarks/load/scenarios.py; default post-unique)",
    )
    parser.add_argument("--flags", type=int, default=200, help="flags in the snapshot (default: 200)")
    parser.add_argument("--requests", type=int, default=1000, help="requests counted (default: 1000)")
    parser.add_argument("--rounds", type=int, default=2, help="before/after pairs, order alternating (2)")
    parser.add_argument("--idle", type=float, default=8.0, help="seconds counted without requests (8)")
    parser.add_argument(
        "--dilation", type=float, default=25.0, help="flush and hand-off intervals stretched by (25)"
    )
    args = parser.parse_args()
    check_tools()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    work = Path(tempfile.mkdtemp(prefix="flagproxy-instructions-"))
    rounds: list[dict[str, Counted]] = []
    with loopback_upstream(args.flags) as upstream_port:
        for i in range(args.rounds):
            order = ("before", "after") if i % 2 == 0 else ("after", "before")
            rounds.append(
                {name: measure(f"{name}-{i}", trees[name], upstream_port, args, work) for name in order}
            )
    print(
        f"{args.product}, {args.scenario}, {args.flags} flags, {args.requests} requests a round "
        f"(callgrind; before {trees['before']}, after {trees['after']})"
    )
    print("| round | before, instructions a request | after | after / before |")
    print("|---:|---:|---:|---:|")
    ratios = []
    for i, counted in enumerate(rounds, start=1):
        before, after = counted["before"].per_request, counted["after"].per_request
        ratios.append(after / before)
        print(f"| {i} | {before:,.0f} | {after:,.0f} | {after / before:.4f} |")
    print(f"median after / before: {statistics.median(ratios):.4f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
