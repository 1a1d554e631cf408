"""Usage counts (Unleash client metrics) sent upstream: aggregated per proxy instance and sent every interval.

What is counted follows the Node proxy: named-toggle lookups (`POST /proxy` with `toggles`) count yes/no
per requested name, unknown names included; buckets that frontend SDKs POST to /proxy/client/metrics are
merged in, variants included. Plain list evaluations (GET /proxy) are not counted. A bucket is sent only
when it holds something; when the upstream fails it is merged back and sent with the next one. Workers
count in their own process (flagproxy/sync/usage.py) and hand their counts over through the spool
(flagproxy/sync/spool.py); `gather` adds them to the bucket right before each send.
"""

from __future__ import annotations

import asyncio
import platform
import random
from collections.abc import Callable
from typing import Any

from flagproxy.disk import disk_writer
from flagproxy.sync.upstream import CLIENT_SPEC_VERSION, classify_status
from flagproxy.sync.usage import MAX_TOGGLES, MAX_VARIANTS, UsageCollector, UsageCounts, iso_now

__all__ = ["UsageCollector", "UsageCounts", "UsageSender"]

MAX_FAILURES = 10


class UsageSender:
    def __init__(
        self,
        collector: UsageCollector,
        client: Any,
        *,
        app_name: str,
        instance_id: str,
        connection_id: str,
        interval_ms: int,
        jitter_ms: int,
        logger: Any,
        gather: Callable[[UsageCollector], Any] | None = None,
        on_sent: Callable[[bool], None] | None = None,
    ) -> None:
        self.collector = collector
        self.gather = gather  # adds other processes' counts to the collector before each send
        self.on_sent = on_sent  # told whether each batch was taken (Prometheus)
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
        if self.gather is not None:
            # It reads and deletes the workers' hand-off files: on the writer thread, after the hand-offs
            # this process queued (flagproxy/disk.py: a serving loop never waits on the disk).
            await disk_writer().run(self.gather, self.collector)
        counts = self.collector.take()
        if counts is None:
            return True
        if counts.dropped:
            self.logger.warn(
                f"{counts.dropped} usage counts did not fit this metrics bucket ({MAX_TOGGLES} toggle names, "
                f"{MAX_VARIANTS} variants each) and were not sent"
            )
            counts.dropped = 0  # said once; a bucket that is kept for the next try does not say it again
        status = await self.client.send_usage(self.payload(counts))
        taken = isinstance(status, int) and 200 <= status < 300
        if self.on_sent is not None:
            self.on_sent(taken)
        if taken:
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
