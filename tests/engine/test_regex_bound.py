"""A REGEX constraint cannot hold a worker: the Rust crate Unleash's engines use matches in linear time,
Python's `regex` module backtracks, so a search is bounded (flagproxy/compiler/values.py REGEX_TIMEOUT) and
one that runs past it counts as no match. Run in a child process with a hard limit, so that a regression
fails here instead of hanging the test run."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import json, sys, time
    from flagproxy.snapshot import compile_snapshot
    implementation = sys.argv[1]
    def flag(name, inverted):
        constraint = {"contextName": "userId", "operator": "REGEX", "value": "^(a|a)*$", "inverted": inverted}
        strategy = {"name": "default", "constraints": [constraint]}
        return {"name": name, "enabled": True, "strategies": [strategy]}
    snapshot = compile_snapshot(
        {"version": 2, "features": [flag("catastrophic", False), flag("inverted", True)]},
        implementation=implementation,
    )
    assert snapshot.is_enabled("catastrophic", {"userId": "aaaa"})  # an ordinary match still matches
    started = time.monotonic()
    evil = {"userId": "a" * 40 + "!"}  # 2^40 backtracking steps without a bound
    answers = (snapshot.is_enabled("catastrophic", evil), snapshot.is_enabled("inverted", evil))
    body, _ = snapshot.evaluate_all_body(evil)
    print(json.dumps({"answers": answers, "inverted_listed": b"inverted" in body}))
    """
)


def test_a_catastrophic_pattern_on_a_crafted_value_gives_up_as_no_match(implementation: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, implementation], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    # No match within the bound: the constraint is false, so its inverted twin is true.
    assert shown == {"answers": [False, True], "inverted_listed": True}, done.stdout
