"""One load run: for each flag count, start the services, probe, load every (scenario, target), stop.

Per flag count: the upstream serves the snapshot; flagproxy starts with N workers and is probed (which
gives each scenario's typical answer); the baseline starts serving those answers; the Node proxy starts
if asked. Then for each scenario the targets run one after the other (warm-up, then the measured wrk run),
so a proxy row and its baseline row are measured seconds apart. Before each target's runs the harness
waits until the services together are idle (under 0.1 of a core for a second, at most 60 s): the Node
proxy, still working through its backlog after its run or busy starting up, took a core from the next
target measured (at 5000 flags, flagproxy's `post-unique` went from 3,300 to 2,650 req/s behind it).
RSS is read after the scenarios. Every service is stopped in `finally`, whatever happened.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.load import wrk
from benchmarks.load.probe import Probe, baseline_route, probe
from benchmarks.load.processes import QUIET_TIMEOUT, Service, group_cpu_seconds, rss_mib, wait_until_quiet
from benchmarks.load.report import FlagRun, Row
from benchmarks.load.scenarios import Scenario
from benchmarks.load.targets import (
    RunDirectory,
    Target,
    start_baseline,
    start_flagproxy,
    start_node,
    start_upstream,
)


@dataclass(frozen=True)
class Options:
    flags: tuple[int, ...]
    scenarios: tuple[Scenario, ...]
    workers: int
    baseline_workers: int
    duration: int  # seconds (wrk takes whole seconds)
    warmup: int
    wrk: wrk.WrkOptions
    peer_node: bool
    memory_workers: tuple[int, ...] = ()  # instance RSS runs (benchmarks/load/memory.py)
    prometheus_off: bool = False  # also a flagproxy with ENABLE_PROMETHEUS=false: the series' cost


def run_flags(flags: int, options: Options, root: Path, log: Callable[[str], None]) -> FlagRun:
    run = RunDirectory(root / f"flags-{flags}")
    result = FlagRun(flags)
    services: list[Service] = []
    try:
        log(f"[{flags} flags] starting upstream and flagproxy ({options.workers} workers)")
        services.append(start_upstream(run, flags))
        proxy = start_flagproxy(run, services[0], options.workers)
        services.append(proxy.service)
        targets = [proxy]
        probes = {(proxy.name, s.name): probe(proxy, s, flags) for s in options.scenarios}
        if options.prometheus_off:
            log(f"[{flags} flags] starting flagproxy with ENABLE_PROMETHEUS=false")
            quiet = start_flagproxy(
                run, services[0], options.workers, "flagproxy-prometheus-off", ENABLE_PROMETHEUS="false"
            )
            services.append(quiet.service)
            targets.append(quiet)
            probes.update({(quiet.name, s.name): probe(quiet, s, flags) for s in options.scenarios})

        routes = [
            baseline_route(s, probes[(proxy.name, s.name)].typical)
            for s in options.scenarios
            if probes[(proxy.name, s.name)].typical is not None
        ]
        log(f"[{flags} flags] starting the baseline ({options.baseline_workers} workers)")
        base = start_baseline(run, routes, options.baseline_workers)
        services.append(base.service)
        targets.append(base)
        for s in options.scenarios:
            proxy_probe = probes[(proxy.name, s.name)]
            if proxy_probe.typical is not None:  # else there is no answer to copy, and no baseline row
                probes[(base.name, s.name)] = probe(base, s, flags, given=proxy_probe.workload)

        node_error = None
        if options.peer_node:
            log(f"[{flags} flags] starting the Node Unleash Proxy")
            try:
                node = start_node(run, services[0])
            except Exception as error:  # reported as that row's errors; the other rows still count
                node_error = f"node proxy did not start: {error}"
            else:
                services.append(node.service)
                targets.append(node)
                for s in options.scenarios:
                    probes[(node.name, s.name)] = probe(node, s, flags)

        def settle() -> None:
            waited = wait_until_quiet([service.process.pid for service in services])
            if waited is None:
                log(f"[{flags} flags] services still busy after {QUIET_TIMEOUT:.0f} s; measuring anyway")

        for scenario in options.scenarios:
            loaded = [t for t in targets if (t.name, scenario.name) in probes]
            rows = [
                measure(t, probes[t.name, scenario.name], flags, options, run, log, settle) for t in loaded
            ]
            if node_error is not None:
                rows.append(Row(flags, scenario.name, "node", errors=1, note=node_error))
            _set_ratios(rows)
            result.rows += rows
            if options.prometheus_off:
                pair = [t for t in loaded if t.name in ("flagproxy", "flagproxy-prometheus-off")]
                result.rows += measure_paired(pair, probes, scenario, flags, options, run, log, settle)
        for target in targets:
            result.rss_mib[target.name] = _rss(target)
    finally:
        for service in reversed(services):
            service.stop()
            result.stopped_cleanly[service.name] = service.stopped_cleanly
    return result


PAIRED_ROUND_SECONDS = 2


def measure_paired(
    pair: list[Target],
    probes: dict[tuple[str, str], Probe],
    scenario: Scenario,
    flags: int,
    options: Options,
    run: RunDirectory,
    log: Callable[[str], None],
    settle: Callable[[], None],
    label: str = "series on / off",
) -> list[Row]:
    """Two targets (the proxy with its series on and with them off; edge with N workers and with one),
    measured in short alternating rounds (on, off, off,
    on, on, off, ...; `--duration` seconds each in all): whatever else the shared machine does, and its drift
    over the run, weighs on both alike, so the ratio of their totals is what the series cost. Run one after
    the other they swung by tens of percent here; loaded at the same time, by the scheduler's favours."""
    settle()
    rounds = max(2, options.duration // PAIRED_ROUND_SECONDS)
    short = replace(options, duration=PAIRED_ROUND_SECONDS, warmup=0)
    quiet: Callable[[str], None] = lambda _message: None  # noqa: E731 - the rounds are logged as one
    for target in pair:  # each warmed once, as a measured row is
        if options.warmup > 0:
            warm = replace(short, duration=options.warmup)
            measure(target, probes[target.name, scenario.name], flags, warm, run, quiet)
    measured: dict[str, list[Row]] = {target.name: [] for target in pair}
    for number in range(rounds):
        order = pair if number % 4 in (0, 3) else list(reversed(pair))
        for target in order:
            measured[target.name].append(
                measure(target, probes[target.name, scenario.name], flags, short, run, quiet)
            )
    rows = [_sum_rounds(measured[target.name], f"{target.name} (paired)") for target in pair]
    for row, other in zip(rows, reversed(rows), strict=True):
        if row.requests_per_s and other.requests_per_s and not row.errors:
            row.paired_ratio = round(row.requests_per_s / other.requests_per_s, 3)
    cpu = [row.cpu_us_per_request for row in rows]
    # Each round number loads both, back to back: the median of those ratios is the estimate least moved
    # by one round that the scheduler or wrk's spread of connections over the workers favoured.
    first, second = (measured[target.name] for target in pair)
    per_round = sorted(
        a.requests_per_s / b.requests_per_s
        for a, b in zip(first, second, strict=True)
        if a.requests_per_s and b.requests_per_s
    )
    median = statistics.median(per_round) if per_round else None
    rows[0].paired_median = None if median is None else round(median, 3)
    log(
        f"[{flags} flags] {scenario.name} paired ({rounds} alternating rounds of {PAIRED_ROUND_SECONDS} s): "
        f"{label} = {rows[0].paired_ratio} in req/s (median of the rounds {rows[0].paired_median}, "
        f"rounds {', '.join(f'{r:.3f}' for r in per_round)}), CPU per request {cpu[0]} / {cpu[1]} µs"
    )
    return rows


def _sum_rounds(rounds: list[Row], target: str) -> Row:
    """One row for a target's rounds: requests over the time they took, CPU over the requests."""
    first = rounds[0]
    total = Row(first.flags, first.scenario, target, response_bytes=first.response_bytes)
    seconds = 0.0
    cpu_us = 0.0
    for row in rounds:
        total.requests += row.requests
        total.errors += row.errors
        for key, value in row.error_detail.items():
            total.error_detail[key] = total.error_detail.get(key, 0) + value
        for key, value in row.statuses.items():
            total.statuses[key] = total.statuses.get(key, 0) + value
        if row.requests_per_s:
            seconds += row.requests / row.requests_per_s
        cpu_us += (row.cpu_us_per_request or 0.0) * row.requests
        total.note = total.note or row.note
    if seconds and total.requests:
        total.requests_per_s = round(total.requests / seconds, 1)
        total.cpu_us_per_request = round(cpu_us / total.requests, 1)
    # p50/p99 of a sum of runs is not the p50/p99 of any run: left out rather than made up.
    return total


def measure(
    target: Target,
    probed: Probe,
    flags: int,
    options: Options,
    run: RunDirectory,
    log: Callable[[str], None],
    settle: Callable[[], None] = lambda: None,
) -> Row:
    scenario = probed.workload.scenario
    row = Row(flags, scenario.name, target.name)
    if probed.typical is not None:
        row.response_bytes = len(probed.typical.body)
    if probed.problems:
        row.errors = len(probed.problems)
        row.error_detail = {"probe": len(probed.problems)}
        row.note = probed.problems[0]
        log(f"[{flags} flags] {scenario.name} / {target.name}: probe failed: {row.note}")
        return row
    name = f"{scenario.name}-{target.name}"
    script = wrk.write_script(probed.workload, target.path(scenario), run.scripts, name)
    settle()  # the machine quiet first: nothing left over from the run before takes CPU from this one
    if options.warmup > 0:
        wrk.run(script, target.service.port, options.warmup, options.wrk)
    cpu_before = group_cpu_seconds(target.service.process.pid)
    out = wrk.run(script, target.service.port, options.duration, options.wrk)
    cpu_used = group_cpu_seconds(target.service.process.pid) - cpu_before
    if wrk.counts_statuses(probed.workload):
        statuses = out["statuses"]
    else:  # only wrk's count of statuses over 399 (benchmarks/load/wrk.py says why)
        failed = out["status_over_399"]
        statuses = {
            str(scenario.expected_status): out["requests"] - failed,
            **({"over 399": failed} if failed else {}),
        }
    unexpected = sum(n for code, n in statuses.items() if code != str(scenario.expected_status))
    row.error_detail = {**out["errors"], "unexpected status": unexpected}
    row.errors = sum(row.error_detail.values())
    row.statuses = statuses
    row.requests = out["requests"]
    row.requests_per_s = round(out["requests"] / (out["duration_us"] / 1e6), 1)
    if out["requests"]:
        row.cpu_us_per_request = round(cpu_used / out["requests"] * 1e6, 1)
        row.p50_ms = out["p50_us"] / 1000
        row.p99_ms = out["p99_us"] / 1000
    else:
        row.errors += 1
        row.note = "no request completed"
    if target.service.process.poll() is not None:
        row.errors += 1
        row.note = f"{target.name} exited with {target.service.process.returncode} during the run"
    log(
        f"[{flags} flags] {scenario.name} / {target.name}: {row.requests_per_s:,.0f} req/s, "
        f"p50 {row.p50_ms} ms, p99 {row.p99_ms} ms, errors {row.errors}"
    )
    return row


def _set_ratios(rows: list[Row]) -> None:
    # Errors are reported on their own; a ratio is still worth showing beside them.
    baseline = next((r for r in rows if r.target == "baseline" and r.requests_per_s), None)
    if baseline is None:
        return
    for row in rows:
        if row.requests_per_s and not row.note:
            row.ratio_to_baseline = round(row.requests_per_s / baseline.requests_per_s, 3)


def _rss(target: Target) -> dict[str, object]:
    if target.kind == "node":
        return {"main": None, "workers": [rss_mib(target.service.process.pid)]}
    return target.service.rss()


def stderr_log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
