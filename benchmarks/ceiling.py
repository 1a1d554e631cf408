"""Instructions a request costs the proxy against the Python ceiling, and where the proxy's go.

    python -m benchmarks.ceiling [--flags 350] [--scenario post-unique] [--requests 1000] [--top 15]

The ceiling is benchmarks/load/baseline.py: a bare Sanic worker answering a fixed body, the same bytes,
status and headers as the proxy's typical answer to the scenario (asked of a real proxy first), so
proxy ÷ ceiling says how much the proxy adds to HTTP alone. Both run one process under callgrind
(benchmarks/callgrind.py: the same requests on one keep-alive connection, the clock's work taken out), so
the figures do not move with the machine's load. The proxy runs as `flagproxy proxy --workers 1` with its
defaults (Prometheus series on).

Then the proxy's request phase, split by where its instructions run (self cost per shared object:
the interpreter is Sanic's request handling and every line of our Python; `_eval` is the compiled
evaluator; libc is mostly memcpy of answer bytes), and the `--top` functions of compiled code by
inclusive cost. Python functions are not told apart: Python 3.11 shows callgrind only its interpreter
loop. Needs valgrind.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.callgrind import REPO, check_tools, count, loopback_upstream, wait_http
from benchmarks.load import baseline, scenarios
from benchmarks.load.probe import baseline_route
from benchmarks.load.processes import fetch, free_port

# callgrind_annotate's function lines: "  1,234 (12.3%)  file:function [object]" (the object may be absent).
_LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?: \[(.+)\])?$")


def proxy_env(upstream_port: int, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHONHASHSEED": "0",
        "SERVICE_URL": f"http://127.0.0.1:{upstream_port}/api",
        "SERVICE_API_TOKEN": scenarios.UPSTREAM_TOKEN,
        "SERVICE_PROXY_CLIENT_KEYS": scenarios.CLIENT_KEY,
        "EXP_SERVER_SIDE_SDK_CONFIG_TOKENS": scenarios.SERVER_TOKEN,
        "PROXY_HOST": "127.0.0.1",
        "PORT": str(port),
    }


def typical_answer_route(upstream_port: int, scenario: scenarios.Scenario, flags: int, work: Path) -> Path:
    """The ceiling's routes file: a real proxy's median-sized answer to the scenario's sample requests."""
    port = free_port()
    proxy = subprocess.Popen(
        [sys.executable, "-m", "flagproxy", "proxy", "--workers", "1"],
        env=proxy_env(upstream_port, port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(port, "/proxy/health", 60)
        load = scenarios.workload(scenario, flags)
        answers = [
            fetch(port, scenario.method, scenario.path + request.query, load.headers, request.body)
            for request in load.samples()
        ]
    finally:
        proxy.terminate()
        proxy.wait(30)
    answers = [a for a in answers if a.status == scenario.expected_status]
    if not answers:
        raise RuntimeError(f"the proxy never answered {scenario.expected_status} to {scenario.name}")
    typical = sorted(answers, key=lambda a: len(a.body))[len(answers) // 2]
    routes = work / "routes.json"
    routes.write_text(json.dumps([baseline_route(scenario, typical)]))
    return routes


def breakdown(dump: Path, top: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]], int]:
    """(self cost per shared object, the `top` compiled functions by inclusive cost, the total)."""

    def annotate(*options: str) -> list[tuple[int, str, str]]:
        out = subprocess.run(
            ["callgrind_annotate", "--threshold=100", *options, str(dump)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows = []
        for line in out.splitlines():
            found = _LINE.match(line)
            if found and "PROGRAM TOTALS" not in line:
                rows.append((int(found.group(1).replace(",", "")), found.group(2), found.group(3) or ""))
        return rows

    total = int(re.search(r"^totals: (\d+)", dump.read_text(errors="replace"), re.MULTILINE).group(1))
    by_object: collections.Counter[str] = collections.Counter()
    for cost, _, obj in annotate("--inclusive=no"):
        if obj:  # lines without an object repeat inlined parts of one that has its own line
            by_object[Path(obj).name.split(".cpython")[0]] += cost
    # Inclusive costs over half the phase are the event loop's dispatch (every request runs inside it),
    # and addresses without a symbol say nothing: both left out.
    compiled = [
        (f"{Path(obj).name.split('.cpython')[0]}: {where.rsplit(':', 1)[-1]}", cost)
        for cost, where, obj in annotate("--inclusive=yes")
        if obj and "libpython" not in obj and not where.startswith("???") and cost < total / 2
    ]
    return by_object.most_common(), compiled[:top], total


def _events(work: Path, label: str) -> dict[str, int]:
    """Every event callgrind counted in `label`'s last dump (its request phase): Ir, and with
    --cache-sim=yes the I1, D1 and last-level misses."""
    dumps = sorted(glob.glob(str(work / f"callgrind.{label}.*.*")), key=lambda p: int(p.rsplit(".", 1)[1]))
    text = Path(dumps[-1]).read_text(errors="replace")
    names = re.search(r"^events: (.+)$", text, re.MULTILINE).group(1).split()
    totals = re.search(r"^totals: (.+)$", text, re.MULTILINE).group(1).split()
    return dict(zip(names, (int(t) for t in totals), strict=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flags", type=int, default=350, help="flags in the snapshot (default: 350)")
    parser.add_argument(
        "--scenario",
        default="post-unique",
        choices=("post-unique", "post-rotating", "get-query"),
        help="what is sent (benchmarks/load/scenarios.py; default post-unique)",
    )
    parser.add_argument("--requests", type=int, default=1000, help="requests counted (default: 1000)")
    parser.add_argument("--idle", type=float, default=8.0, help="seconds counted without requests (8)")
    parser.add_argument(
        "--dilation", type=float, default=25.0, help="flush and hand-off intervals stretched by (25)"
    )
    parser.add_argument("--top", type=int, default=15, help="compiled functions listed (default: 15)")
    parser.add_argument(
        "--connections",
        type=int,
        default=1,
        help="keep-alive connections the requests are spread over, all at once (default 1; wrk's 50)",
    )
    args = parser.parse_args()
    check_tools()
    scenario = scenarios.SCENARIOS_BY_NAME[args.scenario]
    load = scenarios.workload(scenario, args.flags)
    work = Path(tempfile.mkdtemp(prefix="flagproxy-ceiling-"))
    common = {
        "workload": load,
        "requests": args.requests,
        "idle": args.idle,
        "dilation": args.dilation,
        "connections": args.connections,
    }
    with loopback_upstream(args.flags) as upstream_port:
        routes = typical_answer_route(upstream_port, scenario, args.flags, work)
        port = free_port()
        program = [
            "-m", "benchmarks.load.baseline", "--routes", str(routes), "--port", str(port), "--workers", "1",
        ]  # fmt: skip
        ceiling = count(
            "ceiling",
            [],
            {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "0"},
            work,
            port=port,
            health=baseline.HEALTH_PATH,
            program=program,
            path=baseline.route_path(scenario.name),
            **common,
        )
        port = free_port()
        proxy = count(
            "proxy",
            ["proxy", "--workers", "1"],
            proxy_env(upstream_port, port),
            work,
            port=port,
            health="/proxy/health",
            **common,
        )
    size = len(bytes.fromhex(json.loads(routes.read_text())[0]["body_hex"]))
    print(
        f"{args.scenario}, {args.flags} flags, {size:,}-byte answers, {args.requests} requests "
        f"(callgrind, one process each, {work})"
    )
    print("| server | instructions a request |")
    print("|---|---:|")
    print(f"| the ceiling (bare Sanic, fixed body) | {ceiling.per_request:,.0f} |")
    print(f"| flagproxy proxy | {proxy.per_request:,.0f} |")
    print(f"requests per instruction, proxy / ceiling: {ceiling.per_request / proxy.per_request:.3f}")
    for label in ("ceiling", "proxy"):  # with VALGRIND_OPTS=--cache-sim=yes: the request phase's misses
        events = _events(work, label)
        if len(events) > 1:
            per_request = ", ".join(f"{name} {value / args.requests:,.0f}" for name, value in events.items())
            print(f"{label}, request phase a request (idle phase not taken out): {per_request}")
    dumps = sorted(glob.glob(str(work / "callgrind.proxy.*.*")), key=lambda p: int(p.rsplit(".", 1)[1]))
    by_object, compiled, total = breakdown(Path(dumps[-1]), args.top)
    print("\nThe proxy's request phase by shared object (self cost, % of the phase):")
    for name, cost in by_object[:10]:
        print(f"  {cost / total:6.1%}  {name}")
    print("\nCompiled functions by inclusive cost (% of the phase; nested ones count inside their callers):")
    for name, cost in compiled:
        print(f"  {cost / total:6.1%}  {name}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
