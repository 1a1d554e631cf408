"""`python -m tests.reliability [--long] [--no-doc] [pytest options]`: run the campaign, print its figures,
rewrite docs/reliability.md with them. Exits with pytest's status."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# The campaign: this folder, and main's tests of the same points, which it counts rather than repeats.
MAIN_TESTS = [
    "tests/http/test_upstream_faults.py",
    "tests/http/test_fuzz.py",
    "tests/http/test_bad_input.py",
    "tests/http/test_no_internals.py",
    "tests/http/test_secrets_in_logs.py",
    "tests/engine/test_regex_bound.py",
    "tests/http/test_workers.py::test_a_stop_signal_to_the_process_group_under_load_finishes_every_answer",
    "tests/http/test_workers.py::test_usage_counts_arrive_once_across_a_killed_worker_and_the_stop",
    "tests/server/test_process_group_stop.py",
]


def key_timing(figures: Any) -> None:
    """The key check's time for a key wrong in its first, middle or last byte, or right (a measurement
    from benchmarks/key_timing.py, not an assertion: speed is for benchmarks to show)."""
    from benchmarks.key_timing import measure

    kinds = measure(rounds=200, calls=2000)["KeyRing.accepts"]
    base = kinds["first byte wrong"]
    figures.notes["key check time vs a first-byte miss"] = (
        ", ".join(f"{kind} {ns / base:.3f}" for kind, ns in kinds.items() if kind != "first byte wrong")
        + f" ({base:.0f} ns a check)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability", description=__doc__)
    parser.add_argument("--long", action="store_true", help="the hour-long soak and minutes-long outages")
    parser.add_argument("--no-doc", action="store_true", help="print the figures, leave docs/ alone")
    options, pytest_args = parser.parse_known_args(argv)
    # Read by scale.py and figures.py at import: set before pytest imports them.
    os.environ["FLAGPROXY_CAMPAIGN"] = "long" if options.long else "short"
    os.chdir(REPO)

    import pytest

    from tests.reliability import plugin, report
    from tests.reliability.figures import FIGURES

    # The commit the run starts from (with "+" when the tree differs from it).
    revision = subprocess.run(
        ["git", "describe", "--always", "--dirty=+"], capture_output=True, text=True, cwd=REPO
    ).stdout.strip()
    started = time.monotonic()
    status = pytest.main(
        ["-q", "-p", "no:cacheprovider", "tests/reliability", *MAIN_TESTS, *pytest_args], plugins=[plugin]
    )
    key_timing(FIGURES)
    duration = time.monotonic() - started
    print("\n== reliability campaign (" + FIGURES.mode + f", {duration / 60:.1f} min)")
    print(FIGURES.table())
    if not options.no_doc:
        command = "python -m tests.reliability" + (" --long" if options.long else "")
        page = REPO / "docs" / "reliability.md"
        figures = report.render(FIGURES, duration, command, revision)
        page.write_text(report.rewrite(page.read_text(), FIGURES.mode, figures))
        print("docs/reliability.md rewritten")
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
