"""Usage metrics in the Unleash client format, aggregated per proxy process and sent every interval.

What is counted follows the Node proxy: named-toggle lookups (`POST /proxy` with `toggles`) count yes/no
per requested name, unknown names included; buckets that frontend SDKs POST to /proxy/client/metrics are
merged in, variants included. Plain list evaluations (GET /proxy) are not counted. A bucket is sent only
when it holds something; when the upstream fails it is merged back and sent with the next one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import platform
import random
from collections.abc import Iterable, Mapping
from typing import Any

from flagproxy.sync.upstream import CLIENT_SPEC_VERSION, classify_status

MAX_FAILURES = 10


def iso_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class UsageCounts:
    """Counts since the last flush: name → [yes, no, {variant: count}]."""

    def __init__(self) -> None:
        self.start = iso_now()
        self.toggles: dict[str, list[Any]] = {}

    def _entry(self, name: str) -> list[Any]:
        entry = self.toggles.get(name)
        if entry is None:
            entry = self.toggles[name] = [0, 0, {}]
        return entry

    def count(self, name: str, enabled: bool) -> None:
        self._entry(name)[0 if enabled else 1] += 1

    def count_outcomes(self, outcomes: Iterable[tuple[str, bool, str]]) -> None:
        for name, enabled, _variant in outcomes:
            self.count(name, enabled)

    def merge(self, toggles: Mapping[str, Mapping[str, Any]]) -> None:
        """Add a client bucket's `toggles` (already validated: yes/no/variant counts are ints >= 0)."""
        for name, counts in toggles.items():
            entry = self._entry(name)
            entry[0] += counts.get("yes", 0)
            entry[1] += counts.get("no", 0)
            for variant, n in (counts.get("variants") or {}).items():
                entry[2][variant] = entry[2].get(variant, 0) + n

    def as_toggles(self) -> dict[str, dict[str, Any]]:
        return {name: {"yes": y, "no": n, "variants": dict(v)} for name, (y, n, v) in self.toggles.items()}

    def __bool__(self) -> bool:
        return bool(self.toggles)


class MetricsCollector:
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
        self.counts = taken


class MetricsSender:
    def __init__(
        self,
        collector: MetricsCollector,
        client: Any,
        *,
        app_name: str,
        instance_id: str,
        connection_id: str,
        interval_ms: int,
        jitter_ms: int,
        logger: Any,
    ) -> None:
        self.collector = collector
        self.client = client
        self.app_name = app_name
        self.instance_id = instance_id
        self.connection_id = connection_id
        self.interval_ms = interval_ms
        self.jitter_ms = jitter_ms
        self.logger = logger
        self.failures = 0
        self.sent = 0

    def payload(self, counts: UsageCounts) -> dict[str, Any]:
        return {
            "appName": self.app_name,
            "instanceId": self.instance_id,
            "connectionId": self.connection_id,
            "bucket": {"start": counts.start, "stop": iso_now(), "toggles": counts.as_toggles()},
            "platformName": platform.python_implementation().lower(),
            "platformVersion": platform.python_version(),
            "yggdrasilVersion": None,
            "specVersion": CLIENT_SPEC_VERSION,
        }

    def next_delay_ms(self) -> float:
        jitter = random.uniform(-self.jitter_ms, self.jitter_ms) if self.jitter_ms else 0
        return max(0.0, self.interval_ms * (1 + self.failures) + jitter)

    async def flush(self) -> bool:
        """Send what has been counted; True if there was nothing to send or the upstream took it."""
        counts = self.collector.take()
        if counts is None:
            return True
        status = await self.client.send_metrics(self.payload(counts))
        if isinstance(status, int) and 200 <= status < 300:
            self.failures = max(0, self.failures - 1)
            self.sent += 1
            return True
        self.collector.give_back(counts)
        if isinstance(status, int) and classify_status(status) == "auth":
            self.logger.error(f"Upstream answered {status} to usage metrics: the API token may not send them")
        elif isinstance(status, int) and classify_status(status) == "other":
            self.logger.error(f"Upstream answered {status} to usage metrics; keeping them for the next try")
        else:
            self.logger.warn(f"Sending usage metrics failed ({status}); keeping them for the next try")
        self.failures = min(MAX_FAILURES, self.failures + 1)
        return False

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.next_delay_ms() / 1000)
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # never let a bug end metrics for good
                self.logger.error(f"Sending usage metrics failed unexpectedly: {exc!r}")
