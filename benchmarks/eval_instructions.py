"""Instructions of the compiled engine's whole-list evaluation alone, in-process, under callgrind.

    valgrind --tool=callgrind --toggle-collect='*evaluate_all_body*' \\
        python -m benchmarks.eval_instructions --flags 5000 --requests 200

Compiles `datasets.snapshot_payload(flags)`, evaluates 500 unique contexts first (the 64 browser-SDK
contexts' plans get built), then `--requests` more; with `--toggle-collect` callgrind counts only inside
`evaluate_all_body`, so its total over (500 + requests) is what one evaluation costs, without HTTP, the
event loop or the clock; the count at `--requests 1200` less the count at `--requests 200`, over 1000, is
what one costs once the plans are built (the 64 contexts' first two requests walk every flag).

Each context's appName and environment are replaced by "load" and "default" (the figures before
2026-11-26 evening were taken so); `--as-sent` keeps them, as the proxy does with a context that has them
(`post-unique` of the load benchmarks): more constraints hold, so more flags are left to walk (at 5000
flags about 1,650 a request instead of 1,080, and 1,870 MurmurHash3 hashes instead of 1,180). The count
is exact: it moves only when the engine's code does (issue 25's change 6 was measured so, before and
after, each tree's build on its PYTHONPATH).
"""

from __future__ import annotations

import argparse

import orjson

from benchmarks import datasets
from flagproxy.http.context import body_context
from flagproxy.snapshot import compile_snapshot

WARM = 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flags", type=int, default=5000, help="flags in the snapshot (5000)")
    parser.add_argument("--requests", type=int, default=200, help="evaluations after the warm ones (200)")
    parser.add_argument("--as-sent", action="store_true", help="keep each context's appName and environment")
    args = parser.parse_args()
    engine = compile_snapshot(datasets.snapshot_payload(args.flags)).engine
    bodies = [orjson.dumps({"context": {**c, "userId": "@@"}}) for c in datasets.contexts(64)]
    contexts = []
    for i in range(WARM + args.requests):
        context = body_context(orjson.loads(bodies[i % 64].replace(b"@@", f"t1-{i}".encode())))
        context["remoteAddress"] = "127.0.0.1"
        if not args.as_sent:
            context.update(environment="default", appName="load")
        contexts.append(context)
    for context in contexts:
        engine.evaluate_all_body(context, False)


if __name__ == "__main__":
    main()
