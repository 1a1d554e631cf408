"""Run the engine benchmarks and print a table of per-request and per-flag times with ratios.

    python -m benchmarks.engine_report [--json results.json] [extra pytest args]

Ratios are within one run: compiled vs pure at each size, and compiled vs yggdrasil-engine per flag.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tempfile


def main(argv: list[str]) -> int:
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
