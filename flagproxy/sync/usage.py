"""Usage counts as the Unleash client metrics format has them: what a worker counts on its hot path.

Kept apart from the sender (flagproxy/sync/usage_sender.py) so a worker process, which only counts, never
imports the HTTP client.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any


def iso_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Bounds on one bucket. Callers name toggles (unknown names are counted too, as the Node proxy does) and
# frontend SDKs post buckets of their own, so without a bound a stream of made-up names would grow a
# worker's memory, and the sync's while the upstream refuses metrics (a failed bucket is kept and merged
# into the next). At these bounds a bucket holds at most about 10,000 x (100 variants) entries, a few MB
# in the worst case; what does not fit is dropped and counted in `dropped`.
MAX_TOGGLES = 10_000
MAX_VARIANTS = 100


class UsageCounts:
    """Counts since the last flush: name → [yes, no, {variant: count}]."""

    def __init__(self) -> None:
        self.start = iso_now()
        self.toggles: dict[str, list[Any]] = {}
        self.dropped = 0  # counts that did not fit (MAX_TOGGLES, MAX_VARIANTS)

    def _entry(self, name: str) -> list[Any] | None:
        entry = self.toggles.get(name)
        if entry is None:
            if len(self.toggles) >= MAX_TOGGLES:
                return None
            entry = self.toggles[name] = [0, 0, {}]
        return entry

    def count(self, name: str, enabled: bool) -> None:
        entry = self._entry(name)
        if entry is None:
            self.dropped += 1
            return
        entry[0 if enabled else 1] += 1

    def count_outcomes(self, outcomes: Iterable[tuple[str, bool, str]]) -> None:
        for name, enabled, _variant in outcomes:
            self.count(name, enabled)

    def merge(self, toggles: Mapping[str, Mapping[str, Any]]) -> None:
        """Add a client bucket's `toggles` (already validated: yes/no/variant counts are ints >= 0)."""
        for name, counts in toggles.items():
            entry = self._entry(name)
            if entry is None:
                self.dropped += counts.get("yes", 0) + counts.get("no", 0)
                continue
            entry[0] += counts.get("yes", 0)
            entry[1] += counts.get("no", 0)
            variants = entry[2]
            for variant, n in (counts.get("variants") or {}).items():
                if variant in variants or len(variants) < MAX_VARIANTS:
                    variants[variant] = variants.get(variant, 0) + n
                else:
                    self.dropped += n

    def as_toggles(self) -> dict[str, dict[str, Any]]:
        return {name: {"yes": y, "no": n, "variants": dict(v)} for name, (y, n, v) in self.toggles.items()}

    def __bool__(self) -> bool:
        return bool(self.toggles)


class UsageCollector:
    """The current bucket; `take()` hands it over and starts a new one, `give_back()` undoes that."""

    def __init__(self) -> None:
        self.counts = UsageCounts()

    def take(self) -> UsageCounts | None:
        if not self.counts:
            return None
        taken, self.counts = self.counts, UsageCounts()
        return taken

    def give_back(self, taken: UsageCounts) -> None:
        current = self.counts
        taken.merge(current.as_toggles())
        taken.dropped += current.dropped
        self.counts = taken
