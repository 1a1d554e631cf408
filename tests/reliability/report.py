"""docs/reliability.md's figures section, rewritten from the figures of the last `python -m tests.reliability`
run; the rest of the page is prose kept by hand."""

from __future__ import annotations

import datetime

from tests.reliability.figures import Figures


def markers(mode: str) -> tuple[str, str]:
    """The comments around the figures of one form ("short" or "long") in docs/reliability.md."""
    return (
        f"<!-- {mode} form figures: written by python -m tests.reliability -->",
        f"<!-- end of {mode} form -->",
    )


def render(figures: Figures, duration: float, command: str, revision: str) -> str:
    day = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    outcome = (
        "every test passed"
        if not figures.failures
        else "FAILED: " + ", ".join(f"`{nodeid}`" for nodeid in figures.failures)
    )
    rows = "\n".join(
        f"| {'· ' + name.strip() if name.startswith(' ') else name} | {value} |"
        for name, value in figures.rows()
    )
    unexpected = "".join(f"\n- {line}" for line in figures.unexpected_5xx[:20])
    return (
        f"`{command}` at {revision}, {day}, {duration / 60:.1f} minutes ({figures.mode} form): {outcome}.\n\n"
        f"| figure | value |\n|---|---:|\n{rows}\n"
        + (f"\nUnexpected 5xx:{unexpected}\n" if unexpected else "")
    )


def rewrite(page: str, mode: str, figures_section: str) -> str:
    """`page` with the text between the markers of `mode` replaced."""
    start, end = markers(mode)
    head, found, rest = page.partition(start)
    if not found or end not in rest:
        raise ValueError(f"docs/reliability.md lacks the markers {start!r} and {end!r}")
    return f"{head}{start}\n{figures_section}{end}{rest.partition(end)[2]}"
