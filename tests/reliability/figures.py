"""What the campaign measured, gathered while its tests run and rendered as a table and as
docs/reliability.md.

Counts are taken where they happen, not declared: every answer a test reads through `http.client` is
counted by status (plugin.py), every upstream answer that was a fault by kind (the loopback upstream's
features and metrics handlers), hostile inputs by the family of the test that sent them, and the tests
themselves record usage counts sent and delivered, worker processes lost and RSS samples.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Figures:
    mode: str = "short"
    requests: int = 0  # answers read by test clients (http.client)
    statuses: Counter[int] = field(default_factory=Counter)
    unexpected_5xx: list[str] = field(default_factory=list)  # what a test did not expect, with its request
    # The documented 503 of a proxy (or an edge) that has not synchronised yet, and edge's for a new token
    # while its upstream cannot be asked about it.
    not_ready_503: int = 0
    not_covered_511: int = 0  # edge's documented 511: a frontend token no client token covers
    raw_inputs: Counter[str] = field(default_factory=Counter)  # raw-socket inputs by family
    hostile: Counter[str] = field(default_factory=Counter)  # hostile inputs by family
    faults: Counter[str] = field(default_factory=Counter)  # upstream answers that were faults, by kind
    processes_lost: int = 0  # workers or servers that died without being told to
    processes_watched: int = 0
    usage_sent: int = 0
    usage_delivered: int = 0
    usage_dropped: int = 0  # past the bucket's bound, and said so in a warning
    rss: dict[str, tuple[int, int]] = field(default_factory=dict)  # what → (before, after) in KiB
    notes: dict[str, str] = field(default_factory=dict)  # measured bounds and durations, by name
    tests: Counter[str] = field(default_factory=Counter)  # outcome → count
    failures: list[str] = field(default_factory=list)

    def hostile_input(self, family: str, count: int = 1) -> None:
        self.hostile[family] += count

    def usage(self, sent: int, delivered: int, dropped: int = 0) -> None:
        self.usage_sent += sent
        self.usage_delivered += delivered
        self.usage_dropped += dropped

    def watch(self, processes: int, lost: int) -> None:
        self.processes_watched += processes
        self.processes_lost += lost

    def rows(self) -> list[tuple[str, str]]:
        fivexx = sum(n for status, n in self.statuses.items() if status >= 500)
        rows = [
            ("tests passed / failed", f"{self.tests['passed']} / {self.tests['failed']}"),
            ("requests sent (HTTP answers read)", f"{self.requests:,}"),
            (
                "5xx seen",
                f"{fivexx:,} ({self.not_ready_503:,} the documented 503 before readiness or edge's for a "
                "token its upstream cannot be asked about, "
                f"{self.not_covered_511:,} edge's documented 511 for a token no client token covers)",
            ),
            ("5xx not expected", f"{len(self.unexpected_5xx)}"),
            ("faults injected (upstream answers)", f"{sum(self.faults.values()):,}"),
        ]
        rows += [(f"  fault: {kind}", f"{n:,}") for kind, n in sorted(self.faults.items())]
        rows.append(("hostile inputs sent", f"{sum(self.hostile.values()):,}"))
        rows += [(f"  {family}", f"{n:,}") for family, n in sorted(self.hostile.items())]
        rows += [
            ("processes lost", f"{self.processes_lost} of {self.processes_watched} watched"),
            (
                "usage counts sent / delivered / said dropped (past the bound)",
                f"{self.usage_sent:,} / {self.usage_delivered:,} / {self.usage_dropped:,}",
            ),
        ]
        for what, (before, after) in sorted(self.rss.items()):
            growth = (after - before) / before * 100 if before else 0.0
            rows.append((f"RSS {what}", f"{before / 1024:.1f} → {after / 1024:.1f} MiB ({growth:+.1f}%)"))
        rows += [(name, value) for name, value in sorted(self.notes.items())]
        return rows

    def table(self) -> str:
        rows = self.rows()
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)


FIGURES = Figures(mode=os.environ.get("FLAGPROXY_CAMPAIGN", "short"))


def rss_kib(pid: int) -> int:
    """Resident set size of a process, from /proc (what `ps -o rss` shows)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise ValueError(f"no VmRSS for {pid}")
