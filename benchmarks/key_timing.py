"""`python -m benchmarks.key_timing`: does a client key check take longer the more of the key is right?

A timing attack guesses a key byte by byte, keeping the guess that takes longest to refuse. This times
`KeyRing.accepts` (flagproxy/proxy/auth.py, every check of the proxy's client and server-side keys) for
wrong keys that differ from a real one in the first byte, in the middle, in the last byte, and for the right
key, in interleaved rounds (so drift of the machine hits every kind alike), and prints the median time per
check of each kind and its ratio to the first-byte miss. Equal ratios (within noise, about ±2 %) mean the
time says nothing about how much of a key was right. A naive `==` is timed beside it for comparison.

`Gate.fast` is edge's token lookup (flagproxy/edge/access.py): the header as it arrived, looked up in a
dict of the headers that passed (a miss goes on to the SHA-256 digest's dict), for a frontend token of the
same length, a new string each call as each request's header is. Its right key is the hit that answers
the request, so only its three misses are to be equal.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace

from flagproxy.edge.access import Gate
from flagproxy.edge.tokens import FRONTEND, parse_pretrusted, token_key
from flagproxy.edge.validation import TokenValidator
from flagproxy.proxy.auth import KeyRing

KEY = "proxy-client-key-" + "k" * 47  # 64 bytes, a realistic random-looking key's length
TOKEN = "*:development." + "t" * 50  # an edge frontend token of the same length


def _variants(key: str = KEY) -> dict[str, str]:
    def change(index: int) -> str:
        return key[:index] + ("x" if key[index] != "x" else "y") + key[index + 1 :]

    return {
        "first byte wrong": change(0),
        "middle byte wrong": change(len(key) // 2),
        "last byte wrong": change(len(key) - 1),
        "right key": key,
    }


def _gate_lookup() -> Callable[[str], object]:
    """Edge's hot-path lookup with TOKEN passed (what a full check leaves behind), as a route calls it."""
    token = parse_pretrusted(TOKEN)  # known to the validator without an upstream
    gate = Gate(SimpleNamespace(validator=TokenValidator(None, None, trusted=[token])))
    gate.passed[(token_key(TOKEN), FRONTEND)] = "served"  # type: ignore[assignment]
    fast = gate.fast_for(FRONTEND)
    assert fast(TOKEN) == "served" and fast(_variants(TOKEN)["last byte wrong"]) is None

    def lookup(value: str) -> object:
        return fast(value.encode().decode())  # a new str: its hash is computed, as a request's header's is

    return lookup


def _time_per_check(check: object, value: str, calls: int) -> float:
    started = time.perf_counter_ns()
    for _ in range(calls):
        check(value)  # type: ignore[operator]
    return (time.perf_counter_ns() - started) / calls


def measure(rounds: int, calls: int) -> dict[str, dict[str, float]]:
    ring = KeyRing([KEY, "another-configured-key-" + "z" * 41])

    def naive(value: str) -> bool:
        return value == KEY

    results: dict[str, dict[str, float]] = {}
    checks = (
        ("KeyRing.accepts", ring.accepts, KEY),
        ("naive ==", naive, KEY),
        ("Gate.fast", _gate_lookup(), TOKEN),
    )
    for name, check, key in checks:
        samples: dict[str, list[float]] = {kind: [] for kind in _variants(key)}
        for _ in range(rounds):
            for kind, value in _variants(key).items():
                samples[kind].append(_time_per_check(check, value, calls))
        results[name] = {kind: statistics.median(values) for kind, values in samples.items()}
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.key_timing", description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    results = measure(args.rounds, args.calls)
    print("| check | key presented | ns per check (median) | vs first byte wrong |")
    print("|---|---|---:|---:|")
    for name, kinds in results.items():
        base = kinds["first byte wrong"]
        for kind, ns in kinds.items():
            print(f"| {name} | {kind} | {ns:.1f} | {ns / base:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
