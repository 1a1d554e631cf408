"""`python -m benchmarks.memory_report`: what a proxy worker's memory is made of, step by step, in-process.

Imports what a worker imports, then installs the same `datasets.snapshot_payload(flags)` a few times the
way a worker's follower does (parse the published bytes, install, drop the payload), and prints VmRSS
after each step and the Python objects still alive (tracemalloc is off: it would change what it measures,
so live objects are counted by `sys.getallocatedblocks`). Compare with the RSS rows of `benchmarks.load`,
which add the response cache, the plans and Sanic's buffers under load.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

import orjson


def rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory_report", description=__doc__)
    parser.add_argument("--flags", type=int, default=5000)
    parser.add_argument("--installs", type=int, default=4)
    args = parser.parse_args(argv)
    rows = [("interpreter", rss_mib(), sys.getallocatedblocks())]
    import flagproxy.proxy.app  # noqa: F401 - what a worker imports
    from benchmarks.datasets import snapshot_payload
    from flagproxy.proxy.store import SnapshotStore

    rows.append(("worker imports", rss_mib(), sys.getallocatedblocks()))
    if "aiohttp" in sys.modules:
        print("note: aiohttp is imported by the worker's modules", file=sys.stderr)
    document = orjson.dumps(snapshot_payload(args.flags))
    gc.collect()
    rows.append((f"published document ({len(document) / 1e6:.1f} MB)", rss_mib(), sys.getallocatedblocks()))
    store = SnapshotStore()
    for number in range(1, args.installs + 1):
        payload = orjson.loads(document)
        store.install(payload, "upstream")
        del payload
        gc.collect()
        rows.append((f"after install {number}", rss_mib(), sys.getallocatedblocks()))
    print(f"| step ({args.flags} flags) | RSS MiB | Python blocks allocated |")
    print("|---|---:|---:|")
    for step, rss, blocks in rows:
        print(f"| {step} | {rss:.1f} | {blocks:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
