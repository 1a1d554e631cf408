"""`python -m benchmarks.load.per_cpu`: flagproxy against the Python ceiling, in requests per CPU-second.

    python -m benchmarks.load.per_cpu --flags 350,5000 --json per-cpu.json

Issue 25's measurement. For each flag count, in one run, one worker each, all alive at once on 127.0.0.1:

- `flagproxy proxy --workers 1` on the loopback upstream (benchmarks/load/upstream.py);
- the ceiling: a bare Sanic worker (benchmarks/load/baseline.py, `--workers 1`) answering the proxy's own
  typical answer of each scenario, same status, bytes and headers, with a new `HTTPResponse` per request;
- `flagproxy edge --workers 1` on the same upstream (at the `--edge-flags` counts), whose `/api/frontend`
  is paired with the proxy's `/proxy`.

Each pair (proxy / ceiling for every scenario; edge / proxy) is loaded in alternating rounds of
`--round-seconds` (A B, B A, B A, A B, ...; `--rounds` of each), by wrk with the same requests. Each round
reads the CPU time (utime + stime from /proc) of the target's whole process group before and after, so
each round gives requests per second and requests per CPU-second; the figure is the median of the rounds'
ratios (and their range), which cancels most of the shared machine's drift. Requests per CPU-second does
not depend on how much of the two cores the scheduler gave the server, only on what a request costs it,
so it is the figure to go by on a busy machine; req/s is printed beside it.

Then, for `post-unique`, the latency condition: the proxy and the ceiling are loaded at the same fixed
request rate (benchmarks/load/fixed_rate.py, an open-loop client: `--p99-rate`, or each `--p99-share` of
the proxy's requests per second in its rounds, by default a quarter and a half) in alternating runs
(`--p99-rounds` of `--p99-seconds` each, A B, B A, ...), and the p99 of each target's runs together is
reported with their ratio (issue 25: the proxy's within 1.5x of the ceiling's), beside the median and
range of the ratios of runs next to each other in time: a p99 is decided by its few slowest answers, so
one stall of the shared machine moves a single run's by far more than any difference between the targets.
`--p99-seconds 0` skips it. The client is a Python process that spends about as much CPU on a 245 kB
answer as the server does; taking turns with the server on the same core, it delays the slower target's
answers more than the faster's. So during these runs it has one CPU to itself (`--p99-client-cpu`, by
default the last) and every service the others, as a client on another machine would; `none` leaves
both to the scheduler.

Where the kernel's TCP congestion control is BBR (`net.ipv4.tcp_congestion_control`; the run logs it and
the report states it), it paces each loopback connection by an estimate of how fast the client reads, and
the fixed-rate client, which is Python, drives that estimate of some connections down to a few MB/s: their
answers then take 20-70 ms to arrive however fast the server made them (benchmarks/load/loopback.py).
`--loopback-cc reno` runs everything in a network namespace of its own whose loopback does not pace (root
and iproute2 needed; the machine's settings are left alone).

Scenarios (benchmarks/load/scenarios.py): `post-unique` (POST /proxy, a new userId per request: no cache
can help) and `get-empty` (GET /proxy with no context, answered from the response cache). After the rounds,
the RSS (VmRSS) of each serving process: with one worker the proxy, the edge and the ceiling are each one
process.

`--before TREE` also starts the proxy of another checkout (built: `pip install -e .` there, or the
compiled evaluator copied when _eval.pyx did not change) and pairs this tree's proxy with it, scenario by
scenario: a hot-path change's before and after, measured the same way; at the `--edge-flags` counts it
pairs this tree's edge with TREE's edge too. `--no-ceiling` leaves out the ceiling and the edge / proxy
pairs, so `--before TREE --no-ceiling` measures the two before/after pairs alone.

Exit status 1 when any request failed or got an unexpected status.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from benchmarks.load import fixed_rate, loopback, wrk
from benchmarks.load.edge import edge_scenario, start_edge
from benchmarks.load.probe import Probe, baseline_route, probe
from benchmarks.load.processes import QUIET_TIMEOUT, Service, pinned, wait_until_quiet
from benchmarks.load.report import Row
from benchmarks.load.runner import Options, measure, stderr_log
from benchmarks.load.scenarios import SCENARIOS_BY_NAME
from benchmarks.load.targets import RunDirectory, Target, start_baseline, start_flagproxy, start_upstream

SCENARIOS = ("post-unique", "get-empty")


@dataclass
class Pair:
    """Two targets loaded in alternating rounds: `first` over `second`."""

    flags: int
    scenario: str
    first: str
    second: str
    rounds: list[tuple[Row, Row]] = field(default_factory=list)

    def _ratios(self, per_cpu: bool) -> list[float]:
        found = []
        for a, b in self.rounds:
            if per_cpu and a.cpu_us_per_request and b.cpu_us_per_request:
                found.append(b.cpu_us_per_request / a.cpu_us_per_request)
            elif not per_cpu and a.requests_per_s and b.requests_per_s:
                found.append(a.requests_per_s / b.requests_per_s)
        return sorted(found)

    def summary(self) -> dict[str, object]:
        def total(index: int) -> tuple[float, float]:
            rows = [pair[index] for pair in self.rounds]
            requests = sum(r.requests for r in rows)
            seconds = sum(r.requests / r.requests_per_s for r in rows if r.requests_per_s)
            cpu = sum((r.cpu_us_per_request or 0) * r.requests for r in rows) / 1e6
            return (requests / seconds if seconds else 0.0), (requests / cpu if cpu else 0.0)

        (a_rps, a_cpu), (b_rps, b_cpu) = total(0), total(1)
        per_cpu, per_s = self._ratios(True), self._ratios(False)
        return {
            "flags": self.flags,
            "scenario": self.scenario,
            "first": self.first,
            "second": self.second,
            "first_req_per_s": round(a_rps),
            "second_req_per_s": round(b_rps),
            "first_req_per_cpu_s": round(a_cpu),
            "second_req_per_cpu_s": round(b_cpu),
            "per_cpu_median": round(statistics.median(per_cpu), 3) if per_cpu else None,
            "per_cpu_range": [round(per_cpu[0], 3), round(per_cpu[-1], 3)] if per_cpu else None,
            "per_s_median": round(statistics.median(per_s), 3) if per_s else None,
            "per_s_range": [round(per_s[0], 3), round(per_s[-1], 3)] if per_s else None,
            "errors": sum(a.errors + b.errors for a, b in self.rounds),
        }


def paired(
    targets: tuple[Target, Target],
    probes: tuple[Probe, Probe],
    flags: int,
    options: Options,
    rounds: int,
    run: RunDirectory,
    settle: object,
) -> Pair:
    """`rounds` rounds of each target, alternating (A B, B A, B A, A B, ...), each warmed once first."""
    first, second = targets
    pair = Pair(flags, probes[0].workload.scenario.name, first.name, second.name)
    quiet = lambda _message: None  # noqa: E731 - the pair is logged as one line
    settle()  # type: ignore[operator]
    if options.warmup:
        warm = replace(options, duration=options.warmup, warmup=0)
        for target, probed in zip(targets, probes, strict=True):
            measure(target, probed, flags, warm, run, quiet)
    short = replace(options, warmup=0)
    for number in range(rounds):
        order = (0, 1) if number % 4 in (0, 3) else (1, 0)
        measured: dict[int, Row] = {}
        for index in order:
            measured[index] = measure(targets[index], probes[index], flags, short, run, quiet)
        pair.rounds.append((measured[0], measured[1]))
    s = pair.summary()
    stderr_log(
        f"[{flags} flags] {pair.scenario}: {first.name} / {second.name} per CPU-second {s['per_cpu_median']} "
        f"(rounds {', '.join(f'{r:.3f}' for r in pair._ratios(True))}), per second {s['per_s_median']}; "
        f"{s['first_req_per_cpu_s']:,} / {s['second_req_per_cpu_s']:,} req per CPU-s, "
        f"{s['first_req_per_s']:,} / {s['second_req_per_s']:,} req/s, errors {s['errors']}"
    )
    return pair


@dataclass
class Tail:
    """The proxy's and the ceiling's latency at one fixed request rate (benchmarks/load/fixed_rate.py)."""

    flags: int
    scenario: str
    rate: float
    proxy: fixed_rate.Latencies
    ceiling: fixed_rate.Latencies

    def ms(self, p: float) -> tuple[float | None, float | None]:
        """The proxy's and the ceiling's p-th percentile, in ms."""
        return _ms(self.proxy.percentile(p)), _ms(self.ceiling.percentile(p))

    def ratio(self) -> float | None:
        mine, theirs = self.proxy.percentile(99), self.ceiling.percentile(99)
        return round(mine / theirs, 3) if mine and theirs else None

    def run_ratios(self) -> list[float]:
        """The p99 ratio of each pair of runs next to each other in time (run k of each), sorted: how much
        of the pooled ratio is the machine's drift."""
        pairs = zip(self.proxy.run_percentiles(99), self.ceiling.run_percentiles(99), strict=False)
        return sorted(round(mine / theirs, 3) for mine, theirs in pairs if mine and theirs)

    def failed(self) -> int:
        return self.proxy.failed + self.ceiling.failed

    def summary(self) -> dict[str, object]:
        return {
            "flags": self.flags,
            "scenario": self.scenario,
            "rate": round(self.rate),
            "requests": [len(self.proxy.seconds), len(self.ceiling.seconds)],
            "p50_ms": list(self.ms(50)),
            "p99_ms": list(self.ms(99)),
            "p99_ratio": self.ratio(),
            "p99_run_ratios": self.run_ratios(),
            "failed": self.failed(),
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def tail_at_fixed_rate(
    pair: Pair,
    targets: tuple[Target, Target],
    probes: tuple[Probe, Probe],
    args: argparse.Namespace,
    services: list[Service],
) -> list[Tail]:
    """The pair's two targets at each rate: `--p99-rate`, or each `--p99-share` of the first's requests per
    second in its rounds. With `--p99-client-cpu`, the client has that CPU to itself and every service the
    others, for the runs."""
    first_rps = sum(a.requests for a, _ in pair.rounds) / sum(
        a.requests / a.requests_per_s for a, _ in pair.rounds if a.requests_per_s
    )
    rates = [args.p99_rate] if args.p99_rate else [max(1.0, first_rps * share) for share in args.p99_share]
    loads = [
        (t.name, t.service.port, t.path(p.workload.scenario), p.workload)
        for t, p in zip(targets, probes, strict=True)
    ]
    client = {args.p99_client_cpu} if args.p99_client_cpu is not None else None
    rest = os.sched_getaffinity(0) - client if client else set()
    tails = []
    with pinned([s.process.pid for s in services], rest) if client else contextlib.nullcontext():
        for rate in rates:
            mine, theirs = fixed_rate.measure(loads, rate, args.p99_seconds, args.p99_rounds, cpus=client)
            tail = Tail(pair.flags, pair.scenario, rate, mine, theirs)
            (p50, p50_ceiling), (p99, p99_ceiling) = tail.ms(50), tail.ms(99)
            stderr_log(
                f"[{pair.flags} flags] {pair.scenario} at {rate:.0f} req/s: p99 {p99} / {p99_ceiling} ms "
                f"({pair.first} / {pair.second}), ratio {tail.ratio()} (runs {tail.run_ratios()}); "
                f"p50 {p50} / {p50_ceiling} ms, failed {tail.failed()}"
            )
            tails.append(tail)
    return tails


def run_flags(
    flags: int, args: argparse.Namespace, options: Options, root: Path
) -> tuple[list[Pair], list[Tail], dict]:
    run = RunDirectory(root / f"flags-{flags}")
    services: list[Service] = []
    pairs: list[Pair] = []
    tails: list[Tail] = []
    rss: dict[str, float | None] = {}
    try:
        stderr_log(f"[{flags} flags] starting upstream, flagproxy proxy --workers 1")
        upstream = start_upstream(run, flags)
        services.append(upstream)
        proxy = start_flagproxy(run, upstream, 1)
        services.append(proxy.service)
        before = None
        if args.before is not None:
            before = start_flagproxy(run, upstream, 1, "before", args.before)
            services.append(before.service)
        scenarios = [SCENARIOS_BY_NAME[name] for name in args.scenarios]
        proxy_probes = {s.name: probe(proxy, s, flags) for s in scenarios}
        routes = [
            baseline_route(s, proxy_probes[s.name].typical) for s in scenarios if proxy_probes[s.name].typical
        ]
        ceiling = start_baseline(run, routes, 1)
        services.append(ceiling.service)
        edge = None
        if flags in args.edge_flags:
            edge = start_edge(run, upstream, "edge", 1)
            services.append(edge.service)
        edge_before = None
        if edge is not None and args.before is not None:
            edge_before = start_edge(run, upstream, "edge-before", 1, tree=args.before)
            services.append(edge_before.service)

        def settle() -> None:
            if wait_until_quiet([service.process.pid for service in services]) is None:
                stderr_log(f"services still busy after {QUIET_TIMEOUT:.0f} s; measuring anyway")

        for s in scenarios:
            mine = proxy_probes[s.name]
            if before is not None:
                earlier = probe(before, s, flags)
                pairs.append(
                    paired((proxy, before), (mine, earlier), flags, options, args.rounds, run, settle)
                )
            if not args.no_ceiling:
                theirs = probe(ceiling, s, flags, given=mine.workload)
                pairs.append(
                    paired((proxy, ceiling), (mine, theirs), flags, options, args.rounds, run, settle)
                )
                if s.name == "post-unique" and args.p99_seconds > 0:
                    settle()
                    tails += tail_at_fixed_rate(pairs[-1], (proxy, ceiling), (mine, theirs), args, services)
        if edge is not None:
            for s in scenarios:
                on_edge = edge_scenario(s.name)
                edge_probe = probe(edge, on_edge, flags)
                if edge_before is not None:
                    earlier = probe(edge_before, on_edge, flags)
                    pairs.append(
                        paired(
                            (edge, edge_before),
                            (edge_probe, earlier),
                            flags,
                            options,
                            args.rounds,
                            run,
                            settle,
                        )
                    )
                if args.no_ceiling and edge_before is not None:
                    continue  # a before/after run: edge / proxy is not asked for
                pairs.append(
                    paired(
                        (edge, proxy),
                        (edge_probe, proxy_probes[s.name]),
                        flags,
                        options,
                        args.rounds,
                        run,
                        settle,
                    )
                )
        for target in (proxy, ceiling, edge, before, edge_before):
            if target is not None:
                rss[target.name] = target.service.rss()["main"]
    finally:
        for service in reversed(services):
            service.stop()
    return pairs, tails, rss


def markdown(pairs: list[Pair], tails: list[Tail], rss: dict[int, dict[str, float | None]]) -> str:
    lines = [
        "| flags | scenario | A / B | A req/CPU-s | B req/CPU-s | per CPU-s: median (range) "
        "| A req/s | B req/s | per s: median (range) | errors |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for pair in pairs:
        s = pair.summary()
        cpu_range = s["per_cpu_range"] or ["-", "-"]
        s_range = s["per_s_range"] or ["-", "-"]
        lines.append(
            f"| {s['flags']} | {s['scenario']} | {s['first']} / {s['second']} | {s['first_req_per_cpu_s']:,} "
            f"| {s['second_req_per_cpu_s']:,} | **{s['per_cpu_median']}x** ({cpu_range[0]}-{cpu_range[1]}) "
            f"| {s['first_req_per_s']:,} | {s['second_req_per_s']:,} | {s['per_s_median']}x "
            f"({s_range[0]}-{s_range[1]}) | {s['errors']} |"
        )
    if tails:
        lines += [
            "",
            "| flags | scenario | fixed rate req/s | requests (proxy, ceiling) | p50 ms | p99 ms "
            "| p99 ratio | run by run: median (range) | failed |",
            "|---:|---|---:|---|---|---|---:|---:|---:|",
        ]
        for tail in tails:
            (p50, p50_ceiling), (p99, p99_ceiling) = tail.ms(50), tail.ms(99)
            runs = tail.run_ratios()
            by_run = f"{round(statistics.median(runs), 3)}x ({runs[0]}-{runs[-1]})" if runs else "-"
            lines.append(
                f"| {tail.flags} | {tail.scenario} | {tail.rate:,.0f} "
                f"| {len(tail.proxy.seconds):,}, {len(tail.ceiling.seconds):,} | {p50} / {p50_ceiling} "
                f"| {p99} / {p99_ceiling} | **{tail.ratio()}x** | {by_run} | {tail.failed()} |"
            )
    lines += ["", "| flags | serving process | RSS MiB |", "|---:|---|---:|"]
    for flags, found in rss.items():
        for name, mib in found.items():
            lines.append(f"| {flags} | {name} | {mib} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.load.per_cpu",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--flags", default="350,5000", help="snapshot sizes, comma-separated (350,5000)")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"comma-separated ({','.join(SCENARIOS)})"
    )
    parser.add_argument(
        "--edge-flags",
        default="350",
        help="flag counts at which edge is paired with the proxy (350; '' none)",
    )
    parser.add_argument(
        "--before",
        type=Path,
        metavar="TREE",
        help="also pair this tree's proxy and edge with those of TREE (a built checkout from before)",
    )
    parser.add_argument(
        "--no-ceiling",
        action="store_true",
        help="leave out the proxy / ceiling pairs (and edge / proxy, with --before)",
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each target (5)")
    parser.add_argument("--round-seconds", type=int, default=4, help="seconds of each round (4)")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of wrk on each target first (2)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (2)")
    parser.add_argument("--connections", type=int, default=50, help="wrk connections (50)")
    parser.add_argument(
        "--p99-rate",
        type=float,
        default=0.0,
        help="requests a second of the fixed-rate latency runs (default: half the proxy's req/s)",
    )
    parser.add_argument(
        "--p99-share",
        default="0.25,0.5",
        help="the fixed rates as shares of the proxy's req/s in its rounds, comma-separated (0.25,0.5)",
    )
    parser.add_argument(
        "--p99-seconds", type=float, default=5.0, help="seconds of each fixed-rate run (5; 0: none)"
    )
    parser.add_argument(
        "--p99-rounds",
        type=int,
        default=6,
        help="fixed-rate runs of each target at each rate, alternating A B, B A, ... (6)",
    )
    parser.add_argument(
        "--p99-client-cpu",
        default="last",
        help="the CPU the fixed-rate client has to itself, every service the others: a number, `last` "
        "(the default, on a machine of 2 CPUs or more) or `none` (no pinning)",
    )
    parser.add_argument(
        "--loopback-cc",
        metavar="NAME",
        help="run everything in a network namespace of its own whose loopback uses this TCP congestion "
        "control (e.g. reno; needs root and iproute2): the machine's BBR paces loopback connections by a "
        "bandwidth estimate a slow client drives down (benchmarks/load/loopback.py). Default: the machine's",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory")
    parser.add_argument(
        "--smoke", action="store_true", help="50 flags, 2 rounds of 1 s, fixed-rate runs of 1 s: CI's check"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.flags, args.edge_flags, args.rounds, args.round_seconds, args.warmup = "50", "50", 2, 1, 0
        args.p99_seconds, args.p99_rounds = min(args.p99_seconds, 1.0), 2
    try:
        flags = [int(f) for f in args.flags.split(",") if f.strip()]
        args.edge_flags = {int(f) for f in args.edge_flags.split(",") if f.strip()}
    except ValueError:
        parser.error("--flags and --edge-flags are comma-separated numbers")
    try:
        args.p99_share = [float(f) for f in args.p99_share.split(",") if f.strip()]
    except ValueError:
        parser.error("--p99-share is comma-separated numbers, e.g. 0.25,0.5")
    if not args.p99_share or not all(0 < share <= 1 for share in args.p99_share):
        parser.error("--p99-share: each share between 0 and 1")
    available = sorted(os.sched_getaffinity(0))
    if args.p99_client_cpu == "none" or (args.p99_client_cpu == "last" and len(available) < 2):
        args.p99_client_cpu = None
    elif args.p99_client_cpu == "last":
        args.p99_client_cpu = available[-1]
    elif not args.p99_client_cpu.isdigit() or int(args.p99_client_cpu) not in available or len(available) < 2:
        parser.error(f"--p99-client-cpu: one of {available} with another left to the services, last or none")
    else:
        args.p99_client_cpu = int(args.p99_client_cpu)
    args.scenarios = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in args.scenarios if n not in SCENARIOS_BY_NAME]
    if unknown or not args.scenarios:
        parser.error(f"--scenarios: unknown {', '.join(unknown) or '(none given)'}")
    if not flags or min(*flags, args.rounds, args.round_seconds, args.threads, args.p99_rounds) < 1:
        parser.error("--flags, --rounds, --round-seconds, --threads and --p99-rounds must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be at least 0")
    if args.connections < args.threads:
        parser.error("--connections must be at least --threads")
    if not wrk.available():
        parser.error("wrk is not installed (apt-get install wrk)")
    if args.loopback_cc:
        try:
            loopback.private_loopback(args.loopback_cc)
        except loopback.LoopbackError as error:
            parser.error(f"--loopback-cc: {error}")
    congestion = loopback.congestion_control()
    stderr_log(
        f"loopback TCP congestion control: {congestion}"
        + (" (a private namespace)" if args.loopback_cc else "")
    )
    if loopback.paces_loopback(congestion) and args.p99_seconds > 0:
        stderr_log(
            f"{congestion} paces each loopback connection by its estimate of the client's reading speed: the "
            "fixed-rate p99 then measures that estimate more than the servers (--loopback-cc reno avoids it)"
        )
    options = Options(
        flags=tuple(flags),
        scenarios=(),
        workers=1,
        baseline_workers=1,
        duration=args.round_seconds,
        warmup=args.warmup,
        wrk=wrk.WrkOptions(args.threads, args.connections, 10),
        peer_node=False,
    )
    root = Path(tempfile.mkdtemp(prefix="flagproxy-per-cpu-"))
    pairs: list[Pair] = []
    tails: list[Tail] = []
    rss: dict[int, dict[str, float | None]] = {}
    for count in flags:
        found, tailed, rss[count] = run_flags(count, args, options, root / str(count))
        pairs += found
        tails += tailed
    print(markdown(pairs, tails, rss))
    print(
        f"\nLoopback TCP congestion control: {congestion}"
        + (" (a private network namespace)" if args.loopback_cc else " (the machine's)")
    )
    if args.json:
        document = {
            "loopback_congestion_control": congestion,
            "pairs": [
                {**p.summary(), "rounds": [[asdict(a), asdict(b)] for a, b in p.rounds]} for p in pairs
            ],
            "fixed_rate": [t.summary() for t in tails],
            "rss_mib": rss,
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    failed = any(p.summary()["errors"] for p in pairs) or any(t.failed() for t in tails)
    if failed or args.keep:
        stderr_log(f"run directory kept: {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
