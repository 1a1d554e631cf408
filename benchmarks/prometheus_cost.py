"""What the Prometheus series cost a proxy worker, in CPU instructions: `flagproxy proxy` run under
valgrind's callgrind with ENABLE_PROMETHEUS on and off, the same post-unique requests sent to each.

    python -m benchmarks.prometheus_cost [--flags 200] [--requests 1000] [--idle 8]

Instruction counts do not depend on what else the machine runs (the same binary, inputs and environment
give the same count), so this shows a difference of a fraction of a percent that the load benchmark's
req/s, swinging by a few percent from round to round on a shared machine, cannot
(`python -m benchmarks.load --prometheus-off` is the end-to-end figure; benchmarks/README.md).

Each proxy is one process (`--workers 1`: its sync and its one worker together), started with
instrumentation off. Counting is switched on (`callgrind_control`) for two phases: `--idle` seconds with
no request (what runs by the clock: the series' flush every 0.25 s, the follower, the sync), then
`--requests` POST /proxy with a unique userId each, on one keep-alive connection. Under valgrind a request
takes some fifty times longer than natively, so the clock's work would weigh fifty times too much; the
idle phase gives its rate, which is taken out of the request phase, leaving the instructions a request
costs (the series' per-request work included: the wrapper, and the fold of its duration and status at the
next flush). Needs valgrind (Debian package `valgrind`, which has callgrind_control).
"""

from __future__ import annotations

import argparse
import glob
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.load import scenarios
from benchmarks.load.processes import fetch, free_port
from flagproxy.http import series as prometheus
from flagproxy.sync.spool import HANDOFF_SECONDS

REPO = Path(__file__).resolve().parent.parent

# `flagproxy proxy` with the intervals at which a worker hands its counts on stretched by the first
# argument: under valgrind a request takes that many times longer, so a flush or a hand-off sees as many
# requests as it would natively (about a thousand at 4,000 req/s a worker), and what it costs a request is
# not multiplied by the slowdown.
LAUNCH = """
import sys
from flagproxy.http import series as prometheus
from flagproxy.instance import follower
from flagproxy.cli import main
dilation = float(sys.argv.pop(1))
prometheus.FLUSH_SECONDS *= dilation
follower.HANDOFF_SECONDS *= dilation
sys.exit(main())
"""


@dataclass
class Counted:
    label: str
    idle_instructions: int
    idle_seconds: float
    request_instructions: int
    request_seconds: float
    requests: int

    @property
    def clock_rate(self) -> float:
        """Instructions a second that run by the clock, not by requests."""
        return self.idle_instructions / self.idle_seconds

    @property
    def per_request(self) -> float:
        by_clock = self.clock_rate * self.request_seconds
        return (self.request_instructions - by_clock) / self.requests


def _wait_http(port: int, path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if fetch(port, "GET", path).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"nothing answered 200 on port {port}{path} within {timeout:.0f} s")


def _send(port: int, workload: scenarios.Workload, first: int, count: int) -> None:
    assert workload.unique is not None
    prefixes, suffixes = workload.unique
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for i in range(first, first + count):
        k = i % len(prefixes)
        connection.request(
            "POST", "/proxy", body=prefixes[k] + f"u-{i}".encode() + suffixes[k], headers=workload.headers
        )
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"POST /proxy answered {response.status}")
    connection.close()


def _control(pid: int, work: Path, *args: str) -> None:
    # The proxy's TMPDIR is where valgrind put the pipes callgrind_control talks through.
    env = {**os.environ, "TMPDIR": str(work)}
    done = subprocess.run(["callgrind_control", *args, str(pid)], env=env, capture_output=True, text=True)
    if done.returncode != 0 or "OK" not in done.stdout:
        raise RuntimeError(f"callgrind_control {' '.join(args)} {pid}: {done.stdout}{done.stderr}")


