"""The memory of a whole flagproxy instance, for several worker counts: `--memory-workers 1,2,4`.

For each flag count and each N: the upstream, then `flagproxy proxy --workers N`, loaded with wrk through
the scenarios that fill what a worker keeps (`post-unique`, `post-rotating`, `get-query`: the response cache
and the plans), then the RSS (VmRSS) of every process of the instance: the main process (which runs the
sync when N > 1, and everything when N = 1), Sanic's manager process and multiprocessing's resource tracker
("other"), and each worker. A separate pass from the throughput table, so its numbers are after the same
load for every N.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.load import wrk
from benchmarks.load.probe import probe
from benchmarks.load.processes import Service, children, is_sanic_worker, rss_mib
from benchmarks.load.runner import Options
from benchmarks.load.scenarios import SCENARIOS_BY_NAME
from benchmarks.load.targets import RunDirectory, start_flagproxy, start_upstream

FILLING_SCENARIOS = ("post-unique", "post-rotating", "get-query")


@dataclass
class InstanceMemory:
    flags: int
    workers: int
    main_mib: float | None = None
    other_mib: list[float] = field(default_factory=list)  # Sanic's manager, the resource tracker
    worker_mib: list[float] = field(default_factory=list)
    errors: int = 0

    @property
    def total_mib(self) -> float:
        return round((self.main_mib or 0) + sum(self.other_mib) + sum(self.worker_mib), 1)


def instance_rss(service: Service) -> tuple[float | None, list[float], list[float]]:
    """(main, other processes, workers) in MiB; with one process the main process is the worker."""
    main = rss_mib(service.process.pid)
    workers, others = [], []
    for pid in children(service.process.pid):
        rss = rss_mib(pid)
        if rss is not None:
            (workers if is_sanic_worker(pid) else others).append(rss)
    return main, others, workers


def measure_memory(
    flags: int, workers: int, options: Options, root: Path, log: Callable[[str], None]
) -> InstanceMemory:
    run = RunDirectory(root / f"memory-{flags}-{workers}")
    result = InstanceMemory(flags, workers)
    services: list[Service] = []
    try:
        services.append(start_upstream(run, flags))
        proxy = start_flagproxy(run, services[0], workers)
        services.append(proxy.service)
        for name in FILLING_SCENARIOS:
            probed = probe(proxy, SCENARIOS_BY_NAME[name], flags)
            if probed.problems:
                result.errors += len(probed.problems)
                continue
            script = wrk.write_script(
                probed.workload, proxy.path(probed.workload.scenario), run.scripts, name
            )
            out = wrk.run(script, proxy.service.port, options.warmup + options.duration, options.wrk)
            result.errors += out["status_over_399"] + sum(out["errors"].values())
        result.main_mib, result.other_mib, result.worker_mib = instance_rss(proxy.service)
        log(
            f"[{flags} flags, {workers} workers] RSS: main {result.main_mib} MiB, other {result.other_mib}, "
            f"workers {result.worker_mib}, total {result.total_mib} MiB"
        )
    finally:
        for service in reversed(services):
            service.stop()
    return result


def markdown(rows: list[InstanceMemory]) -> str:
    lines = [
        "| flags | workers | main MiB | other MiB | each worker MiB | instance MiB |",
        "|---:|---:|---:|---|---|---:|",
    ]
    for row in rows:
        main = f"{row.main_mib:.1f}" if row.main_mib is not None else "-"
        other = " + ".join(f"{m:.1f}" for m in row.other_mib) or "-"
        each = ", ".join(f"{m:.1f}" for m in row.worker_mib) or "(the main process)"
        lines.append(f"| {row.flags} | {row.workers} | {main} | {other} | {each} | {row.total_mib:.1f} |")
    return "\n".join(lines)
