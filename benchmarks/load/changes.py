"""`python -m benchmarks.load.changes`: what upstream changes cost the requests answered meanwhile.

For each worker count (default 1 and 2), at 5000 flags (default): `flagproxy proxy` against the loopback
upstream (benchmarks/load/upstream.py), polling it every 0.5 s. wrk loads `POST /proxy` with a unique
userId per request (the `post-unique` scenario: no response cache) for `--duration` seconds while the
document stays the same, then for as long while the upstream changes it every `--change-every` seconds
(one flag flips: a new body and ETag, so the instance fetches, compiles and swaps a new snapshot each
time). Rounds alternate the two and the p99 of each is taken; the table gives both, their ratio (changing /
steady, the figure to keep under 1.5) and how many revisions the instance served during the changing runs.

A stall of the serving loop during a compile shows in the p99 (at 5000 flags a compile on the loop held
every answer for about half a second at each change); wrk's closed loop under-reports long stalls (its
connections wait instead of sending), so this is a floor of what clients see, not a ceiling.

    python -m benchmarks.load.changes [--flags 5000] [--workers 1,2] [--duration 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks.load import wrk
from benchmarks.load.probe import probe
from benchmarks.load.processes import Service, fetch, wait_until_quiet
from benchmarks.load.runner import stderr_log
from benchmarks.load.scenarios import CLIENT_KEY, SCENARIOS_BY_NAME
from benchmarks.load.targets import RunDirectory, Target, start_flagproxy, start_upstream

SCENARIO = SCENARIOS_BY_NAME["post-unique"]
POLL_MS = "500"  # the proxy's refresh interval: several polls per change


def _change_every(upstream: Service, seconds: float) -> None:
    answer = fetch(upstream.port, "POST", "/change-every", body=str(seconds).encode())
    assert answer.status == 204, answer


def _stats(upstream: Service) -> dict[str, int]:
    return json.loads(fetch(upstream.port, "GET", "/stats").body)


def _revision(proxy: Target) -> int:
    answer = fetch(proxy.service.port, "GET", "/proxy/status.json", headers={"Authorization": CLIENT_KEY})
    return int(json.loads(answer.body)["revision"])


def _p99(script: Path, proxy: Target, seconds: int, options: wrk.WrkOptions) -> tuple[float, int, int]:
    """(p99 ms, requests, failed requests) of one wrk run."""
    out = wrk.run(script, proxy.service.port, seconds, options)
    failed = out["status_over_399"] + sum(out["errors"].values())
    return out["p99_us"] / 1000, out["requests"], failed


def measure(workers: int, args: argparse.Namespace, root: Path) -> dict[str, object]:
    run = RunDirectory(root / f"workers-{workers}")
    services: list[Service] = []
    options = wrk.WrkOptions(threads=args.threads, connections=args.connections)
    try:
        stderr_log(f"[{workers} worker(s)] starting upstream and flagproxy at {args.flags} flags")
        upstream = start_upstream(run, args.flags)
        services.append(upstream)
        proxy = start_flagproxy(run, upstream, workers, SERVICE_FETCH_INTERVAL=POLL_MS)
        services.append(proxy.service)
        probed = probe(proxy, SCENARIO, args.flags)
        assert not probed.problems, probed.problems
        script = wrk.write_script(probed.workload, proxy.path(SCENARIO), run.scripts, f"changes-{workers}")
        wrk.run(script, proxy.service.port, args.warmup, options)
        steady: list[float] = []
        changing: list[float] = []
        requests = failed = revisions = changes = 0
        for number in range(args.rounds):
            for moving in (False, True):
                wait_until_quiet([s.process.pid for s in services])
                if moving:
                    revision, changed = _revision(proxy), _stats(upstream)["changes"]
                    _change_every(upstream, args.change_every)
                p99, answered, bad = _p99(script, proxy, args.duration, options)
                served = ""
                if moving:
                    _change_every(upstream, 0)
                    revisions += (swapped := _revision(proxy) - revision)
                    changes += (made := _stats(upstream)["changes"] - changed)
                    served = f", {swapped} of {made} changes served"
                (changing if moving else steady).append(p99)
                requests += answered
                failed += bad
                stderr_log(
                    f"[{workers} worker(s)] round {number + 1}, {'changing' if moving else 'steady'}: "
                    f"p99 {p99:.1f} ms over {answered} requests{served}"
                )
        steady_p99, changing_p99 = statistics.median(steady), statistics.median(changing)
        return {
            "workers": workers,
            "flags": args.flags,
            "steady_p99_ms": round(steady_p99, 2),
            "changing_p99_ms": round(changing_p99, 2),
            "ratio": round(changing_p99 / steady_p99, 3),
            "upstream_changes": changes,
            "revisions_served": revisions,
            "requests": requests,
            "failed": failed,
        }
    finally:
        for service in reversed(services):
            service.stop()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load.changes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--flags", type=int, default=5000)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2)")
    parser.add_argument("--duration", type=int, default=20, help="seconds of each measured wrk run (20)")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of wrk before the rounds (3)")
    parser.add_argument("--rounds", type=int, default=2, help="steady/changing pairs; the median p99 (2)")
    parser.add_argument("--change-every", type=float, default=2.0, help="seconds between changes (2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args()
    if not wrk.available():
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="flagproxy-changes-") as root:
        for workers in (int(w) for w in args.workers.split(",")):
            rows.append(measure(workers, args, Path(root)))
    print("| workers | flags | p99 steady (ms) | p99 changing (ms) | ratio | changes | revisions | failed |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['workers']} | {r['flags']} | {r['steady_p99_ms']} | {r['changing_p99_ms']} | {r['ratio']} "
            f"| {r['upstream_changes']} | {r['revisions_served']} | {r['failed']} |"
        )
    return 1 if any(r["failed"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
