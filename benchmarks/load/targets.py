"""Starting what a load run measures: the upstream, flagproxy, the fixed-body baseline and the Node proxy.

Every service is a real subprocess on 127.0.0.1 with a free port, its log in the run's directory and
TMPDIR pointing into that directory, so neither proxy becomes ready from a backup file an earlier run
left behind (both keep the last good payload in TMPDIR).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.load import baseline, node
from benchmarks.load.processes import Service, ServiceExited, fetch, free_port
from benchmarks.load.scenarios import CLIENT_KEY, SERVER_TOKEN, UPSTREAM_TOKEN, Scenario
from flagproxy.proxy.settings import OPTIONS

REPO = Path(__file__).resolve().parents[2]
_OPTION_VARIABLES = {name for o in OPTIONS for name in (*o.env, *o.aliases)} | {"NO_PROXY", "no_proxy"}
START_TIMEOUT = 60.0  # a 5000-flag snapshot takes a few seconds to compile in every worker


@dataclass
class Target:
    """Something wrk loads: a row label, its service and where each scenario is served."""

    name: str
    service: Service
    kind: str  # "sanic" (main process + workers) or "node" (one process)

    def path(self, scenario: Scenario) -> str:
        if self.name == "baseline":
            return baseline.route_path(scenario.name)
        return scenario.path


class RunDirectory:
    """Logs, TMPDIR, wrk scripts and the baseline's routes of one flag count."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tmp = root / "tmp"
        self.scripts = root / "scripts"
        for directory in (self.tmp, self.scripts):
            directory.mkdir(parents=True, exist_ok=True)

    def env(self, **extra: str) -> dict[str, str]:
        """The harness's environment without any proxy option (a caller's PORT, LOG_LEVEL or HTTP_PROXY
        would change what is measured), plus `extra`."""
        env = {k: v for k, v in os.environ.items() if k not in _OPTION_VARIABLES}
        env.update({"TMPDIR": str(self.tmp), "PYTHONPATH": str(REPO), **extra})
        return env

    def launch(
        self,
        name: str,
        build: Callable[[int], tuple[list[str], dict[str, str]]],
        wait: Callable[[Service], None],
        tree: Path = REPO,
    ) -> Service:
        """Start `build(port)` = (command, env) on a free port and `wait` for it; stopped again if that
        fails, and started on another port if the chosen one was taken in the meantime."""
        for attempt in range(3):
            port = free_port()
            command, env = build(port)
            service = Service.start(name, command, env, port, self.root, tree)
            try:
                wait(service)
                return service
            except ServiceExited as error:
                service.stop()
                if not error.port_taken or attempt == 2:
                    raise
            except BaseException:
                service.stop()
                raise
        raise AssertionError("unreachable")


def start_upstream(run: RunDirectory, flags: int) -> Service:
    def build(port: int) -> tuple[list[str], dict[str, str]]:
        module = "benchmarks.load.upstream"
        return [sys.executable, "-m", module, "--flags", str(flags), "--port", str(port)], run.env()

    return run.launch("upstream", build, lambda s: s.wait_until(lambda: _full_answers(s) >= 0, START_TIMEOUT))


def start_flagproxy(
    run: RunDirectory,
    upstream: Service,
    workers: int,
    name: str = "flagproxy",
    tree: Path = REPO,
    **options: str,
) -> Target:
    """`flagproxy proxy --workers N` from source tree `tree` (another checkout, built: a before/after
    comparison); `options` are more of its variables (ENABLE_PROMETHEUS=false)."""
    fetched_before = _full_answers(upstream)

    def build(port: int) -> tuple[list[str], dict[str, str]]:
        env = run.env(
            SERVICE_URL=f"http://127.0.0.1:{upstream.port}/api",
            SERVICE_API_TOKEN=UPSTREAM_TOKEN,
            SERVICE_PROXY_CLIENT_KEYS=CLIENT_KEY,
            EXP_SERVER_SIDE_SDK_CONFIG_TOKENS=SERVER_TOKEN,
            PORT=str(port),
            PROXY_HOST="127.0.0.1",
            PYTHONPATH=str(tree),
            **options,
        )
        return [sys.executable, "-m", "flagproxy", "proxy", "--workers", str(workers)], env

    # One sync per instance: one full fetch, whatever the number of workers.
    service = run.launch(name, build, lambda s: _wait_ready(s, upstream, fetched_before + 1), tree)
    return Target(name, service, "sanic")


def start_baseline(run: RunDirectory, routes: list[dict], workers: int) -> Target:
    routes_path = run.root / "baseline-routes.json"
    routes_path.write_text(json.dumps(routes))

    def build(port: int) -> tuple[list[str], dict[str, str]]:
        command = [
            sys.executable, "-m", "benchmarks.load.baseline",
            "--routes", str(routes_path), "--port", str(port), "--workers", str(workers),
        ]  # fmt: skip
        return command, run.env()

    def wait(service: Service) -> None:
        service.wait_until(
            lambda: fetch(service.port, "GET", baseline.HEALTH_PATH).status == 200, START_TIMEOUT
        )

    return Target("baseline", run.launch("baseline", build, wait), "sanic")


def start_node(run: RunDirectory, upstream: Service) -> Target:
    start_script = node.installed_start_script()
    fetched_before = _full_answers(upstream)

    def build(port: int) -> tuple[list[str], dict[str, str]]:
        env = run.env(
            UNLEASH_URL=f"http://127.0.0.1:{upstream.port}/api",
            UNLEASH_API_TOKEN=UPSTREAM_TOKEN,
            UNLEASH_PROXY_CLIENT_KEYS=CLIENT_KEY,
            EXP_SERVER_SIDE_SDK_CONFIG_TOKENS=SERVER_TOKEN,
            PORT=str(port),
        )
        return ["node", str(start_script)], env

    service = run.launch("node-proxy", build, lambda s: _wait_ready(s, upstream, fetched_before + 1))
    return Target("node", service, "node")


def _full_answers(upstream: Service) -> int:
    return json.loads(fetch(upstream.port, "GET", "/stats").body)["full_answers"]


def _wait_ready(service: Service, upstream: Service, full_answers: int) -> None:
    """Ready when the instance has fetched the snapshot, then /proxy/health is ok 20 times in a row: a
    worker answers 503 until it has compiled what the sync published, and accepts nothing while it
    compiles, so the streak waits for every worker."""
    service.wait_until(lambda: _full_answers(upstream) >= full_answers, START_TIMEOUT)

    def healthy() -> bool:
        return all(fetch(service.port, "GET", "/proxy/health").status == 200 for _ in range(20))

    service.wait_until(healthy, START_TIMEOUT)
