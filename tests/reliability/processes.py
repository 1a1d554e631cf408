"""What the campaign watches in a running process: its workers (children) and their memory."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> set[int]:
    """The live child processes of `pid` (Sanic's workers under its main process), from /proc."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found |= {int(child) for child in (task / "children").read_text().split()}
        except OSError:
            continue
    return {child for child in found if _alive(child)}


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] not in "ZX"
    except (OSError, IndexError):
        return False
