"""Counting the instructions a `flagproxy` process spends on requests, under valgrind's callgrind.

Instruction counts do not depend on what else the machine runs (the same binary, inputs and environment
give the same count), so they show differences of a fraction of a percent that req/s on a shared machine
cannot. The process is started with instrumentation off; counting is switched on (`callgrind_control`) for
two phases: `idle` seconds with no request (what runs by the clock: Prometheus flushes, the follower, the
sync), then the requests. Under valgrind a request takes some 25-50 times longer than natively, so the
clock's work would weigh that much more; the idle phase gives its rate, which is taken out of the request
phase, leaving the instructions a request costs. `LAUNCH` stretches the flush and hand-off intervals by
the same factor, so a flush folds about as many requests as natively. Needs valgrind (Debian package
`valgrind`, which has callgrind_control). Used by benchmarks/prometheus_cost.py and
benchmarks/instructions.py.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import glob
import http.client
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmarks.load.processes import fetch, free_port
from benchmarks.load.scenarios import Workload
from flagproxy.http import series
from flagproxy.sync.spool import HANDOFF_SECONDS

# `flagproxy <command>` with the intervals at which a process flushes its series and hands its usage on
# stretched by the first argument (see the module's docstring).
LAUNCH = """
import sys
from flagproxy.http import series
from flagproxy.instance import follower
from flagproxy.cli import main
dilation = float(sys.argv.pop(1))
series.FLUSH_SECONDS *= dilation
follower.HANDOFF_SECONDS *= dilation
sys.exit(main())
"""


REPO = Path(__file__).resolve().parent.parent


def check_tools() -> None:
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (Debian package valgrind)")


@contextlib.contextmanager
def loopback_upstream(flags: int) -> Iterator[int]:
    """benchmarks/load/upstream.py serving `flags` flags on a free port, for the length of the block."""
    port = free_port()
    upstream = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.load.upstream", "--flags", str(flags), "--port", str(port)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(port, "/stats", 60)
        yield port
    finally:
        upstream.terminate()
        upstream.wait(30)


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


def wait_http(port: int, path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if fetch(port, "GET", path).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"nothing answered 200 on port {port}{path} within {timeout:.0f} s")


def control(pid: int, work: Path, *args: str) -> None:
    # The process's TMPDIR is where valgrind put the pipes callgrind_control talks through.
    env = {**os.environ, "TMPDIR": str(work)}
    done = subprocess.run(["callgrind_control", *args, str(pid)], env=env, capture_output=True, text=True)
    if done.returncode != 0 or "OK" not in done.stdout:
        raise RuntimeError(f"callgrind_control {' '.join(args)} {pid}: {done.stdout}{done.stderr}")


def dump(pid: int, work: Path, prefix: str) -> int:
    """Ask for a dump (counters zeroed after it) and wait until callgrind has written it: its total."""
    before = len(glob.glob(prefix + ".*"))
    control(pid, work, "-d")
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


def count(
    label: str,
    command: list[str],
    env: Mapping[str, str],
    work: Path,
    *,
    port: int,
    health: str,
    workload: Workload,
    requests: int,
    idle: float,
    dilation: float,
    program: list[str] | None = None,
    path: str | None = None,
    connections: int = 1,
    cwd: Path | None = None,
) -> Counted:
    """Run `flagproxy <command>` under callgrind (`env`: its environment; TMPDIR is set to `work`),
    listening on `port`; once `health` answers 200, warm it with 100 requests of `workload`, wait for the
    one-off work they leave (a series file's first keys, at the next hand-off and flush: it would otherwise
    land in the idle phase and be taken out of every request), then count an idle phase of `idle` seconds
    and `requests` requests. `program` runs `python <program>` instead of flagproxy (the bare Sanic
    ceiling), and `path` sends the requests there instead of to the scenario's path. `cwd`: where the process
    runs; give the source tree measured, as `python -c` puts the working directory first on sys.path, ahead
    of PYTHONPATH (run from another checkout, that checkout's flagproxy would be the one counted)."""
    prefix = str(work / f"callgrind.{label}")
    python = program if program is not None else ["-c", LAUNCH, str(dilation), *command]
    full = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={prefix}.%p",
        sys.executable, *python,
    ]  # fmt: skip
    log = open(work / f"{label}.log", "wb")  # noqa: SIM115 (closed below, after the process)
    process = subprocess.Popen(
        full, env={**env, "TMPDIR": str(work)}, stdout=log, stderr=subprocess.STDOUT, cwd=cwd
    )
    try:
        wait_http(port, health, 300)
        send(port, workload, 0, 100, path)  # warm: code paths, caches, the allocator's arenas
        time.sleep((HANDOFF_SECONDS + series.FLUSH_SECONDS) * dilation + 1)
        pid_prefix = f"{prefix}.{process.pid}"
        control(process.pid, work, "-i", "on")
        started = time.monotonic()
        time.sleep(idle)
        idle_total = dump(process.pid, work, pid_prefix)
        idle_seconds = time.monotonic() - started
        started = time.monotonic()
        send(port, workload, 1_000_000, requests, path, connections)
        loaded = dump(process.pid, work, pid_prefix)
        request_seconds = time.monotonic() - started
        control(process.pid, work, "-i", "off")
    finally:
        process.terminate()
        process.wait(120)
        log.close()
    return Counted(label, idle_total, idle_seconds, loaded, request_seconds, requests)


def send(
    port: int, workload: Workload, first: int, n: int, path: str | None = None, connections: int = 1
) -> None:
    """Requests `first` to `first + n` of `workload` on one keep-alive connection (or `connections` at
    once, each from a thread of its own, as wrk's connections are: the server's loop then finds several
    requests ready at each turn): a unique userId each (`post-unique`), or its requests in turn; each must
    get the scenario's status. `path`: where to send them, when not the scenario's own path."""
    if connections > 1:
        share = [(first + k * n // connections, (k + 1) * n // connections - k * n // connections)
                 for k in range(connections)]  # fmt: skip
        with concurrent.futures.ThreadPoolExecutor(connections) as pool:
            for done in [pool.submit(send, port, workload, start, count, path) for start, count in share]:
                done.result()
        return
    scenario = workload.scenario
    target = scenario.path if path is None else path
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for i in range(first, first + n):
        request = workload.nth(i)
        connection.request(
            scenario.method, target + request.query, body=request.body, headers=workload.headers
        )
        response = connection.getresponse()
        response.read()
        if response.status != scenario.expected_status:
            raise RuntimeError(f"{scenario.method} {target} answered {response.status}")
    connection.close()
