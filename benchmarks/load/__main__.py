"""`python -m benchmarks.load`: the command line. See benchmarks/README.md ("Load") for what it measures."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.load import memory, node, report, wrk
from benchmarks.load.runner import Options, run_flags, stderr_log
from benchmarks.load.scenarios import SCENARIOS, SCENARIOS_BY_NAME

SMOKE = {"flags": "50", "duration": 1, "warmup": 0, "memory_workers": "2"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.load",
        description="Load flagproxy, a fixed-body Sanic baseline and optionally the Node Unleash Proxy with "
        "wrk on loopback; print a table (req/s, p50, p99, errors, ratio to the baseline) and RSS per worker. "
        "Exits 1 if any request failed or got an unexpected status.",
    )
    add = parser.add_argument
    add("--flags", help="snapshot sizes, comma-separated, e.g. 200,5000 (default 200; --smoke: 50)")
    add("--workers", type=int, default=2, help="flagproxy worker processes (default 2)")
    add("--baseline-workers", type=int, default=2, help="baseline worker processes (default 2)")
    add("--threads", type=int, default=2, help="wrk threads (default 2)")
    add("--connections", type=int, default=50, help="wrk connections (default 50)")
    # wrk takes whole seconds only.
    add("--duration", type=int, help="seconds of each measured wrk run (default 10; --smoke: 1)")
    add("--warmup", type=int, help="seconds of wrk before each measured run (default 2; --smoke: 0)")
    add("--timeout", type=int, default=10, help="seconds before wrk counts a request as timed out (10)")
    add(
        "--scenarios",
        default=",".join(s.name for s in SCENARIOS),
        help="comma-separated, from: " + ", ".join(s.name for s in SCENARIOS),
    )
    add(
        "--memory-workers",
        help="worker counts whose whole-instance RSS is measured after the filling scenarios, e.g. 1,2,4 "
        "(default 1,2,4; --smoke: 2; 0 skips it)",
    )
    add("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    add("--peer-node", action="store_true", help=f"also load @unleash/proxy@{node.VERSION} (installed once)")
    add(
        "--prometheus-off",
        action="store_true",
        help="also load a flagproxy with ENABLE_PROMETHEUS=false, in the same run: what the series cost",
    )
    add("--smoke", action="store_true", help="a few seconds a scenario, 50 flags: CI's check that it runs")
    add("--keep", action="store_true", help="keep the run's directory (logs, wrk scripts) even on success")
    return parser


def parse_options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Options:
    defaults: dict[str, Any] = {"flags": "200", "duration": 10, "warmup": 2, "memory_workers": "1,2,4"}
    if args.smoke:
        defaults.update(SMOKE)
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    try:
        flags = tuple(int(f) for f in args.flags.split(",") if f.strip())
    except ValueError:
        parser.error(f"--flags: {args.flags!r} is not a comma-separated list of numbers")
    try:
        memory_workers = tuple(int(n) for n in args.memory_workers.split(",") if n.strip() and int(n))
    except ValueError:
        parser.error(f"--memory-workers: {args.memory_workers!r} is not a comma-separated list of numbers")
    if any(n < 0 for n in memory_workers):
        parser.error("--memory-workers: worker counts must be positive")
    names = list(dict.fromkeys(n.strip() for n in args.scenarios.split(",") if n.strip()))  # no repeats
    unknown = [n for n in names if n not in SCENARIOS_BY_NAME]
    if unknown or not names:
        parser.error(f"--scenarios: unknown {', '.join(unknown) or '(none given)'}")
    counts = (*flags, args.workers, args.baseline_workers, args.duration, args.timeout)
    if not flags or min(counts) < 1:
        parser.error("--flags, --workers, --baseline-workers, --duration and --timeout must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must not be negative")
    if args.connections < args.threads:
        parser.error("--connections must be at least --threads")
    return Options(
        flags=flags,
        scenarios=tuple(SCENARIOS_BY_NAME[n] for n in names),
        workers=args.workers,
        baseline_workers=args.baseline_workers,
        duration=args.duration,
        warmup=args.warmup,
        wrk=wrk.WrkOptions(args.threads, args.connections, args.timeout),
        peer_node=args.peer_node,
        memory_workers=memory_workers,
        prometheus_off=args.prometheus_off,
    )


def machine(options: Options) -> dict[str, Any]:
    import sanic

    import flagproxy.evaluator

    wrk_version = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split(" [")[0]
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "sanic": sanic.__version__,
        "evaluator": flagproxy.evaluator.IMPLEMENTATION,
        "wrk": wrk_version.strip(),
        "node": node.node_version() if options.peer_node else None,
        "settings": {
            "flags": list(options.flags),
            "scenarios": [s.name for s in options.scenarios],
            "workers": options.workers,
            "baseline_workers": options.baseline_workers,
            "wrk_threads": options.wrk.threads,
            "wrk_connections": options.wrk.connections,
            "wrk_timeout_s": options.wrk.timeout,
            "duration_s": options.duration,
            "warmup_s": options.warmup,
            "memory_workers": list(options.memory_workers),
            "prometheus_off": options.prometheus_off,
        },
    }


def _interrupt_on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # so the runner's `finally` stops every service


def main(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    options = parse_options(args, parser)
    if not wrk.available():
        print("benchmarks.load: wrk is not installed (apt-get install -y wrk)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt_on_sigterm)
    meta = machine(options)
    root = Path(tempfile.mkdtemp(prefix="flagproxy-load-"))
    stderr_log(f"load average {meta['load_average_before']} on {meta['cpus']} CPUs; logs in {root}")
    runs: list[report.FlagRun] = []
    memory_rows: list[memory.InstanceMemory] = []
    try:
        for flags in options.flags:
            runs.append(run_flags(flags, options, root, stderr_log))
        for flags in options.flags:
            for workers in options.memory_workers:
                memory_rows.append(memory.measure_memory(flags, workers, options, root, stderr_log))
    except KeyboardInterrupt:
        stderr_log("interrupted; every service was stopped")
        return 130
    except Exception:
        stderr_log(f"load run failed; logs kept in {root}")
        raise
    meta["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(report.markdown(runs))
    if memory_rows:
        print("\n" + memory.markdown(memory_rows))
    if args.json:
        report.write_json(args.json, meta, runs, memory_rows)
    trouble = report.problems(runs) + [
        f"{row.flags} flags, {row.workers} workers (memory run): {row.errors} failed requests"
        for row in memory_rows
        if row.errors
    ]
    for line in trouble:
        stderr_log(f"PROBLEM: {line}")
    failed = report.failed(runs) or any(row.errors for row in memory_rows)
    if failed or args.keep:
        stderr_log(f"logs and wrk scripts kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