def _dump(pid: int, work: Path, prefix: str) -> int:
    """Ask for a dump (counters zeroed after it) and wait until callgrind has written it: its total."""
    before = len(glob.glob(prefix + ".*"))
    _control(pid, work, "-d")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        paths = glob.glob(prefix + ".*")
        if len(paths) > before:
            path = max(paths, key=lambda p: int(p.rsplit(".", 1)[1]))
            found = re.search(r"^totals: (\d+)", Path(path).read_text(errors="replace"), re.MULTILINE)
            if found:  # the last line callgrind writes
                return int(found.group(1))
        time.sleep(0.05)
    raise RuntimeError(f"callgrind wrote no dump for {prefix}")


def measure(label: str, upstream_port: int, args: argparse.Namespace, work: Path, **extra: str) -> Counted:
    port = free_port()
    prefix = str(work / f"callgrind.{label}")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHONHASHSEED": "0",
        "TMPDIR": str(work),
        "SERVICE_URL": f"http://127.0.0.1:{upstream_port}/api",
        "SERVICE_API_TOKEN": scenarios.UPSTREAM_TOKEN,
        "SERVICE_PROXY_CLIENT_KEYS": scenarios.CLIENT_KEY,
        "PORT": str(port),
        "PROXY_HOST": "127.0.0.1",
        **extra,
    }
    command = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={prefix}.%p",
        sys.executable, "-c", LAUNCH, str(args.dilation), "proxy", "--workers", "1",
    ]  # fmt: skip
    log = open(work / f"{label}.log", "wb")  # noqa: SIM115 (closed below, after the process)
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_http(port, "/proxy/health", 300)
        workload = scenarios.workload(scenarios.SCENARIOS_BY_NAME["post-unique"], args.flags)
        _send(port, workload, 0, 100)  # warm: code paths, caches, the allocator's arenas
        # ... and the series' first writes (a file's new keys), at the next hand-off and flush: one-off
        # work that would otherwise land in the idle phase and be taken out of every request.
        time.sleep((HANDOFF_SECONDS + prometheus.FLUSH_SECONDS) * args.dilation + 1)
        pid_prefix = f"{prefix}.{process.pid}"
        _control(process.pid, work, "-i", "on")
        started = time.monotonic()
        time.sleep(args.idle)
        idle = _dump(process.pid, work, pid_prefix)
        idle_seconds = time.monotonic() - started
        started = time.monotonic()
        _send(port, workload, 1_000_000, args.requests)
        loaded = _dump(process.pid, work, pid_prefix)
        request_seconds = time.monotonic() - started
        _control(process.pid, work, "-i", "off")
    finally:
        process.terminate()
        process.wait(120)
        log.close()
    return Counted(label, idle, idle_seconds, loaded, request_seconds, args.requests)


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
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (Debian package valgrind)")
    work = Path(tempfile.mkdtemp(prefix="flagproxy-prometheus-cost-"))
    upstream_port = free_port()
    upstream = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.load.upstream",
            "--flags",
            str(args.flags),
            "--port",
            str(upstream_port),
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_http(upstream_port, "/stats", 60)
        on = measure("series-on", upstream_port, args, work)
        off = measure("series-off", upstream_port, args, work, ENABLE_PROMETHEUS="false")
    finally:
        upstream.terminate()
        upstream.wait(30)
    print(f"{args.flags} flags, {args.requests} post-unique requests, one process (callgrind, {work})")
    print("| series | instructions a request | by the clock, a second (idle) |")
    print("|---|---:|---:|")
    for counted in (on, off):
        print(f"| {counted.label} | {counted.per_request:,.0f} | {counted.clock_rate:,.0f} |")
    print(f"series on / off, instructions a request: {on.per_request / off.per_request:.4f}")
    slowed = (on.request_seconds + off.request_seconds) / (2 * args.requests) * 1000
    per_flush = prometheus.FLUSH_SECONDS * args.dilation / (slowed / 1000)
    print(
        f"a request took {slowed:.1f} ms under callgrind, so a flush saw about {per_flush:,.0f} requests "
        f"(--dilation {args.dilation:g}; natively a worker at 4,000 req/s sees about 1,000)"
    )
    slowed = (on.request_seconds + off.request_seconds) / (2 * args.requests) * 1000
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
