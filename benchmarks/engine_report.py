"""Run the engine benchmarks and print a table of per-request and per-flag times with ratios.

    python -m benchmarks.engine_report [--json results.json] [extra pytest args]
    python -m benchmarks.engine_report --instructions    # CPU instructions per request, under valgrind
                                                         # (64 rotating contexts, and a new userId each)

Ratios are within one run: compiled vs pure at each size, and compiled vs yggdrasil-engine per flag.

Wall time depends on whatever else runs on the machine; instruction counts (valgrind's callgrind) do not, so
they are the figure to compare across runs on a shared machine. Each size runs the same driver twice, with
one and with three counted rounds over the 64 contexts after a warm-up round; the difference divided by 128
is the steady-state cost of one evaluate-all request, warm-up and start-up excluded. It does so for the 64
contexts as they are, and with a userId no other request has in each (the load benchmark's post-unique).
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

SIZES = [50, 200, 1000, 5000]
_DRIVER = """
import sys
from benchmarks.datasets import contexts, snapshot_payload
from flagproxy.snapshot import compile_snapshot
flags, rounds, unique = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "unique"
evaluate = compile_snapshot(snapshot_payload(flags), implementation="compiled").evaluate_all_body
batch = contexts(64)
rounds_of = [[dict(c, userId=f"u{r}-{i}") for i, c in enumerate(batch)] for r in range(1 + rounds)]
for requests in rounds_of if unique else [batch] * (1 + rounds):
    for context in requests:
        evaluate(context)
"""


def _instructions_collected(flags: int, rounds: int, users: str) -> int:
    """Instructions executed inside evaluate_all_body over the warm-up and `rounds` rounds; `users` is
    "rotating" (the 64 contexts as they are) or "unique" (each with a userId no other request has)."""
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/callgrind.out",
                "--collect-atstart=no",
                "--toggle-collect=*evaluate_all_body*",
                sys.executable,
                "-c",
                _DRIVER,
                str(flags),
                str(rounds),
                users,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    found = re.search(r"Collected : (\d+)", result.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{result.stderr}")
    return int(found.group(1))


def instructions() -> int:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 1
    print("| flags | instructions/request, 64 rotating contexts | per flag | a new userId each | per flag |")
    print("|---:|---:|---:|---:|---:|")
    for flags in SIZES:
        cells = [f"{flags}"]
        for users in ("rotating", "unique"):
            counted = _instructions_collected(flags, 3, users) - _instructions_collected(flags, 1, users)
            cells += [f"{counted / 128:,.0f}", f"{counted / 128 / flags:,.0f}"]
        print("| " + " | ".join(cells) + " |", flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--instructions"]:
        return instructions()
    out = pathlib.Path(tempfile.mkdtemp()) / "engine.json"
    if "--json" in argv:
        i = argv.index("--json")
        out = pathlib.Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "benchmarks/test_engine.py",
        "-p",
        "no:cacheprovider",
        f"--benchmark-json={out}",
        "--benchmark-disable-gc",
        *argv,
    ]
    code = subprocess.call(command)
    if code != 0:
        return code
    rows = json.loads(out.read_text())["benchmarks"]
    timing: dict[tuple[str, str, int], float] = {}
    for row in rows:
        info = row["extra_info"]
        timing[(info["kind"], info["implementation"], info["flags"])] = row["stats"]["median"]
    print(
        "\n| flags | compiled µs/request | pure µs/request | compiled vs pure | compiled ns/flag "
        "| yggdrasil-engine ns/flag | compiled vs yggdrasil (per flag) | compile ms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for flags in sorted({k[2] for k in timing}):
        compiled = timing.get(("evaluate_all", "compiled", flags))
        pure = timing.get(("evaluate_all", "pure", flags))
        ygg = timing.get(("evaluate_all", "yggdrasil-engine", flags))
        build = timing.get(("compile", "compiled", flags))
        if compiled is None:
            continue
        cells = [
            f"{flags}",
            f"{compiled * 1e6:.1f}",
            f"{pure * 1e6:.1f}" if pure else "-",
            f"{pure / compiled:.1f}x" if pure else "-",
            f"{compiled * 1e9 / flags:.0f}",
            f"{ygg * 1e9 / flags:.0f}" if ygg else "-",
            f"{ygg / compiled:.0f}x" if ygg else "-",
            f"{build * 1e3:.0f}" if build else "-",
        ]
        print("| " + " | ".join(cells) + " |")
    print(f"\nraw results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
